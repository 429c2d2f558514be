//! The agent's readiness for its probes: not ready, with the reason, until the agent says it
//! is; served at `/readyz` by the runtime's admin endpoint ([`crate::runtime::admin`]), and
//! followed by `fleetform up`'s kubelet stand-in, which rolls an agent Deployment as a kubelet
//! and the deployment controller would by it ([`Readiness::changes`]).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::runtime::admin::{self, Endpoints, Ready};

/// Whether a component is ready, and why not.
#[derive(Debug)]
pub struct Readiness(watch::Sender<Result<(), String>>);

impl Readiness {
    /// Not ready, for `why`.
    pub fn new(why: impl Into<String>) -> Arc<Self> {
        Arc::new(Readiness(watch::Sender::new(Err(why.into()))))
    }

    pub fn set_ready(&self) {
        self.set(Ok(()));
    }

    pub fn set_not_ready(&self, why: impl Into<String>) {
        self.set(Err(why.into()));
    }

    fn set(&self, now: Result<(), String>) {
        self.0.send_if_modified(|current| {
            let changed = current.is_ok() != now.is_ok();
            *current = now;
            changed
        });
    }

    /// Whether it is ready now, and every time that changes.
    pub fn changes(&self) -> watch::Receiver<Result<(), String>> {
        self.0.subscribe()
    }
}

impl Ready for Readiness {
    fn readiness(&self) -> Result<String, String> {
        self.0.borrow().clone().map(|()| "serving".to_string())
    }
}

/// Binds `addr` and serves the endpoint until `stop`; the bound address is returned (port 0
/// picks one).
pub async fn serve(
    addr: SocketAddr,
    readiness: Arc<Readiness>,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let endpoints = Endpoints {
        ready: readiness,
        metrics: None,
    };
    admin::serve(addr, endpoints, stop).await
}
