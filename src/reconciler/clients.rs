//! Clients for spokes, made from what is kept between passes: reaching a spoke means reading a
//! kubeconfig and checking its credentials (a TLS handshake over the network), which a fleet
//! of a thousand spokes should not pay on every pass.
//!
//! What is kept differs by how the spoke is reached ([`crate::transport::Connector`]). A spoke
//! of this process keeps only its credentials and identity (about 1 KB), for [`IDLE_LOCAL`],
//! and each pass gets a client of its own, let go after the pass: a kube client holds a request
//! buffer of 10 to 20 KB, 100 to 200 MiB at 10,000 spokes if every spoke kept one. A spoke over
//! the network keeps its client, which pools its connection, for [`IDLE`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::{Client, ResourceExt};

use crate::access::{Access, Reached};
use crate::api::fleet::Spoke;

/// How long a spoke's network client (and its connection) is kept unused: longer than a small
/// fleet's resync, so only a large fleet's settled spokes connect again.
const IDLE: Duration = Duration::from_secs(90);

/// How long an in-process spoke's connector is kept unused; it holds no connection, so only a
/// spoke gone from the fleet (or whose passes stopped) lets it go.
const IDLE_LOCAL: Duration = Duration::from_secs(15 * 60);

/// How each spoke is reached, by spoke name, with the kubeconfig source it was reached by and
/// when it was last used.
pub(crate) struct SpokeClients {
    access: Access,
    cached: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    /// How each spoke is reached, with the kubeconfig source (serialised) it was reached by.
    reached: HashMap<String, Kept<(String, Reached)>>,
    swept: Option<Instant>,
}

/// A kept value and when it was last used.
struct Kept<V> {
    value: V,
    used: Instant,
}

/// How long what reaches a spoke is kept unused: a connection for [`IDLE`], credentials for
/// [`IDLE_LOCAL`].
fn idle_time((_, reached): &(String, Reached)) -> Duration {
    if reached.connector.holds_connection() {
        IDLE
    } else {
        IDLE_LOCAL
    }
}

/// Lets go of what was not used within its `idle` time before `now`.
fn let_go_idle<V>(
    kept: &mut HashMap<String, Kept<V>>,
    now: Instant,
    idle: impl Fn(&V) -> Duration,
) {
    kept.retain(|_, kept| now.saturating_duration_since(kept.used) < idle(&kept.value));
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

    /// How `spoke` is reached (its clients, the URL they reach); `hub` serves a hub-as-spoke and holds
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
                let_go_idle(&mut cache.reached, now, idle_time);
                cache.swept = Some(now);
            }
            if let Some(kept) = cache.reached.get_mut(&name)
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
        self.cache().reached.insert(
            name,
            Kept {
                value: (source, reached.clone()),
                used: now,
            },
        );
        Ok(reached)
    }

    /// Forgets how `spoke` is reached (it failed; the next pass reads its kubeconfig again).
    pub fn forget(&self, spoke: &str) {
        self.cache().reached.remove(spoke);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_unused_for_longer_than_its_idle_time_is_let_go() {
        let start = Instant::now();
        let mut kept = HashMap::new();
        for (name, used, idle) in [
            ("busy", start + IDLE_LOCAL, IDLE),
            ("idle", start, IDLE),
            ("local", start, IDLE_LOCAL),
        ] {
            kept.insert(name.to_string(), Kept { value: idle, used });
        }
        let idle = |idle: &Duration| *idle;
        let_go_idle(&mut kept, start + IDLE - Duration::from_secs(1), idle);
        assert_eq!(kept.len(), 3, "all used within IDLE");
        let_go_idle(&mut kept, start + IDLE + Duration::from_secs(1), idle);
        let mut names: Vec<_> = kept.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["busy", "local"]);
        let_go_idle(&mut kept, start + IDLE_LOCAL + Duration::from_secs(1), idle);
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["busy"]);
    }
}
