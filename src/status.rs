//! `fleetform status`: one row per spoke, gathered from its hub — lifecycle phase, Krake-style
//! state, availability, agent version, lease age, node health, addon health, claims, its place
//! in its hub's rollout (and in each addon's own) and the reason it needs attention — and one
//! line per FleetSync: Ready or Stalled, the commits it applied and attempted, and why — and a
//! line per hub rolling out its agent: target, done of total, wave, spokes in progress, failed
//! (and why) and skipped offline, halted or not — and a line per cluster a person accepted that
//! is not in git. [`rows`], [`clusters_not_in_git`], [`fleet_sync_rows`] and [`rollout_row`]
//! are pure; [`gather`] only reads.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;

use crate::api::cluster::NodeHealth;
use crate::api::fleet::{
    AvailabilityMode, FleetSync, Hub, HubStatus, RolloutStatus, SYSTEM_NAMESPACE, SpokeRolloutState,
};
use crate::api::vocabulary::{
    CLUSTER_LEASE_NAME, CONDITION_AVAILABLE, CONDITION_CLEANUP_FAILED, CONDITION_HUB_ACCEPTED,
    CONDITION_JOINED, CONDITION_ONLINE, CONDITION_READY, CONDITION_RECONCILED,
    CONDITION_ROLLOUT_HALTED, CONDITION_SPOKE_JOINED, CONDITION_STALLED, CONDITION_UNJOINED,
    STATUS_FALSE, STATUS_TRUE,
};
use crate::api::{ManagedCluster, ManagedClusterAddOn, Spoke};
use crate::hub::observer::{ClusterState, state_from_conditions};
use crate::plan::short_commit;

/// What a hub holds about its spokes.
#[derive(Clone, Debug, Default)]
pub struct HubState {
    pub hub: String,
    pub spokes: Vec<Spoke>,
    pub clusters: BTreeMap<String, ManagedCluster>,
    pub addons: Vec<ManagedClusterAddOn>,
    /// `managed-cluster-lease` of each cluster, by cluster namespace.
    pub leases: BTreeMap<String, Lease>,
    pub fleet_syncs: Vec<FleetSync>,
    /// The Hub's status: its rollouts (none when its rows leave them out).
    pub hub_status: Option<HubStatus>,
}

/// One spoke's line of `fleetform status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpokeRow {
    pub spoke: String,
    pub hub: String,
    /// Lifecycle phase of the Spoke (Initializing, Joining, Running, Unhealthy, Deleting).
    pub phase: Option<String>,
    /// Krake's name for the cluster's state (DESIGN §4.5).
    pub state: String,
    /// `ManagedClusterConditionAvailable`: True, False or Unknown.
    pub available: Option<String>,
    pub joined: bool,
    pub agent_version: Option<String>,
    /// Seconds since the agent last renewed its lease.
    pub lease_age_seconds: Option<i64>,
    pub nodes: Option<NodeHealth>,
    pub addons_available: usize,
    pub addons: usize,
    pub claims: usize,
    /// Why the spoke needs attention (see [`attention`]), `None` when nothing says so.
    pub reason: Option<String>,
    /// What that condition says.
    pub message: Option<String>,
    /// Its place in its hub's rollout, then in each addon's own; none where no rollout runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<RolloutPlace>,
}

/// A spoke's place in a rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPlace {
    /// The addon whose own rollout this is; none for the hub's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addon: Option<String>,
    /// `pending`, `inProgress`, `succeeded`, `failed` or `skippedOffline`.
    pub state: SpokeRolloutState,
    /// Why it failed, or was passed over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RolloutPlace {
    /// Its state as `status.rollout` spells it.
    fn state_word(&self) -> String {
        serde_json::to_value(self.state)
            .ok()
            .and_then(|value| value.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// `inProgress`, or `metrics: failed` for an addon's own.
    fn text(&self) -> String {
        match &self.addon {
            Some(addon) => format!("{addon}: {}", self.state_word()),
            None => self.state_word(),
        }
    }
}

/// The places of `spoke` in the rollouts `status` keeps: the hub's, then each addon's own.
fn places(status: Option<&HubStatus>, spoke: &str) -> Vec<RolloutPlace> {
    let Some(status) = status else {
        return Vec::new();
    };
    let own = status.rollout.iter().map(|rollout| (None, rollout));
    let addons = status
        .addon_rollouts
        .iter()
        .map(|kept| (Some(kept.addon.clone()), &kept.rollout));
    own.chain(addons)
        .filter_map(|(addon, rollout)| {
            let entry = rollout.spokes.iter().find(|entry| entry.name == spoke)?;
            Some(RolloutPlace {
                addon,
                state: entry.state,
                reason: entry.reason.clone(),
            })
        })
        .collect()
}

/// Why a spoke needs attention, as a condition's reason and message, the first of:
///
/// 1. the reconciler's last pass failed (`Reconciled` False: `SpokeUnreachable`, `Forbidden`,
///    `HubEndpointUnknown`, …);
/// 2. its cleanup failed (`CleanupFailed` True);
/// 3. its deletion waits (`Unjoined` False: `WaitingForAgentUnjoin`, `ManifestWorksRemain`, …);
/// 4. it has not joined yet (`SpokeJoined` False);
/// 5. its ManagedCluster is not Available (`ManagedClusterLeaseUpdateStopped`,
///    `ManagedClusterKubeAPIServerUnavailable`, …).
pub fn attention(spoke: &Spoke, cluster: Option<&ManagedCluster>) -> Option<(String, String)> {
    let conditions = spoke
        .status
        .as_ref()
        .map(|status| status.conditions.as_slice())
        .unwrap_or_default();
    let on_spoke = |type_: &str, status: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
    };
    on_spoke(CONDITION_RECONCILED, STATUS_FALSE)
        .or_else(|| on_spoke(CONDITION_CLEANUP_FAILED, STATUS_TRUE))
        .or_else(|| on_spoke(CONDITION_UNJOINED, STATUS_FALSE))
        .or_else(|| on_spoke(CONDITION_SPOKE_JOINED, STATUS_FALSE))
        .or_else(|| {
            cluster
                .and_then(|cluster| cluster.condition(CONDITION_AVAILABLE))
                .filter(|c| c.status != STATUS_TRUE)
        })
        .map(|c| (c.reason.clone(), c.message.clone()))
}

/// One FleetSync's line of `fleetform status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetSyncRow {
    pub fleet_sync: String,
    pub hub: String,
    pub repo: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// `Ready`, `Stalled` (only a change to git or the FleetSync helps), `NotReady` (retrying)
    /// or `Pending` (not synced yet).
    pub state: String,
    pub last_applied_commit: Option<String>,
    pub last_attempted_commit: Option<String>,
    /// The Ready condition's reason and message.
    pub reason: Option<String>,
    pub message: Option<String>,
    /// While the hub's rollout is halted, the `RolloutHalted` condition's message (the hub, the
    /// failed spokes and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_halted: Option<String>,
}

/// The lines of one hub's FleetSyncs, sorted by name.
pub fn fleet_sync_rows(state: &HubState) -> Vec<FleetSyncRow> {
    let mut rows: Vec<FleetSyncRow> = state
        .fleet_syncs
        .iter()
        .map(|fleetsync| {
            let status = fleetsync.status.clone().unwrap_or_default();
            let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
            let ready = condition(CONDITION_READY);
            let shown = if condition(CONDITION_STALLED).is_some_and(|c| c.status == STATUS_TRUE) {
                "Stalled"
            } else {
                match ready {
                    Some(ready) if ready.status == STATUS_TRUE => "Ready",
                    Some(_) => "NotReady",
                    None => "Pending",
                }
            };
            FleetSyncRow {
                fleet_sync: fleetsync.metadata.name.clone().unwrap_or_default(),
                hub: state.hub.clone(),
                repo: fleetsync.spec.repo.clone(),
                git_ref: fleetsync.spec.git_ref.clone(),
                state: shown.to_string(),
                last_applied_commit: status.last_applied_commit.clone(),
                last_attempted_commit: status.last_attempted_commit.clone(),
                reason: ready.map(|c| c.reason.clone()),
                message: ready.map(|c| c.message.clone()),
                rollout_halted: condition(CONDITION_ROLLOUT_HALTED)
                    .filter(|c| c.status == STATUS_TRUE)
                    .map(|c| c.message.clone()),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.fleet_sync.cmp(&b.fleet_sync));
    rows
}

/// One rollout line of `fleetform status`: a hub's (hubs whose rollout is not `All`), or an
/// addon's own to that hub's spokes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRow {
    pub hub: String,
    /// The addon whose own `spec.rollout` this is; none for the hub's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addon: Option<String>,
    /// What is rolled out, as the rollout's status names it.
    pub target: String,
    /// Spokes that run it (succeeded), of all the rollout counts.
    pub done: usize,
    pub total: usize,
    /// The wave it is on; none once every spoke is through.
    pub wave: Option<u32>,
    pub in_progress: Vec<String>,
    pub failed: Vec<FailedSpoke>,
    pub skipped_offline: Vec<String>,
    /// Why it releases no more spokes.
    pub halted: Option<String>,
}

/// A spoke whose rollout failed, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailedSpoke {
    pub spoke: String,
    pub reason: String,
}

/// The rollout line of `hub` from its Hub's `status.rollout`.
pub fn rollout_row(hub: &str, rollout: &RolloutStatus) -> RolloutRow {
    let named = |state: SpokeRolloutState| -> Vec<String> {
        rollout
            .spokes
            .iter()
            .filter(|entry| entry.state == state)
            .map(|entry| entry.name.clone())
            .collect()
    };
    RolloutRow {
        hub: hub.to_string(),
        addon: None,
        target: rollout.target.clone(),
        done: named(SpokeRolloutState::Succeeded).len(),
        total: rollout.spokes.len(),
        wave: rollout.wave,
        in_progress: named(SpokeRolloutState::InProgress),
        failed: rollout
            .spokes
            .iter()
            .filter(|entry| entry.state == SpokeRolloutState::Failed)
            .map(|entry| FailedSpoke {
                spoke: entry.name.clone(),
                reason: entry.reason.clone().unwrap_or_default(),
            })
            .collect(),
        skipped_offline: named(SpokeRolloutState::SkippedOffline),
        halted: rollout.halted.clone(),
    }
}

/// Every rollout line of `hub` from its Hub's status: the hub's own, then each addon's.
pub fn rollout_rows(hub: &str, status: &HubStatus) -> Vec<RolloutRow> {
    let own = status
        .rollout
        .iter()
        .map(|rollout| rollout_row(hub, rollout));
    let addons = status.addon_rollouts.iter().map(|addon| RolloutRow {
        addon: Some(addon.addon.clone()),
        ..rollout_row(hub, &addon.rollout)
    });
    own.chain(addons).collect()
}

impl RolloutRow {
    /// `Rollout on hub H to TARGET: d/t done, wave w, in progress: …, failed: … (why), skipped
    /// offline: …`, and `HALTED: why` when it is (`Rollout of addon A on hub H …` for an addon's).
    fn text(&self) -> String {
        let what = match &self.addon {
            Some(addon) => format!("Rollout of addon {addon}"),
            None => "Rollout".to_string(),
        };
        let mut line = format!(
            "{what} on hub {} to {}: {}/{} done",
            self.hub, self.target, self.done, self.total
        );
        match self.wave {
            Some(wave) => line.push_str(&format!(", wave {wave}")),
            None => line.push_str(", complete"),
        }
        if !self.in_progress.is_empty() {
            line.push_str(&format!(", in progress: {}", self.in_progress.join(", ")));
        }
        if !self.failed.is_empty() {
            let failed: Vec<String> = self
                .failed
                .iter()
                .map(|failed| format!("{} ({})", failed.spoke, failed.reason))
                .collect();
            line.push_str(&format!(", failed: {}", failed.join(", ")));
        }
        if !self.skipped_offline.is_empty() {
            line.push_str(&format!(
                ", skipped offline: {}",
                self.skipped_offline.join(", ")
            ));
        }
        if self.halted.is_some() {
            line.push_str(
                "; HALTED: failures passed maxFailures (a new commit, or paused: true then false, resumes)",
            );
        }
        line
    }
}

/// A cluster a hub accepted that no Spoke declares: a person allowed to accept it did (as
/// `clusteradm accept` does), and fleetform leaves it as it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotInGitRow {
    pub cluster: String,
    pub hub: String,
    pub joined: bool,
    /// `ManagedClusterConditionAvailable`: True, False or Unknown.
    pub available: Option<String>,
}

impl NotInGitRow {
    fn text(&self) -> String {
        format!(
            "{}/{}: NotInGit: accepted by a user allowed to accept, not declared in git ({}, Available {}); fleetform keeps it and never prunes it: declare a Spoke {} to manage it from git",
            self.hub,
            self.cluster,
            if self.joined { "joined" } else { "not joined" },
            self.available.as_deref().unwrap_or("-"),
            self.cluster
        )
    }
}

/// The accepted clusters of a hub that none of its Spokes declares, sorted by name.
pub fn clusters_not_in_git(state: &HubState) -> Vec<NotInGitRow> {
    state
        .clusters
        .iter()
        .filter(|(name, cluster)| {
            cluster.hub_accepts_client()
                && crate::api::is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED)
                && !state
                    .spokes
                    .iter()
                    .any(|spoke| spoke.metadata.name.as_deref() == Some(name.as_str()))
        })
        .map(|(name, cluster)| NotInGitRow {
            cluster: name.clone(),
            hub: state.hub.clone(),
            joined: cluster.is_joined(),
            available: cluster
                .condition(CONDITION_AVAILABLE)
                .map(|c| c.status.clone()),
        })
        .collect()
}

/// Everything `fleetform status` shows of the fleet's hubs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub spokes: Vec<SpokeRow>,
    pub fleet_syncs: Vec<FleetSyncRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<RolloutRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_in_git: Vec<NotInGitRow>,
}

impl Report {
    /// Adds a hub's spokes, the clusters it accepted that are not in git, its FleetSyncs and
    /// rollouts.
    pub fn add(&mut self, state: &HubState, now: Timestamp) {
        self.spokes.extend(rows(state, now));
        self.not_in_git.extend(clusters_not_in_git(state));
        self.fleet_syncs.extend(fleet_sync_rows(state));
        if let Some(status) = &state.hub_status {
            self.rollouts.extend(rollout_rows(&state.hub, status));
        }
    }

    /// The report for a terminal: the spokes' table, what each spoke that needs attention
    /// says, and a line per FleetSync.
    pub fn text(&self) -> String {
        let mut out = table(&self.spokes);
        let why: Vec<String> = self
            .spokes
            .iter()
            .flat_map(|row| {
                let attention = row.reason.as_deref().and_then(|reason| {
                    let message = row.message.as_deref().filter(|m| !m.is_empty())?;
                    Some(format!("{}/{}: {reason}: {message}\n", row.hub, row.spoke))
                });
                let rollouts = row.rollouts.iter().filter_map(|place| {
                    let reason = place.reason.as_deref()?;
                    let whose = match &place.addon {
                        Some(addon) => format!("the rollout of addon {addon}"),
                        None => "the rollout".to_string(),
                    };
                    Some(format!(
                        "{}/{}: {} in {whose}: {reason}\n",
                        row.hub,
                        row.spoke,
                        place.state_word()
                    ))
                });
                attention.into_iter().chain(rollouts).collect::<Vec<_>>()
            })
            .collect();
        if !why.is_empty() {
            out.push('\n');
            out.extend(why);
        }
        if !self.not_in_git.is_empty() {
            out.push('\n');
        }
        for cluster in &self.not_in_git {
            out.push_str(&cluster.text());
            out.push('\n');
        }
        if !self.rollouts.is_empty() {
            out.push('\n');
        }
        for rollout in &self.rollouts {
            out.push_str(&rollout.text());
            out.push('\n');
        }
        if !self.fleet_syncs.is_empty() {
            out.push('\n');
        }
        for sync in &self.fleet_syncs {
            let commit = |commit: &Option<String>| {
                commit
                    .as_deref()
                    .map_or_else(|| "-".to_string(), |c| short_commit(c).to_string())
            };
            out.push_str(&format!(
                "FleetSync {} on hub {} ({} at {}): {}, applied {}, attempted {}",
                sync.fleet_sync,
                sync.hub,
                sync.repo,
                sync.git_ref,
                sync.state,
                commit(&sync.last_applied_commit),
                commit(&sync.last_attempted_commit),
            ));
            if sync.state != "Ready"
                && let Some(reason) = &sync.reason
            {
                out.push_str(&format!(": {reason}"));
                if let Some(message) = sync.message.as_deref().filter(|m| !m.is_empty()) {
                    out.push_str(&format!(": {message}"));
                }
            }
            if let Some(halted) = &sync.rollout_halted {
                out.push_str(&format!("; RolloutHalted: {halted}"));
            }
            out.push('\n');
        }
        out
    }
}

/// How many addons a spoke has, and how many of them are Available.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddonCount {
    pub enabled: usize,
    pub available: usize,
}

impl AddonCount {
    fn add(&mut self, available: bool) {
        self.enabled += 1;
        self.available += usize::from(available);
    }

    /// The count of addons, each Available or not.
    pub fn of(available: impl IntoIterator<Item = bool>) -> Self {
        let mut count = AddonCount::default();
        available.into_iter().for_each(|each| count.add(each));
        count
    }
}

/// What one spoke's row is made of.
pub struct Seen<'a> {
    pub hub: &'a str,
    pub spoke: &'a Spoke,
    pub cluster: Option<&'a ManagedCluster>,
    pub addons: AddonCount,
    /// When its agent last renewed its cluster lease.
    pub renewed: Option<Timestamp>,
    /// The Hub's status, for the spoke's places in its rollouts.
    pub hub_status: Option<&'a HubStatus>,
}

/// The rows of one hub's spokes, sorted by name.
pub fn rows(state: &HubState, now: Timestamp) -> Vec<SpokeRow> {
    let mut addons: BTreeMap<&str, AddonCount> = BTreeMap::new();
    for addon in &state.addons {
        if let Some(cluster) = addon.metadata.namespace.as_deref() {
            addons.entry(cluster).or_default().add(addon.is_available());
        }
    }
    let mut rows: Vec<SpokeRow> = state
        .spokes
        .iter()
        .map(|spoke| {
            let name = spoke.metadata.name.as_deref().unwrap_or_default();
            let seen = Seen {
                hub: &state.hub,
                spoke,
                cluster: state.clusters.get(name),
                addons: addons.get(name).copied().unwrap_or_default(),
                renewed: state
                    .leases
                    .get(name)
                    .and_then(|lease| lease.spec.as_ref()?.renew_time.as_ref())
                    .map(|renewed| renewed.0),
                hub_status: state.hub_status.as_ref(),
            };
            row(&seen, now)
        })
        .collect();
    rows.sort_by(|a, b| a.spoke.cmp(&b.spoke));
    rows
}

/// One spoke's row.
pub fn row(seen: &Seen, now: Timestamp) -> SpokeRow {
    let Seen {
        hub,
        spoke,
        cluster,
        addons,
        renewed,
        hub_status,
    } = *seen;
    let name = spoke.metadata.name.clone().unwrap_or_default();
    let condition = |type_: &str| cluster.and_then(|cluster| cluster.condition(type_));
    let status = spoke.status.as_ref();
    let cluster_state = match spoke.spec.availability.mode {
        AvailabilityMode::Poll => status
            .and_then(|status| {
                status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == CONDITION_ONLINE)
            })
            .map(|condition| condition.reason.clone())
            .unwrap_or_else(|| ClusterState::Pending.to_string()),
        AvailabilityMode::Lease => cluster
            .map(state_from_conditions)
            .unwrap_or(ClusterState::Pending)
            .to_string(),
    };
    let why = attention(spoke, cluster);
    SpokeRow {
        hub: hub.to_string(),
        phase: status
            .and_then(|status| status.phase)
            .map(|phase| format!("{phase:?}")),
        state: cluster_state,
        available: condition(CONDITION_AVAILABLE).map(|c| c.status.clone()),
        joined: condition(CONDITION_JOINED).is_some_and(|c| c.status == STATUS_TRUE),
        agent_version: status.and_then(|status| status.agent_version.clone()),
        lease_age_seconds: renewed.map(|renewed| now.duration_since(renewed).as_secs().max(0)),
        nodes: cluster.and_then(ManagedCluster::node_health),
        addons_available: addons.available,
        addons: addons.enabled,
        claims: cluster
            .and_then(|cluster| cluster.status.as_ref())
            .map_or(0, |status| status.cluster_claims.len()),
        reason: why.as_ref().map(|(reason, _)| reason.clone()),
        message: why.map(|(_, message)| message),
        rollouts: places(hub_status, &name),
        spoke: name,
    }
}

/// Reads what a hub holds about its spokes.
pub async fn gather(hub: &str, client: &Client) -> Result<HubState, kube::Error> {
    let all = ListParams::default();
    let spokes = Api::<Spoke>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .list(&all)
        .await?;
    let clusters = Api::<ManagedCluster>::all(client.clone())
        .list(&all)
        .await?;
    let addons = Api::<ManagedClusterAddOn>::all(client.clone())
        .list(&all)
        .await?;
    let leases = Api::<Lease>::all(client.clone())
        .list(&ListParams::default().fields(&format!("metadata.name={CLUSTER_LEASE_NAME}")))
        .await?;
    // A hub installed before FleetSyncs existed has no FleetSync CRD: it has none.
    let fleet_syncs = match Api::<FleetSync>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .list(&all)
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(err) => return Err(err),
    };
    let hub_status = Api::<Hub>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .get_opt(hub)
        .await?
        .and_then(|object| object.status);
    Ok(HubState {
        hub: hub.to_string(),
        hub_status,
        fleet_syncs,
        spokes: spokes.items,
        clusters: clusters
            .items
            .into_iter()
            .map(|cluster| (cluster.metadata.name.clone().unwrap_or_default(), cluster))
            .collect(),
        addons: addons.items,
        leases: leases
            .items
            .into_iter()
            .filter_map(|lease| Some((lease.metadata.namespace.clone()?, lease)))
            .collect(),
    })
}

/// The rows as a table for a terminal.
pub fn table(rows: &[SpokeRow]) -> String {
    let header = [
        "SPOKE",
        "HUB",
        "PHASE",
        "STATE",
        "AVAILABLE",
        "JOINED",
        "AGENT",
        "LEASE AGE",
        "NODES",
        "ADDONS",
        "CLAIMS",
        "ROLLOUT",
        "REASON",
    ];
    let dash = || "-".to_string();
    let lines: Vec<[String; 13]> = rows
        .iter()
        .map(|row| {
            [
                row.spoke.clone(),
                row.hub.clone(),
                row.phase.clone().unwrap_or_else(dash),
                row.state.clone(),
                row.available.clone().unwrap_or_else(dash),
                if row.joined { "yes" } else { "no" }.to_string(),
                row.agent_version.clone().unwrap_or_else(dash),
                row.lease_age_seconds
                    .map_or_else(dash, |age| format!("{age}s")),
                row.nodes.as_ref().map_or_else(dash, |nodes| {
                    let mut text = format!("{}/{}", nodes.ready, nodes.total);
                    for (count, what) in [
                        (nodes.pid_pressure, "pid"),
                        (nodes.memory_pressure, "mem"),
                        (nodes.disk_pressure, "disk"),
                    ] {
                        if count > 0 {
                            text.push_str(&format!(" {what}:{count}"));
                        }
                    }
                    text
                }),
                format!("{}/{}", row.addons_available, row.addons),
                row.claims.to_string(),
                if row.rollouts.is_empty() {
                    dash()
                } else {
                    row.rollouts
                        .iter()
                        .map(RolloutPlace::text)
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                row.reason.clone().unwrap_or_else(dash),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            lines
                .iter()
                .map(|line| line[column].chars().count())
                .chain([header[column].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let render = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = render(header.to_vec());
    for line in &lines {
        out.push_str(&render(line.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
    use serde_json::{Value, json};

    fn spoke(name: &str, mode: &str, status: Value) -> Spoke {
        serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
            "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE},
            "spec": {"hubRef": "hub", "kubeconfig": {"embedded": {}}, "availability": {"mode": mode}},
            "status": status,
        }))
        .unwrap()
    }

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }
    }

    fn now() -> Timestamp {
        "2026-11-25T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn each_spokes_row_counts_the_addons_of_its_own_cluster() {
        let addon = |cluster: &str, name: &str, available: &str| -> ManagedClusterAddOn {
            serde_json::from_value(json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
                "metadata": {"name": name, "namespace": cluster}, "spec": {},
                "status": {"conditions": [condition("Available", available, "x")]},
            }))
            .unwrap()
        };
        let state = HubState {
            hub: "hub".into(),
            spokes: ["dev", "edge", "prod"]
                .map(|name| spoke(name, "lease", json!({})))
                .into(),
            addons: vec![
                addon("edge", "metrics", "True"),
                addon("dev", "metrics", "False"),
                addon("edge", "logging", "True"),
                addon("edge", "tracing", "Unknown"),
            ],
            ..HubState::default()
        };
        let counts: Vec<(String, usize, usize)> = rows(&state, now())
            .into_iter()
            .map(|row| (row.spoke, row.addons_available, row.addons))
            .collect();
        assert_eq!(
            counts,
            [
                ("dev".to_string(), 0, 1),
                ("edge".to_string(), 2, 3),
                ("prod".to_string(), 0, 0)
            ]
        );
    }

    #[test]
    fn a_joined_available_spoke_shows_online_with_its_lease_age_nodes_addons_and_claims() {
        let mut cluster: ManagedCluster = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": "dev", "annotations": {
                "fleetform.io/node-health": r#"{"total":3,"ready":2,"pidPressure":0,"memoryPressure":1,"diskPressure":0,"underPressure":1}"#,
            }},
            "spec": {"hubAcceptsClient": true},
            "status": {
                "clusterClaims": [{"name": "id.k8s.io", "value": "dev"}, {"name": "region", "value": "eu"}],
            },
        }))
        .unwrap();
        let status = cluster.status.as_mut().unwrap();
        status.conditions = vec![
            condition(CONDITION_JOINED, "True", "ManagedClusterJoined"),
            condition(CONDITION_AVAILABLE, "True", "ManagedClusterAvailable"),
        ];
        let addon = |name: &str, available: &str| -> ManagedClusterAddOn {
            serde_json::from_value(json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
                "metadata": {"name": name, "namespace": "dev"}, "spec": {},
                "status": {"conditions": [condition("Available", available, "x")]},
            }))
            .unwrap()
        };
        let mut lease = Lease::default();
        lease.metadata.namespace = Some("dev".into());
        lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            renew_time: Some(MicroTime("2026-11-25T11:59:53Z".parse().unwrap())),
            ..Default::default()
        });
        let state = HubState {
            hub: "hub".into(),
            spokes: vec![spoke(
                "dev",
                "lease",
                json!({"phase": "Running", "agentVersion": "1.0.0"}),
            )],
            clusters: BTreeMap::from([("dev".to_string(), cluster)]),
            addons: vec![addon("metrics", "True"), addon("logging", "False")],
            leases: BTreeMap::from([("dev".to_string(), lease)]),
            fleet_syncs: Vec::new(),
            hub_status: None,
        };
        let rows = rows(&state, now());
        assert_eq!(
            rows,
            [SpokeRow {
                spoke: "dev".into(),
                hub: "hub".into(),
                phase: Some("Running".into()),
                state: "ONLINE".into(),
                available: Some("True".into()),
                joined: true,
                agent_version: Some("1.0.0".into()),
                lease_age_seconds: Some(7),
                nodes: Some(NodeHealth {
                    ready: 2,
                    total: 3,
                    memory_pressure: 1,
                    under_pressure: 1,
                    ..NodeHealth::default()
                }),
                addons_available: 1,
                addons: 2,
                claims: 2,
                reason: None,
                message: None,
                rollouts: Vec::new(),
            }]
        );
        let table = table(&rows);
        assert!(table.starts_with("SPOKE  HUB  PHASE    STATE"), "{table}");
        assert!(table.contains("2/3 mem:1"), "{table}");
        assert!(table.contains("1/2"), "{table}");
    }

    #[test]
    fn spokes_not_registered_yet_are_pending_and_poll_mode_spokes_show_the_observers_state() {
        let observed = json!({"conditions": [condition(CONDITION_ONLINE, "False", "DEGRADED")]});
        let state = HubState {
            hub: "hub".into(),
            spokes: vec![spoke("b", "poll", observed), spoke("a", "lease", json!({}))],
            ..HubState::default()
        };
        let rows = rows(&state, now());
        assert_eq!(
            rows.iter()
                .map(|row| (row.spoke.as_str(), row.state.as_str(), row.joined))
                .collect::<Vec<_>>(),
            [("a", "PENDING", false), ("b", "DEGRADED", false)]
        );
        assert!(table(&rows).lines().nth(1).unwrap().contains("-"));
    }

    fn with_conditions(conditions: &[(&str, &str, &str)], deleting: bool) -> Spoke {
        let conditions: Vec<Condition> = conditions
            .iter()
            .map(|(type_, status, reason)| {
                let mut condition = condition(type_, status, reason);
                condition.message = format!("{reason} says so");
                condition
            })
            .collect();
        let mut spoke = spoke("dev", "lease", json!({"conditions": conditions}));
        if deleting {
            spoke.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        spoke
    }

    #[test]
    fn the_reason_is_the_first_failing_condition_in_the_documented_order() {
        let unavailable: ManagedCluster = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": "dev"}, "spec": {},
            "status": {"conditions": [condition(CONDITION_AVAILABLE, "Unknown", "ManagedClusterLeaseUpdateStopped")]},
        }))
        .unwrap();
        let failing = [
            (CONDITION_RECONCILED, "False", "SpokeUnreachable"),
            (CONDITION_CLEANUP_FAILED, "True", "ManifestWorksRemain"),
            (CONDITION_UNJOINED, "False", "WaitingForAgentUnjoin"),
            (CONDITION_SPOKE_JOINED, "False", "Joining"),
        ];
        for first in 0..failing.len() {
            let spoke = with_conditions(&failing[first..], first > 0);
            let (reason, message) = attention(&spoke, Some(&unavailable)).unwrap();
            assert_eq!(reason, failing[first].2);
            assert_eq!(message, format!("{reason} says so"));
        }
        let healthy = with_conditions(
            &[
                (CONDITION_RECONCILED, "True", "Reconciled"),
                (CONDITION_SPOKE_JOINED, "True", "Joined"),
                (CONDITION_CLEANUP_FAILED, "False", "CleaningUp"),
            ],
            false,
        );
        assert_eq!(
            attention(&healthy, Some(&unavailable)).map(|(reason, _)| reason),
            Some("ManagedClusterLeaseUpdateStopped".to_string()),
            "then the cluster's availability"
        );
        assert_eq!(attention(&healthy, None), None);
    }

    fn fleet_sync(conditions: &[(&str, &str, &str)]) -> FleetSync {
        let conditions: Vec<Condition> = conditions
            .iter()
            .map(|(type_, status, reason)| Condition {
                message: if *type_ == CONDITION_ROLLOUT_HALTED {
                    "hub east's rollout is halted: 1 of 1 spoke(s) failed".into()
                } else {
                    String::new()
                },
                ..condition(type_, status, reason)
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
            "metadata": {"name": "fleet", "namespace": SYSTEM_NAMESPACE},
            "spec": {"repo": "https://git.example/fleet.git", "ref": "main"},
            "status": {"conditions": conditions, "lastAppliedCommit": "0123456789abcdef"},
        }))
        .unwrap()
    }

    #[test]
    fn a_fleetsync_is_stalled_ready_not_ready_or_pending_and_says_why_unless_ready() {
        let states: Vec<String> = [
            fleet_sync(&[
                (CONDITION_READY, "False", "InvalidCommit"),
                (CONDITION_STALLED, "True", "InvalidCommit"),
            ]),
            fleet_sync(&[
                (CONDITION_READY, "True", "Applied"),
                (CONDITION_STALLED, "False", "Applied"),
            ]),
            fleet_sync(&[
                (CONDITION_READY, "False", "SourceUnavailable"),
                (CONDITION_STALLED, "False", "SourceUnavailable"),
            ]),
            fleet_sync(&[]),
            fleet_sync(&[
                (CONDITION_READY, "True", "Applied"),
                (CONDITION_ROLLOUT_HALTED, "True", "MaxFailuresExceeded"),
            ]),
        ]
        .into_iter()
        .map(|fleetsync| {
            let state = HubState {
                hub: "hub".into(),
                fleet_syncs: vec![fleetsync],
                ..HubState::default()
            };
            Report {
                fleet_syncs: fleet_sync_rows(&state),
                ..Report::default()
            }
            .text()
            .lines()
            .last()
            .unwrap()
            .to_string()
        })
        .collect();
        let line = |rest: &str| {
            format!("FleetSync fleet on hub hub (https://git.example/fleet.git at main): {rest}")
        };
        assert_eq!(
            states,
            [
                line("Stalled, applied 0123456, attempted -: InvalidCommit"),
                line("Ready, applied 0123456, attempted -"),
                line("NotReady, applied 0123456, attempted -: SourceUnavailable"),
                line("Pending, applied 0123456, attempted -"),
                line(
                    "Ready, applied 0123456, attempted -; RolloutHalted: hub east's rollout is halted: 1 of 1 spoke(s) failed"
                ),
            ]
        );
    }

    #[test]
    fn a_rollout_line_says_where_it_stands_and_that_it_halted() {
        let rollout: RolloutStatus = serde_json::from_value(json!({
            "target": "2.0.0/00ff",
            "wave": 2,
            "halted": "1 of 4 spoke(s) failed",
            "spokes": [
                {"name": "a", "target": "h", "state": "succeeded"},
                {"name": "b", "target": "h", "state": "failed", "reason": "not Available within progressDeadlineSeconds (60 s)"},
                {"name": "c", "target": "h", "state": "skippedOffline"},
                {"name": "d", "target": "h", "state": "inProgress"},
            ],
        }))
        .unwrap();
        let report = Report {
            rollouts: vec![rollout_row("hub", &rollout)],
            ..Report::default()
        };
        assert_eq!(
            report.text().lines().last().unwrap_or_default(),
            "Rollout on hub hub to 2.0.0/00ff: 1/4 done, wave 2, in progress: d, failed: b (not Available within progressDeadlineSeconds (60 s)), skipped offline: c; HALTED: failures passed maxFailures (a new commit, or paused: true then false, resumes)"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rollouts"][0]["failed"][0]["spoke"], "b");
        assert_eq!(json["rollouts"][0]["skippedOffline"], json!(["c"]));
    }

    #[test]
    fn each_row_names_its_spokes_place_in_the_rollouts_and_why_it_failed() {
        let hub_status: HubStatus = serde_json::from_value(json!({
            "rollout": {"target": "2.0.0/00ff", "wave": 1, "spokes": [
                {"name": "a", "target": "h", "state": "succeeded"},
                {"name": "b", "target": "h", "state": "failed", "reason": "not on the new agent within progressDeadlineSeconds (60 s)"},
                {"name": "c", "target": "h", "state": "skippedOffline", "reason": "not Available when its turn came"},
                {"name": "d", "target": "h", "state": "inProgress"},
                {"name": "e", "target": "h", "state": "pending"},
            ]},
            "addonRollouts": [{"addon": "metrics", "rollout": {"target": "metrics/0a1b", "spokes": [
                {"name": "a", "target": "m", "state": "pending"},
            ]}}],
        }))
        .unwrap();
        let state = HubState {
            hub: "hub".into(),
            spokes: ["a", "b", "c", "d", "e", "f"]
                .iter()
                .map(|name| spoke(name, "lease", json!({})))
                .collect(),
            hub_status: Some(hub_status),
            ..HubState::default()
        };
        let mut report = Report::default();
        report.add(&state, now());
        let places: Vec<(String, Vec<String>)> = report
            .spokes
            .iter()
            .map(|row| {
                (
                    row.spoke.clone(),
                    row.rollouts.iter().map(RolloutPlace::text).collect(),
                )
            })
            .collect();
        let place = |spoke: &str, places: &[&str]| {
            (
                spoke.to_string(),
                places.iter().map(|place| place.to_string()).collect(),
            )
        };
        assert_eq!(
            places,
            [
                place("a", &["succeeded", "metrics: pending"]),
                place("b", &["failed"]),
                place("c", &["skippedOffline"]),
                place("d", &["inProgress"]),
                place("e", &["pending"]),
                place("f", &[]),
            ]
        );
        let text = report.text();
        let table: Vec<&str> = text.lines().take(7).collect();
        assert!(table[0].contains("  ROLLOUT  "), "{text}");
        assert!(
            table[1].contains("  succeeded, metrics: pending  "),
            "{text}"
        );
        assert!(
            text.contains(
                "hub/b: failed in the rollout: not on the new agent within progressDeadlineSeconds (60 s)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "hub/c: skippedOffline in the rollout: not Available when its turn came\n"
            ),
            "{text}"
        );
        // The hub's line keeps its target, done of total and wave.
        assert!(
            text.contains("Rollout on hub hub to 2.0.0/00ff: 1/5 done, wave 1, in progress: d"),
            "{text}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["spokes"][1]["rollouts"],
            json!([{"state": "failed", "reason": "not on the new agent within progressDeadlineSeconds (60 s)"}])
        );
        assert_eq!(
            json["spokes"][0]["rollouts"][1],
            json!({"addon": "metrics", "state": "pending"})
        );
        assert!(json["spokes"][5].get("rollouts").is_none());
    }

    #[test]
    fn an_addons_own_rollout_has_a_line_after_its_hubs() {
        let status: HubStatus = serde_json::from_value(json!({
            "rollout": {"target": "2.0.0/00ff", "spokes": [
                {"name": "a", "target": "h", "state": "succeeded"},
            ]},
            "addonRollouts": [{"addon": "metrics", "rollout": {"target": "metrics/0a1b", "wave": 1, "spokes": [
                {"name": "a", "target": "m", "state": "inProgress"},
                {"name": "b", "target": "m", "state": "pending"},
            ]}}],
        }))
        .unwrap();
        let report = Report {
            rollouts: rollout_rows("hub", &status),
            ..Report::default()
        };
        let text = report.text();
        let lines: Vec<&str> = text.lines().rev().take(2).collect();
        assert_eq!(
            lines,
            [
                "Rollout of addon metrics on hub hub to metrics/0a1b: 0/2 done, wave 1, in progress: a",
                "Rollout on hub hub to 2.0.0/00ff: 1/1 done, complete",
            ]
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rollouts"][1]["addon"], "metrics");
        assert!(json["rollouts"][0].get("addon").is_none());
    }
}
