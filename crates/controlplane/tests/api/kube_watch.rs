//! Watches and kube-runtime through kube-rs: watcher (list+watch and streaming lists),
//! reflector, the finalizer helper, resume from a resourceVersion, 410 Expired, bookmarks,
//! timeouts, selector transitions, shutdown, and server-side apply.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestPlane, api_error};
use fleetform_controlplane::ControlPlane;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "x"}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

fn name(c: &ConfigMap) -> String {
    c.metadata.name.clone().unwrap()
}

async fn next<S: futures::Stream + Unpin>(s: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("event within 10s")
        .expect("stream still open")
}

#[tokio::test]
async fn watcher_lists_then_follows_changes() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    // Its own objects: the namespace holds the published root CA too.
    let mut events = watcher(api.clone(), watcher::Config::default().labels("app=x")).boxed();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Init));
    match next(&mut events).await.unwrap() {
        Event::InitApply(c) => assert_eq!(name(&c), "before"),
        other => panic!("expected InitApply, got {other:?}"),
    }
    assert!(matches!(next(&mut events).await.unwrap(), Event::InitDone));
    api.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    match next(&mut events).await.unwrap() {
        Event::Apply(c) => assert_eq!(name(&c), "after"),
        other => panic!("expected Apply, got {other:?}"),
    }
    api.delete("before", &DeleteParams::default())
        .await
        .unwrap();
    match next(&mut events).await.unwrap() {
        Event::Delete(c) => assert_eq!(name(&c), "before"),
        other => panic!("expected Delete, got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_with_streaming_lists_gets_initial_events() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut events = watcher(
        api.clone(),
        watcher::Config::default().labels("app=x").streaming_lists(),
    )
    .boxed();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Init));
    assert!(matches!(
        next(&mut events).await.unwrap(),
        Event::InitApply(_)
    ));
    assert!(matches!(next(&mut events).await.unwrap(), Event::InitDone));
}

fn watcher<K>(
    api: Api<K>,
    cfg: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<K>, watcher::Error>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    kube::runtime::watcher(api, cfg)
}

#[tokio::test]
async fn reflector_store_follows_the_server() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        kube::runtime::watcher(api.clone(), watcher::Config::default().labels("app=x")),
    )
    .applied_objects()
    .boxed();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = stream;
        while let Some(Ok(o)) = stream.next().await {
            let _ = tx.send(name(&o));
        }
    });
    reader.wait_until_ready().await.unwrap();
    api.create(&PostParams::default(), &cm("r1")).await.unwrap();
    api.create(&PostParams::default(), &cm("r2")).await.unwrap();
    assert_eq!(next(&mut tokio_stream(&mut rx)).await, "r1");
    assert_eq!(next(&mut tokio_stream(&mut rx)).await, "r2");
    assert_eq!(reader.state().len(), 2);
}

fn tokio_stream<T>(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Unpin + '_ {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let a = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = a.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let mut s = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match next(&mut s).await.unwrap() {
        WatchEvent::Added(c) => assert_eq!(name(&c), "b"),
        other => panic!("expected ADDED b, got {other:?}"),
    }
    match next(&mut s).await.unwrap() {
        WatchEvent::Deleted(c) => assert_eq!(name(&c), "a"),
        other => panic!("expected DELETED a, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_past_the_history_window_is_expired() {
    let clock = common::ManualClock::new();
    let t = TestPlane::with(ControlPlane::builder().history_clock(clock.clone())).await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for i in 0..6 {
        clock.advance(Duration::from_secs(76));
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    let mut s = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match next(&mut s).await.unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.starts_with("too old resource version: 1 ("),
                "{}",
                e.message
            );
        }
        other => panic!("expected ERROR 410, got {other:?}"),
    }
}

#[tokio::test]
async fn bookmarks_and_timeouts() {
    let t = TestPlane::with(ControlPlane::builder().bookmark_interval(Duration::from_millis(100)))
        .await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let c = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = c.metadata.resource_version.unwrap();
    let wp = WatchParams::default().timeout(2);
    let mut s = api.watch(&wp, &rv).await.unwrap().boxed();
    match next(&mut s).await.unwrap() {
        WatchEvent::Bookmark(b) => assert!(
            b.metadata.resource_version.parse::<i64>().unwrap() >= rv.parse::<i64>().unwrap()
        ),
        other => panic!("expected BOOKMARK, got {other:?}"),
    }
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while s.next().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "timeoutSeconds ends the watch");
}

#[tokio::test]
async fn a_watch_gets_a_bookmark_at_the_current_resource_version_two_seconds_before_it_times_out() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let watched = api
        .create(&PostParams::default(), &cm("watched"))
        .await
        .unwrap();
    let rv = watched.metadata.resource_version.unwrap();
    // Periodic bookmarks are a minute apart; this watch lasts 4 s, so its bookmark comes at 2 s
    // (a watch of 2 s or less gets none, as kube-apiserver sends none).
    let wp = WatchParams::default()
        .timeout(4)
        .fields("metadata.name=watched");
    let mut s = api.watch(&wp, &rv).await.unwrap().boxed();
    // Writes the watch does not see move the store on.
    let other = api
        .create(&PostParams::default(), &cm("other"))
        .await
        .unwrap();
    let latest: i64 = other.metadata.resource_version.unwrap().parse().unwrap();
    let mut events = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = s.next().await {
            events.push(event.unwrap());
        }
    })
    .await
    .expect("timeoutSeconds ends the watch");
    match events.as_slice() {
        [WatchEvent::Bookmark(b)] => assert!(
            b.metadata.resource_version.parse::<i64>().unwrap() >= latest,
            "the last bookmark is at {}, the store at {latest}",
            b.metadata.resource_version
        ),
        other => panic!("expected one BOOKMARK, got {other:?}"),
    }
}

#[tokio::test]
async fn objects_leaving_a_selector_are_deleted_from_its_watch() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let c = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let wp = WatchParams::default().labels("app=x");
    let mut s = api
        .watch(&wp, c.metadata.resource_version.as_deref().unwrap())
        .await
        .unwrap()
        .boxed();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    assert!(matches!(
        next(&mut s).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "x"}}})),
    )
    .await
    .unwrap();
    assert!(matches!(next(&mut s).await.unwrap(), WatchEvent::Added(_)));
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let mut s = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    t.plane.shutdown().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while s.next().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok());
}

/// A reconcile error that cannot happen.
#[derive(Debug)]
enum Never {}

impl std::fmt::Display for Never {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

impl std::error::Error for Never {}

#[tokio::test]
async fn finalizer_helper_adds_and_removes_its_finalizer() {
    use kube::runtime::controller::Action;
    use kube::runtime::finalizer::{Event as Fin, finalizer};
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &cm("f")).await.unwrap();
    let fin = "example.com/cleanup";
    let run = |obj: ConfigMap| {
        let api = api.clone();
        async move {
            finalizer(&api, fin, Arc::new(obj), |e| async move {
                Ok::<_, Never>(match e {
                    Fin::Apply(_) => Action::await_change(),
                    Fin::Cleanup(_) => Action::await_change(),
                })
            })
            .await
            .unwrap();
        }
    };
    run(api.get("f").await.unwrap()).await;
    assert_eq!(
        api.get("f").await.unwrap().metadata.finalizers.unwrap(),
        vec![fin.to_string()]
    );
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("f").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    run(deleting).await;
    assert_eq!(api_error(api.get("f").await).code, 404);
}

#[tokio::test]
async fn server_side_apply_tracks_managers_and_conflicts() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let config = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": v}});
    let created = api
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &Patch::Apply(config("1")),
        )
        .await
        .unwrap();
    let mf = created.metadata.managed_fields.unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("alice"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let err = api_error(
        api.patch(
            "ssa",
            &PatchParams::apply("bob"),
            &Patch::Apply(config("2")),
        )
        .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.k"
    );
    let forced = api
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(config("2")),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["k"], "2");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["bob"], "alice lost her only field");
    let shared = api
        .patch(
            "ssa",
            &PatchParams::apply("carol"),
            &Patch::Apply(config("2")),
        )
        .await
        .unwrap();
    let managers: Vec<String> = shared
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(
        managers,
        ["bob", "carol"],
        "applying the same value shares ownership"
    );
    let dropped = api
        .patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"other": "x"}})))
        .await
        .unwrap();
    let data = dropped.data.unwrap();
    assert_eq!(data["k"], "2", "carol still owns data.k");
    assert_eq!(data["other"], "x");
    let released = api
        .patch(
            "ssa",
            &PatchParams::apply("carol"),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}}),
            ),
        )
        .await
        .unwrap();
    assert!(
        !released.data.unwrap().contains_key("k"),
        "a field no manager applies any more is removed"
    );
}

#[tokio::test]
async fn metadata_watcher_and_metadata_reads_get_partial_objects() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &cm("m1")).await.unwrap();
    let meta = api.get_metadata("m1").await.unwrap();
    assert_eq!(meta.types.unwrap().kind, "PartialObjectMetadata");
    let list = api
        .list_metadata(&kube::api::ListParams::default().labels("app=x"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::default_namespaced(t.client.clone());
    let mut events = kube::runtime::watcher(meta_api, watcher::Config::default().labels("app=x"))
        .applied_objects()
        .boxed();
    assert_eq!(
        next(&mut events).await.unwrap().metadata.name.as_deref(),
        Some("m1")
    );
    api.create(&PostParams::default(), &cm("m2")).await.unwrap();
    let m2 = next(&mut events).await.unwrap();
    assert_eq!(m2.metadata.name.as_deref(), Some("m2"));
    assert_eq!(m2.types.unwrap().kind, "PartialObjectMetadata");
}

#[tokio::test]
async fn a_metadata_watch_by_name_sees_that_objects_metadata_only() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for name in ["m1", "m2"] {
        api.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::default_namespaced(t.client.clone());
    let by_name = watcher::Config::default().fields("metadata.name=m2");
    let mut events = kube::runtime::watcher(meta_api, by_name)
        .applied_objects()
        .boxed();
    assert_eq!(
        next(&mut events).await.unwrap().metadata.name.as_deref(),
        Some("m2")
    );
    // m1 changes first; the watch shows only m2's change, as metadata.
    let labelled =
        |value: &str| json!({"metadata": {"labels": {"tier": value}}, "data": {"k": value}});
    for name in ["m1", "m2"] {
        api.patch(name, &PatchParams::default(), &Patch::Merge(labelled(name)))
            .await
            .unwrap();
    }
    let m2 = next(&mut events).await.unwrap();
    assert_eq!(m2.metadata.name.as_deref(), Some("m2"));
    assert_eq!(
        m2.metadata
            .labels
            .unwrap_or_default()
            .get("tier")
            .map(String::as_str),
        Some("m2")
    );
    assert_eq!(m2.types.unwrap().kind, "PartialObjectMetadata");
}

#[tokio::test]
async fn in_process_transport_serves_kube_clients_without_sockets() {
    let t = TestPlane::start().await;
    let client = kube::Client::new(t.plane.in_process_service(), "default");
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let mut events = kube::runtime::watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    api.create(&PostParams::default(), &cm("inproc"))
        .await
        .unwrap();
    assert_eq!(name(&next(&mut events).await.unwrap()), "inproc");
    assert_eq!(api.get("inproc").await.unwrap().data.unwrap()["k"], "v");
}

#[tokio::test]
async fn kube_runtime_event_recorder_publishes_events() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::runtime::events::{Event as Ev, EventType, Recorder, Reporter};
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let c = api
        .create(&PostParams::default(), &cm("rec"))
        .await
        .unwrap();
    let recorder = Recorder::new(
        t.client.clone(),
        Reporter {
            controller: "test-controller".into(),
            instance: None,
        },
    );
    let reference = kube::Resource::object_ref(&c, &());
    let ev = Ev {
        type_: EventType::Normal,
        reason: "Tested".into(),
        note: Some("it works".into()),
        action: "Test".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let events: Api<K8sEvent> = Api::default_namespaced(t.client.clone());
    let list = events
        .list(&kube::api::ListParams::default().fields("regarding.name=rec"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].reason.as_deref(), Some("Tested"));
}

#[tokio::test]
async fn streaming_list_with_a_resource_version_sends_current_state() {
    let t = TestPlane::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let a = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    let wp = WatchParams::streaming_lists().labels("app=x");
    let rv = a.metadata.resource_version.unwrap();
    let mut s = api.watch(&wp, &rv).await.unwrap().boxed();
    let mut names = Vec::new();
    loop {
        match next(&mut s).await.unwrap() {
            WatchEvent::Added(o) => names.push(name(&o)),
            WatchEvent::Bookmark(b) => {
                assert_eq!(
                    b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, ["a", "b"]);
}

#[tokio::test]
async fn watches_of_one_object_or_namespace_get_all_of_its_events_even_after_falling_behind() {
    let t = TestPlane::start().await;
    // In-process, a watch whose client does not read fills the server's queue, so its channel
    // overflows and it must catch up from the history.
    let client = kube::Client::new(t.plane.in_process_service(), "default");
    let here: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "elsewhere");
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "elsewhere"}})).unwrap();
    Api::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    for (api, object) in [(&here, "target"), (&here, "other"), (&elsewhere, "target")] {
        api.create(&PostParams::default(), &cm(object))
            .await
            .unwrap();
    }
    let rv = here
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let params = WatchParams::default().fields("metadata.name=target");
    let one_object = here.watch(&params, &rv).await.unwrap().boxed();
    let one_namespace = here
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    const WRITES: usize = 400;
    for i in 0..WRITES {
        for (api, object) in [(&here, "target"), (&here, "other"), (&elsewhere, "target")] {
            let patch = json!({"data": {"k": i.to_string()}});
            api.patch(object, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }
    let seen = |events: Vec<WatchEvent<ConfigMap>>| -> Vec<(String, String)> {
        events
            .into_iter()
            .map(|event| match event {
                WatchEvent::Modified(c) => (name(&c), c.data.unwrap()["k"].clone()),
                other => panic!("expected MODIFIED, got {other:?}"),
            })
            .collect()
    };
    let within = |events| async move {
        tokio::time::timeout(Duration::from_secs(30), events)
            .await
            .expect("every event within 30 s")
    };
    let object_events: Vec<_> = within(one_object.take(WRITES).map(Result::unwrap).collect()).await;
    let expected: Vec<_> = (0..WRITES)
        .map(|i| ("target".to_string(), i.to_string()))
        .collect();
    assert_eq!(seen(object_events), expected);
    let namespace_events: Vec<_> =
        within(one_namespace.take(2 * WRITES).map(Result::unwrap).collect()).await;
    let expected: Vec<_> = (0..WRITES)
        .flat_map(|i| ["target", "other"].map(|object| (object.to_string(), i.to_string())))
        .collect();
    assert_eq!(seen(namespace_events), expected);
}
