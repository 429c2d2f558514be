//! API server benchmark: create/update/get throughput and latency with 1 and 64 concurrent
//! clients (in-memory and durable), one write fanned out to 10,000 watches, server RSS with
//! 100,000 objects, and at fleet scale: RSS with 1,000 and 10,000 labelled objects, a
//! label-selected list of one cluster's objects among 10,000, and RSS with 75 s of watch
//! history at 1,000 writes/s. The server runs as a separate process (`controlplane-serve`), so
//! RSS figures are the server's own. Prints a table and writes JSON under `target/bench/`.
//!
//! Run: `cargo bench -p fleetform-controlplane --bench apiserver [-- SECTION...]`, sections
//! `crud`, `fanout`, `rss`, `scale` (default: all). `FLEETFORM_BENCH_OLD_SERVER=/path/to/an/older/
//! controlplane-serve` runs the durable `crud` rounds with that build too, each build twice in
//! turns (new, old, new, old), so that both are measured in the same minutes of the machine.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

struct Server {
    child: tokio::process::Child,
    url: String,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    async fn start(durable: bool) -> Server {
        Self::start_binary(durable, env!("CARGO_BIN_EXE_controlplane-serve").as_ref()).await
    }

    async fn start_binary(durable: bool, binary: &Path) -> Server {
        // Owner-only, as a control plane's data directory must be.
        let dir = durable.then(|| {
            tempfile::Builder::new()
                .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .tempdir()
                .expect("tempdir")
        });
        let mut cmd = tokio::process::Command::new(binary);
        if let Some(d) = &dir {
            cmd.arg("--data-dir").arg(d.path());
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("server starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let line = lines.next_line().await.expect("read").expect("line");
        let url = line.trim_start_matches("listening on ").to_string();
        Server {
            child,
            url,
            _dir: dir,
        }
    }

    fn rss_mib(&self) -> f64 {
        let pid = self.child.id().unwrap_or(0);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// The server's CPU time so far (user + system), from `/proc/<pid>/stat`: the figure
    /// that survives a busy machine, where throughput does not.
    fn cpu_secs(&self) -> f64 {
        let pid = self.child.id().unwrap_or(0);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command (which may hold spaces) end at its closing parenthesis;
        // utime and stime are the 12th and 13th after it.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let ticks: f64 = after
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|t| t.parse::<f64>().ok())
            .sum();
        ticks / USER_HZ
    }
}

/// The unit of `/proc/<pid>/stat`'s times: Linux reports them at 100 Hz on every
/// architecture (`sysconf(_SC_CLK_TCK)`).
const USER_HZ: f64 = 100.0;

fn client(url: &str) -> kube::Client {
    let mut c = kube::Config::new(url.parse().expect("url"));
    c.default_namespace = "default".into();
    kube::Client::try_from(c).expect("client")
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"n": "0"}})).expect("cm")
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Create,
    Update,
    Get,
}

struct Result {
    name: String,
    ops: usize,
    secs: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// The server's CPU-seconds over the round, per operation, in microseconds.
    server_cpu_us: f64,
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

async fn run_op(
    client: &kube::Client,
    op: Op,
    clients: usize,
    per_client: usize,
    prefix: &str,
) -> (usize, f64, Vec<Duration>) {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
        let prefix = prefix.to_string();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let name = format!("{prefix}-{c}-{i}");
                let t = Instant::now();
                let ok = match op {
                    Op::Create => api.create(&PostParams::default(), &cm(&name)).await.is_ok(),
                    Op::Update => api
                        .patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"data": {"n": i.to_string()}})),
                        )
                        .await
                        .is_ok(),
                    Op::Get => api.get(&name).await.is_ok(),
                };
                assert!(ok, "request failed");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort();
    (all.len(), secs, all)
}

async fn crud(durable: bool, results: &mut Vec<Result>) {
    let binary: &Path = env!("CARGO_BIN_EXE_controlplane-serve").as_ref();
    crud_of(durable, binary, "", results).await;
}

/// The `crud` rounds on the server `binary`, their scenarios' names ending in `build`.
async fn crud_of(durable: bool, binary: &Path, build: &str, results: &mut Vec<Result>) {
    let server = Server::start_binary(durable, binary).await;
    let client = client(&server.url);
    let mode = if durable { "durable" } else { "memory" };
    for clients in [1usize, 64] {
        let per_client = if clients == 1 { 1000 } else { 100 };
        let prefix = format!("c{clients}");
        for (op, label) in [
            (Op::Create, "create"),
            (Op::Update, "update"),
            (Op::Get, "get"),
        ] {
            let cpu = server.cpu_secs();
            let (ops, secs, lat) = run_op(&client, op, clients, per_client, &prefix).await;
            results.push(Result {
                name: format!(
                    "{label} {mode} {clients} client{}{build}",
                    if clients == 1 { "" } else { "s" }
                ),
                ops,
                secs,
                p50_ms: percentile(&lat, 0.5),
                p99_ms: percentile(&lat, 0.99),
                server_cpu_us: (server.cpu_secs() - cpu) / ops as f64 * 1e6,
            });
        }
        if clients == 64 {
            // A longer update run at 64 clients: the headline durable-throughput figure.
            let prefix = prefix_for_sustained(&client, &prefix).await;
            let cpu = server.cpu_secs();
            let (ops, secs, lat) = run_op(&client, Op::Update, 64, 200, &prefix).await;
            results.push(Result {
                name: format!("update {mode} 64 clients sustained{build}"),
                ops,
                secs,
                p50_ms: percentile(&lat, 0.5),
                p99_ms: percentile(&lat, 0.99),
                server_cpu_us: (server.cpu_secs() - cpu) / ops as f64 * 1e6,
            });
        }
    }
}

/// Creates 64×200 objects for the sustained update run and returns their prefix.
async fn prefix_for_sustained(client: &kube::Client, prefix: &str) -> String {
    let p = format!("{prefix}s");
    run_op(client, Op::Create, 64, 200, &p).await;
    p
}

/// Opens `n` watches over HTTP/2 (`conns` connections), makes one write, and measures when
/// each watch delivers it.
async fn fanout(n: usize, conns: usize) -> (Vec<Duration>, f64, f64) {
    let server = Server::start(false).await;
    let kube = client(&server.url);
    let idle_rss = server.rss_mib();
    let api: Api<ConfigMap> = Api::default_namespaced(kube.clone());
    let seed = api
        .create(&PostParams::default(), &cm("seed"))
        .await
        .expect("seed");
    let rv = seed.metadata.resource_version.expect("rv");
    let authority = server.url.trim_start_matches("http://").to_string();
    let mut senders = Vec::new();
    for _ in 0..conns {
        let tcp = tokio::net::TcpStream::connect(&authority)
            .await
            .expect("connect");
        let (send, conn) =
            hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                .handshake::<_, Empty<Bytes>>(hyper_util::rt::TokioIo::new(tcp))
                .await
                .expect("h2 handshake");
        tokio::spawn(conn);
        senders.push(send);
    }
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let uri = format!(
        "http://{authority}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=600"
    );
    let sem = Arc::new(tokio::sync::Semaphore::new(512));
    for i in 0..n {
        let mut send = senders[i % conns].clone();
        let uri = uri.clone();
        let ready = ready_tx.clone();
        let got = got_tx.clone();
        let permit = sem.clone().acquire_owned().await.expect("permit");
        tokio::spawn(async move {
            let req = http::Request::get(uri)
                .body(Empty::<Bytes>::new())
                .expect("req");
            send.ready().await.expect("ready");
            let resp = send.send_request(req).await.expect("watch response");
            drop(permit);
            let _ = ready.send(());
            let mut body = resp.into_body();
            while let Some(frame) = body.frame().await {
                if let Ok(f) = frame
                    && f.data_ref().is_some_and(|d| !d.is_empty())
                {
                    let _ = got.send(Instant::now());
                    return;
                }
            }
        });
    }
    for _ in 0..n {
        ready_rx.recv().await.expect("watch opened");
    }
    let watch_rss = server.rss_mib();
    let t0 = Instant::now();
    api.create(&PostParams::default(), &cm("fanout"))
        .await
        .expect("write");
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let at = got_rx.recv().await.expect("delivery");
        lat.push(at.saturating_duration_since(t0));
    }
    lat.sort();
    (lat, idle_rss, watch_rss)
}

/// The same fan-out through the in-process transport (server and watchers in this
/// process, one `kube::Client` over `InProcessService`, no sockets).
async fn fanout_in_process(n: usize) -> Vec<Duration> {
    use futures::StreamExt;
    let plane = fleetform_controlplane::ControlPlane::builder()
        .start()
        .await
        .expect("in-process plane");
    let client = kube::Client::new(plane.in_process_service(), "default");
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let seed = api
        .create(&PostParams::default(), &cm("seed"))
        .await
        .expect("seed");
    let rv = seed.metadata.resource_version.expect("rv");
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for _ in 0..n {
        let api = api.clone();
        let rv = rv.clone();
        let got = got_tx.clone();
        let ready = ready_tx.clone();
        tokio::spawn(async move {
            let wp = kube::api::WatchParams::default().timeout(600);
            let mut s = api.watch(&wp, &rv).await.expect("watch").boxed();
            let _ = ready.send(());
            while let Some(ev) = s.next().await {
                if matches!(ev, Ok(kube::api::WatchEvent::Added(_))) {
                    let _ = got.send(Instant::now());
                    return;
                }
            }
        });
    }
    for _ in 0..n {
        ready_rx.recv().await.expect("watch opened");
    }
    let t0 = Instant::now();
    api.create(&PostParams::default(), &cm("fanout"))
        .await
        .expect("write");
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        lat.push(
            got_rx
                .recv()
                .await
                .expect("delivery")
                .saturating_duration_since(t0),
        );
    }
    lat.sort();
    plane.shutdown().await;
    lat
}

async fn rss_with_objects(n: usize) -> (f64, f64) {
    let server = Server::start(false).await;
    let kube = client(&server.url);
    let before = server.rss_mib();
    run_op(&kube, Op::Create, 64, n / 64, "rss").await;
    let mut after = server.rss_mib();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = after.max(server.rss_mib());
    }
    (before, after)
}

/// Objects per cluster in the scale run (a fleet's lease, addons, CSRs...).
const PER_CLUSTER: usize = 10;
const LABEL: &str = "open-cluster-management.io/cluster-name";

/// Creates objects `from..to` of the scale run, object `i` belonging to cluster
/// `spoke-{i / PER_CLUSTER}`, 64 requests at a time.
async fn create_labelled(api: &Api<ConfigMap>, from: usize, to: usize) {
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move {
                let object: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("obj-{i}"),
                        "labels": {LABEL: format!("spoke-{}", i / PER_CLUSTER)}},
                    "data": {"payload": "x".repeat(400)}}))
                .expect("cm");
                api.create(&PostParams::default(), &object).await.map(drop)
            }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await
        .expect("created");
}

struct Scale {
    rss_empty: f64,
    rss_1k: f64,
    rss_10k: f64,
    first_list_ms: f64,
    lists: Vec<Duration>,
    history_writes: usize,
    history_secs: f64,
    rss_history: f64,
}

/// RSS at 1,000 and 10,000 objects, one cluster's objects listed by label among 10,000, and RSS
/// once 75,000 updates (75 s at 1,000 writes/s, written as fast as the server takes them) are
/// in the watch history.
async fn scale() -> Scale {
    let server = Server::start(false).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client(&server.url));
    let rss_empty = server.rss_mib();
    create_labelled(&api, 0, 1_000).await;
    let rss_1k = server.rss_mib();
    create_labelled(&api, 1_000, 10_000).await;
    let rss_10k = server.rss_mib();
    let clusters = 10_000 / PER_CLUSTER;
    let list = |cluster: usize| {
        let api = api.clone();
        async move {
            let selector = format!("{LABEL}=spoke-{cluster}");
            let t = Instant::now();
            let got = api
                .list(&kube::api::ListParams::default().labels(&selector))
                .await
                .expect("list");
            assert_eq!(got.items.len(), PER_CLUSTER, "one cluster's objects");
            t.elapsed()
        }
    };
    let first_list_ms = list(0).await.as_secs_f64() * 1000.0;
    let mut lists = Vec::new();
    for n in 0..1_000 {
        lists.push(list((n * 7 + 1) % clusters).await);
    }
    lists.sort();
    let history_writes = 75_000;
    let t = Instant::now();
    {
        use futures::{StreamExt, TryStreamExt};
        futures::stream::iter(0..history_writes)
            .map(|n| {
                let api = api.clone();
                async move {
                    let patch = json!({"data": {"n": n.to_string()}});
                    api.patch(
                        &format!("obj-{}", n % 10_000),
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await
                    .map(drop)
                }
            })
            .buffer_unordered(64)
            .try_collect::<Vec<()>>()
            .await
            .expect("updated");
    }
    let history_secs = t.elapsed().as_secs_f64();
    let rss_history = server.rss_mib();
    Scale {
        rss_empty,
        rss_1k,
        rss_10k,
        first_list_ms,
        lists,
        history_writes,
        history_secs,
        rss_history,
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn target_dir() -> PathBuf {
    if let Ok(d) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("machine: {} ({} cores)", cpu_model(), cores);
    // cargo passes `--bench`; other arguments name the sections to run.
    let sections: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let run = |section: &str| sections.is_empty() || sections.iter().any(|s| s == section);
    let mut doc = json!({"machine": {"cpu": cpu_model(), "cores": cores}});
    if run("crud") {
        let mut results = Vec::new();
        rt.block_on(crud(false, &mut results));
        rt.block_on(crud(true, &mut results));
        if let Some(old) = std::env::var_os("FLEETFORM_BENCH_OLD_SERVER") {
            let (old, new) = (Path::new(&old), env!("CARGO_BIN_EXE_controlplane-serve"));
            rt.block_on(crud_of(true, old, " (old)", &mut results));
            rt.block_on(crud_of(true, new.as_ref(), " (2nd)", &mut results));
            rt.block_on(crud_of(true, old, " (old, 2nd)", &mut results));
        }
        println!();
        println!(
            "{:<40} {:>8} {:>10} {:>9} {:>9} {:>14}",
            "scenario", "ops", "ops/s", "p50 ms", "p99 ms", "server CPU/op"
        );
        for r in &results {
            println!(
                "{:<40} {:>8} {:>10.0} {:>9.2} {:>9.2} {:>11.0} µs",
                r.name,
                r.ops,
                r.ops as f64 / r.secs,
                r.p50_ms,
                r.p99_ms,
                r.server_cpu_us
            );
        }
        doc["crud"] = results
            .iter()
            .map(|r| {
                json!({"scenario": r.name, "ops": r.ops,
            "ops_per_sec": r.ops as f64 / r.secs, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms,
            "server_cpu_us_per_op": r.server_cpu_us})
            })
            .collect();
    }
    if run("fanout") {
        let (lat, idle_rss, watch_rss) = rt.block_on(fanout(10_000, 50));
        println!();
        println!(
            "fan-out: 1 write to {} watches over 50 HTTP/2 connections: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            lat.len(),
            percentile(&lat, 0.5),
            percentile(&lat, 0.99),
            percentile(&lat, 1.0)
        );
        println!(
            "server RSS: {idle_rss:.1} MiB idle, {watch_rss:.1} MiB with 10,000 watches (target < 512 MiB)"
        );
        let inproc = rt.block_on(fanout_in_process(10_000));
        println!(
            "fan-out in process: 1 write to {} kube-rs watches over InProcessService: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            inproc.len(),
            percentile(&inproc, 0.5),
            percentile(&inproc, 0.99),
            percentile(&inproc, 1.0)
        );
        doc["fanout"] = json!({"watches": lat.len(), "connections": 50, "p50_ms": percentile(&lat, 0.5),
            "p99_ms": percentile(&lat, 0.99), "max_ms": percentile(&lat, 1.0),
            "rss_idle_mib": idle_rss, "rss_with_watches_mib": watch_rss});
        doc["fanout_in_process"] = json!({"watches": inproc.len(), "p50_ms": percentile(&inproc, 0.5),
            "p99_ms": percentile(&inproc, 0.99), "max_ms": percentile(&inproc, 1.0)});
    }
    if run("rss") {
        let (before, after) = rt.block_on(rss_with_objects(100_032));
        println!(
            "server RSS: {before:.1} MiB empty, {after:.1} MiB with 100,032 ConfigMaps (in memory)"
        );
        doc["rss_100k_objects"] = json!({"before_mib": before, "after_mib": after});
    }
    if run("scale") {
        let s = rt.block_on(scale());
        println!();
        println!(
            "server RSS with labelled 400-byte ConfigMaps: {:.1} MiB empty, {:.1} MiB at 1,000, {:.1} MiB at 10,000",
            s.rss_empty, s.rss_1k, s.rss_10k
        );
        println!(
            "list of one cluster's {PER_CLUSTER} objects among 10,000 by label: first {:.2} ms, then p50 {:.2} ms, p99 {:.2} ms over {} lists",
            s.first_list_ms,
            percentile(&s.lists, 0.5),
            percentile(&s.lists, 0.99),
            s.lists.len()
        );
        println!(
            "server RSS with {} updates in the watch history (written in {:.1} s, {:.0}/s): {:.1} MiB",
            s.history_writes,
            s.history_secs,
            s.history_writes as f64 / s.history_secs,
            s.rss_history
        );
        doc["scale"] = json!({"rss_empty_mib": s.rss_empty, "rss_1k_objects_mib": s.rss_1k,
            "rss_10k_objects_mib": s.rss_10k, "selected_list_first_ms": s.first_list_ms,
            "selected_list_p50_ms": percentile(&s.lists, 0.5),
            "selected_list_p99_ms": percentile(&s.lists, 0.99),
            "history_writes": s.history_writes, "history_secs": s.history_secs,
            "rss_with_history_mib": s.rss_history});
    }
    let dir = target_dir().join("bench");
    if std::fs::create_dir_all(&dir).is_ok() {
        let path = dir.join("apiserver.json");
        if std::fs::write(
            &path,
            serde_json::to_string_pretty(&doc).unwrap_or_default(),
        )
        .is_ok()
        {
            println!("\nwrote {}", path.display());
        }
    }
}
