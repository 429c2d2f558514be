//! A resource's own rules are those of its kind, not of its name: a custom resource named like
//! a built-in one (its plural `namespaces` or `customresourcedefinitions`) gets what every
//! custom resource gets and none of the built-in's rules.

use crate::common;

use std::time::Duration;

use common::TestPlane;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

/// Serves cluster-scoped `plural.example.com/v1` `kind` objects of any shape.
async fn serve(t: &TestPlane, plural: &str, kind: &str) -> Api<DynamicObject> {
    let name = format!("{plural}.example.com");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"group": "example.com", "scope": "Cluster",
            "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}}))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = await_condition(crds, &name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .unwrap()
        .unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", kind);
    Api::all_with(
        t.client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

#[tokio::test]
async fn a_custom_resource_called_namespaces_goes_once_its_last_finalizer_does() {
    let t = TestPlane::start().await;
    let api = serve(&t, "namespaces", "Space").await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Space",
        "metadata": {"name": "s", "finalizers": ["example.com/hold"]}}))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    api.delete("s", &DeleteParams::default()).await.unwrap();
    let held = api.get("s").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let left = api.get_opt("s").await.unwrap();
    assert!(left.is_none(), "still stored: {left:?}");
}

#[tokio::test]
async fn a_custom_resource_called_customresourcedefinitions_gets_no_definition_status() {
    let t = TestPlane::start().await;
    let api = serve(&t, "customresourcedefinitions", "Definition").await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Definition",
        "metadata": {"name": "d"}, "spec": {"size": 1}}))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let updated = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(updated.data["spec"]["size"], 2);
    assert!(
        updated.data.get("status").is_none(),
        "status appeared: {}",
        updated.data["status"]
    );
}
