//! The planner: desired fleet + observed state → an ordered plan. Pure: no I/O, no clock.
//!
//! A plan has, per hub, the object changes `apply` will write (with unified YAML diffs), the
//! lifecycle steps those changes set off (install, join, accept, addon enablement, lease and claim
//! limit changes, agent upgrades, unjoin, hub deletion), the clusters that asked to join but are
//! not in git, and whether the prune guard holds it back. Observation (listing objects, server-side
//! dry runs) is the caller's job; so is carrying the plan out.

pub mod desired;
pub mod render;
pub mod rollout;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::fleet::{Hub, KubeconfigSource, Spoke};
use crate::fleet::Fleet;
use crate::source::Origin;
use desired::{EffectiveSpoke, effective, hub_object, hub_object_keys};
pub use desired::{ObjectKey, ObjectKind};

/// What one hub holds now, as observed by the caller.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedHub {
    /// Whether fleetform's CRDs and hub components are installed on the hub.
    pub installed: bool,
    /// The objects fleetform manages there, as the API server returned them (without their
    /// managed fields; of their status only what a plan reads: a Spoke's phase and the agent
    /// it reports).
    pub objects: BTreeMap<ObjectKey, Stored>,
    /// For desired objects, what the server would store if they were applied now (server-side
    /// apply, dry run; without managed fields and status); compared instead of the desired
    /// object, so that server defaults and other field managers' fields make no false diffs.
    #[serde(default)]
    pub dry_run: BTreeMap<ObjectKey, Stored>,
    /// ManagedClusters registered on the hub, by name.
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterRegistration>,
    /// The FleetSyncs on the hub: `fleetform sync` keeps it at their commits.
    #[serde(default)]
    pub fleet_syncs: Vec<ManagingSync>,
}

/// An observed object, kept as its JSON text and decoded by whoever reads it. A decoded
/// `serde_json::Value` costs about ten times its text (a map of its own for every object in
/// it): at a commit that changes 10,000 Spokes, the observed objects and their dry runs held as
/// trees were most of the sync's peak. Clones share the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Stored(std::sync::Arc<str>);

impl Stored {
    /// `object` as kept (`null` should it not serialise, as no object read from JSON fails to).
    pub fn new(object: &impl Serialize) -> Self {
        Stored(
            serde_json::to_string(object)
                .unwrap_or_else(|_| "null".to_string())
                .into(),
        )
    }

    /// The object, decoded.
    pub fn value(&self) -> Value {
        self.decode().unwrap_or(Value::Null)
    }

    /// The object decoded as `T`; `None` when it does not read as one.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_str(&self.0).ok()
    }

    /// The value at `pointer` (as [`Value::pointer`]), decoded.
    pub fn pointer(&self, pointer: &str) -> Option<Value> {
        self.value().pointer(pointer).cloned()
    }
}

#[cfg(test)]
impl Stored {
    /// Changes the object kept.
    pub(crate) fn edit(&mut self, change: impl FnOnce(&mut Value)) {
        let mut object = self.value();
        change(&mut object);
        *self = Stored::new(&object);
    }
}

impl From<Value> for Stored {
    fn from(object: Value) -> Self {
        Stored::new(&object)
    }
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Stored {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Stored {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Stored::from)
    }
}

/// A FleetSync on a hub: `fleetform sync` applies its repo's commits there and reverts any other
/// change to the objects it manages, so whatever `apply` writes that is not in that commit is
/// undone within seconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagingSync {
    /// The FleetSync's name (in `fleetform-system`).
    pub fleet_sync: String,
    pub repo: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The commit in force, as the FleetSync reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_commit: Option<String>,
}

impl std::fmt::Display for ManagingSync {
    /// `FleetSync fleet (https://… at main, commit 1a2b3c4 in force)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FleetSync {} ({} at {}",
            self.fleet_sync, self.repo, self.git_ref
        )?;
        if let Some(path) = &self.path {
            write!(f, ", path {path}")?;
        }
        match &self.last_applied_commit {
            Some(commit) => write!(f, ", commit {} in force)", short_commit(commit)),
            None => write!(f, ", nothing applied yet)"),
        }
    }
}

/// The first 7 characters of a commit SHA, as git shows it.
pub fn short_commit(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

/// A ManagedCluster as the planner sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRegistration {
    pub hub_accepts_client: bool,
    /// HubAcceptedManagedCluster is True: the hub's accept loop accepted it (`hubAcceptsClient`
    /// alone is not acceptance: anyone who may create a ManagedCluster may set it).
    #[serde(default)]
    pub accepted: bool,
}

/// The observed state of every hub the caller could reach, by hub name.
pub type Observed = BTreeMap<String, ObservedHub>;

/// The prune guard: how many spokes a plan may unjoin per hub without `--allow-prune`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneGuard {
    /// Percentage of a hub's spokes that may be unjoined at once (at least one always may).
    pub max_percent: u32,
    pub allow_prune: bool,
}

impl Default for PruneGuard {
    fn default() -> Self {
        PruneGuard {
            max_percent: 10,
            allow_prune: false,
        }
    }
}

impl PruneGuard {
    /// How many of `spokes` may be unjoined in one plan.
    pub fn limit(&self, spokes: usize) -> usize {
        (spokes * self.max_percent as usize / 100).max(1)
    }
}

/// What happens to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    Create,
    Update,
    Delete,
}

impl Action {
    /// `created`, `updated`, `deleted`: what was done to an object.
    pub fn past_tense(self) -> &'static str {
        match self {
            Action::Create => "created",
            Action::Update => "updated",
            Action::Delete => "deleted",
        }
    }
}

/// One object change with its unified YAML diff (live → desired).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectChange {
    pub key: ObjectKey,
    pub action: Action,
    pub diff: String,
    /// The object `apply` writes (absent for deletions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<Stored>,
}

/// The agent a spoke runs: its bundle version and configuration hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRef {
    pub version: String,
    pub config_hash: String,
}

impl std::fmt::Display for AgentRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (config {})", self.version, self.config_hash)
    }
}

/// A lifecycle step a plan sets off, in the order the reconciler takes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "step"
)]
pub enum Step {
    InstallHub,
    Join {
        spoke: String,
    },
    Accept {
        spoke: String,
    },
    EnableAddon {
        spoke: String,
        addon: String,
        install_namespace: String,
    },
    DisableAddon {
        spoke: String,
        addon: String,
    },
    ChangeLeaseDuration {
        spoke: String,
        from: i32,
        to: i32,
    },
    ChangeClaimLimit {
        spoke: String,
        from: i32,
        to: i32,
    },
    SyncLabels {
        spoke: String,
    },
    UpgradeAgent {
        spoke: String,
        from: AgentRef,
        to: AgentRef,
    },
    Unjoin {
        spoke: String,
    },
    DeleteHub,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::InstallHub => write!(f, "install fleetform's CRDs and hub components"),
            Step::Join { spoke } => write!(
                f,
                "join spoke {spoke} (install its agent and bootstrap token)"
            ),
            Step::Accept { spoke } => write!(
                f,
                "accept spoke {spoke} (hubAcceptsClient, approve its CSR)"
            ),
            Step::EnableAddon {
                spoke,
                addon,
                install_namespace,
            } => write!(
                f,
                "enable addon {addon} on {spoke} (namespace {install_namespace})"
            ),
            Step::DisableAddon { spoke, addon } => write!(f, "disable addon {addon} on {spoke}"),
            Step::ChangeLeaseDuration { spoke, from, to } => {
                write!(f, "change lease duration of {spoke} from {from}s to {to}s")
            }
            Step::ChangeClaimLimit { spoke, from, to } => {
                write!(
                    f,
                    "change cluster claim limit of {spoke} from {from} to {to}"
                )
            }
            Step::SyncLabels { spoke } => write!(f, "sync labels of {spoke} to its ManagedCluster"),
            Step::UpgradeAgent { spoke, from, to } => {
                write!(f, "upgrade agent of {spoke} from {from} to {to}")
            }
            Step::Unjoin { spoke } => {
                write!(f, "unjoin spoke {spoke} (cleanup in finalizer order)")
            }
            Step::DeleteHub => write!(f, "delete the hub (after unjoining its spokes)"),
        }
    }
}

/// The prune guard holding a hub's plan back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneBlock {
    pub unjoining: Vec<String>,
    pub limit: usize,
    pub spokes: usize,
}

/// The version of an object a plan read: its resourceVersion, and a digest of the part a plan
/// compares (so status writes by the loops do not make a saved plan stale).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadVersion {
    pub resource_version: String,
    pub digest: String,
}

impl ReadVersion {
    fn of(object: &Value) -> Self {
        ReadVersion {
            resource_version: object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            digest: Compared::of(object).digest(),
        }
    }
}

/// Everything a plan does on one hub.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubPlan {
    pub hub: String,
    /// How to reach the hub, so a saved plan can be applied on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<KubeconfigSource>,
    pub changes: Vec<ObjectChange>,
    pub steps: Vec<Step>,
    /// Clusters registered on the hub that are not declared in git; they stay pending.
    pub pending_clusters: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune_blocked: Option<PruneBlock>,
    /// Every object the plan read, so a saved plan can tell when it is stale.
    pub read_versions: BTreeMap<String, ReadVersion>,
    /// The FleetSyncs that keep this hub at their commits: what `apply` writes beyond that is
    /// reverted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_by: Vec<ManagingSync>,
    /// In what waves the agent upgrades, addon and lease changes reach the spokes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<rollout::RolloutPlan>,
    /// In what waves each addon with a rollout of its own is enabled or disabled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addon_rollouts: Vec<rollout::RolloutPlan>,
}

/// An ordered plan for a whole fleet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// What the desired fleet was read from (pinned to a commit for git sources).
    pub source: Origin,
    pub hubs: Vec<HubPlan>,
}

impl Plan {
    pub fn has_changes(&self) -> bool {
        self.hubs
            .iter()
            .any(|hub| !hub.changes.is_empty() || !hub.steps.is_empty())
    }

    /// Whether the prune guard holds any hub back.
    pub fn prune_blocked(&self) -> bool {
        self.hubs.iter().any(|hub| hub.prune_blocked.is_some())
    }

    /// What the plan does on all hubs together.
    pub fn counts(&self) -> Counts {
        self.hubs.iter().map(HubPlan::counts).sum()
    }

    /// "Plan: 2 to create, 1 to update, 0 to delete; 5 lifecycle steps; 1 cluster waiting outside git."
    pub fn summary(&self) -> String {
        let counts = self.counts();
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut summary = format!(
            "Plan: {} to create, {} to update, {} to delete; {}",
            counts.create,
            counts.update,
            counts.delete,
            plural(counts.steps, "lifecycle step", "lifecycle steps"),
        );
        if counts.pending_clusters > 0 {
            summary.push_str(&format!(
                "; {} waiting outside git",
                plural(counts.pending_clusters, "cluster", "clusters")
            ));
        }
        if self.prune_blocked() {
            summary.push_str("; held back by the prune guard (use --allow-prune)");
        }
        summary.push('.');
        summary
    }
}

impl HubPlan {
    /// Leaves out the deletions of objects `observed` shows already being deleted.
    pub fn leave_out_deletions_under_way(&mut self, observed: &ObservedHub) {
        let terminating = |key: &ObjectKey| {
            observed
                .objects
                .get(key)
                .is_some_and(|live| live.pointer("/metadata/deletionTimestamp").is_some())
        };
        self.changes
            .retain(|change| !(change.action == Action::Delete && terminating(&change.key)));
    }

    /// What the plan does on this hub.
    pub fn counts(&self) -> Counts {
        let changes = |action| {
            self.changes
                .iter()
                .filter(|change| change.action == action)
                .count()
        };
        Counts {
            create: changes(Action::Create),
            update: changes(Action::Update),
            delete: changes(Action::Delete),
            steps: self.steps.len(),
            pending_clusters: self.pending_clusters.len(),
        }
    }
}

/// How many objects a plan creates, updates and deletes, how many lifecycle steps it sets off
/// and how many clusters wait outside git: for one hub, or summed over a fleet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub steps: usize,
    pub pending_clusters: usize,
}

impl std::iter::Sum for Counts {
    fn sum<I: Iterator<Item = Counts>>(iter: I) -> Counts {
        iter.fold(Counts::default(), |total, hub| Counts {
            create: total.create + hub.create,
            update: total.update + hub.update,
            delete: total.delete + hub.delete,
            steps: total.steps + hub.steps,
            pending_clusters: total.pending_clusters + hub.pending_clusters,
        })
    }
}

/// Whether a plan's object changes carry their diffs ([`ObjectChange::diff`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diffs {
    /// For a plan someone reads: `fleetform plan`, `apply`'s confirmation, a saved plan.
    Shown,
    /// For a plan a loop writes at once (the sync's): each diff is two objects rendered as YAML
    /// and compared line by line, 10,000 of them in a commit that changes every spoke, which
    /// nobody reads. The diffs are left empty.
    Skipped,
}

impl Diffs {
    /// The unified diff of a change from `old` to `new`, or nothing when diffs are skipped.
    fn of(self, old: Option<&Value>, new: Option<&Value>, key: &ObjectKey) -> String {
        match self {
            Diffs::Shown => diff(
                old.map(comparable).as_ref(),
                new.map(comparable).as_ref(),
                key,
            ),
            Diffs::Skipped => String::new(),
        }
    }
}

/// Plans the changes that bring the observed hubs in line with `fleet`, with their diffs.
pub fn plan(fleet: &Fleet, source: Origin, observed: &Observed, guard: PruneGuard) -> Plan {
    plan_with(fleet, source, observed, guard, Diffs::Shown)
}

/// [`plan`], with or without the diffs.
pub fn plan_with(
    fleet: &Fleet,
    source: Origin,
    observed: &Observed,
    guard: PruneGuard,
    diffs: Diffs,
) -> Plan {
    let empty = ObservedHub::default();
    let mut hubs: Vec<HubPlan> = fleet
        .hubs
        .keys()
        .map(|name| {
            plan_hub(
                fleet,
                name,
                observed.get(name).unwrap_or(&empty),
                guard,
                diffs,
            )
        })
        .collect();
    // Hubs gone from git are deleted after every other hub's changes.
    for (name, hub) in observed {
        if !fleet.hubs.contains_key(name) && !hub.objects.is_empty() {
            hubs.push(plan_hub(fleet, name, hub, guard, diffs));
        }
    }
    Plan { source, hubs }
}

fn plan_hub(
    fleet: &Fleet,
    hub_name: &str,
    observed: &ObservedHub,
    guard: PruneGuard,
    diffs: Diffs,
) -> HubPlan {
    // The keys only: each desired object is rendered when the plan reaches it, below.
    let desired: BTreeSet<ObjectKey> = hub_object_keys(fleet, hub_name).collect();
    let live_hub: Option<Hub> = typed(observed, &ObjectKey::namespaced(ObjectKind::Hub, hub_name));
    let mut plan = HubPlan {
        hub: hub_name.to_string(),
        kubeconfig: fleet
            .hubs
            .get(hub_name)
            .or(live_hub.as_ref())
            .map(|hub| hub.spec.kubeconfig.clone()),
        managed_by: observed.fleet_syncs.clone(),
        ..HubPlan::default()
    };
    // Each observed object is decoded once here, where it is read, and let go.
    let mut deletions = Vec::new();
    let mut unjoins = Vec::new();
    for (key, stored) in observed
        .objects
        .iter()
        .filter(|(key, _)| !desired.contains(*key))
    {
        let live = stored.value();
        plan.read_versions
            .insert(key.to_string(), ReadVersion::of(&live));
        deletions.push(ObjectChange {
            key: key.clone(),
            action: Action::Delete,
            diff: diffs.of(Some(&live), None, key),
            desired: None,
        });
        // A Spoke in git for this hub is desired unless the hub is gone from git.
        let in_git = || {
            fleet
                .spokes
                .get(&key.name)
                .is_some_and(|spoke| spoke.spec.hub_ref == hub_name)
        };
        if key.kind == ObjectKind::Spoke
            && !in_git()
            && live.pointer("/metadata/deletionTimestamp").is_none()
        {
            unjoins.push(key.name.clone());
        }
    }
    // Each desired object is rendered here and let go as its change keeps it (a commit that
    // changes every spoke held them all as trees, then each twice, at the sync's peak).
    for key in desired {
        let Some(object) = hub_object(fleet, &key) else {
            continue;
        };
        let live = observed.objects.get(&key).map(Stored::value);
        if let Some(live) = &live {
            plan.read_versions
                .insert(key.to_string(), ReadVersion::of(live));
        }
        let dry_run = observed.dry_run.get(&key).map(Stored::value);
        let target = dry_run.as_ref().unwrap_or(&object);
        if live
            .as_ref()
            .is_some_and(|live| Compared::of(live) == Compared::of(target))
        {
            continue;
        }
        let diff = diffs.of(live.as_ref(), Some(target), &key);
        plan.changes.push(ObjectChange {
            action: if live.is_some() {
                Action::Update
            } else {
                Action::Create
            },
            key,
            diff,
            desired: Some(Stored::new(&object)),
        });
    }
    plan.changes.extend(deletions);

    let hub_in_git = fleet.hubs.get(hub_name);
    if hub_in_git.is_some() && !observed.installed {
        plan.steps.push(Step::InstallHub);
    }
    let live_spokes = observed
        .objects
        .keys()
        .filter(|key| key.kind == ObjectKind::Spoke)
        .count();
    if let Some(hub) = hub_in_git {
        for (name, spoke) in fleet
            .spokes
            .iter()
            .filter(|(_, s)| s.spec.hub_ref == hub_name)
        {
            let key = ObjectKey::namespaced(ObjectKind::Spoke, name);
            // What the hub will hold once applied: the dry run's result when there is one.
            let target: Option<Spoke> = observed.dry_run.get(&key).and_then(Stored::decode);
            let want = effective(target.as_ref().unwrap_or(spoke), hub, &fleet.addons);
            let live_spoke: Option<Spoke> = typed(observed, &key);
            match (live_spoke, live_hub.as_ref()) {
                (Some(live_spoke), Some(live_hub)) => {
                    let have = effective(&live_spoke, live_hub, &fleet.addons);
                    spoke_changes(name, &live_spoke, &have, &want, &mut plan.steps);
                }
                _ => {
                    plan.steps.push(Step::Join {
                        spoke: name.clone(),
                    });
                    plan.steps.push(Step::Accept {
                        spoke: name.clone(),
                    });
                    for (addon, namespace) in &want.addons {
                        plan.steps.push(Step::EnableAddon {
                            spoke: name.clone(),
                            addon: addon.clone(),
                            install_namespace: namespace.clone(),
                        });
                    }
                }
            }
        }
    }
    (plan.rollout, plan.addon_rollouts) = rollout::rollouts(fleet, hub_name, &plan.steps, observed);
    plan.steps.extend(unjoins.iter().map(|spoke| Step::Unjoin {
        spoke: spoke.clone(),
    }));
    if hub_in_git.is_none() {
        plan.steps.push(Step::DeleteHub);
    }
    if unjoins.len() > guard.limit(live_spokes) && !guard.allow_prune {
        plan.prune_blocked = Some(PruneBlock {
            unjoining: unjoins,
            limit: guard.limit(live_spokes),
            spokes: live_spokes,
        });
    }

    plan.pending_clusters = observed
        .clusters
        .iter()
        .filter(|(name, cluster)| {
            !(cluster.hub_accepts_client && cluster.accepted)
                && fleet
                    .spokes
                    .get(*name)
                    .is_none_or(|spoke| spoke.spec.hub_ref != hub_name)
        })
        .map(|(name, _)| name.clone())
        .collect();
    plan
}

/// Steps for a spoke that already exists on the hub: what changes between its live and desired
/// effective settings.
fn spoke_changes(
    name: &str,
    live: &Spoke,
    have: &EffectiveSpoke,
    want: &EffectiveSpoke,
    steps: &mut Vec<Step>,
) {
    let spoke = || name.to_string();
    for (addon, namespace) in &want.addons {
        if have.addons.get(addon) != Some(namespace) {
            steps.push(Step::EnableAddon {
                spoke: spoke(),
                addon: addon.clone(),
                install_namespace: namespace.clone(),
            });
        }
    }
    if have.lease_duration_seconds != want.lease_duration_seconds {
        steps.push(Step::ChangeLeaseDuration {
            spoke: spoke(),
            from: have.lease_duration_seconds,
            to: want.lease_duration_seconds,
        });
    }
    if have.cluster_claims_max != want.cluster_claims_max {
        steps.push(Step::ChangeClaimLimit {
            spoke: spoke(),
            from: have.cluster_claims_max,
            to: want.cluster_claims_max,
        });
    }
    if have.labels != want.labels {
        steps.push(Step::SyncLabels { spoke: spoke() });
    }
    // The agent that runs is what the spoke reports; before it reports, what was last asked of it.
    let status = live.status.as_ref();
    let running = AgentRef {
        version: status
            .and_then(|s| s.agent_version.clone())
            .unwrap_or_else(|| have.agent.version.clone()),
        config_hash: status
            .and_then(|s| s.agent_config_hash.clone())
            .unwrap_or_else(|| have.agent.hash()),
    };
    let wanted = AgentRef {
        version: want.agent.version.clone(),
        config_hash: want.agent.hash(),
    };
    if running != wanted {
        steps.push(Step::UpgradeAgent {
            spoke: spoke(),
            from: running,
            to: wanted,
        });
    }
    for addon in have
        .addons
        .keys()
        .filter(|addon| !want.addons.contains_key(*addon))
    {
        steps.push(Step::DisableAddon {
            spoke: spoke(),
            addon: addon.clone(),
        });
    }
}

/// Why a saved plan no longer matches a hub: every object whose spec, labels or annotations
/// changed since the plan read it, and every object that appeared or disappeared. Empty when
/// the plan still holds.
pub fn stale_reasons(plan: &HubPlan, observed: &ObservedHub) -> Vec<String> {
    let now: BTreeMap<String, ReadVersion> = observed
        .objects
        .iter()
        .map(|(key, object)| (key.to_string(), ReadVersion::of(&object.value())))
        .collect();
    let mut reasons = Vec::new();
    for (key, read) in &plan.read_versions {
        match now.get(key) {
            None => reasons.push(format!("{key} was deleted")),
            Some(current) if current.digest != read.digest => reasons.push(format!(
                "{key} changed (resourceVersion {} → {})",
                read.resource_version, current.resource_version
            )),
            Some(_) => {}
        }
    }
    for key in now
        .keys()
        .filter(|key| !plan.read_versions.contains_key(*key))
    {
        reasons.push(format!("{key} was created"));
    }
    reasons
}

fn typed<T: serde::de::DeserializeOwned>(observed: &ObservedHub, key: &ObjectKey) -> Option<T> {
    observed.objects.get(key).and_then(Stored::decode)
}

/// The part of an object a plan compares: identity, labels, annotations (without kubectl's
/// copy of the last applied object) and spec, or a Secret's data — not status, not server
/// bookkeeping. Borrowed, so comparing and hashing copy nothing.
#[derive(PartialEq, Serialize)]
struct Compared<'a> {
    #[serde(rename = "apiVersion", skip_serializing_if = "Option::is_none")]
    api_version: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a Value>,
    metadata: ComparedMetadata<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

#[derive(PartialEq, Serialize)]
struct ComparedMetadata<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<&'a Value>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<&'a str, &'a Value>,
}

impl<'a> Compared<'a> {
    fn of(object: &'a Value) -> Self {
        let metadata = object.get("metadata");
        let field = |name: &str| metadata.and_then(|metadata| metadata.get(name));
        Compared {
            api_version: object.get("apiVersion"),
            kind: object.get("kind"),
            metadata: ComparedMetadata {
                name: field("name"),
                namespace: field("namespace"),
                labels: field("labels"),
                annotations: field("annotations")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .filter(|(key, _)| *key != "kubectl.kubernetes.io/last-applied-configuration")
                    .map(|(key, value)| (key.as_str(), value))
                    .collect(),
            },
            spec: object.get("spec"),
            data: object.get("data"),
        }
    }

    /// A stable digest of the compared part (serde_json writes map keys sorted).
    fn digest(&self) -> String {
        let mut hasher = desired::StableHasher::default();
        let _ = serde_json::to_writer(&mut hasher, self);
        hasher.finish_hex()
    }
}

/// The part of an object a plan compares and shows (see [`Compared`]), Secret values masked.
pub fn comparable(object: &Value) -> Value {
    let mut out = serde_json::to_value(Compared::of(object)).unwrap_or(Value::Null);
    if object.get("kind").and_then(Value::as_str) == Some("Secret")
        && let Value::Object(secret) = &mut out
    {
        mask_secret(secret);
    }
    out
}

/// Replaces every value of a Secret's data with a marker that only says whether it changed.
fn mask_secret(secret: &mut Map<String, Value>) {
    for field in ["data", "stringData"] {
        if let Some(Value::Object(data)) = secret.get_mut(field) {
            for value in data.values_mut() {
                let digest = desired::stable_hash(&value.to_string());
                *value = Value::String(format!("(sensitive, {})", &digest[..8]));
            }
        }
    }
}

/// A unified diff of two objects rendered as YAML.
fn diff(old: Option<&Value>, new: Option<&Value>, key: &ObjectKey) -> String {
    let render = |value: Option<&Value>| {
        value
            .map(|value| serde_yaml::to_string(value).unwrap_or_default())
            .unwrap_or_default()
    };
    let (old, new) = (render(old), render(new));
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("live: {key}"), &format!("desired: {key}"))
        .to_string()
}

#[cfg(test)]
mod tests;
