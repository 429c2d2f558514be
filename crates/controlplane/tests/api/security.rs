//! A secured control plane through kube-rs: who may connect (admin certificate, static token,
//! bootstrap token, CSR-issued certificate, and anonymously what RBAC gives
//! system:unauthenticated; not expired certificates or other CAs' certificates), what RBAC lets
//! each do, the CSR flow end to end, escalation refusal and
//! the key-file permission check.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use base64::Engine;
use fleetform_controlplane::{ControlPlane, RunningControlPlane, StartError};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const TOKEN: &str = "alice-token-0123456789";
const BOOTSTRAP: &str = "abcdef.0123456789abcdef";

struct Secured {
    plane: RunningControlPlane,
    admin: kube::Client,
    _dir: tempfile::TempDir,
}

async fn start() -> Secured {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{TOKEN},alice,1001,\"dev,qa\"\n")).unwrap();
    let plane = ControlPlane::builder()
        .token_auth_file(tokens)
        .start()
        .await
        .expect("secure control plane starts");
    let admin = client_as(&plane, json!(null)).await;
    for ns in ["team", "other"] {
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &n)
            .await
            .unwrap();
    }
    Secured {
        plane,
        admin,
        _dir: dir,
    }
}

/// A client using the plane's kubeconfig, with its user replaced by `user` unless null.
async fn client_as(plane: &RunningControlPlane, user: Value) -> kube::Client {
    let mut kc: Value = serde_json::from_str(&plane.kubeconfig()).unwrap();
    if !user.is_null() {
        kc["users"][0]["user"] = user;
    }
    let kc = kube::config::Kubeconfig::from_yaml(&kc.to_string()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).unwrap()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn cert_user(cert_pem: &str, key_pem: &str) -> Value {
    json!({"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)})
}

fn status<T: std::fmt::Debug>(r: kube::Result<T>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

async fn bind(admin: &kube::Client, ns: &str, cluster_role: &str, user: &str) {
    let rb: RoleBinding = obj(
        json!({"metadata": {"name": format!("{cluster_role}-{user}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    );
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await
        .unwrap();
}

async fn bootstrap_secret(admin: &kube::Client, expiration: &str) {
    let s: Secret = obj(
        json!({"metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": "abcdef", "token-secret": "0123456789abcdef",
            "usage-bootstrap-authentication": "true", "expiration": expiration,
            "auth-extra-groups": "system:bootstrappers:fleet"}}),
    );
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .create(&PostParams::default(), &s)
        .await
        .unwrap();
    // The token's group may create CSRs, as kubeadm binds its node bootstrap tokens' group.
    let binding: ClusterRoleBinding = obj(json!({
        "metadata": {"name": "fleet-bootstrap"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "system:node-bootstrapper"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
            "name": "system:bootstrappers:fleet"}],
    }));
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

#[tokio::test]
async fn admin_kubeconfig_is_tls_with_a_system_masters_certificate() {
    let s = start().await;
    assert!(s.plane.url().starts_with("https://"));
    Api::<Secret>::namespaced(s.admin.clone(), "kube-system")
        .list(&ListParams::default())
        .await
        .expect("admin may list secrets");
}

#[tokio::test]
async fn requests_without_credentials_are_anonymous_and_may_read_only_health_and_version() {
    let s = start().await;
    let anon = client_as(&s.plane, json!({})).await;
    let st = status(
        Api::<ConfigMap>::namespaced(anon.clone(), "team")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        (st.code, st.reason.as_str(), st.message.as_str()),
        (
            403,
            "Forbidden",
            r#"configmaps is forbidden: User "system:anonymous" cannot list resource "configmaps" in API group "" in the namespace "team""#
        )
    );
    anon.apiserver_version().await.expect("/version is public");
    let health: String = anon
        .request_text(http::Request::get("/readyz").body(vec![]).unwrap())
        .await
        .expect("/readyz is public");
    assert_eq!(health, "ok");
    // Discovery and who-am-i are for authenticated users only (kube-apiserver's default RBAC).
    let st = status(
        anon.request_text(http::Request::get("/apis").body(vec![]).unwrap())
            .await,
    );
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            403,
            r#"forbidden: User "system:anonymous" cannot get path "/apis""#
        )
    );
    let whoami = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#.to_vec())
        .unwrap();
    assert_eq!(status(anon.request_text(whoami).await).code, 403);
    // What is bound to system:unauthenticated is granted, as on any cluster.
    let binding: RoleBinding = obj(json!({"metadata": {"name": "anonymous-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
            "name": "system:unauthenticated"}]}));
    Api::<RoleBinding>::namespaced(s.admin.clone(), "team")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(anon.clone(), "team")
        .list(&ListParams::default())
        .await
        .expect("bound to system:unauthenticated");
    assert_eq!(
        status(
            Api::<ConfigMap>::namespaced(anon, "other")
                .list(&ListParams::default())
                .await
        )
        .code,
        403
    );
    // A token that authenticates nobody is not anonymous: it is refused.
    let wrong = client_as(&s.plane, json!({"token": "not-a-token-at-all"})).await;
    let st = status(
        Api::<ConfigMap>::namespaced(wrong, "team")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!((st.code, st.message.as_str()), (401, "Unauthorized"));
}

#[tokio::test]
async fn static_token_user_gets_exactly_what_rbac_grants() {
    let s = start().await;
    bind(&s.admin, "team", "view", "alice").await;
    let alice = client_as(&s.plane, json!({"token": TOKEN})).await;
    Api::<ConfigMap>::namespaced(alice.clone(), "team")
        .list(&ListParams::default())
        .await
        .expect("view lists configmaps");
    let st = status(
        Api::<ConfigMap>::namespaced(alice.clone(), "other")
            .get("x")
            .await,
    );
    assert_eq!(st.code, 403);
    assert_eq!(st.reason, "Forbidden");
    assert_eq!(
        st.message,
        r#"configmaps "x" is forbidden: User "alice" cannot get resource "configmaps" in API group "" in the namespace "other""#
    );
    let st = status(
        Api::<Secret>::namespaced(alice.clone(), "team")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        st.message,
        r#"secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "team""#
    );
    let st = status(
        Api::<Namespace>::all(alice.clone())
            .list(&ListParams::default())
            .await,
    );
    assert!(
        st.message.ends_with("at the cluster scope"),
        "{}",
        st.message
    );
    let wrong = client_as(&s.plane, json!({"token": "not-a-token"})).await;
    assert_eq!(status(wrong.apiserver_version().await).code, 401);
}

#[tokio::test]
async fn a_granted_or_revoked_binding_holds_from_the_next_request() {
    let s = start().await;
    let alice = client_as(&s.plane, json!({"token": TOKEN})).await;
    let configmaps = Api::<ConfigMap>::namespaced(alice.clone(), "team");
    // Denied first, so that the server has a policy from before the binding.
    assert_eq!(
        status(configmaps.list(&ListParams::default()).await).code,
        403
    );
    bind(&s.admin, "team", "view", "alice").await;
    configmaps
        .list(&ListParams::default())
        .await
        .expect("the new binding holds at once");
    Api::<RoleBinding>::namespaced(s.admin.clone(), "team")
        .delete("view-alice", &Default::default())
        .await
        .unwrap();
    assert_eq!(
        status(configmaps.list(&ListParams::default()).await).code,
        403,
        "the deleted binding no longer holds"
    );
}

#[tokio::test]
async fn self_subject_access_review_answers_for_the_caller() {
    let s = start().await;
    bind(&s.admin, "team", "edit", "alice").await;
    let alice = client_as(&s.plane, json!({"token": TOKEN})).await;
    let api = Api::<SelfSubjectAccessReview>::all(alice);
    let ask = |verb: &str, ns: &str| -> SelfSubjectAccessReview {
        obj(
            json!({"spec": {"resourceAttributes": {"verb": verb, "resource": "configmaps", "namespace": ns}}}),
        )
    };
    let yes = api
        .create(&PostParams::default(), &ask("create", "team"))
        .await
        .unwrap();
    assert!(yes.status.unwrap().allowed);
    let no = api
        .create(&PostParams::default(), &ask("create", "other"))
        .await
        .unwrap();
    assert!(!no.status.unwrap().allowed);
}

#[tokio::test]
async fn expired_bootstrap_token_is_unauthorized() {
    let s = start().await;
    bootstrap_secret(&s.admin, "2020-01-01T00:00:00Z").await;
    let b = client_as(&s.plane, json!({"token": BOOTSTRAP})).await;
    let csrs = Api::<CertificateSigningRequest>::all(b);
    assert_eq!(status(csrs.list(&ListParams::default()).await).code, 401);
}

fn csr_for(name: &str, cn: &str) -> (CertificateSigningRequest, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    let pem = p.serialize_request(&key).unwrap().pem().unwrap();
    let csr = obj(json!({"metadata": {"name": name}, "spec": {
        "request": b64(&pem), "signerName": "kubernetes.io/kube-apiserver-client",
        "usages": ["digital signature", "client auth"], "expirationSeconds": 3600}}));
    (csr, key.serialize_pem())
}

async fn approve(
    api: &Api<CertificateSigningRequest>,
    name: &str,
) -> kube::Result<CertificateSigningRequest> {
    let patch = json!({"status": {"conditions": [{"type": "Approved", "status": "True",
        "reason": "Test", "message": "approved by the test"}]}});
    api.patch_approval(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

#[tokio::test]
async fn csr_flow_from_bootstrap_token_to_a_certificate_that_does_what_rbac_grants() {
    let s = start().await;
    bootstrap_secret(&s.admin, "2099-01-01T00:00:00Z").await;
    let boot = client_as(&s.plane, json!({"token": BOOTSTRAP})).await;
    let boot_csrs = Api::<CertificateSigningRequest>::all(boot.clone());
    let (csr, key_pem) = csr_for("spoke-1", "spoke-1");
    let created = boot_csrs
        .create(&PostParams::default(), &csr)
        .await
        .expect("bootstrappers create CSRs");
    assert_eq!(
        created.spec.username.as_deref(),
        Some("system:bootstrap:abcdef")
    );
    let st = status(approve(&boot_csrs, "spoke-1").await);
    assert_eq!(st.code, 403);
    let st = status(
        Api::<Secret>::namespaced(boot.clone(), "kube-system")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(st.code, 403);

    let admin_csrs = Api::<CertificateSigningRequest>::all(s.admin.clone());
    approve(&admin_csrs, "spoke-1")
        .await
        .expect("admin approves");
    let signed = tokio::time::timeout(
        Duration::from_secs(20),
        kube::runtime::wait::await_condition(
            admin_csrs.clone(),
            "spoke-1",
            |c: Option<&CertificateSigningRequest>| {
                c.and_then(|c| c.status.as_ref())
                    .and_then(|s| s.certificate.as_ref())
                    .is_some()
            },
        ),
    )
    .await
    .expect("signed in time")
    .unwrap()
    .unwrap();
    let cert = String::from_utf8(signed.status.unwrap().certificate.unwrap().0).unwrap();
    assert!(cert.contains("BEGIN CERTIFICATE"));

    bind(&s.admin, "team", "view", "spoke-1").await;
    let spoke = client_as(&s.plane, cert_user(&cert, &key_pem)).await;
    Api::<ConfigMap>::namespaced(spoke.clone(), "team")
        .list(&ListParams::default())
        .await
        .expect("the issued certificate authenticates at once");
    let st = status(
        Api::<ConfigMap>::namespaced(spoke.clone(), "other")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        st.message,
        r#"configmaps is forbidden: User "spoke-1" cannot list resource "configmaps" in API group "" in the namespace "other""#
    );
}

/// Lets `user` do `verbs` on CSRs cluster-wide.
async fn grant_csrs(admin: &kube::Client, user: &str, verbs: &[&str]) {
    let role: ClusterRole = obj(json!({"metadata": {"name": "csr-writer"},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": verbs}]}));
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = obj(json!({"metadata": {"name": "csr-writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "csr-writer"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}));
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// A CSR whose spec claims to come from someone else.
fn forged_csr(name: &str) -> Value {
    let (csr, _) = csr_for(name, "someone");
    let request = serde_json::to_value(&csr).unwrap()["spec"]["request"].clone();
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": request, "signerName": "example.com/signer",
            "usages": ["client auth"], "username": "system:admin", "uid": "0",
            "groups": ["system:masters"], "extra": {"scopes": ["everything"]}}})
}

/// A PEM certificate (one the test signs itself: only its form is checked).
fn any_certificate() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::default()
        .self_signed(&key)
        .unwrap()
        .pem()
}

/// (username, uid, groups, extra) of a CSR's spec.
fn requester(csr: &CertificateSigningRequest) -> (Option<&str>, Option<&str>, Vec<String>, bool) {
    (
        csr.spec.username.as_deref(),
        csr.spec.uid.as_deref(),
        csr.spec.groups.clone().unwrap_or_default(),
        csr.spec.extra.is_some(),
    )
}

#[tokio::test]
async fn csr_requester_is_recorded_on_every_create_path_and_never_changes() {
    let s = start().await;
    grant_csrs(&s.admin, "alice", &["create", "patch", "get"]).await;
    let alice =
        Api::<CertificateSigningRequest>::all(client_as(&s.plane, json!({"token": TOKEN})).await);
    let alice_is = (
        Some("alice"),
        Some("1001"),
        vec![
            "dev".to_string(),
            "qa".into(),
            "system:authenticated".into(),
        ],
        false,
    );

    let applied = alice
        .patch(
            "by-apply",
            &PatchParams::apply("alice-tool"),
            &Patch::Apply(forged_csr("by-apply")),
        )
        .await
        .expect("server-side apply creates the CSR");
    assert_eq!(
        requester(&applied),
        alice_is,
        "created by server-side apply"
    );
    let created = alice
        .create(&PostParams::default(), &obj(forged_csr("by-create")))
        .await
        .unwrap();
    assert_eq!(requester(&created), alice_is, "created by POST");

    bootstrap_secret(&s.admin, "2099-01-01T00:00:00Z").await;
    let boot = Api::<CertificateSigningRequest>::all(
        client_as(&s.plane, json!({"token": BOOTSTRAP})).await,
    );
    let created = boot
        .create(&PostParams::default(), &obj(forged_csr("by-bootstrap")))
        .await
        .unwrap();
    assert_eq!(
        requester(&created),
        (
            Some("system:bootstrap:abcdef"),
            None,
            vec![
                "system:bootstrappers".to_string(),
                "system:bootstrappers:fleet".into(),
                "system:authenticated".into()
            ],
            false
        )
    );

    // Updates keep the requester, whoever sends them and however.
    let admin = Api::<CertificateSigningRequest>::all(s.admin.clone());
    let mut replaced = admin.get("by-create").await.unwrap();
    replaced.spec.username = Some("mallory".into());
    replaced.spec.uid = Some("666".into());
    replaced.spec.groups = Some(vec!["system:masters".into()]);
    let replaced = admin
        .replace("by-create", &PostParams::default(), &replaced)
        .await
        .expect("an update of a CSR's spec is not an error");
    assert_eq!(requester(&replaced), alice_is, "PUT");
    let patched = admin
        .patch(
            "by-create",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"username": "mallory", "extra": {"a": ["b"]}}})),
        )
        .await
        .unwrap();
    assert_eq!(requester(&patched), alice_is, "merge patch");
    let reapplied = alice
        .patch(
            "by-apply",
            &PatchParams::apply("alice-tool").force(),
            &Patch::Apply(forged_csr("by-apply")),
        )
        .await
        .unwrap();
    assert_eq!(
        requester(&reapplied),
        alice_is,
        "server-side apply of an existing CSR"
    );
    let status = admin
        .patch_status(
            "by-apply",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"username": "mallory"}, "status": {"certificate": b64(&any_certificate())}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(requester(&status), alice_is, "status patch");
}

#[tokio::test]
async fn denied_csr_cannot_be_approved_and_is_never_signed() {
    let s = start().await;
    let api = Api::<CertificateSigningRequest>::all(s.admin.clone());
    let (denied, _) = csr_for("denied", "x");
    api.create(&PostParams::default(), &denied).await.unwrap();
    let deny = json!({"status": {"conditions": [
        {"type": "Denied", "status": "True", "reason": "No", "message": "no"}]}});
    api.patch_approval("denied", &PatchParams::default(), &Patch::Merge(&deny))
        .await
        .unwrap();
    let both = json!({"status": {"conditions": [
        {"type": "Denied", "status": "True", "reason": "No", "message": "no"},
        {"type": "Approved", "status": "True", "reason": "Yes", "message": "yes"}]}});
    let st = status(
        api.patch_approval("denied", &PatchParams::default(), &Patch::Merge(&both))
            .await,
    );
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            422,
            r#"CertificateSigningRequest.certificates.k8s.io "denied" is invalid: status.conditions: Invalid value: "Approved": Approved and Denied conditions are mutually exclusive"#
        )
    );
    // A CSR approved after the denied one is signed; once it is, the signer has seen both.
    let (later, _) = csr_for("later", "y");
    api.create(&PostParams::default(), &later).await.unwrap();
    approve(&api, "later").await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        kube::runtime::wait::await_condition(
            api.clone(),
            "later",
            |c: Option<&CertificateSigningRequest>| {
                c.and_then(|c| c.status.as_ref())
                    .and_then(|s| s.certificate.as_ref())
                    .is_some()
            },
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let denied = api.get("denied").await.unwrap();
    assert!(denied.status.unwrap().certificate.is_none());
}

/// A CSR asking kube-apiserver's signer for a certificate in `groups`.
fn csr_in_groups(
    name: &str,
    groups: &[&str],
    expiration_seconds: i64,
) -> CertificateSigningRequest {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name.push(rcgen::DnType::CommonName, name);
    for g in groups {
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, *g);
    }
    let pem = p.serialize_request(&key).unwrap().pem().unwrap();
    obj(json!({"metadata": {"name": name}, "spec": {
        "request": b64(&pem), "signerName": "kubernetes.io/kube-apiserver-client",
        "usages": ["digital signature", "client auth"], "expirationSeconds": expiration_seconds}}))
}

#[tokio::test]
async fn no_one_gets_a_system_masters_certificate_or_a_csr_kube_apiserver_refuses() {
    let s = start().await;
    let api = Api::<CertificateSigningRequest>::all(s.admin.clone());
    let st = status(
        api.create(
            &PostParams::default(),
            &csr_in_groups("root", &["team", "system:masters"], 3600),
        )
        .await,
    );
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            403,
            r#"certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"#
        ),
        "even an administrator may not ask for one"
    );
    let st = status(
        api.create(&PostParams::default(), &csr_in_groups("short", &[], 599))
            .await,
    );
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            422,
            r#"CertificateSigningRequest.certificates.k8s.io "short" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"#
        )
    );
    // For a signer of its own, so that this server's signer leaves its status to the test.
    let mut own_signer = csr_in_groups("agent", &["team"], 3600);
    own_signer.spec.signer_name = "example.com/signer".into();
    let created = api
        .create(&PostParams::default(), &own_signer)
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&created).unwrap()["status"],
        json!({}),
        "nothing approved on create"
    );
    let approved = approve(&api, "agent").await.unwrap();
    let condition = &approved.status.unwrap().conditions.unwrap()[0];
    assert!(condition.last_update_time.is_some() && condition.last_transition_time.is_some());
    let st = status(
        api.patch_status(
            "agent",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"certificate": b64("foo")}})),
        )
        .await,
    );
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            422,
            r#"CertificateSigningRequest.certificates.k8s.io "agent" is invalid: status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block"#
        )
    );
}

#[tokio::test]
async fn whoami_names_a_client_certificate_by_its_fingerprint() {
    let s = start().await;
    let kubeconfig: Value = serde_json::from_str(&s.plane.kubeconfig()).unwrap();
    let cert_pem = base64::engine::general_purpose::STANDARD
        .decode(
            kubeconfig["users"][0]["user"]["client-certificate-data"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    let (_, pem) = x509_parser::pem::parse_x509_pem(&cert_pem).unwrap();
    let fingerprint: String = ring::digest::digest(&ring::digest::SHA256, &pem.contents)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let me = Api::<SelfSubjectReview>::all(s.admin.clone())
        .create(
            &PostParams::default(),
            &obj(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .user_info
        .unwrap();
    assert_eq!(me.username.as_deref(), Some("system:admin"));
    assert_eq!(
        me.extra.unwrap()["authentication.kubernetes.io/credential-id"],
        [format!("X509SHA256={fingerprint}")]
    );
}

#[tokio::test]
async fn expired_and_foreign_certificates_are_unauthorized() {
    let s = start().await;
    let ca = s.plane.certificate_authority().unwrap();
    let now = time::OffsetDateTime::now_utc();
    let expired = ca
        .issue_client(
            "old",
            &["system:masters"],
            now - time::Duration::days(2),
            now - time::Duration::days(1),
        )
        .unwrap();
    let c = client_as(&s.plane, cert_user(&expired.cert_pem, &expired.key_pem)).await;
    assert_eq!(
        status(Api::<Secret>::all(c).list(&ListParams::default()).await).code,
        401
    );

    let (other, _) = fleetform_controlplane::auth::ca::CertificateAuthority::generate(now).unwrap();
    let foreign = other
        .issue_client(
            "fleetform-admin",
            &["system:masters"],
            now,
            now + time::Duration::days(1),
        )
        .unwrap();
    let c = client_as(&s.plane, cert_user(&foreign.cert_pem, &foreign.key_pem)).await;
    assert_eq!(
        status(Api::<Secret>::all(c).list(&ListParams::default()).await).code,
        401
    );
}

#[tokio::test]
async fn roles_and_bindings_granting_more_than_held_are_refused() {
    let s = start().await;
    bind(&s.admin, "team", "admin", "alice").await;
    let alice = client_as(&s.plane, json!({"token": TOKEN})).await;
    let roles = Api::<Role>::namespaced(alice.clone(), "team");
    let ok: Role = obj(json!({"metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}));
    roles
        .create(&PostParams::default(), &ok)
        .await
        .expect("within what alice holds");
    let nodes: Role = obj(json!({"metadata": {"name": "nodes"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}));
    let st = status(roles.create(&PostParams::default(), &nodes).await);
    assert_eq!(st.code, 403);
    assert!(
        st.message.starts_with(r#"roles.rbac.authorization.k8s.io "nodes" is forbidden: user "alice" (groups=["dev" "qa" "system:authenticated"]) is attempting to grant RBAC permissions not currently held"#),
        "{}",
        st.message
    );
    let patch = json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    let st = status(
        roles
            .patch("cm-reader", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(st.code, 403);
    let to_cluster_admin: RoleBinding = obj(json!({"metadata": {"name": "grab"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "User", "name": "alice"}]}));
    let st = status(
        Api::<RoleBinding>::namespaced(alice.clone(), "team")
            .create(&PostParams::default(), &to_cluster_admin)
            .await,
    );
    assert_eq!(st.code, 403);
    let cr: ClusterRole = obj(json!({"metadata": {"name": "x"}, "rules": []}));
    assert_eq!(
        status(
            Api::<ClusterRole>::all(alice)
                .create(&PostParams::default(), &cr)
                .await
        )
        .code,
        403
    );
}

#[tokio::test]
async fn key_files_readable_by_others_refuse_start_and_are_reused_otherwise() {
    let dir = tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap();
    let first = ControlPlane::builder()
        .data_dir(Some(dir.path().into()))
        .secure()
        .start()
        .await
        .unwrap();
    let ca = first
        .certificate_authority()
        .unwrap()
        .cert_pem()
        .to_string();
    first.shutdown().await;
    let again = ControlPlane::builder()
        .data_dir(Some(dir.path().into()))
        .secure()
        .start()
        .await
        .unwrap();
    assert_eq!(again.certificate_authority().unwrap().cert_pem(), ca);
    again.shutdown().await;
    let key = dir.path().join("pki/ca.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let err = ControlPlane::builder()
        .data_dir(Some(dir.path().into()))
        .secure()
        .start()
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, StartError::Pki(_)));
    let msg = err.to_string();
    assert!(
        msg.contains("ca.key") && msg.contains("readable by group or others"),
        "{msg}"
    );
}
