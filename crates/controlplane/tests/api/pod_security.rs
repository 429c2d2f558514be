//! PodSecurity admission from namespace labels, as a client of kube-apiserver meets it: a Pod
//! that violates `enforce` is refused (dry runs too), a workload's template that would violate
//! it is admitted with a Warning header, a namespace given a stricter `enforce` warns about the
//! pods it holds, and a label naming no level is refused.

use crate::common;
use crate::pods::namespace;

use common::TestPlane;
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// What a request answered: status, Warning headers and body.
struct Answer {
    status: u16,
    warnings: Vec<String>,
    body: Value,
}

async fn send(t: &TestPlane, method: &str, path: &str, content_type: &str, body: Value) -> Answer {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let response = t.client.send(request).await.expect("an answer");
    let status = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        warnings,
        body: serde_json::from_slice(&bytes).unwrap(),
    }
}

async fn post(t: &TestPlane, path: &str, body: Value) -> Answer {
    send(t, "POST", path, "application/json", body).await
}

/// A container that meets `restricted` but for its seccomp profile, as the recorded scenario's.
fn almost_hardened() -> Value {
    json!({"name": "c", "image": "registry.example/none:1", "securityContext": {
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": true}})
}

fn pod(name: &str, container: Value, extra: Value) -> Value {
    let mut spec = json!({"automountServiceAccountToken": false, "containers": [container]});
    spec.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn deployment(name: &str, container: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"automountServiceAccountToken": false, "containers": [container]}}}})
}

const SECCOMP: &str = "seccompProfile (pod or container \\\"c\\\" must set securityContext.seccompProfile.type to \\\"RuntimeDefault\\\" or \\\"Localhost\\\")";

#[tokio::test]
async fn a_pod_violating_enforce_is_refused_and_a_template_warned_about() {
    let t = TestPlane::start().await;
    namespace(
        &t,
        "strict",
        json!({"pod-security.kubernetes.io/enforce": "restricted"}),
    )
    .await;
    let warned = post(
        &t,
        "/apis/apps/v1/namespaces/strict/deployments",
        deployment("agent", almost_hardened()),
    )
    .await;
    assert_eq!(warned.status, 201);
    assert_eq!(
        warned.warnings,
        [format!(
            "299 - \"would violate PodSecurity \\\"restricted:latest\\\": {SECCOMP}\""
        )]
    );
    let refused = post(
        &t,
        "/api/v1/namespaces/strict/pods",
        pod("agent", almost_hardened(), json!({})),
    )
    .await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.body["message"],
        "pods \"agent\" is forbidden: violates PodSecurity \"restricted:latest\": seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    assert_eq!(
        refused.body["details"],
        json!({"name": "agent", "kind": "pods"})
    );
    let mut hardened = almost_hardened();
    hardened["securityContext"]["seccompProfile"] = json!({"type": "RuntimeDefault"});
    let admitted = post(
        &t,
        "/api/v1/namespaces/strict/pods",
        pod("ok", hardened.clone(), json!({})),
    )
    .await;
    assert_eq!(admitted.status, 201, "{}", admitted.body);
    assert!(admitted.warnings.is_empty());
    let dry_run = post(
        &t,
        "/api/v1/namespaces/strict/pods?dryRun=All",
        pod("host", hardened, json!({"hostNetwork": true})),
    )
    .await;
    assert_eq!(
        dry_run.status, 403,
        "a dry run is admitted as a real request"
    );
    assert_eq!(
        dry_run.body["message"],
        "pods \"host\" is forbidden: violates PodSecurity \"restricted:latest\": host namespaces (hostNetwork=true)"
    );
}

#[tokio::test]
async fn a_pod_changing_its_image_is_judged_again() {
    let t = TestPlane::start().await;
    namespace(
        &t,
        "warned",
        json!({"pod-security.kubernetes.io/warn": "baseline"}),
    )
    .await;
    let privileged = json!({"name": "c", "image": "registry.example/none:1",
        "securityContext": {"privileged": true}});
    let created = post(
        &t,
        "/api/v1/namespaces/warned/pods",
        pod("p", privileged, json!({})),
    )
    .await;
    assert_eq!(created.status, 201);
    let warning = "299 - \"would violate PodSecurity \\\"baseline:latest\\\": privileged (container \\\"c\\\" must not set securityContext.privileged=true)\"";
    assert_eq!(created.warnings, [warning]);
    let path = "/api/v1/namespaces/warned/pods/p";
    let labelled = send(
        &t,
        "PATCH",
        path,
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(labelled.status, 200);
    assert!(
        labelled.warnings.is_empty(),
        "a label is no reason to judge it"
    );
    let image =
        json!({"spec": {"containers": [{"name": "c", "image": "registry.example/none:2"}]}});
    let reimaged = send(
        &t,
        "PATCH",
        path,
        "application/strategic-merge-patch+json",
        image,
    )
    .await;
    assert_eq!(reimaged.status, 200, "{}", reimaged.body);
    assert_eq!(reimaged.warnings, [warning]);
}

#[tokio::test]
async fn enforcing_a_level_over_violating_pods_warns_and_a_level_that_is_none_is_refused() {
    let t = TestPlane::start().await;
    namespace(&t, "open", json!({})).await;
    for name in ["loose", "looser"] {
        let created = post(
            &t,
            "/api/v1/namespaces/open/pods",
            pod(name, almost_hardened(), json!({})),
        )
        .await;
        assert_eq!(created.status, 201);
    }
    let bare = json!({"name": "c", "image": "registry.example/none:1"});
    assert_eq!(
        post(
            &t,
            "/api/v1/namespaces/open/pods",
            pod("bare", bare, json!({}))
        )
        .await
        .status,
        201
    );
    let labels = |level: &str| json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": level}}});
    let path = "/api/v1/namespaces/open";
    let enforced = send(
        &t,
        "PATCH",
        path,
        "application/merge-patch+json",
        labels("restricted"),
    )
    .await;
    assert_eq!(enforced.status, 200);
    assert_eq!(
        enforced.warnings,
        [
            "299 - \"existing pods in namespace \\\"open\\\" violate the new PodSecurity enforce level \\\"restricted:latest\\\"\"",
            "299 - \"bare: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile\"",
            "299 - \"loose (and 1 other pod): seccompProfile\"",
        ]
    );
    let relaxed = send(
        &t,
        "PATCH",
        path,
        "application/merge-patch+json",
        labels("baseline"),
    )
    .await;
    assert!(
        relaxed.warnings.is_empty(),
        "a relaxed level checks nothing"
    );
    let invalid = send(
        &t,
        "PATCH",
        path,
        "application/merge-patch+json",
        labels("strict"),
    )
    .await;
    assert_eq!(invalid.status, 422);
    assert_eq!(
        invalid.body["message"],
        "Namespace \"open\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );
    assert_eq!(
        invalid.body["details"]["causes"],
        json!([{"reason": "FieldValueInvalid",
            "message": "Invalid value: \"strict\": must be one of privileged, baseline, restricted",
            "field": "metadata.labels[pod-security.kubernetes.io/enforce]"}])
    );
    let created = post(
        &t,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "bad", "labels": {"pod-security.kubernetes.io/warn-version": "1.30"}}}),
    )
    .await;
    assert_eq!(created.status, 422, "{}", created.body);
}
