//! Finalizers and the deletes of cleanup, as the hub's reconciler and the agent's day 2 both
//! make them: guarded by the resourceVersion read, idempotent, and content with an object that
//! is already gone.

use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::runtime::error::is_not_found;

/// Adds (`add`) or removes `finalizer` on `object`, guarded by the resourceVersion it was read
/// at (a concurrent change makes it fail with 409, and the caller starts from a fresh read).
/// Nothing is written when the finalizer is already as asked.
pub async fn set_finalizer<K>(
    api: &Api<K>,
    object: &K,
    finalizer: &str,
    add: bool,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    set_finalizers(api, object, &[finalizer], add)
        .await
        .map(|_| ())
}

/// [`set_finalizer`] for several finalizers in one write; returns the object as written, when a
/// write was made (and the object still exists), for a caller that writes it again next.
pub async fn set_finalizers<K>(
    api: &Api<K>,
    object: &K,
    finalizers: &[&str],
    add: bool,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let current = object.finalizers();
    let mut wanted: Vec<String> = current
        .iter()
        .filter(|f| !finalizers.contains(&f.as_str()))
        .cloned()
        .collect();
    if add {
        wanted.extend(finalizers.iter().map(|f| f.to_string()));
    }
    if wanted.len() == current.len() && wanted.iter().all(|f| current.contains(f)) {
        return Ok(None);
    }
    let patch = json!({
        "metadata": {"resourceVersion": object.resource_version(), "finalizers": wanted},
    });
    match api
        .patch(
            &object.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(written) => Ok(Some(written)),
        // Removing the last finalizer of an object being deleted may race its disappearance.
        Err(err) if !add && is_not_found(&err) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Deletes an object (in the background); one that is already gone is fine.
pub async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        Err(err) => Err(err),
    }
}
