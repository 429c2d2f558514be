//! Progressive rollouts of a hub's agent, end to end on `fleetform up`'s clusters: spokes move one
//! at a time and those not released keep the agent they run; a spoke whose new agent never comes
//! up (an image from a registry that does not resolve) fails its progress deadline and halts the
//! rollout, which `paused: true` then `false` resumes.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fleetform::api::fleet::{Hub, SYSTEM_NAMESPACE, Spoke, SpokeRolloutState};
use fleetform::api::vocabulary::CONDITION_ROLLOUT_HALTED;
use fleetform::plan::desired::DEFAULT_AGENT_VERSION;
use fleetform::reconciler::install::{AGENT_DEPLOYMENT, LABEL_AGENT_VERSION};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use support::fleet::{ADDONS, Fleet, Repo, spoke};
use support::wait_for;

const NEW_VERSION: &str = "9.9.9";
const SPOKES: [&str; 3] = ["alpha", "beta", "gamma"];

/// The hub document (embedded, 1 s leases) with `agent_version` if any and `rollout` as its
/// `spec.rollout` (YAML indented by four).
fn hub(agent_version: Option<&str>, rollout: &str) -> String {
    let agent = agent_version
        .map(|version| format!("  agent:\n    version: {version}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: fleetform.io/v1alpha1
kind: Hub
metadata:
  name: hub
spec:
  kubeconfig:
    embedded: {{}}
  registration:
    leaseDurationSeconds: 1
{agent}  rollout:
{rollout}"
    )
}

/// A fleet of the hub with `rollout` and three spokes, each running and reporting its agent.
async fn fleet(rollout: &str) -> Fleet {
    let repo = Repo::new();
    let hub = hub(None, rollout);
    let docs: Vec<(String, String)> = SPOKES
        .iter()
        .map(|name| (format!("spokes/{name}.yaml"), spoke(name, "")))
        .collect();
    let mut files: Vec<(&str, Option<&str>)> = vec![
        ("hubs/hub.yaml", Some(&hub)),
        ("addons/addons.yaml", Some(ADDONS)),
    ];
    files.extend(
        docs.iter()
            .map(|(path, doc)| (path.as_str(), Some(doc.as_str()))),
    );
    repo.commit("a hub and three spokes", &files);
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    for name in SPOKES {
        fleet.wait_running(name).await;
        wait_for(
            &fleet.spokes(),
            name,
            "its agent reported",
            |spoke: &Spoke| reported(spoke) == Some(DEFAULT_AGENT_VERSION),
        )
        .await;
    }
    fleet
}

fn reported(spoke: &Spoke) -> Option<&str> {
    spoke.status.as_ref()?.agent_version.as_deref()
}

fn hubs(fleet: &Fleet) -> Api<Hub> {
    Api::namespaced(fleet.hub.clone(), SYSTEM_NAMESPACE)
}

/// Each spoke's rollout state, in name order.
fn states(hub: &Hub) -> Vec<(String, SpokeRolloutState)> {
    hub.status
        .as_ref()
        .and_then(|status| status.rollout.as_ref())
        .map(|rollout| {
            rollout
                .spokes
                .iter()
                .map(|entry| (entry.name.clone(), entry.state))
                .collect()
        })
        .unwrap_or_default()
}

fn state_of(hub: &Hub, name: &str) -> Option<SpokeRolloutState> {
    states(hub)
        .into_iter()
        .find(|(spoke, _)| spoke == name)
        .map(|(_, state)| state)
}

/// Counts, by watch, the most spokes ever in progress at once in the Hub's rollout.
fn most_in_progress(fleet: &Fleet) -> Arc<AtomicUsize> {
    let most = Arc::new(AtomicUsize::new(0));
    let seen = most.clone();
    let config = watcher::Config::default().fields("metadata.name=hub");
    let mut hubs = watcher(hubs(fleet), config).applied_objects().boxed();
    tokio::spawn(async move {
        while let Some(Ok(hub)) = hubs.next().await {
            let now = states(&hub)
                .iter()
                .filter(|(_, state)| *state == SpokeRolloutState::InProgress)
                .count();
            seen.fetch_max(now, Ordering::SeqCst);
        }
    });
    most
}

/// The version label of the agent Deployment on the spoke `name`.
async fn deployed_version(fleet: &Fleet, name: &str) -> Option<String> {
    let deployments: Api<Deployment> = Api::namespaced(
        fleet.spoke_client(name),
        fleetform::api::vocabulary::AGENT_NAMESPACE,
    );
    let deployment = deployments.get(AGENT_DEPLOYMENT).await.unwrap();
    deployment.labels().get(LABEL_AGENT_VERSION).cloned()
}

/// The Events about the Hub with `reason`.
async fn hub_events(fleet: &Fleet, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(fleet.hub.clone(), SYSTEM_NAMESPACE)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|event| {
            event.reason.as_deref() == Some(reason)
                && event
                    .regarding
                    .as_ref()
                    .is_some_and(|r| r.kind.as_deref() == Some("Hub"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progressive_rollout_moves_one_spoke_at_a_time_and_the_others_keep_their_agent() {
    // A bake of an hour holds the rollout after its first spoke.
    let holding = "    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 3600\n";
    let fleet = fleet(holding).await;
    let most = most_in_progress(&fleet);

    // What plan shows of the edit before it is committed: three waves of one spoke each.
    let bumped = hub(Some(NEW_VERSION), holding);
    std::fs::write(fleet.repo.path().join("hubs/hub.yaml"), &bumped).unwrap();
    let source = fleet.repo.path().display().to_string();
    let plan = fleet.fleetform(&["plan", &source]).await;
    let text = String::from_utf8_lossy(&plan.stdout);
    assert_eq!(plan.status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "rollout (Progressive): 3 spoke(s) upgrade their agent in 3 wave(s); the first wave touches 1 (33%)"
        ),
        "{text}"
    );
    assert!(text.contains("wave 1: alpha\n"), "{text}");
    assert!(text.contains("wave 3: gamma\n"), "{text}");
    let document = fleet.fleetform(&["plan", &source, "-o", "json"]).await;
    let document: serde_json::Value = serde_json::from_slice(&document.stdout).unwrap();
    assert_eq!(document["hubs"][0]["rollout"]["blastRadius"], 1);
    assert_eq!(
        document["hubs"][0]["rollout"]["waves"][1]["spokes"],
        serde_json::json!(["beta"])
    );

    fleet.repo.commit(
        "agent 9.9.9",
        &[("hubs/hub.yaml", Some(&hub(Some(NEW_VERSION), holding)))],
    );
    fleet.synced().await;

    let baking = wait_for(&hubs(&fleet), "hub", "alpha upgraded and baking", |hub| {
        hub.status
            .as_ref()
            .and_then(|status| status.rollout.as_ref())
            .and_then(|rollout| rollout.spokes.iter().find(|entry| entry.name == "alpha"))
            .is_some_and(|entry| {
                entry.state == SpokeRolloutState::InProgress && entry.updated_at.is_some()
            })
    })
    .await;
    let rollout = baking
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .unwrap();
    assert!(rollout.target.starts_with("9.9.9/"), "{}", rollout.target);
    assert_eq!(rollout.wave, Some(1));
    assert_eq!(
        states(&baking),
        [
            ("alpha".to_string(), SpokeRolloutState::InProgress),
            ("beta".to_string(), SpokeRolloutState::Pending),
            ("gamma".to_string(), SpokeRolloutState::Pending),
        ]
    );
    let spokes = fleet.spokes();
    assert_eq!(
        reported(&spokes.get("alpha").await.unwrap()),
        Some(NEW_VERSION)
    );
    let status = fleet.fleetform(&["status", &source]).await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!(
            "Rollout on hub hub to {}: 0/3 done, wave 1, in progress: alpha\n",
            rollout.target
        )),
        "{text}"
    );
    // Not released: their agents neither upgraded themselves nor were upgraded by the hub.
    for name in ["beta", "gamma"] {
        assert_eq!(
            reported(&spokes.get(name).await.unwrap()),
            Some(DEFAULT_AGENT_VERSION),
            "{name}"
        );
        assert_eq!(
            deployed_version(&fleet, name).await.as_deref(),
            Some(DEFAULT_AGENT_VERSION),
            "{name}"
        );
    }

    let brief = "    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 1\n";
    fleet.repo.commit(
        "a bake of a second",
        &[("hubs/hub.yaml", Some(&hub(Some(NEW_VERSION), brief)))],
    );
    fleet.synced().await;
    let done = wait_for(&hubs(&fleet), "hub", "every spoke through", |hub| {
        let rollout = hub.status.as_ref().and_then(|s| s.rollout.as_ref());
        rollout.is_some_and(|rollout| rollout.wave.is_none())
            && states(hub)
                .iter()
                .all(|(_, state)| *state == SpokeRolloutState::Succeeded)
    })
    .await;
    assert_eq!(states(&done).len(), 3);
    for name in SPOKES {
        assert_eq!(
            reported(&spokes.get(name).await.unwrap()),
            Some(NEW_VERSION),
            "{name}"
        );
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "maxConcurrency 1");
    let complete = hub_events(&fleet, "RolloutComplete").await;
    assert_eq!(complete.len(), 1, "{complete:?}");
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoke_whose_new_agent_never_comes_up_halts_the_rollout_until_paused_and_resumed() {
    let rollout = |paused: bool| {
        format!(
            "    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 1\n    progressDeadlineSeconds: 8\n    paused: {paused}\n"
        )
    };
    let fleet = fleet(&rollout(false)).await;
    // alpha goes first, to an image no registry serves.
    let broken = spoke(
        "alpha",
        "  agent:\n    image: registry.invalid/fleetform:9.9.9\n",
    );
    fleet.repo.commit(
        "agent 9.9.9",
        &[
            (
                "hubs/hub.yaml",
                Some(&hub(Some(NEW_VERSION), &rollout(false))),
            ),
            ("spokes/alpha.yaml", Some(&broken)),
        ],
    );
    fleet.synced().await;

    let halted = wait_for(&hubs(&fleet), "hub", "RolloutHalted", |hub: &Hub| {
        hub.status.as_ref().is_some_and(|status| {
            status
                .conditions
                .iter()
                .any(|c| c.type_ == CONDITION_ROLLOUT_HALTED && c.status == "True")
        })
    })
    .await;
    let condition = halted
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == CONDITION_ROLLOUT_HALTED)
        })
        .unwrap();
    assert!(
        condition
            .message
            .contains("alpha (not on the new agent within progressDeadlineSeconds (8 s))")
            || condition
                .message
                .contains("alpha (not Available within progressDeadlineSeconds (8 s))"),
        "{}",
        condition.message
    );
    assert_eq!(
        states(&halted),
        [
            ("alpha".to_string(), SpokeRolloutState::Failed),
            ("beta".to_string(), SpokeRolloutState::Pending),
            ("gamma".to_string(), SpokeRolloutState::Pending),
        ]
    );
    let warnings = hub_events(&fleet, CONDITION_ROLLOUT_HALTED).await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    for name in ["beta", "gamma"] {
        assert_eq!(
            reported(&fleet.spokes().get(name).await.unwrap()),
            Some(DEFAULT_AGENT_VERSION),
            "{name} was not released"
        );
    }

    // Pausing the halted rollout accepts its failure; unpausing resumes it.
    fleet.repo.commit(
        "pause",
        &[(
            "hubs/hub.yaml",
            Some(&hub(Some(NEW_VERSION), &rollout(true))),
        )],
    );
    fleet.synced().await;
    let paused = wait_for(&hubs(&fleet), "hub", "the halt accepted", |hub: &Hub| {
        hub.status
            .as_ref()
            .and_then(|status| status.rollout.as_ref())
            .is_some_and(|rollout| rollout.halted.is_none() && rollout.accepted_failures == 1)
    })
    .await;
    assert_eq!(state_of(&paused, "beta"), Some(SpokeRolloutState::Pending));
    fleet.repo.commit(
        "resume",
        &[(
            "hubs/hub.yaml",
            Some(&hub(Some(NEW_VERSION), &rollout(false))),
        )],
    );
    fleet.synced().await;
    let done = wait_for(&hubs(&fleet), "hub", "the others through", |hub: &Hub| {
        state_of(hub, "beta") == Some(SpokeRolloutState::Succeeded)
            && state_of(hub, "gamma") == Some(SpokeRolloutState::Succeeded)
    })
    .await;
    assert_eq!(state_of(&done, "alpha"), Some(SpokeRolloutState::Failed));
    let condition = done
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == CONDITION_ROLLOUT_HALTED)
        })
        .unwrap();
    assert_eq!(condition.status, "False");
    fleet.shutdown().await;
}
