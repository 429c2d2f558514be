//! Object semantics through kube-rs: CRUD, Status errors, optimistic concurrency, generation,
//! status subresource, finalizers, preconditions, selectors, pagination, namespaces, garbage
//! collection, CSR approval, patches and dry-run.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;

use common::{TestPlane, api_error};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use serde_json::json;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
        "data": {"k": "v"}
    }))
    .unwrap()
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn crud_round_trip_sets_server_metadata() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let created = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.uid.as_ref().unwrap().len(), 36);
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    let rv1: i64 = meta.resource_version.as_ref().unwrap().parse().unwrap();

    let mut got = api.get("a").await.unwrap();
    assert_eq!(got.metadata.uid, meta.uid);
    got.data.as_mut().unwrap().insert("k".into(), "w".into());
    let updated = api
        .replace("a", &PostParams::default(), &got)
        .await
        .unwrap();
    let rv2: i64 = updated.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv2 > rv1);
    assert_eq!(updated.data.unwrap()["k"], "w");

    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(
        names,
        ["a", "kube-root-ca.crt"],
        "beside the published root CA"
    );
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(api.get("a").await).code, 404);
}

#[tokio::test]
async fn errors_are_status_bodies_like_kube_apiserver() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let missing = api_error(api.get("nope").await);
    assert_eq!(missing.reason, "NotFound");
    assert_eq!(missing.message, "configmaps \"nope\" not found");
    let details = missing.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("nope", "configmaps")
    );

    api.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let dup = api_error(api.create(&PostParams::default(), &cm("a", &[])).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(dup.message, "configmaps \"a\" already exists");

    let deps: Api<Deployment> = Api::default_namespaced(t.client.clone());
    let missing = api_error(deps.get("web").await);
    assert_eq!(missing.message, "deployments.apps \"web\" not found");
    assert_eq!(missing.details.unwrap().group, "apps");

    let bad = api_error(
        api.create(&PostParams::default(), &cm("Bad_Name", &[]))
            .await,
    );
    assert_eq!((bad.code, bad.reason.as_str()), (422, "Invalid"));
    assert!(
        bad.message.starts_with(
            "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""
        ),
        "{}",
        bad.message
    );

    let mut stale = cm("b", &[]);
    stale.metadata.resource_version = Some("5".into());
    let err = api_error(api.create(&PostParams::default(), &stale).await);
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            400,
            "resourceVersion should not be set on objects to be created"
        )
    );
}

#[tokio::test]
async fn stale_resource_version_is_a_conflict() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let first = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let mut second = first.clone();
    api.replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut changed = first.clone();
    changed.data = Some([("x".to_string(), "y".to_string())].into());
    api.replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    second.data = Some([("z".to_string(), "z".to_string())].into());
    let err = api_error(api.replace("a", &PostParams::default(), &second).await);
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
}

#[tokio::test]
async fn generation_bumps_on_spec_changes_only_and_status_is_separate() {
    let t = TestPlane::start().await;
    let api: Api<Deployment> = Api::default_namespaced(t.client.clone());
    let d = api
        .create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    // Its Go type always writes a status, empty until the deployment controller's first.
    assert_eq!(
        d.status,
        Some(Default::default()),
        "kube-apiserver serves a new Deployment's status as {{}}"
    );
    let pp = PatchParams::default();
    let labelled = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let scaled = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    // The deployment controller writes the status it sees (it may already have), never the
    // patch's.
    assert_ne!(
        scaled.status.and_then(|s| s.replicas),
        Some(9),
        "status ignored on the main resource"
    );
    let status = api
        .patch_status(
            "web",
            &pp,
            &Patch::Merge(json!({"status": {"readyReplicas": 3}, "spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(status.status.unwrap().ready_replicas, Some(3));
    assert_eq!(
        status.spec.unwrap().replicas,
        Some(3),
        "spec ignored on /status"
    );
    assert_eq!(status.metadata.generation, Some(2));
}

#[tokio::test]
async fn finalizers_hold_deletion_until_the_last_is_removed() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let mut c = cm("f", &[]);
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    let deleted = api.delete("f", &DeleteParams::default()).await.unwrap();
    let marked = deleted
        .left()
        .expect("object returned while finalizers remain");
    assert!(marked.metadata.deletion_timestamp.is_some());
    let adding = api
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
            ),
        )
        .await;
    let err = api_error(adding);
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        err.message
    );
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(api.get("f").await).code, 404);
}

#[tokio::test]
async fn delete_preconditions_are_enforced() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let c = api
        .create(&PostParams::default(), &cm("p", &[]))
        .await
        .unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("00000000-0000-0000-0000-000000000000".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = api_error(api.delete("p", &wrong).await);
    assert_eq!(err.code, 409);
    assert_eq!(
        err.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"p\": the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record ({}). The object might have been deleted and then recreated",
            c.metadata.uid.as_deref().unwrap()
        )
    );
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: c.metadata.uid.clone(),
            resource_version: c.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    api.delete("p", &right).await.unwrap();
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for (n, tier) in [("a", "front"), ("b", "back"), ("c", "front")] {
        api.create(
            &PostParams::default(),
            &cm(n, &[("tier", tier), ("app", "x")]),
        )
        .await
        .unwrap();
    }
    api.create(&PostParams::default(), &cm("d", &[]))
        .await
        .unwrap();
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect()
    };
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(names(api.list(&q("tier=front")).await.unwrap()), ["a", "c"]);
    assert_eq!(names(api.list(&q("tier==back")).await.unwrap()), ["b"]);
    assert_eq!(
        names(api.list(&q("tier!=front")).await.unwrap()),
        ["b", "d", "kube-root-ca.crt"],
        "objects without the label match a != selector"
    );
    assert_eq!(
        names(api.list(&q("tier in (back,none)")).await.unwrap()),
        ["b"]
    );
    assert_eq!(
        names(api.list(&q("tier notin (front)")).await.unwrap()),
        ["b", "d", "kube-root-ca.crt"]
    );
    assert_eq!(names(api.list(&q("app")).await.unwrap()), ["a", "b", "c"]);
    assert_eq!(
        names(api.list(&q("!app")).await.unwrap()),
        ["d", "kube-root-ca.crt"]
    );
    let f = ListParams::default().fields("metadata.name=c");
    assert_eq!(names(api.list(&f).await.unwrap()), ["c"]);
    let f = ListParams::default().fields("metadata.namespace!=default");
    assert!(names(api.list(&f).await.unwrap()).is_empty());
    let bad = api_error(api.list(&ListParams::default().fields("data.k=v")).await);
    assert_eq!(bad.code, 400);
}

#[tokio::test]
async fn csr_field_selector_on_signer_name() {
    let t = TestPlane::start().await;
    let api: Api<CertificateSigningRequest> = Api::all(t.client.clone());
    for (n, signer) in [
        ("one", "example.com/a"),
        ("two", "kubernetes.io/kube-apiserver-client"),
    ] {
        let csr: CertificateSigningRequest = serde_json::from_value(json!({
            "metadata": {"name": n},
            "spec": {"request": common::csr_request(n), "signerName": signer, "usages": ["client auth"]}
        }))
        .unwrap();
        api.create(&PostParams::default(), &csr).await.unwrap();
    }
    let l = api
        .list(&ListParams::default().fields("spec.signerName=example.com/a"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].metadata.name.as_deref(), Some("one"));
}

#[tokio::test]
async fn lists_paginate_with_limit_and_continue() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3);
    loop {
        let page = api.list(&lp).await.unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    let mut expected: Vec<String> = (0..7).map(|i| format!("c{i}")).collect();
    expected.push("kube-root-ca.crt".into());
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn generate_name_and_dry_run() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let mut c = cm("", &[]);
    c.metadata.name = None;
    c.metadata.generate_name = Some("gen-".into());
    let dry = api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &c,
        )
        .await
        .unwrap();
    assert!(dry.metadata.name.as_ref().unwrap().starts_with("gen-"));
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .all(|c| !c.metadata.name.as_deref().unwrap_or("").starts_with("gen-")),
        "a dry run stores nothing"
    );
    let real = api.create(&PostParams::default(), &c).await.unwrap();
    let name = real.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    api.delete(
        &name,
        &DeleteParams {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(api.get(&name).await.is_ok());
}

#[tokio::test]
async fn namespaces_must_exist_and_deletion_removes_contents() {
    let t = TestPlane::start().await;
    let in_missing: Api<ConfigMap> = Api::namespaced(t.client.clone(), "missing");
    let err = api_error(
        in_missing
            .create(&PostParams::default(), &cm("a", &[]))
            .await,
    );
    assert_eq!(err.code, 404);
    assert_eq!(err.message, "namespaces \"missing\" not found");

    let nss: Api<Namespace> = Api::all(t.client.clone());
    let ns_uid = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let team: Api<ConfigMap> = Api::namespaced(t.client.clone(), "team");
    let mut held = cm("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    team.create(&PostParams::default(), &held).await.unwrap();
    let plain_uid = team
        .create(&PostParams::default(), &cm("plain", &[]))
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    let ns = nss.get("team").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let refused = api_error(team.create(&PostParams::default(), &cm("new", &[])).await);
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert!(
        refused.message.contains("because it is being terminated"),
        "{}",
        refused.message
    );

    let w = kube::runtime::wait::await_condition(
        team.clone(),
        "plain",
        kube::runtime::wait::conditions::is_deleted(&plain_uid),
    );
    tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    team.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let gone = kube::runtime::wait::await_condition(
        nss.clone(),
        "team",
        kube::runtime::wait::conditions::is_deleted(&ns_uid),
    );
    tokio::time::timeout(Duration::from_secs(10), gone)
        .await
        .unwrap()
        .unwrap();
}

fn owned_cm(name: &str, owner: &ConfigMap) -> ConfigMap {
    let mut c = cm(name, &[]);
    c.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.metadata.name.clone().unwrap(),
            uid: owner.metadata.uid.clone().unwrap(),
            block_owner_deletion: Some(true),
            controller: None,
        },
    ]);
    c
}

async fn within<F: std::future::Future>(f: F) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(10), f).await
}

/// A control plane's own controllers that fall behind more than their backlog resync from a
/// full list: with a backlog of one event, owners deleted at once still take every dependent.
#[tokio::test]
async fn garbage_collection_catches_up_past_a_tiny_backlog() {
    use kube::runtime::wait::{await_condition, conditions::is_deleted};
    let t = TestPlane::with(fleetform_controlplane::ControlPlane::builder().controller_backlog(1))
        .await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let mut children = Vec::new();
    for i in 0..20 {
        let owner = api
            .create(&PostParams::default(), &cm(&format!("owner-{i}"), &[]))
            .await
            .unwrap();
        let child = api
            .create(
                &PostParams::default(),
                &owned_cm(&format!("child-{i}"), &owner),
            )
            .await
            .unwrap();
        children.push(child);
    }
    futures::future::try_join_all((0..20).map(|i| {
        let api = api.clone();
        async move {
            api.delete(&format!("owner-{i}"), &DeleteParams::background())
                .await
        }
    }))
    .await
    .unwrap();
    for child in children {
        let name = child.metadata.name.clone().unwrap();
        let uid = child.metadata.uid.clone().unwrap();
        within(await_condition(api.clone(), &name, is_deleted(&uid)))
            .await
            .unwrap_or_else(|_| panic!("{name} collected"))
            .unwrap();
    }
}

#[tokio::test]
async fn garbage_collection_follows_owner_references() {
    use kube::runtime::wait::{await_condition, conditions::is_deleted};
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());

    let owner = api
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .unwrap();
    let child = api
        .create(&PostParams::default(), &owned_cm("child", &owner))
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    within(await_condition(
        api.clone(),
        "child",
        is_deleted(child.metadata.uid.as_deref().unwrap()),
    ))
    .await
    .unwrap()
    .unwrap();

    let owner = api
        .create(&PostParams::default(), &cm("fg", &[]))
        .await
        .unwrap();
    let mut child = owned_cm("fg-child", &owner);
    child.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &child).await.unwrap();
    let deleted = api.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let marked = deleted.left().unwrap();
    assert!(
        marked
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    let child_now = within(await_condition(
        api.clone(),
        "fg-child",
        |c: Option<&ConfigMap>| c.is_some_and(|c| c.metadata.deletion_timestamp.is_some()),
    ))
    .await
    .unwrap()
    .unwrap();
    assert!(child_now.is_some());
    assert!(
        api.get("fg").await.is_ok(),
        "owner waits for its dependents"
    );
    api.patch(
        "fg-child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    within(await_condition(
        api.clone(),
        "fg",
        is_deleted(owner.metadata.uid.as_deref().unwrap()),
    ))
    .await
    .unwrap()
    .unwrap();

    let owner = api
        .create(&PostParams::default(), &cm("orph", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned_cm("orph-child", &owner))
        .await
        .unwrap();
    api.delete(
        "orph",
        &DeleteParams {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    within(await_condition(
        api.clone(),
        "orph",
        is_deleted(owner.metadata.uid.as_deref().unwrap()),
    ))
    .await
    .unwrap()
    .unwrap();
    let orphan = api.get("orph-child").await.unwrap();
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn csr_approval_and_status_subresources() {
    let t = TestPlane::start().await;
    let api: Api<CertificateSigningRequest> = Api::all(t.client.clone());
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"generateName": "spoke-"},
        // A signer the control plane does not own, so this test plays the signer.
        "spec": {"request": common::csr_request("spoke"), "signerName": "example.com/signer", "usages": ["client auth"]}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &csr).await.unwrap();
    let spec = created.spec.clone();
    assert_eq!(
        spec.username.as_deref(),
        Some("system:admin"),
        "the requester is recorded"
    );
    assert!(
        spec.groups
            .unwrap()
            .contains(&"system:authenticated".to_string())
    );
    let name = created.metadata.name.unwrap();
    let approved = api
        .patch_approval(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]}})),
        )
        .await
        .unwrap();
    assert_eq!(
        approved.status.unwrap().conditions.unwrap()[0].type_,
        "Approved"
    );
    let certificate = common::certificate_pem("spoke");
    let issued = api
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"certificate": base64::engine::general_purpose::STANDARD.encode(&certificate)}})),
        )
        .await
        .unwrap();
    let status = issued.status.unwrap();
    assert_eq!(status.certificate.unwrap().0, certificate.as_bytes());
    assert_eq!(status.conditions.unwrap().len(), 1);
}

#[tokio::test]
async fn json_merge_and_strategic_patches() {
    let t = TestPlane::start().await;
    let api: Api<Deployment> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    let pp = PatchParams::default();
    let smp = api
        .patch(
            "web",
            &pp,
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
            {"name": "sidecar", "image": "busybox"}]}}}})),
        )
        .await
        .unwrap();
    let containers = smp.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(
        containers.len(),
        2,
        "strategic merge keeps containers by name"
    );
    let merged = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata.annotations.unwrap()["a"], "b");
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/replicas", "value": 4}
    ]))
    .unwrap();
    let jp = api
        .patch("web", &pp, &Patch::Json::<()>(ops))
        .await
        .unwrap();
    assert_eq!(jp.spec.unwrap().replicas, Some(4));
    let secrets: Api<Secret> = Api::default_namespaced(t.client.clone());
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"token": "abc"}}))
            .unwrap();
    let s = secrets.create(&PostParams::default(), &s).await.unwrap();
    assert_eq!(s.data.unwrap()["token"].0, b"abc");
}

#[tokio::test]
async fn deployment_scale_subresource_reads_and_writes_replicas() {
    let t = TestPlane::start().await;
    let api: Api<Deployment> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    let scaled = api
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(4));
    let d = api.get("web").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(4));
    assert_eq!(d.metadata.generation, Some(2));
    let bad = api_error(
        api.patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await,
    );
    assert_eq!(bad.code, 422);
}

#[tokio::test]
async fn discovery_legacy_and_aggregated_agree() {
    use kube::discovery::{Discovery, Scope};
    let t = TestPlane::start().await;
    let legacy = Discovery::new(t.client.clone()).run().await.unwrap();
    let aggregated = Discovery::new(t.client.clone())
        .run_aggregated()
        .await
        .unwrap();
    for d in [&legacy, &aggregated] {
        let apps = d.get("apps").expect("apps group");
        let (ar, caps) = apps.recommended_kind("Deployment").expect("deployments");
        assert_eq!(ar.plural, "deployments");
        assert_eq!(caps.scope, Scope::Namespaced);
        assert!(
            caps.subresources
                .iter()
                .any(|(s, _)| s.plural == "deployments/status" || s.plural == "status")
        );
        let core = d.get("").expect("core group");
        assert!(core.recommended_kind("ConfigMap").is_some());
        let csr = d
            .get("certificates.k8s.io")
            .unwrap()
            .recommended_kind("CertificateSigningRequest")
            .unwrap();
        assert_eq!(csr.1.scope, Scope::Cluster);
    }
}

#[tokio::test]
async fn later_pages_show_the_list_as_of_the_first_page() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for i in 0..6 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    api.delete("c3", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("c2a", &[]))
        .await
        .unwrap();
    api.patch(
        "c4",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await
    .unwrap();
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(2).continue_token(&token);
    loop {
        let page = api.list(&lp).await.unwrap();
        assert_eq!(
            page.metadata.resource_version,
            first.metadata.resource_version
        );
        for c in page.items {
            if c.metadata.name.as_deref() == Some("c4") {
                assert_eq!(c.data.as_ref().unwrap()["k"], "v", "c4 as it was");
            }
            names.push(c.metadata.name.unwrap());
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(names, ["c2", "c3", "c4", "c5", "kube-root-ca.crt"]);
}

#[tokio::test]
async fn a_continue_token_past_the_history_window_is_expired() {
    let clock = common::ManualClock::new();
    let t = TestPlane::with(
        fleetform_controlplane::ControlPlane::builder()
            .history_window(Duration::from_secs(75))
            .history_clock(clock.clone()),
    )
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(1)).await.unwrap();
    // Each write comes more than the window after the one before, which it pushes out.
    for i in 3..6 {
        clock.advance(Duration::from_secs(76));
        api.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let token = first.metadata.continue_.unwrap();
    let err = api_error(
        api.list(&ListParams::default().limit(1).continue_token(&token))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (410, "Expired"));
}
