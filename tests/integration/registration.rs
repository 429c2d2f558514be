//! The agent and hub loops against embedded control planes (seeds 000, 001, 003; DESIGN
//! §4.1–§4.4): registration and acceptance, lease renewal and expiry, lease duration changes,
//! cluster claims and addon health. Leases are 1 s long, so an expiry takes 5 s.

use crate::support;

use std::time::{Duration, Instant};

use fleetform::agent::AgentLoops;
use fleetform::agent::status_loop::REASON_CLAIMS_TRUNCATED;
use fleetform::api::addon::ManagedClusterAddOnSpec;
use fleetform::api::cluster::ClusterClaimSpec;
use fleetform::api::vocabulary::{
    ADDON_CONDITION_AVAILABLE, AGENT_NAMESPACE, CLUSTER_LEASE_NAME, CONDITION_AVAILABLE,
    CONDITION_CLOCK_SYNCED, CONDITION_HUB_ACCEPTED, HUB_KUBECONFIG_SECRET,
    HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME, LABEL_SPOKE_ONLY, REASON_ADDON_LEASE_NOT_FOUND,
    REASON_ADDON_LEASE_UPDATE_STOPPED, REASON_ADDON_LEASE_UPDATED,
    REASON_HUB_CLUSTER_ADMIN_ACCEPTED, REASON_HUB_CLUSTER_ADMIN_DENIED,
    REASON_KUBE_API_SERVER_UNAVAILABLE, REASON_LEASE_UPDATE_STOPPED, REGISTRATION_CLUSTER_ROLE,
    STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN, TAINT_UNAVAILABLE, TAINT_UNREACHABLE,
};
use fleetform::api::{ClusterClaim, ManagedCluster, ManagedClusterAddOn};
use fleetform::hub::accept_loop::{cluster_role_name, registration_role_name};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::{
    Cluster, PATIENCE, accept, agent_config, condition_status, registering_agent, start_agent,
    start_hub_loops, wait_deleted, wait_for,
};

fn renew_time(lease: &Lease) -> Option<Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|time| time.0)
}

fn available_status(cluster: &ManagedCluster) -> Option<String> {
    condition_status(cluster, CONDITION_AVAILABLE)
}

fn addon_available(addon: &ManagedClusterAddOn) -> Option<(String, String)> {
    addon
        .condition(ADDON_CONDITION_AVAILABLE)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test]
async fn agent_registers_and_joins_once_the_hub_accepts_and_denial_removes_its_rbac() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let _agent = start_agent(registering_agent(&hub, &spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());

    let created = wait_for(&clusters, "spoke-a", "created by the agent", |_| true).await;
    assert_eq!(
        created.spec.hub_accepts_client, None,
        "the agent never accepts itself"
    );
    assert!(!created.is_joined());

    accept(&hub, "spoke-a", 1).await;
    let joined = wait_for(&clusters, "spoke-a", "joined", ManagedCluster::is_joined).await;
    // As OCM's agent reports its status: the join comes with the cluster's availability, in one
    // write, so that the hub never sees it joined and not known to be available.
    assert_eq!(
        available_status(&joined).as_deref(),
        Some(STATUS_TRUE),
        "the version that says joined says Available too"
    );
    // Renewals arrive in time: the hub says the clocks agree, as OCM's hub does.
    let synced = wait_for(&clusters, "spoke-a", "ClockSynced", |c| {
        condition_status(c, CONDITION_CLOCK_SYNCED).as_deref() == Some(STATUS_TRUE)
    })
    .await;
    assert_eq!(
        synced.condition(CONDITION_CLOCK_SYNCED).unwrap().reason,
        "ManagedClusterClockSynced"
    );
    let accepted = joined.condition(CONDITION_HUB_ACCEPTED).unwrap();
    assert_eq!(
        (accepted.status.as_str(), accepted.reason.as_str()),
        (STATUS_TRUE, REASON_HUB_CLUSTER_ADMIN_ACCEPTED)
    );
    Api::<Namespace>::all(hub.client.clone())
        .get("spoke-a")
        .await
        .expect("cluster namespace");
    Api::<Lease>::namespaced(hub.client.clone(), "spoke-a")
        .get(CLUSTER_LEASE_NAME)
        .await
        .expect("cluster lease");
    let cluster_role = Api::<ClusterRole>::all(hub.client.clone())
        .get(&cluster_role_name("spoke-a"))
        .await
        .expect("cluster role");
    for rule in cluster_role.rules.iter().flatten() {
        if rule
            .resources
            .iter()
            .flatten()
            .any(|r| r.starts_with("managedclusters"))
        {
            assert_eq!(
                rule.resource_names.as_deref(),
                Some(&["spoke-a".to_string()][..]),
                "the agent may touch only its own ManagedCluster"
            );
        }
    }
    let bindings: Api<RoleBinding> = Api::namespaced(hub.client.clone(), "spoke-a");
    let binding = bindings
        .get(&registration_role_name("spoke-a"))
        .await
        .expect("role binding");
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        ("ClusterRole", REGISTRATION_CLUSTER_ROLE),
        "one hub-wide role for the fleet, granted in the cluster's namespace only"
    );
    let subjects = binding.subjects.unwrap_or_default();
    let agent = Api::<Secret>::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
        .get(HUB_KUBECONFIG_SECRET)
        .await
        .expect("the agent's identity");
    let agent_name = String::from_utf8(
        agent.data.unwrap()[HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME]
            .0
            .clone(),
    )
    .unwrap();
    assert_eq!(
        subjects
            .iter()
            .map(|s| (s.kind.as_str(), s.name.as_str()))
            .collect::<Vec<_>>(),
        [(
            "User",
            format!("system:open-cluster-management:spoke-a:{agent_name}").as_str()
        )],
        "bound: the certificate of this join, not every certificate naming the cluster's group"
    );

    clusters
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hubAcceptsClient": false}})),
        )
        .await
        .unwrap();
    let denied = wait_for(&clusters, "spoke-a", "denied", |c| {
        condition_status(c, CONDITION_HUB_ACCEPTED).as_deref() == Some(STATUS_FALSE)
    })
    .await;
    assert_eq!(
        denied.condition(CONDITION_HUB_ACCEPTED).unwrap().reason,
        REASON_HUB_CLUSTER_ADMIN_DENIED
    );
    let role = registration_role_name("spoke-a");
    let cluster_role = cluster_role_name("spoke-a");
    assert!(
        Api::<ClusterRole>::all(hub.client.clone())
            .get_opt(&cluster_role)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ClusterRoleBinding>::all(hub.client.clone())
            .get_opt(&cluster_role)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Role>::namespaced(hub.client.clone(), "spoke-a")
            .get_opt(&role)
            .await
            .unwrap()
            .is_none()
    );
    assert!(bindings.get_opt(&role).await.unwrap().is_none());
}

#[tokio::test]
async fn stopped_agent_goes_unknown_at_five_leases_with_its_addons_and_recovers() {
    let hub = Cluster::start().await;
    let spoke_a = Cluster::start().await;
    let spoke_b = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let agent_a = start_agent(registering_agent(&hub, &spoke_a, "spoke-a").await);
    let _agent_b = start_agent(registering_agent(&hub, &spoke_b, "spoke-b").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    wait_for(&clusters, "spoke-b", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    accept(&hub, "spoke-b", 1).await;
    let is_available = |c: &ManagedCluster| available_status(c).as_deref() == Some(STATUS_TRUE);
    let available = wait_for(&clusters, "spoke-a", "available", is_available).await;
    wait_for(&clusters, "spoke-b", "available", is_available).await;
    let available_since = available
        .condition(CONDITION_AVAILABLE)
        .unwrap()
        .last_transition_time
        .clone();

    // An addon of spoke-a, available through its lease on spoke-a.
    spoke_a.namespace("addon-ns").await;
    let addon_leases: Api<Lease> = Api::namespaced(spoke_a.client.clone(), "addon-ns");
    addon_leases
        .create(
            &PostParams::default(),
            &addon_lease("observability", Timestamp::now()),
        )
        .await
        .unwrap();
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.client.clone(), "spoke-a");
    addons
        .create(&PostParams::default(), &addon("observability", "addon-ns"))
        .await
        .unwrap();
    wait_for(&addons, "observability", "addon available", |a| {
        addon_available(a).is_some_and(|(status, _)| status == STATUS_TRUE)
    })
    .await;

    // Renewals carry the cluster past five lease durations without a change.
    let leases_a: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let first = renew_time(&leases_a.get(CLUSTER_LEASE_NAME).await.unwrap()).unwrap();
    let past_grace = first + Duration::from_secs(6);
    wait_for(
        &leases_a,
        CLUSTER_LEASE_NAME,
        "renewed for six seconds",
        move |lease| renew_time(lease).is_some_and(|renewed| renewed >= past_grace),
    )
    .await;
    let still = clusters.get("spoke-a").await.unwrap();
    let condition = still.condition(CONDITION_AVAILABLE).unwrap();
    assert_eq!(condition.status, STATUS_TRUE);
    assert_eq!(condition.last_transition_time, available_since);
    assert!(still.taint(TAINT_UNREACHABLE).is_none());

    // The agent stops: Unknown at exactly renewTime + 5 × 1 s, by the hub's timer.
    agent_a.stop().await;
    let last_renewal = renew_time(&leases_a.get(CLUSTER_LEASE_NAME).await.unwrap()).unwrap();
    let unknown = wait_for(&clusters, "spoke-a", "Unknown", |c| {
        available_status(c).as_deref() == Some(STATUS_UNKNOWN)
    })
    .await;
    let observed_at = Timestamp::now();
    let condition = unknown.condition(CONDITION_AVAILABLE).unwrap();
    assert_eq!(condition.reason, REASON_LEASE_UPDATE_STOPPED);
    let deadline = last_renewal + Duration::from_secs(5);
    let went_unknown = condition.last_transition_time.0;
    assert!(
        went_unknown.as_second() >= deadline.as_second(),
        "Unknown at {went_unknown}, before the deadline {deadline}"
    );
    assert!(
        went_unknown <= deadline + Duration::from_secs(2),
        "Unknown at {went_unknown}, long after the deadline {deadline}"
    );
    println!(
        "last renewal {last_renewal}, deadline {deadline}, Unknown at {went_unknown} \
         (seconds precision), seen by watch {:?} after the deadline",
        observed_at.duration_since(deadline)
    );
    wait_for(&clusters, "spoke-a", "unreachable taint", |c| {
        c.taint(TAINT_UNREACHABLE).is_some()
    })
    .await;
    let addon_unknown = wait_for(&addons, "observability", "addon Unknown", |a| {
        addon_available(a).is_some_and(|(status, _)| status == STATUS_UNKNOWN)
    })
    .await;
    assert_eq!(
        addon_available(&addon_unknown).unwrap().1,
        REASON_LEASE_UPDATE_STOPPED,
        "the addon carries its cluster's reason"
    );
    let other = clusters.get("spoke-b").await.unwrap();
    assert_eq!(available_status(&other).as_deref(), Some(STATUS_TRUE));

    // A new agent brings the cluster and its addon back.
    addon_leases
        .patch(
            "observability",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"renewTime": MicroTime(Timestamp::now())}})),
        )
        .await
        .unwrap();
    let _agent_a = start_agent(agent_config(&spoke_a, "spoke-a").await);
    wait_for(
        &clusters,
        "spoke-a",
        "available again without taint",
        move |c| is_available(c) && c.taint(TAINT_UNREACHABLE).is_none(),
    )
    .await;
    wait_for(&addons, "observability", "addon available again", |a| {
        addon_available(a).is_some_and(|(status, _)| status == STATUS_TRUE)
    })
    .await;
}

/// What the converge benchmark runs thousands of: an agent with its registration and lease
/// loops only still registers by CSR, joins, stays Available and renews its lease.
#[tokio::test]
async fn an_agent_running_only_registration_and_lease_loops_joins_and_stays_available() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let mut config = registering_agent(&hub, &spoke, "spoke-a").await;
    config.loops = AgentLoops::Registration;
    let _agent = start_agent(config);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "created by the agent", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "joined and Available", |c| {
        c.is_joined() && available_status(c).as_deref() == Some(STATUS_TRUE)
    })
    .await;
    let secret = Api::<Secret>::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
        .get(HUB_KUBECONFIG_SECRET)
        .await
        .expect("the hub kubeconfig its CSR's certificate went into");
    assert!(secret.data.is_some_and(|data| !data.is_empty()));
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let first = wait_for(&leases, CLUSTER_LEASE_NAME, "renewed", |lease| {
        renew_time(lease).is_some()
    })
    .await;
    let first = renew_time(&first).unwrap();
    wait_for(&leases, CLUSTER_LEASE_NAME, "renewed again", move |lease| {
        renew_time(lease).is_some_and(|renewed| renewed > first)
    })
    .await;
}

#[tokio::test]
async fn lease_duration_change_is_followed_without_restart() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let _agent = start_agent(registering_agent(&hub, &spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 60).await;
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let lease_of = |seconds: i32| {
        move |lease: &Lease| {
            lease
                .spec
                .as_ref()
                .and_then(|spec| spec.lease_duration_seconds)
                == Some(seconds)
        }
    };
    wait_for(
        &leases,
        CLUSTER_LEASE_NAME,
        "renewed for 60 s",
        lease_of(60),
    )
    .await;

    // At 60 s the next renewal would be 45-60 s away; the new duration must apply at once.
    clusters
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"leaseDurationSeconds": 1}})),
        )
        .await
        .unwrap();
    let changed = Instant::now();
    let first = wait_for(&leases, CLUSTER_LEASE_NAME, "renewed for 1 s", lease_of(1)).await;
    println!(
        "new duration followed {:?} after the change",
        changed.elapsed()
    );
    let first = renew_time(&first).unwrap();
    let after_first = first + Duration::from_millis(500);
    let second = wait_for(&leases, CLUSTER_LEASE_NAME, "renewed again", move |lease| {
        renew_time(lease).is_some_and(|renewed| renewed > after_first)
    })
    .await;
    let gap = renew_time(&second).unwrap().duration_since(first);
    assert!(
        gap.as_secs_f64() >= 0.7 && gap.as_secs_f64() <= 3.0,
        "renewals 1 s apart give or take 12.5% jitter (not 60 s), got {gap}"
    );
}

fn claim(name: &str, value: &str) -> ClusterClaim {
    ClusterClaim::new(
        name,
        ClusterClaimSpec {
            value: value.into(),
        },
    )
}

#[tokio::test]
async fn claims_are_reported_reserved_first_cut_at_the_limit_without_spoke_only_ones() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let claims: Api<ClusterClaim> = Api::all(spoke.client.clone());
    let post = PostParams::default();
    for (name, value) in [
        ("zz-custom", "last"),
        ("product.open-cluster-management.io", "fleetform"),
        ("a-custom", "first"),
        ("id.k8s.io", "spoke-a-id"),
        ("platform.open-cluster-management.io", "embedded"),
        ("kubeversion.open-cluster-management.io", "v1.34.0"),
        ("m-custom", "middle"),
    ] {
        claims.create(&post, &claim(name, value)).await.unwrap();
    }
    let mut secret = claim("a-secret", "stays on the spoke");
    secret
        .labels_mut()
        .insert(LABEL_SPOKE_ONLY.into(), "".into());
    claims.create(&post, &secret).await.unwrap();

    let _loops = start_hub_loops(&hub).await;
    let mut config = registering_agent(&hub, &spoke, "spoke-a").await;
    config.cluster_claims_max = 6;
    let _agent = start_agent(config);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    let reported = |c: &ManagedCluster| -> Vec<(String, String)> {
        c.status
            .iter()
            .flat_map(|s| &s.cluster_claims)
            .map(|claim| (claim.name.clone(), claim.value.clone()))
            .collect()
    };
    let synced = wait_for(&clusters, "spoke-a", "claims reported", move |c| {
        !reported(c).is_empty()
    })
    .await;
    let names: Vec<String> = reported(&synced)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        names,
        [
            "id.k8s.io",
            "kubeversion.open-cluster-management.io",
            "platform.open-cluster-management.io",
            "product.open-cluster-management.io",
            "a-custom",
            "m-custom",
        ],
        "reserved claims first, custom ones sorted and cut at 6, spoke-only ones skipped"
    );
    let version = synced.status.as_ref().and_then(|s| s.version.clone());
    assert!(
        version.and_then(|v| v.kubernetes).is_some(),
        "the spoke's version is reported"
    );

    let events: Api<Event> = Api::namespaced(hub.client.clone(), "spoke-a");
    let cut = tokio::time::timeout(
        PATIENCE,
        watcher(events, watcher::Config::default())
            .applied_objects()
            .try_filter(|event| {
                futures::future::ready(event.reason.as_deref() == Some(REASON_CLAIMS_TRUNCATED))
            })
            .boxed()
            .try_next(),
    )
    .await
    .expect("an Event about the cut claims")
    .unwrap()
    .unwrap();
    assert!(
        cut.message
            .as_deref()
            .unwrap_or_default()
            .contains("zz-custom"),
        "{:?}",
        cut.message
    );

    // A changed claim reaches the hub as soon as the watch delivers it.
    let changed = Instant::now();
    claims
        .patch(
            "a-custom",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": "changed"}})),
        )
        .await
        .unwrap();
    wait_for(&clusters, "spoke-a", "changed claim reported", move |c| {
        reported(c).contains(&("a-custom".to_string(), "changed".to_string()))
    })
    .await;
    let latency = changed.elapsed();
    println!("claim change reached the hub after {latency:?}");
    assert!(latency < Duration::from_secs(1), "took {latency:?}");

    // Deleting a custom claim makes room for the one that was cut.
    claims
        .delete("a-custom", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&clusters, "spoke-a", "cut claim reported", move |c| {
        let names: Vec<String> = reported(c).into_iter().map(|(name, _)| name).collect();
        names.contains(&"zz-custom".to_string()) && !names.contains(&"a-custom".to_string())
    })
    .await;
}

fn addon(name: &str, install_namespace: &str) -> ManagedClusterAddOn {
    ManagedClusterAddOn::new(
        name,
        ManagedClusterAddOnSpec {
            install_namespace: Some(install_namespace.into()),
            ..Default::default()
        },
    )
}

fn addon_lease(name: &str, renewed: Timestamp) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"renewTime": MicroTime(renewed)},
    }))
    .unwrap()
}

#[tokio::test]
async fn addon_is_unknown_without_lease_available_while_renewed_and_unavailable_once_stale() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let _agent = start_agent(registering_agent(&hub, &spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "joined", ManagedCluster::is_joined).await;
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.client.clone(), "spoke-a");
    addons
        .create(&PostParams::default(), &addon("observability", "obs"))
        .await
        .unwrap();
    let with = |status: &'static str, reason: &'static str| {
        move |a: &ManagedClusterAddOn| {
            addon_available(a) == Some((status.to_string(), reason.to_string()))
        }
    };
    wait_for(
        &addons,
        "observability",
        "Unknown without a lease",
        with(STATUS_UNKNOWN, REASON_ADDON_LEASE_NOT_FOUND),
    )
    .await;

    spoke.namespace("obs").await;
    let leases: Api<Lease> = Api::namespaced(spoke.client.clone(), "obs");
    let renewed = Timestamp::now();
    leases
        .create(
            &PostParams::default(),
            &addon_lease("observability", renewed),
        )
        .await
        .unwrap();
    wait_for(
        &addons,
        "observability",
        "available with a fresh lease",
        with(STATUS_TRUE, REASON_ADDON_LEASE_UPDATED),
    )
    .await;

    // No more renewals: unavailable five addon lease durations (1 s here) later, by timer.
    let stale = wait_for(
        &addons,
        "observability",
        "unavailable once stale",
        with(STATUS_FALSE, REASON_ADDON_LEASE_UPDATE_STOPPED),
    )
    .await;
    let since = stale
        .condition(ADDON_CONDITION_AVAILABLE)
        .unwrap()
        .last_transition_time
        .0;
    let deadline = renewed + Duration::from_secs(5);
    assert!(
        since.as_second() >= deadline.as_second() && since <= deadline + Duration::from_secs(2),
        "unavailable at {since}, deadline {deadline}"
    );

    leases
        .patch(
            "observability",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"renewTime": MicroTime(Timestamp::now())}})),
        )
        .await
        .unwrap();
    wait_for(
        &addons,
        "observability",
        "available after a renewal",
        with(STATUS_TRUE, REASON_ADDON_LEASE_UPDATED),
    )
    .await;
    leases
        .delete("observability", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &addons,
        "observability",
        "Unknown once the lease is deleted",
        with(STATUS_UNKNOWN, REASON_ADDON_LEASE_NOT_FOUND),
    )
    .await;
}

#[tokio::test]
async fn spoke_api_down_makes_the_cluster_unavailable_after_the_grace_and_back_when_it_returns() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let mut config = registering_agent(&hub, &spoke, "spoke-a").await;
    config.failure_grace = Duration::from_secs(1);
    let _agent = start_agent(config);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "available", |c| {
        available_status(c).as_deref() == Some(STATUS_TRUE)
    })
    .await;

    // The spoke's API server stops; the agent keeps renewing its lease on the hub, so the
    // cluster is not Unknown but unavailable, with OCM's reason and the unavailable taint.
    let stopped = spoke.stop().await;
    let unavailable = wait_for(&clusters, "spoke-a", "unavailable", |c| {
        available_status(c).as_deref() == Some(STATUS_FALSE) && c.taint(TAINT_UNAVAILABLE).is_some()
    })
    .await;
    let condition = unavailable.condition(CONDITION_AVAILABLE).unwrap();
    assert_eq!(condition.reason, REASON_KUBE_API_SERVER_UNAVAILABLE);
    assert!(
        condition.message.contains("/livez"),
        "{}",
        condition.message
    );
    assert!(unavailable.taint(TAINT_UNREACHABLE).is_none());

    let _back = stopped.start().await;
    wait_for(&clusters, "spoke-a", "available again", |c| {
        available_status(c).as_deref() == Some(STATUS_TRUE) && c.taint(TAINT_UNAVAILABLE).is_none()
    })
    .await;
}

#[tokio::test]
async fn agent_deployment_without_available_replicas_makes_the_cluster_unavailable() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    spoke.namespace(AGENT_NAMESPACE).await;
    let deployments: Api<Deployment> = Api::namespaced(spoke.client.clone(), AGENT_NAMESPACE);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "fleetform"}]},
            },
        },
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let set_available = |replicas: i32| {
        let deployments = deployments.clone();
        async move {
            deployments
                .patch_status(
                    "agent",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"availableReplicas": replicas}})),
                )
                .await
                .unwrap();
        }
    };
    set_available(1).await;
    let _loops = start_hub_loops(&hub).await;
    let mut config = registering_agent(&hub, &spoke, "spoke-a").await;
    config.failure_grace = Duration::from_secs(1);
    config.deployment = Some("agent".into());
    let _agent = start_agent(config);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "available", |c| {
        available_status(c).as_deref() == Some(STATUS_TRUE)
    })
    .await;

    set_available(0).await;
    let unavailable = wait_for(&clusters, "spoke-a", "unavailable", |c| {
        available_status(c).as_deref() == Some(STATUS_FALSE)
    })
    .await;
    let condition = unavailable.condition(CONDITION_AVAILABLE).unwrap();
    assert_eq!(condition.reason, REASON_KUBE_API_SERVER_UNAVAILABLE);
    assert!(condition.message.contains("agent"), "{}", condition.message);

    set_available(1).await;
    wait_for(&clusters, "spoke-a", "available again", |c| {
        available_status(c).as_deref() == Some(STATUS_TRUE)
    })
    .await;
}

#[tokio::test]
async fn in_steady_state_and_across_an_agent_restart_the_hub_sees_only_lease_renewals() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let agent = start_agent(registering_agent(&hub, &spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "available with status", |c| {
        available_status(c).as_deref() == Some(STATUS_TRUE)
            && c.status.as_ref().is_some_and(|s| s.version.is_some())
    })
    .await;
    spoke.namespace("obs").await;
    let addon_leases: Api<Lease> = Api::namespaced(spoke.client.clone(), "obs");
    addon_leases
        .create(
            &PostParams::default(),
            &addon_lease("observability", Timestamp::now()),
        )
        .await
        .unwrap();
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.client.clone(), "spoke-a");
    addons
        .create(&PostParams::default(), &addon("observability", "obs"))
        .await
        .unwrap();
    wait_for(&addons, "observability", "addon available", |a| {
        addon_available(a).is_some_and(|(status, _)| status == STATUS_TRUE)
    })
    .await;

    // The addon renews its lease ten times a second on the spoke.
    let renewing = tokio::spawn(async move {
        loop {
            let renewed = json!({"spec": {"renewTime": MicroTime(Timestamp::now())}});
            addon_leases
                .patch(
                    "observability",
                    &PatchParams::default(),
                    &Patch::Merge(renewed),
                )
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });

    // Every hub write between two cluster lease renewals shows as a resourceVersion step: the
    // renewals must be the only writes, also when a restarted agent takes over (it must not
    // rewrite what the hub already holds).
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let config = watcher::Config::default().fields(&format!("metadata.name={CLUSTER_LEASE_NAME}"));
    let mut renewals = watcher(leases, config)
        .applied_objects()
        .map_ok(|lease| {
            lease
                .resource_version()
                .and_then(|rv| rv.parse::<i64>().ok())
                .unwrap()
        })
        .boxed();
    let mut versions = Vec::new();
    let mut agent = Some(agent);
    let mut _restarted = None;
    while versions.len() < 11 {
        let version = tokio::time::timeout(PATIENCE, renewals.try_next())
            .await
            .expect("the lease is renewed")
            .unwrap()
            .unwrap();
        versions.push(version);
        if versions.len() == 6
            && let Some(agent) = agent.take()
        {
            agent.stop().await;
            _restarted = Some(start_agent(agent_config(&spoke, "spoke-a").await));
        }
    }
    renewing.abort();
    let steps: Vec<i64> = versions[1..]
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .collect();
    assert!(
        steps.iter().all(|&step| step == 1),
        "hub writes between renewals besides the renewal itself: {steps:?}"
    );
}

#[tokio::test]
async fn deleting_a_cluster_deletes_its_agents_rbac() {
    let hub = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    hub.declare_spoke("spoke-a").await;
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    clusters
        .create(
            &PostParams::default(),
            &ManagedCluster::new(
                "spoke-a",
                fleetform::api::cluster::ManagedClusterSpec {
                    hub_accepts_client: Some(true),
                    ..Default::default()
                },
            ),
        )
        .await
        .unwrap();
    wait_for(&clusters, "spoke-a", "accepted", |c| {
        condition_status(c, CONDITION_HUB_ACCEPTED).as_deref() == Some(STATUS_TRUE)
    })
    .await;
    let cluster_roles: Api<ClusterRole> = Api::all(hub.client.clone());
    let bindings: Api<RoleBinding> = Api::namespaced(hub.client.clone(), "spoke-a");
    let cluster_role = cluster_roles
        .get(&cluster_role_name("spoke-a"))
        .await
        .unwrap();
    let binding = bindings
        .get(&registration_role_name("spoke-a"))
        .await
        .unwrap();

    clusters
        .delete("spoke-a", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&cluster_roles, &cluster_role).await;
    wait_deleted(&bindings, &binding).await;
    assert!(
        cluster_roles
            .get_opt(REGISTRATION_CLUSTER_ROLE)
            .await
            .unwrap()
            .is_some(),
        "the hub-wide role stays for the other clusters"
    );
}

/// A hub before the hub-wide registration role bound each agent to a Role of its cluster's
/// own; accepted by this one, the binding (whose roleRef cannot change) is replaced and that
/// Role deleted, and the agent keeps its rights: its lease renewals reach the hub.
#[tokio::test]
async fn an_agent_bound_to_its_clusters_own_role_by_an_older_hub_is_bound_to_the_hub_wide_one() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let name = registration_role_name("spoke-a");
    Api::<Namespace>::all(hub.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "spoke-a"}})).unwrap(),
        )
        .await
        .unwrap();
    let roles: Api<Role> = Api::namespaced(hub.client.clone(), "spoke-a");
    let bindings: Api<RoleBinding> = Api::namespaced(hub.client.clone(), "spoke-a");
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": name},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                           "verbs": ["get", "update", "patch", "create"]}],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let _loops = start_hub_loops(&hub).await;
    let _agent = start_agent(registering_agent(&hub, &spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "joined", ManagedCluster::is_joined).await;
    // The hub made the lease at the acceptance; the agent renews it through its binding.
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let made = renew_time(&wait_for(&leases, CLUSTER_LEASE_NAME, "made", |_| true).await);
    wait_for(
        &leases,
        CLUSTER_LEASE_NAME,
        "renewed by the agent",
        move |lease| renew_time(lease) > made,
    )
    .await;
    let binding = bindings.get(&name).await.unwrap();
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        ("ClusterRole", REGISTRATION_CLUSTER_ROLE)
    );
    assert!(
        !binding.subjects.unwrap_or_default().is_empty(),
        "bound to the agent"
    );
    assert!(
        roles.get_opt(&name).await.unwrap().is_none(),
        "the old Role is gone"
    );
}

#[tokio::test]
async fn restarted_hub_loops_leave_available_clusters_available() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let loops = start_hub_loops(&hub).await;
    let _agent = start_agent(registering_agent(&hub, &spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    let available = wait_for(&clusters, "spoke-a", "available", |c| {
        available_status(c).as_deref() == Some(STATUS_TRUE)
    })
    .await;
    let since = available
        .condition(CONDITION_AVAILABLE)
        .unwrap()
        .last_transition_time
        .clone();

    // Restart well after the transition, so a flap would show in lastTransitionTime.
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let settled = since.0 + Duration::from_secs(2);
    wait_for(
        &leases,
        CLUSTER_LEASE_NAME,
        "renewed for 2 s",
        move |lease| renew_time(lease).is_some_and(|renewed| renewed >= settled),
    )
    .await;
    loops.stop().await;
    let _loops = start_hub_loops(&hub).await;
    let restarted = Timestamp::now();
    let later = restarted + Duration::from_secs(3);
    wait_for(
        &leases,
        CLUSTER_LEASE_NAME,
        "renewed for 3 s",
        move |lease| renew_time(lease).is_some_and(|renewed| renewed >= later),
    )
    .await;
    let cluster = clusters.get("spoke-a").await.unwrap();
    let condition = cluster.condition(CONDITION_AVAILABLE).unwrap();
    assert_eq!(condition.status, STATUS_TRUE);
    assert_eq!(
        condition.last_transition_time, since,
        "Available never left True across the hub's restart"
    );
}

#[tokio::test]
async fn capacity_allocatable_and_node_health_are_reported_and_follow_node_changes() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let nodes: Api<Node> = Api::all(spoke.client.clone());
    for (name, unschedulable, cpu, memory, ready) in [
        ("node-1", false, "4", "8Gi", "True"),
        ("node-2", false, "2500m", "4Gi", "False"),
        ("cordoned", true, "64", "256Gi", "True"),
    ] {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"unschedulable": unschedulable},
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        nodes
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "capacity": {"cpu": cpu, "memory": memory},
                    "allocatable": {"cpu": cpu, "memory": memory},
                    "conditions": [{"type": "Ready", "status": ready}],
                }})),
            )
            .await
            .unwrap();
    }
    let _loops = start_hub_loops(&hub).await;
    let _agent = start_agent(registering_agent(&hub, &spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    let capacity = |c: &ManagedCluster, resource: &str| {
        c.status
            .as_ref()
            .and_then(|s| s.capacity.get(resource))
            .map(|q| q.0.clone())
    };
    let reported = wait_for(&clusters, "spoke-a", "capacity reported", move |c| {
        capacity(c, "cpu").is_some()
    })
    .await;
    assert_eq!(
        capacity(&reported, "cpu").as_deref(),
        Some("6500m"),
        "cordoned nodes are left out"
    );
    assert_eq!(capacity(&reported, "memory").as_deref(), Some("12Gi"));
    let status = reported.status.as_ref().unwrap();
    assert_eq!(
        status.allocatable.get("cpu").map(|q| q.0.as_str()),
        Some("6500m")
    );
    let health = |c: &ManagedCluster| c.node_health();
    let reported = wait_for(&clusters, "spoke-a", "node health reported", move |c| {
        health(c).is_some()
    })
    .await;
    let reported_health = health(&reported).unwrap();
    assert_eq!((reported_health.total, reported_health.ready), (3, 2));

    nodes
        .patch_status(
            "node-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    wait_for(&clusters, "spoke-a", "node-2 ready", move |c| {
        health(c).is_some_and(|health| health.ready == 3)
    })
    .await;
}
