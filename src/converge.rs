//! Waiting for a fleet to converge after `apply`: every Spoke on every hub Running for its
//! current generation, every Spoke being deleted gone, and every object apply wrote still as it
//! wrote it. An object someone deleted or changed since (a FleetSync putting its own commit back,
//! say) can never converge on what apply wrote, so that ends the wait as a failure.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::api::ClusterManagementAddOn;
use crate::api::fleet::{FleetSync, Hub, Phase, RolloutSpec, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::{
    CONDITION_CLEANUP_FAILED, CONDITION_RECONCILED, CONDITION_SPOKE_JOINED, STATUS_TRUE,
};
use crate::apply::WrittenObject;
use crate::observe::managing;
use crate::plan::desired::{AgentConfig, carried_addon_spec, effective};
use crate::plan::{Action, ManagingSync, ObjectKey, ObjectKind};

/// Where one spoke stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub hub: String,
    pub spoke: String,
    /// Its phase, `None` before the reconciler has looked at it.
    pub phase: Option<Phase>,
    /// What it is waiting for, from its conditions.
    pub detail: String,
    pub done: bool,
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phase = match self.phase {
            Some(phase) => format!("{phase:?}"),
            None => "Pending".to_string(),
        };
        write!(f, "{}/{}: {phase}", self.hub, self.spoke)?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

/// Where a Spoke stands, from its object and the agent its Hub (`None`: not declared) asks for.
pub fn progress(hub: &str, spoke: &Spoke, wanted_agent: Option<&AgentConfig>) -> Progress {
    let status = spoke.status.as_ref();
    let phase = status.and_then(|status| status.phase);
    let condition =
        |type_: &str| status.and_then(|status| status.conditions.iter().find(|c| c.type_ == type_));
    let deleting = spoke.metadata.deletion_timestamp.is_some();
    let current = status.and_then(|status| status.observed_generation) == spoke.metadata.generation;
    // The agent that runs, as it reports it: a Deployment asking for a version that never
    // starts is not convergence.
    let agent_runs = wanted_agent.is_some_and(|agent| {
        status.and_then(|s| s.agent_version.as_deref()) == Some(agent.version.as_str())
            && status.and_then(|s| s.agent_config_hash.as_deref()) == Some(agent.hash().as_str())
    });
    let detail = if deleting {
        condition(CONDITION_CLEANUP_FAILED)
            .filter(|c| c.status == STATUS_TRUE)
            .map(|c| c.message.clone())
            .unwrap_or_else(|| "unjoining".to_string())
    } else if let Some(failed) = condition(CONDITION_RECONCILED).filter(|c| c.status != STATUS_TRUE)
    {
        format!("{}: {}", failed.reason, failed.message)
    } else if let Some(joining) =
        condition(CONDITION_SPOKE_JOINED).filter(|c| c.status != STATUS_TRUE)
    {
        joining.message.clone()
    } else if !agent_runs && phase == Some(Phase::Running) {
        match (
            wanted_agent,
            status.and_then(|s| s.agent_version.as_deref()),
        ) {
            (Some(agent), Some(running)) => {
                format!("agent {running} runs; waiting for {} to run", agent.version)
            }
            (Some(agent), None) => format!("waiting for agent {} to report", agent.version),
            (None, _) => "its Hub is not declared".to_string(),
        }
    } else {
        String::new()
    };
    Progress {
        hub: hub.to_string(),
        spoke: spoke.name_any(),
        phase,
        detail,
        done: !deleting && current && agent_runs && phase == Some(Phase::Running),
    }
}

/// What `apply` wrote on one hub: waiting tells its own writes from anyone's after them.
#[derive(Clone)]
pub struct HubWrites {
    pub hub: String,
    pub client: Client,
    /// The objects apply wrote or deleted there, as it wrote them.
    pub written: Vec<WrittenObject>,
}

/// How an object apply wrote stopped being what it wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Departed {
    /// It no longer exists.
    Deleted,
    /// It is being deleted.
    Deleting,
    /// It was deleted and another object of its name created.
    Replaced,
    /// Its spec was changed after apply wrote it (`metadata.generation` went on).
    Changed { written: i64, now: i64 },
}

/// Whether the object apply wrote as `written` is still that object, from what the hub holds
/// now (`None`: nothing of its name). Deletions apply made are not judged here.
pub fn departed(written: &WrittenObject, live: Option<&ObjectMeta>) -> Option<Departed> {
    let written_generation = match written.action {
        Action::Create | Action::Update => written.generation?,
        Action::Delete => return None,
    };
    let Some(live) = live else {
        return Some(Departed::Deleted);
    };
    if written.uid.is_some() && live.uid != written.uid {
        return Some(Departed::Replaced);
    }
    if live.deletion_timestamp.is_some() {
        return Some(Departed::Deleting);
    }
    match live.generation {
        Some(now) if now != written_generation => Some(Departed::Changed {
            written: written_generation,
            now,
        }),
        _ => None,
    }
}

/// An object apply wrote that did not stay as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Departure {
    pub hub: String,
    pub key: ObjectKey,
    pub departed: Departed,
    /// The FleetSyncs on the hub: they put back their commit over anything else.
    pub fleet_syncs: Vec<ManagingSync>,
}

impl std::fmt::Display for Departure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hub {}: {} ", self.hub, self.key)?;
        match &self.departed {
            Departed::Deleted => write!(f, "was deleted after apply wrote it")?,
            Departed::Deleting => write!(f, "is being deleted since apply wrote it")?,
            Departed::Replaced => write!(f, "was deleted and created again after apply wrote it")?,
            Departed::Changed { written, now } => write!(
                f,
                "was changed after apply wrote it (generation {written}, now {now})"
            )?,
        }
        let syncs: Vec<String> = self.fleet_syncs.iter().map(ToString::to_string).collect();
        if !syncs.is_empty() {
            write!(f, ": reverted by {}", syncs.join(" and "))?;
        }
        Ok(())
    }
}

/// Where the fleet stands: every spoke's progress, and what apply wrote that did not stay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub progress: Vec<Progress>,
    pub departures: Vec<Departure>,
}

/// The progress of every spoke of the hubs, sorted (a spoke whose object is gone is no longer
/// listed), and the objects apply wrote that are no longer as it wrote them.
pub async fn snapshot(hubs: &[HubWrites]) -> Result<Snapshot, kube::Error> {
    let mut all = Snapshot::default();
    for writes in hubs {
        let (hub, client) = (&writes.hub, &writes.client);
        let declared = Api::<Hub>::namespaced(client.clone(), SYSTEM_NAMESPACE)
            .list(&ListParams::default())
            .await?
            .items;
        let spokes = Api::<Spoke>::namespaced(client.clone(), SYSTEM_NAMESPACE)
            .list(&ListParams::default())
            .await?
            .items;
        let this_hub = declared.iter().find(|declared| declared.name_any() == *hub);
        // The AddOn documents, when apply wrote one or an addon's own rollout may hold a spoke
        // back (whether it is paused is theirs to say).
        let addons = if writes
            .written
            .iter()
            .any(|object| object.key.kind == ObjectKind::ClusterManagementAddOn)
            || this_hub
                .and_then(|declared| declared.status.as_ref())
                .is_some_and(|status| !status.addon_rollouts.is_empty())
        {
            Api::<ClusterManagementAddOn>::all(client.clone())
                .list(&ListParams::default())
                .await?
                .items
        } else {
            Vec::new()
        };
        let own_specs: BTreeMap<String, RolloutSpec> = addons
            .iter()
            .filter_map(|addon| {
                let rollout = carried_addon_spec(addon)?.ok()?.rollout?;
                Some((addon.name_any(), rollout))
            })
            .collect();
        let own: BTreeMap<&str, &RolloutSpec> = own_specs
            .iter()
            .map(|(addon, rollout)| (addon.as_str(), rollout))
            .collect();
        for spoke in spokes.iter().filter(|spoke| spoke.spec.hub_ref == *hub) {
            let wanted =
                this_hub.map(|declared| effective(spoke, declared, &BTreeMap::new()).agent);
            let mut moving = progress(hub, spoke, wanted.as_ref());
            // A spoke a rollout holds back says so, done or not: apply shows the rollouts'
            // progress (an addon's own rollout holds no agent, so apply does not wait on it).
            if let Some(held) = this_hub
                .and_then(|declared| crate::rollout::holding(declared, &spoke.name_any(), &own))
            {
                moving.detail = if moving.detail.is_empty() {
                    held
                } else {
                    format!("{}; {held}", moving.detail)
                };
            }
            all.progress.push(moving);
        }
        let live = |key: &ObjectKey| -> Option<&ObjectMeta> {
            let named = |meta: &&ObjectMeta| meta.name.as_deref() == Some(key.name.as_str());
            match key.kind {
                ObjectKind::Hub => declared.iter().map(|hub| &hub.metadata).find(named),
                ObjectKind::Spoke => spokes.iter().map(|spoke| &spoke.metadata).find(named),
                ObjectKind::ClusterManagementAddOn => {
                    addons.iter().map(|addon| &addon.metadata).find(named)
                }
            }
        };
        let departures: Vec<(ObjectKey, Departed)> = writes
            .written
            .iter()
            .filter_map(|object| Some((object.key.clone(), departed(object, live(&object.key))?)))
            .collect();
        if departures.is_empty() {
            continue;
        }
        let fleet_syncs = fleet_syncs(client).await?;
        all.departures
            .extend(departures.into_iter().map(|(key, departed)| Departure {
                hub: hub.clone(),
                key,
                departed,
                fleet_syncs: fleet_syncs.clone(),
            }));
    }
    all.progress
        .sort_by(|a, b| (&a.hub, &a.spoke).cmp(&(&b.hub, &b.spoke)));
    Ok(all)
}

/// The FleetSyncs of a hub; none where their CRD is not installed.
async fn fleet_syncs(client: &Client) -> Result<Vec<ManagingSync>, kube::Error> {
    match Api::<FleetSync>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(list.iter().map(managing).collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

/// Why waiting ended without convergence.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("timed out after {} s; still waiting for: {}", .timeout.as_secs(), .waiting.join(", "))]
    Timeout {
        timeout: Duration,
        waiting: Vec<String>,
    },
    #[error("what apply wrote did not stay:\n  {}", .departures.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Departed { departures: Vec<Departure> },
}

impl WaitError {
    /// Whether a FleetSync put back what apply wrote.
    pub fn reverted_by_sync(&self) -> bool {
        matches!(self, WaitError::Departed { departures } if departures.iter().any(|d| !d.fleet_syncs.is_empty()))
    }
}

/// Waits until every spoke of `hubs` is done, calling `report` with every spoke's progress
/// whenever it changes. It ends early, and fails, when an object apply wrote is deleted or
/// changed by someone else: the fleet will not converge on what apply wrote.
pub async fn wait(
    hubs: &[HubWrites],
    timeout: Duration,
    mut report: impl FnMut(&[Progress]),
) -> Result<(), WaitError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last: Option<Vec<Progress>> = None;
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    loop {
        match snapshot(hubs).await {
            Ok(now) => {
                errors.clear();
                if last.as_ref() != Some(&now.progress) {
                    report(&now.progress);
                }
                if !now.departures.is_empty() {
                    return Err(WaitError::Departed {
                        departures: now.departures,
                    });
                }
                if now.progress.iter().all(|progress| progress.done) {
                    return Ok(());
                }
                last = Some(now.progress);
            }
            Err(err) => {
                errors.insert("hub".to_string(), err.to_string());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let waiting = last
                .iter()
                .flatten()
                .filter(|progress| !progress.done)
                .map(ToString::to_string)
                .chain(errors.into_values())
                .collect();
            return Err(WaitError::Timeout { timeout, waiting });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn written(action: Action) -> WrittenObject {
        WrittenObject {
            action,
            key: ObjectKey::namespaced(ObjectKind::Spoke, "dev"),
            uid: Some("uid-1".into()),
            generation: Some(2),
        }
    }

    fn live(uid: &str, generation: i64) -> ObjectMeta {
        ObjectMeta {
            name: Some("dev".into()),
            uid: Some(uid.into()),
            generation: Some(generation),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_object_apply_wrote_departs_when_deleted_replaced_or_changed() {
        let update = written(Action::Update);
        assert_eq!(departed(&update, Some(&live("uid-1", 2))), None);
        assert_eq!(departed(&update, None), Some(Departed::Deleted));
        assert_eq!(
            departed(&update, Some(&live("uid-2", 1))),
            Some(Departed::Replaced)
        );
        assert_eq!(
            departed(&update, Some(&live("uid-1", 3))),
            Some(Departed::Changed { written: 2, now: 3 })
        );
        let mut deleting = live("uid-1", 3);
        deleting.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert_eq!(
            departed(&written(Action::Create), Some(&deleting)),
            Some(Departed::Deleting)
        );
        // What apply deleted is waited for as a spoke that goes away, not judged here.
        assert_eq!(departed(&written(Action::Delete), None), None);
    }

    #[test]
    fn a_departure_names_the_fleetsyncs_that_revert_it() {
        let departure = Departure {
            hub: "hub".into(),
            key: ObjectKey::namespaced(ObjectKind::Spoke, "dev"),
            departed: Departed::Changed { written: 2, now: 3 },
            fleet_syncs: vec![ManagingSync {
                fleet_sync: "fleet".into(),
                repo: "https://git.example/fleet.git".into(),
                git_ref: "main".into(),
                path: None,
                last_applied_commit: Some("0123456789".into()),
            }],
        };
        assert_eq!(
            departure.to_string(),
            "hub hub: Spoke fleetform-system/dev was changed after apply wrote it (generation 2, now 3): reverted by FleetSync fleet (https://git.example/fleet.git at main, commit 0123456 in force)"
        );
    }
}
