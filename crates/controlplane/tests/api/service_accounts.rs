//! ServiceAccounts as identities, through kube-rs: a TokenRequest's token is its ServiceAccount
//! (RBAC, `whoami`, access reviews) until the ServiceAccount is deleted; TokenRequest refuses
//! what kube-apiserver refuses; a token bound to a Secret lives as long as the Secret; the legacy
//! token Secret is filled by the token controller and goes with its ServiceAccount; a
//! ServiceAccount may not bind more than it holds.

use std::time::Duration;

use fleetform_controlplane::{ControlPlane, RunningControlPlane};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenReview};
use k8s_openapi::api::authorization::v1::SelfSubjectRulesReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

use crate::common::{api_error, client_from_kubeconfig};

const NS: &str = "agents";

struct Plane {
    plane: RunningControlPlane,
    admin: kube::Client,
}

async fn start() -> Plane {
    let plane = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let admin = client_from_kubeconfig(&plane.kubeconfig()).await;
    let ns: Namespace = obj(json!({"metadata": {"name": NS}}));
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    Plane { plane, admin }
}

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

impl Plane {
    /// A client presenting `token` (and no client certificate).
    async fn client_with_token(&self, token: &str) -> kube::Client {
        let mut kc: Value = serde_json::from_str(&self.plane.kubeconfig()).unwrap();
        kc["users"][0]["user"] = json!({"token": token});
        client_from_kubeconfig(&kc.to_string()).await
    }

    async fn service_account(&self, name: &str) -> ServiceAccount {
        Api::<ServiceAccount>::namespaced(self.admin.clone(), NS)
            .create(
                &PostParams::default(),
                &obj(json!({"metadata": {"name": name}})),
            )
            .await
            .unwrap()
    }

    async fn token(&self, name: &str, spec: Value) -> kube::Result<TokenRequest> {
        Api::<ServiceAccount>::namespaced(self.admin.clone(), NS)
            .create_token_request(name, &PostParams::default(), &obj(json!({"spec": spec})))
            .await
    }

    async fn whoami(client: kube::Client) -> kube::Result<SelfSubjectReview> {
        Api::<SelfSubjectReview>::all(client)
            .create(
                &PostParams::default(),
                &obj(
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
                ),
            )
            .await
    }

    async fn grant(&self, account: &str, rules: Value) {
        let role: Role = obj(json!({"metadata": {"name": account}, "rules": rules}));
        Api::<Role>::namespaced(self.admin.clone(), NS)
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
        let binding: RoleBinding = obj(json!({"metadata": {"name": account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NS}]}));
        Api::<RoleBinding>::namespaced(self.admin.clone(), NS)
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }
}

async fn list_configmaps(client: kube::Client) -> kube::Result<()> {
    Api::<ConfigMap>::namespaced(client, NS)
        .list(&ListParams::default())
        .await
        .map(|_| ())
}

#[tokio::test]
async fn a_requested_token_is_its_service_account_until_the_service_account_is_deleted() {
    let p = start().await;
    let account = p.service_account("agent").await;
    let uid = account.metadata.uid.clone().unwrap();
    let issued = p
        .token("agent", json!({"expirationSeconds": 3600}))
        .await
        .unwrap();
    assert_eq!(
        issued.spec.audiences,
        ["https://kubernetes.default.svc"],
        "the API server's audience unless others are asked for"
    );
    let status = issued.status.unwrap();
    let lifetime = status
        .expiration_timestamp
        .0
        .duration_since(jiff::Timestamp::now());
    assert!(
        (3500..=3600).contains(&lifetime.as_secs()),
        "expires in an hour: {lifetime:?}"
    );
    let agent = p.client_with_token(&status.token).await;

    let me = Plane::whoami(agent.clone()).await.unwrap();
    let info = me.status.unwrap().user_info.unwrap();
    assert_eq!(
        info.username.as_deref(),
        Some("system:serviceaccount:agents:agent")
    );
    assert_eq!(info.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        info.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:agents",
            "system:authenticated"
        ]
    );
    let ids = &info.extra.unwrap()["authentication.kubernetes.io/credential-id"];
    assert!(ids[0].starts_with("JTI="), "{ids:?}");

    let st = api_error(list_configmaps(agent.clone()).await);
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            403,
            r#"configmaps is forbidden: User "system:serviceaccount:agents:agent" cannot list resource "configmaps" in API group "" in the namespace "agents""#
        )
    );
    p.grant(
        "agent",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
    )
    .await;
    list_configmaps(agent.clone())
        .await
        .expect("its RoleBinding holds at once");

    Api::<ServiceAccount>::namespaced(p.admin.clone(), NS)
        .delete("agent", &DeleteParams::default())
        .await
        .unwrap();
    let st = api_error(list_configmaps(agent.clone()).await);
    assert_eq!(
        (st.code, st.message.as_str()),
        (401, "Unauthorized"),
        "refused from the first request after the delete"
    );
    p.service_account("agent").await;
    assert_eq!(
        api_error(list_configmaps(agent).await).code,
        401,
        "a ServiceAccount made again under the same name is another one"
    );
}

#[tokio::test]
async fn token_requests_are_refused_as_kube_apiserver_refuses_them() {
    let p = start().await;
    p.service_account("agent").await;
    let st = api_error(p.token("agent", json!({"expirationSeconds": 100})).await);
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            422,
            r#"TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 100: may not specify a duration less than 10 minutes"#
        )
    );
    let st = api_error(p.token("nobody", json!({})).await);
    assert_eq!(
        (st.code, st.message.as_str()),
        (404, r#"serviceaccounts "nobody" not found"#)
    );
    let st = api_error(
        p.token(
            "agent",
            json!({"boundObjectRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}}),
        )
        .await,
    );
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            400,
            "cannot bind token to object of type /v1, Kind=ConfigMap"
        )
    );
}

#[tokio::test]
async fn a_namespace_editor_may_request_its_service_accounts_tokens_and_no_one_else() {
    let p = start().await;
    p.service_account("agent").await;
    let identities = p.plane.identities().unwrap();
    let editor = client_from_kubeconfig(&identities.kubeconfig_for("dana", &[]).unwrap()).await;
    let request: TokenRequest = obj(json!({"spec": {}}));
    let ask = |client: kube::Client| {
        let request = request.clone();
        async move {
            Api::<ServiceAccount>::namespaced(client, NS)
                .create_token_request("agent", &PostParams::default(), &request)
                .await
        }
    };
    let st = api_error(ask(editor.clone()).await);
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            403,
            r#"serviceaccounts "agent" is forbidden: User "dana" cannot create resource "serviceaccounts/token" in API group "" in the namespace "agents""#
        )
    );
    let binding: RoleBinding = obj(json!({"metadata": {"name": "dana-edits"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "name": "dana"}]}));
    Api::<RoleBinding>::namespaced(p.admin.clone(), NS)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    ask(editor)
        .await
        .expect("edit grants the namespace's tokens");
    let anonymous = {
        let mut kc: Value = serde_json::from_str(&p.plane.kubeconfig()).unwrap();
        kc["users"][0]["user"] = json!({});
        client_from_kubeconfig(&kc.to_string()).await
    };
    assert_eq!(api_error(ask(anonymous).await).code, 403);
}

#[tokio::test]
async fn a_token_lives_as_long_as_what_it_is_bound_to_and_serves_only_its_audiences() {
    let p = start().await;
    p.service_account("agent").await;
    let secrets = Api::<Secret>::namespaced(p.admin.clone(), NS);
    let secret = secrets
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "session"}})),
        )
        .await
        .unwrap();
    let bound = p
        .token(
            "agent",
            json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": "session",
                "uid": secret.metadata.uid}}),
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let agent = p.client_with_token(&bound).await;
    Plane::whoami(agent.clone())
        .await
        .expect("valid while its Secret exists");
    secrets
        .delete("session", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(api_error(Plane::whoami(agent).await).code, 401);

    // A token for another audience is not for this API server, but a TokenReview for that
    // audience (what the other service asks) says whose it is.
    let vault = p
        .token("agent", json!({"audiences": ["https://vault.example.com"]}))
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    assert_eq!(
        api_error(Plane::whoami(p.client_with_token(&vault).await).await).code,
        401
    );
    let review = |audiences: Value| -> TokenReview {
        obj(json!({"spec": {"token": vault, "audiences": audiences}}))
    };
    let reviews = Api::<TokenReview>::all(p.admin.clone());
    let answered = reviews
        .create(
            &PostParams::default(),
            &review(json!(["https://vault.example.com"])),
        )
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(answered.authenticated, Some(true));
    assert_eq!(
        answered.user.unwrap().username.as_deref(),
        Some("system:serviceaccount:agents:agent")
    );
    let refused = reviews
        .create(&PostParams::default(), &review(json!([])))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_ne!(refused.authenticated, Some(true));
}

#[tokio::test]
async fn a_legacy_token_secret_is_filled_and_goes_with_its_service_account() {
    let p = start().await;
    let account = p.service_account("agent").await;
    let secrets = Api::<Secret>::namespaced(p.admin.clone(), NS);
    let token_secret = |name: &str, account: &str| -> Secret {
        obj(json!({"metadata": {"name": name,
                "annotations": {"kubernetes.io/service-account.name": account}},
            "type": "kubernetes.io/service-account-token"}))
    };
    secrets
        .create(
            &PostParams::default(),
            &token_secret("agent-token", "agent"),
        )
        .await
        .unwrap();
    let filled = tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(secrets.clone(), "agent-token", |s: Option<&Secret>| {
            s.and_then(|s| s.data.as_ref())
                .is_some_and(|d| d.contains_key("token"))
        }),
    )
    .await
    .expect("the token controller fills the Secret")
    .unwrap()
    .unwrap();
    let data = filled.data.unwrap();
    assert_eq!(data["namespace"].0, NS.as_bytes());
    let ca = p.plane.certificate_authority().unwrap().cert_pem();
    assert_eq!(data["ca.crt"].0, ca.as_bytes());
    assert_eq!(
        filled.metadata.annotations.unwrap()["kubernetes.io/service-account.uid"],
        account.metadata.uid.unwrap()
    );
    let token = String::from_utf8(data["token"].0.clone()).unwrap();
    let agent = p.client_with_token(&token).await;
    let me = Plane::whoami(agent.clone()).await.unwrap();
    assert_eq!(
        me.status.unwrap().user_info.unwrap().username.as_deref(),
        Some("system:serviceaccount:agents:agent")
    );

    Api::<ServiceAccount>::namespaced(p.admin.clone(), NS)
        .delete("agent", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(secrets.clone(), "agent-token", conditions::is_deleted("")),
    )
    .await
    .expect("the token controller deletes the Secret of a deleted ServiceAccount")
    .unwrap();
    assert_eq!(api_error(Plane::whoami(agent).await).code, 401);

    // A token Secret for a ServiceAccount that does not exist goes at once; one naming no
    // ServiceAccount is refused.
    secrets
        .create(&PostParams::default(), &token_secret("orphan", "nobody"))
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(secrets.clone(), "orphan", conditions::is_deleted("")),
    )
    .await
    .expect("the token controller deletes a Secret of no ServiceAccount")
    .unwrap();
    let st = api_error(
        secrets
            .create(&PostParams::default(), &token_secret("unnamed", ""))
            .await,
    );
    assert_eq!(
        (st.code, st.message.as_str()),
        (
            422,
            r#"Secret "unnamed" is invalid: metadata.annotations[kubernetes.io/service-account.name]: Required value"#
        )
    );
}

#[tokio::test]
async fn a_service_account_may_not_bind_more_than_it_holds() {
    let p = start().await;
    p.service_account("agent").await;
    p.grant(
        "agent",
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": ["create"]}]),
    )
    .await;
    let token = p
        .token("agent", json!({}))
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let agent = p.client_with_token(&token).await;
    let escalate: RoleBinding = obj(json!({"metadata": {"name": "escalate"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": NS}]}));
    let st = api_error(
        Api::<RoleBinding>::namespaced(agent.clone(), NS)
            .create(&PostParams::default(), &escalate)
            .await,
    );
    assert_eq!(st.code, 403);
    assert_eq!(
        st.message,
        "rolebindings.rbac.authorization.k8s.io \"escalate\" is forbidden: user \"system:serviceaccount:agents:agent\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:agents\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}\n{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"
    );

    // What it may do, as `kubectl auth can-i --list` asks.
    let rules = Api::<SelfSubjectRulesReview>::all(agent)
        .create(
            &PostParams::default(),
            &obj(json!({"spec": {"namespace": NS}})),
        )
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(
        rules.resource_rules.iter().any(|r| r.resources.as_deref()
            == Some(&["rolebindings".to_string()][..])
            && r.verbs == ["create"]),
        "{rules:?}"
    );
    assert!(!rules.incomplete);
}
