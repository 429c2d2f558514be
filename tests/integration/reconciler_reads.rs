//! What a lifecycle pass reads from the reconciler's watches instead of asking the hub: its
//! ManagedCluster, its cluster's addons and its bootstrap tokens; and what it reads
//! only while the Spoke is deleted: the cluster's namespace and ManifestWorks. A pass runs about
//! ten times while a spoke joins, so each read per pass was about ten requests per spoke,
//! 100,000 for a fleet of 10,000 (issue 33).

use crate::support;

use fleetform::api::ManagedCluster;
use fleetform::api::fleet::{Hub, SYSTEM_NAMESPACE, Spoke};
use fleetform_controlplane::requests::{RequestCounts, RequestKind, Verb};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, declare_fleet_of_one, start_reconciler, wait_for};

/// The requests `cluster` received since `before` that `keep` keeps.
fn counted(cluster: &Cluster, before: &RequestCounts, keep: impl Fn(&RequestKind) -> bool) -> u64 {
    cluster
        .server
        .request_counts()
        .since(before)
        .iter()
        .filter(|(kind, _)| keep(kind))
        .map(|(_, count)| count)
        .sum()
}

/// The requests of `verb` on `group`'s `resource` the hub received since `before`.
fn requests(hub: &Cluster, before: &RequestCounts, verb: Verb, group: &str, resource: &str) -> u64 {
    counted(hub, before, |kind| {
        kind.verb == verb && kind.group == group && kind.resource == resource
    })
}

/// Waits until a pass has reported the Spoke's current generation.
async fn passed(spokes: &Api<Spoke>, name: &str) -> Spoke {
    wait_for(spokes, name, "a pass on its generation", |spoke| {
        spoke.status.as_ref().and_then(|s| s.observed_generation) == spoke.metadata.generation
    })
    .await
}

/// Declares leases of `seconds` on the Spoke `spoke-a`: a new generation.
async fn declare_lease(spokes: &Api<Spoke>, seconds: i32) {
    spokes
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"leaseDurationSeconds": seconds}})),
        )
        .await
        .unwrap();
}

/// Declares leases of `seconds` on the Spoke `spoke-a` and waits until a pass has reported it.
async fn lease_declared(spokes: &Api<Spoke>, seconds: i32) -> Spoke {
    declare_lease(spokes, seconds).await;
    passed(spokes, "spoke-a").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoke_passes_read_from_the_watches_not_by_a_request_each() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    // The spoke's cluster registered (as its agent would have), so a pass has one to read.
    let cluster: ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "spoke-a"},
        "spec": {"hubAcceptsClient": false},
    }))
    .unwrap();
    Api::<ManagedCluster>::all(hub.client.clone())
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    let _reconciler = start_reconciler(&hub).await;
    declare_fleet_of_one(&hub, &spoke, "spoke-a").await;
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    passed(&spokes, "spoke-a").await;

    // Each change of the Spoke's spec is a new generation, which a pass reads and reports.
    let before = hub.server.request_counts();
    for seconds in [20, 30, 40] {
        let seen = lease_declared(&spokes, seconds).await;
        assert_eq!(seen.spec.lease_duration_seconds, Some(seconds));
    }
    let asked = |verb, group, resource| requests(&hub, &before, verb, group, resource);
    let ocm_cluster = "cluster.open-cluster-management.io";
    let ocm_addon = "addon.open-cluster-management.io";
    let ocm_work = "work.open-cluster-management.io";
    for (verb, group, resource, read) in [
        (
            Verb::Get,
            ocm_cluster,
            "managedclusters",
            "the ManagedCluster",
        ),
        (
            Verb::List,
            ocm_addon,
            "managedclusteraddons",
            "the cluster's addons",
        ),
        (Verb::List, "", "secrets", "the spoke's bootstrap tokens"),
        (
            Verb::Get,
            "",
            "namespaces",
            "the cluster namespace, read only to unjoin",
        ),
        (
            Verb::List,
            ocm_work,
            "manifestworks",
            "the ManifestWorks, read only to unjoin",
        ),
    ] {
        assert_eq!(
            asked(verb, group, resource),
            0,
            "three passes read {read} from the hub instead of a watch's store"
        );
    }
}

/// A joined spoke whose lease duration changes in git gets it on its cluster and reports it in
/// one write of its status, with the generation it read: the pass that wrote it onto the cluster
/// says so, where the pass that write woke said it in a second write (10,000 more at 10,000
/// spokes for a fleet's lease change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_change_is_reported_in_one_status_write() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let clusters = Api::<ManagedCluster>::all(hub.client.clone());
    let cluster: ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "spoke-a"},
        "spec": {"hubAcceptsClient": true},
    }))
    .unwrap();
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    clusters
        .patch_status(
            "spoke-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "ManagedClusterJoined", "status": "True", "reason": "ManagedClusterJoined",
                "message": "joined", "lastTransitionTime": "2026-11-28T00:00:00Z"}]}})),
        )
        .await
        .unwrap();
    let _reconciler = start_reconciler(&hub).await;
    declare_fleet_of_one(&hub, &spoke, "spoke-a").await;
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let lease_applied = |seconds: i32| {
        move |spoke: &Spoke| {
            let status = spoke.status.as_ref();
            status.and_then(|s| s.observed_generation) == spoke.metadata.generation
                && status
                    .and_then(|s| s.applied.as_ref())
                    .is_some_and(|applied| applied.lease_duration_seconds == seconds)
        }
    };
    // The Spoke sets none: its Hub's.
    let first_lease = Api::<Hub>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .get("hub")
        .await
        .unwrap()
        .spec
        .registration
        .lease_duration_seconds;
    wait_for(
        &spokes,
        "spoke-a",
        "the declared lease applied",
        lease_applied(first_lease),
    )
    .await;

    let before = hub.server.request_counts();
    let wanted = first_lease + 20;
    declare_lease(&spokes, wanted).await;
    wait_for(
        &spokes,
        "spoke-a",
        "the new lease applied",
        lease_applied(wanted),
    )
    .await;
    let on_cluster = clusters.get("spoke-a").await.unwrap();
    assert_eq!(on_cluster.spec.lease_duration_seconds, Some(wanted));
    assert_eq!(
        requests(&hub, &before, Verb::Patch, "fleetform.io", "spokes/status"),
        1,
        "the new generation and the lease it applied, in one write"
    );
}

/// The dry runs of `spoke`'s agent Deployment and its reads since `before`.
fn deployment_requests(spoke: &Cluster, before: &RequestCounts) -> (u64, u64) {
    let dry_runs = counted(spoke, before, |kind| {
        kind.verb == Verb::Patch
            && kind.dry_run
            && kind.group == "apps"
            && kind.resource == "deployments"
    });
    (
        dry_runs,
        requests(spoke, before, Verb::Get, "apps", "deployments"),
    )
}

/// A pass that reads a spoke asks it whether the agent Deployment needs anything (a
/// server-side dry run of the whole Deployment) only when the Deployment or the one wanted
/// changed since it was installed or last found as wanted: each of a joining spoke's two or
/// three reads after the install asked, 26,000 dry runs at 10,000 spokes (issue 33). An edit on
/// the spoke is still seen, and put back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoke_is_asked_whether_its_agent_needs_anything_only_once_it_changed() {
    use fleetform::api::vocabulary::AGENT_NAMESPACE;
    use fleetform::reconciler::install::AGENT_DEPLOYMENT;
    use k8s_openapi::api::apps::v1::Deployment;

    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _reconciler = start_reconciler(&hub).await;
    declare_fleet_of_one(&hub, &spoke, "spoke-a").await;
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(spoke.client.clone(), AGENT_NAMESPACE);
    let installed = wait_for(
        &deployments,
        AGENT_DEPLOYMENT,
        "the agent installed",
        |_| true,
    )
    .await;
    let wanted_replicas = installed.spec.as_ref().and_then(|spec| spec.replicas);
    passed(&spokes, "spoke-a").await;

    // No agent runs here (nothing starts its pods), so every pass reads the spoke.
    let before = spoke.server.request_counts();
    for seconds in [20, 30, 40] {
        lease_declared(&spokes, seconds).await;
    }
    let (dry_runs, reads) = deployment_requests(&spoke, &before);
    assert!(
        reads >= 3,
        "three passes read the spoke ({reads} reads of the Deployment)"
    );
    assert_eq!(
        dry_runs, 0,
        "the Deployment is as installed, and the one wanted too"
    );

    // Someone scales the agent away on the spoke: the next pass asks, and puts it back.
    deployments
        .patch(
            AGENT_DEPLOYMENT,
            &PatchParams {
                field_manager: Some("kubectl-scale".to_string()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    let before = spoke.server.request_counts();
    lease_declared(&spokes, 50).await;
    wait_for(
        &deployments,
        AGENT_DEPLOYMENT,
        "the agent put back",
        move |deployment| {
            deployment.spec.as_ref().and_then(|spec| spec.replicas) == wanted_replicas
        },
    )
    .await;
    let (dry_runs, _) = deployment_requests(&spoke, &before);
    assert!(dry_runs >= 1, "the edited Deployment was asked about");
}
