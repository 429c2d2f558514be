//! The agent's lease and availability loop (seed 000, DESIGN §4.2).
//!
//! Once the hub accepts the cluster, the loop renews `managed-cluster-lease` in the cluster
//! namespace every `leaseDurationSeconds` (up to 12.5% early or late, a fresh random draw per
//! renewal, one duration apart on average) and,
//! at each renewal, probes the spoke's `/livez` (`/healthz` where there is none) and the agent's
//! Deployment, writing Available only when [`AvailabilityTracker`] says it changed. It also sets
//! ManagedClusterJoined once the cluster is accepted, in the same write as the first Available,
//! as OCM's agent reports its status in one update. A change of
//! `leaseDurationSeconds` on the ManagedCluster reaches the loop by watch and moves the next
//! renewal at once. When the hub's Available condition differs from what the loop last reported
//! (the hub marked the cluster Unknown while the agent was away), the tracker resumes from the
//! hub's condition, so the next probe rewrites it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument, warn};

use super::availability::{AvailabilityTracker, Probe, next_lease_renewal};
use super::run::{AgentError, Context, FIELD_MANAGER, MAX_RETRY_DELAY, RETRY_DELAY};
use crate::api::ManagedCluster;
use crate::api::vocabulary::{
    CLUSTER_LEASE_NAME, CONDITION_AVAILABLE, CONDITION_HUB_ACCEPTED, CONDITION_JOINED,
    LABEL_CLUSTER_NAME, REASON_JOINED, STATUS_TRUE,
};
use crate::reconciler::install::{LABEL_AGENT_CONFIG_HASH, LABEL_AGENT_VERSION};
use crate::runtime::clock::{after, sleep_until};
use crate::runtime::conditions::set_conditions;
use crate::runtime::error::KubeError;
use crate::runtime::error::is_not_found;
use crate::runtime::retry::Retry;

/// How long one probe may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let mut cluster_rx = ctx.cluster.clone();
    let mut tracker = AvailabilityTracker::new(ctx.config.failure_grace);
    let mut reported: Option<Condition> = None;
    let mut last_renewal: Option<Timestamp> = None;
    let mut jitter = fastrand::f64();
    let mut recheck_at: Option<Timestamp> = None;
    let mut renewing = Retry::new(
        "renewing the cluster lease",
        ctx.name(),
        RETRY_DELAY,
        MAX_RETRY_DELAY,
    );
    let mut reporting = Retry::new(
        "writing Joined and Available",
        ctx.name(),
        RETRY_DELAY,
        MAX_RETRY_DELAY,
    );
    loop {
        let cluster = cluster_rx.borrow_and_update().clone();
        let accepted = cluster.as_ref().is_some_and(|cluster| {
            cluster.hub_accepts_client()
                && crate::api::is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED)
        });
        let mut wake: Option<Timestamp> = None;
        if let (true, Some(cluster)) = (accepted, cluster.as_ref()) {
            let on_hub = cluster.condition(CONDITION_AVAILABLE);
            if !same_condition(on_hub, reported.as_ref()) {
                tracker = AvailabilityTracker::resuming(ctx.config.failure_grace, on_hub);
                reported = on_hub.cloned();
                recheck_at = Some(Timestamp::now());
            }
            let duration = cluster.lease_duration_seconds();
            let now = Timestamp::now();
            let due = last_renewal.map_or(now, |last| next_lease_renewal(last, duration, jitter));
            if now >= due {
                match renew_lease(&ctx, duration).await {
                    Ok(()) => {
                        renewing.succeeded();
                        last_renewal = Some(now);
                        jitter = fastrand::f64();
                        recheck_at = Some(now);
                    }
                    Err(err) => {
                        // No longer than a lease apart, so the cluster is Available again soon
                        // after the hub takes renewals again.
                        let lease = Duration::from_secs(u64::try_from(duration).unwrap_or(1));
                        last_renewal = None;
                        wake = Some(after(now, renewing.failed(&err).min(lease)));
                    }
                }
            }
            // Not joined yet (accepted, or created again under this agent): the join is written
            // with the availability of the first probe, so that the hub sees the cluster joined
            // and how available it is in one write, not two (each a hub pass and a Spoke
            // status write more, and a Spoke shown joined and Unhealthy in between).
            // A failed write waits for its retry (`recheck_at`) like any other.
            let joining = !cluster.is_joined();
            let due = match recheck_at {
                Some(at) => Timestamp::now() >= at,
                None => joining,
            };
            if due {
                let probe = probe(&ctx).await;
                let step = tracker.observe(&probe, Timestamp::now());
                recheck_at = step.recheck_at;
                let written: Vec<Condition> = joining
                    .then(joined_condition)
                    .into_iter()
                    .chain(step.report.clone())
                    .collect();
                if !written.is_empty() {
                    match write_conditions(&ctx, written).await {
                        Ok(()) => {
                            reporting.succeeded();
                            if joining {
                                info!("joined");
                            }
                            if let Some(condition) = step.report {
                                reported = Some(condition);
                            }
                        }
                        Err(err) => {
                            tracker = AvailabilityTracker::resuming(ctx.config.failure_grace, None);
                            recheck_at = Some(after(Timestamp::now(), reporting.failed(&err)));
                        }
                    }
                }
            }
            if let Some(last) = last_renewal {
                let next = next_lease_renewal(last, duration, jitter);
                wake = Some(wake.map_or(next, |wake| wake.min(next)));
            }
            if let Some(at) = recheck_at {
                wake = Some(wake.map_or(at, |wake| wake.min(at)));
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = cluster_rx.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = sleep_until(wake.unwrap_or(Timestamp::MAX)), if wake.is_some() => {}
        }
    }
}

fn same_condition(a: Option<&Condition>, b: Option<&Condition>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.status == b.status && a.reason == b.reason,
        (None, None) => true,
        _ => false,
    }
}

/// Moves the lease's `renewTime` to now, creating the lease if the hub has not. The lease also
/// says which agent renews it (`holderIdentity`: its pod) and its version (annotations, so that
/// a hub without fleetform's Spokes, or a rollout, can tell what runs).
#[instrument(skip(ctx), fields(cluster = ctx.name()))]
async fn renew_lease(ctx: &Context, lease_duration_seconds: i32) -> Result<(), AgentError> {
    let leases: Api<Lease> = Api::namespaced(ctx.hub.clone(), ctx.name());
    let now = MicroTime(Timestamp::now());
    let mut annotations = serde_json::Map::new();
    annotations.insert(LABEL_AGENT_VERSION.into(), json!(ctx.config.version));
    if let Some(hash) = &ctx.config.config_hash {
        annotations.insert(LABEL_AGENT_CONFIG_HASH.into(), json!(hash));
    }
    let patch = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"annotations": annotations},
        "spec": {"holderIdentity": ctx.config.identity, "renewTime": now, "leaseDurationSeconds": lease_duration_seconds},
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    match leases
        .patch(CLUSTER_LEASE_NAME, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(err) if is_not_found(&err) => {
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {
                    "name": CLUSTER_LEASE_NAME,
                    "namespace": ctx.name(),
                    "labels": {LABEL_CLUSTER_NAME: ctx.name()},
                    "annotations": annotations,
                },
                "spec": {"holderIdentity": ctx.config.identity, "renewTime": now, "leaseDurationSeconds": lease_duration_seconds},
            }))
            .map_err(|err| {
                KubeError::on(format!("cluster {}", ctx.name()), "build the cluster lease")(
                    kube::Error::SerdeError(err),
                )
            })?;
            Ok(leases
                .create(&PostParams::default(), &lease)
                .await
                .map(|_| ())
                .map_err(KubeError::on(
                    format!("cluster {}", ctx.name()),
                    "create the cluster lease",
                ))?)
        }
        Err(err) => Err(KubeError::on(
            format!("cluster {}", ctx.name()),
            "renew the cluster lease",
        )(err)
        .into()),
    }
}

/// One round of probes: the spoke's API server and the agent's Deployment.
#[instrument(skip(ctx), fields(cluster = ctx.name()))]
async fn probe(ctx: &Context) -> Probe {
    let api_server_failure = probe_api_server(&ctx.spoke).await;
    let agent_available_replicas = match &ctx.config.deployment {
        None => 1,
        Some(name) => {
            let deployments: Api<Deployment> =
                Api::namespaced(ctx.spoke.clone(), &ctx.config.agent_namespace);
            match tokio::time::timeout(PROBE_TIMEOUT, deployments.get(name)).await {
                Ok(Ok(deployment)) => deployment
                    .status
                    .and_then(|status| status.available_replicas)
                    .unwrap_or(0),
                Ok(Err(err)) => {
                    warn!(%err, deployment = name, "reading the agent's Deployment");
                    0
                }
                Err(_) => 0,
            }
        }
    };
    Probe {
        api_server_failure,
        agent_available_replicas,
    }
}

/// `None` when `/livez` (or, where the server has none, `/healthz`) answers ok.
async fn probe_api_server(spoke: &kube::Client) -> Option<String> {
    let mut failure = None;
    for path in ["/livez", "/healthz"] {
        let request = match http::Request::get(path).body(Vec::new()) {
            Ok(request) => request,
            Err(err) => return Some(err.to_string()),
        };
        match tokio::time::timeout(PROBE_TIMEOUT, spoke.request_text(request)).await {
            Ok(Ok(body)) if body.trim() == "ok" => return None,
            Ok(Ok(body)) => return Some(format!("{path} answered {:?}", body.trim())),
            Ok(Err(err)) if is_not_found(&err) => {
                failure = Some(format!("{path} not found"));
            }
            Ok(Err(err)) => return Some(format!("{path}: {err}")),
            Err(_) => return Some(format!("{path} did not answer within {PROBE_TIMEOUT:?}")),
        }
    }
    failure
}

/// ManagedClusterJoined, as the agent sets it once the hub has accepted its cluster.
fn joined_condition() -> Condition {
    Condition {
        type_: CONDITION_JOINED.to_string(),
        status: STATUS_TRUE.to_string(),
        reason: REASON_JOINED.to_string(),
        message: "Managed cluster joined".to_string(),
        observed_generation: None,
        last_transition_time: Time(Timestamp::now()),
    }
}

/// Writes `conditions` (Joined, Available, or both) onto the cluster's status in one request.
#[instrument(skip(ctx, conditions), fields(cluster = ctx.name()))]
async fn write_conditions(ctx: &Context, conditions: Vec<Condition>) -> Result<(), AgentError> {
    let clusters: Api<ManagedCluster> = ctx.clusters();
    match set_conditions(&clusters, ctx.name(), FIELD_MANAGER, |_| conditions.clone()).await {
        Ok(_) => Ok(()),
        Err(err) => {
            let what = conditions
                .iter()
                .map(|condition| format!("{}={}", condition.type_, condition.status))
                .collect::<Vec<_>>()
                .join(", ");
            let on = KubeError::on(format!("cluster {}", ctx.name()), format!("write {what}"));
            Err(on(err).into())
        }
    }
}
