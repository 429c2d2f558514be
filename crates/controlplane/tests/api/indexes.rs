//! Selected lists and the initial events of selected watches, answered from the control plane's
//! label and field indexes, return exactly what a scan of the whole resource does: for label
//! equality and set selectors (a fleet's `open-cluster-management.io/cluster-name`),
//! `metadata.namespace`, `metadata.name` and a CSR's `spec.signerName`; after updates that move
//! objects between label values or drop labels, after deletes and re-creates, and after a
//! restart from SQLite.

use crate::common;

use common::private_dir;
use fleetform_controlplane::{ControlPlane, RunningControlPlane};
use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

const CLUSTER: &str = "open-cluster-management.io/cluster-name";
const NAMESPACES: [&str; 3] = ["a", "b", "c"];

async fn start(dir: &std::path::Path) -> (RunningControlPlane, kube::Client) {
    let plane = ControlPlane::builder()
        .insecure_http()
        .data_dir(Some(dir.to_path_buf()))
        .start()
        .await
        .expect("control plane starts");
    let client = kube::Client::new(plane.in_process_service(), "default");
    (plane, client)
}

fn id<K: kube::Resource>(object: &K) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

fn label<'a>(map: &'a ConfigMap, key: &str) -> Option<&'a str> {
    map.labels().get(key).map(String::as_str)
}

/// A selector, and the same selection as a predicate over every object of the resource.
struct Case {
    namespace: Option<&'static str>,
    params: ListParams,
    selects: fn(&ConfigMap) -> bool,
}

fn cases() -> Vec<Case> {
    let labels = |s: &str| ListParams::default().labels(s);
    let fields = |s: &str| ListParams::default().fields(s);
    vec![
        Case {
            namespace: None,
            params: labels(&format!("{CLUSTER}=c1")),
            selects: |m| label(m, CLUSTER) == Some("c1"),
        },
        Case {
            namespace: Some("b"),
            params: labels(&format!("{CLUSTER}=c2")),
            selects: |m| m.namespace().as_deref() == Some("b") && label(m, CLUSTER) == Some("c2"),
        },
        Case {
            namespace: None,
            params: labels(&format!("{CLUSTER} in (c0,c3)")),
            selects: |m| matches!(label(m, CLUSTER), Some("c0" | "c3")),
        },
        Case {
            namespace: None,
            params: labels(&format!("{CLUSTER}=c2,tier=front")),
            selects: |m| label(m, CLUSTER) == Some("c2") && label(m, "tier") == Some("front"),
        },
        Case {
            namespace: None,
            params: labels(&format!("tier=back,{CLUSTER}!=c1")),
            selects: |m| label(m, "tier") == Some("back") && label(m, CLUSTER) != Some("c1"),
        },
        Case {
            namespace: None,
            params: labels("tier="),
            selects: |m| label(m, "tier") == Some(""),
        },
        Case {
            namespace: None,
            params: fields("metadata.namespace=c"),
            selects: |m| m.namespace().as_deref() == Some("c"),
        },
        Case {
            namespace: Some("a"),
            params: fields("metadata.namespace=b"),
            selects: |_| false,
        },
        Case {
            namespace: None,
            params: fields("metadata.name=m3"),
            selects: |m| m.name_any() == "m3",
        },
        Case {
            namespace: Some("b"),
            params: fields("metadata.name=m4").labels(&format!("{CLUSTER}=c4")),
            selects: |m| {
                m.namespace().as_deref() == Some("b")
                    && m.name_any() == "m4"
                    && label(m, CLUSTER) == Some("c4")
            },
        },
        Case {
            namespace: None,
            params: fields("metadata.namespace=a").labels(&format!("{CLUSTER}=c0")),
            selects: |m| m.namespace().as_deref() == Some("a") && label(m, CLUSTER) == Some("c0"),
        },
    ]
}

/// Every case's selected list, and the initial events of its selected watch, against a scan.
async fn assert_selections_match_a_scan(client: &kube::Client, moment: &str) {
    let everything: Vec<ConfigMap> = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list")
        .items;
    for case in cases() {
        let api: Api<ConfigMap> = match case.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let scanned: Vec<String> = everything
            .iter()
            .filter(|m| {
                case.namespace
                    .is_none_or(|ns| m.namespace().as_deref() == Some(ns))
            })
            .filter(|m| (case.selects)(m))
            .map(id)
            .collect();
        let listed: Vec<String> = api
            .list(&case.params)
            .await
            .expect("selected list")
            .items
            .iter()
            .map(id)
            .collect();
        assert_eq!(listed, scanned, "{moment}: list {:?}", case.params);
        let watch = WatchParams {
            label_selector: case.params.label_selector.clone(),
            field_selector: case.params.field_selector.clone(),
            ..WatchParams::default().initial_events()
        };
        let mut events = api.watch(&watch, "0").await.expect("watch").boxed();
        let mut initial = Vec::new();
        while let Some(event) = events.next().await {
            match event.expect("an event") {
                WatchEvent::Added(m) => initial.push(id(&m)),
                WatchEvent::Bookmark(_) => break,
                other => panic!("{moment}: unexpected {other:?}"),
            }
        }
        assert_eq!(initial, scanned, "{moment}: watch {:?}", case.params);
    }
    assert_signers_match_a_scan(client, moment).await;
}

async fn assert_signers_match_a_scan(client: &kube::Client, moment: &str) {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let everything = api.list(&ListParams::default()).await.expect("list").items;
    for signer in ["example.com/a", "example.com/b", "example.com/none"] {
        let scanned: Vec<String> = everything
            .iter()
            .filter(|c| c.spec.signer_name == signer)
            .map(id)
            .collect();
        let selected = ListParams::default().fields(&format!("spec.signerName={signer}"));
        let listed: Vec<String> = api
            .list(&selected)
            .await
            .expect("list")
            .items
            .iter()
            .map(id)
            .collect();
        assert_eq!(listed, scanned, "{moment}: CSRs of {signer}");
    }
}

async fn create_map(client: &kube::Client, ns: &str, name: &str, cluster: &str, tier: &str) {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let object = serde_json::from_value(json!({"metadata": {"name": name,
        "labels": {CLUSTER: cluster, "tier": tier}}}))
    .expect("a ConfigMap");
    maps.create(&PostParams::default(), &object)
        .await
        .expect("created");
}

async fn create_csr(client: &kube::Client, name: &str, signer: &str) {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let object = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"request": common::csr_request(name), "signerName": signer, "usages": ["client auth"]}}))
    .expect("a CSR");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
}

async fn relabel(client: &kube::Client, ns: &str, name: &str, labels: serde_json::Value) {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let patch = json!({"metadata": {"labels": labels}});
    maps.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
}

#[tokio::test]
async fn selected_lists_and_watches_return_what_a_scan_does() {
    let dir = private_dir();
    let (plane, client) = start(dir.path()).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in NAMESPACES {
        let object =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a Namespace");
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .expect("created");
    }
    for (n, ns) in NAMESPACES.iter().enumerate() {
        for i in 0..10 {
            let tier = ["front", "back", ""][(i + n) % 3];
            create_map(&client, ns, &format!("m{i}"), &format!("c{}", i % 5), tier).await;
        }
    }
    for i in 0..6 {
        create_csr(
            &client,
            &format!("csr-{i}"),
            ["example.com/a", "example.com/b"][i % 2],
        )
        .await;
    }
    assert_selections_match_a_scan(&client, "as created").await;

    // Objects move between clusters and tiers, lose labels, go and come back.
    relabel(&client, "a", "m1", json!({CLUSTER: "c2", "tier": "front"})).await;
    relabel(&client, "b", "m2", json!({CLUSTER: null})).await;
    relabel(&client, "c", "m3", json!({"tier": null, CLUSTER: "c0"})).await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "b");
    maps.delete("m4", &DeleteParams::default())
        .await
        .expect("deleted");
    maps.delete("m6", &DeleteParams::default())
        .await
        .expect("deleted");
    create_map(&client, "b", "m6", "c1", "back").await;
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    csrs.delete("csr-0", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_selections_match_a_scan(&client, "after updates and deletes").await;

    plane.shutdown().await;
    let (plane, client) = start(dir.path()).await;
    assert_selections_match_a_scan(&client, "after a restart").await;
    relabel(&client, "c", "m0", json!({CLUSTER: "c4"})).await;
    create_map(&client, "b", "m4", "c4", "front").await;
    create_csr(&client, "csr-9", "example.com/b").await;
    assert_selections_match_a_scan(&client, "after a restart and updates").await;
    plane.shutdown().await;
}
