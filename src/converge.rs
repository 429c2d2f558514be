//! Waiting for a fleet to converge after `apply`: every Spoke on every hub Running for its
//! current generation, every Spoke being deleted gone.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::api::fleet::{Hub, Phase, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::{
    CONDITION_CLEANUP_FAILED, CONDITION_RECONCILED, CONDITION_SPOKE_JOINED, STATUS_TRUE,
};
use crate::plan::desired::{AgentConfig, effective};

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

/// The progress of every spoke of the hubs, sorted; a spoke whose object is gone is done and
/// no longer listed.
pub async fn snapshot(hubs: &[(String, Client)]) -> Result<Vec<Progress>, kube::Error> {
    let mut all = Vec::new();
    for (hub, client) in hubs {
        let declared = Api::<Hub>::namespaced(client.clone(), SYSTEM_NAMESPACE)
            .get_opt(hub)
            .await?;
        let spokes: Api<Spoke> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
        for spoke in spokes.list(&ListParams::default()).await? {
            if spoke.spec.hub_ref == *hub {
                let wanted = declared
                    .as_ref()
                    .map(|declared| effective(&spoke, declared, &BTreeMap::new()).agent);
                all.push(progress(hub, &spoke, wanted.as_ref()));
            }
        }
    }
    all.sort_by(|a, b| (&a.hub, &a.spoke).cmp(&(&b.hub, &b.spoke)));
    Ok(all)
}

/// Why waiting ended without convergence.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("timed out after {} s; still waiting for: {}", .timeout.as_secs(), .waiting.join(", "))]
    Timeout {
        timeout: Duration,
        waiting: Vec<String>,
    },
}

/// Waits until every spoke of `hubs` is done, calling `report` with the whole picture whenever
/// it changes.
pub async fn wait(
    hubs: &[(String, Client)],
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
                if last.as_ref() != Some(&now) {
                    report(&now);
                }
                if now.iter().all(|progress| progress.done) {
                    return Ok(());
                }
                last = Some(now);
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
