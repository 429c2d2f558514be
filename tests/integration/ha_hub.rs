//! A highly available hub: two replicas of the hub process (`fleetform hub`) on one hub, each as
//! the hub ServiceAccount under its own name in the election on the Lease `fleetform-hub`. Only
//! the leader runs the hub loops; when it is killed mid-join, the other finishes the join. Their
//! `/metrics`, `/healthz` and `/readyz` over HTTP. Every wait is on a watch, except the admin
//! endpoint's counters, which have none.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use fleetform::api::ManagedCluster;
use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::api::vocabulary::{
    AGENT_NAMESPACE, CLUSTER_LEASE_NAME, CONDITION_AVAILABLE, CONDITION_HUB_ACCEPTED,
    HUB_KUBECONFIG_SECRET, LABEL_CLUSTER_NAME, STATUS_TRUE, STATUS_UNKNOWN,
};
use fleetform::hub::process::{self, HubProcessConfig, LEASE_NAME, RunningHub};
use fleetform::runtime::leader::Election;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use support::{
    Cluster, PATIENCE, accept, agent_config, condition_status, http_get as get, metric,
    prepare_registration, start_agent, wait_for, wait_for_list, wait_for_metric,
};
use tokio_util::sync::CancellationToken;

/// A hub replica named `identity` on `hub`, with a 2 s leader Lease and its admin endpoint on a
/// free port.
async fn start_replica(hub: &Cluster, identity: &str) -> (RunningHub, CancellationToken) {
    let stop = CancellationToken::new();
    let running = process::start(replica_config(hub, identity).await, stop.clone())
        .await
        .expect("the hub process starts");
    (running, stop)
}

/// A hub replica in a runtime of its own, as in a process of its own, that can crash.
struct CrashingReplica {
    admin: SocketAddr,
    crash: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl CrashingReplica {
    async fn start(hub: &Cluster, identity: &str) -> Self {
        let config = replica_config(hub, identity).await;
        let (started, admin) = tokio::sync::oneshot::channel();
        let (crash, crashed) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let running = process::start(config, CancellationToken::new())
                    .await
                    .expect("the hub process starts");
                let _ = started.send(running.admin_addr().expect("admin endpoint served"));
                let _ = crashed.await;
            });
            // Every task of the replica ends where it is, as when its process is killed: no
            // shutdown, the Lease not released.
            runtime.shutdown_background();
        });
        let admin = admin.await.expect("the replica started");
        CrashingReplica {
            admin,
            crash,
            thread,
        }
    }

    async fn crash(self) {
        let _ = self.crash.send(());
        tokio::task::spawn_blocking(move || self.thread.join())
            .await
            .unwrap()
            .expect("the replica's thread ends");
    }
}

async fn replica_config(hub: &Cluster, identity: &str) -> HubProcessConfig {
    HubProcessConfig {
        client: hub.hub_identity().await,
        access: fleetform::access::Access::default(),
        known_endpoint: Default::default(),
        election: Some(Election {
            namespace: SYSTEM_NAMESPACE.to_string(),
            lease_name: LEASE_NAME.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(2),
        }),
        admin_addr: Some("127.0.0.1:0".parse().unwrap()),
        webhook: None,
        sync: None,
        accept_check: fleetform::hub::run::AcceptCheck::InProcess,
    }
}

async fn wait_for_holder(hub: &Cluster, holder: &'static str) -> Lease {
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    wait_for(&leases, LEASE_NAME, holder, move |lease| {
        lease
            .spec
            .as_ref()
            .and_then(|spec| spec.holder_identity.as_deref())
            == Some(holder)
    })
    .await
}

/// Waits until the replica's `/readyz` answers 200 (a follower once the election's first round
/// is over).
async fn wait_ready(replica: SocketAddr) {
    let ready = async {
        while get(replica, "/readyz").await.0 != 200 {
            // The endpoint has no watch: look again shortly.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(PATIENCE, ready)
        .await
        .expect("timed out waiting for /readyz");
}

fn renewed(lease: &Lease) -> Option<Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|time| time.0)
}

#[tokio::test]
async fn the_other_replica_finishes_a_join_when_the_leader_is_killed_mid_join() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let a = CrashingReplica::start(&hub, "hub-a").await;
    wait_for_holder(&hub, "hub-a").await;
    let (b, stop_b) = start_replica(&hub, "hub-b").await;
    let b_admin = b.admin_addr().expect("admin endpoint served");
    wait_ready(b_admin).await;

    // The spoke's agent registers before its Spoke is declared: its CSR stays pending.
    let token = hub.issue_bootstrap_token("spoke-a").await;
    spoke
        .install_bootstrap(&hub.bootstrap_kubeconfig(&token))
        .await;
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.client.clone());
    let selector = format!("{LABEL_CLUSTER_NAME}=spoke-a");
    let _agent = start_agent(agent_config(&spoke, "spoke-a").await);
    wait_for_list(csrs.clone(), Some(&selector), "the agent's CSR", |csrs| {
        csrs.len() == 1
    })
    .await;
    assert_eq!(get(a.admin, "/readyz").await.0, 200, "the leader is ready");
    assert_eq!(get(b_admin, "/readyz").await.0, 200, "a follower is ready");
    assert_eq!(metric(a.admin, "fleetform_hub_leader").await, Some(1.0));
    assert_eq!(metric(b_admin, "fleetform_hub_leader").await, Some(0.0));
    let (_, follower) = get(b_admin, "/metrics").await;
    assert!(
        !follower.contains("fleetform_hub_reconciles_total{"),
        "a follower runs no loop:\n{follower}"
    );

    // The leader is killed before the CSR is approved or the cluster accepted...
    a.crash().await;
    let pending = csrs.list(&Default::default()).await.unwrap().items;
    assert!(
        pending
            .iter()
            .all(|csr| csr.status.as_ref().is_none_or(|s| s.conditions.is_none())),
        "nothing approved yet: {pending:?}"
    );
    // ...and the join goes on: the spoke declared in git and accepted.
    hub.declare_spoke("spoke-a").await;
    accept(&hub, "spoke-a", 1).await;

    // ...its Lease stays held by it, and B takes it over once it has not been renewed for its
    // duration.
    let lease = wait_for_holder(&hub, "hub-b").await;
    assert_eq!(
        lease.spec.and_then(|spec| spec.lease_transitions),
        Some(1),
        "taken over once, from the replica that was killed"
    );
    wait_for(
        &clusters,
        "spoke-a",
        "accepted, joined and Available",
        |c| {
            condition_status(c, CONDITION_HUB_ACCEPTED).as_deref() == Some(STATUS_TRUE)
                && c.is_joined()
                && condition_status(c, CONDITION_AVAILABLE).as_deref() == Some(STATUS_TRUE)
        },
    )
    .await;
    let issued = Api::<Secret>::namespaced(spoke.client.clone(), AGENT_NAMESPACE);
    wait_for(
        &issued,
        HUB_KUBECONFIG_SECRET,
        "the certificate",
        |secret| {
            secret
                .data
                .as_ref()
                .is_some_and(|data| data.contains_key("tls.crt"))
        },
    )
    .await;
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let first = renewed(&wait_for(&leases, CLUSTER_LEASE_NAME, "renewed", |_| true).await);
    wait_for(&leases, CLUSTER_LEASE_NAME, "renewed again", move |lease| {
        renewed(lease) > first
    })
    .await;
    let all = csrs.list(&Default::default()).await.unwrap().items;
    assert_eq!(all.len(), 1, "no duplicate CSR: {all:?}");
    assert!(
        all[0]
            .status
            .as_ref()
            .is_some_and(|status| status.certificate.is_some()),
        "the one CSR was approved and issued"
    );
    wait_for_metric(
        b_admin,
        "fleetform_hub_csrs_decided_total{kind=\"registration\",decision=\"approved\"}",
        1.0,
    )
    .await;
    assert_eq!(metric(b_admin, "fleetform_hub_leader").await, Some(1.0));

    stop_b.cancel();
    b.stopped().await;
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let released = leases.get(LEASE_NAME).await.unwrap();
    assert_eq!(
        released.spec.and_then(|spec| spec.holder_identity),
        None,
        "released on shutdown"
    );
}

#[tokio::test]
async fn metrics_count_reconciles_csr_decisions_and_lease_expiry_and_health_answers() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let (only, stop) = start_replica(&hub, "only").await;
    let admin = only.admin_addr().expect("admin endpoint served");
    assert_eq!(get(admin, "/healthz").await, (200, "ok\n".to_string()));
    assert_eq!(get(admin, "/nothing").await.0, 404);
    wait_for_holder(&hub, "only").await;

    prepare_registration(&hub, &spoke, "spoke-a").await;
    let agent = start_agent(agent_config(&spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "created by the agent", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "Available", |c| {
        condition_status(c, CONDITION_AVAILABLE).as_deref() == Some(STATUS_TRUE)
    })
    .await;
    // The agent stops: five lease durations later the cluster is Unknown.
    agent.stop().await;
    wait_for(&clusters, "spoke-a", "Unknown", |c| {
        condition_status(c, CONDITION_AVAILABLE).as_deref() == Some(STATUS_UNKNOWN)
    })
    .await;
    let (ready, body) = get(admin, "/readyz").await;
    assert_eq!((ready, body.as_str()), (200, "ready: leading\n"));
    wait_for_metric(admin, "fleetform_hub_lease_expiry_lag_seconds_count", 1.0).await;
    let (code, metrics) = get(admin, "/metrics").await;
    assert_eq!(code, 200);
    for series in [
        "fleetform_hub_reconciles_total{controller=\"CSR approval loop\",result=\"success\"}",
        "fleetform_hub_reconciles_total{controller=\"accept loop\",result=\"success\"}",
        "fleetform_hub_reconciles_total{controller=\"lease expiry loop\",result=\"success\"}",
        "fleetform_hub_reconcile_duration_seconds_count{controller=\"lease expiry loop\",result=\"success\"}",
        "fleetform_hub_csrs_decided_total{kind=\"registration\",decision=\"approved\"}",
    ] {
        let value = metrics.lines().find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .parse::<f64>()
                .ok()
        });
        assert!(value.is_some_and(|v| v >= 1.0), "{series} in\n{metrics}");
    }
    assert!(
        metrics.lines().any(|line| line == "fleetform_hub_leader 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|line| line == "fleetform_hub_retry_queue_depth{controller=\"accept loop\"} 0"),
        "nothing waits for a retry: {metrics}"
    );
    assert!(
        metrics.lines().any(|line| line
            .starts_with("fleetform_hub_reconciles_total{controller=\"lifecycle reconciler\",")),
        "the lifecycle reconciler's passes are counted too: {metrics}"
    );
    stop.cancel();
    only.stopped().await;
}
