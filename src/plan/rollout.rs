//! The rollout section of a hub's plan: in what waves the changes the plan makes to settings
//! that roll out (agent upgrades, addons enabled or disabled, lease durations) would reach the
//! hub's spokes, what changes on each, which spokes are offline now and what happens to them,
//! and how many the first wave touches (the blast radius); and the same for each addon with a
//! rollout of its own (AddOn `spec.rollout`), whose enabling and disabling leave the hub's
//! rollout. Computed by [`crate::rollout::waves`] from the plan's steps and the spokes' phases.
//! Spokes that join get everything at once (a join is not a rollout) and are left out.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{ObjectKey, ObjectKind, ObservedHub, Step};
use crate::api::fleet::{OfflinePolicy, Phase, RolloutSpec, RolloutStrategy};
use crate::fleet::Fleet;
use crate::rollout::{Settings, SpokeFacts, Wave, waves};

/// How a hub's changes roll out, or an addon's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPlan {
    /// The addon whose own rollout this is; none for the hub's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addon: Option<String>,
    pub strategy: RolloutStrategy,
    pub offline: OfflinePolicy,
    /// Spokes whose rolled-out settings change.
    pub spokes: usize,
    /// How many spokes the first wave touches.
    pub blast_radius: usize,
    pub waves: Vec<Wave>,
    /// What changes on each of those spokes, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<SpokeChange>,
}

/// What a rollout changes on one spoke.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpokeChange {
    pub spoke: String,
    /// The agent's version, from and to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Change<String>>,
    /// Addons enabled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enable: Vec<String>,
    /// Addons disabled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disable: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<Change<i32>>,
}

/// A value from and to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change<T> {
    pub from: T,
    pub to: T,
}

impl SpokeChange {
    /// Only the agent changes.
    pub fn agent_only(&self) -> bool {
        self.enable.is_empty() && self.disable.is_empty() && self.lease_duration_seconds.is_none()
    }

    /// What changes, in words: `agent 0.1.0 → 0.2.0, addons +metrics -logging, lease 60 s → 30 s`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(agent) = &self.agent {
            parts.push(format!("agent {} → {}", agent.from, agent.to));
        }
        if !self.enable.is_empty() || !self.disable.is_empty() {
            let addons: Vec<String> = self
                .enable
                .iter()
                .map(|addon| format!("+{addon}"))
                .chain(self.disable.iter().map(|addon| format!("-{addon}")))
                .collect();
            parts.push(format!("addons {}", addons.join(" ")));
        }
        if let Some(lease) = &self.lease_duration_seconds {
            parts.push(format!("lease {} s → {} s", lease.from, lease.to));
        }
        parts.join(", ")
    }
}

/// The rollouts of `steps`' changes on `hub_name`: the hub's, if they change any setting it
/// rolls out, and each addon's own, if they enable or disable it on a spoke.
pub(super) fn rollouts(
    fleet: &Fleet,
    hub_name: &str,
    steps: &[Step],
    observed: &ObservedHub,
) -> (Option<RolloutPlan>, Vec<RolloutPlan>) {
    let own: BTreeMap<&str, &RolloutSpec> = fleet
        .addons
        .iter()
        .filter_map(|(name, addon)| Some((name.as_str(), addon.spec.rollout.as_ref()?)))
        .collect();
    let hub = fleet.hubs.get(hub_name).and_then(|hub| {
        rollout(&hub.spec.rollout, None, fleet, steps, observed, |addon| {
            !own.contains_key(addon)
        })
    });
    let addons = own
        .iter()
        .filter_map(|(name, spec)| {
            rollout(spec, Some(name), fleet, steps, observed, |addon| {
                addon == *name
            })
        })
        .collect();
    (hub, addons)
}

/// The rollout under `spec` (of `addon`, or the hub's) of `steps`' changes: agent and lease
/// for the hub's, and the addons `counts` chooses.
fn rollout(
    spec: &RolloutSpec,
    addon: Option<&str>,
    fleet: &Fleet,
    steps: &[Step],
    observed: &ObservedHub,
    counts: impl Fn(&str) -> bool,
) -> Option<RolloutPlan> {
    let joining: BTreeSet<&str> = steps
        .iter()
        .filter_map(|step| match step {
            Step::Join { spoke } => Some(spoke.as_str()),
            _ => None,
        })
        .collect();
    // Each spoke's change, and the parts of its settings that change (from, to): enough for
    // `waves` to tell which spokes move.
    let mut changes: BTreeMap<&str, (SpokeChange, Settings, Settings)> = BTreeMap::new();
    for step in steps {
        let spoke = match step {
            Step::UpgradeAgent { spoke, .. } | Step::ChangeLeaseDuration { spoke, .. }
                if addon.is_none() =>
            {
                spoke.as_str()
            }
            Step::EnableAddon {
                spoke, addon: name, ..
            }
            | Step::DisableAddon {
                spoke, addon: name, ..
            } if counts(name) => spoke.as_str(),
            _ => continue,
        };
        if joining.contains(spoke) {
            continue;
        }
        let (change, from, to) = changes.entry(spoke).or_insert_with(|| {
            let change = SpokeChange {
                spoke: spoke.to_string(),
                ..SpokeChange::default()
            };
            (change, Settings::default(), Settings::default())
        });
        match step {
            Step::UpgradeAgent {
                from: old, to: new, ..
            } => {
                change.agent = Some(Change {
                    from: old.version.clone(),
                    to: new.version.clone(),
                });
                from.agent = old.config_hash.clone();
                to.agent = new.config_hash.clone();
            }
            Step::EnableAddon {
                addon,
                install_namespace,
                ..
            } => {
                change.enable.push(addon.clone());
                to.addons.insert(addon.clone(), install_namespace.clone());
            }
            Step::DisableAddon { addon, .. } => {
                change.disable.push(addon.clone());
                from.addons.insert(addon.clone(), String::new());
            }
            Step::ChangeLeaseDuration {
                from: old, to: new, ..
            } => {
                change.lease_duration_seconds = Some(Change {
                    from: *old,
                    to: *new,
                });
                from.lease_duration_seconds = *old;
                to.lease_duration_seconds = *new;
            }
            _ => {}
        }
    }
    if changes.is_empty() {
        return None;
    }
    let spokes: Vec<SpokeFacts> = changes
        .iter()
        .map(|(spoke, (_, from, to))| SpokeFacts {
            name: spoke.to_string(),
            labels: fleet
                .spokes
                .get(*spoke)
                .and_then(|spoke| spoke.metadata.labels.clone())
                .unwrap_or_default(),
            wanted: to.clone(),
            running: Some(from.clone()),
            online: observed
                .objects
                .get(&ObjectKey::namespaced(ObjectKind::Spoke, spoke))
                .and_then(|live| live.pointer("/status/phase"))
                .is_some_and(|phase| phase.as_str() == Some(&format!("{:?}", Phase::Running))),
            unavailable_addons: Vec::new(),
        })
        .collect();
    let waves = waves(spec, &spokes);
    Some(RolloutPlan {
        addon: addon.map(str::to_string),
        strategy: spec.strategy,
        offline: spec.offline,
        spokes: spokes.len(),
        blast_radius: waves.first().map_or(0, |wave| wave.spokes.len()),
        waves,
        changes: changes.into_values().map(|(change, _, _)| change).collect(),
    })
}
