//! The Events fleetform writes, as kube-apiserver takes them: named as client-go's recorders name
//! theirs, and none lost when many are about one object at once.

use crate::support;

use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::events::{EventType, Reporter, reference};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ListParams, PostParams};
use support::Cluster;

#[tokio::test]
async fn events_about_one_object_at_once_are_all_kept_under_client_go_names() {
    let hub = Cluster::start().await;
    let client = hub.hub_identity().await;
    let about = Api::<ConfigMap>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("fleet.example.com".into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            },
        )
        .await
        .unwrap();
    let regarding = reference(&about);
    // Two reporters (two processes' worth), forty Events about one object together.
    let reporters = [
        Reporter::new(client.clone(), "fleetform", "replica-a"),
        Reporter::new(client, "fleetform", "replica-b"),
    ];
    let published = (0..40).map(|n| {
        let reporter = &reporters[n % 2];
        let regarding = &regarding;
        async move {
            reporter
                .publish(
                    regarding,
                    EventType::Normal,
                    "Tested",
                    "Test",
                    format!("occurrence {n}"),
                )
                .await
        }
    });
    futures::future::join_all(published).await;
    for reporter in &reporters {
        reporter.flush().await;
    }

    let events = Api::<Event>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    support::assert_named_as_client_go(&events);
    let mut notes: Vec<String> = events.iter().filter_map(|e| e.note.clone()).collect();
    notes.sort_by_key(|note| note[11..].parse::<u32>().unwrap());
    let expected: Vec<String> = (0..40).map(|n| format!("occurrence {n}")).collect();
    assert_eq!(notes, expected);
    hub.server.shutdown().await;
}
