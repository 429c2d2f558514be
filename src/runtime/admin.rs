//! A process's admin endpoint, one address for its probes and its scraper: `/healthz` (and
//! `/livez`) answer while the process serves, `/readyz` once the component says it is ready (503
//! with the reason before), `/metrics` its Prometheus registry in the text format, when it has
//! one.
//!
//! [`Ready`] is what a component says about itself; [`LeaderReadiness`] is the one of a
//! leader-elected component: a follower is ready at once (it serves what every replica serves),
//! the leader once its work is under way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Whether a component is ready to serve, and why not.
pub trait Ready: Send + Sync + 'static {
    /// `Ok` with what it does when ready, `Err` with why not.
    fn readiness(&self) -> Result<String, String>;
}

const UNDECIDED: u8 = 0;
const FOLLOWER: u8 = 1;
const LEADER: u8 = 2;
const LEADER_READY: u8 = 3;

/// Where a leader-elected replica stands, for `/readyz`.
#[derive(Debug)]
pub struct LeaderReadiness {
    standing: AtomicU8,
    /// What a leader has not done yet while it is not ready (`the first sync`).
    first_work: &'static str,
}

impl LeaderReadiness {
    /// Undecided (not ready) until the election's first round; a leader is ready once
    /// `first_work` is done (see [`LeaderReadiness::work_done`]).
    pub fn new(first_work: &'static str) -> Arc<Self> {
        Arc::new(LeaderReadiness {
            standing: AtomicU8::new(UNDECIDED),
            first_work,
        })
    }

    /// The election says whether we lead.
    pub fn set_leader(&self, leader: bool) {
        self.standing
            .store(if leader { LEADER } else { FOLLOWER }, Ordering::SeqCst);
    }

    /// The leader's first work is done; nothing when it no longer leads.
    pub fn work_done(&self) {
        let _ = self.standing.compare_exchange(
            LEADER,
            LEADER_READY,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }

    /// A follower, or a leader whose first work is done.
    pub fn is_ready(&self) -> bool {
        self.readiness().is_ok()
    }
}

impl Ready for LeaderReadiness {
    fn readiness(&self) -> Result<String, String> {
        match self.standing.load(Ordering::SeqCst) {
            UNDECIDED => Err("waiting for the leader election".to_string()),
            FOLLOWER => Ok("following the leader".to_string()),
            LEADER => Err(format!("leading; {} is not done yet", self.first_work)),
            _ => Ok("leading".to_string()),
        }
    }
}

/// What the endpoint serves besides `/healthz`.
#[derive(Clone)]
pub struct Endpoints {
    /// Answers `/readyz`.
    pub ready: Arc<dyn Ready>,
    /// Served at `/metrics`; `None`: 404 there.
    pub metrics: Option<Arc<Registry>>,
}

/// The admin endpoint could not listen.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve /metrics, /healthz and /readyz on {addr}: {source}")]
pub struct AdminError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

/// Serves a component's `/metrics` (from `registry`), `/healthz` and `/readyz` (from `ready`)
/// at `addr` until `stop`, and says where; `None` for either: not served.
pub async fn serve_component(
    addr: Option<SocketAddr>,
    ready: Arc<dyn Ready>,
    registry: Registry,
    stop: CancellationToken,
) -> Result<Option<SocketAddr>, AdminError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let endpoints = Endpoints {
        ready,
        metrics: Some(Arc::new(registry)),
    };
    let bound = serve(addr, endpoints, stop)
        .await
        .map_err(|source| AdminError { addr, source })?;
    info!(%bound, "serving /metrics, /healthz and /readyz");
    Ok(Some(bound))
}

/// Binds `addr` and serves `endpoints` there until `stop`; the bound address is returned (port
/// 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    endpoints: Endpoints,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(super::http::serve(
        "admin endpoint",
        listener,
        stop,
        move |request| {
            let response = respond(request.uri().path(), &endpoints);
            async move { response }
        },
    ));
    Ok(bound)
}

const TEXT: &str = "text/plain; charset=utf-8";

fn respond(path: &str, endpoints: &Endpoints) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (path, &endpoints.metrics) {
        ("/metrics", Some(registry)) => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            encode(registry),
        ),
        ("/healthz" | "/livez", _) => (StatusCode::OK, TEXT, "ok\n".to_string()),
        ("/readyz", _) => match endpoints.ready.readiness() {
            Ok(what) => (StatusCode::OK, TEXT, format!("ready: {what}\n")),
            Err(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                TEXT,
                format!("not ready: {why}\n"),
            ),
        },
        _ => (
            StatusCode::NOT_FOUND,
            TEXT,
            format!(
                "not found: try {}/healthz or /readyz\n",
                if endpoints.metrics.is_some() {
                    "/metrics, "
                } else {
                    ""
                }
            ),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}

/// The registry's metrics in Prometheus' text format.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_is_ready_only_after_its_first_work_and_a_follower_at_once() {
        let readiness = LeaderReadiness::new("the first sync");
        assert!(!readiness.is_ready());
        readiness.set_leader(false);
        assert!(readiness.is_ready());
        readiness.set_leader(true);
        assert_eq!(
            readiness.readiness(),
            Err("leading; the first sync is not done yet".to_string())
        );
        readiness.work_done();
        assert!(readiness.is_ready());
        let endpoints = Endpoints {
            ready: readiness.clone(),
            metrics: None,
        };
        assert_eq!(respond("/readyz", &endpoints).status(), StatusCode::OK);
        assert_eq!(
            respond("/metrics", &endpoints).status(),
            StatusCode::NOT_FOUND
        );
        readiness.set_leader(false);
        readiness.set_leader(true);
        assert!(!readiness.is_ready(), "a new term is not ready at once");
    }
}
