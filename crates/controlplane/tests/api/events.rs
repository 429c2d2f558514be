//! core/v1 Events and events.k8s.io/v1 Events are the same objects, as in kube-apiserver: an
//! Event written by kube-runtime's `Recorder` (events.k8s.io) is listed, selected by its
//! involved object and watched as a core/v1 Event, and the other way round.

use crate::common;

use std::time::Duration;

use common::TestPlane;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use k8s_openapi::api::events::v1::Event as EventsV1;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};
use serde_json::json;

async fn config_map(t: &TestPlane) -> ConfigMap {
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "cfg"}})).unwrap(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_recorder_event_is_a_core_event_about_its_object() {
    let t = TestPlane::start().await;
    let cm = config_map(&t).await;
    let core: Api<CoreEvent> = Api::namespaced(t.client.clone(), "default");
    let watch = core
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    let recorder = Recorder::new(
        t.client.clone(),
        Reporter {
            controller: "fleetform-test".into(),
            instance: Some("test-1".into()),
        },
    );
    let event = Event {
        type_: EventType::Warning,
        reason: "Drifted".into(),
        note: Some("the config map drifted".into()),
        action: "Compare".into(),
        secondary: None,
    };
    recorder.publish(&event, &cm.object_ref(&())).await.unwrap();

    // kubectl describe selects the object's events on core/v1 by these fields.
    let selector = format!(
        "involvedObject.name=cfg,involvedObject.namespace=default,involvedObject.kind=ConfigMap,involvedObject.uid={}",
        cm.uid().unwrap()
    );
    let listed = core
        .list(&ListParams::default().fields(&selector))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1, "{listed:?}");
    let e = &listed.items[0];
    assert_eq!(e.reason.as_deref(), Some("Drifted"));
    assert_eq!(e.message.as_deref(), Some("the config map drifted"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.action.as_deref(), Some("Compare"));
    assert_eq!(e.reporting_component.as_deref(), Some("fleetform-test"));
    assert_eq!(e.reporting_instance.as_deref(), Some("test-1"));
    assert_eq!(e.involved_object.name.as_deref(), Some("cfg"));
    assert!(e.event_time.is_some());
    let other = core
        .list(&ListParams::default().fields("involvedObject.name=other"))
        .await
        .unwrap();
    assert!(other.items.is_empty());

    // The same object, on the watch of core/v1 Events.
    let added = tokio::time::timeout(
        Duration::from_secs(10),
        watch
            .try_filter_map(|e| async move {
                Ok(match e {
                    WatchEvent::Added(e) => Some(e),
                    _ => None,
                })
            })
            .boxed()
            .try_next(),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap();
    assert_eq!(added.message.as_deref(), Some("the config map drifted"));
    assert_eq!(added.metadata.name, e.metadata.name);

    // Publishing it again patches the series through events.k8s.io; both views see it.
    recorder.publish(&event, &cm.object_ref(&())).await.unwrap();
    let v1: Api<EventsV1> = Api::namespaced(t.client.clone(), "default");
    let again = v1.get(&e.name_any()).await.unwrap();
    assert_eq!(again.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(again.note.as_deref(), Some("the config map drifted"));
    assert_eq!(
        again.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("cfg")
    );
    let core_again = core.get(&e.name_any()).await.unwrap();
    assert_eq!(core_again.series.as_ref().and_then(|s| s.count), Some(2));
}

#[tokio::test]
async fn a_core_event_is_an_events_v1_event() {
    let t = TestPlane::start().await;
    let cm = config_map(&t).await;
    let core: Api<CoreEvent> = Api::namespaced(t.client.clone(), "default");
    core.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "cfg.1"},
            "involvedObject": {"kind": "ConfigMap", "name": "cfg", "namespace": "default",
                "uid": cm.uid(), "apiVersion": "v1"},
            "reason": "Created", "message": "made it", "type": "Normal",
            "source": {"component": "kubectl", "host": "laptop"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:05Z",
            "count": 3
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let v1: Api<EventsV1> = Api::namespaced(t.client.clone(), "default");
    let listed = v1
        .list(&ListParams::default().fields("regarding.name=cfg,regarding.kind=ConfigMap"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let e = &listed.items[0];
    assert_eq!(e.note.as_deref(), Some("made it"));
    assert_eq!(e.deprecated_count, Some(3));
    assert_eq!(
        e.deprecated_source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("kubectl")
    );
    assert_eq!(
        e.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("cfg")
    );
    assert_eq!(cm.meta().name.as_deref(), Some("cfg"));
    // Deleting through one API removes it from both.
    v1.delete("cfg.1", &Default::default()).await.unwrap();
    assert!(core.get_opt("cfg.1").await.unwrap().is_none());
}
