//! CustomResourceDefinitions through kube-rs: served at once with conditions, schema
//! validation worded as kube-apiserver, defaults, pruning, status subresource, multiple
//! versions, printer columns in Table output, and deletion cascading to objects.

use crate::common;

use std::time::Duration;

use common::{TestPlane, api_error};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                "shortNames": ["wd"], "categories": ["all"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}},
                 "additionalPrinterColumns": [
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}],
                 "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "replicas": {"type": "integer", "minimum": 0, "default": 1},
                        "size": {"type": "string", "enum": ["S", "M", "L"]},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    }))
    .unwrap()
}

fn widgets(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

async fn install(t: &TestPlane) -> Api<CustomResourceDefinition> {
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let established = await_condition(
        crds.clone(),
        "widgets.example.com",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .unwrap()
        .unwrap();
    crds
}

#[tokio::test]
async fn created_crd_is_established_and_served_at_once() {
    let t = TestPlane::start().await;
    let crds = install(&t).await;
    let crd = crds.get("widgets.example.com").await.unwrap();
    let conds = crd.status.unwrap().conditions.unwrap();
    let types: Vec<&str> = conds.iter().map(|c| c.type_.as_str()).collect();
    assert!(types.contains(&"Established") && types.contains(&"NamesAccepted"));
    let api = widgets(&t.client, "v1");
    let w = api
        .create(&PostParams::default(), &widget("a", json!({"size": "S"})))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    let beta = widgets(&t.client, "v1beta1");
    let seen = beta.get("a").await.unwrap();
    assert_eq!(seen.types.unwrap().api_version, "example.com/v1beta1");
}

#[tokio::test]
async fn schema_errors_are_all_listed_as_kube_apiserver_words_them() {
    let t = TestPlane::start().await;
    install(&t).await;
    let api = widgets(&t.client, "v1");
    let err = api_error(
        api.create(
            &PostParams::default(),
            &widget("bad", json!({"replicas": "string", "size": "XL"})),
        )
        .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "Widget.example.com \"bad\" is invalid: [spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\", spec.size: Unsupported value: \"XL\": supported values: \"S\", \"M\", \"L\"]"
    );
    let causes = err.details.unwrap().causes;
    assert_eq!(causes.len(), 2);
    let missing = api_error(
        api.create(&PostParams::default(), &widget("bad", json!({})))
            .await,
    );
    assert!(
        missing.message.ends_with("spec.size: Required value"),
        "{}",
        missing.message
    );
}

#[tokio::test]
async fn defaults_are_applied_and_unknown_fields_pruned() {
    let t = TestPlane::start().await;
    install(&t).await;
    let api = widgets(&t.client, "v1");
    let w = api
        .create(
            &PostParams::default(),
            &widget(
                "d",
                json!({"size": "M", "junk": 1, "free": {"any": {"thing": true}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["replicas"], 1);
    assert!(w.data["spec"].get("junk").is_none());
    assert_eq!(w.data["spec"]["free"]["any"]["thing"], true);
}

#[tokio::test]
async fn status_subresource_separates_writes_and_generation() {
    let t = TestPlane::start().await;
    install(&t).await;
    let api = widgets(&t.client, "v1");
    api.create(&PostParams::default(), &widget("s", json!({"size": "S"})))
        .await
        .unwrap();
    let pp = PatchParams::default();
    let st = api
        .patch_status(
            "s",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": "L"}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["phase"], "Ready");
    assert_eq!(st.data["spec"]["size"], "S");
    assert_eq!(st.metadata.generation, Some(1));
    let main = api
        .patch(
            "s",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Gone"}, "spec": {"size": "L"}})),
        )
        .await
        .unwrap();
    assert_eq!(main.data["status"]["phase"], "Ready");
    assert_eq!(main.metadata.generation, Some(2));
    let smp = api_error(
        api.patch("s", &pp, &Patch::Strategic(json!({"spec": {"size": "M"}})))
            .await,
    );
    assert_eq!(smp.code, 415);
}

#[tokio::test]
async fn printer_columns_appear_in_table_output() {
    let t = TestPlane::start().await;
    install(&t).await;
    let api = widgets(&t.client, "v1");
    api.create(
        &PostParams::default(),
        &widget("tab", json!({"size": "S", "replicas": 3})),
    )
    .await
    .unwrap();
    let req = http::Request::get("/apis/example.com/v1/namespaces/default/widgets")
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = t.client.request(req).await.unwrap();
    assert_eq!(table["kind"], "Table");
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Replicas", "Phase", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "tab");
    assert_eq!(table["rows"][0]["cells"][1], 3);
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_and_stops_serving() {
    let t = TestPlane::start().await;
    let crds = install(&t).await;
    let api = widgets(&t.client, "v1");
    for n in ["x", "y"] {
        api.create(&PostParams::default(), &widget(n, json!({"size": "S"})))
            .await
            .unwrap();
    }
    let uid = crds
        .get("widgets.example.com")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let gone = await_condition(
        crds.clone(),
        "widgets.example.com",
        conditions::is_deleted(&uid),
    );
    tokio::time::timeout(Duration::from_secs(10), gone)
        .await
        .unwrap()
        .unwrap();
    let err = api_error(api.list(&ListParams::default()).await);
    assert_eq!(err.code, 404);
    install(&t).await;
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "objects went with the CRD"
    );
}

#[tokio::test]
async fn server_side_apply_of_status_by_a_controller() {
    let t = TestPlane::start().await;
    install(&t).await;
    let api = widgets(&t.client, "v1");
    let spec = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "ssa"},
        "spec": {"size": "S"}});
    api.patch("ssa", &PatchParams::apply("gitops"), &Patch::Apply(&spec))
        .await
        .unwrap();
    let status = |phase: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "ssa"}, "status": phase})
    };
    let pp = PatchParams::apply("controller").force();
    let w = api
        .patch_status("ssa", &pp, &Patch::Apply(status(json!({"phase": "Ready"}))))
        .await
        .unwrap();
    assert_eq!(w.data["status"]["phase"], "Ready");
    assert_eq!(w.data["spec"]["size"], "S");
    assert_eq!(w.metadata.generation, Some(1));
    let w = api
        .patch_status("ssa", &pp, &Patch::Apply(status(json!({}))))
        .await
        .unwrap();
    assert!(
        w.data["status"].get("phase").is_none(),
        "a field the controller stopped applying is removed"
    );
    let again = api
        .patch("ssa", &PatchParams::apply("gitops"), &Patch::Apply(&spec))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, w.metadata.resource_version,
        "re-applying the same config is a no-op"
    );
}
