//! `fleetform sync`: the in-cluster GitOps controller. It runs on a hub, keeps that hub's part
//! of the fleet in line with the commit each FleetSync names, and reports on the FleetSync.
//!
//! - [`controller`]: fetch, load, plan and apply per FleetSync (interval, spec changes, drift of
//!   the managed Hub, Spoke and ClusterManagementAddOn objects); status and events (one per
//!   applied commit, stall and recovery, through [`crate::events`]).
//! - [`status`]: the outcome of a sync and the FleetSync status it writes (pure).
//! - [`trust`]: the signature a FleetSync requires and the keys its Secret holds.
//! - [`webhook`]: the push receiver (`--webhook-addr`): a valid push asks for a fetch at once.
//! - [`notify`]: messages to `spec.notify`'s providers on transitions, never holding up a sync.
//! - [`watch`]: the hub's spokes going Unknown and back and its rollout halting, as notices and
//!   as the FleetSyncs' `RolloutHalted` condition.
//! - [`metrics`]: what `/metrics` serves; the runtime's admin endpoint
//!   ([`crate::runtime::admin`]) serves it with `/healthz` and `/readyz`, and its leader
//!   election ([`crate::runtime::leader`]) says which replica syncs.
//!
//! **Which hub.** A sync applies only the part of the fleet for the hub it runs on: the hub
//! named by [`SyncConfig::hub`] (`--hub NAME`), or, when that is unset, the fleet's only hub. A
//! commit whose fleet does not name this hub (or has several and none was chosen) is an invalid
//! commit for this sync: it is never taken as a request to delete the hub the sync runs on.
//!
//! **Leadership.** Every replica takes part in the election on the Lease `fleetform-sync` (in
//! the FleetSyncs' namespace); only the holder runs the controller, and it starts its watches
//! afresh each term, so a term's first reconcile always fetches (after the [`watch`]es have listed
//! the hub, at most 10 s). On shutdown the sync in flight finishes before the Lease is released.
//!
//! **Endpoint.** `/metrics`, `/healthz` and `/readyz` default to loopback (`127.0.0.1:9090`),
//! right for `fleetform up` on one machine; in a pod pass `--metrics-addr 0.0.0.0:9090`.
//!
//! This module must not plan, observe or write objects itself: that is [`crate::plan`],
//! [`crate::observe`] and [`crate::apply`].

pub mod controller;
pub mod metrics;
pub mod notify;
pub mod status;
pub mod trust;
pub mod watch;
pub mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::api::fleet::{FleetSync, SYSTEM_NAMESPACE};
use crate::api::{ClusterManagementAddOn, Hub, ManagedCluster, Spoke};
use crate::events::Reporter;
use crate::fleet::Fleet;
use crate::runtime::admin::{self, LeaderReadiness};
use crate::runtime::crd;
use crate::runtime::leader::{self, Election};

/// The controller name on events (`reportingController`) and the default leader Lease name.
pub const CONTROLLER_NAME: &str = "fleetform-sync";
/// Where `/metrics`, `/healthz` and `/readyz` are served by default.
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9090";
/// How long a term's first sync waits for the watches of the hub's spokes and rollouts to list.
const WATCH_LIST_BOUND: Duration = Duration::from_secs(10);
/// How long a leader's Lease holds without renewal.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// Work that must be done before a commit's objects are written to the hub, given the commit's
/// fleet and this hub's name; an error fails the sync (it is retried). `fleetform up` starts the
/// embedded clusters of the spokes a commit declares here, so no loop ever finds a Spoke whose
/// cluster is not running yet.
pub type Prepare =
    Arc<dyn Fn(&Fleet, &str) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// What a sync controller runs with.
#[derive(Clone)]
pub struct SyncConfig {
    /// The hub it runs on (and writes to).
    pub client: Client,
    /// The hub's name in the fleet; `None`: the fleet's only hub.
    pub hub: Option<String>,
    /// Namespace of the FleetSyncs it serves and of its leader Lease.
    pub namespace: String,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` (port 0: any free port); `None`: not
    /// served.
    pub metrics_addr: Option<SocketAddr>,
    /// This replica's name in the leader election (unique per replica, e.g. the pod name).
    pub identity: String,
    /// Name of the leader Lease in `namespace`.
    pub lease_name: String,
    /// How long the Lease holds without renewal; a follower takes over that long after the
    /// leader stopped renewing it.
    pub lease_duration: Duration,
    /// Percentage of the hub's spokes a commit may unjoin unless the FleetSync sets
    /// `allowPrune` (at least one always may).
    pub max_prune_percent: u32,
    /// Run before each write of a commit's objects; `None`: nothing to prepare.
    pub prepare: Option<Prepare>,
    /// Where to serve the push receiver (port 0: any free port); `None`: not served.
    pub webhook_addr: Option<SocketAddr>,
    /// How long after one fetch request further pushes are folded into one more.
    pub webhook_coalesce: Duration,
    /// After a notification, how long further ones for the same FleetSync and provider are
    /// folded into one.
    pub notify_window: Duration,
}

impl SyncConfig {
    /// The defaults: the fleet's only hub, FleetSyncs in `fleetform-system`, no metrics
    /// endpoint, Lease `fleetform-sync` held for 15 s, prune guard at 10 %.
    pub fn new(client: Client, identity: impl Into<String>) -> Self {
        SyncConfig {
            client,
            hub: None,
            namespace: SYSTEM_NAMESPACE.to_string(),
            metrics_addr: None,
            identity: identity.into(),
            lease_name: CONTROLLER_NAME.to_string(),
            lease_duration: DEFAULT_LEASE_DURATION,
            max_prune_percent: crate::plan::PruneGuard::default().max_percent,
            prepare: None,
            webhook_addr: None,
            webhook_coalesce: webhook::DEFAULT_COALESCE,
            notify_window: notify::DEFAULT_WINDOW,
        }
    }
}

impl std::fmt::Debug for SyncConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncConfig")
            .field("hub", &self.hub)
            .field("namespace", &self.namespace)
            .field("metrics_addr", &self.metrics_addr)
            .field("identity", &self.identity)
            .field("lease_name", &self.lease_name)
            .field("lease_duration", &self.lease_duration)
            .field("max_prune_percent", &self.max_prune_percent)
            .field("prepare", &self.prepare.is_some())
            .field("webhook_addr", &self.webhook_addr)
            .finish_non_exhaustive()
    }
}

/// Why the sync controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Admin(#[from] admin::AdminError),
    #[error("cannot serve {what} on {addr}: {source}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the FleetSync CRD is not installed on this hub (install it with `fleetform crds | kubectl apply -f -`)"
    )]
    NoFleetSyncCrd,
}

/// A started sync controller.
pub struct RunningSync {
    metrics_addr: Option<SocketAddr>,
    webhook_addr: Option<SocketAddr>,
    task: JoinHandle<()>,
}

impl RunningSync {
    /// Where `/metrics`, `/healthz` and `/readyz` are served (the port chosen for port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Where the push receiver is served (the port chosen for port 0).
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.webhook_addr
    }

    /// Waits until the controller has stopped (after its shutdown token was cancelled): the
    /// running sync finished and the leader Lease released.
    pub async fn stopped(self) {
        if let Err(err) = self.task.await {
            tracing::warn!(%err, "sync controller ended abnormally");
        }
    }
}

/// Starts the sync controller: binds the metrics endpoint, joins the leader election and syncs
/// while it leads, until `shutdown` is cancelled.
pub async fn start(
    config: SyncConfig,
    shutdown: CancellationToken,
) -> Result<RunningSync, SyncError> {
    if !crd::installed::<FleetSync>(&config.client, "fleetform sync cannot run").await {
        return Err(SyncError::NoFleetSyncCrd);
    }
    let metrics = metrics::Metrics::default();
    let readiness = LeaderReadiness::new("the first sync");
    let metrics_addr = admin::serve_component(
        config.metrics_addr,
        readiness.clone(),
        metrics.registry(),
        shutdown.clone(),
    )
    .await?;
    // Every replica receives pushes: the fetch request it writes reaches whichever leads.
    let webhook_addr = match config.webhook_addr {
        Some(addr) => {
            let (listener, bound) = listen("the push receiver", addr).await?;
            let receiver = webhook::Receiver::new(
                config.client.clone(),
                config.namespace.clone(),
                config.webhook_coalesce,
                metrics.clone(),
                shutdown.clone(),
            );
            tokio::spawn(webhook::serve(listener, receiver));
            info!(%bound, "receiving pushes on /hooks/FLEETSYNC");
            Some(bound)
        }
        None => None,
    };
    let drift = controller::DriftWatches {
        hubs: crd::installed::<Hub>(&config.client, "Hub drift is not watched").await,
        spokes: crd::installed::<Spoke>(&config.client, "Spoke drift is not watched").await,
        addons: crd::installed::<ClusterManagementAddOn>(
            &config.client,
            "ClusterManagementAddOn drift is not watched",
        )
        .await,
    };
    let watched = watch::Watched {
        managed_clusters: crd::installed::<ManagedCluster>(
            &config.client,
            "spokes going Unknown are not notified",
        )
        .await,
        hubs: drift.hubs,
    };
    let task = tokio::spawn(lead_and_sync(
        config, drift, watched, metrics, readiness, shutdown,
    ));
    Ok(RunningSync {
        metrics_addr,
        webhook_addr,
        task,
    })
}

async fn listen(
    what: &'static str,
    addr: SocketAddr,
) -> Result<(tokio::net::TcpListener, SocketAddr), SyncError> {
    let error = |source| SyncError::Listen { what, addr, source };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    Ok((listener, bound))
}

/// Runs the sync controller until `shutdown` is cancelled (see [`start`]).
pub async fn run(config: SyncConfig, shutdown: CancellationToken) -> Result<(), SyncError> {
    start(config, shutdown).await?.stopped().await;
    Ok(())
}

/// Takes part in the election and runs the controller whenever this replica leads.
async fn lead_and_sync(
    config: SyncConfig,
    drift: controller::DriftWatches,
    watched: watch::Watched,
    metrics: metrics::Metrics,
    readiness: Arc<LeaderReadiness>,
    shutdown: CancellationToken,
) {
    let election = Election {
        namespace: config.namespace.clone(),
        lease_name: config.lease_name.clone(),
        identity: config.identity.clone(),
        lease_duration: config.lease_duration,
    };
    let events = Reporter::new(config.client.clone(), CONTROLLER_NAME, &config.identity);
    // Outlives the terms: a message waiting for its window is sent whoever leads by then.
    let notifier = notify::Notifier::start(
        config.client.clone(),
        config.notify_window,
        shutdown.clone(),
    );
    let standing = |leads: bool| {
        metrics.set_leader(leads);
        readiness.set_leader(leads);
    };
    leader::lead(
        config.client.clone(),
        &election,
        &shutdown,
        standing,
        |stop| {
            // What a term remembers starts afresh: another leader may have applied newer
            // commits meanwhile, so the first reconcile of a term always fetches.
            let ctx = Arc::new(
                controller::Context::new(
                    config.client.clone(),
                    config.hub.clone(),
                    config.max_prune_percent,
                    events.clone(),
                    metrics.clone(),
                    readiness.clone(),
                    config.prepare.clone(),
                )
                .with_notifier(notifier.clone()),
            );
            let hub_watch = watch::HubWatch {
                client: config.client.clone(),
                namespace: config.namespace.clone(),
                hub: config.hub.clone(),
                notifier: notifier.clone(),
                events: events.clone(),
            };
            let (listed, watches_listed) = tokio::sync::oneshot::channel();
            let namespace = config.namespace.clone();
            let controller_stop = stop.clone();
            let controller = async move {
                // The hub's state is remembered before the first sync can change it, so every
                // change after it is news; a watch that cannot list holds the sync back no longer
                // than this.
                if tokio::time::timeout(WATCH_LIST_BOUND, watches_listed)
                    .await
                    .is_err()
                {
                    tracing::warn!(
                        "the hub's ManagedClusters and Hubs are not listed yet; syncing anyway"
                    );
                }
                controller::run(ctx, namespace, drift, controller_stop).await;
            };
            async move {
                tokio::join!(controller, watch::run(hub_watch, watched, listed, stop));
            }
        },
    )
    .await;
    events.flush_at_stop().await;
}
