//! Commit to Available on an embedded fleet (issue 6): `fleetform up`'s clusters for a hub and N
//! spokes (default 1,000) are started first, as real clusters would already exist; then one
//! commit declaring every spoke is planned and applied, and the clock runs until every spoke's
//! ManagedCluster is Available — agents installed, bootstrapped by CSR, accepted, joined,
//! pivoted, leases renewing. Target: < 60 s for 1,000 spokes.
//!
//! Prints a table and writes `target/bench/converge.json`.
//! `cargo bench --bench converge`; `FLEETFORM_BENCH_SPOKES=100` for a quick run.

use std::time::{Duration, Instant};

use fleetform::api::ManagedCluster;
use fleetform::api::fleet::{Phase, SYSTEM_NAMESPACE, Spoke};
use fleetform::plan::{self, Observed, PruneGuard};
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
        let repo = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        write_fleet(repo.path(), spokes);
        let spec = fleetform::source::SourceSpec {
            location: repo.path().display().to_string(),
            ..Default::default()
        };
        let (origin, fleet) = fleetform::source::load_fleet(&spec).expect("a valid fleet");

        let started = Instant::now();
        let running = up::start(
            &fleet,
            UpConfig {
                data_dir: data.path().to_path_buf(),
                repo: repo.path().display().to_string(),
                git_ref: "HEAD".into(),
                path: None,
                interval: Duration::from_secs(3600),
            },
        )
        .await
        .expect("the fleet's clusters start");
        let clusters_up = started.elapsed();
        let hub = running.hubs[0].client.clone();
        eprintln!("{spokes} spokes' clusters and the hub started in {clusters_up:.1?}");

        // The commit: plan and apply, as `fleetform apply` does.
        let (_, cpu_before) = usage();
        let commit = Instant::now();
        let mut observed = Observed::new();
        let desired = plan::desired::hub_objects(&fleet, "hub");
        observed.insert(
            "hub".into(),
            fleetform::observe::observe_hub("hub", &hub, &desired)
                .await
                .expect("observe the hub"),
        );
        let planned = plan::plan(&fleet, origin, &observed, PruneGuard::default());
        fleetform::apply::apply_hub(&planned.hubs[0], &hub)
            .await
            .expect("apply");
        let applied = commit.elapsed();

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
        println!("{:<36} {:>12.1?} {:>12}", "plan + apply (write the CRs)", joined_at, "-");
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
