//! Objects written out as kube-apiserver writes them: a built-in kind as its Go type encodes
//! it (declared fields in declaration order, map keys sorted), and the object a JSON merge
//! patch makes as kube's merge patch library writes it (what the patch touched with its keys
//! sorted, the rest as the object was written).

use serde_json::Value;

use super::schema::{Schema, TypeId};

/// `v` as its Go type writes it; without a type, keys sorted.
pub fn go_json(schema: &Schema, ty: Option<TypeId>, v: &Value) -> String {
    let mut out = String::new();
    write(schema, ty, v, None, &mut out);
    out
}

/// The object merge patch `patch` made (`patched`), as kube-apiserver's merge patch library
/// writes it: every object the patch reached re-sorted, everything else as the Go type wrote
/// it.
pub fn merge_patched_json(
    schema: &Schema,
    ty: Option<TypeId>,
    patched: &Value,
    patch: &Value,
) -> String {
    let mut out = String::new();
    write(schema, ty, patched, Some(patch), &mut out);
    out
}

fn scalar(v: &Value, out: &mut String) {
    out.push_str(&v.to_string());
}

fn write(schema: &Schema, ty: Option<TypeId>, v: &Value, patch: Option<&Value>, out: &mut String) {
    let atom = ty.map(|t| schema.atom(t));
    match v {
        Value::Object(m) => {
            let map = atom.and_then(|a| a.map.as_ref());
            let touched = patch.and_then(Value::as_object);
            // Declared fields in the Go type's order, unless the patch reached this object.
            let mut keys: Vec<&String> = m.keys().collect();
            if touched.is_none()
                && let Some(map) = map
            {
                keys.sort_by_key(|k| match map.field(k) {
                    Some(f) => (0, f.order, k.as_str()),
                    None => (1, 0, k.as_str()),
                });
            }
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                let child_ty = map.and_then(|m| m.type_of(k));
                let child_patch = touched.and_then(|t| t.get(k)).filter(|p| p.is_object());
                write(schema, child_ty, &m[k], child_patch, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            let elem = atom.and_then(|a| a.list.as_ref()).map(|l| l.elem);
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(schema, elem, item, None, out);
            }
            out.push(']');
        }
        other => scalar(other, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::ObjectType;
    use serde_json::json;

    #[test]
    fn built_in_objects_are_written_in_go_struct_order() {
        let t = ObjectType::builtin("v1", "ConfigMap").unwrap();
        let cm = json!({"apiVersion": "v1", "data": {"z": "1", "a": "2"}, "kind": "ConfigMap",
            "metadata": {"uid": "u", "name": "n", "creationTimestamp": "t", "namespace": "ns"}});
        assert_eq!(
            go_json(&t.schema, Some(t.root), &cm),
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"n","namespace":"ns","uid":"u","creationTimestamp":"t"},"data":{"a":"2","z":"1"}}"#
        );
    }

    #[test]
    fn a_merge_patch_re_sorts_what_it_reached() {
        let t = ObjectType::builtin("v1", "ConfigMap").unwrap();
        let patched = json!({"apiVersion": "v1", "bogus": 1, "data": {"k": "v", "merged": "y"},
            "kind": "ConfigMap", "metadata": {"uid": "u", "name": "n"}});
        let patch = json!({"bogus": 1, "data": {"merged": "y"}});
        assert_eq!(
            merge_patched_json(&t.schema, Some(t.root), &patched, &patch),
            r#"{"apiVersion":"v1","bogus":1,"data":{"k":"v","merged":"y"},"kind":"ConfigMap","metadata":{"name":"n","uid":"u"}}"#
        );
    }
}
