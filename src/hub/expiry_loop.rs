//! The hub's lease expiry loop (seed 000, seed 001, DESIGN §3 and §4.2).
//!
//! One controller over ManagedClusters, woken by their own changes, by every renewal of a
//! `managed-cluster-lease` and by changes of ManagedClusterAddOns. Each reconcile judges the
//! cluster's lease with [`judge_cluster_lease`] and asks the controller to come back exactly at
//! the deadline it returns, so every cluster has one timer and nothing polls. At the deadline the
//! cluster's Available condition becomes Unknown; the availability taints follow the Available
//! condition, whoever wrote it; and while the cluster is Unknown every addon of it is Unknown
//! with the cluster's reason.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::Controller;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument};

use super::cache;
use super::lease::{
    LeaseVerdict, addon_unknown_condition, clock_synced, clock_synced_condition,
    judge_cluster_lease, reconcile_availability_taints,
};
use super::run::{Context, FIELD_MANAGER, HubError};
use crate::api::vocabulary::{
    CLUSTER_LEASE_NAME, CONDITION_AVAILABLE, CONDITION_CLOCK_SYNCED, CONDITION_HUB_ACCEPTED,
    STATUS_UNKNOWN,
};
use crate::api::{ManagedCluster, ManagedClusterAddOn};
use crate::runtime::conditions::{set_conditions, set_conditions_from, set_conditions_once_from};
use crate::runtime::error::{KubeError, is_conflict};
use crate::runtime::watch::BackingOff;

/// What the expiry loop shares between reconciles: the cluster leases, kept by watch.
struct ExpiryContext {
    hub: Arc<Context>,
    leases: Store<Lease>,
    /// Whether the leases have been listed. Not `Store::wait_until_ready`: its future keeps the
    /// waker of only the last reconcile to poll it, so of several reconciles waiting for the first
    /// list all but one would wait forever (and that cluster would never expire).
    leases_listed: tokio::sync::watch::Receiver<bool>,
    /// Whether ManagedClusterAddOns exist on this hub (their CRD is installed).
    addons: bool,
}

/// Runs the loop; `addons`, the loop's share of the hub loops' watch of the
/// ManagedClusterAddOns, is there when their CRD is installed (without it, clusters still
/// expire and only the addon step is skipped).
pub(crate) async fn run(
    ctx: Arc<Context>,
    cluster_cache: cache::ClusterLoop,
    addons: Option<cache::AddonLoop>,
    shutdown: CancellationToken,
) {
    let errors = ctx.error_policy("lease expiry loop");
    let (leases, writer) = reflector::store::<Lease>();
    let (listed, leases_listed) = tokio::sync::watch::channel(false);
    let lease_config =
        watcher::Config::default().fields(&format!("metadata.name={CLUSTER_LEASE_NAME}"));
    let lease_events = reflector::reflector(
        writer,
        watcher(Api::<Lease>::all(ctx.client.clone()), lease_config)
            .modify(cache::lease_as_renewed),
    )
    .inspect(move |event| {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            listed.send_replace(true);
        }
    })
    .backing_off()
    .touched_objects();
    let expiry = Arc::new(ExpiryContext {
        hub: ctx,
        leases,
        leases_listed,
        addons: addons.is_some(),
    });
    let controller =
        Controller::for_stream(cluster_cache.events.applied_objects(), cluster_cache.store)
            .watches_stream(lease_events, |lease: Lease| {
                lease
                    .namespace()
                    .map(|namespace| ObjectRef::<ManagedCluster>::new(&namespace))
            });
    let controller = match addons {
        Some(addons) => controller.watches_stream(addons.events.touched_objects(), |addon| {
            addon
                .namespace()
                .map(|namespace| ObjectRef::<ManagedCluster>::new(&namespace))
        }),
        None => controller,
    };
    errors.drive(controller, reconcile, expiry, shutdown).await;
}

#[instrument(skip(ctx, cluster), fields(cluster = cluster.name_any()))]
async fn reconcile(
    cluster: Arc<ManagedCluster>,
    ctx: Arc<ExpiryContext>,
) -> Result<Action, HubError> {
    let name = cluster.name_any();
    let clusters: Api<ManagedCluster> = Api::all(ctx.hub.client.clone());
    // Judging before the leases are listed would take every cluster for one without a lease.
    if ctx
        .leases_listed
        .clone()
        .wait_for(|listed| *listed)
        .await
        .is_err()
    {
        return Ok(Action::await_change());
    }
    let lease = ctx
        .leases
        .get(&ObjectRef::new(CLUSTER_LEASE_NAME).within(&name));
    let now = Timestamp::now();
    let mut verdict = judge_cluster_lease(&cluster, lease.as_deref(), now);
    let mut cluster = (*cluster).clone();
    if let LeaseVerdict::Expired { deadline, unknown } = &verdict.clone() {
        // The store may lag a renewal that just happened: read the lease itself before writing.
        let leases: Api<Lease> = Api::namespaced(ctx.hub.client.clone(), &name);
        let lease = leases
            .get_opt(CLUSTER_LEASE_NAME)
            .await
            .map_err(KubeError::on(
                format!("Lease {name}/{CLUSTER_LEASE_NAME}"),
                "read",
            ))?;
        // Written from the watch's copy of the cluster; judged again on a fresh read if another
        // write came first.
        let written = set_conditions_from(
            &clusters,
            &cluster,
            FIELD_MANAGER,
            |fresh| match judge_cluster_lease(fresh, lease.as_ref(), Timestamp::now()) {
                LeaseVerdict::Expired { .. } => vec![unknown.clone()],
                _ => Vec::new(),
            },
            &Default::default(),
        )
        .await
        .map_err(KubeError::on(
            format!("ManagedCluster {name}"),
            "set Available Unknown",
        ))?;
        if let Some(written) = written {
            info!(%deadline, "lease expired: cluster Available is Unknown");
            let lag = Timestamp::now().duration_since(*deadline);
            ctx.hub
                .metrics
                .lease_expired(Duration::try_from(lag).unwrap_or(Duration::ZERO));
            cluster = written;
        } else {
            // The store lagged a renewal: come back at the renewed lease's deadline, not never.
            verdict = judge_cluster_lease(&cluster, lease.as_ref(), now);
        }
    }
    // A write from a copy another write has overtaken (409 Conflict) is not made again from a
    // fresh read: that write's event wakes this cluster's reconcile again, which judges it from
    // that copy (a cluster joining is written by its agent and the reconciler meanwhile).
    let overtaken = |err: &HubError| matches!(err, HubError::Kube(err) if is_conflict(&err.source));
    match reconcile_taints(&clusters, &cluster).await {
        Ok(Some(written)) => cluster = written,
        Ok(None) => {}
        Err(err) if overtaken(&err) => return Ok(Action::await_change()),
        Err(err) => return Err(err),
    }
    if let LeaseVerdict::Fresh { .. } = verdict
        && let Some(renewed) = lease
            .as_ref()
            .and_then(|lease| lease.spec.as_ref()?.renew_time.as_ref().map(|time| time.0))
    {
        match report_clock(&clusters, &cluster, renewed, now).await {
            Ok(()) => {}
            Err(err) if overtaken(&err) => return Ok(Action::await_change()),
            Err(err) => return Err(err),
        }
    }
    if ctx.addons
        && let Some(available) = cluster.condition(CONDITION_AVAILABLE)
        && available.status == STATUS_UNKNOWN
    {
        mark_addons_unknown(&ctx, &name, available).await?;
    }
    let wake_in = verdict
        .wake_at()
        .map(|deadline| Duration::try_from(now.duration_until(deadline)).unwrap_or(Duration::ZERO));
    debug!(?verdict, ?wake_in, "judged the cluster's lease");
    Ok(wake_in.map_or_else(Action::await_change, Action::requeue))
}

/// Sets `ManagedClusterConditionClockSynced` from a renewal seen now, when it changes (OCM's
/// registration hub does the same; placement reads it). Not on a copy that shows the cluster
/// un-accepted: its lease is made at its acceptance, whose write says the clock is synced, and
/// a copy without it is one that write has overtaken (its event wakes this loop again).
async fn report_clock(
    clusters: &Api<ManagedCluster>,
    cluster: &ManagedCluster,
    renewed: Timestamp,
    now: Timestamp,
) -> Result<(), HubError> {
    if !crate::api::is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED) {
        return Ok(());
    }
    let synced = clock_synced(renewed, cluster.lease_duration_seconds(), now);
    let wanted = clock_synced_condition(synced, now);
    if cluster
        .condition(CONDITION_CLOCK_SYNCED)
        .is_some_and(|current| current.status == wanted.status)
    {
        return Ok(());
    }
    let name = cluster.name_any();
    Ok(
        set_conditions_once_from(clusters, cluster, FIELD_MANAGER, |fresh| {
            match fresh.condition(CONDITION_CLOCK_SYNCED) {
                Some(current) if current.status == wanted.status => Vec::new(),
                _ => vec![wanted.clone()],
            }
        })
        .await
        .map(|_| ())
        .map_err(KubeError::on(
            format!("ManagedCluster {name}"),
            "report whether its clock is synced",
        ))?,
    )
}

/// Brings the availability taints in line with the Available condition, if they are not;
/// returns the cluster written.
async fn reconcile_taints(
    clusters: &Api<ManagedCluster>,
    cluster: &ManagedCluster,
) -> Result<Option<ManagedCluster>, HubError> {
    let name = cluster.name_any();
    let Some(taints) =
        reconcile_availability_taints(&cluster.spec.taints, cluster.condition(CONDITION_AVAILABLE))
    else {
        return Ok(None);
    };
    let patch = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"resourceVersion": cluster.resource_version()},
        "spec": {"taints": taints},
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    Ok(clusters
        .patch(&name, &params, &Patch::Merge(&patch))
        .await
        .map(Some)
        .map_err(KubeError::on(
            format!("ManagedCluster {name}"),
            "write availability taints",
        ))?)
}

/// Every addon of an Unknown cluster becomes Unknown with the cluster's reason (seed 001).
async fn mark_addons_unknown(
    ctx: &ExpiryContext,
    cluster: &str,
    available: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition,
) -> Result<(), HubError> {
    let Some(unknown) = addon_unknown_condition(available, Timestamp::now()) else {
        return Ok(());
    };
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(ctx.hub.client.clone(), cluster);
    let listed = addons
        .list(&ListParams::default())
        .await
        .map_err(KubeError::on(
            format!("addons of cluster {cluster}"),
            "list",
        ))?;
    for addon in listed {
        let name = addon.name_any();
        set_conditions(&addons, &name, FIELD_MANAGER, |fresh| {
            match fresh.condition(&unknown.type_) {
                Some(current)
                    if current.status == unknown.status && current.reason == unknown.reason =>
                {
                    Vec::new()
                }
                _ => vec![unknown.clone()],
            }
        })
        .await
        .map_err(KubeError::on(
            format!("ManagedClusterAddOn {cluster}/{name}"),
            "set Available Unknown",
        ))?;
    }
    Ok(())
}
