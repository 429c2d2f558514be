//! API errors and their wire form: every failure a client can cause becomes a
//! `Status` body worded and coded as kube-apiserver words and codes it.
//!
//! This module owns the mapping from error to HTTP status, `reason` and message; it does not
//! decide *when* an error applies (the handlers do).

use serde_json::{Value, json};

/// One field-level validation failure, as listed under `details.causes` of an Invalid status.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Cause reason, e.g. `FieldValueInvalid`, `FieldValueRequired`.
    pub reason: &'static str,
    /// Dotted path of the field, e.g. `spec.replicas`.
    pub field: String,
    /// The full sentence, e.g. `spec.replicas: Required value`.
    pub message: String,
}

impl FieldError {
    /// `field: Invalid value: <value>: detail`
    pub fn invalid(field: impl Into<String>, value: &Value, detail: impl AsRef<str>) -> Self {
        let field = field.into();
        let message = format!(
            "{field}: Invalid value: {}: {}",
            render_value(value),
            detail.as_ref()
        );
        FieldError {
            reason: "FieldValueInvalid",
            field,
            message,
        }
    }

    /// `field: Required value` (with an optional detail).
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        let field = field.into();
        let message = if detail.is_empty() {
            format!("{field}: Required value")
        } else {
            format!("{field}: Required value: {detail}")
        };
        FieldError {
            reason: "FieldValueRequired",
            field,
            message,
        }
    }

    /// `field: Unsupported value: <value>: supported values: "a", "b"`
    pub fn not_supported(field: impl Into<String>, value: &Value, allowed: &[Value]) -> Self {
        let field = field.into();
        let list: Vec<String> = allowed.iter().map(render_value).collect();
        let message = format!(
            "{field}: Unsupported value: {}: supported values: {}",
            render_value(value),
            list.join(", ")
        );
        FieldError {
            reason: "FieldValueNotSupported",
            field,
            message,
        }
    }

    /// `field: Forbidden: detail`
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        let field = field.into();
        let message = format!("{field}: Forbidden: {detail}");
        FieldError {
            reason: "FieldValueForbidden",
            field,
            message,
        }
    }

    /// `field: Duplicate value: <value>`, the value printed as Go's field errors print it
    /// (`"a"`, `map[string]interface {}{"type":"Joined"}`).
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        let field = field.into();
        let message = format!("{field}: Duplicate value: {}", go_syntax(value));
        FieldError {
            reason: "FieldValueDuplicate",
            field,
            message,
        }
    }

    /// `field: Too long: may not be more than N bytes`
    pub fn too_long(field: impl Into<String>, max: u64) -> Self {
        let field = field.into();
        let message = format!("{field}: Too long: may not be more than {max} bytes");
        FieldError {
            reason: "FieldValueTooLong",
            field,
            message,
        }
    }
}

/// Renders a value the way kube-apiserver's field errors print it: strings quoted, numbers
/// bare, objects and arrays as `"object"`-style type names are not used — Go's `%#v`-like forms
/// are approximated by JSON.
pub fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(_) | Value::Object(_) => {
            format!("{:?}", serde_json::to_string(v).unwrap_or_default())
        }
    }
}

/// Go's `%#v` of a decoded JSON value, which is how kube-apiserver prints compound values in
/// field errors: `map[string]interface {}{"k":"v", "n":1}`, `[]interface {}{"a"}`.
fn go_syntax(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(k, _)| *k);
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k:?}:{}", go_syntax(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", entries.join(", "))
        }
        scalar => render_value(scalar),
    }
}

/// The resource (and group) an error concerns, as it appears in messages and `details`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Subject {
    pub group: String,
    /// Plural resource for NotFound/AlreadyExists/Conflict, Kind for Invalid.
    pub kind: String,
    pub name: String,
}

impl Subject {
    /// `configmaps` or `deployments.apps`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

/// An error answered to an API client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{} {:?} not found", .0.qualified(), .0.name)]
    NotFound(Subject),
    #[error("the server could not find the requested resource")]
    NoRoute,
    #[error("{} {:?} already exists", .0.qualified(), .0.name)]
    AlreadyExists(Subject),
    #[error(
        "Operation cannot be fulfilled on {} {:?}: the object has been modified; please apply your changes to the latest version and try again",
        .0.qualified(), .0.name
    )]
    Conflict(Subject),
    /// A 409 with a caller-supplied message (preconditions, apply conflicts).
    #[error("{message}")]
    ConflictMessage {
        subject: Subject,
        message: String,
        causes: Vec<(String, String)>,
    },
    #[error("{}", invalid_message(.subject, .errors))]
    Invalid {
        /// `kind` holds the Kind here.
        subject: Subject,
        errors: Vec<FieldError>,
    },
    #[error("{0}")]
    BadRequest(String),
    /// A 422 without field causes (a JSON patch operation that failed): kube-apiserver answers
    /// its generic words, not the operation's.
    #[error("the server rejected our request due to an error in our request")]
    Unprocessable,
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed(Subject),
    #[error("{message}")]
    Forbidden {
        subject: Subject,
        message: String,
        cause: Option<(String, String)>,
    },
    /// No credentials, or credentials that authenticate nobody.
    #[error("Unauthorized")]
    Unauthorized,
    #[error("too old resource version: {requested} ({oldest})")]
    Expired { requested: i64, oldest: i64 },
    /// A continue token older than the history window.
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."
    )]
    ExpiredContinue,
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// A PATCH whose Content-Type is no patch type: refused before it reaches a handler, in
    /// the router's generic words.
    #[error("415: Unsupported Media Type")]
    UnsupportedPatchType,
    /// A path no API serves (an unknown group or version, a custom resource its group does not
    /// have): answered as plain text, as kube-apiserver's fallback handler does.
    #[error("404 page not found")]
    PageNotFound,
    /// An error kube-apiserver answers with a code and message only, no reason.
    #[error("{message}")]
    Unclassified { code: u16, message: String },
    #[error(
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )]
    NotAcceptable,
    #[error("the request entity is too large")]
    TooLarge,
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// A 500 kube-apiserver answers with no reason: an error from deep inside a request that
    /// no API error wraps (an apply configuration its type cannot hold).
    #[error("{0}")]
    Failure(String),
    /// An admission plugin refused the request (worded as a webhook's denial).
    #[error("{}", denied_message(.plugin, .message))]
    AdmissionDenied {
        plugin: String,
        code: u16,
        reason: &'static str,
        message: String,
    },
    #[error("{0}")]
    ServiceUnavailable(String),
}

fn denied_message(plugin: &str, message: &str) -> String {
    if message.is_empty() {
        format!("admission webhook {plugin:?} denied the request without explanation")
    } else {
        format!("admission webhook {plugin:?} denied the request: {message}")
    }
}

/// kube-apiserver's Invalid message: its errors as one aggregate, in which the same sentence
/// appears once (the causes keep every error).
fn invalid_message(subject: &Subject, errors: &[FieldError]) -> String {
    let head = format!("{} {:?} is invalid: ", subject.qualified(), subject.name);
    let mut parts: Vec<&str> = Vec::new();
    for e in errors {
        if !parts.contains(&e.message.as_str()) {
            parts.push(&e.message);
        }
    }
    match parts.as_slice() {
        [one] => head + one,
        many => format!("{head}[{}]", many.join(", ")),
    }
}

impl ApiError {
    /// HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound(_) | ApiError::NoRoute | ApiError::PageNotFound => 404,
            ApiError::AlreadyExists(_)
            | ApiError::Conflict(_)
            | ApiError::ConflictMessage { .. } => 409,
            ApiError::Invalid { .. } | ApiError::Unprocessable => 422,
            ApiError::BadRequest(_) => 400,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::Forbidden { .. } => 403,
            ApiError::Unauthorized => 401,
            ApiError::Expired { .. } | ApiError::ExpiredContinue => 410,
            ApiError::UnsupportedMediaType(_) | ApiError::UnsupportedPatchType => 415,
            ApiError::Unclassified { code, .. } => *code,
            ApiError::NotAcceptable => 406,
            ApiError::TooLarge => 413,
            ApiError::Internal(_) | ApiError::Failure(_) => 500,
            ApiError::AdmissionDenied { code, .. } => *code,
            ApiError::ServiceUnavailable(_) => 503,
        }
    }

    /// The `reason` field of the Status.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound(_) | ApiError::NoRoute | ApiError::PageNotFound => "NotFound",
            ApiError::AlreadyExists(_) => "AlreadyExists",
            ApiError::Conflict(_) | ApiError::ConflictMessage { .. } => "Conflict",
            ApiError::Invalid { .. } | ApiError::Unprocessable => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Expired { .. } => "Expired",
            ApiError::ExpiredContinue => "Expired",
            ApiError::UnsupportedMediaType(_) | ApiError::UnsupportedPatchType => {
                "UnsupportedMediaType"
            }
            ApiError::Unclassified { .. } => "",
            ApiError::NotAcceptable => "NotAcceptable",
            ApiError::TooLarge => "RequestEntityTooLarge",
            ApiError::Internal(_) => "InternalError",
            ApiError::Failure(_) => "",
            ApiError::AdmissionDenied { reason, .. } => reason,
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
        }
    }

    /// The full `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        if self.reason().is_empty()
            && let Some(s) = status.as_object_mut()
        {
            s.remove("reason");
        }
        if let Some(details) = self.details() {
            status["details"] = details;
        }
        if self.reason().is_empty()
            && let Some(o) = status.as_object_mut()
        {
            o.remove("reason");
        }
        status
    }

    fn details(&self) -> Option<Value> {
        let base = |s: &Subject| {
            let mut d = serde_json::Map::new();
            if !s.name.is_empty() {
                d.insert("name".into(), json!(s.name));
            }
            if !s.group.is_empty() {
                d.insert("group".into(), json!(s.group));
            }
            if !s.kind.is_empty() {
                d.insert("kind".into(), json!(s.kind));
            }
            d
        };
        match self {
            ApiError::NoRoute | ApiError::Unprocessable | ApiError::UnsupportedPatchType => {
                Some(json!({}))
            }
            ApiError::NotFound(s)
            | ApiError::AlreadyExists(s)
            | ApiError::Conflict(s)
            | ApiError::MethodNotAllowed(s) => Some(Value::Object(base(s))),
            ApiError::ConflictMessage {
                subject, causes, ..
            } => {
                let mut d = base(subject);
                if !causes.is_empty() {
                    let c: Vec<Value> = causes
                        .iter()
                        .map(|(field, message)| {
                            json!({"reason": "FieldManagerConflict", "message": message, "field": field})
                        })
                        .collect();
                    d.insert("causes".into(), Value::Array(c));
                }
                Some(Value::Object(d))
            }
            ApiError::Invalid { subject, errors } => {
                let mut d = base(subject);
                let causes: Vec<Value> = errors
                    .iter()
                    .map(|e| json!({"reason": e.reason, "message": e.message.split_once(": ").map(|(_, m)| m).unwrap_or(&e.message), "field": e.field}))
                    .collect();
                d.insert("causes".into(), Value::Array(causes));
                Some(Value::Object(d))
            }
            ApiError::Forbidden { subject, cause, .. } => {
                let mut d = base(subject);
                if let Some((reason, message)) = cause {
                    d.insert(
                        "causes".into(),
                        json!([{"reason": reason, "message": message, "field": "metadata.namespace"}]),
                    );
                }
                Some(Value::Object(d))
            }
            ApiError::NotAcceptable => Some(json!({})),
            _ => None,
        }
    }

    /// Shorthand for a single-field Invalid error.
    pub fn invalid(subject: Subject, errors: Vec<FieldError>) -> Self {
        ApiError::Invalid { subject, errors }
    }
}

/// Result alias for API handlers.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{StorageError, WriteError};

    fn cm(name: &str) -> Subject {
        Subject {
            group: String::new(),
            kind: "configmaps".into(),
            name: name.into(),
        }
    }

    #[test]
    fn storage_failures_answer_unavailable_or_internal_and_refusals_their_own_error() {
        let answered = |e: WriteError<ApiError>| {
            let e = ApiError::from(e);
            (e.code(), e.to_string())
        };
        assert_eq!(
            answered(WriteError::Storage(StorageError::ShuttingDown)),
            (503, "the server is shutting down".into())
        );
        assert_eq!(
            answered(WriteError::Storage(StorageError::Failed)),
            (
                503,
                "storage failed; the control plane no longer accepts writes".into()
            )
        );
        assert_eq!(
            answered(WriteError::Storage(StorageError::NoObject("delete"))),
            (500, "Internal error occurred: no object to delete".into())
        );
        assert_eq!(answered(WriteError::Refused(ApiError::NoRoute)).0, 404);
    }

    #[test]
    fn not_found_is_worded_like_kube_apiserver() {
        let s = ApiError::NotFound(Subject {
            group: "apps".into(),
            kind: "deployments".into(),
            name: "web".into(),
        })
        .to_status();
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["group"], "apps");
        assert_eq!(s["details"]["kind"], "deployments");
    }

    #[test]
    fn conflict_message_matches_upstream() {
        let s = ApiError::Conflict(cm("a")).to_status();
        assert_eq!(
            s["message"],
            "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(s["code"], 409);
    }

    #[test]
    fn invalid_lists_every_field_error() {
        let subject = Subject {
            group: "example.com".into(),
            kind: "Widget".into(),
            name: "w".into(),
        };
        let one = ApiError::invalid(
            subject.clone(),
            vec![FieldError::invalid(
                "spec.replicas",
                &json!("string"),
                "spec.replicas in body must be of type integer: \"string\"",
            )],
        );
        assert_eq!(
            one.to_string(),
            "Widget.example.com \"w\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        );
        let two = ApiError::invalid(
            subject,
            vec![
                FieldError::required("spec.a", ""),
                FieldError::required("spec.b", ""),
            ],
        );
        assert_eq!(
            two.to_string(),
            "Widget.example.com \"w\" is invalid: [spec.a: Required value, spec.b: Required value]"
        );
        let st = two.to_status();
        assert_eq!(st["details"]["causes"][1]["field"], "spec.b");
        assert_eq!(st["details"]["causes"][1]["message"], "Required value");
    }
}
