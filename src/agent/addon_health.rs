//! Addon health from addon leases (seed 001, DESIGN §4.3).
//!
//! Each addon renews a Lease named after itself in its install namespace on its own spoke. The
//! agent watches those leases and turns each into the addon's Available condition on the hub:
//! True (`ManagedClusterAddOnLeaseUpdated`) while the lease was renewed within the grace period,
//! False (`ManagedClusterAddOnLeaseUpdateStopped`) once it was not, Unknown
//! (`ManagedClusterAddOnLeaseNotFound`) while there is no lease. The grace period is OCM's: five
//! addon lease durations of 60 seconds, whatever the addon's own lease says, and the lease counts
//! as renewed up to (not including) `renewTime + grace`.
//!
//! The condition is written to the hub only when it changes ([`needs_hub_write`]), so addon
//! liveness costs the hub nothing while it holds. Addons in `Customized` health mode report their
//! own health and get no decision here. This module decides; it must not read leases, arm timers
//! or write conditions.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::addon::HealthCheckMode;
use crate::api::vocabulary::{
    ADDON_CONDITION_AVAILABLE, REASON_ADDON_LEASE_NOT_FOUND, REASON_ADDON_LEASE_UPDATE_STOPPED,
    REASON_ADDON_LEASE_UPDATED, STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN,
};

/// The lease duration OCM assumes for every addon lease.
pub const ADDON_LEASE_DURATION: Duration = Duration::from_secs(60);
/// How many addon lease durations may pass without a renewal before the addon is unavailable.
pub const ADDON_LEASE_DURATION_TIMES: u32 = 5;

/// The grace an addon lease gets: five times `lease_duration` (60 s in production; integration
/// tests shorten it, as OCM's do).
pub fn addon_grace_period(lease_duration: Duration) -> Duration {
    lease_duration.saturating_mul(ADDON_LEASE_DURATION_TIMES)
}

/// An addon's health at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct AddonHealth {
    /// The Available condition the addon should have.
    pub available: Condition,
    /// When that condition would change by itself (a fresh lease going stale), so the loop arms
    /// one timer instead of polling. `None` when only a lease event can change it.
    pub changes_at: Option<Timestamp>,
}

/// Judges an addon from its lease at `now`. `lease` is the Lease named after the addon in its
/// install namespace, `None` if there is none. Returns `None` for `Customized` health mode: the
/// addon reports its own condition. A lease that was never renewed (no `renewTime`) counts as
/// stale.
pub fn judge_addon_lease(
    addon: &str,
    mode: HealthCheckMode,
    lease: Option<&Lease>,
    grace: Duration,
    now: Timestamp,
) -> Option<AddonHealth> {
    if mode == HealthCheckMode::Customized {
        return None;
    }
    let Some(lease) = lease else {
        return Some(AddonHealth {
            available: condition(
                STATUS_UNKNOWN,
                REASON_ADDON_LEASE_NOT_FOUND,
                format!("The status of {addon} add-on is unknown."),
                now,
            ),
            changes_at: None,
        });
    };
    let stale_at = lease
        .spec
        .as_ref()
        .and_then(|spec| spec.renew_time.as_ref())
        .map(|renewed| renewed.0.checked_add(grace).unwrap_or(Timestamp::MAX));
    Some(match stale_at {
        Some(stale_at) if now < stale_at => AddonHealth {
            available: condition(
                STATUS_TRUE,
                REASON_ADDON_LEASE_UPDATED,
                format!("{addon} add-on is available."),
                now,
            ),
            changes_at: Some(stale_at),
        },
        _ => AddonHealth {
            available: condition(
                STATUS_FALSE,
                REASON_ADDON_LEASE_UPDATE_STOPPED,
                format!("{addon} add-on is not available."),
                now,
            ),
            changes_at: None,
        },
    })
}

fn condition(status: &str, reason: &str, message: String, now: Timestamp) -> Condition {
    Condition {
        type_: ADDON_CONDITION_AVAILABLE.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: None,
        last_transition_time: Time(now),
    }
}

/// Whether `desired` must be written to the hub given the addon's `current` conditions: only
/// when the Available condition is missing or its status or reason differ. The message and
/// transition time alone never cause a write. (OCM compares status only; comparing the reason
/// too lets the agent replace the Unknown the hub wrote for an unreachable cluster with its own
/// Unknown once it knows better, at the cost of one write.)
pub fn needs_hub_write(current: &[Condition], desired: &Condition) -> bool {
    match crate::api::find_condition(current, &desired.type_) {
        Some(existing) => existing.status != desired.status || existing.reason != desired.reason,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn lease(renewed: Option<i64>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                renew_time: renewed.map(|seconds| MicroTime(at(seconds))),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    const GRACE: Duration = Duration::from_secs(300);

    fn judge(lease: Option<&Lease>, now: i64) -> AddonHealth {
        judge_addon_lease(
            "observability",
            HealthCheckMode::Lease,
            lease,
            GRACE,
            at(now),
        )
        .unwrap()
    }

    #[test]
    fn grace_is_five_addon_lease_durations() {
        assert_eq!(addon_grace_period(ADDON_LEASE_DURATION), GRACE);
        assert_eq!(
            addon_grace_period(Duration::from_secs(1)),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn renewed_lease_makes_the_addon_available_until_the_grace_runs_out() {
        let health = judge(Some(&lease(Some(1_000))), 1_299);
        assert_eq!(health.available.status, STATUS_TRUE);
        assert_eq!(health.available.reason, REASON_ADDON_LEASE_UPDATED);
        assert_eq!(
            health.available.message,
            "observability add-on is available."
        );
        assert_eq!(health.changes_at, Some(at(1_300)));
    }

    #[test]
    fn stale_lease_makes_the_addon_unavailable_at_exactly_the_grace() {
        let health = judge(Some(&lease(Some(1_000))), 1_300);
        assert_eq!(health.available.status, STATUS_FALSE);
        assert_eq!(health.available.reason, REASON_ADDON_LEASE_UPDATE_STOPPED);
        assert_eq!(
            health.available.message,
            "observability add-on is not available."
        );
        assert_eq!(health.changes_at, None, "only a renewal brings it back");
    }

    #[test]
    fn never_renewed_lease_is_stale() {
        let health = judge(Some(&lease(None)), 0);
        assert_eq!(health.available.status, STATUS_FALSE);
        let no_spec = Lease::default();
        assert_eq!(judge(Some(&no_spec), 0).available.status, STATUS_FALSE);
    }

    #[test]
    fn missing_lease_makes_the_addon_unknown() {
        let health = judge(None, 5);
        assert_eq!(health.available.type_, ADDON_CONDITION_AVAILABLE);
        assert_eq!(health.available.status, STATUS_UNKNOWN);
        assert_eq!(health.available.reason, REASON_ADDON_LEASE_NOT_FOUND);
        assert_eq!(
            health.available.message,
            "The status of observability add-on is unknown."
        );
        assert_eq!(health.changes_at, None);
    }

    #[test]
    fn customized_health_mode_gets_no_decision() {
        for lease in [None, Some(lease(Some(0)))] {
            assert_eq!(
                judge_addon_lease(
                    "a",
                    HealthCheckMode::Customized,
                    lease.as_ref(),
                    GRACE,
                    at(1)
                ),
                None
            );
        }
    }

    #[test]
    fn lease_renewed_far_in_the_future_does_not_overflow() {
        let far = Lease {
            spec: Some(LeaseSpec {
                renew_time: Some(MicroTime(Timestamp::MAX)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let health = judge(Some(&far), 0);
        assert_eq!(health.available.status, STATUS_TRUE);
        assert_eq!(health.changes_at, Some(Timestamp::MAX));
    }

    #[test]
    fn hub_is_written_only_when_status_or_reason_changes() {
        let available = judge(Some(&lease(Some(0))), 10).available;
        assert!(needs_hub_write(&[], &available), "no condition yet");

        let later = judge(Some(&lease(Some(100))), 200).available;
        assert!(
            !needs_hub_write(std::slice::from_ref(&available), &later),
            "same status and reason at another time"
        );

        let stale = judge(Some(&lease(Some(0))), 400).available;
        assert!(needs_hub_write(std::slice::from_ref(&available), &stale));

        let mut hub_unknown = judge(None, 0).available;
        hub_unknown.reason = "ManagedClusterLeaseUpdateStopped".into();
        let agent_unknown = judge(None, 1).available;
        assert!(needs_hub_write(&[hub_unknown], &agent_unknown));
    }
}
