//! Clients for spokes, kept between passes: building one means reading a kubeconfig and a TLS
//! handshake, which a fleet of a thousand spokes should not pay on every pass.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::{Client, ResourceExt};

use crate::access::{Access, Reached};
use crate::api::fleet::Spoke;

/// Spoke clients by spoke name, each with the kubeconfig source it was built from.
pub(crate) struct SpokeClients {
    access: Access,
    cached: Mutex<HashMap<String, (String, Reached)>>,
}

impl SpokeClients {
    pub fn new(access: Access) -> Self {
        SpokeClients {
            access,
            cached: Mutex::new(HashMap::new()),
        }
    }

    /// A client for `spoke` and the URL it reaches; `hub` serves a hub-as-spoke and holds
    /// kubeconfig Secrets.
    pub async fn get(&self, spoke: &Spoke, hub: &Client) -> Result<Reached, String> {
        let name = spoke.name_any();
        let source = serde_json::to_string(&spoke.spec.kubeconfig).unwrap_or_default();
        if let Ok(cached) = self.cached.lock()
            && let Some((built_from, client)) = cached.get(&name)
            && *built_from == source
        {
            return Ok(client.clone());
        }
        let reached = self
            .access
            .reach_spoke(spoke, hub)
            .await
            .map_err(|err| err.to_string())?;
        if let Ok(mut cached) = self.cached.lock() {
            cached.insert(name, (source, reached.clone()));
        }
        Ok(reached)
    }

    /// Forgets the client of `spoke` (it failed; the next pass builds a new one).
    pub fn forget(&self, spoke: &str) {
        if let Ok(mut cached) = self.cached.lock() {
            cached.remove(spoke);
        }
    }
}
