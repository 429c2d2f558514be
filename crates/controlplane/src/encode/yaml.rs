//! YAML answers (`Accept: application/yaml`), as kube-apiserver writes them: the object's JSON
//! read back as YAML by go-yaml v2, so keys are sorted at every level, sequences inside
//! mappings are not indented, strings that would read back as something else (`"2"`, `"y"`,
//! timestamps) are double-quoted, strings a plain scalar cannot hold are single-quoted,
//! multi-line strings are literal blocks, and long lines fold at 80 columns.

use serde_json::Value;

/// Where go-yaml folds a long line.
const WIDTH: usize = 80;

/// `value` as YAML.
pub fn yaml(value: &Value) -> String {
    let mut w = Writer {
        out: String::new(),
        column: 0,
    };
    match value {
        Value::Object(map) if !map.is_empty() => w.mapping(map, 0),
        Value::Array(items) if !items.is_empty() => w.sequence(items, 0),
        scalar => w.node(scalar, 0),
    }
    w.newline();
    w.out
}

struct Writer {
    out: String,
    column: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

impl Writer {
    fn push(&mut self, s: &str) {
        self.out.push_str(s);
        self.column += s.chars().count();
    }

    fn newline(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    fn indent(&mut self, n: usize) {
        self.newline();
        for _ in 0..n {
            self.out.push(' ');
        }
        self.column = n;
    }

    /// A block mapping whose keys start at column `indent` (the first at the current column).
    fn mapping(&mut self, map: &serde_json::Map<String, Value>, indent: usize) {
        for (i, (k, v)) in map.iter().enumerate() {
            if i > 0 {
                self.indent(indent);
            }
            self.scalar(k, indent, true);
            self.push(":");
            match v {
                Value::Object(m) if !m.is_empty() => {
                    self.indent(indent + 2);
                    self.mapping(m, indent + 2);
                }
                // go-yaml writes a mapping's sequences at the mapping's own indentation.
                Value::Array(items) if !items.is_empty() => {
                    self.indent(indent);
                    self.sequence(items, indent);
                }
                other => {
                    self.push(" ");
                    self.node(other, indent + 2);
                }
            }
        }
    }

    /// A block sequence whose dashes start at column `indent`.
    fn sequence(&mut self, items: &[Value], indent: usize) {
        for (i, v) in items.iter().enumerate() {
            if i > 0 {
                self.indent(indent);
            }
            self.push("- ");
            match v {
                // The item's first key, or its inner sequence's first dash, follows its dash.
                Value::Object(m) if !m.is_empty() => self.mapping(m, indent + 2),
                Value::Array(inner) if !inner.is_empty() => self.sequence(inner, indent + 2),
                other => self.node(other, indent + 2),
            }
        }
    }

    /// A value after `key: ` or `- `; continuation lines go to column `indent`.
    fn node(&mut self, v: &Value, indent: usize) {
        match v {
            Value::Null => self.push("null"),
            Value::Bool(b) => self.push(if *b { "true" } else { "false" }),
            Value::Number(n) => self.push(&n.to_string()),
            Value::String(s) => self.scalar(s, indent, false),
            Value::Object(_) => self.push("{}"),
            Value::Array(_) => self.push("[]"),
        }
    }

    fn scalar(&mut self, s: &str, indent: usize, key: bool) {
        match style(s, key) {
            Style::Plain => self.folded(s, indent, Style::Plain),
            Style::Single => self.folded(s, indent, Style::Single),
            Style::Double => self.folded(s, indent, Style::Double),
            Style::Literal => self.literal(s, indent),
        }
    }

    /// A flow scalar, its spaces turned into line breaks once past the width (not at its
    /// ends, nor before another space), as go-yaml folds them.
    fn folded(&mut self, s: &str, indent: usize, style: Style) {
        let quote = match style {
            Style::Single => Some('\''),
            Style::Double => Some('"'),
            _ => None,
        };
        if let Some(q) = quote {
            self.push(&q.to_string());
        }
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                let at_end = i == 0 || i + 1 == chars.len();
                let next_space = chars.get(i + 1) == Some(&' ');
                let may_break = match style {
                    Style::Plain => !next_space,
                    Style::Single => !at_end && !next_space,
                    _ => !at_end,
                };
                if !spaces && self.column > WIDTH && may_break {
                    self.indent(indent);
                    if style == Style::Double && next_space {
                        self.push("\\");
                    }
                } else {
                    self.push(" ");
                }
                spaces = true;
                continue;
            }
            spaces = false;
            match style {
                Style::Single if c == '\'' => self.push("''"),
                Style::Double => self.push(&double_escape(c)),
                _ => {
                    self.out.push(c);
                    self.column += 1;
                }
            }
        }
        if let Some(q) = quote {
            self.push(&q.to_string());
        }
    }

    /// A literal block (`|`, `|-` or `|+` as the text's trailing newlines say).
    fn literal(&mut self, s: &str, indent: usize) {
        let trailing = s.len() - s.trim_end_matches('\n').len();
        let chomp = match trailing {
            0 => "-",
            1 => "",
            _ => "+",
        };
        let hint = if s.starts_with(' ') { "2" } else { "" };
        self.push(&format!("|{hint}{chomp}"));
        let body = s.strip_suffix('\n').unwrap_or(s);
        for line in body.split('\n') {
            if line.is_empty() {
                self.newline();
            } else {
                self.indent(indent);
                self.push(line);
            }
        }
    }
}

fn double_escape(c: char) -> String {
    match c {
        '"' => "\\\"".into(),
        '\\' => "\\\\".into(),
        '\n' => "\\n".into(),
        '\t' => "\\t".into(),
        '\r' => "\\r".into(),
        '\0' => "\\0".into(),
        c if (c as u32) < 0x20 || c == '\u{7f}' => format!("\\x{:02X}", c as u32),
        '\u{feff}' => "\\uFEFF".into(),
        c => c.to_string(),
    }
}

/// How go-yaml v2 writes a string: double-quoted when a plain scalar would read back as
/// another type, a literal block when it has line breaks (as a value), otherwise plain when
/// YAML's syntax allows, single-quoted when not.
fn style(s: &str, key: bool) -> Style {
    let special = s
        .chars()
        .any(|c| (c < ' ' && c != '\n') || c == '\u{7f}' || c == '\u{feff}');
    if s.contains('\n') {
        return if key || special || s.contains(" \n") || s.ends_with(' ') {
            Style::Double
        } else {
            Style::Literal
        };
    }
    if special || !resolves_to_string(s) {
        return Style::Double;
    }
    if plain_allowed(s) {
        Style::Plain
    } else {
        Style::Single
    }
}

/// Whether YAML's block syntax lets `s` be written plain (libyaml's analysis).
fn plain_allowed(s: &str) -> bool {
    if s.starts_with(' ') || s.ends_with(' ') || s.starts_with("---") || s.starts_with("...") {
        return false;
    }
    let chars: Vec<char> = s.chars().collect();
    let blank_after = |i: usize| chars.get(i + 1).is_none_or(|c| *c == ' ' || *c == '\t');
    for (i, &c) in chars.iter().enumerate() {
        if i == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(c) {
                return false;
            }
            if matches!(c, '?' | ':' | '-') && blank_after(i) {
                return false;
            }
        } else {
            if c == ':' && blank_after(i) {
                return false;
            }
            if c == '#' && chars[i - 1] == ' ' {
                return false;
            }
        }
    }
    true
}

/// Whether a plain `s` reads back as a string in YAML 1.1 as go-yaml v2 reads it (not a
/// bool, null, number, timestamp or sexagesimal float).
fn resolves_to_string(s: &str) -> bool {
    const OTHER: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF", "<<",
    ];
    if OTHER.contains(&s) {
        return false;
    }
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !"+-.0123456789".contains(first) {
        return true;
    }
    let plain = s.replace('_', "");
    !(is_int(&plain) || plain.parse::<f64>().is_ok() || is_timestamp(s) || is_base60(s))
}

fn is_int(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let all = |t: &str, radix: u32| !t.is_empty() && t.chars().all(|c| c.is_digit(radix));
    if let Some(hex) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        all(hex, 16)
    } else if let Some(oct) = digits.strip_prefix("0o").or(digits.strip_prefix("0O")) {
        all(oct, 8)
    } else if let Some(bin) = digits.strip_prefix("0b").or(digits.strip_prefix("0B")) {
        all(bin, 2)
    } else if digits.len() > 1 && digits.starts_with('0') {
        all(digits, 8)
    } else {
        all(digits, 10)
    }
}

/// `2006-1-2`, or a date with a time (`T`, `t` or a space between) and an optional zone.
fn is_timestamp(s: &str) -> bool {
    static STAMP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::?[0-9]{2})?))?)?$",
        )
        .expect("timestamp pattern")
    });
    STAMP.is_match(s)
}

fn is_base60(s: &str) -> bool {
    static BASE60: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
            .expect("base 60 pattern")
    });
    BASE60.is_match(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_is_written_sorted_with_kube_s_quoting() {
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "bytes", "uid": "1b2c-d", "resourceVersion": "42",
                "creationTimestamp": "2026-11-27T08:40:48Z", "annotations": {"z": "1", "y": "2"},
                "managedFields": [{"manager": "unknown", "fieldsV1": {"f:data": {".": {}}}}]},
            "data": {"a": "2", "empty": "", "on": "yes", "colon": "a: b", "star": "*x"}});
        assert_eq!(
            yaml(&cm),
            concat!(
                "apiVersion: v1\n",
                "data:\n",
                "  a: \"2\"\n",
                "  colon: 'a: b'\n",
                "  empty: \"\"\n",
                "  \"on\": \"yes\"\n",
                "  star: '*x'\n",
                "kind: ConfigMap\n",
                "metadata:\n",
                "  annotations:\n",
                "    \"y\": \"2\"\n",
                "    z: \"1\"\n",
                "  creationTimestamp: \"2026-11-27T08:40:48Z\"\n",
                "  managedFields:\n",
                "  - fieldsV1:\n",
                "      f:data:\n",
                "        .: {}\n",
                "    manager: unknown\n",
                "  name: bytes\n",
                "  resourceVersion: \"42\"\n",
                "  uid: 1b2c-d\n",
            )
        );
    }

    #[test]
    fn multi_line_strings_are_literal_blocks_and_long_lines_fold() {
        let v = json!({"a": "one\ntwo\n", "b": "one\ntwo", "list": [["x"], 1, true, null]});
        assert_eq!(
            yaml(&v),
            "a: |\n  one\n  two\nb: |-\n  one\n  two\nlist:\n- - x\n- 1\n- true\n- null\n"
        );
        let long = "word ".repeat(20).trim_end().to_string();
        let out = yaml(&json!({ "description": long }));
        assert_eq!(
            out,
            format!(
                "description: {}\n  {}\n",
                // Broken at the first space past column 80.
                "word ".repeat(14).trim_end(),
                "word ".repeat(6).trim_end()
            )
        );
    }

    #[test]
    fn numbers_and_words_that_read_as_other_types_are_quoted() {
        for quoted in [
            "1",
            "0x1f",
            "1.5",
            "1e3",
            "true",
            "null",
            "~",
            "2026-01-01",
            "1:30",
        ] {
            assert_eq!(style(quoted, false), Style::Double, "{quoted}");
        }
        for plain in ["a", "1a", "v1", "a-b", "http://x", "10.0.0.1/24x"] {
            assert_eq!(style(plain, false), Style::Plain, "{plain}");
        }
    }
}
