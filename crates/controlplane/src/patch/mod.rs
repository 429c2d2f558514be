//! Patches: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch for
//! built-in types; server-side apply is [`crate::fields`]'.
//!
//! Pure functions from (current object, patch body) to the patched object. Whether the result
//! may be stored is decided afterwards by the ordinary update rules.

pub mod strategic;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::fields::decode::{Decoded, decode_json};

/// The patch formats, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

/// The media types custom resources accept for PATCH, for 415 messages.
pub const PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
/// The media types accepted for PATCH on `/scale`.
pub const PATCH_TYPES_SCALE: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json";

impl PatchType {
    /// Reads the Content-Type of a PATCH; `strategic` says whether the resource supports it.
    /// A type that is no patch type at all is refused as the router refuses it; a strategic
    /// merge patch to a resource without merge keys (a custom resource), as its handler does.
    pub fn from_content_type(ct: &str, strategic: bool) -> ApiResult<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" if strategic => Ok(PatchType::Strategic),
            "application/strategic-merge-patch+json" => {
                Err(ApiError::UnsupportedMediaType(PATCH_TYPES.into()))
            }
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            _ => Err(ApiError::UnsupportedPatchType),
        }
    }
}

/// A merge patch's body, with its duplicate keys (what strict decoding notes).
fn parse_json(body: &[u8]) -> ApiResult<Decoded> {
    decode_json(body, None).map_err(|e| decoding_error(body, e))
}

/// A patched object, with the strict decoding errors of the patch itself (duplicate keys of
/// a merge patch) and the objects the patch reached, as a tree of objects (kube's patch
/// library writes those out again, keys sorted).
#[derive(Debug, Clone, PartialEq)]
pub struct Patched {
    pub object: Value,
    pub strict_errors: Vec<String>,
    pub reached: Value,
}

/// The objects JSON patch operations reach: those holding their paths' last steps.
fn reached_by(ops: &json_patch::Patch) -> Value {
    let mut reached = Value::Object(Default::default());
    let paths = ops.0.iter().flat_map(|op| {
        let (path, from) = match op {
            json_patch::PatchOperation::Add(o) => (o.path.to_string(), None),
            json_patch::PatchOperation::Remove(o) => (o.path.to_string(), None),
            json_patch::PatchOperation::Replace(o) => (o.path.to_string(), None),
            json_patch::PatchOperation::Move(o) => (o.path.to_string(), Some(o.from.to_string())),
            json_patch::PatchOperation::Copy(o) => (o.path.to_string(), Some(o.from.to_string())),
            json_patch::PatchOperation::Test(o) => (o.path.to_string(), None),
        };
        std::iter::once(path).chain(from)
    });
    for path in paths {
        let steps: Vec<&str> = path.split('/').skip(1).collect();
        let mut node = &mut reached;
        for step in steps.iter().take(steps.len().saturating_sub(1)) {
            let step = step.replace("~1", "/").replace("~0", "~");
            let Some(map) = node.as_object_mut() else {
                break;
            };
            node = map
                .entry(step)
                .or_insert_with(|| Value::Object(Default::default()));
        }
    }
    reached
}

/// A patch that is not JSON, refused in kube-apiserver's (Go's) words.
fn decoding_error(body: &[u8], e: serde_json::Error) -> ApiError {
    let syntax = crate::gojson::syntax_error(body).unwrap_or_else(|| e.to_string());
    ApiError::BadRequest(format!("error decoding patch: {syntax}"))
}

/// Applies a JSON, merge or strategic patch to `current`.
pub fn apply_patch(kind: PatchType, current: &Value, body: &[u8]) -> ApiResult<Patched> {
    let mut doc = current.clone();
    let mut strict_errors = Vec::new();
    let reached;
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| decoding_error(body, e))?;
            reached = reached_by(&ops);
            for op in ops.0 {
                // Like kube-apiserver, `test` for null passes on an absent path (the
                // finalizer helpers of kube-rs and client-go rely on it).
                if let json_patch::PatchOperation::Test(t) = &op
                    && t.value.is_null()
                    && doc.pointer(t.path.as_str()).is_none()
                {
                    continue;
                }
                json_patch::patch(&mut doc, std::slice::from_ref(&op)).map_err(|e| {
                    tracing::debug!(error = %e, "a JSON patch operation failed");
                    ApiError::Unprocessable
                })?;
            }
        }
        PatchType::Merge => {
            let Decoded {
                object: p,
                strict_errors: errors,
            } = parse_json(body)?;
            strict_errors = errors;
            if !p.is_object() {
                return Err(ApiError::BadRequest(
                    "error decoding patch: a merge patch must be a JSON object".into(),
                ));
            }
            json_patch::merge(&mut doc, &p);
            reached = p;
        }
        PatchType::Strategic => {
            let Decoded {
                object: p,
                strict_errors: errors,
            } = parse_json(body)?;
            strict_errors = errors;
            if !p.is_object() {
                return Err(ApiError::BadRequest(
                    "error decoding patch: a strategic merge patch must be a JSON object".into(),
                ));
            }
            strategic::merge(&mut doc, &p);
            reached = p;
        }
        PatchType::Apply => {
            return Err(ApiError::Internal(
                "apply patches go through the field manager".into(),
            ));
        }
    }
    Ok(Patched {
        object: doc,
        strict_errors,
        reached,
    })
}

/// Parses an apply body (YAML or JSON). kube-rs and kubectl send JSON, which is YAML too: a
/// JSON object is read by the JSON parser (the YAML parser took 4% of the API server's CPU in
/// the deployment benchmark's join), which reads it as the YAML parser does; anything else is
/// read as YAML. So is a body with an escape that may be of a UTF-16
/// surrogate (`\ud83d`), which JSON takes and YAML refuses, as kube-apiserver does.
pub fn parse_apply_body(body: &[u8]) -> ApiResult<Value> {
    if body.trim_ascii_start().starts_with(b"{")
        && !body.windows(3).any(|w| w.eq_ignore_ascii_case(b"\\ud"))
        && let Ok(object @ Value::Object(_)) = serde_json::from_slice::<Value>(body)
    {
        return Ok(object);
    }
    let v: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::BadRequest(
            "error decoding YAML: an apply configuration must be an object".into(),
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_and_merge_patch_apply() {
        let cur = json!({"metadata": {"labels": {"a": "1"}}, "data": {"x": "1"}});
        let j = apply_patch(
            PatchType::Json,
            &cur,
            br#"[{"op":"add","path":"/data/y","value":"2"},{"op":"remove","path":"/data/x"}]"#,
        )
        .unwrap()
        .object;
        assert_eq!(j["data"], json!({"y": "2"}));
        let m = apply_patch(
            PatchType::Merge,
            &cur,
            br#"{"metadata":{"labels":{"a":null,"b":"2"}}}"#,
        )
        .unwrap()
        .object;
        assert_eq!(m["metadata"]["labels"], json!({"b": "2"}));
        let dup = apply_patch(PatchType::Merge, &cur, br#"{"data":{"y":"1","y":"2"}}"#).unwrap();
        assert_eq!(dup.strict_errors, vec!["duplicate field \"data.y\""]);
    }

    #[test]
    fn an_apply_body_in_json_reads_as_the_yaml_parser_reads_it() {
        let bodies: [&[u8]; 6] = [
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"a":"1"}},"data":{"x":"\u00e9\/\n\t","y":""}}"#,
            br#" {"spec":{"replicas":3,"big":18446744073709551615,"neg":-9223372036854775808,"f":1.5e3,"z":-0.0,"e":1E-2}}"#,
            br#"{"a":{"b":[1,"two",null,true,false,{"c":[]},[]]},"dup":1,"dup":2}"#,
            br#"{"s":"\u00e9 quoted \"x\" back\\slash"}"#,
            b"{\"tab\":\"a\\tb\",\n  \"nl\": [\n 1 ,\n 2 ]\n}\n",
            b"{}",
        ];
        for body in bodies {
            let yaml: Value = serde_yaml::from_slice(body).unwrap();
            assert_eq!(
                parse_apply_body(body).unwrap(),
                yaml,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // YAML that is not JSON, and JSON that is not an object, are read as before.
        assert_eq!(
            parse_apply_body(b"metadata:\n  name: c\n").unwrap(),
            json!({"metadata": {"name": "c"}})
        );
        assert!(parse_apply_body(b"[1]").is_err());
        assert!(parse_apply_body(br#"{"s":"\ud83d\ude00"}"#).is_err());
        assert!(parse_apply_body(b"{\"a\": 1").is_err());
    }

    #[test]
    fn failed_json_patch_test_is_unprocessable() {
        let err = apply_patch(
            PatchType::Json,
            &json!({}),
            br#"[{"op":"test","path":"/a","value":1}]"#,
        )
        .err()
        .unwrap();
        assert_eq!(err.code(), 422);
        let err = apply_patch(PatchType::Json, &json!({}), b"{")
            .err()
            .unwrap();
        assert_eq!(err.code(), 400);
    }

    #[test]
    fn custom_resources_refuse_strategic_merge() {
        let err = PatchType::from_content_type("application/strategic-merge-patch+json", false)
            .err()
            .unwrap();
        assert_eq!(err.code(), 415);
    }
}
