//! What the hub does next for one Spoke, as a pure function of what is known about it.
//!
//! Day 1 (seed 004 §2): finalizers first, then join (install the agent and its per-spoke
//! bootstrap identity on the spoke), accept (`hubAcceptsClient`), wait for the agent to join,
//! then addons and the ManagedCluster's labels, lease duration and taints. After the agent
//! reports PivotComplete it owns day 2; only a hub-as-spoke is upgraded by the hub.
//!
//! Deletion (seed 004 §4) runs in this order, one step per pass so a crash anywhere resumes at
//! the right place: phase Deleting; the workload-cleanup taint when `forceClusterDrain` is set;
//! refusal while non-addon ManifestWorks are active (CleanupFailed names them); the terminating
//! taint; addons disabled; the preflight finalizer removed (the agent's signal to unjoin); for a
//! hub-as-spoke or a failed pivot the hub unjoins the spoke itself and removes the spoke-cleanup
//! finalizer; once that finalizer is gone, CSRs, ManagedCluster and cluster namespace are
//! removed, and last the hub-cleanup finalizer, once they are gone: a namespace terminates until
//! the namespace controller has emptied it (forever while a finalizer holds something in it),
//! which the pass waits for by watch, looking again ever more rarely, and reports on the Spoke
//! with what holds it ([`Terminating`]).
//!
//! Waiting for an agent to unjoin is bounded (seed 004 lets the hub do the spoke's side when the
//! agent cannot): once the cluster has not been Available for the Spoke's unjoin timeout, or when
//! the Spoke carries the force-unjoin annotation, the hub completes the unjoin itself.
//!
//! After the pivot the agent upgrades itself, but a Deployment that is gone or was edited, the
//! RBAC of its election, or a bootstrap kubeconfig that no longer reaches the hub, is put back
//! by the hub. And when no agent runs on a spoke the hub still reaches — its Deployment has no
//! ready replica and the cluster has not been Available for the rollout's
//! `progressDeadlineSeconds`, as when an agent released to a new version never came up and left
//! none behind — while the fleet now declares another agent than that Deployment's (a later
//! commit), the hub installs the declared one: no agent is there to take the commit. The agent
//! stays in charge whenever it runs.
//!
//! Pure here too, around the decision: the agent's facts from what the hub read on the spoke
//! ([`agent_facts`]), the Spoke's conditions after a pass ([`conditions`]), when it is looked at
//! again ([`Decision::look_again_after`]), and what the hub's own unjoin of a spoke's side comes
//! to ([`unjoin_outcome`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::fleet::Phase;
use crate::api::vocabulary::{
    ANNOTATION_FORCE_UNJOIN, CONDITION_ADDONS_CONFIGURED, CONDITION_CLEANUP_FAILED,
    CONDITION_RECONCILED, CONDITION_SPOKE_JOINED, CONDITION_UNJOINED, FINALIZER_HUB_CLEANUP,
    FINALIZER_HUB_CLEANUP_PREFLIGHT, FINALIZER_SPOKE_CLEANUP, REASON_HELD_BY_FINALIZER,
    REASON_HUB_OBJECTS_TERMINATING, REASON_MANIFEST_WORKS_REMAIN, REASON_UNJOINED_BY_HUB,
    REASON_UNJOINING, REASON_WAITING_FOR_AGENT_UNJOIN, STATUS_FALSE, STATUS_TRUE,
    TAINT_TERMINATING, TAINT_WORKLOAD_CLEANUP,
};

/// How long a settled Spoke waits before it is looked at again without a change.
pub const RESYNC: Duration = Duration::from_secs(30);
/// How soon a Spoke that is waiting on something it cannot watch is looked at again.
pub const POLL: Duration = Duration::from_secs(1);

/// Everything the decision needs to know about one Spoke, gathered by the loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The Spoke carries a deletionTimestamp.
    pub deleting: bool,
    /// The Spoke's finalizers.
    pub finalizers: BTreeSet<String>,
    /// The spoke is its hub registered as a spoke (`kubeconfig.inCluster`).
    pub hub_as_spoke: bool,
    /// `cleanup.forceClusterDrain`.
    pub force_cluster_drain: bool,
    /// The agent, its namespace and bootstrap secret are installed on the spoke.
    pub agent_installed: bool,
    /// The agent's ManagedCluster exists on the hub.
    pub cluster_exists: bool,
    /// `hubAcceptsClient` is true on the ManagedCluster.
    pub accepted: bool,
    /// `ManagedClusterJoined` is True.
    pub joined: bool,
    /// The agent reported PivotComplete (it owns day 2 from then on).
    pub pivoted: bool,
    /// `ManagedClusterConditionAvailable` is True.
    pub available: bool,
    /// Taint keys on the ManagedCluster.
    pub taints: BTreeSet<String>,
    /// Addons the Spoke asks for, with their install namespaces.
    pub wanted_addons: BTreeMap<String, String>,
    /// ManagedClusterAddOns fleetform enabled (its mark) in the cluster namespace, with their
    /// install namespaces; those others enabled are not its to disable.
    pub enabled_addons: BTreeMap<String, String>,
    /// Names of active ManifestWorks in the cluster namespace that addons did not create (read
    /// only while the Spoke is deleted: only its cleanup refuses over them).
    pub active_works: Vec<String>,
    /// The ManagedCluster's labels, lease duration and Spoke-set taints differ from the Spoke's.
    pub cluster_spec_drifted: bool,
    /// The agent's running version or configuration hash differs from the Spoke's, and it is
    /// to move (its rollout released it, or no rollout holds it).
    pub agent_outdated: bool,
    /// The agent Deployment on the spoke differs from the one the fleet declares now, whether
    /// the rollout released the spoke to it or not.
    pub agent_superseded: bool,
    /// On the spoke, the agent Deployment is gone or was edited, or the bootstrap kubeconfig does
    /// not reach the hub as it should (its address or CA changed): the hub puts them back.
    pub agent_drifted: bool,
    /// CSRs, ManagedCluster or cluster namespace of the spoke still exist on the hub, and are
    /// not being deleted already (the namespace and CSRs are read only while the Spoke is
    /// deleted: only its cleanup removes them).
    pub hub_leftovers: bool,
    /// The spoke's objects on the hub whose deletion is under way (its namespace terminating).
    pub terminating: Vec<Terminating>,
    /// When the pass runs.
    pub now: Timestamp,
    /// Since when the cluster has not been Available (its condition's last transition), if it
    /// is not.
    pub unavailable_since: Option<Timestamp>,
    /// Since when no agent has run on the spoke, if none does: its Deployment has had no ready
    /// replica and its cluster has not been Available since then.
    pub agent_down_since: Option<Timestamp>,
    /// The hub's rollout's `progressDeadlineSeconds`: how long the hub leaves a spoke without
    /// a running agent to itself before it installs the declared one.
    pub progress_deadline: Duration,
    /// How long a deletion waits for the agent to unjoin while the cluster is not Available.
    pub unjoin_timeout: Duration,
    /// The Spoke asks the hub to complete its unjoin at once.
    pub force_unjoin: bool,
}

/// An object of the spoke's on the hub that is being deleted and not gone yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Terminating {
    /// It, as `Kind name`.
    pub object: String,
    /// Since when (its deletionTimestamp).
    pub since: Timestamp,
    /// What holds it: each object (as `Kind namespace/name`, or the resource and count the
    /// namespace controller names when the objects cannot be read) with its finalizers.
    pub held_by: Vec<(String, Vec<String>)>,
}

/// How long after `since` a deletion that is not over is looked at again when nothing wakes
/// the pass (its watch does, as the deletion moves): as long as it has taken so far, at least
/// [`POLL`] and at most [`RESYNC`], so a deletion of seconds is seen soon and one held for good
/// costs a pass every half minute.
pub fn deletion_look_again(since: Timestamp, now: Timestamp) -> Timestamp {
    let taken = Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO);
    now.checked_add(taken.clamp(POLL, RESYNC)).unwrap_or(now)
}

/// What a deletion waits on, for the Spoke's condition: what is terminating, and, when a
/// finalizer holds it, which object and finalizer and what to do.
fn terminating_message(terminating: &[Terminating]) -> (&'static str, String) {
    let mut held = Vec::new();
    let mut going = Vec::new();
    for deletion in terminating {
        let since = deletion.since.strftime("%Y-%m-%dT%H:%M:%SZ");
        if deletion.held_by.is_empty() {
            going.push(format!("{} (deleted at {since})", deletion.object));
            continue;
        }
        let holders: Vec<String> = deletion
            .held_by
            .iter()
            .map(|(object, finalizers)| format!("{object} by finalizer {}", finalizers.join(", ")))
            .collect();
        held.push(format!(
            "{} (deleted at {since}) is held: {}",
            deletion.object,
            holders.join("; ")
        ));
    }
    if held.is_empty() {
        return (
            REASON_HUB_OBJECTS_TERMINATING,
            format!(
                "waiting for the hub to finish deleting {}; the namespace controller empties a namespace before it goes",
                going.join(", ")
            ),
        );
    }
    (
        REASON_HELD_BY_FINALIZER,
        format!(
            "{}: the controller that owns each finalizer removes it once it has cleaned up (is it running?); if it is gone for good, remove the finalizer by hand (kubectl patch KIND -n NAMESPACE NAME --type=merge -p '{{\"metadata\":{{\"finalizers\":null}}}}') and the unjoin goes on",
            held.join("; ")
        ),
    )
}

/// What the hub read of the agent on its spoke.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentRead {
    /// Its namespace, bootstrap kubeconfig secret and Deployment are there.
    pub installed: bool,
    /// The bootstrap kubeconfig reaches the hub as the hub would write it now.
    pub bootstrap_current: bool,
    /// The Role and RoleBinding of the agent's election are there.
    pub election_rbac: bool,
    /// The Deployment runs another version or configuration than the Spoke asks for.
    pub outdated: bool,
    /// Applying the Deployment the Spoke asks for would change it (edited, or outdated).
    pub edited: bool,
}

/// The agent's part of the [`Facts`]: `(agent_installed, agent_outdated, agent_drifted)`, from
/// what was read on the spoke (`None`: not read, as while a pivoted agent unjoins by itself, or
/// unreachable during a deletion). `bootstrapped`: it holds a certificate it keeps using;
/// `has_tokens`: the hub holds a bootstrap token of the spoke.
pub fn agent_facts(
    read: Option<&AgentRead>,
    pivoted: bool,
    bootstrapped: bool,
    has_tokens: bool,
) -> (bool, bool, bool) {
    let Some(read) = read else {
        // An agent that took the spoke over is there until it says otherwise.
        return (pivoted, false, false);
    };
    // Installed also needs what it registers with: a certificate or a token.
    let installed = read.installed && (bootstrapped || has_tokens);
    // After the pivot a new version is the agent's to roll out; anything else that differs
    // was changed on the spoke.
    let drifted = read.installed
        && (!read.bootstrap_current
            || !read.election_rbac
            || (read.edited && (!pivoted || !read.outdated)));
    (installed, read.outdated, drifted)
}

/// One thing the loop does for the Spoke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    AddFinalizer(&'static str),
    RemoveFinalizer(&'static str),
    /// Namespace, bootstrap secret with the spoke's own token, RBAC and the agent Deployment.
    InstallAgent,
    /// `hubAcceptsClient: true` on the ManagedCluster.
    Accept,
    EnableAddon {
        name: String,
        install_namespace: String,
    },
    DisableAddon {
        name: String,
    },
    /// Labels, lease duration and the Spoke's taints onto the ManagedCluster.
    SyncCluster,
    /// Upgrade the agent to the Spoke's version and configuration (hub-as-spoke only).
    UpgradeAgent,
    /// Install the agent Deployment the fleet declares on a spoke where no agent has run for
    /// the rollout's progress deadline (see the module's documentation).
    RecoverAgent,
    AddTaint(&'static str),
    /// Set CleanupFailed with this message and try again later.
    Blocked(String),
    /// The spoke-side cleanup, done by the hub: unjoin and remove the agent from the spoke.
    UnjoinSpoke(UnjoinBy),
    /// Remove the spoke's CSRs, ManagedCluster and cluster namespace from the hub.
    RemoveFromHub,
}

impl Action {
    /// Whether it writes the spoke's ManagedCluster and nothing else (accepting it, syncing
    /// its settings), so that the pass that took it knows all it changed.
    pub fn writes_cluster_only(&self) -> bool {
        matches!(self, Action::Accept | Action::SyncCluster)
    }

    /// Whether it enables or disables an addon (writes a ManagedClusterAddOn).
    pub fn changes_addons(&self) -> bool {
        matches!(
            self,
            Action::EnableAddon { .. } | Action::DisableAddon { .. }
        )
    }

    /// Whether it changes what is on the spoke itself (the agent, its side of an unjoin).
    pub fn acts_on_spoke(&self) -> bool {
        matches!(
            self,
            Action::InstallAgent
                | Action::UpgradeAgent
                | Action::RecoverAgent
                | Action::UnjoinSpoke(_)
        )
    }
}

/// Why the hub does a spoke's side of an unjoin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnjoinBy {
    /// The spoke is the hub itself: the hub owns both sides.
    HubAsSpoke,
    /// The agent never took the spoke over.
    FailedPivot,
    /// The agent did not unjoin while its cluster was not Available for the unjoin timeout.
    AgentGone,
    /// The Spoke carries the force-unjoin annotation.
    Forced,
}

impl UnjoinBy {
    /// Whether the agent could have done it: then what it would have removed may be left on the
    /// spoke, and the operator is told.
    pub fn instead_of_the_agent(self) -> bool {
        matches!(self, UnjoinBy::AgentGone | UnjoinBy::Forced)
    }

    /// Why the hub does the spoke's side, in the words of the Spoke's status and Event.
    pub fn why(self) -> &'static str {
        match self {
            UnjoinBy::HubAsSpoke => "the hub is its own spoke",
            UnjoinBy::FailedPivot => "the agent never took the spoke over",
            UnjoinBy::AgentGone => {
                "the agent did not unjoin and the cluster was not Available for the unjoin timeout"
            }
            UnjoinBy::Forced => "the Spoke carries fleetform.io/force-unjoin",
        }
    }
}

/// How the hub's cleanup of a spoke's side went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpokeCleanup {
    /// The agent's credentials and workload are gone from the spoke.
    Done,
    /// The spoke could not be reached: why.
    Unreachable(String),
    /// The spoke refused or failed a step: what.
    Failed(String),
}

/// What the hub's unjoin of a spoke's side (`by`) comes to: `Ok` with what the Spoke reports,
/// or `Err` with the problem, for the pass to fail and be retried. A spoke that cannot be reached
/// (or, when the hub acts instead of a gone agent, refuses) does not hold its Spoke forever: what
/// may be left on it (`leftovers`) is listed instead.
pub fn unjoin_outcome(
    by: UnjoinBy,
    cleanup: &SpokeCleanup,
    leftovers: &[String],
) -> Result<String, String> {
    let why = by.why();
    let left = |problem: &str| {
        format!(
            "the hub completed the unjoin ({why}) but could not clean the spoke: {problem}; remove by hand what may be left there: {}",
            leftovers.join("; ")
        )
    };
    match cleanup {
        SpokeCleanup::Done => Ok(format!(
            "the hub completed the unjoin ({why}) and removed the agent from the spoke"
        )),
        SpokeCleanup::Unreachable(problem) => Ok(left(&format!("cannot reach it: {problem}"))),
        SpokeCleanup::Failed(problem) if by.instead_of_the_agent() => Ok(left(problem)),
        SpokeCleanup::Failed(problem) => Err(problem.clone()),
    }
}

/// The decision for one pass: what to do now, and the phase to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub phase: Phase,
    pub actions: Vec<Action>,
    /// Nothing left to do until something changes (or until `wake_at`).
    pub settled: bool,
    /// What a deletion waits on: an [`CONDITION_UNJOINED`](crate::api::vocabulary::CONDITION_UNJOINED)
    /// reason and a message that says what to do.
    pub waiting: Option<(&'static str, String)>,
    /// When to look again even if nothing changes (a wait that times out).
    pub wake_at: Option<Timestamp>,
}

impl Decision {
    fn act(phase: Phase, actions: Vec<Action>) -> Self {
        Decision {
            phase,
            actions,
            settled: false,
            waiting: None,
            wake_at: None,
        }
    }

    fn wait(phase: Phase) -> Self {
        Decision {
            phase,
            actions: Vec::new(),
            settled: true,
            waiting: None,
            wake_at: None,
        }
    }

    fn waiting_on(reason: &'static str, message: String, wake_at: Option<Timestamp>) -> Self {
        Decision {
            waiting: Some((reason, message)),
            wake_at,
            ..Decision::wait(Phase::Deleting)
        }
    }

    /// How long after a pass that carried out this decision, ending at `now`, the Spoke is
    /// looked at again if nothing wakes it sooner.
    pub fn look_again_after(&self, now: Timestamp) -> Duration {
        let blocked = self
            .actions
            .iter()
            .any(|action| matches!(action, Action::Blocked(_)));
        if blocked {
            RESYNC
        } else if !self.settled {
            Duration::ZERO
        } else if let Some(at) = self.wake_at {
            Duration::try_from(at.duration_since(now))
                .unwrap_or(Duration::ZERO)
                .min(RESYNC)
        } else if self.phase == Phase::Deleting && self.waiting.is_none() {
            // Between the steps of a deletion.
            POLL
        } else {
            RESYNC
        }
    }
}

/// The phase of a spoke whose API server the hub cannot reach, when it is to change: an agent
/// pulls from its hub, so a spoke the hub cannot reach may still renew its lease, and its
/// ManagedCluster says whether it does. A joined spoke is Running while it is Available and
/// Unhealthy once it is not (a destroyed cluster's lease lapses); any other phase stays, as it
/// does while the cluster is not joined (the agent registers it).
pub fn phase_unreached(current: Option<Phase>, joined: bool, available: bool) -> Option<Phase> {
    let phase = match current? {
        Phase::Running | Phase::Unhealthy if joined && available => Phase::Running,
        Phase::Running | Phase::Unhealthy if joined => Phase::Unhealthy,
        _ => return None,
    };
    (current != Some(phase)).then_some(phase)
}

impl Facts {
    /// The facts as a pass's `actions`, all carried out, leave them, in what the conditions
    /// report: the pass that installs the agent or enables addons reports it done, instead of
    /// reporting what it found and leaving the next pass a second status write (two per
    /// joining spoke).
    pub fn after(&self, actions: &[Action]) -> Facts {
        let mut after = self.clone();
        for action in actions {
            match action {
                Action::AddFinalizer(finalizer) => {
                    after.finalizers.insert(finalizer.to_string());
                }
                Action::RemoveFinalizer(finalizer) => {
                    after.finalizers.remove(*finalizer);
                }
                Action::InstallAgent | Action::UpgradeAgent | Action::RecoverAgent => {
                    after.agent_installed = true;
                    after.agent_drifted = false;
                }
                Action::EnableAddon {
                    name,
                    install_namespace,
                } => {
                    after
                        .enabled_addons
                        .insert(name.clone(), install_namespace.clone());
                }
                Action::DisableAddon { name } => {
                    after.enabled_addons.remove(name);
                }
                Action::Accept
                | Action::SyncCluster
                | Action::AddTaint(_)
                | Action::Blocked(_)
                | Action::UnjoinSpoke(_)
                | Action::RemoveFromHub => {}
            }
        }
        after
    }
}

/// What the hub side does next for a Spoke.
pub fn decide(facts: &Facts) -> Decision {
    if facts.deleting {
        return cleanup(facts);
    }
    let missing: Vec<Action> = [FINALIZER_HUB_CLEANUP_PREFLIGHT, FINALIZER_HUB_CLEANUP]
        .into_iter()
        .chain(facts.hub_as_spoke.then_some(FINALIZER_SPOKE_CLEANUP))
        .filter(|finalizer| !facts.finalizers.contains(*finalizer))
        .map(Action::AddFinalizer)
        .collect();
    if !missing.is_empty() {
        // Finalizers come before anything that would need cleaning up.
        return Decision::act(Phase::Initializing, missing);
    }
    if !facts.agent_installed {
        return Decision::act(Phase::Joining, vec![Action::InstallAgent]);
    }
    if facts.agent_drifted && !(facts.hub_as_spoke && facts.agent_outdated) {
        // Put back what someone removed or changed on the spoke (an upgrade of a hub-as-spoke
        // does the same below).
        let phase = if facts.joined && facts.available {
            Phase::Running
        } else if facts.joined {
            Phase::Unhealthy
        } else {
            Phase::Joining
        };
        return Decision::act(phase, vec![Action::InstallAgent]);
    }
    if !facts.cluster_exists {
        // The agent registers the ManagedCluster itself.
        return Decision::wait(Phase::Joining);
    }
    if !facts.accepted {
        return Decision::act(Phase::Joining, vec![Action::Accept]);
    }
    if !facts.joined {
        return Decision::wait(Phase::Joining);
    }
    let mut actions = Vec::new();
    for (name, namespace) in &facts.wanted_addons {
        if facts.enabled_addons.get(name) != Some(namespace) {
            actions.push(Action::EnableAddon {
                name: name.clone(),
                install_namespace: namespace.clone(),
            });
        }
    }
    for name in facts
        .enabled_addons
        .keys()
        .filter(|name| !facts.wanted_addons.contains_key(*name))
    {
        actions.push(Action::DisableAddon { name: name.clone() });
    }
    if facts.cluster_spec_drifted {
        actions.push(Action::SyncCluster);
    }
    // Day 2 belongs to the agent once it has pivoted; the hub upgrades only its own cluster,
    // and a spoke where no agent runs to take what the fleet now declares.
    let mut wake_at = None;
    if facts.hub_as_spoke && facts.agent_outdated {
        actions.push(Action::UpgradeAgent);
    } else if facts.pivoted
        && !facts.hub_as_spoke
        && facts.agent_superseded
        && let Some(since) = facts.agent_down_since
    {
        let due = since
            .checked_add(facts.progress_deadline)
            .unwrap_or(Timestamp::MAX);
        if due <= facts.now {
            actions.push(Action::RecoverAgent);
        } else {
            wake_at = Some(due);
        }
    }
    let phase = if facts.available {
        Phase::Running
    } else {
        Phase::Unhealthy
    };
    if actions.is_empty() {
        Decision {
            wake_at,
            ..Decision::wait(phase)
        }
    } else {
        Decision::act(phase, actions)
    }
}

/// The Spoke conditions the lifecycle reconciler writes ([`conditions`]); the others are
/// reported by the agent and the hub's observer.
pub const OWN_CONDITIONS: [&str; 3] = [
    CONDITION_RECONCILED,
    CONDITION_SPOKE_JOINED,
    CONDITION_ADDONS_CONFIGURED,
];

/// The Spoke's conditions after a pass at `now` that went through with `decision`;
/// `unjoined_by_hub` is what the hub's own unjoin of the spoke came to, if it did one.
pub fn conditions(
    facts: &Facts,
    decision: &Decision,
    unjoined_by_hub: Option<&str>,
    now: Timestamp,
) -> Vec<Condition> {
    let condition = |type_: &str, ok: bool, reason: &str, message: String| Condition {
        type_: type_.to_string(),
        status: if ok { STATUS_TRUE } else { STATUS_FALSE }.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: None,
        last_transition_time: Time(now),
    };
    let mut conditions = vec![condition(
        CONDITION_RECONCILED,
        true,
        "Reconciled",
        "the last pass went through".into(),
    )];
    if !facts.deleting {
        conditions.push(if facts.joined {
            condition(
                CONDITION_SPOKE_JOINED,
                true,
                "Joined",
                "the agent joined the hub".into(),
            )
        } else {
            let waiting = if !facts.agent_installed {
                "installing the agent"
            } else if !facts.cluster_exists {
                "waiting for the agent to register"
            } else {
                "waiting for the agent to join"
            };
            condition(CONDITION_SPOKE_JOINED, false, "Joining", waiting.into())
        });
        if facts.joined {
            let missing: Vec<&str> = facts
                .wanted_addons
                .iter()
                .filter(|(name, namespace)| facts.enabled_addons.get(*name) != Some(namespace))
                .map(|(name, _)| name.as_str())
                .collect();
            conditions.push(if missing.is_empty() {
                condition(
                    CONDITION_ADDONS_CONFIGURED,
                    true,
                    "AddonsConfigured",
                    format!("{} addon(s) enabled", facts.wanted_addons.len()),
                )
            } else {
                condition(
                    CONDITION_ADDONS_CONFIGURED,
                    false,
                    "AddonsPending",
                    format!("enabling {}", missing.join(", ")),
                )
            });
        }
    }
    if let Some(outcome) = unjoined_by_hub {
        conditions.push(condition(
            CONDITION_UNJOINED,
            true,
            REASON_UNJOINED_BY_HUB,
            outcome.to_string(),
        ));
    } else if decision.phase == Phase::Deleting {
        let (reason, message) = decision.waiting.clone().unwrap_or((
            REASON_UNJOINING,
            "unjoining in seed 004's order".to_string(),
        ));
        let blocked = reason == REASON_MANIFEST_WORKS_REMAIN;
        conditions.push(condition(
            CONDITION_UNJOINED,
            false,
            reason,
            message.clone(),
        ));
        conditions.push(if blocked {
            condition(CONDITION_CLEANUP_FAILED, true, reason, message)
        } else {
            condition(
                CONDITION_CLEANUP_FAILED,
                false,
                "CleaningUp",
                "cleanup in progress".into(),
            )
        });
    }
    conditions
}

fn cleanup(facts: &Facts) -> Decision {
    let has = |finalizer: &str| facts.finalizers.contains(finalizer);
    let act = |actions| Decision::act(Phase::Deleting, actions);
    if has(FINALIZER_HUB_CLEANUP_PREFLIGHT) {
        if facts.cluster_exists {
            if facts.force_cluster_drain && !facts.taints.contains(TAINT_WORKLOAD_CLEANUP) {
                return act(vec![Action::AddTaint(TAINT_WORKLOAD_CLEANUP)]);
            }
            if !facts.active_works.is_empty() {
                let message = format!(
                    "cannot unjoin while ManifestWorks are active: {}; delete them, or set cleanup.forceClusterDrain to drain the cluster first",
                    facts.active_works.join(", ")
                );
                let mut blocked = act(vec![Action::Blocked(message.clone())]);
                blocked.waiting = Some((REASON_MANIFEST_WORKS_REMAIN, message));
                return blocked;
            }
            if !facts.taints.contains(TAINT_TERMINATING) {
                return act(vec![Action::AddTaint(TAINT_TERMINATING)]);
            }
        }
        if !facts.enabled_addons.is_empty() {
            return act(facts
                .enabled_addons
                .keys()
                .map(|name| Action::DisableAddon { name: name.clone() })
                .collect());
        }
        return act(vec![Action::RemoveFinalizer(
            FINALIZER_HUB_CLEANUP_PREFLIGHT,
        )]);
    }
    if has(FINALIZER_SPOKE_CLEANUP) {
        // The agent unjoins by itself, unless there is none to do it: the hub is the spoke, the
        // agent never came up, or it is gone.
        let by = if facts.hub_as_spoke {
            Some(UnjoinBy::HubAsSpoke)
        } else if !facts.pivoted {
            Some(UnjoinBy::FailedPivot)
        } else if facts.force_unjoin {
            Some(UnjoinBy::Forced)
        } else {
            None
        };
        if let Some(by) = by {
            return act(vec![
                Action::UnjoinSpoke(by),
                Action::RemoveFinalizer(FINALIZER_SPOKE_CLEANUP),
            ]);
        }
        let timeout = facts.unjoin_timeout;
        let deadline = facts
            .unavailable_since
            .and_then(|since| since.checked_add(timeout).ok());
        if deadline.is_some_and(|deadline| deadline <= facts.now) {
            return act(vec![
                Action::UnjoinSpoke(UnjoinBy::AgentGone),
                Action::RemoveFinalizer(FINALIZER_SPOKE_CLEANUP),
            ]);
        }
        let how_long = match deadline {
            Some(deadline) => format!(
                "the cluster is not Available; the hub completes the unjoin itself at {} ({} s after it stopped being Available)",
                deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
                timeout.as_secs()
            ),
            None => format!(
                "if the cluster stops being Available, the hub completes the unjoin itself {} s later",
                timeout.as_secs()
            ),
        };
        return Decision::waiting_on(
            REASON_WAITING_FOR_AGENT_UNJOIN,
            format!(
                "waiting for the agent on the spoke to unjoin; {how_long}; `kubectl annotate spoke -n fleetform-system NAME {ANNOTATION_FORCE_UNJOIN}=true` does it now"
            ),
            deadline,
        );
    }
    // A failed pivot: the agent never took the spoke over (nor its finalizer), so the hub
    // removes what it installed.
    if (facts.hub_as_spoke || !facts.pivoted) && facts.agent_installed {
        let by = if facts.hub_as_spoke {
            UnjoinBy::HubAsSpoke
        } else {
            UnjoinBy::FailedPivot
        };
        return act(vec![Action::UnjoinSpoke(by)]);
    }
    if has(FINALIZER_HUB_CLEANUP) {
        if facts.hub_leftovers {
            return act(vec![Action::RemoveFromHub]);
        }
        // Deleted already: deleting again would change nothing; wait for it to go.
        if let Some(since) = facts.terminating.iter().map(|t| t.since).min() {
            let (reason, message) = terminating_message(&facts.terminating);
            return Decision::waiting_on(
                reason,
                message,
                Some(deletion_look_again(since, facts.now)),
            );
        }
        return act(vec![Action::RemoveFinalizer(FINALIZER_HUB_CLEANUP)]);
    }
    Decision::wait(Phase::Deleting)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Spoke whose agent joined, pivoted and is available, with one addon enabled.
    fn running() -> Facts {
        Facts {
            finalizers: [
                FINALIZER_HUB_CLEANUP_PREFLIGHT,
                FINALIZER_HUB_CLEANUP,
                FINALIZER_SPOKE_CLEANUP,
            ]
            .map(String::from)
            .into(),
            agent_installed: true,
            cluster_exists: true,
            accepted: true,
            joined: true,
            pivoted: true,
            available: true,
            wanted_addons: [("metrics".to_string(), "addons".to_string())].into(),
            enabled_addons: [("metrics".to_string(), "addons".to_string())].into(),
            hub_leftovers: true,
            ..Facts::default()
        }
    }

    /// Runs the cleanup as the loop would, applying each decision to the facts, until settled;
    /// returns every action in order. `agent` plays the spoke side when it is due.
    fn run_cleanup(mut facts: Facts, agent_unjoins: bool) -> Vec<Action> {
        facts.deleting = true;
        let mut done = Vec::new();
        for _ in 0..20 {
            let decision = decide(&facts);
            assert_eq!(decision.phase, Phase::Deleting);
            if decision.settled {
                if agent_unjoins && facts.finalizers.contains(FINALIZER_SPOKE_CLEANUP) {
                    facts.finalizers.remove(FINALIZER_SPOKE_CLEANUP);
                    done.push(Action::RemoveFinalizer(FINALIZER_SPOKE_CLEANUP));
                    continue;
                }
                return done;
            }
            for action in decision.actions {
                match &action {
                    Action::AddTaint(taint) => {
                        facts.taints.insert(taint.to_string());
                    }
                    Action::DisableAddon { name } => {
                        facts.enabled_addons.remove(name);
                    }
                    Action::RemoveFinalizer(finalizer) => {
                        facts.finalizers.remove(*finalizer);
                    }
                    Action::RemoveFromHub => {
                        facts.hub_leftovers = false;
                        facts.cluster_exists = false;
                    }
                    Action::UnjoinSpoke(_) => facts.agent_installed = false,
                    Action::Blocked(_) => {
                        done.push(action);
                        return done;
                    }
                    _ => {}
                }
                done.push(action);
            }
        }
        panic!("cleanup did not settle: {done:?}");
    }

    #[test]
    fn a_failed_pivot_without_the_agent_finalizer_is_unjoined_by_the_hub() {
        let mut facts = running();
        facts.pivoted = false;
        facts.joined = false;
        facts.finalizers.remove(FINALIZER_SPOKE_CLEANUP);
        let done = run_cleanup(facts, false);
        let unjoin = done
            .iter()
            .position(|a| *a == Action::UnjoinSpoke(UnjoinBy::FailedPivot))
            .expect("unjoined");
        let remove = done
            .iter()
            .position(|a| *a == Action::RemoveFromHub)
            .expect("removed");
        assert!(unjoin < remove, "{done:?}");
    }

    #[test]
    fn a_new_spoke_gets_its_finalizers_before_anything_else() {
        let decision = decide(&Facts::default());
        assert_eq!(
            decision.actions,
            [
                Action::AddFinalizer(FINALIZER_HUB_CLEANUP_PREFLIGHT),
                Action::AddFinalizer(FINALIZER_HUB_CLEANUP)
            ]
        );
        assert_eq!(decision.phase, Phase::Initializing);
        let hub_as_spoke = Facts {
            hub_as_spoke: true,
            ..Facts::default()
        };
        assert!(
            decide(&hub_as_spoke)
                .actions
                .contains(&Action::AddFinalizer(FINALIZER_SPOKE_CLEANUP))
        );
    }

    #[test]
    fn a_pass_reports_what_its_actions_did_so_the_next_pass_has_nothing_to_write() {
        let now = Timestamp::now();
        // What a pass over `facts` writes: its phase and conditions.
        let reported = |facts: &Facts| {
            let decision = decide(facts);
            let conditions = conditions(&facts.after(&decision.actions), &decision, None, now);
            let conditions: Vec<_> = conditions
                .into_iter()
                .map(|c| (c.type_, c.status, c.message))
                .collect();
            (decision.phase, conditions)
        };
        // A new spoke: its finalizers, and in the same pass its agent.
        let mut facts = Facts {
            wanted_addons: [("metrics".to_string(), "addons".to_string())].into(),
            ..Facts::default()
        };
        facts = facts.after(&decide(&facts).actions);
        let install = decide(&facts);
        assert_eq!(install.actions, [Action::InstallAgent]);
        let installing = reported(&facts);
        assert!(
            installing
                .1
                .iter()
                .any(|(type_, _, message)| type_ == CONDITION_SPOKE_JOINED
                    && message == "waiting for the agent to register"),
            "{installing:?}"
        );
        // The next pass finds the agent installed, not registered yet: nothing new to write.
        facts = facts.after(&install.actions);
        assert_eq!(reported(&facts), installing);

        // Joined: the pass that enables its addons reports them configured.
        facts.cluster_exists = true;
        facts.accepted = true;
        facts.joined = true;
        facts.available = true;
        let enable = decide(&facts);
        assert!(
            matches!(enable.actions[..], [Action::EnableAddon { .. }]),
            "{enable:?}"
        );
        let enabling = reported(&facts);
        assert!(
            enabling
                .1
                .iter()
                .any(|(type_, status, _)| type_ == CONDITION_ADDONS_CONFIGURED
                    && status == STATUS_TRUE),
            "{enabling:?}"
        );
        facts = facts.after(&enable.actions);
        assert_eq!(reported(&facts), enabling);
    }

    #[test]
    fn day_one_installs_the_agent_waits_for_it_accepts_and_waits_for_the_join() {
        let mut facts = running();
        facts.agent_installed = false;
        facts.cluster_exists = false;
        facts.accepted = false;
        facts.joined = false;
        assert_eq!(decide(&facts).actions, [Action::InstallAgent]);
        facts.agent_installed = true;
        assert_eq!(decide(&facts), Decision::wait(Phase::Joining));
        facts.cluster_exists = true;
        assert_eq!(decide(&facts).actions, [Action::Accept]);
        facts.accepted = true;
        assert_eq!(decide(&facts), Decision::wait(Phase::Joining));
        facts.joined = true;
        assert_eq!(decide(&facts), Decision::wait(Phase::Running));
    }

    #[test]
    fn addons_follow_the_spoke_and_drift_is_synced() {
        let mut facts = running();
        facts.wanted_addons.insert("logging".into(), "logs".into());
        facts.enabled_addons.insert("old".into(), "x".into());
        facts.cluster_spec_drifted = true;
        let decision = decide(&facts);
        assert_eq!(
            decision.actions,
            [
                Action::EnableAddon {
                    name: "logging".into(),
                    install_namespace: "logs".into()
                },
                Action::DisableAddon { name: "old".into() },
                Action::SyncCluster,
            ]
        );
    }

    #[test]
    fn only_a_hub_as_spoke_is_upgraded_by_the_hub_and_unavailable_spokes_are_unhealthy() {
        let mut facts = running();
        facts.agent_outdated = true;
        assert!(
            decide(&facts).actions.is_empty(),
            "the agent upgrades itself after the pivot"
        );
        facts.hub_as_spoke = true;
        assert_eq!(decide(&facts).actions, [Action::UpgradeAgent]);
        facts.agent_outdated = false;
        facts.available = false;
        assert_eq!(decide(&facts), Decision::wait(Phase::Unhealthy));
    }

    #[test]
    fn cleanup_runs_in_seed_004_order_with_the_agent_unjoining() {
        assert_eq!(
            run_cleanup(running(), true),
            [
                Action::AddTaint(TAINT_TERMINATING),
                Action::DisableAddon {
                    name: "metrics".into()
                },
                Action::RemoveFinalizer(FINALIZER_HUB_CLEANUP_PREFLIGHT),
                Action::RemoveFinalizer(FINALIZER_SPOKE_CLEANUP),
                Action::RemoveFromHub,
                Action::RemoveFinalizer(FINALIZER_HUB_CLEANUP),
            ]
        );
    }

    #[test]
    fn cleanup_with_force_cluster_drain_taints_for_workload_cleanup_first() {
        let facts = Facts {
            force_cluster_drain: true,
            ..running()
        };
        let actions = run_cleanup(facts, true);
        assert_eq!(actions[0], Action::AddTaint(TAINT_WORKLOAD_CLEANUP));
        assert_eq!(actions[1], Action::AddTaint(TAINT_TERMINATING));
    }

    #[test]
    fn active_manifest_works_block_the_unjoin_and_are_named() {
        let facts = Facts {
            active_works: vec!["web".into(), "db".into()],
            ..running()
        };
        match run_cleanup(facts, true).as_slice() {
            [Action::Blocked(message)] => assert!(
                message.starts_with("cannot unjoin while ManifestWorks are active: web, db;"),
                "{message}"
            ),
            other => panic!("not blocked: {other:?}"),
        }
    }

    #[test]
    fn the_hub_does_the_spoke_side_for_a_hub_as_spoke_and_after_a_failed_pivot() {
        let hub_as_spoke = Facts {
            hub_as_spoke: true,
            ..running()
        };
        let never_pivoted = Facts {
            pivoted: false,
            ..running()
        };
        for (facts, by) in [
            (hub_as_spoke, UnjoinBy::HubAsSpoke),
            (never_pivoted, UnjoinBy::FailedPivot),
        ] {
            let actions = run_cleanup(facts, false);
            let unjoin = actions
                .iter()
                .position(|a| *a == Action::UnjoinSpoke(by))
                .expect("hub unjoins");
            assert_eq!(
                actions[unjoin - 1],
                Action::RemoveFinalizer(FINALIZER_HUB_CLEANUP_PREFLIGHT)
            );
            assert_eq!(
                actions[unjoin + 1],
                Action::RemoveFinalizer(FINALIZER_SPOKE_CLEANUP)
            );
            assert_eq!(
                actions.last(),
                Some(&Action::RemoveFinalizer(FINALIZER_HUB_CLEANUP))
            );
        }
    }

    /// A running spoke being deleted, past its preflight: the agent's turn to unjoin.
    fn awaiting_the_agent() -> Facts {
        let mut facts = running();
        facts.deleting = true;
        facts.finalizers.remove(FINALIZER_HUB_CLEANUP_PREFLIGHT);
        facts.enabled_addons.clear();
        facts.now = noon();
        facts.unjoin_timeout = Duration::from_secs(600);
        facts
    }

    #[test]
    fn a_pivoted_spoke_waits_for_its_agent_to_unjoin_and_says_so() {
        let decision = decide(&awaiting_the_agent());
        assert!(decision.settled && decision.actions.is_empty());
        assert_eq!(decision.phase, Phase::Deleting);
        let (reason, message) = decision.waiting.expect("says what it waits on");
        assert_eq!(reason, REASON_WAITING_FOR_AGENT_UNJOIN);
        assert!(message.contains(ANNOTATION_FORCE_UNJOIN), "{message}");
        assert_eq!(
            decision.wake_at, None,
            "nothing to time out while Available"
        );
    }

    #[test]
    fn the_hub_unjoins_a_spoke_whose_cluster_stayed_unavailable_past_the_timeout() {
        let mut facts = awaiting_the_agent();
        facts.available = false;
        facts.unavailable_since = Some("2026-11-26T11:55:00Z".parse().unwrap());
        let waiting = decide(&facts);
        assert_eq!(
            waiting.wake_at,
            Some("2026-11-26T12:05:00Z".parse().unwrap()),
            "looks again when the timeout is up"
        );
        assert!(waiting.actions.is_empty());

        facts.now = "2026-11-26T12:05:00Z".parse().unwrap();
        assert_eq!(
            decide(&facts).actions,
            [
                Action::UnjoinSpoke(UnjoinBy::AgentGone),
                Action::RemoveFinalizer(FINALIZER_SPOKE_CLEANUP)
            ]
        );
    }

    #[test]
    fn the_force_annotation_unjoins_at_once_and_the_rest_of_the_order_holds() {
        let facts = Facts {
            force_unjoin: true,
            ..awaiting_the_agent()
        };
        let decision = decide(&facts);
        assert_eq!(
            decision.actions,
            [
                Action::UnjoinSpoke(UnjoinBy::Forced),
                Action::RemoveFinalizer(FINALIZER_SPOKE_CLEANUP)
            ]
        );
        assert!(UnjoinBy::Forced.instead_of_the_agent());
        assert!(!UnjoinBy::HubAsSpoke.instead_of_the_agent());
        // Forcing never skips what comes before the agent's turn.
        let mut early = running();
        early.deleting = true;
        early.force_unjoin = true;
        assert_eq!(
            decide(&early).actions,
            [Action::AddTaint(TAINT_TERMINATING)]
        );
    }

    #[test]
    fn a_removed_or_edited_agent_is_put_back_after_the_pivot_but_not_while_deleting() {
        let facts = Facts {
            agent_drifted: true,
            ..running()
        };
        let decision = decide(&facts);
        assert_eq!(decision.actions, [Action::InstallAgent]);
        assert_eq!(decision.phase, Phase::Running);
        let gone = Facts {
            agent_installed: false,
            ..running()
        };
        assert_eq!(decide(&gone).actions, [Action::InstallAgent]);
        let deleting = Facts {
            deleting: true,
            agent_drifted: true,
            ..awaiting_the_agent()
        };
        assert!(!decide(&deleting).actions.contains(&Action::InstallAgent));
    }

    #[test]
    fn active_manifest_works_say_what_remains() {
        let mut facts = running();
        facts.deleting = true;
        facts.active_works = vec!["web".into()];
        let decision = decide(&facts);
        let (reason, message) = decision.waiting.expect("says what blocks");
        assert_eq!(reason, REASON_MANIFEST_WORKS_REMAIN);
        assert!(
            message.contains("web") && message.contains("forceClusterDrain"),
            "{message}"
        );
    }

    /// `(type, status, reason)` of each condition, in order.
    fn summary(conditions: &[Condition]) -> Vec<(String, String, String)> {
        conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect()
    }

    fn row(type_: &str, status: &str, reason: &str) -> (String, String, String) {
        (type_.into(), status.into(), reason.into())
    }

    fn noon() -> Timestamp {
        "2026-11-26T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_joining_spoke_says_what_it_waits_for_and_a_joined_one_which_addons_are_pending() {
        let now = noon();
        let installing = Facts {
            agent_installed: false,
            joined: false,
            ..running()
        };
        let reported = conditions(&installing, &decide(&installing), None, now);
        assert_eq!(
            summary(&reported),
            [
                row(CONDITION_RECONCILED, STATUS_TRUE, "Reconciled"),
                row(CONDITION_SPOKE_JOINED, STATUS_FALSE, "Joining"),
            ]
        );
        assert_eq!(reported[1].message, "installing the agent");
        assert_eq!(reported[1].last_transition_time, Time(now));
        let registering = Facts {
            cluster_exists: false,
            joined: false,
            ..running()
        };
        assert_eq!(
            conditions(&registering, &decide(&registering), None, now)[1].message,
            "waiting for the agent to register"
        );
        let mut pending = running();
        pending
            .wanted_addons
            .insert("logging".into(), "addons".into());
        let reported = conditions(&pending, &decide(&pending), None, now);
        assert_eq!(
            summary(&reported)[1..],
            [
                row(CONDITION_SPOKE_JOINED, STATUS_TRUE, "Joined"),
                row(CONDITION_ADDONS_CONFIGURED, STATUS_FALSE, "AddonsPending"),
            ]
        );
        assert_eq!(reported[2].message, "enabling logging");
    }

    #[test]
    fn a_deletion_reports_what_it_waits_on_what_blocks_it_and_an_unjoin_the_hub_did() {
        let now = noon();
        let unjoining = Facts {
            deleting: true,
            ..running()
        };
        assert_eq!(
            summary(&conditions(&unjoining, &decide(&unjoining), None, now)),
            [
                row(CONDITION_RECONCILED, STATUS_TRUE, "Reconciled"),
                row(CONDITION_UNJOINED, STATUS_FALSE, REASON_UNJOINING),
                row(CONDITION_CLEANUP_FAILED, STATUS_FALSE, "CleaningUp"),
            ]
        );
        let blocked = Facts {
            active_works: vec!["web".into()],
            ..unjoining.clone()
        };
        let reported = conditions(&blocked, &decide(&blocked), None, now);
        assert_eq!(
            summary(&reported)[2],
            row(
                CONDITION_CLEANUP_FAILED,
                STATUS_TRUE,
                REASON_MANIFEST_WORKS_REMAIN
            )
        );
        assert!(
            reported[2].message.contains("web"),
            "{}",
            reported[2].message
        );
        let waiting = awaiting_the_agent();
        assert_eq!(
            summary(&conditions(&waiting, &decide(&waiting), None, now))[1],
            row(
                CONDITION_UNJOINED,
                STATUS_FALSE,
                REASON_WAITING_FOR_AGENT_UNJOIN
            )
        );
        let forced = Facts {
            force_unjoin: true,
            ..awaiting_the_agent()
        };
        let reported = conditions(&forced, &decide(&forced), Some("the hub completed"), now);
        assert_eq!(
            summary(&reported)[1..],
            [row(CONDITION_UNJOINED, STATUS_TRUE, REASON_UNJOINED_BY_HUB)]
        );
        assert_eq!(reported[1].message, "the hub completed");
    }

    #[test]
    fn a_spoke_is_looked_at_again_at_once_after_acting_and_at_its_deadline_when_waiting() {
        let now = noon();
        let acting = Facts {
            joined: false,
            accepted: false,
            ..running()
        };
        assert_eq!(decide(&acting).look_again_after(now), Duration::ZERO);
        assert_eq!(decide(&running()).look_again_after(now), RESYNC);
        let blocked = Facts {
            deleting: true,
            active_works: vec!["web".into()],
            ..running()
        };
        assert_eq!(
            decide(&blocked).look_again_after(now),
            RESYNC,
            "ManifestWorks are watched; the retry is a backstop"
        );
        let mut timing_out = awaiting_the_agent();
        timing_out.available = false;
        timing_out.unavailable_since = Some("2026-11-26T11:55:00Z".parse().unwrap());
        let deadline_in_5_min = decide(&timing_out);
        assert_eq!(
            deadline_in_5_min.look_again_after("2026-11-26T12:04:50Z".parse().unwrap()),
            Duration::from_secs(10)
        );
        assert_eq!(
            deadline_in_5_min.look_again_after(now),
            RESYNC,
            "at most RESYNC"
        );
        assert_eq!(
            deadline_in_5_min.look_again_after("2026-11-26T12:06:00Z".parse().unwrap()),
            Duration::ZERO,
            "a deadline passed while acting"
        );
        let terminating = Facts {
            deleting: true,
            finalizers: BTreeSet::new(),
            ..running()
        };
        let decision = decide(&terminating);
        assert!(decision.settled && decision.waiting.is_none());
        assert_eq!(
            decision.look_again_after(now),
            POLL,
            "namespaces terminating are polled"
        );
    }

    #[test]
    fn an_unjoin_the_hub_could_not_finish_on_the_spoke_lists_what_is_left_unless_it_must_retry() {
        let leftovers = ["Namespace x".to_string(), "ClusterRole y".to_string()];
        assert_eq!(
            unjoin_outcome(UnjoinBy::FailedPivot, &SpokeCleanup::Done, &leftovers),
            Ok("the hub completed the unjoin (the agent never took the spoke over) and removed the agent from the spoke".to_string())
        );
        let unreachable = SpokeCleanup::Unreachable("connection refused".into());
        for by in [
            UnjoinBy::HubAsSpoke,
            UnjoinBy::FailedPivot,
            UnjoinBy::AgentGone,
            UnjoinBy::Forced,
        ] {
            let told = unjoin_outcome(by, &unreachable, &leftovers).expect("never held");
            assert!(
                told.contains(by.why())
                    && told.contains("cannot reach it: connection refused")
                    && told.ends_with(
                        "remove by hand what may be left there: Namespace x; ClusterRole y"
                    ),
                "{told}"
            );
        }
        let refused = SpokeCleanup::Failed("forbidden".into());
        assert!(
            unjoin_outcome(UnjoinBy::Forced, &refused, &leftovers)
                .is_ok_and(|told| told.contains("forbidden"))
        );
        assert_eq!(
            unjoin_outcome(UnjoinBy::HubAsSpoke, &refused, &leftovers),
            Err("forbidden".to_string()),
            "the hub's own side is retried: no agent would do it"
        );
    }

    #[test]
    fn the_agent_read_on_the_spoke_is_drifted_when_changed_there_but_not_while_it_rolls_out() {
        assert_eq!(
            agent_facts(None, true, false, false),
            (true, false, false),
            "a pivoted agent not read is taken as there"
        );
        assert_eq!(agent_facts(None, false, false, true), (false, false, false));
        let read = AgentRead {
            installed: true,
            bootstrap_current: true,
            election_rbac: true,
            outdated: false,
            edited: false,
        };
        assert_eq!(
            agent_facts(Some(&read), true, true, false),
            (true, false, false)
        );
        assert!(
            !agent_facts(Some(&read), false, false, false).0,
            "without a certificate or a token there is nothing to register with"
        );
        assert!(agent_facts(Some(&read), false, false, true).0);
        let moved = AgentRead {
            bootstrap_current: false,
            ..read
        };
        assert_eq!(
            agent_facts(Some(&moved), true, true, false),
            (true, false, true)
        );
        let edited = AgentRead {
            edited: true,
            ..read
        };
        assert!(agent_facts(Some(&edited), true, true, false).2);
        let rolling_out = AgentRead {
            edited: true,
            outdated: true,
            ..read
        };
        assert_eq!(
            agent_facts(Some(&rolling_out), true, true, false),
            (true, true, false),
            "after the pivot a new version is the agent's to roll out"
        );
        assert!(
            agent_facts(Some(&rolling_out), false, false, true).2,
            "before the pivot the hub puts its own version back"
        );
        let gone = AgentRead {
            installed: false,
            bootstrap_current: false,
            ..read
        };
        assert_eq!(
            agent_facts(Some(&gone), true, true, true),
            (false, false, false)
        );
        let without_election = AgentRead {
            election_rbac: false,
            ..rolling_out
        };
        assert!(
            agent_facts(Some(&without_election), true, true, false).2,
            "an agent installed before it elected gets its election's RBAC, rolling out or not"
        );
    }

    /// A running spoke whose agent Deployment names another agent than the fleet declares now,
    /// with no agent running since `down_since`.
    fn agent_down(down_since: Option<&str>) -> Facts {
        Facts {
            available: down_since.is_none(),
            agent_superseded: true,
            agent_down_since: down_since.map(|at| at.parse().unwrap()),
            progress_deadline: Duration::from_secs(600),
            now: noon(),
            ..running()
        }
    }

    #[test]
    fn the_hub_installs_the_declared_agent_where_none_ran_for_the_progress_deadline() {
        let recovered = decide(&agent_down(Some("2026-11-26T11:50:00Z")));
        assert_eq!(recovered.actions, [Action::RecoverAgent]);
        assert_eq!(recovered.phase, Phase::Unhealthy);

        let waiting = decide(&agent_down(Some("2026-11-26T11:55:00Z")));
        assert!(waiting.actions.is_empty(), "{:?}", waiting.actions);
        assert_eq!(
            waiting.wake_at,
            Some("2026-11-26T12:05:00Z".parse().unwrap()),
            "looks again when the deadline is up"
        );
    }

    #[test]
    fn an_agent_that_runs_stays_in_charge_of_its_spoke() {
        // Running (its old agent kept while the new one never started): the agent moves itself.
        assert!(decide(&agent_down(None)).actions.is_empty());
        // Down, but the fleet declares what its Deployment names (no later commit): nothing
        // the hub could install would differ.
        let same = Facts {
            agent_superseded: false,
            ..agent_down(Some("2026-11-26T11:00:00Z"))
        };
        assert!(decide(&same).actions.is_empty());
        // Not taken over yet: the hub puts its own version back by the drift it reads.
        let never_pivoted = Facts {
            pivoted: false,
            ..agent_down(Some("2026-11-26T11:00:00Z"))
        };
        assert!(
            !decide(&never_pivoted)
                .actions
                .contains(&Action::RecoverAgent)
        );
        // The hub's own spoke is upgraded as ever, by the hub.
        let hub_as_spoke = Facts {
            hub_as_spoke: true,
            agent_outdated: true,
            ..agent_down(Some("2026-11-26T11:00:00Z"))
        };
        assert_eq!(decide(&hub_as_spoke).actions, [Action::UpgradeAgent]);
    }

    #[test]
    fn an_unreachable_spoke_follows_its_managed_cluster_once_joined() {
        use Phase::*;
        // A destroyed cluster's lease lapses: Running becomes Unhealthy, and back once it is
        // Available again (its agent renews though the hub cannot reach its API).
        assert_eq!(phase_unreached(Some(Running), true, false), Some(Unhealthy));
        assert_eq!(phase_unreached(Some(Unhealthy), true, true), Some(Running));
        assert_eq!(phase_unreached(Some(Running), true, true), None);
        assert_eq!(phase_unreached(Some(Unhealthy), true, false), None);
        // Not joined (its agent re-registering), or not yet running: the phase it has stays.
        assert_eq!(phase_unreached(Some(Running), false, false), None);
        for phase in [Initializing, Joining, Deleting] {
            assert_eq!(phase_unreached(Some(phase), true, false), None, "{phase:?}");
        }
        assert_eq!(phase_unreached(None, true, false), None);
    }

    /// A spoke whose hub objects were deleted, its namespace still terminating.
    fn namespace_terminating(since: Timestamp, held_by: Vec<(String, Vec<String>)>) -> Facts {
        Facts {
            deleting: true,
            finalizers: [FINALIZER_HUB_CLEANUP.to_string()].into(),
            pivoted: true,
            terminating: vec![Terminating {
                object: "Namespace spoke-a".into(),
                since,
                held_by,
            }],
            now: since.checked_add(Duration::from_secs(10)).unwrap(),
            ..Facts::default()
        }
    }

    #[test]
    fn a_terminating_namespace_is_waited_for_never_deleted_again() {
        let since = Timestamp::from_second(1_800_000_000).unwrap();
        let facts = namespace_terminating(since, Vec::new());
        let decision = decide(&facts);
        assert!(decision.actions.is_empty(), "{:?}", decision.actions);
        assert!(decision.settled);
        let (reason, message) = decision.waiting.clone().unwrap();
        assert_eq!(reason, REASON_HUB_OBJECTS_TERMINATING);
        assert!(
            message.contains("Namespace spoke-a (deleted at 2027-01-15T08:00:00Z)"),
            "{message}"
        );
        // Its watch wakes the pass; without it, the pass looks again as long after as the
        // deletion has taken so far.
        assert_eq!(
            decision.look_again_after(facts.now),
            Duration::from_secs(10)
        );
        let conditions = conditions(&facts, &decision, None, facts.now);
        let unjoined = conditions
            .iter()
            .find(|c| c.type_ == CONDITION_UNJOINED)
            .unwrap();
        assert_eq!(
            (unjoined.status.as_str(), unjoined.reason.as_str()),
            ("False", reason)
        );
        // Gone: the last finalizer goes.
        let gone = Facts {
            terminating: Vec::new(),
            ..facts
        };
        assert_eq!(
            decide(&gone).actions,
            [Action::RemoveFinalizer(FINALIZER_HUB_CLEANUP)]
        );
    }

    #[test]
    fn a_namespace_held_by_a_finalizer_names_the_object_the_finalizer_and_what_to_do() {
        let since = Timestamp::from_second(1_800_000_000).unwrap();
        let facts = namespace_terminating(
            since,
            vec![(
                "ManagedClusterAddOn spoke-a/foreign".into(),
                vec!["example.com/hold".into()],
            )],
        );
        let decision = decide(&facts);
        assert!(decision.actions.is_empty());
        let (reason, message) = decision.waiting.unwrap();
        assert_eq!(reason, REASON_HELD_BY_FINALIZER);
        for said in [
            "Namespace spoke-a (deleted at 2027-01-15T08:00:00Z) is held: ManagedClusterAddOn spoke-a/foreign by finalizer example.com/hold",
            "the controller that owns each finalizer removes it",
            "kubectl patch KIND -n NAMESPACE NAME --type=merge -p '{\"metadata\":{\"finalizers\":null}}'",
        ] {
            assert!(message.contains(said), "{said} missing from {message}");
        }
    }

    #[test]
    fn a_deletion_is_looked_at_again_ever_more_rarely_up_to_the_resync() {
        let since = Timestamp::from_second(1_800_000_000).unwrap();
        let after = |seconds: u64| {
            let now = since.checked_add(Duration::from_secs(seconds)).unwrap();
            deletion_look_again(since, now)
                .duration_since(now)
                .as_secs()
        };
        assert_eq!(after(0), POLL.as_secs() as i64);
        assert_eq!(after(4), 4);
        assert_eq!(after(20), 20);
        assert_eq!(after(600), RESYNC.as_secs() as i64);
    }
}
