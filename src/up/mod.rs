//! `fleetform up`: a whole fleet on one machine.
//!
//! Starts an embedded control plane for every hub and spoke whose kubeconfig is `embedded`
//! (state under the data dir, so a restart resumes; each keeps its port), writes a kubeconfig per
//! cluster, installs fleetform on each hub (day 0), points a FleetSync at the source, and runs on
//! each hub its hub process ([`crate::hub::process`]: the sync controller, the hub loops and the
//! lifecycle reconciler, leading at once), on every cluster a
//! [`kubelet`] for agent Deployments, and an [`addons`] deployer that runs a minimal agent per
//! enabled addon. From there the fleet converges on its own, and a new commit is picked up
//! within the sync interval. A commit declaring a new embedded spoke gets its cluster started
//! before the sync writes its Spoke (the sync's [`Prepare`](crate::sync::Prepare) hook), so no
//! loop finds a Spoke whose cluster is not running; a Spoke that is gone (unjoined, deleted)
//! has its cluster stopped and its directory deleted. [`ClusterChange`]s tell the console. With
//! a dashboard address it also serves the [dashboard](crate::dashboard) of every hub.
//!
//! **Private state.** The data dir and every directory `up` makes in it (`hubs`, `spokes`, one
//! per cluster) are created 0700, kubeconfigs 0600, as the control plane keeps its own state.
//! A directory there that group or others may read (as fleetform before this made them) is
//! refused before anything starts, with the one `chmod` that fixes them all.

pub mod addons;
pub mod kubelet;
pub mod signers;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, ResourceExt};

use fleetform_controlplane::{Identities, RunningControlPlane};
use kube::Client;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::access::{Access, ClusterRole, embedded_dir, embedded_kubeconfig};
use crate::agent::{AgentLoops, HubConnection};
use crate::api::FleetSync;
use crate::api::fleet::{SYSTEM_NAMESPACE, Spoke};
use crate::fleet::Fleet;
use crate::hub::process::HubProcessConfig;
use crate::reconciler::install::KnownEndpoint;
use crate::runtime::watch::BackingOff;

/// What `up` runs.
#[derive(Clone, Debug)]
pub struct UpConfig {
    /// Where the fleet's embedded clusters keep their state and kubeconfigs.
    pub data_dir: PathBuf,
    /// The FleetSync each hub follows: repo (a path or URL), ref and path inside it.
    pub repo: String,
    pub git_ref: String,
    pub path: Option<String>,
    /// How often each hub's sync fetches the repo.
    pub interval: Duration,
    /// How often each addon's agent renews its lease, and the `leaseDurationSeconds` it writes
    /// there (OCM's addon lease updater: 60 s).
    pub addon_lease_duration: Duration,
    /// Where to serve the dashboard (port 0: any free port; another free port when it is
    /// taken); `None`: not served.
    pub dashboard_addr: Option<std::net::SocketAddr>,
    /// Spoke clusters keep their state in memory only, so a restart starts them empty; by
    /// default it is durable under `data_dir`. For benchmarks of thousands of spokes, where a
    /// SQLite database and writer thread per spoke would not fit one machine.
    pub spokes_in_memory: bool,
    /// Which loops each agent the kubelet stand-in starts runs.
    pub agent_loops: AgentLoops,
    /// The runtime the hubs run on: their control planes (which also handle the in-process
    /// requests of every agent), the hub process, sync, the addon deployer and the dashboard.
    /// `None`: the runtime `start` is called on. A benchmark gives the hubs a runtime of their
    /// own to measure them apart from the spokes.
    pub hub_runtime: Option<tokio::runtime::Handle>,
}

impl UpConfig {
    /// Following `repo`'s HEAD every 5 s, with state under `data_dir` and addon leases renewed
    /// every 60 s.
    pub fn new(data_dir: impl Into<PathBuf>, repo: impl Into<String>) -> Self {
        UpConfig {
            data_dir: data_dir.into(),
            repo: repo.into(),
            git_ref: "HEAD".to_string(),
            path: None,
            interval: Duration::from_secs(5),
            addon_lease_duration: crate::agent::addon_health::ADDON_LEASE_DURATION,
            dashboard_addr: None,
            spokes_in_memory: false,
            agent_loops: AgentLoops::All,
            hub_runtime: None,
        }
    }
}

/// Why `up` could not start.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    #[error("{cluster}: cannot start its embedded control plane: {message}")]
    Start { cluster: String, message: String },
    #[error("{cluster}: {message}")]
    Setup { cluster: String, message: String },
    #[error("cannot {action} {}: {source}", path.display())]
    DataDir {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "refusing to start: {} readable by group or others ({}); nothing was started, run `chmod 700 {}`",
        if .0.len() == 1 { "a directory of the data dir is" } else { "directories of the data dir are" },
        .0.iter().map(|(path, mode)| format!("{} mode {mode:o}", path.display())).collect::<Vec<_>>().join(", "),
        .0.iter().map(|(path, _)| path.display().to_string()).collect::<Vec<_>>().join(" ")
    )]
    Exposed(Vec<(PathBuf, u32)>),
    #[error(transparent)]
    Dashboard(#[from] crate::dashboard::DashboardError),
}

/// One embedded cluster of the fleet.
pub struct EmbeddedCluster {
    pub role: ClusterRole,
    pub name: String,
    pub kubeconfig: PathBuf,
    /// An administrator of the cluster: what a person running `up` is.
    pub client: Client,
    plane: RunningControlPlane,
    /// Clients of this process reach the plane without a socket while it is here.
    _local: crate::transport::ServedLocally,
}

impl EmbeddedCluster {
    /// The URL its API server serves on.
    pub fn url(&self) -> String {
        self.plane.url()
    }

    /// The requests its API server has answered, by verb and resource.
    pub fn request_counts(&self) -> fleetform_controlplane::requests::RequestCounts {
        self.plane.request_counts()
    }

    /// A client authenticated as the ServiceAccount `namespace`/`name` of this cluster, with the
    /// rights RBAC gives that ServiceAccount and no more (an administrator's client when the
    /// cluster serves plain HTTP, where everyone is one).
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Client, String> {
        self.reach().service_account_client(namespace, name).await
    }

    fn reach(&self) -> ClusterReach {
        ClusterReach {
            admin: self.client.clone(),
            identities: self.plane.identities(),
        }
    }

    /// Stops its control plane once its clients are dropped.
    async fn stop(self) {
        let EmbeddedCluster {
            name,
            client,
            plane,
            ..
        } = self;
        // A server shuts down gracefully once its clients' connections close.
        drop(client);
        if tokio::time::timeout(PLANE_SHUTDOWN, plane.shutdown())
            .await
            .is_err()
        {
            warn!(
                cluster = name,
                "did not stop within {PLANE_SHUTDOWN:?}; its state is durable, leaving it"
            );
        }
    }
}

/// What reaches one running embedded cluster: its administrator, and the identities it issues
/// to run a component as itself.
#[derive(Clone)]
pub struct ClusterReach {
    pub admin: Client,
    identities: Option<Identities>,
}

impl ClusterReach {
    /// A client of the ServiceAccount `namespace`/`name` (see
    /// [`EmbeddedCluster::service_account_client`]).
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Client, String> {
        service_account_client(self.identities.as_ref(), &self.admin, namespace, name).await
    }
}

/// A client of the cluster `identities` issue for, authenticated as the ServiceAccount
/// `namespace`/`name`; `admin` when the cluster has no identities to issue (plain HTTP).
pub async fn service_account_client(
    identities: Option<&Identities>,
    admin: &Client,
    namespace: &str,
    name: &str,
) -> Result<Client, String> {
    let Some(identities) = identities else {
        return Ok(admin.clone());
    };
    let kubeconfig = identities
        .service_account_kubeconfig(namespace, name)
        .map_err(|err| {
            format!("cannot issue the identity of ServiceAccount {namespace}/{name}: {err}")
        })?;
    crate::transport::client_from_kubeconfig(&kubeconfig).await
}

/// What happened to a spoke's cluster while `up` runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterChange {
    /// A commit declared the embedded spoke: its cluster started.
    Started {
        spoke: String,
        url: String,
        kubeconfig: PathBuf,
    },
    /// The spoke is gone: its cluster stopped and its directory was deleted, unless `error` says
    /// why it could not be.
    Removed {
        spoke: String,
        dir: PathBuf,
        error: Option<String>,
    },
}

/// The spokes' embedded clusters, each with its kubelet: those the fleet declared at start, and
/// those later commits add, until their Spoke is gone.
pub(crate) struct SpokeClusters {
    data_dir: PathBuf,
    in_memory: bool,
    agent_loops: AgentLoops,
    /// Where the clusters and their kubelets run: the runtime `up` was started on, also when a
    /// hub's sync (on the hubs' runtime) starts one.
    runtime: tokio::runtime::Handle,
    running: Mutex<BTreeMap<String, SpokeCluster>>,
    /// One start or removal at a time: a name is never started while it is being removed.
    changing: tokio::sync::Mutex<()>,
    changes: broadcast::Sender<ClusterChange>,
    /// Spokes whose clusters [`Running::stop_spoke`] destroyed: never started again.
    destroyed: Mutex<std::collections::BTreeSet<String>>,
    shutdown: CancellationToken,
}

struct SpokeCluster {
    cluster: EmbeddedCluster,
    kubelet_stop: CancellationToken,
    kubelet: JoinHandle<()>,
}

/// How many cluster changes a slow listener may fall behind by.
const CHANGES_BUFFERED: usize = 256;

impl SpokeClusters {
    fn new(config: &UpConfig, shutdown: CancellationToken) -> Self {
        SpokeClusters {
            data_dir: config.data_dir.clone(),
            in_memory: config.spokes_in_memory,
            agent_loops: config.agent_loops,
            runtime: tokio::runtime::Handle::current(),
            running: Mutex::default(),
            changing: tokio::sync::Mutex::default(),
            changes: broadcast::channel(CHANGES_BUFFERED).0,
            destroyed: Mutex::default(),
            shutdown,
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SpokeCluster>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How to reach the spoke cluster `name`, if it runs.
    pub(crate) fn reach(&self, name: &str) -> Option<ClusterReach> {
        self.running().get(name).map(|spoke| spoke.cluster.reach())
    }

    /// Tells of every cluster started or removed from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<ClusterChange> {
        self.changes.subscribe()
    }

    /// Starts the cluster of the embedded spoke `name` and its kubelet, unless it runs.
    async fn ensure(&self, name: &str) -> Result<(), UpError> {
        if self.running().contains_key(name) {
            return Ok(());
        }
        let _changing = self.changing.lock().await;
        if self.running().contains_key(name)
            || self.shutdown.is_cancelled()
            || self.is_destroyed(name)
        {
            return Ok(());
        }
        let cluster = self.start(name).await?;
        let change = ClusterChange::Started {
            spoke: name.to_string(),
            url: cluster.url(),
            kubeconfig: cluster.kubeconfig.clone(),
        };
        self.run(cluster);
        let _ = self.changes.send(change);
        Ok(())
    }

    /// Starts the cluster of the spoke `name`.
    async fn start(&self, name: &str) -> Result<EmbeddedCluster, UpError> {
        let durable = !self.in_memory;
        start_cluster_on(
            &self.runtime,
            &self.data_dir,
            ClusterRole::Spoke,
            name,
            durable,
        )
        .await
    }

    /// Runs an already started cluster's kubelet and keeps it.
    fn run(&self, cluster: EmbeddedCluster) {
        let kubelet_stop = self.shutdown.child_token();
        let kubelet = self.runtime.spawn(kubelet::run(
            cluster.name.clone(),
            cluster.client.clone(),
            cluster.plane.identities(),
            HubConnection::BootstrapSecret,
            self.agent_loops,
            kubelet_stop.clone(),
        ));
        self.running().insert(
            cluster.name.clone(),
            SpokeCluster {
                cluster,
                kubelet_stop,
                kubelet,
            },
        );
    }

    /// Stops the cluster of the spoke `name` (gone from its hub) and deletes its directory.
    async fn remove(&self, name: &str) {
        let _changing = self.changing.lock().await;
        let Some(spoke) = self.running().remove(name) else {
            return;
        };
        spoke.stop().await;
        let dir = embedded_dir(&self.data_dir, ClusterRole::Spoke, name);
        let error = match std::fs::remove_dir_all(&dir) {
            Ok(()) => None,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => Some(err.to_string()),
        };
        match &error {
            None => {
                info!(spoke = name, dir = %dir.display(), "spoke gone: its cluster stopped and its directory deleted")
            }
            Some(err) => {
                warn!(spoke = name, dir = %dir.display(), %err, "spoke gone: its cluster stopped, but its directory could not be deleted")
            }
        }
        let _ = self.changes.send(ClusterChange::Removed {
            spoke: name.to_string(),
            dir,
            error,
        });
    }

    fn is_destroyed(&self, name: &str) -> bool {
        self.destroyed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(name)
    }

    /// Stops the cluster of the spoke `name` as if it were destroyed, and never starts it again
    /// (its state stays); `false` when it does not run.
    async fn destroy(&self, name: &str) -> bool {
        let _changing = self.changing.lock().await;
        let Some(spoke) = self.running().remove(name) else {
            return false;
        };
        self.destroyed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_string());
        spoke.stop().await;
        true
    }

    /// Stops every cluster (their state stays).
    async fn stop_all(&self) {
        let _changing = self.changing.lock().await;
        let spokes = std::mem::take(&mut *self.running());
        for spoke in spokes.into_values() {
            spoke.stop().await;
        }
    }
}

impl SpokeCluster {
    async fn stop(self) {
        self.kubelet_stop.cancel();
        let _ = self.kubelet.await;
        self.cluster.stop().await;
    }
}

/// A fleet running on this machine.
pub struct Running {
    pub hubs: Vec<EmbeddedCluster>,
    spokes: Arc<SpokeClusters>,
    shutdown: CancellationToken,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
    dashboard: Option<String>,
}

impl Running {
    /// The dashboard's URL, when it is served.
    pub fn dashboard_url(&self) -> Option<&str> {
        self.dashboard.as_deref()
    }

    /// Stops the spoke cluster `name` as if it were destroyed: its API server goes away with
    /// everything on it (its agent with it), and it is not started again. `false` when no such
    /// cluster runs.
    pub async fn stop_spoke(&self, name: &str) -> bool {
        self.spokes.destroy(name).await
    }

    /// The name, URL and kubeconfig of every spoke cluster running now.
    pub fn spokes(&self) -> Vec<(String, String, PathBuf)> {
        self.spokes
            .running()
            .values()
            .map(|spoke| {
                let cluster = &spoke.cluster;
                (
                    cluster.name.clone(),
                    cluster.url(),
                    cluster.kubeconfig.clone(),
                )
            })
            .collect()
    }

    /// A client of the spoke cluster `name`, if it runs.
    pub fn spoke_client(&self, name: &str) -> Option<Client> {
        self.spokes.reach(name).map(|reach| reach.admin)
    }

    /// The requests the API server of the spoke cluster `name` has answered, if it runs.
    pub fn spoke_request_counts(
        &self,
        name: &str,
    ) -> Option<fleetform_controlplane::requests::RequestCounts> {
        self.spokes
            .running()
            .get(name)
            .map(|spoke| spoke.cluster.request_counts())
    }

    /// Tells of every spoke cluster started or removed from now on.
    pub fn cluster_changes(&self) -> broadcast::Receiver<ClusterChange> {
        self.spokes.subscribe()
    }

    /// Stops every loop, then every control plane.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        for (name, task) in self.tasks {
            tracing::debug!(task = name, "waiting for it to stop");
            let _ = task.await;
        }
        tracing::debug!("every loop stopped; stopping the clusters");
        self.spokes.stop_all().await;
        for hub in self.hubs {
            hub.stop().await;
        }
    }
}

/// How long a cluster may take to stop once its loops have.
const PLANE_SHUTDOWN: Duration = Duration::from_secs(5);

/// Name of the FleetSync `up` creates on each hub.
pub const FLEET_SYNC: &str = "fleet";

/// Starts the embedded clusters `fleet` declares and everything that runs on them.
pub async fn start(fleet: &Fleet, config: UpConfig) -> Result<Running, UpError> {
    prepare_data_dir(&config.data_dir)?;
    let shutdown = CancellationToken::new();
    let hub_runtime = config
        .hub_runtime
        .clone()
        .unwrap_or_else(tokio::runtime::Handle::current);
    let mut hubs = Vec::new();
    for (name, hub) in &fleet.hubs {
        if hub.spec.kubeconfig.embedded.is_some() {
            let data_dir = &config.data_dir;
            hubs.push(
                start_cluster_on(&hub_runtime, data_dir, ClusterRole::Hub, name, true).await?,
            );
        }
    }
    let spokes = Arc::new(SpokeClusters::new(&config, shutdown.clone()));
    for (name, spoke) in &fleet.spokes {
        if spoke.spec.kubeconfig.embedded.is_some() {
            spokes.run(spokes.start(name).await?);
        }
    }
    let access = Access {
        data_dir: config.data_dir.clone(),
        ..Access::default()
    };
    let mut tasks = Vec::new();
    for hub in &hubs {
        tasks.push((
            "kubelet",
            tokio::spawn(kubelet::run(
                hub.name.clone(),
                hub.client.clone(),
                hub.plane.identities(),
                HubConnection::BootstrapSecret,
                config.agent_loops,
                shutdown.child_token(),
            )),
        ));
    }
    for hub in &hubs {
        let setup = |message: String| UpError::Setup {
            cluster: format!("hub {}", hub.name),
            message,
        };
        crate::apply::install_hub(&hub.name, &hub.client)
            .await
            .map_err(|err| setup(err.to_string()))?;
        crate::deploy::install_hub_rbac(&hub.client)
            .await
            .map_err(|err| setup(err.to_string()))?;
        // Everything fleetform runs on the hub runs as its ServiceAccount, with the RBAC
        // deploy/ grants: what works here works on a real hub.
        let hub_identity = hub
            .service_account_client(
                crate::deploy::HUB_SERVICE_ACCOUNT_NAMESPACE,
                crate::deploy::HUB_SERVICE_ACCOUNT,
            )
            .await
            .map_err(setup)?;
        follow(&hub.client, &config)
            .await
            .map_err(|err| setup(format!("cannot write FleetSync {FLEET_SYNC}: {err}")))?;
        let known_endpoint = KnownEndpoint {
            server: Some(hub.url()),
            ca_pem: hub
                .plane
                .certificate_authority()
                .map(|ca| ca.cert_pem().to_string()),
        };
        let mut sync = crate::sync::SyncConfig::new(hub_identity.clone(), "fleetform-up");
        sync.hub = Some(hub.name.clone());
        sync.prepare = Some(start_declared_spokes(spokes.clone()));
        // One process on one machine: it leads at once, and nothing reaches a webhook or an
        // admin endpoint of it.
        let process = HubProcessConfig {
            client: hub_identity,
            access: access.clone(),
            known_endpoint,
            election: None,
            admin_addr: None,
            webhook: None,
            sync: Some(sync),
            // The hub is a control plane of this process, with fleetform's admission in it.
            accept_check: crate::hub::run::AcceptCheck::InProcess,
        };
        let running = hub_runtime
            .spawn(crate::hub::process::start(process, shutdown.child_token()))
            .await
            .map_err(|err| setup(err.to_string()))?
            .map_err(|err| setup(err.to_string()))?;
        tasks.push(("hub process", hub_runtime.spawn(running.stopped())));
        tasks.push((
            "spoke clusters",
            tokio::spawn(follow_spokes(
                hub.client.clone(),
                spokes.clone(),
                shutdown.child_token(),
            )),
        ));
        // The addon deployer plays OCM's addon manager, a component of the hub's own: it reads
        // ManagedClusterAddOns as the person running `up` does, and deploys each addon on its
        // spoke as that cluster's administrator, as OCM's work agent applies addon manifests.
        tasks.push((
            "addons",
            hub_runtime.spawn(addons::run(
                addons::Deployer {
                    hub: hub.client.clone(),
                    hub_cluster: hub.reach(),
                    spokes: spokes.clone(),
                    lease_duration: config.addon_lease_duration,
                },
                shutdown.clone(),
            )),
        ));
        // Custom addon signers' CAs, which an addon's operator provides on a real hub.
        tasks.push((
            "addon signers",
            hub_runtime.spawn(signers::run(hub.client.clone(), shutdown.clone())),
        ));
        info!(hub = hub.name, url = hub.url(), "hub running");
    }
    // The dashboard reads as the person running `up` does: every hub's objects, no Secret.
    let dashboard = match config.dashboard_addr {
        Some(addr) => {
            let dashboard = crate::dashboard::DashboardConfig {
                addr,
                hubs: hubs
                    .iter()
                    .map(|hub| (hub.name.clone(), hub.client.clone()))
                    .collect(),
                token_secret: None,
                any_port_if_taken: true,
            };
            let running = hub_runtime
                .spawn(crate::dashboard::start(dashboard, shutdown.child_token()))
                .await
                .map_err(|err| UpError::Setup {
                    cluster: "dashboard".to_string(),
                    message: err.to_string(),
                })??;
            let url = running.url();
            tasks.push(("dashboard", hub_runtime.spawn(running.stopped())));
            Some(url)
        }
        None => None,
    };
    Ok(Running {
        hubs,
        spokes,
        shutdown,
        tasks,
        dashboard,
    })
}

/// Creates the data dir and its `hubs` and `spokes` directories 0700, and refuses one of them,
/// or of the clusters' directories already there, that group or others may read: they hold
/// every cluster's state and an administrator's kubeconfig.
fn prepare_data_dir(data_dir: &Path) -> Result<(), UpError> {
    private_dir(data_dir)?;
    let mut exposed = Vec::new();
    let mut look_at = vec![data_dir.to_path_buf()];
    for role in [ClusterRole::Hub, ClusterRole::Spoke] {
        let parent = data_dir.join(format!("{}s", role.as_str()));
        private_dir(&parent)?;
        let entries = std::fs::read_dir(&parent).map_err(|source| UpError::DataDir {
            action: "read",
            path: parent.clone(),
            source,
        })?;
        look_at.push(parent);
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                look_at.push(entry.path());
            }
        }
    }
    for dir in look_at {
        let mode = std::fs::metadata(&dir)
            .map_err(|source| UpError::DataDir {
                action: "read",
                path: dir.clone(),
                source,
            })?
            .permissions()
            .mode()
            & 0o777;
        if mode & 0o077 != 0 {
            exposed.push((dir, mode));
        }
    }
    if exposed.is_empty() {
        Ok(())
    } else {
        Err(UpError::Exposed(exposed))
    }
}

/// Creates `dir` (and missing parents) 0700 if it does not exist; an existing one is left as it
/// is, for [`prepare_data_dir`] to judge.
fn private_dir(dir: &Path) -> Result<(), UpError> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| UpError::DataDir {
            action: "create",
            path: dir.to_path_buf(),
            source,
        })
}

/// Points the hub's FleetSync at the source `up` follows (server-side apply: a restart with
/// another source moves it).
async fn follow(hub: &Client, config: &UpConfig) -> Result<(), kube::Error> {
    let fleet_sync = serde_json::json!({
        "apiVersion": crate::api::fleet::API_VERSION,
        "kind": "FleetSync",
        "metadata": {"name": FLEET_SYNC, "namespace": SYSTEM_NAMESPACE},
        "spec": {
            "repo": config.repo,
            "ref": config.git_ref,
            "path": config.path,
            "intervalSeconds": config.interval.as_secs().clamp(1, i32::MAX as u64),
        },
    });
    Api::<FleetSync>::namespaced(hub.clone(), SYSTEM_NAMESPACE)
        .patch(
            FLEET_SYNC,
            &PatchParams::apply("fleetform-up").force(),
            &Patch::Apply(&fleet_sync),
        )
        .await
        .map(|_| ())
}

/// The sync's [`Prepare`](crate::sync::Prepare) hook: before a commit's objects are written to
/// a hub, the clusters of the embedded spokes it declares for that hub run.
fn start_declared_spokes(spokes: Arc<SpokeClusters>) -> crate::sync::Prepare {
    Arc::new(move |fleet: &Fleet, hub: &str| {
        let declared: Vec<String> = fleet
            .spokes
            .iter()
            .filter(|(_, spoke)| {
                spoke.spec.hub_ref == hub && spoke.spec.kubeconfig.embedded.is_some()
            })
            .map(|(name, _)| name.clone())
            .collect();
        let spokes = spokes.clone();
        async move {
            for name in declared {
                spokes.ensure(&name).await.map_err(|err| err.to_string())?;
            }
            Ok(())
        }
        .boxed()
    })
}

/// Keeps the spoke clusters in step with the hub's embedded Spokes: one written by other means
/// than `up`'s sync gets its cluster started, and one that is gone has its cluster stopped and
/// its directory deleted.
async fn follow_spokes(hub: Client, spokes: Arc<SpokeClusters>, shutdown: CancellationToken) {
    let api: Api<Spoke> = Api::namespaced(hub, SYSTEM_NAMESPACE);
    let mut events = watcher(api, watcher::Config::default())
        .backing_off()
        .boxed();
    // This hub's embedded spokes, and those of the listing in progress.
    let mut known: BTreeSet<String> = BTreeSet::new();
    let mut listed: BTreeSet<String> = BTreeSet::new();
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = events.next() => match event {
                None => return,
                Some(Ok(event)) => event,
                Some(Err(err)) => {
                    warn!(%err, "watching Spokes for embedded clusters");
                    continue;
                }
            },
        };
        match event {
            watcher::Event::Init => listed.clear(),
            watcher::Event::InitApply(spoke) | watcher::Event::Apply(spoke) => {
                if spoke.spec.kubeconfig.embedded.is_none() {
                    continue;
                }
                let name = spoke.name_any();
                listed.insert(name.clone());
                known.insert(name.clone());
                if spoke.metadata.deletion_timestamp.is_none()
                    && let Err(err) = spokes.ensure(&name).await
                {
                    warn!(%err, "cannot start the cluster of an embedded spoke");
                }
            }
            watcher::Event::InitDone => {
                // Spokes that went while the watch was down.
                for name in known.difference(&listed).cloned().collect::<Vec<_>>() {
                    known.remove(&name);
                    spokes.remove(&name).await;
                }
            }
            watcher::Event::Delete(spoke) => {
                let name = spoke.name_any();
                if known.remove(&name) {
                    spokes.remove(&name).await;
                }
            }
        }
    }
}

/// [`start_cluster`] on `runtime`, which its control plane then serves from.
async fn start_cluster_on(
    runtime: &tokio::runtime::Handle,
    data_dir: &Path,
    role: ClusterRole,
    name: &str,
    durable: bool,
) -> Result<EmbeddedCluster, UpError> {
    let (data_dir, owned) = (data_dir.to_path_buf(), name.to_string());
    runtime
        .spawn(async move { start_cluster(&data_dir, role, &owned, durable).await })
        .await
        .map_err(|err| UpError::Start {
            cluster: format!("{} {name}", role.as_str()),
            message: err.to_string(),
        })?
}

/// How many events a spoke cluster's own controllers may fall behind by: a spoke sees a few
/// writes a minute, and thousands of spokes each holding the default (2 MiB) would not fit.
const SPOKE_CONTROLLER_BACKLOG: usize = 1024;

/// Starts (or resumes) the embedded cluster `name`: its kubeconfig (and, when `durable`, its
/// state) lives in its own directory under the data dir (0700), and it keeps the port it was
/// first given, so kubeconfigs that point at it — agents' included — stay valid across restarts.
async fn start_cluster(
    data_dir: &Path,
    role: ClusterRole,
    name: &str,
    durable: bool,
) -> Result<EmbeddedCluster, UpError> {
    let cluster = format!("{} {name}", role.as_str());
    let failed = |message: String| UpError::Start {
        cluster: cluster.clone(),
        message,
    };
    let dir = embedded_dir(data_dir, role, name);
    private_dir(&dir)?;
    let port_file = dir.join("port");
    let port: u16 = match std::fs::read_to_string(&port_file) {
        Ok(text) => text.trim().parse().map_err(|_| {
            failed(format!(
                "{} does not hold a port number: {:?}",
                port_file.display(),
                text.trim()
            ))
        })?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => 0,
        Err(err) => {
            return Err(failed(format!(
                "cannot read {}: {err}",
                port_file.display()
            )));
        }
    };
    // up's kubelet stand-in (kubelet.rs) rolls and runs the agent Deployments, as the
    // deployment controller and kubelet would: the control plane runs neither.
    let mut builder = crate::embedded::builder()
        .data_dir(durable.then(|| dir.join("state")))
        .without_workload_controllers();
    if role == ClusterRole::Spoke {
        builder = builder.controller_backlog(SPOKE_CONTROLLER_BACKLOG);
    }
    let plane = builder
        .listen(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .start()
        .await
        .map_err(|err| {
            failed(if port == 0 {
                err.to_string()
            } else {
                format!(
                    "{err} (it keeps port {port}, recorded in {})",
                    port_file.display()
                )
            })
        })?;
    if port == 0 {
        crate::access::write_private(&port_file, &plane.addr().port().to_string())
            .map_err(|err| failed(format!("cannot write {}: {err}", port_file.display())))?;
    }
    let local = crate::transport::serve_locally(&plane);
    let kubeconfig_path = embedded_kubeconfig(data_dir, role, name);
    let kubeconfig = plane.kubeconfig();
    crate::access::write_private(&kubeconfig_path, &kubeconfig)
        .map_err(|err| failed(format!("cannot write {}: {err}", kubeconfig_path.display())))?;
    let client = crate::transport::client_from_kubeconfig(&kubeconfig)
        .await
        .map_err(failed)?;
    info!(cluster, url = plane.url(), kubeconfig = %kubeconfig_path.display(), "embedded cluster started");
    Ok(EmbeddedCluster {
        role,
        name: name.to_string(),
        kubeconfig: kubeconfig_path,
        client,
        plane,
        _local: local,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_new_data_dir_and_its_cluster_directories_are_owner_only() {
        let home = tempfile::tempdir().unwrap();
        let data_dir = home.path().join("share/fleetform");
        prepare_data_dir(&data_dir).unwrap();
        for dir in [&data_dir, &data_dir.join("hubs"), &data_dir.join("spokes")] {
            assert_eq!(mode(dir), 0o700, "{}", dir.display());
        }
        let cluster = embedded_dir(&data_dir, ClusterRole::Spoke, "dev");
        private_dir(&cluster).unwrap();
        assert_eq!(mode(&cluster), 0o700);
        prepare_data_dir(&data_dir).expect("an owner-only data dir is taken as it is");
    }

    #[test]
    fn a_data_dir_group_or_others_may_read_is_refused_with_one_chmod_for_all() {
        // As fleetform up left it before it made its directories owner-only.
        let home = tempfile::tempdir().unwrap();
        let data_dir = home.path().join("fleetform");
        let hub = embedded_dir(&data_dir, ClusterRole::Hub, "hub");
        std::fs::create_dir_all(&hub).unwrap();
        std::fs::create_dir_all(data_dir.join("spokes")).unwrap();
        for dir in [&data_dir, &data_dir.join("hubs"), &hub] {
            set_mode(dir, 0o755);
        }
        set_mode(&data_dir.join("spokes"), 0o700);
        let err = prepare_data_dir(&data_dir).unwrap_err().to_string();
        let (d, hubs, hub) = (
            data_dir.display(),
            data_dir.join("hubs").display().to_string(),
            hub.display(),
        );
        assert_eq!(
            err,
            format!(
                "refusing to start: directories of the data dir are readable by group or others ({d} mode 755, {hubs} mode 755, {hub} mode 755); nothing was started, run `chmod 700 {d} {hubs} {hub}`"
            )
        );
        assert_eq!(mode(&data_dir), 0o755, "left as it was");
    }
}
