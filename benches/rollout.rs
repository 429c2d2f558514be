//! A progressive agent rollout over a large fleet (issue 15, item 6): `Progressive,
//! maxConcurrency: 10%, minSuccessSeconds: 5, maxFailures: 2%, progressDeadlineSeconds: 60` over
//! N spokes (default 1,000), 2% of them offline and 1% whose new agent never comes up (its image
//! is from a registry under `.invalid`, which `up`'s kubelet never pulls).
//!
//! Two runs, both by default (`FLEETFORM_BENCH_ROLLOUT` = `up`, `clock` or `both`):
//! - `up` (`rollout/on_up.rs`): `fleetform up`'s clusters for a hub and N spokes. Every spoke
//!   joins; the offline ones' clusters are then destroyed and the clock waits for the hub to
//!   see them Unknown; then one commit raises the Hub's agent version (and points the never-up
//!   spokes' agent at the unpullable image). The hub's own Hub controller decides the rollout,
//!   each released agent upgrades itself (day 2: it rewrites its Deployment, the kubelet
//!   stand-in restarts it, the new agent reports its version) and the clock runs until every
//!   healthy spoke has succeeded and every never-up one has failed. Spokes are
//!   `FLEETFORM_BENCH_SPOKES_KIND` `light` [default] (a control plane in memory, and an agent
//!   running registration, lease and day 2 only: `AgentLoops::Lifecycle`) or `real` (what `up`
//!   runs).
//! - `clock` (`rollout/clock.rs`): the decision alone on a simulated clock, with upgrades taking
//!   `FLEETFORM_BENCH_UPGRADE_SECONDS` [1]: what the decision costs and wastes.
//!
//! Prints a table per run and writes `target/bench/rollout.json`.
//! `cargo bench --bench rollout`; `FLEETFORM_BENCH_SPOKES=100` for a quick run.

use fleetform::api::fleet::{RolloutSpec, RolloutStrategy, SpokeCount};
use serde_json::json;

#[path = "rollout/clock.rs"]
mod clock;
#[path = "rollout/on_up.rs"]
mod on_up;
#[path = "support/procfs.rs"]
mod procfs;
#[path = "support/repo.rs"]
mod repo;

/// The rollout both runs roll out, as `on_up` writes it into the Hub.
fn rollout_spec() -> RolloutSpec {
    RolloutSpec {
        strategy: RolloutStrategy::Progressive,
        max_concurrency: Some(SpokeCount::Percent(10)),
        max_failures: SpokeCount::Percent(2),
        min_success_seconds: 5,
        progress_deadline_seconds: 60,
        ..RolloutSpec::default()
    }
}

/// Whether the spoke at `index` is offline when the rollout starts: every 50th.
fn offline(index: usize) -> bool {
    index.is_multiple_of(50)
}

/// Whether the spoke at `index`'s new agent never comes up: every 100th, offset by one (so
/// never an offline one).
fn broken(index: usize) -> bool {
    index % 100 == 1
}

fn setting(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(text) => text
            .parse()
            .map_err(|_| format!("{name}={text:?}: expected a count")),
    }
}

fn main() {
    if let Err(message) = run() {
        eprintln!("rollout bench: {message}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let spokes = setting("FLEETFORM_BENCH_SPOKES", 1_000)?;
    let upgrade_seconds = setting("FLEETFORM_BENCH_UPGRADE_SECONDS", 1)?;
    let (on_up, on_clock) = match std::env::var("FLEETFORM_BENCH_ROLLOUT").as_deref() {
        Err(_) | Ok("both") => (true, true),
        Ok("up") => (true, false),
        Ok("clock") => (false, true),
        Ok(other) => {
            return Err(format!(
                "FLEETFORM_BENCH_ROLLOUT={other:?}: expected `up`, `clock` or `both`"
            ));
        }
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
    let mut figures = json!({"machine": procfs::machine()});
    if on_clock {
        figures["clock"] = clock::run(spokes, upgrade_seconds as u64);
    }
    if on_up {
        figures["up"] = on_up::run(spokes, light)?;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&dir)
        .and_then(|()| {
            std::fs::write(
                dir.join("rollout.json"),
                serde_json::to_vec_pretty(&figures).unwrap_or_default(),
            )
        })
        .map_err(|err| format!("write target/bench/rollout.json: {err}"))
}
