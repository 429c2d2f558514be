//! The rollout decision alone, on a simulated clock over the pure decision the hub runs
//! ([`fleetform::rollout::decide`]), with the fleet of the benchmark: what the decision costs
//! and how close to the ideal it keeps a rollout when upgrades take a fixed time. A released
//! spoke that is online runs the new agent `FLEETFORM_BENCH_UPGRADE_SECONDS` (default 1) after
//! its release. The hub decides again whenever the decision asks (`wake_at`) or a spoke's agent
//! changes, as the Hub controller does.
//!
//! Beside the figures of the run on `up`'s clusters it counts the place-seconds the decision
//! left idle while spokes waited their turn (a place free and a spoke pending: time the decision
//! wasted), and times one decision over the whole fleet.

use std::collections::BTreeMap;
use std::time::Instant;

use fleetform::api::fleet::{RolloutStatus, SpokeCount, SpokeRolloutState};
use fleetform::rollout::{Settings, SpokeFacts, decide};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::{broken, offline};

const OLD: &str = "old";
const NEW: &str = "new";
const TARGET: &str = "2.0.0/new";

/// The settings of a spoke whose agent's configuration hash is `agent`.
fn agent(agent: &str) -> Settings {
    Settings {
        agent: agent.to_string(),
        ..Settings::default()
    }
}

/// Runs the rollout of `spokes` spokes with `upgrade_seconds` per upgrade; prints its figures
/// and returns them.
pub fn run(spokes: usize, upgrade_seconds: u64) -> serde_json::Value {
    let upgrade = SignedDuration::from_secs(upgrade_seconds as i64);
    let spec = super::rollout_spec();
    let mut fleet: Vec<SpokeFacts> = (0..spokes)
        .map(|index| SpokeFacts {
            name: format!("spoke-{index:04}"),
            labels: BTreeMap::new(),
            wanted: agent(NEW),
            running: Some(agent(OLD)),
            online: !offline(index),
            unavailable_addons: Vec::new(),
        })
        .collect();

    let start = Timestamp::from_second(1_800_000_000).expect("an instant");
    let mut now = start;
    let mut status: Option<RolloutStatus> = None;
    // When each released spoke's new agent comes up.
    let mut comes_up: BTreeMap<usize, Timestamp> = BTreeMap::new();
    let (mut passes, mut most_in_progress, mut decide_time) = (0usize, 0usize, 0.0f64);
    let mut slowest_decision = 0.0f64;
    let limit = SpokeCount::Percent(10).of(spokes).max(1);
    // Place-seconds free while a spoke waited its turn.
    let mut idle = 0.0f64;
    let healthy = (0..spokes).filter(|i| !offline(*i) && !broken(*i)).count();
    // When the last healthy spoke is done; the rollout ends later, once the spokes that never
    // come up have used their progress deadline.
    let mut healthy_done = None;
    let halted;
    loop {
        for (index, at) in &comes_up {
            if *at <= now {
                fleet[*index].running = Some(agent(NEW));
            }
        }
        comes_up.retain(|_, at| *at > now);
        let started = Instant::now();
        let decision = decide(&spec, TARGET, &fleet, status.as_ref(), now);
        let took = started.elapsed().as_secs_f64();
        decide_time += took;
        slowest_decision = slowest_decision.max(took);
        passes += 1;
        let released: std::collections::BTreeSet<&str> = decision
            .status
            .spokes
            .iter()
            .filter(|entry| entry.state == SpokeRolloutState::InProgress)
            .map(|entry| entry.name.as_str())
            .collect();
        most_in_progress = most_in_progress.max(released.len());
        for (index, spoke) in fleet.iter().enumerate() {
            if released.contains(spoke.name.as_str())
                && spoke.online
                && !broken(index)
                && spoke
                    .running
                    .as_ref()
                    .is_none_or(|running| running.agent != NEW)
                && !comes_up.contains_key(&index)
            {
                comes_up.insert(index, now + upgrade);
            }
        }
        let succeeded = decision
            .status
            .spokes
            .iter()
            .filter(|entry| entry.state == SpokeRolloutState::Succeeded)
            .count();
        if succeeded >= healthy && healthy_done.is_none() {
            healthy_done = Some(now);
        }
        let done = decision.status.wave.is_none() || decision.status.halted.is_some();
        let next = [decision.wake_at, comes_up.values().min().copied()]
            .into_iter()
            .flatten()
            .min();
        let waiting = decision
            .status
            .spokes
            .iter()
            .any(|entry| entry.state == SpokeRolloutState::Pending);
        if let Some(next) = next.filter(|_| waiting && released.len() < limit) {
            idle += (limit - released.len()) as f64 * next.duration_since(now).as_secs_f64();
        }
        status = Some(decision.status);
        match next {
            Some(next) if !done => now = next.max(now),
            _ => {
                halted = status.as_ref().and_then(|s| s.halted.clone());
                break;
            }
        }
    }

    let status = status.unwrap_or_default();
    let count = |state: SpokeRolloutState| {
        status
            .spokes
            .iter()
            .filter(|entry| entry.state == state)
            .count()
    };
    let succeeded = count(SpokeRolloutState::Succeeded);
    let waves =
        (healthy + (0..spokes).filter(|i| broken(*i) && !offline(*i)).count()).div_ceil(limit);
    let ideal = waves as f64 * spec.min_success_seconds as f64;
    let with_upgrades = waves as f64 * (upgrade.as_secs_f64() + spec.min_success_seconds as f64);
    let took = now.duration_since(start).as_secs_f64();
    let healthy_took = healthy_done.map_or(f64::INFINITY, |done| {
        done.duration_since(start).as_secs_f64()
    });
    let figures = json!({
        "spokes": spokes,
        "offline": (0..spokes).filter(|i| offline(*i)).count(),
        "neverUp": (0..spokes).filter(|i| broken(*i) && !offline(*i)).count(),
        "upgradeSeconds": upgrade.as_secs(),
        "maxConcurrency": limit,
        "mostInProgress": most_in_progress,
        "succeeded": succeeded,
        "healthy": healthy,
        "failed": count(SpokeRolloutState::Failed),
        "skippedOffline": count(SpokeRolloutState::SkippedOffline),
        "halted": halted,
        "waves": waves,
        "idealSeconds": ideal,
        "healthyDoneSeconds": healthy_took,
        "healthyOverIdeal": healthy_took / ideal.max(f64::EPSILON),
        "idealWithUpgradesSeconds": with_upgrades,
        "healthyOverIdealWithUpgrades": healthy_took / with_upgrades.max(f64::EPSILON),
        "idlePlaceSecondsWhileSpokesWaited": idle,
        "rolloutEndSeconds": took,
        "decisions": passes,
        "decideMeanMillis": decide_time / passes.max(1) as f64 * 1_000.0,
        "decideMaxMillis": slowest_decision * 1_000.0,
    });
    println!(
        "the decision alone, on a simulated clock: {spokes} spokes, upgrades taking {upgrade_seconds} s"
    );
    println!("{:<34} value", "figure");
    for (key, value) in figures.as_object().into_iter().flatten() {
        println!("{key:<34} {value}");
    }
    let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
    println!(
        "every healthy spoke upgraded: {}; no halt: {}; at most 10% at once: {}; no place idle while a spoke waited: {}",
        verdict(succeeded == healthy),
        verdict(halted.is_none()),
        verdict(most_in_progress <= limit),
        verdict(idle <= 0.0),
    );
    println!(
        "healthy spokes done within 20% of waves x bake: {} ({:.2}x); of waves x (upgrade + bake): {} ({:.2}x)",
        verdict(healthy_took <= ideal * 1.2),
        healthy_took / ideal.max(f64::EPSILON),
        verdict(healthy_took <= with_upgrades * 1.2),
        healthy_took / with_upgrades.max(f64::EPSILON),
    );
    figures
}
