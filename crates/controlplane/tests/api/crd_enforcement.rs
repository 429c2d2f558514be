//! What kube-apiserver enforces for CRDs beyond the openAPIV3Schema types, through kube-rs:
//! `x-kubernetes-list-type` map/set uniqueness, `x-kubernetes-validations` CEL rules (message,
//! messageExpression, reason, fieldPath, transition rules on `oldSelf`, refused when they do
//! not compile, bounded in cost), and printer columns with JSONPath filters in Table output.
//!
//! The CRDs are shaped after OCM's ManagedCluster and ManifestWork, written from the fields
//! the OCM API documents.

use crate::common;

use std::time::Duration;

use common::{TestPlane, api_error};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

fn condition_schema() -> Value {
    json!({"type": "array",
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "items": {"type": "object", "required": ["type", "status"], "properties": {
            "type": {"type": "string"}, "status": {"type": "string"},
            "reason": {"type": "string"}, "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"}}}})
}

fn managed_cluster_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "managedclusters.cluster.open-cluster-management.io"},
        "spec": {
            "group": "cluster.open-cluster-management.io",
            "scope": "Cluster",
            "names": {"plural": "managedclusters", "singular": "managedcluster",
                "kind": "ManagedCluster", "shortNames": ["mcl"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Hub Accepted", "type": "boolean", "jsonPath": ".spec.hubAcceptsClient"},
                    {"name": "Joined", "type": "string",
                     "jsonPath": ".status.conditions[?(@.type==\"ManagedClusterJoined\")].status"},
                    {"name": "Available", "type": "string",
                     "jsonPath": ".status.conditions[?(@.type==\"ManagedClusterConditionAvailable\")].status"}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "hubAcceptsClient": {"type": "boolean"},
                        "leaseDurationSeconds": {"type": "integer", "format": "int32", "default": 60},
                        "clusterSets": {"type": "array", "items": {"type": "string"},
                            "x-kubernetes-list-type": "set"},
                        "taints": {"type": "array", "items": {"type": "object",
                            "required": ["key", "effect"], "properties": {
                                "key": {"type": "string"}, "value": {"type": "string"},
                                "effect": {"type": "string"}}},
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["key", "effect"]}}},
                    "status": {"type": "object", "properties": {
                        "conditions": condition_schema()}}}}}}]
        }
    })
}

/// A ManifestWork-shaped CRD.
fn manifest_work_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "manifestworks.work.open-cluster-management.io"},
        "spec": {
            "group": "work.open-cluster-management.io",
            "scope": "Namespaced",
            "names": {"plural": "manifestworks", "singular": "manifestwork",
                "kind": "ManifestWork", "shortNames": ["mw"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": work_spec_schema(),
                    "status": {"type": "object", "properties": {
                        "conditions": condition_schema()}}}}}}]
        }
    })
}

/// ManifestWork's spec: its condition rules carry the rule upstream's CRD carries, and a few
/// more rules exercise the rest of `x-kubernetes-validations`.
fn work_spec_schema() -> Value {
    json!({"type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "!has(self.executor) || self.executor.size() <= 3",
                             "messageExpression": "'at most 3 executor entries, got ' + string(self.executor.size())",
                             "fieldPath": ".executor"},
                            {"rule": "!has(oldSelf.deleteOption) || has(self.deleteOption)",
                             "message": "deleteOption may not be removed", "reason": "FieldValueForbidden"}],
                        "properties": {
                        "deleteOption": {"type": "object", "properties": {
                            "propagationPolicy": {"type": "string",
                                "x-kubernetes-validations": [{"rule": "self == oldSelf",
                                    "message": "propagationPolicy is immutable"}]}}},
                        "executor": {"type": "array", "items": {"type": "string"}},
                        "numbers": {"type": "array", "items": {"type": "integer"}},
                        "manifestConfigs": {"type": "array", "items": {"type": "object",
                            "properties": {
                                "resourceIdentifier": {"type": "object", "properties": {
                                    "group": {"type": "string"}, "resource": {"type": "string"},
                                    "name": {"type": "string"}, "namespace": {"type": "string"}}},
                                "conditionRules": {"type": "array",
                                    "x-kubernetes-list-type": "map",
                                    "x-kubernetes-list-map-keys": ["condition"],
                                    "items": {"type": "object", "required": ["condition", "type"],
                                        "x-kubernetes-validations": [
                                            {"rule": "self.type != 'CEL' || self.condition != \"\"",
                                             "message": "Condition is required for CEL rules"}],
                                        "properties": {
                                            "condition": {"type": "string"},
                                            "type": {"type": "string", "enum": ["WellKnownConditions", "CEL"]},
                                            "celExpressions": {"type": "array", "items": {"type": "string"}},
                                            "message": {"type": "string"}}}}}}}}})
}

async fn install(t: &TestPlane, crd: Value) {
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    let name = crd.metadata.name.clone().unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = await_condition(crds, &name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .unwrap()
        .unwrap();
}

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

async fn managed_clusters(t: &TestPlane) -> Api<DynamicObject> {
    install(t, managed_cluster_crd()).await;
    let ar = resource(
        "cluster.open-cluster-management.io",
        "ManagedCluster",
        "managedclusters",
    );
    Api::all_with(t.client.clone(), &ar)
}

async fn manifest_works(t: &TestPlane) -> Api<DynamicObject> {
    install(t, manifest_work_crd()).await;
    let ar = resource(
        "work.open-cluster-management.io",
        "ManifestWork",
        "manifestworks",
    );
    Api::namespaced_with(t.client.clone(), "default", &ar)
}

fn object(api_version: &str, kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

fn cluster(name: &str, spec: Value) -> DynamicObject {
    object(
        "cluster.open-cluster-management.io/v1",
        "ManagedCluster",
        name,
        spec,
    )
}

fn work(name: &str, spec: Value) -> DynamicObject {
    object(
        "work.open-cluster-management.io/v1",
        "ManifestWork",
        name,
        spec,
    )
}

fn joined(status: &str) -> Value {
    json!({"type": "ManagedClusterJoined", "status": status, "reason": "ManagedClusterJoined",
        "message": "joined", "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

/// An Invalid status's causes as `field: message`, the form kube-apiserver's own message
/// lists them in.
fn causes(s: &kube::core::Status) -> Vec<String> {
    s.details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn list_map_refuses_two_entries_with_the_same_key() {
    let t = TestPlane::start().await;
    let mcs = managed_clusters(&t).await;
    mcs.create(
        &PostParams::default(),
        &cluster("c1", json!({"hubAcceptsClient": true})),
    )
    .await
    .unwrap();
    let status = json!({"status": {"conditions": [joined("True"), joined("False")]}});
    let s = api_error(
        mcs.patch_status("c1", &PatchParams::default(), &Patch::Merge(&status))
            .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    assert_eq!(
        causes(&s),
        ["status.conditions[1]: Duplicate value: {\"type\":\"ManagedClusterJoined\"}"],
        "{s:?}"
    );
    // Two keys: the same key with another effect is a different entry.
    let taints = json!({"hubAcceptsClient": true, "taints": [
        {"key": "k", "effect": "NoSelect"}, {"key": "k", "effect": "PreferNoSelect"},
        {"key": "k", "effect": "NoSelect", "value": "v"}]});
    let s = api_error(
        mcs.create(&PostParams::default(), &cluster("c2", taints))
            .await,
    );
    assert_eq!(
        causes(&s),
        ["spec.taints[2]: Duplicate value: {\"effect\":\"NoSelect\",\"key\":\"k\"}"]
    );
    // Distinct keys are fine.
    let status = json!({"status": {"conditions": [joined("True"),
        {"type": "ManagedClusterConditionAvailable", "status": "True"}]}});
    mcs.patch_status("c1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

#[tokio::test]
async fn list_set_refuses_duplicate_items() {
    let t = TestPlane::start().await;
    let mcs = managed_clusters(&t).await;
    let s = api_error(
        mcs.create(
            &PostParams::default(),
            &cluster("c1", json!({"clusterSets": ["a", "b", "a", "a"]})),
        )
        .await,
    );
    assert_eq!(s.code, 422);
    assert_eq!(causes(&s), ["spec.clusterSets[2]: Duplicate value: \"a\""]);
}

#[tokio::test]
async fn cel_rule_refuses_an_object_with_the_rules_message() {
    let t = TestPlane::start().await;
    let works = manifest_works(&t).await;
    let bad = json!({"manifestConfigs": [{"resourceIdentifier": {"resource": "deployments",
        "name": "web", "namespace": "default"},
        "conditionRules": [{"condition": "", "type": "CEL", "celExpressions": ["true"]}]}]});
    let s = api_error(works.create(&PostParams::default(), &work("w1", bad)).await);
    assert_eq!(s.code, 422, "{s:?}");
    assert_eq!(
        causes(&s),
        [
            "spec.manifestConfigs[0].conditionRules[0]: Invalid value: Condition is required for CEL rules"
        ]
    );
    assert!(
        s.message.contains("Condition is required for CEL rules"),
        "{}",
        s.message
    );
    let good = json!({"manifestConfigs": [{"resourceIdentifier": {"resource": "deployments",
        "name": "web", "namespace": "default"},
        "conditionRules": [{"condition": "Complete", "type": "CEL", "celExpressions": ["true"]},
                           {"condition": "", "type": "WellKnownConditions"}]}]});
    works
        .create(&PostParams::default(), &work("w1", good))
        .await
        .unwrap();
    // The same rule holds for patches and server-side apply.
    let patch = json!({"spec": {"manifestConfigs": [{"conditionRules": [
        {"condition": "", "type": "CEL"}]}]}});
    let s = api_error(
        works
            .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(s.code, 422);
    let applied = json!({"apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork", "metadata": {"name": "w1"}, "spec": patch["spec"]});
    let s = api_error(
        works
            .patch(
                "w1",
                &PatchParams::apply("test").force(),
                &Patch::Apply(&applied),
            )
            .await,
    );
    assert_eq!(s.code, 422);
}

#[tokio::test]
async fn cel_message_expression_field_path_and_reason_word_the_error() {
    let t = TestPlane::start().await;
    let works = manifest_works(&t).await;
    let s = api_error(
        works
            .create(
                &PostParams::default(),
                &work("w1", json!({"executor": ["a", "b", "c", "d"]})),
            )
            .await,
    );
    assert_eq!(
        causes(&s),
        ["spec.executor: Invalid value: at most 3 executor entries, got 4"]
    );
    works
        .create(
            &PostParams::default(),
            &work(
                "w1",
                json!({"deleteOption": {"propagationPolicy": "Foreground"}}),
            ),
        )
        .await
        .unwrap();
    // Transition rules see oldSelf on update only; removing deleteOption is Forbidden.
    let remove = json!({"spec": {"deleteOption": null}});
    let s = api_error(
        works
            .patch("w1", &PatchParams::default(), &Patch::Merge(&remove))
            .await,
    );
    assert_eq!(
        causes(&s),
        ["spec: Forbidden: deleteOption may not be removed"]
    );
    let change = json!({"spec": {"deleteOption": {"propagationPolicy": "Orphan"}}});
    let s = api_error(
        works
            .patch("w1", &PatchParams::default(), &Patch::Merge(&change))
            .await,
    );
    assert_eq!(
        causes(&s),
        [
            "spec.deleteOption.propagationPolicy: Invalid value: \"Orphan\": propagationPolicy is immutable"
        ]
    );
}

#[tokio::test]
async fn crd_with_a_rule_that_does_not_compile_is_refused() {
    let t = TestPlane::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    for (rule, why) in [
        ("self.type != ", "Syntax error"),
        (
            "self.noSuchFunction()",
            "undeclared reference to 'noSuchFunction'",
        ),
        ("other.type == 'CEL'", "undeclared reference to 'other'"),
    ] {
        let mut crd = manifest_work_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
            json!([{"rule": rule}]);
        let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
        let s = api_error(crds.create(&PostParams::default(), &crd).await);
        assert_eq!(s.code, 422, "{rule}: {s:?}");
        let c = causes(&s);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(
            c[0].starts_with(
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
            ) && c[0].contains("compilation failed")
                && c[0].contains(why),
            "{rule}: {c:?}"
        );
    }
}

#[tokio::test]
async fn cel_evaluation_cost_is_bounded() {
    let t = TestPlane::start().await;
    let mut crd = manifest_work_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = json!([{"rule": "!has(self.numbers) || self.numbers.all(x, self.numbers.all(y, self.numbers.all(z, x + y + z >= 0)))"}]);
    install(&t, crd).await;
    let ar = resource(
        "work.open-cluster-management.io",
        "ManifestWork",
        "manifestworks",
    );
    let works: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &ar);
    works
        .create(
            &PostParams::default(),
            &work("small", json!({"numbers": [1, 2, 3]})),
        )
        .await
        .unwrap();
    let numbers: Vec<i64> = (0..1000).collect();
    let s = api_error(
        works
            .create(
                &PostParams::default(),
                &work("big", json!({"numbers": numbers})),
            )
            .await,
    );
    assert_eq!(s.code, 422);
    let c = causes(&s);
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(
        c[0].starts_with("spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: "),
        "{c:?}"
    );
}

#[tokio::test]
async fn printer_columns_with_jsonpath_filters_render_the_matching_condition() {
    let t = TestPlane::start().await;
    let mcs = managed_clusters(&t).await;
    mcs.create(
        &PostParams::default(),
        &cluster("c1", json!({"hubAcceptsClient": true})),
    )
    .await
    .unwrap();
    let status = json!({"status": {"conditions": [joined("True"),
        {"type": "ManagedClusterConditionAvailable", "status": "Unknown"}]}});
    mcs.patch_status("c1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let req = http::Request::get("/apis/cluster.open-cluster-management.io/v1/managedclusters")
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = t.client.request(req).await.unwrap();
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["c1", true, "True", "Unknown", table["rows"][0]["cells"][4]])
    );
}
