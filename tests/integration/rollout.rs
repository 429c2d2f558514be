//! Progressive rollouts of a hub's agent, end to end on `fleetform up`'s clusters: spokes move one
//! at a time and those not released keep the agent they run; a spoke whose new agent never comes
//! up (an image from a registry that does not resolve) fails its progress deadline and halts the
//! rollout, which `paused: true` then `false` resumes. An addon enabled fleet-wide and a lease
//! duration changed reach the spokes the same way (the others keep what they have), and so does
//! an addon with a rollout of its own under a hub without one. And what the hub process's
//! `/metrics` says of a hub's rollout (`fleetform_rollout_*`) and of an addon's own
//! (`fleetform_addon_rollout_*`).

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fleetform::api::fleet::{
    Hub, Phase, RolloutStatus, SYSTEM_NAMESPACE, Spoke, SpokeRolloutState,
};
use fleetform::api::vocabulary::{CONDITION_RECONCILED, CONDITION_ROLLOUT_HALTED};
use fleetform::api::{ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn};
use fleetform::hub::process::{self, HubProcessConfig, RunningHub};
use fleetform::plan::desired::{ADDON_SPEC_ANNOTATION, DEFAULT_AGENT_VERSION, effective};
use fleetform::reconciler::install::{AGENT_DEPLOYMENT, LABEL_AGENT_VERSION};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::fleet::{ADDONS, Fleet, Repo, rolling_hub, spoke};
use support::{http_get, wait_for, wait_for_metric};
use tokio_util::sync::CancellationToken;

const NEW_VERSION: &str = "9.9.9";
const SPOKES: [&str; 3] = ["alpha", "beta", "gamma"];

/// A fleet of the hub with `rollout` and three spokes, each running and reporting its agent.
async fn fleet(rollout: &str) -> Fleet {
    let repo = Repo::new();
    let hub = rolling_hub(None, rollout);
    let docs: Vec<(String, String)> = SPOKES
        .iter()
        .map(|name| (format!("spokes/{name}.yaml"), spoke(name, "")))
        .collect();
    let mut files: Vec<(&str, Option<&str>)> = vec![
        ("hubs/hub.yaml", Some(&hub)),
        ("addons/addons.yaml", Some(ADDONS)),
    ];
    files.extend(as_files(&docs));
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

/// Whether the spoke `name` runs the Hub's rollout target and bakes: in progress, its target
/// reached.
fn is_baking(hub: &Hub, name: &str) -> bool {
    hub.status
        .as_ref()
        .and_then(|status| status.rollout.as_ref())
        .and_then(|rollout| rollout.spokes.iter().find(|entry| entry.name == name))
        .is_some_and(|entry| {
            entry.state == SpokeRolloutState::InProgress && entry.updated_at.is_some()
        })
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
    let bumped = rolling_hub(Some(NEW_VERSION), holding);
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
        &[(
            "hubs/hub.yaml",
            Some(&rolling_hub(Some(NEW_VERSION), holding)),
        )],
    );
    fleet.synced().await;

    let baking = wait_for(&hubs(&fleet), "hub", "alpha upgraded and baking", |hub| {
        is_baking(hub, "alpha")
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
        &[(
            "hubs/hub.yaml",
            Some(&rolling_hub(Some(NEW_VERSION), brief)),
        )],
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
                Some(&rolling_hub(Some(NEW_VERSION), &rollout(false))),
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
            Some(&rolling_hub(Some(NEW_VERSION), &rollout(true))),
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
            Some(&rolling_hub(Some(NEW_VERSION), &rollout(false))),
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

/// The halt's condition, when the rollout is halted.
fn rollout_halted(hub: &Hub) -> Option<String> {
    hub.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_ROLLOUT_HALTED && c.status == "True")
        .map(|c| c.message.clone())
}

/// Every spoke has succeeded to a target of agent 9.9.9, and nothing halts the rollout.
fn all_on_new_version(hub: &Hub) -> bool {
    let rollout = hub.status.as_ref().and_then(|s| s.rollout.as_ref());
    rollout.is_some_and(|rollout| {
        rollout.target.starts_with("9.9.9/") && rollout.halted.is_none() && rollout.wave.is_none()
    }) && states(hub).len() == SPOKES.len()
        && states(hub)
            .iter()
            .all(|(_, state)| *state == SpokeRolloutState::Succeeded)
        && rollout_halted(hub).is_none()
}

/// The image of the agent Deployment on the spoke `name`.
async fn deployed_image(fleet: &Fleet, name: &str) -> Option<String> {
    let deployments: Api<Deployment> = Api::namespaced(
        fleet.spoke_client(name),
        fleetform::api::vocabulary::AGENT_NAMESPACE,
    );
    let deployment = deployments.get(AGENT_DEPLOYMENT).await.unwrap();
    deployment
        .spec?
        .template
        .spec?
        .containers
        .first()?
        .image
        .clone()
}

/// Issue 31's acceptance: a rollout halted by a spoke whose new agent never starts is undone by
/// the next commit alone. The spoke keeps the agent it ran while the new one cannot start (its
/// Deployment rolls with none unavailable), so that agent takes the commit that restores the
/// image: every spoke ends on the new version, the halt cleared, nothing deleted by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_halted_by_an_agent_that_never_starts_is_recovered_by_one_commit() {
    let rollout = "    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 1\n    progressDeadlineSeconds: 8\n    paused: false\n";
    let fleet = fleet(rollout).await;
    let broken = spoke(
        "alpha",
        "  agent:\n    image: registry.invalid/fleetform:9.9.9\n",
    );
    fleet.repo.commit(
        "agent 9.9.9, alpha's from a registry that does not resolve",
        &[
            (
                "hubs/hub.yaml",
                Some(&rolling_hub(Some(NEW_VERSION), rollout)),
            ),
            ("spokes/alpha.yaml", Some(&broken)),
        ],
    );
    fleet.synced().await;
    let halted = wait_for(&hubs(&fleet), "hub", "RolloutHalted", |hub: &Hub| {
        rollout_halted(hub).is_some()
    })
    .await;
    assert_eq!(state_of(&halted, "alpha"), Some(SpokeRolloutState::Failed));
    // The agent alpha ran still runs: the spoke is Running on the old version.
    let alpha = fleet.spokes().get("alpha").await.unwrap();
    assert_eq!(reported(&alpha), Some(DEFAULT_AGENT_VERSION));
    assert_eq!(
        alpha.status.as_ref().and_then(|status| status.phase),
        Some(Phase::Running)
    );

    fleet.repo.commit(
        "alpha's image restored",
        &[
            (
                "hubs/hub.yaml",
                Some(&rolling_hub(Some(NEW_VERSION), rollout)),
            ),
            ("spokes/alpha.yaml", Some(&spoke("alpha", ""))),
        ],
    );
    fleet.synced().await;
    wait_for(
        &hubs(&fleet),
        "hub",
        "every spoke on 9.9.9, the halt cleared",
        all_on_new_version,
    )
    .await;
    for name in SPOKES {
        assert_eq!(
            reported(&fleet.spokes().get(name).await.unwrap()),
            Some(NEW_VERSION),
            "{name}"
        );
        assert_eq!(
            deployed_version(&fleet, name).await.as_deref(),
            Some(NEW_VERSION),
            "{name}"
        );
        let image = deployed_image(&fleet, name).await.unwrap_or_default();
        assert!(!image.contains(".invalid"), "{name}: {image}");
    }
    fleet.shutdown().await;
}

/// A spoke left with no agent (an earlier fleetform's agent upgraded itself by `Recreate` to an
/// image that never starts, so nothing runs there to take a commit) is given the agent the
/// fleet declares by the hub, once the next commit changes what it is to run and it has been
/// without an agent for `progressDeadlineSeconds`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_installs_the_declared_agent_where_none_runs_after_the_next_commit() {
    let rollout = |paused: bool| {
        format!(
            "    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 1\n    progressDeadlineSeconds: 8\n    paused: {paused}\n"
        )
    };
    let fleet = fleet(&rollout(false)).await;
    // The commit to 9.9.9, paused: no spoke moves by itself.
    let broken = spoke(
        "alpha",
        "  agent:\n    image: registry.invalid/fleetform:9.9.9\n",
    );
    fleet.repo.commit(
        "agent 9.9.9, paused",
        &[
            (
                "hubs/hub.yaml",
                Some(&rolling_hub(Some(NEW_VERSION), &rollout(true))),
            ),
            ("spokes/alpha.yaml", Some(&broken)),
        ],
    );
    fleet.synced().await;
    // What such an agent left on alpha: the broken agent's Deployment, replaced rather than
    // rolled. Its agent stops; the new one never starts.
    let spoke_object = fleet.spokes().get("alpha").await.unwrap();
    let hub = hubs(&fleet).get("hub").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(
        fleet.spoke_client("alpha"),
        fleetform::api::vocabulary::AGENT_NAMESPACE,
    );
    let running = deployments.get(AGENT_DEPLOYMENT).await.unwrap();
    let rendered = fleetform::reconciler::install::agent_deployment(
        "alpha",
        &effective(&spoke_object, &hub, &BTreeMap::new()),
        fleetform::reconciler::install::spoke_url_of(&running),
    );
    let mut left = running.clone();
    left.metadata.labels = rendered.metadata.labels;
    left.spec = rendered.spec;
    if let Some(spec) = left.spec.as_mut() {
        spec.strategy = Some(serde_json::from_value(json!({"type": "Recreate"})).unwrap());
    }
    deployments
        .replace(AGENT_DEPLOYMENT, &PostParams::default(), &left)
        .await
        .unwrap();
    wait_for(
        &fleet.spokes(),
        "alpha",
        "no agent renews its lease",
        |spoke: &Spoke| {
            spoke.status.as_ref().and_then(|status| status.phase) == Some(Phase::Unhealthy)
        },
    )
    .await;

    // One commit: alpha's image restored, the rollout resumed.
    fleet.repo.commit(
        "alpha's image restored",
        &[
            (
                "hubs/hub.yaml",
                Some(&rolling_hub(Some(NEW_VERSION), &rollout(false))),
            ),
            ("spokes/alpha.yaml", Some(&spoke("alpha", ""))),
        ],
    );
    fleet.synced().await;
    wait_for(
        &hubs(&fleet),
        "hub",
        "every spoke on 9.9.9, the halt cleared",
        all_on_new_version,
    )
    .await;
    assert_eq!(
        reported(&fleet.spokes().get("alpha").await.unwrap()),
        Some(NEW_VERSION)
    );
    let image = deployed_image(&fleet, "alpha").await.unwrap_or_default();
    assert!(!image.contains(".invalid"), "{image}");
    let said: Vec<Event> = Api::<Event>::namespaced(fleet.hub.clone(), SYSTEM_NAMESPACE)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|event| {
            event.reason.as_deref() == Some("AgentReinstalled")
                && event
                    .regarding
                    .as_ref()
                    .is_some_and(|r| r.name.as_deref() == Some("alpha"))
        })
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    let note = said[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("the hub installed it (version 9.9.9)"),
        "{note}"
    );
    fleet.shutdown().await;
}

/// A hub that is its own spoke is upgraded by the hub (no agent upgrades itself there) as soon
/// as its rollout releases it: it is done well within its progress deadline, as any spoke.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_that_is_its_own_spoke_moves_as_soon_as_its_rollout_releases_it() {
    let rollout = "    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 1\n    progressDeadlineSeconds: 10\n";
    let local = "apiVersion: fleetform.io/v1alpha1
kind: Spoke
metadata:
  name: local
spec:
  hubRef: hub
  kubeconfig:
    inCluster: true
";
    let repo = Repo::new();
    repo.commit(
        "a hub that is its own spoke, and alpha",
        &[
            ("hubs/hub.yaml", Some(&rolling_hub(None, rollout))),
            ("spokes/alpha.yaml", Some(&spoke("alpha", ""))),
            ("spokes/local.yaml", Some(local)),
        ],
    );
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    for name in ["alpha", "local"] {
        fleet.wait_running(name).await;
        wait_for(
            &fleet.spokes(),
            name,
            "its agent reported",
            |spoke: &Spoke| reported(spoke) == Some(DEFAULT_AGENT_VERSION),
        )
        .await;
    }
    fleet.repo.commit(
        "agent 9.9.9",
        &[(
            "hubs/hub.yaml",
            Some(&rolling_hub(Some(NEW_VERSION), rollout)),
        )],
    );
    fleet.synced().await;
    let done = wait_for(&hubs(&fleet), "hub", "both on 9.9.9", |hub: &Hub| {
        let rollout = hub.status.as_ref().and_then(|s| s.rollout.as_ref());
        rollout.is_some_and(|rollout| {
            rollout.target.starts_with("9.9.9/")
                && rollout.spokes.len() == 2
                && rollout.spokes.iter().all(|entry| {
                    entry.state != SpokeRolloutState::Pending
                        && entry.state != SpokeRolloutState::InProgress
                })
        })
    })
    .await;
    assert_eq!(
        states(&done),
        [
            ("alpha".to_string(), SpokeRolloutState::Succeeded),
            ("local".to_string(), SpokeRolloutState::Succeeded),
        ]
    );
    assert_eq!(
        reported(&fleet.spokes().get("local").await.unwrap()),
        Some(NEW_VERSION)
    );
    fleet.shutdown().await;
}

/// Each renewal of the cluster lease of `cluster` on the hub seen from now on: who renewed it.
fn lease_renewals(fleet: &Fleet, cluster: &str) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(fleet.hub.clone(), cluster);
    let config = watcher::Config::default().fields("metadata.name=managed-cluster-lease");
    let mut events = watcher(leases, config).applied_objects().boxed();
    let (renewed, renewals) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut last = None;
        while let Some(Ok(lease)) = events.next().await {
            let spec = lease.spec.unwrap_or_default();
            let at = spec.renew_time.map(|at| at.0);
            if at != last {
                last = at;
                let holder = spec.holder_identity.unwrap_or_default();
                if renewed.send(holder).is_err() {
                    return;
                }
            }
        }
    });
    renewals
}

/// The next `count` renewals `renewals` hears.
async fn next_renewals(
    renewals: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    count: usize,
) -> Vec<String> {
    let mut seen = Vec::new();
    tokio::time::timeout(support::PATIENCE, async {
        while seen.len() < count {
            seen.push(renewals.recv().await.expect("the lease is watched"));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{count} renewals of the cluster lease; saw {seen:?}"));
    seen
}

/// Two agents of one spoke running at once (as while its Deployment rolls from one agent to the
/// next) never renew its cluster lease together: only the holder of the agent's election acts;
/// the other is ready, and takes over once the first stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_of_one_spoke_never_renew_its_lease_together() {
    let fleet = fleet("    strategy: All\n").await;
    let deployments: Api<Deployment> = Api::namespaced(
        fleet.spoke_client("alpha"),
        fleetform::api::vocabulary::AGENT_NAMESPACE,
    );
    let mut renewals = lease_renewals(&fleet, "alpha");
    let first = next_renewals(&mut renewals, 1).await.remove(0);
    assert!(
        first.starts_with("fleetform-agent-"),
        "renewed by its pod: {first}"
    );

    // A second Deployment of the same agent, as a person copying it would make.
    let mut twin = deployments.get(AGENT_DEPLOYMENT).await.unwrap();
    twin.metadata = kube::api::ObjectMeta {
        name: Some("twin".to_string()),
        namespace: twin.metadata.namespace.clone(),
        labels: twin.metadata.labels.clone(),
        ..Default::default()
    };
    twin.status = None;
    deployments
        .create(&PostParams::default(), &twin)
        .await
        .unwrap();
    wait_for(
        &deployments,
        "twin",
        "its agent ready",
        |deployment: &Deployment| {
            deployment
                .status
                .as_ref()
                .and_then(|status| status.available_replicas)
                == Some(1)
        },
    )
    .await;
    let both_running = next_renewals(&mut renewals, 3).await;
    assert!(
        both_running.iter().all(|holder| *holder == first),
        "only {first} renews while both run: {both_running:?}"
    );

    // The first agent stops (its Deployment deleted): the twin takes over, and it alone renews.
    deployments
        .delete(AGENT_DEPLOYMENT, &Default::default())
        .await
        .unwrap();
    let mut handed_over = next_renewals(&mut renewals, 1).await;
    while handed_over.last() == Some(&first) {
        handed_over.extend(next_renewals(&mut renewals, 1).await);
    }
    let second = handed_over.last().cloned().unwrap_or_default();
    assert!(second.starts_with("twin-"), "{handed_over:?}");
    let after = next_renewals(&mut renewals, 3).await;
    assert!(
        after.iter().all(|holder| *holder == second),
        "only {second} renews once it took over: {after:?}"
    );
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoke_whose_cluster_is_destroyed_turns_unhealthy_and_the_rollout_passes_it_over() {
    let rollout = "    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 1\n    offline: Skip\n";
    let fleet = fleet(rollout).await;
    // alpha, first in the rollout's order, is gone: the hub cannot reach it and its lease lapses.
    assert!(fleet.running().stop_spoke("alpha").await);
    // Unhealthy, and the pass that cannot reach it says so.
    let unreachable = |spoke: &Spoke| {
        let status = spoke.status.as_ref();
        status.and_then(|s| s.phase) == Some(Phase::Unhealthy)
            && status.is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == CONDITION_RECONCILED
                        && c.status == "False"
                        && c.reason == "SpokeUnreachable"
                })
            })
    };
    wait_for(
        &fleet.spokes(),
        "alpha",
        "Unhealthy and unreachable",
        unreachable,
    )
    .await;

    fleet.repo.commit(
        "agent 9.9.9",
        &[(
            "hubs/hub.yaml",
            Some(&rolling_hub(Some(NEW_VERSION), rollout)),
        )],
    );
    fleet.synced().await;
    let done = wait_for(&hubs(&fleet), "hub", "the others through", |hub: &Hub| {
        let to_new = hub.status.as_ref().and_then(|s| s.rollout.as_ref());
        to_new.is_some_and(|rollout| rollout.target.starts_with("9.9.9/"))
            && state_of(hub, "beta") == Some(SpokeRolloutState::Succeeded)
            && state_of(hub, "gamma") == Some(SpokeRolloutState::Succeeded)
    })
    .await;
    assert_eq!(
        state_of(&done, "alpha"),
        Some(SpokeRolloutState::SkippedOffline),
        "{:?}",
        states(&done)
    );
    let halted = done
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.halted.clone());
    assert_eq!(halted, None);
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addon_enabled_fleet_wide_reaches_one_spoke_at_a_time_and_completes() {
    // Waited on if offline at its turn (1 s leases can lapse on a loaded machine): the order
    // stays the names', which is what the test follows (skipping is rollout::decide's unit tests').
    let rollout = "    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 1\n    offline: Wait\n";
    let fleet = fleet(rollout).await;
    metrics_one_spoke_at_a_time(&fleet, "rollout", |hub| {
        hub.status.as_ref()?.rollout.as_ref()
    })
    .await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addon_with_a_rollout_of_its_own_reaches_one_spoke_at_a_time_though_its_hub_has_none() {
    let fleet = fleet("    strategy: All\n").await;
    let own = ADDONS.replace(
        "  installNamespace: metrics-agent\n",
        "  installNamespace: metrics-agent\n  rollout:\n    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: 1\n    offline: Wait\n",
    );
    fleet.repo.commit(
        "metrics rolls out by itself",
        &[("addons/addons.yaml", Some(&own))],
    );
    fleet.synced().await;
    metrics_one_spoke_at_a_time(&fleet, "rollout of addon metrics", |hub| {
        let status = hub.status.as_ref()?;
        status
            .addon_rollouts
            .iter()
            .find(|kept| kept.addon == "metrics")
            .map(|kept| &kept.rollout)
    })
    .await;
    let hub = hubs(&fleet).get("hub").await.unwrap();
    assert!(
        hub.status.and_then(|status| status.rollout).is_none(),
        "the hub keeps no rollout of its own"
    );
    fleet.shutdown().await;
}

/// Documents at their paths, as a commit writes them.
fn as_files(docs: &[(String, String)]) -> Vec<(&str, Option<&str>)> {
    docs.iter()
        .map(|(path, doc)| (path.as_str(), Some(doc.as_str())))
        .collect()
}

/// Commits a lease duration of 2 s for every spoke and waits for the sync to apply it.
async fn leases_of_2_s(fleet: &Fleet) {
    let longer: Vec<(String, String)> = SPOKES
        .iter()
        .map(|name| {
            (
                format!("spokes/{name}.yaml"),
                spoke(name, "  leaseDurationSeconds: 2\n"),
            )
        })
        .collect();
    fleet.repo.commit("leases of 2 s", &as_files(&longer));
    fleet.synced().await;
}

/// Changes seen by watches, each at its resourceVersion, and a wake on each.
#[derive(Default)]
struct Changes {
    seen: std::sync::Mutex<Vec<(u64, String)>>,
    changed: tokio::sync::Notify,
}

/// What a watch of `api` saw change, by resourceVersion: `describe` says what an object is now
/// (`None`: nothing the test follows), and a change of that is recorded once the watch has
/// listed. Returns when it has.
async fn record_changes<K>(
    api: Api<K>,
    describe: impl Fn(&K) -> Option<String> + Send + 'static,
    changes: Arc<Changes>,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (listed, is_listed) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut listed = Some(listed);
        let mut last: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut events = watcher(api, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            let object = match event {
                watcher::Event::InitDone => {
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                    continue;
                }
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => object,
                _ => continue,
            };
            let now = describe(&object);
            let before = last.insert(object.name_any(), now.clone());
            if listed.is_none()
                && before.as_ref() != Some(&now)
                && let Some(now) = now
            {
                let rv = object.resource_version().unwrap_or_default();
                changes
                    .seen
                    .lock()
                    .unwrap()
                    .push((rv.parse().unwrap(), now));
                changes.changed.notify_waiters();
            }
        }
    });
    is_listed.await.expect("the watch lists");
}

/// A commit changing every spoke is written under its Hub's mark (`fleetform.io/writing-spokes`),
/// on before the first Spoke's write and off after the last, so the hub's rollout, which waits
/// while it is on, starts from all of them rather than from whichever Spoke was written first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_changing_every_spoke_writes_them_under_their_hub_s_mark() {
    let fleet = fleet("    strategy: Progressive\n    maxConcurrency: 1\n").await;
    let seen: Arc<Changes> = Arc::default();
    let mark = fleetform::rollout::ANNOTATION_WRITING_SPOKES;
    record_changes(
        hubs(&fleet),
        move |hub: &Hub| {
            let on = hub.annotations().contains_key(mark);
            Some(if on { "mark on" } else { "mark off" }.to_string())
        },
        seen.clone(),
    )
    .await;
    record_changes(
        fleet.spokes(),
        |spoke: &Spoke| {
            let lease = spoke.spec.lease_duration_seconds?;
            Some(format!("{} lease {lease}", spoke.name_any()))
        },
        seen.clone(),
    )
    .await;
    leases_of_2_s(&fleet).await;

    let wanted = [
        "mark on",
        "alpha lease 2",
        "beta lease 2",
        "gamma lease 2",
        "mark off",
    ];
    let changes = tokio::time::timeout(support::PATIENCE, async {
        loop {
            let notified = seen.changed.notified();
            let mut changes = seen.seen.lock().unwrap().clone();
            if changes.len() >= wanted.len() {
                changes.sort();
                return changes;
            }
            notified.await;
        }
    })
    .await
    .expect("the mark on and off and three Spokes written");
    let what: Vec<&str> = changes.iter().map(|(_, what)| what.as_str()).collect();
    assert_eq!(what.first(), Some(&"mark on"), "{changes:?}");
    assert_eq!(what.last(), Some(&"mark off"), "{changes:?}");
    let mut spokes = what[1..what.len() - 1].to_vec();
    spokes.sort();
    assert_eq!(spokes, wanted[1..4], "{changes:?}");
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_duration_change_reaches_a_spoke_at_its_turn_and_the_others_keep_theirs() {
    let rollout = |bake: u32| {
        format!("    strategy: Progressive\n    maxConcurrency: 1\n    minSuccessSeconds: {bake}\n")
    };
    let fleet = fleet(&rollout(3600)).await;
    let lease_of = |name: &'static str| {
        let clusters = Api::<ManagedCluster>::all(fleet.hub.clone());
        async move {
            clusters
                .get(name)
                .await
                .unwrap()
                .spec
                .lease_duration_seconds
        }
    };
    leases_of_2_s(&fleet).await;

    // alpha's turn: it has the new lease and bakes an hour; the others keep theirs.
    wait_for(&hubs(&fleet), "hub", "alpha baking", |hub: &Hub| {
        is_baking(hub, "alpha")
    })
    .await;
    assert_eq!(lease_of("alpha").await, Some(2));
    for name in ["beta", "gamma"] {
        assert_eq!(lease_of(name).await, Some(1), "{name} is not released");
        let spoke = fleet.spokes().get(name).await.unwrap();
        assert_eq!(
            spoke
                .status
                .and_then(|status| status.applied)
                .map(|applied| applied.lease_duration_seconds),
            Some(1),
            "{name}"
        );
    }

    // A bake of a second: the rest follow, and every cluster has the new lease.
    fleet.repo.commit(
        "a bake of a second",
        &[("hubs/hub.yaml", Some(&rolling_hub(None, &rollout(1))))],
    );
    fleet.synced().await;
    for name in SPOKES {
        wait_for(
            &hubs(&fleet),
            "hub",
            &format!("{name} done"),
            move |hub: &Hub| state_of(hub, name) == Some(SpokeRolloutState::Succeeded),
        )
        .await;
        assert_eq!(lease_of(name).await, Some(2), "{name}");
    }
    fleet.shutdown().await;
}

/// Enables `metrics` on every spoke in one commit and checks that they gain it one after
/// another, each once the one before is done, as the rollout `of` the Hub (titled `title` in
/// plan) says, and that the rollout completes.
async fn metrics_one_spoke_at_a_time(
    fleet: &Fleet,
    title: &str,
    of: fn(&Hub) -> Option<&RolloutStatus>,
) {
    let before = wait_for(&hubs(fleet), "hub", "a rollout kept", move |hub: &Hub| {
        of(hub).is_some_and(|rollout| rollout.spokes.len() == 3)
    })
    .await;
    let target_before = of(&before).unwrap().target.clone();
    let with_metrics: Vec<(String, String)> = SPOKES
        .iter()
        .map(|name| {
            (
                format!("spokes/{name}.yaml"),
                spoke(name, "  addons:\n  - metrics\n"),
            )
        })
        .collect();

    // What plan shows of the edit: three waves of one spoke, each gaining metrics.
    for (path, doc) in &with_metrics {
        std::fs::write(fleet.repo.path().join(path), doc).unwrap();
    }
    let source = fleet.repo.path().display().to_string();
    let plan = fleet.fleetform(&["plan", &source]).await;
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.contains(&format!(
            "{title} (Progressive): 3 spoke(s) change in 3 wave(s); the first wave touches 1 (33%)"
        )),
        "{text}"
    );
    assert!(
        text.contains("change addons +metrics: alpha, beta, gamma\n"),
        "{text}"
    );

    // Each time a spoke gains the addon: the Hub's rollout as it then stands.
    let gained: Arc<std::sync::Mutex<Vec<(String, Hub)>>> = Arc::default();
    let seen = gained.clone();
    let addons = Api::<ManagedClusterAddOn>::all(fleet.hub.clone());
    let hub_api = hubs(fleet);
    let config = watcher::Config::default().fields("metadata.name=metrics");
    let mut created = watcher(addons, config).applied_objects().boxed();
    tokio::spawn(async move {
        let mut known = std::collections::BTreeSet::new();
        while let Some(Ok(addon)) = created.next().await {
            let spoke = addon.namespace().unwrap_or_default();
            if known.insert(spoke.clone()) {
                let hub = hub_api.get("hub").await.unwrap();
                seen.lock().unwrap().push((spoke, hub));
            }
        }
    });
    fleet
        .repo
        .commit("metrics everywhere", &as_files(&with_metrics));
    fleet.synced().await;

    // A spoke at a time, each with the patience of one.
    for name in SPOKES {
        let target_before = target_before.clone();
        wait_for(&hubs(fleet), "hub", &format!("{name} done"), move |hub| {
            of(hub).is_some_and(|rollout| {
                rollout.target != target_before
                    && rollout.spokes.iter().any(|entry| {
                        entry.name == name && entry.state == SpokeRolloutState::Succeeded
                    })
            })
        })
        .await;
    }
    let done = wait_for(&hubs(fleet), "hub", "metrics on every spoke", move |hub| {
        of(hub).is_some_and(|rollout| {
            rollout.target != target_before
                && rollout.wave.is_none()
                && rollout
                    .spokes
                    .iter()
                    .all(|entry| entry.state == SpokeRolloutState::Succeeded)
        })
    })
    .await;
    let targets: BTreeMap<String, String> = of(&done)
        .unwrap()
        .spokes
        .iter()
        .cloned()
        .map(|entry| (entry.name, entry.target))
        .collect();
    let gained = gained.lock().unwrap().clone();
    assert_eq!(
        gained
            .iter()
            .map(|(spoke, _)| spoke.as_str())
            .collect::<Vec<_>>(),
        SPOKES,
        "one after another, in rollout order"
    );
    for (index, (spoke, hub)) in gained.iter().enumerate() {
        let rollout = of(hub).unwrap();
        let entry_of = |name: &str| {
            rollout
                .spokes
                .iter()
                .find(|entry| entry.name == name)
                .unwrap()
        };
        // The spoke gained it because its turn came for this very target...
        let entry = entry_of(spoke);
        assert_eq!(entry.target, targets[spoke], "{spoke}: {rollout:?}");
        assert!(
            matches!(
                entry.state,
                SpokeRolloutState::InProgress | SpokeRolloutState::Succeeded
            ),
            "{spoke}: {rollout:?}"
        );
        // ...after every spoke that gained it before was done.
        for (earlier, _) in &gained[..index] {
            assert_eq!(
                entry_of(earlier).state,
                SpokeRolloutState::Succeeded,
                "{earlier} before {spoke}: {rollout:?}"
            );
        }
    }
    for name in SPOKES {
        let spoke = fleet.spokes().get(name).await.unwrap();
        let applied = spoke.status.and_then(|s| s.applied).unwrap();
        assert_eq!(
            applied
                .addons
                .iter()
                .map(|addon| addon.name.as_str())
                .collect::<Vec<_>>(),
            ["metrics"],
            "{name}"
        );
        assert!(applied.unavailable_addons.is_empty(), "{name}");
    }
}

/// A hub process serving `/metrics` on a free port, leading at once, that knows no hub URL: the
/// Spoke passes of the lifecycle reconciler stop before they reach a spoke, so the Spokes' status
/// stays as the test writes it, standing in for their agents.
async fn metered_hub(hub: &support::Cluster) -> (RunningHub, CancellationToken) {
    let stop = CancellationToken::new();
    let config = HubProcessConfig {
        known_endpoint: Default::default(),
        admin_addr: Some("127.0.0.1:0".parse().unwrap()),
        ..support::hub_process_config(hub).await
    };
    let running = process::start(config, stop.clone())
        .await
        .expect("the hub process starts");
    (running, stop)
}

/// Creates the fleetform object (a Hub or a Spoke) `name` on `cluster`, with an embedded
/// kubeconfig and `spec` besides.
async fn create<K>(cluster: &support::Cluster, name: &str, spec: serde_json::Value) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let mut object = json!({
        "apiVersion": "fleetform.io/v1alpha1",
        "kind": K::kind(&()),
        "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE},
        "spec": spec,
    });
    object["spec"]["kubeconfig"] = json!({"embedded": {}});
    Api::<K>::namespaced(cluster.client.clone(), SYSTEM_NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(object).unwrap(),
        )
        .await
        .unwrap()
}

/// The line of `series` (name and labels, exactly) on `/metrics`, if any.
fn line<'a>(metrics: &'a str, series: &str) -> Option<&'a str> {
    metrics.lines().find(|line| {
        line.strip_prefix(series)
            .is_some_and(|rest| rest.starts_with(' '))
    })
}

/// Each spoke rollout state's series of the hub `hub`, with its value.
fn spokes_by_state(metrics: &str) -> Vec<String> {
    [
        "pending",
        "inProgress",
        "succeeded",
        "failed",
        "skippedOffline",
    ]
    .iter()
    .map(|state| {
        line(
            metrics,
            &format!("fleetform_rollout_spokes{{hub=\"hub\",state=\"{state}\"}}"),
        )
        .unwrap_or_else(|| panic!("no series for {state} in\n{metrics}"))
        .to_string()
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hubs_metrics_count_its_rollouts_spokes_by_state_wave_halt_and_most_in_progress() {
    let cluster = support::Cluster::start().await;
    cluster.namespace(SYSTEM_NAMESPACE).await;
    let (running, stop) = metered_hub(&cluster).await;
    let admin = running.admin_addr().expect("admin endpoint served");
    let hubs: Api<Hub> = Api::namespaced(cluster.client.clone(), SYSTEM_NAMESPACE);
    let rollout = |deadline: u32| json!({"strategy": "Progressive", "maxConcurrency": 1, "progressDeadlineSeconds": deadline});
    let hub: Hub = create(&cluster, "hub", json!({"rollout": rollout(3600)})).await;
    // alpha offline, beta and gamma on the old agent, zeta already on the new one.
    let spokes: Api<Spoke> = Api::namespaced(cluster.client.clone(), SYSTEM_NAMESPACE);
    for name in ["alpha", "beta", "gamma", "zeta"] {
        let spoke: Spoke = create(&cluster, name, json!({"hubRef": "hub"})).await;
        let wanted = effective(&spoke, &hub, &BTreeMap::new()).agent.hash();
        let (phase, running) = match name {
            "alpha" => ("Unhealthy", "old".to_string()),
            "zeta" => ("Running", wanted),
            _ => ("Running", "old".to_string()),
        };
        // What the reconciler would report of a joined spoke: no addons, the hub's lease.
        let applied = json!({"leaseDurationSeconds": 60});
        let status =
            json!({"status": {"phase": phase, "agentConfigHash": running, "applied": applied}});
        spokes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }

    // beta is released; alpha passed over while offline; gamma waits its turn.
    let released = wait_for(&hubs, "hub", "beta released", |hub: &Hub| {
        state_of(hub, "beta") == Some(SpokeRolloutState::InProgress) && states(hub).len() == 4
    })
    .await;
    let wave = released
        .status
        .as_ref()
        .and_then(|status| status.rollout.as_ref())
        .and_then(|rollout| rollout.wave)
        .expect("a wave runs");
    let wave_series = "fleetform_rollout_wave{hub=\"hub\"}";
    wait_for_metric(admin, wave_series, f64::from(wave)).await;
    let (_, metrics) = http_get(admin, "/metrics").await;
    assert_eq!(
        spokes_by_state(&metrics),
        [
            "fleetform_rollout_spokes{hub=\"hub\",state=\"pending\"} 1",
            "fleetform_rollout_spokes{hub=\"hub\",state=\"inProgress\"} 1",
            "fleetform_rollout_spokes{hub=\"hub\",state=\"succeeded\"} 1",
            "fleetform_rollout_spokes{hub=\"hub\",state=\"failed\"} 0",
            "fleetform_rollout_spokes{hub=\"hub\",state=\"skippedOffline\"} 1",
        ]
    );
    assert_eq!(
        line(&metrics, wave_series),
        Some(format!("{wave_series} {wave}").as_str())
    );
    assert_eq!(
        line(&metrics, "fleetform_rollout_halted{hub=\"hub\"}"),
        Some("fleetform_rollout_halted{hub=\"hub\"} 0")
    );
    assert_eq!(
        line(&metrics, "fleetform_rollout_max_in_progress{hub=\"hub\"}"),
        Some("fleetform_rollout_max_in_progress{hub=\"hub\"} 1")
    );

    // A deadline of a second fails beta, past maxFailures 0: the rollout halts. The most in
    // progress at once stays what it was.
    let spec = json!({"spec": {"rollout": rollout(1)}});
    hubs.patch("hub", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    wait_for_metric(admin, "fleetform_rollout_halted{hub=\"hub\"}", 1.0).await;
    let (_, metrics) = http_get(admin, "/metrics").await;
    assert_eq!(
        spokes_by_state(&metrics),
        [
            "fleetform_rollout_spokes{hub=\"hub\",state=\"pending\"} 1",
            "fleetform_rollout_spokes{hub=\"hub\",state=\"inProgress\"} 0",
            "fleetform_rollout_spokes{hub=\"hub\",state=\"succeeded\"} 1",
            "fleetform_rollout_spokes{hub=\"hub\",state=\"failed\"} 1",
            "fleetform_rollout_spokes{hub=\"hub\",state=\"skippedOffline\"} 1",
        ]
    );
    assert_eq!(
        line(&metrics, "fleetform_rollout_max_in_progress{hub=\"hub\"}"),
        Some("fleetform_rollout_max_in_progress{hub=\"hub\"} 1")
    );
    assert!(
        line(&metrics, "fleetform_hub_leader").is_some(),
        "the hub's own metrics are served beside them: {metrics}"
    );
    stop.cancel();
    running.stopped().await;
}

/// The rollout of `metrics` on the hub `hub`, as its status keeps it.
fn metrics_rollout(hub: &Hub) -> Option<&RolloutStatus> {
    hub.status
        .as_ref()?
        .addon_rollouts
        .iter()
        .find(|kept| kept.addon == "metrics")
        .map(|kept| &kept.rollout)
}

/// Publishes the AddOn `metrics` on `cluster` as sync does (its ClusterManagementAddOn with the
/// spec annotation), with `rollout` as its own if any.
async fn publish_metrics(cluster: &support::Cluster, rollout: Option<serde_json::Value>) {
    let mut spec = json!({"installNamespace": "metrics-agent"});
    if let Some(rollout) = rollout {
        spec["rollout"] = rollout;
    }
    Api::<ClusterManagementAddOn>::all(cluster.client.clone())
        .patch(
            "metrics",
            &PatchParams::apply("fleetform-test").force(),
            &Patch::Apply(json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ClusterManagementAddOn",
                "metadata": {"name": "metrics", "annotations": {ADDON_SPEC_ANNOTATION: spec.to_string()}},
                "spec": {"addOnMeta": {"displayName": "metrics"}},
            })),
        )
        .await
        .expect("publish the addon");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hubs_metrics_count_an_addons_own_rollout_apart_until_it_ends() {
    let cluster = support::Cluster::start().await;
    cluster.namespace(SYSTEM_NAMESPACE).await;
    let (running, stop) = metered_hub(&cluster).await;
    let admin = running.admin_addr().expect("admin endpoint served");
    publish_metrics(
        &cluster,
        Some(json!({"strategy": "Progressive", "maxConcurrency": 1, "progressDeadlineSeconds": 3600})),
    )
    .await;
    // The hub rolls out all at once: only the addon has a rollout.
    let hubs: Api<Hub> = Api::namespaced(cluster.client.clone(), SYSTEM_NAMESPACE);
    create::<Hub>(&cluster, "hub", json!({})).await;
    // Every spoke is to have metrics and has it nowhere yet; alpha is offline.
    let spokes: Api<Spoke> = Api::namespaced(cluster.client.clone(), SYSTEM_NAMESPACE);
    for name in ["alpha", "beta", "gamma"] {
        create::<Spoke>(
            &cluster,
            name,
            json!({"hubRef": "hub", "addons": ["metrics"]}),
        )
        .await;
        let phase = if name == "alpha" {
            "Unhealthy"
        } else {
            "Running"
        };
        let applied = json!({"leaseDurationSeconds": 60});
        let status =
            json!({"status": {"phase": phase, "agentConfigHash": "any", "applied": applied}});
        spokes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }

    // beta gains metrics first; alpha is passed over while offline; gamma waits its turn. The
    // hub counts before it writes what it decided.
    let released = wait_for(&hubs, "hub", "beta released", |hub: &Hub| {
        metrics_rollout(hub).is_some_and(|rollout| {
            rollout.spokes.len() == 3
                && rollout.spokes.iter().any(|entry| {
                    entry.name == "beta" && entry.state == SpokeRolloutState::InProgress
                })
        })
    })
    .await;
    let wave = metrics_rollout(&released)
        .and_then(|rollout| rollout.wave)
        .expect("a wave runs");
    let (_, metrics) = http_get(admin, "/metrics").await;
    let series = |name: &str, labels: &str| {
        format!("fleetform_addon_rollout_{name}{{hub=\"hub\",addon=\"metrics\"{labels}}}")
    };
    for (state, count) in [
        ("pending", 1),
        ("inProgress", 1),
        ("succeeded", 0),
        ("failed", 0),
        ("skippedOffline", 1),
    ] {
        let state_series = series("spokes", &format!(",state=\"{state}\""));
        assert_eq!(
            line(&metrics, &state_series),
            Some(format!("{state_series} {count}").as_str()),
            "{metrics}"
        );
    }
    for (name, value) in [("wave", wave), ("halted", 0), ("max_in_progress", 1)] {
        let named = series(name, "");
        assert_eq!(
            line(&metrics, &named),
            Some(format!("{named} {value}").as_str()),
            "{metrics}"
        );
    }
    assert!(
        !metrics.contains("fleetform_rollout_spokes{"),
        "the hub has no rollout of its own to count: {metrics}"
    );

    // The addon's rollout ends (it rolls out at once from now on): its series go with it.
    publish_metrics(&cluster, None).await;
    wait_for(&hubs, "hub", "no addon rollout kept", |hub: &Hub| {
        hub.status
            .as_ref()
            .is_some_and(|status| status.addon_rollouts.is_empty())
    })
    .await;
    let (_, metrics) = http_get(admin, "/metrics").await;
    assert!(
        !metrics
            .lines()
            .any(|line| line.starts_with("fleetform_addon_rollout_")),
        "{metrics}"
    );
    stop.cancel();
    running.stopped().await;
}
