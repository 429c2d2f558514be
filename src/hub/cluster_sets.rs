//! The hub's built-in ManagedClusterSets, as OCM's registration hub keeps them: `default`, the set
//! of every cluster labelled into it (a cluster no one put in a set is put there by its Spoke's
//! default `clusterSet`), and `global`, which selects every cluster (placements over the whole
//! fleet bind to it). Created when absent, never rewritten: an administrator may have changed
//! them.

use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::run::RETRY_DELAY;
use crate::api::ManagedClusterSet;
use crate::api::vocabulary::{
    CLUSTER_SET_DEFAULT, CLUSTER_SET_GLOBAL, MANAGED_BY, MANAGED_BY_LABEL,
};

/// The built-in sets, as OCM creates them.
pub fn built_in_sets() -> Vec<serde_json::Value> {
    let labels = json!({MANAGED_BY_LABEL: MANAGED_BY});
    vec![
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2",
            "kind": "ManagedClusterSet",
            "metadata": {"name": CLUSTER_SET_DEFAULT, "labels": labels},
            "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}},
        }),
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2",
            "kind": "ManagedClusterSet",
            "metadata": {"name": CLUSTER_SET_GLOBAL, "labels": labels},
            "spec": {"clusterSelector": {"selectorType": "LabelSelector", "labelSelector": {}}},
        }),
    ]
}

/// Creates the built-in sets that are absent, retrying until both exist or shutdown.
pub(crate) async fn ensure_built_in_sets(client: Client, shutdown: CancellationToken) {
    let sets: Api<ManagedClusterSet> = Api::all(client);
    for set in built_in_sets() {
        let set: ManagedClusterSet = match serde_json::from_value(set) {
            Ok(set) => set,
            Err(err) => {
                warn!(%err, "a built-in ManagedClusterSet does not parse");
                continue;
            }
        };
        loop {
            match sets.create(&PostParams::default(), &set).await {
                Ok(_) => break,
                Err(err) if crate::runtime::error::is_conflict(&err) => break,
                Err(err) => warn!(
                    %err,
                    set = set.metadata.name.as_deref().unwrap_or_default(),
                    "cannot create a built-in ManagedClusterSet; retrying"
                ),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(RETRY_DELAY) => {}
            }
        }
    }
}
