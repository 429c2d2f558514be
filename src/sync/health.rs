//! The controller's HTTP endpoint: `/metrics` (Prometheus text format), `/healthz` (the process
//! answers) and `/readyz` (a follower is ready at once; the leader once it has finished a sync).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::metrics::Metrics;

const UNDECIDED: u8 = 0;
const FOLLOWER: u8 = 1;
const LEADER: u8 = 2;
const LEADER_SYNCED: u8 = 3;

/// Where the replica stands, for `/readyz`.
#[derive(Debug, Default)]
pub struct Readiness(AtomicU8);

impl Readiness {
    /// The election says whether we lead.
    pub fn set_leader(&self, leader: bool) {
        self.0
            .store(if leader { LEADER } else { FOLLOWER }, Ordering::SeqCst);
    }

    /// The leader finished a sync.
    pub fn synced(&self) {
        let _ = self
            .0
            .compare_exchange(LEADER, LEADER_SYNCED, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// A follower, or a leader that finished a sync.
    pub fn is_ready(&self) -> bool {
        matches!(self.0.load(Ordering::SeqCst), FOLLOWER | LEADER_SYNCED)
    }

    fn describe(&self) -> &'static str {
        match self.0.load(Ordering::SeqCst) {
            UNDECIDED => "waiting for the leader election",
            FOLLOWER => "ready: following the leader",
            LEADER => "leading; the first sync has not finished yet",
            _ => "ready: leading and synced",
        }
    }
}

/// Serves the endpoint on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    stop: CancellationToken,
) {
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    debug!(%err, "metrics endpoint: accept failed");
                    continue;
                }
            },
        };
        let metrics = metrics.clone();
        let readiness = readiness.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let response = respond(request.uri().path(), &metrics, &readiness);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = stop.cancelled() => {}
                served = connection => if let Err(err) = served {
                    debug!(%peer, %err, "metrics endpoint: connection failed");
                },
            }
        });
    }
}

fn respond(path: &str, metrics: &Metrics, readiness: &Readiness) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        "/readyz" => (
            if readiness.is_ready() {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            },
            "text/plain",
            format!("{}\n", readiness.describe()),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /metrics, /healthz or /readyz\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_is_ready_only_after_its_first_sync_and_a_follower_at_once() {
        let readiness = Readiness::default();
        assert!(!readiness.is_ready());
        readiness.set_leader(false);
        assert!(readiness.is_ready());
        readiness.set_leader(true);
        assert!(!readiness.is_ready());
        readiness.synced();
        assert!(readiness.is_ready());
        assert_eq!(
            respond("/readyz", &Metrics::default(), &readiness).status(),
            StatusCode::OK
        );
    }
}
