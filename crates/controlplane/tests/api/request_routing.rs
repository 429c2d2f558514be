//! What RBAC allows is what the handler does: a request is read once, and the verb it is
//! authorized for is the operation it is routed to and the verb it is counted under.

use crate::common;

use common::{TestPlane, client_from_kubeconfig};
use fleetform_controlplane::requests::Verb;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// A namespace `team` holding ConfigMap `c`, and a client for `user`, who may do `verbs` on
/// ConfigMaps there and nothing else.
async fn user_with(t: &TestPlane, user: &str, verbs: &[&str]) -> kube::Client {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    Api::<Namespace>::all(t.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "configmaps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]}))
    .unwrap();
    Api::<Role>::namespaced(t.client.clone(), "team")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "configmaps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmaps"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}))
    .unwrap();
    Api::<RoleBinding>::namespaced(t.client.clone(), "team")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    Api::<ConfigMap>::namespaced(t.client.clone(), "team")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let identities = t.plane.identities().expect("a secured control plane");
    client_from_kubeconfig(&identities.kubeconfig_for(user, &[]).unwrap()).await
}

/// Sends a raw request; returns its status code and body.
async fn send(client: &kube::Client, method: &str, uri: &str, body: Value) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let resp = client.send(req).await.expect("the server answers");
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_post_to_a_watch_path_is_no_create_for_someone_who_may_only_watch() {
    let t = TestPlane::start().await;
    let watcher = user_with(&t, "watcher", &["watch"]).await;
    let (code, body) = send(
        &watcher,
        "POST",
        "/api/v1/watch/namespaces/team/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "planted"}}),
    )
    .await;
    assert_eq!(code, 405, "{body}");
    let planted = Api::<ConfigMap>::namespaced(t.client.clone(), "team")
        .get_opt("planted")
        .await
        .unwrap();
    assert!(planted.is_none(), "a watch grant created {planted:?}");
}

#[tokio::test]
async fn a_get_with_watch_true_is_authorized_and_counted_as_the_get_it_does() {
    let t = TestPlane::start().await;
    let reader = user_with(&t, "reader", &["get"]).await;
    let before = t.plane.request_counts();
    let (code, body) = send(
        &reader,
        "GET",
        "/api/v1/namespaces/team/configmaps/c?watch=true",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["name"], "c");
    let counted = t.plane.request_counts().since(&before);
    let kinds: Vec<(Verb, &str)> = counted
        .iter()
        .map(|(kind, _)| (kind.verb.clone(), kind.resource.as_str()))
        .collect();
    assert_eq!(kinds, [(Verb::Get, "configmaps")]);
}
