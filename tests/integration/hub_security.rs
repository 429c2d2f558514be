//! A hostile spoke or local user gets nothing that is not theirs, on embedded hubs through their
//! HTTP API with real identities (a spoke's bootstrap token, its issued certificate): OCM's
//! ManagedCluster admission (accepting, cluster sets, taint times), acceptance of what git
//! declares or a person allowed to accept accepted (never of a cluster by itself), the bootstrap
//! role's least privilege, bootstrap tokens that expire, are renewed
//! and go away after the join, and certificates bound to one join only.

use crate::support;

use std::time::Duration;

use fleetform::api::bootstrap_token::{BootstrapToken, expiration_patch, token_expiration};
use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::api::vocabulary::{
    AGENT_NAMESPACE, CLUSTER_LEASE_NAME, CONDITION_HUB_ACCEPTED, HUB_KUBECONFIG_SECRET,
    HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG, HUB_KUBECONFIG_SECRET_KEY_TLS_CRT, LABEL_CLUSTER_NAME,
    LABEL_CLUSTER_SET, STATUS_TRUE,
};
use fleetform::api::{Hub, ManagedCluster, Spoke, is_condition_true};
use fleetform::hub::accept_loop::cluster_role_name;
use fleetform::hub::acceptance::{ANNOTATION_AUTOMATICALLY_ACCEPTED_ON, REASON_NOT_IN_GIT};
use fleetform::hub::bootstrap::BOOTSTRAP_ROLE_NAME;
use fleetform::reconciler::tokens::BOOTSTRAP_TOKEN_TTL;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use support::{
    Cluster, Running, accept, agent_config, client_for, declare_fleet_of_one, registering_agent,
    start_agent, start_hub_loops, start_reconciler, wait_deleted, wait_for, wait_for_list,
};

/// The HTTP status of a refused request, and its message; panics if it was allowed.
fn refused<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Ok(found) => panic!("allowed: {found:?}"),
        Err(kube::Error::Api(status)) => (status.code, status.message),
        Err(err) => panic!("not an API error: {err}"),
    }
}

fn merge(patch: Value) -> Patch<Value> {
    Patch::Merge(patch)
}

/// A client of `hub` holding `token`.
async fn bootstrap_client(hub: &Cluster, token: &BootstrapToken) -> Client {
    client_for(&hub.bootstrap_kubeconfig(token)).await
}

/// Waits until the hub loops have bound the bootstrap role (they apply the role first).
async fn bootstrap_role_bound(hub: &Cluster) {
    wait_for(
        &Api::<ClusterRoleBinding>::all(hub.client.clone()),
        BOOTSTRAP_ROLE_NAME,
        "the bootstrap role bound",
        |_| true,
    )
    .await;
}

/// A ManagedCluster as an agent registers it, with `spec`.
fn cluster(name: &str, spec: Value) -> ManagedCluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// A hub with its loops, and the spoke `spoke-a` joined to it by its agent; the agent's own
/// hub identity (its issued certificate) comes last.
async fn joined_spoke() -> (Cluster, Running, Cluster, Running, Client) {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let loops = start_hub_loops(&hub).await;
    let agent = start_agent(registering_agent(&hub, &spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "joined", ManagedCluster::is_joined).await;
    let identity = agent_identity(&spoke).await;
    (hub, loops, spoke, agent, identity)
}

/// A client of the hub with the certificate the agent on `spoke` holds now.
async fn agent_identity(spoke: &Cluster) -> Client {
    let secret = Api::<Secret>::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
        .get(HUB_KUBECONFIG_SECRET)
        .await
        .expect("the agent's hub identity");
    let kubeconfig = &secret.data.unwrap()[HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG];
    client_for(std::str::from_utf8(&kubeconfig.0).unwrap()).await
}

#[tokio::test]
async fn a_spoke_can_neither_accept_itself_nor_accept_again_after_a_denial() {
    let hub = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    hub.declare_spoke("spoke-x").await;
    let token = hub.issue_bootstrap_token("spoke-x").await;
    bootstrap_role_bound(&hub).await;
    let as_token: Api<ManagedCluster> = Api::all(bootstrap_client(&hub, &token).await);
    let (code, message) = refused(
        as_token
            .create(
                &PostParams::default(),
                &cluster("spoke-x", json!({"hubAcceptsClient": true})),
            )
            .await,
    );
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains("cannot update the HubAcceptsClient field"),
        "{message}"
    );
    as_token
        .create(&PostParams::default(), &cluster("spoke-x", json!({})))
        .await
        .expect("the token registers its cluster, unaccepted");

    let (hub, loops, _spoke, _agent, identity) = joined_spoke().await;
    // No loop takes the agent's rights away after the denial: only admission stands in its way.
    loops.stop().await;
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    clusters
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &merge(json!({"spec": {"hubAcceptsClient": false}})),
        )
        .await
        .expect("the hub admin denies the cluster");
    let as_agent: Api<ManagedCluster> = Api::all(identity);
    let (code, message) = refused(
        as_agent
            .patch(
                "spoke-a",
                &PatchParams::default(),
                &merge(json!({"spec": {"hubAcceptsClient": true}})),
            )
            .await,
    );
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains(r#"admission webhook "managedclustervalidators.admission.cluster.open-cluster-management.io" denied the request"#),
        "{message}"
    );
    as_agent
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"zone": "a"}}})),
        )
        .await
        .expect("the agent may still change what is not acceptance");
    Api::<ManagedCluster>::all(hub.hub_identity().await)
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &merge(json!({"spec": {"hubAcceptsClient": true}})),
        )
        .await
        .expect("the hub's ServiceAccount accepts");
}

#[tokio::test]
async fn the_cluster_set_label_needs_the_right_to_join_the_set() {
    let (hub, _loops, _spoke, _agent, identity) = joined_spoke().await;
    let as_agent: Api<ManagedCluster> = Api::all(identity);
    let label = |set: Value| merge(json!({"metadata": {"labels": {LABEL_CLUSTER_SET: set}}}));
    let (code, message) = refused(
        as_agent
            .patch("spoke-a", &PatchParams::default(), &label(json!("prod")))
            .await,
    );
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains(r#"cannot add/remove a ManagedCluster to/from ManagedClusterSet "prod""#),
        "{message}"
    );
    let as_hub: Api<ManagedCluster> = Api::all(hub.hub_identity().await);
    as_hub
        .patch("spoke-a", &PatchParams::default(), &label(json!("prod")))
        .await
        .expect("the hub's ServiceAccount may join sets");
    let (code, message) = refused(
        as_agent
            .patch("spoke-a", &PatchParams::default(), &label(Value::Null))
            .await,
    );
    assert_eq!(code, 403, "leaving a set needs the right too: {message}");
}

#[tokio::test]
async fn a_taints_time_added_is_set_by_the_server() {
    let hub = Cluster::start().await;
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let before = Timestamp::now()
        .checked_sub(SignedDuration::from_secs(1))
        .unwrap();
    let forged = "2000-01-01T00:00:00Z";
    let created = clusters
        .create(
            &PostParams::default(),
            &cluster(
                "c1",
                json!({"taints": [{"key": "example.com/a", "effect": "NoSelect", "timeAdded": forged}]}),
            ),
        )
        .await
        .unwrap();
    let added = created.spec.taints[0].time_added.as_ref().unwrap().0;
    assert!(
        added >= before,
        "{added} is the server's time, not {forged}"
    );

    let (code, message) = refused(
        clusters
            .patch(
                "c1",
                &PatchParams::default(),
                &merge(json!({"spec": {"taints": [
                    {"key": "example.com/a", "effect": "NoSelect", "timeAdded": added.to_string()},
                    {"key": "example.com/b", "effect": "NoSelect", "timeAdded": forged},
                ]}})),
            )
            .await,
    );
    assert_eq!(code, 400, "{message}");
    assert!(
        message.contains(r#"It is not allowed to set TimeAdded of Taint "example.com/b"."#),
        "{message}"
    );
    let (code, _) = refused(
        clusters
            .patch(
                "c1",
                &PatchParams::default(),
                &merge(json!({"spec": {"taints": [
                    {"key": "example.com/a", "effect": "NoSelect", "timeAdded": forged},
                ]}})),
            )
            .await,
    );
    assert_eq!(code, 400, "an unchanged taint keeps its time");
    let updated = clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &merge(json!({"spec": {"taints": [
                {"key": "example.com/a", "effect": "NoSelect", "timeAdded": added.to_string()},
                {"key": "example.com/b", "effect": "NoSelect"},
            ]}})),
        )
        .await
        .unwrap();
    let times: Vec<_> = updated
        .spec
        .taints
        .iter()
        .map(|taint| taint.time_added.as_ref().unwrap().0)
        .collect();
    assert_eq!(times[0], added);
    assert!(times[1] >= added);
}

/// The Events about the cluster `name` with reason [`REASON_NOT_IN_GIT`].
fn not_in_git(events: &[Event], name: &str) -> Vec<String> {
    events
        .iter()
        .filter(|event| {
            event.reason.as_deref() == Some(REASON_NOT_IN_GIT)
                && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .map(|event| event.note.clone().unwrap_or_default())
        .collect()
}

/// A client of `hub` for the person `user`, whom a ClusterRole of `rules` binds.
async fn person(hub: &Cluster, user: &str, rules: Value) -> Client {
    let role = format!("person:{user}");
    for object in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": role}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": role},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    ] {
        fleetform::deploy::apply_document(&hub.client, &object)
            .await
            .unwrap();
    }
    let kubeconfig = hub
        .server
        .identities()
        .unwrap()
        .kubeconfig_for(user, &[])
        .unwrap();
    client_for(&kubeconfig).await
}

/// What `clusteradm accept` needs: approve a cluster's registration and set hubAcceptsClient.
fn accept_rules() -> Value {
    json!([
        {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"],
         "verbs": ["get", "list", "update", "patch"]},
        {"apiGroups": ["register.open-cluster-management.io"], "resources": ["managedclusters/accept"],
         "verbs": ["update"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
         "verbs": ["get", "list"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"],
         "verbs": ["update"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
         "resourceNames": ["kubernetes.io/kube-apiserver-client"], "verbs": ["approve"]},
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_not_in_git_joins_once_a_person_allowed_to_accept_it_does_and_never_by_itself() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    bootstrap_role_bound(&hub).await;
    let token = hub.issue_bootstrap_token("stranger").await;
    let stranger: ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "stranger"}, "spec": {"hubAcceptsClient": true},
    }))
    .unwrap();
    // A bootstrap identity can never accept itself.
    let as_bootstrap: Api<ManagedCluster> = Api::all(bootstrap_client(&hub, &token).await);
    let (code, message) = refused(as_bootstrap.create(&PostParams::default(), &stranger).await);
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("managedclusters/accept"), "{message}");

    spoke
        .install_bootstrap(&hub.bootstrap_kubeconfig(&token))
        .await;
    let _agent = start_agent(agent_config(&spoke, "stranger").await);
    let events: Api<Event> = Api::namespaced(hub.client.clone(), "default");
    wait_for_list(events.clone(), None, "the stranger reported", |events| {
        not_in_git(events, "stranger").len() == 1
    })
    .await;
    let accept_it = merge(json!({"spec": {"hubAcceptsClient": true}}));
    let (code, _) = refused(
        as_bootstrap
            .patch("stranger", &PatchParams::default(), &accept_it)
            .await,
    );
    assert_eq!(code, 403, "nor afterwards");
    // Nor can whoever may edit ManagedClusters but not accept them.
    let editor = person(
        &hub,
        "editor",
        json!([{"apiGroups": ["cluster.open-cluster-management.io"],
                "resources": ["managedclusters"], "verbs": ["get", "patch"]}]),
    )
    .await;
    let (code, message) = refused(
        Api::<ManagedCluster>::all(editor)
            .patch("stranger", &PatchParams::default(), &accept_it)
            .await,
    );
    assert_eq!(code, 403, "{message}");
    // Still pending, so `plan` (as sync's identity) lists it.
    let plan_pending = || async {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("hub.yaml"),
            "apiVersion: fleetform.io/v1alpha1\nkind: Hub\nmetadata:\n  name: hub\nspec:\n  kubeconfig:\n    embedded: {}\n",
        )
        .unwrap();
        let (origin, fleet) = fleetform::source::load_fleet(&fleetform::source::SourceSpec {
            location: dir.path().display().to_string(),
            ..Default::default()
        })
        .unwrap();
        let observed = fleetform::observe::observe_hub(
            "hub",
            &hub.hub_identity().await,
            &fleetform::plan::desired::hub_objects_stored(&fleet, "hub"),
        )
        .await
        .unwrap();
        let plan = fleetform::plan::plan(
            &fleet,
            origin,
            &[("hub".to_string(), observed)].into(),
            Default::default(),
        );
        (
            plan.hubs[0].pending_clusters.clone(),
            fleetform::plan::render::text(&plan, false),
        )
    };
    let (pending, text) = plan_pending().await;
    assert_eq!(pending, ["stranger"]);
    assert!(
        text.contains("cluster stranger asked to join but is not in git"),
        "{text}"
    );

    // A person allowed to accept does, as `clusteradm accept` does: the registration approved,
    // hubAcceptsClient set.
    // The test waits for the request by watch as the hub's admin; alice, like `clusteradm
    // accept`, may only list the requests, not watch them.
    let stranger_request = format!("{LABEL_CLUSTER_NAME}=stranger");
    wait_for_list(
        Api::<CertificateSigningRequest>::all(hub.client.clone()),
        Some(&stranger_request),
        "the stranger's registration request",
        |csrs| !csrs.is_empty(),
    )
    .await;
    let alice = person(&hub, "alice", accept_rules()).await;
    let csrs: Api<CertificateSigningRequest> = Api::all(alice.clone());
    let requests = csrs
        .list(&ListParams::default().labels(&stranger_request))
        .await
        .unwrap()
        .items;
    let mut approved = requests[0].clone();
    approved.status.get_or_insert_default().conditions = Some(vec![
        serde_json::from_value(
            json!({"type": "Approved", "status": "True", "reason": "AcceptedByClusteradm",
               "message": "accepted by alice"}),
        )
        .unwrap(),
    ]);
    csrs.replace_subresource::<CertificateSigningRequest>(
        "approval",
        &approved.name_any(),
        &PostParams::default(),
        &approved,
    )
    .await
    .unwrap();
    Api::<ManagedCluster>::all(alice)
        .patch("stranger", &PatchParams::default(), &accept_it)
        .await
        .unwrap();

    // It joins, and the hub says once that it is not in git.
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "stranger", "accepted and joined", |cluster| {
        is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED) && cluster.is_joined()
    })
    .await;
    assert!(
        Api::<ClusterRole>::all(hub.client.clone())
            .get_opt(&cluster_role_name("stranger"))
            .await
            .unwrap()
            .is_some(),
        "its agent's rights on the hub"
    );
    let reported = wait_for_list(events, None, "the acceptance reported", |events| {
        events.iter().any(|event| {
            event.reason.as_deref() == Some(REASON_NOT_IN_GIT)
                && event.type_.as_deref() == Some("Warning")
        })
    })
    .await;
    support::assert_named_as_client_go(&reported);
    let warnings: Vec<&Event> = reported
        .iter()
        .filter(|event| event.type_.as_deref() == Some("Warning"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let note = warnings[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains("cluster stranger is not in git: a user allowed to update managedclusters/accept accepted it")
            && note.contains("never prunes it"),
        "{note}"
    );
    // `status` shows it; `plan` no longer counts it pending, nor removes it.
    let state = fleetform::status::gather("hub", &hub.hub_identity().await)
        .await
        .unwrap();
    let mut report = fleetform::status::Report::default();
    report.add(&state, Timestamp::now());
    let text = report.text();
    assert!(
        text.contains("hub/stranger: NotInGit: accepted by a user allowed to accept, not declared in git (joined"),
        "{text}"
    );
    let (pending, text) = plan_pending().await;
    assert!(pending.is_empty(), "{text}");
    assert!(!text.contains("stranger"), "{text}");
    assert!(clusters.get_opt("stranger").await.unwrap().is_some());
}

#[tokio::test]
async fn a_hubs_auto_approval_accepts_clusters_its_users_register() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    let token = hub.issue_bootstrap_token("edge-7").await;
    let hub_doc: Hub = serde_json::from_value(json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "Hub",
        "metadata": {"name": "hub", "namespace": SYSTEM_NAMESPACE},
        "spec": {"kubeconfig": {"inCluster": true}, "registration": {
            "autoApproval": {"users": [format!("system:bootstrap:{}", token.id)]},
        }},
    }))
    .unwrap();
    Api::<Hub>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &hub_doc)
        .await
        .unwrap();
    spoke
        .install_bootstrap(&hub.bootstrap_kubeconfig(&token))
        .await;
    let _agent = start_agent(agent_config(&spoke, "edge-7").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let accepted = wait_for(&clusters, "edge-7", "auto-approved", |cluster| {
        is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED)
    })
    .await;
    assert!(accepted.hub_accepts_client());
    assert!(
        accepted
            .annotations()
            .contains_key(ANNOTATION_AUTOMATICALLY_ACCEPTED_ON)
    );
    // Its registration is approved too: it joins, as OCM's auto-approved clusters do.
    wait_for(&clusters, "edge-7", "joined", ManagedCluster::is_joined).await;
}

#[tokio::test]
async fn a_bootstrap_token_sees_no_cluster_and_no_csr_but_its_own() {
    let hub = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    hub.declare_spoke("spoke-a").await;
    let token = hub.issue_bootstrap_token("spoke-a").await;
    let as_admin: Api<ManagedCluster> = Api::all(hub.client.clone());
    as_admin
        .create(&PostParams::default(), &cluster("other", json!({})))
        .await
        .unwrap();
    bootstrap_role_bound(&hub).await;
    let client = bootstrap_client(&hub, &token).await;
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let created = clusters
        .create(&PostParams::default(), &cluster("spoke-a", json!({})))
        .await
        .expect("the token registers its cluster");
    assert_eq!(created.name_any(), "spoke-a");
    assert_eq!(refused(clusters.list(&ListParams::default()).await).0, 403);
    assert_eq!(
        refused(
            clusters
                .watch(&WatchParams::default(), "0")
                .await
                .map(|_| ())
        )
        .0,
        403
    );
    let csrs: Api<CertificateSigningRequest> = Api::all(client);
    assert_eq!(refused(csrs.list(&ListParams::default()).await).0, 403);
    assert_eq!(
        refused(
            csrs.list(&ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}=other")))
                .await
        )
        .0,
        403
    );
}

#[tokio::test]
async fn an_unjoined_clusters_old_certificate_is_useless_when_its_name_joins_again() {
    let (hub, _loops, spoke, agent, old_identity) = joined_spoke().await;
    let as_old: Api<ManagedCluster> = Api::all(old_identity.clone());
    as_old.get("spoke-a").await.expect("the certificate works");

    // Unjoined: the agent stops and drops its identity, the hub forgets the cluster.
    agent.stop().await;
    Api::<Secret>::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
        .delete(HUB_KUBECONFIG_SECRET, &DeleteParams::default())
        .await
        .unwrap();
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let first = clusters.get("spoke-a").await.unwrap();
    clusters
        .delete("spoke-a", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&clusters, &first).await;

    // A cluster of the same name joins again.
    let _agent = start_agent(agent_config(&spoke, "spoke-a").await);
    wait_for(&clusters, "spoke-a", "registered again", move |c| {
        c.uid() != first.uid()
    })
    .await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(
        &clusters,
        "spoke-a",
        "joined again",
        ManagedCluster::is_joined,
    )
    .await;
    Api::<ManagedCluster>::all(agent_identity(&spoke).await)
        .get("spoke-a")
        .await
        .expect("the new certificate works");
    let (code, message) = refused(as_old.get("spoke-a").await);
    assert_eq!(code, 403, "the old certificate is useless: {message}");
    let (code, _) = refused(
        Api::<Lease>::namespaced(old_identity, "spoke-a")
            .get(CLUSTER_LEASE_NAME)
            .await,
    );
    assert_eq!(code, 403);
}

/// Has the reconciler look at `spoke-a` now rather than at its next resync.
async fn nudge(hub: &Cluster) {
    let nudged = Timestamp::now().to_string();
    Api::<Spoke>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &merge(json!({"metadata": {"annotations": {"test/nudged": nudged}}})),
        )
        .await
        .unwrap();
}

/// The hub's bootstrap token Secrets of `cluster`, once `done` holds for them.
async fn tokens_of(
    hub: &Cluster,
    cluster: &str,
    what: &str,
    done: impl Fn(&[Secret]) -> bool,
) -> Vec<Secret> {
    wait_for_list(
        Api::<Secret>::namespaced(hub.client.clone(), "kube-system"),
        Some(&format!("{LABEL_CLUSTER_NAME}={cluster}")),
        what,
        done,
    )
    .await
}

#[tokio::test]
async fn bootstrap_tokens_expire_are_renewed_until_the_spoke_joins_and_are_deleted_after() {
    // Short certificates: the agent renews its own within the test, after its token is gone.
    let hub = Cluster::start_signing_for(Duration::from_secs(12)).await;
    let spoke = Cluster::start().await;
    let _loops = start_hub_loops(&hub).await;
    declare_fleet_of_one(&hub, &spoke, "spoke-a").await;
    let before = Timestamp::now();
    let reconciler = start_reconciler(&hub).await;
    let tokens = tokens_of(&hub, "spoke-a", "a token issued", |tokens| {
        !tokens.is_empty()
    })
    .await;
    let after = Timestamp::now();
    let expires = token_expiration(&tokens[0]).expect("the token expires");
    let ttl = SignedDuration::try_from(BOOTSTRAP_TOKEN_TTL).unwrap();
    // Issued between `before` and `after`, to the second (RFC 3339 drops the fraction).
    assert!(
        expires >= before + ttl - SignedDuration::from_secs(1) && expires <= after + ttl,
        "expires at {expires}, not {ttl} after it was issued (between {before} and {after})"
    );

    // Near its end, and the spoke has not joined (no agent runs): the token is renewed.
    let name = tokens[0].name_any();
    let soon = Timestamp::now()
        .checked_add(SignedDuration::from_hours(1))
        .unwrap();
    Api::<Secret>::namespaced(hub.client.clone(), "kube-system")
        .patch(
            &name,
            &PatchParams::default(),
            &merge(expiration_patch(soon)),
        )
        .await
        .unwrap();
    nudge(&hub).await;
    let renewed = tokens_of(&hub, "spoke-a", "the token renewed", |tokens| {
        tokens.iter().any(|token| {
            token_expiration(token)
                .is_some_and(|until| until.duration_since(soon) > SignedDuration::from_hours(20))
        })
    })
    .await;
    assert_eq!(renewed.len(), 1, "renewed, not replaced");
    assert_eq!(renewed[0].name_any(), name);

    // The agent joins with it; then it is deleted, and the agent goes on with its certificate.
    let agent = start_agent(agent_config(&spoke, "spoke-a").await);
    let gone = tokens_of(&hub, "spoke-a", "the token deleted", <[Secret]>::is_empty).await;
    assert!(gone.is_empty());
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let joined = clusters.get("spoke-a").await.unwrap();
    assert!(joined.is_joined(), "deleted only after the join");
    let deleted_at = Timestamp::now();
    wait_for(
        &Api::<Lease>::namespaced(hub.client.clone(), "spoke-a"),
        CLUSTER_LEASE_NAME,
        "renewed without the token",
        move |lease| {
            lease
                .spec
                .as_ref()
                .and_then(|spec| spec.renew_time.as_ref())
                .is_some_and(|renewed| renewed.0 > deleted_at)
        },
    )
    .await;
    let still = clusters.get("spoke-a").await.unwrap();
    assert_eq!(
        still
            .condition(CONDITION_HUB_ACCEPTED)
            .map(|c| c.status.as_str()),
        Some(STATUS_TRUE)
    );
    let identities: Api<Secret> = Api::namespaced(spoke.client.clone(), AGENT_NAMESPACE);
    let certificate = |secret: &Secret| {
        secret.data.as_ref().unwrap()[HUB_KUBECONFIG_SECRET_KEY_TLS_CRT]
            .0
            .clone()
    };
    let before = certificate(&identities.get(HUB_KUBECONFIG_SECRET).await.unwrap());
    wait_for(
        &identities,
        HUB_KUBECONFIG_SECRET,
        "the certificate renewed without a token",
        move |secret| certificate(secret) != before,
    )
    .await;

    // The agent loses its certificate: it must bootstrap again, and gets a new token for that.
    agent.stop().await;
    Api::<Secret>::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
        .delete(HUB_KUBECONFIG_SECRET, &DeleteParams::default())
        .await
        .unwrap();
    nudge(&hub).await;
    let reissued = tokens_of(&hub, "spoke-a", "a new token", |tokens| !tokens.is_empty()).await;
    assert_ne!(reissued[0].name_any(), name);
    let _agent = start_agent(agent_config(&spoke, "spoke-a").await);
    tokens_of(
        &hub,
        "spoke-a",
        "the new token deleted",
        <[Secret]>::is_empty,
    )
    .await;
    Api::<ManagedCluster>::all(agent_identity(&spoke).await)
        .get("spoke-a")
        .await
        .expect("registered again with the new token");
    reconciler.stop().await;
}
