//! Waiting for an instant: the loops keep their deadlines as timestamps (what the decisions
//! return) and sleep until them, never polling.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// How long from `now` until `deadline`, zero if it has passed.
pub fn wait_until(deadline: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_until(deadline)).unwrap_or(Duration::ZERO)
}

/// `now + wait`, saturating at the end of time.
pub fn after(now: Timestamp, wait: Duration) -> Timestamp {
    now.checked_add(wait).unwrap_or(Timestamp::MAX)
}

/// Sleeps until `deadline` (a past one returns at once).
pub async fn sleep_until(deadline: Timestamp) {
    tokio::time::sleep(wait_until(deadline, Timestamp::now())).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn wait_until_the_deadline_never_goes_negative() {
        assert_eq!(wait_until(at(10), at(4)), Duration::from_secs(6));
        assert_eq!(wait_until(at(10), at(40)), Duration::ZERO);
    }

    #[test]
    fn after_the_end_of_time_is_the_end_of_time() {
        assert_eq!(after(at(10), Duration::from_secs(5)), at(15));
        assert_eq!(
            after(Timestamp::MAX, Duration::from_secs(5)),
            Timestamp::MAX
        );
    }
}
