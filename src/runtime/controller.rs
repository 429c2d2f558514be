//! The one error policy of fleetform's controllers (kube-runtime `Controller`s), and what is
//! done with their outcomes.
//!
//! After a failed pass over an object: a lost write race (409) is tried again at once and
//! quietly, since the next pass reads afresh; any other failure is tried again after a backoff
//! that doubles with each failure in a row, and is logged as a warning when it is news (the
//! object's first failure, or another error than its last), at debug level when it repeats. A
//! pass that goes through forgets the object's failures.
//!
//! The log lines carry the controller's name (`controller`) and the object's (`object`). The
//! policy also counts ([`super::metrics`]): every pass of [`ErrorPolicy::measured`] by result and
//! duration, and the objects waiting for a retry.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::Resource;
use kube::runtime::Controller;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{ObjectRef, Store};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::error::Failure;
use super::metrics::{ControllerMetrics, SUCCESS};

/// Namespace (if any) and name: an object of the controller's kind.
type ObjectKey = (Option<String>, String);

/// What `Controller::run` yields for each pass.
type Outcome<K, E, Q> = Result<(ObjectRef<K>, Action), controller::Error<E, Q>>;

/// An object's failed passes in a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// How many passes in a row failed (conflicts not counted).
    pub passes: u32,
    /// The last failure, as it reads.
    pub last: String,
}

/// The error policy of one controller, with its memory of the objects that are failing.
#[derive(Debug)]
pub struct ErrorPolicy {
    controller: &'static str,
    first: Duration,
    max: Duration,
    failing: Mutex<HashMap<ObjectKey, Failing>>,
    metrics: ControllerMetrics,
}

impl ErrorPolicy {
    /// The policy of the controller named `controller` in logs (`accept loop`, `lifecycle
    /// reconciler`): a failure is tried again after `first`, doubling up to `max`.
    pub fn new(controller: &'static str, first: Duration, max: Duration) -> Arc<Self> {
        Self::counted(controller, first, max, &ControllerMetrics::default())
    }

    /// [`ErrorPolicy::new`], counting into `metrics`.
    pub fn counted(
        controller: &'static str,
        first: Duration,
        max: Duration,
        metrics: &ControllerMetrics,
    ) -> Arc<Self> {
        // Every controller's queue shows, empty or not.
        metrics.retry_queue_depth(controller, 0);
        Arc::new(ErrorPolicy {
            controller,
            first,
            max,
            failing: Mutex::default(),
            metrics: metrics.clone(),
        })
    }

    fn failing(&self) -> MutexGuard<'_, HashMap<ObjectKey, Failing>> {
        // A pass that panicked holding the lock left a count, nothing worth refusing.
        self.failing.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the failures of the object `key`, keeping the retry queue's count.
    fn forget(&self, key: &ObjectKey) -> Option<Failing> {
        let mut failing = self.failing();
        let forgotten = failing.remove(key);
        if forgotten.is_some() {
            self.metrics
                .retry_queue_depth(self.controller, failing.len());
        }
        forgotten
    }

    /// The reconcile to give `Controller::run`: `reconcile`, each pass counted by its result
    /// (success, or the failure's category) and timed.
    pub fn measured<K, C, E, F, Fut>(
        self: &Arc<Self>,
        mut reconcile: F,
    ) -> impl FnMut(Arc<K>, Arc<C>) -> BoxFuture<'static, Result<Action, E>> + use<K, C, E, F, Fut>
    where
        F: FnMut(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Failure + Send + 'static,
    {
        let policy = self.clone();
        move |object, ctx| {
            let started = Instant::now();
            let pass = reconcile(object, ctx);
            let policy = policy.clone();
            async move {
                let result = pass.await;
                let label = match &result {
                    Ok(_) => SUCCESS,
                    Err(err) => err.kube().map_or("Other", |kube| kube.category().as_str()),
                };
                policy
                    .metrics
                    .reconciled(policy.controller, label, started.elapsed());
                result
            }
            .boxed()
        }
    }

    /// How long the next pass waits after `passes` failed in a row.
    fn backoff(&self, passes: u32) -> Duration {
        self.first
            .saturating_mul(2u32.saturating_pow(passes.saturating_sub(1).min(16)))
            .min(self.max)
    }

    /// What follows a failed pass over `object`, counted and logged as the module says.
    pub fn requeue<K: Resource>(&self, object: &K, err: &impl Failure) -> Action {
        let name = object.meta().name.clone().unwrap_or_default();
        if err.is_conflict() {
            debug!(controller = self.controller, object = name, %err, "lost a write race; again from a fresh read");
            return Action::requeue(Duration::ZERO);
        }
        let message = err.to_string();
        let (passes, news) = {
            let mut failing = self.failing();
            let entry = failing.entry(key(object)).or_insert(Failing {
                passes: 0,
                last: String::new(),
            });
            entry.passes = entry.passes.saturating_add(1);
            let news = entry.last != message;
            entry.last = message;
            let passes = entry.passes;
            self.metrics
                .retry_queue_depth(self.controller, failing.len());
            (passes, news)
        };
        let wait = self.backoff(passes);
        if news {
            warn!(controller = self.controller, object = name, %err, "failed; retrying in {wait:?} and backing off");
        } else {
            debug!(controller = self.controller, object = name, %err, passes, "failed again; retrying in {wait:?}");
        }
        Action::requeue(wait)
    }

    /// Whether `err` is news for `object`: no conflict, and not the failure its last pass had.
    /// A controller that reports failures on the object itself reports only news.
    pub fn is_news<K: Resource>(&self, object: &K, err: &impl Failure) -> bool {
        !err.is_conflict()
            && self
                .failing()
                .get(&key(object))
                .is_none_or(|failing| failing.last != err.to_string())
    }

    /// Forgets `object`'s failures after a pass that went through: what they were, if any.
    pub fn recovered<K: Resource>(&self, object: &K) -> Option<Failing> {
        self.forget(&key(object))
    }

    /// The error policy to give `Controller::run`.
    pub fn policy<K, E, C>(self: &Arc<Self>) -> impl Fn(Arc<K>, &E, Arc<C>) -> Action + use<K, E, C>
    where
        K: Resource,
        E: Failure,
    {
        let policy = self.clone();
        move |object: Arc<K>, err: &E, _: Arc<C>| policy.requeue(&*object, err)
    }

    /// What to do with each outcome of `Controller::run`: forget the failures of an object
    /// that went through; log what the policy has not (a watch failing, say), but not objects
    /// deleted while queued.
    pub fn outcomes<K, E, Q>(
        self: &Arc<Self>,
    ) -> impl FnMut(Outcome<K, E, Q>) -> std::future::Ready<()> + use<K, E, Q>
    where
        K: Resource,
        E: std::error::Error + 'static,
        Q: std::error::Error + 'static,
    {
        let policy = self.clone();
        move |outcome| {
            match outcome {
                Ok((object, _)) => {
                    policy.forget(&(object.namespace.clone(), object.name.clone()));
                }
                Err(
                    controller::Error::ObjectNotFound(_) | controller::Error::ReconcilerFailed(..),
                ) => {}
                Err(err) => warn!(controller = policy.controller, %err, "controller"),
            }
            std::future::ready(())
        }
    }
}

impl ErrorPolicy {
    /// Runs `controller` until `shutdown`: every pass `reconcile` with `ctx`, measured, its
    /// failures retried and logged by this policy.
    pub async fn drive<K, C, E, F, Fut>(
        self: &Arc<Self>,
        controller: Controller<K>,
        reconcile: F,
        ctx: Arc<C>,
        shutdown: CancellationToken,
    ) where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Clone + std::fmt::Debug + Eq + std::hash::Hash + Unpin,
        C: Send + Sync + 'static,
        E: Failure + Send + 'static,
        F: FnMut(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        controller
            .graceful_shutdown_on(shutdown.cancelled_owned())
            .run(self.measured(reconcile), self.policy(), ctx)
            .for_each(self.outcomes())
            .await;
    }
}

/// The objects of `store` that `matches`: what a controller passes over again when something
/// they depend on changes.
pub fn refs_where<K>(store: &Store<K>, matches: impl Fn(&K) -> bool) -> Vec<ObjectRef<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash,
{
    store
        .state()
        .iter()
        .filter(|object| matches(object))
        .map(|object| ObjectRef::from_obj(object.as_ref()))
        .collect()
}

fn key<K: Resource>(object: &K) -> ObjectKey {
    let meta = object.meta();
    (
        meta.namespace.clone(),
        meta.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::error::KubeError;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn object(name: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.to_string());
        object.metadata.namespace = Some("ns".to_string());
        object
    }

    fn failed(code: u16, message: &str) -> KubeError {
        let status = kube::core::Status::failure(message, "Failed").with_code(code);
        KubeError::on("ConfigMap ns/a", "update")(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn a_lost_write_race_is_retried_at_once_and_not_counted() {
        let policy = ErrorPolicy::new("test", Duration::from_secs(1), Duration::from_secs(60));
        let a = object("a");
        assert_eq!(
            policy.requeue(&a, &failed(409, "conflict")),
            Action::requeue(Duration::ZERO)
        );
        assert_eq!(policy.recovered(&a), None);
    }

    #[test]
    fn failures_in_a_row_back_off_up_to_the_limit_and_a_pass_that_goes_through_resets_them() {
        let policy = ErrorPolicy::new("test", Duration::from_secs(1), Duration::from_secs(5));
        let (a, b) = (object("a"), object("b"));
        let actions: Vec<Action> = (0..5)
            .map(|_| policy.requeue(&a, &failed(500, "boom")))
            .collect();
        assert_eq!(
            actions,
            [1, 2, 4, 5, 5].map(|seconds| Action::requeue(Duration::from_secs(seconds)))
        );
        assert_eq!(
            policy.requeue(&b, &failed(500, "boom")),
            Action::requeue(Duration::from_secs(1)),
            "each object backs off on its own"
        );
        let failing = policy.recovered(&a).expect("a was failing");
        assert_eq!(failing.passes, 5);
        assert!(failing.last.contains("boom"), "{}", failing.last);
        assert_eq!(
            policy.requeue(&a, &failed(500, "boom")),
            Action::requeue(Duration::from_secs(1))
        );
    }

    #[test]
    fn only_another_failure_than_the_last_is_news() {
        let policy = ErrorPolicy::new("test", Duration::from_secs(1), Duration::from_secs(5));
        let a = object("a");
        assert!(policy.is_news(&a, &failed(500, "boom")));
        policy.requeue(&a, &failed(500, "boom"));
        assert!(!policy.is_news(&a, &failed(500, "boom")));
        assert!(policy.is_news(&a, &failed(403, "forbidden")));
        assert!(!policy.is_news(&a, &failed(409, "conflict")));
    }

    #[tokio::test]
    async fn each_measured_pass_is_counted_by_its_result_and_failing_objects_wait_in_the_retry_queue()
     {
        let metrics = ControllerMetrics::default();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let policy = ErrorPolicy::counted(
            "test",
            Duration::from_secs(1),
            Duration::from_secs(5),
            &metrics,
        );
        let mut reconcile = policy.measured(|object: Arc<ConfigMap>, _: Arc<()>| async move {
            match object.metadata.name.as_deref() {
                Some("a") => Ok(Action::await_change()),
                _ => Err(failed(403, "forbidden")),
            }
        });
        reconcile(Arc::new(object("a")), Arc::new(()))
            .await
            .unwrap();
        let err = reconcile(Arc::new(object("b")), Arc::new(()))
            .await
            .unwrap_err();
        policy.requeue(&object("b"), &err);
        let text = crate::runtime::admin::encode(&registry);
        for line in [
            "reconciles_total{controller=\"test\",result=\"success\"} 1",
            "reconciles_total{controller=\"test\",result=\"Forbidden\"} 1",
            "reconcile_duration_seconds_count{controller=\"test\",result=\"Forbidden\"} 1",
            "retry_queue_depth{controller=\"test\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        policy.recovered(&object("b"));
        let text = crate::runtime::admin::encode(&registry);
        assert!(
            text.lines()
                .any(|l| l == "retry_queue_depth{controller=\"test\"} 0"),
            "{text}"
        );
    }
}
