//! A hub's rollout as the Hub controller runs it: gathers each spoke's wanted settings (agent,
//! addons, lease duration) and those its status reports it has, and its availability, asks
//! [`crate::rollout::decide`], and writes the outcome into the
//! Hub's `status.rollout` (where the reconciler and the agents read their release), the
//! `RolloutHalted` condition and Events. Under `strategy: All` it keeps no state. What it finds
//! it also counts ([`RolloutMetrics`] on the hub's `/metrics`: `fleetform_rollout_*` for the
//! hub's, `fleetform_addon_rollout_*` for each addon's own).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::json;
use tracing::info;

use super::run::{FIELD_MANAGER, ReconcileError};
use crate::api::fleet::{
    AddOn, AddonRollout, Hub, Phase, RolloutSpec, RolloutStatus, RolloutStrategy, SYSTEM_NAMESPACE,
    Spoke, SpokeRolloutState,
};
use crate::api::vocabulary::{CONDITION_ROLLOUT_HALTED, STATUS_FALSE, STATUS_TRUE};
use crate::events::{self, EventType, Reporter};
use crate::plan::desired::effective;
use crate::rollout::{self, Decision, Settings, SpokeFacts};
use crate::runtime::conditions::set_conditions;
use crate::runtime::error::KubeError;

/// Field manager of `status.rollout`: server-side apply removes what a decision leaves out.
const ROLLOUT_FIELD_MANAGER: &str = "fleetform-rollout";

/// Every rollout state, as `status.rollout` spells it.
const STATES: [(SpokeRolloutState, &str); 5] = [
    (SpokeRolloutState::Pending, "pending"),
    (SpokeRolloutState::InProgress, "inProgress"),
    (SpokeRolloutState::Succeeded, "succeeded"),
    (SpokeRolloutState::Failed, "failed"),
    (SpokeRolloutState::SkippedOffline, "skippedOffline"),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HubLabels {
    hub: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AddonLabels {
    hub: String,
    addon: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// The figures of one kind of rollout, each series labelled `L` (which rollout it is): its
/// spokes by state, its wave, whether it halted and the most spokes in progress at once.
#[derive(Clone, Debug)]
struct Figures<L> {
    spokes: Family<(L, StateLabel), Gauge>,
    wave: Family<L, Gauge>,
    halted: Family<L, Gauge>,
    most_in_progress: Family<L, Gauge>,
}

impl<L: Clone + std::hash::Hash + Eq> Default for Figures<L> {
    fn default() -> Self {
        Figures {
            spokes: Family::default(),
            wave: Family::default(),
            halted: Family::default(),
            most_in_progress: Family::default(),
        }
    }
}

impl<L> Figures<L>
where
    L: Clone + std::fmt::Debug + std::hash::Hash + Eq + EncodeLabelSet + Send + Sync + 'static,
{
    /// Registers them in `registry`; `rollout` says whose rollout they count, in words.
    fn register(&self, registry: &mut Registry, rollout: &str) {
        registry.register(
            "spokes",
            format!(
                "Spokes of {rollout} by state (pending, inProgress, succeeded, failed, skippedOffline)"
            ),
            self.spokes.clone(),
        );
        registry.register(
            "wave",
            format!("The wave {rollout} is on (0 once no spoke is pending or in progress)"),
            self.wave.clone(),
        );
        registry.register(
            "halted",
            format!("1 while {rollout} is halted (failures past maxFailures)"),
            self.halted.clone(),
        );
        registry.register(
            "max_in_progress",
            format!(
                "The most spokes in progress at once in {rollout} to its current target, as this replica saw it"
            ),
            self.most_in_progress.clone(),
        );
    }

    /// Counts `status`, the rollout `labels` name as just decided; `previous` is the status it
    /// was decided from (another target starts the maximum afresh).
    fn observe(&self, labels: &L, previous: Option<&RolloutStatus>, status: &RolloutStatus) {
        for (state, label) in STATES {
            let count = status
                .spokes
                .iter()
                .filter(|entry| entry.state == state)
                .count();
            self.spokes
                .get_or_create(&(labels.clone(), StateLabel { state: label }))
                .set(gauge_value(count));
        }
        self.wave
            .get_or_create(labels)
            .set(status.wave.map_or(0, i64::from));
        self.halted
            .get_or_create(labels)
            .set(i64::from(status.halted.is_some()));
        let in_progress = gauge_value(
            status
                .spokes
                .iter()
                .filter(|entry| entry.state == SpokeRolloutState::InProgress)
                .count(),
        );
        let most = self.most_in_progress.get_or_create(labels);
        if previous.is_some_and(|previous| previous.target == status.target) {
            most.set(most.get().max(in_progress));
        } else {
            most.set(in_progress);
        }
    }

    /// Drops the series of the rollout `labels` name.
    fn forget(&self, labels: &L) {
        for (_, state) in STATES {
            self.spokes.remove(&(labels.clone(), StateLabel { state }));
        }
        self.wave.remove(labels);
        self.halted.remove(labels);
        self.most_in_progress.remove(labels);
    }

    fn clear(&self) {
        self.spokes.clear();
        self.wave.clear();
        self.halted.clear();
        self.most_in_progress.clear();
    }
}

/// Where each hub's rollout, and each rollout of an addon of its own on each hub, stands, as
/// the Hub controller last decided it; cheap to clone (every metric is shared). Unregistered
/// (the default), it counts into nothing. A hub without a rollout (`strategy: All`, or being
/// deleted) has no series of its own, an addon without a rollout of its own (or gone) none on
/// any hub, and a replica that stops leading drops them all: only the leader decides, so only
/// its figures are current.
#[derive(Clone, Debug, Default)]
pub struct RolloutMetrics {
    hubs: Figures<HubLabels>,
    addons: Figures<AddonLabels>,
    /// The addons with series, by hub: a family cannot list its series, and a hub's addon
    /// rollouts that end must lose theirs.
    addon_series: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>,
}

impl RolloutMetrics {
    /// Registers them in `registry`: the hubs' rollouts prefixed `fleetform_rollout`, labelled
    /// `hub`; the addons' own prefixed `fleetform_addon_rollout`, labelled `hub` and `addon`.
    pub fn register(&self, registry: &mut Registry) {
        self.hubs.register(
            registry.sub_registry_with_prefix("fleetform_rollout"),
            "a hub's rollout",
        );
        self.addons.register(
            registry.sub_registry_with_prefix("fleetform_addon_rollout"),
            "an addon's own rollout on a hub",
        );
    }

    /// Counts `status`, the rollout of `hub` as just decided from `previous`.
    fn observe(&self, hub: &str, previous: Option<&RolloutStatus>, status: &RolloutStatus) {
        self.hubs.observe(&hub_labels(hub), previous, status);
    }

    /// Counts `status`, the rollout of `addon` on `hub` as just decided from `previous`.
    fn observe_addon(
        &self,
        hub: &str,
        addon: &str,
        previous: Option<&RolloutStatus>,
        status: &RolloutStatus,
    ) {
        self.addon_series()
            .entry(hub.to_string())
            .or_default()
            .insert(addon.to_string());
        self.addons
            .observe(&addon_labels(hub, addon), previous, status);
    }

    /// Drops the series of `hub`'s own rollout, which it has no more (`strategy: All`).
    fn forget_hub_rollout(&self, hub: &str) {
        self.hubs.forget(&hub_labels(hub));
    }

    /// Drops the series of the addon rollouts on `hub` but those of `rolling`: the others
    /// ended, or their addon is gone.
    fn forget_addon_rollouts_but(&self, hub: &str, rolling: &BTreeSet<&str>) {
        let mut series = self.addon_series();
        let Some(addons) = series.get_mut(hub) else {
            return;
        };
        addons.retain(|addon| {
            let keep = rolling.contains(addon.as_str());
            if !keep {
                self.addons.forget(&addon_labels(hub, addon));
            }
            keep
        });
        if addons.is_empty() {
            series.remove(hub);
        }
    }

    /// Drops every series of `hub`, its own rollout's and its addons': it has no rollout any
    /// more (it is being deleted).
    pub(super) fn forget(&self, hub: &str) {
        self.forget_hub_rollout(hub);
        self.forget_addon_rollouts_but(hub, &BTreeSet::new());
    }

    /// Drops every hub's series: this replica no longer decides.
    pub(super) fn clear(&self) {
        self.hubs.clear();
        self.addons.clear();
        self.addon_series().clear();
    }

    fn addon_series(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeSet<String>>> {
        self.addon_series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn hub_labels(hub: &str) -> HubLabels {
    HubLabels {
        hub: hub.to_string(),
    }
}

fn addon_labels(hub: &str, addon: &str) -> AddonLabels {
    AddonLabels {
        hub: hub.to_string(),
        addon: addon.to_string(),
    }
}

fn gauge_value(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// One look at `hub`'s rollouts over `spokes` (its own, not being deleted) — the hub's, and
/// each of the addons with a rollout of their own, as the AddOn documents the hub holds
/// (`addon_docs`) say — counted into `metrics` (the hub's); returns how long until they must be
/// looked at again though nothing changed.
pub(super) async fn run(
    client: &Client,
    reporter: &Reporter,
    metrics: &RolloutMetrics,
    hub: &Hub,
    spokes: &[std::sync::Arc<Spoke>],
    addon_docs: &BTreeMap<String, AddOn>,
) -> Result<Option<Duration>, ReconcileError> {
    let api = Api::<Hub>::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let name = hub.name_any();
    let spec = &hub.spec.rollout;
    let status = hub.status.clone().unwrap_or_default();
    // Which addons a spoke is to have, and which roll out by themselves, the AddOn documents
    // the hub holds say.
    let own = rollout::own_rollouts(addon_docs);
    let own_names: BTreeSet<String> = own.keys().map(ToString::to_string).collect();
    let rolling: Vec<(&str, &RolloutSpec)> = own
        .iter()
        .filter(|(_, rollout)| rollout.strategy != RolloutStrategy::All)
        .map(|(addon, rollout)| (*addon, *rollout))
        .collect();
    if spec.strategy == RolloutStrategy::All {
        metrics.forget_hub_rollout(&name);
    }
    metrics.forget_addon_rollouts_but(&name, &rolling.iter().map(|(addon, _)| *addon).collect());
    if spec.strategy == RolloutStrategy::All && rolling.is_empty() {
        if status.rollout.is_some() || !status.addon_rollouts.is_empty() {
            write(&api, &name, None, &[]).await?;
        }
        return Ok(None);
    }
    let facts: Vec<SpokeFacts> = spokes
        .iter()
        .filter(|spoke| spoke.metadata.deletion_timestamp.is_none())
        .map(|spoke| {
            let status = spoke.status.as_ref();
            SpokeFacts {
                name: spoke.name_any(),
                labels: spoke.labels().clone(),
                wanted: Settings::wanted(&effective(spoke, hub, addon_docs)),
                running: status.and_then(Settings::running),
                online: status.and_then(|status| status.phase) == Some(Phase::Running),
                unavailable_addons: status
                    .and_then(|status| status.applied.as_ref())
                    .map(|applied| applied.unavailable_addons.clone())
                    .unwrap_or_default(),
            }
        })
        .collect();
    let now = Timestamp::now();

    // Each rollout: how its messages begin (the hub's as they always did), its previous status
    // and its decision.
    let mut decided: Vec<(String, Option<&RolloutStatus>, Decision)> = Vec::new();
    if spec.strategy != RolloutStrategy::All {
        let facts: Vec<SpokeFacts> = facts
            .iter()
            .map(|spoke| spoke.under_hub(&own_names))
            .collect();
        let target = rollout::target(hub, &facts);
        let previous = status.rollout.as_ref();
        let decision = rollout::decide(spec, &target, &facts, previous, now);
        metrics.observe(&name, previous, &decision.status);
        decided.push((String::new(), previous, decision));
    }
    for (addon, rollout) in &rolling {
        let facts: Vec<SpokeFacts> = facts.iter().map(|spoke| spoke.of_addon(addon)).collect();
        let target = rollout::addon_target(addon, &facts);
        let previous = status
            .addon_rollouts
            .iter()
            .find(|kept| kept.addon == *addon)
            .map(|kept| &kept.rollout);
        let decision = rollout::decide(rollout, &target, &facts, previous, now);
        metrics.observe_addon(&name, addon, previous, &decision.status);
        decided.push((
            format!("the rollout of addon {addon}: "),
            previous,
            decision,
        ));
    }
    let hub_rollout = (spec.strategy != RolloutStrategy::All).then(|| decided[0].2.status.clone());
    let addon_rollouts: Vec<AddonRollout> = rolling
        .iter()
        .zip(&decided[usize::from(hub_rollout.is_some())..])
        .map(|((addon, _), (_, _, decision))| AddonRollout {
            addon: addon.to_string(),
            rollout: decision.status.clone(),
        })
        .collect();

    // The Events first: whoever sees the status or the condition can find its Event too.
    let reference = events::reference(hub);
    let mut halts = Vec::new();
    for (what, previous, decision) in &decided {
        if let Some(halted) = &decision.status.halted {
            halts.push(format!("{what}{halted}"));
            if decision.halted_now {
                info!(hub = name, rollout = what, %halted, "rollout halted");
                reporter
                    .publish_written(
                        &reference,
                        EventType::Warning,
                        CONDITION_ROLLOUT_HALTED,
                        "Rollout",
                        format!("{what}{halted}"),
                    )
                    .await;
            }
        }
        if previous.is_some_and(|previous| previous.wave.is_some())
            && decision.status.wave.is_none()
        {
            let done = decision
                .status
                .spokes
                .iter()
                .filter(|entry| entry.state == SpokeRolloutState::Succeeded)
                .count();
            reporter
                .publish_written(
                    &reference,
                    EventType::Normal,
                    "RolloutComplete",
                    "Rollout",
                    format!(
                        "{what}{done} of {} spoke(s) have {}",
                        decision.status.spokes.len(),
                        decision.status.target
                    ),
                )
                .await;
        }
    }
    if status.rollout != hub_rollout || status.addon_rollouts != addon_rollouts {
        write(&api, &name, hub_rollout.as_ref(), &addon_rollouts).await?;
    }
    let halted = (!halts.is_empty()).then(|| halts.join("; "));
    let condition = Condition {
        type_: CONDITION_ROLLOUT_HALTED.to_string(),
        status: if halted.is_some() {
            STATUS_TRUE
        } else {
            STATUS_FALSE
        }
        .to_string(),
        reason: if halted.is_some() {
            "MaxFailuresExceeded"
        } else {
            "Progressing"
        }
        .to_string(),
        message: halted.unwrap_or_else(|| {
            "failures are within maxFailures; a halt is resumed by a new commit or by setting paused: true, then false".to_string()
        }),
        observed_generation: hub.metadata.generation,
        last_transition_time: Time(now),
    };
    set_conditions(&api, &name, FIELD_MANAGER, |_| vec![condition.clone()])
        .await
        .map_err(KubeError::on(format!("Hub {name}"), "write RolloutHalted"))?;
    let wake_at = decided
        .iter()
        .filter_map(|(_, _, decision)| decision.wake_at)
        .min();
    Ok(wake_at.map(|at| {
        Duration::try_from(at.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO)
    }))
}

/// Writes `status.rollout` (none removes it) and `status.addonRollouts`.
async fn write(
    api: &Api<Hub>,
    name: &str,
    status: Option<&RolloutStatus>,
    addon_rollouts: &[AddonRollout],
) -> Result<(), ReconcileError> {
    let mut written = json!({});
    if let Some(status) = status {
        written["rollout"] = json!(status);
    }
    if !addon_rollouts.is_empty() {
        written["addonRollouts"] = json!(addon_rollouts);
    }
    // Server-side apply under a manager of its own: what it no longer applies, it removes.
    let patch = json!({
        "apiVersion": crate::api::fleet::API_VERSION,
        "kind": "Hub",
        "status": written,
    });
    api.patch_status(
        name,
        &PatchParams::apply(ROLLOUT_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(KubeError::on(format!("Hub {name}"), "write its rollout"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fleet::SpokeRollout;

    fn rollout(target: &str, states: &[SpokeRolloutState]) -> RolloutStatus {
        RolloutStatus {
            target: target.to_string(),
            wave: Some(2),
            spokes: states
                .iter()
                .enumerate()
                .map(|(index, state)| SpokeRollout {
                    name: format!("s{index}"),
                    target: "t".to_string(),
                    agent: String::new(),
                    state: *state,
                    released_at: None,
                    updated_at: None,
                    reason: None,
                })
                .collect(),
            ..RolloutStatus::default()
        }
    }

    /// The series `/metrics` serves of `metrics`, one a line, without HELP, TYPE and EOF.
    fn served(metrics: &RolloutMetrics) -> Vec<String> {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .map(str::to_string)
            .collect()
    }

    /// Each of `series` (name, labels and value) is a line of `lines`.
    fn serves(lines: &[String], series: &[&str]) {
        for series in series {
            assert!(
                lines.iter().any(|line| line == series),
                "{series} in {lines:#?}"
            );
        }
    }

    #[test]
    fn an_addons_own_rollout_has_series_of_its_own_beside_the_hubs_until_it_ends() {
        use SpokeRolloutState::*;
        let metrics = RolloutMetrics::default();
        metrics.observe("hub", None, &rollout("hub-t", &[Succeeded, InProgress]));
        let addon = rollout(
            "metrics-t",
            &[Succeeded, InProgress, Pending, SkippedOffline],
        );
        metrics.observe_addon("hub", "metrics", None, &addon);
        let both = served(&metrics);
        serves(
            &both,
            &[
                // The hub's own series keep their names and labels.
                "fleetform_rollout_spokes{hub=\"hub\",state=\"inProgress\"} 1",
                "fleetform_rollout_spokes{hub=\"hub\",state=\"pending\"} 0",
                "fleetform_rollout_wave{hub=\"hub\"} 2",
                "fleetform_rollout_halted{hub=\"hub\"} 0",
                "fleetform_rollout_max_in_progress{hub=\"hub\"} 1",
                "fleetform_addon_rollout_spokes{hub=\"hub\",addon=\"metrics\",state=\"pending\"} 1",
                "fleetform_addon_rollout_spokes{hub=\"hub\",addon=\"metrics\",state=\"inProgress\"} 1",
                "fleetform_addon_rollout_spokes{hub=\"hub\",addon=\"metrics\",state=\"succeeded\"} 1",
                "fleetform_addon_rollout_spokes{hub=\"hub\",addon=\"metrics\",state=\"failed\"} 0",
                "fleetform_addon_rollout_spokes{hub=\"hub\",addon=\"metrics\",state=\"skippedOffline\"} 1",
                "fleetform_addon_rollout_wave{hub=\"hub\",addon=\"metrics\"} 2",
                "fleetform_addon_rollout_halted{hub=\"hub\",addon=\"metrics\"} 0",
                "fleetform_addon_rollout_max_in_progress{hub=\"hub\",addon=\"metrics\"} 1",
            ],
        );
        assert_eq!(
            both.iter()
                .filter(|line| line.starts_with("fleetform_rollout_"))
                .count(),
            8,
            "the hub's rollout counts nothing of the addon's: {both:#?}"
        );

        // The addon's rollout halts, then its most in progress holds over a decision with none.
        let mut halted = rollout("metrics-t", &[Succeeded, Failed, Pending, SkippedOffline]);
        halted.halted = Some("1 of 4 spoke(s) failed".to_string());
        metrics.observe_addon("hub", "metrics", Some(&addon), &halted);
        serves(
            &served(&metrics),
            &[
                "fleetform_addon_rollout_halted{hub=\"hub\",addon=\"metrics\"} 1",
                "fleetform_addon_rollout_max_in_progress{hub=\"hub\",addon=\"metrics\"} 1",
                "fleetform_addon_rollout_spokes{hub=\"hub\",addon=\"metrics\",state=\"failed\"} 1",
            ],
        );

        // Its rollout ends (or the addon goes): its series go, the hub's stay.
        metrics.forget_addon_rollouts_but("hub", &BTreeSet::new());
        let hub_only = served(&metrics);
        assert!(
            hub_only
                .iter()
                .all(|line| !line.starts_with("fleetform_addon_rollout_")),
            "{hub_only:#?}"
        );
        assert_eq!(hub_only.len(), 8, "{hub_only:#?}");

        // The hub deleted: nothing of it, its addons' rollouts included, is left.
        metrics.observe_addon("hub", "logging", None, &addon);
        metrics.forget("hub");
        assert_eq!(served(&metrics), Vec::<String>::new());
    }
}
