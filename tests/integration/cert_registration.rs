//! Registration by certificate against embedded control planes (DESIGN §4.1, §4.3): per-spoke
//! bootstrap tokens traded for CSR-issued identities, their reuse on restart, the pending-CSR
//! limit, certificate lifetimes and rotation, re-bootstrapping, and what an identity may not do;
//! addon registrations written by the hub from the AddOn document (or by an addon manager), the
//! addon CSRs it approves, denies, explains and paces.

use crate::support;

use std::time::Duration;

use fleetform::agent::registration::REASON_CERTIFICATE_CREATION_HALTED;
use fleetform::agent::rotation::{CertificateLifetime, addon_registration_csr, registration_csr};
use fleetform::agent::{AgentConfig, HubConnection};
use fleetform::api::ManagedCluster;
use fleetform::api::ManagedClusterAddOn;
use fleetform::api::addon::{
    ClusterManagementAddOn, ManagedClusterAddOnSpec, RegistrationConfig, Subject,
};
use fleetform::api::bootstrap_token::BOOTSTRAP_GROUP;
use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::api::vocabulary::{
    AGENT_NAMESPACE, CLUSTER_LEASE_NAME, CONDITION_CERTIFICATE_ROTATED, HUB_KUBECONFIG_SECRET,
    HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME, HUB_KUBECONFIG_SECRET_KEY_CLUSTER_NAME,
    HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG, HUB_KUBECONFIG_SECRET_KEY_TLS_CRT,
    HUB_KUBECONFIG_SECRET_KEY_TLS_KEY, LABEL_ADDON_NAME, LABEL_CLUSTER_NAME,
    REASON_CLIENT_CERTIFICATE_UPDATE_FAILED, REASON_CLIENT_CERTIFICATE_UPDATED,
    SIGNER_KUBE_APISERVER_CLIENT, STATUS_TRUE,
};
use fleetform::api::vocabulary::{CSR_APPROVED, CSR_DENIED};
use fleetform::hub::bootstrap::BOOTSTRAP_ROLE_NAME;
use fleetform::plan::desired::ADDON_SPEC_ANNOTATION;
use fleetform_controlplane::auth::ca::CertificateAuthority;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use support::{
    Cluster, Running, accept, client_for, start_agent, start_hub_loops, wait_for, wait_for_list,
};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

/// A hub with the hub loops running and `fleetform-system` present.
async fn hub_with_loops(hub: Cluster) -> (Cluster, Running) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    hub.namespace(SYSTEM_NAMESPACE).await;
    let loops = start_hub_loops(&hub).await;
    (hub, loops)
}

/// An agent of `name` on `spoke` registering with its bootstrap Secret, as the agent
/// ServiceAccount.
async fn cert_agent(spoke: &Cluster, name: &str) -> AgentConfig {
    let mut config = AgentConfig::new(
        name,
        HubConnection::BootstrapSecret,
        spoke.agent_identity().await,
    );
    config.addon_lease_duration = Duration::from_secs(1);
    config
}

/// One year, in seconds.
const YEAR: i32 = 365 * 24 * 3600;

/// Asserts that `renewal` was requested once no more than a quarter of `lifetime` (the real
/// certificate's, as issued) was left. Both times are whole seconds: the renewal's creation time
/// is truncated, so it is compared with the truncated deadline.
fn assert_rotated_late_enough(renewal: &CertificateSigningRequest, lifetime: &CertificateLifetime) {
    let created = renewal
        .metadata
        .creation_timestamp
        .as_ref()
        .expect("a creation time")
        .0;
    let whole = lifetime.not_before.duration_until(lifetime.not_after);
    let earliest = lifetime.not_before + whole.mul_f64(0.75);
    assert!(
        created.as_second() >= earliest.as_second(),
        "renewal {} requested at {created}, before 75% of the certificate's life ({} to {}) was over",
        renewal.metadata.name.as_deref().unwrap_or_default(),
        lifetime.not_before,
        lifetime.not_after
    );
}

fn hub_secrets(spoke: &Cluster) -> Api<Secret> {
    Api::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
}

fn key(secret: &Secret, name: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(name))
        .map(|ByteString(bytes)| String::from_utf8_lossy(bytes).into_owned())
        .unwrap_or_default()
}

fn is_pending(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_none_or(|c| c.is_empty())
}

fn denial(csr: &CertificateSigningRequest) -> Option<String> {
    csr.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == CSR_DENIED)
        .map(|c| c.message.clone().unwrap_or_default())
}

async fn csrs_of(hub: &Cluster, cluster: &str) -> Vec<CertificateSigningRequest> {
    Api::<CertificateSigningRequest>::all(hub.client.clone())
        .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}={cluster}")))
        .await
        .unwrap()
        .items
}

fn renew_time(lease: &Lease) -> Option<Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

fn status_code(result: Result<impl std::fmt::Debug, kube::Error>) -> u16 {
    match result {
        Ok(found) => panic!("allowed: {found:?}"),
        Err(kube::Error::Api(status)) => status.code,
        Err(err) => panic!("not an API error: {err}"),
    }
}

#[tokio::test]
async fn spokes_register_by_certificate_reuse_it_on_restart_and_touch_only_their_own_cluster() {
    let (hub, _loops) = hub_with_loops(Cluster::start().await).await;
    let spoke_a = Cluster::start().await;
    let spoke_b = Cluster::start().await;
    for (spoke, name) in [(&spoke_a, "spoke-a"), (&spoke_b, "spoke-b")] {
        hub.declare_spoke(name).await;
        let token = hub.issue_bootstrap_token(name).await;
        spoke
            .install_bootstrap(&hub.bootstrap_kubeconfig(&token))
            .await;
    }
    let agent_a = start_agent(cert_agent(&spoke_a, "spoke-a").await);
    let _agent_b = start_agent(cert_agent(&spoke_b, "spoke-b").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    for name in ["spoke-a", "spoke-b"] {
        wait_for(&clusters, name, "created with the bootstrap token", |_| {
            true
        })
        .await;
        accept(&hub, name, 1).await;
    }
    for name in ["spoke-a", "spoke-b"] {
        wait_for(&clusters, name, "joined", ManagedCluster::is_joined).await;
    }

    let binding = Api::<ClusterRoleBinding>::all(hub.client.clone())
        .get(BOOTSTRAP_ROLE_NAME)
        .await
        .expect("the hub loops bind the bootstrap role");
    assert_eq!(
        binding.subjects.unwrap_or_default()[0].name,
        BOOTSTRAP_GROUP
    );

    let stored = wait_for(
        &hub_secrets(&spoke_a),
        HUB_KUBECONFIG_SECRET,
        "stored",
        |_| true,
    )
    .await;
    assert_eq!(
        key(&stored, HUB_KUBECONFIG_SECRET_KEY_CLUSTER_NAME),
        "spoke-a"
    );
    let agent_id = key(&stored, HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME);
    assert!(!agent_id.is_empty());
    assert!(key(&stored, HUB_KUBECONFIG_SECRET_KEY_TLS_KEY).contains("PRIVATE KEY"));
    let certificate = key(&stored, HUB_KUBECONFIG_SECRET_KEY_TLS_CRT);
    CertificateLifetime::from_pem(certificate.as_bytes()).expect("an issued certificate");
    let issued = csrs_of(&hub, "spoke-a").await;
    assert_eq!(issued.len(), 1, "one CSR for one registration");
    assert_eq!(
        issued[0].spec.username.as_deref(),
        Some(
            format!(
                "system:bootstrap:{}",
                Api::<Secret>::namespaced(hub.client.clone(), "kube-system")
                    .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}=spoke-a")))
                    .await
                    .unwrap()
                    .items[0]
                    .metadata
                    .name
                    .as_deref()
                    .unwrap()
                    .trim_start_matches("bootstrap-token-")
            )
            .as_str()
        ),
        "requested with spoke-a's own bootstrap token"
    );

    // A restarted agent reuses its certificate: its lease keeps being renewed and no CSR is added.
    agent_a.stop().await;
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let before = renew_time(&leases.get(CLUSTER_LEASE_NAME).await.unwrap());
    let _agent_a = start_agent(cert_agent(&spoke_a, "spoke-a").await);
    wait_for(
        &leases,
        CLUSTER_LEASE_NAME,
        "renewed after the restart",
        move |lease| renew_time(lease) > before,
    )
    .await;
    assert_eq!(
        csrs_of(&hub, "spoke-a").await.len(),
        1,
        "no new CSR on restart"
    );
    let again = hub_secrets(&spoke_a)
        .get(HUB_KUBECONFIG_SECRET)
        .await
        .unwrap();
    assert_eq!(key(&again, HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME), agent_id);

    // spoke-a's identity can do its own work and nothing on spoke-b.
    let identity: Client = client_for(&key(&stored, HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG)).await;
    let as_a: Api<ManagedCluster> = Api::all(identity.clone());
    as_a.get("spoke-a").await.expect("its own ManagedCluster");
    Api::<ManagedClusterAddOn>::namespaced(identity.clone(), "spoke-a")
        .list(&ListParams::default())
        .await
        .expect("its own addons");
    assert_eq!(status_code(as_a.get("spoke-b").await), 403);
    assert_eq!(
        status_code(
            as_a.patch_status(
                "spoke-b",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": []}}))
            )
            .await
        ),
        403
    );
    let leases_b: Api<Lease> = Api::namespaced(identity.clone(), "spoke-b");
    assert_eq!(status_code(leases_b.get(CLUSTER_LEASE_NAME).await), 403);
    assert_eq!(
        status_code(
            leases_b
                .patch(
                    CLUSTER_LEASE_NAME,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"holderIdentity": "a"}}))
                )
                .await
        ),
        403
    );
    let addons_b: Api<ManagedClusterAddOn> = Api::namespaced(identity.clone(), "spoke-b");
    assert_eq!(
        status_code(addons_b.list(&ListParams::default()).await),
        403
    );
    let addon = ManagedClusterAddOn::new("hello", ManagedClusterAddOnSpec::default());
    assert_eq!(
        status_code(addons_b.create(&PostParams::default(), &addon).await),
        403
    );
}

#[tokio::test]
async fn a_bootstrap_token_of_one_spoke_cannot_register_another() {
    let (hub, _loops) = hub_with_loops(Cluster::start().await).await;
    let spoke_b = Cluster::start().await;
    hub.declare_spoke("spoke-a").await;
    hub.declare_spoke("spoke-b").await;
    let token_a = hub.issue_bootstrap_token("spoke-a").await;
    let token_b = hub.issue_bootstrap_token("spoke-b").await;
    spoke_b
        .install_bootstrap(&hub.bootstrap_kubeconfig(&token_a))
        .await;
    let _agent = start_agent(cert_agent(&spoke_b, "spoke-b").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-b", "created", |_| true).await;
    accept(&hub, "spoke-b", 1).await;

    let csrs = wait_for_list(
        Api::<CertificateSigningRequest>::all(hub.client.clone()),
        Some(&format!("{LABEL_CLUSTER_NAME}=spoke-b")),
        "spoke-b's CSR judged",
        |csrs| csrs.iter().any(|csr| denial(csr).is_some()),
    )
    .await;
    let message = csrs.iter().find_map(denial).unwrap();
    assert!(
        message.contains(&format!("system:bootstrap:{}", token_b.id)),
        "the denial names spoke-b's own token: {message}"
    );
    assert!(csrs.iter().all(|csr| {
        csr.status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .is_none()
    }));
    assert!(
        hub_secrets(&spoke_b)
            .get_opt(HUB_KUBECONFIG_SECRET)
            .await
            .unwrap()
            .is_none(),
        "no identity for spoke-b"
    );
}

/// What OCM's bootstrap role grants bootstrap tokens beyond fleetform's: listing CSRs.
async fn grant_ocm_bootstrap_csr_listing(hub: &Cluster) {
    let name = "ocm-bootstrap-lists-csrs";
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                   "verbs": ["list", "watch"]}],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": BOOTSTRAP_GROUP}],
    });
    let params = PatchParams::apply("fleetform-test").force();
    Api::<ClusterRole>::all(hub.client.clone())
        .patch(name, &params, &Patch::Apply(&role))
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(hub.client.clone())
        .patch(name, &params, &Patch::Apply(&binding))
        .await
        .unwrap();
}

#[tokio::test]
async fn restarts_never_leave_more_than_ten_registration_csrs_pending() {
    let (hub, _loops) = hub_with_loops(Cluster::start().await).await;
    let spoke = Cluster::start().await;
    // fleetform's tokens list no CSR, so they cannot count pending ones; OCM's bootstrap role
    // lets every token list them all, and the agent keeps the limit there.
    grant_ocm_bootstrap_csr_listing(&hub).await;
    // Never declared in git: its CSRs stay pending.
    let token = hub.issue_bootstrap_token("spoke-a").await;
    spoke
        .install_bootstrap(&hub.bootstrap_kubeconfig(&token))
        .await;
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.client.clone());
    for n in 0..9 {
        let earlier = registration_csr("spoke-a", &format!("earlier{n}"), None).unwrap();
        csrs.create(&PostParams::default(), &earlier.csr)
            .await
            .unwrap();
    }
    let labels = format!("{LABEL_CLUSTER_NAME}=spoke-a");
    let agent = start_agent(cert_agent(&spoke, "spoke-a").await);
    wait_for_list(csrs.clone(), Some(&labels), "the agent's CSR", |csrs| {
        csrs.len() == 10
    })
    .await;
    agent.stop().await;

    let _agent = start_agent(cert_agent(&spoke, "spoke-a").await);
    let events: Api<Event> = Api::namespaced(spoke.client.clone(), AGENT_NAMESPACE);
    wait_for_list(events, None, "the agent says it waits", |events| {
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some(REASON_CERTIFICATE_CREATION_HALTED))
    })
    .await;
    let all = csrs_of(&hub, "spoke-a").await;
    assert_eq!(all.len(), 10);
    assert!(all.iter().all(is_pending));
}

#[tokio::test]
async fn short_certificates_of_the_agent_and_its_addons_are_rotated_and_the_lease_keeps_being_renewed()
 {
    // The agent asks for a year; the hub signs for at most 12 s.
    let hub = Cluster::start_signing_for(Duration::from_secs(12)).await;
    let (hub, _loops, spoke, _agent) = joined_spoke_asking(hub, Some(YEAR)).await;
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let first = wait_for(
        &hub_secrets(&spoke),
        HUB_KUBECONFIG_SECRET,
        "stored",
        |_| true,
    )
    .await;
    let first_certificate = key(&first, HUB_KUBECONFIG_SECRET_KEY_TLS_CRT);
    let lifetime = CertificateLifetime::from_pem(first_certificate.as_bytes()).unwrap();
    assert!(
        lifetime
            .not_before
            .duration_until(lifetime.not_after)
            .as_secs()
            <= 14,
        "the hub caps the year asked for at its 12 s"
    );

    publish_addon(&hub, json!([{"signerName": SIGNER_KUBE_APISERVER_CLIENT}])).await;
    install_hello(&hub, &spoke).await;
    let addon_secrets: Api<Secret> = Api::namespaced(spoke.client.clone(), "hello-ns");
    let first_addon = wait_for(
        &addon_secrets,
        "hello-hub-kubeconfig",
        "addon certificate",
        |_| true,
    )
    .await;

    let rotated = wait_for(&clusters, "spoke-a", "certificate rotated", |c| {
        c.condition(CONDITION_CERTIFICATE_ROTATED)
            .is_some_and(|c| c.status == STATUS_TRUE)
    })
    .await;
    let condition = rotated.condition(CONDITION_CERTIFICATE_ROTATED).unwrap();
    assert_eq!(condition.reason, REASON_CLIENT_CERTIFICATE_UPDATED);
    let second = hub_secrets(&spoke)
        .get(HUB_KUBECONFIG_SECRET)
        .await
        .unwrap();
    assert_ne!(
        key(&second, HUB_KUBECONFIG_SECRET_KEY_TLS_CRT),
        first_certificate
    );
    assert_eq!(
        key(&second, HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME),
        key(&first, HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME),
        "a renewal keeps the agent's identity"
    );
    let renewals = csrs_of(&hub, "spoke-a").await;
    let renewal = renewals
        .iter()
        .filter(|csr| {
            csr.metadata
                .labels
                .as_ref()
                .is_none_or(|labels| !labels.contains_key(LABEL_ADDON_NAME))
        })
        .find(|csr| {
            csr.spec
                .username
                .as_deref()
                .is_some_and(|u| u.starts_with("system:open-cluster-management:spoke-a:"))
        })
        .expect("the renewal is requested by the agent's own identity");
    assert_rotated_late_enough(renewal, &lifetime);

    // The addon's certificate is rotated too, as late.
    let first_addon_certificate = key(&first_addon, "tls.crt");
    let addon_lifetime = CertificateLifetime::from_pem(first_addon_certificate.as_bytes()).unwrap();
    wait_for(
        &addon_secrets,
        "hello-hub-kubeconfig",
        "addon certificate rotated",
        move |s| key(s, "tls.crt") != first_addon_certificate,
    )
    .await;
    let addon_csrs = Api::<CertificateSigningRequest>::all(hub.client.clone())
        .list(&ListParams::default().labels(&format!("{LABEL_ADDON_NAME}=hello")))
        .await
        .unwrap()
        .items;
    let addon_renewal = addon_csrs
        .iter()
        .max_by_key(|csr| csr.metadata.creation_timestamp.clone())
        .expect("the addon's renewal");
    assert_rotated_late_enough(addon_renewal, &addon_lifetime);

    // Past the first certificate's end, the loops still renew the lease with the new one.
    let past_first = lifetime.not_after;
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    wait_for(
        &leases,
        CLUSTER_LEASE_NAME,
        "renewed after the first certificate expired",
        move |lease| renew_time(lease).is_some_and(|renewed| renewed > past_first),
    )
    .await;
}

#[tokio::test]
async fn a_new_bootstrap_secret_registers_the_agent_again() {
    let (hub, _loops) = hub_with_loops(Cluster::start().await).await;
    let spoke = Cluster::start().await;
    hub.declare_spoke("spoke-a").await;
    let first_token = hub.issue_bootstrap_token("spoke-a").await;
    spoke
        .install_bootstrap(&hub.bootstrap_kubeconfig(&first_token))
        .await;
    let _agent = start_agent(cert_agent(&spoke, "spoke-a").await);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "created", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    let first = wait_for(
        &hub_secrets(&spoke),
        HUB_KUBECONFIG_SECRET,
        "stored",
        |_| true,
    )
    .await;
    let first_agent = key(&first, HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME);

    // The reconciler replaces the spoke's token.
    Api::<Secret>::namespaced(hub.client.clone(), "kube-system")
        .delete(
            &format!("bootstrap-token-{}", first_token.id),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    let second_token = hub.issue_bootstrap_token("spoke-a").await;
    spoke
        .install_bootstrap(&hub.bootstrap_kubeconfig(&second_token))
        .await;

    let second = wait_for(
        &hub_secrets(&spoke),
        HUB_KUBECONFIG_SECRET,
        "a new identity",
        move |s| key(s, HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME) != first_agent,
    )
    .await;
    let requester = format!("system:bootstrap:{}", second_token.id);
    assert!(
        csrs_of(&hub, "spoke-a")
            .await
            .iter()
            .any(|csr| csr.spec.username.as_deref() == Some(requester.as_str())),
        "registered again with the new token"
    );
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), "spoke-a");
    let stored_at = Timestamp::now();
    drop(second);
    wait_for(
        &leases,
        CLUSTER_LEASE_NAME,
        "renewed with the new identity",
        move |lease| renew_time(lease).is_some_and(|renewed| renewed > stored_at),
    )
    .await;
}

/// A spoke registered by certificate and joined: hub (with loops), spoke, running agent.
async fn joined_spoke() -> (Cluster, Running, Cluster, Running) {
    joined_spoke_asking(Cluster::start().await, None).await
}

/// [`joined_spoke`] on a hub of the caller's, its agent asking for certificates of `seconds`
/// (`--client-cert-expiration-seconds`; `None` leaves it to the signer).
async fn joined_spoke_asking(
    hub: Cluster,
    seconds: Option<i32>,
) -> (Cluster, Running, Cluster, Running) {
    let (hub, loops) = hub_with_loops(hub).await;
    let spoke = Cluster::start().await;
    hub.declare_spoke("spoke-a").await;
    let token = hub.issue_bootstrap_token("spoke-a").await;
    spoke
        .install_bootstrap(&hub.bootstrap_kubeconfig(&token))
        .await;
    let mut config = cert_agent(&spoke, "spoke-a").await;
    config.client_cert_expiration_seconds = seconds;
    let agent = start_agent(config);
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "created", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "joined", ManagedCluster::is_joined).await;
    (hub, loops, spoke, agent)
}

const CUSTOM_SIGNER: &str = "example.com/hello-signer";

/// The AddOn document of `hello` on the hub, as sync writes it: its ClusterManagementAddOn with
/// the spec annotation.
async fn publish_addon(hub: &Cluster, registrations: serde_json::Value) {
    let spec = json!({"installNamespace": "hello-ns", "registrations": registrations});
    Api::<ClusterManagementAddOn>::all(hub.client.clone())
        .patch(
            "hello",
            &PatchParams::apply("fleetform-test").force(),
            &Patch::Apply(json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ClusterManagementAddOn",
                "metadata": {"name": "hello", "annotations": {ADDON_SPEC_ANNOTATION: spec.to_string()}},
                "spec": {"addOnMeta": {"displayName": "hello"}},
            })),
        )
        .await
        .expect("publish the addon");
}

/// `hello` published with a registration of the kube signer and one of [`CUSTOM_SIGNER`], whose
/// CA (returned) is in a hub Secret its `signerSecretRef` names.
async fn publish_addon_with_a_custom_signer(hub: &Cluster) -> CertificateAuthority {
    let (custom_ca, custom_ca_key) =
        CertificateAuthority::generate(time::OffsetDateTime::now_utc()).unwrap();
    Api::<Secret>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "hello-signer-ca"},
                "data": {
                    "tls.crt": ByteString(custom_ca.cert_pem().as_bytes().to_vec()),
                    "tls.key": ByteString(custom_ca_key.as_bytes().to_vec()),
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let registrations = json!([
        {"signerName": SIGNER_KUBE_APISERVER_CLIENT},
        {"signerName": CUSTOM_SIGNER,
         "signerSecretRef": {"namespace": SYSTEM_NAMESPACE, "name": "hello-signer-ca"}},
    ]);
    publish_addon(hub, registrations).await;
    custom_ca
}

/// The addon `hello` enabled on spoke-a, installed in `hello-ns`.
async fn install_hello(hub: &Cluster, spoke: &Cluster) {
    spoke.namespace("hello-ns").await;
    Api::<ManagedClusterAddOn>::namespaced(hub.client.clone(), "spoke-a")
        .create(
            &PostParams::default(),
            &ManagedClusterAddOn::new(
                "hello",
                ManagedClusterAddOnSpec {
                    install_namespace: Some("hello-ns".into()),
                    ..Default::default()
                },
            ),
        )
        .await
        .unwrap();
}

/// The registrations an addon controller writes into the ManagedClusterAddOn's status.
async fn set_registrations(hub: &Cluster, registrations: serde_json::Value) {
    Api::<ManagedClusterAddOn>::namespaced(hub.client.clone(), "spoke-a")
        .patch_status(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"registrations": registrations}})),
        )
        .await
        .expect("write the registrations");
}

fn parse_certificate(pem_text: &str) -> (String, Vec<String>, Vec<u8>) {
    let block = ::pem::parse(pem_text).unwrap();
    let (_, cert) = X509Certificate::from_der(block.contents()).unwrap();
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let groups = cert
        .subject()
        .iter_organization()
        .map(|o| o.as_str().unwrap().to_string())
        .collect();
    (common_name, groups, block.contents().to_vec())
}

fn common_name(secret: &Secret) -> String {
    parse_certificate(&key(secret, "tls.crt")).0
}

#[tokio::test]
async fn addon_registrations_get_certificates_from_the_kube_and_custom_signers() {
    let (hub, _loops, spoke, _agent) = joined_spoke().await;
    let custom_ca = publish_addon_with_a_custom_signer(&hub).await;
    install_hello(&hub, &spoke).await;

    let addon_secrets: Api<Secret> = Api::namespaced(spoke.client.clone(), "hello-ns");
    let kube_secret = wait_for(
        &addon_secrets,
        "hello-hub-kubeconfig",
        "kube signer certificate",
        |_| true,
    )
    .await;
    let default_user = "system:open-cluster-management:cluster:spoke-a:addon:hello:agent:hello";
    let (user, groups, _) = parse_certificate(&key(&kube_secret, "tls.crt"));
    assert_eq!(user, default_user);
    assert_eq!(
        groups,
        [
            "system:open-cluster-management:cluster:spoke-a:addon:hello",
            "system:open-cluster-management:addon:hello",
        ]
    );
    // The kubeconfig reaches the hub as the addon.
    let as_addon = client_for(&key(&kube_secret, "kubeconfig")).await;
    match Api::<ManagedCluster>::all(as_addon).get("spoke-a").await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403);
            assert!(status.message.contains(default_user), "{}", status.message);
        }
        other => panic!("the addon has no rights on ManagedClusters: {other:?}"),
    }

    let custom_secret = wait_for(
        &addon_secrets,
        "hello-example.com-hello-signer-client-cert",
        "custom signer certificate",
        |_| true,
    )
    .await;
    assert!(key(&custom_secret, "kubeconfig").is_empty());
    let (user, _, der) = parse_certificate(&key(&custom_secret, "tls.crt"));
    assert_eq!(user, default_user);
    let (_, issued) = X509Certificate::from_der(&der).unwrap();
    let ca_block = ::pem::parse(custom_ca.cert_pem()).unwrap();
    let (_, ca) = X509Certificate::from_der(ca_block.contents()).unwrap();
    assert_eq!(issued.issuer(), ca.subject());
    issued
        .verify_signature(Some(ca.public_key()))
        .expect("signed by the custom signer's CA");
}

#[tokio::test]
async fn no_certificate_is_requested_until_the_install_namespace_exists_and_then_one() {
    let (hub, _loops, spoke, _agent) = joined_spoke().await;
    publish_addon(&hub, json!([{"signerName": SIGNER_KUBE_APISERVER_CLIENT}])).await;
    let addons = Api::<ManagedClusterAddOn>::namespaced(hub.client.clone(), "spoke-a");
    addons
        .create(
            &PostParams::default(),
            &ManagedClusterAddOn::new(
                "hello",
                ManagedClusterAddOnSpec {
                    install_namespace: Some("hello-ns".into()),
                    ..Default::default()
                },
            ),
        )
        .await
        .unwrap();

    // The agent says why it waits, on the addon, and asks the hub for nothing meanwhile.
    let waiting = wait_for(&addons, "hello", "waiting for its namespace", |addon| {
        addon
            .condition(CONDITION_CERTIFICATE_ROTATED)
            .is_some_and(|c| c.status == "False" && c.message.contains("hello-ns"))
    })
    .await;
    assert_eq!(
        waiting
            .condition(CONDITION_CERTIFICATE_ROTATED)
            .unwrap()
            .reason,
        REASON_CLIENT_CERTIFICATE_UPDATE_FAILED
    );
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.client.clone());
    let hello_csrs = ListParams::default().labels(&format!("{LABEL_ADDON_NAME}=hello"));
    assert!(csrs.list(&hello_csrs).await.unwrap().items.is_empty());

    // Once the addon's deployer creates it, one CSR, one certificate.
    spoke.namespace("hello-ns").await;
    wait_for(
        &Api::<Secret>::namespaced(spoke.client.clone(), "hello-ns"),
        "hello-hub-kubeconfig",
        "certificate stored",
        |_| true,
    )
    .await;
    wait_for(&addons, "hello", "reported stored", |addon| {
        addon
            .condition(CONDITION_CERTIFICATE_ROTATED)
            .is_some_and(|c| c.status == "True")
    })
    .await;
    assert_eq!(csrs.list(&hello_csrs).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn a_changed_addon_document_gets_the_spoke_a_new_certificate() {
    let (hub, _loops, spoke, _agent) = joined_spoke().await;
    publish_addon(&hub, json!([{"signerName": SIGNER_KUBE_APISERVER_CLIENT}])).await;
    install_hello(&hub, &spoke).await;
    let addon_secrets: Api<Secret> = Api::namespaced(spoke.client.clone(), "hello-ns");
    let first = wait_for(
        &addon_secrets,
        "hello-hub-kubeconfig",
        "first certificate",
        |_| true,
    )
    .await;
    assert!(common_name(&first).ends_with(":agent:hello"));

    // The AddOn document names a subject of its own: the hub writes it into the registrations,
    // the agent asks for it and gets it.
    let changed = json!([{"signerName": SIGNER_KUBE_APISERVER_CLIENT,
                          "subject": {"user": "hello-agent", "groups": ["hello-group"]}}]);
    publish_addon(&hub, changed).await;
    let second = wait_for(
        &addon_secrets,
        "hello-hub-kubeconfig",
        "a certificate for the new subject",
        |secret| common_name(secret) == "hello-agent",
    )
    .await;
    assert_eq!(
        parse_certificate(&key(&second, "tls.crt")).1,
        ["hello-group"]
    );
}

/// A client of the agent's hub identity: the certificate it stored in `hub-kubeconfig-secret`.
async fn as_agent(spoke: &Cluster) -> Client {
    let stored = wait_for(&hub_secrets(spoke), HUB_KUBECONFIG_SECRET, "stored", |_| {
        true
    })
    .await;
    client_for(&key(&stored, HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG)).await
}

/// Creates, as `agent`, a CSR of addon `hello` on spoke-a for `subject` from `signer`, as the
/// agent does for a registration: its name.
async fn request_for_hello(agent: &Client, signer: &str, subject: Subject) -> String {
    let registration = RegistrationConfig {
        signer_name: signer.into(),
        subject: Some(subject),
    };
    let pending = addon_registration_csr(&registration, "spoke-a", "hello", None).unwrap();
    Api::<CertificateSigningRequest>::all(agent.clone())
        .create(&PostParams::default(), &pending.csr)
        .await
        .expect("the agent may create CSRs")
        .name_any()
}

/// The Approved or Denied condition of a CSR, once it has one.
fn verdict_of(csr: &CertificateSigningRequest) -> Option<CertificateSigningRequestCondition> {
    csr.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == CSR_APPROVED || c.type_ == CSR_DENIED)
        .cloned()
}

/// Waits until the CSR is approved or denied: that condition.
async fn judged(hub: &Cluster, name: &str) -> CertificateSigningRequestCondition {
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.client.clone());
    let csr = wait_for(&csrs, name, "approved or denied", |csr| {
        verdict_of(csr).is_some()
    })
    .await;
    verdict_of(&csr).unwrap()
}

/// Waits until `hello`'s kube signer certificate is stored on the spoke: its Secret.
async fn hello_certificate(spoke: &Cluster) -> Secret {
    wait_for(
        &Api::<Secret>::namespaced(spoke.client.clone(), "hello-ns"),
        "hello-hub-kubeconfig",
        "the addon's certificate",
        |_| true,
    )
    .await
}

fn hello_on_spoke_a(hub: &Cluster) -> Api<ManagedClusterAddOn> {
    Api::namespaced(hub.client.clone(), "spoke-a")
}

#[tokio::test]
async fn addon_csrs_are_denied_for_an_addon_not_enabled_on_the_cluster_or_being_disabled() {
    let (hub, _loops, spoke, _agent) = joined_spoke().await;
    publish_addon(&hub, json!([{"signerName": SIGNER_KUBE_APISERVER_CLIENT}])).await;
    let agent = as_agent(&spoke).await;
    let default = Subject::default_for("spoke-a", "hello");

    // Not enabled on spoke-a: no ManagedClusterAddOn, no certificate in the addon's groups.
    let unasked = request_for_hello(&agent, SIGNER_KUBE_APISERVER_CLIENT, default.clone()).await;
    let verdict = judged(&hub, &unasked).await;
    assert_eq!(verdict.type_, CSR_DENIED);
    let message = verdict.message.unwrap_or_default();
    assert!(
        message.contains("not enabled on cluster spoke-a"),
        "{message}"
    );

    // Enabled, then being disabled (a finalizer holds it): denied too, and said on the addon.
    let addons = hello_on_spoke_a(&hub);
    let mut held = ManagedClusterAddOn::new(
        "hello",
        ManagedClusterAddOnSpec {
            install_namespace: Some("hello-ns".into()),
            ..Default::default()
        },
    );
    held.metadata.finalizers = Some(vec!["test.fleetform.io/hold".into()]);
    addons.create(&PostParams::default(), &held).await.unwrap();
    addons
        .delete("hello", &DeleteParams::default())
        .await
        .unwrap();
    let leaving = request_for_hello(&agent, SIGNER_KUBE_APISERVER_CLIENT, default).await;
    let verdict = judged(&hub, &leaving).await;
    assert_eq!(verdict.type_, CSR_DENIED);
    let message = verdict.message.unwrap_or_default();
    assert!(message.contains("being deleted"), "{message}");
    wait_for(&addons, "hello", "the denial explained", move |addon| {
        addon
            .condition(CONDITION_CERTIFICATE_ROTATED)
            .is_some_and(|c| c.status == "False" && c.message.contains(&leaving))
    })
    .await;
    assert!(
        Api::<Secret>::namespaced(spoke.client.clone(), "hello-ns")
            .get_opt("hello-hub-kubeconfig")
            .await
            .is_ok_and(|secret| secret.is_none()),
        "no certificate for the addon"
    );
}

#[tokio::test]
async fn the_hub_writes_ocms_registrations_and_approves_the_subjects_ocms_approver_does() {
    let (hub, _loops, spoke, _agent) = joined_spoke().await;
    publish_addon(&hub, json!([{"signerName": SIGNER_KUBE_APISERVER_CLIENT}])).await;
    install_hello(&hub, &spoke).await;

    // The hub copies the AddOn document's registration, with OCM's default subject filled in.
    let addons = hello_on_spoke_a(&hub);
    let written = wait_for(&addons, "hello", "registrations written", |addon| {
        !addon.registrations().is_empty()
    })
    .await;
    let ocm_user = "system:open-cluster-management:cluster:spoke-a:addon:hello:agent:hello";
    let ocm_groups = [
        "system:open-cluster-management:cluster:spoke-a:addon:hello",
        "system:open-cluster-management:addon:hello",
    ];
    assert_eq!(
        written.registrations(),
        [RegistrationConfig {
            signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
            subject: Some(Subject {
                user: ocm_user.into(),
                groups: ocm_groups.map(String::from).to_vec(),
                organization_units: Vec::new(),
            }),
        }]
    );
    assert!(
        written
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|entry| entry.manager.as_deref() == Some("fleetform-hub")
                && entry.subresource.as_deref() == Some("status")),
        "written by the hub as fleetform-hub: {:?}",
        written.metadata.managed_fields
    );

    // The agent asks for OCM's two groups, and the hub approves them.
    let secret = hello_certificate(&spoke).await;
    let (user, groups, _) = parse_certificate(&key(&secret, "tls.crt"));
    assert_eq!(user, ocm_user);
    assert_eq!(groups, ocm_groups);

    // An older agent's third group, system:authenticated, is accepted too, as OCM's approver does.
    let mut three = Subject::default_for("spoke-a", "hello");
    three.groups.push("system:authenticated".into());
    let older =
        request_for_hello(&as_agent(&spoke).await, SIGNER_KUBE_APISERVER_CLIENT, three).await;
    assert_eq!(judged(&hub, &older).await.type_, CSR_APPROVED);
}

#[tokio::test]
async fn a_denied_addon_csr_is_explained_on_its_addon_and_the_next_denial_waits() {
    let (hub, _loops, spoke, _agent) = joined_spoke().await;
    publish_addon(&hub, json!([{"signerName": SIGNER_KUBE_APISERVER_CLIENT}])).await;
    install_hello(&hub, &spoke).await;
    hello_certificate(&spoke).await;

    // The cluster's agent asks for more than the AddOn document allows. (Not system:masters:
    // kube-apiserver refuses that at admission, before the hub sees it.)
    let agent = as_agent(&spoke).await;
    let mut greedy = Subject::default_for("spoke-a", "hello");
    greedy.groups.push("fleet-admins".into());
    let first = request_for_hello(&agent, SIGNER_KUBE_APISERVER_CLIENT, greedy.clone()).await;
    let first_verdict = judged(&hub, &first).await;
    assert_eq!(first_verdict.type_, CSR_DENIED);
    let addons = hello_on_spoke_a(&hub);
    let first_name = first.clone();
    let explained = wait_for(&addons, "hello", "the denial explained", move |addon| {
        addon
            .condition(CONDITION_CERTIFICATE_ROTATED)
            .is_some_and(|c| c.message.contains(&first_name))
    })
    .await;
    let condition = explained.condition(CONDITION_CERTIFICATE_ROTATED).unwrap();
    assert_eq!(condition.status, "False");
    assert_eq!(condition.reason, REASON_CLIENT_CERTIFICATE_UPDATE_FAILED);
    assert!(
        condition.message.contains("fleet-admins"),
        "{}",
        condition.message
    );

    // Asked again at once, the hub denies again, but not before its first wait has passed.
    let second = request_for_hello(&agent, SIGNER_KUBE_APISERVER_CLIENT, greedy).await;
    let second_verdict = judged(&hub, &second).await;
    assert_eq!(second_verdict.type_, CSR_DENIED);
    let at = |verdict: &CertificateSigningRequestCondition| {
        verdict.last_update_time.as_ref().expect("a time").0
    };
    let waited = at(&first_verdict).duration_until(at(&second_verdict));
    assert!(
        waited.as_secs() >= 5,
        "the second denial came {waited:#} after the first"
    );
    let second_name = second.clone();
    wait_for(
        &addons,
        "hello",
        "the second denial explained",
        move |addon| {
            addon
                .condition(CONDITION_CERTIFICATE_ROTATED)
                .is_some_and(|c| c.message.contains(&second_name))
        },
    )
    .await;
}

#[tokio::test]
async fn registrations_of_an_addon_fleetform_does_not_manage_are_left_to_its_manager() {
    let (hub, _loops, spoke, _agent) = joined_spoke().await;
    // OCM's addon manager's ClusterManagementAddOn: no AddOn document on it.
    Api::<ClusterManagementAddOn>::all(hub.client.clone())
        .patch(
            "hello",
            &PatchParams::apply("addon-manager").force(),
            &Patch::Apply(json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ClusterManagementAddOn",
                "metadata": {"name": "hello"},
                "spec": {"addOnMeta": {"displayName": "hello"}},
            })),
        )
        .await
        .unwrap();
    install_hello(&hub, &spoke).await;
    // The addon manager writes the registrations, as addon-framework's
    // KubeClientSignerConfigurations does for an agent named `hello-agent`.
    let framework = json!([{"signerName": SIGNER_KUBE_APISERVER_CLIENT, "subject": {
        "user": "system:open-cluster-management:cluster:spoke-a:addon:hello:agent:hello-agent",
        "groups": ["system:open-cluster-management:cluster:spoke-a:addon:hello",
                   "system:open-cluster-management:addon:hello"],
    }}]);
    set_registrations(&hub, framework.clone()).await;

    // The agent asks; fleetform leaves the request to the addon manager, which approves it.
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.client.clone());
    let asked = wait_for_list(
        csrs.clone(),
        Some(&format!("{LABEL_ADDON_NAME}=hello")),
        "the agent's CSR",
        |csrs| !csrs.is_empty(),
    )
    .await;
    let mut approved = asked[0].clone();
    approved
        .status
        .get_or_insert_with(Default::default)
        .conditions = Some(vec![CertificateSigningRequestCondition {
        type_: CSR_APPROVED.into(),
        status: STATUS_TRUE.into(),
        reason: Some("AutoApprovedByHubCSRApprovingController".into()),
        message: Some("Auto approving addon agent certificate.".into()),
        ..Default::default()
    }]);
    let name = approved.name_any();
    csrs.replace_subresource::<CertificateSigningRequest>(
        "approval",
        &name,
        &PostParams::default(),
        &approved,
    )
    .await
    .expect("the addon manager approves");
    let secret = hello_certificate(&spoke).await;
    assert!(common_name(&secret).ends_with(":agent:hello-agent"));
    let conditions = csrs.get(&name).await.unwrap().status.unwrap().conditions;
    assert_eq!(
        conditions.unwrap_or_default().len(),
        1,
        "only the addon manager judged the CSR"
    );
    let addon = hello_on_spoke_a(&hub).get("hello").await.unwrap();
    assert_eq!(
        serde_json::to_value(addon.registrations()).unwrap(),
        framework,
        "the addon manager's registrations stay"
    );
}

#[tokio::test]
async fn certificates_last_what_the_agent_asks_for_up_to_a_year() {
    let (hub, _loops, spoke, _agent) =
        joined_spoke_asking(Cluster::start().await, Some(2 * YEAR)).await;
    // Two years asked; a year (and the signer's five minutes of backdating) given, by the API
    // server's signer as kube-controller-manager's default --cluster-signing-duration would.
    let agent = wait_for(
        &hub_secrets(&spoke),
        HUB_KUBECONFIG_SECRET,
        "stored",
        |_| true,
    )
    .await;
    assert_lasts_a_year("agent", &agent);

    // The addon's certificates too, from the hub's signer for its custom signer alike.
    publish_addon_with_a_custom_signer(&hub).await;
    install_hello(&hub, &spoke).await;
    let addon_secrets: Api<Secret> = Api::namespaced(spoke.client.clone(), "hello-ns");
    for (what, name) in [
        ("kube signer", "hello-hub-kubeconfig"),
        (
            "custom signer",
            "hello-example.com-hello-signer-client-cert",
        ),
    ] {
        let secret = wait_for(&addon_secrets, name, what, |_| true).await;
        assert_lasts_a_year(what, &secret);
    }
    let asked: Vec<Option<i32>> = csrs_of(&hub, "spoke-a")
        .await
        .iter()
        .map(|csr| csr.spec.expiration_seconds)
        .collect();
    assert!(
        asked.len() >= 3 && asked.iter().all(|seconds| *seconds == Some(2 * YEAR)),
        "every CSR asks for what the agent was told: {asked:?}"
    );
}

/// Asserts that the certificate in `secret` lasts a year, backdated by the signer's five minutes.
fn assert_lasts_a_year(what: &str, secret: &Secret) {
    let lifetime = CertificateLifetime::from_pem(key(secret, "tls.crt").as_bytes()).unwrap();
    let seconds = lifetime
        .not_before
        .duration_until(lifetime.not_after)
        .as_secs();
    let year = i64::from(YEAR);
    assert!(
        (year..=year + 300).contains(&seconds),
        "the {what} certificate lasts {seconds} s"
    );
}
