//! Custom resources between the versions of their CRD. A CRD whose `spec.conversion.strategy`
//! is `None` serves every version with one schema: only `apiVersion` changes. One whose strategy
//! is `Webhook` has its objects converted, whenever they are served at a version other than the
//! one they are stored at (reads, list items, watch events, and writes, which are converted to
//! the storage version to be stored and back to be answered), by a [`Converter`] the embedder
//! registers for the CRD with [`crate::ControlPlaneBuilder::conversion`], in place of the
//! webhook (an embedded control plane cannot reach an in-cluster Service). A `Webhook` CRD
//! without one fails those conversions: this server never calls a webhook's URL.
//!
//! What a converter returns is checked as kube-apiserver checks a ConversionReview response, and
//! failures are answered as kube-apiserver answers them: 500 with `conversion webhook for
//! <group/version, Kind=kind> failed: <why>`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::meta::ObjectMeta;
use crate::resource::{ConversionStrategy, ResourceInfo};

/// Converts objects of one CRD between its versions, as its conversion webhook would answer a
/// `ConversionReview`.
pub trait Converter: Send + Sync {
    /// Converts each of `objects` (whole objects, each at some version of the CRD, never
    /// already at `desired_api_version`) to `desired_api_version` (`group/version`), in order:
    /// the ConversionReview's `response.convertedObjects`; or says why not (its
    /// `response.result.message`). Only labels and annotations may change in `metadata`.
    fn convert(&self, desired_api_version: &str, objects: Vec<Value>)
    -> Result<Vec<Value>, String>;
}

/// The converters of a control plane, by CRD name (`plural.group`).
#[derive(Clone, Default)]
pub struct Converters {
    by_crd: HashMap<String, Arc<dyn Converter>>,
}

impl std::fmt::Debug for Converters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.by_crd.keys().collect();
        names.sort();
        f.debug_struct("Converters")
            .field("crds", &names)
            .finish_non_exhaustive()
    }
}

fn converted_by_webhook(info: &ResourceInfo) -> bool {
    info.custom
        .as_ref()
        .is_some_and(|c| c.conversion == ConversionStrategy::Webhook)
}

fn api_version_of(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
}

/// `group/version, Kind=kind`, as Go prints a GroupVersionKind.
fn gvk_of(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = api_version_of(obj);
    match api_version.split_once('/') {
        Some(_) => format!("{api_version}, Kind={kind}"),
        None => format!("/{api_version}, Kind={kind}"),
    }
}

impl Converters {
    /// Converts the objects of CRD `crd_name` with `converter`, replacing any converter
    /// registered for it before.
    pub fn register(&mut self, crd_name: &str, converter: Arc<dyn Converter>) {
        self.by_crd.insert(crd_name.to_string(), converter);
    }

    /// Whether `obj` (as stored) needs its converter to be served at `info`'s version.
    pub fn needed(info: &ResourceInfo, obj: &Value) -> bool {
        converted_by_webhook(info) && api_version_of(obj) != info.api_version()
    }

    /// `objects` (as stored) as served at `info`'s version.
    pub fn served(&self, info: &ResourceInfo, objects: Vec<Value>) -> ApiResult<Vec<Value>> {
        let desired = info.api_version();
        if !converted_by_webhook(info) {
            // One schema for every version (and events.k8s.io's view of core Events).
            return Ok(objects
                .into_iter()
                .map(|obj| crate::objects::present(info, obj))
                .collect());
        }
        self.convert(info, &desired, objects)
    }

    /// One object (as stored) as served at `info`'s version.
    pub fn served_one(&self, info: &ResourceInfo, obj: &Value) -> ApiResult<Value> {
        let mut one = self.served(info, vec![obj.clone()])?;
        one.pop()
            .ok_or_else(|| ApiError::Internal("conversion lost the object".into()))
    }

    /// `obj`, written at `info`'s version, as it is stored: at the CRD's storage version.
    pub fn stored(&self, info: &ResourceInfo, mut obj: Value) -> ApiResult<Value> {
        if !converted_by_webhook(info) {
            return Ok(obj);
        }
        if let Some(o) = obj.as_object_mut() {
            o.insert("apiVersion".into(), Value::String(info.api_version()));
        }
        let mut one = self.convert(info, &info.storage_api_version(), vec![obj])?;
        one.pop()
            .ok_or_else(|| ApiError::Internal("conversion lost the object".into()))
    }

    /// Converts the objects not at `desired` with the CRD's converter, checking what it
    /// returns as kube-apiserver checks a webhook's answer.
    fn convert(
        &self,
        info: &ResourceInfo,
        desired: &str,
        mut objects: Vec<Value>,
    ) -> ApiResult<Vec<Value>> {
        let pending: Vec<usize> = (0..objects.len())
            .filter(|&i| api_version_of(&objects[i]) != desired)
            .collect();
        let Some(&first) = pending.first() else {
            return Ok(objects);
        };
        let gvk = gvk_of(&objects[first]);
        let failed = |detail: String| {
            ApiError::Internal(format!("conversion webhook for {gvk} failed: {detail}"))
        };
        let crd = info.custom.as_ref().map_or("", |c| c.crd_name.as_str());
        let converter = self.by_crd.get(crd).ok_or_else(|| {
            failed(format!(
                "no converter is registered for customresourcedefinition {crd:?}, and this control plane does not call conversion webhooks"
            ))
        })?;
        let originals: Vec<Value> = pending.iter().map(|&i| objects[i].clone()).collect();
        let converted = converter
            .convert(desired, originals.clone())
            .map_err(failed)?;
        if converted.len() != originals.len() {
            return Err(ApiError::Internal(format!(
                "conversion webhook for {gvk} returned {} objects, expected {}",
                converted.len(),
                originals.len()
            )));
        }
        for (n, (original, mut out)) in originals.iter().zip(converted).enumerate() {
            check_converted(original, &mut out, desired).map_err(|why| {
                ApiError::Internal(format!(
                    "conversion webhook for {gvk} returned invalid converted object at index {n}: {why}"
                ))
            })?;
            objects[pending[n]] = out;
        }
        Ok(objects)
    }
}

/// Checks a converted object against its original (same group-version as asked, same kind,
/// name, namespace and uid) and gives it back the original's metadata but for its own labels
/// and annotations, as kube-apiserver does with a webhook's answer.
fn check_converted(original: &Value, out: &mut Value, desired: &str) -> Result<(), String> {
    if !out.is_object() {
        return Err("not an object".into());
    }
    let got = api_version_of(out);
    if got != desired {
        return Err(format!(
            "invalid groupVersion (expected {desired}, received {got})"
        ));
    }
    let field = |o: &Value, f: &str| o.get(f).and_then(Value::as_str).unwrap_or("").to_string();
    if field(original, "kind") != field(out, "kind") {
        return Err(format!(
            "invalid kind (expected {}, received {})",
            field(original, "kind"),
            field(out, "kind")
        ));
    }
    for (what, a, b) in [
        ("name", original.name(), out.name()),
        ("namespace", original.namespace(), out.namespace()),
        ("UID", original.uid(), out.uid()),
    ] {
        if a != b {
            return Err(format!("must have the same {what}: {a} != {b}"));
        }
    }
    let returned = out.meta().cloned().unwrap_or_default();
    let mut meta: Map<String, Value> = original.meta().cloned().unwrap_or_default();
    for f in ["labels", "annotations"] {
        match returned.get(f) {
            None | Some(Value::Null) => {
                meta.remove(f);
            }
            Some(v) => {
                let strings = v
                    .as_object()
                    .is_some_and(|m| m.values().all(Value::is_string));
                if !strings {
                    return Err(format!("metadata.{f} must be a map of strings"));
                }
                if f == "labels"
                    && let Some(e) = crate::names::labels(v, "metadata.labels")
                        .into_iter()
                        .next()
                {
                    return Err(e.message);
                }
                meta.insert(f.into(), v.clone());
            }
        }
    }
    if let Some(o) = out.as_object_mut() {
        o.insert("metadata".into(), Value::Object(meta));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Renames;

    impl Converter for Renames {
        fn convert(&self, desired: &str, objects: Vec<Value>) -> Result<Vec<Value>, String> {
            Ok(objects
                .into_iter()
                .map(|mut o| {
                    o["apiVersion"] = json!(desired);
                    o["metadata"]["uid"] = json!("changed");
                    o
                })
                .collect())
        }
    }

    fn webhook_info() -> Arc<ResourceInfo> {
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://converter.example.com/convert"}}},
            "versions": [{"name": "v1", "served": true, "storage": true},
                         {"name": "v2", "served": true, "storage": false}]}});
        let infos = crate::strategy::apiextensions::resources_from_crd(&crd).unwrap();
        Arc::new(infos.into_iter().find(|i| i.version == "v2").unwrap())
    }

    #[test]
    fn a_converter_may_not_change_identity_and_a_missing_one_says_so() {
        let info = webhook_info();
        let stored = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1"}});
        let err = Converters::default()
            .served_one(&info, &stored)
            .unwrap_err();
        assert_eq!(err.code(), 500);
        assert_eq!(
            err.to_string(),
            "Internal error occurred: conversion webhook for example.com/v1, Kind=Thing failed: no converter is registered for customresourcedefinition \"things.example.com\", and this control plane does not call conversion webhooks"
        );
        let mut converters = Converters::default();
        converters.register("things.example.com", Arc::new(Renames));
        let err = converters.served_one(&info, &stored).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Internal error occurred: conversion webhook for example.com/v1, Kind=Thing returned invalid converted object at index 0: must have the same UID: u1 != changed"
        );
    }
}
