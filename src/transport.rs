//! How fleetform's clients reach a cluster: over the network, as kube-rs does, or, for a control
//! plane running in this very process (the embedded clusters of `fleetform up`), through that
//! plane's in-process endpoint.
//!
//! An in-process client sends the same requests with the same credentials (client certificate,
//! bearer token) and is authenticated and authorized exactly as over TLS; it only skips the
//! socket, the handshake and the HTTP framing. That matters at fleet scale: kube-rs holds one
//! HTTP/1.1 connection per watch, so every embedded spoke with its agent would otherwise cost a
//! score of file descriptors (both ends live in this process) and a TLS session each.
//!
//! A control plane is served locally from [`serve_locally`] until the returned guard drops. A
//! client keeps the plane's address, not the plane: when that plane stops, its requests fail as a
//! refused connection would, and a plane started again at the address serves them again.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::task::{Context, Poll};

use base64::Engine;
use fleetform_controlplane::{InProcessService, LocalEndpoint, RunningControlPlane};
use http::{HeaderName, HeaderValue, Request, Response, header};
use kube::{Client, Config};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The control planes of this process, by the `host:port` their kubeconfigs name, each with
/// the generation it was registered at.
static LOCAL: LazyLock<RwLock<Planes>> = LazyLock::new(Default::default);

type Planes = HashMap<String, (u64, LocalEndpoint)>;

static GENERATION: AtomicU64 = AtomicU64::new(1);

// The map stays consistent whatever panicked while holding it: each access is one operation.
fn planes() -> std::sync::RwLockReadGuard<'static, Planes> {
    LOCAL
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn planes_mut() -> std::sync::RwLockWriteGuard<'static, Planes> {
    LOCAL
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves a control plane to this process's clients until the guard drops.
#[must_use = "the plane is served locally only while the guard lives"]
pub struct ServedLocally {
    addr: String,
    generation: u64,
}

/// Lets clients built by [`client`] for `plane`'s address reach it in-process.
pub fn serve_locally(plane: &RunningControlPlane) -> ServedLocally {
    let endpoint = plane.local_endpoint();
    let addr = endpoint.addr().to_string();
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
    planes_mut().insert(addr.clone(), (generation, endpoint));
    ServedLocally { addr, generation }
}

impl Drop for ServedLocally {
    fn drop(&mut self) {
        let mut planes = planes_mut();
        if planes
            .get(&self.addr)
            .is_some_and(|(generation, _)| *generation == self.generation)
        {
            planes.remove(&self.addr);
        }
    }
}

/// A client for `config`: in-process when a control plane of this process serves its address
/// and it authenticates by client certificate or bearer token only, over the network otherwise.
pub fn client(config: Config) -> Result<Client, kube::Error> {
    Connector::for_config(config).map(|connector| connector.client())
}

/// What makes clients for one cluster, kept by those that reach it again and again.
///
/// Every `kube::Client` holds a request buffer (about 10 KB, 20 KB once it has queued 32
/// requests) and a task serving it. An in-process connector keeps only what a client needs to
/// be made (the credentials, the caller they identify), so a client can be made for each use
/// and let go after it; a network connector keeps its one client, whose connection it pools.
#[derive(Clone)]
pub enum Connector {
    /// Clients made anew for each use, reaching a control plane of this process.
    Local {
        transport: LocalTransport,
        namespace: String,
    },
    /// One client shared by every use (its connections are pooled).
    Shared(Client),
    /// One client made from `config` over the network, shared by every use (its connection is
    /// pooled); whoever keeps the connector may keep only `config` while it is unused
    /// ([`Connector::credentials`]) and make the connector again from it.
    Network { client: Client, config: Arc<Config> },
}

/// What fleetform's requests say they come from, as client-go's `kubectl/v1.34.0 (linux/amd64)`:
/// kube-apiserver names the field manager of a write that gives none after the part before the
/// `/` (`fleetform`, not `unknown`), and its audit log the client.
fn user_agent() -> HeaderValue {
    let agent = format!(
        "fleetform/{} ({}/{})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    HeaderValue::from_str(&agent).unwrap_or(HeaderValue::from_static("fleetform"))
}

impl Connector {
    /// The connector for `config`, as [`client`] chooses; its requests carry fleetform's
    /// User-Agent unless `config` names one.
    pub fn for_config(mut config: Config) -> Result<Self, kube::Error> {
        if !config
            .headers
            .iter()
            .any(|(name, _)| name == header::USER_AGENT)
        {
            config.headers.push((header::USER_AGENT, user_agent()));
        }
        match LocalTransport::for_config(&config) {
            Ok(Some(transport)) => Ok(Connector::Local {
                transport,
                namespace: config.default_namespace,
            }),
            Ok(None) => network_client(config.clone()).map(|client| Connector::Network {
                client,
                config: Arc::new(config),
            }),
            Err(message) => Err(kube::Error::Service(message.into())),
        }
    }

    /// A client: a new one for an in-process connector, the shared one otherwise.
    pub fn client(&self) -> Client {
        match self {
            Connector::Local {
                transport,
                namespace,
            } => Client::new(transport.clone(), namespace.as_str()),
            Connector::Shared(client) | Connector::Network { client, .. } => client.clone(),
        }
    }

    /// Whether keeping the connector holds a connection (and a request buffer) open.
    pub fn holds_connection(&self) -> bool {
        matches!(self, Connector::Shared(_) | Connector::Network { .. })
    }

    /// What makes a network connector again ([`Connector::for_config`]) without its client,
    /// connection and buffers; `None` for the others.
    pub fn credentials(&self) -> Option<Arc<Config>> {
        match self {
            Connector::Network { config, .. } => Some(config.clone()),
            Connector::Local { .. } | Connector::Shared(_) => None,
        }
    }
}

/// How long an HTTP/2 connection may carry no frame while a request or watch is open before it
/// is pinged, and how long the ping may go unanswered before the connection counts as dead:
/// client-go's `ReadIdleTimeout` and `PingTimeout` for kube-apiserver.
const HTTP2_PING_AFTER: std::time::Duration = std::time::Duration::from_secs(30);
const HTTP2_PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// How many TLS sessions a network client keeps for resuming: of its one server, a few.
const SESSIONS_KEPT: usize = 4;

/// A client over the network for `config` that speaks HTTP/2 when the API server offers it in
/// the TLS handshake, as client-go does with kube-apiserver (HTTP/1.1 otherwise).
///
/// kube-rs's own stack offers only HTTP/1.1, which holds a connection for every watch: an agent
/// watching its ManagedCluster and renewing its lease held two connections to its hub, the hub
/// one per watch of its loops, and an API server serving a fleet's agents ran out of file
/// descriptors at about half the connections a 10,000-spoke fleet asked for. Over HTTP/2 every
/// request and watch of a client shares one connection. The stack is kube's otherwise (its
/// base URI, authentication, headers, retries and timeouts); clients through a proxy or with
/// exec credentials (whose certificates expire) keep kube's own.
fn network_client(config: Config) -> Result<Client, kube::Error> {
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    use kube::client::ConfigExt;
    use tower::ServiceBuilder;

    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        return Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut tls_config = config.rustls_client_config()?;
    // rustls keeps room for 256 servers' session tickets by default, about 11 KB a client made
    // before any is kept; a client reaches one server. The hub holds a client for each spoke
    // it is at work on: 20 MiB of its heap in a 10,000-spoke lease change.
    tls_config.resumption = rustls::client::Resumption::in_memory_sessions(SESSIONS_KEPT);
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config)
        .https_or_http();
    let tls = match &config.tls_server_name {
        None => tls,
        Some(name) => {
            let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|err| {
                kube::Error::Service(format!("tls-server-name {name:?}: {err}").into())
            })?;
            tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
    };
    let mut connector =
        hyper_timeout::TimeoutConnector::new(tls.enable_all_versions().wrap_connector(http));
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http_client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .http2_keep_alive_interval(HTTP2_PING_AFTER)
        .http2_keep_alive_timeout(HTTP2_PING_TIMEOUT)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| {
            tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry())
        }))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http_client);
    Ok(Client::new(service, config.default_namespace))
}

/// A client from kubeconfig text (at its current context), by [`client`].
pub async fn client_from_kubeconfig(text: &str) -> Result<Client, String> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(text).map_err(|err| err.to_string())?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|err| err.to_string())?;
    client(config).map_err(|err| err.to_string())
}

/// Requests to a control plane of this process, with a network client's credentials.
#[derive(Clone)]
pub struct LocalTransport {
    addr: Arc<str>,
    certificates: Option<Arc<[u8]>>,
    headers: Arc<[(HeaderName, HeaderValue)]>,
    /// The service made for the plane generation it was made for.
    connected: Arc<Mutex<Option<(u64, InProcessService)>>>,
}

impl LocalTransport {
    /// The transport for `config`, `None` when it is for the network; an error when its
    /// credentials cannot be read.
    fn for_config(config: &Config) -> Result<Option<Self>, String> {
        let Some(authority) = config.cluster_url.authority() else {
            return Ok(None);
        };
        if !planes().contains_key(authority.as_str()) {
            return Ok(None);
        }
        let auth = &config.auth_info;
        let network_only = auth.username.is_some()
            || auth.password.is_some()
            || auth.exec.is_some()
            || auth.auth_provider.is_some()
            || auth.impersonate.is_some()
            || auth.impersonate_groups.is_some()
            || config.proxy_url.is_some();
        if network_only {
            return Ok(None);
        }
        let certificates = match (&auth.client_certificate_data, &auth.client_certificate) {
            (Some(data), _) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|err| format!("client-certificate-data is not base64: {err}"))?,
            ),
            (None, Some(path)) => Some(
                std::fs::read(path)
                    .map_err(|err| format!("cannot read client-certificate {path}: {err}"))?,
            ),
            (None, None) => None,
        };
        let token = match (&auth.token, &auth.token_file) {
            (Some(token), _) => Some(secrecy_text(token)),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|err| format!("cannot read token file {path}: {err}"))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        let mut headers = config.headers.clone();
        if let Some(token) = token.filter(|token| !token.is_empty()) {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| "the bearer token is not a valid header value".to_string())?;
            value.set_sensitive(true);
            headers.push((header::AUTHORIZATION, value));
        }
        Ok(Some(LocalTransport {
            addr: Arc::from(authority.as_str()),
            certificates: certificates.map(Arc::from),
            headers: headers.into(),
            connected: Arc::default(),
        }))
    }

    /// The service of the plane now at the address, made anew when the plane changed.
    fn service(&self) -> Result<InProcessService, std::io::Error> {
        let endpoint = planes().get(&*self.addr).cloned();
        let Some((generation, endpoint)) = endpoint.filter(|(_, e)| e.is_serving()) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                format!("no control plane is serving {} in this process", self.addr),
            ));
        };
        let mut connected = self
            .connected
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match &*connected {
            Some((made_for, service)) if *made_for == generation => Ok(service.clone()),
            _ => {
                let service = endpoint.connect(self.certificates.as_deref());
                *connected = Some((generation, service.clone()));
                Ok(service)
            }
        }
    }
}

fn secrecy_text(token: &secrecy::SecretString) -> String {
    use secrecy::ExposeSecret;
    token.expose_secret().to_string()
}

impl tower_service::Service<Request<kube::client::Body>> for LocalTransport {
    type Response = Response<fleetform_controlplane::http::Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<kube::client::Body>) -> Self::Future {
        let service = self.service();
        for (name, value) in self.headers.iter() {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        Box::pin(async move {
            let mut service = service?;
            tower_service::Service::call(&mut service, request)
                .await
                .map_err(BoxError::from)
        })
    }
}
