//! apiextensions.k8s.io/v1: CustomResourceDefinitions, and the resources they define.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::{ApiResult, FieldError};
use crate::meta::{ObjectMeta, meta_mut};
use crate::resource::{
    ConversionStrategy, CustomInfo, DeleteOptions, DeleteOutcome, Part, ResourceInfo,
    ResourceStrategy, Subresource, Validation, storage_version_hash,
};
use crate::storage::WriteOp;
use crate::table::{CellSource, PrinterColumn};

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

    /// kube-apiserver's defaults of a CRD: singular and list kind from the kind, no
    /// conversion, the storage version recorded, webhook services on port 443.
    fn default(&self, obj: &mut Value) {
        if let Some(names) = obj
            .pointer_mut("/spec/names")
            .and_then(Value::as_object_mut)
        {
            let kind = names
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if names
                .get("singular")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                names.insert("singular".into(), json!(kind.to_lowercase()));
            }
            if names
                .get("listKind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
                && !kind.is_empty()
            {
                names.insert("listKind".into(), json!(format!("{kind}List")));
            }
        }
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            let conversion = spec.entry("conversion").or_insert(Value::Null);
            if conversion.is_null() {
                *conversion = json!({"strategy": "None"});
            }
            if let Some(service) = conversion
                .pointer_mut("/webhook/clientConfig/service")
                .and_then(Value::as_object_mut)
            {
                service.entry("port").or_insert(json!(443));
            }
        }
        let stored_none = obj
            .pointer("/status/storedVersions")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if stored_none && let Some(storage) = storage_version(obj) {
            let status = obj
                .as_object_mut()
                .map(|o| o.entry("status").or_insert(json!({})));
            if let Some(Value::Object(status)) = status {
                status.insert("storedVersions".into(), json!([storage]));
            }
        }
    }

    /// A new CRD's status is only the version it is stored at: the apiextensions
    /// controllers accept its names and establish it afterwards.
    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        let stored: Vec<Value> = storage_version(obj)
            .map(Value::String)
            .into_iter()
            .collect();
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"storedVersions": stored}));
        }
    }

    /// A spec update keeps the status, adding its storage version to the stored ones.
    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part != Part::Main {
            return;
        }
        let Some(storage) = storage_version(next) else {
            return;
        };
        let status = next
            .as_object_mut()
            .map(|o| o.entry("status").or_insert(json!({})));
        if let Some(Value::Object(status)) = status {
            let stored = status.entry("storedVersions").or_insert(json!([]));
            if let Some(list) = stored.as_array_mut()
                && !list.iter().any(|v| *v == storage)
            {
                list.push(json!(storage));
            }
        }
    }

    /// The first delete marks the CRD, holds it with the cleanup finalizer and says it is
    /// terminating; the CRD cleanup controller deletes its objects, then releases it.
    fn delete(
        &self,
        info: &ResourceInfo,
        cur: &Value,
        opts: &DeleteOptions,
        now: &str,
    ) -> ApiResult<(WriteOp, DeleteOutcome)> {
        if cur.is_deleting() {
            return crate::resource::delete_by_finalizers(info, cur, opts, now);
        }
        let mut next = cur.clone();
        let m = meta_mut(&mut next);
        m.insert("deletionTimestamp".into(), json!(now));
        let finalizers = m.entry("finalizers").or_insert(json!([]));
        if let Some(a) = finalizers.as_array_mut()
            && !a.iter().any(|f| f == CRD_CLEANUP)
        {
            a.push(json!(CRD_CLEANUP));
        }
        set_condition(
            &mut next,
            condition(
                "Terminating",
                "True",
                "InstanceDeletionPending",
                "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
                now,
            ),
        );
        Ok((WriteOp::Put(next), DeleteOutcome::Pending))
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        let errs = &mut check.errors;
        let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (group, plural) = (text("/spec/group"), text("/spec/names/plural"));
        let name = obj.name();
        if name != format!("{plural}.{group}") {
            errs.push(FieldError::invalid(
                "metadata.name",
                &json!(name),
                "must be spec.names.plural+\".\"+spec.group",
            ));
        }
        let mut schema_errs = Vec::new();
        for (at, schema) in schema_locations(obj) {
            let (found, structural) = crate::crd_schema::definition_errors(schema, &at);
            schema_errs.extend(found);
            if !structural {
                continue;
            }
            if let Err(compile) = crate::validation_rules::RuleSet::compile(schema, &at) {
                schema_errs.extend(compile.into_iter().map(|e| field_error(e.field, e.message)));
            }
        }
        if !schema_errs.is_empty() {
            errs.extend(schema_errs);
            return;
        }
        if let Err(CrdError::Field { field, message }) = resources_from_crd(obj) {
            errs.push(field_error(field, message));
        }
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        unrecognized_formats(obj)
            .into_iter()
            .map(|f| format!("unrecognized format {f:?}"))
            .collect()
    }

    /// Only formats the update introduces are warned of.
    fn warnings_on_update(&self, obj: &Value, old: &Value) -> Vec<String> {
        let known = unrecognized_formats(old);
        unrecognized_formats(obj)
            .into_iter()
            .filter(|f| !known.contains(f))
            .map(|f| format!("unrecognized format {f:?}"))
            .collect()
    }

    fn defines_resources(&self) -> bool {
        true
    }
}

/// Each `openAPIV3Schema` of a CRD where kube-apiserver's errors name it: one
/// `spec.validation.openAPIV3Schema` when every version has the same schema (its internal
/// version keeps one then), else each version's.
fn schema_locations(crd: &Value) -> Vec<(String, &Value)> {
    let versions: &[Value] = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let schemas: Vec<Option<&Value>> = versions
        .iter()
        .map(|v| v.pointer("/schema/openAPIV3Schema"))
        .collect();
    match schemas.first() {
        Some(Some(first)) if schemas.iter().all(|s| *s == Some(*first)) => {
            vec![("spec.validation.openAPIV3Schema".to_string(), *first)]
        }
        _ => schemas
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                Some((format!("spec.versions[{i}].schema.openAPIV3Schema"), (*s)?))
            })
            .collect(),
    }
}

/// The formats of a CRD's schemas kube-apiserver does not know.
fn unrecognized_formats(crd: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (_, schema) in schema_locations(crd) {
        crate::crd_schema::unrecognized_formats(schema, &mut out);
    }
    out
}

/// A field error from its field and kube's sentence, its reason read from the sentence.
fn field_error(field: String, message: String) -> FieldError {
    let reason = if message.starts_with("Required value") {
        "FieldValueRequired"
    } else if message.starts_with("Unsupported value") {
        "FieldValueNotSupported"
    } else if message.starts_with("Forbidden") {
        "FieldValueForbidden"
    } else {
        "FieldValueInvalid"
    };
    FieldError {
        reason,
        message: format!("{field}: {message}"),
        field,
    }
}

/// The version a CRD's objects are stored at.
fn storage_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .map(str::to_string)
}

fn condition(kind: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": status, "lastTransitionTime": now, "reason": reason,
        "message": message})
}

/// Sets a condition as kube's `SetCRDCondition`: its transition time kept while its status
/// stays, new conditions appended.
fn set_condition(crd: &mut Value, new: Value) {
    let status = crd
        .as_object_mut()
        .map(|o| o.entry("status").or_insert(json!({})));
    let Some(Value::Object(status)) = status else {
        return;
    };
    let conditions = status.entry("conditions").or_insert(json!([]));
    if conditions.is_null() {
        *conditions = json!([]);
    }
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    match list.iter_mut().find(|c| c.get("type") == new.get("type")) {
        Some(old) => {
            let mut new = new;
            if old.get("status") == new.get("status")
                && let Some(t) = old.get("lastTransitionTime")
            {
                new["lastTransitionTime"] = t.clone();
            }
            *old = new;
        }
        None => list.push(new),
    }
}

fn condition_true(crd: &Value, kind: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type").and_then(Value::as_str) == Some(kind) && c["status"] == "True")
}

/// Whether a CRD's resources are served: once its names are accepted.
pub fn serves(crd: &Value) -> bool {
    condition_true(crd, "NamesAccepted") || condition_true(crd, "Established")
}

/// The status the apiextensions naming and establishing controllers give `crd`, given the
/// other CRDs (any group): its names accepted unless another CRD of its group accepted them
/// first (each clash said in `NamesAccepted`), and, once they are, established. None when
/// they would change nothing.
pub fn controlled_status(crd: &Value, others: &[Arc<Value>], now: &str) -> Option<Value> {
    let text = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let group = text(crd, "/spec/group");
    let requested = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let accepted = crd
        .pointer("/status/acceptedNames")
        .cloned()
        .unwrap_or(json!({}));
    let mut next = crd.clone();
    if requested != accepted {
        let (mut resources, mut kinds) = (Vec::new(), Vec::new());
        for other in others
            .iter()
            .filter(|o| o.name() != crd.name() && text(o, "/spec/group") == group)
        {
            let names = other
                .pointer("/status/acceptedNames")
                .cloned()
                .unwrap_or(json!({}));
            for k in ["plural", "singular"] {
                resources.push(text(&names, &format!("/{k}")));
            }
            resources.extend(strings(&names, "shortNames"));
            kinds.push(text(&names, "/kind"));
            kinds.push(text(&names, "/listKind"));
        }
        let mut names = accepted.as_object().cloned().unwrap_or_default();
        let mut refusal: Option<(&str, String)> = None;
        let fresh = |wanted: &str, had: &str, used: &[String]| {
            wanted == had || !used.iter().any(|u| u == wanted)
        };
        for (field, reason, used) in [
            ("plural", "PluralConflict", &resources),
            ("singular", "SingularConflict", &resources),
        ] {
            let wanted = text(&requested, &format!("/{field}"));
            if fresh(&wanted, &text(&accepted, &format!("/{field}")), used) {
                set_name(&mut names, field, &wanted);
            } else {
                refusal = Some((reason, format!("{wanted:?} is already in use")));
            }
        }
        let (wanted_short, had_short) = (
            strings(&requested, "shortNames"),
            strings(&accepted, "shortNames"),
        );
        if wanted_short != had_short {
            let clashes: Vec<String> = wanted_short
                .iter()
                .filter(|s| !had_short.contains(s) && !fresh(s, "", &resources))
                .map(|s| format!("{s:?} is already in use"))
                .collect();
            match clashes.as_slice() {
                [] => {
                    names.insert("shortNames".into(), json!(wanted_short));
                }
                [one] => refusal = Some(("ShortNamesConflict", one.clone())),
                many => refusal = Some(("ShortNamesConflict", format!("[{}]", many.join(", ")))),
            }
        }
        for (field, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
            let wanted = text(&requested, &format!("/{field}"));
            if fresh(&wanted, &text(&accepted, &format!("/{field}")), &kinds) {
                set_name(&mut names, field, &wanted);
            } else {
                refusal = Some((reason, format!("{wanted:?} is already in use")));
            }
        }
        match requested.get("categories") {
            Some(c) => names.insert("categories".into(), c.clone()),
            None => names.remove("categories"),
        };
        let naming = match &refusal {
            None => condition(
                "NamesAccepted",
                "True",
                "NoConflicts",
                "no conflicts found",
                now,
            ),
            Some((reason, message)) => condition("NamesAccepted", "False", reason, message, now),
        };
        let old_naming = next
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|l| l.iter().find(|c| c["type"] == "NamesAccepted"))
            .cloned();
        let same_naming = old_naming.is_some_and(|o| {
            o["status"] == naming["status"]
                && o["reason"] == naming["reason"]
                && o["message"] == naming["message"]
        });
        if Value::Object(names.clone()) != accepted || !same_naming {
            let established = if refusal.is_none() && !condition_true(crd, "Established") {
                condition(
                    "Established",
                    "False",
                    "Installing",
                    "the initial names have been accepted",
                    now,
                )
            } else {
                next.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|l| l.iter().find(|c| c["type"] == "Established"))
                    .cloned()
                    .unwrap_or_else(|| {
                        condition(
                            "Established",
                            "False",
                            "NotAccepted",
                            "not all names are accepted",
                            now,
                        )
                    })
            };
            if let Some(status) = next.get_mut("status").and_then(Value::as_object_mut) {
                status.insert("acceptedNames".into(), Value::Object(names));
            }
            set_condition(&mut next, naming);
            set_condition(&mut next, established);
        }
    }
    if condition_true(&next, "NamesAccepted") && !condition_true(&next, "Established") {
        set_condition(
            &mut next,
            condition(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
                now,
            ),
        );
    }
    (next != *crd).then_some(next)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// Sets an accepted name; kube's Go type leaves empty optional names out.
fn set_name(names: &mut serde_json::Map<String, Value>, field: &str, value: &str) {
    if value.is_empty() && !matches!(field, "plural" | "kind") {
        names.remove(field);
    } else {
        names.insert(field.into(), json!(value));
    }
}

/// The verbs of custom resources, in the order kube-apiserver lists them.
pub const CUSTOM_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

/// Why a CRD could not be turned into served resources.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CrdError {
    #[error("{field}: {message}")]
    Field { field: String, message: String },
}

/// Builds the resource entries a CRD serves (one per served version).
pub fn resources_from_crd(crd: &Value) -> Result<Vec<ResourceInfo>, CrdError> {
    let field = |f: &str, m: &str| CrdError::Field {
        field: f.into(),
        message: m.into(),
    };
    let spec = crd
        .get("spec")
        .ok_or_else(|| field("spec", "Required value"))?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| field("spec.group", "Required value"))?;
    let names = spec
        .get("names")
        .ok_or_else(|| field("spec.names", "Required value"))?;
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let plural = s(names, "plural")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| field("spec.names.plural", "Required value"))?;
    let kind = s(names, "kind")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| field("spec.names.kind", "Required value"))?;
    let singular = s(names, "singular").unwrap_or_else(|| kind.to_lowercase());
    let list_kind = s(names, "listKind").unwrap_or_else(|| format!("{kind}List"));
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strs(names.get("shortNames"));
    let categories = strs(names.get("categories"));
    let namespaced = match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => {
            return Err(field(
                "spec.scope",
                "Unsupported value: supported values: \"Cluster\", \"Namespaced\"",
            ));
        }
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| field("spec.versions", "Required value"))?;
    let storage: Vec<&str> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    if storage.len() != 1 {
        return Err(field(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    let storage_version = storage[0].to_string();
    let conversion = conversion_strategy(spec.get("conversion"))?;
    let preserve_unknown = spec.get("preserveUnknownFields") == Some(&Value::Bool(true));
    let crd_name = format!("{plural}.{group}");
    let mut out = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| field("spec.versions[].name", "Required value"))?;
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let mut subresources = Vec::new();
        if v.pointer("/subresources/status").is_some() {
            subresources.push(Subresource::status(&kind));
        }
        let scale = v.pointer("/subresources/scale").map(|sc| {
            let path = |k: &str| sc.get(k).and_then(Value::as_str).map(crate::scale::pointer);
            crate::scale::ScalePaths {
                spec_replicas: path("specReplicasPath").unwrap_or_else(|| "/spec/replicas".into()),
                status_replicas: path("statusReplicasPath")
                    .unwrap_or_else(|| "/status/replicas".into()),
                selector: path("labelSelectorPath").map_or(
                    crate::scale::SelectorSource::None,
                    crate::scale::SelectorSource::StringAt,
                ),
            }
        });
        if scale.is_some() {
            subresources.insert(0, Subresource::scale());
        }
        let mut printer_columns = Vec::new();
        for c in v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(cname), Some(path)) = (s(c, "name"), s(c, "jsonPath")) else {
                continue;
            };
            printer_columns.push(PrinterColumn {
                name: cname,
                type_: s(c, "type").unwrap_or_else(|| "string".into()),
                format: s(c, "format").unwrap_or_default(),
                description: s(c, "description")
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| column_description(&path)),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                source: CellSource::CustomPath(path),
            });
        }
        // A CRD without columns of its own shows when each object was made.
        if printer_columns.is_empty() {
            let path = ".metadata.creationTimestamp";
            printer_columns.push(PrinterColumn {
                name: "Age".into(),
                type_: "date".into(),
                format: String::new(),
                description: column_description(path),
                priority: 0,
                source: CellSource::CustomPath(path.into()),
            });
        }
        let schema = v.pointer("/schema/openAPIV3Schema");
        let rules = match schema {
            Some(s) => crate::validation_rules::RuleSet::compile(
                s,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
            )
            .map_err(|errors| match errors.into_iter().next() {
                Some(e) => CrdError::Field {
                    field: e.field,
                    message: e.message,
                },
                None => CrdError::Field {
                    field: format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    message: "Invalid value: its rules do not compile".into(),
                },
            })?,
            None => None,
        };
        out.push(ResourceInfo {
            group: group.to_string(),
            version: name.to_string(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced,
            short_names: short_names.clone(),
            categories: categories.clone(),
            verbs: CUSTOM_VERBS,
            stored: true,
            storage_version_hash: Some(storage_version_hash(
                &format!("{group}/{storage_version}"),
                &kind,
            )),
            subresources,
            printer_columns,
            strategy: &CustomResources,
            scale,
            fields: Some(crate::fields::schema::Schema::from_crd(
                schema,
                preserve_unknown,
            )),
            custom: Some(CustomInfo {
                crd_name: crd_name.clone(),
                storage_version: storage_version.clone(),
                schema: schema
                    .cloned()
                    .map(|s| Arc::new(crate::crd_schema::ObjectSchema::new(s))),
                rules,
                conversion,
            }),
        });
    }
    Ok(out)
}

/// What kube-apiserver says of a CRD's column that has no description of its own.
fn column_description(path: &str) -> String {
    format!("Custom resource definition column (in JSONPath format): {path}")
}

/// Reads `spec.conversion` as kube-apiserver validates it: `None` (the default) or `Webhook`,
/// which needs exactly one of `webhook.clientConfig.url` and `.service`, and
/// `webhook.conversionReviewVersions` naming `v1` or `v1beta1` (errors name the fields as
/// kube-apiserver's internal version does).
fn conversion_strategy(conversion: Option<&Value>) -> Result<ConversionStrategy, CrdError> {
    let field = |f: &str, m: String| CrdError::Field {
        field: format!("spec.conversion.{f}"),
        message: m,
    };
    let Some(conversion) = conversion.filter(|c| !c.is_null()) else {
        return Ok(ConversionStrategy::None);
    };
    let webhook = conversion.get("webhook").filter(|w| !w.is_null());
    match conversion.get("strategy").and_then(Value::as_str) {
        None | Some("None") if webhook.and_then(|w| w.get("clientConfig")).is_some() => Err(field(
            "webhookClientConfig",
            "Forbidden: should not be set when strategy is not set to Webhook".into(),
        )),
        None | Some("None") => Ok(ConversionStrategy::None),
        Some("Webhook") => {
            let client = webhook.and_then(|w| w.get("clientConfig"));
            let Some(client) = client else {
                return Err(field(
                    "webhookClientConfig",
                    "Required value: required when strategy is set to Webhook".into(),
                ));
            };
            if client.get("url").is_some() == client.get("service").is_some() {
                return Err(field(
                    "webhookClientConfig",
                    "Required value: exactly one of url or service is required".into(),
                ));
            }
            let versions = webhook
                .and_then(|w| w.get("conversionReviewVersions"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if versions.is_empty() {
                return Err(field("conversionReviewVersions", "Required value".into()));
            }
            if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
                return Err(field(
                    "conversionReviewVersions",
                    format!(
                        "Invalid value: {}: must include at least one of v1, v1beta1",
                        crate::error::render_value(&Value::Array(versions))
                    ),
                ));
            }
            Ok(ConversionStrategy::Webhook)
        }
        Some(other) => Err(field(
            "strategy",
            format!("Unsupported value: {other:?}: supported values: \"None\", \"Webhook\""),
        )),
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
        let part = check.part;
        let Some(custom) = &check.info.custom else {
            return;
        };
        let Some(schema) = &custom.schema else {
            return;
        };
        // Through `/status` only the status is checked against the schema, with messages
        // relative to it, as kube-apiserver's status validator does.
        let schema_errs = if part == Part::Status {
            schema.validate_status(obj)
        } else {
            schema.validate_object(obj)
        };
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
}
