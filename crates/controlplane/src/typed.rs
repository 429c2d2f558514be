//! What kube-apiserver's typed decoding refuses before anything else looks at a body: a value
//! of the wrong JSON type in a built-in kind's field, `[]byte` data that is not base64, a
//! MicroTime without its six fractional digits. Each is a 400 worded as Go's decoder words it
//! (`Lease in version "v1" cannot be handled as a Lease: parsing time ...`), which clients and
//! people match on.
//!
//! A resource declares the typed fields worth checking ([`TypedField`]); custom resources have
//! their schema instead. Pure: JSON in, the decoder's message out.

use serde_json::Value;

/// The Go type of a field, as far as decoding can fail on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoType {
    /// `map[string]string`
    StringMap,
    /// `map[string][]byte`: values are base64.
    BytesMap,
    /// `metav1.MicroTime`: RFC 3339 with exactly six fractional digits.
    MicroTime,
    /// `metav1.Time`: RFC 3339.
    Time,
}

/// A field of a built-in kind that decoding checks: its dotted JSON path, the Go struct that
/// declares it (for the message) and its type.
#[derive(Debug, Clone, Copy)]
pub struct TypedField {
    pub path: &'static str,
    pub go_struct: &'static str,
    pub go_type: GoType,
}

impl TypedField {
    pub const fn new(path: &'static str, go_struct: &'static str, go_type: GoType) -> Self {
        TypedField {
            path,
            go_struct,
            go_type,
        }
    }
}

/// The fields every object has (ObjectMeta's maps).
pub const OBJECT_META: &[TypedField] = &[
    TypedField::new("metadata.labels", "ObjectMeta", GoType::StringMap),
    TypedField::new("metadata.annotations", "ObjectMeta", GoType::StringMap),
];

/// The layout Go's MicroTime is parsed with.
const MICRO_LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";
const TIME_LAYOUT: &str = "2006-01-02T15:04:05Z07:00";

/// The first decoding error of `obj` in `fields`, as Go's decoder words it.
pub fn first_error(obj: &Value, fields: &[TypedField]) -> Option<String> {
    fields.iter().find_map(|f| {
        let value = f.path.split('.').try_fold(obj, |at, key| at.get(key))?;
        field_error(value, f)
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn field_error(value: &Value, f: &TypedField) -> Option<String> {
    let wrong = |v: &Value, go_type: &str| {
        Some(format!(
            "json: cannot unmarshal {} into Go struct field {}.{} of type {go_type}",
            json_type(v),
            f.go_struct,
            f.path
        ))
    };
    if value.is_null() {
        return None;
    }
    match f.go_type {
        GoType::StringMap | GoType::BytesMap => {
            let (map_type, item_type) = match f.go_type {
                GoType::StringMap => ("map[string]string", "string"),
                _ => ("map[string][]uint8", "[]uint8"),
            };
            let Some(map) = value.as_object() else {
                return wrong(value, map_type);
            };
            map.values().find_map(|v| match v {
                Value::Null => None,
                Value::String(s) if f.go_type == GoType::BytesMap => {
                    base64_error(s).map(|at| format!("illegal base64 data at input byte {at}"))
                }
                Value::String(_) => None,
                other => wrong(other, item_type),
            })
        }
        GoType::MicroTime | GoType::Time => match value {
            Value::String(s) => time_error(s, f.go_type == GoType::MicroTime),
            other => Some(format!(
                "json: cannot unmarshal {} into Go value of type string",
                json_type(other)
            )),
        },
    }
}

/// Go's `time.Parse` error for `value` under the MicroTime or Time layout, or None when it
/// parses.
fn time_error(value: &str, micro: bool) -> Option<String> {
    let layout = if micro { MICRO_LAYOUT } else { TIME_LAYOUT };
    let fail = |rest: &str, elem: &str| {
        Some(format!(
            "parsing time {value:?} as {layout:?}: cannot parse {rest:?} as {elem:?}"
        ))
    };
    let b = value.as_bytes();
    // The date and time of day: digits where the layout has them, its separators between.
    let shape = "dddd-dd-ddTdd:dd:dd";
    for (i, want) in shape.bytes().enumerate() {
        let Some(&c) = b.get(i) else {
            return fail(&value[i.min(value.len())..], &layout[i..]);
        };
        let ok = if want == b'd' {
            c.is_ascii_digit()
        } else {
            c == want
        };
        if !ok {
            let elem = match i {
                0..=3 => "2006",
                5..=6 => "01",
                8..=9 => "02",
                11..=12 => "15",
                14..=15 => "04",
                17..=18 => "05",
                _ => &shape[i..=i],
            };
            let start = match i {
                0..=3 => 0,
                5..=6 => 5,
                8..=9 => 8,
                11..=12 => 11,
                14..=15 => 14,
                17..=18 => 17,
                _ => i,
            };
            return fail(&value[start..], elem);
        }
    }
    let rest = &value[shape.len()..];
    let zone = if micro {
        let digits = rest
            .strip_prefix('.')
            .map(|r| r.bytes().take_while(u8::is_ascii_digit).count());
        if digits != Some(6) {
            return fail(rest, ".000000");
        }
        &rest[7..]
    } else {
        match rest.strip_prefix('.') {
            Some(r) => r.trim_start_matches(|c: char| c.is_ascii_digit()),
            None => rest,
        }
    };
    let zone_ok = zone == "Z"
        || (zone.len() == 6
            && matches!(zone.as_bytes()[0], b'+' | b'-')
            && zone.as_bytes()[3] == b':'
            && zone
                .bytes()
                .enumerate()
                .all(|(i, c)| matches!(i, 0 | 3) || c.is_ascii_digit()));
    if !zone_ok {
        return fail(zone, "Z07:00");
    }
    if value.parse::<jiff::Timestamp>().is_err() {
        return Some(format!("parsing time {value:?}: day out of range"));
    }
    None
}

/// Where Go's standard (padded) base64 decoder stops on `s`, or None when it decodes. Line
/// breaks are skipped, as Go's decoder skips them.
pub fn base64_error(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let is_alphabet = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let mut quantum = 0;
    let mut quantum_start = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\r' || c == b'\n' {
            i += 1;
            continue;
        }
        if quantum == 0 {
            quantum_start = i;
        }
        if is_alphabet(c) {
            quantum = (quantum + 1) % 4;
            i += 1;
            continue;
        }
        if c != b'=' || quantum < 2 {
            return Some(i);
        }
        // Padding: one '=' after three symbols, two after two; then nothing but line breaks.
        let mut j = i + 1;
        if quantum == 2 {
            while j < b.len() && (b[j] == b'\r' || b[j] == b'\n') {
                j += 1;
            }
            if j == b.len() {
                return Some(b.len());
            }
            if b[j] != b'=' {
                return Some(j);
            }
            j += 1;
        }
        return b[j..]
            .iter()
            .position(|c| *c != b'\r' && *c != b'\n')
            .map(|p| j + p);
    }
    (quantum != 0).then_some(quantum_start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn micro_time_needs_exactly_six_fractional_digits() {
        assert_eq!(time_error("2020-01-01T00:00:00.000000Z", true), None);
        assert_eq!(time_error("2020-01-01T00:00:00.000000+02:00", true), None);
        assert_eq!(
            time_error("2020-01-01T00:00:00Z", true).as_deref(),
            Some(
                r#"parsing time "2020-01-01T00:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000""#
            )
        );
        assert_eq!(
            time_error("2020-01-01T00:00:00.123Z", true).as_deref(),
            Some(
                r#"parsing time "2020-01-01T00:00:00.123Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".123Z" as ".000000""#
            )
        );
        assert_eq!(
            time_error("yesterday", true).as_deref(),
            Some(
                r#"parsing time "yesterday" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "yesterday" as "2006""#
            )
        );
    }

    #[test]
    fn time_takes_any_fraction() {
        assert_eq!(time_error("2020-01-01T00:00:00Z", false), None);
        assert_eq!(time_error("2020-01-01T00:00:00.5Z", false), None);
        assert!(time_error("2020-01-01 00:00:00Z", false).is_some());
    }

    #[test]
    fn base64_errors_name_the_byte_go_stops_at() {
        assert_eq!(base64_error("aGVsbG8="), None);
        assert_eq!(base64_error("aGVs\nbG8="), None);
        assert_eq!(base64_error("not base64!"), Some(3));
        assert_eq!(base64_error("abc"), Some(0));
        assert_eq!(base64_error("abcde"), Some(4));
        assert_eq!(base64_error("ab=c"), Some(3));
        assert_eq!(base64_error("abc=x"), Some(4));
    }

    #[test]
    fn wrong_json_types_are_named_with_their_go_field() {
        let cm = [TypedField::new("data", "ConfigMap", GoType::StringMap)];
        assert_eq!(
            first_error(&json!({"data": {"k": 1}}), &cm).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
            )
        );
        assert_eq!(
            first_error(&json!({"data": "x"}), &cm).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field ConfigMap.data of type map[string]string"
            )
        );
        assert_eq!(first_error(&json!({"data": {"k": "v"}}), &cm), None);
        let secret = [TypedField::new("data", "Secret", GoType::BytesMap)];
        assert_eq!(
            first_error(&json!({"data": {"k": "not base64!"}}), &secret).as_deref(),
            Some("illegal base64 data at input byte 3")
        );
    }
}
