//! Server-side apply and field ownership (`metadata.managedFields`).
//!
//! Field sets are sets of paths; each path element is encoded as in `fieldsV1`: `f:<field>`,
//! `k:<json of key fields>` for items of lists merged by key, `v:<json value>` for set items.
//! An apply conflicts when it sets a field another manager owns to a different value (unless
//! forced, which takes the field over); fields the applier owned before and no longer applies
//! are removed when nobody else owns them. Ordinary writes (create, update, patch) give the
//! fields they change to their manager with operation `Update`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::strategic::{is_set, merge_key};

/// One path into an object, fieldsV1-encoded.
pub type FieldPath = Vec<String>;
/// A set of owned leaf paths.
pub type FieldSet = BTreeSet<FieldPath>;

/// The leaf paths a value sets.
pub fn leaves(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    walk(v, &mut Vec::new(), None, &mut out);
    out
}

fn walk(v: &Value, path: &mut FieldPath, field: Option<&str>, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind") {
                    continue;
                }
                if path.is_empty() && k == "metadata" {
                    if let Some(mm) = child.as_object() {
                        for mk in ["labels", "annotations", "finalizers", "ownerReferences"] {
                            if let Some(mv) = mm.get(mk) {
                                path.push("f:metadata".into());
                                path.push(format!("f:{mk}"));
                                walk(mv, path, Some(mk), out);
                                path.pop();
                                path.pop();
                            }
                        }
                    }
                    continue;
                }
                path.push(format!("f:{k}"));
                walk(child, path, Some(k), out);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let key = field.and_then(merge_key);
            if let Some(key) = key
                && items.iter().all(|i| i.get(key).is_some())
            {
                for item in items {
                    let mut kv = Map::new();
                    kv.insert(key.into(), item.get(key).cloned().unwrap_or(Value::Null));
                    path.push(format!("k:{}", Value::Object(kv)));
                    walk(item, path, None, out);
                    path.pop();
                }
            } else if field.is_some_and(is_set) {
                for item in items {
                    path.push(format!("v:{item}"));
                    out.insert(path.clone());
                    path.pop();
                }
            } else {
                out.insert(path.clone());
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The value at a path, if present.
pub fn lookup<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            cur = cur.get(f)?;
        } else if let Some(k) = el.strip_prefix("k:") {
            let key: Value = serde_json::from_str(k).ok()?;
            let km = key.as_object()?;
            cur = cur
                .as_array()?
                .iter()
                .find(|i| km.iter().all(|(kk, kv)| i.get(kk) == Some(kv)))?;
        } else if let Some(x) = el.strip_prefix("v:") {
            let want: Value = serde_json::from_str(x).ok()?;
            cur = cur.as_array()?.iter().find(|i| **i == want)?;
        } else {
            return None;
        }
    }
    Some(cur)
}

/// Removes the value at a path (and empty parents it leaves behind are kept).
fn remove(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    // A key field of a list item goes with its item: without it the item is no longer the
    // one its key names, and what remains of it would be left behind.
    if let (Some(field), Some(item)) = (last.strip_prefix("f:"), parents.last())
        && let Some(key) = item.strip_prefix("k:")
        && serde_json::from_str::<Value>(key).is_ok_and(|k| k.get(field).is_some())
    {
        return remove(v, parents);
    }
    let mut cur = v;
    for el in parents {
        let next = if let Some(f) = el.strip_prefix("f:") {
            cur.get_mut(f)
        } else if let Some(k) = el.strip_prefix("k:") {
            let Ok(key) = serde_json::from_str::<Value>(k) else {
                return;
            };
            let Some(km) = key.as_object().cloned() else {
                return;
            };
            cur.as_array_mut().and_then(|a| {
                a.iter_mut()
                    .find(|i| km.iter().all(|(kk, kv)| i.get(kk) == Some(kv)))
            })
        } else {
            None
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(k) = last.strip_prefix("k:") {
        if let (Ok(key), Some(a)) = (serde_json::from_str::<Value>(k), cur.as_array_mut())
            && let Some(km) = key.as_object()
        {
            a.retain(|i| !km.iter().all(|(kk, kv)| i.get(kk) == Some(kv)));
        }
    } else if let Some(x) = last.strip_prefix("v:")
        && let (Ok(want), Some(a)) = (serde_json::from_str::<Value>(x), cur.as_array_mut())
    {
        a.retain(|i| *i != want);
    }
}

/// Encodes a field set as `fieldsV1`.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for el in path {
            let entry = cur.entry(el.clone()).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            cur = entry.as_object_mut().expect("made an object above");
        }
    }
    Value::Object(root)
}

/// Decodes `fieldsV1` into leaf paths.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    fn go(v: &Value, path: &mut FieldPath, out: &mut FieldSet) {
        let Some(m) = v.as_object() else { return };
        let children: Vec<_> = m.iter().filter(|(k, _)| k.as_str() != ".").collect();
        if (children.is_empty() || m.contains_key(".")) && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, child) in children {
            path.push(k.clone());
            go(child, path, out);
            path.pop();
        }
    }
    go(v, &mut Vec::new(), &mut out);
    out
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Manager {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

/// Reads `metadata.managedFields`.
pub fn managers(obj: &Value) -> Vec<Manager> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            Manager {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
            }
        })
        .collect()
}

/// Writes `metadata.managedFields`, dropping managers that own nothing.
pub fn set_managers(obj: &mut Value, list: &[Manager]) {
    let entries: Vec<Value> = list
        .iter()
        .filter(|m| !m.fields.is_empty())
        .map(|m| {
            let mut e = json!({
                "manager": m.manager,
                "operation": m.operation,
                "apiVersion": m.api_version,
                "time": m.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&m.fields),
            });
            if !m.subresource.is_empty() {
                e["subresource"] = json!(m.subresource);
            }
            e
        })
        .collect();
    let meta = crate::meta::meta_mut(obj);
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

/// Renders a path as kube-apiserver prints it in conflicts: `.spec.replicas`.
pub fn render_path(path: &[String]) -> String {
    let mut s = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                .map(|m| m.iter().map(|(kk, vv)| format!("{kk}={vv}")).collect())
                .unwrap_or_default();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = el.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

/// A field owned by another manager that an apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub path: FieldPath,
}

impl Conflict {
    fn who(&self) -> String {
        if self.operation == "Update" {
            format!("{:?} using {}", self.manager, self.api_version)
        } else {
            format!("{:?}", self.manager)
        }
    }
}

/// The message kube-apiserver gives for apply conflicts.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [c] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.who(),
            render_path(&c.path)
        );
    }
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in conflicts {
        by.entry(c.who()).or_default().push(render_path(&c.path));
    }
    let mut lines = Vec::new();
    for (who, paths) in by {
        lines.push(format!("conflicts with {who}:"));
        for p in paths {
            lines.push(format!("- {p}"));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// The `(field, message)` causes of a conflict Status.
pub fn conflict_causes(conflicts: &[Conflict]) -> Vec<(String, String)> {
    conflicts
        .iter()
        .map(|c| (render_path(&c.path), format!("conflict with {}", c.who())))
        .collect()
}

fn overlaps(a: &FieldPath, b: &FieldPath) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Merges an apply configuration into the live object (maps recursively, keyed lists by key,
/// sets as sets, other lists replaced).
fn merge_config(live: &mut Value, config: &Value, field: Option<&str>) {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            for (k, cv) in c {
                match l.get_mut(k) {
                    Some(lv) => merge_config(lv, cv, Some(k)),
                    None => {
                        l.insert(k.clone(), cv.clone());
                    }
                }
            }
        }
        (Value::Array(l), Value::Array(c)) => {
            if let Some(key) = field.and_then(merge_key)
                && c.iter().all(|i| i.get(key).is_some())
            {
                for item in c {
                    match l.iter_mut().find(|x| x.get(key) == item.get(key)) {
                        Some(x) => merge_config(x, item, None),
                        None => l.push(item.clone()),
                    }
                }
            } else if field.is_some_and(is_set) {
                for item in c {
                    if !l.contains(item) {
                        l.push(item.clone());
                    }
                }
            } else {
                *l = c.clone();
            }
        }
        (l, c) => *l = c.clone(),
    }
}

/// Applies `config` by `manager` to `live` (None when the object does not exist yet).
/// Returns the merged object with updated managedFields, or the conflicts.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    api_version: &str,
    force: bool,
    now: &str,
) -> Result<Value, Vec<Conflict>> {
    let applied = leaves(config);
    let base = live.cloned().unwrap_or_else(|| json!({}));
    let mut owners = managers(&base);
    let mut conflicts = Vec::new();
    for other in owners
        .iter()
        .filter(|m| !(m.manager == manager && m.operation == "Apply"))
    {
        for path in &applied {
            if let Some(owned) = other.fields.iter().find(|p| overlaps(p, path))
                && lookup(&base, owned) != lookup(config, owned)
            {
                conflicts.push(Conflict {
                    manager: other.manager.clone(),
                    operation: other.operation.clone(),
                    api_version: other.api_version.clone(),
                    path: path.clone(),
                });
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    let previous: FieldSet = owners
        .iter()
        .find(|m| m.manager == manager && m.operation == "Apply")
        .map(|m| m.fields.clone())
        .unwrap_or_default();
    let mut merged = base.clone();
    merge_config(&mut merged, config, None);
    for path in previous.difference(&applied) {
        let owned_elsewhere = owners
            .iter()
            .any(|m| !(m.manager == manager && m.operation == "Apply") && m.fields.contains(path));
        if !owned_elsewhere {
            remove(&mut merged, path);
        }
    }
    for m in owners.iter_mut() {
        if m.manager == manager && m.operation == "Apply" {
            continue;
        }
        if force {
            m.fields.retain(|p| !applied.iter().any(|a| overlaps(a, p)));
        }
    }
    let entry = Manager {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        time: now.to_string(),
        subresource: String::new(),
        fields: applied,
    };
    // Keep the manager's place in the list so a repeated apply changes nothing.
    match owners
        .iter_mut()
        .find(|m| m.manager == manager && m.operation == "Apply")
    {
        Some(existing) => *existing = entry,
        None => owners.push(entry),
    }
    set_managers(&mut merged, &owners);
    Ok(merged)
}

/// Records an ordinary write: `manager` (operation Update) takes the fields that changed.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    now: &str,
) {
    let before = old.map(leaves).unwrap_or_default();
    let after = leaves(new);
    let empty = json!({});
    let old_v = old.unwrap_or(&empty);
    let changed: FieldSet = after
        .iter()
        .filter(|p| !before.contains(*p) || lookup(old_v, p) != lookup(new, p))
        .cloned()
        .collect();
    let mut owners = old.map(managers).unwrap_or_default();
    if changed.is_empty() {
        set_managers(new, &owners);
        return;
    }
    for m in owners.iter_mut() {
        m.fields.retain(|p| {
            !changed.iter().any(|c| overlaps(c, p))
                && after.iter().any(|a| a.starts_with(p) || p.starts_with(a))
        });
    }
    match owners
        .iter_mut()
        .find(|m| m.manager == manager && m.operation == "Update" && m.subresource == subresource)
    {
        Some(m) => {
            m.fields.extend(changed);
            m.time = now.to_string();
            m.api_version = api_version.to_string();
        }
        None => owners.push(Manager {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version: api_version.to_string(),
            time: now.to_string(),
            subresource: subresource.to_string(),
            fields: changed,
        }),
    }
    set_managers(new, &owners);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trips() {
        let obj = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c", "image": "i"}], "args": ["1"]}});
        let set = leaves(&obj);
        assert!(set.contains(&vec![
            "f:metadata".to_string(),
            "f:labels".into(),
            "f:a".into()
        ]));
        assert!(set.contains(&vec![
            "f:spec".to_string(),
            "f:containers".into(),
            "k:{\"name\":\"c\"}".into(),
            "f:image".into()
        ]));
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
    }

    #[test]
    fn an_applier_that_stops_applying_a_list_item_removes_all_of_it() {
        let owner = json!({"apiVersion": "v1", "kind": "Namespace", "name": "n", "uid": "u1"});
        let both = json!({"metadata": {"ownerReferences": [owner,
            {"apiVersion": "v1", "kind": "Namespace", "name": "m", "uid": "u2"}]}});
        let live = apply(None, &both, "a", "v1", false, "t").unwrap();
        let one = json!({"metadata": {"ownerReferences": [owner]}});
        let fewer = apply(Some(&live), &one, "a", "v1", false, "t").unwrap();
        assert_eq!(fewer["metadata"]["ownerReferences"], json!([owner]));
        let none = apply(
            Some(&fewer),
            &json!({"data": {"x": "1"}}),
            "a",
            "v1",
            false,
            "t",
        )
        .unwrap();
        let left = none
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array);
        assert!(left.is_none_or(|items| items.is_empty()), "{none}");
    }

    #[test]
    fn apply_conflicts_with_another_manager_unless_forced() {
        let cfg_a = json!({"data": {"x": "1", "y": "1"}});
        let live = apply(None, &cfg_a, "a", "v1", false, "t").unwrap();
        let cfg_b = json!({"data": {"x": "2"}});
        let conflicts = apply(Some(&live), &cfg_b, "b", "v1", false, "t").unwrap_err();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(
            conflict_message(&conflicts),
            "Apply failed with 1 conflict: conflict with \"a\": .data.x"
        );
        let forced = apply(Some(&live), &cfg_b, "b", "v1", true, "t").unwrap();
        assert_eq!(forced["data"]["x"], "2");
        let owners = managers(&forced);
        let a = owners.iter().find(|m| m.manager == "a").unwrap();
        assert_eq!(a.fields.len(), 1);
    }

    #[test]
    fn same_value_is_shared_ownership_not_a_conflict() {
        let live = apply(None, &json!({"data": {"x": "1"}}), "a", "v1", false, "t").unwrap();
        let both = apply(
            Some(&live),
            &json!({"data": {"x": "1"}}),
            "b",
            "v1",
            false,
            "t",
        )
        .unwrap();
        assert_eq!(managers(&both).len(), 2);
    }

    #[test]
    fn fields_dropped_from_config_are_removed() {
        let live = apply(
            None,
            &json!({"data": {"x": "1", "y": "2"}}),
            "a",
            "v1",
            false,
            "t",
        )
        .unwrap();
        let next = apply(
            Some(&live),
            &json!({"data": {"x": "1"}}),
            "a",
            "v1",
            false,
            "t",
        )
        .unwrap();
        assert_eq!(next["data"], json!({"x": "1"}));
    }

    #[test]
    fn updates_take_the_fields_they_change() {
        let live = apply(None, &json!({"data": {"x": "1"}}), "a", "v1", false, "t").unwrap();
        let mut new = live.clone();
        new["data"]["x"] = json!("9");
        record_update(Some(&live), &mut new, "kubectl-edit", "v1", "", "t");
        let conflicts = apply(
            Some(&new),
            &json!({"data": {"x": "1"}}),
            "a",
            "v1",
            false,
            "t",
        )
        .unwrap_err();
        assert_eq!(
            conflict_message(&conflicts),
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.x"
        );
    }
}
