//! What a sync came to, and the FleetSync status that says so (pure).
//!
//! Ready is True once the commit is applied and the hub matches it; False with the reason
//! otherwise. Stalled is True when only a change to git or to the FleetSync can help (an invalid
//! commit, a prune the guard holds back), False while retrying can (an unreachable repository, a
//! failed write). Messages name the commit still in force, and depend only on what happened, not
//! on when, so an unchanged outcome writes nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::fleet::FleetSyncStatus;
use crate::api::set_condition;
use crate::api::vocabulary::{CONDITION_READY, CONDITION_STALLED, STATUS_FALSE, STATUS_TRUE};
use crate::apply::WrittenObject;
use crate::plan::{Action, PruneBlock};

/// Reason: the commit is applied and the hub matches it.
pub const REASON_APPLIED: &str = "Applied";
/// Reason: the commit does not load (fleet invalid, or this hub is not in it); not applied.
pub const REASON_INVALID_COMMIT: &str = "InvalidCommit";
/// Reason: the repository or ref could not be read; retried every interval.
pub const REASON_SOURCE_UNAVAILABLE: &str = "SourceUnavailable";
/// Reason: the commit unjoins more spokes than the prune guard allows; not applied.
pub const REASON_PRUNE_BLOCKED: &str = "PruneBlocked";
/// Reason: observing or writing the hub failed; retried.
pub const REASON_APPLY_FAILED: &str = "ApplyFailed";

/// How many validation problems a status message lists.
const PROBLEMS_SHOWN: usize = 5;

/// What one sync came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The commit's fleet is applied; `objects` are what had to be written (none: in sync).
    /// `drift` when this re-applied the commit in force after someone changed the hub.
    Applied {
        commit: Option<String>,
        objects: Vec<WrittenObject>,
        drift: bool,
    },
    /// The commit cannot be applied as it is: every problem, `file:line:column: …` first.
    Invalid {
        commit: Option<String>,
        problems: Vec<String>,
    },
    /// The repository or ref could not be read.
    SourceUnavailable { message: String },
    /// The prune guard holds the commit back.
    PruneBlocked {
        commit: Option<String>,
        block: PruneBlock,
    },
    /// Observing or writing the hub failed.
    Failed {
        commit: Option<String>,
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
            Outcome::Failed { .. } => REASON_APPLY_FAILED,
        }
    }

    /// The commit this sync tried, if it got as far as one.
    pub fn commit(&self) -> Option<&str> {
        match self {
            Outcome::Applied { commit, .. }
            | Outcome::Invalid { commit, .. }
            | Outcome::PruneBlocked { commit, .. }
            | Outcome::Failed { commit, .. } => commit.as_deref(),
            Outcome::SourceUnavailable { .. } => None,
        }
    }

    /// Whether only a change to git or to the FleetSync can help.
    pub fn stalled(&self) -> bool {
        matches!(self, Outcome::Invalid { .. } | Outcome::PruneBlocked { .. })
    }

    /// What happened, in a sentence or a few lines; `in_force` is the commit applied before.
    pub fn message(&self, in_force: Option<&str>) -> String {
        let commit = |commit: &Option<String>| {
            commit
                .as_deref()
                .map_or_else(|| "the fleet".to_string(), |c| format!("commit {c}"))
        };
        let kept = match in_force {
            Some(in_force) => format!("; commit {in_force} stays in force"),
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
    if let Some(commit) = outcome.commit() {
        next.last_attempted_commit = Some(commit.to_string());
    }
    if let Outcome::Applied {
        commit: Some(commit),
        ..
    } = outcome
    {
        next.last_applied_commit = Some(commit.clone());
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

    fn applied(commit: &str) -> Outcome {
        Outcome::Applied {
            commit: Some(commit.to_string()),
            objects: Vec::new(),
            drift: false,
        }
    }

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
            &applied("good"),
            Some(1),
            Time(Timestamp::now()),
        );
        let problems: Vec<String> = (1..=7)
            .map(|line| format!("spokes/edge.yaml:{line}:3: /spec: wrong"))
            .collect();
        let invalid = Outcome::Invalid {
            commit: Some("bad".to_string()),
            problems,
        };
        let after = next_status(&before, &invalid, Some(1), Time(Timestamp::now()));
        assert_eq!(after.last_applied_commit.as_deref(), Some("good"));
        assert_eq!(after.last_attempted_commit.as_deref(), Some("bad"));
        let ready = condition(&after, CONDITION_READY);
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            (STATUS_FALSE, REASON_INVALID_COMMIT)
        );
        assert!(
            ready.message.starts_with(
                "commit bad is invalid; commit good stays in force:\n  spokes/edge.yaml:1:3"
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
        let once = next_status(&FleetSyncStatus::default(), &applied("abc"), Some(2), now);
        let later = Time(Timestamp::now());
        assert_eq!(next_status(&once, &applied("abc"), Some(2), later), once);
    }
}
