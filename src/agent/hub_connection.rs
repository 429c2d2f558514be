//! How the agent reaches its hub.
//!
//! Today the agent is handed a kubeconfig for the hub and uses it as it is. The registration
//! protocol (DESIGN §4.1) replaces that with a bootstrap kubeconfig whose only right is to
//! register, traded for a CSR-issued client certificate kept in `hub-kubeconfig-secret`; that
//! flow needs the control plane to sign certificates and will be another variant here. The loops
//! only ever ask this type for a client, so they will not change when it arrives.

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
    /// TEMPORARY stand-in until the bootstrap flow lands.
    BootstrapSecret,
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
        }
    }
}

impl HubConnection {
    /// A client for the hub.
    pub async fn client(&self) -> Result<Client, HubConnectionError> {
        let (source_name, kubeconfig, context) = match self {
            HubConnection::Client(client) => return Ok(client.clone()),
            HubConnection::BootstrapSecret => {
                return Err(HubConnectionError::Kubeconfig {
                    source_name: "bootstrap".into(),
                    message: "not yet".into(),
                });
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
                let kubeconfig =
                    Kubeconfig::from_yaml(text).map_err(|err| HubConnectionError::Kubeconfig {
                        source_name: "(given as text)".to_string(),
                        message: err.to_string(),
                    })?;
                ("(given as text)".to_string(), kubeconfig, None)
            }
        };
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
        Client::try_from(config).map_err(|err| error(err.to_string()))
    }
}
