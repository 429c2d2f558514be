//! Notifications of what happens on a sync's hub: a spoke going Unknown and back is two notices,
//! a rollout halting is one (and the FleetSync's `RolloutHalted` condition and Event, until it
//! resumes), and a sync that restarts does not announce again what it finds.

use crate::support;
use crate::trust::{Received, receiver};

use std::time::Duration;

use fleetform::api::fleet::{FleetSync, SYSTEM_NAMESPACE};
use fleetform::api::vocabulary::{CONDITION_AVAILABLE, CONDITION_ROLLOUT_HALTED};
use fleetform::api::{Hub, ManagedCluster};
use fleetform::sync::{RunningSync, SyncConfig};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, wait_for};
use tokio_util::sync::CancellationToken;

/// A sync of the example fleet (hub `hub`) on `hub`, serving metrics on a free port.
async fn start_sync(hub: &Cluster) -> (RunningSync, CancellationToken) {
    let stop = CancellationToken::new();
    let config = SyncConfig {
        lease_duration: Duration::from_secs(2),
        metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
        // Every transition is a message of its own here; the window has its own unit tests.
        notify_window: Duration::ZERO,
        ..SyncConfig::new(hub.hub_identity().await, "only")
    };
    let sync = fleetform::sync::start(config, stop.clone()).await.unwrap();
    (sync, stop)
}

/// Writes spoke `name`'s Available condition as the hub's loops would.
async fn set_available(clusters: &Api<ManagedCluster>, name: &str, status: &str, reason: &str) {
    let patch = json!({"status": {"conditions": [{
        "type": CONDITION_AVAILABLE, "status": status, "reason": reason,
        "message": format!("set by the test: {reason}"),
        "lastTransitionTime": "2026-11-26T00:00:00Z",
    }]}});
    clusters
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Writes the Hub's `RolloutHalted` condition as the Hub controller would.
async fn set_halted(hubs: &Api<Hub>, status: &str, message: &str) {
    let patch = json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "Hub",
        "status": {"conditions": [{
            "type": CONDITION_ROLLOUT_HALTED, "status": status,
            "reason": if status == "True" { "MaxFailuresExceeded" } else { "Progressing" },
            "message": message, "lastTransitionTime": "2026-11-26T00:00:00Z",
        }]},
    });
    hubs.patch_status(
        "hub",
        &PatchParams::apply("test-rollout").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn spokes_going_unknown_and_back_and_a_halted_rollout_are_notified_once_each() {
    let hub = Cluster::start().await;
    hub.namespace(SYSTEM_NAMESPACE).await;
    let (addr, mut received) = receiver(0).await;
    let secrets: Api<Secret> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "ops-hook"},
        "data": {"address": ByteString(format!("http://{addr}/generic").into_bytes())},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let (dir, _repo) = support::example_fleet_repo();
    let (sync, stop) = start_sync(&hub).await;
    let fleetsyncs: Api<FleetSync> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let object: FleetSync = serde_json::from_value(json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
        "metadata": {"name": "fleet", "namespace": SYSTEM_NAMESPACE},
        "spec": {
            "repo": dir.path().display().to_string(), "ref": "main", "path": "fleet",
            "intervalSeconds": 3600,
            "notify": [{"type": "generic", "secretRef": {"name": "ops-hook"}}],
        },
    }))
    .unwrap();
    fleetsyncs
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let mut next = async || -> Received {
        tokio::time::timeout(support::PATIENCE, received.recv())
            .await
            .expect("a notification")
            .unwrap()
    };
    // The sync watches its hub before it first syncs: from the applied commit on, it sees every
    // change.
    assert_eq!(next().await.body["event"], "Applied");

    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let cluster: ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "edge"}, "spec": {"hubAcceptsClient": false},
    }))
    .unwrap();
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    // First seen Available: remembered, not news; a status write that changes nothing neither.
    set_available(&clusters, "edge", "True", "ManagedClusterAvailable").await;
    set_available(&clusters, "edge", "True", "ManagedClusterAvailable").await;
    set_available(
        &clusters,
        "edge",
        "Unknown",
        "ManagedClusterLeaseUpdateStopped",
    )
    .await;
    let gone = next().await.body;
    assert_eq!(gone["event"], "SpokeUnavailable");
    assert_eq!(gone["subject"], json!({"kind": "Spoke", "name": "edge"}));
    assert_eq!(gone["reason"], "ManagedClusterLeaseUpdateStopped");
    assert_eq!(gone["fleetSync"], "fleet");
    set_available(&clusters, "edge", "True", "ManagedClusterAvailable").await;
    let back = next().await.body;
    assert_eq!(back["event"], "SpokeAvailable");
    assert_eq!(
        back["message"],
        "spoke edge is Available again (it was Unknown)"
    );

    // The rollout halts: one notice, and the FleetSync says so with an Event.
    let hubs: Api<Hub> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    wait_for(&hubs, "hub", "the sync wrote the Hub", |_| true).await;
    let failed = "2 of 2 spoke(s) failed, more than maxFailures 1 allows (1): edge (agent never Available), local-cluster (agent never Available)";
    set_halted(&hubs, "True", failed).await;
    let halted = next().await.body;
    assert_eq!(halted["event"], "RolloutHalted");
    assert_eq!(halted["subject"], json!({"kind": "Hub", "name": "hub"}));
    assert!(
        halted["message"].as_str().unwrap().contains(failed),
        "{halted}"
    );
    let condition = |fleetsync: &FleetSync| {
        fleetsync
            .status
            .as_ref()
            .and_then(|status| {
                status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == CONDITION_ROLLOUT_HALTED)
            })
            .map(|c| (c.status.clone(), c.message.clone()))
    };
    let shown = wait_for(&fleetsyncs, "fleet", "RolloutHalted True", move |fs| {
        condition(fs).is_some_and(|(status, _)| status == "True")
    })
    .await;
    let (_, message) = condition(&shown).unwrap();
    assert!(
        message.contains("hub hub") && message.contains("edge (agent never Available)"),
        "{message}"
    );
    let events: Api<Event> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let halt_events = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|event| {
            event.reason.as_deref() == Some(CONDITION_ROLLOUT_HALTED)
                && event.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("FleetSync")
        })
        .count();
    assert_eq!(halt_events, 1, "one Event on the FleetSync");

    // A restart finds the halted rollout and the spoke as they are: nothing is announced again.
    stop.cancel();
    sync.stopped().await;
    let (sync, stop) = start_sync(&hub).await;
    support::wait_for_metric(
        sync.metrics_addr().unwrap(),
        "fleetform_sync_syncs_total{result=\"unchanged\"}",
        1.0,
    )
    .await;
    // The next news is the next change, not a repeat of the halt or of the spoke.
    set_halted(&hubs, "False", "failures are within maxFailures").await;
    let resumed = next().await.body;
    assert_eq!(resumed["event"], "RolloutResumed");
    wait_for(&fleetsyncs, "fleet", "RolloutHalted False", move |fs| {
        condition(fs).is_some_and(|(status, _)| status == "False")
    })
    .await;
    stop.cancel();
    sync.stopped().await;
    assert!(
        received.try_recv().is_err(),
        "nothing else was sent: {:?}",
        received.try_recv()
    );
    hub.server.shutdown().await;
}
