//! Leader election on a `coordination.k8s.io` Lease: only the holder does a component's
//! leader-gated work (sync's syncs, the hub's loops), every replica the rest.
//!
//! The holder renews the Lease every third of its duration. A replica that sees another holder
//! follows it, and takes the Lease over once the Lease has stayed unchanged for a whole duration
//! *by its own clock* (the way client-go judges expiry, so clock skew between replicas does not
//! matter). A holder that cannot renew within two thirds of the duration steps down before anyone
//! could take over. On shutdown the holder releases the Lease (clears its holder); a follower
//! watches the Lease, so it takes over as soon as it sees that instead of waiting for expiry.
//!
//! [`decide`] is the pure part; [`run`] owns the reads, writes and timer; [`lead`] runs a
//! component's work for each term the replica leads, and stops it (awaiting it) when the term
//! ends, before a follower could take over.

use std::future::Future;
use std::time::Duration;

use crate::runtime::watch::BackingOff;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// A Lease as the election reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    /// Empty or absent when released.
    pub holder: Option<String>,
    pub resource_version: String,
    pub duration: Option<Duration>,
}

/// The last version of the Lease a follower saw, and since when (by the follower's clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub resource_version: String,
    pub since: Instant,
}

/// What to do with the Lease now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// There is no Lease: create it, held by us.
    Create,
    /// We hold it: renew it.
    Renew,
    /// Nobody holds it, or its holder stopped renewing: take it over.
    TakeOver,
    /// Someone else holds it and renews it.
    Follow { holder: String },
}

/// Decides from the Lease as read now, what we saw of it before and our own identity.
pub fn decide(
    lease: Option<&LeaseView>,
    identity: &str,
    seen: Option<&Seen>,
    now: Instant,
    default_duration: Duration,
) -> Decision {
    let Some(lease) = lease else {
        return Decision::Create;
    };
    let holder = match lease.holder.as_deref() {
        None | Some("") => return Decision::TakeOver,
        Some(holder) if holder == identity => return Decision::Renew,
        Some(holder) => holder,
    };
    let duration = lease.duration.unwrap_or(default_duration);
    let expired = seen.is_some_and(|seen| {
        seen.resource_version == lease.resource_version
            && now.duration_since(seen.since) >= duration
    });
    if expired {
        Decision::TakeOver
    } else {
        Decision::Follow {
            holder: holder.to_string(),
        }
    }
}

/// One replica's part in the election on one Lease.
#[derive(Clone, Debug)]
pub struct Election {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease (`fleetform-sync`, `fleetform-hub`).
    pub lease_name: String,
    /// This replica's name, unique per replica (the pod name).
    pub identity: String,
    /// How long the Lease holds without renewal; a follower takes over that long after the
    /// leader stopped renewing it.
    pub lease_duration: Duration,
}

/// The host name (a pod's name in a cluster) and the process id: a replica's default name in a
/// leader election.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|host| host.trim().to_string())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "fleetform".to_string());
    format!("{host}-{}", std::process::id())
}

/// One replica's side of the election on one Lease.
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    seen: Option<Seen>,
}

impl LeaseLock {
    /// The Lease `name` in `namespace`, contended for as `identity`, held for `duration` at a
    /// time.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> Self {
        LeaseLock {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            duration,
            seen: None,
        }
    }

    /// Reads the Lease and acquires, renews or follows it; returns whether we hold it now.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let current = self.api.get_opt(&self.name).await?;
        let view = current.as_ref().map(view);
        let now = Instant::now();
        let decision = decide(
            view.as_ref(),
            &self.identity,
            self.seen.as_ref(),
            now,
            self.duration,
        );
        let stamp = MicroTime(Timestamp::now());
        let seconds = i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let written = match (decision, current) {
            (Decision::Create, _) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(seconds),
                        acquire_time: Some(stamp.clone()),
                        renew_time: Some(stamp),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            (Decision::Renew, Some(mut lease)) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.renew_time = Some(stamp);
                spec.lease_duration_seconds = Some(seconds);
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
            (Decision::TakeOver, Some(mut lease)) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = Some(self.identity.clone());
                spec.lease_duration_seconds = Some(seconds);
                spec.acquire_time = Some(stamp.clone());
                spec.renew_time = Some(stamp);
                spec.lease_transitions =
                    Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
            (Decision::Follow { .. }, _) | (_, None) => {
                if let Some(view) = view
                    && self
                        .seen
                        .as_ref()
                        .is_none_or(|seen| seen.resource_version != view.resource_version)
                {
                    self.seen = Some(Seen {
                        resource_version: view.resource_version,
                        since: now,
                    });
                }
                return Ok(false);
            }
        };
        match written {
            Ok(_) => {
                self.seen = None;
                Ok(true)
            }
            // Another replica wrote first (created, renewed or took over): it holds the Lease.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Gives the Lease up if we hold it, so that a follower takes over at once.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

fn view(lease: &Lease) -> LeaseView {
    let spec = lease.spec.as_ref();
    LeaseView {
        holder: spec.and_then(|spec| spec.holder_identity.clone()),
        resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
        duration: spec
            .and_then(|spec| spec.lease_duration_seconds)
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map(Duration::from_secs),
    }
}

/// Runs the election until `stop` is cancelled, telling `leader` whether we hold the Lease
/// (after the first round that could read the Lease, and on every change); then releases it if
/// we do.
pub async fn run(mut lock: LeaseLock, leader: watch::Sender<bool>, stop: CancellationToken) {
    let retry = (lock.duration / 3).max(Duration::from_millis(100));
    let renew_deadline = lock.duration * 2 / 3;
    let mut renewed: Option<Instant> = None;
    let mut first_round = true;
    // A follower looks again whenever the Lease changes (its holder released it), not only at
    // its next try.
    let config = watcher::Config::default().fields(&format!("metadata.name={}", lock.name));
    let mut changes = watcher(lock.api.clone(), config)
        .backing_off()
        .filter(|event| {
            std::future::ready(matches!(
                event,
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))
            ))
        })
        .boxed();
    let mut failing = false;
    loop {
        let round = lock.try_acquire_or_renew().await;
        let decided = round.is_ok();
        let holds = match round {
            Ok(true) => {
                renewed = Some(Instant::now());
                true
            }
            Ok(false) => false,
            Err(err) => {
                // Said once until a round goes through again, not at every try.
                if !std::mem::replace(&mut failing, true) {
                    warn!(lease = %lock.name, %err, "cannot read or renew the leader Lease; trying again");
                }
                // Keep leading only while no follower could have taken over yet.
                renewed.is_some_and(|at| at.elapsed() < renew_deadline)
            }
        };
        if decided && std::mem::take(&mut failing) {
            info!(lease = %lock.name, "the leader Lease can be read and written again");
        }
        if !holds {
            renewed = None;
        }
        leader.send_if_modified(|current| {
            // The first round that could read the Lease always tells: followers wait for it to
            // know where they stand (one that cannot even read it is not ready to lead).
            let changed = *current != holds || (decided && std::mem::take(&mut first_round));
            if *current != holds {
                info!(lease = %lock.name, identity = %lock.identity, leader = holds, "leadership changed");
            }
            *current = holds;
            changed
        });
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(retry) => {}
            Some(_) = changes.next(), if !holds => {}
        }
    }
    let holds = *leader.borrow();
    if holds {
        if let Err(err) = lock.release().await {
            warn!(lease = %lock.name, %err, "cannot release the leader Lease; a follower takes over when it expires");
        }
        leader.send_replace(false);
    }
}

/// Takes part in `election` until `shutdown` is cancelled and runs `term` for each term this
/// replica leads: `term` gets a token cancelled when the term ends (the Lease lost or shutdown),
/// and the term is over only once its future has finished. `standing` hears where the replica
/// stands: `false` after the election's first round, then `true` as each term starts and
/// `false` once it is over. The Lease is released only after the last term is over.
pub async fn lead<T, F>(
    client: Client,
    election: &Election,
    shutdown: &CancellationToken,
    mut standing: impl FnMut(bool),
    mut term: T,
) where
    T: FnMut(CancellationToken) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let lock = LeaseLock::new(
        client,
        &election.namespace,
        &election.lease_name,
        &election.identity,
        election.lease_duration,
    );
    let (leader_tx, mut leader_rx) = watch::channel(false);
    // The election outlives the terms, so the Lease is released only once no term runs.
    let election_stop = CancellationToken::new();
    let running = tokio::spawn(run(lock, leader_tx, election_stop.clone()));
    let decided = tokio::select! {
        biased;
        _ = shutdown.cancelled() => false,
        changed = leader_rx.changed() => changed.is_ok(),
    };
    if decided {
        standing(false);
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                leads = async { leader_rx.wait_for(|leads| *leads).await.is_ok() } => if !leads { break },
            }
            info!(lease = %election.lease_name, identity = %election.identity, "leading");
            standing(true);
            let stop = shutdown.child_token();
            let mut work = tokio::spawn(term(stop.clone()));
            tokio::select! {
                _ = &mut work => {}
                _ = async { leader_rx.wait_for(|leads| !*leads).await.is_ok() } => {
                    info!(lease = %election.lease_name, identity = %election.identity, "lost the leader Lease: stopping");
                    stop.cancel();
                    let _ = (&mut work).await;
                }
            }
            standing(false);
        }
    }
    election_stop.cancel();
    let _ = running.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const DURATION: Duration = Duration::from_secs(15);

    fn held_by(holder: &str, version: &str) -> LeaseView {
        LeaseView {
            holder: Some(holder.to_string()),
            resource_version: version.to_string(),
            duration: Some(DURATION),
        }
    }

    #[test]
    fn a_missing_lease_is_created_and_a_released_one_taken_over() {
        let now = Instant::now();
        assert_eq!(decide(None, "a", None, now, DURATION), Decision::Create);
        let released = LeaseView {
            holder: None,
            ..held_by("b", "1")
        };
        assert_eq!(
            decide(Some(&released), "a", None, now, DURATION),
            Decision::TakeOver
        );
    }

    #[test]
    fn the_holder_renews_its_own_lease() {
        let now = Instant::now();
        assert_eq!(
            decide(Some(&held_by("a", "7")), "a", None, now, DURATION),
            Decision::Renew
        );
    }

    #[test]
    fn a_follower_takes_over_only_after_the_lease_stayed_unchanged_for_its_duration() {
        let start = Instant::now();
        let lease = held_by("b", "7");
        let follow = Decision::Follow {
            holder: "b".to_string(),
        };
        // Never seen before: follow, however old the lease's own timestamps are.
        assert_eq!(decide(Some(&lease), "a", None, start, DURATION), follow);
        let seen = Seen {
            resource_version: "7".to_string(),
            since: start,
        };
        let almost = start + DURATION - Duration::from_millis(1);
        assert_eq!(
            decide(Some(&lease), "a", Some(&seen), almost, DURATION),
            follow
        );
        let later = start + DURATION;
        assert_eq!(
            decide(Some(&lease), "a", Some(&seen), later, DURATION),
            Decision::TakeOver
        );
        // Renewed meanwhile (a new version): still held.
        let renewed = held_by("b", "8");
        assert_eq!(
            decide(Some(&renewed), "a", Some(&seen), later, DURATION),
            follow
        );
    }
}
