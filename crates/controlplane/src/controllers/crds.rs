//! CRD cleanup, as the apiextensions server's finalizer: a CRD being deleted has its objects
//! deleted first, then its `customresourcecleanup` finalizer goes and with it the CRD.

use std::sync::Arc;

use serde_json::Value;

use super::{delete, update, warn_failed, without_finalizer};
use crate::api::ApiServer;
use crate::meta::ObjectMeta;
use crate::resource::Part;
use crate::storage::Event;
use crate::strategy::apiextensions::CRD_CLEANUP;

/// The storage key of CustomResourceDefinitions.
pub(crate) const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// A CRD was written: one being deleted is cleaned up.
pub(super) async fn written(api: &ApiServer, e: &Event) {
    if memchr::memmem::find(&e.object, b"\"deletionTimestamp\"").is_some() {
        cleanup(api, &e.name).await;
    }
}

/// An object was removed: when it was a custom resource of a CRD being deleted, the CRD may go.
pub(super) async fn object_deleted(api: &ApiServer, key: &str) {
    if let Some(crd) = crd_of(api, key)
        && crd.is_deleting()
    {
        cleanup(api, crd.name()).await;
    }
}

pub(super) async fn resync(api: &Arc<ApiServer>) {
    let (_, crds) = api.store.list(CRD_KEY, None, None);
    for crd in crds.iter().filter(|c| c.is_deleting()) {
        cleanup(api, crd.name()).await;
    }
}

fn crd_of(api: &ApiServer, key: &str) -> Option<Arc<Value>> {
    let info = api.registry.by_storage_key(key)?;
    let custom = info.custom.as_ref()?;
    api.store.get(CRD_KEY, "", &custom.crd_name)
}

/// Deletes a terminating CRD's objects, then releases the CRD.
async fn cleanup(api: &ApiServer, name: &str) {
    let Some(crd) = api.store.get(CRD_KEY, "", name) else {
        return;
    };
    if !crd.is_deleting() {
        return;
    }
    let text = |path: &str| crd.pointer(path).and_then(Value::as_str).unwrap_or("");
    let key = format!("{}/{}", text("/spec/group"), text("/spec/names/plural"));
    let (_, objects) = api.store.list(&key, None, None);
    if objects.is_empty() {
        let result = update(api, CRD_KEY, "", name, Part::Main, |cur| {
            without_finalizer(cur, CRD_CLEANUP)
        })
        .await;
        warn_failed("releasing a CRD", CRD_KEY, "", name, result);
        return;
    }
    for o in objects.iter().filter(|o| !o.is_deleting()) {
        let result = delete(api, &key, o.namespace(), o.name(), "Background").await;
        warn_failed(
            "deleting a CRD's object",
            &key,
            o.namespace(),
            o.name(),
            result,
        );
    }
}
