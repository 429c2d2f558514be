//! What a hub process counts, served at `/metrics`: prefixed `fleetform_hub`, the hub loops'
//! reconciles, durations and retry queues ([`ControllerMetrics`]), CSRs approved and denied,
//! how late lease expiry was judged, and whether this replica leads; prefixed
//! `fleetform_rollout`, where each hub's rollout stands, and `fleetform_addon_rollout`, where
//! each addon's own rollout on each hub stands ([`RolloutMetrics`]).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::reconciler::{ReconcilerMetrics, RolloutMetrics};
use crate::runtime::metrics::{ControllerMetrics, seconds_histogram};

/// Which CSRs a decision was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsrKind {
    /// A spoke agent's registration or renewal.
    Registration,
    /// An addon's registration.
    Addon,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CsrLabels {
    kind: &'static str,
    decision: &'static str,
}

/// The hub's metrics; cheap to clone (every metric is shared). Unregistered (the default),
/// they count into nothing.
#[derive(Clone, Debug)]
pub struct HubMetrics {
    /// Counted by each controller's error policy.
    pub controllers: ControllerMetrics,
    /// Counted by the Hub controller as it runs each hub's rollout.
    pub rollout: RolloutMetrics,
    csrs: Family<CsrLabels, Counter>,
    lease_expiry_lag: Histogram,
    leader: Gauge,
}

impl Default for HubMetrics {
    fn default() -> Self {
        HubMetrics {
            controllers: ControllerMetrics::default(),
            rollout: RolloutMetrics::default(),
            csrs: Family::default(),
            lease_expiry_lag: seconds_histogram(),
            leader: Gauge::default(),
        }
    }
}

impl HubMetrics {
    /// The registry the admin endpoint serves: these metrics, prefixed `fleetform_hub`, and the
    /// rollouts', prefixed `fleetform_rollout` and `fleetform_addon_rollout`.
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::default();
        self.rollout.register(&mut registry);
        let hub = registry.sub_registry_with_prefix("fleetform_hub");
        self.controllers.register(hub);
        hub.register(
            "csrs_decided",
            "CSRs approved or denied, by kind (registration, addon) and decision",
            self.csrs.clone(),
        );
        hub.register(
            "lease_expiry_lag_seconds",
            "How long after its lease's deadline a cluster was marked Unknown",
            self.lease_expiry_lag.clone(),
        );
        hub.register(
            "leader",
            "1 while this replica holds the leader Lease and runs the hub loops",
            self.leader.clone(),
        );
        registry
    }

    /// Counts a CSR the hub approved or denied.
    pub fn csr_decided(&self, kind: CsrKind, approved: bool) {
        let kind = match kind {
            CsrKind::Registration => "registration",
            CsrKind::Addon => "addon",
        };
        let decision = if approved { "approved" } else { "denied" };
        self.csrs.get_or_create(&CsrLabels { kind, decision }).inc();
    }

    /// A cluster was marked Unknown `lag` after its lease's deadline.
    pub fn lease_expired(&self, lag: Duration) {
        self.lease_expiry_lag.observe(lag.as_secs_f64());
    }

    /// What the lifecycle reconciler counts: its passes and the rollouts.
    pub fn reconciler(&self) -> ReconcilerMetrics {
        ReconcilerMetrics {
            controllers: self.controllers.clone(),
            rollout: self.rollout.clone(),
        }
    }

    /// Whether this replica leads.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }
}
