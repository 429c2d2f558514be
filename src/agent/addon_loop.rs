//! The agent's addon health loop (seed 001, DESIGN §4.3).
//!
//! The cluster's ManagedClusterAddOns are watched on the hub; each gets a task that watches the
//! addon's Lease (named after the addon, in its install namespace) on the spoke and judges it with
//! [`judge_addon_lease`]. A fresh lease arms one timer for the instant it goes stale; nothing
//! polls. The Available condition is written to the hub only when [`needs_hub_write`] says it
//! changed, so addon liveness costs the hub nothing while it holds. A task is replaced when its
//! addon's install namespace changes and stopped when the addon is deleted.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::ResourceExt;
use kube::runtime::watcher::{self, watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{instrument, warn};

use super::addon_health::{addon_grace_period, judge_addon_lease, needs_hub_write};
use super::run::{AgentError, Context, FIELD_MANAGER, MAX_RETRY_DELAY, RETRY_DELAY};
use crate::api::ManagedClusterAddOn;
use crate::runtime::clock::{after, sleep_until};
use crate::runtime::conditions::set_conditions;
use crate::runtime::error::KubeError;
use crate::runtime::retry::Retry;
use crate::runtime::task_set::TaskSet;
use crate::runtime::watch::{BackingOff, Change, object_changes};

/// What an addon's health task runs with: the install namespace its lease is watched in, and
/// the addon as last seen (sent to the task as it changes, which needs no restart).
struct AddonTask {
    namespace: String,
    addon: watch::Sender<ManagedClusterAddOn>,
}

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    // Until the hub accepts the cluster, its agent may not read the cluster's addons there.
    if !ctx.accepted(&shutdown).await {
        return;
    }
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(ctx.hub.clone(), ctx.name());
    let mut changes = object_changes(addons, watcher::Config::default(), &shutdown);
    let mut tasks = TaskSet::new("addon health");
    let mut watching = Retry::new(
        "watching ManagedClusterAddOns",
        ctx.name(),
        RETRY_DELAY,
        MAX_RETRY_DELAY,
    );
    while let Some(change) = changes.next().await {
        match change {
            Err(err) => {
                watching.failed(&err);
            }
            Ok(Change::Applied(addon)) => {
                watching.succeeded();
                follow(&ctx, &mut tasks, addon).await;
            }
            Ok(Change::Deleted(addon)) => {
                tasks.stop(&addon.name).await;
            }
        }
    }
    tasks.shutdown().await;
}

/// Starts the addon's task, hands it the addon as it changed, or restarts it in another
/// install namespace.
async fn follow(
    ctx: &Arc<Context>,
    tasks: &mut TaskSet<String, AddonTask>,
    addon: ManagedClusterAddOn,
) {
    let name = addon.name_any();
    let namespace = addon.install_namespace().to_string();
    if let Some(task) = tasks.spec(&name)
        && task.namespace == namespace
    {
        task.addon.send_replace(addon);
        return;
    }
    let (addon_tx, addon_rx) = watch::channel(addon);
    let task = AddonTask {
        namespace: namespace.clone(),
        addon: addon_tx,
    };
    let (ctx, addon_name) = (ctx.clone(), name.clone());
    tasks
        .start(name, task, |stop| {
            watch_addon_lease(ctx, addon_name, namespace, addon_rx, stop)
        })
        .await;
}

/// Follows one addon's lease and keeps its Available condition on the hub.
async fn watch_addon_lease(
    ctx: Arc<Context>,
    addon_name: String,
    namespace: String,
    mut addon_rx: watch::Receiver<ManagedClusterAddOn>,
    stop: CancellationToken,
) {
    let leases: Api<Lease> = Api::namespaced(ctx.spoke.clone(), &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={addon_name}"));
    let mut events = watcher(leases, config).backing_off().boxed();
    let grace = addon_grace_period(ctx.config.addon_lease_duration);
    let mut lease: Option<Lease> = None;
    let mut listing: Option<Lease> = None;
    let mut synced = false;
    let mut changes_at: Option<Timestamp> = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            event = events.next() => match event {
                None => return,
                Some(Err(err)) => {
                    warn!(addon = addon_name, %err, "watching the addon lease");
                    continue;
                }
                Some(Ok(watcher::Event::Init)) => {
                    listing = None;
                    continue;
                }
                Some(Ok(watcher::Event::InitApply(found))) => {
                    listing = Some(found);
                    continue;
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    lease = listing.take();
                    synced = true;
                }
                Some(Ok(watcher::Event::Apply(found))) => lease = Some(found),
                Some(Ok(watcher::Event::Delete(_))) => lease = None,
            },
            changed = addon_rx.changed() => if changed.is_err() { return },
            _ = sleep_until(changes_at.unwrap_or(Timestamp::MAX)), if changes_at.is_some() => {}
        }
        if !synced {
            continue;
        }
        let addon = addon_rx.borrow_and_update().clone();
        let Some(health) = judge_addon_lease(
            &addon_name,
            addon.health_check_mode(),
            lease.as_ref(),
            grace,
            Timestamp::now(),
        ) else {
            changes_at = None;
            continue;
        };
        changes_at = health.changes_at;
        if needs_hub_write(addon.conditions(), &health.available)
            && let Err(err) = write_available(&ctx, &addon_name, &health.available).await
        {
            warn!(addon = addon_name, %err, "writing the addon's Available condition");
            changes_at = Some(after(Timestamp::now(), RETRY_DELAY));
        }
    }
}

#[instrument(skip(ctx, available), fields(cluster = ctx.name(), status = %available.status))]
async fn write_available(
    ctx: &Context,
    addon_name: &str,
    available: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition,
) -> Result<(), AgentError> {
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(ctx.hub.clone(), ctx.name());
    Ok(set_conditions(&addons, addon_name, FIELD_MANAGER, |fresh| {
        if needs_hub_write(fresh.conditions(), available) {
            vec![available.clone()]
        } else {
            Vec::new()
        }
    })
    .await
    .map(|_| ())
    .map_err(KubeError::on(
        format!("cluster {}", ctx.name()),
        format!("write Available of addon {addon_name}"),
    ))?)
}
