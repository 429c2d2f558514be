//! `fleetform hub --webhook-addr`: the addon kinds' conversion webhook over real HTTPS, as
//! kube-apiserver calls it (trusting only the CA the hub wrote into the CRDs, reaching it by the
//! Service's DNS name), and its self-managed certificate in Secret `fleetform-hub-webhook`
//! against an embedded hub, run as the hub ServiceAccount.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use fleetform::api::conversion::{ADDON_V1ALPHA1, ADDON_V1BETA1};
use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::api::schema::{CONVERSION_PATH, CONVERSION_PORT, CONVERSION_SERVICE};
use fleetform::api::vocabulary::{MANAGED_BY, MANAGED_BY_LABEL};
use fleetform::hub::conversion_webhook::certificate::{
    CA_CERT_KEY, CA_KEY_KEY, TLS_CERT_KEY, WEBHOOK_SECRET, WebhookCertificate,
};
use fleetform::hub::conversion_webhook::{self, ConversionWebhook, WebhookConfig, dns_names};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::{Api, Client};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use support::{Cluster, wait_for};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

const MANAGED_CLUSTER_ADDONS: &str = "managedclusteraddons.addon.open-cluster-management.io";
const CLUSTER_MANAGEMENT_ADDONS: &str = "clustermanagementaddons.addon.open-cluster-management.io";

/// A webhook started as `fleetform hub --webhook-addr 127.0.0.1:0` starts it.
struct Webhook {
    running: ConversionWebhook,
    stop: CancellationToken,
}

impl Webhook {
    async fn start(client: Client) -> Self {
        let stop = CancellationToken::new();
        let config = WebhookConfig {
            client,
            addr: "127.0.0.1:0".parse().unwrap(),
            extra_names: Vec::new(),
        };
        let running = conversion_webhook::serve(config, stop.clone())
            .await
            .expect("the webhook starts");
        Webhook { running, stop }
    }

    fn addr(&self) -> SocketAddr {
        self.running.addr()
    }

    async fn stop(self) {
        self.stop.cancel();
        self.running.stopped().await;
    }
}

async fn webhook_secret(hub: &Cluster) -> Secret {
    Api::<Secret>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .get(WEBHOOK_SECRET)
        .await
        .expect("the webhook's Secret")
}

fn secret_text(secret: &Secret, key: &str) -> String {
    let data = secret.data.as_ref().expect("Secret data");
    String::from_utf8(data[key].0.clone()).unwrap()
}

fn ca_bundle_of(crd: &CustomResourceDefinition) -> Option<String> {
    crd.spec
        .conversion
        .as_ref()?
        .webhook
        .as_ref()?
        .client_config
        .as_ref()?
        .ca_bundle
        .as_ref()
        .map(|bundle| String::from_utf8(bundle.0.clone()).unwrap())
}

fn der_certificates(pem_text: &str) -> Vec<Vec<u8>> {
    pem::parse_many(pem_text)
        .unwrap()
        .into_iter()
        .map(pem::Pem::into_contents)
        .collect()
}

/// A TLS connection to the webhook as kube-apiserver makes one: to the Service's DNS name,
/// trusting only `ca_bundle`.
async fn connect(
    addr: SocketAddr,
    ca_bundle: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    for der in der_certificates(ca_bundle) {
        roots.add(CertificateDer::from(der)).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name =
        ServerName::try_from(format!("{CONVERSION_SERVICE}.{SYSTEM_NAMESPACE}.svc")).unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("the webhook's certificate is trusted for the Service's name")
}

/// The serving certificate (DER) the webhook presents.
async fn served_certificate(addr: SocketAddr, ca_bundle: &str) -> Vec<u8> {
    let tls = connect(addr, ca_bundle).await;
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// POSTs `body` to `path` over HTTPS; the status and body of the answer.
async fn post(addr: SocketAddr, ca_bundle: &str, path: &str, body: Vec<u8>) -> (StatusCode, Bytes) {
    let tls = connect(addr, ca_bundle).await;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    (
        status,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

fn addon_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "addon.open-cluster-management.io",
            version,
            "ManagedClusterAddOn",
        ),
        "managedclusteraddons",
    )
}

/// Checks an answer as kube-apiserver's webhook converter does before it uses it, and returns
/// the converted objects.
fn accepted_as_kube_apiserver_does(
    answer: &Value,
    uid: &str,
    sent: &[Value],
    desired: &str,
) -> Vec<Value> {
    assert_eq!(answer["apiVersion"], "apiextensions.k8s.io/v1", "{answer}");
    assert_eq!(answer["kind"], "ConversionReview", "{answer}");
    let response = &answer["response"];
    assert_eq!(response["uid"], uid, "{answer}");
    assert_eq!(response["result"]["status"], "Success", "{answer}");
    let converted = response["convertedObjects"].as_array().unwrap().clone();
    assert_eq!(converted.len(), sent.len());
    for (original, converted) in sent.iter().zip(&converted) {
        assert_eq!(converted["apiVersion"], desired);
        for field in [
            "/kind",
            "/metadata/name",
            "/metadata/namespace",
            "/metadata/uid",
        ] {
            assert_eq!(converted.pointer(field), original.pointer(field), "{field}");
        }
    }
    converted
}

fn review(uid: &str, desired: &str, objects: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    }))
    .unwrap()
}

#[tokio::test]
async fn a_conversion_review_over_https_converts_an_addon_to_v1beta1_and_back() {
    let hub = Cluster::start().await;
    let webhook = Webhook::start(hub.hub_identity().await).await;
    let ca_bundle = secret_text(&webhook_secret(&hub).await, CA_CERT_KEY);

    // An addon as OCM's addon manager and agents leave it, stored at v1alpha1: what
    // kube-apiserver sends for a v1beta1 read.
    hub.namespace("cluster1").await;
    let stored: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ADDON_V1ALPHA1,
        "kind": "ManagedClusterAddOn",
        "metadata": {"name": "helloworld", "namespace": "cluster1", "labels": {"app": "hello"}},
        "spec": {"installNamespace": "hello"},
    }))
    .unwrap();
    let alpha = Api::<DynamicObject>::namespaced_with(
        hub.client.clone(),
        "cluster1",
        &addon_resource("v1alpha1"),
    );
    alpha.create(&PostParams::default(), &stored).await.unwrap();
    let status = json!({"status": {
        "namespace": "hello",
        "registrations": [
            {"signerName": "kubernetes.io/kube-apiserver-client",
             "subject": {"user": "system:open-cluster-management:cluster:cluster1:addon:helloworld:agent:helloworld",
                         "groups": ["system:open-cluster-management:cluster:cluster1:addon:helloworld"]}},
            {"signerName": "example.com/signer", "subject": {"user": "u", "groups": ["g"]}},
        ],
        "kubeClientDriver": "csr",
    }});
    alpha
        .patch_status(
            "helloworld",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
    let stored = serde_json::to_value(alpha.get("helloworld").await.unwrap()).unwrap();

    let (code, body) = post(
        webhook.addr(),
        &ca_bundle,
        CONVERSION_PATH,
        review("r-1", ADDON_V1BETA1, std::slice::from_ref(&stored)),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).unwrap();
    let beta = accepted_as_kube_apiserver_does(
        &answer,
        "r-1",
        std::slice::from_ref(&stored),
        ADDON_V1BETA1,
    )
    .remove(0);
    assert_eq!(
        beta["metadata"]["annotations"]["addon.open-cluster-management.io/v1alpha1-install-namespace"],
        "hello"
    );
    assert!(beta["spec"].get("installNamespace").is_none(), "{beta}");
    assert_eq!(
        beta["status"]["registrations"],
        json!([
            {"type": "kubeClient", "kubeClient": {
                "subject": {"user": "system:open-cluster-management:cluster:cluster1:addon:helloworld:agent:helloworld",
                            "groups": ["system:open-cluster-management:cluster:cluster1:addon:helloworld"]},
                "driver": "csr"}},
            {"type": "customSigner", "customSigner": {
                "signerName": "example.com/signer", "subject": {"user": "u", "groups": ["g"]}}},
        ])
    );
    // What the webhook answers is what an OCM-compatible hub serves at v1beta1.
    let served = Api::<DynamicObject>::namespaced_with(
        hub.client.clone(),
        "cluster1",
        &addon_resource("v1beta1"),
    )
    .get("helloworld")
    .await
    .unwrap();
    assert_eq!(beta, serde_json::to_value(served).unwrap());

    // A v1beta1 write is converted back to the stored version: the object comes back whole.
    let (code, body) = post(
        webhook.addr(),
        &ca_bundle,
        CONVERSION_PATH,
        review("r-2", ADDON_V1ALPHA1, std::slice::from_ref(&beta)),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).unwrap();
    let back = accepted_as_kube_apiserver_does(&answer, "r-2", &[beta], ADDON_V1ALPHA1).remove(0);
    assert_eq!(back, stored);
    webhook.stop().await;
}

#[tokio::test]
async fn a_body_that_is_not_a_v1_conversion_review_gets_400_saying_why() {
    let hub = Cluster::start().await;
    let webhook = Webhook::start(hub.hub_identity().await).await;
    let ca_bundle = secret_text(&webhook_secret(&hub).await, CA_CERT_KEY);
    let (code, body) = post(
        webhook.addr(),
        &ca_bundle,
        CONVERSION_PATH,
        b"{\"apiVersion\": ".to_vec(),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(
        String::from_utf8_lossy(&body).contains("not a ConversionReview"),
        "{body:?}"
    );
    let beta_review = json!({
        "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview",
        "request": {"uid": "r", "desiredAPIVersion": ADDON_V1BETA1, "objects": []},
    });
    let (code, body) = post(
        webhook.addr(),
        &ca_bundle,
        CONVERSION_PATH,
        serde_json::to_vec(&beta_review).unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(
        String::from_utf8_lossy(&body).contains("apiextensions.k8s.io/v1"),
        "{body:?}"
    );
    webhook.stop().await;
}

#[tokio::test]
async fn the_ca_goes_into_fleetform_s_addon_crds_only_and_comes_back_when_removed() {
    let hub = Cluster::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(hub.client.clone());
    // A ManagedClusterAddOn CRD fleetform did not install (an OCM hub's own).
    let foreign = json!({"metadata": {"labels": {MANAGED_BY_LABEL: null}}});
    crds.patch(
        MANAGED_CLUSTER_ADDONS,
        &PatchParams::default(),
        &Patch::Merge(&foreign),
    )
    .await
    .unwrap();

    let webhook = Webhook::start(hub.hub_identity().await).await;
    let ca_bundle = secret_text(&webhook_secret(&hub).await, CA_CERT_KEY);
    let ours = crds.get(CLUSTER_MANAGEMENT_ADDONS).await.unwrap();
    assert_eq!(ca_bundle_of(&ours), Some(ca_bundle.clone()));
    assert_eq!(
        ca_bundle_of(&crds.get(MANAGED_CLUSTER_ADDONS).await.unwrap()),
        None
    );

    // Re-installed without it (`kubectl replace`, say): the hub writes it again.
    let removed =
        json!([{"op": "remove", "path": "/spec/conversion/webhook/clientConfig/caBundle"}]);
    crds.patch(
        CLUSTER_MANAGEMENT_ADDONS,
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(removed).unwrap()),
    )
    .await
    .unwrap();
    let expected = ca_bundle.clone();
    wait_for(
        &crds,
        CLUSTER_MANAGEMENT_ADDONS,
        "the CA bundle written again",
        move |crd| ca_bundle_of(crd).as_deref() == Some(expected.as_str()),
    )
    .await;
    let foreign = crds.get(MANAGED_CLUSTER_ADDONS).await.unwrap();
    assert_eq!(ca_bundle_of(&foreign), None);
    assert!(
        !foreign
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(MANAGED_BY_LABEL)
    );
    webhook.stop().await;
}

#[tokio::test]
async fn a_restarted_webhook_serves_the_certificate_it_kept() {
    let hub = Cluster::start().await;
    let client = hub.hub_identity().await;
    let first = Webhook::start(client.clone()).await;
    let secret = webhook_secret(&hub).await;
    let (ca_bundle, cert) = (
        secret_text(&secret, CA_CERT_KEY),
        secret_text(&secret, TLS_CERT_KEY),
    );
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(
        secret.metadata.labels.unwrap()[MANAGED_BY_LABEL],
        MANAGED_BY
    );
    assert_eq!(
        served_certificate(first.addr(), &ca_bundle).await,
        der_certificates(&cert)[0]
    );
    first.stop().await;

    let second = Webhook::start(client).await;
    let again = webhook_secret(&hub).await;
    assert_eq!(
        again.metadata.resource_version, secret.metadata.resource_version,
        "not rewritten"
    );
    assert_eq!(
        served_certificate(second.addr(), &ca_bundle).await,
        der_certificates(&cert)[0]
    );
    second.stop().await;
}

#[tokio::test]
async fn hub_replicas_share_one_certificate() {
    let hub = Cluster::start().await;
    let client = hub.hub_identity().await;
    let (one, two) = tokio::join!(Webhook::start(client.clone()), Webhook::start(client));
    let secret = webhook_secret(&hub).await;
    let (ca_bundle, cert) = (
        secret_text(&secret, CA_CERT_KEY),
        secret_text(&secret, TLS_CERT_KEY),
    );
    for replica in [&one, &two] {
        assert_eq!(
            served_certificate(replica.addr(), &ca_bundle).await,
            der_certificates(&cert)[0]
        );
    }
    let crds: Api<CustomResourceDefinition> = Api::all(hub.client.clone());
    for name in [MANAGED_CLUSTER_ADDONS, CLUSTER_MANAGEMENT_ADDONS] {
        assert_eq!(
            ca_bundle_of(&crds.get(name).await.unwrap()),
            Some(ca_bundle.clone())
        );
    }
    one.stop().await;
    two.stop().await;
}

async fn create_secret(
    hub: &Cluster,
    certificate: &WebhookCertificate,
    marked: bool,
    drop_ca_key: bool,
) -> Secret {
    let mut data = certificate.secret_data();
    if drop_ca_key {
        data.remove(CA_KEY_KEY);
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(WEBHOOK_SECRET.into()),
            labels: marked.then(|| [(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Secret::default()
    };
    hub.namespace(SYSTEM_NAMESPACE).await;
    Api::<Secret>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_serving_certificate_with_less_than_30_days_left_is_renewed_from_the_same_ca() {
    let hub = Cluster::start().await;
    let issued_long_ago = OffsetDateTime::now_utc() - time::Duration::days(70);
    let old = WebhookCertificate::issue(&dns_names(&[]), issued_long_ago).unwrap();
    create_secret(&hub, &old, true, false).await;

    let webhook = Webhook::start(hub.hub_identity().await).await;
    let secret = webhook_secret(&hub).await;
    let cert = secret_text(&secret, TLS_CERT_KEY);
    assert_ne!(cert, old.cert, "renewed");
    assert_eq!(secret_text(&secret, CA_CERT_KEY), old.ca_bundle, "same CA");
    assert_eq!(
        served_certificate(webhook.addr(), &old.ca_bundle).await,
        der_certificates(&cert)[0]
    );
    webhook.stop().await;
}

#[tokio::test]
async fn a_secret_fleetform_did_not_write_is_served_as_it_is() {
    let hub = Cluster::start().await;
    // Another tool's certificate (cert-manager's keys, no CA key), due for renewal by
    // fleetform's rules: still never rewritten.
    let issued_long_ago = OffsetDateTime::now_utc() - time::Duration::days(70);
    let theirs = WebhookCertificate::issue(&dns_names(&[]), issued_long_ago).unwrap();
    let created = create_secret(&hub, &theirs, false, true).await;

    let webhook = Webhook::start(hub.hub_identity().await).await;
    let secret = webhook_secret(&hub).await;
    assert_eq!(
        secret.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(
        served_certificate(webhook.addr(), &theirs.ca_bundle).await,
        der_certificates(&theirs.cert)[0]
    );
    let crds: Api<CustomResourceDefinition> = Api::all(hub.client.clone());
    assert_eq!(
        ca_bundle_of(&crds.get(CLUSTER_MANAGEMENT_ADDONS).await.unwrap()),
        Some(theirs.ca_bundle.clone())
    );
    webhook.stop().await;
}

fn manifest(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|document| serde::Deserialize::deserialize(document).unwrap())
        .collect()
}

#[test]
fn the_hub_service_takes_the_crds_conversion_to_the_hub_container() {
    let service = manifest("deploy/hub/service.yaml").remove(0);
    assert_eq!(service["kind"], "Service");
    assert_eq!(service["metadata"]["name"], CONVERSION_SERVICE);
    assert_eq!(service["metadata"]["namespace"], SYSTEM_NAMESPACE);
    let port = &service["spec"]["ports"][0];
    assert_eq!(port["port"], CONVERSION_PORT);
    let deployment = manifest("deploy/hub/deployment.yaml").remove(0);
    let pod = &deployment["spec"]["template"];
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            &pod["metadata"]["labels"][key], value,
            "the Service selects the hub pods"
        );
    }
    let hub = pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|container| container["args"][0] == "hub")
        .unwrap();
    let args: Vec<&str> = hub["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let listen = args[args
        .iter()
        .position(|arg| *arg == "--webhook-addr")
        .unwrap()
        + 1];
    let listen: SocketAddr = listen.parse().unwrap();
    let container_port = hub["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|container_port| container_port["name"] == port["targetPort"])
        .expect("the Service's targetPort names a port of the hub container");
    assert_eq!(container_port["containerPort"], listen.port());
    assert!(listen.ip().is_unspecified(), "reachable from the Service");
}

/// A hub whose right to write the CRDs is not in force yet (kube-apiserver's RBAC takes a moment
/// to see a new binding) serves no certificate until its CA is in the CRDs: kube-apiserver,
/// trusting only the CRDs' bundle, would otherwise fail every conversion with `x509: certificate
/// signed by unknown authority` until the CA got there.
#[tokio::test]
async fn the_webhook_serves_its_certificate_only_once_its_ca_is_in_the_crds() {
    use fleetform::deploy::manifests::HUB_CLUSTER_ROLE;
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let hub = Cluster::start().await;
    let client = hub.hub_identity().await;
    let roles: Api<ClusterRole> = Api::all(hub.client.clone());
    let granted = roles.get(HUB_CLUSTER_ROLE).await.unwrap();
    let mut not_yet = granted.clone();
    for rule in not_yet.rules.iter_mut().flatten() {
        if rule
            .resources
            .iter()
            .flatten()
            .any(|r| r == "customresourcedefinitions")
        {
            rule.verbs
                .retain(|verb| !["update", "patch"].contains(&verb.as_str()));
        }
    }
    roles
        .replace(HUB_CLUSTER_ROLE, &PostParams::default(), &not_yet)
        .await
        .unwrap();

    let webhook = Webhook::start(client).await;
    let ca_bundle = secret_text(&webhook_secret(&hub).await, CA_CERT_KEY);
    // kube-apiserver calls it now; the handshake ends when the webhook answers.
    let addr = webhook.addr();
    let bundle = ca_bundle.clone();
    let presented = tokio::spawn(async move { served_certificate(addr, &bundle).await });
    let mut granted = granted;
    granted.metadata.resource_version = None;
    roles
        .replace(HUB_CLUSTER_ROLE, &PostParams::default(), &granted)
        .await
        .unwrap();
    let presented = tokio::time::timeout(support::PATIENCE, presented)
        .await
        .expect("the webhook serves once it may write the CRDs")
        .unwrap();

    // When it answered, the CRDs already held the CA that signed what it presented.
    let crds: Api<CustomResourceDefinition> = Api::all(hub.client.clone());
    for name in [MANAGED_CLUSTER_ADDONS, CLUSTER_MANAGEMENT_ADDONS] {
        let held = ca_bundle_of(&crds.get(name).await.unwrap());
        assert_eq!(held.as_deref(), Some(ca_bundle.as_str()), "{name}");
    }
    let secret = webhook_secret(&hub).await;
    assert_eq!(
        der_certificates(&secret_text(&secret, TLS_CERT_KEY))[0],
        presented
    );
    webhook.stop().await;
}
