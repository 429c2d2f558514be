//! How fleetform reaches clusters: a Hub's or Spoke's `kubeconfig` source becomes a
//! `kube::Client`.
//!
//! - `context: NAME` — a context of the kubeconfig fleetform runs with (`--kubeconfig`,
//!   `$KUBECONFIG` or `~/.kube/config`).
//! - `secretRef` — a kubeconfig stored in a Secret: for a Hub, in the cluster fleetform runs with;
//!   for a Spoke, on its hub.
//! - `inCluster` — the cluster fleetform runs in; for a Spoke, its hub (hub-as-spoke).
//! - `embedded` — a control plane `fleetform up` runs, whose kubeconfig it keeps at
//!   `<data dir>/hubs/<name>/kubeconfig` or `<data dir>/spokes/<name>/kubeconfig`.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::api::fleet::{Hub, KubeconfigSource, Spoke};

/// Why a cluster could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("{cluster}: cannot load kubeconfig{}: {message}", context.as_ref().map(|c| format!(" context {c:?}")).unwrap_or_default())]
    Kubeconfig {
        cluster: String,
        context: Option<String>,
        message: String,
    },
    #[error(
        "{cluster}: the embedded cluster has no kubeconfig at {} (start the fleet with `fleetform up`, or pass its --data-dir)",
        path.display()
    )]
    EmbeddedNotRunning { cluster: String, path: PathBuf },
    #[error("{cluster}: kubeconfig.inCluster needs fleetform to run inside a cluster: {message}")]
    NotInCluster { cluster: String, message: String },
    #[error("{cluster}: kubeconfig Secret {namespace}/{name} key {key:?}: {message}")]
    Secret {
        cluster: String,
        namespace: String,
        name: String,
        key: String,
        message: String,
    },
    #[error("{cluster}: kubeconfig sets no source (context, secretRef, inCluster or embedded)")]
    NoSource { cluster: String },
}

/// Where fleetform finds the clusters of a fleet.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// The kubeconfig fleetform runs with (`--kubeconfig`); the usual lookup when absent.
    pub kubeconfig: Option<PathBuf>,
    /// The context of that kubeconfig for the cluster fleetform runs with (`--context`).
    pub context: Option<String>,
    /// Where `fleetform up` keeps its embedded clusters.
    pub data_dir: PathBuf,
}

/// The default home of `fleetform up`'s state: `$FLEETFORM_DATA_DIR`, or the user's data dir.
pub fn default_data_dir() -> PathBuf {
    std::env::var_os("FLEETFORM_DATA_DIR")
        .map(PathBuf::from)
        .or_else(|| dirs::data_dir().map(|dir| dir.join("fleetform")))
        .unwrap_or_else(|| PathBuf::from(".fleetform"))
}

impl Access {
    /// A client for a hub.
    pub async fn hub(&self, hub: &Hub) -> Result<Client, AccessError> {
        let name = hub.metadata.name.as_deref().unwrap_or_default();
        self.hub_at(name, &hub.spec.kubeconfig).await
    }

    /// A client for the hub `name`, reached through `source`.
    pub async fn hub_at(
        &self,
        name: &str,
        source: &KubeconfigSource,
    ) -> Result<Client, AccessError> {
        self.client(ClusterRole::Hub, name, source, None).await
    }

    /// A client for a spoke, given its hub's client (hub-as-spoke and secrets live there).
    pub async fn spoke(&self, spoke: &Spoke, hub: &Client) -> Result<Client, AccessError> {
        self.reach_spoke(spoke, hub)
            .await
            .map(|reached| reached.client)
    }

    /// [`Self::spoke`], with the API server URL the client reaches.
    pub async fn reach_spoke(&self, spoke: &Spoke, hub: &Client) -> Result<Reached, AccessError> {
        let name = spoke.metadata.name.as_deref().unwrap_or_default();
        self.reach(ClusterRole::Spoke, name, &spoke.spec.kubeconfig, Some(hub))
            .await
    }

    async fn client(
        &self,
        role: ClusterRole,
        name: &str,
        source: &KubeconfigSource,
        hub: Option<&Client>,
    ) -> Result<Client, AccessError> {
        self.reach(role, name, source, hub)
            .await
            .map(|reached| reached.client)
    }

    async fn reach(
        &self,
        role: ClusterRole,
        name: &str,
        source: &KubeconfigSource,
        hub: Option<&Client>,
    ) -> Result<Reached, AccessError> {
        let cluster = &format!("{} {name}", role.as_str());
        if let Some(context) = &source.context {
            return self
                .kubeconfig_client(cluster, self.kubeconfig.as_deref(), Some(context.clone()))
                .await;
        }
        if source.embedded.is_some() {
            let path = embedded_kubeconfig(&self.data_dir, role, name);
            if !path.exists() {
                return Err(AccessError::EmbeddedNotRunning {
                    cluster: cluster.to_string(),
                    path,
                });
            }
            return self.kubeconfig_client(cluster, Some(&path), None).await;
        }
        if source.is_in_cluster() {
            if let Some(hub) = hub {
                return Ok(Reached {
                    client: hub.clone(),
                    url: None,
                });
            }
            let config = Config::incluster().map_err(|err| AccessError::NotInCluster {
                cluster: cluster.to_string(),
                message: err.to_string(),
            })?;
            return client_for(cluster, None, config);
        }
        if let Some(secret_ref) = &source.secret_ref {
            let holder = match hub {
                Some(hub) => hub.clone(),
                None => self.management(cluster).await?,
            };
            let secret_error = |message: String| AccessError::Secret {
                cluster: cluster.to_string(),
                namespace: secret_ref.namespace.clone(),
                name: secret_ref.name.clone(),
                key: secret_ref.key.clone(),
                message,
            };
            let secret = Api::<Secret>::namespaced(holder, &secret_ref.namespace)
                .get(&secret_ref.name)
                .await
                .map_err(|err| secret_error(err.to_string()))?;
            let bytes = secret
                .data
                .as_ref()
                .and_then(|data| data.get(&secret_ref.key))
                .ok_or_else(|| secret_error("no such key".to_string()))?;
            let text =
                std::str::from_utf8(&bytes.0).map_err(|_| secret_error("not UTF-8".to_string()))?;
            let kubeconfig =
                Kubeconfig::from_yaml(text).map_err(|err| secret_error(err.to_string()))?;
            let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|err| secret_error(err.to_string()))?;
            return client_for(cluster, None, config);
        }
        Err(AccessError::NoSource {
            cluster: cluster.to_string(),
        })
    }

    /// The cluster fleetform runs with.
    async fn management(&self, cluster: &str) -> Result<Client, AccessError> {
        self.kubeconfig_client(cluster, self.kubeconfig.as_deref(), self.context.clone())
            .await
            .map(|reached| reached.client)
    }

    async fn kubeconfig_client(
        &self,
        cluster: &str,
        path: Option<&Path>,
        context: Option<String>,
    ) -> Result<Reached, AccessError> {
        let error = |message: String| AccessError::Kubeconfig {
            cluster: cluster.to_string(),
            context: context.clone(),
            message,
        };
        let options = KubeConfigOptions {
            context: context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match path {
            Some(path) => {
                let kubeconfig =
                    Kubeconfig::read_from(path).map_err(|err| error(err.to_string()))?;
                Config::from_custom_kubeconfig(kubeconfig, &options).await
            }
            None => Config::from_kubeconfig(&options).await,
        }
        .map_err(|err| error(err.to_string()))?;
        client_for(cluster, context, config)
    }
}

/// Whether a cluster is a fleet's hub or one of its spokes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterRole {
    Hub,
    Spoke,
}

impl ClusterRole {
    /// `hub` or `spoke`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterRole::Hub => "hub",
            ClusterRole::Spoke => "spoke",
        }
    }
}

/// The directory of the embedded cluster `name` under `data_dir` (its database and kubeconfig).
pub fn embedded_dir(data_dir: &Path, role: ClusterRole, name: &str) -> PathBuf {
    data_dir.join(format!("{}s", role.as_str())).join(name)
}

/// Where `fleetform up` keeps the kubeconfig of the embedded cluster `name` under `data_dir`.
pub fn embedded_kubeconfig(data_dir: &Path, role: ClusterRole, name: &str) -> PathBuf {
    embedded_dir(data_dir, role, name).join("kubeconfig")
}

/// A cluster reached: its client, and the URL of its API server when fleetform knows it (not for
/// a hub-as-spoke, which is reached with the hub's own client).
#[derive(Clone)]
pub struct Reached {
    pub client: Client,
    pub url: Option<String>,
}

fn client_for(
    cluster: &str,
    context: Option<String>,
    config: Config,
) -> Result<Reached, AccessError> {
    let url = config.cluster_url.to_string();
    let client = crate::transport::client(config).map_err(|err| AccessError::Kubeconfig {
        cluster: cluster.to_string(),
        context,
        message: err.to_string(),
    })?;
    Ok(Reached {
        client,
        url: Some(url.trim_end_matches('/').to_string()),
    })
}
