//! Writing conditions without losing anyone else's.
//!
//! Several writers share the condition lists of the hub's objects: the agent (Joined,
//! Available), the hub's accept loop (HubAcceptedManagedCluster) and its lease loop (Available
//! Unknown), addon agents (their own conditions). A merge patch replaces the whole list, so every
//! write here reads the object, sets its conditions with [`set_condition`] (which keeps
//! `lastTransitionTime` unless the status changes) and patches with the `resourceVersion` it read:
//! a concurrent write makes the patch fail with 409 Conflict, and the write starts over from a
//! fresh read. Nothing is written when no condition changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

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
    let mut attempt = 0;
    loop {
        let current = api.get(name).await?;
        let mut conditions = current.current_conditions().to_vec();
        let mut changed = false;
        for condition in wanted(&current) {
            changed |= set_condition(&mut conditions, condition);
        }
        if !changed {
            return Ok(None);
        }
        let patch = json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": {"resourceVersion": current.resource_version()},
            "status": {"conditions": conditions},
        });
        let params = PatchParams {
            field_manager: Some(field_manager.to_string()),
            ..PatchParams::default()
        };
        match api.patch_status(name, &params, &Patch::Merge(&patch)).await {
            Ok(written) => return Ok(Some(written)),
            Err(err) if is_conflict(&err) && attempt < CONFLICT_RETRIES => attempt += 1,
            Err(err) => return Err(err),
        }
    }
}
