//! apiextensions.k8s.io/v1: CustomResourceDefinitions, and the resources they define.

use serde_json::{Value, json};

use super::{ResourceStrategy, Validation};
use crate::error::FieldError;
use crate::meta::{ObjectMeta, meta_mut};
use crate::objects::Part;
use crate::registry::{CrdError, PrinterColumn, ResourceInfo, resources_from_crd};

/// The finalizer that keeps a CRD until its objects are gone.
pub const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// CustomResourceDefinitions: valid definitions named `<plural>.<group>`, their status set as
/// the apiextensions controllers set it once names are accepted, kept until their objects are
/// gone, and served as soon as they are written.
#[derive(Debug)]
pub struct CustomResourceDefinitions;

impl ResourceStrategy for CustomResourceDefinitions {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn::created_at()]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, now: &str) {
        crd_status(obj, now);
        let finalizers = meta_mut(obj).entry("finalizers").or_insert(json!([]));
        if let Some(a) = finalizers.as_array_mut()
            && !a.iter().any(|f| f == CRD_CLEANUP)
        {
            a.push(json!(CRD_CLEANUP));
        }
    }

    /// A spec update recomputes the accepted names and stored versions; conditions stay.
    fn prepare_for_update(&self, cur: &Value, next: &mut Value, part: Part) {
        if part != Part::Main {
            return;
        }
        let created = cur
            .meta_str("creationTimestamp")
            .unwrap_or_default()
            .to_string();
        let status = cur.get("status").cloned();
        crd_status(next, &created);
        if let (Some(old), Some(o)) = (status, next.as_object_mut())
            && let Some(conds) = old.get("conditions")
            && let Some(Value::Object(s)) = o.get_mut("status")
        {
            s.insert("conditions".into(), conds.clone());
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        let errs = &mut check.errors;
        match resources_from_crd(obj) {
            Err(CrdError::Field { field, message }) => {
                errs.push(FieldError {
                    reason: "FieldValueInvalid",
                    message: format!("{field}: {message}"),
                    field,
                });
            }
            Ok(_) => {
                let group = obj
                    .pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let plural = obj
                    .pointer("/spec/names/plural")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let name = obj.name();
                if name != format!("{plural}.{group}") {
                    errs.push(FieldError::invalid(
                        "metadata.name",
                        &json!(name),
                        "must be spec.names.plural+\".\"+spec.group",
                    ));
                }
            }
        }
    }

    fn defines_resources(&self) -> bool {
        true
    }
}

/// Sets a CRD's status as the apiextensions controllers would once its names are accepted.
fn crd_status(obj: &mut Value, now: &str) {
    let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut accepted = names.clone();
    if let Some(a) = accepted.as_object_mut() {
        let kind = a
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        a.entry("singular").or_insert(json!(kind.to_lowercase()));
        a.entry("listKind").or_insert(json!(format!("{kind}List")));
    }
    let storage: Vec<Value> = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let mut stored: Vec<Value> = obj
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for s in storage {
        if !stored.contains(&s) {
            stored.push(s);
        }
    }
    let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
    if let Some(o) = obj.as_object_mut() {
        o.insert(
            "status".into(),
            json!({
                "conditions": [
                    cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                    cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                ],
                "acceptedNames": accepted,
                "storedVersions": stored,
            }),
        );
    }
}

/// Every custom resource: a generation, optimistic concurrency required on update, no
/// strategic merge, status only through `/status` when the CRD declares it, validation by the
/// CRD version's schema and CEL rules, and deletes answered with the object.
#[derive(Debug)]
pub struct CustomResources;

impl ResourceStrategy for CustomResources {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn allows_unconditional_update(&self) -> bool {
        false
    }

    fn accepts_strategic_merge(&self) -> bool {
        false
    }

    /// A custom resource's `/status` may change only its status.
    fn reset_fields(&self, info: &ResourceInfo, part: Part) -> &'static [&'static [&'static str]] {
        match part {
            Part::Main if info.has_status() => &[&["status"]],
            Part::Status => &[&["metadata"], &["spec"]],
            _ => &[],
        }
    }

    fn prepare_for_create(&self, info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if info.has_status()
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        let (old, errs) = (check.old, &mut check.errors);
        let Some(custom) = &check.info.custom else {
            return;
        };
        let Some(schema) = &custom.schema else {
            return;
        };
        let schema_errs = crate::crd_schema::validate_object(schema, obj);
        // As kube-apiserver, CEL rules run only when no value breaks its schema's type, enum,
        // required fields or limits: they rely on them.
        let blocking = schema_errs.iter().any(|e| {
            matches!(
                e.reason,
                "FieldValueNotSupported"
                    | "FieldValueRequired"
                    | "FieldValueTooLong"
                    | "FieldValueTooMany"
                    | "FieldValueTypeInvalid"
            ) || e.message.contains(" must be of type ")
        });
        errs.extend(schema_errs);
        if let Some(rules) = &custom.rules {
            if blocking {
                errs.push(FieldError::invalid(
                    "<nil>",
                    &Value::Null,
                    "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                ));
            } else {
                errs.extend(rules.validate(obj, old));
            }
        }
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}
