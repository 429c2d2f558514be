//! The sync controller's Prometheus metrics, in a registry of their own.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::plan::Action;
use crate::runtime::metrics::ControllerMetrics;

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
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    /// The sync controller's passes, durations and retry queue, counted by its error policy.
    pub controllers: ControllerMetrics,
    syncs: Family<ResultLabels, Counter>,
    last_sync: Gauge<f64, AtomicU64>,
    applied_commit: Family<CommitLabels, Gauge>,
    objects_changed: Family<ActionLabels, Counter>,
    leader: Gauge,
    webhook_requests: Family<ResultLabels, Counter>,
}

impl Metrics {
    /// The registry the admin endpoint serves: these metrics, prefixed `fleetform_sync`.
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::with_prefix("fleetform_sync");
        self.controllers.register(&mut registry);
        registry.register("syncs", "Syncs finished, by result", self.syncs.clone());
        registry.register(
            "last_sync_timestamp_seconds",
            "When the last sync finished (Unix time)",
            self.last_sync.clone(),
        );
        registry.register(
            "applied_commit_info",
            "The commit in force, per FleetSync (value 1)",
            self.applied_commit.clone(),
        );
        registry.register(
            "objects_changed",
            "Hub, Spoke and ClusterManagementAddOn objects written, by action",
            self.objects_changed.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            self.leader.clone(),
        );
        registry.register(
            "webhook_requests",
            "Requests to the push receiver, by result (accepted, ignored, unauthorized, ...)",
            self.webhook_requests.clone(),
        );
        registry
    }

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
}
