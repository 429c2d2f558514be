//! The rollout on `fleetform up`'s clusters: every spoke joins, the offline ones' clusters are
//! destroyed, and one commit raises the Hub's agent version; the hub's Hub controller decides
//! the rollout and each released agent upgrades itself. The clock runs from that commit until
//! every healthy spoke has succeeded and every never-up one has failed (or the rollout halts).
//!
//! What it measures: when the healthy spokes are done, against waves × bake and against
//! waves × (upgrade plus bake); the upgrade itself, from the Hub status that releases a spoke to
//! its Spoke's report of the new agent, as this benchmark's watches see both; the most spokes in
//! progress at once in every Hub status the hub wrote; and the hub's CPU (its runtime's
//! threads). What it checks: every healthy spoke runs the new agent, no spoke the rollout did
//! not release does, the never-up spokes failed and the offline ones were skipped, no halt.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use fleetform::agent::AgentLoops;
use fleetform::api::ManagedCluster;
use fleetform::api::fleet::{Hub, RolloutStatus, SYSTEM_NAMESPACE, Spoke, SpokeRolloutState};
use fleetform::up;
use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::procfs::{CpuTimes, cpu_times, load_average, machine, rss_mib};
use super::{broken, offline, repo, rollout_spec};

const LEASE_SECONDS: i32 = 10;
const NEW_VERSION: &str = "9.9.9";
const HUB: &str = "hub";
/// How long a phase may take before the benchmark gives up on it.
const GIVE_UP: Duration = Duration::from_secs(900);

fn spoke_name(index: usize) -> String {
    format!("spoke-{index:05}")
}

/// Writes the fleet: the hub with the benchmark's rollout (and the new agent version once
/// `upgraded`) and `spokes` spokes, 100 to a file (once `upgraded`, the never-up ones' agent
/// from a registry that does not resolve).
fn write_fleet(dir: &Path, spokes: usize, upgraded: bool) -> std::io::Result<()> {
    let agent = if upgraded {
        format!("  agent:\n    version: {NEW_VERSION}\n")
    } else {
        String::new()
    };
    // JSON is YAML: the rollout as one flow mapping.
    let rollout = serde_json::to_string(&rollout_spec()).unwrap_or_default();
    let hub = format!(
        "apiVersion: fleetform.io/v1alpha1\nkind: Hub\nmetadata:\n  name: {HUB}\nspec:\n  kubeconfig:\n    embedded: {{}}\n  registration:\n    leaseDurationSeconds: {LEASE_SECONDS}\n{agent}  rollout: {rollout}\n"
    );
    std::fs::create_dir_all(dir.join("spokes"))?;
    std::fs::write(dir.join("hub.yaml"), hub)?;
    for chunk in 0..spokes.div_ceil(100) {
        let mut text = String::new();
        for index in chunk * 100..((chunk + 1) * 100).min(spokes) {
            let image = if upgraded && broken(index) {
                format!("  agent:\n    image: registry.invalid/fleetform:{NEW_VERSION}\n")
            } else {
                String::new()
            };
            text.push_str(&format!(
                "---\napiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata:\n  name: {}\nspec:\n  hubRef: {HUB}\n  kubeconfig:\n    embedded: {{}}\n{image}",
                spoke_name(index)
            ));
        }
        std::fs::write(dir.join(format!("spokes/batch-{chunk:03}.yaml")), text)?;
    }
    Ok(())
}

/// What the benchmark follows of the fleet, by a watch of each kind.
#[derive(Default)]
struct Seen {
    available: HashMap<String, bool>,
    /// The agent version each Spoke reports.
    versions: HashMap<String, String>,
    /// The Hub's rollout, as last written.
    rollout: Option<RolloutStatus>,
    /// The most spokes in progress in any Hub status written for the new version.
    most_in_progress: usize,
    /// Hub statuses seen for the new version.
    hub_writes: usize,
    /// When this benchmark first saw each spoke released to the new version, and first saw it
    /// report the new agent.
    released: HashMap<String, Instant>,
    upgraded: HashMap<String, Instant>,
}

enum Change {
    Cluster(watcher::Event<ManagedCluster>),
    Spoke(watcher::Event<Spoke>),
    Hub(watcher::Event<Hub>),
}

fn is_new_target(rollout: &RolloutStatus) -> bool {
    rollout
        .target
        .strip_prefix(NEW_VERSION)
        .is_some_and(|rest| rest.starts_with('/'))
}

impl Seen {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Cluster(event) => match event {
                watcher::Event::InitApply(cluster) | watcher::Event::Apply(cluster) => {
                    self.available
                        .insert(cluster.name_any(), cluster.is_available());
                }
                watcher::Event::Delete(cluster) => {
                    self.available.remove(&cluster.name_any());
                }
                watcher::Event::Init | watcher::Event::InitDone => {}
            },
            Change::Spoke(event) => match event {
                watcher::Event::InitApply(spoke) | watcher::Event::Apply(spoke) => {
                    let name = spoke.name_any();
                    if let Some(version) = spoke.status.and_then(|s| s.agent_version) {
                        if version == NEW_VERSION {
                            self.upgraded
                                .entry(name.clone())
                                .or_insert_with(Instant::now);
                        }
                        self.versions.insert(name, version);
                    }
                }
                watcher::Event::Delete(spoke) => {
                    self.versions.remove(&spoke.name_any());
                }
                watcher::Event::Init | watcher::Event::InitDone => {}
            },
            Change::Hub(event) => match event {
                watcher::Event::InitApply(hub) | watcher::Event::Apply(hub) => {
                    self.rollout = hub.status.and_then(|status| status.rollout);
                    if let Some(rollout) = self.rollout.as_ref().filter(|r| is_new_target(r)) {
                        self.hub_writes += 1;
                        let in_progress: Vec<&str> = rollout
                            .spokes
                            .iter()
                            .filter(|entry| entry.state == SpokeRolloutState::InProgress)
                            .map(|entry| entry.name.as_str())
                            .collect();
                        self.most_in_progress = self.most_in_progress.max(in_progress.len());
                        for name in in_progress {
                            if !self.released.contains_key(name) {
                                self.released.insert(name.to_string(), Instant::now());
                            }
                        }
                    }
                }
                watcher::Event::Delete(_) | watcher::Event::Init | watcher::Event::InitDone => {}
            },
        }
    }

    fn available(&self) -> usize {
        self.available.values().filter(|up| **up).count()
    }

    /// The spokes in `state` in the rollout to the new version.
    fn in_state(&self, state: SpokeRolloutState) -> usize {
        self.new_rollout().map_or(0, |rollout| {
            rollout
                .spokes
                .iter()
                .filter(|entry| entry.state == state)
                .count()
        })
    }

    fn new_rollout(&self) -> Option<&RolloutStatus> {
        self.rollout
            .as_ref()
            .filter(|rollout| is_new_target(rollout))
    }

    /// Why the rollout to the new version halted, if it did.
    fn halted(&self) -> Option<&String> {
        self.new_rollout()?.halted.as_ref()
    }

    fn on_new_version(&self) -> usize {
        self.versions
            .values()
            .filter(|version| *version == NEW_VERSION)
            .count()
    }
}

/// Follows the fleet until a condition holds, printing progress every 5 s.
struct Follower<S> {
    changes: S,
    seen: Seen,
    rss_peak: f64,
}

impl<S> Follower<S>
where
    S: Stream<Item = Result<Change, watcher::Error>> + Unpin,
{
    /// Waits until `done(seen)` (or [`GIVE_UP`] from `from`); whether it held.
    async fn wait(&mut self, from: Instant, what: &str, done: impl Fn(&Seen) -> bool) -> bool {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut last_report = Instant::now();
        while !done(&self.seen) {
            tokio::select! {
                change = self.changes.next() => match change {
                    Some(Ok(change)) => self.seen.apply(change),
                    Some(Err(err)) => eprintln!("watching the fleet: {err}"),
                    None => return false,
                },
                _ = tick.tick() => {
                    self.rss_peak = self.rss_peak.max(rss_mib());
                    if last_report.elapsed() >= Duration::from_secs(5) {
                        last_report = Instant::now();
                        let seen = &self.seen;
                        eprintln!(
                            "{:>6.1?} ({what}): {} available, {} on {NEW_VERSION}; rollout: {} in progress, {} succeeded, {} failed, {} skipped offline, wave {:?}; RSS {:.0} MiB, load {}",
                            from.elapsed(),
                            seen.available(),
                            seen.on_new_version(),
                            seen.in_state(SpokeRolloutState::InProgress),
                            seen.in_state(SpokeRolloutState::Succeeded),
                            seen.in_state(SpokeRolloutState::Failed),
                            seen.in_state(SpokeRolloutState::SkippedOffline),
                            seen.new_rollout().and_then(|r| r.wave),
                            rss_mib(),
                            load_average(),
                        );
                    }
                    if from.elapsed() > GIVE_UP {
                        eprintln!("gave up on {what} after {GIVE_UP:?}");
                        return false;
                    }
                }
            }
        }
        true
    }
}

/// Runs the benchmark on `up`'s clusters for `spokes` spokes; prints its figures and returns
/// them.
pub fn run(spokes: usize, light: bool) -> Result<Value, String> {
    let runtime = |name: &'static str| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name)
            .enable_all()
            .build()
            .map_err(|err| format!("cannot start a runtime: {err}"))
    };
    let hub_rt = runtime("hub-rt")?;
    let fleet_rt = runtime("fleet-rt")?;
    let result = fleet_rt.block_on(roll_out(spokes, light, hub_rt.handle().clone()));
    hub_rt.shutdown_timeout(Duration::from_secs(5));
    fleet_rt.shutdown_timeout(Duration::from_secs(5));
    let figures = result?;
    print(&figures);
    Ok(figures)
}

async fn roll_out(
    spokes: usize,
    light: bool,
    hub_rt: tokio::runtime::Handle,
) -> Result<Value, String> {
    let load_before = load_average();
    let kind = if light { "light" } else { "real" };
    eprintln!(
        "rollout bench on up: {spokes} {kind} spokes on {}; load {load_before}",
        machine()
    );
    let io = |what: &'static str| move |err: std::io::Error| format!("{what}: {err}");
    let repo_dir = tempfile::tempdir().map_err(io("temporary directory"))?;
    let git = git2::Repository::init(repo_dir.path()).map_err(|err| err.to_string())?;
    write_fleet(repo_dir.path(), spokes, false).map_err(io("write the fleet"))?;
    repo::commit(&git, "every spoke").map_err(|err| err.to_string())?;
    let fleet = repo::load(repo_dir.path())?;
    let data = tempfile::tempdir().map_err(io("temporary directory"))?;

    let started = Instant::now();
    let running = up::start(
        &fleet,
        repo::up_config(
            data.path(),
            repo_dir.path(),
            light,
            AgentLoops::Lifecycle,
            hub_rt,
        ),
    )
    .await
    .map_err(|err| format!("the fleet's clusters: {err}"))?;
    let hub = running.hubs[0].client.clone();
    let clusters = watcher(Api::<ManagedCluster>::all(hub.clone()), Default::default())
        .map(|event| event.map(Change::Cluster));
    let spoke_changes = watcher(
        Api::<Spoke>::namespaced(hub.clone(), SYSTEM_NAMESPACE),
        Default::default(),
    )
    .map(|event| event.map(Change::Spoke));
    let hubs = watcher(
        Api::<Hub>::namespaced(hub.clone(), SYSTEM_NAMESPACE),
        watcher::Config::default().fields(&format!("metadata.name={HUB}")),
    )
    .map(|event| event.map(Change::Hub));
    let mut follower = Follower {
        changes: futures::stream::select(futures::stream::select(clusters, spoke_changes), hubs)
            .boxed(),
        seen: Seen::default(),
        rss_peak: 0.0,
    };

    // Every spoke joined, its agent reporting its version.
    let joined = follower
        .wait(started, "joining", |seen| {
            seen.available() == spokes && seen.versions.len() == spokes
        })
        .await;
    let join = started.elapsed();
    if !joined {
        running.shutdown().await;
        return Err(format!("the fleet did not join within {GIVE_UP:?}"));
    }
    eprintln!("{spokes} spokes joined in {join:.1?}");

    // The offline spokes' clusters go away; the hub sees them Unknown once their leases lapse.
    let offline_names: Vec<String> = (0..spokes)
        .filter(|i| offline(*i))
        .map(spoke_name)
        .collect();
    for name in &offline_names {
        running.stop_spoke(name).await;
    }
    let from = Instant::now();
    let gone = follower
        .wait(from, "offline spokes lapsing", |seen| {
            offline_names
                .iter()
                .all(|name| seen.available.get(name) == Some(&false))
        })
        .await;
    if !gone {
        running.shutdown().await;
        return Err("the offline spokes' clusters stayed Available".into());
    }
    eprintln!(
        "{} spokes offline after {:.1?}",
        offline_names.len(),
        from.elapsed()
    );

    // The commit that raises the agent's version.
    let cpu_before = cpu_times();
    follower.rss_peak = 0.0;
    write_fleet(repo_dir.path(), spokes, true).map_err(io("write the fleet"))?;
    repo::commit(&git, "agent 9.9.9").map_err(|err| err.to_string())?;
    let from = Instant::now();
    let never_up = (0..spokes).filter(|i| broken(*i) && !offline(*i)).count();
    let healthy = spokes - offline_names.len() - never_up;
    let mut until = async |state: SpokeRolloutState, count: usize| {
        follower
            .wait(from, "rolling out", |seen| {
                seen.in_state(state) >= count || seen.halted().is_some()
            })
            .await
            .then(|| from.elapsed())
    };
    let healthy_done = until(SpokeRolloutState::Succeeded, healthy).await;
    let ended = until(SpokeRolloutState::Failed, never_up).await;
    let cpu = cpu_times().since(&cpu_before);
    let figures = figures(Facts {
        seen: &follower.seen,
        spokes,
        kind,
        healthy,
        never_up,
        offline: offline_names.len(),
        join,
        healthy_done,
        ended,
        cpu,
        rss_peak: follower.rss_peak,
        load_before,
    });
    drop(follower);
    running.shutdown().await;
    Ok(figures)
}

struct Facts<'a> {
    seen: &'a Seen,
    spokes: usize,
    kind: &'static str,
    healthy: usize,
    never_up: usize,
    offline: usize,
    join: Duration,
    healthy_done: Option<Duration>,
    ended: Option<Duration>,
    cpu: CpuTimes,
    rss_peak: f64,
    load_before: String,
}

/// The figures of a run, from what was seen at its end.
fn figures(facts: Facts<'_>) -> Value {
    let seen = facts.seen;
    let rollout = seen.new_rollout();
    let entries = rollout.map(|r| r.spokes.as_slice()).unwrap_or_default();
    // Release → the new agent reporting itself, as this benchmark saw both.
    let mut upgrades: Vec<f64> = seen
        .upgraded
        .iter()
        .filter_map(|(name, upgraded)| {
            let released = seen.released.get(name)?;
            Some(upgraded.saturating_duration_since(*released).as_secs_f64())
        })
        .collect();
    upgrades.sort_by(f64::total_cmp);
    let quantile = |q: f64| {
        upgrades
            .get(((upgrades.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let mean_upgrade = upgrades.iter().sum::<f64>() / upgrades.len().max(1) as f64;
    // The spokes running the new agent that the rollout never released.
    let unreleased_upgraded: Vec<&str> = entries
        .iter()
        .filter(|entry| {
            matches!(
                entry.state,
                SpokeRolloutState::Pending | SpokeRolloutState::SkippedOffline
            ) && seen.versions.get(&entry.name).map(String::as_str) == Some(NEW_VERSION)
        })
        .map(|entry| entry.name.as_str())
        .collect();
    let spec = rollout_spec();
    let limit = spec
        .max_concurrency
        .map_or(facts.spokes, |count| count.of(facts.spokes).max(1));
    let waves = (facts.healthy + facts.never_up).div_ceil(limit);
    let bake = spec.min_success_seconds as f64;
    let ideal = waves as f64 * bake;
    let with_upgrades = waves as f64 * (mean_upgrade + bake);
    let healthy_seconds = facts
        .healthy_done
        .map_or(f64::INFINITY, |d| d.as_secs_f64());
    json!({
        "spokes": facts.spokes,
        "kind": facts.kind,
        "machine": machine(),
        "joinSeconds": facts.join.as_secs_f64(),
        "offline": facts.offline,
        "neverUp": facts.never_up,
        "healthy": facts.healthy,
        "maxConcurrency": limit,
        "mostInProgress": seen.most_in_progress,
        "hubStatusWritesSeen": seen.hub_writes,
        "succeeded": seen.in_state(SpokeRolloutState::Succeeded),
        "onNewAgent": seen.on_new_version(),
        "failed": seen.in_state(SpokeRolloutState::Failed),
        "skippedOffline": seen.in_state(SpokeRolloutState::SkippedOffline),
        "pending": seen.in_state(SpokeRolloutState::Pending),
        "upgradedWithoutRelease": unreleased_upgraded,
        "halted": seen.halted(),
        "waves": waves,
        "idealSeconds": ideal,
        "healthyDoneSeconds": healthy_seconds,
        "healthyOverIdeal": healthy_seconds / ideal.max(f64::EPSILON),
        "upgradeSecondsMean": mean_upgrade,
        "upgradeSecondsP50": quantile(0.5),
        "upgradeSecondsP99": quantile(0.99),
        "upgradeSecondsMax": quantile(1.0),
        "idealWithUpgradesSeconds": with_upgrades,
        "healthyOverIdealWithUpgrades": healthy_seconds / with_upgrades.max(f64::EPSILON),
        "rolloutEndSeconds": facts.ended.map_or(f64::INFINITY, |d| d.as_secs_f64()),
        "hubCpuSeconds": facts.cpu.hub,
        "processCpuSeconds": facts.cpu.process,
        "rssPeakMib": facts.rss_peak,
        "loadBefore": facts.load_before,
        "loadAfter": load_average(),
    })
}

fn print(figures: &Value) {
    let get = |key: &str| figures.get(key).cloned().unwrap_or(Value::Null);
    let count = |key: &str| get(key).as_u64().unwrap_or(0);
    let number = |key: &str| get(key).as_f64().unwrap_or(f64::NAN);
    println!(
        "the rollout on up's clusters: {} {} spokes, {}",
        count("spokes"),
        get("kind").as_str().unwrap_or_default(),
        get("machine").as_str().unwrap_or_default()
    );
    println!("{:<34} value", "figure");
    for (key, value) in figures.as_object().into_iter().flatten() {
        if key != "machine" {
            println!("{key:<34} {value}");
        }
    }
    let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
    let healthy = count("healthy");
    println!(
        "every healthy spoke upgraded: {}; none upgraded unreleased: {}; never-up spokes failed: {}; offline ones skipped: {}; no halt: {}; at most 10% at once: {}",
        verdict(count("succeeded") == healthy && count("onNewAgent") == healthy),
        verdict(
            get("upgradedWithoutRelease")
                .as_array()
                .is_some_and(Vec::is_empty)
        ),
        verdict(count("failed") == count("neverUp")),
        verdict(count("skippedOffline") == count("offline")),
        verdict(get("halted").is_null()),
        verdict(count("mostInProgress") <= count("maxConcurrency")),
    );
    println!(
        "healthy spokes done within 20% of waves x bake: {} ({:.2}x); of waves x (upgrade + bake): {} ({:.2}x)",
        verdict(number("healthyOverIdeal") <= 1.2),
        number("healthyOverIdeal"),
        verdict(number("healthyOverIdealWithUpgrades") <= 1.2),
        number("healthyOverIdealWithUpgrades"),
    );
}
