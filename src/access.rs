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
//!
//! A kubeconfig fleetform writes ([`write_private`]) only its owner may read.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::api::fleet::{Hub, KubeconfigSource, Spoke};
use crate::transport::Connector;

/// Why a cluster could not be reached. Each names the kubeconfig it came from, and the API
/// server's URL once that is known.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("{cluster}: cannot use {origin}{}: {message}", server.as_ref().map(|s| format!(" (server {s})")).unwrap_or_default())]
    Kubeconfig {
        cluster: String,
        origin: Box<KubeconfigOrigin>,
        /// The API server the kubeconfig names, when it got that far.
        server: Option<String>,
        message: String,
    },
    #[error(
        "{cluster}: the embedded cluster has no kubeconfig at {} (start the fleet with `fleetform up`, or pass its --data-dir)",
        path.display()
    )]
    EmbeddedNotRunning { cluster: String, path: PathBuf },
    #[error("{cluster}: kubeconfig.inCluster needs fleetform to run inside a cluster: {message}")]
    NotInCluster { cluster: String, message: String },
    #[error(
        "{cluster}: kubeconfig.context {context:?}: fleetform runs inside a cluster here, with its service account and no kubeconfig, so it has no contexts; put the cluster's kubeconfig in a Secret on the hub and name it with kubeconfig.secretRef instead"
    )]
    InClusterHasNoContexts { cluster: String, context: String },
    #[error("{cluster}: kubeconfig sets no source (context, secretRef, inCluster or embedded)")]
    NoSource { cluster: String },
}

impl AccessError {
    /// The error of a kubeconfig from `origin` that cannot be used (`server`: the API server
    /// it names, once known), given what went wrong.
    fn unusable(
        cluster: &str,
        origin: &KubeconfigOrigin,
        server: Option<String>,
    ) -> impl FnOnce(String) -> AccessError + use<> {
        let (cluster, origin) = (cluster.to_string(), Box::new(origin.clone()));
        move |message| AccessError::Kubeconfig {
            cluster,
            origin,
            server,
            message,
        }
    }
}

/// Where the kubeconfig of a client came from, as messages name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubeconfigOrigin {
    /// A kubeconfig file (`path` may be `$KUBECONFIG`'s list), at `context` (`None`: its
    /// current context).
    File {
        path: String,
        context: Option<String>,
    },
    /// A kubeconfig stored in a key of a Secret.
    Secret {
        namespace: String,
        name: String,
        key: String,
    },
    /// The service account of the pod fleetform runs in.
    InCluster,
    /// The hub's own client: a spoke that is its hub (`inCluster` on a Spoke).
    Hub,
}

impl std::fmt::Display for KubeconfigOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubeconfigOrigin::File { path, context } => {
                write!(f, "kubeconfig {path}")?;
                match context {
                    Some(context) => write!(f, " context {context:?}"),
                    None => Ok(()),
                }
            }
            KubeconfigOrigin::Secret {
                namespace,
                name,
                key,
            } => write!(f, "kubeconfig Secret {namespace}/{name} key {key:?}"),
            KubeconfigOrigin::InCluster => f.write_str("the in-cluster service account"),
            KubeconfigOrigin::Hub => f.write_str("the hub's own API server (inCluster)"),
        }
    }
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
    /// A client for a hub, with where it reaches.
    pub async fn hub(&self, hub: &Hub) -> Result<Reached, AccessError> {
        let name = hub.metadata.name.as_deref().unwrap_or_default();
        self.hub_at(name, &hub.spec.kubeconfig).await
    }

    /// A client for the hub `name`, reached through `source`.
    pub async fn hub_at(
        &self,
        name: &str,
        source: &KubeconfigSource,
    ) -> Result<Reached, AccessError> {
        self.reach(ClusterRole::Hub, name, source, None).await
    }

    /// A client for a spoke, given its hub's client (hub-as-spoke and secrets live there).
    pub async fn spoke(&self, spoke: &Spoke, hub: &Client) -> Result<Client, AccessError> {
        self.reach_spoke(spoke, hub)
            .await
            .map(|reached| reached.client())
    }

    /// [`Self::spoke`], with where the client reaches.
    pub async fn reach_spoke(&self, spoke: &Spoke, hub: &Client) -> Result<Reached, AccessError> {
        let name = spoke.metadata.name.as_deref().unwrap_or_default();
        self.reach(ClusterRole::Spoke, name, &spoke.spec.kubeconfig, Some(hub))
            .await
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
                    connector: Connector::Shared(hub.clone()),
                    url: None,
                    origin: KubeconfigOrigin::Hub,
                });
            }
            let config = Config::incluster().map_err(|err| AccessError::NotInCluster {
                cluster: cluster.to_string(),
                message: err.to_string(),
            })?;
            return client_for(cluster, KubeconfigOrigin::InCluster, config);
        }
        if let Some(secret_ref) = &source.secret_ref {
            let holder = match hub {
                Some(hub) => hub.clone(),
                None => self.management(cluster).await?,
            };
            let origin = KubeconfigOrigin::Secret {
                namespace: secret_ref.namespace.clone(),
                name: secret_ref.name.clone(),
                key: secret_ref.key.clone(),
            };
            let secret_error = |server| AccessError::unusable(cluster, &origin, server);
            let secret = Api::<Secret>::namespaced(holder, &secret_ref.namespace)
                .get(&secret_ref.name)
                .await
                .map_err(|err| secret_error(None)(err.to_string()))?;
            let bytes = secret
                .data
                .as_ref()
                .and_then(|data| data.get(&secret_ref.key))
                .ok_or_else(|| secret_error(None)("no such key".to_string()))?;
            let text = std::str::from_utf8(&bytes.0)
                .map_err(|_| secret_error(None)("not UTF-8".to_string()))?;
            let kubeconfig =
                Kubeconfig::from_yaml(text).map_err(|err| secret_error(None)(err.to_string()))?;
            let server = server_of(&kubeconfig, None);
            let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|err| secret_error(server)(err.to_string()))?;
            return client_for(cluster, origin, config);
        }
        Err(AccessError::NoSource {
            cluster: cluster.to_string(),
        })
    }

    /// The cluster fleetform runs with.
    async fn management(&self, cluster: &str) -> Result<Client, AccessError> {
        self.own_cluster(cluster)
            .await
            .map(|reached| reached.client())
    }

    /// The cluster fleetform runs with (`--kubeconfig` and `--context`; in a pod without a
    /// kubeconfig, the one it runs in), with where it reaches; `cluster` names it in errors.
    pub async fn own_cluster(&self, cluster: &str) -> Result<Reached, AccessError> {
        self.kubeconfig_client(cluster, self.kubeconfig.as_deref(), self.context.clone())
            .await
    }

    /// A client from the kubeconfig at `path` (else `$KUBECONFIG`, else `~/.kube/config`), at
    /// `context`. In a pod without a kubeconfig, no context can be had, and the cluster
    /// fleetform runs with is the one it runs in.
    async fn kubeconfig_client(
        &self,
        cluster: &str,
        path: Option<&Path>,
        context: Option<String>,
    ) -> Result<Reached, AccessError> {
        let origin = KubeconfigOrigin::File {
            path: match path {
                Some(path) => path.display().to_string(),
                None => default_kubeconfig_path(),
            },
            context: context.clone(),
        };
        let error = |server| AccessError::unusable(cluster, &origin, server);
        let read = match path {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        };
        let kubeconfig = match read {
            Ok(kubeconfig) => kubeconfig,
            Err(err) if path.is_none() => {
                let in_cluster = Config::incluster().ok();
                return match (context, in_cluster) {
                    (None, Some(config)) => {
                        client_for(cluster, KubeconfigOrigin::InCluster, config)
                    }
                    (context, in_cluster) => Err(without_kubeconfig(
                        cluster,
                        context,
                        in_cluster.is_some(),
                        error(None)(err.to_string()),
                    )),
                };
            }
            Err(err) => return Err(error(None)(err.to_string())),
        };
        let server = server_of(&kubeconfig, context.as_deref());
        let options = KubeConfigOptions {
            context: context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|err| error(server)(err.to_string()))?;
        client_for(cluster, origin, config)
    }
}

/// The error for a kubeconfig that could not be read from the usual places: inside a cluster,
/// a `context:` can never work there, and the message says what does.
fn without_kubeconfig(
    cluster: &str,
    context: Option<String>,
    in_cluster: bool,
    unreadable: AccessError,
) -> AccessError {
    match context {
        Some(context) if in_cluster => AccessError::InClusterHasNoContexts {
            cluster: cluster.to_string(),
            context,
        },
        _ => unreadable,
    }
}

/// How messages name the kubeconfig kube-rs looks up when none is given: `$KUBECONFIG`'s
/// files, else `~/.kube/config`.
fn default_kubeconfig_path() -> String {
    match std::env::var_os("KUBECONFIG").filter(|value| !value.is_empty()) {
        Some(value) => format!("$KUBECONFIG ({})", value.to_string_lossy()),
        None => std::env::home_dir()
            .map(|home| home.join(".kube/config").display().to_string())
            .unwrap_or_else(|| "~/.kube/config".to_string()),
    }
}

/// The API server a kubeconfig names for `context` (`None`: its current context).
fn server_of(kubeconfig: &Kubeconfig, context: Option<&str>) -> Option<String> {
    let context = context.or(kubeconfig.current_context.as_deref())?;
    let cluster = kubeconfig
        .contexts
        .iter()
        .find(|named| named.name == context)?
        .context
        .as_ref()?
        .cluster
        .clone();
    kubeconfig
        .clusters
        .iter()
        .find(|named| named.name == cluster)?
        .cluster
        .as_ref()?
        .server
        .clone()
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

/// A cluster reached: its client, the URL of its API server when fleetform knows it (not for
/// a hub-as-spoke, which is reached with the hub's own client), and the kubeconfig it came from.
#[derive(Clone)]
pub struct Reached {
    /// What makes its clients ([`Reached::client`]).
    pub connector: Connector,
    pub url: Option<String>,
    pub origin: KubeconfigOrigin,
}

impl Reached {
    /// A client for the cluster: one of its own for a cluster of this process, to let go after
    /// use (see [`Connector`]), the one shared client over the network.
    pub fn client(&self) -> Client {
        self.connector.client()
    }

    /// Where requests go and which kubeconfig said so, for messages about them:
    /// `https://10.0.0.5:6443, from kubeconfig Secret fleetform-system/edge key "kubeconfig"`.
    pub fn describe(&self) -> String {
        match &self.url {
            Some(url) => format!("{url}, from {}", self.origin),
            None => self.origin.to_string(),
        }
    }
}

fn client_for(
    cluster: &str,
    origin: KubeconfigOrigin,
    config: Config,
) -> Result<Reached, AccessError> {
    let url = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let connector = Connector::for_config(config).map_err(|err| {
        AccessError::unusable(cluster, &origin, Some(url.clone()))(err.to_string())
    })?;
    Ok(Reached {
        connector,
        url: Some(url),
        origin,
    })
}

/// Writes `contents` to `path` readable by its owner only (kubeconfigs hold credentials),
/// creating its directory.
pub fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreadable() -> AccessError {
        AccessError::Kubeconfig {
            cluster: "spoke edge".into(),
            origin: Box::new(KubeconfigOrigin::File {
                path: "/root/.kube/config".into(),
                context: Some("edge".into()),
            }),
            server: None,
            message: "failed to read kubeconfig".into(),
        }
    }

    #[test]
    fn a_context_asked_of_a_hub_running_in_a_cluster_says_to_use_secret_ref() {
        let message =
            without_kubeconfig("spoke edge", Some("edge".into()), true, unreadable()).to_string();
        assert_eq!(
            message,
            "spoke edge: kubeconfig.context \"edge\": fleetform runs inside a cluster here, with its service account and no kubeconfig, so it has no contexts; put the cluster's kubeconfig in a Secret on the hub and name it with kubeconfig.secretRef instead"
        );
        // Outside a cluster the kubeconfig is just missing, and the message says which.
        let outside = without_kubeconfig("spoke edge", Some("edge".into()), false, unreadable());
        assert_eq!(
            outside.to_string(),
            "spoke edge: cannot use kubeconfig /root/.kube/config context \"edge\": failed to read kubeconfig"
        );
    }

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: edge
clusters:
  - name: edge
    cluster:
      server: https://10.1.2.3:6443
      certificate-authority-data: "not base64!"
contexts:
  - name: edge
    context: {cluster: edge, user: admin}
users:
  - name: admin
    user: {token: secret}
"#;

    #[tokio::test]
    async fn a_kubeconfig_that_cannot_be_used_is_named_with_its_file_context_and_server() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let access = Access {
            kubeconfig: Some(path.clone()),
            ..Access::default()
        };
        let source = |context: &str| KubeconfigSource {
            context: Some(context.into()),
            ..KubeconfigSource::default()
        };

        for (context, server, why) in [
            (
                "edge",
                " (server https://10.1.2.3:6443)",
                "a CA that is not base64",
            ),
            ("prod", "", "a context the kubeconfig lacks"),
        ] {
            let Err(err) = access.hub_at("hub", &source(context)).await else {
                panic!("{why} is refused");
            };
            let message = err.to_string();
            let named = format!(
                "hub hub: cannot use kubeconfig {} context {context:?}{server}: ",
                path.display()
            );
            assert!(message.starts_with(&named), "{why}: {message}");
        }
    }
}
