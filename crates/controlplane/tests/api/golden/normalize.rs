//! Replaces the volatile values of an answer by the corpus's placeholders (its README's table),
//! so that what is compared is what a client can rely on.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// What normalising needs beyond the answer itself: the names this scenario's `generateName`s
/// produced, by the prefix they came from.
#[derive(Default)]
pub struct Volatile {
    generated: BTreeMap<String, String>,
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("placeholder pattern")
}

static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"));
static PEM: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?s)-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----\n?|LS0tLS1CRUdJT[A-Za-z0-9+/=]+")
});
static JWT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+|ZXlK[A-Za-z0-9+/]{20,}={0,2}")
});
static CERT_SHA: LazyLock<Regex> = LazyLock::new(|| re(r"X509SHA256=[0-9a-f]+"));
static PORT: LazyLock<Regex> = LazyLock::new(|| re(r"(127\.0\.0\.1|localhost):[0-9]+"));
/// A timestamp in any of the shapes a server might write.
static TIME: LazyLock<Regex> =
    LazyLock::new(|| re(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})"));
static RV_IN_MESSAGE: LazyLock<Regex> = LazyLock::new(|| re(r"\((\d+)\)"));
static RV_IN_QUOTED_OBJECT: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(\\?"resourceVersion\\?":\s*\\?")\d+(\\?")"#));
static RV_IN_YAML: LazyLock<Regex> = LazyLock::new(|| re(r#"(resourceVersion: )"\d+""#));

impl Volatile {
    /// Remembers the name a `generateName` produced, so that it reads as its placeholder in this
    /// answer and every later one.
    pub fn learn_generated(&mut self, prefix: &str, name: &str) {
        let cut: String = prefix.chars().take(58).collect();
        if name.len() == cut.len() + 5 && name.starts_with(&cut) {
            self.generated
                .insert(name.to_string(), format!("<generated:{prefix}>"));
        }
    }

    /// Every name `prefix` could generate, in text (refusals name the object they would have
    /// made).
    pub fn generated_pattern(prefix: &str) -> Regex {
        let cut: String = prefix.chars().take(58).collect();
        re(&format!("{}[a-z0-9]{{5}}", regex::escape(&cut)))
    }

    /// Normalises a parsed JSON answer in place.
    pub fn value(&self, v: &mut Value, generate_name: Option<&str>) {
        match v {
            Value::Object(map) => {
                let is_table = map.get("kind").and_then(Value::as_str) == Some("Table");
                // Keys hold volatile values too (managedFields' `k:{"uid":"..."}`).
                if map.keys().any(|k| self.text(k, generate_name) != *k) {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(k, item)| (self.text(&k, generate_name), item))
                        .collect();
                }
                for (key, item) in map.iter_mut() {
                    match (key.as_str(), &*item) {
                        ("uid", Value::String(_)) => *item = Value::from("<uid>"),
                        ("resourceVersion", Value::String(s)) if !s.is_empty() => {
                            *item = Value::from("<rv>")
                        }
                        ("continue", Value::String(s)) if !s.is_empty() => {
                            *item = Value::from("<continue>")
                        }
                        _ => self.value(item, generate_name),
                    }
                }
                if is_table {
                    age_cells(map);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i, generate_name)),
            Value::String(s) => *s = self.text(s, generate_name),
            _ => {}
        }
    }

    /// Normalises text: a string inside an answer, or a whole raw body.
    pub fn text(&self, s: &str, generate_name: Option<&str>) -> String {
        let mut out = s.to_string();
        for (name, placeholder) in &self.generated {
            if out.contains(name.as_str()) {
                out = out.replace(name.as_str(), placeholder);
            }
        }
        if let Some(prefix) = generate_name {
            out = Self::generated_pattern(prefix)
                .replace_all(&out, format!("<generated:{prefix}>").as_str())
                .into_owned();
        }
        out = PEM.replace_all(&out, "<pem>").into_owned();
        out = JWT.replace_all(&out, "<token>").into_owned();
        out = UUID.replace_all(&out, "<uid>").into_owned();
        out = CERT_SHA
            .replace_all(&out, "X509SHA256=<cert-sha256>")
            .into_owned();
        out = PORT.replace_all(&out, "$1:<port>").into_owned();
        out = TIME
            .replace_all(&out, |c: &Captures| time(&c[0]))
            .into_owned();
        out = RV_IN_QUOTED_OBJECT
            .replace_all(&out, "${1}<rv>${2}")
            .into_owned();
        out = RV_IN_YAML.replace_all(&out, "${1}\"<rv>\"").into_owned();
        if out.contains("ResourceVersion") {
            out = RV_IN_MESSAGE.replace_all(&out, "(<rv>)").into_owned();
        }
        out
    }
}

/// A recent timestamp's placeholder by its shape; an old one (a request chose it) stays as it is.
fn time(t: &str) -> String {
    let Ok(at) = t.parse::<jiff::Timestamp>() else {
        return t.to_string();
    };
    let age = jiff::Timestamp::now().duration_since(at).abs();
    if age > jiff::SignedDuration::from_hours(72) {
        return t.to_string();
    }
    let seconds = t.len() == "2006-01-02T15:04:05Z".len() && t.ends_with('Z');
    let micro = t.len() == "2006-01-02T15:04:05.000000Z".len() && t.ends_with('Z');
    match (seconds, micro) {
        (true, _) => "<time>".into(),
        (_, true) => "<microtime>".into(),
        _ => {
            let shape: String = t
                .chars()
                .map(|c| if c.is_ascii_digit() { 'd' } else { c })
                .collect();
            format!("<time:{shape}>")
        }
    }
}

/// A Table's Age column is how long ago, which no two runs agree on.
fn age_cells(table: &mut serde_json::Map<String, Value>) {
    let Some(age) = table
        .get("columnDefinitions")
        .and_then(Value::as_array)
        .and_then(|cols| {
            cols.iter()
                .position(|c| c.get("name").and_then(Value::as_str) == Some("Age"))
        })
    else {
        return;
    };
    if let Some(rows) = table.get_mut("rows").and_then(Value::as_array_mut) {
        for row in rows {
            if let Some(cell) = row.get_mut("cells").and_then(|c| c.get_mut(age)) {
                *cell = Value::from("<age>");
            }
        }
    }
}

/// The entries of every `managedFields` in `v` (an array, or an object quoted in a message)
/// with the same operation put in the order of their managers. kube-apiserver orders them by
/// operation, then time in seconds, then manager; the corpus hides the times, so two entries of
/// one operation are in either order as their writes fell in one second or two (a replay's
/// seldom fall as the recording's did). Applied to both sides of a comparison.
pub fn same_operation_in_any_order(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match item {
                    Value::Array(entries) if key == "managedFields" => {
                        entries.sort_by_cached_key(|entry| {
                            let field =
                                |name: &str| entry[name].as_str().unwrap_or_default().to_string();
                            (field("operation"), field("manager"))
                        })
                    }
                    _ => same_operation_in_any_order(item),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(same_operation_in_any_order),
        Value::String(s) if s.contains(QUOTED_MANAGED_FIELDS) => *s = quoted_in_any_order(s),
        _ => {}
    }
}

/// How a message quotes an object's managed fields.
const QUOTED_MANAGED_FIELDS: &str = r#"\"managedFields\":["#;

static QUOTED_ENTRY_KEYS: LazyLock<Regex> =
    LazyLock::new(|| re(r#"\\"manager\\":\\"([^\\]*)\\",\\"operation\\":\\"([^\\]*)\\""#));

/// [`same_operation_in_any_order`] for the objects `text` quotes: each `managedFields` array's
/// top-level entries (found by their braces) sorted by operation and manager.
fn quoted_in_any_order(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(QUOTED_MANAGED_FIELDS) {
        let start = at + QUOTED_MANAGED_FIELDS.len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let (mut entries, mut depth, mut from) = (Vec::new(), 0usize, 0usize);
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '{' => {
                    if depth == 0 {
                        from = i;
                    }
                    depth += 1;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        entries.push(&rest[from..=i]);
                    }
                }
                ']' if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        entries.sort_by_cached_key(|entry| {
            QUOTED_ENTRY_KEYS
                .captures(entry)
                .map(|keys| (keys[2].to_string(), keys[1].to_string()))
                .unwrap_or_default()
        });
        out.push_str(&entries.join(","));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn entries_of_one_operation_compare_in_either_order_quoted_or_not() {
    let entry = |manager: &str, operation: &str| {
        format!(
            r#"{{\"manager\":\"{manager}\",\"operation\":\"{operation}\",\"time\":\"<time>\",\"fieldsV1\":{{\"f:data\":{{\"f:{manager}\":{{}}}}}}}}"#
        )
    };
    let message = |entries: [String; 3]| {
        Value::from(format!(
            r#"Invalid value: "{{\"metadata\":{{\"name\":\"ssa\",\"managedFields\":[{}]}}}}": strict decoding error"#,
            entries.join(",")
        ))
    };
    let (alice, bob, carol) = (
        entry("alice", "Apply"),
        entry("bob", "Apply"),
        entry("carol", "Update"),
    );
    let mut recorded = message([alice.clone(), bob.clone(), carol.clone()]);
    let mut replayed = message([bob, alice, carol]);
    assert_ne!(recorded, replayed);
    same_operation_in_any_order(&mut recorded);
    same_operation_in_any_order(&mut replayed);
    assert_eq!(recorded, replayed);

    let object = |managers: [(&str, &str); 3]| {
        let entries: Vec<Value> = managers
            .iter()
            .map(|(manager, operation)| serde_json::json!({"manager": manager, "operation": operation}))
            .collect();
        serde_json::json!({"metadata": {"managedFields": entries}})
    };
    let mut recorded = object([("unknown", "Update"), ("kcm", "Update"), ("alice", "Apply")]);
    let mut replayed = object([("alice", "Apply"), ("kcm", "Update"), ("unknown", "Update")]);
    same_operation_in_any_order(&mut recorded);
    same_operation_in_any_order(&mut replayed);
    assert_eq!(recorded, replayed);
    assert_eq!(recorded["metadata"]["managedFields"][0]["manager"], "alice");
}
