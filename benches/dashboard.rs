//! The fleet dashboard at fleet scale (issue 18): N spokes (default 10,000) in the view model.
//!
//! 1. Render: the fleet page (first page, 100 rows) over the whole model, unfiltered, sorted by
//!    lease age, and filtered by state and label: p50 and p99 of the server's render time, and
//!    the page's size in bytes.
//! 2. Live update: an embedded control plane holding N Spokes and their ManagedClusters, the
//!    dashboard's watches on it and one viewer connected to its Server-Sent Events; a spoke's
//!    ManagedCluster changes (its Available condition, through the API server) and the time until
//!    the viewer reads that spoke's new row is taken, for several spokes in turn: p50 and max
//!    (the issue asks for under 1 s).
//!
//! Prints a table and writes `target/bench/dashboard.json`.
//! `cargo bench --bench dashboard`; `FLEETFORM_BENCH_SPOKES=1000` for a quick run.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::api::{ManagedCluster, Spoke};
use fleetform::dashboard::fleet_query::FleetQuery;
use fleetform::dashboard::model::{Model, Observed};
use fleetform::dashboard::pages;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Rounds of each render measured.
const RENDERS: usize = 50;
/// Spokes changed one after the other in the live-update part.
const CHANGES: usize = 20;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn spoke(index: usize) -> Value {
    let env = ["dev", "staging", "prod"][index % 3];
    json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
        "metadata": {"name": format!("spoke-{index:05}"), "namespace": SYSTEM_NAMESPACE,
            "labels": {"env": env, "region": format!("r{}", index % 7)}},
        "spec": {"hubRef": "hub", "kubeconfig": {"embedded": {}}, "addons": ["metrics"]},
    })
}

fn condition(type_: &str, status: &str, reason: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": "",
        "lastTransitionTime": "2027-01-15T08:00:00Z"})
}

fn cluster(index: usize) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": format!("spoke-{index:05}")},
        "spec": {"hubAcceptsClient": true},
    })
}

fn cluster_status(available: &str) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "status": {
            "conditions": [
                condition("ManagedClusterJoined", "True", "ManagedClusterJoined"),
                condition("ManagedClusterConditionAvailable", available,
                    if available == "True" { "ManagedClusterAvailable" } else { "ManagedClusterLeaseUpdateStopped" }),
            ],
            "clusterClaims": [{"name": "id.k8s.io", "value": "x"}],
        },
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The view model of `spokes` spokes, each with an Available cluster (every 50th Unknown).
fn model(spokes: usize) -> Model {
    let mut model = Model::new(["hub".to_string()]);
    let now = Timestamp::now();
    for index in 0..spokes {
        let spoke: Spoke = serde_json::from_value(spoke(index)).unwrap();
        let mut cluster = cluster(index);
        let available = if index % 50 == 0 { "Unknown" } else { "True" };
        cluster["status"] = cluster_status(available)["status"].clone();
        let cluster: ManagedCluster = serde_json::from_value(cluster).unwrap();
        model.observe("hub", Observed::Spoke(watcher::Event::Apply(spoke)), now);
        model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster)),
            now,
        );
    }
    model
}

/// Render times (sorted) and the page's size for `query`.
fn render(model: &Model, query: &str) -> (Vec<Duration>, usize) {
    let query = FleetQuery::parse(query);
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..RENDERS {
        let started = Instant::now();
        let page = pages::fleet_page(model, &query, Timestamp::now()).into_string();
        times.push(started.elapsed());
        size = page.len();
    }
    times.sort();
    (times, size)
}

async fn create_all(client: &Client, spokes: usize) -> Result<(), String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in fleetform::api::crds() {
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|err| format!("CRD: {err}"))?;
    }
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": SYSTEM_NAMESPACE}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(|err| format!("namespace: {err}"))?;
    let spokes_api: Api<Spoke> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    futures::stream::iter(0..spokes)
        .map(|index| {
            let (spokes_api, clusters) = (spokes_api.clone(), clusters.clone());
            async move {
                let spoke: Spoke = serde_json::from_value(spoke(index)).unwrap();
                spokes_api
                    .create(&PostParams::default(), &spoke)
                    .await
                    .map_err(|err| format!("Spoke: {err}"))?;
                let cluster: ManagedCluster = serde_json::from_value(cluster(index)).unwrap();
                clusters
                    .create(&PostParams::default(), &cluster)
                    .await
                    .map_err(|err| format!("ManagedCluster: {err}"))?;
                set_available(&clusters, index, "True").await
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<Result<(), String>>>()
        .await
        .into_iter()
        .collect()
}

async fn set_available(
    clusters: &Api<ManagedCluster>,
    index: usize,
    available: &str,
) -> Result<(), String> {
    clusters
        .patch_status(
            &format!("spoke-{index:05}"),
            &PatchParams::apply("bench").force(),
            &Patch::Apply(cluster_status(available)),
        )
        .await
        .map(|_| ())
        .map_err(|err| format!("ManagedCluster status: {err}"))
}

/// A viewer of the dashboard's live updates: reads its stream until `needle` shows.
struct Viewer {
    stream: tokio::net::TcpStream,
    seen: String,
}

impl Viewer {
    async fn connect(addr: SocketAddr) -> Viewer {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request =
            format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut viewer = Viewer {
            stream,
            seen: String::new(),
        };
        viewer.until("retry:").await;
        viewer
    }

    async fn until(&mut self, needle: &str) {
        let mut buffer = [0u8; 65536];
        while !self.seen.contains(needle) {
            let read = self.stream.read(&mut buffer).await.expect("read");
            assert!(read > 0, "the stream ended");
            self.seen
                .push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
        self.seen.clear();
    }
}

/// How long the dashboard serving `spokes` takes to show each of [`CHANGES`] changes, sorted,
/// and how long its watches took to list them all.
async fn live_updates(spokes: usize) -> Result<(Vec<Duration>, Duration), String> {
    let plane = fleetform::embedded::builder()
        .insecure_http()
        .start()
        .await
        .map_err(|err| format!("control plane: {err}"))?;
    let client = fleetform::transport::client_from_kubeconfig(&plane.kubeconfig()).await?;
    create_all(&client, spokes).await?;
    let stop = CancellationToken::new();
    let started = Instant::now();
    let dashboard = fleetform::dashboard::start(
        fleetform::dashboard::DashboardConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            hubs: vec![("hub".to_string(), client.clone())],
            token_secret: None,
            any_port_if_taken: false,
        },
        stop.child_token(),
    )
    .await
    .map_err(|err| err.to_string())?;
    let addr = dashboard.addr();
    // Listed when the fleet page counts every spoke ONLINE (its cluster listed too).
    let everyone = format!(" of {spokes}<");
    loop {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        let request =
            format!("GET /?state=ONLINE HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut page = String::new();
        stream
            .read_to_string(&mut page)
            .await
            .map_err(|e| e.to_string())?;
        if page.contains(&everyone) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let listed = started.elapsed();
    let mut viewer = Viewer::connect(addr).await;
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let mut times = Vec::new();
    for change in 0..CHANGES {
        let index = (change * 997 + 1) % spokes;
        let changed = Instant::now();
        set_available(&clusters, index, "False").await?;
        viewer.until(&format!("row:hub/spoke-{index:05}")).await;
        times.push(changed.elapsed());
    }
    times.sort();
    stop.cancel();
    dashboard.stopped().await;
    Ok((times, listed))
}

fn main() {
    let spokes = setting("FLEETFORM_BENCH_SPOKES", 10_000);
    let built = Instant::now();
    let model = model(spokes);
    let build_time = built.elapsed();
    let mut report = serde_json::Map::new();
    println!("dashboard, {spokes} spokes in the view model (built in {build_time:.2?})");
    println!(
        "{:<34} {:>10} {:>10} {:>12}",
        "fleet page", "p50 ms", "p99 ms", "bytes"
    );
    for (name, query) in [
        ("first page", ""),
        ("sorted by lease age", "sort=lease"),
        ("filtered: state=OFFLINE", "state=OFFLINE"),
        (
            "filtered: label env=prod, page 5",
            "label=env%3Dprod&page=5",
        ),
    ] {
        let (times, size) = render(&model, query);
        let (p50, p99) = (percentile(&times, 0.5), percentile(&times, 0.99));
        println!("{name:<34} {:>10.2} {:>10.2} {size:>12}", ms(p50), ms(p99));
        report.insert(
            name.to_string(),
            json!({"query": query, "p50Ms": ms(p50), "p99Ms": ms(p99), "bytes": size}),
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(live_updates(spokes)) {
        Ok((times, listed)) => {
            let (p50, max) = (percentile(&times, 0.5), times[times.len() - 1]);
            println!(
                "live update, API server to viewer ({CHANGES} changes): p50 {:.1} ms, max {:.1} ms (watches listed {spokes} spokes in {listed:.2?})",
                ms(p50),
                ms(max)
            );
            report.insert(
                "liveUpdate".to_string(),
                json!({"changes": CHANGES, "p50Ms": ms(p50), "maxMs": ms(max), "listedSeconds": listed.as_secs_f64()}),
            );
        }
        Err(err) => {
            eprintln!("live update: {err}");
            std::process::exit(1);
        }
    }
    report.insert("spokes".to_string(), json!(spokes));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&dir).expect("target/bench");
    std::fs::write(
        dir.join("dashboard.json"),
        serde_json::to_string_pretty(&Value::Object(report)).unwrap(),
    )
    .expect("write target/bench/dashboard.json");
}
