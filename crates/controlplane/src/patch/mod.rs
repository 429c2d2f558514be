//! Patches: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch for
//! built-in types, and server-side apply (see [`apply`]).
//!
//! Pure functions from (current object, patch body) to the patched object. Whether the result
//! may be stored is decided afterwards by the ordinary update rules.

pub mod apply;
pub mod strategic;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

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

fn parse_json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body).map_err(|e| decoding_error(body, e))
}

/// A patch that is not JSON, refused in kube-apiserver's (Go's) words.
fn decoding_error(body: &[u8], e: serde_json::Error) -> ApiError {
    let syntax = crate::gojson::syntax_error(body).unwrap_or_else(|| e.to_string());
    ApiError::BadRequest(format!("error decoding patch: {syntax}"))
}

/// Applies a JSON, merge or strategic patch to `current`.
pub fn apply_patch(kind: PatchType, current: &Value, body: &[u8]) -> ApiResult<Value> {
    let mut doc = current.clone();
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| decoding_error(body, e))?;
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
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::BadRequest(
                    "error decoding patch: a merge patch must be a JSON object".into(),
                ));
            }
            json_patch::merge(&mut doc, &p);
        }
        PatchType::Strategic => {
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::BadRequest(
                    "error decoding patch: a strategic merge patch must be a JSON object".into(),
                ));
            }
            strategic::merge(&mut doc, &p);
        }
        PatchType::Apply => {
            return Err(ApiError::Internal(
                "apply patches go through apply::apply".into(),
            ));
        }
    }
    Ok(doc)
}

/// Parses an apply body (YAML or JSON).
pub fn parse_apply_body(body: &[u8]) -> ApiResult<Value> {
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
        .unwrap();
        assert_eq!(j["data"], json!({"y": "2"}));
        let m = apply_patch(
            PatchType::Merge,
            &cur,
            br#"{"metadata":{"labels":{"a":null,"b":"2"}}}"#,
        )
        .unwrap();
        assert_eq!(m["metadata"]["labels"], json!({"b": "2"}));
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
