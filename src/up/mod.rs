//! `fleetform up`: a whole fleet on one machine.
//!
//! Starts an embedded control plane for every hub and spoke whose kubeconfig is `embedded`
//! (state under the data dir, so a restart resumes; each keeps its port), writes a kubeconfig per
//! cluster, installs fleetform on each hub (day 0), points a FleetSync at the source, and runs on
//! each hub the sync controller, the hub loops and the lifecycle reconciler, and on every cluster
//! a [`kubelet`] for agent Deployments. From there the fleet converges on its own, and a new
//! commit is picked up within the sync interval — a commit declaring a new embedded spoke gets
//! its cluster started too.

pub mod kubelet;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, ResourceExt};

use fleetform_controlplane::RunningControlPlane;
use kube::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::access::{Access, ClusterRole, embedded_dir, embedded_kubeconfig};
use crate::agent::HubConnection;
use crate::api::FleetSync;
use crate::api::fleet::{SYSTEM_NAMESPACE, Spoke};
use crate::fleet::Fleet;
use crate::reconciler::install::KnownEndpoint;

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
}

/// Why `up` could not start.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    #[error("{cluster}: cannot start its embedded control plane: {message}")]
    Start { cluster: String, message: String },
    #[error("{cluster}: {message}")]
    Setup { cluster: String, message: String },
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
    /// Stops what runs on the cluster (its kubelet, so its pods).
    stop: CancellationToken,
}

impl EmbeddedCluster {
    /// The URL its API server serves on.
    pub fn url(&self) -> String {
        self.plane.url()
    }

    /// A client authenticated as the ServiceAccount `namespace`/`name` of this cluster, with the
    /// rights RBAC gives that ServiceAccount and no more (an administrator's client when the
    /// cluster serves plain HTTP, where everyone is one).
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Client, String> {
        service_account_client(
            self.plane.identities().as_ref(),
            &self.client,
            namespace,
            name,
        )
        .await
    }
}

/// A client of the cluster `identities` issue for, authenticated as the ServiceAccount
/// `namespace`/`name`; `admin` when the cluster has no identities to issue (plain HTTP).
pub async fn service_account_client(
    identities: Option<&fleetform_controlplane::Identities>,
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

/// A fleet running on this machine.
pub struct Running {
    pub hubs: Vec<EmbeddedCluster>,
    /// The spokes' clusters: those the fleet declared at start, and those later commits add.
    spokes: Arc<Mutex<Vec<EmbeddedCluster>>>,
    /// Spokes whose clusters [`Running::stop_spoke`] destroyed: never started again.
    destroyed: Arc<Mutex<Vec<String>>>,
    shutdown: CancellationToken,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl Running {
    /// The name, URL and kubeconfig of every spoke cluster running now.
    pub fn spokes(&self) -> Vec<(String, String, PathBuf)> {
        lock(&self.spokes)
            .iter()
            .map(|spoke| (spoke.name.clone(), spoke.url(), spoke.kubeconfig.clone()))
            .collect()
    }

    /// A client of the spoke cluster `name`, if it runs.
    pub fn spoke_client(&self, name: &str) -> Option<Client> {
        lock(&self.spokes)
            .iter()
            .find(|spoke| spoke.name == name)
            .map(|spoke| spoke.client.clone())
    }

    /// Stops the spoke cluster `name` as if it were destroyed: its API server goes away with
    /// everything on it (its agent stops answering for it). `false` when no such cluster runs.
    pub async fn stop_spoke(&self, name: &str) -> bool {
        let cluster = {
            let mut spokes = lock(&self.spokes);
            let Some(index) = spokes.iter().position(|spoke| spoke.name == name) else {
                return false;
            };
            spokes.remove(index)
        };
        lock(&self.destroyed).push(name.to_string());
        cluster.stop.cancel();
        drop(cluster.client);
        cluster.plane.shutdown().await;
        true
    }

    /// Stops every loop, then every control plane.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        for (name, task) in self.tasks {
            tracing::debug!(task = name, "waiting for it to stop");
            let _ = task.await;
        }
        tracing::debug!("every loop stopped; stopping the clusters");
        let spokes = std::mem::take(&mut *lock(&self.spokes));
        for EmbeddedCluster {
            name,
            client,
            plane,
            ..
        } in self.hubs.into_iter().chain(spokes)
        {
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
}

fn lock<T>(shared: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long a cluster may take to stop once its loops have.
const PLANE_SHUTDOWN: Duration = Duration::from_secs(5);

/// Name of the FleetSync `up` creates on each hub.
pub const FLEET_SYNC: &str = "fleet";

/// Starts the embedded clusters `fleet` declares and everything that runs on them.
pub async fn start(fleet: &Fleet, config: UpConfig) -> Result<Running, UpError> {
    let shutdown = CancellationToken::new();
    let mut hubs = Vec::new();
    for (name, hub) in &fleet.hubs {
        if hub.spec.kubeconfig.embedded.is_some() {
            hubs.push(start_cluster(&config.data_dir, ClusterRole::Hub, name, &shutdown).await?);
        }
    }
    let mut spokes = Vec::new();
    for (name, spoke) in &fleet.spokes {
        if spoke.spec.kubeconfig.embedded.is_some() {
            spokes
                .push(start_cluster(&config.data_dir, ClusterRole::Spoke, name, &shutdown).await?);
        }
    }
    let access = Access {
        data_dir: config.data_dir.clone(),
        ..Access::default()
    };
    let mut tasks = Vec::new();
    for cluster in hubs.iter().chain(&spokes) {
        tasks.push((
            "kubelet",
            tokio::spawn(kubelet::run(
                cluster.name.clone(),
                cluster.client.clone(),
                cluster.plane.identities(),
                HubConnection::BootstrapSecret,
                cluster.stop.clone(),
            )),
        ));
    }
    let spokes = Arc::new(Mutex::new(spokes));
    let destroyed = Arc::new(Mutex::new(Vec::new()));
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
        let reconciler = crate::reconciler::ReconcilerConfig {
            client: hub_identity.clone(),
            access: access.clone(),
            known_endpoint,
        };
        tasks.push((
            "reconciler",
            tokio::spawn(crate::reconciler::run(reconciler, shutdown.child_token())),
        ));
        let loops = crate::hub::run::HubConfig {
            client: hub_identity.clone(),
            access: access.clone(),
        };
        tasks.push((
            "hub loops",
            tokio::spawn(crate::hub::run(loops, shutdown.child_token())),
        ));
        let mut sync = crate::sync::SyncConfig::new(hub_identity, "fleetform-up");
        sync.hub = Some(hub.name.clone());
        let sync_token = shutdown.child_token();
        let hub_name = hub.name.clone();
        tasks.push((
            "sync",
            tokio::spawn(async move {
                if let Err(err) = crate::sync::run(sync, sync_token).await {
                    warn!(hub = hub_name, %err, "sync stopped");
                }
            }),
        ));
        tasks.push((
            "new spokes",
            tokio::spawn(start_new_spokes(
                hub.client.clone(),
                config.data_dir.clone(),
                spokes.clone(),
                destroyed.clone(),
                shutdown.child_token(),
            )),
        ));
        info!(hub = hub.name, url = hub.url(), "hub running");
    }
    Ok(Running {
        hubs,
        spokes,
        destroyed,
        shutdown,
        tasks,
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

/// Starts the cluster of every embedded spoke a later commit declares, and its kubelet.
async fn start_new_spokes(
    hub: Client,
    data_dir: PathBuf,
    spokes: Arc<Mutex<Vec<EmbeddedCluster>>>,
    destroyed: Arc<Mutex<Vec<String>>>,
    shutdown: CancellationToken,
) {
    let api: Api<Spoke> = Api::namespaced(hub, SYSTEM_NAMESPACE);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    loop {
        let spoke = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = events.next() => match event {
                None => return,
                Some(Ok(spoke)) => spoke,
                Some(Err(err)) => {
                    warn!(%err, "watching Spokes for new embedded clusters");
                    continue;
                }
            },
        };
        let name = spoke.name_any();
        let running = lock(&spokes).iter().any(|cluster| cluster.name == name)
            || lock(&destroyed).contains(&name);
        if running
            || spoke.spec.kubeconfig.embedded.is_none()
            || spoke.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        match start_cluster(&data_dir, ClusterRole::Spoke, &name, &shutdown).await {
            Ok(cluster) => {
                info!(
                    spoke = name,
                    url = cluster.url(),
                    "a new embedded spoke cluster started"
                );
                tokio::spawn(kubelet::run(
                    name,
                    cluster.client.clone(),
                    cluster.plane.identities(),
                    HubConnection::BootstrapSecret,
                    cluster.stop.clone(),
                ));
                lock(&spokes).push(cluster);
            }
            Err(err) => warn!(%err, "cannot start a new embedded spoke"),
        }
    }
}

/// Starts (or resumes) the embedded cluster `name`: its state and kubeconfig live in its own
/// directory under the data dir, and it keeps the port it was first given, so kubeconfigs that
/// point at it — agents' included — stay valid across restarts.
async fn start_cluster(
    data_dir: &Path,
    role: ClusterRole,
    name: &str,
    shutdown: &CancellationToken,
) -> Result<EmbeddedCluster, UpError> {
    let cluster = format!("{} {name}", role.as_str());
    let failed = |message: String| UpError::Start {
        cluster: cluster.clone(),
        message,
    };
    let dir = embedded_dir(data_dir, role, name);
    std::fs::create_dir_all(&dir)
        .map_err(|err| failed(format!("cannot create {}: {err}", dir.display())))?;
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
    let plane = crate::embedded::builder()
        .data_dir(Some(dir.join("state")))
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
        std::fs::write(&port_file, plane.addr().port().to_string())
            .map_err(|err| failed(format!("cannot write {}: {err}", port_file.display())))?;
    }
    let local = crate::transport::serve_locally(&plane);
    let kubeconfig_path = embedded_kubeconfig(data_dir, role, name);
    let kubeconfig = plane.kubeconfig();
    crate::cli::write_private(&kubeconfig_path, &kubeconfig)
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
        stop: shutdown.child_token(),
    })
}
