//! How objects are written, stored and answered, byte for byte as kube-apiserver writes them:
//! JSON of built-in kinds in Go struct order (`kind`, `apiVersion`, `metadata` in ObjectMeta's
//! order, then the type's own fields; maps sorted), everything else (custom resources) sorted
//! at every level, strings escaped as Go escapes them, and every body ending in a newline; and
//! YAML (see [`yaml`]).
//!
//! Objects are stored in these bytes (see [`crate::storage`]), so an object served as stored is
//! answered without being decoded or written again.
//!
//! Pure: values in, bytes out.

mod order;
pub mod yaml;

use serde_json::{Map, Value};

use order::{Child, TYPES};

/// `value` as an answer's body: its JSON and a newline.
pub fn json(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_json(value, &mut out);
    out.push(b'\n');
    out
}

/// `value`'s JSON (no newline), appended to `out`.
pub fn write_json(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_object(map, out),
        other => write_plain(other, out),
    }
}

/// A list's metadata (ListMeta) in Go order.
pub fn write_list_meta(meta: &Map<String, Value>, out: &mut Vec<u8>) {
    match TYPES.of("meta.k8s.io/v1", "ListMeta") {
        Some(id) => write_struct(meta, id, out),
        None => write_sorted(meta, out),
    }
}

/// The prefix every built-in object of `api_version` and `kind` starts with when written by
/// [`json`]: list items of built-in kinds are answered without it (their type is the list's).
pub fn type_prefix(api_version: &str, kind: &str) -> Option<Vec<u8>> {
    let id = TYPES.of(api_version, kind)?;
    let leads = TYPES.shapes[id as usize]
        .fields
        .iter()
        .take(2)
        .map(|(name, _)| &**name)
        .eq(["kind", "apiVersion"]);
    if !leads {
        return None;
    }
    let mut out = b"{\"kind\":".to_vec();
    write_str(kind, &mut out);
    out.extend_from_slice(b",\"apiVersion\":");
    write_str(api_version, &mut out);
    out.push(b',');
    Some(out)
}

/// An object: in its type's order when its apiVersion and kind name a built-in type.
fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let str_of = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or("");
    match TYPES.of(str_of("apiVersion"), str_of("kind")) {
        Some(id) if map.contains_key("kind") => write_struct(map, id, out),
        _ => write_sorted(map, out),
    }
}

fn write_struct(map: &Map<String, Value>, id: u32, out: &mut Vec<u8>) {
    let shape = &TYPES.shapes[id as usize];
    out.push(b'{');
    let mut first = true;
    let mut written = 0;
    for (name, child) in &shape.fields {
        let Some(v) = map.get(&**name) else {
            continue;
        };
        comma(&mut first, out);
        write_str(name, out);
        out.push(b':');
        write_child(v, *child, out);
        written += 1;
    }
    // Fields the type does not declare (kept as given: this server does not prune them) go
    // last, sorted.
    if written < map.len() {
        for (k, v) in map.iter().filter(|(k, _)| !shape.declares(k)) {
            comma(&mut first, out);
            write_str(k, out);
            out.push(b':');
            write_plain(v, out);
        }
    }
    out.push(b'}');
}

fn write_child(v: &Value, child: Child, out: &mut Vec<u8>) {
    match (v, child) {
        (Value::Object(map), Child::Struct(id)) => write_struct(map, id, out),
        (Value::Array(items), Child::List(id)) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_child(item, Child::Struct(id), out);
            }
            out.push(b']');
        }
        (Value::Object(map), Child::Map(id)) => {
            out.push(b'{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(k, out);
                out.push(b':');
                write_child(item, Child::Struct(id), out);
            }
            out.push(b'}');
        }
        (Value::Object(map), Child::Embedded) => write_object(map, out),
        (other, _) => write_plain(other, out),
    }
}

fn comma(first: &mut bool, out: &mut Vec<u8>) {
    if !std::mem::take(first) {
        out.push(b',');
    }
}

/// A value with no type: objects sorted at every level.
fn write_plain(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            // Writing a number into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, n);
        }
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_plain(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_sorted(map, out),
    }
}

fn write_sorted(map: &Map<String, Value>, out: &mut Vec<u8>) {
    // serde_json's map is ordered by key, as Go orders a map's keys.
    out.push(b'{');
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(k, out);
        out.push(b':');
        write_plain(v, out);
    }
    out.push(b'}');
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A JSON string as Go's encoder writes it: `<`, `>` and `&` escaped as `\u003c` and so on,
/// as are U+2028 and U+2029; control characters as `\n`, `\r`, `\t` or `\u00XX`.
fn write_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0..0x20 | b'<' | b'>' | b'&' => Some(b""),
            // U+2028 and U+2029: E2 80 A8 / E2 80 A9.
            0xE2 if bytes.get(i + 1) == Some(&0x80)
                && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) =>
            {
                Some(b"")
            }
            _ => None,
        };
        let Some(escape) = escape else {
            i += 1;
            continue;
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            let (code, len) = if b == 0xE2 {
                (if bytes[i + 2] == 0xA8 { 0x2028 } else { 0x2029 }, 3)
            } else {
                (u32::from(b), 1)
            };
            out.extend_from_slice(b"\\u");
            for shift in [12, 8, 4, 0] {
                out.push(HEX[((code >> shift) & 0xF) as usize]);
            }
            i += len;
        } else {
            out.extend_from_slice(escape);
            i += 1;
        }
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(v: &Value) -> String {
        String::from_utf8(json(v)).unwrap()
    }

    #[test]
    fn a_built_in_object_is_written_in_go_struct_order_and_ends_in_a_newline() {
        let cm = json!({"apiVersion": "v1", "data": {"z": "1", "a": "2"}, "kind": "ConfigMap",
            "metadata": {"uid": "u", "name": "bytes", "managedFields": [{"time": "t",
            "fieldsV1": {"f:data": {}}, "manager": "m", "operation": "Update",
            "apiVersion": "v1", "fieldsType": "FieldsV1"}], "namespace": "n",
            "labels": {"b": "2", "a": "1"}}});
        assert_eq!(
            text(&cm),
            concat!(
                r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"bytes","#,
                r#""namespace":"n","uid":"u","labels":{"a":"1","b":"2"},"managedFields":"#,
                r#"[{"manager":"m","operation":"Update","apiVersion":"v1","time":"t","#,
                r#""fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]},"data":{"a":"2","z":"1"}}"#,
                "\n"
            )
        );
    }

    #[test]
    fn a_custom_resource_is_sorted_at_every_level() {
        let cr = json!({"kind": "Widget", "apiVersion": "example.com/v1",
            "metadata": {"name": "w", "generation": 1}, "spec": {"size": 3, "color": "blue"}});
        assert_eq!(
            text(&cr),
            "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"generation\":1,\"name\":\"w\"},\"spec\":{\"color\":\"blue\",\"size\":3}}\n"
        );
    }

    #[test]
    fn a_status_keeps_its_go_order_and_undeclared_fields_go_last() {
        let st = json!({"code": 404, "details": {"kind": "configmaps", "name": "x"},
            "reason": "NotFound", "message": "m", "status": "Failure", "metadata": {},
            "apiVersion": "v1", "kind": "Status", "extra": true});
        assert_eq!(
            text(&st),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"m\",\"reason\":\"NotFound\",\"details\":{\"name\":\"x\",\"kind\":\"configmaps\"},\"code\":404,\"extra\":true}\n"
        );
    }

    #[test]
    fn embedded_objects_are_ordered_by_their_own_kind() {
        let row = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
            "columnDefinitions": [], "rows": [{"object": {"metadata": {"uid": "u", "name": "a"},
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"}, "cells": ["a"]}]});
        let written = text(&row);
        assert!(
            written.contains(r#"{"cells":["a"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","uid":"u"}}}"#),
            "{written}"
        );
    }

    #[test]
    fn strings_are_escaped_as_go_escapes_them() {
        let mut out = Vec::new();
        write_str("a<b>&\"\\\n\u{1}\u{2028}é", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a\u003cb\u003e\u0026\"\\\n\u0001\u2028é""#
        );
    }

    #[test]
    fn written_json_reads_back_as_the_same_value() {
        let v = json!({"kind": "Deployment", "apiVersion": "apps/v1",
            "metadata": {"name": "d", "labels": {"x": "<y>"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c",
            "image": "i", "ports": [{"containerPort": 80}]}]}}}, "status": {}});
        assert_eq!(serde_json::from_slice::<Value>(&json(&v)).unwrap(), v);
    }

    #[test]
    fn the_type_prefix_is_what_built_in_objects_start_with() {
        let prefix = type_prefix("v1", "ConfigMap").unwrap();
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}});
        assert!(json(&cm).starts_with(&prefix));
        assert!(type_prefix("example.com/v1", "Widget").is_none());
    }
}
