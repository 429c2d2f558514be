//! The rollout section of a hub's plan: in what waves the agent upgrades the plan makes would
//! reach the hub's spokes, which spokes are offline now and what happens to them, and how many
//! the first wave touches (the blast radius). Computed by [`crate::rollout::waves`] from the
//! spokes' reported agents and phases.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ObjectKey, ObjectKind, ObservedHub, Step};
use crate::api::fleet::{OfflinePolicy, Phase, RolloutStrategy};
use crate::fleet::Fleet;
use crate::rollout::{SpokeFacts, Wave, waves};

/// How a hub's agent upgrades roll out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPlan {
    pub strategy: RolloutStrategy,
    pub offline: OfflinePolicy,
    /// Spokes whose agent changes.
    pub spokes: usize,
    /// How many spokes the first wave touches.
    pub blast_radius: usize,
    pub waves: Vec<Wave>,
}

/// The rollout of `steps`' agent upgrades on `hub_name`, if they upgrade any agent.
pub(super) fn rollout(
    fleet: &Fleet,
    hub_name: &str,
    steps: &[Step],
    observed: &ObservedHub,
) -> Option<RolloutPlan> {
    let spec = &fleet.hubs.get(hub_name)?.spec.rollout;
    let spokes: Vec<SpokeFacts> = steps
        .iter()
        .filter_map(|step| match step {
            Step::UpgradeAgent { spoke, from, to } => Some(SpokeFacts {
                name: spoke.clone(),
                labels: fleet
                    .spokes
                    .get(spoke)
                    .and_then(|spoke| spoke.metadata.labels.clone())
                    .unwrap_or_default(),
                wanted: to.config_hash.clone(),
                running: Some(from.config_hash.clone()),
                online: observed
                    .objects
                    .get(&ObjectKey::namespaced(ObjectKind::Spoke, spoke))
                    .and_then(|live| live.pointer("/status/phase"))
                    .and_then(Value::as_str)
                    .is_some_and(|phase| phase == format!("{:?}", Phase::Running)),
            }),
            _ => None,
        })
        .collect();
    if spokes.is_empty() {
        return None;
    }
    let waves = waves(spec, &spokes);
    Some(RolloutPlan {
        strategy: spec.strategy,
        offline: spec.offline,
        spokes: spokes.len(),
        blast_radius: waves.first().map_or(0, |wave| wave.spokes.len()),
        waves,
    })
}
