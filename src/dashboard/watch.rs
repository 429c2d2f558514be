//! The one set of watches per process that feeds the view model: per hub, its Hubs, Spokes and
//! FleetSyncs, every ManagedCluster (with the claims it reports), ManagedClusterAddOn and
//! cluster Lease, and the Events in fleetform's namespace. After each batch of events it renders
//! what changed once and sends it to every viewer on a broadcast channel, so viewers never cause
//! an API request.

use std::sync::{Arc, RwLock};

use futures::stream::{BoxStream, select_all};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::model::{self, Changes, Model, Observed};
use super::pages;
use crate::api::fleet::SYSTEM_NAMESPACE;
use crate::api::vocabulary::CLUSTER_LEASE_NAME;
use crate::api::{FleetSync, Hub, ManagedCluster, ManagedClusterAddOn, Spoke};
use crate::runtime::watch::BackingOff;

/// What viewers hear of a batch of changes: the topics (pages) it concerns, the fleet page's
/// rows that changed, rendered, and the fleet page's summary when any did.
#[derive(Clone, Debug, Default)]
pub struct Update {
    pub topics: Vec<String>,
    /// `(row id, its <tr>)`, or `(row id, "")` for a row that is gone.
    pub rows: Vec<(String, String)>,
    pub summary: Option<String>,
}

/// The most rows one update carries; past it (a relist), every page fetches itself again (topic
/// [`pages::EVERY_TOPIC`]) rather than every viewer receiving every row.
const ROWS_PER_UPDATE: usize = 200;

/// Renders `changes` for the viewers.
pub fn update(model: &Model, changes: &Changes, now: Timestamp) -> Update {
    let mut update = Update::default();
    if changes.rows.len() > ROWS_PER_UPDATE {
        update.topics.push(pages::EVERY_TOPIC.to_string());
        return update;
    }
    for (hub, spoke) in &changes.rows {
        update.topics.push(pages::spoke_topic(hub, spoke));
        let row = model
            .hubs
            .get(hub)
            .and_then(|view| view.rows.get(spoke))
            .map(|row| pages::fleet_row(row, now).into_string())
            .unwrap_or_default();
        update.rows.push((pages::row_id(hub, spoke), row));
    }
    for (hub, spoke) in &changes.spoke_pages {
        update.topics.push(pages::spoke_topic(hub, spoke));
    }
    if !changes.rows.is_empty() {
        update.summary = Some(pages::fleet_summary(model).into_string());
    }
    if changes.membership {
        update.topics.push(pages::fleet_topic());
    }
    for hub in &changes.rollouts {
        update.topics.push(pages::rollout_topic(hub));
    }
    if changes.sync {
        update.topics.push(pages::sync_topic());
    }
    update.topics.sort();
    update.topics.dedup();
    update
}

/// A watch of `api` whose events become [`Observed`] ones of hub `hub`, each object cut to what
/// the pages read of it (`cut`).
fn watched<K>(
    api: Api<K>,
    config: watcher::Config,
    hub: usize,
    observed: fn(watcher::Event<K>) -> Observed,
    cut: fn(&mut K),
) -> BoxStream<'static, (usize, Observed)>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&Default::default()).into_owned();
    // A failed watch is retried by its backoff and the model keeps what it saw meanwhile; the
    // failure is said once (not on every retry), and so is the recovery.
    let mut failing = false;
    watcher(api, config.page_size(crate::runtime::watch::LIST_PAGE))
        .backing_off()
        // No page shows who owns which field: the model need not hold it for every object.
        .modify(move |object| {
            crate::runtime::watch::without_managed_fields(object);
            cut(object);
        })
        .filter_map(move |event| {
            let event = match event {
                Ok(event) => {
                    if std::mem::take(&mut failing) {
                        tracing::info!(%kind, "the dashboard's watch works again");
                    }
                    Some((hub, observed(event)))
                }
                Err(err) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(%kind, %err, "the dashboard's watch failed; retrying, its pages show what they saw last");
                    }
                    None
                }
            };
            std::future::ready(event)
        })
        .boxed()
}

/// The watches of the hub `client` reaches, as hub number `hub`.
fn hub_watches(client: &Client, hub: usize) -> Vec<BoxStream<'static, (usize, Observed)>> {
    let all = watcher::Config::default;
    vec![
        watched(
            Api::<Hub>::namespaced(client.clone(), SYSTEM_NAMESPACE),
            all(),
            hub,
            Observed::Hub,
            |_| {},
        ),
        watched(
            Api::<Spoke>::namespaced(client.clone(), SYSTEM_NAMESPACE),
            all(),
            hub,
            Observed::Spoke,
            model::as_shown_spoke,
        ),
        watched(
            Api::<ManagedCluster>::all(client.clone()),
            all(),
            hub,
            Observed::Cluster,
            model::as_shown_cluster,
        ),
        watched(
            Api::<ManagedClusterAddOn>::all(client.clone()),
            all(),
            hub,
            Observed::Addon,
            // The model keeps what the pages show of it (`model::ShownAddon`).
            |_| {},
        ),
        watched(
            Api::<Lease>::all(client.clone()),
            all().fields(&format!("metadata.name={CLUSTER_LEASE_NAME}")),
            hub,
            Observed::Lease,
            // The model keeps when it was renewed (`model::ShownLease`).
            |_| {},
        ),
        watched(
            Api::<FleetSync>::namespaced(client.clone(), SYSTEM_NAMESPACE),
            all(),
            hub,
            Observed::FleetSync,
            |_| {},
        ),
        watched(
            Api::<Event>::namespaced(client.clone(), SYSTEM_NAMESPACE),
            all(),
            hub,
            Observed::Event,
            |_| {},
        ),
    ]
}

/// Feeds `model` from the watches of `hubs` (name, client) until `stop`, sending each batch's
/// [`Update`] on `updates`.
pub async fn run(
    hubs: Vec<(String, Client)>,
    model: Arc<RwLock<Model>>,
    updates: broadcast::Sender<Arc<Update>>,
    stop: CancellationToken,
) {
    let names: Vec<String> = hubs.iter().map(|(name, _)| name.clone()).collect();
    let streams: Vec<_> = hubs
        .iter()
        .enumerate()
        .flat_map(|(index, (_, client))| hub_watches(client, index))
        .collect();
    let mut events = select_all(streams);
    loop {
        let first = tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next() => match next {
                Some(first) => first,
                None => return,
            },
        };
        // Take in everything already there, then tell the viewers once.
        let now = Timestamp::now();
        let mut changes = Changes::default();
        let update = {
            let mut model = model
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let mut next = Some(first);
            while let Some((hub, observed)) = next {
                changes.merge(model.observe(&names[hub], observed, now));
                next = events.next().now_or_never().flatten();
            }
            if !changes.is_empty() {
                model.version += 1;
            }
            update(&model, &changes, now)
        };
        if !changes.is_empty() {
            // No viewer connected is no error.
            let _ = updates.send(Arc::new(update));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::model::tests::{at, cluster, model_with, spoke};
    use serde_json::json;

    #[test]
    fn a_changed_row_is_rendered_once_for_every_viewer_and_a_relist_asks_pages_to_refetch() {
        let mut model = model_with(&[spoke("edge", json!({}))]);
        let changes = model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("edge", "Unknown"))),
            at(5),
        );
        let sent = update(&model, &changes, at(5));
        assert_eq!(sent.topics, ["spoke:hub/edge"]);
        assert_eq!(sent.rows.len(), 1);
        assert_eq!(sent.rows[0].0, "row:hub/edge");
        assert!(sent.rows[0].1.contains("Unknown"), "{:?}", sent.rows);
        assert!(
            sent.summary
                .is_some_and(|summary| summary.contains(r#"id="summary""#))
        );

        let spokes: Vec<_> = (0..=ROWS_PER_UPDATE)
            .map(|i| spoke(&format!("s{i}"), json!({})))
            .collect();
        let model = model_with(&spokes);
        let everything = Changes {
            rows: spokes
                .iter()
                .map(|s| ("hub".to_string(), s.metadata.name.clone().unwrap()))
                .collect(),
            ..Changes::default()
        };
        let sent = update(&model, &everything, at(5));
        assert_eq!(sent.topics, [pages::EVERY_TOPIC]);
        assert!(sent.rows.is_empty());
    }
}
