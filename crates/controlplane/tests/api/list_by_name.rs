//! Lists with a `metadata.name` field selector (how an agent follows its own object) pick objects
//! by name, in one namespace, across namespaces and for cluster-scoped resources, and still
//! honour the other selectors.

use fleetform_controlplane::ControlPlane;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

fn names<K: kube::Resource + Clone>(list: kube::core::ObjectList<K>) -> Vec<String> {
    let mut names: Vec<String> = list
        .items
        .iter()
        .map(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn name_selected_lists_return_exactly_the_named_objects() {
    let plane = ControlPlane::builder()
        .insecure_http()
        .start()
        .await
        .expect("control plane starts");
    let client = kube::Client::new(plane.in_process_service(), "default");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["a", "b"] {
        let object = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for (name, tier) in [("x", "front"), ("y", "back")] {
            let object = serde_json::from_value(
                json!({"metadata": {"name": name, "labels": {"tier": tier}}}),
            )
            .unwrap();
            maps.create(&PostParams::default(), &object).await.unwrap();
        }
    }
    let by_name = |name: &str| ListParams::default().fields(&format!("metadata.name={name}"));

    let everywhere: Api<ConfigMap> = Api::all(client.clone());
    assert_eq!(
        names(everywhere.list(&by_name("x")).await.unwrap()),
        ["a/x", "b/x"]
    );
    assert!(names(everywhere.list(&by_name("z")).await.unwrap()).is_empty());
    let in_a: Api<ConfigMap> = Api::namespaced(client.clone(), "a");
    assert_eq!(names(in_a.list(&by_name("y")).await.unwrap()), ["a/y"]);
    assert!(
        names(in_a.list(&by_name("y").labels("tier=front")).await.unwrap()).is_empty(),
        "the label selector still applies"
    );
    let other_namespace = ListParams::default().fields("metadata.name=x,metadata.namespace!=a");
    assert_eq!(
        names(everywhere.list(&other_namespace).await.unwrap()),
        ["b/x"]
    );
    assert_eq!(names(namespaces.list(&by_name("b")).await.unwrap()), ["/b"]);
    plane.shutdown().await;
}
