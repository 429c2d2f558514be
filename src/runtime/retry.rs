//! Retrying one step of a loop that is not a controller (an agent registering its cluster,
//! renewing its lease): after a failure the step waits a backoff that doubles with each failure
//! in a row up to a bound, the failure is logged as a warning when it is news (the step's first
//! failure, or another error than its last) and at debug level while it repeats, and the step's
//! recovery is said once. A step failing for good (its ManagedCluster deleted on the hub, its
//! rights gone) then says so once and asks the server ever more rarely, instead of a warning a
//! second.

use std::time::Duration;

use tracing::{debug, info, warn};

/// One step's failures in a row.
#[derive(Debug)]
pub struct Retry {
    /// The step's failures as they are said.
    said: SaidOnce,
    first: Duration,
    max: Duration,
    failures: u32,
}

impl Retry {
    /// The step `step` about `object`, waiting `first` after its first failure, doubling up to
    /// `max`.
    pub fn new(step: &'static str, object: &str, first: Duration, max: Duration) -> Self {
        Retry {
            said: SaidOnce::new(step, object).again(format!(
                "trying again with a backoff (up to {} s)",
                max.as_secs()
            )),
            first,
            max,
            failures: 0,
        }
    }

    /// The step failed with `err`: logs it if it is news and returns how long to wait before
    /// trying again.
    pub fn failed(&mut self, err: &dyn std::fmt::Display) -> Duration {
        let wait = self.backoff(self.failures);
        self.failures = self.failures.saturating_add(1);
        self.said.failed(err);
        wait
    }

    /// The step went through: says so once if it was failing.
    pub fn succeeded(&mut self) {
        self.said.succeeded();
        self.failures = 0;
    }

    /// How long to wait after `failures` failures before this one.
    fn backoff(&self, failures: u32) -> Duration {
        self.first
            .checked_mul(2u32.saturating_pow(failures))
            .unwrap_or(self.max)
            .min(self.max)
    }
}

/// One step of a loop that tries it again at the next change it sees, not after a wait (an
/// agent writing its cluster's status): its failure is said as a warning when it is news and at
/// debug level while it repeats, and its recovery once, as [`Retry`] says them. Two changes in a
/// row after the cluster was deleted said the same warning twice.
#[derive(Debug)]
pub struct SaidOnce {
    /// What the step does, as the log says it (`registering the ManagedCluster`).
    step: &'static str,
    /// What the step is about, as the log names it (`object` field: a cluster, a Secret).
    object: String,
    /// How the step is tried again, as the warning says it.
    again: String,
    last: Option<String>,
}

impl SaidOnce {
    /// The step `step` about `object`.
    pub fn new(step: &'static str, object: &str) -> Self {
        SaidOnce {
            step,
            object: object.to_string(),
            again: "tried again at the next change".to_string(),
            last: None,
        }
    }

    /// This step, tried again as `again` says (a [`Retry`]'s backoff).
    fn again(self, again: String) -> Self {
        SaidOnce { again, ..self }
    }

    /// The step failed with `err`: logs it if it is news.
    pub fn failed(&mut self, err: &dyn std::fmt::Display) {
        let text = err.to_string();
        if self.last.as_deref() == Some(text.as_str()) {
            debug!(
                object = self.object,
                step = self.step,
                err = text,
                "still failing"
            );
        } else {
            warn!(
                object = self.object,
                err = text,
                "{}; {}, said again only if the error changes",
                self.step,
                self.again
            );
            self.last = Some(text);
        }
    }

    /// The step went through: says so once if it was failing.
    pub fn succeeded(&mut self) {
        if self.last.take().is_some() {
            info!(object = self.object, "{}: works again", self.step);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_failing_in_a_row_waits_ever_longer_up_to_its_bound_and_starts_over_once_it_works() {
        let mut retry = Retry::new(
            "renewing",
            "c1",
            Duration::from_secs(1),
            Duration::from_secs(60),
        );
        let waits: Vec<u64> = (0..9).map(|_| retry.failed(&"403").as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        retry.succeeded();
        assert_eq!(retry.failed(&"403"), Duration::from_secs(1));
    }
}
