//! One hub process: what `fleetform hub` runs in each replica of the hub Deployment and
//! `fleetform up` runs for each embedded hub, their differences being its [`HubProcessConfig`].
//!
//! Every replica serves the conversion webhook and the admin endpoint (`/metrics`, `/healthz`,
//! `/readyz`). Only the holder of the Lease [`LEASE_NAME`] runs the hub loops and the lifecycle
//! reconciler, each term starting them afresh and stopping them (awaited) when the term ends,
//! before a follower could take the Lease over ([`crate::runtime::leader::lead`]). Without an
//! election (`fleetform up`, `fleetform hub --leader-elect=false`) the process leads at once.
//! The sync controller, when the process runs one, takes part in its own election.
//!
//! `/readyz` is ready for a follower at once and for the leader once its loops are started: a
//! follower serves the conversion webhook, so its Service must keep it as an endpoint.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::conversion_webhook::{self, ConversionWebhook, WebhookConfig, WebhookError};
use super::metrics::HubMetrics;
use super::run::{AcceptCheck, HubConfig};
use crate::access::Access;
use crate::reconciler::ReconcilerConfig;
use crate::reconciler::install::KnownEndpoint;
use crate::runtime::admin::{self, AdminError, LeaderReadiness};
use crate::runtime::leader::{self, Election};
use crate::sync::{RunningSync, SyncConfig, SyncError};

/// The leader Lease of the hub loops, in `fleetform-system`.
pub const LEASE_NAME: &str = "fleetform-hub";
/// Where `fleetform hub` serves `/metrics`, `/healthz` and `/readyz` by default (sync's port
/// plus one, so both run side by side).
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9091";
/// How long the hub's leader Lease holds without renewal, by default.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// What one hub process runs.
#[derive(Clone)]
pub struct HubProcessConfig {
    /// The hub, as the hub ServiceAccount.
    pub client: Client,
    /// How the reconciler and the observer reach spokes.
    pub access: Access,
    /// How agents reach this hub when its Hub document names no `apiServer` or CA.
    pub known_endpoint: KnownEndpoint,
    /// The election on [`LEASE_NAME`]; `None`: this process leads at once, alone.
    pub election: Option<Election>,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` (port 0: any free port); `None`: not
    /// served.
    pub admin_addr: Option<SocketAddr>,
    /// The conversion webhook; `None`: not served.
    pub webhook: Option<WebhookConfig>,
    /// The sync controller; `None`: not run here.
    pub sync: Option<SyncConfig>,
    /// What checks who may accept a cluster on this hub ([`AcceptCheck`]).
    pub accept_check: AcceptCheck,
}

impl std::fmt::Debug for HubProcessConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubProcessConfig")
            .field("access", &self.access)
            .field("known_endpoint", &self.known_endpoint)
            .field("election", &self.election)
            .field("admin_addr", &self.admin_addr)
            .field("webhook", &self.webhook)
            .field("sync", &self.sync)
            .field("accept_check", &self.accept_check)
            .finish_non_exhaustive()
    }
}

/// Why a hub process could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubProcessError {
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error("the conversion webhook: {0}")]
    Webhook(#[from] WebhookError),
    #[error("the sync controller: {0}")]
    Sync(#[from] SyncError),
}

/// A started hub process.
pub struct RunningHub {
    admin_addr: Option<SocketAddr>,
    webhook: Option<ConversionWebhook>,
    sync: Option<RunningSync>,
    leading: JoinHandle<()>,
}

impl RunningHub {
    /// Where `/metrics`, `/healthz` and `/readyz` are served (the port chosen for port 0).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Where the conversion webhook listens.
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.webhook.as_ref().map(ConversionWebhook::addr)
    }

    /// Waits until everything has stopped (after the shutdown token was cancelled): the loops
    /// and the reconciler, then the Lease released, the webhook and the sync controller.
    pub async fn stopped(self) {
        if let Err(err) = self.leading.await {
            warn!(%err, "the hub loops ended abnormally");
        }
        if let Some(webhook) = self.webhook {
            webhook.stopped().await;
        }
        if let Some(sync) = self.sync {
            sync.stopped().await;
        }
    }
}

/// Starts the hub process: serves the admin endpoint and the webhook, starts the sync
/// controller, and joins the election (or leads at once), until `shutdown` is cancelled.
pub async fn start(
    config: HubProcessConfig,
    shutdown: CancellationToken,
) -> Result<RunningHub, HubProcessError> {
    let metrics = HubMetrics::default();
    let readiness = LeaderReadiness::new("starting the hub loops");
    let admin_addr = admin::serve_component(
        config.admin_addr,
        readiness.clone(),
        metrics.registry(),
        shutdown.clone(),
    )
    .await?;
    let webhook = match config.webhook.clone() {
        Some(webhook) => Some(conversion_webhook::serve(webhook, shutdown.clone()).await?),
        None => None,
    };
    let sync = match config.sync.clone() {
        Some(sync) => Some(crate::sync::start(sync, shutdown.clone()).await?),
        None => None,
    };
    let leading = tokio::spawn(lead(config, metrics, readiness, shutdown));
    Ok(RunningHub {
        admin_addr,
        webhook,
        sync,
        leading,
    })
}

/// Runs the hub loops and the reconciler for each term this process leads.
async fn lead(
    config: HubProcessConfig,
    metrics: HubMetrics,
    readiness: Arc<LeaderReadiness>,
    shutdown: CancellationToken,
) {
    let standing = |leads: bool| {
        metrics.set_leader(leads);
        readiness.set_leader(leads);
    };
    let term = |stop: CancellationToken| {
        let loops = HubConfig {
            client: config.client.clone(),
            access: config.access.clone(),
            metrics: metrics.clone(),
            accept_check: config.accept_check,
        };
        let reconciler = ReconcilerConfig {
            client: config.client.clone(),
            access: config.access.clone(),
            known_endpoint: config.known_endpoint.clone(),
            metrics: metrics.reconciler(),
        };
        let readiness = readiness.clone();
        // One watch and cache of each kind both read, for the reconciler and the hub loops,
        // each share taken before any is polled (a share taken later would miss the first
        // list).
        let (reconciler_watches, loop_watches) = super::cache::with_reconciler(&config.client);
        async move {
            let reconciling = tokio::spawn(crate::reconciler::run::run_sharing(
                reconciler,
                reconciler_watches,
                stop.clone(),
            ));
            let loops = super::run::start_sharing(loops, loop_watches, stop).await;
            readiness.work_done();
            loops.stopped().await;
            if let Err(err) = reconciling.await {
                warn!(%err, "the lifecycle reconciler ended abnormally");
            }
        }
    };
    match &config.election {
        Some(election) => {
            leader::lead(config.client.clone(), election, &shutdown, standing, term).await
        }
        None => {
            standing(true);
            term(shutdown.clone()).await;
            standing(false);
        }
    }
}
