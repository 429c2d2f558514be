//! What a sync came to, and the FleetSync status that says so (pure).
//!
//! Ready is True once the commit is applied and the hub matches it; False with the reason
//! otherwise. Stalled is True when only a change to git or to the FleetSync can help (an invalid
//! commit, a prune the guard holds back), False while retrying can (an unreachable repository, a
//! failed write). Messages name commits as people read them (short SHA and subject; the status
//! fields keep the full SHAs), and depend only on what happened, not on when, so an unchanged
//! outcome writes nothing. [`transition`] says which status changes are news: the sync stopped
//! being Ready (or now fails for another reason or commit), or is Ready again.
//! [`rollout_halted`] decides the FleetSync's `RolloutHalted` condition from its hub's.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::fleet::{FleetSyncStatus, SyncRecord};
use crate::api::set_condition;
use crate::api::vocabulary::{
    CONDITION_READY, CONDITION_ROLLOUT_HALTED, CONDITION_STALLED, STATUS_FALSE, STATUS_TRUE,
};
use crate::apply::WrittenObject;
use crate::plan::{Action, PruneBlock};
use crate::source::Origin;

/// Reason: the commit is applied and the hub matches it.
pub const REASON_APPLIED: &str = "Applied";
/// Reason: the commit does not load (fleet invalid, or this hub is not in it); not applied.
pub const REASON_INVALID_COMMIT: &str = "InvalidCommit";
/// Reason: the repository or ref could not be read; retried every interval.
pub const REASON_SOURCE_UNAVAILABLE: &str = "SourceUnavailable";
/// Reason: the commit unjoins more spokes than the prune guard allows; not applied.
pub const REASON_PRUNE_BLOCKED: &str = "PruneBlocked";
/// Reason: the commit is not signed by a trusted key (or the keys cannot be read); not applied.
pub const REASON_SIGNATURE_INVALID: &str = "SignatureInvalid";
/// Reason: observing or writing the hub failed; retried.
pub const REASON_APPLY_FAILED: &str = "ApplyFailed";
/// Event reason: the sync is Ready again after it was not.
pub const REASON_RECOVERED: &str = "Recovered";

/// Reason of the FleetSync's `RolloutHalted` True: more spokes failed than `maxFailures` allows.
pub const REASON_ROLLOUT_HALTED: &str = "MaxFailuresExceeded";
/// Reason of the FleetSync's `RolloutHalted` False, and the Event's: the rollout goes on.
pub const REASON_ROLLOUT_RESUMED: &str = "RolloutResumed";
/// The conditions the sync's status write owns; `RolloutHalted` has a writer of its own.
pub const SYNC_CONDITIONS: [&str; 2] = [CONDITION_READY, CONDITION_STALLED];

/// How many validation problems a status message lists.
const PROBLEMS_SHOWN: usize = 5;
/// How many hex digits of a SHA people are shown (`git log --oneline`'s default).
const SHORT_SHA: usize = 7;

/// The abbreviated form of `sha`.
pub fn short_sha(sha: &str) -> &str {
    sha.get(..SHORT_SHA).unwrap_or(sha)
}

/// A commit as people name it: its SHA and the first line of its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    pub sha: String,
    pub subject: String,
    /// The key that signed it, when signatures are verified.
    pub signer: Option<String>,
}

impl Commit {
    /// The commit a fleet was read at, if it was read from git.
    pub fn of(origin: &Origin) -> Option<Commit> {
        Some(Commit {
            sha: origin.commit()?.to_string(),
            subject: origin.subject().unwrap_or_default().to_string(),
            signer: origin.signed_by().map(ToString::to_string),
        })
    }
}

impl fmt::Display for Commit {
    /// `1a2b3c4 "subject"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(short_sha(&self.sha))?;
        if !self.subject.is_empty() {
            write!(f, " {:?}", self.subject)?;
        }
        Ok(())
    }
}

/// What one sync came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The commit's fleet is applied; `objects` are what had to be written (none: in sync).
    /// `drift` when this re-applied the commit in force after someone changed the hub.
    Applied {
        commit: Option<Commit>,
        objects: Vec<WrittenObject>,
        drift: bool,
    },
    /// The commit cannot be applied as it is: every problem, `file:line:column: …` first.
    Invalid {
        commit: Option<Commit>,
        problems: Vec<String>,
    },
    /// The repository or ref could not be read.
    SourceUnavailable { message: String },
    /// The prune guard holds the commit back.
    PruneBlocked {
        commit: Option<Commit>,
        block: PruneBlock,
    },
    /// The commit is not signed as the FleetSync requires: `problem` names the commit and the
    /// key it was signed with.
    SignatureInvalid {
        commit: Option<Commit>,
        problem: String,
    },
    /// Observing or writing the hub failed.
    Failed {
        commit: Option<Commit>,
        message: String,
    },
}

impl Outcome {
    /// The `result` label of the syncs metric.
    pub fn result_label(&self) -> &'static str {
        match self {
            Outcome::Applied { objects, .. } if objects.is_empty() => "unchanged",
            Outcome::Applied { drift: true, .. } => "drift_reverted",
            Outcome::Applied { .. } => "applied",
            Outcome::Invalid { .. } => "invalid_commit",
            Outcome::SourceUnavailable { .. } => "source_unavailable",
            Outcome::PruneBlocked { .. } => "prune_blocked",
            Outcome::SignatureInvalid { .. } => "signature_invalid",
            Outcome::Failed { .. } => "apply_failed",
        }
    }

    /// The reason of the Ready condition and of the FleetSync's event.
    pub fn reason(&self) -> &'static str {
        match self {
            Outcome::Applied { .. } => REASON_APPLIED,
            Outcome::Invalid { .. } => REASON_INVALID_COMMIT,
            Outcome::SourceUnavailable { .. } => REASON_SOURCE_UNAVAILABLE,
            Outcome::PruneBlocked { .. } => REASON_PRUNE_BLOCKED,
            Outcome::SignatureInvalid { .. } => REASON_SIGNATURE_INVALID,
            Outcome::Failed { .. } => REASON_APPLY_FAILED,
        }
    }

    /// The commit this sync tried, if it got as far as one.
    pub fn commit(&self) -> Option<&Commit> {
        match self {
            Outcome::Applied { commit, .. }
            | Outcome::Invalid { commit, .. }
            | Outcome::PruneBlocked { commit, .. }
            | Outcome::SignatureInvalid { commit, .. }
            | Outcome::Failed { commit, .. } => commit.as_ref(),
            Outcome::SourceUnavailable { .. } => None,
        }
    }

    /// The full SHA of [`Self::commit`].
    pub fn sha(&self) -> Option<&str> {
        self.commit().map(|commit| commit.sha.as_str())
    }

    /// Whether only a change to git or to the FleetSync can help.
    pub fn stalled(&self) -> bool {
        matches!(
            self,
            Outcome::Invalid { .. }
                | Outcome::PruneBlocked { .. }
                | Outcome::SignatureInvalid { .. }
        )
    }

    /// What happened, in a sentence or a few lines; `in_force` is the commit applied before.
    pub fn message(&self, in_force: Option<&str>) -> String {
        let commit = |commit: &Option<Commit>| {
            commit
                .as_ref()
                .map_or_else(|| "the fleet".to_string(), |c| format!("commit {c}"))
        };
        let kept = match in_force {
            Some(in_force) => format!("; commit {} stays in force", short_sha(in_force)),
            None => "; nothing was applied".to_string(),
        };
        match self {
            Outcome::Applied { commit: c, .. } => format!("{} is applied", commit(c)),
            Outcome::Invalid {
                commit: c,
                problems,
            } => {
                let mut message = format!("{} is invalid{kept}:", commit(c));
                for problem in problems.iter().take(PROBLEMS_SHOWN) {
                    message.push_str("\n  ");
                    message.push_str(problem);
                }
                if problems.len() > PROBLEMS_SHOWN {
                    message.push_str(&format!(
                        "\n  … and {} more",
                        problems.len() - PROBLEMS_SHOWN
                    ));
                }
                message
            }
            Outcome::SourceUnavailable { message } => {
                format!("cannot read the fleet repo: {message}{kept}")
            }
            Outcome::PruneBlocked { commit: c, block } => format!(
                "{} would unjoin {} of the hub's {} spokes ({}), more than the prune guard allows ({}); set spec.allowPrune: true to apply it{kept}",
                commit(c),
                block.unjoining.len(),
                block.spokes,
                block.unjoining.join(", "),
                block.limit,
            ),
            Outcome::SignatureInvalid { problem, .. } => format!("{problem}{kept}"),
            Outcome::Failed { commit: c, message } => {
                format!("{} could not be applied: {message}{kept}", commit(c))
            }
        }
    }

    /// "2 created, 1 updated, 0 deleted".
    pub fn counts(objects: &[WrittenObject]) -> String {
        let count = |action| objects.iter().filter(|o| o.action == action).count();
        format!(
            "{} created, {} updated, {} deleted",
            count(Action::Create),
            count(Action::Update),
            count(Action::Delete)
        )
    }
}

/// How many fetched commits a FleetSync's `status.recentSyncs` keeps.
pub const RECENT_SYNCS: usize = 5;
/// How many written objects a record names.
const CHANGES_RECORDED: usize = 20;

/// What became of the commit `outcome` tried, for `status.recentSyncs`; `None` when it got no
/// commit (the repository could not be read).
fn record(outcome: &Outcome, in_force: Option<&str>, now: Time) -> Option<SyncRecord> {
    let commit = outcome.commit()?;
    let (summary, changes) = match outcome {
        Outcome::Applied { objects, .. } => {
            let mut changes: Vec<String> = objects
                .iter()
                .take(CHANGES_RECORDED)
                .map(|object| format!("{} {}", object.action.past_tense(), object.key))
                .collect();
            if objects.len() > CHANGES_RECORDED {
                changes.push(format!("… and {} more", objects.len() - CHANGES_RECORDED));
            }
            (Outcome::counts(objects), changes)
        }
        _ => (outcome.message(in_force), Vec::new()),
    };
    Some(SyncRecord {
        commit: commit.sha.clone(),
        subject: commit.subject.clone(),
        signer: commit.signer.clone(),
        time: now,
        reason: outcome.reason().to_string(),
        summary,
        changes,
    })
}

/// The status after `outcome`, from the status before it; equal to `current` when nothing
/// changed.
pub fn next_status(
    current: &FleetSyncStatus,
    outcome: &Outcome,
    generation: Option<i64>,
    now: Time,
) -> FleetSyncStatus {
    let mut next = current.clone();
    next.observed_generation = generation;
    if let Some(sha) = outcome.sha() {
        next.last_attempted_commit = Some(sha.to_string());
    }
    if let Outcome::Applied {
        commit: Some(commit),
        ..
    } = outcome
    {
        next.last_applied_commit = Some(commit.sha.clone());
    }
    if let Some(record) = record(outcome, current.last_applied_commit.as_deref(), now.clone())
        && next.recent_syncs.first().is_none_or(|last| {
            (last.commit.as_str(), last.reason.as_str())
                != (record.commit.as_str(), record.reason.as_str())
        })
    {
        next.recent_syncs.insert(0, record);
        next.recent_syncs.truncate(RECENT_SYNCS);
    }
    let message = outcome.message(current.last_applied_commit.as_deref());
    let condition = |type_: &str, status: &str, message: String| Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: outcome.reason().to_string(),
        message,
        observed_generation: generation,
        last_transition_time: now.clone(),
    };
    let ready = matches!(outcome, Outcome::Applied { .. });
    let stalled = outcome.stalled();
    set_condition(
        &mut next.conditions,
        condition(
            CONDITION_READY,
            if ready { STATUS_TRUE } else { STATUS_FALSE },
            message.clone(),
        ),
    );
    set_condition(
        &mut next.conditions,
        condition(
            CONDITION_STALLED,
            if stalled { STATUS_TRUE } else { STATUS_FALSE },
            if stalled { message } else { String::new() },
        ),
    );
    next
}

/// A change of a FleetSync's status worth an Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Not Ready, where it was Ready before, or failing for another reason or commit.
    NotReady,
    /// Ready again; `after` is the reason it was not.
    Recovered { after: String },
}

/// What changed from `before` to `after` that people should hear of; `None` for a retry that
/// failed as the last one did, and for a sync that stays Ready.
pub fn transition(before: &FleetSyncStatus, after: &FleetSyncStatus) -> Option<Transition> {
    let ready = |status: &FleetSyncStatus| {
        crate::api::find_condition(&status.conditions, CONDITION_READY)
            .map(|ready| (ready.status == STATUS_TRUE, ready.reason.clone()))
    };
    match (ready(before), ready(after)?) {
        (Some((false, reason)), (true, _)) => Some(Transition::Recovered { after: reason }),
        (_, (true, _)) => None,
        (Some((false, before_reason)), (false, after_reason))
            if before_reason == after_reason
                && before.last_attempted_commit == after.last_attempted_commit =>
        {
            None
        }
        (_, (false, _)) => Some(Transition::NotReady),
    }
}

/// The `RolloutHalted` condition a FleetSync must show when its hub `hub`'s rollout is halted
/// with `halted` (the Hub condition's message: the failed spokes and why) or not (`None`);
/// `None` when `current` already says so. A FleetSync whose hub never halted gets no condition.
pub fn rollout_halted(
    current: &FleetSyncStatus,
    hub: &str,
    halted: Option<&str>,
    generation: Option<i64>,
    now: Time,
) -> Option<Condition> {
    let existing = crate::api::find_condition(&current.conditions, CONDITION_ROLLOUT_HALTED);
    let (status, reason, message) = match halted {
        Some(halted) => (
            STATUS_TRUE,
            REASON_ROLLOUT_HALTED,
            format!("hub {hub}'s rollout is halted: {halted}"),
        ),
        None if existing.is_none() => return None,
        None => (
            STATUS_FALSE,
            REASON_ROLLOUT_RESUMED,
            format!("hub {hub}'s rollout is not halted"),
        ),
    };
    if existing.is_some_and(|c| c.status == status && c.reason == reason && c.message == message) {
        return None;
    }
    let mut conditions = current.conditions.clone();
    set_condition(
        &mut conditions,
        Condition {
            type_: CONDITION_ROLLOUT_HALTED.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message,
            observed_generation: generation,
            last_transition_time: now,
        },
    );
    crate::api::find_condition(&conditions, CONDITION_ROLLOUT_HALTED).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn condition<'a>(status: &'a FleetSyncStatus, type_: &str) -> &'a Condition {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .expect("condition set")
    }

    fn commit(sha: &str, subject: &str) -> Option<Commit> {
        Some(Commit {
            sha: sha.to_string(),
            subject: subject.to_string(),
            signer: None,
        })
    }

    fn applied(sha: &str) -> Outcome {
        Outcome::Applied {
            commit: commit(sha, "a change"),
            objects: Vec::new(),
            drift: false,
        }
    }

    const GOOD: &str = "600d000000000000000000000000000000000000";
    const BAD: &str = "bad0000000000000000000000000000000000000";

    #[test]
    fn an_applied_commit_is_ready_and_recorded_as_applied_and_attempted() {
        let status = next_status(
            &FleetSyncStatus::default(),
            &applied("abc"),
            Some(3),
            Time(Timestamp::now()),
        );
        assert_eq!(status.last_applied_commit.as_deref(), Some("abc"));
        assert_eq!(status.last_attempted_commit.as_deref(), Some("abc"));
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(condition(&status, CONDITION_READY).status, STATUS_TRUE);
        assert_eq!(condition(&status, CONDITION_STALLED).status, STATUS_FALSE);
    }

    #[test]
    fn an_invalid_commit_stalls_and_keeps_the_commit_in_force() {
        let before = next_status(
            &FleetSyncStatus::default(),
            &applied(GOOD),
            Some(1),
            Time(Timestamp::now()),
        );
        let problems: Vec<String> = (1..=7)
            .map(|line| format!("spokes/edge.yaml:{line}:3: /spec: wrong"))
            .collect();
        let invalid = Outcome::Invalid {
            commit: commit(BAD, "dev: shorter leases"),
            problems,
        };
        let after = next_status(&before, &invalid, Some(1), Time(Timestamp::now()));
        assert_eq!(after.last_applied_commit.as_deref(), Some(GOOD));
        assert_eq!(after.last_attempted_commit.as_deref(), Some(BAD));
        let ready = condition(&after, CONDITION_READY);
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            (STATUS_FALSE, REASON_INVALID_COMMIT)
        );
        assert!(
            ready.message.starts_with(
                "commit bad0000 \"dev: shorter leases\" is invalid; commit 600d000 stays in force:\n  spokes/edge.yaml:1:3"
            ),
            "{}",
            ready.message
        );
        assert!(ready.message.ends_with("… and 2 more"), "{}", ready.message);
        assert_eq!(condition(&after, CONDITION_STALLED).status, STATUS_TRUE);
    }

    #[test]
    fn an_unreachable_repository_is_not_ready_but_not_stalled() {
        let outcome = Outcome::SourceUnavailable {
            message: "cannot fetch https://example.invalid/fleet: timed out".to_string(),
        };
        let status = next_status(
            &FleetSyncStatus::default(),
            &outcome,
            Some(1),
            Time(Timestamp::now()),
        );
        assert_eq!(status.last_attempted_commit, None);
        assert_eq!(
            condition(&status, CONDITION_READY).reason,
            REASON_SOURCE_UNAVAILABLE
        );
        assert_eq!(condition(&status, CONDITION_STALLED).status, STATUS_FALSE);
    }

    #[test]
    fn the_same_outcome_twice_changes_nothing() {
        let now = Time(Timestamp::now());
        let once = next_status(&FleetSyncStatus::default(), &applied(GOOD), Some(2), now);
        let later = Time(Timestamp::now());
        assert_eq!(next_status(&once, &applied(GOOD), Some(2), later), once);
    }

    #[test]
    fn each_commit_fetched_is_recorded_once_with_what_its_plan_wrote_newest_first() {
        let spoke = |name: &str| WrittenObject {
            action: Action::Update,
            key: crate::plan::ObjectKey::namespaced(crate::plan::ObjectKind::Spoke, name),
            uid: None,
            generation: None,
        };
        let signed = Outcome::Applied {
            commit: Some(Commit {
                sha: GOOD.to_string(),
                subject: "lease 30s".to_string(),
                signer: Some("SSH key SHA256:abc (alice@example.com)".to_string()),
            }),
            objects: (0..25).map(|n| spoke(&format!("s{n}"))).collect(),
            drift: false,
        };
        let first = after(&FleetSyncStatus::default(), &signed);
        let record = &first.recent_syncs[0];
        assert_eq!(
            (
                record.commit.as_str(),
                record.reason.as_str(),
                record.summary.as_str()
            ),
            (GOOD, "Applied", "0 created, 25 updated, 0 deleted")
        );
        assert_eq!(
            record.signer.as_deref(),
            Some("SSH key SHA256:abc (alice@example.com)")
        );
        assert_eq!(record.changes[0], "updated Spoke fleetform-system/s0");
        assert_eq!(record.changes.len(), 21);
        assert_eq!(record.changes[20], "… and 5 more");
        assert_eq!(after(&first, &applied(GOOD)).recent_syncs.len(), 1);

        let invalid = Outcome::Invalid {
            commit: commit(BAD, "broken"),
            problems: vec!["spokes/edge.yaml:1:1: /spec: wrong".to_string()],
        };
        let second = after(&first, &invalid);
        assert_eq!(second.recent_syncs[0].reason, "InvalidCommit");
        assert!(
            second.recent_syncs[0]
                .summary
                .contains("spokes/edge.yaml:1:1")
        );
        assert_eq!(second.recent_syncs[1].commit, GOOD);
        let unreachable = Outcome::SourceUnavailable {
            message: "timed out".to_string(),
        };
        assert_eq!(
            after(&second, &unreachable).recent_syncs,
            second.recent_syncs
        );

        let mut status = second;
        for n in 0..10 {
            status = after(&status, &applied(&format!("{n:040}")));
        }
        assert_eq!(status.recent_syncs.len(), RECENT_SYNCS);
        assert_eq!(status.recent_syncs[0].commit, format!("{:040}", 9));
    }

    fn after(before: &FleetSyncStatus, outcome: &Outcome) -> FleetSyncStatus {
        next_status(before, outcome, Some(1), Time(Timestamp::now()))
    }

    #[test]
    fn not_ready_is_news_once_per_reason_and_commit_and_ready_again_is_a_recovery() {
        let unreachable = |message: &str| Outcome::SourceUnavailable {
            message: message.to_string(),
        };
        let invalid = |sha: &str| Outcome::Invalid {
            commit: commit(sha, "broken"),
            problems: vec!["spokes/edge.yaml:1:1: /spec: wrong".to_string()],
        };
        let first = after(&FleetSyncStatus::default(), &applied(GOOD));
        assert_eq!(transition(&FleetSyncStatus::default(), &first), None);
        let down = after(&first, &unreachable("timed out"));
        assert_eq!(transition(&first, &down), Some(Transition::NotReady));
        // Retries that fail the same way are no news, whatever the error text says this time.
        let again = after(&down, &unreachable("connection refused"));
        assert_ne!(again, down);
        assert_eq!(transition(&down, &again), None);
        // Another reason, or another commit for the same reason, is.
        let broken = after(&again, &invalid(BAD));
        assert_eq!(transition(&again, &broken), Some(Transition::NotReady));
        let other = "0dd0000000000000000000000000000000000000";
        assert_eq!(
            transition(&broken, &after(&broken, &invalid(other))),
            Some(Transition::NotReady)
        );
        assert_eq!(transition(&broken, &after(&broken, &invalid(BAD))), None);
        let fixed = after(&broken, &applied(other));
        assert_eq!(
            transition(&broken, &fixed),
            Some(Transition::Recovered {
                after: REASON_INVALID_COMMIT.to_string()
            })
        );
        assert_eq!(transition(&fixed, &after(&fixed, &applied(other))), None);
    }

    #[test]
    fn commits_are_named_by_short_sha_and_subject() {
        let named = commit(GOOD, "dev: fewer addons").unwrap();
        assert_eq!(named.to_string(), "600d000 \"dev: fewer addons\"");
        assert_eq!(commit(GOOD, "").unwrap().to_string(), "600d000");
        assert_eq!(short_sha("abc"), "abc");
    }

    #[test]
    fn a_halted_hub_rollout_is_a_fleetsync_condition_until_it_resumes() {
        let halted =
            "1 of 10 spoke(s) failed, more than maxFailures 0 allows (0): edge (never came up)";
        let never = FleetSyncStatus::default();
        assert_eq!(
            rollout_halted(&never, "east", None, Some(1), Time(Timestamp::now())),
            None,
            "a hub that never halted adds no condition"
        );
        let condition = rollout_halted(
            &never,
            "east",
            Some(halted),
            Some(1),
            Time(Timestamp::now()),
        )
        .unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            (STATUS_TRUE, REASON_ROLLOUT_HALTED)
        );
        assert!(
            condition.message.contains("east")
                && condition.message.contains("edge (never came up)")
        );
        let mut on = never.clone();
        on.conditions.push(condition.clone());
        assert_eq!(
            rollout_halted(&on, "east", Some(halted), Some(1), Time(Timestamp::now())),
            None,
            "already said"
        );
        let resumed = rollout_halted(&on, "east", None, Some(1), Time(Timestamp::now())).unwrap();
        assert_eq!(
            (resumed.status.as_str(), resumed.reason.as_str()),
            (STATUS_FALSE, REASON_ROLLOUT_RESUMED)
        );
    }
}
