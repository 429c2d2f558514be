//! An unjoin on a hub whose namespaces take their time to go, as kube-apiserver's do: the
//! cluster's namespace terminates until the namespace controller has emptied it (forever while a
//! finalizer holds something in it). The lifecycle reconciler, as the hub ServiceAccount, deletes
//! it once and waits by watch; while a finalizer holds it, the Spoke names the object, the
//! finalizer and what to do, and so does `status`.

use crate::support;

use fleetform::api::fleet::{Phase, SYSTEM_NAMESPACE, Spoke};
use fleetform::api::vocabulary::{
    AGENT_NAMESPACE, BOOTSTRAP_HUB_KUBECONFIG_SECRET, CONDITION_UNJOINED, REASON_HELD_BY_FINALIZER,
};
use fleetform::api::{ManagedClusterAddOn, find_condition};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{
    Cluster, agent_config, declare_fleet_of_one, start_agent, start_hub_loops, start_reconciler,
    wait_deleted, wait_for,
};

/// DELETEs of namespaces the hub received since `before`.
fn namespace_deletes(
    hub: &Cluster,
    before: &fleetform_controlplane::requests::RequestCounts,
) -> u64 {
    hub.server
        .request_counts()
        .since(before)
        .iter()
        .filter(|(kind, _)| {
            kind.group.is_empty()
                && kind.resource == "namespaces"
                && kind.verb.to_string() == "delete"
        })
        .map(|(_, count)| count)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unjoin_waits_for_the_cluster_namespace_by_watch_and_names_what_holds_it() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let reconciler = start_reconciler(&hub).await;
    declare_fleet_of_one(&hub, &spoke, "spoke-a").await;
    wait_for(
        &Api::<Secret>::namespaced(spoke.client.clone(), AGENT_NAMESPACE),
        BOOTSTRAP_HUB_KUBECONFIG_SECRET,
        "the agent's bootstrap kubeconfig",
        |_| true,
    )
    .await;
    let _agent = start_agent(agent_config(&spoke, "spoke-a").await);
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    wait_for(&spokes, "spoke-a", "running", |spoke| {
        spoke.status.as_ref().and_then(|status| status.phase) == Some(Phase::Running)
    })
    .await;
    // An addon an OCM tool enabled, which its manager holds with a finalizer, and that manager
    // is not running.
    let foreign: ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
        "metadata": {"name": "foreign", "namespace": "spoke-a", "finalizers": ["example.com/hold"]},
        "spec": {"installNamespace": "foreign"},
    }))
    .unwrap();
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.client.clone(), "spoke-a");
    addons
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();

    // The spoke leaves the fleet.
    let before = hub.server.request_counts();
    spokes
        .delete("spoke-a", &DeleteParams::default())
        .await
        .unwrap();
    let held = wait_for(
        &spokes,
        "spoke-a",
        "the unjoin held by the addon",
        |spoke| {
            let conditions = &spoke.status.as_ref().unwrap().conditions;
            find_condition(conditions, CONDITION_UNJOINED)
                .is_some_and(|c| c.reason == REASON_HELD_BY_FINALIZER)
        },
    )
    .await;
    let conditions = &held.status.as_ref().unwrap().conditions;
    let message = &find_condition(conditions, CONDITION_UNJOINED)
        .unwrap()
        .message;
    for said in [
        "Namespace spoke-a (deleted at ",
        "is held: ManagedClusterAddOn spoke-a/foreign by finalizer example.com/hold",
        "the controller that owns each finalizer removes it",
        "kubectl patch KIND -n NAMESPACE NAME --type=merge",
    ] {
        assert!(message.contains(said), "{said} missing from {message}");
    }
    // `status` says so.
    let state = fleetform::status::gather("hub", &hub.hub_identity().await)
        .await
        .unwrap();
    let mut report = fleetform::status::Report::default();
    report.add(&state, Timestamp::now());
    let text = report.text();
    assert!(
        text.contains(&format!(
            "hub/spoke-a: {REASON_HELD_BY_FINALIZER}: Namespace spoke-a"
        )),
        "{text}"
    );
    // Waiting deletes nothing again: the namespace was deleted once.
    assert_eq!(namespace_deletes(&hub, &before), 1);

    // The finalizer goes: so do the namespace and the Spoke.
    let namespace = Api::<Namespace>::all(hub.client.clone())
        .get("spoke-a")
        .await
        .unwrap();
    addons
        .patch(
            "foreign",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    wait_deleted(&spokes, &held).await;
    wait_deleted(&Api::<Namespace>::all(hub.client.clone()), &namespace).await;
    assert_eq!(namespace_deletes(&hub, &before), 1);
    reconciler.stop().await;
}
