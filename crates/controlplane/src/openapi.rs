//! OpenAPI v3 documents (`/openapi/v3` and `/openapi/v3/apis/G/V`) and a JSON OpenAPI v2
//! document (`/openapi/v2`), generated from the registry.
//!
//! kubectl uses them to check server-side field validation (a PATCH operation carrying
//! `x-kubernetes-group-version-kind` and a `fieldValidation` parameter) and to explain
//! resources. Custom resources get their CRD schema; built-ins get a permissive outline.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::registry::Registry;
use crate::request_info::Query;
use crate::resource::ResourceInfo;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn reversed_group(group: &str) -> String {
    if group.is_empty() {
        return "io.k8s.api.core".into();
    }
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    parts.join(".")
}

/// Component name of a resource's schema, as kube-apiserver names them.
pub fn schema_name(info: &ResourceInfo) -> String {
    if info.custom.is_some() {
        format!(
            "{}.{}.{}",
            reversed_group(&info.group),
            info.version,
            info.kind
        )
    } else {
        let g = if info.group.is_empty() {
            "core".to_string()
        } else {
            info.group.split('.').next().unwrap_or("").to_string()
        };
        format!("io.k8s.api.{g}.{}.{}", info.version, info.kind)
    }
}

fn gvk(info: &ResourceInfo) -> Value {
    json!({"group": info.group, "version": info.version, "kind": info.kind})
}

fn object_meta() -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    json!({
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "type": "object",
        "properties": {
            "name": s("Name must be unique within a namespace."),
            "generateName": s("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "namespace": s("Namespace defines the space within which each name must be unique."),
            "uid": s("UID is the unique in time and space value for this object."),
            "resourceVersion": s("An opaque value that represents the internal version of this object."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
            "creationTimestamp": {"type": "string", "format": "date-time", "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
            "deletionTimestamp": {"type": "string", "format": "date-time", "description": "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Map of string keys and values that can be used to organize and categorize objects."},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Annotations is an unstructured key value map stored with a resource."},
            "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted from the registry.", "x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set"},
            "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "List of objects depended by this object.", "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow."}
        }
    })
}

fn resource_schema(info: &ResourceInfo) -> Value {
    let mut schema = match info.custom.as_ref().and_then(|c| c.schema.as_deref()) {
        Some(s) => s.whole().clone(),
        None if info.custom.is_some() => {
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        }
        None => json!({
            "description": format!("{} is served by the fleetform control plane.", info.kind),
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        }),
    };
    if let Some(o) = schema.as_object_mut() {
        let props = o
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        let mut props: Map<String, Value> = props;
        props.insert("apiVersion".into(), json!({"type": "string",
            "description": "APIVersion defines the versioned schema of this representation of an object."}));
        props.insert("kind".into(), json!({"type": "string",
            "description": "Kind is a string value representing the REST resource this object represents."}));
        props.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}],
            "description": "Standard object's metadata."}),
        );
        o.insert("properties".into(), Value::Object(props));
        o.insert("x-kubernetes-group-version-kind".into(), json!([gvk(info)]));
    }
    schema
}

fn operation(info: &ResourceInfo, action: &str, params: &[&str]) -> Value {
    let parameters: Vec<Value> = params
        .iter()
        .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    json!({
        "operationId": format!("{action}{}", info.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(info),
        "parameters": parameters,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema":
            {"$ref": format!("#/components/schemas/{}", schema_name(info))}}}}},
    })
}

fn paths_for(info: &ResourceInfo) -> Vec<(String, Value)> {
    let base = if info.group.is_empty() {
        format!("/api/{}", info.version)
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    let coll = if info.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", info.plural)
    } else {
        format!("{base}/{}", info.plural)
    };
    let write = ["dryRun", "fieldManager", "fieldValidation", "pretty"];
    let patch = [
        "dryRun",
        "fieldManager",
        "fieldValidation",
        "force",
        "pretty",
    ];
    let mut out = vec![
        (
            coll.clone(),
            json!({
                "get": operation(info, "list", &["labelSelector", "fieldSelector", "limit", "continue", "watch"]),
                "post": operation(info, "post", &write),
                "delete": operation(info, "deletecollection", &["labelSelector", "fieldSelector"]),
            }),
        ),
        (
            format!("{coll}/{{name}}"),
            json!({
                "get": operation(info, "get", &["pretty"]),
                "put": operation(info, "put", &write),
                "patch": operation(info, "patch", &patch),
                "delete": operation(info, "delete", &["dryRun", "propagationPolicy"]),
            }),
        ),
    ];
    for sub in info.subresources.iter().map(|s| &s.name) {
        out.push((
            format!("{coll}/{{name}}/{sub}"),
            json!({
                "get": operation(info, "get", &["pretty"]),
                "put": operation(info, "put", &write),
                "patch": operation(info, "patch", &patch),
            }),
        ));
    }
    out
}

/// The OpenAPI v3 document of one group-version.
pub fn group_version_doc(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = registry.resources_in(group, version);
    if infos.is_empty() {
        return None;
    }
    let mut paths = BTreeMap::new();
    let mut schemas = BTreeMap::new();
    schemas.insert(OBJECT_META.to_string(), object_meta());
    for info in &infos {
        for (p, v) in paths_for(info) {
            paths.insert(p, v);
        }
        schemas.insert(schema_name(info), resource_schema(info));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.36.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

fn hash_of(v: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

fn group_versions(registry: &Registry) -> Vec<(String, String)> {
    let mut gvs: Vec<(String, String)> = registry
        .all()
        .iter()
        .map(|i| (i.group.clone(), i.version.clone()))
        .collect();
    gvs.dedup();
    gvs
}

/// The v3 discovery document listing every group-version.
pub fn v3_root(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, v) in group_versions(registry) {
        let Some(doc) = group_version_doc(registry, &g, &v) else {
            continue;
        };
        let rel = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        paths.insert(
            rel.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{rel}?hash={}", hash_of(&doc))}),
        );
    }
    json!({"paths": paths})
}

/// A Swagger 2.0 document of every resource (JSON only).
pub fn v2(registry: &Registry) -> Value {
    let mut paths = Map::new();
    let mut defs = Map::new();
    let mut meta = object_meta();
    fix_refs(&mut meta);
    defs.insert(OBJECT_META.into(), meta);
    for info in registry.all() {
        for (p, mut v) in paths_for(&info) {
            fix_refs(&mut v);
            paths.insert(p, v);
        }
        let mut s = resource_schema(&info);
        fix_refs(&mut s);
        defs.insert(schema_name(&info), s);
    }
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.36.0"},
        "paths": paths, "definitions": defs})
}

fn fix_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                *r = r.replace("#/components/schemas/", "#/definitions/");
            }
            for child in m.values_mut() {
                fix_refs(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(fix_refs),
        _ => {}
    }
}

/// Serves `/openapi/...`; returns (content type, body).
pub fn serve(
    registry: &Registry,
    rest: &[&str],
    _q: &Query,
    accept: &str,
) -> ApiResult<(&'static str, String)> {
    let json_ok =
        accept.is_empty() || accept.contains("application/json") || accept.contains("*/*");
    match rest {
        ["v2"] => {
            if !json_ok {
                return Err(ApiError::NotAcceptable);
            }
            Ok(("application/json", v2(registry).to_string()))
        }
        ["v3"] => Ok(("application/json", v3_root(registry).to_string())),
        ["v3", "api", v] => group_version_doc(registry, "", v)
            .map(|d| ("application/json", d.to_string()))
            .ok_or(ApiError::NoRoute),
        ["v3", "apis", g, v] => group_version_doc(registry, g, v)
            .map(|d| ("application/json", d.to_string()))
            .ok_or(ApiError::NoRoute),
        _ => Err(ApiError::NoRoute),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_version_has_patch_operations_with_field_validation() {
        let r = Registry::with_builtins();
        let root = v3_root(&r);
        assert!(
            root["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
        let doc = group_version_doc(&r, "apps", "v1").unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
    }
}
