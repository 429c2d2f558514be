//! Compares a normalised answer with the recorded one, as the corpus's README says: every key and
//! value, lists in order, `managedFields` and the step's `unordered` paths as sets. Differences
//! are described by their path, for a person reading the replay's report.

use serde_json::Value;

/// The differences between `expected` and `actual` under `path`, appended to `out`.
pub fn values(
    expected: &Value,
    actual: &Value,
    path: &str,
    unordered: &[&str],
    out: &mut Vec<String>,
) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, ev) in e {
                let at = format!("{path}.{key}");
                match a.get(key) {
                    Some(av) => values(ev, av, &at, unordered, out),
                    None => out.push(format!("{at}: missing (expected {})", short(ev))),
                }
            }
            for (key, av) in a {
                if !e.contains_key(key) {
                    out.push(format!("{path}.{key}: not expected (got {})", short(av)));
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if path.ends_with(".managedFields") || unordered.contains(&path) {
                as_sets(e, a, path, out);
            } else if e.len() != a.len() {
                out.push(format!(
                    "{path}: {} items expected, got {}: expected {}, got {}",
                    e.len(),
                    a.len(),
                    names_or_short(e),
                    names_or_short(a)
                ));
            } else {
                for (i, (ev, av)) in e.iter().zip(paired_by_name(e, a, unordered)).enumerate() {
                    values(ev, av, &format!("{path}[{}]", label(ev, i)), unordered, out);
                }
            }
        }
        _ if expected == actual => {}
        _ => out.push(format!(
            "{path}: expected {}, got {}",
            short(expected),
            short(actual)
        )),
    }
}

/// The items of `a` to compare with those of `e`, in order. Objects are matched by name, as
/// the corpus's README says: items of one normalised name (made from one `generateName`, so
/// ordered by their random suffixes, on kube-apiserver as here) may stand in either order, and
/// each expected one is paired with the one of its name it equals, if any.
fn paired_by_name<'a>(e: &[Value], a: &'a [Value], unordered: &[&str]) -> Vec<&'a Value> {
    let name = |v: &Value| v.pointer("/metadata/name").cloned();
    let mut paired: Vec<&Value> = a.iter().collect();
    for i in 0..e.len() {
        let same = |v: &Value| name(v).is_some() && name(v) == name(&e[i]);
        let equal = |v: &Value| {
            let mut diffs = Vec::new();
            values(&e[i], v, "", unordered, &mut diffs);
            diffs.is_empty()
        };
        if !same(paired[i]) || equal(paired[i]) {
            continue;
        }
        if let Some(j) = (i + 1..paired.len()).find(|&j| same(paired[j]) && equal(paired[j])) {
            paired.swap(i, j);
        }
    }
    paired
}

fn as_sets(e: &[Value], a: &[Value], path: &str, out: &mut Vec<String>) {
    let mut left: Vec<&Value> = a.iter().collect();
    for ev in e {
        match left.iter().position(|av| *av == ev) {
            Some(i) => {
                left.remove(i);
            }
            None => out.push(format!("{path}: no item equal to {}", short(ev))),
        }
    }
    for av in left {
        out.push(format!("{path}: item not expected: {}", short(av)));
    }
}

/// How a list item is named in a path: by its name or type where it has one.
fn label(v: &Value, index: usize) -> String {
    ["name", "type"]
        .iter()
        .find_map(|k| v.get(k).and_then(Value::as_str))
        .map(|n| {
            format!(
                "{k}={n}",
                k = if v.get("name").is_some() {
                    "name"
                } else {
                    "type"
                }
            )
        })
        .or_else(|| {
            v.get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .map(|n| format!("metadata.name={n}"))
        })
        .unwrap_or_else(|| index.to_string())
}

fn names_or_short(items: &[Value]) -> String {
    let names: Vec<String> = items.iter().enumerate().map(|(i, v)| label(v, i)).collect();
    if names.iter().any(|n| n.contains('=')) {
        format!("[{}]", names.join(", "))
    } else {
        short(&Value::Array(items.to_vec()))
    }
}

/// A value in a line of the report, cut to a readable length.
pub fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 300 {
        let cut: String = s.chars().take(300).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// The keys of a JSON object's text in the order written: the top level's, and metadata's.
pub fn key_order(text: &str) -> Option<(Vec<String>, Vec<String>)> {
    let Keys { keys, metadata } = serde_json::from_str(text).ok()?;
    Some((keys, metadata.map(|m| m.keys).unwrap_or_default()))
}

/// An object's keys as written, and those of its `metadata` object.
struct Keys {
    keys: Vec<String>,
    metadata: Option<Box<Keys>>,
}

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Keys, A::Error> {
                let mut keys = Keys {
                    keys: Vec::new(),
                    metadata: None,
                };
                while let Some(key) = m.next_key::<String>()? {
                    if key == "metadata" {
                        keys.metadata = m.next_value::<Option<Keys>>()?.map(Box::new);
                    } else {
                        m.next_value::<serde::de::IgnoredAny>()?;
                    }
                    keys.keys.push(key);
                }
                Ok(keys)
            }
        }
        d.deserialize_map(Visit)
    }
}
