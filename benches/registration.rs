//! Registration at fleet scale (issue 5): one embedded hub, N spokes with A addons each, lease
//! duration L, held in steady state for S seconds, measured against the targets of seeds 000 and
//! 001:
//!
//! - hub writes per second: lease renewals only, N / L ± 10%;
//! - addon-lease renewals reaching the hub: 0 (addons renew on their spoke; the agent writes the
//!   hub only when an addon's condition changes);
//! - the hub's CPU and live heap, told apart from the simulated spokes', and the process's RSS;
//! - from a killed agent's last renewal to its cluster turning Unknown: ≤ 5 × L + 1 s.
//!
//! The hub is a real embedded control plane (durable, SQLite in a temporary directory) running the
//! hub process as `fleetform hub` composes it (`fleetform::hub::process`: the hub loops and the
//! lifecycle reconciler; no sync controller, as there is no fleet repo) on a runtime of its own
//! ("hub-rt" threads), so its CPU is told apart from everything else's by thread, and so is its
//! memory: the benchmark's allocator (`support/heap.rs`) counts every live allocation against the
//! thread that made it, the hub's being its runtime's threads and its control plane's SQLite
//! writer. Every client reaches it over the in-process transport, handed to the hub's runtime, so
//! request handling and watch streams run there too. Writes are counted by the hub's own request
//! counter and, for the agents' requests, by a tap on their transport that tells the cluster lease
//! from anything else.
//!
//! Spokes share spoke control planes ("fleet-rt" runtime): each simulated spoke has its own
//! namespace on its plane for its addon leases (the addons' `installNamespace`), which simulated
//! addons renew every `FLEETFORM_BENCH_ADDON_RENEW_SECONDS` (OCM's addon lease updater: 60 s).
//!
//! Two kinds of agent (`FLEETFORM_BENCH_AGENT`):
//! - `real`: `fleetform::agent::run` per spoke with `HubConnection::Client` — registration watch,
//!   lease loop with probes, status loop (ClusterClaim and Node watches), addon loop (one addon
//!   Lease watch per addon on the spoke, one ManagedClusterAddOn watch on the hub);
//! - `sim`: a light agent built from the agent's pure modules: the lease loop's timing with
//!   jitter (`availability::next_lease_renewal`) sending the real agent's renewal request, and
//!   addon health judged by `addon_health::{judge_addon_lease, needs_hub_write}` from one Lease
//!   watch per spoke plane (no hub watches, no probes, no status loop).
//!
//! The fleet starts as it stands after its agents restart: clusters accepted, joined and
//! Available with the status the agent reports, addons Available (setting that up through the
//! agents would cost minutes of start-up fan-out and measure nothing the steady state does not).
//! Until the measured window the benchmark also renews every cluster lease itself, so start-up
//! load cannot expire a cluster; it then waits for the hub's write rate to settle. Start-up is
//! not measured beyond its duration.
//!
//! Environment (defaults are the figures):
//! `FLEETFORM_BENCH_SPOKES` [10000], `FLEETFORM_BENCH_SECONDS` [60] (steady-state window),
//! `FLEETFORM_BENCH_LEASE_SECONDS` [10], `FLEETFORM_BENCH_ADDONS` [7], `FLEETFORM_BENCH_AGENT`
//! [real] (`real` or `sim`), `FLEETFORM_BENCH_KILL` [5] (agents killed after the window),
//! `FLEETFORM_BENCH_SPOKES_PER_PLANE` [10 real, 1000 sim], `FLEETFORM_BENCH_ADDON_RENEW_SECONDS`
//! [60], `FLEETFORM_BENCH_WARMUP_SECONDS` [3 × lease].
//!
//! `cargo bench --bench registration` — prints a table and writes
//! `target/bench/registration-<agent>.json`.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetform::agent::addon_health::{
    ADDON_LEASE_DURATION, addon_grace_period, judge_addon_lease, needs_hub_write,
};
use fleetform::agent::availability::next_lease_renewal;
use fleetform::agent::claims::{select_claims, summarize_nodes};
use fleetform::agent::{AgentConfig, HubConnection};
use fleetform::api::addon::HealthCheckMode;
use fleetform::api::cluster::NodeHealth;
use fleetform::api::vocabulary::{
    ADDON_CONDITION_AVAILABLE, ANNOTATION_NODE_HEALTH, CLUSTER_LEASE_NAME, CONDITION_AVAILABLE,
    CONDITION_HUB_ACCEPTED, CONDITION_JOINED, LABEL_CLUSTER_NAME, REASON_ADDON_LEASE_UPDATED,
    REASON_AVAILABLE, REASON_HUB_CLUSTER_ADMIN_ACCEPTED, REASON_JOINED, STATUS_TRUE,
    STATUS_UNKNOWN,
};
use fleetform::api::{ManagedCluster, ManagedClusterAddOn};
use fleetform::hub::process::{self, HubProcessConfig};
use fleetform::reconciler::install::KnownEndpoint;
use fleetform_controlplane::requests::RequestCounts;
use fleetform_controlplane::{InProcessService, RunningControlPlane};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

// Its heap profiler is the converge benchmark's.
#[allow(dead_code)]
#[path = "support/heap.rs"]
mod heap;
#[path = "support/procfs.rs"]
mod procfs;

use heap::Tag;
use procfs::{CpuTimes, cpu_times, load_average, machine, rss_mib};

#[global_allocator]
static ALLOCATOR: heap::TaggedAllocator = heap::TaggedAllocator;

/// How many agents start at a time, and the pause after each batch.
const BATCH: usize = 250;
const AGENT_START_PAUSE: Duration = Duration::from_millis(500);
/// The longest the benchmark waits for the hub's write rate to settle after the warm-up.
const SETTLE_LIMIT: Duration = Duration::from_secs(300);
/// The agent's field manager (its status writes are server-side applies under it).
const AGENT_FIELD_MANAGER: &str = fleetform::agent::run::FIELD_MANAGER;
/// How many clusters are set up concurrently within a batch.
const SETUP_CONCURRENCY: usize = 32;
const FIELD_MANAGER: &str = "fleetform-bench";

#[derive(Clone, Copy, Debug, PartialEq)]
enum AgentKind {
    Real,
    Simulated,
}

impl AgentKind {
    fn label(self) -> &'static str {
        match self {
            AgentKind::Real => "real",
            AgentKind::Simulated => "sim",
        }
    }
}

#[derive(Clone, Debug)]
struct Settings {
    spokes: usize,
    seconds: u64,
    lease_seconds: i32,
    addons: usize,
    agent: AgentKind,
    kill: usize,
    spokes_per_plane: usize,
    addon_renew: Duration,
    warmup: Duration,
}

impl Settings {
    fn from_env() -> Result<Settings, String> {
        fn number<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
            match std::env::var(name) {
                Err(_) => Ok(default),
                Ok(text) => text
                    .trim()
                    .parse()
                    .map_err(|_| format!("{name}={text:?} is not a valid number")),
            }
        }
        let agent = match std::env::var("FLEETFORM_BENCH_AGENT").as_deref() {
            Err(_) | Ok("real") => AgentKind::Real,
            Ok("sim") => AgentKind::Simulated,
            Ok(other) => {
                return Err(format!(
                    "FLEETFORM_BENCH_AGENT={other:?}: expected `real` or `sim`"
                ));
            }
        };
        let spokes: usize = number("FLEETFORM_BENCH_SPOKES", 10_000)?;
        let lease_seconds: i32 = number("FLEETFORM_BENCH_LEASE_SECONDS", 10)?;
        let per_plane_default = match agent {
            AgentKind::Real => 10,
            AgentKind::Simulated => 1000,
        };
        let settings = Settings {
            spokes,
            seconds: number("FLEETFORM_BENCH_SECONDS", 60)?,
            lease_seconds,
            addons: number("FLEETFORM_BENCH_ADDONS", 7)?,
            agent,
            kill: number("FLEETFORM_BENCH_KILL", 5)?,
            spokes_per_plane: number("FLEETFORM_BENCH_SPOKES_PER_PLANE", per_plane_default)?,
            addon_renew: Duration::from_secs(number("FLEETFORM_BENCH_ADDON_RENEW_SECONDS", 60)?),
            warmup: Duration::from_secs(number(
                "FLEETFORM_BENCH_WARMUP_SECONDS",
                3 * u64::try_from(lease_seconds.max(1)).unwrap_or(10),
            )?),
        };
        if settings.spokes == 0
            || settings.seconds == 0
            || settings.lease_seconds < 1
            || settings.spokes_per_plane == 0
            || settings.addon_renew.is_zero()
        {
            return Err(
                "spokes, seconds, lease seconds, spokes per plane and addon renewal must be positive"
                    .into(),
            );
        }
        if settings.kill > settings.spokes {
            return Err(format!(
                "cannot kill {} agents of {}",
                settings.kill, settings.spokes
            ));
        }
        Ok(settings)
    }

    fn planes(&self) -> usize {
        self.spokes.div_ceil(self.spokes_per_plane)
    }
}

fn cluster_name(i: usize) -> String {
    format!("spoke-{i:05}")
}

fn addon_name(a: usize) -> String {
    format!("addon-{a}")
}

/// Each spoke's addons run in a namespace of its own on the shared spoke plane.
fn install_namespace(cluster: &str) -> String {
    format!("{cluster}-addons")
}

// ---- the hub transport: requests run on the hub's runtime; the agents' are classified ----

/// What the agents sent the hub, by what it is.
#[derive(Default)]
struct AgentTraffic {
    cluster_lease_writes: AtomicU64,
    other_lease_writes: AtomicU64,
    addon_writes: AtomicU64,
    cluster_writes: AtomicU64,
    other_writes: AtomicU64,
    reads: AtomicU64,
    /// While set, how long each cluster-lease renewal took to be answered, in seconds.
    recording: std::sync::atomic::AtomicBool,
    renewal_latencies: Mutex<Vec<f64>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct TrafficCounts {
    cluster_lease_writes: u64,
    other_lease_writes: u64,
    addon_writes: u64,
    cluster_writes: u64,
    other_writes: u64,
    reads: u64,
}

impl AgentTraffic {
    /// Counts a request; true when it is a cluster-lease renewal whose latency is wanted.
    fn record(&self, method: &http::Method, path: &str) -> bool {
        let write = !matches!(*method, http::Method::GET | http::Method::HEAD);
        let counter = if !write {
            &self.reads
        } else if path.contains("/leases/") || path.ends_with("/leases") {
            if path.ends_with(&format!("/leases/{CLUSTER_LEASE_NAME}")) {
                &self.cluster_lease_writes
            } else {
                &self.other_lease_writes
            }
        } else if path.contains("/managedclusteraddons") {
            &self.addon_writes
        } else if path.contains("/managedclusters") {
            &self.cluster_writes
        } else {
            &self.other_writes
        };
        counter.fetch_add(1, Ordering::Relaxed);
        std::ptr::eq(counter, &self.cluster_lease_writes) && self.recording.load(Ordering::Relaxed)
    }

    fn renewal_answered(&self, seconds: f64) {
        if let Ok(mut latencies) = self.renewal_latencies.lock() {
            latencies.push(seconds);
        }
    }

    /// The median and 99th percentile of the recorded renewal latencies, in seconds.
    fn renewal_latency(&self) -> Option<(f64, f64)> {
        let mut latencies = self.renewal_latencies.lock().ok()?.clone();
        if latencies.is_empty() {
            return None;
        }
        latencies.sort_by(f64::total_cmp);
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
        Some((at(0.5), at(0.99)))
    }

    fn snapshot(&self) -> TrafficCounts {
        TrafficCounts {
            cluster_lease_writes: self.cluster_lease_writes.load(Ordering::Relaxed),
            other_lease_writes: self.other_lease_writes.load(Ordering::Relaxed),
            addon_writes: self.addon_writes.load(Ordering::Relaxed),
            cluster_writes: self.cluster_writes.load(Ordering::Relaxed),
            other_writes: self.other_writes.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
        }
    }
}

impl TrafficCounts {
    fn since(&self, earlier: &TrafficCounts) -> TrafficCounts {
        TrafficCounts {
            cluster_lease_writes: self.cluster_lease_writes - earlier.cluster_lease_writes,
            other_lease_writes: self.other_lease_writes - earlier.other_lease_writes,
            addon_writes: self.addon_writes - earlier.addon_writes,
            cluster_writes: self.cluster_writes - earlier.cluster_writes,
            other_writes: self.other_writes - earlier.other_writes,
            reads: self.reads - earlier.reads,
        }
    }
}

/// The hub's in-process transport, run on the hub's runtime; counts what agents send.
#[derive(Clone)]
struct HubTransport {
    service: InProcessService,
    hub: tokio::runtime::Handle,
    traffic: Option<Arc<AgentTraffic>>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<http::Request<kube::client::Body>> for HubTransport {
    type Response = http::Response<fleetform_controlplane::http::Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let timed = self
            .traffic
            .as_ref()
            .filter(|traffic| traffic.record(request.method(), request.uri().path()))
            .map(|traffic| (traffic.clone(), Instant::now()));
        let mut service = self.service.clone();
        let handled = self
            .hub
            .spawn(async move { tower_service::Service::call(&mut service, request).await });
        Box::pin(async move {
            let response = handled
                .await
                .map_err(|err| Box::new(err) as BoxError)?
                .map_err(|err| Box::new(err) as BoxError);
            if let Some((traffic, sent)) = timed {
                traffic.renewal_answered(sent.elapsed().as_secs_f64());
            }
            response
        })
    }
}

// ---- process figures ----

/// The hub's live Rust heap: what its runtime's threads and its SQLite writer (the one untagged
/// thread) allocated and still hold. SQLite's own page cache is not in it.
fn hub_heap_mib() -> f64 {
    heap::live_mib(&[Tag::Hub, Tag::Other])
}

/// The simulated spokes' live Rust heap: spoke planes, agents, addons, the benchmark itself.
fn fleet_heap_mib() -> f64 {
    heap::live_mib(&[Tag::Fleet])
}

// ---- setting the fleet up ----

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: None,
        last_transition_time: Time(Timestamp::now()),
    }
}

/// A spoke control plane and the admin client the simulated addons use.
struct SpokePlane {
    server: RunningControlPlane,
    client: Client,
}

async fn apply_crds(client: &Client, only: Option<&str>) -> Result<(), kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in fleetform::api::crds() {
        let name = crd.name_any();
        if only.is_some_and(|only| only != name) {
            continue;
        }
        crds.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await?;
    }
    Ok(())
}

async fn create<K>(api: &Api<K>, object: Value) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err),
    }
}

async fn namespace(client: &Client, name: &str) -> Result<(), kube::Error> {
    create::<Namespace>(
        &Api::all(client.clone()),
        json!({"metadata": {"name": name}}),
    )
    .await
}

/// A cluster as it stands in a running fleet: its hub namespace, its addons (Available), its
/// addon leases on its spoke (fresh) and its ManagedCluster (accepted, joined, Available).
async fn set_up_cluster(
    hub: &Client,
    spoke: &Client,
    name: &str,
    agent_status: &Value,
    settings: &Settings,
) -> Result<(), kube::Error> {
    namespace(hub, name).await?;
    let addon_namespace = install_namespace(name);
    namespace(spoke, &addon_namespace).await?;
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), name);
    let leases: Api<Lease> = Api::namespaced(spoke.clone(), &addon_namespace);
    for a in 0..settings.addons {
        let addon = addon_name(a);
        create(
            &addons,
            json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ManagedClusterAddOn",
                "metadata": {"name": addon, "namespace": name},
                "spec": {"installNamespace": addon_namespace},
            }),
        )
        .await?;
        let available = condition(
            ADDON_CONDITION_AVAILABLE,
            STATUS_TRUE,
            REASON_ADDON_LEASE_UPDATED,
            &format!("{addon} add-on is available."),
        );
        addons
            .patch_status(
                &addon,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [available]}})),
            )
            .await?;
        create(
            &leases,
            json!({
                "metadata": {"name": addon, "namespace": addon_namespace},
                "spec": {"renewTime": MicroTime(Timestamp::now()), "leaseDurationSeconds": 60},
            }),
        )
        .await?;
    }
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    create(
        &clusters,
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {
                "name": name,
                "labels": {LABEL_CLUSTER_NAME: name},
                // What the agent reports for a spoke with no Nodes.
                "annotations": {ANNOTATION_NODE_HEALTH: NodeHealth::default().to_annotation()},
            },
            "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": settings.lease_seconds},
        }),
    )
    .await?;
    let conditions = [
        condition(
            CONDITION_HUB_ACCEPTED,
            STATUS_TRUE,
            REASON_HUB_CLUSTER_ADMIN_ACCEPTED,
            "Accepted by hub cluster admin",
        ),
        condition(
            CONDITION_JOINED,
            STATUS_TRUE,
            REASON_JOINED,
            "Managed cluster joined",
        ),
        condition(
            CONDITION_AVAILABLE,
            STATUS_TRUE,
            REASON_AVAILABLE,
            "Managed cluster is available",
        ),
    ];
    clusters
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": conditions}})),
        )
        .await?;
    clusters
        .patch_status(
            name,
            &PatchParams::apply(AGENT_FIELD_MANAGER).force(),
            &Patch::Apply(agent_status),
        )
        .await?;
    Ok(())
}

/// The status the agent's status loop writes for a spoke with no ClusterClaims and no Nodes
/// (as the shared spoke planes are), built with the agent's own functions: already in place,
/// the agent's first status write after its start changes nothing.
fn agent_status(spoke_version: &str) -> Value {
    let summary = summarize_nodes(Some(spoke_version), &[]);
    let selection = select_claims(&[], 20);
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "status": {
            "version": summary.version,
            "capacity": summary.capacity,
            "allocatable": summary.allocatable,
            "clusterClaims": selection.reported,
        },
    })
}

/// Renews, as their agents would, every cluster lease about once per lease duration while the
/// fleet is set up and its agents start, so no cluster expires because its agent's first renewal
/// was held up by start-up load. Stopped before the measured window.
async fn stand_in_renewals(
    hub: Client,
    spokes: usize,
    lease_seconds: i32,
    stop: CancellationToken,
) {
    let period = Duration::from_secs(u64::try_from(lease_seconds).unwrap_or(10));
    loop {
        let round = Instant::now();
        let renewals = futures::stream::iter(0..spokes).for_each_concurrent(16, |i| {
            let hub = hub.clone();
            async move {
                let name = cluster_name(i);
                let patch = json!({"spec": {"renewTime": MicroTime(Timestamp::now())}});
                let _ = Api::<Lease>::namespaced(hub, &name)
                    .patch(
                        CLUSTER_LEASE_NAME,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await;
            }
        });
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = renewals => {}
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(period.saturating_sub(round.elapsed())) => {}
        }
    }
}

// ---- agents ----

struct RunningAgent {
    stop: CancellationToken,
    handle: Option<JoinHandle<()>>,
}

fn start_real_agent(
    name: &str,
    hub: Client,
    spoke: Client,
    stop: CancellationToken,
) -> RunningAgent {
    let config = AgentConfig::new(name, HubConnection::Client(hub), spoke);
    let token = stop.clone();
    let handle = tokio::spawn(async move {
        if let Err(err) = fleetform::agent::run(config, token).await {
            eprintln!("agent failed: {err}");
        }
    });
    RunningAgent {
        stop,
        handle: Some(handle),
    }
}

/// The simulated agent's lease loop: the real loop's timing and request, nothing else.
fn start_simulated_agent(
    name: &str,
    hub: Client,
    lease_seconds: i32,
    stop: CancellationToken,
) -> RunningAgent {
    let leases: Api<Lease> = Api::namespaced(hub, name);
    let token = stop.clone();
    let handle = tokio::spawn(async move {
        let params = PatchParams {
            field_manager: Some(AGENT_FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let mut last: Option<Timestamp> = None;
        let mut jitter = fastrand::f64();
        loop {
            let now = Timestamp::now();
            let due = last.map_or(now, |last| next_lease_renewal(last, lease_seconds, jitter));
            let wait = Duration::try_from(now.duration_until(due)).unwrap_or(Duration::ZERO);
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            let renewed = Timestamp::now();
            let patch = json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "spec": {"renewTime": MicroTime(renewed), "leaseDurationSeconds": lease_seconds},
            });
            if leases
                .patch(CLUSTER_LEASE_NAME, &params, &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                last = Some(renewed);
                jitter = fastrand::f64();
            } else {
                last = None;
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    });
    RunningAgent {
        stop,
        handle: Some(handle),
    }
}

/// The simulated agents' addon health, for every spoke of one plane: one Lease watch, each
/// renewal judged as the real addon loop judges it, a hub write only when it says so.
async fn simulated_addon_health(
    spoke: Client,
    hub: Client,
    killed: Arc<Mutex<HashSet<String>>>,
    stop: CancellationToken,
) {
    let mut known: HashMap<(String, String), Vec<Condition>> = HashMap::new();
    let grace = addon_grace_period(ADDON_LEASE_DURATION);
    let mut events = watcher(Api::<Lease>::all(spoke), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    loop {
        let lease = tokio::select! {
            _ = stop.cancelled() => return,
            event = events.next() => match event {
                None => return,
                Some(Ok(lease)) => lease,
                Some(Err(_)) => continue,
            },
        };
        let Some(cluster) = lease
            .namespace()
            .and_then(|ns| ns.strip_suffix("-addons").map(str::to_string))
        else {
            continue;
        };
        if killed.lock().map(|k| k.contains(&cluster)).unwrap_or(false) {
            continue;
        }
        let addon = lease.name_any();
        let Some(health) = judge_addon_lease(
            &addon,
            HealthCheckMode::Lease,
            Some(&lease),
            grace,
            Timestamp::now(),
        ) else {
            continue;
        };
        let current = known
            .entry((cluster.clone(), addon.clone()))
            .or_insert_with(|| {
                vec![condition(
                    ADDON_CONDITION_AVAILABLE,
                    STATUS_TRUE,
                    REASON_ADDON_LEASE_UPDATED,
                    "",
                )]
            });
        if needs_hub_write(current, &health.available) {
            let addons: Api<ManagedClusterAddOn> = Api::namespaced(hub.clone(), &cluster);
            let written = addons
                .patch_status(
                    &addon,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"conditions": [&health.available]}})),
                )
                .await;
            if written.is_ok() {
                *current = vec![health.available];
            }
        }
    }
}

/// Renews every addon lease of one plane once per `period`, evenly spread.
async fn simulated_addons(
    spoke: Client,
    leases: Vec<(String, String)>,
    period: Duration,
    renewals: Arc<AtomicU64>,
    stop: CancellationToken,
) {
    if leases.is_empty() {
        return;
    }
    let step = period.div_f64(leases.len() as f64);
    let mut tick = tokio::time::interval(step);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let offset = fastrand::usize(..leases.len());
    for (namespace, name) in leases.iter().cycle().skip(offset) {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let api: Api<Lease> = Api::namespaced(spoke.clone(), namespace);
        let patch = json!({"spec": {"renewTime": MicroTime(Timestamp::now())}});
        if api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            renewals.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// ---- the run ----

struct Window {
    /// Median and 99th percentile of the agents' lease renewals, answered, in seconds.
    renewal_latency: Option<(f64, f64)>,
    seconds: f64,
    hub_requests: RequestCounts,
    agents: TrafficCounts,
    cpu: CpuTimes,
    addon_renewals: u64,
    rss_start: f64,
    rss_peak: f64,
    rss_end: f64,
    /// The hub's live heap in the window, MiB: start, peak (sampled each second), end.
    hub_heap: [f64; 3],
    fleet_heap_end: f64,
    rates: Vec<f64>,
}

struct Expiry {
    cluster: String,
    last_renewal: Timestamp,
    /// When the benchmark saw Available Unknown (polling every 100 ms).
    seen_unknown: Option<Timestamp>,
    /// The Unknown condition's `lastTransitionTime` (the hub's own clock, 1 s precision).
    transition: Option<Timestamp>,
}

fn seconds_between(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

fn main() {
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("registration bench: {message}");
            std::process::exit(2);
        }
    };
    let hub_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("hub-rt")
        .on_thread_start(|| heap::tag_thread(Tag::Hub))
        .enable_all()
        .build();
    let fleet_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("fleet-rt")
        .on_thread_start(|| heap::tag_thread(Tag::Fleet))
        .enable_all()
        .build();
    let (hub_rt, fleet_rt) = match (hub_rt, fleet_rt) {
        (Ok(hub), Ok(fleet)) => (hub, fleet),
        (Err(err), _) | (_, Err(err)) => {
            eprintln!("registration bench: cannot start a runtime: {err}");
            std::process::exit(3);
        }
    };
    // `block_on` runs the benchmark's own future on this thread: it is the fleet's side.
    heap::tag_thread(Tag::Fleet);
    let result = fleet_rt.block_on(run(&settings, &hub_rt));
    hub_rt.shutdown_timeout(Duration::from_secs(5));
    fleet_rt.shutdown_timeout(Duration::from_secs(5));
    if let Err(message) = result {
        eprintln!("registration bench failed: {message}");
        std::process::exit(3);
    }
}

async fn run(settings: &Settings, hub_rt: &Runtime) -> Result<(), String> {
    let started = Instant::now();
    let load_before = load_average();
    eprintln!(
        "registration bench: {} spokes ({} agents), {} addons each, lease {} s, {} spoke planes; load {load_before}",
        settings.spokes,
        settings.agent.label(),
        settings.addons,
        settings.lease_seconds,
        settings.planes()
    );
    let rss_empty = rss_mib();

    // The hub: a durable control plane and the hub loops, on the hub's runtime.
    // Owner-only, as a control plane's data directory must be.
    let data_dir = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .map_err(|err| format!("temporary directory: {err}"))?;
    let hub_dir = data_dir.path().to_path_buf();
    let hub = hub_rt
        .spawn(async move {
            fleetform::embedded::builder()
                .insecure_http()
                .data_dir(Some(hub_dir))
                .start()
                .await
        })
        .await
        .map_err(|err| err.to_string())?
        .map_err(|err| format!("hub control plane: {err}"))?;
    let transport = |traffic: Option<Arc<AgentTraffic>>| HubTransport {
        service: hub.in_process_service(),
        hub: hub_rt.handle().clone(),
        traffic,
    };
    let admin = Client::new(transport(None), "default");
    apply_crds(&admin, None)
        .await
        .map_err(|err| format!("hub CRDs: {err}"))?;
    let shutdown = CancellationToken::new();
    // The hub process as `fleetform hub` composes it, leading at once, with no admin endpoint,
    // webhook or sync controller (this benchmark has no fleet repo).
    let hub_process = hub_rt
        .spawn(process::start(
            HubProcessConfig {
                client: Client::new(transport(None), "default"),
                access: fleetform::access::Access::default(),
                known_endpoint: KnownEndpoint {
                    server: None,
                    ca_pem: None,
                },
                election: None,
                admin_addr: None,
                webhook: None,
                sync: None,
                accept_check: fleetform::hub::run::AcceptCheck::InProcess,
            },
            shutdown.child_token(),
        ))
        .await
        .map_err(|err| err.to_string())?
        .map_err(|err| format!("hub process: {err}"))?;
    let traffic = Arc::new(AgentTraffic::default());
    let agent_hub = Client::new(transport(Some(traffic.clone())), "default");

    // The spoke planes, on the fleet's runtime.
    let mut planes = Vec::new();
    for _ in 0..settings.planes() {
        let server = fleetform::embedded::builder()
            .insecure_http()
            .start()
            .await
            .map_err(|err| format!("spoke control plane: {err}"))?;
        let client = Client::new(server.in_process_service(), "default");
        apply_crds(
            &client,
            Some("clusterclaims.cluster.open-cluster-management.io"),
        )
        .await
        .map_err(|err| format!("spoke CRDs: {err}"))?;
        planes.push(SpokePlane { server, client });
    }
    let rss_planes = rss_mib();
    let hub_heap_empty = hub_heap_mib();

    // The fleet's objects first, then its agents: objects written while agents watch would
    // wake every agent's watch (one broadcast per resource), which is start-up cost, not the
    // steady state measured here. Until the window, the benchmark also renews every lease.
    let killed = Arc::new(Mutex::new(HashSet::new()));
    let addon_renewals = Arc::new(AtomicU64::new(0));
    let stand_in_stop = shutdown.child_token();
    let stand_in = tokio::spawn(stand_in_renewals(
        admin.clone(),
        settings.spokes,
        settings.lease_seconds,
        stand_in_stop.clone(),
    ));
    let spoke_version = planes[0]
        .client
        .apiserver_version()
        .await
        .map_err(|err| format!("spoke version: {err}"))?
        .git_version;
    let status = agent_status(&spoke_version);
    let setup_started = Instant::now();
    let mut set_up = 0;
    let mut setting_up = futures::stream::iter(0..settings.spokes)
        .map(|i| {
            let name = cluster_name(i);
            let spoke = planes[i / settings.spokes_per_plane].client.clone();
            let admin = admin.clone();
            let status = &status;
            async move {
                set_up_cluster(&admin, &spoke, &name, status, settings)
                    .await
                    .map_err(|err| format!("setting up {name}: {err}"))
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY);
    while let Some(result) = setting_up.next().await {
        result?;
        set_up += 1;
        if set_up % 1000 == 0 || set_up == settings.spokes {
            eprintln!(
                "  {set_up} / {} clusters set up ({:.0} s)",
                settings.spokes,
                setup_started.elapsed().as_secs_f64()
            );
        }
    }
    drop(setting_up);
    let objects_seconds = setup_started.elapsed().as_secs_f64();
    let rss_objects = rss_mib();
    let hub_heap_objects = hub_heap_mib();
    let mut agents: Vec<RunningAgent> = Vec::with_capacity(settings.spokes);
    let mut addon_tasks = Vec::new();
    for i in 0..settings.spokes {
        let name = cluster_name(i);
        let plane = &planes[i / settings.spokes_per_plane];
        let stop = shutdown.child_token();
        agents.push(match settings.agent {
            AgentKind::Real => {
                let spoke = Client::new(plane.server.in_process_service(), "default");
                start_real_agent(&name, agent_hub.clone(), spoke, stop)
            }
            AgentKind::Simulated => {
                start_simulated_agent(&name, agent_hub.clone(), settings.lease_seconds, stop)
            }
        });
        if (i + 1) % BATCH == 0 {
            if (i + 1) % 1000 == 0 {
                eprintln!(
                    "  {} / {} agents started ({:.0} s)",
                    i + 1,
                    settings.spokes,
                    setup_started.elapsed().as_secs_f64()
                );
            }
            // Let a batch of agents get going before the next one starts.
            tokio::time::sleep(AGENT_START_PAUSE).await;
        }
    }
    for (p, plane) in planes.iter().enumerate() {
        let first = p * settings.spokes_per_plane;
        let last = ((p + 1) * settings.spokes_per_plane).min(settings.spokes);
        let leases: Vec<(String, String)> = (first..last)
            .flat_map(|i| {
                let namespace = install_namespace(&cluster_name(i));
                (0..settings.addons).map(move |a| (namespace.clone(), addon_name(a)))
            })
            .collect();
        addon_tasks.push(tokio::spawn(simulated_addons(
            plane.client.clone(),
            leases,
            settings.addon_renew,
            addon_renewals.clone(),
            shutdown.child_token(),
        )));
        if settings.agent == AgentKind::Simulated {
            addon_tasks.push(tokio::spawn(simulated_addon_health(
                plane.client.clone(),
                agent_hub.clone(),
                killed.clone(),
                shutdown.child_token(),
            )));
        }
    }
    let setup_seconds = setup_started.elapsed().as_secs_f64();
    let rss_fleet = rss_mib();
    let hub_heap_fleet = hub_heap_mib();
    eprintln!(
        "  fleet up in {setup_seconds:.0} s; warming up {} s",
        settings.warmup.as_secs()
    );
    tokio::time::sleep(settings.warmup).await;
    // Then until the hub's write rate has settled: two samples of one lease duration each
    // within 10% of each other (the stand-in renews every cluster once per duration, so shorter
    // samples would alternate between holding its renewals and not).
    let settle_started = Instant::now();
    let mut previous: Option<f64> = None;
    while settle_started.elapsed() < SETTLE_LIMIT {
        let before = hub.request_counts().writes();
        let sampled = Instant::now();
        let lease = u64::try_from(settings.lease_seconds).unwrap_or(1).max(1);
        tokio::time::sleep(Duration::from_secs(lease)).await;
        let rate =
            (hub.request_counts().writes() - before) as f64 / sampled.elapsed().as_secs_f64();
        eprintln!(
            "  settling: {rate:.0} hub writes/s, load {}",
            load_average()
        );
        if let Some(previous) = previous
            && rate > 0.0
            && (rate - previous).abs() <= 0.1 * previous
        {
            break;
        }
        previous = Some(rate);
    }

    stand_in_stop.cancel();
    let _ = stand_in.await;

    // The steady state.
    let hub_before = hub.request_counts();
    let agents_before = traffic.snapshot();
    let cpu_before = cpu_times();
    let renewals_before = addon_renewals.load(Ordering::Relaxed);
    traffic.recording.store(true, Ordering::Relaxed);
    let window_started = Instant::now();
    let rss_start = rss_mib();
    let mut rss_peak = rss_start;
    let hub_heap_start = hub_heap_mib();
    let mut hub_heap_peak = hub_heap_start;
    let mut rates = Vec::new();
    let mut last_writes = hub_before.writes();
    let mut last_tick = Instant::now();
    let window = Duration::from_secs(settings.seconds);
    while window_started.elapsed() < window {
        let remaining = window.saturating_sub(window_started.elapsed());
        tokio::time::sleep(remaining.min(Duration::from_secs(1))).await;
        rss_peak = rss_peak.max(rss_mib());
        hub_heap_peak = hub_heap_peak.max(hub_heap_mib());
        if last_tick.elapsed() >= Duration::from_secs(10) || window_started.elapsed() >= window {
            let writes = hub.request_counts().writes();
            let rate = (writes - last_writes) as f64 / last_tick.elapsed().as_secs_f64();
            eprintln!(
                "  {:>4.0} s: {rate:>8.1} hub writes/s, RSS {:.0} MiB, hub heap {:.0} MiB, load {}",
                window_started.elapsed().as_secs_f64(),
                rss_mib(),
                hub_heap_mib(),
                load_average()
            );
            rates.push(rate);
            last_writes = writes;
            last_tick = Instant::now();
        }
    }
    traffic.recording.store(false, Ordering::Relaxed);
    let measured = Window {
        renewal_latency: traffic.renewal_latency(),
        seconds: window_started.elapsed().as_secs_f64(),
        hub_requests: hub.request_counts().since(&hub_before),
        agents: traffic.snapshot().since(&agents_before),
        cpu: {
            // The hub's SQLite writer is the one writer: spoke planes keep state in memory.
            let used = cpu_times().since(&cpu_before);
            CpuTimes {
                hub: used.hub + used.writers,
                ..used
            }
        },
        addon_renewals: addon_renewals.load(Ordering::Relaxed) - renewals_before,
        rss_start,
        rss_peak,
        rss_end: rss_mib(),
        hub_heap: [hub_heap_start, hub_heap_peak, hub_heap_mib()],
        fleet_heap_end: fleet_heap_mib(),
        rates,
    };
    let load_window = load_average();

    // Killed agents: from each one's last renewal to its cluster turning Unknown.
    let victims: Vec<usize> = (0..settings.kill)
        .map(|k| {
            k * settings.spokes / settings.kill.max(1)
                + settings.spokes / (2 * settings.kill.max(1))
        })
        .collect();
    let mut expiries = Vec::new();
    for &i in &victims {
        let name = cluster_name(i);
        if let Ok(mut killed) = killed.lock() {
            killed.insert(name.clone());
        }
        let agent = &mut agents[i];
        agent.stop.cancel();
        if let Some(handle) = agent.handle.take() {
            let _ = handle.await;
        }
        let lease = Api::<Lease>::namespaced(admin.clone(), &name)
            .get(CLUSTER_LEASE_NAME)
            .await
            .map_err(|err| format!("reading the lease of {name}: {err}"))?;
        let last_renewal = lease
            .spec
            .and_then(|spec| spec.renew_time)
            .map(|time| time.0)
            .ok_or_else(|| format!("the lease of {name} has no renewTime"))?;
        expiries.push(Expiry {
            cluster: name,
            last_renewal,
            seen_unknown: None,
            transition: None,
        });
        // Kill them at different points of their lease cycles.
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let clusters: Api<ManagedCluster> = Api::all(admin.clone());
    let give_up = Instant::now()
        + Duration::from_secs(5 * u64::try_from(settings.lease_seconds).unwrap_or(10) + 30);
    while expiries.iter().any(|e| e.seen_unknown.is_none()) && Instant::now() < give_up {
        for expiry in expiries.iter_mut().filter(|e| e.seen_unknown.is_none()) {
            if let Ok(cluster) = clusters.get(&expiry.cluster).await
                && let Some(available) = cluster.condition(CONDITION_AVAILABLE)
                && available.status == STATUS_UNKNOWN
            {
                expiry.seen_unknown = Some(Timestamp::now());
                expiry.transition = Some(available.last_transition_time.0);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    report(
        settings,
        &Report {
            objects_seconds,
            rss_objects,
            setup_seconds,
            rss_empty,
            rss_planes,
            rss_fleet,
            hub_heap: [hub_heap_empty, hub_heap_objects, hub_heap_fleet],
            window: measured,
            expiries,
            load_before,
            load_window,
            total_seconds: started.elapsed().as_secs_f64(),
        },
    );

    shutdown.cancel();
    hub_process.stopped().await;
    for handle in agents.into_iter().filter_map(|agent| agent.handle) {
        let _ = handle.await;
    }
    for task in addon_tasks {
        let _ = task.await;
    }
    drop(planes);
    let _ = hub_rt.spawn(hub.shutdown()).await;
    Ok(())
}

struct Report {
    objects_seconds: f64,
    rss_objects: f64,
    setup_seconds: f64,
    rss_empty: f64,
    rss_planes: f64,
    rss_fleet: f64,
    /// The hub's live heap, MiB: empty, with the fleet's objects, with its agents running.
    hub_heap: [f64; 3],
    window: Window,
    expiries: Vec<Expiry>,
    load_before: String,
    load_window: String,
    total_seconds: f64,
}

fn report(settings: &Settings, r: &Report) {
    let w = &r.window;
    let n = settings.spokes as f64;
    let lease = f64::from(settings.lease_seconds);
    let target_rate = n / lease;
    let hub_writes = w.hub_requests.writes() as f64 / w.seconds;
    let lease_writes = w.hub_requests.writes_to("coordination.k8s.io", "leases") as f64 / w.seconds;
    let addon_lease_writes = w.agents.other_lease_writes + w.agents.addon_writes;
    let expiry_target = 5.0 * lease + 1.0;
    let latencies: Vec<Option<f64>> = r
        .expiries
        .iter()
        .map(|e| {
            e.seen_unknown
                .map(|seen| seconds_between(e.last_renewal, seen))
        })
        .collect();
    let worst = latencies
        .iter()
        .map(|l| l.unwrap_or(f64::INFINITY))
        .fold(0.0_f64, f64::max);
    let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
    let agent_label = match settings.agent {
        AgentKind::Real => "real agents (fleetform::agent::run)",
        AgentKind::Simulated => "SIMULATED agents (pure lease timing + addon health)",
    };

    println!("fleetform registration benchmark (issue 5) — {}", machine());
    println!(
        "{} spokes, {agent_label}, {} addons each, lease {} s, {} spoke planes; window {:.0} s; load before {} / end of window {}",
        settings.spokes,
        settings.addons,
        settings.lease_seconds,
        settings.planes(),
        w.seconds,
        r.load_before,
        r.load_window
    );
    println!("{:<52} {:>16} {:>18}", "measure", "value", "target");
    let row = |measure: &str, value: String, target: String| {
        println!("{measure:<52} {value:>16} {target:>18}");
    };
    let rate_ok = (hub_writes - target_rate).abs() <= 0.1 * target_rate;
    row(
        "hub writes/s (every write the hub API server got)",
        format!("{hub_writes:.1}"),
        format!(
            "{:.0}–{:.0} {}",
            0.9 * target_rate,
            1.1 * target_rate,
            verdict(rate_ok)
        ),
    );
    row(
        "  of which Lease writes/s",
        format!("{lease_writes:.1}"),
        String::new(),
    );
    for (kind, count) in w.hub_requests.iter() {
        if kind.verb.is_write()
            && !(kind.group == "coordination.k8s.io" && kind.resource == "leases")
        {
            row(
                &format!("  of which {} {}", kind.verb.as_str(), kind.resource),
                format!("{count}"),
                String::new(),
            );
        }
    }
    row(
        "agents' cluster-lease renewals/s",
        format!("{:.1}", w.agents.cluster_lease_writes as f64 / w.seconds),
        format!("{target_rate:.0} (+ jitter)"),
    );
    row(
        "cluster-lease renewal answered: p50 / p99",
        w.renewal_latency.map_or("-".to_string(), |(p50, p99)| {
            format!("{:.0} / {:.0} ms", p50 * 1e3, p99 * 1e3)
        }),
        String::new(),
    );
    row(
        "addon-lease renewals on the spokes (window)",
        format!("{}", w.addon_renewals),
        String::new(),
    );
    row(
        "addon writes reaching the hub (window)",
        format!("{addon_lease_writes}"),
        format!("0 {}", verdict(addon_lease_writes == 0)),
    );
    row(
        "agents' other hub writes (window)",
        format!("{}", w.agents.cluster_writes + w.agents.other_writes),
        "0".to_string(),
    );
    row(
        "agents' hub reads/s",
        format!("{:.1}", w.agents.reads as f64 / w.seconds),
        String::new(),
    );
    row(
        "hub CPU (API server + hub loops threads)",
        format!("{:.1}% of a core", 100.0 * w.cpu.hub / w.seconds),
        String::new(),
    );
    row(
        "spokes + agents CPU (fleet threads)",
        format!("{:.1}% of a core", 100.0 * w.cpu.fleet / w.seconds),
        String::new(),
    );
    row(
        "process CPU",
        format!("{:.1}% of a core", 100.0 * w.cpu.process / w.seconds),
        String::new(),
    );
    row(
        "hub heap: empty / objects / agents started",
        format!(
            "{:.0} / {:.0} / {:.0} MiB",
            r.hub_heap[0], r.hub_heap[1], r.hub_heap[2]
        ),
        String::new(),
    );
    row(
        "hub heap in the window: start / peak / end",
        format!(
            "{:.0} / {:.0} / {:.0} MiB",
            w.hub_heap[0], w.hub_heap[1], w.hub_heap[2]
        ),
        "≤ 1024 MiB".to_string(),
    );
    row(
        "spokes + agents heap at the end of the window",
        format!("{:.0} MiB", w.fleet_heap_end),
        String::new(),
    );
    row(
        "process RSS: empty / spoke planes / objects / agents",
        format!(
            "{:.0} / {:.0} / {:.0} / {:.0} MiB",
            r.rss_empty, r.rss_planes, r.rss_objects, r.rss_fleet
        ),
        String::new(),
    );
    row(
        "process RSS in the window: start / peak / end",
        format!(
            "{:.0} / {:.0} / {:.0} MiB",
            w.rss_start, w.rss_peak, w.rss_end
        ),
        String::new(),
    );
    for (expiry, latency) in r.expiries.iter().zip(&latencies) {
        let value = match latency {
            Some(l) => format!("{l:.2} s"),
            None => "never".to_string(),
        };
        let hub_clock = expiry
            .transition
            .map(|t| format!(" (hub {:.0} s)", seconds_between(expiry.last_renewal, t)))
            .unwrap_or_default();
        row(
            &format!("last renewal → Unknown, {}{hub_clock}", expiry.cluster),
            value,
            format!(
                "≤ {expiry_target:.0} s {}",
                verdict(latency.is_some_and(|l| l <= expiry_target))
            ),
        );
    }
    row(
        "setup: fleet objects / + agents started",
        format!("{:.0} s / {:.0} s", r.objects_seconds, r.setup_seconds),
        String::new(),
    );
    println!(
        "hub writes/s per 10 s: {}",
        w.rates
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let json = json!({
        "machine": machine(),
        "agent": settings.agent.label(),
        "spokes": settings.spokes,
        "addons_per_spoke": settings.addons,
        "lease_duration_seconds": settings.lease_seconds,
        "spoke_planes": settings.planes(),
        "addon_renew_seconds": settings.addon_renew.as_secs(),
        "window_seconds": w.seconds,
        "load_before": r.load_before,
        "load_end_of_window": r.load_window,
        "hub_writes_per_second": hub_writes,
        "hub_writes_target_per_second": target_rate,
        "hub_lease_writes_per_second": lease_writes,
        "hub_writes_by_kind": w.hub_requests.iter().filter(|(k, _)| k.verb.is_write()).map(|(k, n)| {
            json!({"verb": k.verb.as_str(), "group": k.group, "resource": k.resource, "count": n})
        }).collect::<Vec<_>>(),
        "hub_writes_per_10s": w.rates,
        "agent_cluster_lease_renewals": w.agents.cluster_lease_writes,
        "agent_addon_writes_to_hub": addon_lease_writes,
        "agent_other_hub_writes": w.agents.cluster_writes + w.agents.other_writes,
        "agent_hub_reads": w.agents.reads,
        "renewal_latency_p50_seconds": w.renewal_latency.map(|l| l.0),
        "renewal_latency_p99_seconds": w.renewal_latency.map(|l| l.1),
        "addon_lease_renewals_on_spokes": w.addon_renewals,
        "hub_cpu_core_fraction": w.cpu.hub / w.seconds,
        "fleet_cpu_core_fraction": w.cpu.fleet / w.seconds,
        "process_cpu_core_fraction": w.cpu.process / w.seconds,
        "hub_heap_mib": {
            "empty": r.hub_heap[0], "objects": r.hub_heap[1], "fleet_up": r.hub_heap[2],
            "window_start": w.hub_heap[0], "window_peak": w.hub_heap[1], "window_end": w.hub_heap[2],
        },
        "fleet_heap_mib_window_end": w.fleet_heap_end,
        "rss_mib": {
            "empty": r.rss_empty, "spoke_planes": r.rss_planes, "objects": r.rss_objects, "fleet_up": r.rss_fleet,
            "window_start": w.rss_start, "window_peak": w.rss_peak, "window_end": w.rss_end,
        },
        "expiry_target_seconds": expiry_target,
        "expiries": r.expiries.iter().zip(&latencies).map(|(e, l)| json!({
            "cluster": e.cluster,
            "last_renewal": e.last_renewal.to_string(),
            "seconds_to_unknown_seen": l,
            "seconds_to_unknown_transition": e.transition.map(|t| seconds_between(e.last_renewal, t)),
        })).collect::<Vec<_>>(),
        "worst_seconds_to_unknown": if worst.is_finite() { json!(worst) } else { Value::Null },
        "objects_seconds": r.objects_seconds,
        "setup_seconds": r.setup_seconds,
        "total_seconds": r.total_seconds,
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(
            dir.join(format!("registration-{}.json", settings.agent.label())),
            serde_json::to_string_pretty(&json).unwrap_or_default(),
        );
    }
}
