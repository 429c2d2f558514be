//! Object-metadata helpers shared by every resource: timestamps, uids and typed access into
//! generic JSON objects (what a valid name is, is [`crate::names`]').
//!
//! Objects are plain `serde_json::Value`s; this module is the one place that knows where
//! `metadata.*` fields live.

use serde_json::{Map, Value};

use crate::error::FieldError;

/// The current time as kube-apiserver writes timestamps (RFC 3339, seconds, UTC).
pub fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .map(|t| t.to_string())
        .unwrap_or_else(|_| now.to_string())
}

/// Parses an RFC 3339 timestamp to seconds since the epoch.
pub fn parse_time(s: &str) -> Option<i64> {
    s.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// A random (version 4) UUID.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Five random lowercase alphanumerics, as appended to `generateName`.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes: [u8; 5] = rand::random();
    bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

pub use crate::names::NameRule;

/// Checks `metadata.ownerReferences` as kube-apiserver does: each reference names an
/// apiVersion with a version, a kind, a name and a uid, no Event owns anything, and at most one
/// reference is the controller. The field paths carry no index, as kube-apiserver's.
pub fn validate_owner_references(refs: &Value) -> Vec<FieldError> {
    const FIELD: &str = "metadata.ownerReferences";
    let Some(refs) = refs.as_array() else {
        return Vec::new();
    };
    let text = |r: &Value, key: &str| r.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    for r in refs {
        let api_version = text(r, "apiVersion");
        let kind = text(r, "kind");
        // A malformed group/version has no version, as kube-apiserver parses it.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => *v,
            [_, v] => *v,
            _ => "",
        };
        let empty = [
            (
                "apiVersion",
                version.is_empty(),
                "version must not be empty",
            ),
            ("kind", kind.is_empty(), "must not be empty"),
            ("name", text(r, "name").is_empty(), "must not be empty"),
            ("uid", text(r, "uid").is_empty(), "must not be empty"),
        ];
        for (key, missing, detail) in empty {
            if missing {
                errs.push(FieldError::invalid(
                    format!("{FIELD}.{key}"),
                    &Value::String(text(r, key)),
                    detail,
                ));
            }
        }
        if api_version == "v1" && kind == "Event" {
            errs.push(owner_error(
                owner_reference_json(r),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{kind}/{}", text(r, "name"));
            match &first_controller {
                Some(first) => {
                    let all: Vec<String> = refs.iter().map(owner_reference_json).collect();
                    errs.push(owner_error(
                        format!("[{}]", all.join(",")),
                        &format!(
                            "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                        ),
                    ));
                }
                None => first_controller = Some(this),
            }
        }
    }
    errs
}

fn owner_error(value: String, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field: "metadata.ownerReferences".into(),
        message: format!("metadata.ownerReferences: Invalid value: {value}: {detail}"),
    }
}

/// An owner reference as kube-apiserver prints it in a message: its fields in the order of the
/// Go type, the optional ones only when set.
fn owner_reference_json(r: &Value) -> String {
    let mut fields = Vec::new();
    for key in ["apiVersion", "kind", "name", "uid"] {
        let v = r.get(key).cloned().unwrap_or(Value::String(String::new()));
        fields.push(format!("{}:{}", Value::String(key.into()), v));
    }
    for key in ["controller", "blockOwnerDeletion"] {
        if let Some(v) = r.get(key).filter(|v| !v.is_null()) {
            fields.push(format!("{}:{}", Value::String(key.into()), v));
        }
    }
    format!("{{{}}}", fields.join(","))
}

/// Read-only accessors over an object's metadata.
pub trait ObjectMeta {
    fn meta(&self) -> Option<&Map<String, Value>>;
    /// `metadata.<key>`: what `pointer("/metadata/<key>")` reads, without parsing a pointer
    /// (which allocates) on the write path.
    fn meta_field(&self, key: &str) -> Option<&Value> {
        self.meta().and_then(|m| m.get(key))
    }
    fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta_field(key).and_then(Value::as_str)
    }
    fn name(&self) -> &str {
        self.meta_str("name").unwrap_or("")
    }
    fn namespace(&self) -> &str {
        self.meta_str("namespace").unwrap_or("")
    }
    fn uid(&self) -> &str {
        self.meta_str("uid").unwrap_or("")
    }
    fn resource_version(&self) -> &str {
        self.meta_str("resourceVersion").unwrap_or("")
    }
    fn finalizers(&self) -> Vec<String> {
        self.meta()
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
    fn is_deleting(&self) -> bool {
        self.meta_str("deletionTimestamp").is_some()
    }
    fn labels(&self) -> Option<&Map<String, Value>> {
        self.meta()
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
    }
}

impl ObjectMeta for Value {
    fn meta(&self) -> Option<&Map<String, Value>> {
        self.get("metadata").and_then(Value::as_object)
    }
}

/// Mutable access to `metadata`, creating it when absent or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("object ensured above");
    let entry = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("object ensured above")
}

/// The PartialObjectMetadata of an object whose metadata is `metadata`.
pub fn partial_of(metadata: Value) -> Value {
    let metadata = if metadata.is_null() {
        serde_json::json!({})
    } else {
        metadata
    };
    serde_json::json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_version_4_and_unique() {
        let a = new_uid();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert_ne!(a, new_uid());
    }

    #[test]
    fn owner_references_need_version_kind_name_and_uid_and_one_controller() {
        use serde_json::json;
        let ok = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "1",
            "controller": true}]);
        assert!(validate_owner_references(&ok).is_empty());
        let empty = json!([{"apiVersion": "apps/", "kind": "", "name": "", "uid": ""}]);
        let messages: Vec<String> = validate_owner_references(&empty)
            .into_iter()
            .map(|e| e.message)
            .collect();
        assert_eq!(
            messages,
            [
                "metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.name: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty",
            ]
        );
        let event = json!([{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}]);
        assert_eq!(
            validate_owner_references(&event)[0].message,
            "metadata.ownerReferences: Invalid value: {\"apiVersion\":\"v1\",\"kind\":\"Event\",\"name\":\"e\",\"uid\":\"1\"}: /v1, Kind=Event is disallowed from being an owner"
        );
        let three = json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "2", "controller": false,
             "blockOwnerDeletion": true},
            {"apiVersion": "v1", "kind": "Secret", "name": "c", "uid": "3", "controller": true},
        ]);
        let errs = validate_owner_references(&three);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.ownerReferences");
        assert!(
            errs[0].message.ends_with(
                ",\"controller\":false,\"blockOwnerDeletion\":true},{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"name\":\"c\",\"uid\":\"3\",\"controller\":true}]: Only one reference can have Controller set to true. Found \"true\" in references for ConfigMap/a and Secret/c"
            ),
            "{}",
            errs[0].message
        );
    }

    #[test]
    fn timestamps_round_trip() {
        let t = now_rfc3339();
        assert!(t.ends_with('Z'));
        assert!(parse_time(&t).is_some());
    }
}
