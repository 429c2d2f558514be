//! Commit to Available as fleetform is deployed (issue 33): the hub's API server, the hub and
//! the sync are processes of their own, measured apart.
//!
//! - **API server**: `fleetform controlplane` (durable, its SQLite under a temporary directory),
//!   standing in for kube-apiserver. What a human does on it uses its administrator: install
//!   fleetform's CRDs and namespace (`install_hub`) and the RBAC of `deploy/hub/rbac.yaml`
//!   (`install_hub_rbac`), create a Secret per spoke with that spoke's kubeconfig, and point a
//!   FleetSync at the fleet repo (every 1 s, as the converge benchmark's `up` syncs).
//! - **hub**: `fleetform hub --metrics-addr …` and **sync**: `fleetform sync --metrics-addr …
//!   --webhook-addr … --dashboard-addr …`, the arguments and environment (`FLEETFORM_LOG=info`,
//!   `POD_NAME`, the sync's `FLEETFORM_CACHE_DIR`) of `deploy/hub/deployment.yaml`'s containers
//!   on loopback ports, plus the dashboard, each under the `fleetform-system/fleetform`
//!   ServiceAccount's identity (a kubeconfig of it, as its token would be mounted), electing a
//!   leader on their Leases as a replica does. The hub's conversion webhook is not served (its
//!   certificate names the in-cluster Service, which nothing resolves here; every client reads
//!   and writes ManagedClusterAddOns in their storage version, so nothing converts).
//! - **spokes** (processes of this benchmark's own binary, `FLEETFORM_BENCH_SPOKES_PER_PROCESS`
//!   each, 2,500 by default: a process's file descriptors run out near 4,700 spokes here):
//!   `FLEETFORM_BENCH_SPOKES` spokes (default 1,000) of the converge benchmark's kind
//!   (`FLEETFORM_BENCH_SPOKES_KIND`, `light` by default here): `up`'s spoke clusters on
//!   loopback ports, each with its kubelet stand-in running the agent the hub installs; every
//!   agent reaches the hub's API server over TCP, registers by CSR and renews its lease. The
//!   Spokes name their clusters by `kubeconfig.secretRef`, as on a real hub.
//!
//! - **addons**: the fleet declares `FLEETFORM_BENCH_ADDONS` AddOns (issue 33's 7 by default;
//!   health by lease, no registration) and every spoke enables each: the sync applies a
//!   ClusterManagementAddOn per addon, the hub's reconciler a ManagedClusterAddOn per spoke and
//!   addon, and the hub's and the dashboard's caches hold them. Light spokes run no addon
//!   agent and report no addon health (nor does anything deploy addons: on an OCM hub that is
//!   the addon manager's part, not fleetform's), so the addons cost what enabling them costs.
//!
//! Then, as the converge benchmark: one commit declares every spoke and the clock runs until
//! every ManagedCluster is Available and every spoke's ManagedClusterAddOns exist; a second
//! doubles every spoke's lease duration and the clock runs until every ManagedCluster asks for
//! it and is still Available. The lease is OCM's default, 60 s (`FLEETFORM_BENCH_LEASE_SECONDS`; the converge benchmark's 10 s had 10,000
//! agents renew 1,000 leases a second, most of what the API server and the hub did once the
//! fleet had joined, and the join slowed as it grew).
//! For each phase and process: CPU-seconds (utime + stime of `/proc/<pid>/stat`; per 1,000
//! spokes, the figure that survives a busy machine), the resident set's peak (sampled every
//! 250 ms), and at the end each process's high-water mark (`VmHWM`); the API server's requests
//! (its `/metrics`, `apiserver_request_total`, read by its administrator before and after):
//! per spoke, writes apart (a dry run is a request, not a write: nothing is stored, and
//! kube-apiserver's counter labels it `dry_run`), and the busiest kinds. They include every
//! client's: the hub's, the sync's, the dashboard's, the agents' and this benchmark's two
//! watches; fleetform's own (the hub's and the sync's ServiceAccount,
//! `fleetform_apiserver_request_total`) are printed apart too, with their busiest kinds. And the
//! requests the spokes' API servers answered (each spoke process sums its spokes' when asked on
//! its standard input): the hub's installs and reads there, the agents' and the kubelet
//! stand-ins' own. While a phase runs a viewer loads the dashboard's fleet page every 5 s.
//! Targets (issue 33, at 10,000 light spokes on 2 cores): the hub ≤ 512 MiB and the sync with
//! its dashboard ≤ 256 MiB at every peak, ≤ 50 requests per spoke (≤ 25 writes) for the join,
//! commit → every spoke Available < 120 s, the lease change < 30 s. They are printed beside the
//! figures; nothing is asserted.
//!
//! Prints a table and writes `target/bench/deployment.json`; each process's output goes to
//! `target/bench/deployment-logs/<process>.log`. `FLEETFORM_BENCH_BIN=/path/to/fleetform` runs
//! the three processes from another build (an older one, for figures beside the new ones; one
//! without the API server's `/metrics` gets no request counts). `RUST_LOG` logs this process
//! (the spokes) to stderr.
//! `cargo bench --bench deployment`; `FLEETFORM_BENCH_SPOKES=100` for a quick run;
//! `FLEETFORM_BENCH_SPOKES=10000` for issue 33's; `FLEETFORM_BENCH_GIVE_UP=<seconds>` past 900 s.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fleetform::agent::AgentLoops;
use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::api::{FleetSync, ManagedCluster, ManagedClusterAddOn};
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::process::{Child, Command};

/// The simulated spokes stand in for clusters elsewhere, yet share this machine's two cores with
/// the processes measured: they allocate as fleetform's binary does (mimalloc), where the system
/// allocator spent about 60% of their CPU on a heap of thousands of spokes.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/procfs.rs"]
mod procfs;
#[path = "support/repo.rs"]
mod repo;

use procfs::{load_average, machine, process_cpu_seconds, process_peak_rss_mib, process_rss_mib};
use repo::commit;

/// OCM's default lease duration, which a deployment keeps unless it has reason not to.
const LEASE_SECONDS: i32 = 60;
/// Issue 33's fleet: seven addons on every spoke.
const ADDONS: usize = 7;
/// How long either phase may take before the benchmark gives up on it, unless
/// `FLEETFORM_BENCH_GIVE_UP` says (in seconds).
fn give_up() -> Duration {
    std::env::var("FLEETFORM_BENCH_GIVE_UP")
        .ok()
        .and_then(|seconds| seconds.parse().ok())
        .map_or(Duration::from_secs(900), Duration::from_secs)
}
/// How long a process may take to come up (write its kubeconfig, print its dashboard's URL).
const START: Duration = Duration::from_secs(60);
/// The FleetSync this benchmark points at the fleet repo.
const FLEET_SYNC: &str = "fleet";

/// Issue 33's targets.
const HUB_RSS_TARGET_MIB: f64 = 512.0;
const SYNC_RSS_TARGET_MIB: f64 = 256.0;
const REQUESTS_PER_SPOKE_TARGET: f64 = 50.0;
const WRITES_PER_SPOKE_TARGET: f64 = 25.0;
const JOIN_TARGET: Duration = Duration::from_secs(120);
const LEASE_CHANGE_TARGET: Duration = Duration::from_secs(30);

struct Settings {
    spokes: usize,
    /// At most this many spokes to a spoke process.
    spokes_per_process: usize,
    /// The lease duration of the join; the second commit doubles it.
    lease_seconds: i32,
    /// AddOns the fleet declares, every spoke enabling each.
    addons: usize,
    light: bool,
    /// The `fleetform` binary the API server, hub and sync run.
    binary: PathBuf,
}

impl Settings {
    fn spoke_processes(&self) -> usize {
        self.spokes.div_ceil(self.spokes_per_process).max(1)
    }

    fn from_env() -> Result<Settings, String> {
        let spokes = match std::env::var("FLEETFORM_BENCH_SPOKES") {
            Err(_) => 1_000,
            Ok(text) => text
                .parse()
                .map_err(|_| format!("FLEETFORM_BENCH_SPOKES={text:?}: expected a count"))?,
        };
        let spokes_per_process = match std::env::var("FLEETFORM_BENCH_SPOKES_PER_PROCESS") {
            Err(_) => 2_500,
            Ok(text) => text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!("FLEETFORM_BENCH_SPOKES_PER_PROCESS={text:?}: expected a count above 0")
            })?,
        };
        let lease_seconds = match std::env::var("FLEETFORM_BENCH_LEASE_SECONDS") {
            Err(_) => LEASE_SECONDS,
            Ok(text) => text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!("FLEETFORM_BENCH_LEASE_SECONDS={text:?}: expected seconds above 0")
            })?,
        };
        let addons = match std::env::var("FLEETFORM_BENCH_ADDONS") {
            Err(_) => ADDONS,
            Ok(text) => text
                .parse()
                .map_err(|_| format!("FLEETFORM_BENCH_ADDONS={text:?}: expected a count"))?,
        };
        let light = match std::env::var("FLEETFORM_BENCH_SPOKES_KIND").as_deref() {
            Err(_) | Ok("light") => true,
            Ok("real") => false,
            Ok(other) => {
                return Err(format!(
                    "FLEETFORM_BENCH_SPOKES_KIND={other:?}: expected `light` or `real`"
                ));
            }
        };
        let binary = match std::env::var_os("FLEETFORM_BENCH_BIN") {
            Some(path) => PathBuf::from(path),
            None => PathBuf::from(env!("CARGO_BIN_EXE_fleetform")),
        };
        if !binary.is_file() {
            return Err(format!(
                "{}: no such file (FLEETFORM_BENCH_BIN names the fleetform binary to run)",
                binary.display()
            ));
        }
        Ok(Settings {
            spokes,
            spokes_per_process,
            lease_seconds,
            addons,
            light,
            binary,
        })
    }
}

/// The processes measured, in the order they are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    ApiServer,
    Hub,
    Sync,
    Spokes,
}

impl Role {
    const ALL: [Role; 4] = [Role::ApiServer, Role::Hub, Role::Sync, Role::Spokes];

    fn label(self) -> &'static str {
        match self {
            Role::ApiServer => "API server (fleetform controlplane)",
            Role::Hub => "hub (fleetform hub)",
            Role::Sync => "sync + dashboard (fleetform sync)",
            Role::Spokes => "spokes (this benchmark's processes)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Role::ApiServer => "apiserver",
            Role::Hub => "hub",
            Role::Sync => "sync",
            Role::Spokes => "spokes",
        }
    }

    fn rss_target(self) -> Option<f64> {
        match self {
            Role::Hub => Some(HUB_RSS_TARGET_MIB),
            Role::Sync => Some(SYNC_RSS_TARGET_MIB),
            Role::ApiServer | Role::Spokes => None,
        }
    }
}

/// The pids of the processes measured: one each, but the spokes' (this process and its spoke
/// processes), whose figures are summed.
#[derive(Clone)]
struct Pids(BTreeMap<Role, Vec<u32>>);

impl Pids {
    fn sum(&self, figure: impl Fn(u32) -> f64) -> BTreeMap<Role, f64> {
        self.0
            .iter()
            .map(|(role, pids)| (*role, pids.iter().map(|pid| figure(*pid)).sum()))
            .collect()
    }

    fn cpu(&self) -> BTreeMap<Role, f64> {
        self.sum(|pid| process_cpu_seconds(pid).unwrap_or(0.0))
    }

    fn rss(&self) -> BTreeMap<Role, f64> {
        self.sum(process_rss_mib)
    }

    /// Each process's high-water mark (summed for the spokes: an upper bound of their peak).
    fn peak_rss(&self) -> BTreeMap<Role, f64> {
        self.sum(process_peak_rss_mib)
    }
}

/// One `fleetform` process of the deployment, killed when dropped.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn start(
        binary: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
        log: PathBuf,
    ) -> Result<Process, String> {
        let file = std::fs::File::create(&log)
            .map_err(|err| format!("cannot create {}: {err}", log.display()))?;
        let stderr = file
            .try_clone()
            .map_err(|err| format!("cannot open {} twice: {err}", log.display()))?;
        let child = Command::new(binary)
            .args(args)
            .envs(envs.iter().copied())
            // Held open while the process is: a spoke process ends when it closes.
            .stdin(Stdio::piped())
            .stdout(file)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| format!("cannot start {} {}: {err}", binary.display(), args[0]))?;
        Ok(Process { child, log })
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Fails when the process has exited, pointing at its log.
    fn check_running(&mut self, what: &str) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{what} exited ({status}); see {}",
                self.log.display()
            )),
            Err(err) => Err(format!("{what}: {err}")),
        }
    }

    /// Waits until `found` finds what it wants in the process's output, or `START` passes.
    async fn wait_for_output<T>(
        &mut self,
        what: &str,
        found: impl Fn(&str) -> Option<T>,
    ) -> Result<T, String> {
        let from = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(value) = found(&text) {
                return Ok(value);
            }
            self.check_running(what)?;
            if from.elapsed() > START {
                return Err(format!(
                    "{what} did not come up within {START:?}; see {}",
                    self.log.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Waits until `path` has content, or `START` passes.
async fn wait_for_file(process: &mut Process, what: &str, path: &Path) -> Result<String, String> {
    wait_for_file_within(process, what, path, START).await
}

async fn wait_for_file_within(
    process: &mut Process,
    what: &str,
    path: &Path,
    within: Duration,
) -> Result<String, String> {
    let from = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return Ok(text);
        }
        process.check_running(what)?;
        if from.elapsed() > within {
            return Err(format!(
                "{} never appeared; see {}",
                path.display(),
                process.log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Hub document: the hub is the cluster its fleetform runs in, and agents reach it at its
/// API server's address, trusting its CA.
fn hub_document(api_server: &str, ca_pem: &str, lease_seconds: i32) -> String {
    let ca: String = ca_pem.lines().map(|line| format!("    {line}\n")).collect();
    format!(
        "apiVersion: fleetform.io/v1alpha1\nkind: Hub\nmetadata:\n  name: hub\nspec:\n  kubeconfig:\n    inCluster: true\n  apiServer: {api_server}\n  caBundle: |\n{ca}  registration:\n    leaseDurationSeconds: {lease_seconds}\n"
    )
}

fn spoke_name(i: usize) -> String {
    format!("spoke-{i:05}")
}

fn kubeconfig_secret(spoke: &str) -> String {
    format!("{spoke}-kubeconfig")
}

fn addon_name(a: usize) -> String {
    format!("addon-{a}")
}

/// Writes the hub, `addons` AddOns and the spokes numbered `spokes` (100 to a file), each asking
/// for leases of `lease_seconds` and enabling every addon; `embedded` spokes are `up`'s clusters
/// (what a spoke process starts), the others name their kubeconfig Secret on the hub (what the
/// commit declares).
fn write_fleet(
    dir: &Path,
    hub: &str,
    spokes: Range<usize>,
    lease_seconds: i32,
    addons: usize,
    embedded: bool,
) -> Result<(), std::io::Error> {
    std::fs::create_dir_all(dir.join("spokes"))?;
    std::fs::write(dir.join("hub.yaml"), hub)?;
    let names: Vec<String> = (0..addons).map(addon_name).collect();
    let mut enabled = String::new();
    if !names.is_empty() {
        // Light addons: health judged by their lease (OCM's default), no registration.
        std::fs::create_dir_all(dir.join("addons"))?;
        let text: String = names
            .iter()
            .map(|name| {
                format!(
                    "---\napiVersion: fleetform.io/v1alpha1\nkind: AddOn\nmetadata:\n  name: {name}\nspec:\n  installNamespace: open-cluster-management-agent-addon\n"
                )
            })
            .collect();
        std::fs::write(dir.join("addons/addons.yaml"), text)?;
        enabled = format!("  addons: [{}]\n", names.join(", "));
    }
    for chunk in spokes.start / 100..spokes.end.div_ceil(100) {
        let mut text = String::new();
        for i in (chunk * 100).max(spokes.start)..((chunk + 1) * 100).min(spokes.end) {
            let name = spoke_name(i);
            let kubeconfig = if embedded {
                "embedded: {}".to_string()
            } else {
                format!(
                    "secretRef: {{namespace: {SYSTEM_NAMESPACE}, name: {}, key: kubeconfig}}",
                    kubeconfig_secret(&name)
                )
            };
            text.push_str(&format!(
                "---\napiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata:\n  name: {name}\n  labels:\n    batch: b{chunk}\nspec:\n  hubRef: hub\n  kubeconfig:\n    {kubeconfig}\n  leaseDurationSeconds: {lease_seconds}\n{enabled}"
            ));
        }
        std::fs::write(dir.join(format!("spokes/batch-{chunk:03}.yaml")), text)?;
    }
    Ok(())
}

/// The API server's request counts by verb (as its `/metrics` names them), whether a dry run
/// (`dryRun=All`: a request, and no write, as nothing is stored), group and resource
/// (`resource/subresource`).
#[derive(Clone, Debug, Default)]
struct Requests(BTreeMap<RequestKey, u64>);

/// A kind of request: verb, whether a dry run, group, `resource[/subresource]`.
type RequestKey = (String, bool, String, String);

impl Requests {
    /// Parses `apiserver_request_total` series, summing those that differ in other labels (a
    /// kube-apiserver's `code`, `scope`, ...).
    /// The series of the counter `family` in a `/metrics` page, of `user` only when given.
    fn parse(text: &str, family: &str, user: Option<&str>) -> Requests {
        let mut counts = BTreeMap::new();
        let prefix = format!("{family}{{");
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(prefix.as_str()) else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let mut found = BTreeMap::new();
            for pair in labels.split("\",") {
                if let Some((key, value)) = pair.split_once("=\"") {
                    found.insert(key.trim(), value.trim_end_matches('"').to_string());
                }
            }
            let label = |key: &str| found.get(key).cloned().unwrap_or_default();
            if user.is_some_and(|user| label("user") != user) {
                continue;
            }
            let resource = match label("subresource").as_str() {
                "" => label("resource"),
                sub => format!("{}/{sub}", label("resource")),
            };
            let dry_run = label("dry_run") == "All";
            *counts
                .entry((label("verb"), dry_run, label("group"), resource))
                .or_insert(0) += value as u64;
        }
        Requests(counts)
    }

    fn since(&self, earlier: &Requests) -> Requests {
        Requests(
            self.0
                .iter()
                .map(|(kind, n)| {
                    (
                        kind.clone(),
                        n.saturating_sub(earlier.0.get(kind).copied().unwrap_or(0)),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
        )
    }

    fn total(&self) -> u64 {
        self.0.values().sum()
    }

    fn is_write((verb, dry_run, _, _): &RequestKey) -> bool {
        !dry_run
            && matches!(
                verb.as_str(),
                "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION"
            )
    }

    fn writes(&self) -> u64 {
        self.0
            .iter()
            .filter(|(key, _)| Self::is_write(key))
            .map(|(_, n)| n)
            .sum()
    }

    /// The `count` busiest kinds of request among those `keep` keeps, busiest first, each
    /// named as "VERB resource.group".
    fn busiest(&self, count: usize, keep: impl Fn(&RequestKey) -> bool) -> Vec<(String, u64)> {
        let mut kinds: Vec<_> = self
            .0
            .iter()
            .filter(|(key, _)| keep(key))
            .map(|((verb, dry_run, group, resource), n)| {
                let resource = match group.as_str() {
                    "" => resource.clone(),
                    group => format!("{resource}.{group}"),
                };
                let dry_run = if *dry_run { " (dry run)" } else { "" };
                (format!("{verb} {resource}{dry_run}"), *n)
            })
            .collect();
        kinds.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        kinds.truncate(count);
        kinds
    }
}

/// The API server's request counts: every client's, and fleetform's own (the hub's and the
/// sync's ServiceAccount) when it counts ServiceAccounts apart; `None` when it serves no
/// `/metrics` (older builds).
async fn request_counts(admin: &Client) -> Option<(Requests, Option<Requests>)> {
    let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let fleetform = format!(
        "system:serviceaccount:{}:{}",
        fleetform::deploy::HUB_SERVICE_ACCOUNT_NAMESPACE,
        fleetform::deploy::HUB_SERVICE_ACCOUNT
    );
    match admin.request_text(request).await {
        Ok(text) => Some((
            Requests::parse(&text, "apiserver_request_total", None),
            text.contains("# TYPE fleetform_apiserver_request_total ")
                .then(|| {
                    Requests::parse(&text, "fleetform_apiserver_request_total", Some(&fleetform))
                }),
        )),
        Err(err) => {
            eprintln!("the API server's /metrics: {err}");
            None
        }
    }
}

/// What the benchmark follows: every ManagedCluster (Available, the lease duration it asks
/// for), every ManagedClusterAddOn (its metadata: which addons each cluster has enabled) and
/// the commit the FleetSync last applied, each by one watch.
struct Follower {
    clusters:
        futures::stream::BoxStream<'static, Result<watcher::Event<ManagedCluster>, watcher::Error>>,
    addons: futures::stream::BoxStream<
        'static,
        Result<watcher::Event<PartialObjectMeta<ManagedClusterAddOn>>, watcher::Error>,
    >,
    syncs: futures::stream::BoxStream<'static, Result<watcher::Event<FleetSync>, watcher::Error>>,
    seen: BTreeMap<String, (bool, i32)>,
    /// The addons enabled, by cluster namespace.
    enabled: BTreeMap<String, BTreeSet<String>>,
    /// The addons every spoke enables.
    addons_wanted: usize,
    applied: Option<String>,
    spokes: usize,
    pids: Pids,
    dashboard: Viewer,
}

/// Peaks sampled while a phase runs.
#[derive(Default)]
struct Peaks {
    rss: BTreeMap<Role, f64>,
    /// The slowest dashboard page load.
    dashboard_page: Option<Duration>,
}

impl Peaks {
    fn sample(&mut self, pids: &Pids) {
        for (role, rss) in pids.rss() {
            let peak = self.rss.entry(role).or_insert(0.0);
            *peak = peak.max(rss);
        }
    }
}

impl Follower {
    fn available(&self) -> usize {
        self.seen
            .values()
            .filter(|(available, _)| *available)
            .count()
    }

    /// Spokes joined: Available, with every addon enabled.
    fn joined(&self) -> usize {
        self.seen
            .iter()
            .filter(|(name, (available, _))| *available && self.addons_enabled(name))
            .count()
    }

    fn addons_enabled(&self, cluster: &str) -> bool {
        self.enabled.get(cluster).map_or(0, BTreeSet::len) >= self.addons_wanted
    }

    fn on_lease(&self, lease_seconds: i32) -> usize {
        self.seen
            .values()
            .filter(|(available, lease)| *available && *lease == lease_seconds)
            .count()
    }

    /// Waits until the FleetSync applied `commit` and `done` reaches every spoke (or
    /// [`give_up`]), printing progress every 5 s; returns when the commit was applied and when
    /// `done` reached every spoke (from `from`), whether it did, and the peaks sampled.
    async fn wait(
        &mut self,
        from: Instant,
        commit: &str,
        what: &str,
        done: impl Fn(&Follower) -> usize,
    ) -> (Option<Duration>, Duration, bool, Peaks) {
        let mut peaks = Peaks::default();
        let mut applied = None;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut last_report = Instant::now();
        let mut last_view = Instant::now();
        loop {
            tokio::select! {
                event = self.clusters.next() => match event {
                    Some(Ok(watcher::Event::InitApply(cluster) | watcher::Event::Apply(cluster))) => {
                        let facts = (cluster.is_available(), cluster.lease_duration_seconds());
                        self.seen.insert(cluster.name_any(), facts);
                    }
                    Some(Ok(watcher::Event::Delete(cluster))) => {
                        self.seen.remove(&cluster.name_any());
                    }
                    Some(Ok(_)) => {}
                    Some(Err(err)) => eprintln!("watching ManagedClusters: {err}"),
                    None => return (applied, from.elapsed(), false, peaks),
                },
                event = self.addons.next() => match event {
                    Some(Ok(watcher::Event::InitApply(addon) | watcher::Event::Apply(addon))) => {
                        let cluster = addon.namespace().unwrap_or_default();
                        self.enabled.entry(cluster).or_default().insert(addon.name_any());
                    }
                    Some(Ok(watcher::Event::Delete(addon))) => {
                        if let Some(names) = self.enabled.get_mut(&addon.namespace().unwrap_or_default()) {
                            names.remove(&addon.name_any());
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(err)) => eprintln!("watching ManagedClusterAddOns: {err}"),
                    None => return (applied, from.elapsed(), false, peaks),
                },
                event = self.syncs.next() => match event {
                    Some(Ok(watcher::Event::InitApply(sync) | watcher::Event::Apply(sync))) => {
                        self.applied = sync.status.and_then(|s| s.last_applied_commit);
                    }
                    Some(Ok(_)) => {}
                    Some(Err(err)) => eprintln!("watching the FleetSync: {err}"),
                    None => return (applied, from.elapsed(), false, peaks),
                },
                _ = tick.tick() => {
                    peaks.sample(&self.pids);
                    if last_view.elapsed() >= Duration::from_secs(5) {
                        last_view = Instant::now();
                        if let Some(took) = self.dashboard.view().await {
                            peaks.dashboard_page = peaks.dashboard_page.max(Some(took));
                        }
                    }
                    if last_report.elapsed() >= Duration::from_secs(5) {
                        last_report = Instant::now();
                        let rss = self.pids.rss();
                        eprintln!(
                            "{:>6.1?}: {} registered, {} available, {} with their addons, {} {what}; RSS MiB: API server {:.0}, hub {:.0}, sync {:.0}, spokes {:.0}; load {}",
                            from.elapsed(),
                            self.seen.len(),
                            self.available(),
                            self.seen.keys().filter(|name| self.addons_enabled(name)).count(),
                            done(self),
                            rss[&Role::ApiServer],
                            rss[&Role::Hub],
                            rss[&Role::Sync],
                            rss[&Role::Spokes],
                            load_average()
                        );
                    }
                    if from.elapsed() > give_up() {
                        eprintln!(
                            "gave up after {:?} with {} of {} {what}",
                            give_up(),
                            done(self),
                            self.spokes
                        );
                        return (applied, from.elapsed(), false, peaks);
                    }
                }
            }
            if applied.is_none() && self.applied.as_deref() == Some(commit) {
                applied = Some(from.elapsed());
            }
            if applied.is_some() && done(self) == self.spokes {
                peaks.sample(&self.pids);
                return (applied, from.elapsed(), true, peaks);
            }
        }
    }
}

/// A person looking at the dashboard's fleet page.
struct Viewer {
    url: String,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        http_body_util::Empty<hyper::body::Bytes>,
    >,
    failed_once: bool,
}

impl Viewer {
    /// Loads the page; how long it took, `None` when it failed (said once).
    async fn view(&mut self) -> Option<Duration> {
        let started = Instant::now();
        let uri: http::Uri = self.url.parse().ok()?;
        let outcome = match self.client.get(uri).await {
            Ok(response) if response.status().is_success() => response
                .into_body()
                .collect()
                .await
                .map_err(|err| err.to_string()),
            Ok(response) => Err(format!("status {}", response.status())),
            Err(err) => Err(err.to_string()),
        };
        match outcome {
            Ok(_) => Some(started.elapsed()),
            Err(err) => {
                if !self.failed_once {
                    self.failed_once = true;
                    eprintln!("the dashboard at {}: {err}", self.url);
                }
                None
            }
        }
    }
}

/// One commit's way to the fleet.
struct CommitRun {
    applied: Option<Duration>,
    done: Duration,
    complete: bool,
    cpu: BTreeMap<Role, f64>,
    peaks: Peaks,
    requests: Option<Requests>,
    /// Of them, those of fleetform's hub and sync (their ServiceAccount).
    fleetform_requests: Option<Requests>,
    /// The requests the spokes' API servers answered (the hub's installs and reads there, the
    /// agents' own, the stand-in kubelet's).
    spoke_requests: Option<Requests>,
}

struct Report {
    clusters_started: Duration,
    join: CommitRun,
    lease: CommitRun,
    peak_rss: BTreeMap<Role, f64>,
    load_before: String,
    load_after: String,
}

/// Set for a spoke process: the directory its assignment is in and its report goes to.
const SPOKE_PROCESS_ENV: &str = "FLEETFORM_BENCH_SPOKE_PROCESS";
/// What a spoke process runs ([`Assignment`], as JSON).
const SPOKE_ASSIGNMENT: &str = "assignment.json";

/// The spokes a spoke process starts: those numbered `spokes`, of `hub`, leasing for
/// `lease_seconds`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Assignment {
    spokes: Range<usize>,
    hub: String,
    light: bool,
    lease_seconds: i32,
}
/// What a spoke process started: `[[name, kubeconfig path], ...]`, written once they run.
const SPOKES_READY: &str = "ready.json";

/// A spoke process: starts the spokes its assignment numbers as `up` starts them, reports them,
/// and runs them until the benchmark closes its standard input (it ended or died).
async fn spoke_process(dir: &Path) -> Result<(), String> {
    let path = dir.join(SPOKE_ASSIGNMENT);
    let text =
        std::fs::read_to_string(&path).map_err(|err| format!("{}: {err}", path.display()))?;
    let Assignment {
        spokes,
        hub,
        light,
        lease_seconds,
    } = serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))?;
    let fleet_dir = dir.join("fleet");
    write_fleet(&fleet_dir, &hub, spokes, lease_seconds, 0, true)
        .map_err(|err| format!("write the spokes' fleet: {err}"))?;
    let fleet = repo::load(&fleet_dir)?;
    let running = fleetform::up::start(
        &fleet,
        repo::up_config(
            dir,
            &fleet_dir,
            light,
            AgentLoops::Registration,
            tokio::runtime::Handle::current(),
        ),
    )
    .await
    .map_err(|err| format!("the spokes' clusters: {err}"))?;
    let started: Vec<(String, PathBuf)> = running
        .spokes()
        .into_iter()
        .map(|(name, _, kubeconfig)| (name, kubeconfig))
        .collect();
    let report = serde_json::to_string(&started).map_err(|err| err.to_string())?;
    // Whole or not at all: the benchmark reads it once it has content.
    let partial = dir.join(format!("{SPOKES_READY}.partial"));
    std::fs::write(&partial, report)
        .and_then(|()| std::fs::rename(&partial, dir.join(SPOKES_READY)))
        .map_err(|err| format!("report the spokes started: {err}"))?;
    // Until the benchmark closes its standard input (it ended or died), each line
    // `requests PATH` asks for what the spokes' API servers have answered so far.
    let (asked, mut lines) = tokio::sync::mpsc::unbounded_channel();
    tokio::task::spawn_blocking(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if asked.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = lines.recv().await {
        if let Some(path) = line.strip_prefix(REQUESTS_ASKED) {
            let answered = serde_json::to_string(&spokes_answered(&running, &started))
                .map_err(|err| err.to_string())?;
            let partial = format!("{path}.partial");
            std::fs::write(&partial, answered)
                .and_then(|()| std::fs::rename(&partial, path))
                .map_err(|err| format!("report the spokes' requests: {err}"))?;
        }
    }
    running.shutdown().await;
    Ok(())
}

/// What a spoke process is asked on its standard input, before the path it answers in.
const REQUESTS_ASKED: &str = "requests ";

/// The requests the API servers of `spokes` have answered, summed by kind.
fn spokes_answered(
    running: &fleetform::up::Running,
    spokes: &[(String, PathBuf)],
) -> Vec<(RequestKey, u64)> {
    let mut sum: BTreeMap<RequestKey, u64> = BTreeMap::new();
    for counts in spokes
        .iter()
        .filter_map(|(name, _)| running.spoke_request_counts(name))
    {
        for (kind, count) in counts.iter() {
            if let Some(verb) = kind.verb.metric_name() {
                let key = (
                    verb.to_string(),
                    kind.dry_run,
                    kind.group.clone(),
                    kind.resource.clone(),
                );
                *sum.entry(key).or_insert(0) += count;
            }
        }
    }
    sum.into_iter().collect()
}

/// The requests the spoke processes' API servers have answered so far, summed; `None` when one
/// does not tell within [`START`]. Each is asked on its standard input and answers in
/// `requests-ASKED.json` in its directory.
async fn spoke_requests(processes: &mut [(Process, PathBuf)], asked: &str) -> Option<Requests> {
    use tokio::io::AsyncWriteExt;
    let mut sum = Requests::default();
    for (n, (process, dir)) in processes.iter_mut().enumerate() {
        let path = dir.join(format!("requests-{asked}.json"));
        let stdin = process.child.stdin.as_mut()?;
        let line = format!("{REQUESTS_ASKED}{}\n", path.display());
        stdin.write_all(line.as_bytes()).await.ok()?;
        stdin.flush().await.ok()?;
        let what = format!("spoke process {n}");
        let text = wait_for_file(process, &what, &path).await.ok()?;
        let answered: Vec<(RequestKey, u64)> = serde_json::from_str(&text).ok()?;
        for (key, count) in answered {
            *sum.0.entry(key).or_insert(0) += count;
        }
    }
    Some(sum)
}

fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    if let Some(dir) = std::env::var_os(SPOKE_PROCESS_ENV) {
        let outcome = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|err| format!("cannot start a runtime: {err}"))
            .and_then(|runtime| runtime.block_on(spoke_process(Path::new(&dir))));
        if let Err(message) = outcome {
            eprintln!("deployment bench spoke process: {message}");
            std::process::exit(3);
        }
        return;
    }
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("deployment bench: {message}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("deployment bench: cannot start a runtime: {err}");
            std::process::exit(3);
        }
    };
    let result = runtime.block_on(run(&settings));
    runtime.shutdown_timeout(Duration::from_secs(5));
    match result {
        Ok(report) => print(&settings, &report),
        Err(message) => {
            eprintln!("deployment bench failed: {message}");
            std::process::exit(3);
        }
    }
}

async fn run(settings: &Settings) -> Result<Report, String> {
    let spokes = settings.spokes;
    let load_before = load_average();
    eprintln!(
        "deployment bench: {spokes} {} spokes with {} addons each in {} processes on {}; load {load_before}; processes from {}",
        if settings.light { "light" } else { "real" },
        settings.addons,
        settings.spoke_processes(),
        machine(),
        settings.binary.display()
    );
    let io = |what: &str| {
        let what = what.to_string();
        move |err: std::io::Error| format!("{what}: {err}")
    };
    let bench_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let logs = bench_dir.join("deployment-logs");
    std::fs::create_dir_all(&logs).map_err(io("create target/bench/deployment-logs"))?;
    let work = tempfile::tempdir().map_err(io("temporary directory"))?;
    let binary = settings.binary.as_path();

    // The API server, and what a human does on it.
    let admin_kubeconfig_path = work.path().join("admin.kubeconfig");
    let state = work.path().join("apiserver");
    let mut api_server = Process::start(
        binary,
        &[
            "controlplane",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            &state.display().to_string(),
            "--kubeconfig-out",
            &admin_kubeconfig_path.display().to_string(),
        ],
        &[],
        logs.join("controlplane.log"),
    )?;
    let admin_kubeconfig =
        wait_for_file(&mut api_server, "the API server", &admin_kubeconfig_path).await?;
    let admin = fleetform::transport::client_from_kubeconfig(&admin_kubeconfig)
        .await
        .map_err(|err| format!("the API server's admin kubeconfig: {err}"))?;
    let parsed: serde_json::Value = serde_yaml::from_str(&admin_kubeconfig)
        .map_err(|err| format!("the API server's admin kubeconfig: {err}"))?;
    let url = parsed["clusters"][0]["cluster"]["server"]
        .as_str()
        .ok_or("the API server's admin kubeconfig names no server")?
        .to_string();
    let identities = fleetform_controlplane::Identities::from_data_dir(&url, &state)
        .map_err(|err| format!("the API server's CA: {err}"))?;
    let ca_pem = std::fs::read_to_string(state.join("pki/ca.crt"))
        .map_err(io("read the API server's CA"))?;
    fleetform::apply::install_hub("hub", &admin)
        .await
        .map_err(|err| format!("install fleetform on the hub: {err}"))?;
    fleetform::deploy::install_hub_rbac(&admin)
        .await
        .map_err(|err| format!("install the hub's RBAC: {err}"))?;

    // The spokes' clusters exist before the commit that declares them, as real ones would.
    let lease_seconds = settings.lease_seconds;
    let changed_lease_seconds = lease_seconds.saturating_mul(2);
    let hub = hub_document(&url, &ca_pem, lease_seconds);
    let repo = tempfile::tempdir().map_err(io("temporary directory"))?;
    let git = git2::Repository::init(repo.path()).map_err(|err| err.to_string())?;
    write_fleet(
        repo.path(),
        &hub,
        0..0,
        lease_seconds,
        settings.addons,
        false,
    )
    .map_err(io("write the fleet"))?;
    let first = commit(&git, "the hub").map_err(|err| err.to_string())?;
    let started = Instant::now();
    let count = settings.spoke_processes();
    let mut spoke_processes = Vec::with_capacity(count);
    for n in 0..count {
        let dir = work.path().join(format!("spokes-{n}"));
        std::fs::create_dir_all(&dir).map_err(io("create a spoke process's directory"))?;
        let assignment = Assignment {
            spokes: n * spokes / count..(n + 1) * spokes / count,
            hub: hub.clone(),
            light: settings.light,
            lease_seconds,
        };
        let assignment = serde_json::to_string(&assignment).map_err(|err| err.to_string())?;
        std::fs::write(dir.join(SPOKE_ASSIGNMENT), assignment)
            .map_err(io("write a spoke process's assignment"))?;
        let this = std::env::current_exe().map_err(io("this benchmark's binary"))?;
        let process = Process::start(
            &this,
            &["--bench"],
            &[(SPOKE_PROCESS_ENV, &dir.display().to_string())],
            logs.join(format!("spokes-{n}.log")),
        )?;
        spoke_processes.push((process, dir));
    }
    let mut started_spokes = Vec::new();
    for (n, (process, dir)) in spoke_processes.iter_mut().enumerate() {
        let ready = wait_for_file_within(
            process,
            &format!("spoke process {n}"),
            &dir.join(SPOKES_READY),
            give_up(),
        )
        .await?;
        let ready: Vec<(String, PathBuf)> = serde_json::from_str(&ready)
            .map_err(|err| format!("spoke process {n}'s {SPOKES_READY}: {err}"))?;
        started_spokes.extend(ready);
    }
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NAMESPACE);
    futures::stream::iter(started_spokes)
        .map(|(name, kubeconfig)| {
            let secrets = secrets.clone();
            async move {
                let text = std::fs::read_to_string(&kubeconfig)
                    .map_err(|err| format!("{}: {err}", kubeconfig.display()))?;
                let mut secret = Secret::default();
                secret.metadata.name = Some(kubeconfig_secret(&name));
                secret.data = Some(BTreeMap::from([(
                    "kubeconfig".to_string(),
                    ByteString(text.into_bytes()),
                )]));
                secrets
                    .create(&PostParams::default(), &secret)
                    .await
                    .map_err(|err| format!("create {name}'s kubeconfig Secret: {err}"))
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    let clusters_started = started.elapsed();
    eprintln!("{spokes} spokes' clusters started in {clusters_started:.1?}");

    let fleetsync = json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
        "metadata": {"name": FLEET_SYNC, "namespace": SYSTEM_NAMESPACE},
        "spec": {"repo": repo.path().display().to_string(), "ref": "HEAD",
                 "intervalSeconds": 1, "allowPrune": true},
    });
    let fleetsync: FleetSync = serde_json::from_value(fleetsync).map_err(|err| err.to_string())?;
    Api::<FleetSync>::namespaced(admin.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &fleetsync)
        .await
        .map_err(|err| format!("create the FleetSync: {err}"))?;

    // fleetform on the hub, as its ServiceAccount.
    let identity_path = work.path().join("fleetform.kubeconfig");
    let identity = identities
        .service_account_kubeconfig(
            fleetform::deploy::HUB_SERVICE_ACCOUNT_NAMESPACE,
            fleetform::deploy::HUB_SERVICE_ACCOUNT,
        )
        .map_err(|err| format!("the hub ServiceAccount's kubeconfig: {err}"))?;
    std::fs::write(&identity_path, identity).map_err(io("write the hub's kubeconfig"))?;
    let identity_path = identity_path.display().to_string();
    let mut hub_process = Process::start(
        binary,
        &[
            "hub",
            "--metrics-addr",
            "127.0.0.1:0",
            "--kubeconfig",
            &identity_path,
        ],
        &[("FLEETFORM_LOG", "info"), ("POD_NAME", "fleetform-hub-0")],
        logs.join("hub.log"),
    )?;
    let cache = work.path().join("cache");
    let mut sync_process = Process::start(
        binary,
        &[
            "sync",
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-addr",
            "127.0.0.1:0",
            "--dashboard-addr",
            "127.0.0.1:0",
            "--kubeconfig",
            &identity_path,
        ],
        &[
            ("FLEETFORM_LOG", "info"),
            ("POD_NAME", "fleetform-hub-0"),
            ("FLEETFORM_CACHE_DIR", &cache.display().to_string()),
        ],
        logs.join("sync.log"),
    )?;
    let dashboard = sync_process
        .wait_for_output("the sync's dashboard", |text| {
            text.lines()
                .find_map(|line| line.strip_prefix("dashboard: "))
                .map(|url| url.trim().to_string())
        })
        .await?;
    hub_process.check_running("the hub")?;

    let pids = Pids(BTreeMap::from([
        (Role::ApiServer, vec![api_server.pid()]),
        (Role::Hub, vec![hub_process.pid()]),
        (Role::Sync, vec![sync_process.pid()]),
        (
            Role::Spokes,
            std::iter::once(std::process::id())
                .chain(spoke_processes.iter().map(|(process, _)| process.pid()))
                .collect(),
        ),
    ]));
    let mut follower = Follower {
        clusters: watcher(
            Api::<ManagedCluster>::all(admin.clone()),
            Default::default(),
        )
        .boxed(),
        addons: watcher(
            Api::<PartialObjectMeta<ManagedClusterAddOn>>::all(admin.clone()),
            Default::default(),
        )
        .boxed(),
        syncs: watcher(
            Api::<FleetSync>::namespaced(admin.clone(), SYSTEM_NAMESPACE),
            watcher::Config::default().fields(&format!("metadata.name={FLEET_SYNC}")),
        )
        .boxed(),
        seen: BTreeMap::new(),
        enabled: BTreeMap::new(),
        addons_wanted: settings.addons,
        applied: None,
        spokes,
        pids: pids.clone(),
        dashboard: Viewer {
            url: dashboard,
            client: hyper_util::client::legacy::Client::builder(
                hyper_util::rt::TokioExecutor::new(),
            )
            .build_http(),
            failed_once: false,
        },
    };
    // The hub alone first, as a hub is installed before its spokes are declared.
    let (applied, _, _, _) = follower
        .wait(Instant::now(), &first, "(the hub's commit)", |f| {
            if f.applied.as_deref() == Some(first.as_str()) {
                f.spokes
            } else {
                0
            }
        })
        .await;
    if applied.is_none() {
        hub_process.check_running("the hub")?;
        sync_process.check_running("the sync")?;
        return Err(format!(
            "the sync did not apply the hub's commit within {:?}; see {}",
            give_up(),
            logs.display()
        ));
    }

    let mut phase = async |message: &str,
                           lease_seconds: i32,
                           what: &str,
                           done: &dyn Fn(&Follower) -> usize|
           -> Result<CommitRun, String> {
        // Asked before the CPU is read: summing the spokes' counts is no part of the phase.
        let spokes_before =
            spoke_requests(&mut spoke_processes, &format!("{lease_seconds}-before")).await;
        let cpu_before = pids.cpu();
        let requests_before = request_counts(&admin).await;
        write_fleet(
            repo.path(),
            &hub,
            0..spokes,
            lease_seconds,
            settings.addons,
            false,
        )
        .map_err(io("write the fleet"))?;
        let sha = commit(&git, message).map_err(|err| err.to_string())?;
        let from = Instant::now();
        let (applied, done, complete, peaks) = follower.wait(from, &sha, what, done).await;
        let cpu_after = pids.cpu();
        let spokes_after =
            spoke_requests(&mut spoke_processes, &format!("{lease_seconds}-after")).await;
        let (requests, fleetform_requests) = match (requests_before, request_counts(&admin).await) {
            (Some(before), Some(after)) => (
                Some(after.0.since(&before.0)),
                before
                    .1
                    .zip(after.1)
                    .map(|(before, after)| after.since(&before)),
            ),
            _ => (None, None),
        };
        Ok(CommitRun {
            applied,
            done,
            complete,
            cpu: cpu_after
                .iter()
                .map(|(role, cpu)| (*role, cpu - cpu_before.get(role).copied().unwrap_or(0.0)))
                .collect(),
            peaks,
            requests,
            fleetform_requests,
            spoke_requests: spokes_before
                .zip(spokes_after)
                .map(|(before, after)| after.since(&before)),
        })
    };
    let join = phase(
        "every spoke",
        lease_seconds,
        "joined (available, addons enabled)",
        &Follower::joined,
    )
    .await?;
    let lease = phase(
        "every spoke's lease",
        changed_lease_seconds,
        "on the new lease",
        &|f: &Follower| f.on_lease(changed_lease_seconds),
    )
    .await?;
    for (process, what) in [
        (&mut api_server, "the API server"),
        (&mut hub_process, "the hub"),
        (&mut sync_process, "the sync"),
    ] {
        if let Err(message) = process.check_running(what) {
            eprintln!("{message}");
        }
    }
    for (n, (process, _)) in spoke_processes.iter_mut().enumerate() {
        if let Err(message) = process.check_running(&format!("spoke process {n}")) {
            eprintln!("{message}");
        }
    }
    let report = Report {
        clusters_started,
        join,
        lease,
        peak_rss: pids.peak_rss(),
        load_before,
        load_after: load_average(),
    };
    drop(hub_process);
    drop(sync_process);
    drop(spoke_processes);
    drop(api_server);
    Ok(report)
}

fn print(settings: &Settings, report: &Report) {
    let spokes = settings.spokes;
    let kind = if settings.light { "light" } else { "real" };
    let per_spoke = |n: u64| n as f64 / spokes.max(1) as f64;
    let per_thousand = |cpu: f64| cpu * 1_000.0 / spokes.max(1) as f64;
    println!(
        "commit to Available as deployed, {spokes} {kind} spokes in {} processes, {} addons each, leases of {} s: the API server, the hub and the sync each a process — {}",
        settings.spoke_processes(),
        settings.addons,
        settings.lease_seconds,
        machine()
    );
    println!(
        "{:<64} {:>16} {:>16}",
        "measure", "value", "target (10,000)"
    );
    let row = |measure: &str, value: String, target: String| {
        println!("{measure:<64} {value:>16} {target:>16}");
    };
    // A count of requests, then of its writes, each per spoke, beside their targets.
    let totals = |title: &str, requests: &Requests, (all, writes): (String, String)| {
        let count = |n: u64| format!("{n} ({:.1})", per_spoke(n));
        row(title, count(requests.total()), all);
        row(
            "  of them writes (per spoke)",
            count(requests.writes()),
            writes,
        );
    };
    let seconds = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    row(
        "clusters started (not timed)",
        seconds(report.clusters_started),
        "-".into(),
    );
    for (title, phase, what, within) in [
        (
            "commit",
            &report.join,
            "every spoke Available, its addons enabled",
            JOIN_TARGET,
        ),
        (
            "lease commit",
            &report.lease,
            "every spoke on the new lease",
            LEASE_CHANGE_TARGET,
        ),
    ] {
        row(
            &format!("{title} → applied by sync"),
            phase.applied.map_or("never".into(), seconds),
            "-".into(),
        );
        row(
            &format!("{title} → {what}"),
            if phase.complete {
                seconds(phase.done)
            } else {
                format!("not in {}", seconds(phase.done))
            },
            format!("< {} s", within.as_secs()),
        );
        for role in Role::ALL {
            let cpu = phase.cpu.get(&role).copied().unwrap_or(0.0);
            row(&format!("  {}", role.label()), String::new(), String::new());
            row(
                "    CPU (per 1,000 spokes)",
                format!("{cpu:.1} s ({:.1} s)", per_thousand(cpu)),
                "-".into(),
            );
            row(
                "    RSS peak",
                format!(
                    "{:.0} MiB",
                    phase.peaks.rss.get(&role).copied().unwrap_or(0.0)
                ),
                role.rss_target()
                    .map_or("-".into(), |target| format!("≤ {target:.0} MiB")),
            );
        }
        row(
            "  slowest dashboard page",
            phase
                .peaks
                .dashboard_page
                .map_or("none loaded".into(), seconds),
            "-".into(),
        );
        match &phase.requests {
            None => row("  API server requests", "no /metrics".into(), "-".into()),
            Some(requests) => {
                let (requests_target, writes_target) = if std::ptr::eq(phase, &report.join) {
                    (
                        format!("≤ {REQUESTS_PER_SPOKE_TARGET:.0}"),
                        format!("≤ {WRITES_PER_SPOKE_TARGET:.0}"),
                    )
                } else {
                    ("-".into(), "-".into())
                };
                totals(
                    "  API server requests (per spoke)",
                    requests,
                    (requests_target, writes_target),
                );
                for (kind, count) in requests.busiest(14, |_| true) {
                    row(&format!("    {kind}"), count.to_string(), String::new());
                }
            }
        }
        if let Some(own) = &phase.fleetform_requests {
            totals(
                "  fleetform's (hub + sync) requests (per spoke)",
                own,
                ("-".into(), "-".into()),
            );
            // Every kind of write fleetform makes (the target is on writes), then its busiest
            // reads.
            for (kind, count) in own
                .busiest(usize::MAX, Requests::is_write)
                .into_iter()
                .chain(own.busiest(6, |key| !Requests::is_write(key)))
            {
                row(&format!("    {kind}"), count.to_string(), String::new());
            }
        }
        if let Some(answered) = &phase.spoke_requests {
            totals(
                "  requests the spokes answered (per spoke)",
                answered,
                ("-".into(), "-".into()),
            );
            for (kind, count) in answered.busiest(10, |_| true) {
                row(&format!("    {kind}"), count.to_string(), String::new());
            }
        }
    }
    for role in Role::ALL {
        row(
            &format!("{} RSS high-water mark", role.key()),
            format!(
                "{:.0} MiB",
                report.peak_rss.get(&role).copied().unwrap_or(0.0)
            ),
            role.rss_target()
                .map_or("-".into(), |target| format!("≤ {target:.0} MiB")),
        );
    }
    println!(
        "load average before {}, after {}",
        report.load_before, report.load_after
    );

    let phase = |phase: &CommitRun| {
        json!({
            "applied_seconds": phase.applied.map(|d| d.as_secs_f64()),
            "done_seconds": phase.done.as_secs_f64(),
            "complete": phase.complete,
            "processes": Role::ALL.iter().map(|role| {
                let cpu = phase.cpu.get(role).copied().unwrap_or(0.0);
                (role.key().to_string(), json!({
                    "cpu_seconds": cpu,
                    "cpu_seconds_per_1000_spokes": per_thousand(cpu),
                    "rss_peak_mib": phase.peaks.rss.get(role).copied().unwrap_or(0.0),
                }))
            }).collect::<serde_json::Map<_, _>>(),
            "slowest_dashboard_page_seconds": phase.peaks.dashboard_page.map(|d| d.as_secs_f64()),
            "fleetform_requests": phase.fleetform_requests.as_ref().map(|own| json!({
                "total": own.total(),
                "writes": own.writes(),
                "per_spoke": per_spoke(own.total()),
                "writes_per_spoke": per_spoke(own.writes()),
            })),
            "spoke_requests": phase.spoke_requests.as_ref().map(|answered| json!({
                "total": answered.total(),
                "writes": answered.writes(),
                "per_spoke": per_spoke(answered.total()),
                "writes_per_spoke": per_spoke(answered.writes()),
            })),
            "requests": phase.requests.as_ref().map(|requests| json!({
                "total": requests.total(),
                "writes": requests.writes(),
                "per_spoke": per_spoke(requests.total()),
                "writes_per_spoke": per_spoke(requests.writes()),
                "by_kind": requests.0.iter().map(|((verb, dry_run, group, resource), count)| json!({
                    "verb": verb, "dry_run": dry_run, "group": group, "resource": resource,
                    "count": count,
                })).collect::<Vec<_>>(),
            })),
        })
    };
    let json = json!({
        "spokes": spokes,
        "spoke_processes": settings.spoke_processes(),
        "lease_seconds": settings.lease_seconds,
        "addons": settings.addons,
        "kind": kind,
        "machine": machine(),
        "binary": settings.binary.display().to_string(),
        "clusters_started_seconds": report.clusters_started.as_secs_f64(),
        "join": phase(&report.join),
        "lease_change": phase(&report.lease),
        "rss_high_water_mib": Role::ALL.iter()
            .map(|role| (role.key().to_string(), json!(report.peak_rss.get(role).copied().unwrap_or(0.0))))
            .collect::<serde_json::Map<_, _>>(),
        "targets": {
            "hub_rss_mib": HUB_RSS_TARGET_MIB,
            "sync_rss_mib": SYNC_RSS_TARGET_MIB,
            "join_requests_per_spoke": REQUESTS_PER_SPOKE_TARGET,
            "join_writes_per_spoke": WRITES_PER_SPOKE_TARGET,
            "join_seconds": JOIN_TARGET.as_secs_f64(),
            "lease_change_seconds": LEASE_CHANGE_TARGET.as_secs_f64(),
        },
        "load_before": report.load_before,
        "load_after": report.load_after,
    });
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(
        out.join("deployment.json"),
        serde_json::to_vec_pretty(&json).unwrap_or_default(),
    );
}
