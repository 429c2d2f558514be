//! Pods as kube-apiserver serves them on a cluster without nodes: created Pending with the
//! defaults and the admission a client reads back (ServiceAccount, token volume, priority,
//! tolerations), gone at once when deleted, and refused when their ServiceAccount is missing.

use crate::common;

use common::{TestPlane, api_error};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

/// A namespace with its `default` ServiceAccount, as the serviceaccount controller leaves it.
pub async fn namespace(t: &TestPlane, name: &str, labels: Value) {
    let namespaces: Api<Namespace> = Api::all(t.client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(t.client.clone(), name);
    let default = serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    match accounts.create(&PostParams::default(), &default).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => panic!("creating the default ServiceAccount: {e}"),
    }
}

fn pod(name: &str, spec: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

#[tokio::test]
async fn a_pod_is_created_pending_with_kube_apiserver_s_defaults_and_admission() {
    let t = TestPlane::start().await;
    namespace(&t, "work", json!({})).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "work");
    let created = pods
        .create(
            &PostParams::default(),
            &pod(
                "web",
                json!({"containers": [{"name": "c", "image": "registry.example/web:1",
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}),
            ),
        )
        .await
        .unwrap();
    let created = serde_json::to_value(&created).unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(
        created["status"],
        json!({"phase": "Pending", "qosClass": "Guaranteed"})
    );
    let spec = &created["spec"];
    for (field, value) in [
        ("dnsPolicy", json!("ClusterFirst")),
        ("restartPolicy", json!("Always")),
        ("schedulerName", json!("default-scheduler")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("securityContext", json!({})),
        ("enableServiceLinks", json!(true)),
        ("serviceAccountName", json!("default")),
        ("serviceAccount", json!("default")),
        ("priority", json!(0)),
        ("preemptionPolicy", json!("PreemptLowerPriority")),
    ] {
        assert_eq!(spec[field], value, "spec.{field}");
    }
    assert_eq!(spec["tolerations"].as_array().unwrap().len(), 2);
    let container = &spec["containers"][0];
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(
        container["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"}),
        "requests default to limits"
    );
    let volume = spec["volumes"][0]["name"].as_str().unwrap();
    assert!(volume.starts_with("kube-api-access-"), "{spec}");
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": volume, "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );
    let managed = serde_json::to_string(&created["metadata"]["managedFields"]).unwrap();
    assert!(
        !managed.contains("serviceAccountName") && !managed.contains("f:tolerations"),
        "what admission adds is no manager's: {managed}"
    );
    let read = serde_json::to_value(pods.get("web").await.unwrap()).unwrap();
    assert_eq!(read["status"]["phase"], "Pending", "nothing runs it");
}

#[tokio::test]
async fn a_deleted_pod_is_gone_at_once_and_the_answer_is_the_pod_marked_deleted() {
    let t = TestPlane::start().await;
    namespace(&t, "work", json!({})).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "work");
    let spec = json!({"automountServiceAccountToken": false,
        "containers": [{"name": "c", "image": "registry.example/web:1"}]});
    pods.create(&PostParams::default(), &pod("web", spec))
        .await
        .unwrap();
    let answer = pods.delete("web", &DeleteParams::default()).await.unwrap();
    let deleted = answer.left().expect("the pod, not a Status");
    assert!(deleted.metadata.deletion_timestamp.is_some());
    assert_eq!(deleted.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(deleted.metadata.generation, Some(2));
    assert!(pods.get_opt("web").await.unwrap().is_none(), "gone at once");
}

#[tokio::test]
async fn a_pod_whose_service_account_is_missing_is_refused() {
    let t = TestPlane::start().await;
    namespace(&t, "work", json!({})).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "work");
    let spec = json!({"serviceAccountName": "agent",
        "containers": [{"name": "c", "image": "registry.example/web:1"}]});
    let refused = api_error(pods.create(&PostParams::default(), &pod("web", spec)).await);
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "pods \"web\" is forbidden: error looking up service account work/agent: serviceaccount \"agent\" not found"
    );
}

#[tokio::test]
async fn a_deployment_s_pod_template_gets_kube_apiserver_s_defaults() {
    let t = TestPlane::start().await;
    let deployments: Api<Deployment> = Api::namespaced(t.client.clone(), "default");
    let d = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/web"}]}}}}))
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let created = serde_json::to_value(created).unwrap();
    let spec = &created["spec"]["template"]["spec"];
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
    assert!(
        spec.get("enableServiceLinks").is_none() && spec.get("tolerations").is_none(),
        "a template gets no pod's own defaults nor admission: {spec}"
    );
}

#[tokio::test]
async fn a_deployment_whose_template_runs_nothing_is_invalid() {
    let t = TestPlane::start().await;
    let deployments: Api<Deployment> = Api::namespaced(t.client.clone(), "default");
    let d = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}}))
    .unwrap();
    let refused = api_error(deployments.create(&PostParams::default(), &d).await);
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.message,
        "Deployment.apps \"web\" is invalid: spec.template.spec.containers: Required value"
    );
}
