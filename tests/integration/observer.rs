//! The hub's observer of poll-mode spokes against a real embedded spoke (seed 002, DESIGN §4.5):
//! every Krake state transition that a spoke's API can produce — nodes under pressure or not
//! ready, the spoke's API server shut down and brought back (after and before retries run out) —
//! and the observer's restart when its Spoke changes or is deleted. (FAILING_METRICS needs a
//! metrics provider, which fleetform does not poll.)

use crate::support;

use fleetform::api::fleet::{
    AvailabilityMode, AvailabilitySpec, KubeconfigSource, SYSTEM_NAMESPACE, SecretKeyRef, Spoke,
    SpokeSpec,
};
use fleetform::hub::observer_loop::CONDITION_ONLINE;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, watcher};
use serde_json::json;
use support::{Cluster, PATIENCE, start_hub_loops, wait_deleted};
use tokio::sync::mpsc;

/// Follows the Spoke's observed state: one message per change of the condition's reason.
/// Returns once the watch is established, so no transition is missed.
async fn follow_states(hub: &Cluster, name: &'static str) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        let mut last = None;
        let mut events = watcher(spokes, config).boxed();
        while let Some(Ok(event)) = events.next().await {
            let spoke = match event {
                watcher::Event::InitDone => {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                    continue;
                }
                watcher::Event::Apply(spoke) | watcher::Event::InitApply(spoke) => spoke,
                watcher::Event::Init | watcher::Event::Delete(_) => continue,
            };
            let reason = spoke
                .status
                .iter()
                .flat_map(|status| &status.conditions)
                .find(|c| c.type_ == CONDITION_ONLINE)
                .map(|c| c.reason.clone());
            if reason.is_some() && reason != last {
                last.clone_from(&reason);
                if tx.send(reason.unwrap_or_default()).is_err() {
                    return;
                }
            }
        }
    });
    tokio::time::timeout(PATIENCE, ready_rx)
        .await
        .expect("the state watch starts")
        .expect("the state watch runs");
    rx
}

async fn expect_state(states: &mut mpsc::UnboundedReceiver<String>, expected: &str) {
    let state = tokio::time::timeout(PATIENCE, states.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {expected}"))
        .expect("state watch runs");
    assert_eq!(state, expected);
}

fn poll_spoke(interval: i32) -> Spoke {
    Spoke::new(
        "polled",
        SpokeSpec {
            hub_ref: "hub".into(),
            kubeconfig: KubeconfigSource {
                secret_ref: Some(SecretKeyRef {
                    namespace: SYSTEM_NAMESPACE.into(),
                    name: "polled-kubeconfig".into(),
                    key: "kubeconfig".into(),
                }),
                ..Default::default()
            },
            lease_duration_seconds: None,
            cluster_claims_max: None,
            agent: None,
            addons: Vec::new(),
            availability: AvailabilitySpec {
                mode: AvailabilityMode::Poll,
                poll_interval_seconds: interval,
                backoff: 1,
                backoff_delay_seconds: 1,
                backoff_limit: 1,
            },
            cleanup: Default::default(),
            taints: Vec::new(),
            cluster_set: None,
        },
    )
}

async fn set_node_conditions(nodes: &Api<Node>, conditions: &[(&str, &str)]) {
    let conditions: Vec<_> = conditions
        .iter()
        .map(|(type_, status)| json!({"type": type_, "status": status}))
        .collect();
    nodes
        .patch_status(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": conditions}})),
        )
        .await
        .expect("patch node status");
}

#[tokio::test]
async fn observer_walks_krakes_states_on_a_real_spoke() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    hub.namespace(SYSTEM_NAMESPACE).await;
    let secrets: Api<Secret> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "polled-kubeconfig"},
    }))
    .unwrap();
    let secret = Secret {
        data: Some(
            [(
                "kubeconfig".to_string(),
                ByteString(spoke.kubeconfig().into_bytes()),
            )]
            .into(),
        ),
        ..secret
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let _loops = start_hub_loops(&hub).await;
    let mut states = follow_states(&hub, "polled").await;

    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    spokes
        .create(&PostParams::default(), &poll_spoke(1))
        .await
        .unwrap();
    expect_state(&mut states, "PENDING").await;
    expect_state(&mut states, "ONLINE").await;

    let nodes: Api<Node> = Api::all(spoke.client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap(),
        )
        .await
        .unwrap();
    set_node_conditions(&nodes, &[("DiskPressure", "True"), ("Ready", "True")]).await;
    expect_state(&mut states, "UNHEALTHY").await;
    set_node_conditions(&nodes, &[("DiskPressure", "False"), ("Ready", "False")]).await;
    expect_state(&mut states, "NOTREADY").await;
    set_node_conditions(&nodes, &[("DiskPressure", "False"), ("Ready", "True")]).await;
    expect_state(&mut states, "ONLINE").await;

    // The spoke's API server goes away: one retry (backoffLimit 1), then OFFLINE.
    let stopped = spoke.stop().await;
    expect_state(&mut states, "DEGRADED").await;
    expect_state(&mut states, "OFFLINE").await;

    // It comes back on the same address: CONNECTING, then ONLINE.
    let back = stopped.start().await;
    expect_state(&mut states, "CONNECTING").await;
    expect_state(&mut states, "ONLINE").await;

    // Updating the Spoke restarts its observer from PENDING; now it retries forever.
    spokes
        .patch(
            "polled",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"availability": {"backoffLimit": -1}}})),
        )
        .await
        .unwrap();
    expect_state(&mut states, "PENDING").await;
    expect_state(&mut states, "ONLINE").await;

    // Down again: DEGRADED for as long as it takes, and straight back to ONLINE.
    let stopped = back.stop().await;
    expect_state(&mut states, "DEGRADED").await;
    let _back = stopped.start().await;
    expect_state(&mut states, "ONLINE").await;

    // Deleting the Spoke stops its observer: the same Spoke created again gets a new one.
    let polled = spokes.get("polled").await.unwrap();
    spokes.delete("polled", &Default::default()).await.unwrap();
    wait_deleted(&spokes, &polled).await;
    spokes
        .create(&PostParams::default(), &poll_spoke(1))
        .await
        .unwrap();
    expect_state(&mut states, "PENDING").await;
    expect_state(&mut states, "ONLINE").await;
}
