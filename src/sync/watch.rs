//! What happens on the hub a sync runs on, beyond its FleetSyncs: while this replica leads, it
//! watches the hub's ManagedClusters and Hubs, tells every FleetSync's `spec.notify` of a spoke
//! going from Available to Unknown or False and back and of a rollout halting and resuming, and
//! keeps each FleetSync's `RolloutHalted` condition (and its Events) in line with its hub's.
//!
//! Only changes are news: a status write that leaves the condition as it was sends nothing, and
//! a state seen for the first time in a term (after a restart or a leader change) is remembered,
//! not announced. The FleetSync condition is made right on first sight as well (it is idempotent:
//! a FleetSync that already says so is not written). Deciding is [`Seen`], [`spoke_notice`],
//! [`hub_notice`] and [`super::status::rollout_halted`]; this module must not decide inline.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::notify::{Event as NoticeEvent, Notice, Notifier, Subject};
use super::status::{REASON_ROLLOUT_RESUMED, rollout_halted};
use crate::api::ManagedCluster;
use crate::api::find_condition;
use crate::api::fleet::{FleetSync, Hub, SYSTEM_NAMESPACE};
use crate::api::vocabulary::{CONDITION_AVAILABLE, CONDITION_ROLLOUT_HALTED, STATUS_TRUE};
use crate::events::{self, EventType, Reporter};
use crate::runtime::watch::BackingOff;

/// Field manager of the FleetSync's `RolloutHalted` condition.
pub const ROLLOUT_FIELD_MANAGER: &str = "fleetform-sync-rollout";

/// Which kinds are watched (those whose CRD is installed).
#[derive(Clone, Copy, Debug)]
pub struct Watched {
    pub managed_clusters: bool,
    pub hubs: bool,
}

/// What the watches of one term share.
pub struct HubWatch {
    pub client: Client,
    /// Namespace of the FleetSyncs.
    pub namespace: String,
    /// The hub's name in the fleet; `None`: the fleet's only hub (every Hub on this cluster).
    pub hub: Option<String>,
    pub notifier: Notifier,
    pub events: Reporter,
}

/// How a state compares with the one remembered.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen<S> {
    /// Not seen before in this term: remembered, not news.
    First,
    Same,
    /// Changed from this state.
    Changed(S),
}

/// The last state seen of each object of one kind.
#[derive(Debug)]
pub struct States<S> {
    states: HashMap<String, S>,
}

impl<S> Default for States<S> {
    fn default() -> Self {
        States {
            states: HashMap::new(),
        }
    }
}

impl<S: PartialEq> States<S> {
    /// Remembers `state` of `name` and says how it compares with the one before.
    pub fn observe(&mut self, name: &str, state: S) -> Seen<S> {
        match self.states.insert(name.to_string(), state) {
            None => Seen::First,
            Some(before) if Some(&before) == self.states.get(name) => Seen::Same,
            Some(before) => Seen::Changed(before),
        }
    }

    pub fn forget(&mut self, name: &str) {
        self.states.remove(name);
    }
}

/// The notice of spoke `name`'s Available condition turning from `before` (its status) to
/// `after`; `was_available`: it was seen Available before (a spoke that joins while the hub is
/// busy can be marked Unknown before its first renewal, and is not Available "again").
pub fn spoke_notice(name: &str, before: &str, after: &Condition, was_available: bool) -> Notice {
    let (event, message) = if after.status == STATUS_TRUE {
        let again = if was_available { " again" } else { "" };
        (
            NoticeEvent::SpokeAvailable,
            format!("spoke {name} is Available{again} (it was {before})"),
        )
    } else {
        let mut message = format!(
            "spoke {name} is not Available: {CONDITION_AVAILABLE} is {} ({})",
            after.status, after.reason
        );
        if !after.message.is_empty() {
            message.push_str(": ");
            message.push_str(&after.message);
        }
        (NoticeEvent::SpokeUnavailable, message)
    };
    Notice {
        event,
        subject: Subject::Spoke(name.to_string()),
        reason: after.reason.clone(),
        commit: None,
        message,
    }
}

/// The notice of hub `name`'s rollout halting (`halted`: the Hub condition's message) or
/// resuming (`None`).
pub fn hub_notice(name: &str, halted: Option<&str>) -> Notice {
    let (event, reason, message) = match halted {
        Some(halted) => (
            NoticeEvent::RolloutHalted,
            CONDITION_ROLLOUT_HALTED,
            format!("hub {name}'s rollout halted: {halted}"),
        ),
        None => (
            NoticeEvent::RolloutResumed,
            REASON_ROLLOUT_RESUMED,
            format!("hub {name}'s rollout is no longer halted"),
        ),
    };
    Notice {
        event,
        subject: Subject::Hub(name.to_string()),
        reason: reason.to_string(),
        commit: None,
        message,
    }
}

/// A ManagedCluster's Available condition; `None` before anyone set it.
fn available(cluster: &ManagedCluster) -> Option<&Condition> {
    let status = cluster.status.as_ref()?;
    find_condition(&status.conditions, CONDITION_AVAILABLE)
}

/// A Hub's halt: the `RolloutHalted` condition's message while it is True.
fn halted(hub: &Hub) -> Option<String> {
    let status = hub.status.as_ref()?;
    find_condition(&status.conditions, CONDITION_ROLLOUT_HALTED)
        .filter(|condition| condition.status == STATUS_TRUE)
        .map(|condition| condition.message.clone())
}

enum Change {
    Cluster(Box<watcher::Event<ManagedCluster>>),
    Hub(Box<watcher::Event<Hub>>),
}

/// Watches until `stop` is cancelled (the end of the term); says on `listed` when each watch has
/// listed what is there (from then on it misses no change).
pub async fn run(
    watch: HubWatch,
    watched: Watched,
    listed: oneshot::Sender<()>,
    stop: CancellationToken,
) {
    let clusters = watched.managed_clusters.then(|| {
        watcher(
            Api::<ManagedCluster>::all(watch.client.clone()),
            watcher::Config::default().page_size(crate::runtime::watch::LIST_PAGE),
        )
        .backing_off()
        .map_ok(|event| Change::Cluster(Box::new(event)))
        .boxed()
    });
    let hubs = watched.hubs.then(|| {
        watcher(
            Api::<Hub>::namespaced(watch.client.clone(), SYSTEM_NAMESPACE),
            watcher::Config::default(),
        )
        .backing_off()
        .map_ok(|event| Change::Hub(Box::new(event)))
        .boxed()
    });
    let streams: Vec<_> = clusters.into_iter().chain(hubs).collect();
    let mut unlisted = streams.len();
    let mut listed = Some(listed);
    let mut changes = futures::stream::select_all(streams);
    let mut spokes: States<String> = States::default();
    // The spokes seen Available in this term.
    let mut available_before: std::collections::HashSet<String> = Default::default();
    let mut rollouts: States<Option<String>> = States::default();
    loop {
        if unlisted == 0
            && let Some(listed) = listed.take()
        {
            let _ = listed.send(());
        }
        let change = tokio::select! {
            _ = stop.cancelled() => return,
            change = changes.next() => change,
        };
        let init_done = match &change {
            Some(Ok(Change::Cluster(event))) => matches!(**event, watcher::Event::InitDone),
            Some(Ok(Change::Hub(event))) => matches!(**event, watcher::Event::InitDone),
            _ => false,
        };
        if init_done {
            unlisted = unlisted.saturating_sub(1);
        }
        match change {
            None => return,
            Some(Err(err)) => warn!(%err, "watching the hub's spokes and rollouts"),
            Some(Ok(Change::Cluster(event))) => match *event {
                watcher::Event::Apply(cluster) | watcher::Event::InitApply(cluster) => {
                    let name = cluster.name_any();
                    let Some(condition) = available(&cluster) else {
                        continue;
                    };
                    if let Seen::Changed(before) = spokes.observe(&name, condition.status.clone()) {
                        let was_available = available_before.contains(&name);
                        let notice = spoke_notice(&name, &before, condition, was_available);
                        info!(spoke = name, "{}", notice.message);
                        watch.notify(notice).await;
                    }
                    if condition.status == STATUS_TRUE {
                        available_before.insert(name);
                    }
                }
                watcher::Event::Delete(cluster) => {
                    let name = cluster.name_any();
                    spokes.forget(&name);
                    available_before.remove(&name);
                }
                watcher::Event::Init | watcher::Event::InitDone => {}
            },
            Some(Ok(Change::Hub(event))) => match *event {
                watcher::Event::Apply(hub) | watcher::Event::InitApply(hub) => {
                    let name = hub.name_any();
                    if watch.hub.as_ref().is_some_and(|ours| *ours != name) {
                        continue;
                    }
                    let halted = halted(&hub);
                    match rollouts.observe(&name, halted.clone()) {
                        Seen::Same => {}
                        Seen::First => watch.show_on_fleetsyncs(&name, halted.as_deref()).await,
                        Seen::Changed(_) => {
                            let notice = hub_notice(&name, halted.as_deref());
                            info!(hub = name, "{}", notice.message);
                            watch.show_on_fleetsyncs(&name, halted.as_deref()).await;
                            watch.notify(notice).await;
                        }
                    }
                }
                watcher::Event::Delete(hub) => rollouts.forget(&hub.name_any()),
                watcher::Event::Init | watcher::Event::InitDone => {}
            },
        }
    }
}

impl HubWatch {
    async fn fleetsyncs(&self) -> Vec<FleetSync> {
        match Api::<FleetSync>::namespaced(self.client.clone(), &self.namespace)
            .list(&Default::default())
            .await
        {
            Ok(list) => list.items,
            Err(err) => {
                warn!(%err, "cannot list the FleetSyncs to tell of a change on the hub");
                Vec::new()
            }
        }
    }

    /// Tells every FleetSync's providers (every FleetSync here manages this hub).
    async fn notify(&self, notice: Notice) {
        for fleetsync in self.fleetsyncs().await {
            self.notifier.notify(&fleetsync, notice.clone());
        }
    }

    /// Sets each FleetSync's `RolloutHalted` to hub `hub`'s halt, with an Event where it changes.
    async fn show_on_fleetsyncs(&self, hub: &str, halted: Option<&str>) {
        for fleetsync in self.fleetsyncs().await {
            let current = fleetsync.status.clone().unwrap_or_default();
            let Some(condition) = rollout_halted(
                &current,
                hub,
                halted,
                fleetsync.metadata.generation,
                Time(Timestamp::now()),
            ) else {
                continue;
            };
            let name = fleetsync.name_any();
            let was = find_condition(&current.conditions, CONDITION_ROLLOUT_HALTED)
                .map(|c| c.status.clone());
            // The Event first: whoever sees the condition can find its Event too.
            if was.as_deref() != Some(condition.status.as_str()) {
                let (kind, reason) = if condition.status == STATUS_TRUE {
                    (EventType::Warning, CONDITION_ROLLOUT_HALTED)
                } else {
                    (EventType::Normal, REASON_ROLLOUT_RESUMED)
                };
                self.events
                    .publish_written(
                        &events::reference(&fleetsync),
                        kind,
                        reason,
                        "Rollout",
                        condition.message.clone(),
                    )
                    .await;
            }
            let patch = json!({
                "apiVersion": FleetSync::api_version(&()),
                "kind": FleetSync::kind(&()),
                "status": {"conditions": [condition]},
            });
            let api: Api<FleetSync> = Api::namespaced(
                self.client.clone(),
                fleetsync.namespace().as_deref().unwrap_or(&self.namespace),
            );
            if let Err(err) = api
                .patch_status(
                    &name,
                    &PatchParams::apply(ROLLOUT_FIELD_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await
            {
                warn!(%err, fleetsync = name, "cannot write RolloutHalted");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(status: &str, reason: &str) -> Condition {
        Condition {
            type_: CONDITION_AVAILABLE.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::now()),
        }
    }

    #[test]
    fn a_state_seen_first_is_remembered_and_only_a_change_is_news() {
        let mut spokes = States::default();
        assert_eq!(spokes.observe("edge", "True".to_string()), Seen::First);
        assert_eq!(spokes.observe("edge", "True".to_string()), Seen::Same);
        assert_eq!(
            spokes.observe("edge", "Unknown".to_string()),
            Seen::Changed("True".to_string())
        );
        spokes.forget("edge");
        assert_eq!(spokes.observe("edge", "True".to_string()), Seen::First);
    }

    #[test]
    fn a_spoke_going_unknown_and_back_is_two_notices_of_that_spoke() {
        let gone = spoke_notice(
            "edge",
            "True",
            &condition("Unknown", "ManagedClusterLeaseUpdateStopped"),
            true,
        );
        assert_eq!(gone.event, NoticeEvent::SpokeUnavailable);
        assert_eq!(gone.subject, Subject::Spoke("edge".to_string()));
        assert!(
            gone.message
                .contains("Unknown (ManagedClusterLeaseUpdateStopped)")
        );
        let back = spoke_notice(
            "edge",
            "Unknown",
            &condition("True", "ManagedClusterAvailable"),
            true,
        );
        assert_eq!(back.event, NoticeEvent::SpokeAvailable);
        assert_eq!(
            back.message,
            "spoke edge is Available again (it was Unknown)"
        );
        // Marked Unknown while joining, before its first renewal: Available, not "again".
        let first = spoke_notice(
            "edge",
            "Unknown",
            &condition("True", "ManagedClusterAvailable"),
            false,
        );
        assert_eq!(first.event, NoticeEvent::SpokeAvailable);
        assert_eq!(first.message, "spoke edge is Available (it was Unknown)");
    }
}
