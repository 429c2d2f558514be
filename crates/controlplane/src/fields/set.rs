//! Field paths and sets of them, as structured-merge-diff keeps them: a path element names a
//! struct or map field (`f:name`), a list item by its key fields (`k:{"name":"a"}`), a set
//! item by its value (`v:"x"`) or a list item by position (only in error paths). A [`Set`]
//! is a trie of paths ordered as kube orders them, and is what `managedFields[].fieldsV1`
//! encodes.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// A value inside a path element (a list key's value, a set item), ordered as
/// structured-merge-diff orders values: numbers, strings, booleans, lists, maps, null.
#[derive(Debug, Clone)]
pub struct KeyValue(pub Value);

fn rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

/// structured-merge-diff's order of values (numbers compared as numbers whatever their
/// representation).
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (x, y) in x.iter().zip(y) {
                match compare_values(x, y) {
                    Ordering::Equal => {}
                    other => return other,
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            for ((xk, xv), (yk, yv)) in x.iter().zip(y) {
                match xk.cmp(yk).then_with(|| compare_values(xv, yv)) {
                    Ordering::Equal => {}
                    other => return other,
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

impl PartialEq for KeyValue {
    fn eq(&self, other: &Self) -> bool {
        compare_values(&self.0, &other.0) == Ordering::Equal
    }
}
impl Eq for KeyValue {}
impl PartialOrd for KeyValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for KeyValue {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

/// One step of a path. Derived order: fields, then keys, then values, then indices, as
/// structured-merge-diff orders them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathElement {
    Field(String),
    /// A list item by its key fields, sorted by name.
    Key(Vec<(String, KeyValue)>),
    /// A set item by its value.
    Value(KeyValue),
    /// A list item by position (atomic lists, in error paths only).
    Index(usize),
}

/// A path from the object's root.
pub type Path = Vec<PathElement>;

/// Go's `%q` of a string, as kube prints keys and values in paths and errors.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value as structured-merge-diff prints it in paths: strings quoted, maps as `k=v`.
pub fn value_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(value_string).collect();
            format!("[{}]", items.join(","))
        }
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", value_string(v)))
            .collect(),
        other => other.to_string(),
    }
}

impl std::fmt::Display for PathElement {
    /// As kube prints paths in conflicts and errors: `.spec`, `[name="a"]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_string(&v.0)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", value_string(&v.0)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path as kube prints it: `.spec.ports[name="a"].port`.
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

impl PathElement {
    /// The element's `fieldsV1` key: `f:name`, `k:{"name":"a"}`, `v:"x"`, `i:0`.
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut m = Map::new();
                for (k, v) in fields {
                    m.insert(k.clone(), v.0.clone());
                }
                format!("k:{}", Value::Object(m))
            }
            PathElement::Value(v) => format!("v:{}", v.0),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Reads a `fieldsV1` key; None when it is not one.
    pub fn decode(s: &str) -> Option<PathElement> {
        let (kind, rest) = s.split_at_checked(2)?;
        match kind {
            "f:" => Some(PathElement::Field(rest.to_string())),
            "v:" => Some(PathElement::Value(KeyValue(
                serde_json::from_str(rest).ok()?,
            ))),
            "k:" => {
                let Value::Object(m) = serde_json::from_str(rest).ok()? else {
                    return None;
                };
                let mut fields: Vec<(String, KeyValue)> =
                    m.into_iter().map(|(k, v)| (k, KeyValue(v))).collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Some(PathElement::Key(fields))
            }
            "i:" => rest.parse().ok().map(PathElement::Index),
            _ => None,
        }
    }
}

/// A set of paths: the paths ending here (`members`) and the sets below each element
/// (`children`, never empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    pub fn new() -> Self {
        Set::default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// Adds a path (not its parents); the empty path, the whole object, is never owned.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut set = self;
        for pe in parents {
            set = set.children.entry(pe.clone()).or_default();
        }
        set.members.insert(last.clone());
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        let mut set = self;
        for pe in parents {
            match set.children.get(pe) {
                Some(s) => set = s,
                None => return false,
            }
        }
        set.members.contains(last)
    }

    /// The paths below `pe`, without it.
    pub fn with_prefix(&self, pe: &PathElement) -> Option<&Set> {
        self.children.get(pe)
    }

    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    pub fn union_with(&mut self, other: &Set) {
        self.members.extend(other.members.iter().cloned());
        for (pe, set) in &other.children {
            self.children.entry(pe.clone()).or_default().union_with(set);
        }
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, set)| {
                let both = set.intersection(other.children.get(pe)?);
                (!both.is_empty()).then(|| (pe.clone(), both))
            })
            .collect();
        Set { members, children }
    }

    /// The paths of `self` not in `other`: a parent minus its child stays.
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, set)| match other.children.get(pe) {
                None => Some((pe.clone(), set.clone())),
                Some(o) => {
                    let d = set.difference(o);
                    (!d.is_empty()).then(|| (pe.clone(), d))
                }
            })
            .collect();
        Set { members, children }
    }

    /// The paths of `self` neither in `other` nor below a path of `other`.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(pe, _)| !other.members.contains(*pe))
            .filter_map(|(pe, set)| match other.children.get(pe) {
                None => Some((pe.clone(), set.clone())),
                Some(o) => {
                    let d = set.recursive_difference(o);
                    (!d.is_empty()).then(|| (pe.clone(), d))
                }
            })
            .collect();
        Set { members, children }
    }

    /// Every path, members of a node before the paths below it (kube's iteration order).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for pe in &self.members {
            let mut p = prefix.clone();
            p.push(pe.clone());
            out.push(p);
        }
        for (pe, set) in &self.children {
            prefix.push(pe.clone());
            set.collect(prefix, out);
            prefix.pop();
        }
    }

    pub(crate) fn members(&self) -> &BTreeSet<PathElement> {
        &self.members
    }

    pub(crate) fn children(&self) -> &BTreeMap<PathElement, Set> {
        &self.children
    }

    pub(crate) fn from_parts(
        members: BTreeSet<PathElement>,
        children: BTreeMap<PathElement, Set>,
    ) -> Set {
        Set { members, children }
    }

    /// The set as `fieldsV1`: `{"f:data": {".": {}, "f:a": {}}}`.
    pub fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        let keys: BTreeSet<&PathElement> =
            self.members.iter().chain(self.children.keys()).collect();
        for pe in keys {
            let mut node = match self.children.get(pe) {
                Some(child) => match child.to_fields_v1() {
                    Value::Object(m) => m,
                    _ => Map::new(),
                },
                None => Map::new(),
            };
            if self.members.contains(pe) && !node.is_empty() {
                node.insert(".".into(), Value::Object(Map::new()));
            }
            out.insert(pe.encode(), Value::Object(node));
        }
        Value::Object(out)
    }

    /// Reads `fieldsV1`; None when it is not a valid encoding.
    pub fn from_fields_v1(v: &Value) -> Option<Set> {
        let m = v.as_object()?;
        let mut set = Set::new();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = PathElement::decode(k)?;
            let cm = child.as_object()?;
            if cm.is_empty() || cm.contains_key(".") {
                set.members.insert(pe.clone());
            }
            let below = Set::from_fields_v1(child)?;
            if !below.is_empty() {
                set.children.insert(pe, below);
            }
        }
        Some(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.into())
    }

    fn key(name: &str, v: Value) -> PathElement {
        PathElement::Key(vec![(name.into(), KeyValue(v))])
    }

    #[test]
    fn fields_v1_marks_members_with_children_by_a_dot() {
        let mut s = Set::new();
        s.insert(&[f("metadata"), f("labels")]);
        s.insert(&[f("metadata"), f("labels"), f("a")]);
        s.insert(&[f("spec"), f("ports"), key("name", json!("http")), f("port")]);
        s.insert(&[f("spec"), f("ports"), key("name", json!("http"))]);
        s.insert(&[
            f("metadata"),
            f("finalizers"),
            PathElement::Value(KeyValue(json!("x"))),
        ]);
        let v1 = s.to_fields_v1();
        assert_eq!(
            v1,
            json!({"f:metadata": {"f:finalizers": {"v:\"x\"": {}},
                    "f:labels": {".": {}, "f:a": {}}},
                "f:spec": {"f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:port": {}}}}})
        );
        assert_eq!(Set::from_fields_v1(&v1), Some(s));
    }

    #[test]
    fn difference_keeps_parents_and_recursive_difference_drops_subtrees() {
        let mut s = Set::new();
        s.insert(&[f("status")]);
        s.insert(&[f("status"), f("phase")]);
        s.insert(&[f("spec"), f("a")]);
        let mut status = Set::new();
        status.insert(&[f("status")]);
        let d = s.difference(&status);
        assert!(d.has(&[f("status"), f("phase")]) && !d.has(&[f("status")]));
        let r = s.recursive_difference(&status);
        assert_eq!(r.paths(), vec![vec![f("spec"), f("a")]]);
    }

    #[test]
    fn paths_print_as_kube_prints_them() {
        let p = vec![
            f("spec"),
            f("ports"),
            PathElement::Key(vec![
                ("name".into(), KeyValue(json!("a"))),
                ("port".into(), KeyValue(json!(80))),
            ]),
            f("x"),
        ];
        assert_eq!(path_string(&p), ".spec.ports[name=\"a\",port=80].x");
        assert_eq!(
            path_string(&[PathElement::Value(KeyValue(json!("v")))]),
            "[=\"v\"]"
        );
    }

    #[test]
    fn elements_order_fields_before_keys_and_numbers_before_strings() {
        assert!(f("z") < key("a", json!(1)));
        assert!(key("a", json!(2)) < key("a", json!("1")));
        assert!(PathElement::Value(KeyValue(json!(1))) < PathElement::Index(0));
    }
}
