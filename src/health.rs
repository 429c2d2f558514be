//! A process's health endpoint for its probes: `/healthz` answers while the process serves,
//! `/readyz` once the component says it is ready (503 with the reason before).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// Whether a component is ready, and why not.
#[derive(Debug)]
pub struct Readiness(Mutex<Result<(), String>>);

impl Readiness {
    /// Not ready, for `why`.
    pub fn new(why: impl Into<String>) -> Arc<Self> {
        Arc::new(Readiness(Mutex::new(Err(why.into()))))
    }

    pub fn set_ready(&self) {
        *self.lock() = Ok(());
    }

    pub fn set_not_ready(&self, why: impl Into<String>) {
        *self.lock() = Err(why.into());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Result<(), String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn answer(&self) -> (StatusCode, String) {
        match &*self.lock() {
            Ok(()) => (StatusCode::OK, "ok\n".to_string()),
            Err(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        }
    }
}

/// Binds `addr` and serves the endpoint until `stop`; the bound address is returned (port 0
/// picks one).
pub async fn serve(
    addr: SocketAddr,
    readiness: Arc<Readiness>,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = stop.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(err) => {
                        debug!(%err, "health endpoint: accept failed");
                        continue;
                    }
                },
            };
            let readiness = readiness.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let (status, body) = match request.uri().path() {
                        "/healthz" | "/livez" => (StatusCode::OK, "ok\n".to_string()),
                        "/readyz" => readiness.answer(),
                        _ => (StatusCode::NOT_FOUND, "not found\n".to_string()),
                    };
                    let response = Response::builder()
                        .status(status)
                        .header("content-type", "text/plain; charset=utf-8")
                        .body(Full::new(Bytes::from(body)));
                    async move {
                        Ok::<_, Infallible>(response.unwrap_or_else(|_| {
                            Response::new(Full::new(Bytes::from_static(b"error\n")))
                        }))
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                if let Err(err) = connection.await {
                    debug!(%err, "health endpoint: connection ended");
                }
            });
        }
    });
    Ok(bound)
}
