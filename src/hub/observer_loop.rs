//! The hub's observer loop for poll-mode spokes (seed 002, DESIGN §4.5).
//!
//! The Spokes in `fleetform-system` are watched; [`observer_lifecycle`] decides, for each change,
//! whether the spoke's observer starts, restarts, stops or is left alone. An observer is a task
//! that polls the spoke's API (its node list) when [`Observer`] says to, feeds the outcome to it,
//! and writes the state to the Spoke's status whenever it changes: condition [`CONDITION_ONLINE`],
//! True only when ONLINE, with Krake's state name as its reason and the node health rows and the
//! last poll error as its message.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument, warn};

use super::observer::{
    ClusterState, Observer, ObserverEvent, ObserverLifecycle, PollOutcome, PollPolicy,
    observer_lifecycle,
};
use super::run::{Context, FIELD_MANAGER, HubError};
use crate::api::cluster::NodeHealth;
use crate::api::fleet::{SYSTEM_NAMESPACE, Spoke, SpokeSpec};
pub use crate::api::vocabulary::CONDITION_ONLINE;
use crate::api::vocabulary::{STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN};
use crate::runtime::clock::sleep_until;
use crate::runtime::conditions::set_conditions;
use crate::runtime::error::KubeError;
use crate::runtime::task_set::TaskSet;
use crate::runtime::watch::{Change, Share, changes};

/// The longest a poll may take; a slower spoke counts as unreachable.
const MAX_POLL_TIME: Duration = Duration::from_secs(10);

/// Runs an observer for each Spoke `spokes` (the loop's share of a watch of them) shows, until
/// `shutdown`.
pub(crate) async fn run(ctx: Arc<Context>, spokes: Share<Spoke>, shutdown: CancellationToken) {
    let mut changes = changes(spokes.events)
        .take_until(shutdown.clone().cancelled_owned())
        .boxed();
    // Each observer runs with the spec it was started with.
    let mut observers = TaskSet::new("observer");
    while let Some(change) = changes.next().await {
        match change {
            Err(err) => warn!(%err, "watching Spokes"),
            Ok(Change::Applied(spoke)) => {
                follow(&ctx, &mut observers, spoke.name_any(), Some(spoke)).await;
            }
            Ok(Change::Deleted(spoke)) => follow(&ctx, &mut observers, spoke.name, None).await,
        }
    }
    observers.shutdown().await;
}

/// Applies seed 002's lifecycle table to one spoke change (`None`: the spoke is gone).
async fn follow(
    ctx: &Arc<Context>,
    observers: &mut TaskSet<String, SpokeSpec>,
    name: String,
    spoke: Option<Spoke>,
) {
    let lifecycle = observer_lifecycle(
        observers.spec(&name),
        spoke.as_ref().map(|spoke| &spoke.spec),
    );
    match (lifecycle, spoke) {
        (ObserverLifecycle::Start | ObserverLifecycle::Restart, Some(spoke)) => {
            let (ctx, spec) = (ctx.clone(), spoke.spec.clone());
            observers
                .start(name.clone(), spec, |stop| observe(ctx, spoke, stop))
                .await;
            info!(spoke = name, ?lifecycle, "observer started");
        }
        (ObserverLifecycle::Stop, _) => {
            observers.stop(&name).await;
            info!(spoke = name, "observer stopped");
        }
        _ => {}
    }
}

/// One spoke's observer: poll, judge, write changes, until stopped.
async fn observe(ctx: Arc<Context>, spoke: Spoke, stop: CancellationToken) {
    let name = spoke.name_any();
    let mut observer = Observer::start(
        PollPolicy::from_spec(&spoke.spec.availability),
        Timestamp::now(),
    );
    let mut health = NodeHealth::default();
    if let Err(err) = write_state(&ctx, &name, &observer, &health).await {
        warn!(%err, "writing the observed state");
    }
    let mut client: Option<Client> = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = sleep_until(observer.next_poll) => {}
        }
        let outcome = tokio::select! {
            _ = stop.cancelled() => return,
            outcome = poll(&ctx, &spoke, &mut client) => outcome,
        };
        if let PollOutcome::Reachable(nodes) = &outcome {
            health = *nodes;
        }
        let step = observer.on_event(ObserverEvent::Polled(outcome), Timestamp::now());
        if step.changed_to.is_some()
            && let Err(err) = write_state(&ctx, &name, &observer, &health).await
        {
            warn!(%err, "writing the observed state");
        }
    }
}

/// Polls the spoke's node list. The client is built on first use and rebuilt after a failure,
/// so a spoke whose kubeconfig appears later is picked up.
#[instrument(skip(ctx, spoke, client), fields(spoke = spoke.name_any()))]
async fn poll(ctx: &Context, spoke: &Spoke, client: &mut Option<Client>) -> PollOutcome {
    let spoke_client = match client {
        Some(client) => client.clone(),
        None => match ctx.access.spoke(spoke, &ctx.client).await {
            Ok(built) => {
                *client = Some(built.clone());
                built
            }
            Err(err) => {
                return PollOutcome::Unreachable {
                    error: err.to_string(),
                };
            }
        },
    };
    let nodes: Api<Node> = Api::all(spoke_client);
    match tokio::time::timeout(MAX_POLL_TIME, nodes.list(&ListParams::default())).await {
        Ok(Ok(list)) => PollOutcome::Reachable(NodeHealth::from_nodes(&list.items)),
        Ok(Err(err)) => {
            *client = None;
            PollOutcome::Unreachable {
                error: err.to_string(),
            }
        }
        Err(_) => {
            *client = None;
            PollOutcome::Unreachable {
                error: format!("no answer within {MAX_POLL_TIME:?}"),
            }
        }
    }
}

/// The Spoke condition for an observer's state.
pub fn online_condition(observer: &Observer, health: &NodeHealth, now: Timestamp) -> Condition {
    let status = match observer.state {
        ClusterState::Online => STATUS_TRUE,
        ClusterState::Pending | ClusterState::Connecting => STATUS_UNKNOWN,
        _ => STATUS_FALSE,
    };
    let mut message = health
        .rows()
        .iter()
        .map(|(row, value)| format!("{row} {value}"))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(error) = &observer.last_error {
        message = format!("{message}; last poll failed: {error}");
    }
    Condition {
        type_: CONDITION_ONLINE.to_string(),
        status: status.to_string(),
        reason: observer.state.as_str().to_string(),
        message,
        observed_generation: None,
        last_transition_time: Time(now),
    }
}

async fn write_state(
    ctx: &Context,
    name: &str,
    observer: &Observer,
    health: &NodeHealth,
) -> Result<(), HubError> {
    let condition = online_condition(observer, health, Timestamp::now());
    let spokes: Api<Spoke> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    Ok(
        set_conditions(&spokes, name, FIELD_MANAGER, |_| vec![condition.clone()])
            .await
            .map(|_| ())
            .map_err(KubeError::on(
                format!("Spoke {SYSTEM_NAMESPACE}/{name}"),
                "write the observed state",
            ))?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observer_in(state: ClusterState, last_error: Option<&str>) -> Observer {
        Observer {
            state,
            last_error: last_error.map(str::to_string),
            ..Observer::start(
                PollPolicy::from_spec(&Default::default()),
                Timestamp::UNIX_EPOCH,
            )
        }
    }

    #[test]
    fn online_condition_is_true_only_when_online_with_krakes_name_as_reason() {
        let health = NodeHealth {
            total: 3,
            ready: 3,
            ..NodeHealth::default()
        };
        let online = online_condition(
            &observer_in(ClusterState::Online, None),
            &health,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            (
                online.type_.as_str(),
                online.status.as_str(),
                online.reason.as_str()
            ),
            (CONDITION_ONLINE, STATUS_TRUE, "ONLINE")
        );
        assert_eq!(
            online.message,
            "nodes 3/3, nodes_pid_pressure 0/3, nodes_memory_pressure 0/3, nodes_disk_pressure 0/3"
        );
        for (state, status) in [
            (ClusterState::Pending, STATUS_UNKNOWN),
            (ClusterState::Connecting, STATUS_UNKNOWN),
            (ClusterState::Degraded, STATUS_FALSE),
            (ClusterState::Offline, STATUS_FALSE),
            (ClusterState::Unhealthy, STATUS_FALSE),
            (ClusterState::NotReady, STATUS_FALSE),
            (ClusterState::FailingMetrics, STATUS_FALSE),
        ] {
            let condition =
                online_condition(&observer_in(state, None), &health, Timestamp::UNIX_EPOCH);
            assert_eq!(condition.status, status, "{state}");
            assert_eq!(condition.reason, state.as_str());
        }
    }

    #[test]
    fn online_condition_says_why_the_last_poll_failed() {
        let condition = online_condition(
            &observer_in(ClusterState::Degraded, Some("connection refused")),
            &NodeHealth::default(),
            Timestamp::UNIX_EPOCH,
        );
        assert!(
            condition
                .message
                .ends_with("last poll failed: connection refused"),
            "{}",
            condition.message
        );
    }
}
