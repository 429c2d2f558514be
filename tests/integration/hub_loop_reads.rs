//! What the hub loops read while a spoke joins: whether its Spoke is declared, its
//! ManagedCluster, the record of whom its namespace binds and its bootstrap tokens come from
//! the loops' watches, not from a request each time a change of the cluster, its CSRs or its
//! Spoke wakes a loop (about ten times per join: 40 requests per spoke, issue 33).

use crate::support;

use fleetform::api::ManagedCluster;
use fleetform::api::vocabulary::{CONDITION_AVAILABLE, CONDITION_CLOCK_SYNCED, STATUS_TRUE};
use fleetform::deploy::{HUB_SERVICE_ACCOUNT, HUB_SERVICE_ACCOUNT_NAMESPACE};
use fleetform_controlplane::requests::{RequestCounts, Verb};
use kube::Api;
use support::{
    Cluster, Running, accept, condition_status, registering_agent, start_agent, start_hub_loops,
    wait_for,
};

/// The requests of `verb` on `group`'s `resource` in `counts`.
fn requests(counts: &RequestCounts, verb: Verb, group: &str, resource: &str) -> u64 {
    counts
        .iter()
        .filter(|(kind, _)| kind.verb == verb && kind.group == group && kind.resource == resource)
        .map(|(_, count)| count)
        .sum()
}

/// Registers an agent of `name` on `spoke`, accepts its cluster as the reconciler would, and
/// waits until it has joined, is Available and the hub has judged its clock.
async fn join(hub: &Cluster, spoke: &Cluster, name: &str) -> Running {
    let agent = start_agent(registering_agent(hub, spoke, name).await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, name, "created by the agent", |_| true).await;
    accept(hub, name, 1).await;
    wait_for(
        &clusters,
        name,
        "joined, Available, its clock judged",
        |cluster| {
            cluster.is_joined()
                && condition_status(cluster, CONDITION_AVAILABLE).as_deref() == Some(STATUS_TRUE)
                && condition_status(cluster, CONDITION_CLOCK_SYNCED).as_deref() == Some(STATUS_TRUE)
        },
    )
    .await;
    agent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_is_judged_from_the_hub_loops_watches_not_by_a_request_per_change() {
    let hub = Cluster::start().await;
    let (first, second) = (Cluster::start().await, Cluster::start().await);
    let _loops = start_hub_loops(&hub).await;
    let hub_loops =
        format!("system:serviceaccount:{HUB_SERVICE_ACCOUNT_NAMESPACE}:{HUB_SERVICE_ACCOUNT}");
    // A first spoke joins: by then the loops' watches have listed what they keep.
    let _first = join(&hub, &first, "spoke-a").await;

    let before = hub.server.request_counts_of(&hub_loops);
    let _second = join(&hub, &second, "spoke-b").await;
    let asked = hub.server.request_counts_of(&hub_loops).since(&before);
    let ocm_cluster = "cluster.open-cluster-management.io";
    for (verb, group, resource, read, at_most) in [
        (
            Verb::Get,
            "fleetform.io",
            "spokes",
            "whether its Spoke is declared",
            0,
        ),
        (Verb::List, "", "secrets", "its bootstrap tokens", 0),
        // The first acceptance of a cluster reads what an earlier join recorded.
        (
            Verb::Get,
            "",
            "namespaces",
            "the record of whom its namespace binds",
            1,
        ),
    ] {
        let count = requests(&asked, verb, group, resource);
        assert!(
            count <= at_most,
            "the hub loops read {read} {count} times while spoke-b joined (at most {at_most}): {asked:?}"
        );
    }
    // The ManagedCluster is read only to write it again when another write came first (its
    // 409 Conflict): never more often than it is written.
    let read = requests(&asked, Verb::Get, ocm_cluster, "managedclusters");
    let written = requests(&asked, Verb::Patch, ocm_cluster, "managedclusters/status")
        + requests(&asked, Verb::Patch, ocm_cluster, "managedclusters");
    assert!(
        read <= written,
        "the hub loops read spoke-b's ManagedCluster {read} times and wrote it {written} times: {asked:?}"
    );
}

/// A hub process's lifecycle reconciler and hub loops read the Spokes, Hubs, ManagedClusters,
/// ManagedClusterAddOns and AddOn documents (ClusterManagementAddOns) from one watch and cache
/// of each (issue 33): the Spokes were watched three times (with a second copy of the fleet),
/// the Hubs and the AddOn documents three times, the addons twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_process_watches_each_kind_its_reconciler_and_loops_read_once() {
    use fleetform::api::fleet::{Hub, SYSTEM_NAMESPACE, Spoke};
    use fleetform::hub::process;
    use tokio_util::sync::CancellationToken;

    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let stop = CancellationToken::new();
    let config = support::hub_process_config(&hub).await;
    let running = process::start(config, stop.clone())
        .await
        .expect("the hub process starts");
    support::declare_fleet_of_one(&hub, &spoke, "spoke-a").await;
    // A Spoke pass and a Hub pass have run, and so have the hub loops, which started before.
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    wait_for(&spokes, "spoke-a", "a pass's status", |spoke| {
        spoke.status.as_ref().and_then(|s| s.phase).is_some()
    })
    .await;
    let hubs: Api<Hub> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    wait_for(&hubs, "hub", "a pass's status", |hub| {
        hub.status.as_ref().and_then(|s| s.phase).is_some()
    })
    .await;
    stop.cancel();
    running.stopped().await;

    let hub_process =
        format!("system:serviceaccount:{HUB_SERVICE_ACCOUNT_NAMESPACE}:{HUB_SERVICE_ACCOUNT}");
    let asked = hub.server.request_counts_of(&hub_process);
    for (group, resource) in [
        ("fleetform.io", "spokes"),
        ("fleetform.io", "hubs"),
        ("cluster.open-cluster-management.io", "managedclusters"),
        ("addon.open-cluster-management.io", "managedclusteraddons"),
        (
            "addon.open-cluster-management.io",
            "clustermanagementaddons",
        ),
        // The bootstrap tokens and the cluster namespaces.
        ("", "secrets"),
        ("", "namespaces"),
    ] {
        assert_eq!(
            requests(&asked, Verb::Watch, group, resource),
            1,
            "the hub process watched {resource} more than once: {asked:?}"
        );
    }
}
