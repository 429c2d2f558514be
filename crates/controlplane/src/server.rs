//! Starting and stopping a control plane: the builder, the accept loop (HTTPS, or plain
//! HTTP/1.1 and h2c when asked for), graceful shutdown, and the kubeconfig that points clients
//! at it.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use base64::Engine;

use crate::admission::{Admission, AdmissionPlugin};
use crate::api::ApiServer;
use crate::auth::authn::{StaticTokens, TokenFileError};
use crate::auth::ca::{CaError, CertificateAuthority, CertifiedKey};
use crate::auth::tls::{TlsError, TlsSetup};
use crate::conversion::{Converter, Converters};
use crate::http::{Caller, Frontend, Security};
use crate::registry::Registry;
use crate::storage::{
    Backend, Clock, HistoryLimits, StorageError, Store, memory::MemoryBackend,
    sqlite::SqliteBackend,
};
use crate::user::UserInfo;

/// Why a control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Pki(#[from] CaError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot read token file {path}: {source}")]
    TokenFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    TokenFileFormat {
        path: PathBuf,
        source: TokenFileError,
    },
}

/// How a control plane is reached and who may do what.
#[derive(Debug, Clone, PartialEq)]
enum Transport {
    /// Plain HTTP; every request is an administrator.
    InsecureHttp,
    /// TLS with a CA of its own, authentication and RBAC.
    Secure { token_file: Option<PathBuf> },
}

/// Configures a control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneBuilder {
    data_dir: Option<PathBuf>,
    listen: SocketAddr,
    history: HistoryLimits,
    bookmark_every: Duration,
    watch_timeout: Duration,
    transport: Transport,
    cluster_signing_duration: Option<Duration>,
    admission: Admission,
    conversions: Converters,
    controller_backlog: usize,
    workload_controllers: bool,
}

/// Entry point: `ControlPlane::builder()`.
pub struct ControlPlane;

impl ControlPlane {
    pub fn builder() -> ControlPlaneBuilder {
        ControlPlaneBuilder {
            data_dir: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history: HistoryLimits::default(),
            bookmark_every: Duration::from_secs(60),
            watch_timeout: Duration::from_secs(1800),
            transport: Transport::Secure { token_file: None },
            cluster_signing_duration: None,
            admission: Admission::default(),
            conversions: Converters::default(),
            controller_backlog: crate::storage::DEFAULT_BACKLOG,
            workload_controllers: true,
        }
    }
}

impl ControlPlaneBuilder {
    /// Keep state in SQLite under this directory (None: in memory only).
    pub fn data_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.data_dir = dir;
        self
    }
    /// Address to listen on (port 0 picks a free port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }
    /// How long the watch history keeps events for watchers to resume from (unless the
    /// ceiling of [`Self::history_max_bytes`] is reached first); older resourceVersions answer
    /// 410 Expired. Default: 75 s, as kube-apiserver's watch cache.
    pub fn history_window(mut self, window: Duration) -> Self {
        self.history.window = window;
        self
    }
    /// The most bytes of events the watch history holds, whatever their age: a burst of writes
    /// past it lets the oldest go. Default: 256 MiB.
    pub fn history_max_bytes(mut self, bytes: usize) -> Self {
        self.history.max_bytes = bytes;
        self
    }
    /// The clock the watch history ages events by (default: the system's monotonic clock);
    /// tests pass one they advance, so hours of history are data rather than waiting.
    pub fn history_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.history.clock = clock;
        self
    }
    /// How many events the server's own controllers (garbage collector, namespace and CRD
    /// cleanup, CSR signer) may fall behind by before they resync from a full list. Each slot
    /// is held from the start (32 bytes): the default, 65,536, is about a minute at 1,000
    /// writes/s and takes 2 MiB, which a process running thousands of small planes lowers.
    pub fn controller_backlog(mut self, events: usize) -> Self {
        self.controller_backlog = events;
        self
    }
    /// How often watches that allow bookmarks get one.
    /// Runs none of kube-controller-manager's workload controllers (the deployment and
    /// ReplicaSet controllers): the embedder plays them, and kubelet, for the Deployments it
    /// runs itself (`fleetform up` does for agent Deployments), as on a cluster whose
    /// controller manager runs without them. The namespace, garbage-collection, ServiceAccount
    /// and CRD controllers still run.
    pub fn without_workload_controllers(mut self) -> Self {
        self.workload_controllers = false;
        self
    }

    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_every = every;
        self
    }

    /// The longest life of a certificate the CSR signer issues, as kube-controller-manager's
    /// `--cluster-signing-duration`: a CSR asking for more (or for nothing) gets this much, and
    /// it wins over the 600 s floor of `spec.expirationSeconds` so tests can use certificates of
    /// a few seconds. Default: one year, kube-controller-manager's default.
    pub fn cluster_signing_duration(mut self, max: Duration) -> Self {
        self.cluster_signing_duration = Some(max);
        self
    }

    /// Adds an admission plugin (see [`crate::admission`]): it sees every write a client sends,
    /// after the plugins added before it, and may change the object or deny the request.
    pub fn admission(mut self, plugin: Arc<dyn AdmissionPlugin>) -> Self {
        self.admission.register(plugin);
        self
    }

    /// Converts the objects of the CRD named `crd_name` (`plural.group`) between its versions
    /// with `converter` when its `spec.conversion.strategy` is `Webhook`, in place of calling
    /// its webhook (see [`crate::conversion`]).
    pub fn conversion(mut self, crd_name: &str, converter: Arc<dyn Converter>) -> Self {
        self.conversions.register(crd_name, converter);
        self
    }

    /// Serve HTTPS with authentication and RBAC (the default): a CA and serving certificate
    /// are created at first start (in `DIR/pki` when there is a data dir) and
    /// [`RunningControlPlane::kubeconfig`] carries an administrator's client certificate.
    pub fn secure(mut self) -> Self {
        if self.transport == Transport::InsecureHttp {
            self.transport = Transport::Secure { token_file: None };
        }
        self
    }
    /// Serve plain HTTP with no authentication: every client is an administrator. For tests and
    /// tools on loopback; callers should refuse it on other addresses.
    pub fn insecure_http(mut self) -> Self {
        self.transport = Transport::InsecureHttp;
        self
    }
    /// Bearer tokens from a kube-apiserver `--token-auth-file` CSV (implies [`Self::secure`]).
    pub fn token_auth_file(mut self, path: PathBuf) -> Self {
        self.transport = Transport::Secure {
            token_file: Some(path),
        };
        self
    }

    /// Opens storage, binds the port and starts serving.
    pub async fn start(self) -> Result<RunningControlPlane, StartError> {
        let backend: Box<dyn Backend> = match &self.data_dir {
            Some(dir) => Box::new(SqliteBackend::open(dir)?),
            None => Box::new(MemoryBackend),
        };
        let store = Store::open(
            backend,
            self.history.clone(),
            self.data_dir.is_some(),
            self.controller_backlog,
        )?;
        let registry = Arc::new(Registry::with_builtins());
        let api = Arc::new(ApiServer {
            registry,
            store,
            admission: self.admission.clone(),
            conversions: self.conversions.clone(),
        });
        api.restore_crds();
        api.ensure_system_namespaces().await;
        let listener =
            TcpListener::bind(self.listen)
                .await
                .map_err(|source| StartError::Listen {
                    addr: self.listen.to_string(),
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: self.listen.to_string(),
            source,
        })?;
        let secured = match &self.transport {
            Transport::InsecureHttp => None,
            Transport::Secure { token_file } => {
                Some(self.secure_parts(addr, token_file.as_deref())?)
            }
        };
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (security, tls, ca, admin) = match secured {
            Some((s, t, ca, admin)) => (Some(s), Some(t), Some(ca), Some(admin)),
            None => (None, None, None, None),
        };
        crate::controllers::bootstrap(&api, ca.as_ref().map(|ca| ca.cert_pem())).await;
        let tls = tls.map(Arc::new);
        // Tokens are checked only when requests are authenticated, but TokenRequest answers
        // either way; a plain-HTTP server's key lives as long as it does.
        let token_key = Arc::new(match &self.transport {
            Transport::InsecureHttp => crate::auth::ca::load_or_create_token_key(None)?,
            Transport::Secure { .. } => {
                crate::auth::ca::load_or_create_token_key(self.data_dir.as_deref())?
            }
        });
        let fe = Arc::new(Frontend {
            api: api.clone(),
            addr: addr.to_string(),
            shutdown: shutdown_rx.clone(),
            bookmark_every: self.bookmark_every,
            default_watch_timeout: self.watch_timeout,
            security,
            requests: Default::default(),
            token_key: token_key.clone(),
            runtime: tokio::runtime::Handle::current(),
        });
        let controllers = tokio::spawn(crate::controllers::run(
            api.clone(),
            ca.as_ref().map(|ca| ca.cert_pem().to_string()),
            self.workload_controllers,
            shutdown_rx.clone(),
        ));
        let signer = ca.clone().map(|ca| {
            tokio::spawn(crate::auth::csr_signer::run(
                api.clone(),
                ca,
                self.cluster_signing_duration
                    .map(|max| i64::try_from(max.as_secs()).unwrap_or(i64::MAX)),
                shutdown_rx.clone(),
            ))
        });
        let token_controller = tokio::spawn(crate::auth::token_controller::run(
            api.clone(),
            token_key,
            ca.as_ref().map(|ca| ca.cert_pem().to_string()),
            shutdown_rx.clone(),
        ));
        let server = tokio::spawn(serve(listener, fe.clone(), tls.clone(), shutdown_rx));
        Ok(RunningControlPlane {
            fe,
            addr,
            shutdown_tx,
            server: Some(server),
            controllers: Some(controllers),
            token_controller: Some(token_controller),
            signer,
            api,
            ca,
            admin,
            tls,
        })
    }

    fn secure_parts(
        &self,
        addr: SocketAddr,
        token_file: Option<&std::path::Path>,
    ) -> Result<(Security, TlsSetup, Arc<CertificateAuthority>, CertifiedKey), StartError> {
        let tokens = match token_file {
            None => StaticTokens::default(),
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| StartError::TokenFile {
                        path: path.to_path_buf(),
                        source,
                    })?;
                StaticTokens::parse(&text).map_err(|source| StartError::TokenFileFormat {
                    path: path.to_path_buf(),
                    source,
                })?
            }
        };
        let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        if !addr.ip().is_unspecified() {
            hosts.push(addr.ip().to_string());
        }
        let pki = crate::auth::ca::load_or_create(self.data_dir.as_deref(), &hosts)?;
        let tls = TlsSetup::new(&pki)?;
        let now = time::OffsetDateTime::now_utc();
        let admin = pki.ca.issue_client(
            "system:admin",
            &[crate::auth::rbac::SYSTEM_MASTERS],
            now - time::Duration::minutes(5),
            now + time::Duration::days(365),
        )?;
        Ok((
            Security {
                tokens,
                policy: self.admission.policy().clone(),
            },
            tls,
            Arc::new(pki.ca),
            admin,
        ))
    }

    /// Runs a control plane until `signal` resolves, then shuts it down gracefully. `on_start`
    /// receives the running server (for example to write its kubeconfig).
    pub async fn run_until<F, S>(self, signal: S, on_start: F) -> Result<(), StartError>
    where
        S: Future<Output = ()>,
        F: FnOnce(&RunningControlPlane),
    {
        let running = self.start().await?;
        on_start(&running);
        signal.await;
        running.shutdown().await;
        Ok(())
    }
}

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

async fn serve(
    listener: TcpListener,
    fe: Arc<Frontend>,
    tls: Option<Arc<TlsSetup>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let fe = fe.clone();
                let watcher = graceful.watcher();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let Some(tls) = tls else {
                        let caller = Caller::Trusted(UserInfo::anonymous_admin());
                        let _ = watcher.watch(connection(fe, caller, stream)).await;
                        return;
                    };
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
                    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                    let peer = tls.identify(stream.get_ref().1.peer_certificates());
                    let _ = watcher.watch(connection(fe, Caller::Tls(peer), stream)).await;
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(30), graceful.shutdown()).await;
}

/// How many requests and watches one HTTP/2 connection may carry at once: kube-apiserver's
/// `--http2-max-streams-per-connection` default.
const HTTP2_MAX_STREAMS_PER_CONNECTION: u32 = 1000;

/// One HTTP/1.1 or h2 connection answering every request as coming from `caller`.
fn connection<S>(
    fe: Arc<Frontend>,
    caller: Caller,
    stream: S,
) -> impl hyper_util::server::graceful::GracefulConnection
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let fe = fe.clone();
        let caller = caller.clone();
        async move { Ok::<_, std::convert::Infallible>(crate::http::handle(fe, req, caller).await) }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(HTTP2_MAX_STREAMS_PER_CONNECTION);
    builder
        .serve_connection_with_upgrades(TokioIo::new(stream), service)
        .into_owned()
}

/// An in-process transport: a `tower::Service` answering HTTP requests without a socket.
/// Hand it to `kube::Client::new(service, namespace)` to give many clients (for example
/// thousands of simulated agents) one control plane without one TCP connection each.
///
/// Once the control plane has shut down, every request fails as a refused connection would.
#[derive(Clone)]
pub struct InProcessService {
    fe: Arc<Frontend>,
    caller: Caller,
}

impl<B> tower_service::Service<http::Request<B>> for InProcessService
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<crate::http::Body>;
    type Error = std::io::Error;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>,
    >;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let fe = self.fe.clone();
        let caller = self.caller.clone();
        Box::pin(async move {
            let refused = |fe: &Frontend| {
                std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    format!("the control plane at {} has shut down", fe.addr),
                )
            };
            if *fe.shutdown.borrow() {
                return Err(refused(&fe));
            }
            // Handled on the control plane's own runtime, as its network connections are: a
            // process that runs its clients on another runtime tells their work apart.
            let runtime = fe.runtime.clone();
            runtime
                .spawn(crate::http::handle(fe.clone(), req, caller))
                .await
                .map_err(|_| refused(&fe))
        })
    }
}

/// Reaches a control plane from inside its own process, with the credentials a network client
/// would present: what a client certificate names is decided once, when a service is made (as
/// at a TLS handshake, without it), and bearer tokens and impersonation headers are read from
/// each request. Authentication and RBAC apply exactly as over TLS, so a client in the process
/// costs no socket, no handshake and no HTTP framing, and is still only who it says it is.
#[derive(Clone)]
pub struct LocalEndpoint {
    fe: Arc<Frontend>,
    tls: Option<Arc<TlsSetup>>,
}

impl LocalEndpoint {
    /// The address the control plane listens on (what its kubeconfig names).
    pub fn addr(&self) -> &str {
        &self.fe.addr
    }

    /// A service presenting this client certificate chain (PEM, leaf first), or none.
    /// A chain that cannot be read is presented as untrusted, as a TLS peer's would be.
    pub fn connect(&self, client_certificates_pem: Option<&[u8]>) -> InProcessService {
        let caller = match &self.tls {
            // Served without TLS: every client is an administrator, as over plain HTTP.
            None => Caller::Trusted(UserInfo::anonymous_admin()),
            Some(tls) => {
                let chain = client_certificates_pem.map(|pem| {
                    use rustls::pki_types::{CertificateDer, pem::PemObject};
                    CertificateDer::pem_slice_iter(pem)
                        .collect::<Result<Vec<_>, _>>()
                        .unwrap_or_default()
                });
                match chain {
                    Some(chain) if chain.is_empty() => {
                        Caller::Tls(crate::auth::tls::PeerIdentity::Untrusted)
                    }
                    chain => Caller::Tls(tls.identify(chain.as_deref())),
                }
            }
        };
        InProcessService {
            fe: self.fe.clone(),
            caller,
        }
    }

    /// Whether the control plane still answers (it has not shut down).
    pub fn is_serving(&self) -> bool {
        !*self.fe.shutdown.borrow()
    }
}

/// A kubeconfig (JSON, which is YAML) for `url`, trusting `ca` and authenticating with `key`
/// when given.
fn kubeconfig_document(
    url: &str,
    user_name: &str,
    ca: Option<(&CertificateAuthority, &CertifiedKey)>,
) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut cluster = json!({"server": url});
    let mut user = json!({});
    if let Some((ca, key)) = ca {
        cluster["certificate-authority-data"] = json!(b64(ca.cert_pem()));
        user = json!({
            "client-certificate-data": b64(&key.cert_pem),
            "client-key-data": b64(&key.key_pem),
        });
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fleetform", "cluster": cluster}],
        "users": [{"name": user_name, "user": user}],
        "contexts": [{"name": "fleetform", "context": {"cluster": "fleetform", "user": user_name, "namespace": "default"}}],
        "current-context": "fleetform",
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// Kubeconfigs for any user and groups, authenticated by client certificates a control plane's
/// CA issues: how a test or an embedding process runs a component under the identity it has in
/// production rather than as an administrator. Cheap to clone; valid while the CA is.
#[derive(Clone)]
pub struct Identities {
    url: String,
    ca: Arc<CertificateAuthority>,
}

impl std::fmt::Debug for Identities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identities")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Identities {
    /// Identities of the control plane at `url` whose state is in `data_dir`: its CA, read from
    /// `DIR/pki` (what an administrator of a `fleetform controlplane` holds, as a cluster's admin
    /// holds its CA).
    pub fn from_data_dir(url: &str, data_dir: &std::path::Path) -> Result<Self, CaError> {
        let ca = crate::auth::ca::load_ca(data_dir)?;
        Ok(Identities {
            url: url.to_string(),
            ca: Arc::new(ca),
        })
    }

    /// A kubeconfig authenticating as `user` in `groups` (everyone is also in
    /// `system:authenticated`) with a certificate issued now and valid for a year, or as long as
    /// the CA. A ServiceAccount is user `system:serviceaccount:<namespace>:<name>` in groups
    /// `system:serviceaccounts` and `system:serviceaccounts:<namespace>`, as RBAC sees it.
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> Result<String, CaError> {
        let now = time::OffsetDateTime::now_utc();
        let key = self.ca.issue_client(
            user,
            groups,
            now - time::Duration::minutes(5),
            now + time::Duration::days(365),
        )?;
        Ok(kubeconfig_document(&self.url, user, Some((&self.ca, &key))))
    }

    /// [`Self::kubeconfig_for`] the ServiceAccount `namespace`/`name`.
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, CaError> {
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let in_namespace = format!("system:serviceaccounts:{namespace}");
        self.kubeconfig_for(&user, &["system:serviceaccounts", &in_namespace])
    }
}

/// A control plane serving on a port.
pub struct RunningControlPlane {
    fe: Arc<Frontend>,
    addr: SocketAddr,
    shutdown_tx: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    controllers: Option<JoinHandle<()>>,
    token_controller: Option<JoinHandle<()>>,
    signer: Option<JoinHandle<()>>,
    api: Arc<ApiServer>,
    ca: Option<Arc<CertificateAuthority>>,
    admin: Option<CertifiedKey>,
    tls: Option<Arc<TlsSetup>>,
}

impl RunningControlPlane {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A transport reaching this control plane without a socket (see [`InProcessService`]).
    pub fn in_process_service(&self) -> InProcessService {
        InProcessService {
            fe: self.fe.clone(),
            caller: Caller::Trusted(UserInfo::anonymous_admin()),
        }
    }

    /// The in-process endpoint through which clients in this process reach the control plane
    /// with their own credentials (see [`LocalEndpoint`]).
    pub fn local_endpoint(&self) -> LocalEndpoint {
        LocalEndpoint {
            fe: self.fe.clone(),
            tls: self.tls.clone(),
        }
    }

    /// `https://127.0.0.1:PORT`, or `http://` when serving insecure HTTP.
    pub fn url(&self) -> String {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The CA clients trust and CSRs are signed by (None when serving insecure HTTP).
    pub fn certificate_authority(&self) -> Option<&CertificateAuthority> {
        self.ca.as_deref()
    }

    /// A kubeconfig (JSON, which is YAML) pointing at this server; when secure it trusts the
    /// CA and authenticates as an administrator (group `system:masters`) by client certificate.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_with("admin", self.admin.as_ref())
    }

    /// Issues kubeconfigs for any identity this server authenticates (see [`Identities`]);
    /// `None` when serving insecure HTTP, where every client is an administrator.
    pub fn identities(&self) -> Option<Identities> {
        Some(Identities {
            url: self.url(),
            ca: self.ca.clone()?,
        })
    }

    fn kubeconfig_with(&self, user_name: &str, key: Option<&CertifiedKey>) -> String {
        let ca = self.ca.as_deref().zip(key);
        kubeconfig_document(&self.url(), user_name, ca)
    }

    /// The resource requests received so far, by verb and resource (for benchmarks, tests and
    /// diagnostics).
    pub fn request_counts(&self) -> crate::requests::RequestCounts {
        self.fe.requests.snapshot()
    }

    /// The resource requests of `user` received so far (see [`Self::request_counts`]).
    pub fn request_counts_of(&self, user: &str) -> crate::requests::RequestCounts {
        self.fe.requests.snapshot_of(user)
    }

    /// The current resourceVersion (for tests and diagnostics).
    pub fn resource_version(&self) -> i64 {
        self.api.store.current_rv()
    }

    /// Stops accepting, ends watches, lets in-flight requests finish.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(s) = self.server.take() {
            let _ = s.await;
        }
        if let Some(c) = self.controllers.take() {
            let _ = c.await;
        }
        if let Some(s) = self.signer.take() {
            let _ = s.await;
        }
        if let Some(t) = self.token_controller.take() {
            let _ = t.await;
        }
        let store = self.api.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.close()).await;
    }
}

impl Drop for RunningControlPlane {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}
