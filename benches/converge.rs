//! Commit to Available on an embedded fleet (issue 6): `fleetform up`'s clusters for a hub and N
//! spokes (default 1,000) are started first, as real clusters would already exist; then one
//! commit declares every spoke, `up`'s sync picks it up and applies it, and the clock runs until
//! every spoke's
//! ManagedCluster is Available — agents installed, bootstrapped by CSR, accepted, joined,
//! pivoted, leases renewing. Target: < 60 s for 1,000 spokes.
//!
//! Prints a table and writes `target/bench/converge.json`.
//! `cargo bench --bench converge`; `FLEETFORM_BENCH_SPOKES=100` for a quick run.

use std::time::{Duration, Instant};

use fleetform::api::fleet::{Phase, SYSTEM_NAMESPACE, Spoke};
use fleetform::api::{FleetSync, ManagedCluster};
use fleetform::up::{self, UpConfig};
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

const TARGET: Duration = Duration::from_secs(60);

fn spokes_wanted() -> usize {
    std::env::var("FLEETFORM_BENCH_SPOKES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(1_000)
}

/// Commits the work tree; returns the commit's id.
fn commit(repo: &git2::Repository, message: &str) -> String {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let signature = git2::Signature::now("bench", "bench@example.com").unwrap();
    let parent = repo.head().ok().and_then(|head| head.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        message,
        &tree,
        &parents,
    )
    .unwrap()
    .to_string()
}

fn write_fleet(dir: &std::path::Path, spokes: usize) {
    let hub = "apiVersion: fleetform.io/v1alpha1\nkind: Hub\nmetadata:\n  name: hub\nspec:\n  kubeconfig:\n    embedded: {}\n  registration:\n    leaseDurationSeconds: 10\n";
    std::fs::create_dir_all(dir.join("spokes")).unwrap();
    std::fs::write(dir.join("hub.yaml"), hub).unwrap();
    for chunk in 0..spokes.div_ceil(100) {
        let mut text = String::new();
        for i in chunk * 100..((chunk + 1) * 100).min(spokes) {
            text.push_str(&format!(
                "---\napiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata:\n  name: spoke-{i:04}\n  labels:\n    batch: b{chunk}\nspec:\n  hubRef: hub\n  kubeconfig:\n    embedded: {{}}\n"
            ));
        }
        std::fs::write(dir.join(format!("spokes/batch-{chunk:02}.yaml")), text).unwrap();
    }
}

/// Resident set size and CPU seconds (user + system) of this process.
fn usage() -> (u64, f64) {
    let rss_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let ticks: f64 =
                fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .unwrap_or(0.0);
    (rss_kib / 1024, cpu)
}

fn main() {
    let spokes = spokes_wanted();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        // The spokes' clusters exist before the commit that declares them, as real ones would:
        // `up` starts them from a fleet that has them all; the repo's first commit has the hub.
        let full = tempfile::tempdir().unwrap();
        write_fleet(full.path(), spokes);
        let (_, fleet) = fleetform::source::load_fleet(&fleetform::source::SourceSpec {
            location: full.path().display().to_string(),
            ..Default::default()
        })
        .expect("a valid fleet");
        let repo = tempfile::tempdir().unwrap();
        let git = git2::Repository::init(repo.path()).unwrap();
        write_fleet(repo.path(), 0);
        commit(&git, "the hub");
        let data = tempfile::tempdir().unwrap();

        let started = Instant::now();
        let running = up::start(
            &fleet,
            UpConfig {
                interval: Duration::from_secs(1),
                // `up` makes its data dir owner-only; a temporary directory is not.
                ..UpConfig::new(data.path().join("up"), repo.path().display().to_string())
            },
        )
        .await
        .expect("the fleet's clusters start");
        let clusters_up = started.elapsed();
        let hub = running.hubs[0].client.clone();
        eprintln!("{spokes} spokes' clusters and the hub started in {clusters_up:.1?}");

        // The commit; `up`'s sync picks it up within its 1 s interval.
        let (_, cpu_before) = usage();
        write_fleet(repo.path(), spokes);
        let commit_sha = commit(&git, "every spoke");
        let commit = Instant::now();
        let syncs: Api<FleetSync> = Api::namespaced(hub.clone(), SYSTEM_NAMESPACE);
        let applied = loop {
            let sync = syncs.get(up::FLEET_SYNC).await.expect("read the FleetSync");
            if sync.status.and_then(|s| s.last_applied_commit).as_deref() == Some(&commit_sha) {
                break commit.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let clusters: Api<ManagedCluster> = Api::all(hub.clone());
        let spoke_api: Api<Spoke> = Api::namespaced(hub.clone(), SYSTEM_NAMESPACE);
        let mut peak_rss = 0;
        let mut last_report = Instant::now();
        let (joined_at, available_at) = loop {
            let (rss, _) = usage();
            peak_rss = peak_rss.max(rss);
            let listed = clusters.list(&ListParams::default()).await.expect("list clusters");
            let available = listed.items.iter().filter(|c| c.is_available()).count();
            if last_report.elapsed() >= Duration::from_secs(5) {
                let running_spokes = spoke_api
                    .list(&ListParams::default())
                    .await
                    .map(|list| {
                        list.items
                            .iter()
                            .filter(|s| s.status.as_ref().and_then(|s| s.phase) == Some(Phase::Running))
                            .count()
                    })
                    .unwrap_or(0);
                eprintln!(
                    "{:>6.1?}: {} registered, {available} available, {running_spokes} Running, RSS {rss} MiB",
                    commit.elapsed(),
                    listed.items.len()
                );
                last_report = Instant::now();
            }
            if available == spokes {
                break (applied, commit.elapsed());
            }
            if commit.elapsed() > Duration::from_secs(600) {
                eprintln!("gave up after 600 s with {available} of {spokes} available");
                break (applied, commit.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let (rss, cpu_after) = usage();
        peak_rss = peak_rss.max(rss);
        let cpu = cpu_after - cpu_before;
        println!("commit to Available, {spokes} spokes on an embedded fleet (fleetform up's clusters, in one process)");
        println!("{:<36} {:>12} {:>12}", "measure", "value", "target");
        println!("{:<36} {:>12.1?} {:>12}", "clusters started (not timed)", clusters_up, "-");
        println!("{:<36} {:>12.1?} {:>12}", "commit to applied by sync", joined_at, "-");
        println!("{:<36} {:>12.1?} {:>12}", "commit to every spoke Available", available_at, format!("< {:?}", TARGET));
        println!("{:<36} {:>12.1} {:>12}", "CPU seconds (all clusters + loops)", cpu, "-");
        println!("{:<36} {:>12} {:>12}", "peak RSS MiB (all clusters + loops)", peak_rss, "-");
        let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
        let _ = std::fs::create_dir_all(&out);
        let report = json!({
            "spokes": spokes,
            "clusters_started_seconds": clusters_up.as_secs_f64(),
            "apply_seconds": joined_at.as_secs_f64(),
            "commit_to_available_seconds": available_at.as_secs_f64(),
            "target_seconds": TARGET.as_secs_f64(),
            "cpu_seconds": cpu,
            "peak_rss_mib": peak_rss,
        });
        let _ = std::fs::write(out.join("converge.json"), serde_json::to_vec_pretty(&report).unwrap_or_default());
        running.shutdown().await;
    });
}
