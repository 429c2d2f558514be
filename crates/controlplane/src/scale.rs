//! The `/scale` subresource (`autoscaling/v1` Scale) of workloads and of custom resources
//! whose CRD declares one: reading the replica counts and selector out of an object, and
//! writing a new desired replica count back into it.

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, FieldError};
use crate::meta::{ObjectMeta, meta_mut};

/// Where a resource keeps what Scale shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// JSON pointer of the desired replicas, e.g. `/spec/replicas`.
    pub spec_replicas: String,
    /// JSON pointer of the observed replicas.
    pub status_replicas: String,
    pub selector: SelectorSource,
}

/// How Scale's `status.selector` is found.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectorSource {
    None,
    /// A string already in selector syntax (CRD `labelSelectorPath`).
    StringAt(String),
    /// A LabelSelector whose matchLabels are rendered `k=v,...` (deployments).
    MatchLabelsAt(String),
    /// A map of labels rendered `k=v,...` (ReplicationControllers' `spec.selector`).
    MapAt(String),
}

/// Turns a CRD JSONPath such as `.spec.replicas` into a JSON pointer.
pub fn pointer(path: &str) -> String {
    let p = path.trim().trim_start_matches('.');
    format!("/{}", p.replace('.', "/"))
}

/// The Scale view of an object.
pub fn to_scale(paths: &ScalePaths, obj: &Value) -> Value {
    let mut meta = serde_json::Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.meta().and_then(|m| m.get(k)) {
            meta.insert(k.into(), v.clone());
        }
    }
    let replicas = obj
        .pointer(&paths.spec_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let observed = obj
        .pointer(&paths.status_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut status = json!({"replicas": observed});
    match &paths.selector {
        SelectorSource::None => {}
        SelectorSource::StringAt(p) => {
            if let Some(s) = obj.pointer(p).and_then(Value::as_str) {
                status["selector"] = json!(s);
            }
        }
        SelectorSource::MatchLabelsAt(_) | SelectorSource::MapAt(_) => {
            let labels = match &paths.selector {
                SelectorSource::MatchLabelsAt(p) => obj.pointer(&format!("{p}/matchLabels")),
                SelectorSource::MapAt(p) => obj.pointer(p),
                _ => None,
            };
            if let Some(m) = labels.and_then(Value::as_object) {
                let parts: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect();
                status["selector"] = json!(parts.join(","));
            }
        }
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
        "spec": {"replicas": replicas}, "status": status})
}

/// The object, of kind `kind`, with the Scale's desired replicas written back (and its
/// resourceVersion, so the ordinary update rules check it).
pub fn apply_scale(kind: &str, paths: &ScalePaths, cur: &Value, scale: &Value) -> ApiResult<Value> {
    let invalid = |v: &Value| {
        ApiError::invalid(
            crate::error::Subject {
                group: "autoscaling".into(),
                kind: "Scale".into(),
                name: cur.name().to_string(),
            },
            vec![FieldError::invalid(
                "spec.replicas",
                v,
                "must be greater than or equal to 0",
            )],
        )
    };
    let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    if replicas.as_i64().is_none_or(|n| n < 0) {
        return Err(invalid(&replicas));
    }
    let mut next = cur.clone();
    let mut at = &mut next;
    let segs: Vec<&str> = paths
        .spec_replicas
        .trim_start_matches('/')
        .split('/')
        .collect();
    for (i, seg) in segs.iter().enumerate() {
        let Some(o) = at.as_object_mut() else {
            return Err(ApiError::BadRequest(format!("{kind}: cannot set replicas")));
        };
        if i == segs.len() - 1 {
            o.insert((*seg).to_string(), replicas.clone());
            break;
        }
        at = o.entry((*seg).to_string()).or_insert_with(|| json!({}));
    }
    match scale.pointer("/metadata/resourceVersion") {
        Some(rv) => meta_mut(&mut next).insert("resourceVersion".into(), rv.clone()),
        None => meta_mut(&mut next).remove("resourceVersion"),
    };
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy_paths() -> ScalePaths {
        ScalePaths {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: SelectorSource::MatchLabelsAt("/spec/selector".into()),
        }
    }

    #[test]
    fn scale_view_shows_replicas_and_selector() {
        let obj = json!({"metadata": {"name": "web", "resourceVersion": "3"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}, "status": {"replicas": 1}});
        let s = to_scale(&deploy_paths(), &obj);
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"], json!({"replicas": 1, "selector": "app=web"}));
        assert_eq!(pointer(".spec.size"), "/spec/size");
    }
}
