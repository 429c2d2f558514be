//! The control plane's own controllers as a client meets them: a namespace's termination (its
//! `kubernetes` finalizer, the Terminating phase and the namespace controller's conditions, new
//! content refused, the content deleted with its finalizers honoured, gone once empty), every
//! namespace's `default` ServiceAccount and `kube-root-ca.crt`, and the garbage collector's
//! handling of ownerReferences (dangling owners, orphaning, foreground, validation).

use crate::common;

use std::time::Duration;

use common::{TestPlane, api_error};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions::is_deleted};
use serde_json::{Value, json};

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what}"))
}

/// Waits until `name` is gone.
async fn gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    within(what, async {
        while api.get_opt(name).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

async fn namespace(t: &TestPlane, name: &str, spec_finalizers: &[&str]) -> Namespace {
    let nss: Api<Namespace> = Api::all(t.client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"finalizers": spec_finalizers}}),
        )
        .unwrap(),
    )
    .await
    .unwrap()
}

fn held_cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "finalizers": ["example.com/hold"]}, "data": {"k": "v"}}),
    )
    .unwrap()
}

fn condition<'a>(ns: &'a Value, kind: &str) -> Option<&'a Value> {
    ns.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

#[tokio::test]
async fn a_namespace_terminates_as_on_kube_apiserver() {
    let t = TestPlane::start().await;
    let created = namespace(&t, "team", &["example.com/keep"]).await;
    assert_eq!(
        created.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        "team"
    );
    assert_eq!(
        created.spec.unwrap().finalizers.unwrap(),
        ["example.com/keep", "kubernetes"],
        "the client's finalizers are kept, `kubernetes` added"
    );
    let team: Api<ConfigMap> = Api::namespaced(t.client.clone(), "team");
    team.create(&PostParams::default(), &held_cm("held"))
        .await
        .unwrap();
    team.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "plain"}})).unwrap(),
    )
    .await
    .unwrap();

    let nss: Api<Namespace> = Api::all(t.client.clone());
    let answer = nss.delete("team", &DeleteParams::default()).await.unwrap();
    let deleting = answer.left().expect("the DELETE answers the Namespace");
    assert_eq!(
        deleting.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, None);

    // kube-controller-manager first looks at a terminating namespace 5 s after it saw it: until
    // then it has no conditions and its content is still there.
    let raw: Api<kube::core::DynamicObject> = Api::all_with(
        t.client.clone(),
        &kube::discovery::ApiResource::erase::<Namespace>(&()),
    );
    let now = serde_json::to_value(raw.get("team").await.unwrap()).unwrap();
    assert_eq!(now.pointer("/status/conditions"), None);
    assert!(team.get("plain").await.is_ok());

    let refused = api_error(
        team.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "late"}})).unwrap(),
        )
        .await,
    );
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated"
    );
    let cause = &refused.details.unwrap().causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str()),
        ("NamespaceTerminating", "metadata.namespace")
    );

    let reported = within("the controller reports what remains", async {
        loop {
            let ns = serde_json::to_value(raw.get("team").await.unwrap()).unwrap();
            if condition(&ns, "NamespaceFinalizersRemaining").is_some_and(|c| c["status"] == "True")
            {
                return ns;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let remaining = condition(&reported, "NamespaceContentRemaining").unwrap();
    assert_eq!(remaining["reason"], "SomeResourcesRemain");
    assert_eq!(
        remaining["message"],
        "Some resources are remaining: configmaps. has 1 resource instances"
    );
    assert_eq!(
        condition(&reported, "NamespaceFinalizersRemaining").unwrap()["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    assert_eq!(
        api_error(team.get("plain").await).code,
        404,
        "the controller deleted the content"
    );
    let held = team.get("held").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "deleted, held by its finalizer"
    );

    team.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    // Empty now: the controller removes its own finalizer through /finalize, and the
    // namespace waits for the client's.
    let finalized = within("the kubernetes finalizer goes", async {
        loop {
            let ns = nss.get("team").await.unwrap();
            if ns
                .spec
                .as_ref()
                .and_then(|s| s.finalizers.clone())
                .unwrap_or_default()
                == ["example.com/keep"]
            {
                return ns;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let ns = serde_json::to_value(&finalized).unwrap();
    assert_eq!(
        condition(&ns, "NamespaceContentRemaining").unwrap()["reason"],
        "ContentRemoved"
    );
    let mut released = finalized;
    released.spec = Some(Default::default());
    let body = serde_json::to_vec(&released).unwrap();
    t.client
        .request::<Namespace>(
            http::Request::put("/api/v1/namespaces/team/finalize")
                .header("Content-Type", "application/json")
                .body(body)
                .unwrap(),
        )
        .await
        .unwrap();
    gone(&nss, "team", "the namespace goes").await;
}

#[tokio::test]
async fn an_empty_namespace_goes_and_deleting_it_again_is_not_found() {
    let t = TestPlane::start().await;
    namespace(&t, "empty", &[]).await;
    let nss: Api<Namespace> = Api::all(t.client.clone());
    let again = nss.delete("empty", &DeleteParams::default()).await.unwrap();
    assert!(again.is_left(), "the DELETE answers the Namespace");
    let twice = nss.delete("empty", &DeleteParams::default()).await.unwrap();
    assert!(
        twice.left().unwrap().metadata.deletion_timestamp.is_some(),
        "a second DELETE of a terminating namespace answers it unchanged"
    );
    gone(&nss, "empty", "the namespace goes").await;
    assert_eq!(
        api_error(nss.delete("empty", &DeleteParams::default()).await).code,
        404
    );
}

#[tokio::test]
async fn the_system_namespaces_may_not_be_deleted() {
    let t = TestPlane::start().await;
    let nss: Api<Namespace> = Api::all(t.client.clone());
    let refused = api_error(nss.delete("kube-system", &DeleteParams::default()).await);
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "namespaces \"kube-system\" is forbidden: this namespace may not be deleted"
    );
}

#[tokio::test]
async fn every_namespace_gets_its_default_service_account_and_the_root_ca() {
    let t = TestPlane::start().await;
    let ca = t
        .plane
        .certificate_authority()
        .expect("a secure control plane")
        .cert_pem()
        .to_string();
    // The system namespaces have them from the start.
    let default_cms: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let published = default_cms.get("kube-root-ca.crt").await.unwrap();
    assert_eq!(published.data.unwrap()["ca.crt"], ca);
    assert!(
        published.metadata.annotations.unwrap()["kubernetes.io/description"]
            .starts_with("Contains a CA bundle")
    );
    let default_sas: Api<ServiceAccount> = Api::default_namespaced(t.client.clone());
    default_sas.get("default").await.unwrap();

    namespace(&t, "fresh", &[]).await;
    let sas: Api<ServiceAccount> = Api::namespaced(t.client.clone(), "fresh");
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "fresh");
    within("the default ServiceAccount is made", async {
        while sas.get("default").await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    within("the root CA is published", async {
        while cms.get("kube-root-ca.crt").await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;

    // Deleted or changed, they are put back.
    sas.delete("default", &DeleteParams::default())
        .await
        .unwrap();
    cms.patch(
        "kube-root-ca.crt",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"ca.crt": "tampered"}})),
    )
    .await
    .unwrap();
    within("the ServiceAccount is made again", async {
        while sas.get("default").await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    within("the root CA is put back", async {
        loop {
            if cms.get("kube-root-ca.crt").await.unwrap().data.unwrap()["ca.crt"] == ca {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

fn cm(name: &str, owners: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": owners}})).unwrap()
}

fn owner_ref(owner: &ConfigMap, block: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
        "uid": owner.metadata.uid, "blockOwnerDeletion": block})
}

#[tokio::test]
async fn an_object_whose_owner_is_already_gone_is_collected() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let owner = api
        .create(&PostParams::default(), &cm("owner", json!([])))
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    let dangling = api
        .create(
            &PostParams::default(),
            &cm("dangling", json!([owner_ref(&owner, false)])),
        )
        .await
        .unwrap();
    within(
        "the dependent of a gone owner is collected",
        await_condition(
            api.clone(),
            "dangling",
            is_deleted(dangling.metadata.uid.as_deref().unwrap()),
        ),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn orphaning_removes_the_reference_and_a_live_owner_keeps_its_dependent() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let a = api
        .create(&PostParams::default(), &cm("a", json!([])))
        .await
        .unwrap();
    let b = api
        .create(&PostParams::default(), &cm("b", json!([])))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &cm("orphan", json!([owner_ref(&a, false)])),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &cm(
            "shared",
            json!([owner_ref(&a, false), owner_ref(&b, false)]),
        ),
    )
    .await
    .unwrap();
    api.delete("a", &DeleteParams::orphan()).await.unwrap();
    gone(&api, "a", "the owner goes").await;
    let orphan = api.get("orphan").await.unwrap();
    assert_eq!(
        orphan.metadata.owner_references, None,
        "no empty list left behind"
    );
    api.delete("b", &DeleteParams::background()).await.unwrap();
    gone(&api, "shared", "the last owner's dependent is collected").await;
    assert!(api.get("orphan").await.is_ok());
}

#[tokio::test]
async fn a_foreground_owner_waits_for_its_blocking_dependents() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let owner = api
        .create(&PostParams::default(), &cm("owner", json!([])))
        .await
        .unwrap();
    let mut blocking = cm("blocking", json!([owner_ref(&owner, true)]));
    blocking.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &blocking).await.unwrap();
    let answer = api
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    assert_eq!(
        answer.left().unwrap().metadata.finalizers.unwrap(),
        ["foregroundDeletion"]
    );
    within("the dependent is deleted", async {
        while api
            .get("blocking")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        api.get("owner").await.is_ok(),
        "the owner waits for its blocking dependent"
    );
    api.patch(
        "blocking",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    gone(&api, "owner", "the owner goes after its dependent").await;
}

#[tokio::test]
async fn owner_references_and_delete_options_are_validated() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let no_uid = api_error(
        api.create(
            &PostParams::default(),
            &cm(
                "no-uid",
                json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": ""}]),
            ),
        )
        .await,
    );
    assert_eq!(no_uid.code, 422);
    assert_eq!(
        no_uid.message,
        "ConfigMap \"no-uid\" is invalid: metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"
    );
    let two = api_error(
        api.create(
            &PostParams::default(),
            &cm(
                "two",
                json!([
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": true},
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "2", "controller": true}
                ]),
            ),
        )
        .await,
    );
    assert_eq!(
        two.message,
        "ConfigMap \"two\" is invalid: metadata.ownerReferences: Invalid value: [{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"uid\":\"1\",\"controller\":true},{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"b\",\"uid\":\"2\",\"controller\":true}]: Only one reference can have Controller set to true. Found \"true\" in references for ConfigMap/a and ConfigMap/b"
    );
    let bad = api_error(
        t.client
            .request::<Value>(
                http::Request::delete(
                    "/api/v1/namespaces/default/configmaps/never-was?propagationPolicy=Sideways",
                )
                .body(Vec::new())
                .unwrap(),
            )
            .await,
    );
    assert_eq!(bad.code, 422, "refused before the object is looked up");
    assert_eq!(
        bad.message,
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
}
