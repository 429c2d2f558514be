//! apiextensions.k8s.io/v1: CustomResourceDefinitions, and the resources they define.

use serde_json::{Value, json};

use super::{ResourceStrategy, Validation};
use crate::error::{ApiResult, FieldError};
use crate::meta::{ObjectMeta, meta_mut};
use crate::objects::{DeleteOptions, DeleteOutcome, Part};
use crate::registry::{CrdError, PrinterColumn, ResourceInfo, resources_from_crd};
use crate::storage::WriteOp;

/// The finalizer that keeps a CRD until its objects are gone.
pub const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// CustomResourceDefinitions: valid definitions named `<plural>.<group>`, created with no
/// accepted names or conditions (the names are accepted and the CRD established right after,
/// see [`established`]), served as soon as they are written, and on delete marked
/// Terminating and kept until their objects are gone.
#[derive(Debug)]
pub struct CustomResourceDefinitions;

impl ResourceStrategy for CustomResourceDefinitions {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn::created_at()]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            let conversion = spec.entry("conversion").or_insert(json!({}));
            if let Some(c) = conversion.as_object_mut() {
                c.entry("strategy").or_insert(json!("None"));
            }
        }
        let stored = stored_versions(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert(
                "status".into(),
                json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""},
                    "storedVersions": stored}),
            );
        }
    }

    fn delete(
        &self,
        _info: &ResourceInfo,
        cur: &Value,
        _opts: &DeleteOptions,
        now: &str,
    ) -> ApiResult<(WriteOp, DeleteOutcome)> {
        if cur.is_deleting() {
            return Ok((WriteOp::Unchanged, DeleteOutcome::Pending));
        }
        // As kube-apiserver's CRD storage: the cleanup finalizer and the Terminating condition,
        // with neither a grace period nor a new generation.
        let mut next = cur.clone();
        let m = meta_mut(&mut next);
        m.insert("deletionTimestamp".into(), json!(now));
        let finalizers = m.entry("finalizers").or_insert(json!([]));
        if let Some(a) = finalizers.as_array_mut()
            && !a.iter().any(|f| f == CRD_CLEANUP)
        {
            a.push(json!(CRD_CLEANUP));
        }
        let terminating = json!({"type": "Terminating", "status": "True",
            "lastTransitionTime": now, "reason": "InstanceDeletionPending",
            "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"});
        if let Some(status) = next.get_mut("status").and_then(Value::as_object_mut) {
            match status.get_mut("conditions").and_then(Value::as_array_mut) {
                Some(conditions) => conditions.push(terminating),
                None => {
                    status.insert("conditions".into(), json!([terminating]));
                }
            }
        }
        Ok((WriteOp::Put(next), DeleteOutcome::Pending))
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

/// The versions a CRD's objects have been stored at: those listed, and its storage version.
fn stored_versions(obj: &Value) -> Vec<Value> {
    let storage = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned());
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
    stored
}

/// The CRD once the apiextensions controllers have accepted its names and established it
/// (None when they have already): what kube-apiserver writes right after the CRD is made.
pub fn established(crd: &Value, now: &str) -> Option<Value> {
    let conditions = crd.pointer("/status/conditions").and_then(Value::as_array);
    let has = |t: &str| conditions.is_some_and(|c| c.iter().any(|x| x["type"] == t));
    if crd.is_deleting() || has("Established") {
        return None;
    }
    let mut next = crd.clone();
    crd_status(&mut next, now);
    Some(next)
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
    let stored = stored_versions(obj);
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
/// strategic merge, status only through `/status` when the CRD declares it, and validation by
/// the CRD version's schema and CEL rules.
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
        // As kube-apiserver, CEL rules run only when every value has its schema's type: they
        // rely on it.
        let mistyped = schema_errs
            .iter()
            .any(|e| e.message.contains(" must be of type "));
        errs.extend(schema_errs);
        if let Some(rules) = &custom.rules {
            if mistyped {
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
}
