//! What the hub side does next for a Hub, as a pure function of the Hub and its Spokes.
//!
//! A Hub carries the `fleetform.io/hub-cleanup` finalizer and reports phase Running once every
//! Spoke that names it is Running, Joining until then. Deleting a Hub cascades (seed 004): its
//! Spokes are deleted first, each unjoining in its own finalizer order, while the Hub reports
//! Deleting; once none is left, its finalizer goes and the Hub with it.

use kube::ResourceExt;

use crate::api::fleet::{Hub, Phase, Spoke};
use crate::api::vocabulary::FINALIZER_HUB_CLEANUP;

/// Everything the decision needs to know about one Hub, gathered by the loop (borrowing its
/// Spokes' names: a pass runs over every spoke of the hub).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts<'a> {
    /// The Hub carries a deletionTimestamp.
    pub deleting: bool,
    /// The Hub carries `fleetform.io/hub-cleanup`.
    pub finalized: bool,
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
    /// The phase its status reports, and for which generation.
    pub reported: (Option<Phase>, Option<i64>),
    /// The Spokes that name the Hub.
    pub spokes: Vec<HubSpoke<'a>>,
}

/// A Spoke of the Hub, as far as the Hub's decision goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubSpoke<'a> {
    pub name: &'a str,
    /// The Spoke carries a deletionTimestamp.
    pub deleting: bool,
    /// The phase its status reports.
    pub phase: Option<Phase>,
}

impl<'a> Facts<'a> {
    /// The facts of `hub`, with those of `spokes` that name it.
    pub fn of(hub: &Hub, spokes: impl IntoIterator<Item = &'a Spoke>) -> Facts<'a> {
        let name = hub.metadata.name.as_deref().unwrap_or_default();
        let status = hub.status.as_ref();
        Facts {
            deleting: hub.metadata.deletion_timestamp.is_some(),
            finalized: hub.finalizers().iter().any(|f| f == FINALIZER_HUB_CLEANUP),
            generation: hub.metadata.generation,
            reported: (
                status.and_then(|s| s.phase),
                status.and_then(|s| s.observed_generation),
            ),
            spokes: spokes
                .into_iter()
                .filter(|spoke| spoke.spec.hub_ref == name)
                .map(|spoke| HubSpoke {
                    name: spoke.metadata.name.as_deref().unwrap_or_default(),
                    deleting: spoke.metadata.deletion_timestamp.is_some(),
                    phase: spoke.status.as_ref().and_then(|s| s.phase),
                })
                .collect(),
        }
    }
}

/// One write for the Hub, in the order they are done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Add `fleetform.io/hub-cleanup`.
    AddFinalizer,
    /// Delete this Spoke of the Hub (its finalizers run its unjoin).
    DeleteSpoke(String),
    /// Write this phase and the Hub's generation on its status.
    ReportPhase(Phase),
    /// Remove `fleetform.io/hub-cleanup`: the Hub goes.
    RemoveFinalizer,
}

/// What the hub side does next for a Hub. Every pass waits for a change afterwards: the Hub's
/// Spokes wake it.
pub fn decide(facts: &Facts) -> Vec<Action> {
    let mut actions = Vec::new();
    let phase = if facts.deleting {
        if facts.spokes.is_empty() {
            if facts.finalized {
                actions.push(Action::RemoveFinalizer);
            }
            return actions;
        }
        // Spokes first: each unjoins in its own finalizer order.
        actions.extend(
            facts
                .spokes
                .iter()
                .filter(|spoke| !spoke.deleting)
                .map(|spoke| Action::DeleteSpoke(spoke.name.to_string())),
        );
        Phase::Deleting
    } else {
        if !facts.finalized {
            actions.push(Action::AddFinalizer);
        }
        if facts
            .spokes
            .iter()
            .all(|spoke| spoke.phase == Some(Phase::Running))
        {
            Phase::Running
        } else {
            Phase::Joining
        }
    };
    if facts.reported != (Some(phase), facts.generation) {
        actions.push(Action::ReportPhase(phase));
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spoke(name: &str, phase: Option<Phase>) -> HubSpoke<'_> {
        HubSpoke {
            name,
            deleting: false,
            phase,
        }
    }

    /// A Hub with its finalizer, reporting Running for generation 1, and two Running spokes.
    fn running() -> Facts<'static> {
        Facts {
            deleting: false,
            finalized: true,
            generation: Some(1),
            reported: (Some(Phase::Running), Some(1)),
            spokes: vec![
                spoke("dev", Some(Phase::Running)),
                spoke("prod", Some(Phase::Running)),
            ],
        }
    }

    #[test]
    fn a_new_hub_gets_its_finalizer_and_reports_running_with_no_spokes() {
        let new = Facts {
            finalized: false,
            reported: (None, None),
            spokes: Vec::new(),
            ..running()
        };
        assert_eq!(
            decide(&new),
            [Action::AddFinalizer, Action::ReportPhase(Phase::Running)]
        );
    }

    #[test]
    fn a_hub_is_joining_until_every_spoke_runs_and_writes_its_phase_only_when_it_changed() {
        assert_eq!(decide(&running()), [], "nothing changed");
        let mut joining = running();
        joining.spokes.push(spoke("edge", None));
        assert_eq!(decide(&joining), [Action::ReportPhase(Phase::Joining)]);
        joining.spokes[2].phase = Some(Phase::Unhealthy);
        assert_eq!(decide(&joining), [Action::ReportPhase(Phase::Joining)]);
        let new_generation = Facts {
            generation: Some(2),
            ..running()
        };
        assert_eq!(
            decide(&new_generation),
            [Action::ReportPhase(Phase::Running)],
            "a new generation is reported as observed"
        );
    }

    #[test]
    fn a_deleted_hub_deletes_its_spokes_first_and_reports_deleting() {
        let mut deleting = running();
        deleting.deleting = true;
        deleting.spokes[1].deleting = true;
        assert_eq!(
            decide(&deleting),
            [
                Action::DeleteSpoke("dev".into()),
                Action::ReportPhase(Phase::Deleting)
            ],
            "a Spoke already being deleted is not deleted again"
        );
        deleting.spokes[0].deleting = true;
        deleting.reported = (Some(Phase::Deleting), Some(1));
        assert_eq!(decide(&deleting), [], "waits for its spokes to go");
    }

    #[test]
    fn a_deleted_hub_without_spokes_lets_go_of_its_finalizer() {
        let gone = Facts {
            deleting: true,
            spokes: Vec::new(),
            ..running()
        };
        assert_eq!(decide(&gone), [Action::RemoveFinalizer]);
        let released = Facts {
            finalized: false,
            ..gone
        };
        assert_eq!(decide(&released), []);
    }

    #[test]
    fn the_facts_hold_only_the_spokes_that_name_the_hub() {
        let hub: Hub = serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Hub",
            "metadata": {"name": "east", "generation": 3, "finalizers": [FINALIZER_HUB_CLEANUP]},
            "spec": {"kubeconfig": {"embedded": {}}},
            "status": {"phase": "Joining", "observedGeneration": 2},
        }))
        .unwrap();
        let declared = |name: &str, hub: &str| -> Spoke {
            serde_json::from_value(json!({
                "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
                "metadata": {"name": name},
                "spec": {"hubRef": hub, "kubeconfig": {"embedded": {}}},
                "status": {"phase": "Running"},
            }))
            .unwrap()
        };
        let spokes = [declared("dev", "east"), declared("other", "west")];
        assert_eq!(
            Facts::of(&hub, &spokes),
            Facts {
                deleting: false,
                finalized: true,
                generation: Some(3),
                reported: (Some(Phase::Joining), Some(2)),
                spokes: vec![spoke("dev", Some(Phase::Running))],
            }
        );
    }
}
