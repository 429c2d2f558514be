//! One task per key — per watched object, or per registration of one — each running with a
//! spec: started when its key appears, restarted when the spec it should run with changes,
//! stopped (cancelled, then awaited) when its key goes, and all stopped on
//! [`TaskSet::shutdown`]. A task is handed a [`CancellationToken`] and must end soon after it is
//! cancelled; whatever it does with the time it has left (leave its objects, delete them) is its
//! own business.
//!
//! [`TaskSet::ensure`] compares specs with `==`; a caller whose rule is a decision of its own
//! (the observer's lifecycle table) asks [`TaskSet::spec`] and calls [`TaskSet::start`] and
//! [`TaskSet::stop`] as the decision says. What drives a set is usually a watch:
//! [`super::watch::changes`].

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// What [`TaskSet::ensure`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskChange {
    /// No task ran for the key; one does now.
    Started,
    /// The spec changed: the task was stopped and a new one started.
    Restarted,
    /// The key wants no task any more: it was stopped.
    Stopped,
    /// Nothing to do.
    Kept,
}

/// A running task and the spec it was started with.
struct Running<S> {
    spec: S,
    stop: CancellationToken,
    handle: JoinHandle<()>,
}

/// The tasks of one loop, by key.
pub struct TaskSet<K, S> {
    /// What the tasks are (`agent`, `addon lease`), for the log of one that panicked.
    what: &'static str,
    tasks: HashMap<K, Running<S>>,
}

impl<K, S> TaskSet<K, S>
where
    K: Eq + Hash + Clone + Debug,
{
    /// An empty set of tasks that are `what`.
    pub fn new(what: &'static str) -> Self {
        TaskSet {
            what,
            tasks: HashMap::new(),
        }
    }

    /// The spec the task of `key` runs with, if one runs.
    pub fn spec(&self, key: &K) -> Option<&S> {
        self.tasks.get(key).map(|running| &running.spec)
    }

    /// Starts `task` for `key` with `spec`, once the task running for it (if any) has stopped.
    pub async fn start<F>(&mut self, key: K, spec: S, task: impl FnOnce(CancellationToken) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.stop(&key).await;
        let stop = CancellationToken::new();
        let run = task(stop.clone());
        self.spawn(key, spec, stop, run);
    }

    fn spawn<F>(&mut self, key: K, spec: S, stop: CancellationToken, run: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(run);
        self.tasks.insert(key, Running { spec, stop, handle });
    }

    /// Stops the task of `key` and waits for it to end; whether one ran.
    pub async fn stop(&mut self, key: &K) -> bool {
        let Some(running) = self.tasks.remove(key) else {
            return false;
        };
        running.stop.cancel();
        self.ended(key, running.handle).await;
        true
    }

    /// Makes the task of `key` run with `wanted` (`None`: no task): started if none runs,
    /// restarted if it runs with another spec, stopped if none is wanted. `task` starts it with
    /// the spec.
    pub async fn ensure<F>(
        &mut self,
        key: K,
        wanted: Option<S>,
        task: impl FnOnce(&S, CancellationToken) -> F,
    ) -> TaskChange
    where
        S: PartialEq,
        F: Future<Output = ()> + Send + 'static,
    {
        let running = self.spec(&key).is_some();
        match wanted {
            Some(wanted) if self.spec(&key) == Some(&wanted) => TaskChange::Kept,
            Some(wanted) => {
                self.stop(&key).await;
                let stop = CancellationToken::new();
                let run = task(&wanted, stop.clone());
                self.spawn(key, wanted, stop, run);
                if running {
                    TaskChange::Restarted
                } else {
                    TaskChange::Started
                }
            }
            None if self.stop(&key).await => TaskChange::Stopped,
            None => TaskChange::Kept,
        }
    }

    /// Makes the set run exactly the tasks `wanted` names, each with its spec: stops the others
    /// and those whose spec changed, then starts what is missing with `task`.
    pub async fn converge<F>(
        &mut self,
        wanted: impl IntoIterator<Item = (K, S)>,
        mut task: impl FnMut(&K, &S, CancellationToken) -> F,
    ) where
        S: PartialEq,
        F: Future<Output = ()> + Send + 'static,
    {
        let wanted: HashMap<K, S> = wanted.into_iter().collect();
        let stale: Vec<K> = self
            .tasks
            .iter()
            .filter(|(key, running)| wanted.get(*key) != Some(&running.spec))
            .map(|(key, _)| key.clone())
            .collect();
        for key in stale {
            self.stop(&key).await;
        }
        for (key, spec) in wanted {
            if !self.tasks.contains_key(&key) {
                let stop = CancellationToken::new();
                let run = task(&key, &spec, stop.clone());
                self.spawn(key, spec, stop, run);
            }
        }
    }

    /// Stops every task (all are cancelled first, then awaited).
    pub async fn shutdown(mut self) {
        for running in self.tasks.values() {
            running.stop.cancel();
        }
        for (key, running) in std::mem::take(&mut self.tasks) {
            self.ended(&key, running.handle).await;
        }
    }

    async fn ended(&self, key: &K, handle: JoinHandle<()>) {
        if let Err(err) = handle.await {
            warn!(tasks = self.what, ?key, %err, "a task ended abnormally");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What the tasks did, in order: `start k=spec`, `stop k=spec` (once cancelled).
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    impl Log {
        fn task(
            &self,
            key: &str,
            spec: &str,
        ) -> impl FnOnce(CancellationToken) -> futures::future::BoxFuture<'static, ()> + use<>
        {
            let log = self.clone();
            let name = format!("{key}={spec}");
            move |stop| {
                log.push(format!("start {name}"));
                Box::pin(async move {
                    stop.cancelled().await;
                    log.push(format!("stop {name}"));
                })
            }
        }

        fn push(&self, line: String) {
            self.0.lock().unwrap().push(line);
        }

        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    #[tokio::test]
    async fn a_task_starts_restarts_on_a_new_spec_and_is_stopped_and_awaited() {
        let log = Log::default();
        let mut tasks: TaskSet<String, String> = TaskSet::new("test");
        for (wanted, change) in [
            (Some("1"), TaskChange::Started),
            (Some("1"), TaskChange::Kept),
            (Some("2"), TaskChange::Restarted),
            (None, TaskChange::Stopped),
            (None, TaskChange::Kept),
        ] {
            let done = tasks
                .ensure("a".into(), wanted.map(str::to_string), |spec, stop| {
                    log.task("a", spec)(stop)
                })
                .await;
            assert_eq!(done, change, "{wanted:?}");
        }
        assert_eq!(tasks.spec(&"a".to_string()), None);
        assert_eq!(
            log.take(),
            ["start a=1", "stop a=1", "start a=2", "stop a=2"],
            "the old task has ended before the new one starts, and before stop returns"
        );
    }

    #[tokio::test]
    async fn converge_runs_exactly_the_wanted_tasks_and_shutdown_stops_them_all() {
        let log = Log::default();
        let mut tasks: TaskSet<String, String> = TaskSet::new("test");
        let wanted = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(key, spec)| (key.to_string(), spec.to_string()))
                .collect()
        };
        tasks
            .converge(wanted(&[("a", "1"), ("b", "1")]), |key, spec, stop| {
                log.task(key, spec)(stop)
            })
            .await;
        let mut started = log.take();
        started.sort();
        assert_eq!(started, ["start a=1", "start b=1"]);
        tasks
            .converge(wanted(&[("b", "2"), ("c", "1")]), |key, spec, stop| {
                log.task(key, spec)(stop)
            })
            .await;
        let mut changed = log.take();
        changed.sort();
        assert_eq!(
            changed,
            ["start b=2", "start c=1", "stop a=1", "stop b=1"],
            "a is no longer wanted, b's spec changed, c is new"
        );
        tasks.shutdown().await;
        let mut stopped = log.take();
        stopped.sort();
        assert_eq!(stopped, ["stop b=2", "stop c=1"]);
    }
}
