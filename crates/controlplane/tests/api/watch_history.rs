//! The watch history reaches back by time, not by count: a watcher 60 s behind a control plane
//! taking 1,000 writes/s resumes from its resourceVersion with every event it missed, no
//! relist; past the window, or past the byte ceiling in a burst, it is told 410 Expired and
//! must list again. The history's clock is the test's, so "60 s behind" is data, not waiting.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::ManualClock;
use fleetform_controlplane::{ControlPlane, ControlPlaneBuilder, RunningControlPlane};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

/// Objects the writes go round (a hub's leases, say).
const OBJECTS: usize = 100;
/// Concurrent writers.
const WRITERS: usize = 8;

async fn start(builder: ControlPlaneBuilder) -> (RunningControlPlane, Api<ConfigMap>) {
    let plane = builder
        .insecure_http()
        .start()
        .await
        .expect("control plane starts");
    let client = kube::Client::new(plane.in_process_service(), "default");
    let api = Api::default_namespaced(client);
    for i in 0..OBJECTS {
        let object = serde_json::from_value(json!({"metadata": {"name": format!("lease-{i}")}}))
            .expect("a ConfigMap");
        api.create(&PostParams::default(), &object)
            .await
            .expect("created");
    }
    (plane, api)
}

/// The current resourceVersion, as a watcher that has just listed holds it.
async fn listed_at(api: &Api<ConfigMap>) -> String {
    let list = api.list(&ListParams::default()).await.expect("list");
    list.metadata
        .resource_version
        .expect("a list has a resourceVersion")
}

/// `writes` updates spread over the objects, the clock moving `every` before each: 1 ms is
/// 1,000 writes/s.
async fn write(api: &Api<ConfigMap>, clock: &Arc<ManualClock>, writes: usize, every: Duration) {
    futures::stream::iter(0..writes)
        .map(|n| {
            let (api, clock) = (api.clone(), clock.clone());
            async move {
                clock.advance(every);
                let patch = json!({"data": {"n": n.to_string()}});
                api.patch(
                    &format!("lease-{}", n % OBJECTS),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map(drop)
            }
        })
        .buffer_unordered(WRITERS)
        .try_collect::<Vec<()>>()
        .await
        .expect("every write succeeds");
}

/// What a watch resumed from `rv` delivers until it has caught up with `until`: the number of
/// changes, or the status of the error that ended it.
async fn resume(api: &Api<ConfigMap>, rv: &str, until: &str) -> Result<usize, (u16, String)> {
    let until: i64 = until.parse().expect("a number");
    let mut watch = api
        .watch(&WatchParams::default(), rv)
        .await
        .expect("watch starts")
        .boxed();
    let mut changes = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), watch.next())
            .await
            .expect("an event within 60 s")
            .expect("the watch goes on")
            .expect("an event");
        let object = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => o,
            WatchEvent::Error(e) => return Err((e.code, e.reason)),
            WatchEvent::Bookmark(_) => continue,
        };
        changes += 1;
        let at: i64 = object
            .metadata
            .resource_version
            .expect("an object has a resourceVersion")
            .parse()
            .expect("a number");
        if at >= until {
            return Ok(changes);
        }
    }
}

#[tokio::test]
async fn a_watcher_60_s_behind_at_1000_writes_a_second_resumes_without_a_relist() {
    let clock = ManualClock::new();
    let (plane, api) = start(ControlPlane::builder().history_clock(clock.clone())).await;
    let behind = listed_at(&api).await;
    write(&api, &clock, 60_000, Duration::from_millis(1)).await;
    let now = listed_at(&api).await;
    assert_eq!(
        resume(&api, &behind, &now).await,
        Ok(60_000),
        "every change of the last 60 s is replayed"
    );

    // 16 s later the first of them are more than 75 s old, and gone.
    clock.advance(Duration::from_secs(16));
    write(&api, &clock, 1, Duration::ZERO).await;
    let now = listed_at(&api).await;
    assert_eq!(
        resume(&api, &behind, &now).await,
        Err((410, "Expired".to_string())),
        "a watcher further behind than the window relists"
    );
    plane.shutdown().await;
}

#[tokio::test]
async fn a_burst_past_the_byte_ceiling_expires_the_oldest_events_within_the_window() {
    let clock = ManualClock::new();
    let (plane, api) = start(
        ControlPlane::builder()
            .history_clock(clock.clone())
            .history_max_bytes(256 << 10),
    )
    .await;
    let behind = listed_at(&api).await;
    write(&api, &clock, 2_000, Duration::ZERO).await;
    let recent = listed_at(&api).await;
    write(&api, &clock, 100, Duration::ZERO).await;
    let now = listed_at(&api).await;
    assert_eq!(
        resume(&api, &behind, &now).await,
        Err((410, "Expired".to_string())),
        "the burst pushed the watcher's events out though no time passed"
    );
    assert_eq!(
        resume(&api, &recent, &now).await,
        Ok(100),
        "the newest events stay"
    );
    plane.shutdown().await;
}
