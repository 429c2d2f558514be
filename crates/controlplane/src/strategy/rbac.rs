//! rbac.authorization.k8s.io/v1: Roles and ClusterRoles, RoleBindings and
//! ClusterRoleBindings. Enforcing them is [`crate::auth::rbac`]'s.

use serde_json::Value;

use crate::error::FieldError;
use crate::meta::NameRule;
use crate::resource::{Part, ResourceStrategy, Validation, WriteCheck};
use crate::table::{CellSource, PrinterColumn};

/// Roles and ClusterRoles: any path segment as a name (`system:...`), and no rule granted
/// that its author does not hold.
#[derive(Debug)]
pub struct Roles;

impl ResourceStrategy for Roles {
    fn allows_create_on_update(&self) -> bool {
        true
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn::created_at()]
    }

    fn write_check(&self, part: Part) -> Option<WriteCheck> {
        (part == Part::Main).then_some(WriteCheck::Escalation)
    }
}

/// RoleBindings and ClusterRoleBindings: a roleRef required and fixed once set, and no role
/// bound that its author does not hold.
#[derive(Debug)]
pub struct Bindings;

impl ResourceStrategy for Bindings {
    fn allows_create_on_update(&self) -> bool {
        true
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn::computed("Role", CellSource::RoleRef)]
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if let Some(old) = check.old
            && old.get("roleRef") != obj.get("roleRef")
        {
            check.errors.push(FieldError::invalid(
                "roleRef",
                obj.get("roleRef").unwrap_or(&Value::Null),
                "cannot change roleRef",
            ));
        }
        if obj.get("roleRef").is_none_or(Value::is_null) {
            check.errors.push(FieldError::required("roleRef", ""));
        }
    }

    fn write_check(&self, part: Part) -> Option<WriteCheck> {
        (part == Part::Main).then_some(WriteCheck::Escalation)
    }
}
