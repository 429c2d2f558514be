//! The Prometheus metrics every controller has, counted by its error policy
//! ([`super::controller::ErrorPolicy`]): reconciles and their durations by controller and result
//! (`success`, or the [`Category`](super::error::Category) of the failure), and the objects
//! waiting for a retry after a failed reconcile.
//!
//! A component registers them in its own registry ([`ControllerMetrics::register`]); unregistered
//! they count into nothing, which is what a controller without an admin endpoint has.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The result label of a reconcile that went through.
pub const SUCCESS: &str = "success";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// A histogram of seconds from 1 ms to about 30 s.
pub fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

type Durations = Family<ReconcileLabels, Histogram, fn() -> Histogram>;

/// What every controller counts; cheap to clone (every metric is shared).
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    reconciles: Family<ReconcileLabels, Counter>,
    durations: Durations,
    retry_queue: Family<ControllerLabels, Gauge>,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        ControllerMetrics {
            reconciles: Family::default(),
            durations: Family::new_with_constructor(seconds_histogram),
            retry_queue: Family::default(),
        }
    }
}

impl ControllerMetrics {
    /// Registers them in `registry` (under its prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "reconciles",
            "Reconciles finished, by controller and result (success, or the failure's category)",
            self.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "How long reconciles took, by controller and result",
            self.durations.clone(),
        );
        registry.register(
            "retry_queue_depth",
            "Objects waiting for a retry after a failed reconcile, by controller",
            self.retry_queue.clone(),
        );
    }

    /// Counts a reconcile of `controller` that ended with `result` after `took`.
    pub fn reconciled(&self, controller: &str, result: &str, took: Duration) {
        let labels = ReconcileLabels {
            controller: controller.to_string(),
            result: result.to_string(),
        };
        self.reconciles.get_or_create(&labels).inc();
        self.durations
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// How many objects of `controller` wait for a retry.
    pub fn retry_queue_depth(&self, controller: &str, depth: usize) {
        self.retry_queue
            .get_or_create(&ControllerLabels {
                controller: controller.to_string(),
            })
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }
}
