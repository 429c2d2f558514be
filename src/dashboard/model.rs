//! The dashboard's view model: what the watches of every hub have seen (Hubs, Spokes,
//! ManagedClusters with their claims, ManagedClusterAddOns, cluster Leases, FleetSyncs and the
//! Events about them), each spoke's row as `fleetform status` computes it ([`crate::status`]),
//! and each spoke's availability over the last day. It holds no client and does no I/O: the
//! watches feed it [`Observed`] objects and it answers which rows changed.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::watcher;

use crate::api::fleet::{FleetSync, Hub, Spoke, SpokeSpec, SpokeStatus};
use crate::api::vocabulary::{
    ADDON_CONDITION_AVAILABLE, ANNOTATION_NODE_HEALTH, CLUSTER_LEASE_NAME, CONDITION_AVAILABLE,
    DEFAULT_ADDON_INSTALL_NAMESPACE, STATUS_TRUE,
};
use crate::api::{ManagedCluster, ManagedClusterAddOn};
use crate::runtime::watch::keep_only;
use crate::status::{AddonCount, Seen, SpokeRow};

/// How many Events are kept per object they regard (the newest).
pub const EVENTS_PER_OBJECT: usize = 20;
/// How many availability changes are kept per spoke: a spoke flapping faster than this over a
/// day shows its newest changes only.
pub const TRANSITIONS_PER_SPOKE: usize = 96;
/// How far back the availability timeline reaches.
pub const TIMELINE_SPAN: SignedDuration = SignedDuration::from_hours(24);

/// One object event of one hub's watches.
#[derive(Debug)]
pub enum Observed {
    Hub(watcher::Event<Hub>),
    Spoke(watcher::Event<Spoke>),
    Cluster(watcher::Event<ManagedCluster>),
    Addon(watcher::Event<ManagedClusterAddOn>),
    Lease(watcher::Event<Lease>),
    FleetSync(watcher::Event<FleetSync>),
    Event(watcher::Event<Event>),
}

/// The objects of one kind a watch has listed, by key, kept in step with its events: a relist
/// replaces them whole once it is done, so objects deleted while the watch was down go.
/// Each object is boxed: a B-tree node holds eleven values in place and is about half full
/// when filled in key order (as a list fills it), and a Spoke or ManagedCluster in place is
/// most of a kilobyte.
#[derive(Debug)]
pub struct Mirror<K> {
    pub objects: BTreeMap<String, Box<K>>,
    relisting: Option<BTreeMap<String, Box<K>>>,
}

impl<K> Default for Mirror<K> {
    fn default() -> Self {
        Mirror {
            objects: BTreeMap::new(),
            relisting: None,
        }
    }
}

/// What a watch event did to a [`Mirror`].
#[derive(Debug, PartialEq, Eq)]
pub enum Touched {
    /// Nothing visible yet (a relist under way).
    Nothing,
    /// The object of this key changed or went.
    Key(String),
    /// A relist finished: anything may have changed.
    All,
}

impl<K> Mirror<K> {
    /// Applies `event`, keying objects by `key`.
    pub fn apply(&mut self, event: watcher::Event<K>, key: impl Fn(&K) -> String) -> Touched {
        match event {
            watcher::Event::Init => {
                self.relisting = Some(BTreeMap::new());
                Touched::Nothing
            }
            watcher::Event::InitApply(object) => {
                let relisting = self.relisting.get_or_insert_with(BTreeMap::new);
                relisting.insert(key(&object), Box::new(object));
                Touched::Nothing
            }
            watcher::Event::InitDone => {
                self.objects = self.relisting.take().unwrap_or_default();
                Touched::All
            }
            watcher::Event::Apply(object) => {
                let key = key(&object);
                self.objects.insert(key.clone(), Box::new(object));
                Touched::Key(key)
            }
            watcher::Event::Delete(object) => {
                let key = key(&object);
                self.objects.remove(&key);
                Touched::Key(key)
            }
        }
    }
}

/// Cuts a watched ManagedCluster to what the pages read of it ([`crate::status::row`] and the
/// spoke page): its name, conditions, taints, claims and node health. The rest (the CA bundles
/// of its client configs, its resources and version, labels and other annotations) goes as it
/// arrives: the dashboard holds every cluster of its hubs.
pub fn as_shown_cluster(cluster: &mut ManagedCluster) {
    let metadata = &mut cluster.metadata;
    metadata.labels = None;
    metadata.owner_references = None;
    metadata.finalizers = None;
    keep_only(&mut metadata.annotations, |key| {
        key == ANNOTATION_NODE_HEALTH
    });
    cluster.spec.managed_cluster_client_configs = Vec::new();
    if let Some(status) = &mut cluster.status {
        status.capacity = BTreeMap::new();
        status.allocatable = BTreeMap::new();
        status.version = None;
        status.managed_namespaces = Vec::new();
    }
}

/// Cuts a watched Spoke to what the pages read of it (its row, [`crate::status::row`], and its
/// page): which it is, its labels, finalizers and deletion, how its availability is told, its
/// phase, conditions and agent version. The rest (its kubeconfig's source, its settings, addons
/// and taints, what its status says of applied settings, the released agent and the agent's
/// Deployment, its annotations) goes as it arrives: the dashboard holds every Spoke of its hubs.
pub fn as_shown_spoke(spoke: &mut Spoke) {
    let metadata = &mut spoke.metadata;
    metadata.annotations = None;
    metadata.owner_references = None;
    spoke.spec = SpokeSpec {
        hub_ref: std::mem::take(&mut spoke.spec.hub_ref),
        kubeconfig: Default::default(),
        lease_duration_seconds: None,
        cluster_claims_max: None,
        agent: None,
        addons: Vec::new(),
        availability: std::mem::take(&mut spoke.spec.availability),
        cleanup: Default::default(),
        taints: Vec::new(),
        cluster_set: None,
    };
    if let Some(status) = &mut spoke.status {
        *status = SpokeStatus {
            phase: status.phase,
            agent_version: status.agent_version.take(),
            conditions: std::mem::take(&mut status.conditions),
            ..SpokeStatus::default()
        };
    }
}

/// What the pages read of a ManagedClusterAddOn (its spoke's row counts it, the spoke page
/// lists it): which it is, its install namespace and its Available condition. The dashboard
/// holds one for every addon of every cluster of its hubs (70,000 at 10,000 spokes with 7
/// addons each): a few hundred bytes each, where the decoded object held was about two
/// kilobytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownAddon {
    /// Its cluster (its namespace).
    pub cluster: String,
    pub name: String,
    /// Where it installs when not OCM's default namespace (most addons install there: a copy
    /// of that name in each was about 3 MB at 70,000 addons).
    install_namespace: Option<String>,
    /// Its Available condition's status and reason; `None` until it has one.
    pub available: Option<(String, String)>,
}

impl ShownAddon {
    pub fn of(addon: &ManagedClusterAddOn) -> Self {
        ShownAddon {
            cluster: namespace(addon),
            name: name(addon),
            install_namespace: Some(addon.install_namespace())
                .filter(|namespace| *namespace != DEFAULT_ADDON_INSTALL_NAMESPACE)
                .map(str::to_string),
            available: addon
                .condition(ADDON_CONDITION_AVAILABLE)
                .map(|condition| (condition.status.clone(), condition.reason.clone())),
        }
    }

    /// The namespace its agent installs in on the spoke.
    pub fn install_namespace(&self) -> &str {
        self.install_namespace
            .as_deref()
            .unwrap_or(DEFAULT_ADDON_INSTALL_NAMESPACE)
    }

    /// Whether its Available condition is True.
    pub fn is_available(&self) -> bool {
        self.available
            .as_ref()
            .is_some_and(|(status, _)| status == STATUS_TRUE)
    }

    fn key(&self) -> String {
        format!("{}/{}", self.cluster, self.name)
    }
}

/// `event` with its objects made into what the dashboard keeps of them.
fn kept<K, T>(event: watcher::Event<K>, keep: impl Fn(&K) -> T) -> watcher::Event<T> {
    match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(object) => watcher::Event::InitApply(keep(&object)),
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::Apply(object) => watcher::Event::Apply(keep(&object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(keep(&object)),
    }
}

/// What the pages read of a cluster Lease: whose it is and when its agent last renewed it. The
/// dashboard holds one for every cluster of its hubs; a Lease decoded, even cut, was about half
/// a kilobyte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownLease {
    /// Its cluster (its namespace).
    pub cluster: String,
    pub renewed: Option<Timestamp>,
}

impl ShownLease {
    pub fn of(lease: &Lease) -> Self {
        let renewed = lease
            .spec
            .as_ref()
            .filter(|_| lease.metadata.name.as_deref() == Some(CLUSTER_LEASE_NAME))
            .and_then(|spec| spec.renew_time.as_ref())
            .map(|time| time.0);
        ShownLease {
            cluster: namespace(lease),
            renewed,
        }
    }

    fn key(&self) -> String {
        self.cluster.clone()
    }
}

fn name<K: kube::Resource>(object: &K) -> String {
    object.meta().name.clone().unwrap_or_default()
}

fn namespace<K: kube::Resource>(object: &K) -> String {
    object.meta().namespace.clone().unwrap_or_default()
}

/// One Event as the dashboard shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLine {
    pub uid: String,
    pub time: Option<Timestamp>,
    pub warning: bool,
    pub reason: String,
    pub note: String,
    /// How often it happened (a series counts repeats).
    pub count: i32,
}

impl EventLine {
    fn of(event: &Event) -> EventLine {
        let time = event
            .series
            .as_ref()
            .map(|series| series.last_observed_time.0)
            .or_else(|| event.event_time.as_ref().map(|time| time.0))
            .or_else(|| event.deprecated_last_timestamp.as_ref().map(|time| time.0))
            .or_else(|| {
                event
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|time| time.0)
            });
        EventLine {
            uid: event.metadata.uid.clone().unwrap_or_default(),
            time,
            warning: event.type_.as_deref() == Some("Warning"),
            reason: event.reason.clone().unwrap_or_default(),
            note: event.note.clone().unwrap_or_default(),
            count: event.series.as_ref().map_or(1, |series| series.count),
        }
    }
}

/// A spoke's row of the fleet page: what `fleetform status` says of it, its labels (to filter
/// on) and when its agent last renewed its lease (its age is the viewer's now minus this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub status: SpokeRow,
    pub labels: BTreeMap<String, String>,
    pub renewed: Option<Timestamp>,
}

/// A spoke's availability (`ManagedClusterConditionAvailable`: True, False, Unknown; none
/// before it has one) since a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub at: Timestamp,
    pub available: Option<String>,
}

/// Everything the watches of one hub have seen.
#[derive(Debug, Default)]
pub struct HubView {
    pub hubs: Mirror<Hub>,
    pub spokes: Mirror<Spoke>,
    pub clusters: Mirror<ManagedCluster>,
    /// By `NAMESPACE/NAME`: the namespace is the cluster's.
    pub addons: Mirror<ShownAddon>,
    /// Cluster leases by cluster namespace.
    pub leases: Mirror<ShownLease>,
    pub fleet_syncs: Mirror<FleetSync>,
    /// Events by the `Kind/name` they regard, oldest first by when they happened.
    pub events: BTreeMap<String, VecDeque<EventLine>>,
    /// Changed only by [`HubView::refresh_row`], which keeps `availability` counting them.
    pub rows: BTreeMap<String, Row>,
    /// How many rows are of each availability: the fleet page's summary, rendered after every
    /// batch of changes, counts no rows (10,000 of them at every batch of a fleet's join).
    pub availability: AvailabilityCounts,
    /// Each spoke's availability changes, oldest first.
    pub timelines: BTreeMap<String, VecDeque<Transition>>,
}

/// How many rows of a hub are of each availability (`None`: its cluster has no
/// `ManagedClusterConditionAvailable` yet).
#[derive(Debug, Default)]
pub struct AvailabilityCounts(HashMap<Option<String>, usize>);

impl AvailabilityCounts {
    /// How many rows are of availability `available`.
    pub fn of(&self, available: Option<&str>) -> usize {
        self.0
            .get(&available.map(str::to_string))
            .copied()
            .unwrap_or(0)
    }

    fn add(&mut self, row: &Row) {
        *self.0.entry(row.status.available.clone()).or_default() += 1;
    }

    fn remove(&mut self, row: &Row) {
        if let Some(count) = self.0.get_mut(&row.status.available) {
            *count = count.saturating_sub(1);
        }
    }
}

/// What an update changed, for the viewers to hear of.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Spokes whose row changed (or that are gone): `(hub, spoke)`.
    pub rows: BTreeSet<(String, String)>,
    /// Spokes added or removed: the fleet page's pagination moves.
    pub membership: bool,
    /// Spokes whose own page has news (an Event) though their row did not change.
    pub spoke_pages: BTreeSet<(String, String)>,
    /// Hubs whose rollout or Hub object changed.
    pub rollouts: BTreeSet<String>,
    /// A FleetSync or an Event about one changed.
    pub sync: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }

    /// Adds what `other` changed.
    pub fn merge(&mut self, other: Changes) {
        self.rows.extend(other.rows);
        self.membership |= other.membership;
        self.spoke_pages.extend(other.spoke_pages);
        self.rollouts.extend(other.rollouts);
        self.sync |= other.sync;
    }
}

/// Every hub's view, by hub name.
#[derive(Debug, Default)]
pub struct Model {
    pub hubs: BTreeMap<String, HubView>,
    /// Counts the batches of changes viewers were sent: a page rendered at one version and a
    /// live stream opened at another missed something in between.
    pub version: u64,
}

impl Model {
    /// A model of `hubs`, nothing seen yet.
    pub fn new(hubs: impl IntoIterator<Item = String>) -> Self {
        Model {
            version: 0,
            hubs: hubs
                .into_iter()
                .map(|hub| (hub, HubView::default()))
                .collect(),
        }
    }

    /// Takes in what a watch of `hub` saw at `now`.
    pub fn observe(&mut self, hub: &str, observed: Observed, now: Timestamp) -> Changes {
        let mut changes = Changes::default();
        let Some(view) = self.hubs.get_mut(hub) else {
            return changes;
        };
        // The spokes whose rows may have changed: `None` for all of them.
        let affected: Option<Vec<String>> = match observed {
            Observed::Hub(event) => {
                if view.hubs.apply(event, name) != Touched::Nothing {
                    changes.rollouts.insert(hub.to_string());
                }
                Some(Vec::new())
            }
            Observed::Spoke(event) => {
                let before = view.spokes.objects.len();
                // Labels `Some`, empty for none: `None` is what `refresh_row` leaves once it has
                // moved them to the spoke's row.
                let event = event.modify(|spoke| {
                    spoke.metadata.labels.get_or_insert_default();
                });
                let touched = view.spokes.apply(event, name);
                changes.membership = view.spokes.objects.len() != before;
                keys(touched)
            }
            Observed::Cluster(event) => keys(view.clusters.apply(event, name)),
            Observed::Addon(event) => match view
                .addons
                .apply(kept(event, ShownAddon::of), ShownAddon::key)
            {
                Touched::Key(key) => Some(vec![
                    key.split_once('/')
                        .map_or(key.clone(), |(cluster, _)| cluster.to_string()),
                ]),
                touched => keys(touched),
            },
            Observed::Lease(event) => {
                // A renewal changes only the lease's age, which a viewer counts up itself.
                let touched = view
                    .leases
                    .apply(kept(event, ShownLease::of), ShownLease::key);
                let renewals = match touched {
                    Touched::Key(key) => vec![key],
                    Touched::All => view.rows.keys().cloned().collect(),
                    Touched::Nothing => Vec::new(),
                };
                for spoke in renewals {
                    let renewed = view.renewed(&spoke);
                    if let Some(row) = view.rows.get_mut(&spoke) {
                        row.renewed = renewed;
                    }
                }
                Some(Vec::new())
            }
            Observed::FleetSync(event) => {
                changes.sync |= view.fleet_syncs.apply(event, name) != Touched::Nothing;
                Some(Vec::new())
            }
            Observed::Event(event) => {
                if let watcher::Event::Apply(event) | watcher::Event::InitApply(event) = event {
                    remember(view, &event, hub, &mut changes);
                }
                Some(Vec::new())
            }
        };
        let spokes = match affected {
            Some(spokes) => spokes,
            None => {
                changes.membership = true;
                view.spokes
                    .objects
                    .keys()
                    .chain(view.rows.keys())
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect()
            }
        };
        for spoke in spokes {
            if view.refresh_row(hub, &spoke, now) {
                changes.rows.insert((hub.to_string(), spoke));
            }
        }
        changes
    }
}

fn keys(touched: Touched) -> Option<Vec<String>> {
    match touched {
        Touched::Nothing => Some(Vec::new()),
        Touched::Key(key) => Some(vec![key]),
        Touched::All => None,
    }
}

/// Keeps `event` among the newest of the object it regards.
fn remember(view: &mut HubView, event: &Event, hub: &str, changes: &mut Changes) {
    let Some(regarding) = event.regarding.as_ref() else {
        return;
    };
    let kind = regarding.kind.clone().unwrap_or_default();
    let object = regarding.name.clone().unwrap_or_default();
    let line = EventLine::of(event);
    let lines = view.events.entry(format!("{kind}/{object}")).or_default();
    match lines.iter().position(|known| known.uid == line.uid) {
        Some(known) if lines[known] == line => return,
        Some(known) => {
            lines.remove(known);
        }
        None => {}
    }
    // By when they happened (a list, or a relist, brings them in any order; a repeat moves
    // one on), the oldest dropped first.
    let place = lines.partition_point(|known| known.time <= line.time);
    lines.insert(place, line);
    if lines.len() > EVENTS_PER_OBJECT {
        lines.pop_front();
    }
    match kind.as_str() {
        "Spoke" => {
            changes.spoke_pages.insert((hub.to_string(), object));
        }
        "FleetSync" => changes.sync = true,
        "Hub" => {
            changes.rollouts.insert(hub.to_string());
        }
        _ => {}
    }
}

impl HubView {
    /// When the agent of cluster `spoke` last renewed its lease.
    fn renewed(&self, spoke: &str) -> Option<Timestamp> {
        self.leases.objects.get(spoke)?.renewed
    }

    /// Recomputes the row of `spoke` from what is seen of it; whether it changed.
    fn refresh_row(&mut self, hub: &str, spoke: &str, now: Timestamp) -> bool {
        let addons = AddonCount::of(self.addons_of(spoke).map(ShownAddon::is_available));
        let Some(object) = self.spokes.objects.get_mut(spoke) else {
            self.timelines.remove(spoke);
            let Some(gone) = self.rows.remove(spoke) else {
                return false;
            };
            self.availability.remove(&gone);
            return true;
        };
        // A Spoke's labels move to its row (the fleet page filters on them; nothing else reads
        // them) rather than being held twice: a Spoke comes with them (`Some`, empty for none:
        // [`Model::observe`]) and gives them up to its first refresh; the refreshes its
        // cluster, addons or lease cause keep the row's.
        let labels = match object.metadata.labels.take() {
            Some(labels) => labels,
            None => self
                .rows
                .get(spoke)
                .map(|row| row.labels.clone())
                .unwrap_or_default(),
        };
        let seen = Seen {
            hub,
            spoke: object,
            cluster: self.clusters.objects.get(spoke).map(Box::as_ref),
            addons,
            // Lease ages are the viewer's to count from `renewed`.
            renewed: None,
            // The rollouts have a page of their own.
            hub_status: None,
        };
        let status = crate::status::row(&seen, now);
        let row = Row {
            status,
            labels,
            renewed: self.renewed(spoke),
        };
        let timeline = self.timelines.entry(spoke.to_string()).or_default();
        if timeline.back().map(|last| &last.available) != Some(&row.status.available) {
            // When it changed, as the hub keeps it (the condition's last transition), so that a
            // process started later still shows since when a spoke has been as it is; what was
            // drawn only for want of its cluster at that instant or after gives way to it.
            let since = self
                .clusters
                .objects
                .get(spoke)
                .and_then(|cluster| cluster.condition(CONDITION_AVAILABLE))
                .map(|condition| condition.last_transition_time.0)
                .filter(|since| *since <= now)
                .unwrap_or(now);
            while timeline
                .back()
                .is_some_and(|last| last.available.is_none() && last.at >= since)
            {
                timeline.pop_back();
            }
            // A transition no later than the last one drawn tells nothing new: seen now.
            let at = match timeline.back() {
                Some(last) if since <= last.at => now.max(last.at),
                _ => since,
            };
            timeline.push_back(Transition {
                at,
                available: row.status.available.clone(),
            });
            while timeline.len() > TRANSITIONS_PER_SPOKE
                || timeline
                    .get(1)
                    .is_some_and(|second| second.at < now - TIMELINE_SPAN)
            {
                timeline.pop_front();
            }
        }
        if self.rows.get(spoke) == Some(&row) {
            return false;
        }
        self.availability.add(&row);
        if let Some(was) = self.rows.insert(spoke.to_string(), row) {
            self.availability.remove(&was);
        }
        true
    }

    /// The Events about `kind`/`name`, newest first.
    pub fn events_of(&self, kind: &str, name: &str) -> impl Iterator<Item = &EventLine> {
        self.events
            .get(&format!("{kind}/{name}"))
            .into_iter()
            .flat_map(|lines| lines.iter().rev())
    }

    /// The ManagedClusterAddOns of cluster `spoke`.
    pub fn addons_of(&self, spoke: &str) -> impl Iterator<Item = &ShownAddon> {
        let prefix = format!("{spoke}/");
        self.addons
            .objects
            .range(prefix.clone()..)
            .take_while(move |(key, _)| key.starts_with(&prefix))
            .map(|(_, addon)| addon.as_ref())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::vocabulary::STATUS_FALSE;
    use serde_json::json;

    pub fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    pub fn spoke(name: &str, labels: serde_json::Value) -> Spoke {
        serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
            "metadata": {"name": name, "namespace": "fleetform-system", "labels": labels,
                "finalizers": ["fleetform.io/hub-cleanup"]},
            "spec": {"hubRef": "hub", "kubeconfig": {"embedded": {}}},
            "status": {"phase": "Running", "agentVersion": "0.1.0"},
        }))
        .unwrap()
    }

    pub fn cluster(name: &str, available: &str) -> ManagedCluster {
        serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": name},
            "spec": {"hubAcceptsClient": true, "taints": [
                {"key": "cluster.open-cluster-management.io/unreachable", "effect": "NoSelect"}]},
            "status": {
                "conditions": [
                    {"type": "ManagedClusterJoined", "status": "True", "reason": "ManagedClusterJoined",
                     "message": "", "lastTransitionTime": "2027-01-15T08:00:00Z"},
                    {"type": "ManagedClusterConditionAvailable", "status": available,
                     "reason": "ManagedClusterLeaseUpdateStopped", "message": "<lease> stopped",
                     "lastTransitionTime": "2027-01-15T08:00:00Z"},
                ],
                "clusterClaims": [{"name": "region", "value": "<eu>"}],
            },
        }))
        .unwrap()
    }

    /// A model of hub `hub` holding `spokes`, each with an Available cluster.
    pub fn model_with(spokes: &[Spoke]) -> Model {
        let mut model = Model::new(["hub".to_string()]);
        for spoke in spokes {
            let name = spoke.metadata.name.clone().unwrap();
            model.observe(
                "hub",
                Observed::Spoke(watcher::Event::Apply(spoke.clone())),
                at(0),
            );
            model.observe(
                "hub",
                Observed::Cluster(watcher::Event::Apply(cluster(&name, "True"))),
                at(0),
            );
        }
        model
    }

    #[test]
    fn a_spokes_row_follows_its_cluster_and_its_availability_becomes_a_timeline() {
        let mut model = model_with(&[spoke("edge", json!({"env": "prod"}))]);
        let row = &model.hubs["hub"].rows["edge"];
        assert_eq!(row.status.state, "ONLINE");
        assert_eq!(row.status.claims, 1);
        assert_eq!(row.labels["env"], "prod");
        let changes = model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("edge", "Unknown"))),
            at(60),
        );
        assert_eq!(
            changes.rows,
            BTreeSet::from([("hub".to_string(), "edge".to_string())])
        );
        let row = &model.hubs["hub"].rows["edge"];
        assert_eq!(row.status.state, "OFFLINE");
        assert_eq!(row.status.available.as_deref(), Some("Unknown"));
        let timeline: Vec<_> = model.hubs["hub"].timelines["edge"]
            .iter()
            .map(|transition| (transition.at, transition.available.as_deref()))
            .collect();
        assert_eq!(timeline, [(at(0), Some("True")), (at(60), Some("Unknown"))]);
        // The same again is no change for anyone.
        let again = model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("edge", "Unknown"))),
            at(61),
        );
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn a_rows_labels_follow_its_spoke_through_the_refreshes_its_cluster_causes() {
        let mut model = model_with(&[spoke("edge", json!({"env": "prod"}))]);
        let labels = |model: &Model| model.hubs["hub"].rows["edge"].labels.clone();
        let prod = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        assert_eq!(labels(&model), prod);
        model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("edge", "False"))),
            at(1),
        );
        assert_eq!(
            model.hubs["hub"].rows["edge"].status.available.as_deref(),
            Some("False")
        );
        assert_eq!(labels(&model), prod);

        // Labels taken off the Spoke go from its row, whether it lists none or omits the field.
        let mut bare = spoke("edge", json!({}));
        bare.metadata.labels = None;
        let changes = model.observe("hub", Observed::Spoke(watcher::Event::Apply(bare)), at(2));
        assert!(
            changes
                .rows
                .contains(&("hub".to_string(), "edge".to_string()))
        );
        assert_eq!(labels(&model), BTreeMap::new());
        model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("edge", "True"))),
            at(3),
        );
        assert_eq!(labels(&model), BTreeMap::new());
        model.observe(
            "hub",
            Observed::Spoke(watcher::Event::Apply(spoke("edge", json!({"env": "dev"})))),
            at(4),
        );
        assert_eq!(labels(&model)["env"], "dev");
    }

    #[test]
    fn a_process_started_later_draws_the_availability_since_the_hub_says_it_began() {
        // Available since at(0), as its condition says; this process starts three hours on.
        let later = at(3 * 3600);
        let mut model = Model::new(["hub".to_string()]);
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(spoke("edge", json!({}))),
            watcher::Event::InitDone,
        ] {
            model.observe("hub", Observed::Spoke(event), later);
        }
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(cluster("edge", "True")),
            watcher::Event::InitDone,
        ] {
            model.observe("hub", Observed::Cluster(event), later);
        }
        let timeline: Vec<_> = model.hubs["hub"].timelines["edge"]
            .iter()
            .map(|transition| (transition.at, transition.available.as_deref()))
            .collect();
        assert_eq!(timeline, [(at(0), Some("True"))]);
    }

    /// An Event about Spoke `edge` at `seconds` (its series' last time), with `reason`.
    fn event(uid: &str, seconds: i64, reason: &str) -> Event {
        serde_json::from_value(json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": uid, "namespace": "fleetform-system", "uid": uid},
            "eventTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(at(seconds)),
            "reason": reason, "type": "Normal", "note": reason,
            "regarding": {"kind": "Spoke", "name": "edge"},
        }))
        .unwrap()
    }

    #[test]
    fn events_are_listed_newest_first_whatever_order_they_arrive_in() {
        let mut model = model_with(&[spoke("edge", json!({}))]);
        for (uid, seconds) in [("c", 30), ("a", 10), ("b", 20)] {
            model.observe(
                "hub",
                Observed::Event(watcher::Event::InitApply(event(uid, seconds, uid))),
                at(40),
            );
        }
        // A repeat of the oldest makes it the newest.
        model.observe(
            "hub",
            Observed::Event(watcher::Event::Apply(event("a", 50, "a again"))),
            at(50),
        );
        let reasons: Vec<&str> = model.hubs["hub"]
            .events_of("Spoke", "edge")
            .map(|line| line.reason.as_str())
            .collect();
        assert_eq!(reasons, ["a again", "c", "b"]);
    }

    #[test]
    fn a_relist_drops_what_was_deleted_while_the_watch_was_down() {
        let mut model = model_with(&[spoke("a", json!({})), spoke("b", json!({}))]);
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(spoke("a", json!({}))),
            watcher::Event::InitDone,
        ] {
            model.observe("hub", Observed::Spoke(event), at(5));
        }
        assert_eq!(
            model.hubs["hub"].rows.keys().collect::<Vec<_>>(),
            ["a"],
            "b went while the watch was down"
        );
        assert!(!model.hubs["hub"].timelines.contains_key("b"));
    }

    #[test]
    fn the_availability_counts_follow_the_rows_through_changes_removals_and_relists() {
        let mut model = model_with(&[
            spoke("a", json!({})),
            spoke("b", json!({})),
            spoke("c", json!({})),
        ]);
        let counts = |model: &Model| {
            let view = &model.hubs["hub"];
            let counted = [Some(STATUS_TRUE), Some(STATUS_FALSE), Some("Unknown"), None]
                .map(|available| view.availability.of(available));
            let recounted =
                [Some(STATUS_TRUE), Some(STATUS_FALSE), Some("Unknown"), None].map(|available| {
                    view.rows
                        .values()
                        .filter(|row| row.status.available.as_deref() == available)
                        .count()
                });
            assert_eq!(counted, recounted, "the counts are the rows'");
            counted
        };
        assert_eq!(counts(&model), [3, 0, 0, 0]);
        let observe = |model: &mut Model, observed| {
            model.observe("hub", observed, at(10));
        };
        observe(
            &mut model,
            Observed::Cluster(watcher::Event::Apply(cluster("b", STATUS_FALSE))),
        );
        observe(
            &mut model,
            Observed::Cluster(watcher::Event::Apply(cluster("b", STATUS_FALSE))),
        );
        assert_eq!(counts(&model), [2, 1, 0, 0], "a change counted once");
        observe(
            &mut model,
            Observed::Cluster(watcher::Event::Delete(cluster("c", STATUS_TRUE))),
        );
        assert_eq!(
            counts(&model),
            [1, 1, 0, 1],
            "a spoke whose cluster went has no availability"
        );
        observe(
            &mut model,
            Observed::Spoke(watcher::Event::Delete(spoke("c", json!({})))),
        );
        assert_eq!(
            counts(&model),
            [1, 1, 0, 0],
            "a removed spoke counts no more"
        );
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(spoke("b", json!({}))),
            watcher::Event::InitDone,
        ] {
            observe(&mut model, Observed::Spoke(event));
        }
        assert_eq!(
            counts(&model),
            [0, 1, 0, 0],
            "a relist drops what went meanwhile"
        );
    }

    #[test]
    fn the_timeline_keeps_a_day_and_a_bounded_number_of_changes() {
        let mut model = model_with(&[spoke("edge", json!({}))]);
        for step in 1..=(TRANSITIONS_PER_SPOKE as i64 * 2) {
            let available = if step % 2 == 0 { "True" } else { "False" };
            model.observe(
                "hub",
                Observed::Cluster(watcher::Event::Apply(cluster("edge", available))),
                at(step * 60),
            );
        }
        let timeline = &model.hubs["hub"].timelines["edge"];
        assert_eq!(timeline.len(), TRANSITIONS_PER_SPOKE);
        let late = at(TIMELINE_SPAN.as_secs() * 3);
        model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("edge", "Unknown"))),
            late,
        );
        let timeline = &model.hubs["hub"].timelines["edge"];
        assert_eq!(
            timeline.len(),
            2,
            "only the change before the day began (its start) and the new one"
        );
        assert_eq!(timeline[1].at, late);
    }

    #[test]
    fn a_spoke_cut_as_watched_shows_as_the_whole_one_does() {
        let mut whole: Spoke = serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
            "metadata": {"name": "edge", "namespace": "fleetform-system",
                "labels": {"env": "prod"}, "annotations": {"note": "x".repeat(500)},
                "finalizers": ["fleetform.io/hub-cleanup"]},
            "spec": {"hubRef": "hub", "kubeconfig": {"secretRef": {"name": "edge", "namespace": "fleetform-system", "key": "k"}},
                "leaseDurationSeconds": 120, "addons": ["observability"],
                "taints": [{"key": "gpu", "effect": "NoSelect"}],
                "availability": {"mode": "poll"}},
            "status": {"phase": "Running", "agentVersion": "0.1.0", "agentConfigHash": "abc",
                "releasedAgent": "abc", "agentDeployment": {"uid": "u", "generation": 2},
                "applied": {"leaseDurationSeconds": 120},
                "conditions": [
                    {"type": "Online", "status": "True", "reason": "Online",
                     "message": "polled", "lastTransitionTime": "2027-01-15T08:00:00Z"},
                    {"type": "Reconciled", "status": "False", "reason": "SpokeUnreachable",
                     "message": "dial tcp: refused", "lastTransitionTime": "2027-01-15T08:00:00Z"}]},
        }))
        .unwrap();
        let mut cut = whole.clone();
        as_shown_spoke(&mut cut);
        assert_eq!(cut.metadata.annotations, None);
        assert!(cut.spec.addons.is_empty() && cut.spec.kubeconfig.secret_ref.is_none());
        assert_eq!(cut.status.as_ref().unwrap().applied, None);

        // The fleet page's row and the spoke page read the same of either.
        let shown = |spoke: Spoke| {
            let model = model_with(&[spoke]);
            let row = model.hubs["hub"].rows["edge"].clone();
            let page = crate::dashboard::pages::spoke_page(&model, "hub", "edge", at(5))
                .map(|page| page.into_string());
            (row, page)
        };
        let (whole_row, whole_page) = shown(whole.clone());
        let (cut_row, cut_page) = shown(cut);
        assert_eq!(cut_row, whole_row);
        assert_eq!(
            (
                whole_row.status.state.as_str(),
                whole_row.status.reason.as_deref()
            ),
            ("Online", Some("SpokeUnreachable")),
            "read from the spec's availability mode and the conditions"
        );
        assert!(
            whole_page
                .as_ref()
                .is_some_and(|page| page.contains("dial tcp: refused"))
        );
        assert_eq!(cut_page, whole_page);
        whole.status = None;
        as_shown_spoke(&mut whole);
        assert_eq!(whole.status, None);
    }

    #[test]
    fn a_cluster_cut_as_watched_shows_as_the_whole_one_does_and_a_lease_as_its_renewal() {
        let mut whole = cluster("edge", "True");
        whole.metadata.labels = Some(BTreeMap::from([("feature".into(), "gpu".into())]));
        let health = crate::api::cluster::NodeHealth {
            total: 3,
            ready: 2,
            ..Default::default()
        };
        whole.metadata.annotations = Some(BTreeMap::from([
            (ANNOTATION_NODE_HEALTH.to_string(), health.to_annotation()),
            ("other".to_string(), "x".repeat(1000)),
        ]));
        whole.spec.managed_cluster_client_configs = vec![crate::api::cluster::ClientConfig {
            url: "https://edge:6443".into(),
            ca_bundle: Some(k8s_openapi::ByteString(vec![7; 1500])),
        }];
        let mut cut = whole.clone();
        as_shown_cluster(&mut cut);
        assert!(cut.spec.managed_cluster_client_configs.is_empty());
        assert_eq!(cut.node_health(), Some(health));
        assert_eq!(
            cut.metadata.annotations.as_ref().map(BTreeMap::len),
            Some(1)
        );

        let lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": CLUSTER_LEASE_NAME, "namespace": "edge", "uid": "u",
                "resourceVersion": "9", "labels": {"a": "b"}},
            "spec": {"holderIdentity": "agent", "leaseDurationSeconds": 60,
                "renewTime": "2027-01-15T08:00:00.000000Z"},
        }))
        .unwrap();
        assert_eq!(
            ShownLease::of(&lease),
            ShownLease {
                cluster: "edge".into(),
                renewed: Some("2027-01-15T08:00:00Z".parse().unwrap()),
            }
        );
        let mut other = lease.clone();
        other.metadata.name = Some("another".into());
        assert_eq!(ShownLease::of(&other).renewed, None);

        // The fleet page's row and the spoke page read the same of either.
        let shown = |cluster: ManagedCluster, lease: Lease| {
            let mut model = model_with(&[spoke("edge", json!({}))]);
            model.observe(
                "hub",
                Observed::Cluster(watcher::Event::Apply(cluster)),
                at(5),
            );
            model.observe("hub", Observed::Lease(watcher::Event::Apply(lease)), at(5));
            let row = model.hubs["hub"].rows["edge"].clone();
            let page = crate::dashboard::pages::spoke_page(&model, "hub", "edge", at(5))
                .map(|page| page.into_string());
            (row, page)
        };
        let (whole_row, whole_page) = shown(whole, lease.clone());
        let (cut_row, cut_page) = shown(cut, lease);
        assert_eq!(
            whole_row.renewed,
            Some("2027-01-15T08:00:00Z".parse().unwrap())
        );
        assert_eq!(cut_row, whole_row);
        assert_eq!(whole_row.status.nodes.map(|nodes| nodes.ready), Some(2));
        assert!(
            whole_page
                .as_ref()
                .is_some_and(|page| page.contains("2 of 3"))
        );
        assert_eq!(cut_page, whole_page);
    }

    #[test]
    fn an_addon_is_kept_as_shown_and_a_relist_forgets_one_gone_meanwhile() {
        let addon = |name: &str, available: &str| -> ManagedClusterAddOn {
            serde_json::from_value(json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
                "metadata": {"name": name, "namespace": "edge", "uid": "u",
                    "labels": {"fleetform.io/managed-by": "fleetform"},
                    "annotations": {"note": "x".repeat(500)}},
                "spec": {"installNamespace": "from-spec",
                    "configs": [{"group": "g", "resource": "r", "name": "c"}]},
                "status": {"namespace": "from-status",
                    "registrations": [{"signerName": "kubernetes.io/kube-apiserver-client",
                        "subject": {"user": "u", "groups": ["g"]}}],
                    "conditions": [{"type": "Available", "status": available,
                        "reason": format!("Reason{available}"),
                        "message": "m", "lastTransitionTime": "2027-01-15T08:00:00Z"}]},
            }))
            .unwrap()
        };
        let mut model = model_with(&[spoke("edge", json!({}))]);
        for (name, available) in [("metrics", "False"), ("logging", "True")] {
            let changes = model.observe(
                "hub",
                Observed::Addon(watcher::Event::Apply(addon(name, available))),
                at(5),
            );
            assert!(
                changes
                    .rows
                    .contains(&("hub".to_string(), "edge".to_string()))
            );
        }
        let row = model.hubs["hub"].rows["edge"].clone();
        assert_eq!((row.status.addons, row.status.addons_available), (2, 1));
        let shown: Vec<&ShownAddon> = model.hubs["hub"].addons_of("edge").collect();
        assert_eq!(
            shown[1],
            &ShownAddon {
                cluster: "edge".into(),
                name: "metrics".into(),
                install_namespace: Some("from-status".into()),
                available: Some(("False".into(), "ReasonFalse".into())),
            }
        );
        // One in OCM's default namespace keeps no copy of its name.
        let default = ShownAddon::of(&ManagedClusterAddOn::new("x", Default::default()));
        assert_eq!(default.install_namespace, None);
        assert_eq!(default.install_namespace(), DEFAULT_ADDON_INSTALL_NAMESPACE);
        let page = crate::dashboard::pages::spoke_page(&model, "hub", "edge", at(5))
            .unwrap()
            .into_string();
        assert!(
            page.contains("ReasonFalse") && page.contains("from-status"),
            "{page}"
        );

        // A relist that no longer lists `logging`: it goes, and the row counts one addon.
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(addon("metrics", "True")),
            watcher::Event::InitDone,
        ] {
            model.observe("hub", Observed::Addon(event), at(6));
        }
        let row = &model.hubs["hub"].rows["edge"];
        assert_eq!((row.status.addons, row.status.addons_available), (1, 1));
    }
}
