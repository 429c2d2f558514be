//! `meta.k8s.io/v1` Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), so
//! `kubectl get` prints columns: Name, the resource's printer columns, and Age.
//!
//! Pure: objects in, Table JSON out.

mod docs;
pub mod workload;

pub use docs::doc;

use serde_json::{Value, json};

use crate::meta::{ObjectMeta, parse_time};

/// How a printer column's cell is computed from an object.
#[derive(Debug, Clone)]
pub enum CellSource {
    /// A simple JSONPath such as `.spec.replicas`; where it finds nothing the cell shows
    /// `<none>` (0 in a number column), as built-in kinds' printers show it.
    JsonPath(String),
    /// A CRD's column (`additionalPrinterColumns[].jsonPath`): where it finds nothing the cell
    /// is empty (null), as kube-apiserver's CRD table convertor leaves it.
    CustomPath(String),
    /// The number of entries of the map or list at a path (ConfigMap DATA, SA SECRETS).
    Count(Vec<&'static str>),
    /// `ready/desired` for workloads.
    Ratio(Vec<&'static str>, Vec<&'static str>),
    /// Comma-joined types of conditions whose status is True (CSR CONDITION).
    TrueConditions,
    /// `Kind/name` of a binding's roleRef.
    RoleRef,
    /// A number of seconds at a path, printed as a duration (`1h`), or `<none>`.
    Seconds(Vec<&'static str>),
    /// A node's readiness from its `Ready` condition (`Ready`, `NotReady`, `Unknown`), with
    /// `SchedulingDisabled` when cordoned.
    NodeStatus,
    /// A node's roles from its `node-role.kubernetes.io/<role>` labels.
    NodeRoles,
    /// Age of an event's last occurrence (lastTimestamp, eventTime or creation).
    LastSeen,
    /// `kind/name` (kind in lower case) of the object an event is about, at this field.
    EventObject(&'static str),
    /// How long ago the object was created (`5m`).
    Age,
    /// A built-in kind's own rule, as kube-apiserver's printers compute the cell (given the
    /// time now, in seconds).
    Fn(fn(&Value, i64) -> Value),
}

/// One column of `kubectl get` output.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub source: CellSource,
}

impl PrinterColumn {
    /// A column showing the value at a simple JSONPath.
    pub fn path(name: &str, type_: &str, path: &str) -> Self {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            source: CellSource::JsonPath(path.into()),
        }
    }
    /// When the object was created, as CRDs and roles show it.
    pub fn created_at() -> Self {
        PrinterColumn::path("Created At", "date-time", ".metadata.creationTimestamp")
    }

    /// A column of a built-in kind: its name, type and kube-apiserver's description, the cell
    /// computed by `cell`.
    pub fn cell(
        name: &str,
        type_: &str,
        description: &str,
        cell: fn(&Value, i64) -> Value,
    ) -> Self {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: description.into(),
            priority: 0,
            source: CellSource::Fn(cell),
        }
    }

    /// The Age column of built-in kinds, placed where their printers place it.
    pub fn age() -> Self {
        PrinterColumn {
            name: "Age".into(),
            type_: "string".into(),
            format: String::new(),
            description: doc("meta.k8s.io/v1", "ObjectMeta", "creationTimestamp").into(),
            priority: 0,
            source: CellSource::Age,
        }
    }

    /// Shown only in wide output (`-o wide`).
    pub fn wide(mut self) -> Self {
        self.priority = 1;
        self
    }

    /// Formatted as a name (`format: name`).
    pub fn named(mut self) -> Self {
        self.format = "name".into();
        self
    }

    /// With kube-apiserver's description.
    pub fn described(mut self, description: &str) -> Self {
        self.description = description.into();
        self
    }

    /// A string column computed from the object.
    pub fn computed(name: &str, source: CellSource) -> Self {
        PrinterColumn {
            name: name.into(),
            type_: "string".into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            source,
        }
    }
}

/// How much of each object a Table row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// Whether an Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let parts: Vec<&str> = first.split(';').map(str::trim).collect();
        parts.contains(&"as=Table") && parts.contains(&"g=meta.k8s.io")
    })
}

/// Whether an Accept header asks for PartialObjectMetadata (metadata-only reads).
pub fn wants_metadata(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let parts: Vec<&str> = first.split(';').map(str::trim).collect();
        (parts.contains(&"as=PartialObjectMetadata")
            || parts.contains(&"as=PartialObjectMetadataList"))
            && parts.contains(&"g=meta.k8s.io")
    })
}

/// An object reduced to its metadata.
pub fn partial(obj: &Value) -> Value {
    partial_of(obj.get("metadata").cloned().unwrap_or(Value::Null))
}

pub use crate::meta::partial_of;

/// Whether the resource's own columns already say when objects were made (`Age` placed
/// elsewhere, or `Created At` as CRDs and roles show it), so no Age column is appended.
fn replaces_age(printer_columns: &[PrinterColumn]) -> bool {
    printer_columns
        .iter()
        .any(|c| matches!(c.name.as_str(), "Age" | "Created At" | "Last Seen"))
}

/// Whether the resource places its own Name column (events show it only with `-o wide`).
fn own_name(printer_columns: &[PrinterColumn]) -> bool {
    printer_columns.iter().any(|c| c.name == "Name")
}

/// The column definitions of a resource's table: a Name column unless the resource places
/// its own, its printer columns, and an Age column unless it says when objects were made
/// itself.
pub fn columns(printer_columns: &[PrinterColumn]) -> Value {
    let mut cols = Vec::new();
    if !own_name(printer_columns) {
        cols.push(json!({"name": "Name", "type": "string", "format": "name",
            "description": doc("meta.k8s.io/v1", "ObjectMeta", "name"), "priority": 0}));
    }
    let has_custom_age = replaces_age(printer_columns);
    for c in printer_columns {
        cols.push(json!({"name": c.name, "type": c.type_, "format": c.format,
            "description": c.description, "priority": c.priority}));
    }
    if !has_custom_age {
        cols.push(json!({"name": "Age", "type": "string", "format": "",
            "description": doc("meta.k8s.io/v1", "ObjectMeta", "creationTimestamp"),
            "priority": 0}));
    }
    Value::Array(cols)
}

/// A duration as kube-apiserver's printers write ages: `90s`, `3m2s`, `42m`, `5h3m`, `20h`,
/// `3d4h`, `40d`, `2y3d`, `9y`.
pub fn human_age(seconds: i64) -> String {
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let (minutes, hours, days) = (s / 60, s / 3600, s / 86_400);
    let with = |big: i64, unit: &str, small: i64, small_unit: &str| match small {
        0 => format!("{big}{unit}"),
        small => format!("{big}{unit}{small}{small_unit}"),
    };
    match () {
        _ if minutes < 10 => with(minutes, "m", s % 60, "s"),
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => with(hours, "h", minutes % 60, "m"),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 24 * 8 => with(days, "d", hours % 24, "h"),
        _ if hours < 24 * 365 * 2 => format!("{days}d"),
        _ if hours < 24 * 365 * 8 => with(days / 365, "y", days % 365, "d"),
        _ => format!("{}y", days / 365),
    }
}

fn age_of(ts: Option<&str>, now: i64) -> String {
    ts.and_then(parse_time)
        .map(|t| human_age(now - t))
        .unwrap_or_else(|| "<unknown>".into())
}

/// Evaluates a printer column's JSONPath (kubectl's syntax: `.a.b`, `['a']`, `[0]`, `[-1]`,
/// `[*]`, `..a`, filters `[?(@.type=="Ready")]` with `==`, `!=`, `<`, `<=`, `>`, `>=` or bare
/// existence) and, as kube-apiserver's table convertor does, keeps only its first result.
pub fn eval_path(obj: &Value, path: &str) -> Value {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    match jsonpath::parse(path) {
        Some(steps) => jsonpath::find(obj, &steps)
            .first()
            .map(|v| (*v).clone())
            .unwrap_or(Value::Null),
        None => Value::Null,
    }
}

/// The JSONPath subset kubectl and kube-apiserver use for printer columns.
mod jsonpath {
    use serde_json::Value;

    #[derive(Debug, PartialEq)]
    pub enum Step {
        Field(String),
        /// `..name`: the field at any depth.
        Descend(String),
        Index(i64),
        All,
        Filter(Filter),
    }

    #[derive(Debug, PartialEq)]
    pub struct Filter {
        path: Vec<String>,
        /// None: the path only has to exist.
        compare: Option<(Op, Value)>,
    }

    #[derive(Debug, PartialEq, Clone, Copy)]
    enum Op {
        Eq,
        Ne,
        Lt,
        Le,
        Gt,
        Ge,
    }

    /// Parses a path such as `.status.conditions[?(@.type=="Ready")].status`; None when it is
    /// not in the supported syntax.
    pub fn parse(path: &str) -> Option<Vec<Step>> {
        let mut steps = Vec::new();
        let mut rest = path;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("..") {
                let (name, r) = take_name(r);
                steps.push(Step::Descend(name.to_string()));
                rest = r;
            } else if let Some(r) = rest.strip_prefix('.') {
                let (name, r) = take_name(r);
                if name == "*" {
                    steps.push(Step::All);
                } else if !name.is_empty() {
                    steps.push(Step::Field(name.to_string()));
                }
                rest = r;
            } else if let Some(r) = rest.strip_prefix('[') {
                let (inner, r) = bracket(r)?;
                steps.push(bracket_step(inner.trim())?);
                rest = r;
            } else {
                let (name, r) = take_name(rest);
                if name.is_empty() {
                    return None;
                }
                steps.push(Step::Field(name.to_string()));
                rest = r;
            }
        }
        Some(steps)
    }

    fn take_name(s: &str) -> (&str, &str) {
        let end = s.find(['.', '[']).unwrap_or(s.len());
        s.split_at(end)
    }

    /// The text up to the `]` closing a bracket, skipping quoted strings and nested brackets.
    fn bracket(s: &str) -> Option<(&str, &str)> {
        let mut depth = 0usize;
        let mut quote = None;
        for (i, c) in s.char_indices() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '[') => depth += 1,
                (None, ']') if depth == 0 => return Some((&s[..i], &s[i + 1..])),
                (None, ']') => depth -= 1,
                _ => {}
            }
        }
        None
    }

    fn unquote(s: &str) -> Option<&str> {
        let s = s.trim();
        s.strip_prefix('\'')
            .and_then(|s| s.strip_suffix('\''))
            .or_else(|| s.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
    }

    fn bracket_step(inner: &str) -> Option<Step> {
        if inner == "*" {
            return Some(Step::All);
        }
        if let Some(name) = unquote(inner) {
            return Some(Step::Field(name.to_string()));
        }
        if let Some(f) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
            return filter(f.trim()).map(Step::Filter);
        }
        inner.parse().ok().map(Step::Index)
    }

    fn filter(f: &str) -> Option<Filter> {
        const OPS: [(&str, Op); 6] = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        let (lhs, compare) = match OPS.iter().find_map(|(t, op)| {
            let at = f.find(t)?;
            Some((&f[..at], (*op, &f[at + t.len()..])))
        }) {
            Some((lhs, (op, rhs))) => (lhs, Some((op, literal(rhs.trim())?))),
            None => (f, None),
        };
        let path = lhs.trim().strip_prefix('@')?;
        let path = path
            .split('.')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        Some(Filter { path, compare })
    }

    fn literal(s: &str) -> Option<Value> {
        if let Some(text) = unquote(s) {
            return Some(Value::String(text.to_string()));
        }
        serde_json::from_str(s).ok()
    }

    /// Every value the path selects, in document order.
    pub fn find<'a>(root: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for step in steps {
            let mut next = Vec::new();
            for v in cur {
                match step {
                    Step::Field(name) => next.extend(v.get(name.as_str())),
                    Step::Descend(name) => descend(v, name, &mut next),
                    Step::All => match v {
                        Value::Array(items) => next.extend(items),
                        Value::Object(map) => next.extend(map.values()),
                        _ => {}
                    },
                    Step::Index(i) => {
                        if let Some(items) = v.as_array() {
                            let at = if *i < 0 {
                                usize::try_from(items.len() as i64 + i).ok()
                            } else {
                                usize::try_from(*i).ok()
                            };
                            next.extend(at.and_then(|at| items.get(at)));
                        }
                    }
                    Step::Filter(f) => {
                        let items: Vec<&Value> = match v {
                            Value::Array(items) => items.iter().collect(),
                            other => vec![other],
                        };
                        next.extend(items.into_iter().filter(|item| f.holds(item)));
                    }
                }
            }
            cur = next;
        }
        cur
    }

    fn descend<'a>(v: &'a Value, name: &str, out: &mut Vec<&'a Value>) {
        match v {
            Value::Object(map) => {
                out.extend(map.get(name));
                for child in map.values() {
                    descend(child, name, out);
                }
            }
            Value::Array(items) => {
                for child in items {
                    descend(child, name, out);
                }
            }
            _ => {}
        }
    }

    impl Filter {
        fn holds(&self, item: &Value) -> bool {
            let mut v = item;
            for k in &self.path {
                match v.get(k.as_str()) {
                    Some(next) => v = next,
                    None => return false,
                }
            }
            let Some((op, want)) = &self.compare else {
                return true;
            };
            let order = match (v, want) {
                (Value::Number(a), Value::Number(b)) => a
                    .as_f64()
                    .zip(b.as_f64())
                    .and_then(|(a, b)| a.partial_cmp(&b)),
                (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
                (a, b) => (a == b).then_some(std::cmp::Ordering::Equal),
            };
            use std::cmp::Ordering::*;
            match op {
                Op::Eq => order == Some(Equal),
                Op::Ne => order != Some(Equal),
                Op::Lt => order == Some(Less),
                Op::Le => matches!(order, Some(Less | Equal)),
                Op::Gt => order == Some(Greater),
                Op::Ge => matches!(order, Some(Greater | Equal)),
            }
        }
    }
}

/// One cell.
fn cell(source: &CellSource, type_: &str, obj: &Value, now: i64) -> Value {
    let at = |p: &[&str]| {
        let mut cur = obj;
        for k in p {
            cur = cur.get(*k).unwrap_or(&Value::Null);
        }
        cur.clone()
    };
    match source {
        CellSource::JsonPath(p) | CellSource::CustomPath(p) => {
            let custom = matches!(source, CellSource::CustomPath(_));
            let v = eval_path(obj, p);
            if type_ == "date" {
                return match v.as_str() {
                    Some(s) => Value::String(age_of(Some(s), now)),
                    None if custom => Value::Null,
                    None => Value::String("<unknown>".into()),
                };
            }
            match v {
                Value::Null if custom => Value::Null,
                Value::Null => match type_ {
                    "integer" | "number" => json!(0),
                    _ => json!("<none>"),
                },
                Value::Object(_) | Value::Array(_) => Value::String(v.to_string()),
                other => other,
            }
        }
        CellSource::Count(p) => {
            let v = at(p);
            json!(
                v.as_object()
                    .map(|m| m.len())
                    .or(v.as_array().map(Vec::len))
                    .unwrap_or(0)
            )
        }
        CellSource::Ratio(a, b) => {
            let n = |v: Value| v.as_i64().unwrap_or(0);
            json!(format!("{}/{}", n(at(a)), n(at(b))))
        }
        CellSource::TrueConditions => {
            let conds: Vec<String> = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|c| c.get("status").and_then(Value::as_str).unwrap_or("True") == "True")
                .filter_map(|c| c.get("type").and_then(Value::as_str).map(str::to_string))
                .collect();
            json!(if conds.is_empty() {
                "Pending".to_string()
            } else {
                conds.join(",")
            })
        }
        CellSource::NodeStatus => {
            let ready = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                .and_then(|c| c.get("status").and_then(Value::as_str));
            let mut s = match ready {
                Some("True") => "Ready".to_string(),
                Some("False") => "NotReady".to_string(),
                _ => "Unknown".to_string(),
            };
            if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                s.push_str(",SchedulingDisabled");
            }
            json!(s)
        }
        CellSource::LastSeen => {
            let ts = [
                "/lastTimestamp",
                "/eventTime",
                "/series/lastObservedTime",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .find_map(|p| obj.pointer(p).and_then(Value::as_str));
            json!(age_of(ts, now))
        }
        CellSource::EventObject(field) => {
            let kind = obj
                .pointer(&format!("/{field}/kind"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_lowercase();
            let name = obj
                .pointer(&format!("/{field}/name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            json!(format!("{kind}/{name}"))
        }
        CellSource::NodeRoles => {
            let roles: Vec<&str> = obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .collect();
            json!(if roles.is_empty() {
                "<none>".to_string()
            } else {
                roles.join(",")
            })
        }
        CellSource::Seconds(p) => match at(p).as_i64() {
            Some(s) => json!(human_age(s)),
            None => json!("<none>"),
        },
        CellSource::Age => json!(age_of(obj.meta_str("creationTimestamp"), now)),
        CellSource::Fn(cell) => cell(obj, now),
        CellSource::RoleRef => json!(format!(
            "{}/{}",
            obj.pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or(""),
            obj.pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        )),
    }
}

/// One table row: the cells of `printer_columns` (and of the Name and Age columns
/// [`columns`] adds).
pub fn row(
    printer_columns: &[PrinterColumn],
    obj: &Value,
    include: IncludeObject,
    now: i64,
) -> Value {
    let mut cells = Vec::new();
    if !own_name(printer_columns) {
        cells.push(json!(obj.name()));
    }
    for c in printer_columns {
        cells.push(cell(&c.source, &c.type_, obj, now));
    }
    if !replaces_age(printer_columns) {
        cells.push(json!(age_of(obj.meta_str("creationTimestamp"), now)));
    }
    let mut r = json!({"cells": cells});
    match include {
        // kube-apiserver's row always has its object: empty, it is null.
        IncludeObject::None => r["object"] = Value::Null,
        IncludeObject::Metadata => {
            r["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))});
        }
        IncludeObject::Object => r["object"] = obj.clone(),
    }
    r
}

/// A full Table of `objs`, a resource's objects shown in its `printer_columns`.
pub fn table(
    printer_columns: &[PrinterColumn],
    objs: &[Value],
    include: IncludeObject,
    list_meta: Value,
    with_columns: bool,
) -> Value {
    let now = jiff::Timestamp::now().as_second();
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| row(printer_columns, o, include, now))
        .collect();
    let mut t = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
        "rows": rows});
    t["columnDefinitions"] = if with_columns {
        columns(printer_columns)
    } else {
        json!([])
    };
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(300), "5m");
        assert_eq!(human_age(3 * 3600), "3h");
        assert_eq!(human_age(5 * 86400), "5d");
        assert_eq!(human_age(182), "3m2s");
        assert_eq!(human_age(5 * 3600 + 180), "5h3m");
        assert_eq!(human_age(3 * 86400 + 4 * 3600), "3d4h");
        assert_eq!(human_age(40 * 86400), "40d");
        assert_eq!(human_age(-5), "0s");
    }

    #[test]
    fn json_paths_pick_fields_and_list_items() {
        let o = json!({"spec": {"a": [{"n": 1}, {"n": 2}]}, "status": {"phase": "Ok"}});
        assert_eq!(eval_path(&o, ".status.phase"), json!("Ok"));
        assert_eq!(eval_path(&o, ".spec.a[1].n"), json!(2));
        // kube-apiserver's table convertor keeps the first of several results.
        assert_eq!(eval_path(&o, ".spec.a[*].n"), json!(1));
        assert_eq!(eval_path(&o, ".spec.a[-1].n"), json!(2));
        assert_eq!(eval_path(&o, "{.spec['a'][1]['n']}"), json!(2));
        assert_eq!(eval_path(&o, "..phase"), json!("Ok"));
        assert_eq!(eval_path(&o, ".nope"), Value::Null);
        assert_eq!(eval_path(&o, ".spec.a[?(@.n>1)].n"), json!(2));
        assert_eq!(eval_path(&o, ".spec.a[?(@.n)].n"), json!(1));
        assert_eq!(eval_path(&o, ".spec.a[?(@.m)].n"), Value::Null);
    }

    #[test]
    fn json_path_filters_pick_the_condition_of_a_type() {
        let o = json!({"status": {"conditions": [
            {"type": "ManagedClusterJoined", "status": "True"},
            {"type": "ManagedClusterConditionAvailable", "status": "Unknown"}]}});
        let path = |t: &str| format!(".status.conditions[?(@.type==\"{t}\")].status");
        assert_eq!(eval_path(&o, &path("ManagedClusterJoined")), json!("True"));
        assert_eq!(
            eval_path(&o, &path("ManagedClusterConditionAvailable")),
            json!("Unknown")
        );
        assert_eq!(eval_path(&o, &path("Missing")), Value::Null);
        assert_eq!(
            eval_path(
                &o,
                ".status.conditions[?(@.type!='ManagedClusterJoined')].type"
            ),
            json!("ManagedClusterConditionAvailable")
        );
    }

    #[test]
    fn node_status_column_reads_the_ready_condition() {
        let node = json!({"spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(
            cell(&CellSource::NodeStatus, "string", &node, 0),
            json!("Ready,SchedulingDisabled")
        );
        assert_eq!(
            cell(&CellSource::NodeStatus, "string", &json!({}), 0),
            json!("Unknown")
        );
    }

    #[test]
    fn events_show_last_seen_and_object_and_name_only_when_wide() {
        let info = crate::registry::Registry::with_builtins()
            .lookup("", "v1", "events")
            .unwrap();
        let cols: Vec<(String, i64)> = columns(&info.printer_columns)
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_string(),
                    c["priority"].as_i64().unwrap(),
                )
            })
            .collect();
        let names: Vec<&str> = cols.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["Last Seen", "Type", "Reason", "Object", "Message", "Name"]
        );
        assert_eq!(cols[5].1, 1);
        let ev = json!({"metadata": {"name": "e1"}, "type": "Normal", "reason": "R", "message": "m",
            "involvedObject": {"kind": "Deployment", "name": "web"}, "lastTimestamp": "1970-01-01T00:00:10Z"});
        let r = row(&info.printer_columns, &ev, IncludeObject::None, 70);
        assert_eq!(
            r["cells"],
            json!(["60s", "Normal", "R", "deployment/web", "m", "e1"])
        );
    }

    #[test]
    fn table_accept_header_is_recognised() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
