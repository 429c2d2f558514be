//! Removing fleetform from a hub. Refused while spokes are joined, unless every one is to be
//! unjoined first, and while ManagedClusters fleetform did not join would go with its
//! ManagedCluster CRD. Then, in this order: the FleetSyncs (so that sync writes no more Hubs
//! or Spokes); every Hub — the lifecycle reconciler, still running, cascades a Hub's deletion
//! to its spokes, each unjoined in seed 004's order — and every Spoke whose Hub is gone,
//! waited for until none is left; then the install set of [`super::manifests`] in reverse
//! order, each object only if it carries fleetform's mark: the Deployment, the Service, the
//! RBAC and ServiceAccount, fleetform's CRDs and the namespace. A CRD fleetform did not write
//! (OCM's own) is left, and so is what OCM's hub shares with fleetform's (the bootstrap
//! ClusterRole `system:open-cluster-management:bootstrap`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::manifests::HUB_DEPLOYMENT;
use super::manifests::{HubSettings, hub_manifests};
use super::{dynamic_api, is_marked};
use crate::api::fleet::{FleetSync, Hub, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::{
    ANNOTATION_FORCE_UNJOIN, CONDITION_UNJOINED, FINALIZER_HUB_CLEANUP, REGISTRATION_CLUSTER_ROLE,
};
use crate::api::{ManagedCluster, find_condition};

/// What uninstalling is doing, for its progress display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An object was deleted (or found gone, or left alone), as `Kind name`.
    Removed { object: String, removed: Removed },
    /// A spoke being unjoined is at `state` (its phase and what its unjoin waits on).
    Unjoining { spoke: String, state: String },
    /// A spoke is unjoined and its Spoke gone.
    Unjoined { spoke: String },
    /// A Hub whose spokes are gone is still there, held by `state` (its finalizers).
    HubWaiting { hub: String, state: String },
}

/// What happened to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removed {
    Deleted,
    /// It was being deleted already (a namespace terminates for a while): an earlier
    /// uninstall removed it.
    Deleting,
    /// It was not there.
    Absent,
    /// It is there without fleetform's mark: not fleetform's to delete.
    LeftAlone,
}

impl std::fmt::Display for Removed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Removed::Deleted => "deleted",
            Removed::Deleting => "being deleted",
            Removed::Absent => "absent",
            Removed::LeftAlone => "left alone (not fleetform's)",
        })
    }
}

/// Why uninstalling stopped.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    #[error("{}", refusal(spokes, unmanaged_clusters))]
    Refused {
        /// The Spokes there are, when they were not to be unjoined.
        spokes: Vec<String>,
        /// ManagedClusters no Spoke declares, which fleetform's ManagedCluster CRD would take
        /// with it.
        unmanaged_clusters: Vec<String>,
    },
    #[error("cannot {action} {object}: {source}")]
    Kube {
        object: String,
        action: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("cannot watch {what}: {source}")]
    Watch {
        what: &'static str,
        #[source]
        source: watcher::Error,
    },
    #[error(
        "timed out after {seconds} s waiting for {}; a spoke whose agent cannot unjoin is unjoined by the hub after its spec.cleanup.unjoinTimeoutSeconds, or at once with the annotation {ANNOTATION_FORCE_UNJOIN}=true on its Spoke",
        waiting.join("; ")
    )]
    Timeout { waiting: Vec<String>, seconds: u64 },
    #[error("{}", hubs_remain(hubs, *seconds))]
    HubsRemain {
        /// Each Hub left, with what holds it.
        hubs: Vec<(String, String)>,
        seconds: u64,
    },
}

/// What a timeout waiting for Hubs to go says: what holds each, who removes it, how to go on.
fn hubs_remain(hubs: &[(String, String)], seconds: u64) -> String {
    let names: Vec<&str> = hubs.iter().map(|(name, _)| name.as_str()).collect();
    let held: Vec<String> = hubs
        .iter()
        .map(|(name, state)| format!("Hub {name} ({state})"))
        .collect();
    format!(
        "timed out after {seconds} s waiting for {}: the hub's lifecycle reconciler removes {FINALIZER_HUB_CLEANUP} once a Hub's spokes are gone, so the hub must run meanwhile (Deployment {HUB_DEPLOYMENT} in {SYSTEM_NAMESPACE}, or `fleetform hub`); start it again and run uninstall again, or, if it cannot run, remove the finalizer by hand: kubectl patch hub -n {SYSTEM_NAMESPACE} {} --type=merge -p '{{\"metadata\":{{\"finalizers\":null}}}}'",
        held.join(", "),
        names.join(" ")
    )
}

fn refusal(spokes: &[String], unmanaged: &[String]) -> String {
    let mut reasons = Vec::new();
    if !spokes.is_empty() {
        reasons.push(format!(
            "{} spoke(s) are joined to this hub ({}): delete them from the fleet repo and let it apply, or pass --unjoin-all to unjoin every spoke first",
            spokes.len(),
            spokes.join(", ")
        ));
    }
    if !unmanaged.is_empty() {
        reasons.push(format!(
            "ManagedClusters no Spoke declares ({}) would be deleted with fleetform's ManagedCluster CRD, and fleetform cannot unjoin them: unjoin each from its cluster, then `kubectl delete managedcluster NAME`",
            unmanaged.join(", ")
        ));
    }
    format!("refusing to uninstall: {}", reasons.join("; "))
}

/// Removes fleetform from `client`'s cluster; with `unjoin_all`, every spoke is unjoined first,
/// otherwise any Spoke refuses it. Waits for the unjoins at most `timeout`.
pub async fn uninstall(
    client: &Client,
    unjoin_all: bool,
    timeout: Duration,
    mut report: impl FnMut(Event),
) -> Result<(), UninstallError> {
    let deadline = Instant::now() + timeout;
    let spokes: Vec<Spoke> = list_all(in_system(client)).await?;
    let hubs: Vec<Hub> = list_all(in_system(client)).await?;
    let declared: BTreeSet<String> = spokes.iter().map(ResourceExt::name_any).collect();
    let unmanaged_clusters =
        if ours(client, "managedclusters.cluster.open-cluster-management.io").await? {
            list_all::<ManagedCluster>(Api::all(client.clone()))
                .await?
                .iter()
                .map(ResourceExt::name_any)
                .filter(|name| !declared.contains(name))
                .collect()
        } else {
            Vec::new()
        };
    if !unmanaged_clusters.is_empty() || (!unjoin_all && !spokes.is_empty()) {
        return Err(UninstallError::Refused {
            spokes: if unjoin_all {
                Vec::new()
            } else {
                declared.into_iter().collect()
            },
            unmanaged_clusters,
        });
    }
    for fleet_sync in list_all::<FleetSync>(in_system(client)).await? {
        delete::<FleetSync>(client, &fleet_sync.name_any(), &mut report).await?;
    }
    if !spokes.is_empty() || !hubs.is_empty() {
        unjoin(client, &hubs, &spokes, (deadline, timeout), &mut report).await?;
    }
    remove_install_set(client, &mut report).await
}

/// Deletes every Hub (the reconciler unjoins its spokes) and every Spoke whose Hub is gone,
/// and waits until none is left, until `deadline` (`timeout` from the start).
async fn unjoin(
    client: &Client,
    hubs: &[Hub],
    spokes: &[Spoke],
    (deadline, timeout): (Instant, Duration),
    report: &mut impl FnMut(Event),
) -> Result<(), UninstallError> {
    let hub_names: BTreeSet<String> = hubs.iter().map(ResourceExt::name_any).collect();
    for hub in &hub_names {
        delete::<Hub>(client, hub, report).await?;
    }
    for orphan in spokes
        .iter()
        .filter(|spoke| !hub_names.contains(&spoke.spec.hub_ref))
    {
        delete::<Spoke>(client, &orphan.name_any(), report).await?;
    }
    // What is still waited on, for a timeout to name.
    let mut waiting: BTreeMap<String, String> = BTreeMap::new();
    let unjoined = until_none::<Spoke>(client, "Spokes", |name, spoke| match spoke {
        Some(spoke) => {
            let state = unjoin_state(spoke);
            if waiting.get(name) != Some(&state) {
                report(Event::Unjoining {
                    spoke: name.to_string(),
                    state: state.clone(),
                });
                waiting.insert(name.to_string(), state);
            }
        }
        None => {
            if waiting.remove(name).is_some() {
                report(Event::Unjoined {
                    spoke: name.to_string(),
                });
            }
        }
    });
    match tokio::time::timeout_at(deadline, unjoined).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(UninstallError::Timeout {
                waiting: waiting
                    .iter()
                    .map(|(spoke, state)| format!("Spoke {spoke} to unjoin ({state})"))
                    .collect(),
                seconds: timeout.as_secs(),
            });
        }
    }
    let mut held: BTreeMap<String, String> = BTreeMap::new();
    let hubs_gone = until_none::<Hub>(client, "Hubs", |name, hub| match hub {
        Some(hub) => {
            let state = hub_state(hub);
            if held.get(name) != Some(&state) {
                report(Event::HubWaiting {
                    hub: name.to_string(),
                    state: state.clone(),
                });
                held.insert(name.to_string(), state);
            }
        }
        None => {
            held.remove(name);
        }
    });
    match tokio::time::timeout_at(deadline, hubs_gone).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(UninstallError::HubsRemain {
                hubs: held.into_iter().collect(),
                seconds: timeout.as_secs(),
            });
        }
    }
    Ok(())
}

/// What holds a deleted Hub: its finalizers, and who removes fleetform's.
fn hub_state(hub: &Hub) -> String {
    let finalizers = hub.finalizers();
    if finalizers.is_empty() {
        return "going".to_string();
    }
    let by = |finalizer: &String| {
        if finalizer == FINALIZER_HUB_CLEANUP {
            format!("{finalizer}, which the hub's lifecycle reconciler removes")
        } else {
            format!("{finalizer}, not fleetform's")
        }
    };
    format!(
        "held by its finalizer {}",
        finalizers.iter().map(by).collect::<Vec<_>>().join(" and ")
    )
}

/// The install set's objects that carry fleetform's mark, deleted in reverse order.
async fn remove_install_set(
    client: &Client,
    report: &mut impl FnMut(Event),
) -> Result<(), UninstallError> {
    for manifest in hub_manifests(&HubSettings::default()).iter().rev() {
        let object = super::install::describe(manifest);
        let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
        let removed = remove_if_marked(&dynamic_api(client, manifest), name, &object).await?;
        report(Event::Removed { object, removed });
    }
    // Made by the hub at its first acceptance, not by install; bound by no cluster now.
    let object = format!("ClusterRole {REGISTRATION_CLUSTER_ROLE}");
    let cluster_roles = Api::<ClusterRole>::all(client.clone());
    let removed = remove_if_marked(&cluster_roles, REGISTRATION_CLUSTER_ROLE, &object).await?;
    report(Event::Removed { object, removed });
    Ok(())
}

/// Deletes the object `name` of `api` (described as `object`) if it carries fleetform's mark.
async fn remove_if_marked<K>(
    api: &Api<K>,
    name: &str,
    object: &str,
) -> Result<Removed, UninstallError>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let failed = |action| {
        move |source| UninstallError::Kube {
            object: object.to_string(),
            action,
            source,
        }
    };
    Ok(match api.get_opt(name).await.map_err(failed("read"))? {
        None => Removed::Absent,
        Some(found) if !is_marked(&found) => Removed::LeftAlone,
        Some(found) if found.meta().deletion_timestamp.is_some() => Removed::Deleting,
        Some(_) => {
            api.delete(name, &DeleteParams::background())
                .await
                .map_err(failed("delete"))?;
            Removed::Deleted
        }
    })
}

/// Every object of `api`; none when its CRD is not installed.
async fn list_all<K>(api: Api<K>) -> Result<Vec<K>, UninstallError>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(source) => Err(UninstallError::Kube {
            object: K::plural(&()).to_string(),
            action: "list",
            source,
        }),
    }
}

fn in_system<K>(client: &Client) -> Api<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    Api::namespaced(client.clone(), SYSTEM_NAMESPACE)
}

/// Whether the CRD `name` is there and fleetform's.
async fn ours(client: &Client, name: &str) -> Result<bool, UninstallError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .get_opt(name)
        .await
        .map_err(|source| UninstallError::Kube {
            object: format!("CustomResourceDefinition {name}"),
            action: "read",
            source,
        })?;
    Ok(crd.is_some_and(|crd| is_marked(&crd)))
}

async fn delete<K>(
    client: &Client,
    name: &str,
    report: &mut impl FnMut(Event),
) -> Result<(), UninstallError>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let object = format!("{} {SYSTEM_NAMESPACE}/{name}", K::kind(&()));
    let removed = match in_system::<K>(client)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Removed::Deleted,
        Err(kube::Error::Api(status)) if status.code == 404 => Removed::Absent,
        Err(source) => {
            return Err(UninstallError::Kube {
                object,
                action: "delete",
                source,
            });
        }
    };
    report(Event::Removed { object, removed });
    Ok(())
}

/// How a spoke's unjoin stands: its phase and, while it waits, on what.
fn unjoin_state(spoke: &Spoke) -> String {
    let status = spoke.status.clone().unwrap_or_default();
    let phase = status
        .phase
        .map(|phase| format!("{phase:?}"))
        .unwrap_or_else(|| "Pending".to_string());
    match find_condition(&status.conditions, CONDITION_UNJOINED) {
        Some(condition) if condition.status != "True" => {
            format!("{phase}: {}: {}", condition.reason, condition.message)
        }
        _ => phase,
    }
}

/// Waits until no object of kind `K` is left in `fleetform-system`; `seen` is told of each
/// object as it changes, and with `None` as it goes.
async fn until_none<K>(
    client: &Client,
    what: &'static str,
    mut seen: impl FnMut(&str, Option<&K>),
) -> Result<(), UninstallError>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let mut left = BTreeSet::new();
    let mut relisted = BTreeSet::new();
    let mut listed = false;
    let mut events = watcher(in_system::<K>(client), watcher::Config::default()).boxed();
    while let Some(event) = events
        .try_next()
        .await
        .map_err(|source| UninstallError::Watch { what, source })?
    {
        match event {
            watcher::Event::Init => relisted.clear(),
            watcher::Event::InitApply(object) => {
                relisted.insert(object.name_any());
                seen(&object.name_any(), Some(&object));
            }
            watcher::Event::InitDone => {
                for name in left.difference(&relisted) {
                    seen(name, None);
                }
                left = std::mem::take(&mut relisted);
                listed = true;
            }
            watcher::Event::Apply(object) => {
                left.insert(object.name_any());
                seen(&object.name_any(), Some(&object));
            }
            watcher::Event::Delete(object) => {
                left.remove(&object.name_any());
                seen(&object.name_any(), None);
            }
        }
        if listed && left.is_empty() {
            return Ok(());
        }
    }
    Ok(())
}
