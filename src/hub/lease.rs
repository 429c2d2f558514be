//! Lease expiry on the hub (seed 000, DESIGN §3 and §4.2).
//!
//! A spoke's agent renews `managed-cluster-lease` in its cluster namespace every
//! `leaseDurationSeconds`. The hub gives it five durations: at exactly
//! `renewTime + 5 × leaseDurationSeconds` the cluster's Available condition becomes Unknown
//! (`ManagedClusterLeaseUpdateStopped`), and every addon of the cluster follows with Unknown. The
//! Available condition, whoever set it, also decides the availability taints placements see.
//!
//! This module owns those decisions and the one instant the loop has to wake up next, so the loop
//! arms one timer per cluster instead of polling. It must not read leases or clocks itself, and it
//! leaves the True/False statuses to the agent: the hub only ever concludes Unknown.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::ManagedCluster;
use crate::api::cluster::{DEFAULT_LEASE_DURATION_SECONDS, Taint};
use crate::api::fleet::TaintEffect;
use crate::api::vocabulary::{
    ADDON_CONDITION_AVAILABLE, CONDITION_AVAILABLE, CONDITION_CLOCK_SYNCED,
    REASON_LEASE_UPDATE_STOPPED, STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN, TAINT_UNAVAILABLE,
    TAINT_UNREACHABLE,
};

/// How many lease durations the hub waits for a renewal before it stops vouching for a cluster.
pub const LEASE_DURATION_TIMES: u32 = 5;

/// Message of the Available=Unknown condition, as OCM's hub writes it.
pub const LEASE_UPDATE_STOPPED_MESSAGE: &str = "Registration agent stopped updating its lease.";

/// What the hub concludes from a cluster's lease at one instant.
#[derive(Clone, Debug, PartialEq)]
pub enum LeaseVerdict {
    /// The lease is fresh: nothing to write; wake up at `deadline` to look again (unless a renewal
    /// arrives first and moves the deadline).
    Fresh { deadline: Timestamp },
    /// The deadline has passed: the cluster's Available condition becomes `unknown` (and its addons
    /// follow, see [`addon_unknown_condition`]). No timer: only a renewal can change this.
    Expired {
        deadline: Timestamp,
        unknown: Condition,
    },
    /// The hub does not accept this cluster, so its lease means nothing (seed 000: only accepted
    /// clusters are checked).
    NotAccepted,
}

impl LeaseVerdict {
    /// The instant the loop must wake up for this cluster, if any.
    pub fn wake_at(&self) -> Option<Timestamp> {
        match self {
            LeaseVerdict::Fresh { deadline } => Some(*deadline),
            LeaseVerdict::Expired { .. } | LeaseVerdict::NotAccepted => None,
        }
    }
}

/// The grace a cluster gets between renewals: five lease durations. A duration that is unset,
/// zero or negative means OCM's default of 60 seconds, as it does for the agent.
pub fn grace_period(lease_duration_seconds: i32) -> Duration {
    let seconds = if lease_duration_seconds > 0 {
        lease_duration_seconds
    } else {
        DEFAULT_LEASE_DURATION_SECONDS
    };
    Duration::from_secs(u64::from(seconds.unsigned_abs())) * LEASE_DURATION_TIMES
}

/// The instant the hub stops vouching for a cluster whose lease was last renewed at `renewed`:
/// `renewed + 5 × leaseDurationSeconds`.
pub fn lease_deadline(renewed: Timestamp, lease_duration_seconds: i32) -> Timestamp {
    renewed
        .checked_add(grace_period(lease_duration_seconds))
        .unwrap_or(Timestamp::MAX)
}

/// Judges a cluster's lease at `now`.
///
/// `renewed` is the lease's `spec.renewTime`. A cluster with no lease yet should be given the
/// instant the hub first saw it accepted, so that a new cluster gets the same five durations to
/// show up that OCM gives it. `lease_duration_seconds` is the ManagedCluster's (the agent reads the
/// same field). The deadline itself counts as expired, as in OCM (`!now.Before(deadline)`).
pub fn judge_lease(
    accepted: bool,
    renewed: Timestamp,
    lease_duration_seconds: i32,
    now: Timestamp,
) -> LeaseVerdict {
    if !accepted {
        return LeaseVerdict::NotAccepted;
    }
    let deadline = lease_deadline(renewed, lease_duration_seconds);
    if now < deadline {
        LeaseVerdict::Fresh { deadline }
    } else {
        LeaseVerdict::Expired {
            deadline,
            unknown: cluster_unknown_condition(now),
        }
    }
}

/// [`judge_lease`] for a ManagedCluster and its `managed-cluster-lease` (`None` if the agent has
/// not created it yet). The last renewal is the lease's `renewTime`; without one, the lease's
/// creation, else the cluster's, so a new cluster gets its five durations to report; failing
/// all of those, `now`.
pub fn judge_cluster_lease(
    cluster: &ManagedCluster,
    lease: Option<&Lease>,
    now: Timestamp,
) -> LeaseVerdict {
    let renewed = lease
        .and_then(|lease| lease.spec.as_ref()?.renew_time.as_ref().map(|time| time.0))
        .or_else(|| {
            lease.and_then(|lease| {
                lease
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|time| time.0)
            })
        })
        .or_else(|| {
            cluster
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|time| time.0)
        })
        .unwrap_or(now);
    judge_lease(
        cluster.hub_accepts_client(),
        renewed,
        cluster.lease_duration_seconds(),
        now,
    )
}

/// Whether a lease renewal the hub sees at `now` says the cluster's clock agrees with the hub's:
/// OCM's clock sync check, the renewal time within one lease duration either side of `now`.
pub fn clock_synced(renewed: Timestamp, lease_duration_seconds: i32, now: Timestamp) -> bool {
    let duration = Duration::from_secs(u64::try_from(lease_duration_seconds.max(1)).unwrap_or(1));
    let apart = if now >= renewed {
        now.duration_since(renewed)
    } else {
        renewed.duration_since(now)
    };
    Duration::try_from(apart).is_ok_and(|apart| apart < duration)
}

/// The ManagedCluster's `ManagedClusterConditionClockSynced`, with OCM's reasons and messages
/// (placement and OCM's tools read it).
pub fn clock_synced_condition(synced: bool, now: Timestamp) -> Condition {
    let (status, reason, message) = if synced {
        (
            STATUS_TRUE,
            "ManagedClusterClockSynced",
            "The clock of the managed cluster is synced with the hub.",
        )
    } else {
        (
            STATUS_FALSE,
            "ManagedClusterClockOutOfSync",
            "The clock of hub and agent is out of sync. This may cause the Unknown status and affect agent functionalities.",
        )
    };
    Condition {
        type_: CONDITION_CLOCK_SYNCED.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: None,
        last_transition_time: Time(now),
    }
}

/// The cluster's Available=Unknown condition the hub writes once the lease has stopped.
pub fn cluster_unknown_condition(now: Timestamp) -> Condition {
    Condition {
        type_: CONDITION_AVAILABLE.to_string(),
        status: STATUS_UNKNOWN.to_string(),
        reason: REASON_LEASE_UPDATE_STOPPED.to_string(),
        message: LEASE_UPDATE_STOPPED_MESSAGE.to_string(),
        observed_generation: None,
        last_transition_time: Time(now),
    }
}

/// The Available condition every addon of a cluster gets while the cluster's own Available
/// condition is Unknown: Unknown too, carrying the cluster's reason and message so that whoever
/// reads the addon learns why (DESIGN §4.2; seed 001's "update the status of all addons to
/// unknown"). `None` when the cluster is not Unknown: then the agent owns the addon's condition.
pub fn addon_unknown_condition(cluster_available: &Condition, now: Timestamp) -> Option<Condition> {
    (cluster_available.status == STATUS_UNKNOWN).then(|| Condition {
        type_: ADDON_CONDITION_AVAILABLE.to_string(),
        status: STATUS_UNKNOWN.to_string(),
        reason: cluster_available.reason.clone(),
        message: cluster_available.message.clone(),
        observed_generation: None,
        last_transition_time: Time(now),
    })
}

/// The availability taint a cluster must carry for its Available condition: `unreachable` for
/// Unknown (or no condition yet, as OCM does), `unavailable` for False, none for True.
pub fn availability_taint_key(available: Option<&Condition>) -> Option<&'static str> {
    match available.map(|condition| condition.status.as_str()) {
        Some(STATUS_TRUE) => None,
        Some(STATUS_FALSE) => Some(TAINT_UNAVAILABLE),
        _ => Some(TAINT_UNREACHABLE),
    }
}

/// The cluster's taints after bringing the availability taints in line with its Available
/// condition, or `None` when they already are (so the loop writes nothing). Other taints are kept
/// as they are; a taint already present keeps its `timeAdded`, a new one gets effect NoSelect and
/// no `timeAdded`, which the server sets (OCM's webhook refuses one from a client).
pub fn reconcile_availability_taints(
    taints: &[Taint],
    available: Option<&Condition>,
) -> Option<Vec<Taint>> {
    let wanted = availability_taint_key(available);
    let is_availability_taint = |key: &str| key == TAINT_UNREACHABLE || key == TAINT_UNAVAILABLE;
    let mut updated: Vec<Taint> = taints
        .iter()
        .filter(|taint| !is_availability_taint(&taint.key) || Some(taint.key.as_str()) == wanted)
        .cloned()
        .collect();
    if let Some(key) = wanted
        && !updated.iter().any(|taint| taint.key == key)
    {
        updated.push(Taint {
            key: key.to_string(),
            value: None,
            effect: TaintEffect::NoSelect,
            time_added: None,
        });
    }
    (updated != taints).then_some(updated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn available(status: &str) -> Condition {
        Condition {
            type_: CONDITION_AVAILABLE.into(),
            status: status.into(),
            reason: "Whatever".into(),
            message: "said the agent".into(),
            observed_generation: None,
            last_transition_time: Time(at(0)),
        }
    }

    /// A taint as the loop adds it: `timeAdded` is the server's to set.
    fn new_taint(key: &str) -> Taint {
        Taint {
            time_added: None,
            ..taint(key, 0)
        }
    }

    fn taint(key: &str, added: i64) -> Taint {
        Taint {
            key: key.into(),
            value: None,
            effect: TaintEffect::NoSelect,
            time_added: Some(Time(at(added))),
        }
    }

    #[test]
    fn lease_expiry_marks_cluster_unknown_at_five_durations() {
        let renewed = at(1_000);
        let just_before = judge_lease(true, renewed, 60, at(1_299));
        assert_eq!(
            just_before,
            LeaseVerdict::Fresh {
                deadline: at(1_300)
            }
        );

        let LeaseVerdict::Expired { deadline, unknown } = judge_lease(true, renewed, 60, at(1_300))
        else {
            panic!("the deadline itself must count as expired");
        };
        assert_eq!(deadline, at(1_300));
        assert_eq!(unknown.type_, CONDITION_AVAILABLE);
        assert_eq!(unknown.status, STATUS_UNKNOWN);
        assert_eq!(unknown.reason, REASON_LEASE_UPDATE_STOPPED);
        assert_eq!(unknown.message, LEASE_UPDATE_STOPPED_MESSAGE);
        assert_eq!(unknown.last_transition_time, Time(at(1_300)));
    }

    #[test]
    fn fresh_lease_wakes_the_loop_at_the_deadline_and_expired_one_does_not() {
        assert_eq!(
            judge_lease(true, at(0), 1, at(2)).wake_at(),
            Some(at(5)),
            "a 1 s lease (integration tests) expires after 5 s"
        );
        assert_eq!(judge_lease(true, at(0), 1, at(9)).wake_at(), None);
    }

    #[test]
    fn lease_of_an_unaccepted_cluster_is_ignored() {
        assert_eq!(
            judge_lease(false, at(0), 60, at(10_000)),
            LeaseVerdict::NotAccepted
        );
        assert_eq!(LeaseVerdict::NotAccepted.wake_at(), None);
    }

    #[test]
    fn unset_or_negative_lease_duration_means_sixty_seconds() {
        assert_eq!(grace_period(0), Duration::from_secs(300));
        assert_eq!(grace_period(-7), Duration::from_secs(300));
        assert_eq!(grace_period(120), Duration::from_secs(600));
        assert_eq!(lease_deadline(at(0), 0), at(300));
    }

    #[test]
    fn lease_deadline_saturates_instead_of_overflowing() {
        assert_eq!(lease_deadline(Timestamp::MAX, i32::MAX), Timestamp::MAX);
        assert!(matches!(
            judge_lease(true, Timestamp::MAX, 60, at(0)),
            LeaseVerdict::Fresh { .. }
        ));
    }

    fn managed_cluster(accepted: bool, lease_duration: i32, created: i64) -> ManagedCluster {
        let mut cluster = ManagedCluster::new(
            "c1",
            crate::api::cluster::ManagedClusterSpec {
                hub_accepts_client: Some(accepted),
                lease_duration_seconds: Some(lease_duration),
                ..Default::default()
            },
        );
        cluster.metadata.creation_timestamp = Some(Time(at(created)));
        cluster
    }

    fn cluster_lease(renewed: Option<i64>, created: i64) -> Lease {
        Lease {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                creation_timestamp: Some(Time(at(created))),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                renew_time: renewed.map(|seconds| {
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(at(seconds))
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn cluster_lease_is_judged_with_the_clusters_own_duration() {
        let cluster = managed_cluster(true, 10, 0);
        let lease = cluster_lease(Some(100), 5);
        assert_eq!(
            judge_cluster_lease(&cluster, Some(&lease), at(120)),
            LeaseVerdict::Fresh { deadline: at(150) }
        );
        assert!(matches!(
            judge_cluster_lease(&cluster, Some(&lease), at(150)),
            LeaseVerdict::Expired { .. }
        ));
        assert_eq!(
            judge_cluster_lease(&managed_cluster(false, 10, 0), Some(&lease), at(150)),
            LeaseVerdict::NotAccepted
        );
    }

    #[test]
    fn cluster_without_renewals_gets_five_durations_from_its_creation() {
        let cluster = managed_cluster(true, 10, 1_000);
        assert_eq!(
            judge_cluster_lease(&cluster, Some(&cluster_lease(None, 1_020)), at(1_030)).wake_at(),
            Some(at(1_070)),
            "a lease never renewed counts from its creation"
        );
        assert_eq!(
            judge_cluster_lease(&cluster, None, at(1_030)).wake_at(),
            Some(at(1_050)),
            "no lease at all counts from the cluster's creation"
        );
    }

    #[test]
    fn addons_follow_an_unknown_cluster_with_its_reason() {
        let cluster = cluster_unknown_condition(at(50));
        let addon = addon_unknown_condition(&cluster, at(51)).unwrap();
        assert_eq!(addon.type_, ADDON_CONDITION_AVAILABLE);
        assert_eq!(addon.status, STATUS_UNKNOWN);
        assert_eq!(addon.reason, REASON_LEASE_UPDATE_STOPPED);
        assert_eq!(addon.message, LEASE_UPDATE_STOPPED_MESSAGE);
        assert_eq!(addon.last_transition_time, Time(at(51)));
    }

    #[test]
    fn addons_are_left_to_the_agent_while_the_cluster_is_known() {
        assert_eq!(
            addon_unknown_condition(&available(STATUS_TRUE), at(1)),
            None
        );
        assert_eq!(
            addon_unknown_condition(&available(STATUS_FALSE), at(1)),
            None
        );
    }

    #[test]
    fn unknown_cluster_gets_the_unreachable_taint_only() {
        let other = taint("fleetform.io/terminating", 1);
        let taints = vec![other.clone(), taint(TAINT_UNAVAILABLE, 2)];
        let updated =
            reconcile_availability_taints(&taints, Some(&available(STATUS_UNKNOWN))).unwrap();
        assert_eq!(updated, vec![other, new_taint(TAINT_UNREACHABLE)]);
        assert_eq!(updated[1].effect, TaintEffect::NoSelect);
    }

    #[test]
    fn cluster_without_available_condition_is_unreachable() {
        let updated = reconcile_availability_taints(&[], None).unwrap();
        assert_eq!(updated, vec![new_taint(TAINT_UNREACHABLE)]);
    }

    #[test]
    fn unavailable_cluster_gets_the_unavailable_taint_only() {
        let taints = vec![taint(TAINT_UNREACHABLE, 2)];
        let updated =
            reconcile_availability_taints(&taints, Some(&available(STATUS_FALSE))).unwrap();
        assert_eq!(updated, vec![new_taint(TAINT_UNAVAILABLE)]);
    }

    #[test]
    fn available_cluster_loses_both_availability_taints() {
        let other = taint("example.com/gpu", 1);
        let taints = vec![
            taint(TAINT_UNREACHABLE, 2),
            other.clone(),
            taint(TAINT_UNAVAILABLE, 3),
        ];
        let updated =
            reconcile_availability_taints(&taints, Some(&available(STATUS_TRUE))).unwrap();
        assert_eq!(updated, vec![other]);
    }

    #[test]
    fn taints_already_in_line_are_not_rewritten() {
        let taints = vec![taint(TAINT_UNREACHABLE, 2)];
        assert_eq!(
            reconcile_availability_taints(&taints, Some(&available(STATUS_UNKNOWN))),
            None,
            "the existing taint keeps its timeAdded, so nothing changes"
        );
        assert_eq!(
            reconcile_availability_taints(&[], Some(&available(STATUS_TRUE))),
            None
        );
    }

    #[test]
    fn the_clock_is_synced_while_renewals_arrive_within_one_lease_duration_either_side() {
        let now: Timestamp = "2026-11-26T12:00:00Z".parse().unwrap();
        let at = |offset: i64| {
            now.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(offset))
                .unwrap()
        };
        assert!(clock_synced(at(-9), 10, now));
        assert!(clock_synced(at(9), 10, now), "a spoke a little ahead");
        assert!(
            !clock_synced(at(-10), 10, now),
            "a renewal seen a whole lease late"
        );
        assert!(!clock_synced(at(30), 10, now), "a spoke from the future");
        let synced = clock_synced_condition(true, now);
        assert_eq!(
            (
                synced.type_.as_str(),
                synced.status.as_str(),
                synced.reason.as_str()
            ),
            (
                CONDITION_CLOCK_SYNCED,
                STATUS_TRUE,
                "ManagedClusterClockSynced"
            )
        );
        assert_eq!(
            clock_synced_condition(false, now).reason,
            "ManagedClusterClockOutOfSync"
        );
    }
}
