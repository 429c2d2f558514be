//! Values walked with their type, as structured-merge-diff walks them: checking a value
//! against its type, the set of fields it sets, what changed between two values, merging an
//! apply configuration into an object, and removing owned fields.
//!
//! Absent values are `None`; `null` is a value. Lists that merge (sets and keyed lists) are
//! walked item by item under path elements naming the item; atomic lists and maps, and
//! scalars, are leaves.

use serde_json::{Map, Value};

use super::schema::{Atom, ListKind, ListType, MapType, Scalar, Schema, TypeId};
use super::set::{KeyValue, Path, PathElement, Set, compare_values, go_quote};

/// A value that does not fit its type, where.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeError {
    /// kube's rendering of the path: `.spec.ports[name="a"]`.
    pub path: String,
    pub message: String,
}

/// Errors as structured-merge-diff words them: one as `path: message`, several as a list.
pub fn errors_string(errors: &[TypeError]) -> String {
    let one = |e: &TypeError| {
        if e.path.is_empty() {
            e.message.clone()
        } else {
            format!("{}: {}", e.path, e.message)
        }
    };
    match errors {
        [e] => one(e),
        many => {
            let mut lines = vec!["errors:".to_string()];
            lines.extend(many.iter().map(|e| format!("  {}", one(e))));
            lines.join("\n")
        }
    }
}

/// The form a value takes in its type.
#[derive(Clone, Copy)]
enum Form<'a> {
    Scalar(Scalar),
    List(&'a ListType),
    Map(&'a MapType),
    Invalid,
}

/// Which of its type's forms a value takes (a type may allow several); for an absent or
/// mismatched value, the type's first form in kube's order: map, scalar, list.
fn form<'a>(atom: &'a Atom, v: Option<&Value>) -> Form<'a> {
    match v {
        Some(Value::Number(_) | Value::String(_) | Value::Bool(_)) if atom.scalar.is_some() => {
            return Form::Scalar(atom.scalar.unwrap_or(Scalar::Any));
        }
        Some(Value::Array(_)) if atom.list.is_some() => {
            if let Some(l) = &atom.list {
                return Form::List(l);
            }
        }
        Some(Value::Object(_)) if atom.map.is_some() => {
            if let Some(m) = &atom.map {
                return Form::Map(m);
            }
        }
        _ => {}
    }
    if let Some(m) = &atom.map {
        Form::Map(m)
    } else if let Some(s) = atom.scalar {
        Form::Scalar(s)
    } else if let Some(l) = &atom.list {
        Form::List(l)
    } else {
        Form::Invalid
    }
}

/// Go's `%T` of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// How structured-merge-diff prints an unstructured value in its errors (`%v` of its value
/// wrapper).
fn go_value(v: &Value) -> String {
    let inner = match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(plain).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m.iter().map(|(k, v)| format!("{k}:{}", plain(v))).collect();
            format!("map[{}]", items.join(" "))
        }
        other => other.to_string(),
    };
    format!("&{{{inner}}}")
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(plain).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m.iter().map(|(k, v)| format!("{k}:{}", plain(v))).collect();
            format!("map[{}]", items.join(" "))
        }
        other => other.to_string(),
    }
}

fn check_scalar(s: Scalar, v: &Value) -> Option<String> {
    let ok = matches!(
        (s, v),
        (_, Value::Null)
            | (Scalar::Number, Value::Number(_))
            | (Scalar::String, Value::String(_))
            | (Scalar::Boolean, Value::Bool(_))
            | (
                Scalar::Any,
                Value::Number(_) | Value::String(_) | Value::Bool(_)
            )
    );
    if ok {
        return None;
    }
    Some(match s {
        Scalar::Number => format!("expected numeric (int or float), got {}", go_type(v)),
        Scalar::String => format!("expected string, got {}", go_value(v)),
        Scalar::Boolean => format!("expected boolean, got {}", go_value(v)),
        Scalar::Any => format!("expected any scalar, got {}", go_value(v)),
    })
}

/// The path element of an item of a set or keyed list, or why it has none.
pub fn item_element(schema: &Schema, list: &ListType, item: &Value) -> Result<PathElement, String> {
    match &list.kind {
        ListKind::Atomic => Err("invalid indexing of non-associative list".into()),
        ListKind::Set => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
            Value::Null => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            v => Ok(PathElement::Value(KeyValue(v.clone()))),
        },
        ListKind::Map(keys) => {
            let m = match item {
                Value::Null => {
                    return Err("associative list with keys may not have a null element".into());
                }
                Value::Object(m) => m,
                _ => {
                    return Err("associative list with keys may not have non-map elements".into());
                }
            };
            let elem = schema.atom(list.elem).map.as_ref();
            let mut fields: Vec<(String, KeyValue)> = Vec::new();
            for key in keys {
                if let Some(v) = m.get(key) {
                    fields.push((key.clone(), KeyValue(v.clone())));
                } else if let Some(d) = elem
                    .and_then(|e| e.field(key))
                    .and_then(|f| f.key_default.clone())
                {
                    fields.push((key.clone(), KeyValue(d)));
                }
            }
            if fields.is_empty() {
                let quoted: Vec<String> = keys.iter().map(|k| go_quote(k)).collect();
                return Err(format!(
                    "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
                    quoted.join(" ")
                ));
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
    }
}

/// Every way `v` does not fit type `ty`; duplicate set items or keys are errors unless
/// `allow_duplicates` (objects already stored may hold them).
pub fn validate(schema: &Schema, ty: TypeId, v: &Value, allow_duplicates: bool) -> Vec<TypeError> {
    let mut errors = Vec::new();
    let mut path = String::new();
    check(schema, ty, v, allow_duplicates, &mut path, &mut errors);
    errors
}

fn check(
    schema: &Schema,
    ty: TypeId,
    v: &Value,
    dups: bool,
    path: &mut String,
    errors: &mut Vec<TypeError>,
) {
    let error = |path: &str, message: String| TypeError {
        path: path.to_string(),
        message,
    };
    match form(schema.atom(ty), Some(v)) {
        Form::Invalid => errors.push(error(path, "schema error: invalid atom".into())),
        Form::Scalar(s) => {
            if let Some(m) = check_scalar(s, v) {
                errors.push(error(path, m));
            }
        }
        Form::List(list) => {
            let items = match v {
                Value::Null => return,
                Value::Array(items) => items,
                other => {
                    errors.push(error(
                        path,
                        format!("expected list, got {}", go_value(other)),
                    ));
                    return;
                }
            };
            let mut seen: Vec<PathElement> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let pe = if list.kind == ListKind::Atomic {
                    PathElement::Index(i)
                } else {
                    match item_element(schema, list, item) {
                        Ok(pe) => pe,
                        Err(e) => {
                            errors.push(error(path, format!("element {i}: {e}")));
                            return;
                        }
                    }
                };
                if list.kind != ListKind::Atomic {
                    if seen.contains(&pe) && !dups {
                        errors.push(error(path, format!("duplicate entries for key {pe}")));
                    }
                    seen.push(pe.clone());
                }
                let len = path.len();
                path.push_str(&pe.to_string());
                check(schema, list.elem, item, dups, path, errors);
                path.truncate(len);
            }
        }
        Form::Map(map) => {
            let entries = match v {
                Value::Null => return,
                Value::Object(m) => m,
                other => {
                    errors.push(error(
                        path,
                        format!("expected map, got {}", go_value(other)),
                    ));
                    return;
                }
            };
            for (key, child) in entries {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                match map.type_of(key) {
                    Some(t) => check(schema, t, child, dups, path, errors),
                    None => {
                        errors.push(error(path, "field not declared in schema".into()));
                        path.truncate(len);
                        break;
                    }
                }
                path.truncate(len);
            }
        }
    }
}

/// The fields `v` sets: its leaves, the items of its sets and keyed lists, the keys of its
/// maps, and fields set to `null` or `{}` (what an apply configuration owns).
pub fn field_set(schema: &Schema, ty: TypeId, v: &Value) -> Set {
    let mut set = Set::new();
    to_set(schema, ty, v, &mut Vec::new(), &mut set);
    set
}

fn to_set(schema: &Schema, ty: TypeId, v: &Value, path: &mut Path, set: &mut Set) {
    match form(schema.atom(ty), Some(v)) {
        Form::Scalar(_) | Form::Invalid => set.insert(path),
        Form::List(list) => {
            if list.kind == ListKind::Atomic {
                set.insert(path);
                return;
            }
            let Value::Array(items) = v else { return };
            let pes: Vec<Option<PathElement>> = items
                .iter()
                .map(|item| item_element(schema, list, item).ok())
                .collect();
            let mut duplicated: Vec<&PathElement> = Vec::new();
            for (i, pe) in pes.iter().enumerate() {
                let Some(pe) = pe else { continue };
                if pes[..i].iter().flatten().any(|p| p == pe) && !duplicated.contains(&pe) {
                    duplicated.push(pe);
                    path.push(pe.clone());
                    set.insert(path);
                    path.pop();
                }
            }
            for (item, pe) in items.iter().zip(&pes) {
                let Some(pe) = pe else { continue };
                if duplicated.contains(&pe) {
                    continue;
                }
                path.push(pe.clone());
                to_set(schema, list.elem, item, path, set);
                set.insert(path);
                path.pop();
            }
        }
        Form::Map(map) => {
            if map.atomic {
                set.insert(path);
                return;
            }
            let Value::Object(entries) = v else { return };
            for (key, child) in entries {
                let Some(t) = map.type_of(key) else { continue };
                path.push(PathElement::Field(key.clone()));
                to_set(schema, t, child, path, set);
                let empty = matches!(child, Value::Null)
                    || matches!(child, Value::Object(m) if m.is_empty());
                if empty || map.field(key).is_none() {
                    set.insert(path);
                }
                path.pop();
            }
        }
    }
}

/// What changed from `lhs` to `rhs` (either may be absent): no path is in two of the sets.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Comparison {
    pub removed: Set,
    pub modified: Set,
    pub added: Set,
}

impl Comparison {
    /// The comparison without `excluded` and everything below it.
    pub fn without(self, excluded: &Set) -> Comparison {
        if excluded.is_empty() {
            return self;
        }
        Comparison {
            removed: self.removed.recursive_difference(excluded),
            modified: self.modified.recursive_difference(excluded),
            added: self.added.recursive_difference(excluded),
        }
    }
}

pub fn compare(schema: &Schema, ty: TypeId, lhs: &Value, rhs: &Value) -> Comparison {
    let mut c = Comparison::default();
    compare_at(schema, ty, Some(lhs), Some(rhs), &mut Vec::new(), &mut c);
    c
}

fn leaf(lhs: Option<&Value>, rhs: Option<&Value>, path: &Path, c: &mut Comparison) {
    match (lhs, rhs) {
        (None, None) => {}
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        (Some(l), Some(r)) => {
            if !values_equal(l, r) {
                c.modified.insert(path)
            }
        }
    }
}

/// Equality of values as structured-merge-diff sees it (numbers by value).
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => compare_values(a, b).is_eq(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| values_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

fn same_form(atom: &Atom, a: Option<&Value>, b: Option<&Value>) -> bool {
    let kind = |f: Form| match f {
        Form::Scalar(_) => 0,
        Form::List(_) => 1,
        Form::Map(_) => 2,
        Form::Invalid => 3,
    };
    kind(form(atom, a)) == kind(form(atom, b))
}

fn is_empty_container(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(m)) => m.is_empty(),
        _ => false,
    }
}

fn compare_at(
    schema: &Schema,
    ty: TypeId,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Path,
    c: &mut Comparison,
) {
    let atom = schema.atom(ty);
    // Values of different forms compare as the right-hand side's form against nothing.
    let lhs_seen = lhs;
    let lhs = if lhs.is_some() && rhs.is_some() && !same_form(atom, lhs, rhs) {
        None
    } else {
        lhs
    };
    let mut in_leaf = false;
    match form(atom, rhs.or(lhs)) {
        Form::Scalar(_) | Form::Invalid => {
            leaf(lhs_seen, rhs, path, c);
            in_leaf = true;
        }
        Form::List(list) => {
            let (l, r) = (as_items(lhs), as_items(rhs));
            if list.kind == ListKind::Atomic || (is_empty_container(lhs) && is_empty_container(rhs))
            {
                leaf(lhs_seen, rhs, path, c);
                in_leaf = true;
            } else {
                compare_items(schema, list, l, r, path, c);
            }
        }
        Form::Map(map) => {
            if map.atomic || (is_empty_container(lhs) && is_empty_container(rhs)) {
                leaf(lhs_seen, rhs, path, c);
                in_leaf = true;
            } else {
                let empty = Map::new();
                let l = lhs.and_then(Value::as_object).unwrap_or(&empty);
                let r = rhs.and_then(Value::as_object).unwrap_or(&empty);
                for key in union_keys(l, r) {
                    let t = map.type_of(key).unwrap_or_else(|| schema.deduced());
                    path.push(PathElement::Field(key.clone()));
                    compare_at(schema, t, l.get(key), r.get(key), path, c);
                    path.pop();
                }
            }
        }
    }
    if !in_leaf {
        match (lhs_seen, rhs) {
            (None, Some(_)) => c.added.insert(path),
            (Some(_), None) => c.removed.insert(path),
            _ => {}
        }
    }
}

fn as_items(v: Option<&Value>) -> &[Value] {
    match v {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}

fn union_keys<'a>(l: &'a Map<String, Value>, r: &'a Map<String, Value>) -> Vec<&'a String> {
    let mut keys: Vec<&String> = l.keys().chain(r.keys()).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Items of a merging list by path element, in order of first appearance, with how many
/// items share each element.
fn index_items<'a>(
    schema: &Schema,
    list: &ListType,
    items: &'a [Value],
) -> Vec<(PathElement, Vec<&'a Value>)> {
    let mut out: Vec<(PathElement, Vec<&'a Value>)> = Vec::new();
    for item in items {
        let Ok(pe) = item_element(schema, list, item) else {
            continue;
        };
        match out.iter_mut().find(|(p, _)| *p == pe) {
            Some((_, vs)) => vs.push(item),
            None => out.push((pe, vec![item])),
        }
    }
    out
}

fn items_at<'a>(items: &[(PathElement, Vec<&'a Value>)], pe: &PathElement) -> Vec<&'a Value> {
    items
        .iter()
        .find(|(p, _)| p == pe)
        .map(|(_, vs)| vs.clone())
        .unwrap_or_default()
}

fn compare_items(
    schema: &Schema,
    list: &ListType,
    lhs: &[Value],
    rhs: &[Value],
    path: &mut Path,
    c: &mut Comparison,
) {
    let l = index_items(schema, list, lhs);
    let r = index_items(schema, list, rhs);
    let mut all: Vec<&PathElement> = l.iter().map(|(pe, _)| pe).collect();
    for (pe, _) in &r {
        if !all.contains(&pe) {
            all.push(pe);
        }
    }
    for pe in all {
        let (ll, rl) = (items_at(&l, pe), items_at(&r, pe));
        path.push(pe.clone());
        match (ll.len(), rl.len()) {
            (a, b) if a <= 1 && b <= 1 => {
                compare_at(
                    schema,
                    list.elem,
                    ll.first().copied(),
                    rl.first().copied(),
                    path,
                    c,
                );
            }
            (a, b) if a >= 2 && b >= 2 => {
                let equal = a == b && ll.iter().zip(&rl).all(|(x, y)| values_equal(x, y));
                if !equal {
                    c.modified.insert(path);
                }
            }
            (a, _) if a >= 2 => {
                if let Some(first) = rl.first() {
                    compare_at(schema, list.elem, None, Some(first), path, c);
                }
                c.removed.insert(path);
            }
            _ => {
                if let Some(first) = ll.first() {
                    compare_at(schema, list.elem, Some(first), None, path, c);
                }
                c.added.insert(path);
            }
        }
        path.pop();
    }
}

/// `rhs` merged into `lhs` as server-side apply merges a configuration into an object:
/// maps by key, sets and keyed lists by item (in the order kube gives them), everything else
/// replaced. Duplicate items in `rhs` are an error.
pub fn merge(
    schema: &Schema,
    ty: TypeId,
    lhs: &Value,
    rhs: &Value,
) -> Result<Value, Vec<TypeError>> {
    let mut errors = Vec::new();
    let out = merge_at(
        schema,
        ty,
        Some(lhs),
        Some(rhs),
        &mut String::new(),
        &mut errors,
    );
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(out.unwrap_or(Value::Null))
}

fn merge_at(
    schema: &Schema,
    ty: TypeId,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut String,
    errors: &mut Vec<TypeError>,
) -> Option<Value> {
    let keep_rhs = || rhs.or(lhs).cloned();
    let atom = schema.atom(ty);
    let lhs = match (lhs, rhs) {
        (Some(_), Some(_)) if !same_form(atom, lhs, rhs) => None,
        _ => lhs,
    };
    match form(atom, rhs.or(lhs)) {
        Form::Scalar(_) | Form::Invalid => keep_rhs(),
        Form::List(list) => {
            if list.kind == ListKind::Atomic || (is_empty_container(lhs) && is_empty_container(rhs))
            {
                return keep_rhs();
            }
            merge_items(schema, list, as_items(lhs), as_items(rhs), path, errors)
        }
        Form::Map(map) => {
            if map.atomic || (is_empty_container(lhs) && is_empty_container(rhs)) {
                return keep_rhs();
            }
            let empty = Map::new();
            let l = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let r = rhs.and_then(Value::as_object).unwrap_or(&empty);
            let mut out = Map::new();
            for key in union_keys(l, r) {
                let t = map.type_of(key).unwrap_or_else(|| schema.deduced());
                let len = path.len();
                path.push('.');
                path.push_str(key);
                if let Some(v) = merge_at(schema, t, l.get(key), r.get(key), path, errors) {
                    out.insert(key.clone(), v);
                }
                path.truncate(len);
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
    }
}

/// Merges the items of two merging lists in kube's order: the live list's order, with the
/// configuration's items in its own order where they are new, and shared items moved to
/// where the configuration puts them.
fn merge_items(
    schema: &Schema,
    list: &ListType,
    lhs: &[Value],
    rhs: &[Value],
    path: &mut String,
    errors: &mut Vec<TypeError>,
) -> Option<Value> {
    let mut rhs_pes: Vec<PathElement> = Vec::new();
    for (i, item) in rhs.iter().enumerate() {
        match item_element(schema, list, item) {
            Ok(pe) if rhs_pes.contains(&pe) => errors.push(TypeError {
                path: path.clone(),
                message: format!("duplicate entries for key {pe}"),
            }),
            Ok(pe) => rhs_pes.push(pe),
            Err(e) => errors.push(TypeError {
                path: path.clone(),
                message: format!("element {i}: {e}"),
            }),
        }
    }
    let mut lhs_pes: Vec<PathElement> = Vec::new();
    let mut lhs_items: Vec<Option<&Value>> = Vec::new();
    for (i, item) in lhs.iter().enumerate() {
        match item_element(schema, list, item) {
            Ok(pe) => {
                // A duplicated live item merges as nothing.
                let dup = lhs_pes.contains(&pe);
                if dup && let Some(pos) = lhs_pes.iter().position(|p| *p == pe) {
                    lhs_items[pos] = None;
                }
                lhs_pes.push(pe);
                lhs_items.push(if dup { None } else { Some(item) });
            }
            Err(e) => errors.push(TypeError {
                path: path.clone(),
                message: format!("element {i}: {e}"),
            }),
        }
    }
    if !errors.is_empty() {
        return None;
    }
    let observed_lhs = |pe: &PathElement| -> Option<Option<&Value>> {
        lhs_pes.iter().position(|p| p == pe).map(|i| lhs_items[i])
    };
    let observed_rhs = |pe: &PathElement| -> Option<&Value> {
        rhs_pes.iter().position(|p| p == pe).map(|i| &rhs[i])
    };
    let mut shared: std::collections::VecDeque<&PathElement> = rhs_pes
        .iter()
        .filter(|pe| observed_lhs(pe).is_some())
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: Vec<&PathElement> = Vec::new();
    let mut out = Vec::new();
    let (mut li, mut ri) = (0, 0);
    let mut item_out =
        |pe: &PathElement, l: Option<&Value>, r: Option<&Value>, out: &mut Vec<Value>| {
            let len = path.len();
            path.push_str(&pe.to_string());
            if let Some(v) = merge_at(schema, list.elem, l, r, path, errors) {
                out.push(v);
            }
            path.truncate(len);
        };
    while li < lhs_pes.len() || ri < rhs_pes.len() {
        if li < lhs_pes.len() && ri < rhs_pes.len() {
            let pe = &lhs_pes[li];
            if *pe == rhs_pes[ri] {
                merged_rhs.push(pe);
                item_out(pe, observed_lhs(pe).flatten(), observed_rhs(pe), &mut out);
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if observed_rhs(pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs_pes.len() {
            let pe = &lhs_pes[li];
            if observed_rhs(pe).is_none() {
                item_out(pe, Some(&lhs[li]), None, &mut out);
                li += 1;
                continue;
            } else if merged_rhs.contains(&pe) {
                li += 1;
            }
        }
        if ri < rhs_pes.len() {
            let pe = &rhs_pes[ri];
            merged_rhs.push(pe);
            item_out(pe, observed_lhs(pe).flatten(), observed_rhs(pe), &mut out);
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

/// `v` without the fields, list items and map entries of `set`. A map or list emptied of
/// what was removed below it stays, empty.
pub fn remove_items(schema: &Schema, ty: TypeId, v: &Value, set: &Set) -> Value {
    remove_at(schema, ty, v, set).unwrap_or(Value::Null)
}

fn remove_at(schema: &Schema, ty: TypeId, v: &Value, set: &Set) -> Option<Value> {
    match form(schema.atom(ty), Some(v)) {
        Form::Scalar(_) | Form::Invalid => Some(v.clone()),
        Form::List(list) => {
            let Value::Array(items) = v else { return None };
            if items.is_empty() || list.kind == ListKind::Atomic {
                return None;
            }
            let mut out = Vec::new();
            let mut had_matches = false;
            for item in items {
                let Ok(pe) = item_element(schema, list, item) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                match set.with_prefix(&pe).filter(|s| !s.is_empty()) {
                    Some(below) => {
                        had_matches = true;
                        out.push(
                            remove_at(schema, list.elem, item, below)
                                .unwrap_or_else(|| empty_like(item)),
                        );
                    }
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty() || had_matches).then_some(Value::Array(out))
        }
        Form::Map(map) => {
            let Value::Object(entries) = v else {
                return None;
            };
            if entries.is_empty() || map.atomic {
                return None;
            }
            let mut out = Map::new();
            let mut had_matches = false;
            for (key, child) in entries {
                let pe = PathElement::Field(key.clone());
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                match set.with_prefix(&pe).filter(|s| !s.is_empty()) {
                    Some(below) => {
                        had_matches = true;
                        let t = map.type_of(key).unwrap_or_else(|| schema.deduced());
                        out.insert(
                            key.clone(),
                            remove_at(schema, t, child, below).unwrap_or_else(|| empty_like(child)),
                        );
                    }
                    None => {
                        out.insert(key.clone(), child.clone());
                    }
                }
            }
            (!out.is_empty() || had_matches).then_some(Value::Object(out))
        }
    }
}

/// What a container emptied by removal becomes: an empty one of its kind, else null.
fn empty_like(v: &Value) -> Value {
    match v {
        Value::Object(_) => Value::Object(Map::new()),
        Value::Array(_) => Value::Array(Vec::new()),
        _ => Value::Null,
    }
}

/// `set` with every struct field on its paths a member too: what prunes an apply removes.
pub fn with_named_fields(schema: &Schema, ty: TypeId, set: &Set) -> Set {
    let atom = schema.atom(ty);
    let mut members = set.members().clone();
    let mut children = std::collections::BTreeMap::new();
    for (pe, below) in set.children() {
        let child_ty = match pe {
            PathElement::Field(name) => {
                let map = atom.map.as_ref();
                if map.and_then(|m| m.field(name)).is_some() {
                    members.insert(pe.clone());
                }
                map.and_then(|m| m.type_of(name))
            }
            PathElement::Key(_) | PathElement::Value(_) => atom.list.as_ref().map(|l| l.elem),
            PathElement::Index(_) => None,
        };
        let below = match child_ty {
            Some(t) => with_named_fields(schema, t, below),
            None => below.clone(),
        };
        children.insert(pe.clone(), below);
    }
    Set::from_parts(members, children)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::schema::ObjectType;
    use serde_json::json;

    fn widget() -> ObjectType {
        Schema::from_crd(
            Some(
                &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "port": {"type": "integer"}}}}}}}}),
            ),
            false,
        )
    }

    fn set_of(t: &ObjectType, v: Value) -> Value {
        field_set(&t.schema, t.root, &v).to_fields_v1()
    }

    #[test]
    fn undeclared_fields_and_duplicate_keys_are_type_errors() {
        let t = widget();
        let errs = validate(
            &t.schema,
            t.root,
            &json!({"spec": {"size": 1, "bogus": 1}}),
            false,
        );
        assert_eq!(
            errors_string(&errs),
            ".spec.bogus: field not declared in schema"
        );
        let dup = json!({"spec": {"ports": [{"name": "a"}, {"name": "a"}]}});
        let errs = validate(&t.schema, t.root, &dup, false);
        assert_eq!(
            errors_string(&errs),
            ".spec.ports: duplicate entries for key [name=\"a\"]"
        );
        assert!(validate(&t.schema, t.root, &dup, true).is_empty());
    }

    #[test]
    fn an_apply_owns_leaves_items_and_empty_fields() {
        let t = widget();
        assert_eq!(
            set_of(
                &t,
                json!({"spec": {"size": 1, "tags": ["a"],
                "ports": [{"name": "a", "port": 1}]}})
            ),
            json!({"f:spec": {"f:size": {}, "f:tags": {"v:\"a\"": {}},
                "f:ports": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:port": {}}}}})
        );
        assert_eq!(set_of(&t, json!({"spec": {}})), json!({"f:spec": {}}));
    }

    #[test]
    fn comparing_marks_new_containers_as_added() {
        let t = widget();
        let c = compare(
            &t.schema,
            t.root,
            &json!({}),
            &json!({"spec": {"size": 1, "ports": [{"name": "a"}]}}),
        );
        assert_eq!(
            c.added.to_fields_v1(),
            json!({"f:spec": {".": {}, "f:size": {},
                "f:ports": {".": {}, "k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}}})
        );
        let c = compare(
            &t.schema,
            t.root,
            &json!({"spec": {"size": 1, "ports": [{"name": "a"}]}}),
            &json!({"spec": {"size": 2, "ports": []}}),
        );
        assert_eq!(c.modified.to_fields_v1(), json!({"f:spec": {"f:size": {}}}));
        assert_eq!(
            c.removed.to_fields_v1(),
            json!({"f:spec": {"f:ports": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}}})
        );
    }

    #[test]
    fn merging_keeps_live_items_and_appends_new_ones_in_order() {
        let t = widget();
        let live = json!({"spec": {"size": 1, "tags": ["a", "b"],
            "ports": [{"name": "x", "port": 1}, {"name": "y", "port": 2}]}});
        let config = json!({"spec": {"tags": ["c", "a"],
            "ports": [{"name": "z", "port": 3}, {"name": "x", "port": 9}]}});
        let merged = merge(&t.schema, t.root, &live, &config).unwrap();
        assert_eq!(
            merged,
            json!({"spec": {"size": 1, "tags": ["c", "a", "b"],
                "ports": [{"name": "z", "port": 3}, {"name": "x", "port": 9},
                    {"name": "y", "port": 2}]}})
        );
    }

    #[test]
    fn removing_owned_fields_keeps_emptied_containers() {
        let t = widget();
        let mut set = Set::new();
        set.insert(&[
            PathElement::Field("spec".into()),
            PathElement::Field("size".into()),
        ]);
        let out = remove_items(&t.schema, t.root, &json!({"spec": {"size": 1}}), &set);
        assert_eq!(out, json!({"spec": {}}));
    }
}
