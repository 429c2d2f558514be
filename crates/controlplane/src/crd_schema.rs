//! Structural-schema handling for custom resources: pruning of unknown fields, defaulting and
//! validation against a CRD version's `openAPIV3Schema`, with every field error worded as
//! kube-apiserver words it (`spec.replicas: Invalid value: "string": spec.replicas in body
//! must be of type integer: "string"`).
//!
//! Covers the OpenAPI v3 subset structural schemas use: type, properties, required, items,
//! enum, minimum/maximum (and exclusive), minLength/maxLength, pattern, minItems/maxItems,
//! format date-time, default, nullable, additionalProperties, x-kubernetes-int-or-string,
//! x-kubernetes-preserve-unknown-fields, x-kubernetes-embedded-resource, anyOf/oneOf/allOf/not.

use serde_json::{Map, Value};

use crate::error::FieldError;

/// A CRD version's `openAPIV3Schema` as objects are decoded and validated by it: whole (as
/// published), and as its body's schema, without the `apiVersion`, `kind` and `metadata`
/// every object has (their schema is the API's own), made once rather than on every write.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectSchema {
    whole: Value,
    body: Value,
}

impl ObjectSchema {
    pub fn new(whole: Value) -> ObjectSchema {
        let mut body = whole.clone();
        if let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut) {
            for key in ["metadata", "apiVersion", "kind"] {
                props.remove(key);
            }
        }
        ObjectSchema { whole, body }
    }

    /// The schema as the CRD declares it.
    pub fn whole(&self) -> &Value {
        &self.whole
    }

    /// Prunes, defaults and validates `obj` in place; returns every field error.
    pub fn validate_object(&self, obj: &mut Value) -> Vec<FieldError> {
        if !obj.is_object() {
            return vec![FieldError::invalid("", obj, "must be an object")];
        }
        let mut errs = Vec::new();
        self.decode_then(obj, &mut Vec::new(), |schema, body| {
            check(schema, body, "", &mut errs);
        });
        errs
    }

    /// Prunes and defaults `obj` and validates its status only, against the schema's `status`,
    /// with messages relative to the status (`conditions[0].reason in body ...`) and fields named
    /// from the object's root (`status.conditions[0].reason`).
    pub fn validate_status(&self, obj: &mut Value) -> Vec<FieldError> {
        if !obj.is_object() {
            return vec![FieldError::invalid("", obj, "must be an object")];
        }
        let mut errs = Vec::new();
        self.decode_then(obj, &mut Vec::new(), |schema, body| {
            if let (Some(status_schema), Some(status)) =
                (schema.pointer("/properties/status"), body.get("status"))
            {
                check(status_schema, status, "", &mut errs);
            }
        });
        errs.into_iter()
            .map(|e| {
                let field = match e.field.as_str() {
                    "" => "status".to_string(),
                    f if f.starts_with('[') => format!("status{f}"),
                    f => format!("status.{f}"),
                };
                let detail = e
                    .message
                    .strip_prefix(&format!("{}: ", e.field))
                    .unwrap_or(&e.message)
                    .to_string();
                FieldError {
                    reason: e.reason,
                    message: format!("{field}: {detail}"),
                    field,
                }
            })
            .collect()
    }

    /// Prunes the fields the schema does not declare and fills in its defaults, as
    /// kube-apiserver does when it decodes a custom resource; returns the pruned fields' paths.
    pub fn decode(&self, obj: &mut Value) -> Vec<String> {
        let mut removed = Vec::new();
        self.decode_then(obj, &mut removed, |_, _| {});
        removed
    }

    /// Decodes `obj` as [`ObjectSchema::decode`] does (the pruned fields' paths into `removed`),
    /// then runs `then` on its body (the object without apiVersion, kind and metadata, which the
    /// body's schema does not describe) with that schema. The body's fields are moved out and
    /// back, not copied. Nothing is done to what is not an object.
    fn decode_then(
        &self,
        obj: &mut Value,
        removed: &mut Vec<String>,
        then: impl FnOnce(&Value, &Value),
    ) {
        let Some(root) = obj.as_object_mut() else {
            return;
        };
        let (mut kept, mut body) = (Map::new(), Map::new());
        for (k, v) in std::mem::take(root) {
            match k.as_str() {
                "apiVersion" | "kind" | "metadata" => kept.insert(k, v),
                _ => body.insert(k, v),
            };
        }
        let mut body = Value::Object(body);
        prune(&self.body, &mut body, "", removed);
        apply_defaults(&self.body, &mut body);
        then(&self.body, &body);
        if let Value::Object(fields) = body {
            kept.extend(fields);
        }
        *root = kept;
    }
}

/// How deep a schema node sits, for kube-apiserver's structural schema rules.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

/// What makes a CRD version's `openAPIV3Schema` (at `at`) unacceptable, as kube-apiserver
/// finds it: the rules of structural schemas (sorted, as kube sorts them), then those of its
/// OpenAPI schema validation; and whether the schema is structural (only then are its CEL
/// rules compiled).
pub fn definition_errors(schema: &Value, at: &str) -> (Vec<FieldError>, bool) {
    let mut structural = Vec::new();
    invariants(schema, Level::Root, at, &mut structural);
    structural.sort_by(|a, b| a.message.cmp(&b.message));
    let is_structural = structural.is_empty();
    let mut errs = structural;
    openapi_rules(schema, at, &mut errs);
    (errs, is_structural)
}

fn child_path(at: &str, key: &str) -> String {
    format!("{at}.properties[{key}]")
}

fn invariants(s: &Value, lvl: Level, at: &str, errs: &mut Vec<FieldError>) {
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    let props = s.get("properties").and_then(Value::as_object);
    if ty == "array" && s.get("items").is_none() {
        errs.push(FieldError::required(
            format!("{at}.items"),
            "must be specified",
        ));
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        invariants(items, Level::Item, &format!("{at}.items"), errs);
    }
    for (k, v) in props.into_iter().flatten() {
        invariants(v, Level::Field, &child_path(at, k), errs);
    }
    if let Some(additional) = s.get("additionalProperties") {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                format!("{at}.additionalProperties"),
                "must not be used at the root",
            ));
        }
        if additional.is_object() {
            invariants(
                additional,
                Level::Field,
                &format!("{at}.additionalProperties"),
                errs,
            );
        }
    }
    let int_or_string = flag(s, "x-kubernetes-int-or-string");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            format!("{at}.x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            format!("{at}.x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            format!("{at}.x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in s
            .get(combinator)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            // `x-kubernetes-int-or-string` may spell out its integer and string types.
            let int_or_string_types = int_or_string
                && (combinator == "anyOf" || combinator == "allOf")
                && matches!(
                    sub.get("type").and_then(Value::as_str),
                    Some("integer" | "string")
                );
            if !int_or_string_types {
                nested_value_validation(sub, &format!("{at}.{combinator}[{i}]"), errs);
            }
        }
    }
    if let Some(not) = s.get("not").filter(|n| n.is_object()) {
        nested_value_validation(not, &format!("{at}.not"), errs);
    }
    if embedded && ty != "object" {
        if ty.is_empty() {
            errs.push(FieldError::required(
                format!("{at}.type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                format!("{at}.type"),
                &Value::String(ty.into()),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(format!("{at}.type"), detail));
    }
    if embedded && s.get("additionalProperties").is_some() {
        errs.push(FieldError::forbidden(
            format!("{at}.additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            format!("{at}.type"),
            &Value::String(ty.into()),
            "must be object at the root",
        ));
    }
    let check_metadata = lvl == Level::Root || embedded;
    for field in ["kind", "apiVersion"] {
        if let Some(p) = props.and_then(|p| p.get(field))
            && check_metadata
        {
            let t = p.get("type").and_then(Value::as_str).unwrap_or("");
            if t != "string" {
                errs.push(FieldError::invalid(
                    format!("{}.type", child_path(at, field)),
                    &Value::String(t.into()),
                    "must be string",
                ));
            }
        }
    }
    if let Some(meta) = props.and_then(|p| p.get("metadata")) {
        let path = child_path(at, "metadata");
        let t = meta.get("type").and_then(Value::as_str).unwrap_or("");
        if check_metadata && t != "object" {
            errs.push(FieldError::invalid(
                format!("{path}.type"),
                &Value::String(t.into()),
                "must be object",
            ));
        }
        if lvl == Level::Root {
            let allowed = |k: &str| matches!(k, "type" | "properties" | "default");
            let named_only = meta
                .get("properties")
                .and_then(Value::as_object)
                .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
            let meta_keys_ok = meta
                .as_object()
                .is_some_and(|m| m.keys().all(|k| allowed(k)));
            if !named_only || !meta_keys_ok {
                errs.push(FieldError::forbidden(
                    path,
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if embedded && !preserve && props.is_none_or(|p| p.is_empty()) {
        errs.push(FieldError::required(
            format!("{at}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// What a schema under `allOf`, `anyOf`, `oneOf` or `not` may not say to stay structural.
fn nested_value_validation(s: &Value, at: &str, errs: &mut Vec<FieldError>) {
    for (key, detail) in [
        ("type", "must be empty to be structural"),
        ("additionalProperties", "must be undefined to be structural"),
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        ),
        (
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        ),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ] {
        if s.get(key).is_some() {
            errs.push(FieldError::forbidden(format!("{at}.{key}"), detail));
        }
    }
    for (key, detail) in [
        ("nullable", "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        ),
    ] {
        if flag(s, key) {
            errs.push(FieldError::forbidden(format!("{at}.{key}"), detail));
        }
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            if k == "metadata" {
                errs.push(FieldError::forbidden(
                    child_path(at, k),
                    "must not be specified in a nested context",
                ));
            }
            nested_value_validation(v, &child_path(at, k), errs);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        nested_value_validation(items, &format!("{at}.items"), errs);
    }
}

/// kube-apiserver's OpenAPI schema rules beyond structurality.
fn openapi_rules(s: &Value, at: &str, errs: &mut Vec<FieldError>) {
    if flag(s, "uniqueItems") {
        errs.push(FieldError::forbidden(
            format!("{at}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let props = s.get("properties").and_then(Value::as_object);
    if let Some(additional) = s.get("additionalProperties") {
        if props.is_some_and(|p| !p.is_empty()) && additional != &Value::Bool(true) {
            errs.push(FieldError::forbidden(
                format!("{at}.additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if additional.is_object() {
            openapi_rules(additional, &format!("{at}.additionalProperties"), errs);
        }
    }
    for (k, v) in props.into_iter().flatten() {
        openapi_rules(v, &child_path(at, k), errs);
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        openapi_rules(items, &format!("{at}.items"), errs);
    }
}

/// The formats kube-apiserver validates strings by (without dashes, as it compares them).
pub const STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

/// The `format`s of a schema kube-apiserver does not know (it warns of each).
pub fn unrecognized_formats(s: &Value, out: &mut Vec<String>) {
    if let Some(format) = s
        .get("format")
        .and_then(Value::as_str)
        .filter(|f| !f.is_empty())
    {
        let known = match s.get("type").and_then(Value::as_str).unwrap_or("") {
            "" | "string" => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
            "integer" => matches!(format, "int32" | "int64"),
            "number" => matches!(format, "float" | "double"),
            _ => false,
        };
        if !known {
            out.push(format.to_string());
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = s.get(key).filter(|v| v.is_object()) {
            unrecognized_formats(sub, out);
        }
    }
    for key in ["properties", "patternProperties", "definitions"] {
        for sub in s
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.values())
        {
            unrecognized_formats(sub, out);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for sub in s.get(key).and_then(Value::as_array).into_iter().flatten() {
            unrecognized_formats(sub, out);
        }
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Removes fields the schema does not describe, unless it preserves unknown fields, and
/// records the dotted path of each removed field.
pub fn prune(schema: &Value, v: &mut Value, path: &str, removed: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let embedded = flag(schema, "x-kubernetes-embedded-resource");
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(&k)).or(match additional {
                    Some(a) if a.is_object() => Some(a),
                    _ => None,
                });
                match sub {
                    Some(s) => {
                        if let Some(child) = map.get_mut(&k) {
                            prune(s, child, &join(path, &k), removed);
                        }
                    }
                    None => {
                        let keep = preserve || additional.and_then(Value::as_bool) == Some(true);
                        if !keep {
                            map.remove(&k);
                            removed.push(join(path, &k));
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(s, item, &format!("{path}[{i}]"), removed);
                }
            }
        }
        _ => {}
    }
}

/// Fills in `default`s of absent properties, recursively.
pub fn apply_defaults(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    if !map.contains_key(k)
                        && let Some(d) = s.get("default")
                    {
                        map.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = map.get_mut(k) {
                        apply_defaults(s, child);
                    }
                }
            }
            if let Some(a) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in map.iter_mut() {
                    if !schema
                        .get("properties")
                        .and_then(Value::as_object)
                        .is_some_and(|p| p.contains_key(k))
                    {
                        apply_defaults(a, child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    apply_defaults(s, item);
                }
            }
        }
        _ => {}
    }
}

/// Whether `s` matches a schema pattern (None if the pattern does not compile). Compiled
/// patterns are cached: validation runs on every write.
fn matches_pattern(pattern: &str, s: &str) -> Option<bool> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Option<regex::Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() > 1024 {
        map.clear();
    }
    let re = map
        .entry(pattern.to_string())
        .or_insert_with(|| regex::Regex::new(pattern).ok());
    re.as_ref().map(|re| re.is_match(s))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_ok(expected: &str, v: &Value) -> bool {
    let actual = type_name(v);
    match expected {
        "number" => actual == "number" || actual == "integer",
        other => other == actual,
    }
}

fn num_limit(schema: &Value, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn fmt_num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}

/// Validates `v` at `path` against `schema`, appending errors.
pub fn check(schema: &Value, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let shown = if path.is_empty() { "body" } else { path };
    if v.is_null() {
        if flag(schema, "nullable") || schema.get("type").is_none() {
            return;
        }
        let t = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("object");
        errs.push(FieldError::invalid(
            path,
            &Value::String("null".into()),
            format!("{shown} in body must be of type {t}: \"null\""),
        ));
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if !matches!(type_name(v), "integer" | "string") {
            errs.push(FieldError::invalid(
                path,
                &Value::String(type_name(v).into()),
                format!(
                    "{shown} in body must be of type integer,string: \"{}\"",
                    type_name(v)
                ),
            ));
            return;
        }
    } else if let Some(t) = schema.get("type").and_then(Value::as_str)
        && !type_ok(t, v)
    {
        errs.push(FieldError::invalid(
            path,
            &Value::String(type_name(v).into()),
            format!("{shown} in body must be of type {t}: \"{}\"", type_name(v)),
        ));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        errs.push(FieldError::not_supported(path, v, allowed));
    }
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = num_limit(schema, "minimum") {
                let excl = flag(schema, "exclusiveMinimum");
                if (excl && x <= min) || (!excl && x < min) {
                    let rel = if excl {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    errs.push(FieldError::invalid(
                        path,
                        v,
                        format!("{shown} in body should be {rel} {}", fmt_num(min)),
                    ));
                }
            }
            if let Some(max) = num_limit(schema, "maximum") {
                let excl = flag(schema, "exclusiveMaximum");
                if (excl && x >= max) || (!excl && x > max) {
                    let rel = if excl {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    errs.push(FieldError::invalid(
                        path,
                        v,
                        format!("{shown} in body should be {rel} {}", fmt_num(max)),
                    ));
                }
            }
            if let Some(m) = num_limit(schema, "multipleOf")
                && m > 0.0
                && (x / m).fract() != 0.0
            {
                errs.push(FieldError::invalid(
                    path,
                    v,
                    format!("{shown} in body should be a multiple of {}", fmt_num(m)),
                ));
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                errs.push(FieldError::invalid(
                    path,
                    v,
                    format!("{shown} in body should be at least {min} chars long"),
                ));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                errs.push(FieldError::too_long(path, max));
            }
            if let Some(p) = schema.get("pattern").and_then(Value::as_str)
                && matches_pattern(p, s) == Some(false)
            {
                errs.push(FieldError::invalid(
                    path,
                    v,
                    format!("{shown} in body should match '{p}'"),
                ));
            }
            if schema.get("format").and_then(Value::as_str) == Some("date-time")
                && crate::meta::parse_time(s).is_none()
            {
                errs.push(FieldError::invalid(
                    path,
                    v,
                    format!("{shown} in body must be of type date-time: {s:?}"),
                ));
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                errs.push(FieldError::invalid(
                    path,
                    &Value::from(n),
                    format!("{shown} in body should have at least {min} items"),
                ));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                errs.push(FieldError {
                    reason: "FieldValueTooMany",
                    field: path.to_string(),
                    message: format!("{path}: Too many: {n}: must have at most {max} items"),
                });
            }
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(s, item, &format!("{path}[{i}]"), errs);
                }
            }
            check_list_type(schema, items, path, errs);
        }
        Value::Object(map) => check_object(schema, map, path, errs),
        _ => {}
    }
    for (key, want) in [("anyOf", 1usize), ("oneOf", 1)] {
        if let Some(subs) = schema.get(key).and_then(Value::as_array) {
            let passing = subs
                .iter()
                .filter(|s| {
                    let mut e = Vec::new();
                    check(s, v, path, &mut e);
                    e.is_empty()
                })
                .count();
            let ok = if key == "anyOf" {
                passing >= want
            } else {
                passing == want
            };
            if !ok {
                let detail = if key == "anyOf" {
                    format!("{shown} in body must be valid against any of the given schemas")
                } else {
                    format!("{shown} in body must validate one and only one schema (oneOf)")
                };
                errs.push(FieldError::invalid(path, v, detail));
            }
        }
    }
    if let Some(subs) = schema.get("allOf").and_then(Value::as_array) {
        for s in subs {
            check(s, v, path, errs);
        }
    }
    if let Some(not) = schema.get("not") {
        let mut e = Vec::new();
        check(not, v, path, &mut e);
        if e.is_empty() {
            errs.push(FieldError::invalid(
                path,
                v,
                format!("{shown} in body must not validate the schema (not)"),
            ));
        }
    }
}

/// `x-kubernetes-list-type`: a `set` holds no item twice, a `map` no two items with the same
/// `x-kubernetes-list-map-keys` values (an absent key counts as a value of its own). Each
/// repeated value is reported once, at its second occurrence, as kube-apiserver does.
fn check_list_type(schema: &Value, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    let keyed: Vec<Value> = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => items.to_vec(),
        Some("map") => {
            if let Some(i) = items.iter().position(|x| !x.is_object() && !x.is_null()) {
                errs.push(FieldError::invalid(
                    format!("{path}[{i}]"),
                    &items[i],
                    "must be an object for an array of list-type map",
                ));
                return;
            }
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            items
                .iter()
                .map(|item| {
                    Value::Object(
                        keys.iter()
                            .filter_map(|k| Some((k.to_string(), item.get(*k)?.clone())))
                            .collect(),
                    )
                })
                .collect()
        }
        _ => return,
    };
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    for (i, key) in keyed.iter().enumerate() {
        let times = seen.entry(key.to_string()).or_default();
        *times += 1;
        if *times == 2 {
            // kube-apiserver prints the duplicated key as JSON here.
            let field = format!("{path}[{i}]");
            errs.push(FieldError {
                reason: "FieldValueDuplicate",
                message: format!("{field}: Duplicate value: {key}"),
                field,
            });
        }
    }
}

fn check_object(schema: &Value, map: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(req) = schema.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                errs.push(FieldError::required(join(path, r), ""));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (k, child) in map {
        if let Some(s) = props.and_then(|p| p.get(k)).or(additional) {
            check(s, child, &join(path, k), errs);
        }
    }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
        && (map.len() as u64) < min
    {
        errs.push(FieldError::invalid(
            path,
            &Value::from(map.len()),
            format!(
                "{} in body should have at least {min} properties",
                if path.is_empty() { "body" } else { path }
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["name"], "properties": {
                "replicas": {"type": "integer", "minimum": 1, "default": 1},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "tags": {"type": "array", "items": {"type": "string"}},
                "when": {"type": "string", "format": "date-time"}
            }},
            "status": {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        }})
    }

    fn messages(mut obj: Value) -> Vec<String> {
        ObjectSchema::new(schema())
            .validate_object(&mut obj)
            .into_iter()
            .map(|e| e.message)
            .collect()
    }

    #[test]
    fn type_errors_are_worded_like_kube_apiserver() {
        let m = messages(json!({"spec": {"name": "a", "replicas": "string"}}));
        assert_eq!(
            m,
            vec![
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
            ]
        );
    }

    #[test]
    fn every_field_error_is_listed() {
        let m = messages(
            json!({"spec": {"replicas": 0, "mode": "c", "tags": [1], "port": true,
            "when": "yesterday"}}),
        );
        assert!(
            m.contains(&"spec.name: Required value".to_string()),
            "{m:?}"
        );
        assert!(m.contains(&"spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1".to_string()), "{m:?}");
        assert!(
            m.contains(
                &"spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\"".to_string()
            ),
            "{m:?}"
        );
        assert!(m.contains(&"spec.tags[0]: Invalid value: \"integer\": spec.tags[0] in body must be of type string: \"integer\"".to_string()), "{m:?}");
        assert!(
            m.iter()
                .any(|x| x.starts_with("spec.port: Invalid value: \"boolean\"")),
            "{m:?}"
        );
        assert!(
            m.iter()
                .any(|x| x.starts_with("spec.when: Invalid value: \"yesterday\"")),
            "{m:?}"
        );
        assert_eq!(m.len(), 6, "{m:?}");
    }

    #[test]
    fn length_and_pattern_are_enforced() {
        let m = messages(json!({"spec": {"name": "ABCDEFG"}}));
        assert!(
            m.contains(&"spec.name: Too long: may not be more than 5 bytes".to_string()),
            "{m:?}"
        );
        assert!(
            m.contains(
                &"spec.name: Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'"
                    .to_string()
            ),
            "{m:?}"
        );
    }

    #[test]
    fn unknown_fields_are_pruned_unless_preserved_and_defaults_applied() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
            "junk": 1, "spec": {"name": "a", "extra": true, "free": {"anything": [1]}}});
        assert!(
            ObjectSchema::new(schema())
                .validate_object(&mut obj)
                .is_empty()
        );
        assert_eq!(obj["spec"]["replicas"], 1);
        assert!(obj.get("junk").is_none());
        assert!(obj["spec"].get("extra").is_none());
        assert_eq!(obj["spec"]["free"]["anything"], json!([1]));
        assert_eq!(obj["metadata"]["name"], "w");
    }

    #[test]
    fn decoding_prunes_undeclared_fields_names_them_and_defaults() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"name": "a", "extra": true, "tags": ["x"], "free": {"ok": 1}}});
        assert_eq!(
            ObjectSchema::new(schema()).decode(&mut obj),
            vec!["spec.extra".to_string()]
        );
        assert!(obj["spec"].get("extra").is_none());
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["metadata"]["name"], "w");
    }
}
