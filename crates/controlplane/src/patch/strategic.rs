//! Strategic merge patch for built-in types, driven by field names rather than Go struct tags.
//!
//! Lists merged by key: containers, initContainers, ephemeralContainers, env, volumes,
//! imagePullSecrets (by `name`); volumeMounts (`mountPath`); volumeDevices (`devicePath`);
//! ports (`containerPort`); conditions (`type`); ownerReferences (`uid`); hostAliases (`ip`);
//! topologySpreadConstraints (`topologyKey`); readinessGates (`conditionType`).
//! Primitive lists merged as sets: finalizers. Every other list is replaced.
//! Directives: `$patch: replace|delete|merge`, `$retainKeys`, `$deleteFromPrimitiveList/<f>`,
//! `$setElementOrder/<f>` (accepted, order kept as merged).

use serde_json::{Map, Value};

/// The merge key of a list field, if it is merged by key.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "readinessGates" => "conditionType",
        _ => return None,
    })
}

/// Whether a primitive list field is merged as a set.
fn is_set(field: &str) -> bool {
    field == "finalizers"
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Merges `patch` into `doc` in place.
pub fn merge(doc: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *doc = patch.clone();
        return;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *doc = strip_directives(patch);
            return;
        }
        Some("delete") => {
            *doc = Value::Object(Map::new());
            return;
        }
        _ => {}
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let d = doc.as_object_mut().expect("made an object above");
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        d.retain(|k, _| keep.iter().any(|x| x == k));
    }
    for (k, pv) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(del)) = (d.get_mut(field), pv.as_array()) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if pv.is_null() {
            d.remove(k);
            continue;
        }
        match (d.get_mut(k), pv) {
            (Some(cur @ Value::Object(_)), Value::Object(pm)) => {
                if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                    d.remove(k);
                } else {
                    merge(cur, pv);
                }
            }
            (Some(Value::Array(cur)), Value::Array(items)) => {
                merge_list(k, cur, items);
            }
            _ => {
                let stripped = strip_directives(pv);
                d.insert(k.clone(), stripped);
            }
        }
    }
}

fn merge_list(field: &str, cur: &mut Vec<Value>, items: &[Value]) {
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *cur = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(strip_directives)
            .collect();
        return;
    }
    if let Some(key) = merge_key(field) {
        for item in items {
            let Some(kv) = item.get(key) else {
                cur.push(strip_directives(item));
                continue;
            };
            let pos = cur.iter().position(|c| c.get(key) == Some(kv));
            let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
            match (pos, delete) {
                (Some(i), true) => {
                    cur.remove(i);
                }
                (None, true) => {}
                (Some(i), false) => merge(&mut cur[i], item),
                (None, false) => cur.push(strip_directives(item)),
            }
        }
    } else if is_set(field) {
        for item in items {
            if !cur.contains(item) {
                cur.push(item.clone());
            }
        }
    } else {
        *cur = items.iter().map(strip_directives).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let mut doc = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}]}}}});
        merge(
            &mut doc,
            &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]}]}}}}),
        );
        let cs = &doc["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs.as_array().unwrap().len(), 2);
        assert_eq!(cs[0]["image"], "a:2");
        assert_eq!(cs[0]["env"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn delete_directives_and_sets() {
        let mut doc = json!({"metadata": {"finalizers": ["a"]}, "spec": {"ports": [{"containerPort": 80}, {"containerPort": 81}], "args": ["x"]}});
        merge(
            &mut doc,
            &json!({"metadata": {"finalizers": ["b"]}, "spec": {
            "ports": [{"containerPort": 80, "$patch": "delete"}], "args": ["y"]}}),
        );
        assert_eq!(doc["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(doc["spec"]["ports"], json!([{"containerPort": 81}]));
        assert_eq!(doc["spec"]["args"], json!(["y"]));
        merge(
            &mut doc,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        );
        assert_eq!(doc["metadata"]["finalizers"], json!(["b"]));
    }
}
