//! What kube-apiserver accepts as a name, a label, an annotation or a configuration key, and
//! the words it refuses the others with (apimachinery's `util/validation` and `ObjectMeta`
//! validation): clients match on these messages and field paths, so they are kube's own.
//!
//! Pure: strings in, messages or field errors out.

use serde_json::Value;

use crate::error::FieldError;

/// How a resource's names are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain (most resources).
    Subdomain,
    /// RFC 1123 label (namespaces).
    Label,
    /// Any name valid as a path segment (RBAC roles allow `:`).
    PathSegment,
    /// Not checked (core/v1 Events, which kube-apiserver validates for backwards compatibility
    /// only by their contents).
    Unchecked,
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// The most bytes a object's annotations may take, keys and values together.
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// apimachinery's `RegexError`: the rule, its examples and the regular expression.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}'")).collect();
    format!(
        "{msg} (e.g. {}, regex used for validation is '{fmt}')",
        examples.join(",  or ")
    )
}

fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_label_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_subdomain_shaped(s: &str) -> bool {
    s.split('.').all(is_label_shaped)
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// What is wrong with `value` as an RFC 1123 label (a namespace's name).
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len(63));
    }
    if !is_label_shaped(value) {
        if value.contains('.') && is_subdomain_shaped(value) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// What is wrong with `value` as an RFC 1123 subdomain (most names).
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len(253));
    }
    if !is_subdomain_shaped(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// What is wrong with `value` as a path segment (RBAC names).
fn path_segment(value: &str) -> Vec<String> {
    if value == "." || value == ".." {
        return vec![format!("may not be '{value}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| value.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// What is wrong with `name` under `rule`; a `generateName` prefix is checked as the names it
/// yields are (its trailing `-` stands for the random suffix).
pub fn name(name: &str, rule: NameRule, prefix: bool) -> Vec<String> {
    let masked;
    let name = match name.strip_suffix('-') {
        Some(head) if prefix => {
            masked = format!("{head}a");
            masked.as_str()
        }
        _ => name,
    };
    match rule {
        NameRule::Subdomain => dns1123_subdomain(name),
        NameRule::Label => dns1123_label(name),
        NameRule::PathSegment if prefix => Vec::new(),
        NameRule::PathSegment => path_segment(name),
        NameRule::Unchecked => Vec::new(),
    }
}

/// What is wrong with `value` as a qualified name (`prefix/name` with an optional DNS
/// subdomain prefix): label and annotation keys, finalizers. `what` names it when its shape
/// is wrong as a whole ("a valid label key").
pub fn qualified_name(value: &str, what: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            return vec![format!(
                "{what} {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len(63)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// What is wrong with `value` as a label value.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 bytes".into());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// What is wrong with `value` as a key of a ConfigMap's or Secret's data.
pub fn config_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len(253));
    }
    let shaped = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !shaped {
        errs.push(regex_error(
            CONFIG_KEY_MSG,
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match value {
        "." => errs.push("must not be '.'".into()),
        ".." => errs.push("must not be '..'".into()),
        v if v.starts_with("..") => errs.push("must not start with '..'".into()),
        _ => {}
    }
    errs
}

fn invalid(field: &str, value: &str, messages: Vec<String>) -> impl Iterator<Item = FieldError> {
    let value = Value::String(value.to_string());
    let field = field.to_string();
    messages
        .into_iter()
        .map(move |m| FieldError::invalid(field.clone(), &value, m))
}

/// Field errors of an object's labels.
pub fn labels(labels: &Value, field: &str) -> Vec<FieldError> {
    let Some(map) = labels.as_object() else {
        return not_a_string_map(labels, field);
    };
    let mut errs = Vec::new();
    for (k, v) in map {
        errs.extend(invalid(field, k, qualified_name(k, "a valid label key")));
        match v.as_str() {
            Some(s) => errs.extend(invalid(field, s, label_value(s))),
            None => errs.push(FieldError::invalid(field, v, "must be a string")),
        }
    }
    errs
}

/// Field errors of an object's annotations: each key, and their size together.
pub fn annotations(annotations: &Value, field: &str) -> Vec<FieldError> {
    let Some(map) = annotations.as_object() else {
        return not_a_string_map(annotations, field);
    };
    let mut errs = Vec::new();
    let mut size = 0;
    for (k, v) in map {
        errs.extend(invalid(
            field,
            k,
            qualified_name(&k.to_lowercase(), "a qualified name"),
        ));
        match v.as_str() {
            Some(s) => size += k.len() + s.len(),
            None => errs.push(FieldError::invalid(field, v, "must be a string")),
        }
    }
    if size > ANNOTATIONS_MAX_BYTES {
        errs.push(FieldError::too_long(field, ANNOTATIONS_MAX_BYTES as u64));
    }
    errs
}

fn not_a_string_map(v: &Value, field: &str) -> Vec<FieldError> {
    if v.is_null() {
        Vec::new()
    } else {
        vec![FieldError::invalid(field, v, "must be a map of strings")]
    }
}

/// Field errors of the keys of a ConfigMap's or Secret's `data` (and `binaryData`): each as
/// `data[key]`.
pub fn config_keys(map: &Value, field: &str) -> Vec<FieldError> {
    let Some(map) = map.as_object() else {
        return Vec::new();
    };
    map.keys()
        .flat_map(|k| invalid(&format!("{field}[{k}]"), k, config_key(k)).collect::<Vec<_>>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_may_be_253_characters_with_labels_of_any_length() {
        assert!(dns1123_subdomain(&"a".repeat(253)).is_empty());
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            vec!["must be no more than 253 characters"]
        );
        assert!(dns1123_subdomain("a.b-c").is_empty());
        assert_eq!(dns1123_subdomain("Upper").len(), 1);
        assert!(dns1123_subdomain("ends-with-")[0].contains("e.g. 'example.com', regex"));
    }

    #[test]
    fn namespace_names_are_labels_and_dots_are_named() {
        assert!(dns1123_label("golden-02").is_empty());
        assert_eq!(
            dns1123_label("golden.dotted"),
            vec!["must not contain dots"]
        );
        assert_eq!(
            dns1123_label(&"n".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(dns1123_label("Upper")[0].starts_with("a lowercase RFC 1123 label"));
    }

    #[test]
    fn generate_name_prefixes_are_checked_as_the_names_they_yield() {
        assert!(name("obj-", NameRule::Subdomain, true).is_empty());
        assert_eq!(name("obj.", NameRule::Subdomain, true).len(), 1);
        assert_eq!(name("Bad-", NameRule::Subdomain, true).len(), 1);
        assert!(name("obj-", NameRule::Subdomain, false).len() == 1);
        assert!(name("Any:thing", NameRule::Unchecked, false).is_empty());
    }

    #[test]
    fn label_keys_name_the_part_that_is_wrong() {
        assert!(qualified_name("app.kubernetes.io/name", "a valid label key").is_empty());
        assert!(
            qualified_name("bad key", "a valid label key")[0].starts_with("name part must consist")
        );
        assert!(
            qualified_name("Example.COM/k", "a valid label key")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        let slashes = qualified_name("a/b/c", "a valid label key");
        assert!(slashes[0].starts_with("a valid label key must consist"));
        assert!(slashes[0].ends_with(
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
        assert_eq!(
            qualified_name("/k", "a valid label key"),
            vec!["prefix part must be non-empty"]
        );
    }

    #[test]
    fn label_values_are_limited_to_63_bytes() {
        assert!(label_value(&"v".repeat(63)).is_empty());
        assert_eq!(
            label_value(&"v".repeat(64)),
            vec!["must be no more than 63 bytes"]
        );
        assert!(label_value("").is_empty());
        assert_eq!(label_value("a b").len(), 1);
    }

    #[test]
    fn annotations_are_limited_to_256_kib_together() {
        let at_limit = serde_json::json!({"big": "a".repeat(ANNOTATIONS_MAX_BYTES - 3)});
        assert!(annotations(&at_limit, "metadata.annotations").is_empty());
        let over = serde_json::json!({"big": "a".repeat(ANNOTATIONS_MAX_BYTES)});
        let errs = annotations(&over, "metadata.annotations");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].reason, "FieldValueTooLong");
        assert_eq!(
            errs[0].message,
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
    }

    #[test]
    fn config_keys_are_checked_each_under_its_own_path() {
        let data = serde_json::json!({"bad key": "v", "ok.key_1-A": "v", "..x": "v"});
        let errs = config_keys(&data, "data");
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["data[..x]", "data[bad key]"]);
        assert!(errs[1].message.contains("a valid config key must consist"));
    }
}
