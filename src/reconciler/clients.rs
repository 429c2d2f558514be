//! Clients for spokes, kept between passes: building one means reading a kubeconfig and a TLS
//! handshake, which a fleet of a thousand spokes should not pay on every pass. A client unused
//! for [`IDLE`] is let go: each holds a request buffer (about 16 KB) and, over the network, a
//! connection, and at a large fleet a settled spoke's passes come minutes apart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::{Client, ResourceExt};

use crate::access::{Access, Reached};
use crate::api::fleet::Spoke;

/// How long a spoke's client is kept unused: longer than a small fleet's resync, so only a
/// large fleet's settled spokes build theirs again.
const IDLE: Duration = Duration::from_secs(90);

/// Spoke clients by spoke name, each with the kubeconfig source it was built from and when it
/// was last used.
pub(crate) struct SpokeClients {
    access: Access,
    cached: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    clients: HashMap<String, Kept<(String, Reached)>>,
    swept: Option<Instant>,
}

/// A kept value and when it was last used.
struct Kept<V> {
    value: V,
    used: Instant,
}

/// Lets go of what was not used within [`IDLE`] before `now`.
fn let_go_idle<V>(kept: &mut HashMap<String, Kept<V>>, now: Instant) {
    kept.retain(|_, kept| now.saturating_duration_since(kept.used) < IDLE);
}

impl SpokeClients {
    pub fn new(access: Access) -> Self {
        SpokeClients {
            access,
            cached: Mutex::default(),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A client for `spoke` and the URL it reaches; `hub` serves a hub-as-spoke and holds
    /// kubeconfig Secrets.
    pub async fn get(&self, spoke: &Spoke, hub: &Client) -> Result<Reached, String> {
        let name = spoke.name_any();
        let source = serde_json::to_string(&spoke.spec.kubeconfig).unwrap_or_default();
        let now = Instant::now();
        {
            let mut cache = self.cache();
            if cache
                .swept
                .is_none_or(|at| now.saturating_duration_since(at) >= IDLE / 3)
            {
                let_go_idle(&mut cache.clients, now);
                cache.swept = Some(now);
            }
            if let Some(kept) = cache.clients.get_mut(&name)
                && kept.value.0 == source
            {
                kept.used = now;
                return Ok(kept.value.1.clone());
            }
        }
        let reached = self
            .access
            .reach_spoke(spoke, hub)
            .await
            .map_err(|err| err.to_string())?;
        self.cache().clients.insert(
            name,
            Kept {
                value: (source, reached.clone()),
                used: now,
            },
        );
        Ok(reached)
    }

    /// Forgets the client of `spoke` (it failed; the next pass builds a new one).
    pub fn forget(&self, spoke: &str) {
        self.cache().clients.remove(spoke);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_unused_for_longer_than_idle_is_let_go() {
        let start = Instant::now();
        let mut kept = HashMap::new();
        for (name, used) in [("busy", start + IDLE), ("idle", start)] {
            kept.insert(name.to_string(), Kept { value: (), used });
        }
        let_go_idle(&mut kept, start + IDLE - Duration::from_secs(1));
        assert_eq!(kept.len(), 2, "both used within IDLE");
        let_go_idle(&mut kept, start + IDLE + Duration::from_secs(1));
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["busy"]);
    }
}
