//! Krake's Kubernetes cluster observer (seed 002, DESIGN §4.5) for spokes with
//! `availability.mode: poll`: the hub polls the spoke's API itself and derives one of eight
//! states from what it sees.
//!
//! The rules are seed 002's, and where the seed is silent, Krake's own observer and controller:
//!
//! | from | event | to |
//! | --- | --- | --- |
//! | any | poll fails, retries left (or `backoffLimit` -1) | DEGRADED, retry after `backoffDelay × backoff` |
//! | any | poll fails, retries exhausted | OFFLINE, poll again after `pollInterval` |
//! | OFFLINE | poll succeeds | CONNECTING (a temporary state on the way back) |
//! | FAILING_METRICS | poll succeeds | FAILING_METRICS (only the metrics can clear it) |
//! | any other | poll succeeds, a node reports a `*Pressure` condition | UNHEALTHY |
//! | any other | poll succeeds, a node's Ready condition is not True | NOTREADY |
//! | any other | poll succeeds, nodes healthy | ONLINE |
//! | any | metrics provider fails | FAILING_METRICS |
//! | FAILING_METRICS | metrics recover | ONLINE |
//!
//! A successful poll resets the retries to `backoffLimit`; each failed poll with retries left
//! uses one up. So `backoffLimit: 3` means three DEGRADED polls and OFFLINE on the fourth failure,
//! and `backoffLimit: 0` means OFFLINE on the first.
//!
//! The observer's lifecycle follows seed 002's table: started when a spoke is created, stopped and
//! started again when it is updated, stopped when it is deleted ([`observer_lifecycle`]).
//! Lease-mode spokes get the same state names from their ManagedCluster's conditions
//! ([`state_from_conditions`]) so that `fleetform status` speaks one vocabulary.
//!
//! This module owns the states and timing; it must not poll, sleep or write anything.

use std::fmt;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::ManagedCluster;
use crate::api::cluster::NodeHealth;
use crate::api::fleet::{AvailabilityMode, AvailabilitySpec, SpokeSpec};
use crate::api::vocabulary::{CONDITION_AVAILABLE, STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN};

/// The state of an observed cluster, with Krake's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClusterState {
    /// Registered, not observed yet.
    Pending,
    /// Reachable again after being OFFLINE; the next good poll settles the state.
    Connecting,
    /// Reachable, every node ready, no pressure.
    Online,
    /// Polls fail but retries are left.
    Degraded,
    /// Polls fail and retries are exhausted.
    Offline,
    /// A node reports PID, memory or disk (or any other) pressure.
    Unhealthy,
    /// A node's Ready condition is not True.
    NotReady,
    /// The metrics provider cannot be reached.
    FailingMetrics,
}

impl ClusterState {
    /// Every state, in the order Krake lists them.
    pub const ALL: [ClusterState; 8] = [
        ClusterState::Pending,
        ClusterState::Connecting,
        ClusterState::Online,
        ClusterState::Degraded,
        ClusterState::Offline,
        ClusterState::Unhealthy,
        ClusterState::NotReady,
        ClusterState::FailingMetrics,
    ];

    /// Krake's name of the state, as `fleetform status` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::Pending => "PENDING",
            ClusterState::Connecting => "CONNECTING",
            ClusterState::Online => "ONLINE",
            ClusterState::Degraded => "DEGRADED",
            ClusterState::Offline => "OFFLINE",
            ClusterState::Unhealthy => "UNHEALTHY",
            ClusterState::NotReady => "NOTREADY",
            ClusterState::FailingMetrics => "FAILING_METRICS",
        }
    }
}

impl fmt::Display for ClusterState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state a reachable cluster's nodes put it in. Pressure wins over not-ready: Krake
/// returns whichever it meets first, and kubelets list the pressure conditions before Ready.
pub fn node_state(nodes: &NodeHealth) -> ClusterState {
    if nodes.under_pressure > 0 {
        ClusterState::Unhealthy
    } else if nodes.ready < nodes.total {
        ClusterState::NotReady
    } else {
        ClusterState::Online
    }
}

/// How often and how patiently the observer polls (the spoke's `availability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollPolicy {
    /// Between two polls of a reachable (or OFFLINE) cluster.
    pub interval: Duration,
    /// `backoff`: the multiplier of `backoff_delay`.
    pub backoff: u32,
    /// `backoffDelaySeconds`: the delay between retries before the multiplier.
    pub backoff_delay: Duration,
    /// `backoffLimit`: failed polls tolerated before OFFLINE; `None` (-1) retries forever.
    pub backoff_limit: Option<u32>,
}

impl PollPolicy {
    /// The policy of a spoke's availability settings. Out-of-range values (which validation
    /// rejects) are read leniently: an interval under one second as one second, a multiplier
    /// under one as one, a negative delay as none, any negative limit as "forever".
    pub fn from_spec(spec: &AvailabilitySpec) -> Self {
        let seconds = |value: i32| Duration::from_secs(u64::try_from(value).unwrap_or(0));
        PollPolicy {
            interval: seconds(spec.poll_interval_seconds.max(1)),
            backoff: u32::try_from(spec.backoff).unwrap_or(0).max(1),
            backoff_delay: seconds(spec.backoff_delay_seconds),
            backoff_limit: u32::try_from(spec.backoff_limit).ok(),
        }
    }

    /// The delay before retrying a failed poll: `backoff_delay × backoff`, the same for every
    /// retry, as Krake computes it.
    pub fn retry_delay(&self) -> Duration {
        self.backoff_delay.saturating_mul(self.backoff)
    }
}

/// What one poll of the spoke's API found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PollOutcome {
    /// The API could not be reached or answered with an error (Krake treats both alike).
    Unreachable { error: String },
    /// The API listed its nodes.
    Reachable(NodeHealth),
}

/// Something the observer learns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObserverEvent {
    Polled(PollOutcome),
    /// The metrics provider of the cluster could not be read.
    MetricsFailed,
    /// The metrics provider could be read again.
    MetricsRecovered,
}

/// The observer of one cluster: its state, its remaining retries and when it polls next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observer {
    pub policy: PollPolicy,
    pub state: ClusterState,
    /// Retries left before OFFLINE; `None` when the limit is -1 (forever).
    pub retries_left: Option<u32>,
    /// When the loop should poll next.
    pub next_poll: Timestamp,
    /// Why the last poll failed, for the status message.
    pub last_error: Option<String>,
}

/// What a step of the observer asks of its loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObserverStep {
    /// The new state, when it differs from the old one: the loop writes it to the spoke's status.
    pub changed_to: Option<ClusterState>,
    /// When the loop should poll next.
    pub next_poll: Timestamp,
}

impl Observer {
    /// A new observer of a just-created (or just-updated) spoke: PENDING, polling right away.
    pub fn start(policy: PollPolicy, now: Timestamp) -> Self {
        Observer {
            policy,
            state: ClusterState::Pending,
            retries_left: policy.backoff_limit,
            next_poll: now,
            last_error: None,
        }
    }

    /// Feeds one event at `now` and says what changed.
    pub fn on_event(&mut self, event: ObserverEvent, now: Timestamp) -> ObserverStep {
        let before = self.state;
        match event {
            ObserverEvent::Polled(PollOutcome::Unreachable { error }) => {
                self.last_error = Some(error);
                self.on_failed_poll(now);
            }
            ObserverEvent::Polled(PollOutcome::Reachable(nodes)) => {
                self.last_error = None;
                self.retries_left = self.policy.backoff_limit;
                self.state = match self.state {
                    ClusterState::FailingMetrics => ClusterState::FailingMetrics,
                    ClusterState::Offline => ClusterState::Connecting,
                    _ => node_state(&nodes),
                };
                self.next_poll = after(now, self.policy.interval);
            }
            ObserverEvent::MetricsFailed => self.state = ClusterState::FailingMetrics,
            ObserverEvent::MetricsRecovered => {
                if self.state == ClusterState::FailingMetrics {
                    self.state = ClusterState::Online;
                }
            }
        }
        ObserverStep {
            changed_to: (self.state != before).then_some(self.state),
            next_poll: self.next_poll,
        }
    }

    fn on_failed_poll(&mut self, now: Timestamp) {
        match self.retries_left {
            Some(0) => {
                self.state = ClusterState::Offline;
                self.next_poll = after(now, self.policy.interval);
            }
            Some(left) => {
                self.retries_left = Some(left - 1);
                self.state = ClusterState::Degraded;
                self.next_poll = after(now, self.policy.retry_delay());
            }
            None => {
                self.state = ClusterState::Degraded;
                self.next_poll = after(now, self.policy.retry_delay());
            }
        }
    }
}

fn after(now: Timestamp, wait: Duration) -> Timestamp {
    now.checked_add(wait).unwrap_or(Timestamp::MAX)
}

/// What to do with a spoke's observer when the spoke changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObserverLifecycle {
    /// Start an observer (the spoke was created, or switched to poll mode).
    Start,
    /// Stop the running observer and start a new one (the spoke was updated).
    Restart,
    /// Stop the running observer (the spoke was deleted, or switched to lease mode).
    Stop,
    /// Leave things as they are (nothing observable changed, or the spoke is not polled).
    Keep,
}

/// Seed 002's lifecycle table applied to a spoke: `old` is the spec the running observer was
/// started with (`None` if the spoke is new), `new` the current one (`None` once it is deleted).
/// Like Krake, any change of the spec restarts the observer: a new kubeconfig or policy must not
/// be judged with the old one's retries.
pub fn observer_lifecycle(old: Option<&SpokeSpec>, new: Option<&SpokeSpec>) -> ObserverLifecycle {
    fn polled(spec: Option<&SpokeSpec>) -> Option<&SpokeSpec> {
        spec.filter(|spec| spec.availability.mode == AvailabilityMode::Poll)
    }
    match (polled(old), polled(new)) {
        (None, None) => ObserverLifecycle::Keep,
        (None, Some(_)) => ObserverLifecycle::Start,
        (Some(_), None) => ObserverLifecycle::Stop,
        (Some(old), Some(new)) if old == new => ObserverLifecycle::Keep,
        (Some(_), Some(_)) => ObserverLifecycle::Restart,
    }
}

/// The observer state a lease-mode spoke is shown in, from its ManagedCluster's conditions:
/// Available True is ONLINE; False (its API server or agent failing) is NOTREADY; Unknown (the
/// lease stopped) is OFFLINE. Without an Available condition a joined cluster is CONNECTING (it
/// has its certificate but has not reported yet) and any other is PENDING.
pub fn state_from_conditions(cluster: &ManagedCluster) -> ClusterState {
    match cluster
        .condition(CONDITION_AVAILABLE)
        .map(|condition| condition.status.as_str())
    {
        Some(STATUS_TRUE) => ClusterState::Online,
        Some(STATUS_FALSE) => ClusterState::NotReady,
        Some(STATUS_UNKNOWN) => ClusterState::Offline,
        _ if cluster.is_joined() => ClusterState::Connecting,
        _ => ClusterState::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::cluster::node_with_conditions as node;
    use crate::api::cluster::{ManagedClusterSpec, ManagedClusterStatus};
    use crate::api::vocabulary::CONDITION_JOINED;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn policy(limit: Option<u32>) -> PollPolicy {
        PollPolicy {
            interval: Duration::from_secs(30),
            backoff: 2,
            backoff_delay: Duration::from_secs(5),
            backoff_limit: limit,
        }
    }

    fn healthy_node() -> Node {
        node(&[
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False"),
            ("Ready", "True"),
        ])
    }

    fn reachable(nodes: &[Node]) -> ObserverEvent {
        ObserverEvent::Polled(PollOutcome::Reachable(NodeHealth::from_nodes(nodes)))
    }

    fn unreachable() -> ObserverEvent {
        ObserverEvent::Polled(PollOutcome::Unreachable {
            error: "connection refused".into(),
        })
    }

    fn observer_in(state: ClusterState, limit: Option<u32>) -> Observer {
        Observer {
            state,
            ..Observer::start(policy(limit), at(0))
        }
    }

    #[test]
    fn states_print_with_krakes_names() {
        let names: Vec<String> = ClusterState::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "PENDING",
                "CONNECTING",
                "ONLINE",
                "DEGRADED",
                "OFFLINE",
                "UNHEALTHY",
                "NOTREADY",
                "FAILING_METRICS"
            ]
        );
    }

    #[test]
    fn new_observer_is_pending_and_polls_at_once() {
        let observer = Observer::start(policy(None), at(7));
        assert_eq!(observer.state, ClusterState::Pending);
        assert_eq!(observer.next_poll, at(7));
    }

    #[test]
    fn pending_cluster_with_healthy_nodes_goes_online_and_polls_at_the_interval() {
        let mut observer = Observer::start(policy(None), at(0));
        let step = observer.on_event(reachable(&[healthy_node(), healthy_node()]), at(1));
        assert_eq!(step.changed_to, Some(ClusterState::Online));
        assert_eq!(step.next_poll, at(31));
    }

    #[test]
    fn node_pressure_makes_the_cluster_unhealthy() {
        for kind in [
            "PIDPressure",
            "MemoryPressure",
            "DiskPressure",
            "NetworkPressure",
        ] {
            let mut observer = observer_in(ClusterState::Online, None);
            let sick = node(&[(kind, "True"), ("Ready", "True")]);
            let step = observer.on_event(reachable(&[healthy_node(), sick]), at(1));
            assert_eq!(step.changed_to, Some(ClusterState::Unhealthy), "{kind}");
        }
    }

    #[test]
    fn a_node_not_ready_makes_the_cluster_notready() {
        for status in ["False", "Unknown"] {
            let mut observer = observer_in(ClusterState::Online, None);
            let down = node(&[("Ready", status)]);
            let step = observer.on_event(reachable(&[healthy_node(), down]), at(1));
            assert_eq!(step.changed_to, Some(ClusterState::NotReady), "{status}");
        }
    }

    #[test]
    fn pressure_wins_over_not_ready_whatever_the_node_order() {
        let pressed = node(&[("DiskPressure", "True"), ("Ready", "True")]);
        let down = node(&[("Ready", "False")]);
        for nodes in [[pressed.clone(), down.clone()], [down, pressed]] {
            let mut observer = observer_in(ClusterState::Online, None);
            observer.on_event(reachable(&nodes), at(1));
            assert_eq!(observer.state, ClusterState::Unhealthy);
        }
    }

    #[test]
    fn unhealthy_and_notready_clusters_recover_to_online() {
        for state in [
            ClusterState::Unhealthy,
            ClusterState::NotReady,
            ClusterState::Degraded,
            ClusterState::Connecting,
        ] {
            let mut observer = observer_in(state, None);
            let step = observer.on_event(reachable(&[healthy_node()]), at(1));
            assert_eq!(step.changed_to, Some(ClusterState::Online), "from {state}");
        }
    }

    #[test]
    fn a_cluster_without_nodes_is_online_as_in_krake() {
        let mut observer = Observer::start(policy(None), at(0));
        observer.on_event(reachable(&[]), at(1));
        assert_eq!(observer.state, ClusterState::Online);
    }

    #[test]
    fn same_state_again_reports_no_change() {
        let mut observer = observer_in(ClusterState::Online, None);
        let step = observer.on_event(reachable(&[healthy_node()]), at(100));
        assert_eq!(step.changed_to, None);
        assert_eq!(step.next_poll, at(130));
    }

    #[test]
    fn failed_poll_degrades_and_retries_after_delay_times_backoff() {
        let mut observer = observer_in(ClusterState::Online, Some(3));
        let step = observer.on_event(unreachable(), at(100));
        assert_eq!(step.changed_to, Some(ClusterState::Degraded));
        assert_eq!(step.next_poll, at(110), "5 s × backoff 2");
        assert_eq!(observer.retries_left, Some(2));
        assert_eq!(observer.last_error.as_deref(), Some("connection refused"));
    }

    #[test]
    fn exhausted_retries_take_the_cluster_offline() {
        let mut observer = Observer::start(policy(Some(3)), at(0));
        let mut states = Vec::new();
        for second in 1..=5 {
            observer.on_event(unreachable(), at(second));
            states.push(observer.state);
        }
        use ClusterState::{Degraded, Offline};
        assert_eq!(states, [Degraded, Degraded, Degraded, Offline, Offline]);
        assert_eq!(
            observer.next_poll,
            at(35),
            "OFFLINE polls at the interval to notice the cluster coming back"
        );
    }

    #[test]
    fn backoff_limit_zero_goes_offline_on_the_first_failure() {
        let mut observer = observer_in(ClusterState::Online, Some(0));
        let step = observer.on_event(unreachable(), at(1));
        assert_eq!(step.changed_to, Some(ClusterState::Offline));
    }

    #[test]
    fn infinite_backoff_limit_stays_degraded_until_a_poll_succeeds() {
        let mut observer = observer_in(ClusterState::Online, None);
        for second in 0..1_000 {
            observer.on_event(unreachable(), at(second * 10));
            assert_eq!(observer.state, ClusterState::Degraded);
        }
        observer.on_event(reachable(&[healthy_node()]), at(10_000));
        assert_eq!(observer.state, ClusterState::Online);
    }

    #[test]
    fn a_successful_poll_resets_the_retries() {
        let mut observer = observer_in(ClusterState::Online, Some(2));
        observer.on_event(unreachable(), at(1));
        observer.on_event(unreachable(), at(2));
        assert_eq!(observer.retries_left, Some(0));
        observer.on_event(reachable(&[healthy_node()]), at(3));
        assert_eq!(observer.retries_left, Some(2));
        assert_eq!(observer.last_error, None);
        observer.on_event(unreachable(), at(4));
        assert_eq!(observer.state, ClusterState::Degraded);
    }

    #[test]
    fn offline_cluster_reachable_again_passes_through_connecting() {
        let mut observer = observer_in(ClusterState::Offline, Some(0));
        let step = observer.on_event(reachable(&[healthy_node()]), at(1));
        assert_eq!(step.changed_to, Some(ClusterState::Connecting));
        assert_eq!(step.next_poll, at(31));
        let step = observer.on_event(reachable(&[healthy_node()]), at(31));
        assert_eq!(step.changed_to, Some(ClusterState::Online));
    }

    #[test]
    fn connecting_cluster_failing_again_degrades_with_fresh_retries() {
        let mut observer = observer_in(ClusterState::Offline, Some(1));
        observer.retries_left = Some(0);
        observer.on_event(reachable(&[healthy_node()]), at(1));
        assert_eq!(observer.state, ClusterState::Connecting);
        observer.on_event(unreachable(), at(2));
        assert_eq!(observer.state, ClusterState::Degraded);
    }

    #[test]
    fn pending_cluster_that_cannot_be_reached_degrades() {
        let mut observer = Observer::start(policy(Some(1)), at(0));
        observer.on_event(unreachable(), at(0));
        assert_eq!(observer.state, ClusterState::Degraded);
        observer.on_event(unreachable(), at(10));
        assert_eq!(observer.state, ClusterState::Offline);
    }

    #[test]
    fn failing_metrics_holds_while_the_cluster_is_reachable() {
        let mut observer = observer_in(ClusterState::Online, None);
        let step = observer.on_event(ObserverEvent::MetricsFailed, at(1));
        assert_eq!(step.changed_to, Some(ClusterState::FailingMetrics));
        let sick = node(&[("Ready", "False")]);
        let step = observer.on_event(reachable(&[sick]), at(2));
        assert_eq!(
            step.changed_to, None,
            "only the metrics clear FAILING_METRICS"
        );
    }

    #[test]
    fn recovered_metrics_bring_the_cluster_back_online() {
        let mut observer = observer_in(ClusterState::FailingMetrics, None);
        let step = observer.on_event(ObserverEvent::MetricsRecovered, at(1));
        assert_eq!(step.changed_to, Some(ClusterState::Online));
        let mut offline = observer_in(ClusterState::Offline, None);
        let step = offline.on_event(ObserverEvent::MetricsRecovered, at(1));
        assert_eq!(step.changed_to, None, "recovered metrics say nothing else");
    }

    #[test]
    fn unreachable_cluster_with_failing_metrics_degrades() {
        let mut observer = observer_in(ClusterState::FailingMetrics, None);
        observer.on_event(unreachable(), at(1));
        assert_eq!(observer.state, ClusterState::Degraded);
    }

    #[test]
    fn metrics_events_do_not_move_the_poll_timer() {
        let mut observer = observer_in(ClusterState::Online, None);
        observer.next_poll = at(42);
        let step = observer.on_event(ObserverEvent::MetricsFailed, at(1));
        assert_eq!(step.next_poll, at(42));
    }

    #[test]
    fn policy_comes_from_the_spokes_availability() {
        let spec = AvailabilitySpec {
            mode: AvailabilityMode::Poll,
            poll_interval_seconds: 15,
            backoff: 2,
            backoff_delay_seconds: 3,
            backoff_limit: 5,
        };
        let policy = PollPolicy::from_spec(&spec);
        assert_eq!(policy.interval, Duration::from_secs(15));
        assert_eq!(policy.retry_delay(), Duration::from_secs(6));
        assert_eq!(policy.backoff_limit, Some(5));
        let defaults = PollPolicy::from_spec(&AvailabilitySpec::default());
        assert_eq!(defaults.retry_delay(), Duration::from_secs(5));
        assert_eq!(defaults.backoff_limit, None, "-1 retries forever");
    }

    #[test]
    fn out_of_range_policy_values_are_read_leniently() {
        let spec = AvailabilitySpec {
            poll_interval_seconds: 0,
            backoff: 0,
            backoff_delay_seconds: -4,
            backoff_limit: -9,
            ..AvailabilitySpec::default()
        };
        let policy = PollPolicy::from_spec(&spec);
        assert_eq!(policy.interval, Duration::from_secs(1));
        assert_eq!(policy.backoff, 1);
        assert_eq!(policy.retry_delay(), Duration::ZERO);
        assert_eq!(policy.backoff_limit, None);
    }

    fn spoke(mode: AvailabilityMode) -> SpokeSpec {
        let mut spec: SpokeSpec = serde_json::from_value(serde_json::json!({
            "hubRef": "hub",
            "kubeconfig": {"context": "spoke"},
        }))
        .unwrap();
        spec.availability.mode = mode;
        spec
    }

    #[test]
    fn observer_starts_on_create_restarts_on_update_stops_on_delete() {
        let polled = spoke(AvailabilityMode::Poll);
        let mut changed = polled.clone();
        changed.availability.backoff_limit = 3;
        assert_eq!(
            observer_lifecycle(None, Some(&polled)),
            ObserverLifecycle::Start
        );
        assert_eq!(
            observer_lifecycle(Some(&polled), Some(&changed)),
            ObserverLifecycle::Restart
        );
        assert_eq!(
            observer_lifecycle(Some(&polled), None),
            ObserverLifecycle::Stop
        );
        assert_eq!(
            observer_lifecycle(Some(&polled), Some(&polled.clone())),
            ObserverLifecycle::Keep,
            "a status-only update leaves the observer running"
        );
    }

    #[test]
    fn switching_availability_mode_starts_or_stops_the_observer() {
        let polled = spoke(AvailabilityMode::Poll);
        let leased = spoke(AvailabilityMode::Lease);
        assert_eq!(
            observer_lifecycle(Some(&leased), Some(&polled)),
            ObserverLifecycle::Start
        );
        assert_eq!(
            observer_lifecycle(Some(&polled), Some(&leased)),
            ObserverLifecycle::Stop
        );
        assert_eq!(
            observer_lifecycle(None, Some(&leased)),
            ObserverLifecycle::Keep
        );
        assert_eq!(
            observer_lifecycle(Some(&leased), None),
            ObserverLifecycle::Keep
        );
    }

    fn cluster(conditions: &[(&str, &str)]) -> ManagedCluster {
        let mut cluster = ManagedCluster::new("c1", ManagedClusterSpec::default());
        cluster.status = Some(ManagedClusterStatus {
            conditions: conditions
                .iter()
                .map(|(type_, status)| Condition {
                    type_: (*type_).into(),
                    status: (*status).into(),
                    reason: "R".into(),
                    message: String::new(),
                    observed_generation: None,
                    last_transition_time: Time(at(0)),
                })
                .collect(),
            ..Default::default()
        });
        cluster
    }

    #[test]
    fn lease_mode_conditions_map_to_the_same_state_names() {
        let joined = (CONDITION_JOINED, STATUS_TRUE);
        let cases = [
            (cluster(&[]), ClusterState::Pending),
            (cluster(&[joined]), ClusterState::Connecting),
            (
                cluster(&[joined, (CONDITION_AVAILABLE, STATUS_TRUE)]),
                ClusterState::Online,
            ),
            (
                cluster(&[joined, (CONDITION_AVAILABLE, STATUS_FALSE)]),
                ClusterState::NotReady,
            ),
            (
                cluster(&[joined, (CONDITION_AVAILABLE, STATUS_UNKNOWN)]),
                ClusterState::Offline,
            ),
            (
                cluster(&[(CONDITION_AVAILABLE, STATUS_UNKNOWN)]),
                ClusterState::Offline,
            ),
        ];
        for (cluster, expected) in cases {
            assert_eq!(
                state_from_conditions(&cluster),
                expected,
                "{:?}",
                cluster.conditions()
            );
        }
    }
}
