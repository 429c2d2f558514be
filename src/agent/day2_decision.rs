//! What the agent does next on day 2 (seed 004, DESIGN §4.6), as a pure function of what it
//! knows: its Spoke, whether it has joined, the Deployment it runs in, its Hub and the time.
//! [`super::day2`] is the loop that gathers those facts, asks [`decide`] and writes.
//!
//! - Deletion: once the hub has removed its preflight finalizer, the agent unjoins in this
//!   order: its hub credentials, the `spoke-cleanup` finalizer, then its own workload (last, as
//!   it stops the agent). A hub-as-spoke is the hub's business, and a Spoke without
//!   `spoke-cleanup` was never taken over (or is already done with).
//! - Joined: the `spoke-cleanup` finalizer (not on a hub-as-spoke) and `PivotComplete`; then, in
//!   a Deployment, the version and configuration hash it runs and that Deployment as it sees it
//!   (its uid and generation, or none) on the Spoke's status, and, unless it is the hub's own
//!   spoke, an upgrade when the Deployment the Spoke and Hub call for differs. The Deployment
//!   reported is what wakes the hub's reconciler when someone edits or removes it on the spoke.
//! - After a pass: [`after`] says whether to wait for a change, retry soon, or stop.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::fleet::{AgentDeploymentSeen, Hub, Spoke};
use crate::api::vocabulary::{
    CONDITION_PIVOT_COMPLETE, FINALIZER_HUB_CLEANUP_PREFLIGHT, FINALIZER_SPOKE_CLEANUP, STATUS_TRUE,
};
use crate::plan::desired::effective;
use crate::reconciler::install::{
    LABEL_AGENT_VERSION, agent_deployment, deployment_current, deployment_label, spoke_url_of,
};

/// What one day-2 pass knows, gathered by the loop.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// The agent's Spoke on the hub.
    pub spoke: &'a Spoke,
    /// The agent's ManagedCluster is joined.
    pub joined: bool,
    /// The Deployment the agent runs in, if it runs in one and it exists (read only once joined
    /// and not deleting: nothing else needs it).
    pub running: Option<&'a Deployment>,
    /// The agent runs in a Deployment (it was given its name): `running` is `None` when it is
    /// gone.
    pub in_deployment: bool,
    /// The Spoke's Hub, if it exists (read only for an upgrade: its agent settings are defaults).
    pub hub: Option<&'a Hub>,
    /// The agent version this agent runs.
    pub version: &'a str,
    /// The configuration hash its pod was started for.
    pub config_hash: Option<&'a str>,
    /// When the pass runs.
    pub now: Timestamp,
}

/// One write of a day-2 pass, in the order they are done.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Remove the agent's hub credentials from the spoke (the unjoin's first step).
    RemoveCredentials,
    /// Add (`true`) or remove `spoke-cleanup` on the Spoke.
    CleanupFinalizer(bool),
    /// Remove the agent's workload from the spoke, its namespace too when `purge_namespace`.
    RemoveWorkload { purge_namespace: bool },
    /// Write what the agent reports on the Spoke's status.
    Report(Report),
    /// Server-side apply this Deployment over the one the agent runs in (`name`).
    Upgrade {
        name: String,
        from: Option<String>,
        to: Option<String>,
        deployment: Box<Deployment>,
    },
}

/// What a joined agent reports on its Spoke's status, in one write and only what the status
/// says otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// `PivotComplete`: the agent owns day 2.
    pub pivot: Condition,
    /// The version and configuration hash the agent runs (those its pod was started for).
    pub runs: Option<(String, Option<String>)>,
    /// Its Deployment as it sees it.
    pub deployment: Option<AgentDeploymentSeen>,
}

/// A pass's decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    pub actions: Vec<Action>,
    /// The actions unjoin the spoke: once they are done the agent has nothing left to do.
    pub unjoins: bool,
}

/// What day 2 does next.
pub fn decide(facts: &Facts) -> Decision {
    let spoke = facts.spoke;
    let hub_as_spoke = spoke.spec.is_hub_as_spoke();
    let has = |finalizer: &str| spoke.finalizers().iter().any(|f| f == finalizer);
    if spoke.metadata.deletion_timestamp.is_some() {
        if hub_as_spoke || has(FINALIZER_HUB_CLEANUP_PREFLIGHT) || !has(FINALIZER_SPOKE_CLEANUP) {
            return Decision::default();
        }
        return Decision {
            actions: vec![
                Action::RemoveCredentials,
                Action::CleanupFinalizer(false),
                Action::RemoveWorkload {
                    purge_namespace: spoke.spec.cleanup.purge_agent_namespace,
                },
            ],
            unjoins: true,
        };
    }
    if !facts.joined {
        return Decision::default();
    }
    let mut actions = Vec::new();
    if !hub_as_spoke && !has(FINALIZER_SPOKE_CLEANUP) {
        actions.push(Action::CleanupFinalizer(true));
    }
    let status = spoke.status.as_ref();
    let mut report = Report {
        pivot: Condition {
            type_: CONDITION_PIVOT_COMPLETE.to_string(),
            status: STATUS_TRUE.to_string(),
            reason: "AgentOwnsDayTwo".to_string(),
            message: "the agent upgrades and cleans up its spoke".to_string(),
            observed_generation: None,
            last_transition_time: Time(facts.now),
        },
        runs: None,
        deployment: None,
    };
    if facts.in_deployment {
        let seen = AgentDeploymentSeen::of(facts.running);
        if status.and_then(|s| s.agent_deployment.as_ref()) != Some(&seen) {
            report.deployment = Some(seen);
        }
    }
    // What its pod was started for, not what its Deployment asks for now: a new version that
    // never starts is never reported.
    if facts.running.is_some()
        && (status.and_then(|s| s.agent_version.as_deref()) != Some(facts.version)
            || status.and_then(|s| s.agent_config_hash.as_deref()) != facts.config_hash)
    {
        report.runs = Some((
            facts.version.to_string(),
            facts.config_hash.map(str::to_string),
        ));
    }
    actions.push(Action::Report(report));
    let Some(running) = facts.running else {
        return Decision {
            actions,
            unjoins: false,
        };
    };
    if let (false, Some(hub)) = (hub_as_spoke, facts.hub) {
        let name = spoke.name_any();
        let wanted = effective(spoke, hub, &BTreeMap::new());
        // The spoke URL is the installer's to set; the agent keeps the one it was given.
        let desired = agent_deployment(&name, &wanted, spoke_url_of(running));
        // The hub's rollout says when this spoke moves to a new agent: its reconciler writes the
        // agent it released the spoke to on the Spoke (a hub that does not, in its own status).
        let agent = wanted.agent.hash();
        let released = match status.and_then(|s| s.released_agent.as_deref()) {
            Some(released) => released == agent,
            None => crate::rollout::agent_released(hub, &name, &agent),
        };
        if !deployment_current(running, &desired) && released {
            actions.push(Action::Upgrade {
                name: running.name_any(),
                from: deployment_label(running, LABEL_AGENT_VERSION).map(str::to_string),
                to: deployment_label(&desired, LABEL_AGENT_VERSION).map(str::to_string),
                deployment: Box::new(desired),
            });
        }
    }
    Decision {
        actions,
        unjoins: false,
    }
}

/// How a pass ended, as the loop saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every action was done.
    Done,
    /// The agent unjoined its spoke.
    Unjoined,
    /// A write lost a race with another writer of the Spoke (409 Conflict).
    Conflict,
    /// Anything else failed.
    Failed,
}

/// What the loop does after a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait for the Spoke, its Hub or the cluster to change.
    AwaitChange,
    /// Try again after the agent's retry delay, even if nothing changes.
    Retry,
    /// Nothing is left to do: the loop ends.
    Stop,
}

/// What follows a pass that ended in `outcome`.
pub fn after(outcome: Outcome) -> Next {
    match outcome {
        Outcome::Done => Next::AwaitChange,
        Outcome::Unjoined => Next::Stop,
        // Someone wrote the Spoke meanwhile; its watch brings the fresh one.
        Outcome::Conflict => Next::AwaitChange,
        Outcome::Failed => Next::Retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spoke(extra: serde_json::Value) -> Spoke {
        let mut object = json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
            "metadata": {"name": "edge", "namespace": "fleetform-system"},
            "spec": {"hubRef": "hub", "kubeconfig": {"embedded": {}}},
        });
        merge(&mut object, extra);
        serde_json::from_value(object).expect("a Spoke")
    }

    fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
        match (into, from) {
            (serde_json::Value::Object(into), serde_json::Value::Object(from)) => {
                for (key, value) in from {
                    merge(into.entry(key).or_insert(serde_json::Value::Null), value);
                }
            }
            (into, from) => *into = from,
        }
    }

    fn hub(version: &str) -> Hub {
        serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Hub",
            "metadata": {"name": "hub", "namespace": "fleetform-system"},
            "spec": {"kubeconfig": {"embedded": {}}, "agent": {"version": version}},
        }))
        .expect("a Hub")
    }

    /// The Deployment the reconciler installs for `edge` under `hub`.
    fn installed(spoke: &Spoke, hub: &Hub) -> Deployment {
        agent_deployment(
            "edge",
            &effective(spoke, hub, &BTreeMap::new()),
            Some("https://edge:6443"),
        )
    }

    fn now() -> Timestamp {
        "2026-11-26T12:00:00Z".parse().unwrap()
    }

    fn facts<'a>(spoke: &'a Spoke) -> Facts<'a> {
        Facts {
            spoke,
            joined: true,
            running: None,
            in_deployment: false,
            hub: None,
            version: "0.1.0",
            config_hash: None,
            now: now(),
        }
    }

    /// The report of a joined agent: `PivotComplete`, and what it runs, if that is to be
    /// written.
    fn report_of(runs: Option<(&str, Option<&str>)>) -> Action {
        Action::Report(Report {
            pivot: Condition {
                type_: CONDITION_PIVOT_COMPLETE.to_string(),
                status: STATUS_TRUE.to_string(),
                reason: "AgentOwnsDayTwo".to_string(),
                message: "the agent upgrades and cleans up its spoke".to_string(),
                observed_generation: None,
                last_transition_time: Time(now()),
            },
            runs: runs.map(|(version, hash)| (version.to_string(), hash.map(str::to_string))),
            deployment: None,
        })
    }

    fn pivot() -> Action {
        report_of(None)
    }

    fn deleting(finalizers: &[&str], extra: serde_json::Value) -> Spoke {
        let mut spoke = spoke(extra);
        spoke.metadata.deletion_timestamp = Some(Time(now()));
        spoke.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        spoke
    }

    #[test]
    fn nothing_happens_before_the_agent_joins() {
        let spoke = spoke(json!({}));
        let facts = Facts {
            joined: false,
            ..facts(&spoke)
        };
        assert_eq!(decide(&facts), Decision::default());
    }

    #[test]
    fn a_joined_agent_takes_the_spoke_over_with_its_finalizer_and_pivot() {
        let spoke = spoke(json!({}));
        assert_eq!(
            decide(&facts(&spoke)).actions,
            [Action::CleanupFinalizer(true), pivot()]
        );
        let owned = Spoke {
            metadata: kube::api::ObjectMeta {
                finalizers: Some(vec![FINALIZER_SPOKE_CLEANUP.to_string()]),
                ..spoke.metadata.clone()
            },
            ..spoke.clone()
        };
        assert_eq!(
            decide(&facts(&owned)).actions,
            [pivot()],
            "the finalizer is added once"
        );
    }

    #[test]
    fn a_hub_as_spoke_agent_reports_but_neither_holds_a_finalizer_nor_upgrades() {
        let spoke = spoke(json!({"spec": {"kubeconfig": {"embedded": null, "inCluster": true}}}));
        assert!(spoke.spec.is_hub_as_spoke());
        let hub = hub("0.2.0");
        let running = installed(&spoke, &self::hub("0.1.0"));
        let facts = Facts {
            running: Some(&running),
            hub: Some(&hub),
            ..facts(&spoke)
        };
        assert_eq!(decide(&facts).actions, [report_of(Some(("0.1.0", None)))]);
    }

    #[test]
    fn the_version_is_reported_only_in_a_deployment_and_only_when_it_changed() {
        let spoke = spoke(json!({
            "metadata": {"finalizers": [FINALIZER_SPOKE_CLEANUP]},
            "status": {"agentVersion": "0.1.0", "agentConfigHash": "abc"},
        }));
        let hub = hub("0.1.0");
        let running = installed(&spoke, &hub);
        assert_eq!(
            decide(&Facts {
                config_hash: Some("abc"),
                ..facts(&spoke)
            })
            .actions,
            [pivot()],
            "an agent without a Deployment reports no version"
        );
        let reported = Facts {
            running: Some(&running),
            config_hash: Some("abc"),
            ..facts(&spoke)
        };
        assert_eq!(decide(&reported).actions, [pivot()]);
        let restarted = Facts {
            config_hash: Some("def"),
            ..reported
        };
        assert_eq!(
            decide(&restarted).actions,
            [report_of(Some(("0.1.0", Some("def"))))]
        );
    }

    #[test]
    fn the_deployment_the_agent_runs_in_is_reported_as_seen_when_it_changed_or_went() {
        let hub = hub("0.1.0");
        let mut running = installed(&spoke(json!({})), &hub);
        running.metadata.uid = Some("first".into());
        running.metadata.generation = Some(1);
        let spoke_reporting = |deployment: serde_json::Value| {
            spoke(json!({
                "metadata": {"finalizers": [FINALIZER_SPOKE_CLEANUP]},
                "status": {"agentVersion": "0.1.0", "agentDeployment": deployment},
            }))
        };
        let report = |spoke: &Spoke, running: Option<&Deployment>| {
            decide(&Facts {
                running,
                in_deployment: true,
                ..facts(spoke)
            })
            .actions
            .into_iter()
            .find_map(|action| match action {
                Action::Report(report) => Some((report.runs, report.deployment)),
                _ => None,
            })
            .filter(|written| *written != (None, None))
        };
        let seen = |uid: &str, generation: i64| AgentDeploymentSeen {
            uid: Some(uid.into()),
            generation: Some(generation),
        };
        let as_reported = spoke_reporting(json!({"uid": "first", "generation": 1}));
        assert_eq!(report(&as_reported, Some(&running)), None, "as reported");
        let mut edited = running.clone();
        edited.metadata.generation = Some(2);
        assert_eq!(
            report(&as_reported, Some(&edited)),
            Some((None, Some(seen("first", 2)))),
            "its spec changed"
        );
        let gone = Some((None, Some(AgentDeploymentSeen::default())));
        assert_eq!(report(&as_reported, None), gone, "removed");
        let mut deleting = running.clone();
        deleting.metadata.deletion_timestamp = Some(Time(now()));
        assert_eq!(report(&as_reported, Some(&deleting)), gone, "being removed");
        assert_eq!(
            report(&spoke_reporting(json!({})), None),
            None,
            "reported gone already"
        );
        let put_back = {
            let mut put_back = running.clone();
            put_back.metadata.uid = Some("second".into());
            put_back
        };
        assert_eq!(
            report(&spoke_reporting(json!({})), Some(&put_back)).and_then(|(_, seen)| seen),
            Some(seen("second", 1)),
            "put back"
        );
        let first_pass = spoke(json!({"metadata": {"finalizers": [FINALIZER_SPOKE_CLEANUP]}}));
        assert_eq!(
            report(&first_pass, Some(&running)),
            Some((Some(("0.1.0".into(), None)), Some(seen("first", 1)))),
            "the version and the Deployment in one write"
        );
    }

    #[test]
    fn the_agent_upgrades_itself_to_the_deployment_its_hub_calls_for() {
        let spoke = spoke(json!({"metadata": {"finalizers": [FINALIZER_SPOKE_CLEANUP]}}));
        let (old, new) = (hub("0.1.0"), hub("0.2.0"));
        let running = installed(&spoke, &old);
        let current = Facts {
            running: Some(&running),
            hub: Some(&old),
            ..facts(&spoke)
        };
        let upgrades = |facts: &Facts| {
            decide(facts)
                .actions
                .iter()
                .any(|action| matches!(action, Action::Upgrade { .. }))
        };
        assert!(
            !upgrades(&current),
            "a Deployment that is current is left alone"
        );
        let wanted = Facts {
            hub: Some(&new),
            ..current
        };
        let upgrade = decide(&wanted).actions.pop().expect("an action");
        let Action::Upgrade {
            name,
            from,
            to,
            deployment,
        } = upgrade
        else {
            panic!("not an upgrade: {upgrade:?}");
        };
        assert_eq!(
            (name.as_str(), from.as_deref(), to.as_deref()),
            ("fleetform-agent", Some("0.1.0"), Some("0.2.0"))
        );
        assert!(deployment_current(&deployment, &installed(&spoke, &new)));
        assert_eq!(
            spoke_url_of(&deployment),
            Some("https://edge:6443"),
            "the spoke URL it was given is kept"
        );
        let no_hub = Facts {
            hub: None,
            ..wanted
        };
        assert!(
            !upgrades(&no_hub),
            "without its Hub there is nothing to upgrade to"
        );
    }

    #[test]
    fn the_agent_upgrades_itself_only_once_its_hubs_rollout_releases_it() {
        let spoke = spoke(json!({"metadata": {"finalizers": [FINALIZER_SPOKE_CLEANUP]}}));
        let running = installed(&spoke, &hub("0.1.0"));
        let wanted = effective(&spoke, &hub("0.2.0"), &BTreeMap::new())
            .agent
            .hash();
        let rolling = |state: &str| -> Hub {
            let mut hub = serde_json::to_value(hub("0.2.0")).unwrap();
            merge(
                &mut hub,
                json!({
                    "spec": {"rollout": {"strategy": "Progressive"}},
                    "status": {"rollout": {"target": "0.2.0", "spokes": [
                        {"name": "edge", "target": "digest", "agent": wanted, "state": state},
                    ]}},
                }),
            );
            serde_json::from_value(hub).expect("a Hub")
        };
        let upgrades = |hub: &Hub| {
            decide(&Facts {
                running: Some(&running),
                hub: Some(hub),
                ..facts(&spoke)
            })
            .actions
            .iter()
            .any(|action| matches!(action, Action::Upgrade { .. }))
        };
        assert!(!upgrades(&rolling("pending")), "its turn has not come");
        assert!(upgrades(&rolling("inProgress")), "released");
    }

    #[test]
    fn the_agent_its_spoke_says_it_is_released_to_gates_the_upgrade_not_the_hubs_status() {
        let running = installed(&spoke(json!({})), &hub("0.1.0"));
        let new = hub("0.2.0");
        let wanted = effective(&spoke(json!({})), &new, &BTreeMap::new())
            .agent
            .hash();
        // The Hub's status says nothing of this spoke (as a stale copy would not): the Spoke's
        // `releasedAgent`, which the hub's reconciler writes, decides.
        let mut rolling = new.clone();
        rolling.spec.rollout.strategy = crate::api::fleet::RolloutStrategy::Progressive;
        let upgrades = |released: &str| {
            let spoke = spoke(json!({
                "metadata": {"finalizers": [FINALIZER_SPOKE_CLEANUP]},
                "status": {"releasedAgent": released},
            }));
            decide(&Facts {
                running: Some(&running),
                hub: Some(&rolling),
                ..facts(&spoke)
            })
            .actions
            .iter()
            .any(|action| matches!(action, Action::Upgrade { .. }))
        };
        assert!(upgrades(&wanted), "released to the agent its Hub calls for");
        assert!(
            !upgrades("an-earlier-agent"),
            "released to another agent only"
        );
    }

    #[test]
    fn a_deleted_spoke_is_unjoined_credentials_first_workload_last() {
        let spoke = deleting(&[FINALIZER_SPOKE_CLEANUP], json!({}));
        assert_eq!(
            decide(&facts(&spoke)),
            Decision {
                actions: vec![
                    Action::RemoveCredentials,
                    Action::CleanupFinalizer(false),
                    Action::RemoveWorkload {
                        purge_namespace: true
                    },
                ],
                unjoins: true,
            }
        );
        let not_joined = Facts {
            joined: false,
            ..facts(&spoke)
        };
        assert!(
            decide(&not_joined).unjoins,
            "an agent that lost its join still unjoins"
        );
    }

    #[test]
    fn an_unjoin_without_purge_leaves_the_agent_namespace_behind() {
        let spoke = deleting(
            &[FINALIZER_SPOKE_CLEANUP],
            json!({"spec": {"cleanup": {"purgeAgentNamespace": false}}}),
        );
        assert_eq!(
            decide(&facts(&spoke)).actions.last(),
            Some(&Action::RemoveWorkload {
                purge_namespace: false
            })
        );
    }

    #[test]
    fn a_deleted_spoke_waits_for_the_hub_preflight_and_leaves_the_hub_as_spoke_to_the_hub() {
        let preflight = deleting(
            &[FINALIZER_HUB_CLEANUP_PREFLIGHT, FINALIZER_SPOKE_CLEANUP],
            json!({}),
        );
        assert_eq!(decide(&facts(&preflight)), Decision::default());
        let not_taken_over = deleting(&[], json!({}));
        assert_eq!(decide(&facts(&not_taken_over)), Decision::default());
        let hub_as_spoke = deleting(
            &[FINALIZER_SPOKE_CLEANUP],
            json!({"spec": {"kubeconfig": {"embedded": null, "inCluster": true}}}),
        );
        assert_eq!(decide(&facts(&hub_as_spoke)), Decision::default());
    }

    #[test]
    fn a_failed_pass_is_retried_a_conflict_waits_for_the_watch_and_an_unjoin_ends_it() {
        assert_eq!(after(Outcome::Done), Next::AwaitChange);
        assert_eq!(after(Outcome::Conflict), Next::AwaitChange);
        assert_eq!(after(Outcome::Failed), Next::Retry);
        assert_eq!(after(Outcome::Unjoined), Next::Stop);
    }
}
