//! TokenRequest (`POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`): a token for a
//! ServiceAccount, for the audiences and lifetime asked, optionally bound to a Secret, Pod or
//! Node, answered as kube-apiserver answers it (nothing is stored). The token itself is
//! [`crate::auth::tokens`]'.

use serde_json::{Map, Value, json};

use crate::api::ApiServer;
use crate::auth::tokens::{self, BoundObject, SigningKey, TokenGrant};
use crate::error::{ApiError, ApiResult, FieldError, Subject};
use crate::meta::ObjectMeta;

const API_VERSION: &str = "authentication.k8s.io/v1";
const KIND: &str = "TokenRequest";
/// A token lives an hour unless asked otherwise (the v1 default).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest and longest lifetimes a TokenRequest may ask for.
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// What a TokenRequest's body asks, decoded.
struct Asked {
    audiences: Vec<String>,
    expiration_seconds: i64,
    bound: Option<Map<String, Value>>,
}

fn invalid(errors: Vec<FieldError>) -> ApiError {
    ApiError::invalid(
        Subject {
            group: "authentication.k8s.io".into(),
            kind: KIND.into(),
            name: String::new(),
        },
        errors,
    )
}

fn decode(body: &Value) -> ApiResult<Asked> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::BadRequest(
            "the object provided is not a JSON object".into(),
        ));
    };
    if let Some(av) = object.get("apiVersion").and_then(Value::as_str)
        && av != API_VERSION
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({av}) does not match the expected API version ({API_VERSION})"
        )));
    }
    if let Some(kind) = object.get("kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != KIND
    {
        return Err(ApiError::BadRequest(format!(
            "the kind in the data ({kind}) does not match the expected kind ({KIND})"
        )));
    }
    let spec = object.get("spec").cloned().unwrap_or_else(|| json!({}));
    let unreadable = |field: &str| {
        ApiError::BadRequest(format!(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: spec.{field} is not of its type"
        ))
    };
    let audiences = match spec.get("audiences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|a| a.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| unreadable("audiences"))?,
        Some(_) => return Err(unreadable("audiences")),
    };
    let expiration_seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(n) => n.as_i64().ok_or_else(|| unreadable("expirationSeconds"))?,
    };
    let bound = match spec.get("boundObjectRef") {
        None | Some(Value::Null) => None,
        Some(Value::Object(r)) => Some(r.clone()),
        Some(_) => return Err(unreadable("boundObjectRef")),
    };
    let mut errors = Vec::new();
    if expiration_seconds < MIN_EXPIRATION_SECONDS {
        errors.push(FieldError::invalid(
            "spec.expirationSeconds",
            &json!(expiration_seconds),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration_seconds > MAX_EXPIRATION_SECONDS {
        errors.push(FieldError::invalid(
            "spec.expirationSeconds",
            &json!(expiration_seconds),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    Ok(Asked {
        audiences,
        expiration_seconds,
        bound,
    })
}

/// The object `reference` names, checked as kube-apiserver checks it: a Pod (running as this
/// ServiceAccount), Secret or Node of the core group, existing, with the uid given if one is.
fn bound_object(
    api: &ApiServer,
    namespace: &str,
    service_account: &str,
    reference: &Map<String, Value>,
) -> ApiResult<BoundObject> {
    let field = |k: &str| reference.get(k).and_then(Value::as_str).unwrap_or("");
    let (group, version) = match field("apiVersion").split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", field("apiVersion")),
    };
    let kind = field("kind");
    let name = field("name");
    let resource = match (group, kind) {
        ("", "Pod") => "pods",
        ("", "Secret") => "secrets",
        ("", "Node") => "nodes",
        _ => {
            return Err(ApiError::BadRequest(format!(
                "cannot bind token to object of type {group}/{version}, Kind={kind}"
            )));
        }
    };
    let scope = if kind == "Node" { "" } else { namespace };
    let object = api
        .store
        .get(&format!("/{resource}"), scope, name)
        .ok_or_else(|| {
            ApiError::NotFound(Subject {
                group: String::new(),
                kind: resource.into(),
                name: name.into(),
            })
        })?;
    if kind == "Pod"
        && object
            .pointer("/spec/serviceAccountName")
            .and_then(Value::as_str)
            .unwrap_or("")
            != service_account
    {
        return Err(ApiError::BadRequest(format!(
            "cannot bind token for serviceaccount {service_account:?} to pod running with different serviceaccount name."
        )));
    }
    let uid = field("uid");
    if !uid.is_empty() && uid != object.uid() {
        return Err(ApiError::ConflictMessage {
            subject: Subject {
                group: String::new(),
                kind: kind.into(),
                name: name.into(),
            },
            message: format!(
                "Operation cannot be fulfilled on {kind} {name:?}: the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
            causes: Vec::new(),
        });
    }
    Ok(BoundObject {
        kind: kind.into(),
        name: name.into(),
        uid: object.uid().into(),
    })
}

/// Issues a token for ServiceAccount `namespace`/`name` as `body` asks, at `now` (RFC 3339):
/// the TokenRequest answered, its `metadata.managedFields` recorded under `manager`.
pub fn create(
    api: &ApiServer,
    key: &SigningKey,
    namespace: &str,
    name: &str,
    body: &Value,
    manager: &str,
    now: &str,
) -> ApiResult<Value> {
    let asked = decode(body)?;
    let account = api
        .store
        .get(tokens::SERVICE_ACCOUNTS_KEY, namespace, name)
        .ok_or_else(|| {
            ApiError::NotFound(Subject {
                group: String::new(),
                kind: "serviceaccounts".into(),
                name: name.into(),
            })
        })?;
    let bound = asked
        .bound
        .as_ref()
        .map(|r| bound_object(api, namespace, name, r))
        .transpose()?;
    // What the request set (its defaults included), as the field manager saw it.
    let mut spec = Map::new();
    if !asked.audiences.is_empty() {
        spec.insert("audiences".into(), json!(asked.audiences));
    }
    spec.insert("expirationSeconds".into(), json!(asked.expiration_seconds));
    if let Some(r) = &asked.bound {
        spec.insert("boundObjectRef".into(), Value::Object(r.clone()));
    }
    let mut sent = json!({"spec": spec});
    crate::patch::apply::record_update(None, &mut sent, manager, API_VERSION, "token", now);
    let audiences = if asked.audiences.is_empty() {
        vec![tokens::ISSUER.to_string()]
    } else {
        asked.audiences
    };
    let issued_at = now
        .parse::<jiff::Timestamp>()
        .map_err(|e| ApiError::Internal(format!("the server's clock: {e}")))?
        .as_second();
    let (token, expires) = tokens::issue(
        key,
        &TokenGrant {
            namespace,
            service_account: name,
            service_account_uid: account.uid(),
            audiences: &audiences,
            expiration_seconds: asked.expiration_seconds,
            bound,
        },
        issued_at,
    )
    .map_err(|e| ApiError::Internal(format!("failed to generate token: {e}")))?;
    let expires = jiff::Timestamp::from_second(expires)
        .map_err(|e| ApiError::Internal(format!("failed to generate token: {e}")))?;
    let mut metadata = json!({
        "name": name,
        "namespace": namespace,
        "uid": crate::meta::new_uid(),
        "creationTimestamp": now,
    });
    if let Some(fields) = sent.pointer("/metadata/managedFields") {
        metadata["managedFields"] = fields.clone();
    }
    Ok(json!({
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": metadata,
        "spec": {
            "audiences": audiences,
            "expirationSeconds": asked.expiration_seconds,
            "boundObjectRef": asked.bound,
        },
        "status": {"token": token, "expirationTimestamp": expires.to_string()},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_request_asks_for_ten_minutes_to_two_to_the_32_seconds() {
        assert_eq!(
            decode(&json!({"spec": {}}))
                .ok()
                .map(|a| a.expiration_seconds),
            Some(3600)
        );
        let short = decode(&json!({"spec": {"expirationSeconds": 100}}))
            .err()
            .unwrap();
        assert_eq!(
            short.to_string(),
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 100: may not specify a duration less than 10 minutes"
        );
        assert!(decode(&json!({"spec": {"expirationSeconds": 600}})).is_ok());
        assert!(decode(&json!({"spec": {"expirationSeconds": (1i64 << 32) + 1}})).is_err());
        assert!(decode(&json!({"kind": "Secret"})).is_err());
        assert!(decode(&json!({"spec": {"audiences": "one"}})).is_err());
    }
}
