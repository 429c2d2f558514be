//! The hub's registration CSR loop against an embedded hub (DESIGN §4.1): a request naming a
//! spoke the hub does not know stays pending, one whose subject claims too much is denied, and
//! once the spoke is declared and accepted a request from anyone but the spoke's own bootstrap
//! token is denied through the `/approval` subresource. (Approval itself needs requesters the
//! control plane can authenticate, which comes with its security work.)

use crate::support;

use fleetform::agent::rotation::{CsrSubject, certificate_request_pem, registration_csr};
use fleetform::api::ManagedCluster;
use fleetform::api::cluster::ManagedClusterSpec;
use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::api::identity::cluster_group;
use fleetform::api::vocabulary::CSR_DENIED;
use fleetform::api::vocabulary::LABEL_CLUSTER_NAME;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;
use support::{Cluster, start_hub_loops, wait_for};

fn decision(csr: &CertificateSigningRequest) -> Option<(String, String)> {
    csr.status
        .as_ref()?
        .conditions
        .as_ref()?
        .first()
        .map(|c| (c.type_.clone(), c.message.clone().unwrap_or_default()))
}

#[tokio::test]
async fn registration_csr_waits_for_its_spoke_and_is_denied_without_its_bootstrap_token() {
    let hub = Cluster::start().await;
    hub.namespace(SYSTEM_NAMESPACE).await;
    let _loops = start_hub_loops(&hub).await;
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.client.clone());
    let post = PostParams::default();

    let waiting = csrs
        .create(
            &post,
            &registration_csr("spoke-a", "agent-1", None).unwrap().csr,
        )
        .await
        .unwrap()
        .name_any();

    // More than a spoke's agent may ask for: another cluster's group. (A request for
    // system:masters never reaches the hub: kube-apiserver refuses it at admission.)
    let mut greedy = registration_csr("spoke-a", "agent-2", None).unwrap().csr;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let subject = CsrSubject {
        organizations: vec![cluster_group("spoke-a"), cluster_group("spoke-b")],
        ..CsrSubject::agent("spoke-a", "agent-2")
    };
    greedy.spec.request = ByteString(
        certificate_request_pem(&subject, &key)
            .unwrap()
            .into_bytes(),
    );
    let greedy = csrs.create(&post, &greedy).await.unwrap().name_any();
    let denied = wait_for(&csrs, &greedy, "greedy request denied", |csr| {
        decision(csr).is_some()
    })
    .await;
    let (verdict, message) = decision(&denied).unwrap();
    assert_eq!(verdict, CSR_DENIED);
    assert!(message.contains(&cluster_group("spoke-b")), "{message}");
    assert_eq!(
        decision(&csrs.get(&waiting).await.unwrap()),
        None,
        "a request for an undeclared spoke stays pending"
    );

    // The spoke is declared and accepted, and has its own bootstrap token; the request came
    // from someone else (the test's admin identity).
    let token: Secret = serde_json::from_value(json!({
        "metadata": {"name": "bootstrap-token-abc123", "labels": {LABEL_CLUSTER_NAME: "spoke-a"}},
        "type": "bootstrap.kubernetes.io/token",
        "data": {"token-id": "YWJjMTIz", "token-secret": "MDEyMzQ1Njc4OWFiY2RlZg=="},
    }))
    .unwrap();
    Api::<Secret>::namespaced(hub.client.clone(), "kube-system")
        .create(&post, &token)
        .await
        .unwrap();
    Api::<ManagedCluster>::all(hub.client.clone())
        .create(
            &post,
            &ManagedCluster::new(
                "spoke-a",
                ManagedClusterSpec {
                    hub_accepts_client: Some(true),
                    ..Default::default()
                },
            ),
        )
        .await
        .unwrap();
    hub.declare_spoke("spoke-a").await;
    let judged = wait_for(
        &csrs,
        &waiting,
        "request judged once the spoke is known",
        |csr| decision(csr).is_some(),
    )
    .await;
    let (verdict, message) = decision(&judged).unwrap();
    assert_eq!(verdict, CSR_DENIED);
    assert!(
        message.contains("system:bootstrap:abc123"),
        "the denial names the spoke's own bootstrap identity: {message}"
    );
}
