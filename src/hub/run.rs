//! The hub's live loops (DESIGN §4.1–§4.3, §4.5): [`start`] applies the bootstrap RBAC and starts
//! the accept loop, the lease expiry loop, the registration and addon CSR loops, the addon
//! registrations loop and the poll-mode observer loop, and stops them on shutdown.
//!
//! The loops own the watches, timers and writes; every decision comes from the pure modules
//! ([`super::lease`], [`super::observer`]). A loop whose CRD is not installed is not started:
//! it says so and the others run.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::access::Access;
use crate::api::addon::ClusterManagementAddOn;
use crate::api::fleet::Spoke;
use crate::api::{ManagedCluster, ManagedClusterAddOn, ManagedClusterSet};
pub use crate::hub::acceptance::AcceptCheck;
use crate::hub::metrics::HubMetrics;
use crate::runtime::controller::ErrorPolicy;
use crate::runtime::crd;
use crate::runtime::error::{Failure, KubeError};

/// Field manager of every write the hub loops make.
pub const FIELD_MANAGER: &str = "fleetform-hub";

/// How long a loop waits before retrying a failed reconcile, at first.
pub(crate) const RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest a hub loop waits before retrying an object that keeps failing.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// What a hub loop without its CRD does.
const LOOP_NOT_STARTED: &str = "the hub loops that need it are not started";

/// What the hub loops run against.
#[derive(Clone)]
pub struct HubConfig {
    /// The hub.
    pub client: Client,
    /// How the observer reaches poll-mode spokes (their kubeconfig sources).
    pub access: Access,
    /// What the loops count ([`HubMetrics::default`]: into nothing).
    pub metrics: HubMetrics,
    /// What checks who may accept a cluster on this hub, so that a person's acceptance can be
    /// honoured ([`AcceptCheck`]).
    pub accept_check: AcceptCheck,
}

impl std::fmt::Debug for HubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubConfig")
            .field("access", &self.access)
            .field("accept_check", &self.accept_check)
            .finish_non_exhaustive()
    }
}

/// Why a hub loop failed to handle an object.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("cannot build {object}: {source}")]
    Build {
        object: String,
        #[source]
        source: serde_json::Error,
    },
}

impl Failure for HubError {
    fn kube(&self) -> Option<&KubeError> {
        match self {
            HubError::Kube(err) => Some(err),
            HubError::Build { .. } => None,
        }
    }
}

/// What every hub loop shares.
pub(crate) struct Context {
    pub client: Client,
    pub access: Access,
    pub metrics: HubMetrics,
    pub accept_check: AcceptCheck,
}

impl Context {
    /// The error policy of the hub loop `name` (see [`crate::runtime::controller`]), counting
    /// into the hub's metrics.
    pub(crate) fn error_policy(&self, name: &'static str) -> Arc<ErrorPolicy> {
        ErrorPolicy::counted(
            name,
            RETRY_DELAY,
            MAX_RETRY_DELAY,
            &self.metrics.controllers,
        )
    }
}

/// Runs the hub loops until `shutdown` is cancelled.
pub async fn run(config: HubConfig, shutdown: CancellationToken) {
    start(config, shutdown).await.stopped().await;
}

/// Hub loops that were started.
#[derive(Debug)]
pub struct RunningLoops {
    tasks: Vec<JoinHandle<()>>,
}

impl RunningLoops {
    /// Waits until every loop has stopped (after the shutdown token was cancelled).
    pub async fn stopped(self) {
        for task in self.tasks {
            if let Err(err) = task.await {
                warn!(%err, "hub loop ended abnormally");
            }
        }
        info!("hub loops stopped");
    }
}

/// Starts the hub loops whose CRDs are installed; they run until `shutdown` is cancelled.
pub async fn start(config: HubConfig, shutdown: CancellationToken) -> RunningLoops {
    // The hub loops alone: watches of their own.
    let watches = super::cache::LoopWatches::new(&config.client);
    start_sharing(config, watches, shutdown).await
}

/// [`start`], the loops reading and woken by the shares of `watches` (in a hub process, of the
/// reconciler's watches).
pub(crate) async fn start_sharing(
    config: HubConfig,
    watches: super::cache::LoopWatches,
    shutdown: CancellationToken,
) -> RunningLoops {
    let super::cache::LoopWatches {
        clusters: cluster_cache,
        addons: addon_cache,
        spokes: (approved_spokes, observed_spokes),
        documents: (signer_documents, registration_documents),
        hubs,
        identities,
    } = watches;
    let ctx = Arc::new(Context {
        client: config.client,
        access: config.access,
        metrics: config.metrics,
        accept_check: config.accept_check,
    });
    let mut tasks = vec![tokio::spawn(ensure_bootstrap_rbac(
        ctx.client.clone(),
        shutdown.clone(),
    ))];
    let clusters = crd::installed::<ManagedCluster>(&ctx.client, LOOP_NOT_STARTED).await;
    let spokes = crd::installed::<Spoke>(&ctx.client, LOOP_NOT_STARTED).await;
    if crd::installed::<ManagedClusterSet>(&ctx.client, "the default and global sets are not kept")
        .await
    {
        tasks.push(tokio::spawn(super::cluster_sets::ensure_built_in_sets(
            ctx.client.clone(),
            shutdown.clone(),
        )));
    }
    // Whether the expiry loop marks the addons of Unknown clusters Unknown, and whether the addon
    // loops run: decided before any share is handed out, so that a share of a watch goes to a
    // loop that polls it.
    let expiry_addons = clusters
        && crd::installed::<ManagedClusterAddOn>(
            &ctx.client,
            "the addons of Unknown clusters are not marked Unknown",
        )
        .await;
    let addon_kinds = crd::installed::<ClusterManagementAddOn>(
        &ctx.client,
        "addon CSRs are not approved or signed and addon registrations not written",
    )
    .await
        && crd::installed::<ManagedClusterAddOn>(
            &ctx.client,
            "addon CSRs are not approved or signed and addon registrations not written",
        )
        .await;
    // The ManagedClusterAddOns: the registrations loop reads them, the expiry loop is woken by
    // a cluster's; of those that run, the first polls the loops' share.
    let (registrations_addons, expiry_addons) = match (addon_kinds, expiry_addons) {
        (true, true) => {
            let (registrations, [expiry]) = addon_cache.copied();
            (Some(registrations), Some(expiry))
        }
        (true, false) => (Some(addon_cache), None),
        (false, true) => (None, Some(addon_cache)),
        (false, false) => (None, None),
    };
    // One cache of the Spokes for the loops that read them: the approval loop's watch keeps it
    // (both loops run where Spokes and ManagedClusters are served), the accept loop reads it.
    let spoke_cache = (clusters && spokes).then(|| super::cache::SpokeCache::from(approved_spokes));
    let cluster_cache = clusters.then_some(cluster_cache);
    if let Some(cluster_cache) = cluster_cache {
        let csrs = super::cache::registration_csrs(ctx.client.clone());
        let fleet = spoke_cache.as_ref().map(|cache| super::accept_loop::Fleet {
            spokes: cache.store.clone(),
            hubs,
        });
        tasks.push(tokio::spawn(super::accept_loop::run(
            ctx.clone(),
            cluster_cache.accept,
            csrs.accept,
            csrs.by_cluster.clone(),
            fleet,
            shutdown.clone(),
        )));
        tasks.push(tokio::spawn(super::expiry_loop::run(
            ctx.clone(),
            cluster_cache.expiry,
            expiry_addons,
            shutdown.clone(),
        )));
        if let Some(spoke_cache) = spoke_cache {
            tasks.push(tokio::spawn(super::approval_loop::run(
                ctx.clone(),
                cluster_cache.approval,
                csrs.approval,
                csrs.by_cluster,
                spoke_cache,
                identities,
                shutdown.clone(),
            )));
        }
    }
    if spokes {
        tasks.push(tokio::spawn(super::observer_loop::run(
            ctx.clone(),
            observed_spokes,
            shutdown.clone(),
        )));
    }
    if let Some(addon_cache) = registrations_addons {
        tasks.push(tokio::spawn(super::signer_loop::run(
            ctx.clone(),
            signer_documents,
            shutdown.clone(),
        )));
        tasks.push(tokio::spawn(super::registrations_loop::run(
            ctx.clone(),
            addon_cache,
            registration_documents,
            shutdown.clone(),
        )));
    }
    info!(loops = tasks.len(), "hub loops started");
    RunningLoops { tasks }
}

/// Applies the hub-wide bootstrap RBAC, retrying until it is in place or shutdown.
async fn ensure_bootstrap_rbac(client: Client, shutdown: CancellationToken) {
    loop {
        match super::bootstrap::ensure_rbac(&client).await {
            Ok(()) => return,
            Err(err) => {
                warn!(%err, "spokes cannot register with their bootstrap tokens yet; retrying")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(RETRY_DELAY) => {}
        }
    }
}
