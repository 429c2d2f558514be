//! The token controller of kube-controller-manager, for legacy token Secrets: a Secret of type
//! `kubernetes.io/service-account-token` naming a ServiceAccount (annotation
//! `kubernetes.io/service-account.name`) gets a token for it, the CA and its namespace in `data`
//! and the ServiceAccount's uid in an annotation; a Secret whose ServiceAccount does not exist
//! (or is another one of the same name) is deleted, and so are a ServiceAccount's token Secrets
//! when it is deleted.
//!
//! [`decide`] is pure; [`run`] follows the store's events and writes as kube-controller-manager.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::tokens::{self, SECRETS_KEY, SERVICE_ACCOUNTS_KEY, SigningKey};
use crate::api::{ApiServer, Target, WriteOptions};
use crate::error::ApiError;
use crate::meta::ObjectMeta;
use crate::resource::{DeleteOptions, Part};
use crate::storage::EventType;
use crate::strategy::core::{SERVICE_ACCOUNT_NAME, TOKEN_SECRET_TYPE};

/// The annotation the controller sets to the ServiceAccount's uid.
pub const SERVICE_ACCOUNT_UID: &str = "kubernetes.io/service-account.uid";
/// The manager the controller's writes are recorded under.
const MANAGER: &str = "kube-controller-manager";

/// What to do with a token Secret.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing: not a token Secret, being deleted, or complete.
    Keep,
    /// Its ServiceAccount is gone (or is another of the same name): delete it.
    Delete,
    /// Store it as this (its data and annotations completed).
    Fill(Value),
}

fn annotation<'a>(object: &'a Value, key: &str) -> &'a str {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn is_token_secret(secret: &Value) -> bool {
    secret.get("type").and_then(Value::as_str) == Some(TOKEN_SECRET_TYPE)
}

/// Whether the token Secret names this ServiceAccount (by name, and by uid once it has one).
fn belongs_to(secret: &Value, account: &Value) -> bool {
    let uid = annotation(secret, SERVICE_ACCOUNT_UID);
    annotation(secret, SERVICE_ACCOUNT_NAME) == account.name()
        && (uid.is_empty() || uid == account.uid())
}

/// Decides about one Secret given its ServiceAccount as stored (if any), the CA clients should
/// trust (PEM) and a token made on demand (`token(service account uid)`).
pub fn decide(
    secret: &Value,
    account: Option<&Value>,
    ca_pem: Option<&str>,
    token: impl FnOnce(&str) -> Option<String>,
) -> Decision {
    if !is_token_secret(secret) || secret.is_deleting() {
        return Decision::Keep;
    }
    let Some(account) = account.filter(|a| belongs_to(secret, a) && !a.is_deleting()) else {
        return Decision::Delete;
    };
    let data = |key: &str| secret.pointer(&format!("/data/{}", key.replace('/', "~1")));
    let wanted_namespace = STANDARD.encode(secret.namespace());
    let wanted_ca = ca_pem.map(|pem| STANDARD.encode(pem));
    let needs_token = data("token")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    let needs_namespace = data("namespace").and_then(Value::as_str) != Some(&wanted_namespace);
    let needs_ca = wanted_ca
        .as_deref()
        .is_some_and(|ca| data("ca.crt").and_then(Value::as_str) != Some(ca));
    let needs_uid = annotation(secret, SERVICE_ACCOUNT_UID) != account.uid();
    if !(needs_token || needs_namespace || needs_ca || needs_uid) {
        return Decision::Keep;
    }
    let mut next = secret.clone();
    let Some(object) = next.as_object_mut() else {
        return Decision::Keep;
    };
    let data = object.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    if needs_token {
        let Some(token) = token(account.uid()) else {
            return Decision::Keep;
        };
        data["token"] = json!(STANDARD.encode(token));
    }
    data["namespace"] = json!(wanted_namespace);
    if let Some(ca) = wanted_ca {
        data["ca.crt"] = json!(ca);
    }
    let meta = crate::meta::meta_mut(&mut next);
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    annotations[SERVICE_ACCOUNT_UID] = json!(account.uid());
    Decision::Fill(next)
}

/// What the controller works with.
struct Controller {
    api: Arc<ApiServer>,
    key: Arc<SigningKey>,
    ca_pem: Option<String>,
}

/// Runs until shutdown: fills and deletes token Secrets as [`decide`] says, and deletes a
/// ServiceAccount's token Secrets when it goes.
pub async fn run(
    api: Arc<ApiServer>,
    key: Arc<SigningKey>,
    ca_pem: Option<String>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut rx = api.store.subscribe_all();
    let controller = Controller { api, key, ca_pem };
    controller.resync(None).await;
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Ok(e) if &*e.key == SECRETS_KEY && e.kind != EventType::Deleted => {
                    // Most Secrets are not token Secrets: passed over without decoding.
                    if memchr::memmem::find(&e.object, TOKEN_SECRET_TYPE.as_bytes()).is_some() {
                        controller.sync(&e.namespace, &e.name).await;
                    }
                }
                Ok(e) if &*e.key == SERVICE_ACCOUNTS_KEY && e.kind == EventType::Deleted => {
                    controller.resync(Some(&e.namespace)).await;
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => controller.resync(None).await,
                Err(RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

impl Controller {
    /// Syncs every token Secret (of `namespace`, or everywhere).
    async fn resync(&self, namespace: Option<&str>) {
        let (_, secrets) = self.api.store.select(SECRETS_KEY, namespace, &[]);
        for raw in secrets {
            if memchr::memmem::find(&raw, TOKEN_SECRET_TYPE.as_bytes()).is_none() {
                continue;
            }
            let secret = crate::storage::decode(&raw);
            self.sync(secret.namespace(), secret.name()).await;
        }
    }

    async fn sync(&self, namespace: &str, name: &str) {
        let Some(secret) = self.api.store.get(SECRETS_KEY, namespace, name) else {
            return;
        };
        let account_name = annotation(&secret, SERVICE_ACCOUNT_NAME);
        let account = self
            .api
            .store
            .get(SERVICE_ACCOUNTS_KEY, namespace, account_name);
        let decision = decide(&secret, account.as_deref(), self.ca_pem.as_deref(), |uid| {
            tokens::issue_legacy(&self.key, namespace, account_name, uid, name)
                    .map_err(|e| tracing::warn!(%namespace, secret = name, error = %e, "cannot make a token"))
                    .ok()
        });
        let Some(info) = self.api.registry.by_storage_key(SECRETS_KEY) else {
            return;
        };
        let target = Target {
            info,
            namespace: namespace.to_string(),
            name: Some(name.to_string()),
            part: Part::Main,
        };
        let written = match decision {
            Decision::Keep => return,
            Decision::Delete => {
                tracing::info!(%namespace, secret = name, service_account = account_name,
                    "deleting a token Secret whose ServiceAccount does not exist");
                let opts = DeleteOptions {
                    precondition_uid: Some(secret.uid().to_string()),
                    ..Default::default()
                };
                self.api.delete(&target, &opts).await.map(|_| ())
            }
            Decision::Fill(next) => {
                let opts = WriteOptions {
                    field_manager: Some(MANAGER.into()),
                    ..Default::default()
                };
                self.api.update(&target, next, &opts).await.map(|_| ())
            }
        };
        match written {
            // Changed or gone meanwhile: its next event brings it back here.
            Ok(()) | Err(ApiError::NotFound(_) | ApiError::Conflict(_)) => {}
            Err(ApiError::ConflictMessage { .. }) => {}
            Err(e) => {
                tracing::warn!(%namespace, secret = name, error = %e, "cannot write a token Secret")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(annotations: Value, data: Value) -> Value {
        json!({"type": TOKEN_SECRET_TYPE,
            "metadata": {"name": "agent-token", "namespace": "ns", "uid": "s-1", "annotations": annotations},
            "data": data})
    }

    fn account(uid: &str) -> Value {
        json!({"metadata": {"name": "agent", "namespace": "ns", "uid": uid}})
    }

    fn token(uid: &str) -> Option<String> {
        Some(format!("token-for-{uid}"))
    }

    #[test]
    fn a_new_token_secret_gets_a_token_the_ca_its_namespace_and_the_accounts_uid() {
        let s = secret(json!({SERVICE_ACCOUNT_NAME: "agent"}), json!(null));
        let Decision::Fill(filled) = decide(&s, Some(&account("sa-1")), Some("CA PEM"), token)
        else {
            panic!("expected the Secret to be filled");
        };
        assert_eq!(
            filled["data"],
            json!({"token": STANDARD.encode("token-for-sa-1"), "ca.crt": STANDARD.encode("CA PEM"),
                "namespace": STANDARD.encode("ns")})
        );
        assert_eq!(
            filled["metadata"]["annotations"],
            json!({SERVICE_ACCOUNT_NAME: "agent", SERVICE_ACCOUNT_UID: "sa-1"})
        );
        assert_eq!(
            decide(&filled, Some(&account("sa-1")), Some("CA PEM"), |_| None),
            Decision::Keep,
            "a complete Secret is left alone"
        );
    }

    #[test]
    fn a_token_secret_of_a_missing_or_other_service_account_is_deleted() {
        let s = secret(json!({SERVICE_ACCOUNT_NAME: "agent"}), json!({}));
        assert_eq!(decide(&s, None, None, token), Decision::Delete);
        let named = secret(
            json!({SERVICE_ACCOUNT_NAME: "agent", SERVICE_ACCOUNT_UID: "sa-1"}),
            json!({}),
        );
        assert_eq!(
            decide(&named, Some(&account("sa-2")), None, token),
            Decision::Delete,
            "a ServiceAccount made again under the same name is another one"
        );
    }

    #[test]
    fn other_secrets_and_secrets_being_deleted_are_left_alone() {
        let mut opaque = secret(json!({SERVICE_ACCOUNT_NAME: "agent"}), json!({}));
        opaque["type"] = json!("Opaque");
        assert_eq!(decide(&opaque, None, None, token), Decision::Keep);
        let mut deleting = secret(json!({SERVICE_ACCOUNT_NAME: "agent"}), json!({}));
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(decide(&deleting, None, None, token), Decision::Keep);
    }
}
