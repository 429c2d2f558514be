//! Writing conditions without losing anyone else's.
//!
//! Several writers share the condition lists of the hub's objects: the agent (Joined,
//! Available), the hub's accept loop (HubAcceptedManagedCluster) and its lease loop (Available
//! Unknown), addon agents (their own conditions). A merge patch replaces the whole list, so every
//! write here reads the object, sets its conditions with [`set_condition`] (which keeps
//! `lastTransitionTime` unless the status changes) and patches with the `resourceVersion` it read:
//! a concurrent write makes the patch fail with 409 Conflict, and the write starts over from a
//! fresh read. A writer holding a watch's copy starts from that copy instead
//! ([`set_conditions_from`]): one request when the copy is current; and a controller that every
//! change of the object wakes need not read it afresh at all after a conflict
//! ([`set_conditions_once_from`]). Nothing is written when no condition changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::api::{HasConditions, set_condition};
use crate::runtime::error::is_conflict;

/// How many times a write is retried after a conflict before giving up.
const CONFLICT_RETRIES: usize = 8;

/// Whether `current` already says what `wanted` would set: setting them would change nothing.
/// A writer that holds a cached copy asks this before [`set_conditions`] reads the object
/// afresh, so a pass that finds nothing new costs no request.
pub fn conditions_hold(current: &[Condition], wanted: &[Condition]) -> bool {
    let mut conditions = current.to_vec();
    wanted
        .iter()
        .all(|condition| !set_condition(&mut conditions, condition.clone()))
}

/// Sets the conditions `wanted` returns for the freshly read object (none: nothing to do) and
/// writes them if anything changed. Returns the written object, or `None` when nothing was
/// written.
pub async fn set_conditions<K>(
    api: &Api<K>,
    name: &str,
    field_manager: &str,
    wanted: impl Fn(&K) -> Vec<Condition>,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + HasConditions + Clone + DeserializeOwned + std::fmt::Debug,
{
    write_status(
        api,
        name,
        None,
        field_manager,
        wanted,
        &Map::new(),
        CONFLICT_RETRIES,
    )
    .await
}

/// As [`set_conditions`], starting from `cached`, the copy a watch keeps, and writing the status
/// fields `also` in the same patch: when the copy is current (the writer's own watch brought
/// it), one request and no read; when another write came first, its 409 Conflict sends the
/// write to a fresh read, as [`set_conditions`]. Nothing is written when no condition changes
/// and `also` is empty.
pub async fn set_conditions_from<K>(
    api: &Api<K>,
    cached: &K,
    field_manager: &str,
    wanted: impl Fn(&K) -> Vec<Condition>,
    also: &Map<String, Value>,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + HasConditions + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = cached.name_any();
    write_status(
        api,
        &name,
        Some(cached),
        field_manager,
        wanted,
        also,
        CONFLICT_RETRIES,
    )
    .await
}

/// As [`set_conditions_from`], once: when another write came first, its 409 Conflict is
/// returned, not retried from a fresh read. For a writer that every change of the object wakes
/// (a controller over it): the write that came first is on its way to it, and it judges again
/// from that copy, with no read.
pub async fn set_conditions_once_from<K>(
    api: &Api<K>,
    cached: &K,
    field_manager: &str,
    wanted: impl Fn(&K) -> Vec<Condition>,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + HasConditions + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = cached.name_any();
    write_status(
        api,
        &name,
        Some(cached),
        field_manager,
        wanted,
        &Map::new(),
        0,
    )
    .await
}

async fn write_status<K>(
    api: &Api<K>,
    name: &str,
    mut cached: Option<&K>,
    field_manager: &str,
    wanted: impl Fn(&K) -> Vec<Condition>,
    also: &Map<String, Value>,
    retries: usize,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + HasConditions + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut attempt = 0;
    loop {
        let read;
        let current = match cached.take() {
            Some(cached) => cached,
            None => {
                read = api.get(name).await?;
                &read
            }
        };
        let mut conditions = current.current_conditions().to_vec();
        let mut changed = false;
        for condition in wanted(current) {
            changed |= set_condition(&mut conditions, condition);
        }
        if !changed && also.is_empty() {
            return Ok(None);
        }
        let mut status = also.clone();
        if changed {
            status.insert("conditions".into(), json!(conditions));
        }
        let patch = json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": {"resourceVersion": current.resource_version()},
            "status": status,
        });
        let params = PatchParams {
            field_manager: Some(field_manager.to_string()),
            ..PatchParams::default()
        };
        match api.patch_status(name, &params, &Patch::Merge(&patch)).await {
            Ok(written) => return Ok(Some(written)),
            Err(err) if is_conflict(&err) && attempt < retries => attempt += 1,
            Err(err) => return Err(err),
        }
    }
}
