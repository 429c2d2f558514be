//! Planning a 10,000-spoke fleet: load the repo (YAML → validated fleet), observe a hub holding
//! the previous commit's objects, and plan the difference. Prints a table and writes
//! `target/bench/plan.json`. Targets (DESIGN, issue 6): plan < 1 s and < 200 MiB.
//!
//! `cargo bench --bench plan`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fleetform::fleet::{self, FleetFile};
use fleetform::plan::desired::hub_objects;
use fleetform::plan::{self, ClusterRegistration, ObservedHub, PruneGuard, Stored};
use fleetform::source::Origin;
use serde_json::json;

#[path = "support/procfs.rs"]
mod procfs;

use procfs::machine;

const SPOKES: usize = 10_000;
const RUNS: usize = 5;

fn repo(spokes: usize, lease_for: impl Fn(usize) -> u32) -> Vec<FleetFile> {
    let hub = "apiVersion: fleetform.io/v1alpha1\nkind: Hub\nmetadata:\n  name: hub\nspec:\n  kubeconfig:\n    embedded: {}\n  agent:\n    version: 1.0.0\n";
    let mut addons = String::new();
    for addon in ["application-manager", "config-policy", "observability"] {
        addons.push_str(&format!(
            "---\napiVersion: fleetform.io/v1alpha1\nkind: AddOn\nmetadata:\n  name: {addon}\n"
        ));
    }
    let mut files = vec![
        FleetFile {
            path: "hub.yaml".into(),
            content: hub.as_bytes().to_vec(),
        },
        FleetFile {
            path: "addons.yaml".into(),
            content: addons.into_bytes(),
        },
    ];
    // A hundred spokes per file, as a team might group them by region.
    for chunk in 0..spokes.div_ceil(100) {
        let mut text = String::new();
        for i in chunk * 100..((chunk + 1) * 100).min(spokes) {
            text.push_str(&format!(
                "---\napiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata:\n  name: spoke-{i:05}\n  labels:\n    env: prod\n    region: region-{}\nspec:\n  hubRef: hub\n  kubeconfig:\n    secretRef: {{namespace: fleetform-system, name: spoke-{i:05}, key: kubeconfig}}\n  leaseDurationSeconds: {}\n  addons: [application-manager, config-policy, observability]\n",
                i % 7,
                lease_for(i)
            ));
        }
        files.push(FleetFile {
            path: format!("spokes/{chunk:03}.yaml"),
            content: text.into_bytes(),
        });
    }
    files
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Resets the peak-RSS counter (Linux), so set-up that a real run would not do is not counted.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn main() {
    // The hub holds the previous commit: every spoke at 60 s leases. The new commit changes 100
    // leases, drops 5 spokes and adds 50.
    let observed = {
        let before = fleet::load(&repo(SPOKES, |_| 60)).expect("previous commit is valid");
        let objects = hub_objects(&before, "hub")
            .enumerate()
            .map(|(rv, (key, mut object))| {
                object["metadata"]["resourceVersion"] = json!(rv.to_string());
                (key, Stored::from(object))
            })
            .collect();
        let clusters = before
            .spokes
            .keys()
            .map(|name| {
                (
                    name.clone(),
                    ClusterRegistration {
                        hub_accepts_client: true,
                        accepted: true,
                    },
                )
            })
            .collect();
        BTreeMap::from([(
            "hub".to_string(),
            ObservedHub {
                installed: true,
                objects,
                dry_run: BTreeMap::new(),
                clusters,
                fleet_syncs: Vec::new(),
            },
        )])
    };
    let files = repo(SPOKES + 50, |i| if i % 100 == 0 { 30 } else { 60 });
    reset_peak_rss();

    let mut load_times = Vec::new();
    let mut fleet = None;
    for _ in 0..RUNS {
        drop(fleet.take());
        let started = Instant::now();
        let loaded = fleet::load(&files).expect("new commit is valid");
        load_times.push(started.elapsed());
        fleet = Some(loaded);
    }
    let mut fleet = fleet.expect("loaded");
    for i in 0..5 {
        fleet.spokes.remove(&format!("spoke-{:05}", i * 1000 + 1));
    }
    let rss_after_load = peak_rss_mib();

    let guard = PruneGuard {
        allow_prune: true,
        ..PruneGuard::default()
    };
    let origin = Origin::Directory {
        path: "bench".into(),
        uncommitted_changes: false,
    };
    let mut plan_times = Vec::new();
    let mut steps = 0;
    let mut changes = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        let plan = plan::plan(&fleet, origin.clone(), &observed, guard);
        plan_times.push(started.elapsed());
        steps = plan.hubs.iter().map(|hub| hub.steps.len()).sum();
        changes = plan.hubs.iter().map(|hub| hub.changes.len()).sum();
    }
    let rss_peak = peak_rss_mib();
    let load = median(load_times);
    let plan_time = median(plan_times);

    println!("fleetform plan benchmark — {}", machine());
    println!("{:<48} {:>12} {:>10}", "measure", "value", "target");
    println!(
        "{:<48} {:>12} {:>10}",
        format!("load + validate {} spokes (median of {RUNS})", SPOKES + 50),
        format!("{:.0} ms", load.as_secs_f64() * 1e3),
        ""
    );
    println!(
        "{:<48} {:>12} {:>10}",
        format!("plan {} spokes (median of {RUNS})", SPOKES + 50),
        format!("{:.0} ms", plan_time.as_secs_f64() * 1e3),
        ""
    );
    println!(
        "{:<48} {:>12} {:>10}",
        "load + plan",
        format!("{:.0} ms", (load + plan_time).as_secs_f64() * 1e3),
        "< 1000 ms"
    );
    println!(
        "{:<48} {:>12} {:>10}",
        "peak RSS up to the loaded fleet",
        format!("{rss_after_load:.0} MiB"),
        ""
    );
    println!(
        "{:<48} {:>12} {:>10}",
        "peak RSS (files, hub state, fleet, plan)",
        format!("{rss_peak:.0} MiB"),
        "< 200 MiB"
    );
    println!(
        "{:<48} {:>12} {:>10}",
        "object changes / lifecycle steps planned",
        format!("{changes} / {steps}"),
        ""
    );

    let report = json!({
        "machine": machine(),
        "spokes": SPOKES + 50,
        "load_ms": load.as_secs_f64() * 1e3,
        "plan_ms": plan_time.as_secs_f64() * 1e3,
        "peak_rss_mib": rss_peak,
        "object_changes": changes,
        "lifecycle_steps": steps,
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(
            dir.join("plan.json"),
            serde_json::to_string_pretty(&report).unwrap_or_default(),
        );
    }
}
