//! The root CA publisher: every namespace has a `kube-root-ca.crt` ConfigMap holding the
//! control plane's CA certificate, so pods can verify the API server; one deleted or changed
//! is put back.

use serde_json::{Value, json};

use super::{NS_KEY, create, update, warn_failed};
use crate::api::ApiServer;
use crate::meta::ObjectMeta;
use crate::resource::Part;
use crate::storage::{Event, EventType};

const CM_KEY: &str = "/configmaps";
/// The ConfigMap's name.
pub const NAME: &str = "kube-root-ca.crt";
const DESCRIPTION_KEY: &str = "kubernetes.io/description";
/// kube-controller-manager's description of the ConfigMap.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Publishes `ca` into namespace `ns`, unless it is there as it should be.
pub(super) async fn ensure(api: &ApiServer, ca: &str, ns: &str) {
    match api.store.get(CM_KEY, ns, NAME) {
        None => {
            let namespace_active = api
                .store
                .get(NS_KEY, "", ns)
                .is_some_and(|n| !n.is_deleting());
            if !namespace_active {
                return;
            }
            let cm = json!({
                "metadata": {"name": NAME, "annotations": {DESCRIPTION_KEY: DESCRIPTION}},
                "data": {"ca.crt": ca}});
            if let Err(e) = create(api, CM_KEY, ns, cm).await {
                tracing::warn!(namespace = ns, error = %e, "publishing {NAME} failed");
            }
        }
        Some(cm) if published(&cm, ca) => {}
        Some(_) => {
            let result = update(api, CM_KEY, ns, NAME, Part::Main, |cur| {
                if published(cur, ca) {
                    return None;
                }
                let mut next = cur.clone();
                next["data"] = json!({"ca.crt": ca});
                let meta = crate::meta::meta_mut(&mut next);
                let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
                if !annotations.is_object() {
                    *annotations = json!({});
                }
                annotations[DESCRIPTION_KEY] = json!(DESCRIPTION);
                Some(next)
            })
            .await;
            warn_failed("putting back the root CA", CM_KEY, ns, NAME, result);
        }
    }
}

/// Whether the ConfigMap holds exactly the CA and carries a description.
fn published(cm: &Value, ca: &str) -> bool {
    cm.get("data") == Some(&json!({"ca.crt": ca}))
        && cm
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(DESCRIPTION_KEY))
            .and_then(Value::as_str)
            .is_some_and(|d| !d.is_empty())
}

/// The ConfigMap changed or went: it is put back.
pub(super) async fn react(api: &ApiServer, ca: &str, e: &Event) {
    if &*e.key != CM_KEY || e.name != NAME || e.kind == EventType::Added {
        return;
    }
    ensure(api, ca, &e.namespace).await;
}
