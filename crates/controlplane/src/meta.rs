//! Object-metadata helpers shared by every resource: timestamps, uids and typed access into
//! generic JSON objects (what a valid name is, is [`crate::names`]').
//!
//! Objects are plain `serde_json::Value`s; this module is the one place that knows where
//! `metadata.*` fields live.

use serde_json::{Map, Value};

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

/// Read-only accessors over an object's metadata.
pub trait ObjectMeta {
    fn meta(&self) -> Option<&Map<String, Value>>;
    fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta().and_then(|m| m.get(key)).and_then(Value::as_str)
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
    fn timestamps_round_trip() {
        let t = now_rfc3339();
        assert!(t.ends_with('Z'));
        assert!(parse_time(&t).is_some());
    }
}
