//! Starting and stopping a control plane: the builder, the accept loop (HTTP/1.1 and h2c on one
//! port), graceful shutdown, and the kubeconfig that points clients at it.

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

use crate::api::{ApiServer, UserInfo};
use crate::http::Frontend;
use crate::registry::Registry;
use crate::storage::{Backend, StorageError, Store, memory::MemoryBackend, sqlite::SqliteBackend};

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
}

/// Configures a control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneBuilder {
    data_dir: Option<PathBuf>,
    listen: SocketAddr,
    history_window: usize,
    bookmark_every: Duration,
    watch_timeout: Duration,
}

/// Entry point: `ControlPlane::builder()`.
pub struct ControlPlane;

impl ControlPlane {
    pub fn builder() -> ControlPlaneBuilder {
        ControlPlaneBuilder {
            data_dir: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_window: 10_000,
            bookmark_every: Duration::from_secs(60),
            watch_timeout: Duration::from_secs(1800),
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
    /// How many events the watch history keeps before older resourceVersions expire.
    pub fn history_window(mut self, events: usize) -> Self {
        self.history_window = events;
        self
    }
    /// How often watches that allow bookmarks get one.
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_every = every;
        self
    }

    /// Opens storage, binds the port and starts serving.
    pub async fn start(self) -> Result<RunningControlPlane, StartError> {
        let backend: Box<dyn Backend> = match &self.data_dir {
            Some(dir) => Box::new(SqliteBackend::open(dir)?),
            None => Box::new(MemoryBackend),
        };
        let store = Store::open(backend, self.history_window, self.data_dir.is_some())?;
        let registry = Arc::new(Registry::with_builtins());
        let api = Arc::new(ApiServer { registry, store });
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
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let fe = Arc::new(Frontend {
            api: api.clone(),
            addr: addr.to_string(),
            shutdown: shutdown_rx.clone(),
            bookmark_every: self.bookmark_every,
            default_watch_timeout: self.watch_timeout,
        });
        let controllers = tokio::spawn(crate::controllers::run(api.clone(), shutdown_rx.clone()));
        let server = tokio::spawn(serve(listener, fe.clone(), shutdown_rx));
        Ok(RunningControlPlane {
            fe,
            addr,
            shutdown_tx,
            server: Some(server),
            controllers: Some(controllers),
            api,
        })
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

async fn serve(listener: TcpListener, fe: Arc<Frontend>, mut shutdown: watch::Receiver<bool>) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let fe = fe.clone();
                let service = hyper::service::service_fn(move |req| {
                    let fe = fe.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            crate::http::handle(fe, req, UserInfo::anonymous_admin()).await,
                        )
                    }
                });
                let builder = auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                let conn = graceful.watch(conn.into_owned());
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(30), graceful.shutdown()).await;
}

/// An in-process transport: a `tower::Service` answering HTTP requests without a socket.
/// Hand it to `kube::Client::new(service, namespace)` to give many clients (for example
/// thousands of simulated agents) one control plane without one TCP connection each.
#[derive(Clone)]
pub struct InProcessService {
    fe: Arc<Frontend>,
}

impl<B> tower_service::Service<http::Request<B>> for InProcessService
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<crate::http::Body>;
    type Error = std::convert::Infallible;
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
        Box::pin(async move { Ok(crate::http::handle(fe, req, UserInfo::anonymous_admin()).await) })
    }
}

/// A control plane serving on a port.
pub struct RunningControlPlane {
    fe: Arc<Frontend>,
    addr: SocketAddr,
    shutdown_tx: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    controllers: Option<JoinHandle<()>>,
    api: Arc<ApiServer>,
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
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig (JSON, which is YAML) pointing at this server.
    pub fn kubeconfig(&self) -> String {
        let doc = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fleetform", "cluster": {"server": self.url()}}],
            "users": [{"name": "admin", "user": {}}],
            "contexts": [{"name": "fleetform", "context": {"cluster": "fleetform", "user": "admin", "namespace": "default"}}],
            "current-context": "fleetform",
        });
        serde_json::to_string_pretty(&doc).unwrap_or_default()
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
        let store = self.api.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.close()).await;
    }
}

impl Drop for RunningControlPlane {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}
