//! The agent's readiness for its probes: not ready, with the reason, until the agent says it
//! is; served at `/readyz` by the runtime's admin endpoint ([`crate::runtime::admin`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::runtime::admin::{self, Endpoints, Ready};

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
}

impl Ready for Readiness {
    fn readiness(&self) -> Result<String, String> {
        self.lock().clone().map(|()| "serving".to_string())
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
