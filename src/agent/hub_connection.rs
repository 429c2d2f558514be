//! How the agent reaches its hub.
//!
//! Either the agent is handed hub credentials and uses them as they are, or (DESIGN §4.1) it is
//! handed a bootstrap kubeconfig whose only right is to register, which it trades for a
//! CSR-issued client certificate kept in `hub-kubeconfig-secret` ([`super::registration`]). The
//! loops only ever get a client, whichever way it was made.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Why the agent could not build a client for its hub.
#[derive(Debug, thiserror::Error)]
pub enum HubConnectionError {
    #[error("hub kubeconfig {source_name}: {message}")]
    Kubeconfig {
        source_name: String,
        message: String,
    },
    #[error("a bootstrap kubeconfig gives no client by itself: the agent registers with it")]
    Bootstrap,
}

/// Where the agent's hub credentials come from.
#[derive(Clone)]
pub enum HubConnection {
    /// A kubeconfig file used as it is (`--hub-kubeconfig`).
    KubeconfigFile {
        path: PathBuf,
        context: Option<String>,
    },
    /// A kubeconfig given as text (in-process agents, tests).
    Kubeconfig(String),
    /// A ready client (in-process agents sharing a transport).
    Client(Client),
    /// Register by certificate, with the bootstrap kubeconfig in Secret `bootstrap-hub-kubeconfig`
    /// (key `kubeconfig`) of the agent's namespace on the spoke; a change of that Secret
    /// registers again.
    BootstrapSecret,
    /// Register by certificate, with this bootstrap kubeconfig (`--bootstrap-kubeconfig`, tests).
    Bootstrap(String),
}

impl std::fmt::Debug for HubConnection {
    // Never prints the kubeconfig itself: it holds credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HubConnection::KubeconfigFile { path, context } => f
                .debug_struct("KubeconfigFile")
                .field("path", path)
                .field("context", context)
                .finish(),
            HubConnection::Kubeconfig(_) => f.write_str("Kubeconfig(..)"),
            HubConnection::Client(_) => f.write_str("Client(..)"),
            HubConnection::BootstrapSecret => f.write_str("BootstrapSecret"),
            HubConnection::Bootstrap(_) => f.write_str("Bootstrap(..)"),
        }
    }
}

impl HubConnection {
    /// Whether the agent registers by certificate rather than using these credentials as they are.
    pub fn is_bootstrap(&self) -> bool {
        matches!(
            self,
            HubConnection::BootstrapSecret | HubConnection::Bootstrap(_)
        )
    }

    /// The kubeconfig text of credentials used as they are (a file is read; its current context
    /// is the one used), `None` for a ready client or the bootstrap variants.
    pub fn kubeconfig_text(&self) -> Option<String> {
        match self {
            HubConnection::Kubeconfig(text) => Some(text.clone()),
            HubConnection::KubeconfigFile { path, .. } => std::fs::read_to_string(path).ok(),
            _ => None,
        }
    }

    /// A client for the hub with credentials used as they are; an error for the bootstrap
    /// variants, whose client comes out of registration.
    pub async fn client(&self) -> Result<Client, HubConnectionError> {
        let (source_name, kubeconfig, context) = match self {
            HubConnection::Client(client) => return Ok(client.clone()),
            HubConnection::BootstrapSecret | HubConnection::Bootstrap(_) => {
                return Err(HubConnectionError::Bootstrap);
            }
            HubConnection::KubeconfigFile { path, context } => {
                let source_name = path.display().to_string();
                let kubeconfig =
                    Kubeconfig::read_from(path).map_err(|err| HubConnectionError::Kubeconfig {
                        source_name: source_name.clone(),
                        message: err.to_string(),
                    })?;
                (source_name, kubeconfig, context.clone())
            }
            HubConnection::Kubeconfig(text) => {
                return client_from_kubeconfig(text, "(given as text)").await;
            }
        };
        build_client(source_name, kubeconfig, context).await
    }
}

/// A client from kubeconfig text; `source_name` says where it came from in errors.
pub(crate) async fn client_from_kubeconfig(
    text: &str,
    source_name: &str,
) -> Result<Client, HubConnectionError> {
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|err| HubConnectionError::Kubeconfig {
        source_name: source_name.to_string(),
        message: err.to_string(),
    })?;
    build_client(source_name.to_string(), kubeconfig, None).await
}

async fn build_client(
    source_name: String,
    kubeconfig: Kubeconfig,
    context: Option<String>,
) -> Result<Client, HubConnectionError> {
    let error = |message: String| HubConnectionError::Kubeconfig {
        source_name: source_name.clone(),
        message,
    };
    let options = KubeConfigOptions {
        context,
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|err| error(err.to_string()))?;
    crate::transport::client(config).map_err(|err| error(err.to_string()))
}
