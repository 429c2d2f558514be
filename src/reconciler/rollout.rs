//! A hub's agent rollout as the Hub controller runs it: gathers each spoke's wanted and reported
//! agent and availability, asks [`crate::rollout::decide`], and writes the outcome into the
//! Hub's `status.rollout` (where the reconciler and the agents read their release), the
//! `RolloutHalted` condition and Events. Under `strategy: All` it keeps no state.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::info;

use super::run::{FIELD_MANAGER, ReconcileError};
use crate::api::fleet::{Hub, Phase, RolloutStrategy, Spoke};
use crate::api::vocabulary::{CONDITION_ROLLOUT_HALTED, STATUS_FALSE, STATUS_TRUE};
use crate::events::{self, EventType, Reporter};
use crate::plan::desired::effective;
use crate::rollout::{self, SpokeFacts};
use crate::runtime::conditions::set_conditions;
use crate::runtime::error::KubeError;

/// Field manager of `status.rollout`: server-side apply removes what a decision leaves out.
const ROLLOUT_FIELD_MANAGER: &str = "fleetform-rollout";

/// One look at `hub`'s rollout over `spokes` (its own, not being deleted); returns how long until
/// it must be looked at again though nothing changed.
pub(super) async fn run(
    api: &Api<Hub>,
    reporter: &Reporter,
    hub: &Hub,
    spokes: &[std::sync::Arc<Spoke>],
) -> Result<Option<Duration>, ReconcileError> {
    let name = hub.name_any();
    let spec = &hub.spec.rollout;
    let previous = hub
        .status
        .as_ref()
        .and_then(|status| status.rollout.as_ref());
    if spec.strategy == RolloutStrategy::All {
        if previous.is_some() {
            write(api, &name, None).await?;
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
                wanted: effective(spoke, hub, &BTreeMap::new()).agent.hash(),
                running: status.and_then(|status| status.agent_config_hash.clone()),
                online: status.and_then(|status| status.phase) == Some(Phase::Running),
            }
        })
        .collect();
    let now = Timestamp::now();
    let decision = rollout::decide(spec, &rollout::target(hub), &facts, previous, now);
    if previous != Some(&decision.status) {
        write(api, &name, Some(&decision.status)).await?;
    }
    let halted = decision.status.halted.clone();
    // The Events first: whoever sees the condition can find its Event too.
    let reference = events::reference(hub);
    if let Some(halted) = halted.clone().filter(|_| decision.halted_now) {
        info!(hub = name, %halted, "rollout halted");
        reporter
            .publish(
                &reference,
                EventType::Warning,
                CONDITION_ROLLOUT_HALTED,
                "Rollout",
                halted,
            )
            .await;
    }
    if previous.is_some_and(|previous| previous.wave.is_some()) && decision.status.wave.is_none() {
        let done = decision
            .status
            .spokes
            .iter()
            .filter(|entry| entry.state == crate::api::fleet::SpokeRolloutState::Succeeded)
            .count();
        reporter
            .publish(
                &reference,
                EventType::Normal,
                "RolloutComplete",
                "Rollout",
                format!(
                    "{done} of {} spoke(s) run {}",
                    decision.status.spokes.len(),
                    decision.status.target
                ),
            )
            .await;
    }
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
        message: halted.clone().unwrap_or_else(|| {
            "failures are within maxFailures; a halt is resumed by a new commit or by setting paused: true, then false".to_string()
        }),
        observed_generation: hub.metadata.generation,
        last_transition_time: Time(now),
    };
    set_conditions(api, &name, FIELD_MANAGER, |_| vec![condition.clone()])
        .await
        .map_err(KubeError::on(format!("Hub {name}"), "write RolloutHalted"))?;
    Ok(decision.wake_at.map(|at| {
        Duration::try_from(at.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO)
    }))
}

/// Writes `status.rollout` (none removes it).
async fn write(
    api: &Api<Hub>,
    name: &str,
    status: Option<&crate::api::fleet::RolloutStatus>,
) -> Result<(), ReconcileError> {
    let mut written = json!({});
    if let Some(status) = status {
        written["rollout"] = json!(status);
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
