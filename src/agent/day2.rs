//! Day 2 (seed 004, DESIGN §4.6): once joined, the agent owns its spoke. This is the loop: what
//! to do is [`super::day2_decision`]'s to say.
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

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, predicates};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::day2_decision::{Action, Facts, Next, Outcome, after, decide};
use super::run::{AgentError, Context, FIELD_MANAGER, MAX_RETRY_DELAY, RETRY_DELAY};
use crate::api::fleet::{AgentDeploymentSeen, Hub, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::FINALIZER_SPOKE_CLEANUP;
use crate::reconciler::uninstall;
use crate::runtime::conditions::set_conditions_from;
use crate::runtime::error::KubeError;
use crate::runtime::error::is_not_found;
use crate::runtime::finalizers::set_finalizer;
use crate::runtime::retry::Retry;
use crate::runtime::watch::{Change, backing_off, object_changes};

/// The changes of a Hub's spec, by a watch of its metadata.
type HubChanges =
    futures::stream::BoxStream<'static, Result<PartialObjectMeta<Hub>, watcher::Error>>;

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let spokes: Api<Spoke> = Api::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", ctx.name()));
    let mut events = backing_off(watcher(spokes, config))
        .applied_objects()
        .boxed();
    let mut watching_spoke = Retry::new(
        "watching the Spoke",
        ctx.name(),
        RETRY_DELAY,
        MAX_RETRY_DELAY,
    );
    let mut watching_hub = Retry::new("watching the Hub", ctx.name(), RETRY_DELAY, MAX_RETRY_DELAY);
    let mut cluster_rx = ctx.cluster.clone();
    let mut spoke: Option<Spoke> = None;
    // The Spoke's Hub, watched by name once the Spoke names it: its agent settings are defaults.
    // Only its metadata, and only when its spec changes: its status names every spoke of the
    // hub and changes as its rollout moves, which this agent learns from its own Spoke.
    let mut hub_events: Option<(String, HubChanges)> = None;
    let mut hub = HubCache::default();
    // The Deployment this agent runs in, watched by name on its spoke: an edit or removal there
    // is reported to the hub at once (its reconciler puts it back), not at the reconciler's next
    // look at the spoke, which comes ever more rarely as the fleet grows.
    let mut deployment_changes = match ctx.config.deployment.as_deref() {
        Some(name) => object_changes(
            Api::<Deployment>::namespaced(ctx.spoke.clone(), &ctx.config.agent_namespace),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
            &shutdown,
        ),
        None => futures::stream::pending().boxed(),
    };
    let mut deployment_seen: Option<AgentDeploymentSeen> = None;
    let mut watching_deployment = Retry::new(
        "watching its Deployment",
        ctx.name(),
        RETRY_DELAY,
        MAX_RETRY_DELAY,
    );
    let mut retry = false;
    loop {
        if let Some(hub_ref) = spoke.as_ref().map(|spoke| spoke.spec.hub_ref.clone())
            && hub_events
                .as_ref()
                .is_none_or(|(watched, _)| *watched != hub_ref)
        {
            let hubs: Api<PartialObjectMeta<Hub>> =
                Api::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE);
            let config = watcher::Config::default().fields(&format!("metadata.name={hub_ref}"));
            hub.hub = None;
            hub_events = Some((
                hub_ref,
                backing_off(watcher(hubs, config))
                    .applied_objects()
                    .predicate_filter(predicates::generation, Default::default())
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
            _ = shutdown.cancelled() => {
                if let Some(spoke) = &spoke {
                    report_removed_at_stop(&ctx, spoke).await;
                }
                return;
            }
            change = deployment_changes.next() => match change {
                None => deployment_changes = futures::stream::pending().boxed(),
                Some(Err(err)) => {
                    watching_deployment.failed(&err);
                    continue;
                }
                Some(Ok(change)) => {
                    watching_deployment.succeeded();
                    let seen = match change {
                        Change::Applied(deployment) => AgentDeploymentSeen::of(Some(&deployment)),
                        Change::Deleted(_) => AgentDeploymentSeen::default(),
                    };
                    // Its status and the like change too: only what the hub is told wakes.
                    if deployment_seen.replace(seen.clone()) == Some(seen) {
                        continue;
                    }
                }
            },
            event = next_hub => match event {
                None => hub_events = None,
                Some(Err(err)) => {
                    watching_hub.failed(&err);
                    continue;
                }
                // Its spec changed: read it again.
                Some(Ok(_)) => {
                    watching_hub.succeeded();
                    hub.hub = None;
                }
            },
            event = events.next() => match event {
                None => return,
                Some(Ok(seen)) => {
                    watching_spoke.succeeded();
                    spoke = Some(seen);
                }
                Some(Err(watcher::Error::InitialListFailed(err))) if is_not_found(&err) => {
                    info!("the hub has no Spoke objects: day 2 stays with whoever installed this agent");
                    return;
                }
                Some(Err(err)) => {
                    watching_spoke.failed(&err);
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
        let outcome = match pass(&ctx, current, joined, &mut hub).await {
            Ok(outcome) => outcome,
            Err(AgentError::Kube(err)) if err.is_conflict() => Outcome::Conflict,
            Err(err) => {
                warn!(%err, "day 2; retrying");
                Outcome::Failed
            }
        };
        match after(outcome) {
            Next::AwaitChange => retry = false,
            Next::Retry => retry = true,
            Next::Stop => return,
        }
    }
}

/// When the agent stops (its pod ends) because its Deployment was removed, which the watch
/// may not have told it first: reports the Deployment gone on the Spoke, so that the hub puts it
/// back now. Bounded in time, as a stopping pod's grace is; a Deployment still there, a Spoke
/// being deleted, an agent not joined or in no Deployment write nothing.
async fn report_removed_at_stop(ctx: &Context, spoke: &Spoke) {
    const AT_STOP: Duration = Duration::from_secs(5);
    let Some(name) = ctx.config.deployment.as_deref() else {
        return;
    };
    let joined = ctx
        .cluster
        .borrow()
        .as_ref()
        .is_some_and(|cluster| cluster.is_joined());
    if !joined || spoke.metadata.deletion_timestamp.is_some() {
        return;
    }
    let report = async {
        let deployments: Api<Deployment> =
            Api::namespaced(ctx.spoke.clone(), &ctx.config.agent_namespace);
        let seen = AgentDeploymentSeen::of(deployments.get_opt(name).await?.as_ref());
        let reported = spoke
            .status
            .as_ref()
            .and_then(|status| status.agent_deployment.as_ref());
        if seen != AgentDeploymentSeen::default() || reported == Some(&seen) {
            return Ok(());
        }
        info!("stopping with its Deployment removed: reporting it to the hub");
        let patch = json!({"status": {"agentDeployment": seen_patch(&seen)}});
        Api::<Spoke>::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE)
            .patch_status(ctx.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    };
    // At a whole cluster's or process's stop the spoke may answer no more: the hub's next look
    // at the spoke finds what this would have reported.
    match tokio::time::timeout(AT_STOP, report).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => debug!(%err, "reporting its removed Deployment at stop"),
        Err(_) => debug!("reporting its removed Deployment at stop: no answer in {AT_STOP:?}"),
    }
}

/// `seen` as a merge patch of `status.agentDeployment`: each key written, `null` too, as a
/// merge of `{}` would leave the last one's.
fn seen_patch(seen: &AgentDeploymentSeen) -> serde_json::Value {
    json!({"uid": seen.uid, "generation": seen.generation})
}

/// The Spoke's Hub as passes read it: read again once its spec changes (the loop clears it), or
/// on every pass that needs it while the Spoke has no `status.releasedAgent` (its hub's
/// reconciler does not write one: its rollout's status is read afresh instead).
#[derive(Default)]
struct HubCache {
    hub: Option<Hub>,
}

impl HubCache {
    async fn get(&mut self, ctx: &Context, spoke: &Spoke) -> Result<Option<&Hub>, AgentError> {
        let gated_by_spoke = spoke
            .status
            .as_ref()
            .is_some_and(|status| status.released_agent.is_some());
        let cached = self
            .hub
            .as_ref()
            .is_some_and(|hub| hub.metadata.name.as_ref() == Some(&spoke.spec.hub_ref));
        if !(gated_by_spoke && cached) {
            self.hub = Api::<Hub>::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE)
                .get_opt(&spoke.spec.hub_ref)
                .await
                .map_err(KubeError::on(
                    format!("cluster {}", ctx.name()),
                    "read its Hub",
                ))?;
        }
        Ok(self.hub.as_ref())
    }
}

/// One pass: gather the facts, decide, act.
async fn pass(
    ctx: &Context,
    spoke: &Spoke,
    joined: bool,
    hub: &mut HubCache,
) -> Result<Outcome, AgentError> {
    let name = ctx.name();
    let deployments: Api<Deployment> =
        Api::namespaced(ctx.spoke.clone(), &ctx.config.agent_namespace);
    // The Deployment and Hub matter only to a joined agent whose Spoke stays.
    let running = match ctx.config.deployment.as_deref() {
        Some(deployment) if joined && spoke.metadata.deletion_timestamp.is_none() => deployments
            .get_opt(deployment)
            .await
            .map_err(KubeError::on(
                format!("cluster {name}"),
                "read its Deployment",
            ))?,
        _ => None,
    };
    let hub = match &running {
        Some(_) if !spoke.spec.is_hub_as_spoke() => hub.get(ctx, spoke).await?,
        _ => None,
    };
    let decision = decide(&Facts {
        spoke,
        joined,
        running: running.as_ref(),
        in_deployment: ctx.config.deployment.is_some(),
        hub,
        version: &ctx.config.version,
        config_hash: ctx.config.config_hash.as_deref(),
        now: Timestamp::now(),
    });
    if decision.unjoins {
        info!("the Spoke is being deleted: unjoining");
    }
    for action in decision.actions {
        act(ctx, spoke, &deployments, action).await?;
    }
    if decision.unjoins {
        info!("unjoined");
        return Ok(Outcome::Unjoined);
    }
    Ok(Outcome::Done)
}

/// Does one action of a decision.
async fn act(
    ctx: &Context,
    spoke: &Spoke,
    deployments: &Api<Deployment>,
    action: Action,
) -> Result<(), AgentError> {
    let name = ctx.name();
    let spokes: Api<Spoke> = Api::namespaced(ctx.hub.clone(), SYSTEM_NAMESPACE);
    let on_spoke = |message| AgentError::Local {
        cluster: name.to_string(),
        message,
    };
    let (what, written) = match action {
        Action::RemoveCredentials => {
            return uninstall::remove_credentials(&ctx.spoke)
                .await
                .map_err(on_spoke);
        }
        Action::RemoveWorkload { purge_namespace } => {
            return uninstall::remove_workload(&ctx.spoke, purge_namespace)
                .await
                .map_err(on_spoke);
        }
        Action::CleanupFinalizer(add) => (
            "update its Spoke's finalizers",
            set_finalizer(&spokes, spoke, FINALIZER_SPOKE_CLEANUP, add).await,
        ),
        Action::Report(report) => {
            let mut also = serde_json::Map::new();
            if let Some((version, config_hash)) = report.runs {
                also.insert("agentVersion".into(), json!(version));
                also.insert("agentConfigHash".into(), json!(config_hash));
            }
            if let Some(seen) = report.deployment {
                also.insert("agentDeployment".into(), seen_patch(&seen));
            }
            // From the Spoke its watch brought: no read, and no write when nothing changed.
            let pivot = report.pivot;
            (
                "report on its Spoke",
                set_conditions_from(
                    &spokes,
                    spoke,
                    FIELD_MANAGER,
                    |_| vec![pivot.clone()],
                    &also,
                )
                .await
                .map(|_| ()),
            )
        }
        Action::Upgrade {
            name: running,
            from,
            to,
            deployment,
        } => {
            info!(from, to, "upgrading this agent");
            let mut object = serde_json::to_value(&*deployment)
                .map_err(|err| on_spoke(format!("cannot render its Deployment: {err}")))?;
            object["apiVersion"] = json!("apps/v1");
            object["kind"] = json!("Deployment");
            let params = PatchParams::apply(FIELD_MANAGER).force();
            (
                "upgrade its Deployment",
                deployments
                    .patch(&running, &params, &Patch::Apply(&object))
                    .await
                    .map(|_| ()),
            )
        }
    };
    Ok(written.map_err(KubeError::on(format!("cluster {name}"), what))?)
}
