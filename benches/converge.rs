//! Commit to Available on an embedded fleet (issues 6 and 17): `fleetform up`'s clusters for a
//! hub and N spokes (default 1,000) are started first, as real clusters would already exist;
//! then one commit declares every spoke, `up`'s sync picks it up and applies it, and the clock
//! runs until every spoke's ManagedCluster is Available — agents installed, bootstrapped by CSR,
//! accepted, joined, pivoted, leases renewing. Then a second commit changes every spoke's lease
//! duration (10 s → 20 s, one `leaseDurationSeconds` per Spoke document), and the clock runs
//! until every ManagedCluster asks for the new one and is still Available.
//! Targets: < 60 s for 1,000 spokes (issue 6); < 5 minutes for 10,000 light spokes and the lease
//! change in < 60 s, the hub under 1 GiB (issue 17).
//!
//! Two kinds of spoke (`FLEETFORM_BENCH_SPOKES_KIND`):
//! - `real` [default]: what `fleetform up` runs — a durable control plane per spoke (SQLite and
//!   its writer thread) and the whole agent (registration, lease, status, addon and day-2
//!   loops).
//! - `light`: a control plane per spoke that keeps its state in memory, and an agent running
//!   its registration and lease loops only (`AgentLoops::Registration`): each spoke still gets
//!   the agent installed by the lifecycle reconciler with a bootstrap token of its own, and its
//!   agent registers by CSR, is accepted, pivots and renews its lease; it reports no claims or
//!   addon health and does no day-2 work. What is simulated is only that: every hub component is
//!   the real one.
//!
//! The hub — its control plane (which also handles every agent's in-process requests), the hub
//! process (hub loops, lifecycle reconciler, sync) and the addon deployer — runs on a runtime of
//! its own ("hub-rt", `UpConfig::hub_runtime`); the spokes' clusters, kubelets and agents and
//! this benchmark on another ("fleet-rt"). The hub's CPU is its runtime's threads (and, with
//! light spokes, the one SQLite writer, the hub's); its heap is what those threads allocated and
//! still hold (`support/heap.rs`); RSS is the whole process's.
//!
//! Prints a table and writes `target/bench/converge-<kind>.json`.
//! `FLEETFORM_BENCH_HEAP_PROFILE=1` also samples the hub's allocations (one per 512 KiB, see
//! `support/heap.rs`) and writes where the hub's heap was at each phase's peak to
//! `target/bench/converge-<kind>-heap.txt`.
//! `RUST_LOG` (`fleetform::sync=debug`, say) logs to stderr.
//! `cargo bench --bench converge`; `FLEETFORM_BENCH_SPOKES=100` for a quick run;
//! `FLEETFORM_BENCH_SPOKES=10000 FLEETFORM_BENCH_SPOKES_KIND=light` for issue 17's.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fleetform::agent::AgentLoops;
use fleetform::api::fleet::{Phase, SYSTEM_NAMESPACE, Spoke};
use fleetform::api::{FleetSync, ManagedCluster};
use fleetform::up;
use fleetform_controlplane::requests::RequestCounts;
use futures::StreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, reflector};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

#[path = "support/heap.rs"]
mod heap;
#[path = "support/procfs.rs"]
mod procfs;
#[path = "support/repo.rs"]
mod repo;

use heap::Tag;
use procfs::{CpuTimes, cpu_times, load_average, machine, rss_mib};
use repo::commit;

#[global_allocator]
static ALLOCATOR: heap::TaggedAllocator = heap::TaggedAllocator;

const LEASE_SECONDS: i32 = 10;
const CHANGED_LEASE_SECONDS: i32 = 20;
/// How long either phase may take before the benchmark gives up on it.
const GIVE_UP: Duration = Duration::from_secs(900);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Real,
    Light,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Real => "real",
            Kind::Light => "light",
        }
    }
}

struct Settings {
    spokes: usize,
    kind: Kind,
    /// Sample the hub's allocations, for where its heap is at its peak.
    heap_profile: bool,
}

impl Settings {
    fn from_env() -> Result<Settings, String> {
        let spokes = match std::env::var("FLEETFORM_BENCH_SPOKES") {
            Err(_) => 1_000,
            Ok(text) => text
                .parse()
                .map_err(|_| format!("FLEETFORM_BENCH_SPOKES={text:?}: expected a count"))?,
        };
        let kind = match std::env::var("FLEETFORM_BENCH_SPOKES_KIND").as_deref() {
            Err(_) | Ok("real") => Kind::Real,
            Ok("light") => Kind::Light,
            Ok(other) => {
                return Err(format!(
                    "FLEETFORM_BENCH_SPOKES_KIND={other:?}: expected `real` or `light`"
                ));
            }
        };
        let heap_profile = std::env::var("FLEETFORM_BENCH_HEAP_PROFILE").is_ok_and(|v| v == "1");
        Ok(Settings {
            spokes,
            kind,
            heap_profile,
        })
    }
}

/// Writes a fleet of one hub and `spokes` spokes (100 to a file), each asking for leases of
/// `lease_seconds`.
fn write_fleet(
    dir: &std::path::Path,
    spokes: usize,
    lease_seconds: i32,
) -> Result<(), std::io::Error> {
    let hub = format!(
        "apiVersion: fleetform.io/v1alpha1\nkind: Hub\nmetadata:\n  name: hub\nspec:\n  kubeconfig:\n    embedded: {{}}\n  registration:\n    leaseDurationSeconds: {LEASE_SECONDS}\n"
    );
    std::fs::create_dir_all(dir.join("spokes"))?;
    std::fs::write(dir.join("hub.yaml"), hub)?;
    for chunk in 0..spokes.div_ceil(100) {
        let mut text = String::new();
        for i in chunk * 100..((chunk + 1) * 100).min(spokes) {
            text.push_str(&format!(
                "---\napiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata:\n  name: spoke-{i:05}\n  labels:\n    batch: b{chunk}\nspec:\n  hubRef: hub\n  kubeconfig:\n    embedded: {{}}\n  leaseDurationSeconds: {lease_seconds}\n"
            ));
        }
        std::fs::write(dir.join(format!("spokes/batch-{chunk:03}.yaml")), text)?;
    }
    Ok(())
}

/// The hub's live Rust heap: what its runtime's threads and the untagged threads (its SQLite
/// writer; with real spokes, theirs too) allocated and still hold.
fn hub_heap_mib() -> f64 {
    heap::live_mib(&[Tag::Hub, Tag::Other])
}

/// What the benchmark follows of every ManagedCluster: whether it is Available, and the lease
/// duration it asks of its agent.
#[derive(Default)]
struct Clusters {
    seen: HashMap<String, (bool, i32)>,
}

impl Clusters {
    fn apply(&mut self, event: watcher::Event<ManagedCluster>) {
        match event {
            watcher::Event::Init | watcher::Event::InitDone => {}
            watcher::Event::InitApply(cluster) | watcher::Event::Apply(cluster) => {
                let facts = (cluster.is_available(), cluster.lease_duration_seconds());
                self.seen.insert(cluster.name_any(), facts);
            }
            watcher::Event::Delete(cluster) => {
                self.seen.remove(&cluster.name_any());
            }
        }
    }

    fn available(&self) -> usize {
        self.seen
            .values()
            .filter(|(available, _)| *available)
            .count()
    }

    /// Available and asking for `lease_seconds`.
    fn on_lease(&self, lease_seconds: i32) -> usize {
        self.seen
            .values()
            .filter(|(available, lease)| *available && *lease == lease_seconds)
            .count()
    }
}

/// Peaks sampled while a phase runs.
#[derive(Default)]
struct Peaks {
    rss: f64,
    hub_heap: f64,
    /// The sampled hub heap by allocation site at `hub_heap` (when profiling).
    hub_heap_sites: Option<std::collections::HashMap<usize, u64>>,
}

impl Peaks {
    fn sample(&mut self) {
        self.rss = self.rss.max(rss_mib());
        let hub_heap = hub_heap_mib();
        if hub_heap > self.hub_heap {
            self.hub_heap = hub_heap;
            if heap::profiling() {
                self.hub_heap_sites = Some(heap::snapshot());
            }
        }
    }
}

/// The fleet's ManagedClusters as the benchmark follows them, by one watch.
struct Follower<S> {
    events: S,
    clusters: Clusters,
    /// Spokes Running, as a task counts them every 5 s apart from the watch: a list of 10,000
    /// Spokes in the watch's loop held its events back.
    running: Arc<AtomicUsize>,
    spokes: usize,
}

impl<S> Follower<S>
where
    S: futures::Stream<Item = Result<watcher::Event<ManagedCluster>, watcher::Error>> + Unpin,
{
    /// Waits until `done(clusters)` reaches every spoke (or [`GIVE_UP`]), printing progress
    /// every 5 s; returns the time from `from`, whether every spoke got there, and the peaks
    /// sampled meanwhile.
    async fn wait(
        &mut self,
        from: Instant,
        what: &str,
        done: impl Fn(&Clusters) -> usize,
    ) -> (Duration, bool, Peaks) {
        let mut peaks = Peaks::default();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut last_report = Instant::now();
        loop {
            tokio::select! {
                event = self.events.next() => match event {
                    Some(Ok(event)) => self.clusters.apply(event),
                    Some(Err(err)) => eprintln!("watching ManagedClusters: {err}"),
                    None => return (from.elapsed(), false, peaks),
                },
                _ = tick.tick() => {
                    peaks.sample();
                    if last_report.elapsed() >= Duration::from_secs(5) {
                        last_report = Instant::now();
                        eprintln!(
                            "{:>6.1?}: {} registered, {} available, {} {what}, {} Running, RSS {:.0} MiB, hub heap {:.0} MiB, load {}",
                            from.elapsed(),
                            self.clusters.seen.len(),
                            self.clusters.available(),
                            done(&self.clusters),
                            self.running.load(Ordering::Relaxed),
                            rss_mib(),
                            hub_heap_mib(),
                            load_average()
                        );
                    }
                    if from.elapsed() > GIVE_UP {
                        eprintln!(
                            "gave up after {GIVE_UP:?} with {} of {} {what}",
                            done(&self.clusters),
                            self.spokes
                        );
                        return (from.elapsed(), false, peaks);
                    }
                }
            }
            if done(&self.clusters) == self.spokes {
                peaks.sample();
                return (from.elapsed(), true, peaks);
            }
        }
    }
}

/// Counts the hub's Running Spokes into `running` as a watch of them sees them, until dropped.
/// A watch, not a list every few seconds: a list of 10,000 Spokes is an answer of some 30 MB,
/// which the hub's heap would count and both runtimes' CPU would pay for.
fn count_running_spokes(hub: Client, running: Arc<AtomicUsize>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (spokes, writer) = reflector::store::<Spoke>();
        let is_running =
            |spoke: &Spoke| spoke.status.as_ref().and_then(|s| s.phase) == Some(Phase::Running);
        let mut changes = std::pin::pin!(
            watcher(
                Api::<Spoke>::namespaced(hub, SYSTEM_NAMESPACE),
                watcher::Config::default()
            )
            .default_backoff()
            .reflect(writer)
        );
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                change = changes.next() => if change.is_none() { return },
                _ = tick.tick() => {
                    let count = spokes.state().iter().filter(|spoke| is_running(spoke)).count();
                    running.store(count, Ordering::Relaxed);
                }
            }
        }
    })
}

/// Waits until the hub's FleetSync has applied `commit`; the time from `from`.
async fn applied(hub: &Client, commit: &str, from: Instant) -> Result<Duration, String> {
    let syncs: Api<FleetSync> = Api::namespaced(hub.clone(), SYSTEM_NAMESPACE);
    loop {
        let sync = syncs
            .get(up::FLEET_SYNC)
            .await
            .map_err(|err| format!("read the FleetSync: {err}"))?;
        if sync.status.and_then(|s| s.last_applied_commit).as_deref() == Some(commit) {
            return Ok(from.elapsed());
        }
        if from.elapsed() > GIVE_UP {
            return Err(format!(
                "the sync did not apply {commit} within {GIVE_UP:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One commit's way to the fleet.
struct CommitRun {
    applied: Duration,
    done: Duration,
    complete: bool,
    cpu: CpuTimes,
    peaks: Peaks,
    /// The requests the hub's API server answered meanwhile.
    requests: RequestCounts,
}

struct Report {
    clusters_started: Duration,
    join: CommitRun,
    lease: CommitRun,
    hub_heap_end: f64,
    rss_end: f64,
    load_before: String,
    load_after: String,
}

fn main() {
    // `RUST_LOG=fleetform::sync=debug`, say, shows what the sync spends its time on.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("converge bench: {message}");
            std::process::exit(2);
        }
    };
    let runtime = |name: &'static str, tag: Tag| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name)
            .on_thread_start(move || heap::tag_thread(tag))
            .enable_all()
            .build()
    };
    let (hub_rt, fleet_rt) = match (runtime("hub-rt", Tag::Hub), runtime("fleet-rt", Tag::Fleet)) {
        (Ok(hub), Ok(fleet)) => (hub, fleet),
        (Err(err), _) | (_, Err(err)) => {
            eprintln!("converge bench: cannot start a runtime: {err}");
            std::process::exit(3);
        }
    };
    // `block_on` runs the benchmark's own future on this thread: it is the fleet's side.
    heap::tag_thread(Tag::Fleet);
    if settings.heap_profile {
        heap::start_profile(&[Tag::Hub, Tag::Other]);
    }
    let result = fleet_rt.block_on(run(&settings, hub_rt.handle().clone()));
    hub_rt.shutdown_timeout(Duration::from_secs(5));
    fleet_rt.shutdown_timeout(Duration::from_secs(5));
    match result {
        Ok(report) => print(&settings, &report),
        Err(message) => {
            eprintln!("converge bench failed: {message}");
            std::process::exit(3);
        }
    }
}

async fn run(settings: &Settings, hub_rt: tokio::runtime::Handle) -> Result<Report, String> {
    let spokes = settings.spokes;
    let load_before = load_average();
    let light = settings.kind == Kind::Light;
    eprintln!(
        "converge bench: {spokes} {} spokes on {}; load {load_before}",
        settings.kind.label(),
        machine()
    );
    let io = |what: &str| {
        let what = what.to_string();
        move |err: std::io::Error| format!("{what}: {err}")
    };
    // The spokes' clusters exist before the commit that declares them, as real ones would:
    // `up` starts them from a fleet that has them all; the repo's first commit has the hub.
    let full = tempfile::tempdir().map_err(io("temporary directory"))?;
    write_fleet(full.path(), spokes, LEASE_SECONDS).map_err(io("write the fleet"))?;
    let fleet = repo::load(full.path())?;
    let repo = tempfile::tempdir().map_err(io("temporary directory"))?;
    let git = git2::Repository::init(repo.path()).map_err(|err| err.to_string())?;
    write_fleet(repo.path(), 0, LEASE_SECONDS).map_err(io("write the fleet"))?;
    commit(&git, "the hub").map_err(|err| err.to_string())?;
    let data = tempfile::tempdir().map_err(io("temporary directory"))?;

    let started = Instant::now();
    let running = up::start(
        &fleet,
        repo::up_config(
            data.path(),
            repo.path(),
            light,
            AgentLoops::Registration,
            hub_rt,
        ),
    )
    .await
    .map_err(|err| format!("the fleet's clusters: {err}"))?;
    let clusters_started = started.elapsed();
    let hub = running.hubs[0].client.clone();
    eprintln!("{spokes} spokes' clusters and the hub started in {clusters_started:.1?}");

    let running_spokes = Arc::new(AtomicUsize::new(0));
    let counting = count_running_spokes(hub.clone(), running_spokes.clone());
    let mut follower = Follower {
        events: watcher(Api::<ManagedCluster>::all(hub.clone()), Default::default()).boxed(),
        clusters: Clusters::default(),
        running: running_spokes,
        spokes,
    };
    let hub_cpu = |used: CpuTimes| CpuTimes {
        // With light spokes the hub's is the one SQLite writer.
        hub: used.hub + if light { used.writers } else { 0.0 },
        ..used
    };

    // The commit declaring every spoke; `up`'s sync picks it up within its 1 s interval.
    let cpu_before = cpu_times();
    let requests_before = running.hubs[0].request_counts();
    write_fleet(repo.path(), spokes, LEASE_SECONDS).map_err(io("write the fleet"))?;
    let sha = commit(&git, "every spoke").map_err(|err| err.to_string())?;
    let from = Instant::now();
    let join_applied = applied(&hub, &sha, from).await?;
    let (available, complete, peaks) = follower.wait(from, "available", Clusters::available).await;
    let join = CommitRun {
        applied: join_applied,
        done: available,
        complete,
        cpu: hub_cpu(cpu_times().since(&cpu_before)),
        peaks,
        requests: running.hubs[0].request_counts().since(&requests_before),
    };

    // The commit changing every spoke's lease duration.
    let cpu_before = cpu_times();
    let requests_before = running.hubs[0].request_counts();
    write_fleet(repo.path(), spokes, CHANGED_LEASE_SECONDS).map_err(io("write the fleet"))?;
    let sha = commit(&git, "every spoke's lease").map_err(|err| err.to_string())?;
    let from = Instant::now();
    let lease_applied = applied(&hub, &sha, from).await?;
    let (changed, complete, peaks) = follower
        .wait(from, "on the new lease", |clusters| {
            clusters.on_lease(CHANGED_LEASE_SECONDS)
        })
        .await;
    let lease = CommitRun {
        applied: lease_applied,
        done: changed,
        complete,
        cpu: hub_cpu(cpu_times().since(&cpu_before)),
        peaks,
        requests: running.hubs[0].request_counts().since(&requests_before),
    };
    let report = Report {
        clusters_started,
        join,
        lease,
        hub_heap_end: hub_heap_mib(),
        rss_end: rss_mib(),
        load_before,
        load_after: load_average(),
    };
    drop(follower);
    counting.abort();
    running.shutdown().await;
    Ok(report)
}

fn print(settings: &Settings, report: &Report) {
    let spokes = settings.spokes;
    let kind = settings.kind.label();
    let target = |complete: bool, within: Duration| {
        if complete {
            format!("< {within:?}")
        } else {
            "not reached".to_string()
        }
    };
    let join_target = if spokes > 1_000 {
        Duration::from_secs(300)
    } else {
        Duration::from_secs(60)
    };
    println!(
        "commit to Available, {spokes} {kind} spokes on an embedded fleet (fleetform up's clusters, in one process) — {}",
        machine()
    );
    println!("{:<48} {:>14} {:>14}", "measure", "value", "target");
    let row = |measure: &str, value: String, target: String| {
        println!("{measure:<48} {value:>14} {target:>14}");
    };
    let seconds = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    row(
        "clusters started (not timed)",
        seconds(report.clusters_started),
        "-".into(),
    );
    for (title, phase, what, within) in [
        ("commit", &report.join, "every spoke Available", join_target),
        (
            "lease commit",
            &report.lease,
            "every spoke on the new lease",
            Duration::from_secs(60),
        ),
    ] {
        row(
            &format!("{title} → applied by sync"),
            seconds(phase.applied),
            "-".into(),
        );
        row(
            &format!("{title} → {what}"),
            seconds(phase.done),
            target(phase.complete, within),
        );
        let hub_threads = match settings.kind {
            Kind::Light => "  hub CPU (hub-rt threads + its SQLite writer)",
            Kind::Real => "  hub CPU (hub-rt threads)",
        };
        row(hub_threads, format!("{:.1} s", phase.cpu.hub), "-".into());
        row(
            "  spokes' CPU (fleet-rt threads)",
            format!("{:.1} s", phase.cpu.fleet),
            "-".into(),
        );
        row(
            "  process CPU",
            format!("{:.1} s", phase.cpu.process),
            "-".into(),
        );
        row(
            "  hub heap peak",
            format!("{:.0} MiB", phase.peaks.hub_heap),
            "< 1024 MiB".into(),
        );
        row(
            "  process RSS peak",
            format!("{:.0} MiB", phase.peaks.rss),
            "-".into(),
        );
        row(
            "  hub API requests (writes)",
            format!("{} ({})", phase.requests.total(), phase.requests.writes()),
            "-".into(),
        );
        let mut busiest: Vec<_> = phase.requests.iter().collect();
        busiest.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
        for (kind, count) in busiest.into_iter().take(14) {
            let resource = match kind.group.as_str() {
                "" => kind.resource.clone(),
                group => format!("{}.{group}", kind.resource),
            };
            row(
                &format!("    {:?} {resource}", kind.verb),
                count.to_string(),
                String::new(),
            );
        }
    }
    row(
        "hub heap at the end",
        format!("{:.0} MiB", report.hub_heap_end),
        "< 1024 MiB".into(),
    );
    row(
        "process RSS at the end",
        format!("{:.0} MiB", report.rss_end),
        "-".into(),
    );
    println!(
        "load average before {}, after {}",
        report.load_before, report.load_after
    );
    let phase = |phase: &CommitRun| {
        json!({
            "applied_seconds": phase.applied.as_secs_f64(),
            "done_seconds": phase.done.as_secs_f64(),
            "complete": phase.complete,
            "hub_cpu_seconds": phase.cpu.hub,
            "fleet_cpu_seconds": phase.cpu.fleet,
            "process_cpu_seconds": phase.cpu.process,
            "hub_heap_peak_mib": phase.peaks.hub_heap,
            "rss_peak_mib": phase.peaks.rss,
            "hub_requests": phase.requests.total(),
            "hub_writes": phase.requests.writes(),
            "hub_requests_by_kind": phase
                .requests
                .iter()
                .map(|(kind, count)| {
                    json!({
                        "verb": format!("{:?}", kind.verb),
                        "group": kind.group,
                        "resource": kind.resource,
                        "count": count,
                    })
                })
                .collect::<Vec<_>>(),
        })
    };
    let json = json!({
        "spokes": spokes,
        "kind": kind,
        "machine": machine(),
        "clusters_started_seconds": report.clusters_started.as_secs_f64(),
        "join": phase(&report.join),
        "join_target_seconds": join_target.as_secs_f64(),
        "lease_change": phase(&report.lease),
        "lease_change_target_seconds": 60,
        "hub_heap_end_mib": report.hub_heap_end,
        "rss_end_mib": report.rss_end,
        "load_before": report.load_before,
        "load_after": report.load_after,
    });
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(
        out.join(format!("converge-{kind}.json")),
        serde_json::to_vec_pretty(&json).unwrap_or_default(),
    );
    if heap::profiling() {
        let mut text = String::new();
        for (phase, run) in [
            ("commit → Available", &report.join),
            ("lease change", &report.lease),
        ] {
            if let Some(sites) = &run.peaks.hub_heap_sites {
                text.push_str(&format!(
                    "## the hub's heap at its peak during {phase} ({:.0} MiB)\n",
                    run.peaks.hub_heap
                ));
                text.push_str(&heap::report(sites, 30, 8));
                text.push('\n');
            }
        }
        eprint!("{text}");
        let _ = std::fs::write(out.join(format!("converge-{kind}-heap.txt")), text);
    }
}
