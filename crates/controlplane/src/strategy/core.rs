//! The core group's kinds: Namespaces, Secrets, ConfigMaps, ServiceAccounts and Nodes (Events
//! are [`super::events`]').

use serde_json::{Value, json};

use super::{ResourceStrategy, Validation};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::meta::{NameRule, ObjectMeta, meta_mut};
use crate::objects::{DeleteOptions, DeleteOutcome, base64_decode, base64_encode, subject};
use crate::registry::{CellSource, PrinterColumn, ResourceInfo};
use crate::storage::WriteOp;

/// Namespaces: named as DNS labels, created Active with the `kubernetes` finalizer, and on
/// delete marked Terminating for the namespace controller, which removes their contents and
/// then them; the system namespaces may not be deleted.
#[derive(Debug)]
pub struct Namespaces;

impl ResourceStrategy for Namespaces {
    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn::path("Status", "string", ".status.phase")]
    }

    /// The label naming the namespace, which selectors of namespaces rely on.
    fn default(&self, obj: &mut Value) {
        let name = obj.name().to_string();
        if name.is_empty() {
            return;
        }
        let labels = meta_mut(obj).entry("labels").or_insert(json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            o.insert("status".into(), json!({"phase": "Active"}));
        }
    }

    fn delete(
        &self,
        info: &ResourceInfo,
        cur: &Value,
        _opts: &DeleteOptions,
        now: &str,
    ) -> ApiResult<(WriteOp, DeleteOutcome)> {
        let name = cur.name();
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::Forbidden {
                subject: subject(info, name),
                message: format!(
                    "namespaces {name:?} is forbidden: this namespace may not be deleted"
                ),
                cause: None,
            });
        }
        if cur.is_deleting() {
            return Ok((WriteOp::Unchanged, DeleteOutcome::Pending));
        }
        let mut next = cur.clone();
        meta_mut(&mut next).insert("deletionTimestamp".into(), json!(now));
        meta_mut(&mut next).insert("deletionGracePeriodSeconds".into(), json!(0));
        if let Some(o) = next.as_object_mut() {
            o.insert("status".into(), json!({"phase": "Terminating"}));
        }
        Ok((WriteOp::Put(next), DeleteOutcome::Pending))
    }

    fn removed_once_finalized(&self) -> bool {
        false
    }
}

/// Secrets: type `Opaque` unless given, `stringData` folded into base64 `data`, the type and
/// (when `immutable`) the contents fixed once set.
#[derive(Debug)]
pub struct Secrets;

impl ResourceStrategy for Secrets {
    fn field_selectors(&self) -> &'static [&'static str] {
        &["type"]
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::path("Type", "string", ".type"),
            PrinterColumn::computed("Data", CellSource::Count(vec!["data"])),
        ]
    }

    /// `stringData` folds into `data` as kube-apiserver's decoding does (so its writer owns
    /// `data`), and the type defaults to Opaque.
    fn default(&self, obj: &mut Value) {
        if obj.get("stringData").is_some_and(Value::is_object) {
            secret_data(obj, &mut Vec::new());
        }
        if let Some(o) = obj.as_object_mut()
            && o.get("type")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            o.insert("type".into(), json!("Opaque"));
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if let Some(old) = check.old {
            if old.get("type") != obj.get("type") {
                check.errors.push(FieldError::invalid(
                    "type",
                    obj.get("type").unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
            immutable_contents(old, obj, &mut check.errors);
        }
        secret_data(obj, &mut check.errors);
    }
}

/// ConfigMaps: `data` and `binaryData` map names to strings, and are fixed once `immutable`.
#[derive(Debug)]
pub struct ConfigMaps;

impl ResourceStrategy for ConfigMaps {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn::computed(
            "Data",
            CellSource::Count(vec!["data"]),
        )]
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if let Some(old) = check.old {
            immutable_contents(old, obj, &mut check.errors);
        }
        for field in ["data", "binaryData"] {
            if let Some(d) = obj.get(field)
                && !d.is_null()
                && !d
                    .as_object()
                    .is_some_and(|m| m.values().all(Value::is_string))
            {
                check
                    .errors
                    .push(FieldError::invalid(field, d, "must be a map of strings"));
            }
        }
    }
}

/// ServiceAccounts: printed with their secrets.
#[derive(Debug)]
pub struct ServiceAccounts;

impl ResourceStrategy for ServiceAccounts {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn::computed(
            "Secrets",
            CellSource::Count(vec!["secrets"]),
        )]
    }
}

/// Services: stored with kube-apiserver's spec defaults; nothing routes to a Service here, so it
/// gets no cluster IP.
#[derive(Debug)]
pub struct Services;

impl ResourceStrategy for Services {
    fn default(&self, obj: &mut Value) {
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        let spec = o.entry("spec").or_insert(json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.entry("type").or_insert(json!("ClusterIP"));
            s.entry("sessionAffinity").or_insert(json!("None"));
            s.entry("internalTrafficPolicy").or_insert(json!("Cluster"));
            for port in s
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                port.entry("protocol").or_insert(json!("TCP"));
                if let Some(number) = port.get("port").cloned() {
                    port.entry("targetPort").or_insert(number);
                }
            }
        }
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"loadBalancer": {}}));
        }
    }
}

/// Nodes: printed with their readiness, roles and kubelet version.
#[derive(Debug)]
pub struct Nodes;

impl ResourceStrategy for Nodes {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::computed("Status", CellSource::NodeStatus),
            PrinterColumn::computed("Roles", CellSource::NodeRoles),
            PrinterColumn::path("Age", "date", ".metadata.creationTimestamp"),
            PrinterColumn::path("Version", "string", ".status.nodeInfo.kubeletVersion"),
        ]
    }
}

/// The contents of a ConfigMap or Secret marked `immutable` may not change, nor the mark.
fn immutable_contents(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    for f in ["data", "binaryData"] {
        if old.get(f) != new.get(f) {
            errs.push(FieldError::forbidden(
                f,
                "field is immutable when `immutable` is set",
            ));
        }
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
}

/// Moves `stringData` into `data` and checks that `data` holds base64.
fn secret_data(obj: &mut Value, errs: &mut Vec<FieldError>) {
    let Some(o) = obj.as_object_mut() else { return };
    if let Some(sd) = o.remove("stringData") {
        let Some(sd) = sd.as_object() else {
            errs.push(FieldError::invalid(
                "stringData",
                &sd,
                "must be a map of strings",
            ));
            return;
        };
        let data = o.entry("data").or_insert(json!({}));
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                d.insert(
                    k.clone(),
                    json!(base64_encode(v.as_str().unwrap_or("").as_bytes())),
                );
            }
        }
    }
    if let Some(d) = o.get("data")
        && !d.is_null()
    {
        match d.as_object() {
            Some(m) => {
                for (k, v) in m {
                    if v.as_str().and_then(base64_decode).is_none() {
                        errs.push(FieldError::invalid(
                            format!("data[{k}]"),
                            v,
                            "illegal base64 data",
                        ));
                    }
                }
            }
            None => errs.push(FieldError::invalid("data", d, "must be a map of strings")),
        }
    }
}
