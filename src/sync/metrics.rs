//! The sync controller's Prometheus metrics, in a registry of their own.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::plan::Action;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommitLabels {
    fleetsync: String,
    commit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: String,
}

/// What the controller counts; cheap to clone (every metric is shared).
#[derive(Clone)]
pub struct Metrics {
    registry: std::sync::Arc<Registry>,
    syncs: Family<ResultLabels, Counter>,
    last_sync: Gauge<f64, AtomicU64>,
    applied_commit: Family<CommitLabels, Gauge>,
    objects_changed: Family<ActionLabels, Counter>,
    leader: Gauge,
    webhook_requests: Family<ResultLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("fleetform_sync");
        let metrics = Metrics {
            registry: Default::default(),
            syncs: Family::default(),
            last_sync: Gauge::default(),
            applied_commit: Family::default(),
            objects_changed: Family::default(),
            leader: Gauge::default(),
            webhook_requests: Family::default(),
        };
        registry.register("syncs", "Syncs finished, by result", metrics.syncs.clone());
        registry.register(
            "last_sync_timestamp_seconds",
            "When the last sync finished (Unix time)",
            metrics.last_sync.clone(),
        );
        registry.register(
            "applied_commit_info",
            "The commit in force, per FleetSync (value 1)",
            metrics.applied_commit.clone(),
        );
        registry.register(
            "objects_changed",
            "Hub, Spoke and ClusterManagementAddOn objects written, by action",
            metrics.objects_changed.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            metrics.leader.clone(),
        );
        registry.register(
            "webhook_requests",
            "Requests to the push receiver, by result (accepted, ignored, unauthorized, ...)",
            metrics.webhook_requests.clone(),
        );
        Metrics {
            registry: std::sync::Arc::new(registry),
            ..metrics
        }
    }
}

impl Metrics {
    /// Counts a finished sync with its result label.
    pub fn sync_finished(&self, result: &str) {
        self.syncs
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        self.last_sync.set(now);
    }

    /// Records the commit in force for a FleetSync, replacing the one before.
    pub fn applied_commit(&self, fleetsync: &str, before: Option<&str>, commit: &str) {
        if let Some(before) = before.filter(|before| *before != commit) {
            self.applied_commit.remove(&CommitLabels {
                fleetsync: fleetsync.to_string(),
                commit: before.to_string(),
            });
        }
        self.applied_commit
            .get_or_create(&CommitLabels {
                fleetsync: fleetsync.to_string(),
                commit: commit.to_string(),
            })
            .set(1);
    }

    /// Counts an object written.
    pub fn object_changed(&self, action: Action) {
        let action = match action {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
        };
        self.objects_changed
            .get_or_create(&ActionLabels {
                action: action.to_string(),
            })
            .inc();
    }

    /// Counts a request to the push receiver with its result label.
    pub fn webhook_request(&self, result: &str) {
        self.webhook_requests
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
    }

    /// Whether this replica leads.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
