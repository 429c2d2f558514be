//! Decoding a request body as kube-apiserver's Go types decode it: duplicate JSON keys and
//! fields the type does not declare are noted in document order (what `fieldValidation`
//! warns of or refuses, worded as kube's strict decoder words them), undeclared fields are
//! dropped, and a built-in kind's object is re-encoded as its Go type encodes it (empty
//! `omitempty` fields left out, non-omitempty fields present with their zero value).

use std::fmt::{self, Write as _};

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::schema::{Omit, Schema, TypeId};

/// A decoded body and what strict decoding found in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub object: Value,
    /// `duplicate field "data.a"`, `unknown field "spec.bogus"`, in document order.
    pub strict_errors: Vec<String>,
}

/// An object the server itself writes: nothing to note.
impl From<Value> for Decoded {
    fn from(object: Value) -> Self {
        Decoded {
            object,
            strict_errors: Vec::new(),
        }
    }
}

/// Decodes JSON; with a type, fields it does not declare are dropped and noted.
pub fn decode_json(
    bytes: &[u8],
    ty: Option<(&Schema, TypeId)>,
) -> Result<Decoded, serde_json::Error> {
    let mut errors = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let object = Node {
        ty,
        path: String::new(),
        errors: &mut errors,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(Decoded {
        object,
        strict_errors: errors,
    })
}

/// One value being decoded: its type (None: anything goes), where it is, what was found.
struct Node<'a, 's> {
    ty: Option<(&'s Schema, TypeId)>,
    path: String,
    errors: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let elem = self.ty.and_then(|(s, t)| {
            let list = s.atom(t).list.as_ref()?;
            Some((s, list.elem))
        });
        let mut out = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, out.len());
            let node = Node {
                ty: elem,
                path,
                errors: &mut *self.errors,
            };
            match seq.next_element_seed(node)? {
                Some(v) => out.push(v),
                None => break,
            }
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let map = self
            .ty
            .and_then(|(s, t)| Some((s, s.atom(t).map.as_ref()?)));
        let mut out = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            let child = match map {
                Some((s, m)) => match m.type_of(&key) {
                    Some(t) => Some((s, t)),
                    None => {
                        self.errors.push(format!("unknown field {}", quote(&path)));
                        access.next_value::<IgnoredAny>()?;
                        continue;
                    }
                },
                None => None,
            };
            if out.contains_key(&key) {
                self.errors
                    .push(format!("duplicate field {}", quote(&path)));
            }
            let node = Node {
                ty: child,
                path,
                errors: &mut *self.errors,
            };
            let v = access.next_value_seed(node)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

fn quote(s: &str) -> String {
    super::set::go_quote(s)
}

/// Re-encodes a built-in kind's object as its Go type encodes it: undeclared fields dropped
/// (and noted, as paths, in `unknown`), empty `omitempty` fields left out, absent or `null`
/// non-omitempty fields given their zero value.
pub fn normalize(schema: &Schema, ty: TypeId, v: &mut Value, unknown: &mut Vec<String>) {
    normalize_at(schema, ty, v, &mut String::new(), unknown);
}

fn normalize_at(
    schema: &Schema,
    ty: TypeId,
    v: &mut Value,
    path: &mut String,
    unknown: &mut Vec<String>,
) {
    let atom = schema.atom(ty);
    match v {
        Value::Array(items) => {
            if let Some(list) = &atom.list {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    // Writing to a String cannot fail.
                    let _ = write!(path, "[{i}]");
                    normalize_at(schema, list.elem, item, path, unknown);
                    path.truncate(len);
                }
            }
        }
        Value::Object(entries) => {
            let Some(map) = &atom.map else { return };
            if map.fields.is_empty() {
                // A map (or untyped value): its entries are values of its element type.
                if let Some(elem) = map.elem {
                    for (key, child) in entries.iter_mut() {
                        let len = path.len();
                        push_key(path, key);
                        normalize_at(schema, elem, child, path, unknown);
                        path.truncate(len);
                    }
                }
                return;
            }
            // Entries are changed in place; the few a decoder drops are removed after.
            let mut dropped = Vec::new();
            for (key, child) in entries.iter_mut() {
                let len = path.len();
                push_key(path, key);
                match map.field(key) {
                    None if map.elem.is_none() => {
                        unknown.push(path.clone());
                        dropped.push(key.clone());
                    }
                    None => {
                        if let Some(elem) = map.elem {
                            normalize_at(schema, elem, child, path, unknown);
                        }
                    }
                    Some(field) if child.is_null() => {
                        if let Some(zero) = field_zero(schema, field) {
                            *child = zero;
                        } else if field.omit != Omit::Never {
                            dropped.push(key.clone());
                        }
                    }
                    Some(field) => {
                        normalize_at(schema, field.ty, child, path, unknown);
                        if omitted(schema, field, child) {
                            dropped.push(key.clone());
                        }
                    }
                }
                path.truncate(len);
            }
            for key in &dropped {
                entries.remove(key);
            }
            for field in &map.fields {
                if !entries.contains_key(&field.name)
                    && let Some(zero) = field_zero(schema, field)
                {
                    entries.insert(field.name.clone(), zero);
                }
            }
        }
        _ => {}
    }
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// What an absent field holds once decoded.
fn field_zero(schema: &Schema, field: &super::schema::Field) -> Option<Value> {
    match &field.zero {
        Some(Value::Object(o)) if o.is_empty() => Some(schema.zero(field.ty)),
        other => other.clone(),
    }
}

/// Whether Go leaves a decoded field out of its encoding.
fn omitted(schema: &Schema, field: &super::schema::Field, v: &Value) -> bool {
    match field.omit {
        Omit::Never => false,
        Omit::Nil => v.is_null(),
        Omit::Empty => match v {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(m) => m.is_empty(),
        },
        Omit::Zero => v.is_null() || *v == schema.zero(field.ty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::ObjectType;
    use serde_json::json;

    fn config_map() -> ObjectType {
        ObjectType::builtin("v1", "ConfigMap").unwrap()
    }

    #[test]
    fn strict_decoding_notes_unknown_and_duplicate_fields_in_document_order() {
        let t = config_map();
        let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","bogusMeta":1},
            "data":{"a":"1","a":"2"},"bogus":{"y":1}}"#;
        let d = decode_json(body, Some((&t.schema, t.root))).unwrap();
        assert_eq!(
            d.strict_errors,
            vec![
                "unknown field \"metadata.bogusMeta\"",
                "duplicate field \"data.a\"",
                "unknown field \"bogus\""
            ]
        );
        assert_eq!(
            d.object,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                "data": {"a": "2"}})
        );
        let untyped = decode_json(br#"{"a":{"b":[{"c":1,"c":2}]}}"#, None).unwrap();
        assert_eq!(untyped.strict_errors, vec!["duplicate field \"a.b[0].c\""]);
    }

    #[test]
    fn normalizing_encodes_as_the_go_type_does() {
        let t = ObjectType::builtin("v1", "Event").unwrap();
        let mut event = json!({"metadata": {"name": "e", "labels": {}}, "count": 0,
            "involvedObject": {"kind": "Pod", "name": ""}, "related": null, "message": "m",
            "bogus": 1});
        let mut unknown = Vec::new();
        normalize(&t.schema, t.root, &mut event, &mut unknown);
        assert_eq!(unknown, vec!["bogus"]);
        assert_eq!(
            event,
            json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod"},
                "message": "m", "eventTime": null, "firstTimestamp": null,
                "lastTimestamp": null, "reportingComponent": "", "reportingInstance": "",
                "source": {}})
        );
    }
}
