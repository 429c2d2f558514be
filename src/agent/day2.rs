//! Day 2 (seed 004, DESIGN §4.6): once joined, the agent owns its spoke.
//!
//! It follows its Spoke on the hub by watch and:
//! - adds the `fleetform.io/spoke-cleanup` finalizer and reports `PivotComplete` (from then on
//!   the hub leaves the spoke side to it);
//! - upgrades itself: when the Deployment the Spoke and its Hub call for differs from the one it
//!   runs in and its hub's rollout has released it, it applies the new one (whoever runs the
//!   Deployment restarts the agent);
//! - reports the agent version and configuration hash it runs (those its pod was started for)
//!   on the Spoke's status;
//! - unjoins when the Spoke is deleted and the hub has removed its preflight finalizer: removes
//!   its credentials, drops `spoke-cleanup`, and removes its own workload last.
//!
//! A hub registered as its own spoke is the hub's business on both days, so the agent there only
//! reports. Agents of hubs without fleetform's CRDs (plain OCM) have no Spoke and skip day 2.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::run::{AgentError, Context, FIELD_MANAGER, RETRY_DELAY};
use crate::api::fleet::{Hub, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::{
    CONDITION_PIVOT_COMPLETE, FINALIZER_HUB_CLEANUP_PREFLIGHT, FINALIZER_SPOKE_CLEANUP, STATUS_TRUE,
};
use crate::plan::desired::effective;
use crate::reconciler::install::{
    LABEL_AGENT_VERSION, agent_deployment, deployment_current, deployment_label, spoke_url_of,
};
use crate::reconciler::uninstall;
use crate::runtime::conditions::set_conditions;
use crate::runtime::error::KubeError;
use crate::runtime::error::is_not_found;
use crate::runtime::finalizers::set_finalizer;

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let spokes: Api<Spoke> = Api::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", ctx.name()));
    let mut events = watcher(spokes, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut cluster_rx = ctx.cluster.clone();
    let mut spoke: Option<Spoke> = None;
    // The Spoke's Hub, watched by name once the Spoke names it: its agent settings are defaults.
    let mut hub_events: Option<(
        String,
        futures::stream::BoxStream<'static, Result<Hub, watcher::Error>>,
    )> = None;
    let mut retry = false;
    loop {
        if let Some(hub_ref) = spoke.as_ref().map(|spoke| spoke.spec.hub_ref.clone())
            && hub_events
                .as_ref()
                .is_none_or(|(watched, _)| *watched != hub_ref)
        {
            let hubs: Api<Hub> = Api::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE);
            let config = watcher::Config::default().fields(&format!("metadata.name={hub_ref}"));
            hub_events = Some((
                hub_ref,
                watcher(hubs, config)
                    .default_backoff()
                    .applied_objects()
                    .boxed(),
            ));
        }
        let next_hub = async {
            match hub_events.as_mut() {
                Some((_, events)) => events.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            event = next_hub => match event {
                None => hub_events = None,
                Some(Err(err)) => {
                    warn!(%err, "watching the Hub");
                    continue;
                }
                Some(Ok(_)) => {}
            },
            event = events.next() => match event {
                None => return,
                Some(Ok(seen)) => spoke = Some(seen),
                Some(Err(watcher::Error::InitialListFailed(err))) if is_not_found(&err) => {
                    info!("the hub has no Spoke objects: day 2 stays with whoever installed this agent");
                    return;
                }
                Some(Err(err)) => {
                    warn!(%err, "watching the Spoke");
                    continue;
                }
            },
            changed = cluster_rx.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(RETRY_DELAY), if retry => {}
        }
        let joined = cluster_rx
            .borrow()
            .as_ref()
            .is_some_and(|cluster| cluster.is_joined());
        let Some(current) = spoke.as_ref() else {
            continue;
        };
        retry = match step(&ctx, current, joined).await {
            Ok(Step::Continue) => false,
            Ok(Step::Unjoined) => return,
            Err(AgentError::Kube(err)) if err.is_conflict() => {
                // Someone wrote the Spoke meanwhile; its watch brings the fresh one.
                false
            }
            Err(err) => {
                warn!(%err, "day 2; retrying");
                true
            }
        };
    }
}

enum Step {
    Continue,
    /// The agent removed itself; nothing is left for it to do.
    Unjoined,
}

async fn step(ctx: &Context, spoke: &Spoke, joined: bool) -> Result<Step, AgentError> {
    let name = ctx.name();
    let spokes: Api<Spoke> = Api::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE);
    let hub_as_spoke = spoke.spec.is_hub_as_spoke();
    let has = |finalizer: &str| spoke.finalizers().iter().any(|f| f == finalizer);
    if spoke.metadata.deletion_timestamp.is_some() {
        if hub_as_spoke || has(FINALIZER_HUB_CLEANUP_PREFLIGHT) || !has(FINALIZER_SPOKE_CLEANUP) {
            return Ok(Step::Continue);
        }
        info!("the Spoke is being deleted: unjoining");
        uninstall::remove_credentials(&ctx.spoke)
            .await
            .map_err(|message| AgentError::Local {
                cluster: name.to_string(),
                message,
            })?;
        set_finalizers(&spokes, spoke, false).await?;
        let purge = spoke.spec.cleanup.purge_agent_namespace;
        uninstall::remove_workload(&ctx.spoke, purge)
            .await
            .map_err(|message| AgentError::Local {
                cluster: name.to_string(),
                message,
            })?;
        info!("unjoined");
        return Ok(Step::Unjoined);
    }
    if !joined {
        return Ok(Step::Continue);
    }
    if !hub_as_spoke && !has(FINALIZER_SPOKE_CLEANUP) {
        set_finalizers(&spokes, spoke, true).await?;
    }
    let pivot = Condition {
        type_: CONDITION_PIVOT_COMPLETE.to_string(),
        status: STATUS_TRUE.to_string(),
        reason: "AgentOwnsDayTwo".to_string(),
        message: "the agent upgrades and cleans up its spoke".to_string(),
        observed_generation: None,
        last_transition_time: Time(Timestamp::now()),
    };
    set_conditions(&spokes, name, FIELD_MANAGER, |_| vec![pivot.clone()])
        .await
        .map_err(KubeError::on(
            format!("cluster {name}"),
            "report PivotComplete",
        ))?;
    let Some(deployment_name) = ctx.config.deployment.as_deref() else {
        return Ok(Step::Continue);
    };
    let deployments: Api<Deployment> =
        Api::namespaced(ctx.spoke.clone(), &ctx.config.agent_namespace);
    let Some(running) = deployments
        .get_opt(deployment_name)
        .await
        .map_err(KubeError::on(
            format!("cluster {name}"),
            "read its Deployment",
        ))?
    else {
        return Ok(Step::Continue);
    };
    report_version(&spokes, spoke, &ctx.config).await?;
    if hub_as_spoke {
        return Ok(Step::Continue);
    }
    let hubs: Api<Hub> = Api::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE);
    let Some(hub) = hubs
        .get_opt(&spoke.spec.hub_ref)
        .await
        .map_err(KubeError::on(format!("cluster {name}"), "read its Hub"))?
    else {
        return Ok(Step::Continue);
    };
    let wanted = effective(spoke, &hub, &BTreeMap::new());
    // The hub's rollout says when this spoke moves to a new agent.
    if !crate::rollout::released(&hub, name, &wanted.agent.hash()) {
        return Ok(Step::Continue);
    }
    // The spoke URL is the installer's to set; the agent keeps the one it was given.
    let desired = agent_deployment(name, &wanted, spoke_url_of(&running));
    if !deployment_current(&running, &desired) {
        info!(
            from = deployment_label(&running, LABEL_AGENT_VERSION),
            to = deployment_label(&desired, LABEL_AGENT_VERSION),
            "upgrading this agent"
        );
        let mut object = serde_json::to_value(&desired).map_err(|err| AgentError::Local {
            cluster: name.to_string(),
            message: format!("cannot render its Deployment: {err}"),
        })?;
        object["apiVersion"] = json!("apps/v1");
        object["kind"] = json!("Deployment");
        deployments
            .patch(
                deployment_name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(KubeError::on(
                format!("cluster {name}"),
                "upgrade its Deployment",
            ))?;
    }
    Ok(Step::Continue)
}

/// Adds or removes `spoke-cleanup`.
async fn set_finalizers(spokes: &Api<Spoke>, spoke: &Spoke, add: bool) -> Result<(), AgentError> {
    Ok(set_finalizer(spokes, spoke, FINALIZER_SPOKE_CLEANUP, add)
        .await
        .map_err(KubeError::on(
            format!("cluster {}", &spoke.name_any()),
            "update its Spoke's finalizers",
        ))?)
}

/// The version and configuration hash this agent runs (what its pod was started for, not what its
/// Deployment asks for now: a new version that never starts is never reported), on the Spoke's
/// status.
async fn report_version(
    spokes: &Api<Spoke>,
    spoke: &Spoke,
    config: &super::AgentConfig,
) -> Result<(), AgentError> {
    let version = Some(config.version.as_str());
    let hash = config.config_hash.as_deref();
    let status = spoke.status.as_ref();
    if status.and_then(|s| s.agent_version.as_deref()) == version
        && status.and_then(|s| s.agent_config_hash.as_deref()) == hash
    {
        return Ok(());
    }
    let patch = json!({"status": {"agentVersion": version, "agentConfigHash": hash}});
    Ok(spokes
        .patch_status(
            &spoke.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
        .map_err(KubeError::on(
            format!("cluster {}", &spoke.name_any()),
            "report its version",
        ))?)
}
