//! The lifecycle reconciler's loop (seed 004, DESIGN §4.6): a controller over Spokes that gathers
//! [`Facts`](super::lifecycle::Facts), asks [`decide`] what to do, does it and reports the phase
//! and conditions on the Spoke. It is woken by the Spoke, its ManagedCluster, addons and
//! ManifestWorks, and by changes of Hubs and AddOns; a pass that acted comes back at once, a
//! settled one after [`RESYNC`] (the spoke side cannot be watched from here), or later in a large
//! fleet ([`resync_for`]). Hubs, AddOns and ManagedClusters are read from those watches' stores,
//! not asked of the hub by every pass.
//!
//! A deletion waits for the spoke's namespace on the hub to finish terminating: the namespace
//! (its deletion's progress and end) wakes the pass, which looks again ever more rarely without
//! one ([`lifecycle::deletion_look_again`]).
//!
//! A second controller keeps Hubs: their finalizer, phase, and on deletion the cascade to their
//! spokes first, as [`hub_lifecycle`] decides; and their agent rollout ([`super::rollout`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument, warn};

use super::clients::SpokeClients;
use super::cluster_sync::{self, WantedCluster};
use super::facts::{self, Gathered};
use super::hub_lifecycle;
use super::install::{self, EndpointError, HubEndpoint, KnownEndpoint};
use super::lifecycle::{self, Action, SpokeCleanup, UnjoinBy, decide, unjoin_outcome};
use super::rollout::RolloutMetrics;
use super::tokens::{BOOTSTRAP_TOKEN_TTL, TokenUpkeep, token_upkeep, usable_token};
use super::uninstall;
use crate::access::Access;
use crate::api::bootstrap_token::{
    BOOTSTRAP_TOKEN_NAMESPACE, BootstrapToken, expiration_patch, token_cluster, token_secret,
};
use crate::api::fleet::{AddOn, AppliedSettings, Hub, Phase, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::{
    AGENT_NAMESPACE, CONDITION_RECONCILED, FINALIZER_HUB_CLEANUP, LABEL_CLUSTER_NAME,
    REASON_UNJOINED_BY_HUB, STATUS_FALSE,
};
use crate::api::{ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn, ManifestWork};
use crate::events::{self, EventType, Reporter};
use crate::runtime::conditions::{conditions_hold, set_conditions, set_conditions_from};
use crate::runtime::controller::ErrorPolicy;
use crate::runtime::error::is_not_found;
use crate::runtime::error::{Category, Failure, KubeError};
use crate::runtime::finalizers::{delete_if_present, set_finalizer, set_finalizers};
use crate::runtime::index::{self, Index};
use crate::runtime::metrics::ControllerMetrics;
use crate::runtime::watch::{
    Share, cached_or_listed, cached_or_read, fact_changes, share, tee, without_managed_fields,
};

/// Field manager of the reconciler's writes.
pub const FIELD_MANAGER: &str = "fleetform";

/// What the reconciler runs against.
#[derive(Clone)]
pub struct ReconcilerConfig {
    /// The hub.
    pub client: Client,
    /// How the reconciler reaches spokes (their kubeconfig sources).
    pub access: Access,
    /// How agents reach this hub when its Hub document names no `apiServer` or CA.
    pub known_endpoint: KnownEndpoint,
    /// Where the reconciler counts (`Default`: nowhere).
    pub metrics: ReconcilerMetrics,
}

/// What the reconciler counts; cheap to clone (every metric is shared).
#[derive(Clone, Debug, Default)]
pub struct ReconcilerMetrics {
    /// The passes of the Spoke and Hub controllers.
    pub controllers: ControllerMetrics,
    /// Where each hub's agent rollout stands.
    pub rollout: RolloutMetrics,
}

impl std::fmt::Debug for ReconcilerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcilerConfig")
            .field("access", &self.access)
            .field("known_endpoint", &self.known_endpoint.server)
            .finish_non_exhaustive()
    }
}

/// Why a pass failed; the Spoke is retried.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("cannot reach the spoke: {0}")]
    Access(String),
    #[error("on the spoke: {0}")]
    Spoke(String),
    #[error("hub {0} is not declared (no Hub object)")]
    NoHub(String),
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    #[error("Hub {hub}: caBundleSecretRef {namespace}/{name} key {key:?}: {message}")]
    CaSecret {
        hub: String,
        namespace: String,
        name: String,
        key: String,
        message: String,
    },
}

impl Failure for ReconcileError {
    fn kube(&self) -> Option<&KubeError> {
        match self {
            ReconcileError::Kube(err) => Some(err),
            _ => None,
        }
    }
}

impl ReconcileError {
    /// A call to the spoke's API server that failed with `err`, said as `message`: `Access` when
    /// the server did not answer (the spoke's phase then follows its ManagedCluster), `Spoke`
    /// when it answered with an error.
    pub(crate) fn on_spoke(message: String, err: &kube::Error) -> Self {
        match Category::of(err) {
            Category::Unreachable | Category::Timeout => ReconcileError::Access(message),
            _ => ReconcileError::Spoke(message),
        }
    }

    /// What kind of failure this is, for the Spoke's `Reconciled` condition and its Event: an
    /// operator reads what to fix from it.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Kube(err) => match err.category() {
                Category::Forbidden => "Forbidden",
                Category::NotFound => "NotFound",
                Category::Unreachable | Category::Timeout => "HubUnreachable",
                _ => "HubApiError",
            },
            ReconcileError::Access(_) => "SpokeUnreachable",
            ReconcileError::Spoke(message) if message.contains("forbidden") => "SpokeForbidden",
            ReconcileError::Spoke(_) => "SpokeApiError",
            ReconcileError::NoHub(_) => "HubNotDeclared",
            ReconcileError::Endpoint(_) => "HubEndpointUnknown",
            ReconcileError::CaSecret { .. } => "HubCABundleUnreadable",
        }
    }
}

struct Context {
    config: ReconcilerConfig,
    /// The Spokes, kept by the one watch of them that wakes both controllers (before either
    /// sees the change: a Hub's pass reads its Spokes from the store the change is in).
    spokes: Store<Spoke>,
    /// The Hubs, as the Spoke controller's watch of them keeps them.
    hubs: Store<Hub>,
    /// When each Hub's pass last began.
    hub_passes: HubPasses,
    /// The ClusterManagementAddOns, as the watch of them keeps them: Spoke and Hub passes read
    /// the AddOn documents there (a list of them per Hub pass was a request per Spoke change,
    /// two per joining spoke).
    addons: Store<ClusterManagementAddOn>,
    /// The ManagedClusters, as the watch that wakes passes on them keeps them
    /// ([`cluster_kept`]; in a hub process, the hub loops' cache too).
    clusters: Store<ManagedCluster>,
    /// The ManagedClusterAddOns, as the watch that wakes passes on them keeps them
    /// ([`addon_kept`]), and which of them each cluster's namespace holds.
    cluster_addons: Store<ManagedClusterAddOn>,
    addons_by_cluster: Index<ManagedClusterAddOn>,
    clients: SpokeClients,
    /// Publishes the reconciler's Events.
    events: Reporter,
    /// The Spoke controller's error policy, which also remembers the Spokes that are failing.
    errors: Arc<ErrorPolicy>,
    /// The hub's bootstrap token Secrets of spokes, as the watch that wakes a spoke's pass on
    /// them keeps them, and which are each spoke's.
    tokens: Store<Secret>,
    tokens_by_cluster: Index<Secret>,
    /// The looks again promised by passes that acted.
    look_again: Mutex<LookAgain>,
    /// The Spokes whose status a pass wrote, as written, until the store has their write.
    own_writes: OwnWrites,
    /// The ManagedCluster writes of passes that reported what they wrote, until their watch
    /// event (which wakes no pass) comes.
    cluster_writes: ClusterWrites,
    /// The agents' Roles on their Spoke and Hub this process wrote, by cluster, with the Hub
    /// (see [`grant_spoke_access`]).
    granted: Mutex<HashMap<String, String>>,
}

/// The Spokes a pass wrote, by name, as written ([`OwnWrite`]).
#[derive(Default)]
struct OwnWrites(Mutex<HashMap<String, OwnWrite>>);

/// A Spoke as a pass last wrote it, with the resourceVersions it supersedes: the copy its
/// first write started from, and those of this reconciler's writes since (a pass that adds
/// finalizers writes the status next).
type OwnWrite = (Vec<Option<String>>, Arc<Spoke>);

impl OwnWrites {
    /// The Spoke a pass starts from: the store's copy, or this reconciler's own last write
    /// while the store still holds a copy that write superseded. A pass asks for the next one
    /// when it acted, which may come before the store has the write: from the store's copy,
    /// the next write's 409 Conflict cost it a read and a write more (three requests per
    /// joining spoke), and what was already written looked unwritten. Any other copy in the
    /// store came after that write, and is the one to start from.
    fn current(&self, stored: Arc<Spoke>) -> Arc<Spoke> {
        let mut writes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let name = stored.name_any();
        match writes.get(&name) {
            Some((superseded, written))
                if superseded.contains(&stored.metadata.resource_version) =>
            {
                written.clone()
            }
            Some(_) => {
                writes.remove(&name);
                stored
            }
            None => stored,
        }
    }

    /// Remembers `written`, a pass's write of `from` (the copy it started from), for
    /// [`Self::current`]. A Spoke being deleted is not remembered: its last pass may be its
    /// last, and nothing would forget it.
    fn wrote(&self, from: &Spoke, mut written: Spoke) {
        if written.metadata.deletion_timestamp.is_some() {
            return;
        }
        without_managed_fields(&mut written);
        let mut writes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let name = written.name_any();
        let mut superseded = match writes.remove(&name) {
            Some((earlier, last))
                if last.metadata.resource_version == from.metadata.resource_version =>
            {
                earlier
            }
            _ => Vec::new(),
        };
        superseded.push(from.metadata.resource_version.clone());
        writes.insert(name, (superseded, Arc::new(written)));
    }
}

impl Context {
    /// Whether this process wrote the agent's Role of `cluster` on its Spoke and `hub`.
    fn granted(&self, cluster: &str, hub: &str) -> bool {
        self.granted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(cluster)
            .is_some_and(|granted| granted == hub)
    }

    /// Remembers the agent's Role of `cluster` as written for `hub`, or (`None`) as deleted.
    fn granted_now(&self, cluster: &str, hub: Option<&str>) {
        let mut granted = self
            .granted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match hub {
            Some(hub) => granted.insert(cluster.to_string(), hub.to_string()),
            None => granted.remove(cluster),
        };
    }

    /// The AddOn documents the hub holds: from the store of the watch of them once it has
    /// listed them, read afresh until then (a pass must not take "not listed yet" for none).
    async fn addon_documents(&self) -> Result<BTreeMap<String, AddOn>, ReconcileError> {
        let api = Api::<ClusterManagementAddOn>::all(self.config.client.clone());
        let cmas = cached_or_listed(&self.addons, &api)
            .await
            .map_err(KubeError::on("ClusterManagementAddOns", "list"))?;
        Ok(facts::addon_documents(cmas.iter().map(|cma| &**cma)))
    }

    /// The ManagedCluster `name`: from the store of the watch of them once it has listed them,
    /// read afresh until then. A pass woken by its cluster's change finds the change there (the
    /// store takes an event before it wakes the pass); one a pass's own write made arrives with
    /// the event that wakes the next.
    async fn managed_cluster(&self, name: &str) -> Result<Option<ManagedCluster>, ReconcileError> {
        let clusters = Api::<ManagedCluster>::all(self.config.client.clone());
        Ok(cached_or_read(&self.clusters, &clusters, name)
            .await
            .map_err(KubeError::on(format!("ManagedCluster {name}"), "read"))?)
    }

    /// The ManagedClusterAddOns in the namespace of the cluster `name`: from the store of the
    /// watch of them once it has listed them (as [`Self::managed_cluster`]), listed until then.
    async fn cluster_addons(&self, name: &str) -> Result<Vec<ManagedClusterAddOn>, ReconcileError> {
        if let Some(addons) = self.addons_by_cluster.listed(&self.cluster_addons, name) {
            return Ok(addons);
        }
        Ok(
            Api::<ManagedClusterAddOn>::namespaced(self.config.client.clone(), name)
                .list(&ListParams::default())
                .await
                .map_err(KubeError::on(format!("addons of {name}"), "list"))?
                .items,
        )
    }

    /// The bootstrap tokens of the spoke `name`: from the store of the watch of them once it
    /// has listed them (as [`Self::managed_cluster`]), listed until then.
    async fn tokens(&self, name: &str) -> Result<Vec<Secret>, ReconcileError> {
        if let Some(tokens) = self.tokens_by_cluster.listed(&self.tokens, name) {
            return Ok(tokens);
        }
        facts::tokens(&self.config.client, name).await
    }
}

/// How many Spoke passes run at once.
const SPOKE_PASSES_AT_ONCE: u16 = 64;

/// At most this many settled Spokes a second are looked at again without a change: at 30 s
/// each (`RESYNC`), 10,000 settled spokes took 333 passes a second, ahead of the spokes still
/// joining.
const RESYNCS_PER_SECOND: f64 = 50.0;

/// The resourceVersion of each ManagedCluster as a pass that accepted it or synced its settings
/// wrote it, by name, until the watch brings that version. The pass reported what it wrote
/// (accepted, the lease duration it applied), and what comes next (the agent's join) changes
/// the cluster again: the write's own event wakes no pass, where it woke one per spoke that
/// read the spoke and wrote nothing (10,000 in a fleet's lease change).
#[derive(Clone, Default)]
struct ClusterWrites(Arc<Mutex<HashMap<String, String>>>);

impl ClusterWrites {
    /// Remembers `written`, the server's answer to a pass's `patch` of `read`, the copy the
    /// pass decided from, if it is that copy with the patch and nothing else a pass acts on:
    /// the write is not guarded (see [`cluster_sync::patch`]), so another's change (the
    /// agent's join, a deletion, a taint) may have come first, and its version must wake a
    /// pass. A patch that changed nothing leaves the version as it was: nothing to remember.
    fn wrote(&self, read: &ManagedCluster, patch: &serde_json::Value, written: &ManagedCluster) {
        use crate::api::vocabulary::{CONDITION_AVAILABLE, CONDITION_JOINED};
        let reported = |cluster: &ManagedCluster| {
            [CONDITION_JOINED, CONDITION_AVAILABLE].map(|type_| {
                cluster
                    .condition(type_)
                    .map(|c| (c.status.clone(), c.last_transition_time.clone()))
            })
        };
        let only_this_patch = reported(read) == reported(written)
            && read.metadata.deletion_timestamp == written.metadata.deletion_timestamp
            && (patch["spec"].get("taints").is_some() || read.spec.taints == written.spec.taints);
        let Some(version) = written.resource_version() else {
            return;
        };
        if only_this_patch && read.metadata.resource_version.as_ref() != Some(&version) {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(written.name_any(), version);
        }
    }

    /// Whether `cluster` is a pass's write coming back by watch; forgotten once it has. A
    /// version seen before the write's stays remembered: the write's comes after it.
    fn is_echo(&self, cluster: &ManagedCluster) -> bool {
        let mut writes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let name = cluster.name_any();
        let echo = cluster.metadata.resource_version.is_some()
            && writes.get(&name) == cluster.metadata.resource_version.as_ref();
        if echo || cluster.metadata.deletion_timestamp.is_some() {
            writes.remove(&name);
        }
        echo
    }
}

/// Whether a pass that took `actions` asks for the next one soon ([`lifecycle::POLL`]), to read
/// and report what they changed. Not for a wait (`Blocked`): that would spin. Not for accepting
/// the cluster or syncing its settings: the pass reported them, and the cluster's next change
/// (the agent's join) comes by watch.
fn looks_again_soon(actions: &[Action]) -> bool {
    actions
        .iter()
        .any(|action| !matches!(action, Action::Blocked(_)) && !action.writes_cluster_only())
}

/// When each Spoke whose pass acted on the spoke itself (its agent installed or upgraded, its
/// side of an unjoin) is to be looked at again: [`lifecycle::POLL`] after that pass, whatever ran
/// in between. A pass woken by an event within that time may come before the action's effect
/// shows on the spoke (an agent Deployment put back, not yet running), and the controller runs
/// one pass for the event and the look again (its queue keeps the earlier time): without this,
/// that pass asks for the resync, and what changed on the spoke after it, which no watch here
/// sees, waits for it.
#[derive(Default)]
struct LookAgain {
    due: HashMap<String, Instant>,
}

impl LookAgain {
    /// After a pass of `spoke` ending `now`, which `acted` on the spoke or not: how soon the
    /// spoke must be looked at again for what this pass or an earlier one did, if at all.
    fn after_pass(&mut self, spoke: &str, acted: bool, now: Instant) -> Option<Duration> {
        if acted {
            // Kept only while due: a Spoke deleted meanwhile leaves nothing behind.
            self.due.retain(|_, due| *due > now);
            self.due.insert(spoke.to_string(), now + lifecycle::POLL);
            return Some(lifecycle::POLL);
        }
        let due = *self.due.get(spoke)?;
        if due > now {
            return Some(due - now);
        }
        self.due.remove(spoke);
        None
    }
}

/// When a Spoke whose pass asks to be looked at again `after` is: a settled one (`RESYNC` or
/// more) no sooner than the fleet of `spokes` allows at [`RESYNCS_PER_SECOND`].
fn resync_for(after: Duration, spokes: usize) -> Duration {
    if after < lifecycle::RESYNC {
        return after;
    }
    after.max(Duration::from_secs_f64(spokes as f64 / RESYNCS_PER_SECOND))
}

/// A Hub's pass reads every spoke of its hub and any of them changing wakes it: passes of a hub
/// begin at least this long apart per spoke it has (10,000 spokes: 1 s), so that they take a
/// share of the process that does not grow with the fleet, where one for each change of a
/// joining fleet cost the square of it (and starved the Spoke passes past 3,000 spokes).
const HUB_PASS_GAP_PER_SPOKE: Duration = Duration::from_micros(100);

/// When each Hub's last pass began ([`HUB_PASS_GAP_PER_SPOKE`]).
#[derive(Default)]
struct HubPasses(Mutex<HashMap<String, Instant>>);

impl HubPasses {
    /// How long a pass of `hub`, which has `spokes` spokes, waits before it may begin; `None`
    /// when it may begin `now`, which is then kept as its last.
    fn wait(&self, hub: &str, spokes: usize, now: Instant) -> Option<Duration> {
        let gap = HUB_PASS_GAP_PER_SPOKE.saturating_mul(u32::try_from(spokes).unwrap_or(u32::MAX));
        let mut passes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(wait) = passes
            .get(hub)
            .and_then(|last| (*last + gap).checked_duration_since(now))
            .filter(|wait| !wait.is_zero())
        {
            return Some(wait);
        }
        passes.insert(hub.to_string(), now);
        None
    }
}

/// How long a Spoke whose pass failed waits at first; it doubles with each failure in a row.
const FIRST_BACKOFF: Duration = Duration::from_secs(2);
/// The longest wait before a failing Spoke or Hub is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The watches the reconciler reads and is woken by that a hub process shares with its hub
/// loops, one watch and cache of each kind per process; each a share taken before any is
/// polled, which the reconciler polls (it runs whether or not the hub loops find their CRDs).
/// Every cache keeps its objects without their managed fields, which no pass reads (a Spoke's
/// were most of what the store held of it).
pub(crate) struct Watches {
    pub clusters: Share<ManagedCluster>,
    pub cluster_addons: Share<ManagedClusterAddOn>,
    pub spokes: Share<Spoke>,
    pub hubs: Share<Hub>,
    /// The ClusterManagementAddOns, carrying fleetform's AddOn documents.
    pub documents: Share<ClusterManagementAddOn>,
    /// The spokes' bootstrap token Secrets ([`token_watch`]), and which are each cluster's.
    pub tokens: Share<Secret>,
    pub tokens_by_cluster: Index<Secret>,
    /// The cluster namespaces (those labelled with their cluster's name).
    pub namespaces: Share<Namespace>,
}

impl Watches {
    /// Watches of each kind the reconciler reads, its own.
    pub(crate) fn new(client: &Client) -> Self {
        Self::keeping_namespaces(client, namespace_kept)
    }

    /// [`Watches::new`], its cache of the cluster namespaces keeping what `cut` leaves (at
    /// least what [`namespace_kept`] does): for whoever else reads that cache.
    pub(crate) fn keeping_namespaces(client: &Client, cut: fn(&mut Namespace)) -> Self {
        let (tokens, tokens_by_cluster) = token_watch(client.clone(), without_managed_fields);
        Watches {
            clusters: cluster_watch(client.clone()),
            cluster_addons: addon_watch(client.clone()),
            spokes: spoke_watch(client.clone()),
            hubs: hub_watch(client.clone()),
            documents: document_watch(client.clone()),
            tokens,
            tokens_by_cluster,
            namespaces: namespace_watch(client.clone(), cut),
        }
    }
}

/// Runs the Spoke and Hub controllers until `shutdown`, with watches of their own.
pub async fn run(config: ReconcilerConfig, shutdown: CancellationToken) {
    let watches = Watches::new(&config.client);
    run_sharing(config, watches, shutdown).await;
}

/// [`run`], woken by and reading `watches` (a hub process's, shared with its hub loops).
pub(crate) async fn run_sharing(
    config: ReconcilerConfig,
    watches: Watches,
    shutdown: CancellationToken,
) {
    let Watches {
        clusters,
        cluster_addons,
        spokes,
        mut hubs,
        mut documents,
        tokens,
        tokens_by_cluster,
        namespaces,
    } = watches;
    let Share {
        store: cluster_addons,
        events: cluster_addon_events,
    } = cluster_addons;
    let client = config.client.clone();
    // One watch of the Spokes for both controllers: the Hub's is woken by the same events
    // and its passes read the same store (a second watch cost a second copy of the fleet).
    let Share {
        store,
        events: spoke_events,
    } = spokes;
    let (spoke_events, hub_spoke_events) = tee(spoke_events);
    let spokes = spoke_events.applied_objects();
    // A Spoke wakes its pass only when someone else changed it (`spoke_changes`). Passes at
    // once: a fleet declared all at once would otherwise start a pass for every spoke together,
    // each holding what it gathered while the sync's writes and the joins already under way
    // wait behind them.
    let controller = Controller::for_stream(
        spokes.predicate_filter(spoke_changes, Default::default()),
        store.clone(),
    )
    .with_config(kube::runtime::controller::Config::default().concurrency(SPOKE_PASSES_AT_ONCE));
    let hub_errors = ErrorPolicy::counted(
        "hub reconciler",
        FIRST_BACKOFF,
        MAX_BACKOFF,
        &config.metrics.controllers,
    );
    let errors = ErrorPolicy::counted(
        "lifecycle reconciler",
        FIRST_BACKOFF,
        MAX_BACKOFF,
        &config.metrics.controllers,
    );
    let rollout_metrics = config.metrics.rollout.clone();
    // One store of the Hubs both controllers read: the Hub controller's copy of the watch's
    // events drives it, and the Spoke controller is woken by its own.
    let [hub_loop_hubs] = hubs.copies();
    let Share {
        store: hubs,
        events: hub_events,
    } = hubs;
    // One store of the AddOn documents both controllers' passes read, and its events for each.
    let [hub_documents] = documents.copies();
    let Share {
        store: addons,
        events: addon_events,
    } = documents;
    let Share {
        store: clusters,
        events: cluster_events,
    } = clusters;
    let cluster_writes = ClusterWrites::default();
    let echoes = cluster_writes.clone();
    let addons_by_cluster = Index::new(index::namespace::<ManagedClusterAddOn>);
    let addons_indexed = addons_by_cluster.clone();
    let Share {
        store: tokens,
        events: token_events,
    } = tokens;
    let ctx = Arc::new(Context {
        hubs,
        addons,
        clusters,
        cluster_addons,
        addons_by_cluster,
        clients: SpokeClients::new(config.access.clone()),
        events: Reporter::new(client.clone(), FIELD_MANAGER, "fleetform-hub"),
        config,
        spokes: store.clone(),
        hub_passes: HubPasses::default(),
        errors,
        tokens,
        tokens_by_cluster,
        look_again: Mutex::default(),
        own_writes: OwnWrites::default(),
        cluster_writes: cluster_writes.clone(),
        granted: Mutex::default(),
    });
    let events = ctx.events.clone();
    let in_namespace = |namespace: Option<String>| {
        namespace.map(|name| ObjectRef::<Spoke>::new(&name).within(SYSTEM_NAMESPACE))
    };
    let (spokes_of_hubs, spokes_of_addons) = (store.clone(), store.clone());
    let hub_triggers = HubTriggers::default();
    let spoke_loop = controller
        .watches_stream(
            // Each one that changes what a pass reads of it, and each deleted: an agent's
            // status reports (claims, capacity, version, heartbeats, other conditions) wake no
            // pass.
            fact_changes(cluster_events, cluster_facts)
                .try_filter(move |cluster| std::future::ready(!echoes.is_echo(cluster))),
            |cluster| Some(ObjectRef::new(&cluster.name_any()).within(SYSTEM_NAMESPACE)),
        )
        .watches_stream(
            cluster_addon_events
                .inspect_ok(move |event| addons_indexed.observe(event))
                .touched_objects(),
            move |addon| in_namespace(addon.namespace()),
        )
        .watches(
            Api::<ManifestWork>::all(client.clone()),
            watcher::Config::default(),
            move |work| in_namespace(work.namespace()),
        )
        // A spoke's bootstrap tokens: a pass reads them from this watch's store, and one made or
        // deleted wakes the spoke's pass (which deletes them once the spoke holds its
        // certificate, whenever the store shows them).
        .watches_stream(token_events.touched_objects(), |token| {
            token_cluster(&token).map(|cluster| ObjectRef::new(cluster).within(SYSTEM_NAMESPACE))
        })
        // An unjoin waits for the cluster's namespace to finish terminating: each step of its
        // deletion (the namespace controller's conditions, its end) wakes the Spoke's pass.
        .watches_stream(
            namespaces.events.touched_objects().try_filter(|namespace| {
                std::future::ready(namespace.metadata.deletion_timestamp.is_some())
            }),
            |namespace| Some(ObjectRef::new(&namespace.name_any()).within(SYSTEM_NAMESPACE)),
        )
        // A Hub concerns every spoke when what it says changes (its generation), not on its own
        // status writes; and a spoke its rollout releases gets its agent, addons and lease
        // duration now, not at its next resync: the spokes in progress are looked at whenever
        // that set changes. One watch of the Hubs also keeps the store passes read them from
        // (a Hub's status names every spoke: read afresh by each pass, it cost the square of
        // the fleet).
        .watches_stream(hub_events.applied_objects(), move |hub: Hub| {
            hub_triggers.wakes(&hub, &spokes_of_hubs)
        })
        // The store passes read the AddOn documents from, too.
        .watches_stream(
            addon_events
                .applied_objects()
                .predicate_filter(addon_spec, Default::default()),
            move |_| every_spoke(&spokes_of_addons),
        )
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(
            ctx.errors.measured(reconcile_spoke),
            ctx.errors.policy(),
            ctx.clone(),
        )
        .for_each(ctx.errors.outcomes());
    let hub_controller =
        Controller::for_stream(hub_loop_hubs.events.applied_objects(), hub_loop_hubs.store);
    let hubs = hub_controller.store();
    let hub_loop = hub_controller
        // A Spoke wakes its Hub's pass when what the pass reads of it changes (`hub_facts`),
        // not on every status write: a pass runs over every spoke of the hub.
        .watches_stream(fact_changes(hub_spoke_events, hub_facts), |spoke| {
            Some(ObjectRef::new(&spoke.spec.hub_ref).within(SYSTEM_NAMESPACE))
        })
        // Which addons a spoke is to have, and so its rollout target, follows the AddOn
        // documents; the Hub's pass reads them from the same store as the Spokes' passes.
        .watches_stream(
            hub_documents
                .events
                .applied_objects()
                .predicate_filter(addon_spec, Default::default()),
            move |_| {
                hubs.state()
                    .iter()
                    .map(|hub| ObjectRef::from(&**hub))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(hub_errors.measured(reconcile_hub), hub_errors.policy(), ctx)
        .for_each(hub_errors.outcomes());
    futures::join!(spoke_loop, hub_loop);
    events.flush_at_stop().await;
    // Another replica decides the rollouts from now on.
    rollout_metrics.clear();
}

/// What of a Spoke wakes its pass: what git or a person changes (generation, labels,
/// annotations), its finalizers and deletion, and what others report in its status (the
/// agent's PivotComplete, version and Deployment as it sees it, the observer's conditions). Not what its own passes write
/// there (phase, observed generation, applied settings, released agent, their conditions): a
/// pass wrote those from what it read, and one that changed anything asks for the next pass
/// itself (`spoke_pass`).
fn spoke_changes(spoke: &Spoke) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let meta = &spoke.metadata;
    meta.generation.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp
        .as_ref()
        .map(|at| at.0.to_string())
        .hash(&mut hasher);
    if let Some(status) = &spoke.status {
        status.agent_version.hash(&mut hasher);
        status.agent_config_hash.hash(&mut hasher);
        // An edit or removal of the agent on the spoke, which no watch here sees.
        status.agent_deployment.hash(&mut hasher);
        for condition in status
            .conditions
            .iter()
            .filter(|condition| !lifecycle::OWN_CONDITIONS.contains(&condition.type_.as_str()))
        {
            condition.type_.hash(&mut hasher);
            condition.status.hash(&mut hasher);
            condition.reason.hash(&mut hasher);
            condition.message.hash(&mut hasher);
            condition.observed_generation.hash(&mut hasher);
            condition
                .last_transition_time
                .0
                .to_string()
                .hash(&mut hasher);
        }
    }
    Some(hasher.finish())
}

/// What a Hub's pass reads of a Spoke ([`hub_lifecycle::Facts`], [`super::rollout::run`]): its
/// hub, spec (its generation) and labels, whether it is being deleted, its phase, and the
/// settings its status reports it has (agent, addons, lease duration, addons not Available).
fn hub_facts(spoke: &Spoke) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    spoke.spec.hub_ref.hash(&mut hasher);
    spoke.metadata.generation.hash(&mut hasher);
    spoke.metadata.labels.hash(&mut hasher);
    spoke
        .metadata
        .deletion_timestamp
        .is_some()
        .hash(&mut hasher);
    if let Some(status) = &spoke.status {
        status.phase.hash(&mut hasher);
        status.agent_config_hash.hash(&mut hasher);
        status.applied.hash(&mut hasher);
    }
    hasher.finish()
}

/// What a pass reads of a ManagedClusterAddOn (which it is, fleetform's mark, where it installs
/// and whether it is Available: its conditions) and the hub's registrations loop reads of it
/// (one cache serves both in a hub process: its `status.registrations`); its managed fields and
/// the rest of its status are cut.
pub(crate) fn addon_kept(addon: &mut ManagedClusterAddOn) {
    without_managed_fields(addon);
    if let Some(status) = addon.status.as_mut() {
        *status = crate::api::addon::ManagedClusterAddOnStatus {
            conditions: std::mem::take(&mut status.conditions),
            registrations: std::mem::take(&mut status.registrations),
            ..Default::default()
        };
    }
}

/// A watch of the hub's ManagedClusterAddOns for one loop, cut by [`addon_kept`].
pub(crate) fn addon_watch(client: Client) -> Share<ManagedClusterAddOn> {
    share(
        Api::<ManagedClusterAddOn>::all(client),
        watcher::Config::default(),
        addon_kept,
    )
}

/// Cuts a ManagedCluster to what a pass reads of it ([`facts::gather`], [`cluster_sync`]) and
/// the hub loops read of it (one cache serves both in a hub process): not its managed fields,
/// nor what its agent reports of the spoke (capacity, allocatable, version, claims, and the
/// URLs and CA bundles it is reached at, which no loop reads: about a kilobyte a cluster) or the
/// namespaces its cluster sets manage.
pub(crate) fn cluster_kept(cluster: &mut ManagedCluster) {
    without_managed_fields(cluster);
    cluster.spec.managed_cluster_client_configs = Vec::new();
    if let Some(status) = cluster.status.as_mut() {
        status.capacity.clear();
        status.allocatable.clear();
        status.version = None;
        status.cluster_claims.clear();
        status.managed_namespaces.clear();
    }
}

/// A watch of the Spokes for one loop, without their managed fields.
pub(crate) fn spoke_watch(client: Client) -> Share<Spoke> {
    share(
        Api::<Spoke>::namespaced(client, SYSTEM_NAMESPACE),
        watcher::Config::default(),
        without_managed_fields,
    )
}

/// A watch of the Hubs for one loop, without their managed fields.
pub(crate) fn hub_watch(client: Client) -> Share<Hub> {
    share(
        Api::<Hub>::namespaced(client, SYSTEM_NAMESPACE),
        watcher::Config::default(),
        without_managed_fields,
    )
}

/// A watch of the ClusterManagementAddOns (the AddOn documents they carry) for one loop,
/// without their managed fields.
pub(crate) fn document_watch(client: Client) -> Share<ClusterManagementAddOn> {
    share(
        Api::<ClusterManagementAddOn>::all(client),
        watcher::Config::default(),
        without_managed_fields,
    )
}

/// A watch of the spokes' bootstrap token Secrets (those labelled with their cluster's name),
/// each cut by `cut`, and an index of them by cluster fed as the watch is polled.
pub(crate) fn token_watch(client: Client, cut: fn(&mut Secret)) -> (Share<Secret>, Index<Secret>) {
    index::share_indexed(
        Api::<Secret>::namespaced(client, BOOTSTRAP_TOKEN_NAMESPACE),
        watcher::Config::default().labels(LABEL_CLUSTER_NAME),
        cut,
        token_cluster,
    )
}

/// A watch of the cluster namespaces (those labelled with their cluster's name), each cut by
/// `cut`.
pub(crate) fn namespace_watch(client: Client, cut: fn(&mut Namespace)) -> Share<Namespace> {
    share(
        Api::<Namespace>::all(client),
        watcher::Config::default().labels(LABEL_CLUSTER_NAME),
        cut,
    )
}

/// Cuts a cluster namespace to what wakes a pass on it: which it is and whether it is being
/// deleted (a pass reads the rest afresh). Its labels, annotations, managed fields, spec and
/// status are cut.
pub(crate) fn namespace_kept(namespace: &mut Namespace) {
    let meta = &mut namespace.metadata;
    meta.managed_fields = None;
    meta.labels = None;
    meta.annotations = None;
    namespace.spec = None;
    namespace.status = None;
}

/// A watch of the hub's ManagedClusters for one loop, cut by [`cluster_kept`].
pub(crate) fn cluster_watch(client: Client) -> Share<ManagedCluster> {
    share(
        Api::<ManagedCluster>::all(client),
        watcher::Config::default(),
        cluster_kept,
    )
}

/// What a Spoke pass reads of its ManagedCluster ([`facts::gather`], [`cluster_sync::drifted`]):
/// its spec, labels, the annotations naming what fleetform owns there, whether it is being
/// deleted, and its Joined and Available conditions (status and when it last turned).
fn cluster_facts(cluster: &ManagedCluster) -> u64 {
    use crate::api::vocabulary::{CONDITION_AVAILABLE, CONDITION_JOINED};
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&cluster.spec)
        .unwrap_or_default()
        .hash(&mut hasher);
    cluster.labels().hash(&mut hasher);
    for key in [
        cluster_sync::ANNOTATION_SPOKE_LABELS,
        cluster_sync::ANNOTATION_SPOKE_TAINTS,
    ] {
        cluster.annotations().get(key).hash(&mut hasher);
    }
    cluster
        .metadata
        .deletion_timestamp
        .as_ref()
        .map(|at| at.0.as_second())
        .hash(&mut hasher);
    for type_ in [CONDITION_JOINED, CONDITION_AVAILABLE] {
        cluster
            .condition(type_)
            .map(|c| (&c.status, c.last_transition_time.0.as_second()))
            .hash(&mut hasher);
    }
    hasher.finish()
}

/// Every Spoke in `store`.
fn every_spoke(store: &Store<Spoke>) -> Vec<ObjectRef<Spoke>> {
    store
        .state()
        .iter()
        .map(|spoke| ObjectRef::from(&**spoke))
        .collect()
}

/// The spokes `hub`'s rollouts (its own and its addons') have in progress.
fn in_progress(hub: &Hub) -> impl Iterator<Item = &crate::api::fleet::SpokeRollout> {
    hub.status
        .iter()
        .flat_map(|status| {
            status
                .rollout
                .iter()
                .chain(status.addon_rollouts.iter().map(|kept| &kept.rollout))
        })
        .flat_map(|rollout| rollout.spokes.iter())
        .filter(|entry| entry.state == crate::api::fleet::SpokeRolloutState::InProgress)
}

/// What of a Hub's rollout the Spoke controller follows: which spokes are in progress, to what.
fn in_progress_digest(hub: &Hub) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for entry in in_progress(hub) {
        (&entry.name, &entry.target).hash(&mut hasher);
    }
    hasher.finish()
}

/// Which Spokes a version of a Hub wakes: every spoke when its generation changed (its spec
/// concerns them all), else those its rollouts have in progress when that set changed, else
/// none (a status write of its own).
#[derive(Default)]
struct HubTriggers {
    /// Each Hub's generation and [`in_progress_digest`], as last seen.
    seen: Mutex<std::collections::HashMap<String, (Option<i64>, u64)>>,
}

impl HubTriggers {
    fn wakes(&self, hub: &Hub, spokes: &Store<Spoke>) -> Vec<ObjectRef<Spoke>> {
        let now = (hub.metadata.generation, in_progress_digest(hub));
        let before = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(hub.name_any(), now);
        match before {
            // First seen, or its spec changed.
            None => every_spoke(spokes),
            Some((generation, _)) if generation != now.0 => every_spoke(spokes),
            Some((_, digest)) if digest != now.1 => in_progress(hub)
                .map(|entry| ObjectRef::new(&entry.name).within(SYSTEM_NAMESPACE))
                .collect(),
            Some(_) => Vec::new(),
        }
    }
}

/// What of a ClusterManagementAddOn the reconciler reads: the AddOn spec it carries.
fn addon_spec(addon: &ClusterManagementAddOn) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    addon
        .annotations()
        .get(crate::plan::desired::ADDON_SPEC_ANNOTATION)
        .hash(&mut hasher);
    Some(hasher.finish())
}

#[instrument(skip_all, fields(spoke = spoke.name_any()))]
async fn reconcile_spoke(spoke: Arc<Spoke>, ctx: Arc<Context>) -> Result<Requeue, ReconcileError> {
    let spoke = ctx.own_writes.current(spoke);
    let result = spoke_pass(&spoke, &ctx).await;
    match &result {
        Ok(_) => {
            if let Some(failing) = ctx.errors.recovered(&*spoke) {
                ctx.events
                    .publish(
                        &events::reference(&*spoke),
                        EventType::Normal,
                        "Recovered",
                        "Reconcile",
                        format!(
                            "reconciled again after {} failed pass(es); the last: {}",
                            failing.passes, failing.last
                        ),
                    )
                    .await;
            }
        }
        // The error policy counts the failure; the Spoke says what it is when it is news.
        Err(err) if ctx.errors.is_news(&*spoke, err) => {
            report_failure(&ctx, &spoke, err.reason(), &err.to_string()).await;
        }
        Err(_) => {}
    }
    result
}

/// Puts a failed pass on the Spoke: `Reconciled` False with the error's category and text, and
/// a Warning Event. Both are best effort: the failure itself is what the caller returns.
async fn report_failure(ctx: &Context, spoke: &Spoke, reason: &str, message: &str) {
    // The Event first: whoever sees the condition can find the Event too.
    ctx.events
        .publish_written(
            &events::reference(spoke),
            EventType::Warning,
            reason,
            "Reconcile",
            message,
        )
        .await;
    let condition = Condition {
        type_: CONDITION_RECONCILED.to_string(),
        status: STATUS_FALSE.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: spoke.metadata.generation,
        last_transition_time: Time(Timestamp::now()),
    };
    let api = spokes_api(&ctx.config.client);
    if let Err(err) = set_conditions(&api, &spoke.name_any(), FIELD_MANAGER, |_| {
        vec![condition.clone()]
    })
    .await
    {
        debug!(%err, "cannot report the failure on the Spoke");
    }
}

/// One pass over a Spoke: gather, decide, act, report.
async fn spoke_pass(spoke: &Arc<Spoke>, ctx: &Arc<Context>) -> Result<Requeue, ReconcileError> {
    let spoke = spoke.clone();
    let client = &ctx.config.client;
    // From the store; read when it has none (not listed yet, or not declared).
    let stored = ctx
        .hubs
        .get(&ObjectRef::new(&spoke.spec.hub_ref).within(SYSTEM_NAMESPACE));
    let hub = match stored {
        Some(hub) => Some(hub),
        None => Api::<Hub>::namespaced(client.clone(), SYSTEM_NAMESPACE)
            .get_opt(&spoke.spec.hub_ref)
            .await
            .map_err(KubeError::on(format!("Hub {}", spoke.spec.hub_ref), "read"))?
            .map(Arc::new),
    };
    let Some(hub) = hub else {
        // Waiting is right: the Hub watch brings the Spoke back once its hub is declared.
        write_status(ctx, &spoke, Phase::Initializing, &[], None, None).await?;
        return Err(ReconcileError::NoHub(spoke.spec.hub_ref.clone()));
    };
    let endpoint = hub_endpoint_of(client, &hub, &ctx.config.known_endpoint).await?;
    let addon_docs = ctx.addon_documents().await?;
    let known = facts::Known {
        cluster: ctx.managed_cluster(&spoke.name_any()).await?,
        addons: ctx.cluster_addons(&spoke.name_any()).await?,
        tokens: ctx.tokens(&spoke.name_any()).await?,
        settled_read_stands: resync_for(lifecycle::RESYNC, ctx.spokes.len()),
    };
    let mut gathered = match facts::gather(
        client,
        &ctx.clients,
        &spoke,
        &hub,
        &endpoint,
        &addon_docs,
        known,
    )
    .await
    {
        Ok(gathered) => gathered,
        Err(err @ ReconcileError::Access(_)) => {
            report_phase_unreached(ctx, &spoke).await?;
            return Err(err);
        }
        Err(err) => return Err(err),
    };
    let mut decision = decide(&gathered.facts);
    // Finalizers go in one write: each write changes the resourceVersion the next is guarded by.
    let added: Vec<&str> = decision
        .actions
        .iter()
        .filter_map(|action| match action {
            Action::AddFinalizer(finalizer) => Some(*finalizer),
            _ => None,
        })
        .collect();
    let mut spoke = spoke;
    if !added.is_empty() {
        info!(finalizers = ?added, "lifecycle: adding finalizers");
        let written = set_finalizers(&spokes_api(client), &spoke, &added, true)
            .await
            .map_err(KubeError::on(
                format!("Spoke {}", spoke.name_any()),
                "add finalizers",
            ))?;
        // The rest of the pass goes on from the Spoke as written (its status write, guarded by
        // the resourceVersion, would meet a 409 Conflict from the copy read), and with what
        // comes after the finalizers decided now rather than a pass later.
        if let Some(written) = written {
            ctx.own_writes.wrote(&spoke, written.clone());
            spoke = Arc::new(written);
        }
        gathered.facts = gathered.facts.after(&decision.actions);
        decision = decide(&gathered.facts);
    }
    let mut unjoined_by_hub = None;
    for action in &decision.actions {
        match action {
            Action::AddFinalizer(_) => continue,
            // The decision's `waiting` says what blocks; the status reports it.
            Action::Blocked(_) => continue,
            Action::UnjoinSpoke(by) => {
                info!(?action, "lifecycle");
                let outcome = unjoin_spoke(ctx, &spoke, *by).await?;
                if by.instead_of_the_agent() {
                    // Written before the finalizer goes: once the Spoke is gone, this Event is
                    // what says what may be left on the spoke.
                    ctx.events
                        .publish_written(
                            &events::reference(&*spoke),
                            EventType::Warning,
                            REASON_UNJOINED_BY_HUB,
                            "Unjoin",
                            outcome.clone(),
                        )
                        .await;
                    unjoined_by_hub = Some(outcome);
                }
                continue;
            }
            _ => {}
        }
        info!(?action, "lifecycle");
        carry_out(ctx, &spoke, &hub, &endpoint, &gathered, action).await?;
    }
    let installed = decision.actions.iter().any(|action| {
        matches!(
            action,
            Action::InstallAgent | Action::UpgradeAgent | Action::RecoverAgent
        )
    });
    // What this pass did on the spoke, the next one reads there.
    if decision.actions.iter().any(Action::acts_on_spoke) {
        ctx.clients.unsettle(&spoke.name_any());
    }
    if !gathered.facts.deleting && !installed {
        keep_tokens(ctx, &gathered).await?;
    }
    let after = gathered.facts.after(&decision.actions);
    let conditions = lifecycle::conditions(
        &after,
        &decision,
        unjoined_by_hub.as_deref(),
        Timestamp::now(),
    );
    // What the spoke has is read before this pass's actions, and the writes they made wake the
    // next pass, which reports them; but the lease duration this pass wrote onto its cluster
    // and the addons it enabled or disabled are what it has now: reported with this write
    // rather than in one more of that pass (a Spoke status write per spoke when a fleet's lease
    // changes, and per joining spoke with addons).
    let synced = decision.actions.iter().any(Action::writes_cluster_only);
    let addons_changed = decision.actions.iter().any(Action::changes_addons);
    let applied = gathered
        .applied
        .clone()
        .filter(|_| !gathered.facts.deleting)
        .map(|mut applied| {
            if synced {
                applied.lease_duration_seconds = gathered.effective.lease_duration_seconds;
            }
            if addons_changed {
                applied = crate::rollout::with_addons(&applied, &after.enabled_addons);
            }
            applied
        });
    // The agent this spoke's agent may upgrade itself to, once the hub's rollout releases it.
    let agent = gathered.effective.agent.hash();
    let released_agent = (!gathered.facts.deleting
        && !gathered.facts.hub_as_spoke
        && crate::rollout::agent_released(&hub, &spoke.name_any(), &agent))
    .then_some(agent.as_str());
    write_status(
        ctx,
        &spoke,
        decision.phase,
        &conditions,
        applied.as_ref(),
        released_agent,
    )
    .await?;
    let mut after = resync_for(
        decision.look_again_after(Timestamp::now()),
        ctx.spokes.len(),
    );
    // What this pass changed, the next one reads and reports: its own status writes wake none
    // (see `spoke_changes`). Not at once: an action whose effect the facts never show must not
    // spin.
    if looks_again_soon(&decision.actions) {
        after = after.min(lifecycle::POLL);
    }
    // What an action did on the spoke, no watch here sees: that look again holds even when an
    // event wakes a pass sooner (one on the hub shows in the watches, which wake the pass
    // that reads it; so does a joining spoke's new agent, registering).
    let on_spoke = decision.actions.iter().any(|action| {
        action.acts_on_spoke() && (*action != Action::InstallAgent || gathered.facts.joined)
    });
    let promised = ctx
        .look_again
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .after_pass(&spoke.name_any(), on_spoke, Instant::now());
    if let Some(promised) = promised {
        after = after.min(promised);
    }
    // A joined spoke whose agent bootstraps again (it lost its certificate) holds its new one
    // on the spoke only, which nothing here watches (its ManagedCluster need not change): look
    // again soon, to delete its token once it does.
    if gathered.facts.joined && !gathered.bootstrapped && !gathered.tokens.is_empty() {
        after = after.min(lifecycle::POLL);
    }
    ctx.clients.not_needed_for(&spoke.name_any(), after);
    Ok(Requeue::requeue(after))
}

/// Renews the spoke's bootstrap tokens while it has not joined, deletes them once it holds its
/// certificate (see [`token_upkeep`]).
async fn keep_tokens(ctx: &Context, gathered: &Gathered) -> Result<(), ReconcileError> {
    let secrets = Api::<Secret>::namespaced(ctx.config.client.clone(), BOOTSTRAP_TOKEN_NAMESPACE);
    for step in token_upkeep(&gathered.tokens, gathered.bootstrapped, Timestamp::now()) {
        match step {
            TokenUpkeep::Extend { secret, until } => {
                merge(&secrets, &secret, &expiration_patch(until)).await?;
                info!(token = secret, %until, "bootstrap token renewed: the spoke has not joined yet");
            }
            TokenUpkeep::Delete { secret } => {
                delete(&secrets, &secret).await?;
                info!(
                    token = secret,
                    "bootstrap token deleted: the spoke holds its certificate"
                );
            }
        }
    }
    Ok(())
}

/// The endpoint agents of `hub` use: its document's, or what this process knows, with the CA
/// bundle `caBundleSecretRef` names read from the hub.
async fn hub_endpoint_of(
    client: &Client,
    hub: &Hub,
    known: &KnownEndpoint,
) -> Result<HubEndpoint, ReconcileError> {
    let name = hub.name_any();
    let secret_ca = match &hub.spec.ca_bundle_secret_ref {
        None => None,
        Some(reference) => {
            let failed = |message: String| ReconcileError::CaSecret {
                hub: name.clone(),
                namespace: reference.namespace.clone(),
                name: reference.name.clone(),
                key: reference.key.clone(),
                message,
            };
            let secret = Api::<Secret>::namespaced(client.clone(), &reference.namespace)
                .get_opt(&reference.name)
                .await
                .map_err(|err| failed(err.to_string()))?
                .ok_or_else(|| failed("no such Secret".to_string()))?;
            let bytes = secret
                .data
                .as_ref()
                .and_then(|data| data.get(&reference.key))
                .ok_or_else(|| failed("no such key".to_string()))?;
            Some(
                String::from_utf8(bytes.0.clone())
                    .map_err(|_| failed("not UTF-8 PEM".to_string()))?,
            )
        }
    };
    Ok(install::hub_endpoint(&name, &hub.spec, known, secret_ca)?)
}

/// The phase of a spoke whose API server the hub cannot reach, from its ManagedCluster (see
/// [`lifecycle::phase_unreached`]): a destroyed cluster does not stay Running.
async fn report_phase_unreached(ctx: &Context, spoke: &Spoke) -> Result<(), ReconcileError> {
    let current = spoke.status.as_ref().and_then(|status| status.phase);
    if !matches!(current, Some(Phase::Running | Phase::Unhealthy)) {
        return Ok(());
    }
    let cluster = ctx.managed_cluster(&spoke.name_any()).await?;
    let joined = cluster.as_ref().is_some_and(ManagedCluster::is_joined);
    let available = cluster.as_ref().is_some_and(ManagedCluster::is_available);
    match lifecycle::phase_unreached(current, joined, available) {
        Some(phase) => write_status(ctx, spoke, phase, &[], None, None).await,
        None => Ok(()),
    }
}

/// Writes phase, observed generation, conditions, what the spoke has of the settings a rollout
/// rolls out (`applied`) and the agent its rollout released it to (`released_agent`), if they
/// changed. The agent version is the agent's to report: it says what runs, not what was asked
/// for.
async fn write_status(
    ctx: &Context,
    spoke: &Spoke,
    phase: Phase,
    conditions: &[Condition],
    applied: Option<&AppliedSettings>,
    released_agent: Option<&str>,
) -> Result<(), ReconcileError> {
    let name = spoke.name_any();
    let api: Api<Spoke> = Api::namespaced(ctx.config.client.clone(), SYSTEM_NAMESPACE);
    let status = spoke.status.clone().unwrap_or_default();
    let mut fields = serde_json::Map::new();
    if status.phase != Some(phase) {
        fields.insert("phase".into(), json!(phase));
    }
    if status.observed_generation != spoke.metadata.generation {
        fields.insert(
            "observedGeneration".into(),
            json!(spoke.metadata.generation),
        );
    }
    if let Some(applied) = applied.filter(|applied| status.applied.as_ref() != Some(*applied)) {
        // Whole, so that a merge patch drops an addon or unavailable addon no longer listed.
        fields.insert(
            "applied".into(),
            json!({
                "addons": applied.addons,
                "unavailableAddons": applied.unavailable_addons,
                "leaseDurationSeconds": applied.lease_duration_seconds,
            }),
        );
    }
    if let Some(released) = released_agent.filter(|r| status.released_agent.as_deref() != Some(r)) {
        fields.insert("releasedAgent".into(), json!(released));
    }
    // One patch, from the cached Spoke: this reconciler's own writes are what it is at most
    // behind, and a write of anyone else's since makes it a fresh read (409 Conflict).
    let wanted = conditions.to_vec();
    let written = if conditions_hold(&status.conditions, conditions) {
        if fields.is_empty() {
            return Ok(());
        }
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": fields})),
        )
        .await
        .map(Some)
    } else {
        set_conditions_from(&api, spoke, FIELD_MANAGER, move |_| wanted.clone(), &fields).await
    };
    match written {
        // Gone in the meantime: its last finalizer was just removed.
        Err(err) if is_not_found(&err) => {}
        Err(err) => return Err(KubeError::on(format!("Spoke {name}"), "write status")(err).into()),
        Ok(Some(written)) => ctx.own_writes.wrote(spoke, written),
        Ok(None) => {}
    }
    Ok(())
}

/// Does one action of a decision.
async fn carry_out(
    ctx: &Context,
    spoke: &Spoke,
    hub: &Hub,
    endpoint: &HubEndpoint,
    gathered: &Gathered,
    action: &Action,
) -> Result<(), ReconcileError> {
    let client = &ctx.config.client;
    let name = spoke.name_any();
    match action {
        Action::RemoveFinalizer(finalizer) => {
            Ok(set_finalizer(&spokes_api(client), spoke, finalizer, false)
                .await
                .map_err(KubeError::on(format!("Spoke {name}"), "remove a finalizer"))?)
        }
        Action::InstallAgent | Action::UpgradeAgent => {
            install_agent(ctx, spoke, hub, endpoint, gathered, false).await
        }
        Action::RecoverAgent => {
            install_agent(ctx, spoke, hub, endpoint, gathered, true).await?;
            let down = gathered
                .facts
                .agent_down_since
                .map_or_else(String::new, |since| {
                    format!(" since {}", since.strftime("%Y-%m-%dT%H:%M:%SZ"))
                });
            // Written before the pass's status: whoever sees the spoke on the new agent finds
            // why the hub installed it.
            ctx.events
                .publish_written(
                    &events::reference(spoke),
                    EventType::Warning,
                    "AgentReinstalled",
                    "Recover",
                    format!(
                        "no agent ran on the spoke{down} (its Deployment had no ready replica and the cluster was not Available past progressDeadlineSeconds, {} s), so none could take the fleet's new agent: the hub installed it (version {})",
                        gathered.facts.progress_deadline.as_secs(),
                        gathered.effective.agent.version
                    ),
                )
                .await;
            Ok(())
        }
        Action::Accept | Action::SyncCluster => {
            let Some(cluster) = &gathered.cluster else {
                return Ok(());
            };
            // Installing the agent granted it too, unless it was found installed (or installed
            // by another process): the acceptance writes it when this process has not; a sync
            // of the cluster's settings (every spoke's, when a fleet's lease changes) does not.
            if *action == Action::Accept && !ctx.granted(&name, &spoke.spec.hub_ref) {
                grant_spoke_access(ctx, &name, &spoke.spec.hub_ref).await?;
            }
            let wanted = WantedCluster {
                labels: &gathered.effective.labels,
                lease_duration_seconds: gathered.effective.lease_duration_seconds,
                taints: &spoke.spec.taints,
            };
            let patch = cluster_sync::patch(cluster, &wanted, true);
            let written = merge(&Api::<ManagedCluster>::all(client.clone()), &name, &patch).await?;
            ctx.cluster_writes.wrote(cluster, &patch, &written);
            Ok(())
        }
        Action::AddTaint(key) => {
            let Some(cluster) = &gathered.cluster else {
                return Ok(());
            };
            match cluster_sync::add_taint(cluster, key) {
                Some(patch) => merge(&Api::<ManagedCluster>::all(client.clone()), &name, &patch)
                    .await
                    .map(|_| ()),
                None => Ok(()),
            }
        }
        Action::EnableAddon {
            name: addon,
            install_namespace,
        } => {
            let object = json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ManagedClusterAddOn",
                "metadata": {"name": addon, "namespace": name, "labels": {
                    crate::plan::desired::MANAGED_BY_LABEL: crate::plan::desired::MANAGED_BY,
                }},
                "spec": {"installNamespace": install_namespace},
            });
            apply(
                &Api::<ManagedClusterAddOn>::namespaced(client.clone(), &name),
                addon,
                &object,
            )
            .await
        }
        Action::DisableAddon { name: addon } => {
            delete(
                &Api::<ManagedClusterAddOn>::namespaced(client.clone(), &name),
                addon,
            )
            .await
        }
        // Done by the pass itself, which reports what they came to.
        Action::AddFinalizer(_) | Action::Blocked(_) | Action::UnjoinSpoke(_) => Ok(()),
        Action::RemoveFromHub => {
            remove_from_hub(client, &name, &gathered.tokens).await?;
            ctx.granted_now(&name, None);
            Ok(())
        }
    }
}

fn spokes_api(client: &Client) -> Api<Spoke> {
    Api::namespaced(client.clone(), SYSTEM_NAMESPACE)
}

/// Namespace, RBAC, bootstrap secret with the spoke's own token, and the agent Deployment
/// (unless the rollout keeps the one there, or `recover`: no agent runs to move it).
async fn install_agent(
    ctx: &Context,
    spoke: &Spoke,
    hub: &Hub,
    endpoint: &HubEndpoint,
    gathered: &Gathered,
    recover: bool,
) -> Result<(), ReconcileError> {
    let client = &ctx.config.client;
    let name = spoke.name_any();
    let reached = ctx
        .clients
        .get(spoke, client)
        .await
        .map_err(ReconcileError::Access)?;
    let spoke_client = reached.client();
    let spoke_url = facts::spoke_url(reached.url.as_deref(), endpoint);
    // A spoke that holds its certificate keeps the bootstrap kubeconfig it has (its token is
    // gone); any other needs a token.
    let kubeconfig = if gathered.bootstrapped && gathered.bootstrap_current {
        None
    } else {
        Some(install::bootstrap_kubeconfig(
            endpoint,
            &bootstrap_token(client, &name, gathered).await?,
        ))
    };
    grant_spoke_access(ctx, &name, &hub.name_any()).await?;
    let on_spoke = |what: &'static str| {
        let at = reached.describe();
        move |err: kube::Error| {
            ReconcileError::on_spoke(format!("cannot apply {what} at {at}: {err}"), &err)
        }
    };
    let namespace = apply_on(
        &Api::<Namespace>::all(spoke_client.clone()),
        &install::agent_namespace(),
    )
    .await
    .map_err(on_spoke("the agent namespace"))?;
    apply_on(
        &Api::<ServiceAccount>::namespaced(spoke_client.clone(), AGENT_NAMESPACE),
        &install::agent_service_account(),
    )
    .await
    .map_err(on_spoke("the agent ServiceAccount"))?;
    // Owned so that the agent, unjoining with its own rights, can remove all of its RBAC: see
    // `uninstall`.
    let role = apply_on(
        &Api::<ClusterRole>::all(spoke_client.clone()),
        &install::owned_by(install::agent_cluster_role(), &namespace),
    )
    .await
    .map_err(on_spoke("the agent ClusterRole"))?;
    apply_on(
        &Api::<ClusterRoleBinding>::all(spoke_client.clone()),
        &install::owned_by(install::agent_cluster_role_binding(), &role),
    )
    .await
    .map_err(on_spoke("the agent ClusterRoleBinding"))?;
    apply_on(
        &Api::<Role>::namespaced(spoke_client.clone(), AGENT_NAMESPACE),
        &install::agent_election_role(),
    )
    .await
    .map_err(on_spoke("the agent's election Role"))?;
    apply_on(
        &Api::<RoleBinding>::namespaced(spoke_client.clone(), AGENT_NAMESPACE),
        &install::agent_election_role_binding(),
    )
    .await
    .map_err(on_spoke("the agent's election RoleBinding"))?;
    // The agent reports ClusterClaims, as OCM's klusterlet does, so it brings their CRD (unless
    // the spoke has one it did not write, such as OCM's own).
    crate::deploy::install_crd(&spoke_client, &crate::api::cluster_claim_crd())
        .await
        .map_err(|err| ReconcileError::Spoke(err.to_string()))?;
    if let Some(kubeconfig) = &kubeconfig {
        apply_on(
            &Api::<Secret>::namespaced(spoke_client.clone(), AGENT_NAMESPACE),
            &install::bootstrap_hub_kubeconfig_secret(kubeconfig),
        )
        .await
        .map_err(on_spoke("the bootstrap kubeconfig"))?;
    }
    if recover || !gathered.keep_agent {
        let desired = install::agent_deployment(&name, &gathered.effective, Some(spoke_url));
        let applied = apply_on(
            &Api::<Deployment>::namespaced(spoke_client, AGENT_NAMESPACE),
            &desired,
        )
        .await
        .map_err(on_spoke("the agent Deployment"))?;
        // As applied, it needs nothing: the next read need not ask the spoke.
        let wanted = install::agent_deployment_digest(&name, &gathered.effective, Some(spoke_url));
        if let Some(seen) = facts::unedited_key(&applied, wanted) {
            ctx.clients.saw_unedited(&name, seen);
        }
    }
    info!(
        version = gathered.effective.agent.version,
        "agent installed"
    );
    Ok(())
}

/// A bootstrap token of the spoke `name` that has not expired, or a new one (valid for
/// [`BOOTSTRAP_TOKEN_TTL`]).
async fn bootstrap_token(
    client: &Client,
    name: &str,
    gathered: &Gathered,
) -> Result<BootstrapToken, ReconcileError> {
    // The tokens the watch's store holds: one this reconciler made is there before the event
    // that wakes the next pass.
    let now = Timestamp::now();
    if let Some(token) = usable_token(&gathered.tokens, now) {
        return Ok(token);
    }
    let token = BootstrapToken::generate();
    let expires = now
        .checked_add(BOOTSTRAP_TOKEN_TTL)
        .unwrap_or(Timestamp::MAX);
    let secret = token_secret(name, &token.id, &token.secret, expires);
    Api::<Secret>::namespaced(client.clone(), BOOTSTRAP_TOKEN_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .map_err(KubeError::on(
            format!("bootstrap token of {name}"),
            "create",
        ))?;
    info!(token = token.id, %expires, "bootstrap token created");
    Ok(token)
}

/// The Role that lets the spoke's agents read their Spoke and Hub and report on their Spoke; the
/// accept loop binds it to the certificates of the cluster's current join. Remembered as
/// written until the spoke is removed from the hub, which deletes it.
async fn grant_spoke_access(ctx: &Context, cluster: &str, hub: &str) -> Result<(), ReconcileError> {
    apply_on(
        &Api::<Role>::namespaced(ctx.config.client.clone(), SYSTEM_NAMESPACE),
        &install::agent_hub_role(cluster, hub),
    )
    .await
    .map_err(KubeError::on(
        format!("Role {}", install::agent_hub_role_name(cluster)),
        "apply",
    ))?;
    ctx.granted_now(cluster, Some(hub));
    Ok(())
}

/// The spoke-side cleanup the agent would do, done by the hub; returns what happened, for the
/// Spoke's last status and its Event ([`unjoin_outcome`] says what it comes to).
async fn unjoin_spoke(
    ctx: &Context,
    spoke: &Spoke,
    by: UnjoinBy,
) -> Result<String, ReconcileError> {
    let client = &ctx.config.client;
    let purge = spoke.spec.cleanup.purge_agent_namespace;
    let cleanup = match ctx.clients.get(spoke, client).await {
        Err(err) => SpokeCleanup::Unreachable(err),
        Ok(reached) => {
            let spoke_client = reached.client();
            let cleaned = async {
                uninstall::remove_credentials(&spoke_client).await?;
                uninstall::remove_workload(&spoke_client, purge).await
            }
            .await;
            match cleaned {
                Ok(()) => SpokeCleanup::Done,
                Err(problem) => SpokeCleanup::Failed(problem),
            }
        }
    };
    let outcome = unjoin_outcome(by, &cleanup, &uninstall::leftovers(purge));
    match (&cleanup, &outcome) {
        (SpokeCleanup::Done, _) => info!("agent removed from the spoke"),
        (SpokeCleanup::Unreachable(problem) | SpokeCleanup::Failed(problem), Ok(_)) => {
            warn!(%problem, "the spoke's side is left as it is");
        }
        (_, Err(_)) => {}
    }
    outcome.map_err(ReconcileError::Spoke)
}

/// CSRs, ManagedCluster, cluster namespace and bootstrap tokens of the spoke on the hub.
async fn remove_from_hub(
    client: &Client,
    name: &str,
    tokens: &[Secret],
) -> Result<(), ReconcileError> {
    let by_cluster = ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}={name}"));
    Api::<CertificateSigningRequest>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &by_cluster)
        .await
        .map_err(KubeError::on(format!("CSRs of {name}"), "delete"))?;
    let token_secrets = Api::<Secret>::namespaced(client.clone(), BOOTSTRAP_TOKEN_NAMESPACE);
    for token in tokens {
        delete(&token_secrets, &token.name_any()).await?;
    }
    let role = install::agent_hub_role_name(name);
    delete(
        &Api::<RoleBinding>::namespaced(client.clone(), SYSTEM_NAMESPACE),
        &role,
    )
    .await?;
    delete(
        &Api::<Role>::namespaced(client.clone(), SYSTEM_NAMESPACE),
        &role,
    )
    .await?;
    delete(&Api::<ManagedCluster>::all(client.clone()), name).await?;
    delete(&Api::<Namespace>::all(client.clone()), name).await?;
    info!("removed from the hub");
    Ok(())
}

#[instrument(skip_all, fields(hub = hub.name_any()))]
async fn reconcile_hub(hub: Arc<Hub>, ctx: Arc<Context>) -> Result<Requeue, ReconcileError> {
    let client = &ctx.config.client;
    let name = hub.name_any();
    let api: Api<Hub> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let spoke_api: Api<Spoke> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    if let Some(wait) = ctx.hub_passes.wait(&name, ctx.spokes.len(), Instant::now()) {
        return Ok(Requeue::requeue(wait));
    }
    let stored = ctx.spokes.state();
    let listed;
    let facts = if hub.metadata.deletion_timestamp.is_some() {
        // Read afresh, not from the spoke loop's store: this pass may run on the last Spoke's
        // deletion before that store has seen it, and nothing would wake the Hub again.
        listed = spoke_api
            .list(&ListParams::default())
            .await
            .map_err(KubeError::on("Spokes".to_string(), "list"))?
            .items;
        hub_lifecycle::Facts::of(&hub, &listed)
    } else {
        hub_lifecycle::Facts::of(&hub, stored.iter().map(|spoke| &**spoke))
    };
    for action in hub_lifecycle::decide(&facts) {
        match action {
            hub_lifecycle::Action::AddFinalizer => {
                set_finalizer(&api, &*hub, FINALIZER_HUB_CLEANUP, true)
                    .await
                    .map_err(KubeError::on(format!("Hub {name}"), "add its finalizer"))?;
            }
            hub_lifecycle::Action::DeleteSpoke(spoke) => delete(&spoke_api, &spoke).await?,
            hub_lifecycle::Action::ReportPhase(phase) => {
                write_hub_phase(&api, &hub, phase).await?;
            }
            hub_lifecycle::Action::RemoveFinalizer => {
                set_finalizer(&api, &*hub, FINALIZER_HUB_CLEANUP, false)
                    .await
                    .map_err(KubeError::on(format!("Hub {name}"), "remove its finalizer"))?;
            }
        }
    }
    if hub.metadata.deletion_timestamp.is_some() {
        ctx.config.metrics.rollout.forget(&name);
        return Ok(Requeue::await_change());
    }
    // Its Spokes being written (a commit's), the rollout waits to see them all: the end of the
    // writes takes the mark off, which wakes this pass.
    let now = Timestamp::now();
    if let Some(until) = crate::rollout::writing_spokes_until(&hub, now) {
        debug!(%until, "the hub's Spokes are being written: the rollout waits");
        let wait = Duration::try_from(until.duration_since(now)).unwrap_or(Duration::ZERO);
        return Ok(Requeue::requeue(wait));
    }
    let spokes: Vec<Arc<Spoke>> = stored
        .into_iter()
        .filter(|spoke| spoke.spec.hub_ref == name)
        .collect();
    let addon_docs = ctx.addon_documents().await?;
    let wake = super::rollout::run(
        client,
        &ctx.events,
        &ctx.config.metrics.rollout,
        &hub,
        &spokes,
        &addon_docs,
    )
    .await?;
    Ok(wake.map_or_else(Requeue::await_change, Requeue::requeue))
}

/// Writes `phase` and the Hub's generation on its status; a Hub already gone is no failure.
async fn write_hub_phase(api: &Api<Hub>, hub: &Hub, phase: Phase) -> Result<(), ReconcileError> {
    let patch = json!({"status": {"phase": phase, "observedGeneration": hub.metadata.generation}});
    Ok(api
        .patch_status(
            &hub.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
        .or_else(|err| if is_not_found(&err) { Ok(()) } else { Err(err) })
        .map_err(KubeError::on(
            format!("Hub {}", hub.name_any()),
            "write status",
        ))?)
}

async fn merge<K>(api: &Api<K>, name: &str, patch: &serde_json::Value) -> Result<K, ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(KubeError::on(format!("{} {name}", K::kind(&())), "update"))?)
}

async fn apply<K>(
    api: &Api<K>,
    name: &str,
    object: &serde_json::Value,
) -> Result<(), ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Ok(api
        .patch(name, &params, &Patch::Apply(object))
        .await
        .map(|_| ())
        .map_err(KubeError::on(format!("{} {name}", K::kind(&())), "apply"))?)
}

/// Server-side applies a typed object (its name from its metadata); returns it as stored.
async fn apply_on<K>(api: &Api<K>, object: &K) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut value = serde_json::to_value(object).map_err(kube::Error::SerdeError)?;
    value["apiVersion"] = json!(K::api_version(&()));
    value["kind"] = json!(K::kind(&()));
    api.patch(&object.name_any(), &params, &Patch::Apply(&value))
        .await
}

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(delete_if_present(api, name)
        .await
        .map_err(KubeError::on(format!("{} {name}", K::kind(&())), "delete"))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;

    #[test]
    fn an_addon_keeps_what_a_pass_and_the_registrations_loop_read_of_it() {
        let mut addon: ManagedClusterAddOn = serde_json::from_value(json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": "a", "namespace": "spoke-1", "uid": "u2", "resourceVersion": "9",
                "deletionTimestamp": "2026-11-26T00:00:00Z",
                "labels": {crate::plan::desired::MANAGED_BY_LABEL: crate::plan::desired::MANAGED_BY},
                "managedFields": [{"manager": "fleetform", "operation": "Apply"}]},
            "spec": {"installNamespace": "ns"},
            "status": {
                "namespace": "set-by-the-addon-manager",
                "conditions": [{"type": "Available", "status": "True", "reason": "r",
                    "message": "", "lastTransitionTime": "2026-11-26T00:00:00Z"}],
                "registrations": [{"signerName": "kubernetes.io/kube-apiserver-client"}],
                "relatedObjects": [{"group": "apps", "resource": "deployments", "name": "m"}],
            },
        }))
        .unwrap();
        let whole = addon.clone();
        addon_kept(&mut addon);
        // Which it is, and its deletion.
        assert_eq!(addon.metadata.name, whole.metadata.name);
        assert_eq!(addon.metadata.namespace, whole.metadata.namespace);
        assert_eq!(addon.metadata.uid, whole.metadata.uid);
        assert_eq!(
            addon.metadata.resource_version,
            whole.metadata.resource_version
        );
        assert!(addon.metadata.deletion_timestamp.is_some());
        // A pass's: fleetform's mark, where it installs (from the spec: the addon manager's
        // namespace is not what fleetform enabled), whether it is Available.
        assert_eq!(addon.metadata.labels, whole.metadata.labels);
        assert_eq!(addon.install_namespace(), "ns");
        assert!(addon.is_available());
        // The registrations loop's.
        assert_eq!(addon.registrations(), whole.registrations());
        assert!(!addon.registrations().is_empty());
        // Nothing else.
        assert_eq!(addon.metadata.managed_fields, None);
        assert!(addon.status.as_ref().unwrap().related_objects.is_empty());
    }

    #[test]
    fn a_pass_woken_between_an_action_and_its_look_again_keeps_the_look_again() {
        let start = Instant::now();
        let poll = lifecycle::POLL;
        let mut look_again = LookAgain::default();
        assert_eq!(look_again.after_pass("alpha", true, start), Some(poll));
        // Woken by an event a quarter POLL later, finding nothing to do: still due at POLL.
        assert_eq!(
            look_again.after_pass("alpha", false, start + poll / 4),
            Some(poll - poll / 4)
        );
        assert_eq!(
            look_again.after_pass("beta", false, start),
            None,
            "beta did nothing"
        );
        // The look again itself, at POLL: nothing more is due.
        assert_eq!(look_again.after_pass("alpha", false, start + poll), None);
        assert_eq!(
            look_again.after_pass("alpha", false, start + poll / 2),
            None
        );
        // What is no longer due goes at the next action, a Spoke deleted meanwhile included.
        look_again.after_pass("gone", true, start);
        look_again.after_pass("beta", true, start + poll * 2);
        assert_eq!(look_again.due.keys().collect::<Vec<_>>(), ["beta"]);
    }

    fn hub(generation: i64, in_progress: &[&str]) -> Hub {
        let spokes: Vec<serde_json::Value> = in_progress
            .iter()
            .map(|name| json!({"name": name, "target": "t", "state": "inProgress"}))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1",
            "kind": "Hub",
            "metadata": {"name": "hub", "namespace": SYSTEM_NAMESPACE, "generation": generation},
            "spec": {"kubeconfig": {"embedded": {}}},
            "status": {"rollout": {"target": "t", "spokes": spokes}},
        }))
        .expect("a Hub")
    }

    fn cluster(labels: serde_json::Value, status: serde_json::Value) -> ManagedCluster {
        serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {"name": "edge", "labels": labels},
            "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 10},
            "status": status,
        }))
        .expect("a ManagedCluster")
    }

    fn spoke(generation: i64, status: serde_json::Value) -> Spoke {
        serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1",
            "kind": "Spoke",
            "metadata": {"name": "edge", "namespace": SYSTEM_NAMESPACE, "generation": generation},
            "spec": {"hubRef": "hub", "kubeconfig": {"embedded": {}}},
            "status": status,
        }))
        .expect("a Spoke")
    }

    #[test]
    fn a_pass_starts_from_its_own_write_until_the_store_has_it_or_anything_newer() {
        let at = |version: &str, phase: &str| {
            let mut copy = spoke(1, json!({"phase": phase}));
            copy.metadata.resource_version = Some(version.to_string());
            copy
        };
        let writes = OwnWrites::default();
        // The copy a pass starts from, as (resourceVersion, phase), the store holding `stored`.
        let current = |stored: Spoke| {
            let copy = writes.current(Arc::new(stored));
            let version = copy.metadata.resource_version.clone().unwrap();
            (
                version,
                copy.status.as_ref().and_then(|status| status.phase),
            )
        };
        let seen = |version: &str, phase| (version.to_string(), Some(phase));
        assert_eq!(
            current(at("1", "Initializing")),
            seen("1", Phase::Initializing)
        );

        // A pass wrote status 2 from copy 1; the store has not had the event yet.
        writes.wrote(&at("1", "Initializing"), at("2", "Joining"));
        assert_eq!(current(at("1", "Initializing")), seen("2", Phase::Joining));
        assert_eq!(current(at("1", "Initializing")), seen("2", Phase::Joining));
        // The store caught up: its copy, and the write forgotten.
        assert_eq!(current(at("2", "Joining")), seen("2", Phase::Joining));
        assert_eq!(
            current(at("1", "Initializing")),
            seen("1", Phase::Initializing)
        );

        // Someone else's write after the pass's: the store's copy is the one to start from.
        writes.wrote(&at("2", "Joining"), at("3", "Running"));
        assert_eq!(current(at("4", "Unhealthy")), seen("4", Phase::Unhealthy));

        // A pass added finalizers (7 from 6), then wrote the status (8 from 7): until the store
        // has 8, either copy it may hold starts the next pass from 8.
        writes.wrote(&at("6", "Initializing"), at("7", "Initializing"));
        writes.wrote(&at("7", "Initializing"), at("8", "Joining"));
        assert_eq!(current(at("6", "Initializing")), seen("8", Phase::Joining));
        assert_eq!(current(at("7", "Initializing")), seen("8", Phase::Joining));
        assert_eq!(current(at("8", "Joining")), seen("8", Phase::Joining));

        // A Spoke being deleted is not remembered.
        let mut deleted = at("10", "Deleting");
        deleted.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        writes.wrote(&at("9", "Running"), deleted);
        assert_eq!(current(at("9", "Running")), seen("9", Phase::Running));
    }

    #[test]
    fn a_spoke_wakes_its_pass_on_what_others_change_not_on_its_passes_own_status() {
        let condition = |type_: &str, status: &str| {
            json!({"type": type_, "status": status, "reason": "r", "message": "m",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"})
        };
        let settled = spoke(
            1,
            json!({"phase": "Joining", "observedGeneration": 1,
                   "conditions": [condition("SpokeJoined", "False")]}),
        );
        let own_write = spoke(
            1,
            json!({"phase": "Running", "observedGeneration": 1, "releasedAgent": "a1",
                   "applied": {"addons": [], "unavailableAddons": [], "leaseDurationSeconds": 10},
                   "conditions": [condition("SpokeJoined", "True"), condition("Reconciled", "True")]}),
        );
        assert_eq!(spoke_changes(&settled), spoke_changes(&own_write));
        let pivoted = spoke(
            1,
            json!({"phase": "Joining", "observedGeneration": 1,
                   "conditions": [condition("SpokeJoined", "False"), condition("PivotComplete", "True")]}),
        );
        assert_ne!(
            spoke_changes(&settled),
            spoke_changes(&pivoted),
            "the agent's report"
        );
        let reported = spoke(
            1,
            json!({"phase": "Joining", "agentConfigHash": "h2",
                   "conditions": [condition("SpokeJoined", "False")]}),
        );
        assert_ne!(
            spoke_changes(&settled),
            spoke_changes(&reported),
            "the agent's version"
        );
        for seen in [
            json!({"uid": "u1", "generation": 2}),
            json!({"uid": "u2", "generation": 1}),
            json!({}),
        ] {
            let mut status = settled.status.clone().map_or(json!({}), |s| json!(s));
            let before = spoke(1, {
                status["agentDeployment"] = json!({"uid": "u1", "generation": 1});
                status.clone()
            });
            let after = spoke(1, {
                status["agentDeployment"] = seen.clone();
                status
            });
            assert_ne!(
                spoke_changes(&before),
                spoke_changes(&after),
                "the agent Deployment on the spoke, as its agent saw it: {seen}"
            );
        }
        let edited = spoke(2, settled.status.clone().map_or(json!({}), |s| json!(s)));
        assert_ne!(
            spoke_changes(&settled),
            spoke_changes(&edited),
            "a new spec"
        );
        let mut deleted = settled.clone();
        deleted.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert_ne!(
            spoke_changes(&settled),
            spoke_changes(&deleted),
            "its deletion"
        );
    }

    #[tokio::test]
    async fn a_spoke_pass_wakes_on_what_it_reads_of_its_cluster_and_not_on_agent_reports() {
        let available = |status: &str, at: &str| {
            json!({"type": "ManagedClusterConditionAvailable", "status": status,
                   "reason": "r", "message": "m", "lastTransitionTime": at})
        };
        let joined = cluster(
            json!({}),
            json!({"conditions": [available("True", "2026-01-01T00:00:00Z")]}),
        );
        let reported = cluster(
            json!({}),
            json!({"conditions": [available("True", "2026-01-01T00:00:00Z")],
                   "version": {"kubernetes": "v1.31.0"},
                   "clusterClaims": [{"name": "id.k8s.io", "value": "x"}]}),
        );
        let labelled = cluster(
            json!({"env": "prod"}),
            json!({"conditions": [available("True", "2026-01-01T00:00:00Z")]}),
        );
        let lapsed = cluster(
            json!({"env": "prod"}),
            json!({"conditions": [available("Unknown", "2026-01-01T00:05:00Z")]}),
        );
        let events = futures::stream::iter(
            [
                watcher::Event::Init,
                watcher::Event::InitApply(joined),
                watcher::Event::InitDone,
                watcher::Event::Apply(reported),
                watcher::Event::Apply(labelled),
                watcher::Event::Apply(lapsed.clone()),
                watcher::Event::Delete(lapsed),
            ]
            .map(Ok::<_, watcher::Error>),
        );
        let woken: Vec<String> = fact_changes(events, cluster_facts)
            .map(|cluster| {
                let cluster = cluster.expect("no error");
                format!(
                    "{}/{}",
                    cluster.labels().get("env").map_or("-", String::as_str),
                    cluster.is_available()
                )
            })
            .collect()
            .await;
        // Joined; labelled; lapsed; deleted (the agent's report of its version and claims woke
        // nothing).
        assert_eq!(woken, ["-/true", "prod/true", "prod/false", "prod/false"]);
    }

    #[test]
    fn a_passs_own_write_of_its_cluster_wakes_no_pass_and_anothers_change_with_it_does() {
        let versioned = |version: &str, status: serde_json::Value| {
            let mut cluster = cluster(json!({}), status);
            cluster.metadata.resource_version = Some(version.to_string());
            cluster
        };
        let joined = json!({"conditions": [{"type": "ManagedClusterJoined", "status": "True",
            "reason": "r", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        let patch = json!({"spec": {"leaseDurationSeconds": 20}});
        let read = versioned("1", json!({}));

        // The lease written onto the version read: its event is the write's own, once.
        let writes = ClusterWrites::default();
        writes.wrote(&read, &patch, &versioned("2", json!({})));
        assert!(
            !writes.is_echo(&versioned("1", json!({}))),
            "an older version"
        );
        assert!(writes.is_echo(&versioned("2", json!({}))));
        assert!(
            !writes.is_echo(&versioned("2", json!({}))),
            "once (a relisting brings it again)"
        );

        // The agent joined before the write landed: the version written holds the join, which
        // the pass never read.
        let writes = ClusterWrites::default();
        writes.wrote(&read, &patch, &versioned("3", joined.clone()));
        assert!(!writes.is_echo(&versioned("3", joined)));

        // A patch that changed nothing left the version as it was.
        let writes = ClusterWrites::default();
        writes.wrote(&read, &patch, &versioned("1", json!({})));
        assert!(!writes.is_echo(&versioned("1", json!({}))));
    }

    #[test]
    fn only_a_pass_that_acted_beyond_its_cluster_asks_for_the_next_soon() {
        assert!(!looks_again_soon(&[Action::SyncCluster]));
        assert!(!looks_again_soon(&[Action::Accept]));
        assert!(!looks_again_soon(&[Action::Blocked("waiting".into())]));
        assert!(looks_again_soon(&[Action::Accept, Action::InstallAgent]));
        assert!(looks_again_soon(&[Action::AddTaint("t")]));
    }

    fn names(refs: Vec<ObjectRef<Spoke>>) -> Vec<String> {
        let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        names.sort();
        names
    }

    #[test]
    fn a_settled_spoke_is_looked_at_again_no_more_often_than_the_fleet_allows() {
        let resync = lifecycle::RESYNC;
        assert_eq!(resync_for(resync, 100), resync, "a small fleet: as ever");
        assert_eq!(resync_for(resync, 1_500), resync);
        assert_eq!(resync_for(resync, 10_000), Duration::from_secs(200));
        assert_eq!(
            resync_for(Duration::from_secs(2), 10_000),
            Duration::from_secs(2),
            "what a pass waits on is not put off"
        );
    }

    #[test]
    fn a_hubs_passes_begin_no_closer_together_than_its_fleet_allows() {
        let passes = HubPasses::default();
        let start = Instant::now();
        let after = |millis| start + Duration::from_millis(millis);
        assert_eq!(
            passes.wait("east", 10_000, start),
            None,
            "the first at once"
        );
        assert_eq!(
            passes.wait("east", 10_000, after(400)),
            Some(Duration::from_millis(600)),
            "10,000 spokes: a second apart"
        );
        assert_eq!(
            passes.wait("west", 10_000, after(400)),
            None,
            "each hub apart"
        );
        assert_eq!(passes.wait("east", 10_000, after(1_000)), None);
        assert_eq!(
            passes.wait("east", 10, after(1_002)),
            None,
            "10 spokes: a millisecond apart"
        );
    }

    #[tokio::test]
    async fn a_hub_pass_wakes_on_what_it_reads_of_a_spoke_not_on_every_status_write() {
        let version = |phase: &str, condition: &str, deleting: bool| {
            let mut spoke = spoke(
                1,
                json!({"phase": phase, "conditions": [{"type": "ManagedClusterJoined",
                    "status": condition, "reason": "r", "message": "m",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
            );
            if deleting {
                spoke.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
            }
            spoke
        };
        let events = futures::stream::iter(
            [
                watcher::Event::Init,
                watcher::Event::InitApply(version("Joining", "False", false)),
                watcher::Event::InitDone,
                watcher::Event::Apply(version("Joining", "True", false)),
                watcher::Event::Apply(version("Running", "True", false)),
                watcher::Event::Apply(version("Running", "True", true)),
                watcher::Event::Delete(version("Running", "True", true)),
            ]
            .map(Ok::<_, watcher::Error>),
        );
        let woken: Vec<String> = fact_changes(events, hub_facts)
            .map(|spoke| {
                let spoke = spoke.expect("no error");
                let status = spoke.status.expect("a status");
                format!(
                    "{:?}{}",
                    status.phase.expect("a phase"),
                    if spoke.metadata.deletion_timestamp.is_some() {
                        " deleting"
                    } else {
                        ""
                    }
                )
            })
            .collect()
            .await;
        // Listed; Running; being deleted; deleted (the condition its pass does not read woke
        // nothing).
        assert_eq!(
            woken,
            ["Joining", "Running", "Running deleting", "Running deleting"]
        );
    }

    #[test]
    fn a_hub_wakes_every_spoke_on_its_spec_those_in_progress_on_its_rollout_none_on_the_rest() {
        let (store, mut writer) = reflector::store::<Spoke>();
        for name in ["a", "b", "c"] {
            let spoke: Spoke = serde_json::from_value(json!({
                "apiVersion": "fleetform.io/v1alpha1",
                "kind": "Spoke",
                "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE},
                "spec": {"hubRef": "hub", "kubeconfig": {"embedded": {}}},
            }))
            .expect("a Spoke");
            writer.apply_watcher_event(&watcher::Event::Apply(spoke));
        }
        let triggers = HubTriggers::default();
        assert_eq!(names(triggers.wakes(&hub(1, &[]), &store)), ["a", "b", "c"]);
        assert!(
            triggers.wakes(&hub(1, &[]), &store).is_empty(),
            "a status write that changes neither"
        );
        assert_eq!(names(triggers.wakes(&hub(1, &["b"]), &store)), ["b"]);
        assert!(triggers.wakes(&hub(1, &["b"]), &store).is_empty());
        assert_eq!(
            names(triggers.wakes(&hub(2, &["b"]), &store)),
            ["a", "b", "c"]
        );
    }
}
