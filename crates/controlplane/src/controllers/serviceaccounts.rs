//! The serviceaccount controller: every active namespace has a `default` ServiceAccount, made
//! again when it is deleted.

use serde_json::{Value, json};

use super::{NS_KEY, create};
use crate::api::ApiServer;
use crate::meta::ObjectMeta;
use crate::storage::{Event, EventType};

const SA_KEY: &str = "/serviceaccounts";
const DEFAULT: &str = "default";

/// Makes `ns`'s `default` ServiceAccount if it is missing and the namespace is active.
pub(super) async fn ensure(api: &ApiServer, ns: &Value) {
    if ns.is_deleting()
        || ns.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
    {
        return;
    }
    let name = ns.name();
    if api.store.get_stored(SA_KEY, name, DEFAULT).is_some() {
        return;
    }
    if let Err(e) = create(api, SA_KEY, name, json!({"metadata": {"name": DEFAULT}})).await {
        tracing::warn!(namespace = name, error = %e, "creating the default ServiceAccount failed");
    }
}

/// A `default` ServiceAccount deleted from an active namespace is made again.
pub(super) async fn react(api: &ApiServer, e: &Event) {
    if e.kind != EventType::Deleted || &*e.key != SA_KEY || e.name != DEFAULT {
        return;
    }
    if let Some(ns) = api.store.get(NS_KEY, "", &e.namespace) {
        ensure(api, &ns).await;
    }
}
