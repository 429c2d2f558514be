//! The watch history: the recent events a watcher resumes from, kept for a time window (as
//! kube-apiserver's watch cache keeps at least 75 s) under a hard byte ceiling, so a burst of
//! writes cannot exhaust memory. Events hold the stored bytes of their objects, shared with
//! the store's cache, not decoded copies.
//!
//! Past the window or the ceiling the oldest events go, and a watcher that needed them is
//! told its resourceVersion has expired.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Event, Expired};

/// Where the history reads the time: the system's monotonic clock, or a test's, so that "a
/// watcher 60 s behind" is data rather than waiting.
pub trait Clock: Send + Sync + Debug + 'static {
    fn now(&self) -> Instant;
}

/// The monotonic system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// How much history the store keeps.
#[derive(Debug, Clone)]
pub struct HistoryLimits {
    /// Events younger than this stay unless the ceiling is reached (kube-apiserver: 75 s).
    pub window: Duration,
    /// The most bytes of events kept, whatever their age: past it the oldest go.
    pub max_bytes: usize,
    pub clock: Arc<dyn Clock>,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        HistoryLimits {
            window: Duration::from_secs(75),
            max_bytes: 256 << 20,
            clock: Arc::new(SystemClock),
        }
    }
}

/// What one event is charged against the ceiling besides its object's bytes: the event
/// itself, its `Arc`, its slot in the window and the strings naming it. The object before the
/// change is not charged: it is the previous event's object (or was the cache's) and shares
/// those bytes.
const EVENT_OVERHEAD: usize = std::mem::size_of::<Event>() + 48;

fn cost(event: &Event) -> usize {
    event.object.len() + event.namespace.len() + event.name.len() + EVENT_OVERHEAD
}

/// The recent events of every resource, oldest first.
pub(super) struct History {
    events: VecDeque<(Instant, Arc<Event>)>,
    bytes: usize,
    limits: HistoryLimits,
    /// Highest resourceVersion whose event is no longer kept.
    compacted_rv: i64,
}

impl History {
    pub(super) fn new(limits: HistoryLimits, compacted_rv: i64) -> Self {
        History {
            events: VecDeque::new(),
            bytes: 0,
            limits,
            compacted_rv,
        }
    }

    pub(super) fn compacted_rv(&self) -> i64 {
        self.compacted_rv
    }

    /// Keeps `event` (recorded now) and lets go of what falls out of the window or the ceiling.
    pub(super) fn push(&mut self, event: Arc<Event>) {
        let now = self.limits.clock.now();
        self.bytes += cost(&event);
        self.events.push_back((now, event));
        while let Some((at, oldest)) = self.events.front() {
            let stale = now.saturating_duration_since(*at) > self.limits.window;
            if !stale && self.bytes <= self.limits.max_bytes {
                break;
            }
            self.bytes -= cost(oldest);
            self.compacted_rv = oldest.rv;
            self.events.pop_front();
        }
    }

    /// Events of resource `key` after resourceVersion `since`, or why they are gone.
    pub(super) fn since(&self, key: &str, since: i64) -> Result<Vec<Arc<Event>>, Expired> {
        if since < self.compacted_rv {
            return Err(Expired {
                requested: since,
                oldest: self.compacted_rv + 1,
            });
        }
        let start = self.events.partition_point(|(_, e)| e.rv <= since);
        Ok(self
            .events
            .range(start..)
            .filter(|(_, e)| &*e.key == key)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use bytes::Bytes;

    use super::*;
    use crate::storage::EventType;

    #[derive(Debug)]
    struct Manual(Mutex<Instant>);

    impl Clock for Manual {
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    impl Manual {
        fn advance(&self, by: Duration) {
            *self.0.lock().unwrap() += by;
        }
    }

    fn event(rv: i64, size: usize) -> Arc<Event> {
        Arc::new(Event {
            rv,
            key: Arc::from("/configmaps"),
            namespace: String::new(),
            name: String::new(),
            kind: EventType::Added,
            object: Bytes::from(vec![b' '; size]),
            prev: None,
            head: Default::default(),
        })
    }

    fn history(window: Duration, max_bytes: usize) -> (History, Arc<Manual>) {
        let clock = Arc::new(Manual(Mutex::new(Instant::now())));
        let limits = HistoryLimits {
            window,
            max_bytes,
            clock: clock.clone(),
        };
        (History::new(limits, 0), clock)
    }

    #[test]
    fn events_stay_for_the_window_and_then_expire() {
        let (mut h, clock) = history(Duration::from_secs(75), usize::MAX);
        for rv in 1..=75_000 {
            h.push(event(rv, 10));
            clock.advance(Duration::from_millis(1));
        }
        assert_eq!(h.since("/configmaps", 0).unwrap().len(), 75_000);
        clock.advance(Duration::from_secs(1));
        h.push(event(75_001, 10));
        let err = h.since("/configmaps", 0).unwrap_err();
        assert!(err.oldest > 1, "the oldest second is gone: {err:?}");
        assert!(h.since("/configmaps", 1_000).is_ok());
    }

    #[test]
    fn a_burst_past_the_ceiling_drops_the_oldest_whatever_their_age() {
        let per_event = cost(&event(1, 1000));
        let (mut h, _clock) = history(Duration::from_secs(75), 10 * per_event);
        for rv in 1..=25 {
            h.push(event(rv, 1000));
        }
        assert_eq!(h.since("/configmaps", 15).unwrap().len(), 10);
        assert_eq!(h.since("/configmaps", 14).unwrap_err().oldest, 16);
    }
}
