//! Progressive rollouts of a hub's settings to its spokes (issue 15), as pure decisions.
//!
//! A Hub's `spec.rollout` says how a change that reaches many spokes at once reaches the hub's
//! spokes: a change of the agent (its version or anything in its configuration hash), of the
//! addons a spoke has enabled, or of its lease duration — together a spoke's [`Settings`], its
//! rollout target. The Hub's `status.rollout` says where it stands. [`decide`] takes that spec,
//! the spokes as they are and the status as it was, and returns the status as it is now — which
//! spokes are released to move, which are done, failed or passed over while offline, whether the
//! rollout halted — and when to decide again. An AddOn with a `spec.rollout` of its own leaves
//! the hubs' rollouts: enabling and disabling it is decided the same way over
//! [`SpokeFacts::of_addon`], its state in the Hub's `status.addonRollouts`. [`gate`] is what the
//! reconciler gives a spoke of its ManagedClusterAddOns and lease duration by those releases
//! ([`released`], [`addon_released`]), and [`agent_released`] the gate the agent consults before
//! it upgrades itself: a spoke that is not released keeps what it has. [`waves`] is what `plan`
//! shows before a rollout starts.
//!
//! Nothing here reads a cluster or the clock: the hub's reconciler gathers the facts, writes the
//! status and wakes at `wake_at`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::api::fleet::{
    AddOn, AppliedAddon, AppliedSettings, Hub, OfflinePolicy, RolloutSpec, RolloutStatus,
    RolloutStrategy, SpokeCount, SpokeRollout, SpokeRolloutState, SpokeStatus,
};
use crate::plan::desired::{EffectiveSpoke, stable_hash};

#[cfg(test)]
mod tests;

/// The settings of one spoke a hub's rollout rolls out: its agent's configuration hash, the
/// addons fleetform enables on it (name → install namespace, as its ManagedClusterAddOns say) and
/// its ManagedCluster's lease duration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    pub agent: String,
    pub addons: BTreeMap<String, String>,
    pub lease_duration_seconds: i32,
}

impl Settings {
    /// What git wants for a spoke with `effective` settings.
    pub fn wanted(effective: &EffectiveSpoke) -> Self {
        Settings {
            agent: effective.agent.hash(),
            addons: effective.addons.clone(),
            lease_duration_seconds: effective.lease_duration_seconds,
        }
    }

    /// What a spoke has now, from its status: `None` until its agent has reported and the
    /// hub's reconciler has read its addons and lease (a spoke still joining gets what git wants
    /// at once: a join is not a rollout).
    pub fn running(status: &SpokeStatus) -> Option<Self> {
        let applied = status.applied.as_ref()?;
        Some(Settings {
            agent: status.agent_config_hash.clone()?,
            addons: applied
                .addons
                .iter()
                .map(|addon| (addon.name.clone(), addon.install_namespace.clone()))
                .collect(),
            lease_duration_seconds: applied.lease_duration_seconds,
        })
    }

    /// A short, stable digest: a spoke's rollout target.
    pub fn digest(&self) -> String {
        stable_hash(&serde_json::to_string(self).unwrap_or_default())
    }

    /// These settings without the addons `own` (those with a rollout of their own): what the
    /// hub's rollout rolls out.
    pub fn without(mut self, own: &BTreeSet<String>) -> Self {
        self.addons.retain(|name, _| !own.contains(name));
        self
    }

    /// What the rollout of `addon` rolls out to a spoke: the addon enabled in `namespace`, or
    /// not at all (`None`).
    pub fn addon(addon: &str, namespace: Option<&String>) -> Self {
        Settings {
            agent: String::new(),
            addons: namespace
                .map(|namespace| (addon.to_string(), namespace.clone()))
                .into_iter()
                .collect(),
            lease_duration_seconds: 0,
        }
    }
}

/// The addons of `addon_docs` with a rollout of their own, with it.
pub fn own_rollouts(addon_docs: &BTreeMap<String, AddOn>) -> BTreeMap<&str, &RolloutSpec> {
    addon_docs
        .iter()
        .filter_map(|(name, doc)| Some((name.as_str(), doc.spec.rollout.as_ref()?)))
        .collect()
}

/// What the reconciler gives a joined spoke of the settings rollouts roll out besides its agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The addons it is to have: those of `wanted` its rollouts released, those it has of the
    /// rest.
    pub addons: BTreeMap<String, String>,
    /// Its lease duration: `wanted`'s once the hub's rollout released it, else the one it has.
    pub lease_duration_seconds: i32,
    /// The hub's rollout released it to its target (its agent may move too).
    pub released: bool,
}

/// The annotation a writer of a hub's Spokes (`sync`, `apply`) keeps on the Hub while it writes
/// them, saying when it began (RFC 3339). The hub's rollout releases no spoke meanwhile: it
/// starts from every spoke's new settings at once, not from whichever Spoke was written first
/// (a canary group would otherwise not go first when another Spoke's write landed before its).
pub const ANNOTATION_WRITING_SPOKES: &str = "fleetform.io/writing-spokes";

/// How long the mark holds a rollout at most: a writer that stopped half-way holds it no longer.
pub const WRITING_SPOKES_AT_MOST: SignedDuration = SignedDuration::from_secs(300);

/// Until when `hub`'s rollout waits at `now` for its Spokes being written, if it does. A mark
/// that cannot be read holds nothing, nor one dated further ahead of this clock than
/// [`WRITING_SPOKES_AT_MOST`] (so no mark holds for longer than twice that).
pub fn writing_spokes_until(hub: &Hub, now: Timestamp) -> Option<Timestamp> {
    let began: Timestamp = hub
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_WRITING_SPOKES)?
        .parse()
        .ok()?;
    let until = began + WRITING_SPOKES_AT_MOST;
    (until > now && began <= now + WRITING_SPOKES_AT_MOST).then_some(until)
}

/// The [`Gate`] of the joined spoke `spoke` of `hub`, which git wants to have `wanted` and which
/// has the addons `has_addons` and the lease duration `has_lease` now; `own` are the addons with
/// a rollout of their own ([`own_rollouts`]), each gated by it alone, the rest by the hub's.
pub fn gate(
    hub: &Hub,
    spoke: &str,
    own: &BTreeMap<&str, &RolloutSpec>,
    wanted: &EffectiveSpoke,
    has_addons: &BTreeMap<String, String>,
    has_lease: Option<i32>,
) -> Gate {
    let own_names: BTreeSet<String> = own.keys().map(ToString::to_string).collect();
    let target = Settings::wanted(wanted).without(&own_names).digest();
    let released = released(hub, spoke, &target);
    let (mut addons, lease_duration_seconds) = if released {
        (wanted.addons.clone(), wanted.lease_duration_seconds)
    } else {
        (
            has_addons.clone(),
            has_lease.unwrap_or(wanted.lease_duration_seconds),
        )
    };
    addons.retain(|addon, _| !own.contains_key(addon.as_str()));
    for (addon, rollout) in own {
        let wanted = wanted.addons.get(*addon);
        let target = Settings::addon(addon, wanted).digest();
        let kept = if addon_released(hub, addon, rollout, spoke, &target) {
            wanted
        } else {
            has_addons.get(*addon)
        };
        if let Some(namespace) = kept {
            addons.insert(addon.to_string(), namespace.clone());
        }
    }
    Gate {
        addons,
        lease_duration_seconds,
        released,
    }
}

/// What the hub's reconciler reports of a spoke in `status.applied`: the addons fleetform
/// enabled on it (`enabled`, name → install namespace), those of them not Available, and its
/// ManagedCluster's lease duration.
pub fn applied(
    enabled: &BTreeMap<String, String>,
    unavailable: Vec<String>,
    lease_duration_seconds: i32,
) -> AppliedSettings {
    AppliedSettings {
        addons: enabled
            .iter()
            .map(|(name, namespace)| AppliedAddon {
                name: name.clone(),
                install_namespace: namespace.clone(),
            })
            .collect(),
        unavailable_addons: unavailable,
        lease_duration_seconds,
    }
}

/// `applied` once the spoke's addons enabled are `enabled`: what a pass that enabled or disabled
/// addons reports with its own status write, rather than leaving it to one more write of the
/// next pass (one per joining spoke with addons). An addon newly enabled is not Available yet;
/// the others keep what was read of them.
pub fn with_addons(
    applied: &AppliedSettings,
    enabled: &BTreeMap<String, String>,
) -> AppliedSettings {
    let unavailable = enabled
        .keys()
        .filter(|name| {
            applied.unavailable_addons.contains(name)
                || !applied.addons.iter().any(|addon| &addon.name == *name)
        })
        .cloned()
        .collect();
    self::applied(enabled, unavailable, applied.lease_duration_seconds)
}

/// What the rollout needs to know of one spoke of the hub.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpokeFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// What git wants for the spoke.
    pub wanted: Settings,
    /// What it has now; `None` while it joins, or until its settings are reported
    /// ([`Settings::running`]).
    pub running: Option<Settings>,
    /// Its cluster is Available.
    pub online: bool,
    /// Addons enabled on it that are not Available.
    pub unavailable_addons: Vec<String>,
}

impl SpokeFacts {
    /// It has what git wants.
    fn on_wanted(&self) -> bool {
        self.running.as_ref() == Some(&self.wanted)
    }

    /// What the hub's rollout sees of the spoke: all but the addons `own` that roll out by
    /// themselves.
    pub fn under_hub(&self, own: &BTreeSet<String>) -> SpokeFacts {
        SpokeFacts {
            wanted: self.wanted.clone().without(own),
            running: self.running.clone().map(|running| running.without(own)),
            unavailable_addons: self
                .unavailable_addons
                .iter()
                .filter(|addon| !own.contains(*addon))
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    /// What the rollout of `addon` sees of the spoke: whether it has the addon, where.
    pub fn of_addon(&self, addon: &str) -> SpokeFacts {
        SpokeFacts {
            wanted: Settings::addon(addon, self.wanted.addons.get(addon)),
            running: self
                .running
                .as_ref()
                .map(|running| Settings::addon(addon, running.addons.get(addon))),
            unavailable_addons: self
                .unavailable_addons
                .iter()
                .filter(|name| *name == addon)
                .cloned()
                .collect(),
            ..self.clone()
        }
    }
}

/// The rollout as [`decide`] leaves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub status: RolloutStatus,
    /// When to decide again though nothing changed (a bake or a progress deadline ends).
    pub wake_at: Option<Timestamp>,
    /// The rollout halted in this decision (it was not halted before): worth an Event.
    pub halted_now: bool,
}

/// The target of a hub's rollout as [`RolloutStatus::target`] names it: `VERSION/DIGEST`, the
/// version of the hub's own agent and a digest of every spoke's target, so that a commit that
/// changes what any spoke is to have is a new rollout.
pub fn target(hub: &Hub, spokes: &[SpokeFacts]) -> String {
    let agent = crate::plan::desired::agent_config(None, hub);
    format!(
        "{}/{}",
        agent.version,
        targets_digest(&agent.hash(), spokes)
    )
}

/// The target of the rollout of `addon` (its own, [`SpokeFacts::of_addon`]) over `spokes`:
/// `ADDON/DIGEST`.
pub fn addon_target(addon: &str, spokes: &[SpokeFacts]) -> String {
    format!("{addon}/{}", targets_digest(addon, spokes))
}

fn targets_digest(what: &str, spokes: &[SpokeFacts]) -> String {
    let targets: Vec<(&str, String)> = spokes
        .iter()
        .map(|spoke| (spoke.name.as_str(), spoke.wanted.digest()))
        .collect();
    stable_hash(&serde_json::to_string(&(what, targets)).unwrap_or_default())
}

/// Whether the spoke `spoke` of `hub` may move to the settings whose digest is `target`:
/// always under `strategy: All`; otherwise once the hub's rollout released it for that very
/// target (a release for an older target does not carry over to a newer one).
pub fn released(hub: &Hub, spoke: &str, target: &str) -> bool {
    released_by(hub, spoke, |entry| entry.target == target)
}

/// Whether the spoke `spoke` of `hub` may have the addon `addon`, whose own rollout is `spec`,
/// as the target `target` ([`Settings::addon`]'s digest) says: as [`released`], by the addon's
/// rollout as the Hub's `status.addonRollouts` keeps it.
pub fn addon_released(
    hub: &Hub,
    addon: &str,
    spec: &RolloutSpec,
    spoke: &str,
    target: &str,
) -> bool {
    if spec.strategy == RolloutStrategy::All {
        return true;
    }
    hub.status
        .iter()
        .flat_map(|status| status.addon_rollouts.iter())
        .find(|rollout| rollout.addon == addon)
        .and_then(|rollout| {
            rollout
                .rollout
                .spokes
                .iter()
                .find(|entry| entry.name == spoke)
        })
        .is_some_and(|entry| entry.target == target && released_state(entry.state))
}

fn released_state(state: SpokeRolloutState) -> bool {
    matches!(
        state,
        SpokeRolloutState::InProgress | SpokeRolloutState::Succeeded | SpokeRolloutState::Failed
    )
}

/// Whether the agent of the spoke `spoke` of `hub` may upgrade itself to the configuration
/// hash `agent`: as [`released`], for a target with that agent (the agent does not know the
/// rest of its spoke's target).
pub fn agent_released(hub: &Hub, spoke: &str, agent: &str) -> bool {
    released_by(hub, spoke, |entry| entry.agent == agent)
}

fn released_by(hub: &Hub, spoke: &str, for_target: impl Fn(&SpokeRollout) -> bool) -> bool {
    if hub.spec.rollout.strategy == RolloutStrategy::All {
        return true;
    }
    hub.status
        .as_ref()
        .and_then(|status| status.rollout.as_ref())
        .and_then(|rollout| rollout.spokes.iter().find(|entry| entry.name == spoke))
        .is_some_and(|entry| for_target(entry) && released_state(entry.state))
}

/// What the rollouts of `hub` hold `spoke` back with, in words for `apply`'s progress lines:
/// the hub's own and those of the addons `own` ([`own_rollouts`]) that roll out by themselves,
/// each saying whose it is and what it waits on — the spoke's turn not come and the wave that
/// runs, a pause, a halt, a failure, or the spoke passed over while offline. `None` when no
/// rollout holds it (released, done, or no rollout).
pub fn holding(hub: &Hub, spoke: &str, own: &BTreeMap<&str, &RolloutSpec>) -> Option<String> {
    let status = hub.status.as_ref()?;
    let hubs = status.rollout.iter().map(|rollout| {
        (
            "the hub's rollout".to_string(),
            hub.spec.rollout.paused,
            rollout,
        )
    });
    let addons = status.addon_rollouts.iter().map(|kept| {
        let paused = own.get(kept.addon.as_str()).is_some_and(|spec| spec.paused);
        (
            format!("the rollout of addon {}", kept.addon),
            paused,
            &kept.rollout,
        )
    });
    let held: Vec<String> = hubs
        .chain(addons)
        .filter_map(|(whose, paused, rollout)| held_by(&whose, paused, rollout, spoke))
        .collect();
    (!held.is_empty()).then(|| held.join("; "))
}

/// What `rollout` (`whose`, paused or not) holds `spoke` back with, if anything.
fn held_by(whose: &str, paused: bool, rollout: &RolloutStatus, spoke: &str) -> Option<String> {
    let entry = rollout.spokes.iter().find(|entry| entry.name == spoke)?;
    let why = match entry.state {
        SpokeRolloutState::Pending if rollout.halted.is_some() => {
            format!("{whose} is halted (see the Hub's RolloutHalted condition)")
        }
        SpokeRolloutState::Pending if paused => format!("{whose} is paused"),
        SpokeRolloutState::Pending => match rollout.wave {
            Some(wave) => format!("its turn in {whose} has not come (wave {wave} runs)"),
            None => format!("its turn in {whose} has not come"),
        },
        SpokeRolloutState::Failed => format!(
            "failed in {whose}: {}",
            entry.reason.as_deref().unwrap_or("failed")
        ),
        SpokeRolloutState::SkippedOffline => {
            format!("passed over by {whose} while offline; it moves once back")
        }
        SpokeRolloutState::InProgress | SpokeRolloutState::Succeeded => return None,
    };
    Some(why)
}

/// The rollout after one look at the spokes at `now`, from the status `previous` left.
pub fn decide(
    spec: &RolloutSpec,
    target: &str,
    spokes: &[SpokeFacts],
    previous: Option<&RolloutStatus>,
    now: Timestamp,
) -> Decision {
    let same_target = previous.filter(|previous| previous.target == target);
    let recorded = |spoke: &SpokeFacts| {
        let mut entry = previous
            .iter()
            .flat_map(|previous| previous.spokes.iter())
            .find(|entry| entry.name == spoke.name)?
            .clone();
        // Recorded by a fleetform whose targets were the agent alone (its `target` the agent's
        // hash, no `agent`): for the same agent, it stands for the spoke's target now (that
        // fleetform gave addons and lease durations at once).
        if entry.agent.is_empty() && entry.target == spoke.wanted.agent {
            entry.target = spoke.wanted.digest();
            entry.agent = spoke.wanted.agent.clone();
        }
        Some(entry)
    };
    // A spoke whose settings are not reported (no `status.applied`: its hub's fleetform was
    // upgraded from one that did not write it, and its reconciler has not yet) keeps the entry
    // the status recorded, as it stands, until they are: it neither leaves the rollout (which
    // would start it afresh) nor moves in it. A spoke still joining has no entry and no place.
    let unreported: BTreeSet<&str> = spokes
        .iter()
        .filter(|spoke| spoke.running.is_none() && recorded(spoke).is_some())
        .map(|spoke| spoke.name.as_str())
        .collect();
    let facts: BTreeMap<&str, &SpokeFacts> = spokes
        .iter()
        .filter(|spoke| spoke.running.is_some() || unreported.contains(spoke.name.as_str()))
        .map(|spoke| (spoke.name.as_str(), spoke))
        .collect();
    let mut entries: BTreeMap<&str, SpokeRollout> = facts
        .values()
        .map(|spoke| {
            // An entry carries over while the spoke's own target stays; a spoke that already
            // has its target has nothing to roll out.
            let target = spoke.wanted.digest();
            let kept = recorded(spoke)
                .filter(|entry| entry.target == target || unreported.contains(spoke.name.as_str()));
            let entry = kept.unwrap_or_else(|| SpokeRollout {
                name: spoke.name.clone(),
                target,
                agent: spoke.wanted.agent.clone(),
                state: if spoke.on_wanted() {
                    SpokeRolloutState::Succeeded
                } else {
                    SpokeRolloutState::Pending
                },
                released_at: None,
                updated_at: None,
                reason: None,
            });
            (spoke.name.as_str(), entry)
        })
        .collect();

    let mut wake_at = None;
    for (name, entry) in entries
        .iter_mut()
        .filter(|(name, _)| !unreported.contains(*name))
    {
        let spoke = facts[name];
        if let Some(wake) = progress(spec, entry, spoke, now) {
            wake_at = earliest(wake_at, wake);
        }
    }

    let failed: Vec<&SpokeRollout> = entries
        .values()
        .filter(|entry| entry.state == SpokeRolloutState::Failed)
        .collect();
    let failed_count = failed.len() as u32;
    // Failures an operator accepted by pausing the halted rollout count no more, until more fail.
    let mut accepted =
        same_target.map_or(0, |previous| previous.accepted_failures.min(failed_count));
    let was_halted = same_target.and_then(|previous| previous.halted.clone());
    if spec.paused && was_halted.is_some() {
        accepted = failed_count;
    }
    let order = ordered(
        spec,
        entries.values().map(|entry| facts[entry.name.as_str()]),
    );
    let halted = over_budget(spec, &order, &entries, accepted).map(|over| {
        format!(
            "{over}, more than maxFailures {} allows ({}): {}",
            spec.max_failures,
            over.budget,
            failed
                .iter()
                .map(|entry| format!(
                    "{} ({})",
                    entry.name,
                    entry.reason.as_deref().unwrap_or("failed")
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )
    });
    // Halted, nothing is released; paused, `release` releases nothing either.
    let wave = if halted.is_none() {
        release(spec, &order, &mut entries, &facts, &unreported, now)
    } else {
        current_wave(&order, &entries)
    };
    // An unreported spoke's deadline waits for its report: it cannot be judged before.
    for entry in entries
        .values()
        .filter(|entry| !unreported.contains(entry.name.as_str()))
    {
        if entry.state == SpokeRolloutState::InProgress
            && let Some(wake) = deadline_of(spec, entry)
        {
            wake_at = earliest(wake_at, wake);
        }
    }

    let halted_now = halted.is_some() && was_halted.is_none();
    Decision {
        status: RolloutStatus {
            target: target.to_string(),
            wave,
            halted,
            accepted_failures: accepted,
            spokes: entries.into_values().collect(),
        },
        wake_at,
        halted_now,
    }
}

/// Failures past what `maxFailures` allows: how many failed of how many, and where.
struct OverBudget {
    failed: usize,
    of: usize,
    /// The group whose budget they passed; none for the whole rollout's.
    group: Option<String>,
    budget: usize,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} spoke(s)", self.failed, self.of)?;
        if let Some(group) = &self.group {
            write!(f, " of group {group}")?;
        }
        write!(f, " failed")
    }
}

/// Whether the failures among `entries`, but the `accepted` ones, pass `maxFailures`: a count
/// is the whole rollout's; a percentage, of the spokes rolled out — under `Groups`, of each
/// group's own (the spokes no group selects are one more), so that a group of 5 fails at its
/// own 20% whatever the size of the rest. Failures accepted are those of the earliest groups
/// (groups go in order, and a halt holds the next).
fn over_budget(
    spec: &RolloutSpec,
    order: &[Stage],
    entries: &BTreeMap<&str, SpokeRollout>,
    accepted: u32,
) -> Option<OverBudget> {
    let failed_in = |names: &mut dyn Iterator<Item = &str>| {
        names
            .filter(|name| {
                entries
                    .get(name)
                    .is_some_and(|entry| entry.state == SpokeRolloutState::Failed)
            })
            .count()
    };
    let mut accepted = accepted as usize;
    if let (RolloutStrategy::Groups, SpokeCount::Percent(_)) = (spec.strategy, spec.max_failures) {
        for stage in order {
            let failed = failed_in(&mut stage.spokes.iter().map(String::as_str));
            let forgiven = failed.min(accepted);
            accepted -= forgiven;
            let budget = spec.max_failures.of(stage.spokes.len());
            if failed - forgiven > budget {
                return Some(OverBudget {
                    failed,
                    of: stage.spokes.len(),
                    group: Some(
                        stage
                            .group
                            .clone()
                            .unwrap_or_else(|| "(spokes no group selects)".to_string()),
                    ),
                    budget,
                });
            }
        }
        return None;
    }
    let failed = failed_in(&mut entries.keys().copied());
    let budget = spec.max_failures.of(entries.len());
    (failed.saturating_sub(accepted) > budget).then_some(OverBudget {
        failed,
        of: entries.len(),
        group: None,
        budget,
    })
}

/// Moves a released spoke on: it bakes once it has its target and is Available with every
/// addon Available, succeeds once it has baked `minSuccessSeconds`, and fails once its progress
/// deadline passes first. A failed spoke that comes good succeeds. Returns when its bake ends,
/// if it is baking. (An entry is always for the spoke's wanted settings: see [`decide`].)
fn progress(
    spec: &RolloutSpec,
    entry: &mut SpokeRollout,
    spoke: &SpokeFacts,
    now: Timestamp,
) -> Option<Timestamp> {
    let on_target = spoke.on_wanted() && spoke.online && spoke.unavailable_addons.is_empty();
    match entry.state {
        SpokeRolloutState::Pending | SpokeRolloutState::SkippedOffline if on_target => {
            // It got there without the rollout (its target came back to what it runs).
            entry.state = SpokeRolloutState::Succeeded;
            entry.reason = None;
            None
        }
        SpokeRolloutState::InProgress => {
            if !on_target {
                entry.updated_at = None;
            } else {
                let since = entry.updated_at.get_or_insert_with(|| stamp(now)).0;
                let done = since + seconds(spec.min_success_seconds);
                if done <= now {
                    entry.state = SpokeRolloutState::Succeeded;
                    return None;
                }
                return Some(done);
            }
            if deadline_of(spec, entry).is_some_and(|deadline| deadline <= now) {
                entry.state = SpokeRolloutState::Failed;
                entry.reason = Some(format!(
                    "{} within progressDeadlineSeconds ({} s)",
                    short_of(spoke),
                    spec.progress_deadline_seconds
                ));
            }
            None
        }
        SpokeRolloutState::Failed if on_target => {
            entry.state = SpokeRolloutState::Succeeded;
            entry.reason = None;
            None
        }
        _ => None,
    }
}

/// What a released spoke that is not done lacks, in words.
fn short_of(spoke: &SpokeFacts) -> String {
    let running = spoke.running.as_ref();
    if !spoke.online {
        "not Available".to_string()
    } else if running.is_some_and(|running| running.agent != spoke.wanted.agent) {
        "not on the new agent".to_string()
    } else if !spoke.on_wanted() {
        "its addons or lease duration not changed".to_string()
    } else {
        format!(
            "addons not Available: {}",
            spoke.unavailable_addons.join(", ")
        )
    }
}

/// When a released spoke that is not done counts as failed.
fn deadline_of(spec: &RolloutSpec, entry: &SpokeRollout) -> Option<Timestamp> {
    entry
        .released_at
        .as_ref()
        .map(|released| released.0 + seconds(spec.progress_deadline_seconds))
}

/// `now` as the Hub's status keeps it: a Kubernetes time holds whole seconds. A decision that
/// stamped the fraction too would wake at an instant no later decision (after a restart, say)
/// computes from the status, and would differ from the status it was read back as.
fn stamp(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

fn seconds(seconds: i64) -> SignedDuration {
    SignedDuration::from_secs(seconds.max(0))
}

fn earliest(current: Option<Timestamp>, candidate: Timestamp) -> Option<Timestamp> {
    Some(current.map_or(candidate, |current| current.min(candidate)))
}

/// One group of a rollout's order: its name (none for Progressive and All, and for the spokes no
/// group of `Groups` selects), its spokes in order, and how many of them may move at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    pub group: Option<String>,
    pub spokes: Vec<String>,
    pub max_concurrency: usize,
}

/// The spokes of a rollout in the order it takes them: for `Groups`, each group's spokes (the
/// first group that selects a spoke has it), then those none selects; otherwise all by name.
pub fn ordered<'a>(spec: &RolloutSpec, spokes: impl Iterator<Item = &'a SpokeFacts>) -> Vec<Stage> {
    let mut spokes: Vec<&SpokeFacts> = spokes.collect();
    spokes.sort_by(|a, b| a.name.cmp(&b.name));
    let limit = |count: Option<crate::api::fleet::SpokeCount>, size: usize| match count {
        Some(count) => count.of(size).max(1),
        None => size.max(1),
    };
    let stage = |group: Option<String>, members: Vec<&SpokeFacts>, concurrency| {
        let size = members.len();
        Stage {
            group,
            spokes: members
                .into_iter()
                .map(|spoke| spoke.name.clone())
                .collect(),
            max_concurrency: limit(concurrency, size),
        }
    };
    match spec.strategy {
        RolloutStrategy::All => vec![Stage {
            group: None,
            max_concurrency: spokes.len().max(1),
            spokes: spokes.into_iter().map(|spoke| spoke.name.clone()).collect(),
        }],
        RolloutStrategy::Progressive => vec![stage(None, spokes, spec.max_concurrency)],
        RolloutStrategy::Groups => {
            let mut members: Vec<Vec<&SpokeFacts>> = vec![Vec::new(); spec.groups.len()];
            let mut rest = Vec::new();
            for spoke in spokes {
                let group = spec.groups.iter().position(|group| {
                    group.spokes.contains(&spoke.name)
                        || group.selector.as_ref().is_some_and(|selector| {
                            !selector.match_labels.is_empty()
                                && selector
                                    .match_labels
                                    .iter()
                                    .all(|(key, value)| spoke.labels.get(key) == Some(value))
                        })
                });
                match group {
                    Some(index) => members[index].push(spoke),
                    None => rest.push(spoke),
                }
            }
            let mut stages: Vec<Stage> = spec
                .groups
                .iter()
                .zip(members)
                .map(|(group, members)| {
                    stage(
                        Some(group.name.clone()),
                        members,
                        group.max_concurrency.or(spec.max_concurrency),
                    )
                })
                .collect();
            if !rest.is_empty() {
                stages.push(stage(None, rest, spec.max_concurrency));
            }
            stages
        }
    }
}

fn unfinished(state: SpokeRolloutState) -> bool {
    matches!(
        state,
        SpokeRolloutState::Pending | SpokeRolloutState::InProgress
    )
}

/// Releases what may move now: in the first stage with a spoke pending or in progress, pending
/// spokes in order while fewer than its `max_concurrency` are in progress (an offline one is
/// passed over under `offline: Skip`); once no stage has, the passed-over spokes that are back.
/// The `unreported` spokes keep their state (the next in order go in their stead). Returns the
/// wave the rollout is on.
fn release(
    spec: &RolloutSpec,
    order: &[Stage],
    entries: &mut BTreeMap<&str, SpokeRollout>,
    facts: &BTreeMap<&str, &SpokeFacts>,
    unreported: &BTreeSet<&str>,
    now: Timestamp,
) -> Option<u32> {
    let current = order.iter().find(|stage| {
        stage
            .spokes
            .iter()
            .any(|name| unfinished(entries[name.as_str()].state))
    });
    let (names, limit): (Vec<&str>, usize) = match current {
        Some(stage) => (
            stage.spokes.iter().map(String::as_str).collect(),
            stage.max_concurrency,
        ),
        None => {
            // Every stage is through: the spokes passed over while offline get their turn.
            let limit = spec
                .max_concurrency
                .map_or(entries.len(), |count| count.of(entries.len()))
                .max(1);
            let names = entries
                .iter()
                .filter(|(_, entry)| entry.state == SpokeRolloutState::SkippedOffline)
                .map(|(name, _)| *name)
                .collect();
            (names, limit)
        }
    };
    if !spec.paused {
        let mut in_progress = names
            .iter()
            .filter(|name| {
                entries
                    .get(**name)
                    .is_some_and(|entry| entry.state == SpokeRolloutState::InProgress)
            })
            .count();
        for name in &names {
            if in_progress >= limit {
                break;
            }
            if unreported.contains(name) {
                continue;
            }
            let (Some(entry), Some(spoke)) = (entries.get_mut(*name), facts.get(*name)) else {
                continue;
            };
            let online = spoke.online;
            match entry.state {
                SpokeRolloutState::Pending if !online && spec.offline == OfflinePolicy::Skip => {
                    entry.state = SpokeRolloutState::SkippedOffline;
                    entry.reason = Some("not Available when its turn came".to_string());
                }
                SpokeRolloutState::Pending => {
                    start(entry, now);
                    in_progress += 1;
                }
                SpokeRolloutState::SkippedOffline if current.is_none() && online => {
                    start(entry, now);
                    in_progress += 1;
                }
                _ => {}
            }
        }
    }
    current_wave(order, entries)
}

fn start(entry: &mut SpokeRollout, now: Timestamp) {
    entry.state = SpokeRolloutState::InProgress;
    entry.released_at = Some(stamp(now));
    entry.updated_at = None;
    entry.reason = None;
}

/// The wave the rollout is on (1-based over every stage's waves), none when no spoke is pending
/// or in progress.
fn current_wave(order: &[Stage], entries: &BTreeMap<&str, SpokeRollout>) -> Option<u32> {
    let mut before = 0u32;
    for stage in order {
        let waves = stage.spokes.len().div_ceil(stage.max_concurrency) as u32;
        let states: Vec<SpokeRolloutState> = stage
            .spokes
            .iter()
            .map(|name| entries[name.as_str()].state)
            .collect();
        if states.iter().any(|state| unfinished(*state)) {
            let started = states
                .iter()
                .filter(|state| **state != SpokeRolloutState::Pending)
                .count();
            let wave = started.div_ceil(stage.max_concurrency).max(1) as u32;
            return Some(before + wave.min(waves.max(1)));
        }
        before += waves;
    }
    None
}

/// One wave as `plan` shows it: the spokes it moves, and the offline spokes its turn passes over
/// or waits on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wave {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub spokes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline: Vec<String>,
}

/// The waves a rollout of `spokes` would take if they moved in lockstep, each spoke taking its
/// turn: with `offline: Skip` an offline spoke is passed over (listed with the wave, retried at
/// the end) and its place goes to the next; with `Wait` it holds its place. Spokes that already
/// have their target are left out.
pub fn waves(spec: &RolloutSpec, spokes: &[SpokeFacts]) -> Vec<Wave> {
    let moving: Vec<&SpokeFacts> = spokes.iter().filter(|spoke| !spoke.on_wanted()).collect();
    let by_name: BTreeMap<&str, &SpokeFacts> = moving
        .iter()
        .map(|spoke| (spoke.name.as_str(), *spoke))
        .collect();
    let mut waves = Vec::new();
    for stage in ordered(spec, moving.iter().copied()) {
        let mut wave = Wave {
            group: stage.group.clone(),
            spokes: Vec::new(),
            offline: Vec::new(),
        };
        for name in stage.spokes {
            let spoke = by_name[name.as_str()];
            if !spoke.online && spec.offline == OfflinePolicy::Skip {
                wave.offline.push(name);
                continue;
            }
            if !spoke.online {
                wave.offline.push(name.clone());
            }
            wave.spokes.push(name);
            if wave.spokes.len() == stage.max_concurrency {
                let group = wave.group.clone();
                waves.push(std::mem::replace(
                    &mut wave,
                    Wave {
                        group,
                        spokes: Vec::new(),
                        offline: Vec::new(),
                    },
                ));
            }
        }
        if !wave.spokes.is_empty() || !wave.offline.is_empty() {
            waves.push(wave);
        }
    }
    waves
}
