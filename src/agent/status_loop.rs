//! The agent's status loop (seed 003, DESIGN §4.4): the spoke's ClusterClaims, version, capacity
//! and allocatable in its ManagedCluster's status, and its node health in the ManagedCluster's
//! annotation [`ANNOTATION_NODE_HEALTH`] (an OCM CRD prunes status fields OCM does not define).
//!
//! ClusterClaims and Nodes are watched on the spoke; every change recomputes the status with
//! [`select_claims`] and [`summarize_nodes`] and, once the cluster has joined, writes the status by
//! server-side apply and the annotation by merge patch, each if it differs from what was last
//! written, so a changed claim reaches the hub as soon as the watch delivers it. Claims cut by `clusterClaimsMax` are announced once per
//! change of the cut set by an Event on the hub, in the cluster namespace.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, ObjectReference};
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Resource};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{instrument, warn};

use super::claims::{ClaimSelection, select_claims, summarize_nodes};
use super::run::{AgentError, Context, FIELD_MANAGER};
use crate::api::cluster::NodeHealth;
use crate::api::vocabulary::ANNOTATION_NODE_HEALTH;
use crate::api::{ClusterClaim, ManagedCluster};
use crate::runtime::crd::{Presence, presence};
use crate::runtime::error::KubeError;
use crate::runtime::retry::SaidOnce;
use crate::runtime::watch::backing_off;

/// Reason of the Event that says which claims were cut.
pub const REASON_CLAIMS_TRUNCATED: &str = "ClusterClaimsTruncated";

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let (claims, claims_writer) = reflector::store::<ClusterClaim>();
    let (nodes, nodes_writer) = reflector::store::<Node>();
    let claims_installed = match presence::<ClusterClaim>(&ctx.spoke).await {
        Presence::Installed => true,
        Presence::Missing => {
            warn!(
                cluster = ctx.name(),
                "the ClusterClaim CRD is not installed on the spoke; its cluster claims are not reported"
            );
            false
        }
        Presence::Unknown(err) => {
            warn!(cluster = ctx.name(), %err, "cannot check the ClusterClaim CRD on the spoke; its cluster claims are not reported");
            false
        }
    };
    // A listing refused (the agent's rights on the spoke edited) pauses ever longer and is said
    // once, not retried and warned about every second.
    let mut claim_events = if claims_installed {
        backing_off(reflector::reflector(
            claims_writer,
            watcher(Api::all(ctx.spoke.clone()), watcher::Config::default()),
        ))
        .boxed()
    } else {
        futures::stream::pending().boxed()
    };
    let mut node_events = backing_off(reflector::reflector(
        nodes_writer,
        watcher(Api::all(ctx.spoke.clone()), watcher::Config::default()),
    ))
    .boxed();
    let mut watching_claims = SaidOnce::new("watching ClusterClaims", ctx.name());
    let mut watching_nodes = SaidOnce::new("watching Nodes", ctx.name());
    let mut reading_version = SaidOnce::new("reading the spoke's version", ctx.name());
    let mut cluster_rx = ctx.cluster.clone();
    let mut server_version: Option<String> = None;
    let mut written: Option<Value> = None;
    let mut written_health: Option<NodeHealth> = None;
    let mut writing_status = SaidOnce::new("writing the cluster status", ctx.name());
    let mut writing_health = SaidOnce::new("writing the node health", ctx.name());
    let mut announced_cut: Vec<String> = Vec::new();
    let (mut claims_ready, mut nodes_ready) = (!claims_installed, false);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            event = claim_events.next() => match event {
                None => return,
                Some(Ok(event)) => {
                    watching_claims.succeeded();
                    claims_ready |= matches!(event, watcher::Event::InitDone);
                }
                Some(Err(err)) => watching_claims.failed(&err),
            },
            event = node_events.next() => match event {
                None => return,
                Some(Ok(event)) => {
                    watching_nodes.succeeded();
                    nodes_ready |= matches!(event, watcher::Event::InitDone);
                }
                Some(Err(err)) => watching_nodes.failed(&err),
            },
            changed = cluster_rx.changed() => if changed.is_err() { return },
        }
        let joined = cluster_rx
            .borrow()
            .as_ref()
            .is_some_and(ManagedCluster::is_joined);
        if !(claims_ready && nodes_ready && joined) {
            continue;
        }
        if server_version.is_none() {
            match ctx.spoke.apiserver_version().await {
                Ok(info) => {
                    reading_version.succeeded();
                    server_version = Some(info.git_version);
                }
                Err(err) => reading_version.failed(&err),
            }
        }
        let (status, health, selection) =
            desired_status(&ctx, &claims, &nodes, server_version.as_deref());
        if written.as_ref() != Some(&status) {
            match write_status(&ctx, &status).await {
                Ok(()) => {
                    writing_status.succeeded();
                    written = Some(status);
                }
                Err(err) => writing_status.failed(&err),
            }
        }
        if written_health != Some(health) {
            match write_node_health(&ctx, &health).await {
                Ok(()) => {
                    writing_health.succeeded();
                    written_health = Some(health);
                }
                Err(err) => writing_health.failed(&err),
            }
        }
        if selection.cut != announced_cut {
            if let Some(note) = selection.cut_note(ctx.config.cluster_claims_max)
                && let Err(err) = announce_cut(&ctx, note).await
            {
                warn!(%err, "announcing cut claims");
            }
            announced_cut = selection.cut;
        }
    }
}

/// The agent's part of the ManagedCluster's status, as an apply patch body, and the node health.
fn desired_status(
    ctx: &Context,
    claims: &Store<ClusterClaim>,
    nodes: &Store<Node>,
    server_version: Option<&str>,
) -> (Value, NodeHealth, ClaimSelection) {
    let claims: Vec<ClusterClaim> = claims.state().iter().map(|c| (**c).clone()).collect();
    let nodes: Vec<Node> = nodes.state().iter().map(|n| (**n).clone()).collect();
    let selection = select_claims(&claims, ctx.config.cluster_claims_max);
    let summary = summarize_nodes(server_version, &nodes);
    for unreadable in &summary.unreadable {
        warn!(
            quantity = unreadable,
            "node quantity cannot be read; left out of the sums"
        );
    }
    let status = json!({
        "apiVersion": ManagedCluster::api_version(&()),
        "kind": ManagedCluster::kind(&()),
        "status": {
            "version": summary.version,
            "capacity": summary.capacity,
            "allocatable": summary.allocatable,
            "clusterClaims": selection.reported,
        },
    });
    (status, summary.health, selection)
}

#[instrument(skip(ctx, status), fields(cluster = ctx.name()))]
async fn write_status(ctx: &Context, status: &Value) -> Result<(), AgentError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Ok(ctx
        .clusters()
        .patch_status(ctx.name(), &params, &Patch::Apply(status))
        .await
        .map(|_| ())
        .map_err(KubeError::on(
            format!("cluster {}", ctx.name()),
            "write its status",
        ))?)
}

/// Sets the ManagedCluster's node health annotation. A merge patch of the one key, so other
/// annotations and their owners are left alone.
#[instrument(skip(ctx), fields(cluster = ctx.name()))]
async fn write_node_health(ctx: &Context, health: &NodeHealth) -> Result<(), AgentError> {
    let patch = json!({"metadata": {"annotations": {
        ANNOTATION_NODE_HEALTH: health.to_annotation(),
    }}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    Ok(ctx
        .clusters()
        .patch(ctx.name(), &params, &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(KubeError::on(
            format!("cluster {}", ctx.name()),
            "write its node health",
        ))?)
}

/// An Event on the hub, about the ManagedCluster, saying which claims were cut.
#[instrument(skip(ctx), fields(cluster = ctx.name()))]
async fn announce_cut(ctx: &Context, note: String) -> Result<(), AgentError> {
    let about = ObjectReference {
        api_version: Some(ManagedCluster::api_version(&()).to_string()),
        kind: Some(ManagedCluster::kind(&()).to_string()),
        name: Some(ctx.name().to_string()),
        ..ObjectReference::default()
    };
    let event =
        super::run::warning_event(ctx.name(), about, REASON_CLAIMS_TRUNCATED, note, ctx.name());
    let events: Api<Event> = Api::namespaced(ctx.hub.clone(), ctx.name());
    Ok(crate::events::create(&events, ctx.name(), event)
        .await
        .map(|_| ())
        .map_err(KubeError::on(
            format!("cluster {}", ctx.name()),
            "create an Event about cut claims",
        ))?)
}
