//! CRD conversion through kube-rs: a CRD whose two versions name a field differently, with
//! `strategy: Webhook` and an in-process converter, is served at both versions on every path
//! (create, get, list, patch, server-side apply, watch) and stored at its storage version;
//! converter failures and a missing converter answer as kube-apiserver answers a failed
//! conversion webhook; and a Webhook strategy needs its webhook settings.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{TestPlane, api_error};
use fleetform_controlplane::ControlPlane;
use fleetform_controlplane::conversion::Converter;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

const CRD: &str = "gauges.example.com";

/// v1 (stored) calls the field `spec.size`, v2 calls it `spec.capacity`.
fn gauge_crd(conversion: Value) -> CustomResourceDefinition {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}})
    };
    serde_json::from_value(json!({
        "metadata": {"name": CRD},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gauges", "kind": "Gauge"},
            "conversion": conversion,
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("capacity")},
            ]
        }
    }))
    .unwrap()
}

fn webhook() -> Value {
    json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "gauges", "name": "converter", "path": "/convert"}}}})
}

/// Renames `size` and `capacity` into each other, refuses objects named `broken`, and writes
/// down how many objects each call converted to which version.
#[derive(Default)]
struct Renamer {
    calls: Mutex<Vec<(String, usize)>>,
}

impl Converter for Renamer {
    fn convert(&self, desired: &str, objects: Vec<Value>) -> Result<Vec<Value>, String> {
        self.calls
            .lock()
            .unwrap()
            .push((desired.to_string(), objects.len()));
        let (from, to) = match desired {
            "example.com/v2" => ("size", "capacity"),
            "example.com/v1" => ("capacity", "size"),
            other => return Err(format!("unknown version {other}")),
        };
        objects
            .into_iter()
            .map(|mut o| {
                if o["metadata"]["name"] == "broken" {
                    return Err("cannot convert broken".to_string());
                }
                o["apiVersion"] = json!(desired);
                if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut)
                    && let Some(v) = spec.remove(from)
                {
                    spec.insert(to.into(), v);
                }
                Ok(o)
            })
            .collect()
    }
}

fn gauges(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "Gauge"),
        "gauges",
    );
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn gauge(version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("example.com/{version}"), "kind": "Gauge",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

async fn install(t: &TestPlane, conversion: Value) {
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    crds.create(&PostParams::default(), &gauge_crd(conversion))
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(crds, CRD, conditions::is_crd_established()),
    )
    .await
    .unwrap()
    .unwrap();
}

async fn with_renamer() -> (TestPlane, Arc<Renamer>) {
    let renamer = Arc::new(Renamer::default());
    let t = TestPlane::with(ControlPlane::builder().conversion(CRD, renamer.clone())).await;
    install(&t, webhook()).await;
    (t, renamer)
}

fn spec(o: &DynamicObject) -> &Value {
    &o.data["spec"]
}

#[tokio::test]
async fn objects_are_converted_between_versions_on_every_path() {
    let (t, renamer) = with_renamer().await;
    let (v1, v2) = (gauges(&t.client, "v1"), gauges(&t.client, "v2"));

    let created = v2
        .create(
            &PostParams::default(),
            &gauge("v2", "a", json!({"capacity": 3})),
        )
        .await
        .expect("created at v2");
    assert_eq!(spec(&created), &json!({"capacity": 3}));
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "example.com/v2"
    );
    assert_eq!(spec(&v1.get("a").await.unwrap()), &json!({"size": 3}));
    assert_eq!(spec(&v2.get("a").await.unwrap()), &json!({"capacity": 3}));
    assert_eq!(
        renamer.calls.lock().unwrap().drain(..).collect::<Vec<_>>(),
        [
            ("example.com/v1".to_string(), 1),
            ("example.com/v2".to_string(), 1),
            ("example.com/v2".to_string(), 1),
        ],
        "stored at v1, answered at v2; read at v1 as stored"
    );

    for (name, size) in [("b", 5), ("c", 7)] {
        v1.create(
            &PostParams::default(),
            &gauge("v1", name, json!({"size": size})),
        )
        .await
        .unwrap();
    }
    renamer.calls.lock().unwrap().clear();
    let listed = v2.list(&ListParams::default()).await.unwrap();
    let capacities: Vec<&Value> = listed.items.iter().map(|o| &spec(o)["capacity"]).collect();
    assert_eq!(capacities, [&json!(3), &json!(5), &json!(7)]);
    assert_eq!(
        renamer.calls.lock().unwrap().as_slice(),
        [("example.com/v2".to_string(), 3)],
        "a list is converted in one call"
    );

    let patched = v2
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"capacity": 6}})),
        )
        .await
        .unwrap();
    assert_eq!(spec(&patched), &json!({"capacity": 6}));
    assert_eq!(spec(&v1.get("b").await.unwrap()), &json!({"size": 6}));
    // Server-side apply at v2: first it creates, then it updates.
    for capacity in [9, 10] {
        let applied = v2
            .patch(
                "d",
                &PatchParams::apply("tester"),
                &Patch::Apply(json!({"apiVersion": "example.com/v2", "kind": "Gauge",
                    "metadata": {"name": "d"}, "spec": {"capacity": capacity}})),
            )
            .await
            .unwrap();
        assert_eq!(spec(&applied), &json!({"capacity": capacity}));
        assert_eq!(
            spec(&v1.get("d").await.unwrap()),
            &json!({"size": capacity})
        );
    }

    let mut events = v2
        .watch(
            &WatchParams::default(),
            &listed.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("an event in time")
            .unwrap()
            .unwrap();
        match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                assert_eq!(o.types.unwrap().api_version, "example.com/v2");
                seen.push((o.metadata.name.unwrap(), o.data["spec"].clone()));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("b".to_string(), json!({"capacity": 6})),
            ("d".to_string(), json!({"capacity": 9})),
            ("d".to_string(), json!({"capacity": 10})),
        ]
    );
}

#[tokio::test]
async fn conversion_failures_answer_as_kube_apiserver() {
    let (t, _) = with_renamer().await;
    let (v1, v2) = (gauges(&t.client, "v1"), gauges(&t.client, "v2"));
    let mut events = v2
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    v1.create(
        &PostParams::default(),
        &gauge("v1", "broken", json!({"size": 1})),
    )
    .await
    .expect("stored as written: no conversion");
    let failure = "Internal error occurred: conversion webhook for example.com/v1, Kind=Gauge failed: cannot convert broken";
    let st = api_error(v2.get("broken").await);
    assert_eq!(
        (st.code, st.reason.as_str(), st.message.as_str()),
        (500, "InternalError", failure)
    );
    assert_eq!(
        api_error(v2.list(&ListParams::default()).await).message,
        failure
    );
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("an event in time")
            .unwrap();
        match event {
            Ok(WatchEvent::Bookmark(_)) => continue,
            Ok(WatchEvent::Error(e)) => {
                assert_eq!((e.code, e.message.as_str()), (500, failure));
                break;
            }
            other => panic!("expected the watch's error, got {other:?}"),
        }
    }
    assert!(
        tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("the watch ends")
            .is_none(),
        "the watch ends after its error"
    );
    v1.get("broken").await.expect("still served as stored");

    // A Webhook CRD nobody converts for fails every conversion, saying why.
    let t = TestPlane::start().await;
    install(&t, webhook()).await;
    let st = api_error(
        gauges(&t.client, "v2")
            .create(
                &PostParams::default(),
                &gauge("v2", "x", json!({"capacity": 1})),
            )
            .await,
    );
    assert_eq!(st.code, 500);
    assert_eq!(
        st.message,
        "Internal error occurred: conversion webhook for example.com/v2, Kind=Gauge failed: no converter is registered for customresourcedefinition \"gauges.example.com\", and this control plane does not call conversion webhooks"
    );
    gauges(&t.client, "v1")
        .create(
            &PostParams::default(),
            &gauge("v1", "y", json!({"size": 1})),
        )
        .await
        .expect("the storage version needs no conversion");
}

#[tokio::test]
async fn a_webhook_strategy_needs_its_webhook_settings() {
    let t = TestPlane::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    for (conversion, message) in [
        (
            json!({"strategy": "Webhook"}),
            "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
        ),
        (
            json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://c.example.com"}}}),
            "spec.conversion.conversionReviewVersions: Required value",
        ),
        (
            json!({"strategy": "Magic"}),
            "spec.conversion.strategy: Unsupported value: \"Magic\": supported values: \"None\", \"Webhook\"",
        ),
    ] {
        let st = api_error(
            crds.create(&PostParams::default(), &gauge_crd(conversion))
                .await,
        );
        assert_eq!(st.code, 422);
        assert!(st.message.ends_with(message), "{}", st.message);
    }
}
