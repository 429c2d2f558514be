//! The agent's live loops (DESIGN §4.1–§4.4): [`run`] registers the spoke's ManagedCluster,
//! follows it by watch, and runs the lease, status and addon loops until shutdown.
//!
//! An agent in a Deployment elects ([`AgentConfig::leader_elect`]): the Deployment rolls to a
//! new agent by starting it beside the one that runs and stopping that one once the new one is
//! ready (so an agent that never starts leaves the spoke its working one), and of the two only
//! the holder of the spoke's [`ELECTION_LEASE`] acts, so they never renew the cluster lease, or
//! write anything, together. Keeping the old agent was chosen over going back to it: nothing
//! would be left on the spoke to go back, and the spoke would be without an agent meanwhile.
//!
//! The loops own the watches, timers, probes and writes; every decision comes from the pure
//! modules ([`super::availability`], [`super::claims`], [`super::addon_health`]). Each loop
//! survives API errors by logging them and retrying; only shutdown ends it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument, warn};

use super::availability::DEFAULT_FAILURE_GRACE;
use super::hub_connection::{HubConnection, HubConnectionError};
use crate::api::ManagedCluster;
use crate::api::cluster::{ClientConfig, ManagedClusterSpec};
use crate::api::vocabulary::{AGENT_NAMESPACE, CONDITION_HUB_ACCEPTED};
use crate::reconciler::install::ELECTION_LEASE;
use crate::runtime::error::KubeError;
use crate::runtime::error::is_conflict;
use crate::runtime::leader::Election;
use crate::runtime::retry::Retry;
use crate::runtime::watch::backing_off;

/// Field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "fleetform-agent";

/// How long a loop waits before retrying after an API error.
pub(crate) const RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest a loop's step that keeps failing waits before it is tried again.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

/// What one agent is and where it runs.
#[derive(Clone)]
pub struct AgentConfig {
    /// The name the spoke registers under (its ManagedCluster and hub namespace).
    pub cluster_name: String,
    /// How the agent reaches its hub.
    pub hub: HubConnection,
    /// The spoke the agent runs on.
    pub spoke: Client,
    /// The agent's namespace on the spoke (where its Deployment runs).
    pub agent_namespace: String,
    /// The agent's own Deployment in `agent_namespace`, whose available replicas count towards
    /// Available; `None` for an agent running in-process without one.
    pub deployment: Option<String>,
    /// How long a failed probe must persist before Available turns False.
    pub failure_grace: Duration,
    /// The most cluster claims reported (`clusterClaimsMax`).
    pub cluster_claims_max: usize,
    /// The lease duration addon leases are judged with (OCM: 60 s; five of them are the grace).
    pub addon_lease_duration: Duration,
    /// API server URLs of the spoke, for `spec.managedClusterClientConfigs` of a new cluster.
    pub spoke_urls: Vec<String>,
    /// How long the client certificates the agent requests (its own and its addons') should live
    /// (`spec.expirationSeconds`, the Hub's `clientCertExpirationSeconds`); `None` leaves it to
    /// the signer.
    pub client_cert_expiration_seconds: Option<i32>,
    /// The agent version this agent runs, as it reports it: its pod's label, else its build.
    pub version: String,
    /// The configuration hash its pod was started for, if it has one.
    pub config_hash: Option<String>,
    /// Where it serves `/healthz` and `/readyz`, if anywhere.
    pub health_addr: Option<std::net::SocketAddr>,
    /// Which of its loops run.
    pub loops: AgentLoops,
    /// This agent's name among its spoke's agents (its pod's name): the holder it writes on the
    /// cluster lease it renews, and its name in the election below.
    pub identity: String,
    /// Run the loops only while holding the Lease [`ELECTION_LEASE`] in `agent_namespace` on
    /// the spoke: set where two agents of one spoke can run at once (a Deployment rolling from
    /// one agent to the next keeps the old one until the new one is ready), so that they never
    /// act, nor renew the cluster lease, together.
    pub leader_elect: bool,
}

/// How long [`ELECTION_LEASE`] holds without renewal. A holder that stops releases it and the
/// next agent, watching it, takes over at once; only an agent that vanished without releasing
/// it (its node lost) keeps the next one waiting this long.
pub const ELECTION_LEASE_DURATION: Duration = Duration::from_secs(60);

/// Which of the agent's loops run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AgentLoops {
    /// Every loop: registration, lease, status (claims, nodes), addons, day 2.
    #[default]
    All,
    /// Registration and the lease loop only: the cluster registers by CSR, joins and stays
    /// Available, and reports no claims, no addon health and does no day-2 work. What a benchmark
    /// runs when thousands of agents share one process with their hub.
    Registration,
    /// Registration, the lease loop and day 2 (reporting its version, upgrading itself,
    /// unjoining): a cluster joins, stays Available, follows its hub's agent rollout and
    /// leaves, and reports no claims or addon health. What a benchmark of agent upgrades runs.
    Lifecycle,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("cluster_name", &self.cluster_name)
            .field("hub", &self.hub)
            .field("agent_namespace", &self.agent_namespace)
            .field("deployment", &self.deployment)
            .field("failure_grace", &self.failure_grace)
            .field("cluster_claims_max", &self.cluster_claims_max)
            .field("addon_lease_duration", &self.addon_lease_duration)
            .field(
                "client_cert_expiration_seconds",
                &self.client_cert_expiration_seconds,
            )
            .field("version", &self.version)
            .field("config_hash", &self.config_hash)
            .field("health_addr", &self.health_addr)
            .field("loops", &self.loops)
            .field("identity", &self.identity)
            .field("leader_elect", &self.leader_elect)
            .finish_non_exhaustive()
    }
}

impl AgentConfig {
    /// An agent for `cluster_name` with OCM's defaults and no Deployment check.
    pub fn new(cluster_name: impl Into<String>, hub: HubConnection, spoke: Client) -> Self {
        AgentConfig {
            cluster_name: cluster_name.into(),
            hub,
            spoke,
            agent_namespace: AGENT_NAMESPACE.to_string(),
            deployment: None,
            failure_grace: DEFAULT_FAILURE_GRACE,
            cluster_claims_max: 20,
            addon_lease_duration: super::addon_health::ADDON_LEASE_DURATION,
            spoke_urls: Vec::new(),
            client_cert_expiration_seconds: None,
            version: crate::plan::desired::DEFAULT_AGENT_VERSION.to_string(),
            config_hash: None,
            health_addr: None,
            loops: AgentLoops::All,
            identity: crate::runtime::leader::default_identity(),
            leader_elect: false,
        }
    }
}

/// Why the agent could not start or a write failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    HubConnection(#[from] HubConnectionError),
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("cluster {cluster}: {message}")]
    Local { cluster: String, message: String },
}

/// A Warning Event the agent of `cluster` records in `namespace` about `involved` (named when
/// it is created: [`crate::events::create`]). An object of no namespace (the ManagedCluster, the
/// agent's Namespace) is referred to as in `namespace`: kube-apiserver keeps an Event about an
/// object of no namespace to `default` (or `kube-system`), where the agent may not write, and
/// refuses it elsewhere ("involvedObject.namespace: does not match event.namespace"); the
/// cluster's namespace stands for its ManagedCluster as in OCM.
pub(crate) fn warning_event(
    namespace: &str,
    mut involved: ObjectReference,
    reason: &str,
    message: String,
    cluster: &str,
) -> Event {
    let now = Time(Timestamp::now());
    involved
        .namespace
        .get_or_insert_with(|| namespace.to_string());
    Event {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        involved_object: involved,
        reason: Some(reason.to_string()),
        message: Some(message),
        type_: Some("Warning".to_string()),
        source: Some(EventSource {
            component: Some(FIELD_MANAGER.to_string()),
            host: None,
        }),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        reporting_component: Some(FIELD_MANAGER.to_string()),
        reporting_instance: Some(cluster.to_string()),
        ..Event::default()
    }
}

/// What every agent loop shares.
pub(crate) struct Context {
    pub config: AgentConfig,
    pub hub: Client,
    /// The kubeconfig `hub` was made from, when there is one: addon kubeconfigs reach the hub
    /// the way it does.
    pub hub_kubeconfig: Option<String>,
    pub spoke: Client,
    /// The spoke's ManagedCluster as last seen by watch (`None` before it is seen or once it
    /// is deleted).
    pub cluster: watch::Receiver<Option<ManagedCluster>>,
}

impl Context {
    pub fn name(&self) -> &str {
        &self.config.cluster_name
    }

    pub fn clusters(&self) -> Api<ManagedCluster> {
        Api::all(self.hub.clone())
    }

    /// Waits until the hub has accepted the cluster (HubAcceptedManagedCluster True): the hub
    /// grants the RBAC first, so from then on the agent may read its addons there. `false` when
    /// the agent stops first.
    pub async fn accepted(&self, shutdown: &CancellationToken) -> bool {
        let mut cluster = self.cluster.clone();
        let accepted = |cluster: &Option<ManagedCluster>| {
            cluster.as_ref().is_some_and(|cluster| {
                crate::api::is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED)
            })
        };
        tokio::select! {
            seen = cluster.wait_for(accepted) => seen.is_ok(),
            _ = shutdown.cancelled() => false,
        }
    }
}

/// Runs the agent until `shutdown` is cancelled. With hub credentials used as they are, fails
/// only if they cannot make a client at start; registering by certificate
/// ([`HubConnection::is_bootstrap`]) waits for the bootstrap kubeconfig and retries instead.
/// Later errors are logged and retried.
pub async fn run(config: AgentConfig, shutdown: CancellationToken) -> Result<(), AgentError> {
    let readiness = crate::health::Readiness::new("the agent has no hub connection yet");
    run_with(config, readiness, shutdown).await
}

/// [`run`], saying whether the agent is ready in `readiness` (what `/readyz` serves). An agent
/// that elects ([`AgentConfig::leader_elect`]) is ready once it takes part in the election,
/// leading or not: a Deployment rolling to it keeps the agent it replaces until then, and that
/// one hands the Lease over as it stops.
pub async fn run_with(
    config: AgentConfig,
    readiness: Arc<crate::health::Readiness>,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    if let Some(addr) = config.health_addr {
        crate::health::serve(addr, readiness.clone(), shutdown.clone())
            .await
            .map_err(|err| AgentError::Local {
                cluster: config.cluster_name.clone(),
                message: format!("cannot serve its health endpoint on {addr}: {err}"),
            })?;
    }
    if !config.leader_elect {
        return act(config, readiness, shutdown).await;
    }
    let election = Election {
        namespace: config.agent_namespace.clone(),
        lease_name: ELECTION_LEASE.to_string(),
        identity: config.identity.clone(),
        lease_duration: ELECTION_LEASE_DURATION,
    };
    let following = readiness.clone();
    // An agent that cannot start acting stops altogether (and gives the Lease up), rather than
    // starting a term again at once: whoever runs it restarts it, with a backoff.
    let failed: Arc<std::sync::Mutex<Option<AgentError>>> = Arc::default();
    let stop = shutdown.child_token();
    let (term_failed, term_stop) = (failed.clone(), stop.clone());
    crate::runtime::leader::lead(
        config.spoke.clone(),
        &election,
        &stop,
        move |leads| {
            if !leads {
                following.set_ready();
            }
        },
        move |term| {
            let (config, readiness) = (config.clone(), readiness.clone());
            let (failed, stop) = (term_failed.clone(), term_stop.clone());
            async move {
                if let Err(err) = act(config, readiness, term).await {
                    *failed
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(err);
                    stop.cancel();
                }
            }
        },
    )
    .await;
    let failed = failed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    failed.map_or(Ok(()), Err)
}

/// What the agent does while it acts: registers (or uses its hub credentials) and runs its
/// loops until `shutdown`.
async fn act(
    config: AgentConfig,
    readiness: Arc<crate::health::Readiness>,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    if config.hub.is_bootstrap() {
        super::registration::run(config, readiness, shutdown).await;
        return Ok(());
    }
    let hub = config.hub.client().await?;
    let hub_kubeconfig = config.hub.kubeconfig_text();
    readiness.set_ready();
    run_loops(config, hub, hub_kubeconfig, shutdown).await;
    Ok(())
}

/// Runs the agent's loops against `hub` (made from `hub_kubeconfig`, when there is one) until
/// `shutdown` is cancelled, and waits for them to end.
pub(crate) async fn run_loops(
    config: AgentConfig,
    hub: Client,
    hub_kubeconfig: Option<String>,
    shutdown: CancellationToken,
) {
    let spoke = config.spoke.clone();
    let (cluster_tx, cluster_rx) = watch::channel(None);
    let ctx = Arc::new(Context {
        config,
        hub,
        hub_kubeconfig,
        spoke,
        cluster: cluster_rx,
    });
    info!(cluster = ctx.name(), "agent loops starting");
    let mut tasks = vec![
        tokio::spawn(follow_cluster(ctx.clone(), cluster_tx, shutdown.clone())),
        tokio::spawn(super::lease_loop::run(ctx.clone(), shutdown.clone())),
    ];
    if ctx.config.loops != AgentLoops::Registration {
        tasks.push(tokio::spawn(super::day2::run(
            ctx.clone(),
            shutdown.clone(),
        )));
    }
    if ctx.config.loops == AgentLoops::All {
        tasks.extend([
            tokio::spawn(super::status_loop::run(ctx.clone(), shutdown.clone())),
            tokio::spawn(super::addon_loop::run(ctx.clone(), shutdown.clone())),
            tokio::spawn(super::addon_registration::run(
                ctx.clone(),
                shutdown.clone(),
            )),
        ]);
    }
    shutdown.cancelled().await;
    for task in tasks {
        if let Err(err) = task.await {
            warn!(%err, "agent task ended abnormally");
        }
    }
    info!(cluster = ctx.name(), "agent loops stopped");
}

/// Registers the ManagedCluster, keeps it registered and publishes every version of it to the
/// other loops (the lease loop sets ManagedClusterJoined once the hub has accepted it).
async fn follow_cluster(
    ctx: Arc<Context>,
    cluster_tx: watch::Sender<Option<ManagedCluster>>,
    shutdown: CancellationToken,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={}", ctx.name()));
    let mut events = backing_off(watcher(ctx.clusters(), config)).boxed();
    // Whether the listing in progress (after a (re)connect) found the cluster.
    let mut listed = false;
    // The watch backs off by itself; its failures are said once.
    let mut watching = Retry::new(
        "watching the ManagedCluster",
        ctx.name(),
        RETRY_DELAY,
        MAX_RETRY_DELAY,
    );
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        let cluster = match event {
            None => return,
            Some(Err(err)) => {
                watching.failed(&err);
                continue;
            }
            Some(Ok(watcher::Event::Init)) => {
                listed = false;
                continue;
            }
            Some(Ok(watcher::Event::InitApply(cluster))) => {
                listed = true;
                Some(cluster)
            }
            Some(Ok(watcher::Event::Apply(cluster))) => Some(cluster),
            Some(Ok(watcher::Event::Delete(_))) => None,
            Some(Ok(watcher::Event::InitDone)) if listed => continue,
            Some(Ok(watcher::Event::InitDone)) => None,
        };
        watching.succeeded();
        if cluster.is_none() {
            // Created again, unless this agent may not (its cluster was deleted on the hub,
            // and its rights with it): then it asks ever more rarely, saying so once.
            let mut registering = Retry::new(
                "creating the ManagedCluster",
                ctx.name(),
                RETRY_DELAY,
                MAX_RETRY_DELAY,
            );
            while let Err(err) = register(&ctx).await {
                let wait = registering.failed(&err);
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
            registering.succeeded();
        }
        cluster_tx.send_replace(cluster);
    }
}

/// Creates the ManagedCluster if it does not exist. The agent never sets `hubAcceptsClient`:
/// accepting is the hub's decision.
#[instrument(skip(ctx), fields(cluster = ctx.name()))]
async fn register(ctx: &Context) -> Result<(), AgentError> {
    create_cluster(&ctx.clusters(), &ctx.config).await
}

/// Creates the agent's ManagedCluster through `clusters` unless it exists.
pub(crate) async fn create_cluster(
    clusters: &Api<ManagedCluster>,
    config: &AgentConfig,
) -> Result<(), AgentError> {
    let cluster = ManagedCluster::new(
        &config.cluster_name,
        ManagedClusterSpec {
            managed_cluster_client_configs: config
                .spoke_urls
                .iter()
                .map(|url| ClientConfig {
                    url: url.clone(),
                    ca_bundle: None,
                })
                .collect(),
            ..ManagedClusterSpec::default()
        },
    );
    let params = kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    };
    match clusters.create(&params, &cluster).await {
        Ok(_) => {
            info!(
                cluster = config.cluster_name,
                "ManagedCluster created; waiting for the hub to accept it"
            );
            Ok(())
        }
        Err(err) if is_conflict(&err) => Ok(()),
        Err(err) => Err(KubeError::on(
            format!("cluster {}", &config.cluster_name),
            "create its ManagedCluster",
        )(err)
        .into()),
    }
}
