//! Clients for spokes, made from what is kept between passes: reaching a spoke means reading a
//! kubeconfig and checking its credentials (a TLS handshake over the network), which a fleet
//! of a thousand spokes should not pay on every pass.
//!
//! What is kept differs by how the spoke is reached ([`crate::transport::Connector`]). A spoke
//! of this process keeps only its credentials and identity (about 1 KB), for [`IDLE_LOCAL`],
//! and each pass gets a client of its own, let go after the pass: a kube client holds a request
//! buffer of 10 to 20 KB, 100 to 200 MiB at 10,000 spokes if every spoke kept one. A spoke over
//! the network keeps its client, which pools its connection, while its passes come one after
//! the other (a join's), and lets it go after [`IDLE`] unused: a client with its connection
//! held about 45 KB of the hub's heap (its request queue, the connection's queue and buffers,
//! TLS state), 450 MB at 10,000 settled spokes; a settled spoke's look again connects anew
//! (one TLS handshake), and a pass that settles lets its client go at once
//! ([`SpokeClients::not_needed_for`]). Its credentials stay for [`IDLE_LOCAL`], so that its kubeconfig is not
//! read again.
//!
//! Kept too: when a pass last read a spoke and found its agent settled, and what that read
//! depended on ([`SpokeClients::settled_within`]), so that a pass woken by a change on the hub
//! need not read the spoke again; and which agent Deployment a read (or an install) last found
//! needing nothing ([`SpokeClients::known_unedited`]), so that the next read need not ask the
//! spoke so with a dry run of the whole Deployment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::{Client, Config, ResourceExt};

use crate::access::{Access, KubeconfigOrigin, Reached};
use crate::api::fleet::Spoke;
use crate::transport::Connector;

/// How long a spoke's network client (and its connection) is kept unused: longer than the
/// pauses between a joining spoke's passes, shorter than a settled spoke's look again.
const IDLE: Duration = Duration::from_secs(15);

/// How long the credentials a spoke is reached with are kept unused (an in-process spoke's
/// connector, which holds no connection; a network spoke's kubeconfig, its client let go): so
/// only a spoke gone from the fleet (or whose passes stopped) lets them go.
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
    reached: HashMap<String, Kept<(String, Way)>>,
    /// A digest of what the read that last found each spoke's agent settled depended on, by
    /// spoke, kept from when that read was.
    settled: HashMap<String, Kept<u64>>,
    /// The agent Deployment each spoke's last read (or install) found needing nothing of what
    /// the fleet wanted, by spoke: a digest of its uid, generation and the Deployment wanted,
    /// kept from when it was last found so.
    unedited: HashMap<String, Kept<u64>>,
    swept: Option<Instant>,
}

/// A kept value and when it was last used.
struct Kept<V> {
    value: V,
    used: Instant,
}

impl<V> Kept<V> {
    /// `value`, used now.
    fn now(value: V) -> Self {
        Kept {
            value,
            used: Instant::now(),
        }
    }
}

/// How a spoke is reached, as kept.
enum Way {
    /// By this connector, as it was made.
    Connected(Reached),
    /// Over the network, its client and connection let go: what makes them again.
    LetGo {
        config: Arc<Config>,
        url: Option<String>,
        origin: KubeconfigOrigin,
    },
}

impl Way {
    /// How long it is kept unused before it is let go ([`Way::let_go`]).
    fn idle_time(&self) -> Duration {
        match self {
            Way::Connected(reached) if reached.connector.holds_connection() => IDLE,
            Way::Connected(_) | Way::LetGo { .. } => IDLE_LOCAL,
        }
    }

    /// Lets go of what it holds once unused for its idle time: a network connector keeps its
    /// credentials (`true`); the others keep nothing (`false`: it goes).
    fn let_go(&mut self) -> bool {
        let Way::Connected(reached) = self else {
            return false;
        };
        let Some(config) = reached.connector.credentials() else {
            return false;
        };
        *self = Way::LetGo {
            config,
            url: reached.url.take(),
            origin: reached.origin.clone(),
        };
        true
    }

    /// The URL of the spoke's API server as it was reached (`None`: a hub-as-spoke, reached
    /// with the hub's own client), kept or not.
    fn url(&self) -> Option<&str> {
        match self {
            Way::Connected(reached) => reached.url.as_deref(),
            Way::LetGo { url, .. } => url.as_deref(),
        }
    }

    /// The spoke reached this way, connected again from kept credentials if they were let go.
    fn reach(&mut self) -> Result<Reached, kube::Error> {
        let reached = match self {
            Way::Connected(reached) => return Ok(reached.clone()),
            Way::LetGo {
                config,
                url,
                origin,
            } => Reached {
                connector: Connector::for_config((**config).clone())?,
                url: url.clone(),
                origin: origin.clone(),
            },
        };
        *self = Way::Connected(reached.clone());
        Ok(reached)
    }
}

/// Lets go of what was not used within its idle time before `now`: `let_go` keeps what is kept
/// of it then (`false`: nothing), itself let go once unused past its own idle time.
fn let_go_idle<V>(
    kept: &mut HashMap<String, Kept<V>>,
    now: Instant,
    idle: impl Fn(&V) -> Duration,
    let_go: impl Fn(&mut V) -> bool,
) {
    kept.retain(|_, kept| {
        still_kept(
            &mut kept.value,
            now.saturating_duration_since(kept.used),
            &idle,
            &let_go,
        )
    });
}

/// Whether `value`, unused for `unused`, is kept: within its idle time as it is, past it once
/// `let_go` has let go of what it holds (`false`: nothing is kept) and within its idle time
/// after that.
fn still_kept<V>(
    value: &mut V,
    unused: Duration,
    idle: impl Fn(&V) -> Duration,
    let_go: impl Fn(&mut V) -> bool,
) -> bool {
    unused < idle(value) || (let_go(value) && unused < idle(value))
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
                let_go_idle(
                    &mut cache.reached,
                    now,
                    |(_, way)| way.idle_time(),
                    |(_, way)| way.let_go(),
                );
                let young = |_: &String, kept: &mut Kept<u64>| {
                    now.saturating_duration_since(kept.used) < IDLE_LOCAL
                };
                cache.settled.retain(young);
                cache.unedited.retain(young);
                cache.swept = Some(now);
            }
            if let Some(kept) = cache.reached.get_mut(&name)
                && kept.value.0 == source
            {
                // Credentials that made a client once make one again; should they not, the
                // kubeconfig is read again below.
                if let Ok(reached) = kept.value.1.reach() {
                    kept.used = now;
                    return Ok(reached);
                }
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
                value: (source, Way::Connected(reached.clone())),
                used: now,
            },
        );
        Ok(reached)
    }

    /// What [`SpokeClients::get`] would give as the URL of `spoke`'s API server
    /// (`Some(None)`: none, a hub-as-spoke), without making a client: kept from the last time it was
    /// reached by the kubeconfig it has now; `None` when nothing is kept for that.
    pub fn kept_url(&self, spoke: &Spoke) -> Option<Option<String>> {
        let source = serde_json::to_string(&spoke.spec.kubeconfig).unwrap_or_default();
        let cache = self.cache();
        let (kept_source, way) = &cache.reached.get(spoke.name_any().as_str())?.value;
        (*kept_source == source).then(|| way.url().map(str::to_string))
    }

    /// `spoke`'s next pass comes no sooner than `after`: a client it would keep unused longer
    /// than its idle time is let go now, not at a sweep that many passes of other spokes may
    /// follow (its credentials stay). In a lease change of 10,000 settled spokes the hub held
    /// the clients of every spoke of the last 15 s, not only of the passes at work.
    pub fn not_needed_for(&self, spoke: &str, after: Duration) {
        let mut cache = self.cache();
        if let Some(kept) = cache.reached.get_mut(spoke)
            && !still_kept(
                &mut kept.value,
                after,
                |(_, way)| way.idle_time(),
                |(_, way)| way.let_go(),
            )
        {
            cache.reached.remove(spoke);
        }
    }

    /// Forgets how `spoke` is reached (it failed; the next pass reads its kubeconfig again).
    pub fn forget(&self, spoke: &str) {
        let mut cache = self.cache();
        cache.reached.remove(spoke);
        cache.settled.remove(spoke);
    }

    /// Whether a read less than `within` ago found `spoke`'s agent settled, depending on what
    /// `depends` digests.
    pub fn settled_within(&self, spoke: &str, depends: u64, within: Duration) -> bool {
        self.cache()
            .settled
            .get(spoke)
            .is_some_and(|read| read.value == depends && read.used.elapsed() < within)
    }

    /// A read now found `spoke`'s agent settled, depending on what `depends` digests.
    pub fn saw_settled(&self, spoke: &str, depends: u64) {
        self.cache()
            .settled
            .insert(spoke.to_string(), Kept::now(depends));
    }

    /// Whether `spoke`'s agent Deployment, as `seen` digests it (see
    /// [`super::facts::unedited_key`]), was found needing nothing before: a Deployment's
    /// generation moves with every change of its spec, so the same uid and generation with the
    /// same Deployment wanted give the same answer a dry run gave then.
    pub fn known_unedited(&self, spoke: &str, seen: u64) -> bool {
        let mut cache = self.cache();
        match cache.unedited.get_mut(spoke) {
            Some(known) if known.value == seen => {
                known.used = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// `spoke`'s agent Deployment, as `seen` digests it, needs nothing of what the fleet wants:
    /// a dry run found so, or it was just applied.
    pub fn saw_unedited(&self, spoke: &str, seen: u64) {
        self.cache()
            .unedited
            .insert(spoke.to_string(), Kept::now(seen));
    }

    /// What stood for a read of `spoke` stands no more: a pass acted there, or a read found
    /// its agent not settled.
    pub fn unsettle(&self, spoke: &str) {
        self.cache().settled.remove(spoke);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconciler::lifecycle;

    #[test]
    fn a_settled_read_stands_for_its_spoke_while_what_it_depended_on_holds_and_it_is_young() {
        let clients = SpokeClients::new(Access::default());
        let long = Duration::from_secs(3600);
        assert!(!clients.settled_within("a", 1, long), "never read");
        clients.saw_settled("a", 1);
        assert!(clients.settled_within("a", 1, long));
        assert!(!clients.settled_within("b", 1, long), "another spoke's");
        assert!(
            !clients.settled_within("a", 2, long),
            "it depended on another"
        );
        assert!(!clients.settled_within("a", 1, Duration::ZERO), "too old");
        clients.unsettle("a");
        assert!(
            !clients.settled_within("a", 1, long),
            "a pass acted on the spoke"
        );
        clients.saw_settled("a", 1);
        clients.forget("a");
        assert!(!clients.settled_within("a", 1, long), "reaching it failed");
    }

    #[test]
    fn the_url_a_spoke_was_reached_by_is_known_without_a_client_while_its_kubeconfig_holds() {
        let spoke = |context: &str| -> Spoke {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
                "metadata": {"name": "a"},
                "spec": {"hubRef": "hub", "kubeconfig": {"context": context}},
            }))
            .unwrap()
        };
        let clients = SpokeClients::new(Access::default());
        assert_eq!(clients.kept_url(&spoke("one")), None, "never reached");
        let source = serde_json::to_string(&spoke("one").spec.kubeconfig).unwrap();
        for (url, kept) in [
            (None, Some(None)),
            (
                Some("https://hub.example:6443"),
                Some(Some("https://hub.example:6443".to_string())),
            ),
        ] {
            let way = Way::LetGo {
                config: Arc::new(Config::new("https://192.0.2.1:6443".parse().unwrap())),
                url: url.map(str::to_string),
                origin: KubeconfigOrigin::InCluster,
            };
            clients.cache().reached.insert(
                "a".to_string(),
                Kept {
                    value: (source.clone(), way),
                    used: Instant::now(),
                },
            );
            assert_eq!(clients.kept_url(&spoke("one")), kept);
            assert_eq!(
                clients.kept_url(&spoke("two")),
                None,
                "its kubeconfig changed: it is reached anew"
            );
        }
    }

    #[tokio::test]
    async fn a_network_client_is_let_go_after_a_pass_whose_next_comes_after_its_idle_time() {
        let clients = SpokeClients::new(Access::default());
        let config = Config::new("https://192.0.2.1:6443".parse().unwrap());
        for name in ["joining", "settled"] {
            let reached = Reached {
                connector: Connector::for_config(config.clone()).unwrap(),
                url: None,
                origin: KubeconfigOrigin::InCluster,
            };
            assert!(reached.connector.holds_connection());
            clients.cache().reached.insert(
                name.to_string(),
                Kept {
                    value: (String::new(), Way::Connected(reached)),
                    used: Instant::now(),
                },
            );
        }
        clients.not_needed_for("joining", lifecycle::POLL);
        clients.not_needed_for("settled", lifecycle::RESYNC);
        clients.not_needed_for("never reached", lifecycle::RESYNC);
        let cache = clients.cache();
        let way = |name: &str| match &cache.reached[name].value.1 {
            Way::Connected(_) => "connected",
            Way::LetGo { .. } => "credentials",
        };
        assert_eq!(way("joining"), "connected", "its next pass comes soon");
        assert_eq!(way("settled"), "credentials", "kept to connect again");
        assert_eq!(cache.reached.len(), 2);
    }

    #[test]
    fn what_is_unused_for_longer_than_its_idle_time_is_let_go_keeping_what_makes_it_again() {
        let start = Instant::now();
        let mut kept = HashMap::new();
        // (idle time, what is kept once let go: a connection keeps its credentials)
        let connection = (IDLE, Some(IDLE_LOCAL));
        for (name, used, value) in [
            ("busy", start + IDLE_LOCAL, connection),
            ("idle", start, connection),
            ("local", start, (IDLE_LOCAL, None)),
        ] {
            kept.insert(name.to_string(), Kept { value, used });
        }
        let sweep = |kept: &mut HashMap<String, Kept<(Duration, Option<Duration>)>>, at| {
            let_go_idle(
                kept,
                at,
                |(idle, _)| *idle,
                |(idle, rest)| match rest.take() {
                    Some(next) => {
                        *idle = next;
                        true
                    }
                    None => false,
                },
            );
        };
        let names = |kept: &HashMap<String, Kept<(Duration, Option<Duration>)>>| {
            let mut names: Vec<String> = kept
                .iter()
                .map(|(name, kept)| {
                    let what = if kept.value.0 == IDLE {
                        "connected"
                    } else {
                        "credentials"
                    };
                    format!("{name}: {what}")
                })
                .collect();
            names.sort();
            names
        };
        sweep(&mut kept, start + IDLE - Duration::from_secs(1));
        assert_eq!(
            names(&kept),
            ["busy: connected", "idle: connected", "local: credentials"],
            "all used within IDLE"
        );
        sweep(&mut kept, start + IDLE + Duration::from_secs(1));
        assert_eq!(
            names(&kept),
            ["busy: connected", "idle: credentials", "local: credentials"],
            "the idle connection is let go, its credentials kept"
        );
        sweep(&mut kept, start + IDLE_LOCAL + Duration::from_secs(1));
        assert_eq!(
            names(&kept),
            ["busy: connected"],
            "and those let go in their turn"
        );
    }
}
