//! Label and field selectors, parsed from the `labelSelector` / `fieldSelector` query
//! parameters and matched against generic JSON objects.
//!
//! Pure code: parsing and matching only; which fields a resource supports is the registry's.

use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelReq {
    Exists(String),
    NotExists(String),
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(pub Vec<LabelReq>);

/// Why a selector could not be parsed, in kube-apiserver's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// A label requirement that could not be parsed.
fn requirement(message: impl std::fmt::Display) -> SelectorError {
    SelectorError(format!("unable to parse requirement: {message}"))
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_set(key: &str, rest: &str) -> Result<Vec<String>, SelectorError> {
    let rest = rest.trim();
    let Some(open) = rest.strip_prefix('(') else {
        let found = rest.split([' ', ',', ')']).next().unwrap_or("");
        return Err(requirement(format!("found '{found}' expected: '('")));
    };
    let Some(inner) = open.strip_suffix(')') else {
        let last = open.rsplit(',').next().unwrap_or("").trim();
        return Err(match last {
            "" => requirement("found '', expected: ',', ')' or identifier"),
            _ => requirement(format!("found '', expected: ',' or ')' after {last:?}")),
        });
    };
    let values: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return Err(requirement(format!(
            "{key}: for 'in', 'notin' operators, values set can't be empty"
        )));
    }
    if let Some(bad) = values.iter().find(|v| !valid_value(v)) {
        return Err(requirement(format!("invalid label value: {bad:?}")));
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),!h`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                return Err(requirement("found '', expected: identifier"));
            }
            let req = if let Some(k) = part.strip_prefix('!') {
                LabelReq::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('>') {
                LabelReq::Gt(
                    k.trim().into(),
                    v.trim()
                        .parse()
                        .map_err(|_| requirement(format!("{part}: value must be an integer")))?,
                )
            } else if let Some((k, v)) = part.split_once('<') {
                LabelReq::Lt(
                    k.trim().into(),
                    v.trim()
                        .parse()
                        .map_err(|_| requirement(format!("{part}: value must be an integer")))?,
                )
            } else if let Some(idx) = part.find(" notin") {
                let key = part[..idx].trim();
                LabelReq::NotIn(key.into(), parse_set(key, &part[idx + 6..])?)
            } else if let Some(idx) = part.find(" in") {
                let key = part[..idx].trim();
                LabelReq::In(key.into(), parse_set(key, &part[idx + 3..])?)
            } else {
                LabelReq::Exists(part.to_string())
            };
            let (key, value) = match &req {
                LabelReq::Exists(k) | LabelReq::NotExists(k) => (k, None),
                LabelReq::Eq(k, v) | LabelReq::NotEq(k, v) => (k, Some(v)),
                LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Gt(k, _)
                | LabelReq::Lt(k, _) => (k, None),
            };
            if !valid_key(key) {
                return Err(requirement(format!("invalid label key {key:?}")));
            }
            if let Some(v) = value
                && !valid_value(v)
            {
                return Err(requirement(format!("invalid label value: {v:?}")));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let get = |k: &str| label_value(obj, k);
        self.0.iter().all(|r| match r {
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An object's value of label `key`, if it has one.
pub fn label_value<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")
        .and_then(|labels| labels.get(key))
        .and_then(Value::as_str)
}

/// An object's value at a dotted field path as field selectors compare it: strings as they
/// are, other values in JSON, an absent field as the empty string.
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        cur = cur.get(seg).unwrap_or(&Value::Null);
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// One field requirement: `path` equals (or not) `value`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldReq {
    pub path: String,
    pub value: String,
    pub negate: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(pub Vec<FieldReq>);

impl FieldSelector {
    /// Parses `metadata.name=x,spec.signerName!=y`, allowing only `supported` paths (the
    /// object metadata's two, then the resource's own).
    pub fn parse(s: &str, supported: &[String]) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for part in s.split(',') {
            let (path, value, negate) = if let Some((k, v)) = part.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, v, false)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, v, false)
            } else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let path = path.trim();
            if !supported.iter().any(|p| p == path) {
                // Resources with fields of their own refuse others as their conversion
                // function does; the rest as the generic metadata one does.
                let message = if supported.len() > 2 {
                    format!("field label not supported: {path}")
                } else {
                    let only: Vec<String> = supported.iter().map(|p| format!("{p:?}")).collect();
                    format!(
                        "{path:?} is not a known field selector: only {}",
                        only.join(", ")
                    )
                };
                return Err(SelectorError(message));
            }
            reqs.push(FieldReq {
                path: path.to_string(),
                value: value.trim().to_string(),
                negate,
            });
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|r| (field_value(obj, &r.path) == r.value) != r.negate)
    }

    /// A `metadata.name=X` requirement, if present (lets get-by-name skip a scan).
    pub fn exact_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|r| r.path == "metadata.name" && !r.negate)
            .map(|r| r.value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}, "spec": {"signerName": "x/y"}})
    }

    #[test]
    fn every_label_operator_matches_as_kubernetes_does() {
        let o = obj(json!({"app": "web", "tier": "front", "n": "5"}));
        let yes = [
            "app=web",
            "app==web",
            "app!=db",
            "tier in (front,back)",
            "tier notin (back)",
            "app",
            "!missing",
            "app=web,tier=front",
            "n>4",
            "n<6",
            "missing notin (x)",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&o), "{s}");
        }
        let no = [
            "app=db",
            "app!=web",
            "tier in (back)",
            "!app",
            "missing",
            "tier notin (front)",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&o), "{s}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_rejected() {
        for s in ["app in ()", "a b c=d", "app=web,", "x in (a b)", "=x"] {
            assert!(LabelSelector::parse(s).is_err(), "{s}");
        }
        assert_eq!(
            LabelSelector::parse("a in (").unwrap_err().0,
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
    }

    #[test]
    fn field_selectors_match_supported_paths_only() {
        let supported = vec![
            "metadata.name".to_string(),
            "metadata.namespace".to_string(),
            "spec.signerName".to_string(),
        ];
        let o = obj(json!({}));
        let f = FieldSelector::parse("metadata.name=a,spec.signerName=x/y", &supported).unwrap();
        assert!(f.matches(&o));
        assert_eq!(f.exact_name(), Some("a"));
        let f = FieldSelector::parse("metadata.namespace!=ns", &supported).unwrap();
        assert!(!f.matches(&o));
        assert_eq!(
            FieldSelector::parse("spec.other=1", &supported)
                .unwrap_err()
                .0,
            "field label not supported: spec.other"
        );
        assert_eq!(
            FieldSelector::parse("data.k=v", &supported[..2])
                .unwrap_err()
                .0,
            "\"data.k\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert!(FieldSelector::parse("nonsense", &supported).is_err());
    }
}
