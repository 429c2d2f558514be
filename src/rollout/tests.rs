use super::*;
use crate::api::fleet::{GroupSelector, RolloutGroup, SpokeCount};

const OLD: &str = "old";
const NEW: &str = "new";

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("a valid instant")
}

/// `count` online spokes `s00`, `s01`, … running [`OLD`] and wanting [`NEW`].
fn fleet(count: usize) -> Vec<SpokeFacts> {
    (0..count)
        .map(|index| SpokeFacts {
            name: format!("s{index:02}"),
            labels: BTreeMap::new(),
            wanted: agent(NEW),
            running: Some(agent(OLD)),
            online: true,
            unavailable_addons: Vec::new(),
        })
        .collect()
}

/// Settings that differ only in the agent: its configuration hash `hash`.
fn agent(hash: &str) -> Settings {
    Settings {
        agent: hash.to_string(),
        addons: BTreeMap::new(),
        lease_duration_seconds: 60,
    }
}

fn progressive(max_concurrency: SpokeCount) -> RolloutSpec {
    RolloutSpec {
        strategy: RolloutStrategy::Progressive,
        max_concurrency: Some(max_concurrency),
        min_success_seconds: 10,
        progress_deadline_seconds: 100,
        ..RolloutSpec::default()
    }
}

fn states(decision: &Decision) -> Vec<(String, SpokeRolloutState)> {
    states_of(&decision.status)
}

fn states_of(status: &RolloutStatus) -> Vec<(String, SpokeRolloutState)> {
    status
        .spokes
        .iter()
        .map(|entry| (entry.name.clone(), entry.state))
        .collect()
}

fn in_state(decision: &Decision, state: SpokeRolloutState) -> Vec<String> {
    states(decision)
        .into_iter()
        .filter(|(_, s)| *s == state)
        .map(|(name, _)| name)
        .collect()
}

/// The spokes `names` now run what they want (the agent upgraded).
fn upgrade(spokes: &mut [SpokeFacts], names: &[String]) {
    for spoke in spokes.iter_mut().filter(|s| names.contains(&s.name)) {
        spoke.running = Some(spoke.wanted.clone());
    }
}

#[test]
fn all_releases_every_spoke_at_once() {
    let spec = RolloutSpec::default();
    let decision = decide(&spec, "t", &fleet(5), None, at(0));
    assert_eq!(in_state(&decision, SpokeRolloutState::InProgress).len(), 5);
}

#[test]
fn progressive_releases_max_concurrency_at_a_time_and_the_next_after_the_bake() {
    let spec = progressive(SpokeCount::Count(2));
    let mut spokes = fleet(5);
    let first = decide(&spec, "t", &spokes, None, at(0));
    assert_eq!(
        in_state(&first, SpokeRolloutState::InProgress),
        ["s00", "s01"]
    );
    assert_eq!(first.status.wave, Some(1));
    assert_eq!(first.wake_at, Some(at(100)), "the progress deadline");

    // Upgraded and Available: baking, nothing new released until the bake is over.
    upgrade(&mut spokes, &["s00".into(), "s01".into()]);
    let baking = decide(&spec, "t", &spokes, Some(&first.status), at(5));
    assert_eq!(
        in_state(&baking, SpokeRolloutState::InProgress),
        ["s00", "s01"]
    );
    assert_eq!(baking.wake_at, Some(at(15)), "the bake ends");

    let baked = decide(&spec, "t", &spokes, Some(&baking.status), at(15));
    assert_eq!(
        in_state(&baked, SpokeRolloutState::Succeeded),
        ["s00", "s01"]
    );
    assert_eq!(
        in_state(&baked, SpokeRolloutState::InProgress),
        ["s02", "s03"]
    );
    assert_eq!(baked.status.wave, Some(2));
}

#[test]
fn a_percentage_rounds_down_but_never_below_one() {
    let spokes = fleet(5);
    let ten_percent = decide(
        &progressive(SpokeCount::Percent(10)),
        "t",
        &spokes,
        None,
        at(0),
    );
    assert_eq!(
        in_state(&ten_percent, SpokeRolloutState::InProgress),
        ["s00"]
    );
    let half = decide(
        &progressive(SpokeCount::Percent(50)),
        "t",
        &spokes,
        None,
        at(0),
    );
    assert_eq!(in_state(&half, SpokeRolloutState::InProgress).len(), 2);
}

#[test]
fn a_bake_interrupted_by_unavailability_starts_over() {
    let spec = progressive(SpokeCount::Count(1));
    let mut spokes = fleet(2);
    let first = decide(&spec, "t", &spokes, None, at(0));
    upgrade(&mut spokes, &["s00".into()]);
    let baking = decide(&spec, "t", &spokes, Some(&first.status), at(5));
    spokes[0].online = false;
    let lost = decide(&spec, "t", &spokes, Some(&baking.status), at(10));
    spokes[0].online = true;
    let again = decide(&spec, "t", &spokes, Some(&lost.status), at(12));
    let still = decide(&spec, "t", &spokes, Some(&again.status), at(16));
    assert_eq!(in_state(&still, SpokeRolloutState::InProgress), ["s00"]);
    let done = decide(&spec, "t", &spokes, Some(&still.status), at(22));
    assert_eq!(in_state(&done, SpokeRolloutState::Succeeded), ["s00"]);
}

#[test]
fn a_spoke_not_done_by_its_progress_deadline_fails_and_frees_its_place() {
    let spec = RolloutSpec {
        max_failures: SpokeCount::Count(1),
        ..progressive(SpokeCount::Count(1))
    };
    let spokes = fleet(2);
    let first = decide(&spec, "t", &spokes, None, at(0));
    let late = decide(&spec, "t", &spokes, Some(&first.status), at(100));
    assert_eq!(in_state(&late, SpokeRolloutState::Failed), ["s00"]);
    let reason = late.status.spokes[0].reason.clone().unwrap_or_default();
    assert!(
        reason.contains("progressDeadlineSeconds (100 s)"),
        "{reason}"
    );
    assert_eq!(in_state(&late, SpokeRolloutState::InProgress), ["s01"]);
    assert_eq!(
        late.status.halted, None,
        "one failure is within maxFailures 1"
    );
}

#[test]
fn failures_past_max_failures_halt_the_rollout_once() {
    let spec = progressive(SpokeCount::Count(2));
    let spokes = fleet(4);
    let first = decide(&spec, "t", &spokes, None, at(0));
    let halted = decide(&spec, "t", &spokes, Some(&first.status), at(100));
    assert!(halted.halted_now);
    let reason = halted.status.halted.clone().unwrap_or_default();
    assert!(reason.contains("s00 (not on the new agent"), "{reason}");
    assert!(reason.contains("maxFailures 0"), "{reason}");
    assert_eq!(
        in_state(&halted, SpokeRolloutState::Pending),
        ["s02", "s03"]
    );
    let later = decide(&spec, "t", &spokes, Some(&halted.status), at(200));
    assert!(!later.halted_now, "the halt is news once");
    assert!(later.status.halted.is_some());
    assert_eq!(in_state(&later, SpokeRolloutState::Pending), ["s02", "s03"]);
}

#[test]
fn pausing_releases_nothing_more_and_resuming_accepts_the_failures_that_halted_it() {
    let spec = progressive(SpokeCount::Count(1));
    let spokes = fleet(3);
    let first = decide(&spec, "t", &spokes, None, at(0));
    let halted = decide(&spec, "t", &spokes, Some(&first.status), at(100));
    assert!(halted.status.halted.is_some());

    let paused = RolloutSpec {
        paused: true,
        ..spec.clone()
    };
    let acknowledged = decide(&paused, "t", &spokes, Some(&halted.status), at(101));
    assert_eq!(acknowledged.status.halted, None);
    assert_eq!(acknowledged.status.accepted_failures, 1);
    assert_eq!(
        in_state(&acknowledged, SpokeRolloutState::Pending),
        ["s01", "s02"]
    );

    let resumed = decide(&spec, "t", &spokes, Some(&acknowledged.status), at(102));
    assert_eq!(resumed.status.halted, None);
    assert_eq!(in_state(&resumed, SpokeRolloutState::InProgress), ["s01"]);
}

#[test]
fn a_paused_rollout_lets_released_spokes_finish() {
    let spec = RolloutSpec {
        paused: true,
        ..progressive(SpokeCount::Count(1))
    };
    let mut spokes = fleet(2);
    let first = decide(&spec, "t", &spokes, None, at(0));
    assert!(in_state(&first, SpokeRolloutState::InProgress).is_empty());

    let running = decide(
        &progressive(SpokeCount::Count(1)),
        "t",
        &spokes,
        None,
        at(0),
    );
    upgrade(&mut spokes, &["s00".into()]);
    let paused = decide(&spec, "t", &spokes, Some(&running.status), at(20));
    let done = decide(&spec, "t", &spokes, Some(&paused.status), at(40));
    assert_eq!(in_state(&done, SpokeRolloutState::Succeeded), ["s00"]);
    assert_eq!(in_state(&done, SpokeRolloutState::Pending), ["s01"]);
}

#[test]
fn offline_skip_passes_a_spoke_over_and_releases_it_at_the_end_once_back() {
    let spec = progressive(SpokeCount::Count(1));
    let mut spokes = fleet(2);
    spokes[0].online = false;
    let first = decide(&spec, "t", &spokes, None, at(0));
    assert_eq!(in_state(&first, SpokeRolloutState::SkippedOffline), ["s00"]);
    assert_eq!(in_state(&first, SpokeRolloutState::InProgress), ["s01"]);

    upgrade(&mut spokes, &["s01".into()]);
    let baking = decide(&spec, "t", &spokes, Some(&first.status), at(1));
    let others_done = decide(&spec, "t", &spokes, Some(&baking.status), at(11));
    assert_eq!(
        in_state(&others_done, SpokeRolloutState::Succeeded),
        ["s01"]
    );
    assert_eq!(
        in_state(&others_done, SpokeRolloutState::SkippedOffline),
        ["s00"],
        "still offline: it stays passed over"
    );
    assert_eq!(others_done.status.wave, None);

    spokes[0].online = true;
    let back = decide(&spec, "t", &spokes, Some(&others_done.status), at(30));
    assert_eq!(in_state(&back, SpokeRolloutState::InProgress), ["s00"]);
}

#[test]
fn offline_wait_holds_the_place_only_until_the_progress_deadline() {
    let spec = RolloutSpec {
        offline: OfflinePolicy::Wait,
        max_failures: SpokeCount::Count(1),
        ..progressive(SpokeCount::Count(1))
    };
    let mut spokes = fleet(2);
    spokes[0].online = false;
    let first = decide(&spec, "t", &spokes, None, at(0));
    assert_eq!(in_state(&first, SpokeRolloutState::InProgress), ["s00"]);
    let waiting = decide(&spec, "t", &spokes, Some(&first.status), at(50));
    assert_eq!(in_state(&waiting, SpokeRolloutState::Pending), ["s01"]);
    let deadline = decide(&spec, "t", &spokes, Some(&waiting.status), at(100));
    assert_eq!(in_state(&deadline, SpokeRolloutState::Failed), ["s00"]);
    let reason = deadline.status.spokes[0].reason.clone().unwrap_or_default();
    assert!(reason.starts_with("not Available"), "{reason}");
    assert_eq!(in_state(&deadline, SpokeRolloutState::InProgress), ["s01"]);
}

#[test]
fn a_max_failures_percentage_counts_each_group_of_groups_apart() {
    // A canary of 2 spokes and 8 others, at most half of a group failing.
    let spec = RolloutSpec {
        strategy: RolloutStrategy::Groups,
        groups: vec![RolloutGroup {
            name: "canary".into(),
            spokes: vec!["s00".into(), "s01".into()],
            ..RolloutGroup::default()
        }],
        max_failures: SpokeCount::Percent(50),
        progress_deadline_seconds: 100,
        ..RolloutSpec::default()
    };
    let spokes = fleet(10);
    let canary = decide(&spec, "t", &spokes, None, at(0));
    assert_eq!(
        in_state(&canary, SpokeRolloutState::InProgress),
        ["s00", "s01"]
    );
    // Both canaries fail: 2 of 10 is within 50% of the fleet, but not of the canary group.
    let halted = decide(&spec, "t", &spokes, Some(&canary.status), at(100));
    assert_eq!(in_state(&halted, SpokeRolloutState::Failed), ["s00", "s01"]);
    let reason = halted.status.halted.clone().unwrap_or_default();
    assert!(
        reason.starts_with(
            "2 of 2 spoke(s) of group canary failed, more than maxFailures 50% allows (1): s00"
        ),
        "{reason}"
    );
    assert!(in_state(&halted, SpokeRolloutState::InProgress).is_empty());

    // Accepted (paused, then resumed): the rest roll out, judged by their own 50%.
    let paused = RolloutSpec {
        paused: true,
        ..spec.clone()
    };
    let accepted = decide(&paused, "t", &spokes, Some(&halted.status), at(101));
    let resumed = decide(&spec, "t", &spokes, Some(&accepted.status), at(102));
    assert_eq!(resumed.status.halted, None);
    assert_eq!(in_state(&resumed, SpokeRolloutState::InProgress).len(), 8);
    let rest_failed = decide(&spec, "t", &spokes, Some(&resumed.status), at(202));
    let reason = rest_failed.status.halted.clone().unwrap_or_default();
    assert!(
        reason.starts_with("8 of 8 spoke(s) of group (spokes no group selects) failed"),
        "{reason}"
    );

    // A count stays the whole rollout's.
    let counted = RolloutSpec {
        max_failures: SpokeCount::Count(2),
        ..spec
    };
    let first = decide(&counted, "t", &spokes, None, at(0));
    let within = decide(&counted, "t", &spokes, Some(&first.status), at(100));
    assert_eq!(within.status.halted, None, "2 failures, 2 allowed");
}

#[test]
fn groups_roll_out_in_order_each_finished_before_the_next() {
    let spec = RolloutSpec {
        strategy: RolloutStrategy::Groups,
        groups: vec![
            RolloutGroup {
                name: "canary".into(),
                spokes: vec!["s03".into()],
                ..RolloutGroup::default()
            },
            RolloutGroup {
                name: "edge".into(),
                selector: Some(GroupSelector {
                    match_labels: [("tier".to_string(), "edge".to_string())].into(),
                }),
                max_concurrency: Some(SpokeCount::Count(1)),
                ..RolloutGroup::default()
            },
        ],
        min_success_seconds: 0,
        ..RolloutSpec::default()
    };
    let mut spokes = fleet(5);
    for spoke in &mut spokes[..2] {
        spoke.labels.insert("tier".into(), "edge".into());
    }
    let order = ordered(&spec, spokes.iter());
    let names: Vec<(Option<String>, Vec<String>)> = order
        .iter()
        .map(|stage| (stage.group.clone(), stage.spokes.clone()))
        .collect();
    assert_eq!(
        names,
        [
            (Some("canary".into()), vec!["s03".to_string()]),
            (Some("edge".into()), vec!["s00".into(), "s01".into()]),
            (None, vec!["s02".into(), "s04".into()]),
        ]
    );

    let canary = decide(&spec, "t", &spokes, None, at(0));
    assert_eq!(in_state(&canary, SpokeRolloutState::InProgress), ["s03"]);
    assert_eq!(canary.status.wave, Some(1));
    upgrade(&mut spokes, &["s03".into()]);
    let edge = decide(&spec, "t", &spokes, Some(&canary.status), at(1));
    assert_eq!(in_state(&edge, SpokeRolloutState::InProgress), ["s00"]);
    assert_eq!(edge.status.wave, Some(2));
    upgrade(&mut spokes, &["s00".into()]);
    let edge2 = decide(&spec, "t", &spokes, Some(&edge.status), at(2));
    assert_eq!(in_state(&edge2, SpokeRolloutState::InProgress), ["s01"]);
    assert_eq!(edge2.status.wave, Some(3));
    upgrade(&mut spokes, &["s01".into()]);
    let rest = decide(&spec, "t", &spokes, Some(&edge2.status), at(3));
    assert_eq!(
        in_state(&rest, SpokeRolloutState::InProgress),
        ["s02", "s04"]
    );
}

#[test]
fn a_new_target_supersedes_without_flapping_spokes_already_moved() {
    let spec = progressive(SpokeCount::Count(1));
    let mut spokes = fleet(3);
    let first = decide(&spec, "v2", &spokes, None, at(0));
    upgrade(&mut spokes, &["s00".into()]);
    let baking = decide(&spec, "v2", &spokes, Some(&first.status), at(5));
    let moved = decide(&spec, "v2", &spokes, Some(&baking.status), at(15));
    assert_eq!(in_state(&moved, SpokeRolloutState::Succeeded), ["s00"]);
    assert_eq!(in_state(&moved, SpokeRolloutState::InProgress), ["s01"]);

    // A commit asks for v3: s00 runs v2, s01 may run v2 or not yet, s02 runs v1. Nobody is sent
    // back; each is pending for v3 until its turn.
    for spoke in &mut spokes {
        spoke.wanted = agent("v3");
    }
    let superseded = decide(&spec, "v3", &spokes, Some(&moved.status), at(21));
    assert_eq!(superseded.status.target, "v3");
    assert!(
        superseded
            .status
            .spokes
            .iter()
            .all(|entry| entry.target == agent("v3").digest()),
    );
    assert_eq!(
        in_state(&superseded, SpokeRolloutState::InProgress),
        ["s00"]
    );
    assert_eq!(
        in_state(&superseded, SpokeRolloutState::Pending),
        ["s01", "s02"]
    );

    // A commit back to what a spoke runs: that spoke is done without moving.
    for spoke in &mut spokes {
        spoke.wanted = agent(NEW);
    }
    let back = decide(&spec, NEW, &spokes, Some(&superseded.status), at(22));
    assert_eq!(in_state(&back, SpokeRolloutState::Succeeded), ["s00"]);
}

#[test]
fn a_restart_resumes_from_the_status_and_decides_the_same() {
    let spec = progressive(SpokeCount::Count(2));
    let mut spokes = fleet(4);
    let first = decide(&spec, "t", &spokes, None, at(0));
    upgrade(&mut spokes, &["s00".into()]);
    let second = decide(&spec, "t", &spokes, Some(&first.status), at(5));
    // The status round-trips through the API server as JSON; a new process reads it back.
    let stored: RolloutStatus =
        serde_json::from_value(serde_json::to_value(&second.status).expect("serialises"))
            .expect("deserialises");
    let resumed = decide(&spec, "t", &spokes, Some(&stored), at(5));
    assert_eq!(resumed.status, second.status);
    assert_eq!(resumed.wake_at, second.wake_at);
}

/// `spokes` as their hub sees them before its reconciler has written their `status.applied`.
fn unreported(spokes: &[SpokeFacts]) -> Vec<SpokeFacts> {
    spokes
        .iter()
        .map(|spoke| SpokeFacts {
            running: None,
            ..spoke.clone()
        })
        .collect()
}

/// A one-at-a-time rollout of `s00`, `s01`, `s02` has `s00` done and `s01` released.
fn second_of_three_released(decision: &Decision) {
    assert_eq!(
        states(decision),
        [
            ("s00".to_string(), SpokeRolloutState::Succeeded),
            ("s01".to_string(), SpokeRolloutState::InProgress),
            ("s02".to_string(), SpokeRolloutState::Pending),
        ]
    );
}

#[test]
fn a_spoke_whose_settings_are_not_reported_yet_keeps_its_recorded_state_until_they_are() {
    let spec = progressive(SpokeCount::Count(1));
    let mut spokes = fleet(3);
    let first = decide(&spec, "t", &spokes, None, at(0));
    upgrade(&mut spokes, &["s00".into()]);
    let baking = decide(&spec, "t", &spokes, Some(&first.status), at(5));
    assert_eq!(baking.wake_at, Some(at(15)), "s00 bakes");

    // fleetform upgraded from a version without Spoke status.applied: until the reconciler
    // writes it, no spoke's settings are known. The rollout stands where it stood: nothing
    // leaves it, nothing starts afresh, nothing new is released though s00's bake is over.
    let unreported = unreported(&spokes);
    let waiting = decide(&spec, "t", &unreported, Some(&baking.status), at(20));
    assert_eq!(waiting.status, baking.status);
    assert_eq!(waiting.wake_at, None, "nothing to judge before the reports");

    // s01 reports first: s00, still unreported and in progress, keeps its place in the wave.
    let mut partly = unreported.clone();
    partly[1] = spokes[1].clone();
    let partial = decide(&spec, "t", &partly, Some(&waiting.status), at(25));
    assert_eq!(states(&partial), states(&baking));

    // Reported again: s00's bake, started before, is over; s01's turn comes.
    let resumed = decide(&spec, "t", &spokes, Some(&partial.status), at(30));
    second_of_three_released(&resumed);
}

#[test]
fn a_rollout_recorded_when_targets_were_the_agent_alone_carries_on_after_the_upgrade() {
    let spec = progressive(SpokeCount::Count(1));
    let mut hub = embedded_hub();
    hub.spec.rollout = spec.clone();
    let mut spokes = fleet(3);
    upgrade(&mut spokes, &["s00".into()]);
    // What that fleetform recorded: s00 released to the agent NEW and baking since 5 s.
    let legacy = |name: &str, state: SpokeRolloutState| SpokeRollout {
        name: name.to_string(),
        target: NEW.to_string(),
        agent: String::new(),
        state,
        released_at: (state == SpokeRolloutState::InProgress).then(|| stamp(at(0))),
        updated_at: (state == SpokeRolloutState::InProgress).then(|| stamp(at(5))),
        reason: None,
    };
    let recorded = RolloutStatus {
        target: format!("0.1.0/{NEW}"),
        wave: Some(1),
        spokes: vec![
            legacy("s00", SpokeRolloutState::InProgress),
            legacy("s01", SpokeRolloutState::Pending),
            legacy("s02", SpokeRolloutState::Pending),
        ],
        ..RolloutStatus::default()
    };
    let unreported = unreported(&spokes);
    let waiting = decide(&spec, "t", &unreported, Some(&recorded), at(10));
    assert_eq!(states(&waiting), states_of(&recorded));
    keeping(&mut hub, &waiting.status);
    assert!(
        released(&hub, "s00", &spokes[0].wanted.digest()),
        "s00 stays released meanwhile"
    );
    assert!(agent_released(&hub, "s00", NEW));
    assert!(!released(&hub, "s01", &spokes[1].wanted.digest()));

    // Reported: s00's bake, started under that fleetform, is over; s01's turn comes.
    let resumed = decide(&spec, "t", &spokes, Some(&waiting.status), at(20));
    second_of_three_released(&resumed);
}

#[test]
fn joining_spokes_are_not_part_of_a_rollout() {
    let spec = progressive(SpokeCount::Count(1));
    let mut spokes = fleet(2);
    spokes[0].running = None;
    let decision = decide(&spec, "t", &spokes, None, at(0));
    assert_eq!(
        states(&decision),
        [("s01".to_string(), SpokeRolloutState::InProgress)]
    );
}

#[test]
fn the_gate_releases_only_for_the_target_a_spoke_was_released_for() {
    let mut hub = embedded_hub();
    let new = agent(NEW).digest();
    assert!(released(&hub, "s00", &new), "strategy All gates nothing");
    hub.spec.rollout = progressive(SpokeCount::Count(1));
    assert!(!released(&hub, "s00", &new), "no rollout status yet");
    let decision = decide(&hub.spec.rollout, "t", &fleet(2), None, at(0));
    hub.status = Some(crate::api::fleet::HubStatus {
        rollout: Some(decision.status),
        ..Default::default()
    });
    assert!(released(&hub, "s00", &new));
    assert!(agent_released(&hub, "s00", NEW), "the agent's own gate");
    assert!(!released(&hub, "s01", &new), "pending");
    assert!(
        !agent_released(&hub, "s01", NEW),
        "pending, for the agent too"
    );
    assert!(
        !released(&hub, "s00", "newer"),
        "released for another target"
    );
}

#[test]
fn plan_waves_show_the_order_and_the_offline_spokes() {
    let spec = progressive(SpokeCount::Count(2));
    let mut spokes = fleet(6);
    spokes[1].online = false;
    spokes[5].running = Some(agent(NEW));
    let waves = waves(&spec, &spokes);
    let shown: Vec<(Vec<String>, Vec<String>)> = waves
        .into_iter()
        .map(|wave| (wave.spokes, wave.offline))
        .collect();
    assert_eq!(
        shown,
        [
            (
                vec!["s00".to_string(), "s02".into()],
                vec!["s01".to_string()]
            ),
            (vec!["s03".into(), "s04".into()], vec![]),
        ]
    );
    let waiting = waves_of(OfflinePolicy::Wait, &spokes);
    assert_eq!(waiting[0], vec!["s00".to_string(), "s01".into()]);
}

fn waves_of(offline: OfflinePolicy, spokes: &[SpokeFacts]) -> Vec<Vec<String>> {
    let spec = RolloutSpec {
        offline,
        ..progressive(SpokeCount::Count(2))
    };
    waves(&spec, spokes)
        .into_iter()
        .map(|wave| wave.spokes)
        .collect()
}

#[test]
fn apply_is_told_what_holds_a_spoke_back() {
    let mut hub = embedded_hub();
    hub.spec.rollout = progressive(SpokeCount::Count(1));
    let mut spokes = fleet(3);
    spokes[2].online = false;
    let first = decide(&hub.spec.rollout, "t", &spokes, None, at(0));
    let failed = decide(
        &hub.spec.rollout,
        "t",
        &spokes,
        Some(&first.status),
        at(100),
    );
    hub.status = Some(crate::api::fleet::HubStatus {
        rollout: Some(first.status),
        ..Default::default()
    });
    assert_eq!(holding(&hub, "s00", &BTreeMap::new()), None, "released");
    assert_eq!(
        holding(&hub, "s01", &BTreeMap::new()).as_deref(),
        Some("its turn in the hub's rollout has not come (wave 1 runs)")
    );
    hub.status = Some(crate::api::fleet::HubStatus {
        rollout: Some(failed.status),
        ..Default::default()
    });
    let why = holding(&hub, "s00", &BTreeMap::new()).unwrap_or_default();
    assert!(
        why.starts_with("failed in the hub's rollout: not on the new agent"),
        "{why}"
    );
    assert_eq!(
        holding(&hub, "s01", &BTreeMap::new()).as_deref(),
        Some("the hub's rollout is halted (see the Hub's RolloutHalted condition)")
    );
}

#[test]
fn apply_is_told_which_addons_own_rollout_holds_a_spoke_back_and_with_what() {
    let mut hub = embedded_hub();
    let spec = progressive(SpokeCount::Count(1));
    let mut spokes: Vec<SpokeFacts> = enabling_metrics(3)
        .iter()
        .map(|spoke| spoke.of_addon("metrics"))
        .collect();
    spokes[2].online = false;
    let first = decide(&spec, "m", &spokes, None, at(0));
    let keep = |hub: &mut Hub, status: &RolloutStatus| {
        hub.status = Some(crate::api::fleet::HubStatus {
            addon_rollouts: vec![crate::api::fleet::AddonRollout {
                addon: "metrics".into(),
                rollout: status.clone(),
            }],
            ..Default::default()
        });
    };
    keep(&mut hub, &first.status);
    let own: BTreeMap<&str, &RolloutSpec> = [("metrics", &spec)].into();
    assert_eq!(holding(&hub, "s00", &own), None, "released");
    assert_eq!(
        holding(&hub, "s01", &own).as_deref(),
        Some("its turn in the rollout of addon metrics has not come (wave 1 runs)")
    );
    let paused = RolloutSpec {
        paused: true,
        ..spec.clone()
    };
    assert_eq!(
        holding(&hub, "s01", &[("metrics", &paused)].into()).as_deref(),
        Some("the rollout of addon metrics is paused")
    );

    // s00 never gets it within its deadline: the addon's rollout halts, s02 was passed over.
    let failed = decide(&spec, "m", &spokes, Some(&first.status), at(100));
    keep(&mut hub, &failed.status);
    let why = holding(&hub, "s00", &own).unwrap_or_default();
    assert!(
        why.starts_with(
            "failed in the rollout of addon metrics: its addons or lease duration not changed"
        ),
        "{why}"
    );
    assert_eq!(
        holding(&hub, "s01", &own).as_deref(),
        Some("the rollout of addon metrics is halted (see the Hub's RolloutHalted condition)")
    );

    // The hub's own rollout holds it too: both say so, the hub's first.
    hub.spec.rollout = progressive(SpokeCount::Count(1));
    let agents = decide(&hub.spec.rollout, "t", &fleet(3), None, at(0));
    if let Some(status) = hub.status.as_mut() {
        status.rollout = Some(agents.status);
    }
    assert_eq!(
        holding(&hub, "s01", &own).as_deref(),
        Some(
            "its turn in the hub's rollout has not come (wave 1 runs); the rollout of addon metrics is halted (see the Hub's RolloutHalted condition)"
        )
    );
}

#[test]
fn a_decision_stamps_whole_seconds_so_the_stored_status_decides_the_same() {
    let spec = progressive(SpokeCount::Count(1));
    let at_millis = |millis: i64| at(0) + SignedDuration::from_millis(millis);
    // What the Hub's status keeps of a decision: Kubernetes times hold whole seconds.
    let stored = |status: &RolloutStatus| -> RolloutStatus {
        serde_json::from_value(serde_json::to_value(status).expect("serialises"))
            .expect("deserialises")
    };
    let mut spokes = fleet(2);
    let released = decide(&spec, "t", &spokes, None, at_millis(500));
    assert_eq!(stored(&released.status), released.status);
    upgrade(&mut spokes, &["s00".into()]);
    let baking = decide(
        &spec,
        "t",
        &spokes,
        Some(&released.status),
        at_millis(5_700),
    );
    assert_eq!(stored(&baking.status), baking.status);
    let resumed = decide(
        &spec,
        "t",
        &spokes,
        Some(&stored(&baking.status)),
        at_millis(5_800),
    );
    assert_eq!(
        resumed.wake_at, baking.wake_at,
        "the bake ends when the status says"
    );
    assert_eq!(baking.wake_at, Some(at(15)));
}

/// A Hub `hub` on an embedded cluster, with the default rollout (All).
fn embedded_hub() -> Hub {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "fleetform.io/v1alpha1",
        "kind": "Hub",
        "metadata": {"name": "hub"},
        "spec": {"kubeconfig": {"embedded": {}}},
    }))
    .expect("a Hub")
}

/// `settings` with the addon `name` enabled in its namespace `name-agent`.
fn with_addon(settings: Settings, name: &str) -> Settings {
    let mut settings = settings;
    settings
        .addons
        .insert(name.to_string(), format!("{name}-agent"));
    settings
}

/// `count` online spokes that run the agent [`NEW`] and are to have the addon `metrics` too.
fn enabling_metrics(count: usize) -> Vec<SpokeFacts> {
    let mut spokes = fleet(count);
    for spoke in &mut spokes {
        spoke.running = Some(agent(NEW));
        spoke.wanted = with_addon(agent(NEW), "metrics");
    }
    spokes
}

/// `hub` keeping `status` as its rollout.
fn keeping(hub: &mut Hub, status: &RolloutStatus) {
    hub.status = Some(crate::api::fleet::HubStatus {
        rollout: Some(status.clone()),
        ..Default::default()
    });
}

#[test]
fn an_addon_enabled_fleet_wide_is_held_for_spokes_not_released_and_done_once_available() {
    let mut hub = embedded_hub();
    hub.spec.rollout = progressive(SpokeCount::Count(1));
    let spec = hub.spec.rollout.clone();
    let mut spokes = enabling_metrics(3);
    let target = spokes[0].wanted.digest();
    let first = decide(&spec, "t", &spokes, None, at(0));
    assert_eq!(in_state(&first, SpokeRolloutState::InProgress), ["s00"]);
    keeping(&mut hub, &first.status);
    assert!(released(&hub, "s00", &target), "its turn");
    assert!(
        !released(&hub, "s01", &target),
        "held: it keeps the addons it has"
    );
    assert!(
        !agent_released(&hub, "s01", NEW),
        "a pending spoke's agent stays too"
    );

    // s00 has the addon, not Available yet: no bake, only its progress deadline wakes.
    spokes[0].running = Some(spokes[0].wanted.clone());
    spokes[0].unavailable_addons = vec!["metrics".into()];
    let enabled = decide(&spec, "t", &spokes, Some(&first.status), at(5));
    assert_eq!(in_state(&enabled, SpokeRolloutState::InProgress), ["s00"]);
    assert_eq!(enabled.wake_at, Some(at(100)));

    // Available: it bakes, then the next spoke gets its turn.
    spokes[0].unavailable_addons.clear();
    let baking = decide(&spec, "t", &spokes, Some(&enabled.status), at(6));
    assert_eq!(baking.wake_at, Some(at(16)), "the bake ends");
    let next = decide(&spec, "t", &spokes, Some(&baking.status), at(16));
    assert_eq!(in_state(&next, SpokeRolloutState::Succeeded), ["s00"]);
    assert_eq!(in_state(&next, SpokeRolloutState::InProgress), ["s01"]);

    // s01's addon never comes up: it fails at its deadline, saying which addon.
    spokes[1].running = Some(spokes[1].wanted.clone());
    spokes[1].unavailable_addons = vec!["metrics".into()];
    let failed = decide(&spec, "t", &spokes, Some(&next.status), at(116));
    let entry = &failed.status.spokes[1];
    assert_eq!(entry.state, SpokeRolloutState::Failed);
    assert_eq!(
        entry.reason.as_deref(),
        Some("addons not Available: metrics within progressDeadlineSeconds (100 s)")
    );
}

#[test]
fn a_lease_duration_change_rolls_out_and_a_spoke_that_has_it_already_is_done_at_once() {
    let spec = progressive(SpokeCount::Count(1));
    let shorter = Settings {
        lease_duration_seconds: 30,
        ..agent(NEW)
    };
    let mut spokes = fleet(3);
    for spoke in &mut spokes {
        spoke.running = Some(agent(NEW));
        spoke.wanted = shorter.clone();
    }
    spokes[2].running = Some(shorter.clone());
    let first = decide(&spec, "t", &spokes, None, at(0));
    assert_eq!(in_state(&first, SpokeRolloutState::InProgress), ["s00"]);
    assert_eq!(in_state(&first, SpokeRolloutState::Pending), ["s01"]);
    assert_eq!(in_state(&first, SpokeRolloutState::Succeeded), ["s02"]);

    spokes[0].running = Some(shorter.clone());
    let baking = decide(&spec, "t", &spokes, Some(&first.status), at(1));
    let next = decide(&spec, "t", &spokes, Some(&baking.status), at(11));
    assert_eq!(
        in_state(&next, SpokeRolloutState::Succeeded),
        ["s00", "s02"]
    );
    assert_eq!(in_state(&next, SpokeRolloutState::InProgress), ["s01"]);
    // Its failure would say what it lacks.
    let late = decide(&spec, "t", &spokes, Some(&next.status), at(111));
    assert_eq!(
        late.status.spokes[1].reason.as_deref(),
        Some("its addons or lease duration not changed within progressDeadlineSeconds (100 s)")
    );
}

#[test]
fn a_commit_superseding_an_addon_rollout_leaves_spokes_already_on_the_new_target_alone() {
    let spec = progressive(SpokeCount::Count(1));
    let mut spokes = enabling_metrics(3);
    let first = decide(&spec, "t1", &spokes, None, at(0));
    spokes[0].running = Some(spokes[0].wanted.clone());
    let baking = decide(&spec, "t1", &spokes, Some(&first.status), at(1));
    let moved = decide(&spec, "t1", &spokes, Some(&baking.status), at(11));
    assert_eq!(in_state(&moved, SpokeRolloutState::Succeeded), ["s00"]);
    assert_eq!(in_state(&moved, SpokeRolloutState::InProgress), ["s01"]);

    // A commit disables metrics again: s01 and s02 never got it and are done where they are;
    // s00, which has it, is taken back in its turn, not at once.
    for spoke in &mut spokes {
        spoke.wanted = agent(NEW);
    }
    let back = decide(&spec, "t2", &spokes, Some(&moved.status), at(12));
    assert_eq!(back.status.target, "t2");
    assert_eq!(
        in_state(&back, SpokeRolloutState::Succeeded),
        ["s01", "s02"]
    );
    assert_eq!(in_state(&back, SpokeRolloutState::InProgress), ["s00"]);
    assert!(
        back.status
            .spokes
            .iter()
            .all(|entry| entry.target == agent(NEW).digest() && entry.agent == NEW)
    );
}

#[test]
fn a_restart_resumes_an_addon_rollout_from_the_hubs_and_spokes_statuses() {
    let spec = progressive(SpokeCount::Count(1));
    let mut spokes = enabling_metrics(2);
    let first = decide(&spec, "t", &spokes, None, at(0));
    // What a new process reads: the Hub's status, and what each Spoke's status says it has.
    let status: SpokeStatus = serde_json::from_value(serde_json::json!({
        "agentConfigHash": NEW,
        "applied": {
            "addons": [{"name": "metrics", "installNamespace": "metrics-agent"}],
            "leaseDurationSeconds": 60,
        },
    }))
    .expect("a Spoke's status");
    spokes[0].running = Settings::running(&status);
    assert_eq!(spokes[0].running.as_ref(), Some(&spokes[0].wanted));
    let stored: RolloutStatus =
        serde_json::from_value(serde_json::to_value(&first.status).expect("serialises"))
            .expect("deserialises");
    let before = decide(&spec, "t", &spokes, Some(&first.status), at(5));
    let resumed = decide(&spec, "t", &spokes, Some(&stored), at(5));
    assert_eq!(resumed.status, before.status);
    assert_eq!(
        in_state(&resumed, SpokeRolloutState::InProgress),
        ["s00"],
        "baking, not released again"
    );
    assert_eq!(resumed.wake_at, Some(at(15)));
    // A spoke whose reconciler has not read its addons yet is still joining.
    assert_eq!(
        Settings::running(&SpokeStatus {
            agent_config_hash: Some(NEW.into()),
            ..Default::default()
        }),
        None
    );
}

#[test]
fn a_commit_that_changes_what_any_spoke_is_to_have_is_a_new_rollout() {
    let hub = embedded_hub();
    let mut spokes = fleet(2);
    let before = target(&hub, &spokes);
    assert_eq!(before, target(&hub, &spokes), "stable");
    spokes[1].wanted = with_addon(agent(NEW), "metrics");
    assert_ne!(before, target(&hub, &spokes));
}

#[test]
fn an_addon_with_a_rollout_of_its_own_leaves_the_hubs_and_moves_by_its_own() {
    let own: BTreeSet<String> = ["metrics".to_string()].into();
    let mut spokes = enabling_metrics(3);
    // The hub's rollout no longer sees the addon: nothing for it to do.
    let under_hub: Vec<SpokeFacts> = spokes.iter().map(|spoke| spoke.under_hub(&own)).collect();
    let hub_rollout = decide(
        &progressive(SpokeCount::Count(1)),
        "t",
        &under_hub,
        None,
        at(0),
    );
    assert_eq!(
        in_state(&hub_rollout, SpokeRolloutState::Succeeded).len(),
        3
    );

    // The addon's own rollout, two at a time.
    let mut hub = embedded_hub();
    let spec = progressive(SpokeCount::Count(2));
    let facts = |spokes: &[SpokeFacts]| -> Vec<SpokeFacts> {
        spokes
            .iter()
            .map(|spoke| spoke.of_addon("metrics"))
            .collect()
    };
    let first = decide(&spec, "m", &facts(&spokes), None, at(0));
    assert_eq!(
        in_state(&first, SpokeRolloutState::InProgress),
        ["s00", "s01"]
    );
    hub.status = Some(crate::api::fleet::HubStatus {
        addon_rollouts: vec![crate::api::fleet::AddonRollout {
            addon: "metrics".into(),
            rollout: first.status.clone(),
        }],
        ..Default::default()
    });
    let target = Settings::addon("metrics", spokes[0].wanted.addons.get("metrics")).digest();
    assert!(addon_released(&hub, "metrics", &spec, "s01", &target));
    assert!(
        !addon_released(&hub, "metrics", &spec, "s02", &target),
        "its turn has not come"
    );
    assert!(
        addon_released(&hub, "metrics", &RolloutSpec::default(), "s02", &target),
        "an addon rolled out with strategy All is everywhere at once"
    );
    assert!(
        !addon_released(&hub, "logging", &spec, "s00", &target),
        "another addon's rollout releases nothing of this one"
    );
    // Its spokes done, the last one goes.
    for spoke in &mut spokes[..2] {
        spoke.running = Some(spoke.wanted.clone());
    }
    let baking = decide(&spec, "m", &facts(&spokes), Some(&first.status), at(1));
    let last = decide(&spec, "m", &facts(&spokes), Some(&baking.status), at(11));
    assert_eq!(in_state(&last, SpokeRolloutState::InProgress), ["s02"]);
    assert_eq!(
        addon_target("metrics", &facts(&spokes)),
        addon_target("metrics", &facts(&spokes))
    );
    assert_ne!(
        addon_target("metrics", &facts(&spokes)),
        addon_target("logging", &facts(&spokes)),
        "each addon's rollout has its own target"
    );
}

#[test]
fn the_gate_holds_a_spokes_addons_and_lease_until_its_rollout_releases_it() {
    let mut hub = embedded_hub();
    hub.spec.rollout = progressive(SpokeCount::Count(1));
    let namespace = |addon: &str| format!("{addon}-agent");
    let wanted = EffectiveSpoke {
        lease_duration_seconds: 30,
        cluster_claims_max: 20,
        agent: crate::plan::desired::agent_config(None, &hub),
        addons: [
            ("metrics", namespace("metrics")),
            ("logging", namespace("logging")),
        ]
        .map(|(addon, namespace)| (addon.to_string(), namespace))
        .into(),
        labels: BTreeMap::new(),
    };
    let has: BTreeMap<String, String> = [("logging".to_string(), namespace("logging"))].into();
    let none = BTreeMap::new();

    // Not released (no rollout yet): it keeps the addons and lease it has.
    let held = gate(&hub, "s00", &none, &wanted, &has, Some(60));
    assert_eq!(
        held,
        Gate {
            addons: has.clone(),
            lease_duration_seconds: 60,
            released: false,
        }
    );

    // Released for its target: what git wants.
    let mut spokes = fleet(1);
    spokes[0].wanted = Settings::wanted(&wanted);
    let decision = decide(&hub.spec.rollout, "t", &spokes, None, at(0));
    keeping(&mut hub, &decision.status);
    let released = gate(&hub, "s00", &none, &wanted, &has, Some(60));
    assert_eq!(released.addons, wanted.addons);
    assert_eq!(released.lease_duration_seconds, 30);
    assert!(released.released);

    // metrics rolls out by itself: the hub's release does not carry it, its own rollout does.
    hub.spec.rollout = RolloutSpec::default();
    let own_rollout = progressive(SpokeCount::Count(1));
    let own: BTreeMap<&str, &RolloutSpec> = [("metrics", &own_rollout)].into();
    let apart = gate(&hub, "s00", &own, &wanted, &has, Some(60));
    assert_eq!(apart.addons, has, "metrics waits for its own rollout");
    assert_eq!(apart.lease_duration_seconds, 30, "the hub's rollout is All");
    let everywhere = RolloutSpec::default();
    let own: BTreeMap<&str, &RolloutSpec> = [("metrics", &everywhere)].into();
    assert_eq!(
        gate(&hub, "s00", &own, &wanted, &has, Some(60)).addons,
        wanted.addons,
        "an addon rolled out with strategy All is enabled at once"
    );
}

#[test]
fn a_hub_whose_spokes_are_being_written_holds_its_rollout_until_they_are_or_for_five_minutes() {
    let now: Timestamp = "2026-11-27T12:00:00Z".parse().unwrap();
    let marked = |value: &str| {
        let mut hub = embedded_hub();
        hub.metadata
            .annotations
            .get_or_insert_default()
            .insert(ANNOTATION_WRITING_SPOKES.to_string(), value.to_string());
        hub
    };
    assert_eq!(writing_spokes_until(&embedded_hub(), now), None, "no mark");
    assert_eq!(
        writing_spokes_until(&marked("2026-11-27T11:59:58Z"), now),
        Some("2026-11-27T12:04:58Z".parse().unwrap()),
        "a writer that began 2 s ago"
    );
    assert_eq!(
        writing_spokes_until(&marked("2026-11-27T11:54:59Z"), now),
        None,
        "a writer that began over five minutes ago stopped half-way"
    );
    assert_eq!(writing_spokes_until(&marked("yesterday"), now), None);
    assert_eq!(
        writing_spokes_until(&marked("2026-11-27T13:00:00Z"), now),
        None,
        "an hour ahead of this clock"
    );
    assert!(writing_spokes_until(&marked("2026-11-27T12:00:30Z"), now).is_some());
}

#[test]
fn a_pass_that_enables_and_disables_addons_reports_what_the_spoke_has_after_it() {
    let namespaces = |names: &[&str]| -> BTreeMap<String, String> {
        names
            .iter()
            .map(|name| (name.to_string(), format!("{name}-ns")))
            .collect()
    };
    // Read before the pass: `kept` Available, `sick` not, `gone` about to be disabled.
    let before = applied(
        &namespaces(&["gone", "kept", "sick"]),
        vec!["gone".to_string(), "sick".to_string()],
        60,
    );
    let after = with_addons(&before, &namespaces(&["kept", "new", "sick"]));
    assert_eq!(
        after,
        applied(
            &namespaces(&["kept", "new", "sick"]),
            vec!["new".to_string(), "sick".to_string()],
            60
        ),
        "a new addon is not Available yet; the others keep what was read; a disabled one is gone"
    );
    assert_eq!(with_addons(&before, &BTreeMap::new()).addons, Vec::new());
}
