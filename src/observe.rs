//! Reading what a hub holds, for the planner: fleetform's objects there, what a server-side
//! apply of the desired objects would store (dry run), the ManagedClusters registered, and the
//! FleetSyncs that keep the hub at a commit.
//! Reads only; it never changes a cluster.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::api::fleet::{FleetSync, SYSTEM_NAMESPACE};
use crate::api::{ClusterManagementAddOn, Hub, ManagedCluster, Spoke};
use crate::plan::desired::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::plan::{ClusterRegistration, ManagingSync, ObjectKey, ObjectKind, ObservedHub};
use crate::runtime::watch::without_managed_fields;

/// The field manager of every object fleetform applies.
pub const FIELD_MANAGER: &str = "fleetform";

/// Why a hub could not be observed.
#[derive(Debug, thiserror::Error)]
#[error("hub {hub}: cannot {action}: {source}")]
pub struct ObserveError {
    pub hub: String,
    pub action: String,
    #[source]
    pub source: kube::Error,
}

/// The API resource of each kind a plan writes.
pub fn api_resource(kind: ObjectKind) -> ApiResource {
    match kind {
        ObjectKind::Hub => ApiResource::erase::<Hub>(&()),
        ObjectKind::Spoke => ApiResource::erase::<Spoke>(&()),
        ObjectKind::ClusterManagementAddOn => ApiResource::erase::<ClusterManagementAddOn>(&()),
    }
}

fn api(client: &Client, key_kind: ObjectKind, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = api_resource(key_kind);
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// How many requests of one kind (dry runs here, writes in `apply`) are in flight at once: a
/// fleet's thousands of objects are not read or written one round trip at a time.
pub const IN_FLIGHT: usize = 16;

/// How many objects a list asks for at once: a hub's 10,000 Spokes are not one answer of tens
/// of megabytes, decoded whole.
const LIST_PAGE: u32 = 500;

/// Observes one hub against the objects the fleet wants there.
pub async fn observe_hub(
    hub: &str,
    client: &Client,
    desired: &BTreeMap<ObjectKey, Value>,
) -> Result<ObservedHub, ObserveError> {
    let failed = |action: &str| {
        let hub = hub.to_string();
        let action = action.to_string();
        move |source| ObserveError {
            hub,
            action,
            source,
        }
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = true;
    for crd in crate::api::crds() {
        let name = crd.metadata.name.unwrap_or_default();
        if crds
            .get_opt(&name)
            .await
            .map_err(failed("read CRDs"))?
            .is_none()
        {
            installed = false;
        }
    }
    let mut observed = ObservedHub {
        installed,
        ..ObservedHub::default()
    };
    if !installed {
        // Nothing of fleetform's can exist yet, and dry runs of unknown kinds would only fail.
        return Ok(observed);
    }

    let managed = ListParams::default()
        .labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"))
        .limit(LIST_PAGE);
    for (kind, namespace) in [
        (ObjectKind::Hub, Some(SYSTEM_NAMESPACE)),
        (ObjectKind::Spoke, Some(SYSTEM_NAMESPACE)),
        (ObjectKind::ClusterManagementAddOn, None),
    ] {
        list_paged(&api(client, kind, namespace), &managed, |object| {
            keep_listed(&mut observed, kind, object);
        })
        .await
        .map_err(failed(&format!("list {}s", kind.as_str())))?;
    }

    observed.fleet_syncs = Api::<FleetSync>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .list(&ListParams::default())
        .await
        .map_err(failed("list FleetSyncs"))?
        .into_iter()
        .map(|fleetsync| managing(&fleetsync))
        .collect();

    let namespace_exists = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get_opt(SYSTEM_NAMESPACE)
        .await
        .map_err(failed("read namespaces"))?
        .is_some();
    let dry_run = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let mut dry_runs = Vec::new();
    for (key, object) in desired {
        if key.namespace.is_some() && !namespace_exists {
            continue;
        }
        dry_runs.push(dry_run_apply(hub, client, key, object, &dry_run));
    }
    observed.dry_run = futures::stream::iter(dry_runs)
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;

    let clusters = Api::<ManagedCluster>::all(client.clone());
    list_paged(
        &clusters,
        &ListParams::default().limit(LIST_PAGE),
        |cluster| {
            let name = cluster.metadata.name.clone().unwrap_or_default();
            let registration = ClusterRegistration {
                hub_accepts_client: cluster.spec.hub_accepts_client.unwrap_or(false),
                accepted: crate::api::is_condition_true(
                    cluster.conditions(),
                    crate::api::vocabulary::CONDITION_HUB_ACCEPTED,
                ),
            };
            observed.clusters.insert(name, registration);
        },
    )
    .await
    .map_err(failed("list ManagedClusters"))?;
    Ok(observed)
}

/// Lists what `params` selects a page at a time, handing each object to `keep`: only one page
/// is ever decoded at once.
async fn list_paged<K>(
    api: &Api<K>,
    params: &ListParams,
    mut keep: impl FnMut(K),
) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut page = params.clone();
    loop {
        let list = api.list(&page).await?;
        let next = list
            .metadata
            .continue_
            .clone()
            .filter(|token| !token.is_empty());
        list.items.into_iter().for_each(&mut keep);
        match next {
            Some(token) => page = params.clone().continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Keeps a listed object as a plan reads it.
fn keep_listed(observed: &mut ObservedHub, kind: ObjectKind, mut object: DynamicObject) {
    let key = ObjectKey {
        kind,
        namespace: object.metadata.namespace.clone(),
        name: object.metadata.name.clone().unwrap_or_default(),
    };
    // A plan never reads who manages which field, nor the conditions of a status (only a
    // Spoke's phase and agent): at 10,000 Spokes those were most of what an observation held.
    without_managed_fields(&mut object);
    if let Some(status) = object.data.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("conditions");
    }
    let value = serde_json::to_value(&object).unwrap_or(Value::Null);
    observed.objects.insert(key, value);
}

/// What the server would make of `object` if fleetform applied it.
async fn dry_run_apply(
    hub: &str,
    client: &Client,
    key: &ObjectKey,
    object: &Value,
    params: &PatchParams,
) -> Result<(ObjectKey, Value), ObserveError> {
    let mut result = api(client, key.kind, key.namespace.as_deref())
        .patch(&key.name, params, &Patch::Apply(object))
        .await
        .map_err(|source| ObserveError {
            hub: hub.to_string(),
            action: format!("dry-run apply {key}"),
            source,
        })?;
    // What a plan reads of it: what it compares (no status) and the spec it would hold.
    without_managed_fields(&mut result);
    if let Some(fields) = result.data.as_object_mut() {
        fields.remove("status");
    }
    Ok((
        key.clone(),
        serde_json::to_value(&result).unwrap_or(Value::Null),
    ))
}

/// A FleetSync as the planner names it: which repo, ref and commit keep the hub.
pub(crate) fn managing(fleetsync: &FleetSync) -> ManagingSync {
    ManagingSync {
        fleet_sync: fleetsync.metadata.name.clone().unwrap_or_default(),
        repo: fleetsync.spec.repo.clone(),
        git_ref: fleetsync.spec.git_ref.clone(),
        path: fleetsync.spec.path.clone(),
        last_applied_commit: fleetsync
            .status
            .as_ref()
            .and_then(|status| status.last_applied_commit.clone()),
    }
}
