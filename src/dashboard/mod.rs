//! The fleet dashboard that `fleetform up` and `fleetform sync` serve: read-only HTML pages of
//! the fleet (Fleet, Spoke, Sync, Rollout), rendered on the server from one set of watches per
//! process, with live updates over Server-Sent Events. Viewers never cause API requests: the
//! [`watch`] task keeps the [`model`] and renders each change once for every viewer; the
//! [`server`] only reads the model. It never reads a Secret's contents except the one holding
//! its own token (followed by watch, so that a rotated token takes effect at once), and shows
//! none.

pub mod fleet_query;
pub mod model;
pub mod pages;
pub mod server;
pub mod watch;

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::model::Model;
use self::server::{Access, Dashboard};

/// Where `fleetform up` serves the dashboard unless told otherwise.
pub const DEFAULT_UP_ADDR: &str = "127.0.0.1:8089";
/// How many batches of changes a viewer may fall behind before it is told to reload.
const UPDATES_BUFFERED: usize = 256;
/// The key of the token in the Secret `--dashboard-token-secret` names.
pub const TOKEN_KEY: &str = "token";

/// A Secret by `NAMESPACE/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretName {
    pub namespace: String,
    pub name: String,
}

impl FromStr for SecretName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once('/') {
            Some((namespace, name))
                if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Ok(SecretName {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(format!("{text:?} is not NAMESPACE/NAME")),
        }
    }
}

impl fmt::Display for SecretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the dashboard serves, and to whom.
#[derive(Clone)]
pub struct DashboardConfig {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// When `addr` is taken, listen on any free port of its host instead (`up`'s default
    /// address, so a second `up` on the machine still gets a dashboard).
    pub any_port_if_taken: bool,
    /// Each hub by name, and a client of it the watches read with.
    pub hubs: Vec<(String, Client)>,
    /// The Secret (read with the first hub's client) whose key `token` a viewer must present;
    /// `None`: anyone who reaches `addr` may look.
    pub token_secret: Option<SecretName>,
}

/// Why the dashboard could not start.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error("cannot serve the dashboard on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the dashboard's token from Secret {secret}: {message}")]
    Token { secret: SecretName, message: String },
}

/// A dashboard being served.
pub struct RunningDashboard {
    addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningDashboard {
    /// Where it is served (the port chosen for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its URL, for people.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Waits until its watches and server have stopped (after the stop token was cancelled).
    pub async fn stopped(self) {
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Reads the token `secret` holds under [`TOKEN_KEY`].
async fn read_token(client: &Client, secret: &SecretName) -> Result<String, DashboardError> {
    let failed = |message: String| DashboardError::Token {
        secret: secret.clone(),
        message,
    };
    let object = Api::<Secret>::namespaced(client.clone(), &secret.namespace)
        .get(&secret.name)
        .await
        .map_err(|err| failed(err.to_string()))?;
    token_of(&object).ok_or_else(|| failed(format!("it has no non-empty key {TOKEN_KEY:?}")))
}

/// The token a Secret holds under [`TOKEN_KEY`], if any.
fn token_of(secret: &Secret) -> Option<String> {
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(TOKEN_KEY))
        .map(|bytes| String::from_utf8_lossy(&bytes.0).trim().to_string())
        .filter(|token| !token.is_empty())
}

/// Follows the token Secret `secret` until `stop`, so that a token rotated there is the one
/// `access` admits at once (and the one it replaces no more); a Secret deleted, or left without
/// a token, admits nobody until it holds one again.
async fn follow_token(client: Client, secret: SecretName, access: Access, stop: CancellationToken) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let config = watcher::Config::default().fields(&format!("metadata.name={}", secret.name));
    let mut events = watcher(Api::<Secret>::namespaced(client, &secret.namespace), config)
        .default_backoff()
        .boxed();
    let mut current: Option<Option<String>> = None;
    loop {
        let seen = tokio::select! {
            _ = stop.cancelled() => return,
            event = events.next() => match event {
                None => return,
                Some(Err(err)) => {
                    tracing::warn!(%secret, %err, "watching the dashboard's token Secret");
                    continue;
                }
                Some(Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object))) => {
                    token_of(&object)
                }
                Some(Ok(watcher::Event::Delete(_))) => None,
                Some(Ok(_)) => continue,
            },
        };
        if current.as_ref() == Some(&seen) {
            continue;
        }
        match &seen {
            Some(_) if current.is_some() => {
                tracing::info!(%secret, "the dashboard's token changed: the new one is admitted");
            }
            Some(_) => {}
            None => tracing::warn!(
                %secret,
                "the dashboard's token Secret is gone or holds no token: no viewer is admitted until it does"
            ),
        }
        access.replace(seen.as_deref());
        current = Some(seen);
    }
}

/// Starts the watches and the server; both stop at `stop`.
pub async fn start(
    config: DashboardConfig,
    stop: CancellationToken,
) -> Result<RunningDashboard, DashboardError> {
    let mut follow = None;
    let access = match (&config.token_secret, config.hubs.first()) {
        (Some(secret), Some((_, client))) => {
            let access = Access::token(&read_token(client, secret).await?);
            follow = Some(follow_token(
                client.clone(),
                secret.clone(),
                access.clone(),
                stop.clone(),
            ));
            access
        }
        (Some(secret), None) => {
            return Err(DashboardError::Token {
                secret: secret.clone(),
                message: "no hub to read it from".to_string(),
            });
        }
        (None, _) => Access::Open,
    };
    let listen_error = |source| DashboardError::Listen {
        addr: config.addr,
        source,
    };
    let listener = match tokio::net::TcpListener::bind(config.addr).await {
        Err(err) if config.any_port_if_taken && err.kind() == std::io::ErrorKind::AddrInUse => {
            tokio::net::TcpListener::bind(SocketAddr::new(config.addr.ip(), 0)).await
        }
        bound => bound,
    }
    .map_err(listen_error)?;
    let addr = listener.local_addr().map_err(listen_error)?;
    let model = Arc::new(RwLock::new(Model::new(
        config.hubs.iter().map(|(name, _)| name.clone()),
    )));
    let (updates, _) = tokio::sync::broadcast::channel(UPDATES_BUFFERED);
    let dashboard = Arc::new(Dashboard::new(model.clone(), updates.clone(), access));
    let watches = tokio::spawn(watch::run(config.hubs, model, updates, stop.clone()));
    let server = tokio::spawn(crate::runtime::http::serve(
        "dashboard",
        listener,
        stop,
        move |request| {
            let response = dashboard.handle(&request);
            std::future::ready(response)
        },
    ));
    tracing::info!(%addr, "serving the dashboard");
    let mut tasks = vec![watches, server];
    tasks.extend(follow.map(tokio::spawn));
    Ok(RunningDashboard { addr, tasks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_secret_is_named_namespace_slash_name() {
        assert_eq!(
            "fleetform-system/dashboard".parse(),
            Ok(SecretName {
                namespace: "fleetform-system".into(),
                name: "dashboard".into()
            })
        );
        for bad in ["dashboard", "/x", "x/", "a/b/c"] {
            assert!(bad.parse::<SecretName>().is_err(), "{bad}");
        }
    }
}
