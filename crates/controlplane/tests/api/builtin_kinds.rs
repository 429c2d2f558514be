//! The built-in kinds clients expect, answered as kube-apiserver answers them: stored with its
//! defaults, deleted with its answer shapes, listed in discovery, written in its bytes (Go
//! field order, a trailing newline, YAML on request) and printed in its Tables.

use crate::common;

use common::TestPlane;
use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// An answer: status code, Content-Type and body.
struct Answer {
    code: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

async fn send(t: &TestPlane, method: &str, uri: &str, accept: &str, body: Option<Value>) -> Answer {
    let mut req = http::Request::builder().method(method).uri(uri);
    if !accept.is_empty() {
        req = req.header("Accept", accept);
    }
    if body.is_some() {
        req = req.header("Content-Type", "application/json");
    }
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let resp = t
        .client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .expect("the server answers");
    let code = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Answer {
        code,
        content_type,
        body,
    }
}

async fn post(t: &TestPlane, uri: &str, body: Value) -> Value {
    let answer = send(t, "POST", uri, "", Some(body)).await;
    assert_eq!(answer.code, 201, "{}", answer.text());
    answer.json()
}

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/web:1"}]}})
}

#[tokio::test]
async fn workloads_are_stored_with_kube_apiserver_s_defaults() {
    let t = TestPlane::start().await;
    let ns = "default";
    let job: Job = serde_json::from_value(
        json!({"metadata": {"name": "once"}, "spec": {"template": template()}}),
    )
    .unwrap();
    let job = Api::<Job>::namespaced(t.client.clone(), ns)
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    let spec = job.spec.unwrap();
    assert_eq!(spec.backoff_limit, Some(6));
    assert_eq!(spec.completions, Some(1));
    assert_eq!(spec.completion_mode.as_deref(), Some("NonIndexed"));
    let uid = job.metadata.uid.unwrap();
    assert_eq!(
        spec.selector.unwrap().match_labels.unwrap()["batch.kubernetes.io/controller-uid"],
        uid
    );
    let cron: CronJob = serde_json::from_value(json!({"metadata": {"name": "often"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template()}}}}))
    .unwrap();
    let cron = Api::<CronJob>::namespaced(t.client.clone(), ns)
        .create(&PostParams::default(), &cron)
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(cron.concurrency_policy.as_deref(), Some("Allow"));
    assert_eq!(cron.successful_jobs_history_limit, Some(3));
    let set: StatefulSet = serde_json::from_value(json!({"metadata": {"name": "db"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "web"}},
            "template": template()}}))
    .unwrap();
    let set = Api::<StatefulSet>::namespaced(t.client.clone(), ns)
        .create(&PostParams::default(), &set)
        .await
        .unwrap();
    assert_eq!(
        set.spec.unwrap().pod_management_policy.as_deref(),
        Some("OrderedReady")
    );
    assert_eq!(set.status.unwrap().replicas, 0);
    let daemons: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template()}}))
    .unwrap();
    let daemons = Api::<DaemonSet>::namespaced(t.client.clone(), ns)
        .create(&PostParams::default(), &daemons)
        .await
        .unwrap();
    let update = daemons.spec.unwrap().update_strategy.unwrap();
    assert_eq!(update.type_.as_deref(), Some("RollingUpdate"));
    let budget: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "b"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}))
    .unwrap();
    let budget = Api::<PodDisruptionBudget>::namespaced(t.client.clone(), ns)
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    assert_eq!(budget.status.unwrap().expected_pods, 0);
    let policy: NetworkPolicy = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"podSelector": {}, "egress": [{}]}}),
    )
    .unwrap();
    let policy = Api::<NetworkPolicy>::namespaced(t.client.clone(), ns)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    assert_eq!(
        policy.spec.unwrap().policy_types,
        Some(vec!["Ingress".to_string(), "Egress".to_string()])
    );
    let class: PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000})).unwrap();
    let class = Api::<PriorityClass>::all(t.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    assert_eq!(
        class.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
}

#[tokio::test]
async fn a_service_gets_a_cluster_ip_and_its_ip_families() {
    let t = TestPlane::start().await;
    let svc = post(
        &t,
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}],
            "selector": {"app": "web"}}}),
    )
    .await;
    let ip = svc["spec"]["clusterIP"].as_str().unwrap();
    assert!(ip.starts_with("10."), "{svc}");
    assert_eq!(svc["spec"]["clusterIPs"], json!([ip]));
    assert_eq!(svc["spec"]["ipFamilies"], json!(["IPv4"]));
    assert_eq!(svc["spec"]["ipFamilyPolicy"], "SingleStack");
    let node_port = post(
        &t,
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
    )
    .await;
    let port = node_port["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&port), "{node_port}");
    assert_eq!(node_port["spec"]["externalTrafficPolicy"], "Cluster");
}

#[tokio::test]
async fn delete_answers_the_object_or_a_status_as_kube_apiserver_does() {
    let t = TestPlane::start().await;
    let cases = [
        (
            "/api/v1/namespaces/default/services",
            json!({"metadata": {"name": "d"}, "spec": {"ports": [{"port": 80}]}}),
            "Service",
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"metadata": {"name": "d"}}),
            "ServiceAccount",
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
            "PersistentVolumeClaim",
        ),
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            json!({"metadata": {"name": "d"}, "provisioner": "example.com/disk"}),
            "StorageClass",
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "d"}}),
            "Status",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"metadata": {"name": "d"}, "spec": {"template": template()}}),
            "Status",
        ),
        (
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            json!({"metadata": {"name": "d"}, "value": 1}),
            "Status",
        ),
    ];
    for (collection, body, answered) in cases {
        post(&t, collection, body).await;
        let deleted = send(&t, "DELETE", &format!("{collection}/d"), "", None).await;
        assert_eq!(deleted.code, 200, "{}", deleted.text());
        assert_eq!(
            deleted.json()["kind"],
            answered,
            "{collection}: {}",
            deleted.text()
        );
        let gone = send(&t, "GET", &format!("{collection}/d"), "", None).await;
        assert_eq!(gone.code, 404, "{collection}");
    }
}

#[tokio::test]
async fn an_autoscaler_is_served_at_both_of_its_versions() {
    let t = TestPlane::start().await;
    post(
        &t,
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
        json!({"metadata": {"name": "h"}, "spec": {"maxReplicas": 4,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "targetCPUUtilizationPercentage": 60}}),
    )
    .await;
    let v2 = send(
        &t,
        "GET",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/h",
        "",
        None,
    )
    .await
    .json();
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        60
    );
    let v1 = send(
        &t,
        "GET",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
        "",
        None,
    )
    .await
    .json();
    assert_eq!(v1["items"][0]["spec"]["targetCPUUtilizationPercentage"], 60);
    assert_eq!(v1["items"][0]["spec"]["minReplicas"], 1);
}

#[tokio::test]
async fn json_is_written_in_go_struct_order_and_ends_in_a_newline() {
    let t = TestPlane::start().await;
    post(
        &t,
        "/api/v1/namespaces/default/configmaps",
        json!({"data": {"z": "1", "a": "<2>"}, "metadata": {"labels": {"b": "2", "a": "1"},
            "name": "bytes"}, "kind": "ConfigMap", "apiVersion": "v1"}),
    )
    .await;
    let one = send(
        &t,
        "GET",
        "/api/v1/namespaces/default/configmaps/bytes",
        "",
        None,
    )
    .await;
    let text = one.text();
    assert!(
        text.starts_with(
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"bytes","namespace":"default","uid":"#
        ),
        "{text}"
    );
    assert!(
        text.ends_with(concat!(r#""data":{"a":"\u003c2\u003e","z":"1"}}"#, "\n")),
        "{text}"
    );
    assert!(text.contains(r#""labels":{"a":"1","b":"2"}"#), "{text}");
    let list = send(&t, "GET", "/api/v1/namespaces/default/configmaps", "", None).await;
    let text = list.text();
    assert!(
        text.starts_with(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#""items":[{"metadata":{"name":"bytes","#),
        "{text}"
    );
    assert!(text.ends_with("}\n"), "{text}");
    let missing = send(
        &t,
        "GET",
        "/api/v1/namespaces/default/configmaps/nope",
        "",
        None,
    )
    .await;
    assert!(
        missing.text().starts_with(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"#
        ),
        "{}",
        missing.text()
    );
}

#[tokio::test]
async fn yaml_is_answered_on_request_and_other_media_types_are_406() {
    let t = TestPlane::start().await;
    post(
        &t,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "y"}, "data": {"n": "2", "y": "yes"}}),
    )
    .await;
    let yaml = send(
        &t,
        "GET",
        "/api/v1/namespaces/default/configmaps/y",
        "application/yaml",
        None,
    )
    .await;
    assert_eq!(yaml.content_type, "application/yaml");
    assert!(
        yaml.text().starts_with(
            "apiVersion: v1\ndata:\n  \"n\": \"2\"\n  \"y\": \"yes\"\nkind: ConfigMap\n"
        ),
        "{}",
        yaml.text()
    );
    let html = send(
        &t,
        "GET",
        "/api/v1/namespaces/default/configmaps/y",
        "text/html",
        None,
    )
    .await;
    assert_eq!(html.code, 406);
    assert_eq!(
        html.json()["message"],
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
}

/// A workload's pod template gets a Pod's spec defaults, and the deployment controller rolls a
/// new Deployment out to a ReplicaSet (served here), both annotated with revision 1.
#[tokio::test]
async fn a_deployment_is_rolled_out_to_a_replica_set_with_its_revision() {
    let t = TestPlane::start().await;
    let created = post(
        &t,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]}}}}),
    )
    .await;
    let pod_spec = &created["spec"]["template"]["spec"];
    assert_eq!(pod_spec["restartPolicy"], "Always", "{created}");
    assert_eq!(pod_spec["dnsPolicy"], "ClusterFirst", "{created}");
    let uri = "/apis/apps/v1/namespaces/default/deployments/web";
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let rolled_out = loop {
        let d = send(&t, "GET", uri, "", None).await.json();
        if d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
            && d["status"]["updatedReplicas"] == 1
        {
            break d;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no rollout in 30 s: {d}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(rolled_out["status"]["observedGeneration"], 1);
    let sets = send(
        &t,
        "GET",
        "/apis/apps/v1/namespaces/default/replicasets",
        "",
        None,
    )
    .await
    .json();
    let items = sets["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{sets}");
    let rs = &items[0];
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap();
    assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
    assert_eq!(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    assert_eq!(rs["metadata"]["ownerReferences"][0]["name"], "web");
}

#[tokio::test]
async fn a_table_of_deployments_has_kubectl_s_columns() {
    let t = TestPlane::start().await;
    post(
        &t,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 2,
            "selector": {"matchLabels": {"app": "web"}}, "template": template()}}),
    )
    .await;
    let table = send(
        &t,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments",
        "application/json;as=Table;g=meta.k8s.io;v=v1",
        None,
    )
    .await
    .json();
    let columns: Vec<(&str, i64)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Name", 0),
            ("Ready", 0),
            ("Up-to-date", 0),
            ("Available", 0),
            ("Age", 0),
            ("Containers", 1),
            ("Images", 1),
            ("Selector", 1)
        ]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "web");
    assert_eq!(cells[1], "0/2");
    assert_eq!(cells[5], "c");
    assert_eq!(cells[6], "registry.example/web:1");
    assert_eq!(cells[7], "app=web");
    assert!(
        table["columnDefinitions"][2]["description"]
            .as_str()
            .unwrap()
            .starts_with("Total number of non-terminating pods"),
        "{table}"
    );
}

#[tokio::test]
async fn discovery_lists_the_built_in_groups_and_refuses_what_they_do_not_serve() {
    let t = TestPlane::start().await;
    let apis = send(&t, "GET", "/apis", "", None).await.json();
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        &groups[..3],
        ["apiregistration.k8s.io", "apps", "events.k8s.io"]
    );
    for group in [
        "batch",
        "policy",
        "networking.k8s.io",
        "storage.k8s.io",
        "scheduling.k8s.io",
    ] {
        assert!(groups.contains(&group), "{group} in {groups:?}");
    }
    let batch = send(&t, "GET", "/apis/batch/v1", "", None).await.json();
    assert_eq!(batch["resources"][2]["name"], "jobs");
    assert_eq!(batch["resources"][2]["storageVersionHash"], "mudhfqk/qZY=");
    let core = send(&t, "GET", "/api/v1", "", None).await.json();
    assert!(core.get("apiVersion").is_none(), "{core}");
    let missing = send(&t, "GET", "/apis/nope.example.com/v1", "", None).await;
    assert_eq!(
        (
            missing.code,
            missing.content_type.as_str(),
            missing.text().as_str()
        ),
        (404, "text/plain; charset=utf-8", "404 page not found\n")
    );
    let every_namespace = send(&t, "DELETE", "/api/v1/namespaces", "", None).await;
    assert_eq!(every_namespace.code, 405, "{}", every_namespace.text());
    let bindings = send(&t, "GET", "/api/v1/namespaces/default/bindings", "", None).await;
    assert_eq!(bindings.code, 405, "{}", bindings.text());
}
