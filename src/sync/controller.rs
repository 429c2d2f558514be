//! The FleetSync controller: fetch, load, plan and apply a FleetSync's commit on this hub, write
//! its status and events, and put the commit in force back when someone changes what it wrote.
//!
//! A reconcile fetches when the FleetSync's spec changed (its generation), when its interval is
//! up, or when nothing is remembered for it yet; otherwise it was woken by a change to a managed
//! Hub, Spoke or ClusterManagementAddOn and re-applies the last good fleet it holds in memory.
//! Loading is [`crate::source`]'s; observing, planning and applying the [`crate::pipeline`]'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument, warn};

use super::Prepare;
use super::metrics::Metrics;
use super::notify::{self, Event as NoticeEvent, Notifier};
use super::status::{
    Commit, Outcome, REASON_RECOVERED, SYNC_CONDITIONS, Transition, next_status, transition,
};
use crate::api::fleet::{FleetSync, SYSTEM_NAMESPACE};
use crate::api::{ClusterManagementAddOn, Hub, Spoke};
use crate::apply::{WrittenObject, apply_hub};
use crate::events::{EventType, Reporter};
use crate::fleet::Fleet;
use crate::pipeline::{Loaded, Planning};
use crate::plan::PruneGuard;
use crate::plan::desired::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::runtime::admin::LeaderReadiness as Readiness;
use crate::runtime::controller::ErrorPolicy;
use crate::runtime::error::KubeError;
use crate::source::{LoadError, SourceSpec, load_fleet};

/// Field manager of the FleetSync status writes.
pub const STATUS_FIELD_MANAGER: &str = "fleetform-sync";

/// How soon a sync whose hub write failed is tried again (at most its interval).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// The longest a FleetSync whose status cannot be written waits before it is tried again.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);
/// How long a fetch that finds the commit in force again skips observing and planning the hub:
/// the drift watches put right what changes meanwhile, and a plan lists every object of the
/// fleet and applies each it cannot tell unchanged (10,000 pages of Spokes and as many applies
/// for 10,000 spokes at worst), so doing it each interval would keep a large hub busy. Past this, the fetch converges in full anyway, for what no watch sees.
const FULL_CONVERGE_EVERY: Duration = Duration::from_secs(600);

/// What the controller remembers of one FleetSync between reconciles.
struct Memory {
    generation: Option<i64>,
    /// The push receiver's fetch request the last fetch answered.
    fetch_request: Option<String>,
    next_fetch: Instant,
    /// The fleet of the commit in force.
    in_force: Option<Arc<Loaded>>,
    /// When the fleet in force was last applied in full (observed, planned, written).
    converged_at: Option<Instant>,
}

/// What every reconcile shares.
pub struct Context {
    /// The hub the controller runs on and writes to.
    pub client: Client,
    /// The hub's name in the fleet; `None`: the fleet's only hub.
    pub hub: Option<String>,
    /// The prune guard's percentage (see [`PruneGuard`]).
    pub max_prune_percent: u32,
    /// Publishes events as `fleetform-sync`, one per occurrence.
    pub events: Reporter,
    pub metrics: Metrics,
    /// Told when a sync finished, for `/readyz`.
    pub readiness: Arc<Readiness>,
    /// What must happen before a commit's objects are written (see [`Prepare`]).
    pub prepare: Option<Prepare>,
    /// Tells `spec.notify`'s providers of transitions; `None`: nobody.
    pub notifier: Option<Notifier>,
    memory: Mutex<HashMap<ObjectRef<FleetSync>, Memory>>,
}

impl Context {
    /// A context that remembers nothing yet: the first reconcile of each FleetSync fetches.
    pub fn new(
        client: Client,
        hub: Option<String>,
        max_prune_percent: u32,
        events: Reporter,
        metrics: Metrics,
        readiness: Arc<Readiness>,
        prepare: Option<Prepare>,
    ) -> Self {
        Context {
            client,
            hub,
            max_prune_percent,
            events,
            metrics,
            readiness,
            prepare,
            notifier: None,
            memory: Mutex::default(),
        }
    }

    /// The context, telling `notifier` of transitions.
    pub fn with_notifier(self, notifier: Notifier) -> Self {
        Context {
            notifier: Some(notifier),
            ..self
        }
    }

    fn notify(&self, fleetsync: &FleetSync, event: NoticeEvent, outcome: &Outcome, note: &str) {
        if let Some(notifier) = &self.notifier {
            notifier.notify(fleetsync, notify::notice(event, outcome, note));
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<FleetSync>, Memory>> {
        // A reconcile that panicked holding the lock left nothing half-written worth refusing.
        self.memory.lock().unwrap_or_else(|err| err.into_inner())
    }
}

/// Runs the controller for the FleetSyncs of `namespace` until `stop` is cancelled.
pub async fn run(
    ctx: Arc<Context>,
    namespace: String,
    drift_watches: DriftWatches,
    stop: CancellationToken,
) {
    let errors = ErrorPolicy::counted(
        "sync",
        RETRY_AFTER_FAILURE,
        MAX_RETRY_DELAY,
        &ctx.metrics.controllers,
    );
    let fleetsyncs: Api<FleetSync> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut controller = Controller::new(fleetsyncs, watcher::Config::default());
    let store = controller.store();
    let ready = store.clone();
    if drift_watches.hubs {
        controller = controller.watches_stream(
            drift_triggers(Api::<Hub>::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE)),
            every_fleetsync(store.clone()),
        );
    }
    if drift_watches.spokes {
        controller = controller.watches_stream(
            drift_triggers(Api::<Spoke>::namespaced(
                ctx.client.clone(),
                SYSTEM_NAMESPACE,
            )),
            every_fleetsync(store.clone()),
        );
    }
    if drift_watches.addons {
        controller = controller.watches_stream(
            drift_triggers(Api::<ClusterManagementAddOn>::all(ctx.client.clone())),
            every_fleetsync(store),
        );
    }
    let run = controller
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(errors.measured(reconcile), errors.policy(), ctx)
        .for_each(errors.outcomes());
    tokio::pin!(run);
    tokio::select! {
        _ = &mut run => return,
        _ = stop.cancelled() => {}
    }
    // Let the reconcile in flight finish. Before the FleetSync cache is ready nothing runs, and
    // kube's runner would wait for a readiness that can no longer come.
    if crate::runtime::watch::has_listed(&ready) {
        run.await;
    }
}

/// Which managed kinds are watched for drift (those whose CRD is installed).
#[derive(Clone, Copy, Debug)]
pub struct DriftWatches {
    pub hubs: bool,
    pub spokes: bool,
    pub addons: bool,
}

/// Maps any change of a managed object to every FleetSync: each may hold objects of its hub.
fn every_fleetsync<K>(
    store: Store<FleetSync>,
) -> impl Fn(K) -> Vec<ObjectRef<FleetSync>> + Send + Sync + 'static {
    move |_| {
        store
            .state()
            .iter()
            .map(|fleetsync| ObjectRef::from_obj(fleetsync.as_ref()))
            .collect()
    }
}

/// Changes of fleetform's objects of one kind that can be drift: spec (generation), labels and
/// annotations, and deletions — not the status writes of the agents and hub loops.
fn drift_triggers<K>(api: Api<K>) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let config = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let mut seen: HashMap<String, u64> = HashMap::new();
    watcher(api, config).try_filter_map(move |event| {
        let changed = match event {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                let uid = object.meta().uid.clone().unwrap_or_default();
                let digest = managed_digest(object.meta());
                (seen.insert(uid, digest) != Some(digest)).then_some(object)
            }
            watcher::Event::Delete(object) => {
                seen.remove(&object.meta().uid.clone().unwrap_or_default());
                Some(object)
            }
            watcher::Event::Init | watcher::Event::InitDone => None,
        };
        std::future::ready(Ok(changed))
    })
}

fn managed_digest(meta: &kube::api::ObjectMeta) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    hasher.finish()
}

#[instrument(skip(fleetsync, ctx), fields(fleetsync = %fleetsync.name_any()))]
async fn reconcile(fleetsync: Arc<FleetSync>, ctx: Arc<Context>) -> Result<Action, KubeError> {
    let key = ObjectRef::from_obj(fleetsync.as_ref());
    let generation = fleetsync.metadata.generation;
    let interval =
        Duration::from_secs(u64::try_from(fleetsync.spec.interval_seconds.max(1)).unwrap_or(1));
    let now = Instant::now();
    let fetch_request = super::webhook::fetch_request(&fleetsync);
    // `in_force_recently`: the commit in force was applied in full lately, under this spec.
    let (fetch, mut in_force, in_force_recently) = {
        let memory = ctx.memory();
        match memory.get(&key) {
            Some(remembered) => (
                remembered.generation != generation
                    || now >= remembered.next_fetch
                    || remembered.fetch_request != fetch_request,
                remembered.in_force.clone(),
                remembered.generation == generation
                    && remembered
                        .converged_at
                        .is_some_and(|at| now.saturating_duration_since(at) < FULL_CONVERGE_EVERY),
            ),
            None => (true, None, false),
        }
    };
    let guard = PruneGuard {
        max_percent: ctx.max_prune_percent,
        allow_prune: fleetsync.spec.allow_prune,
    };
    let outcome = if fetch {
        let unchanged = match in_force.as_deref() {
            Some(in_force) if in_force_recently => still_at(&fleetsync, in_force).await,
            _ => false,
        };
        let fetched = if unchanged {
            Ok(None)
        } else {
            fetch_commit(&fleetsync, None, &ctx.client).await.map(Some)
        };
        let outcome = match fetched {
            // The ref still points at the commit in force, applied lately: nothing to load.
            Ok(None) => Outcome::Applied {
                commit: in_force
                    .as_deref()
                    .and_then(|loaded| Commit::of(&loaded.origin)),
                objects: Vec::new(),
                drift: false,
            },
            Ok(Some(loaded)) if in_force_recently && same_commit(in_force.as_deref(), &loaded) => {
                Outcome::Applied {
                    commit: Commit::of(&loaded.origin),
                    objects: Vec::new(),
                    drift: false,
                }
            }
            Ok(Some(loaded)) => {
                // The fleet in force is let go while this one is applied: beside it, a fleet of
                // 10,000 spokes (about 20 MB) was one more of the sync's peak. Should this commit
                // not be applied, the next drift loads the commit in force again from the
                // status, as after a restart (`recover_in_force`).
                drop(in_force.take());
                remember(&ctx, &key, |memory| memory.in_force = None);
                let loaded = Arc::new(loaded);
                let outcome = converge(&ctx, &loaded, guard, false).await;
                if matches!(outcome, Outcome::Applied { .. }) {
                    remember(&ctx, &key, |memory| {
                        memory.in_force = Some(loaded);
                        memory.converged_at = Some(now);
                    });
                }
                outcome
            }
            Err(outcome) => outcome,
        };
        let retry = matches!(
            outcome,
            Outcome::Failed { .. } | Outcome::SourceUnavailable { .. }
        );
        remember(&ctx, &key, |memory| {
            // A failed write is tried again soon; everything else waits for the interval.
            memory.generation = generation;
            memory.fetch_request = fetch_request;
            memory.next_fetch = now
                + if retry {
                    interval.min(RETRY_AFTER_FAILURE)
                } else {
                    interval
                };
        });
        Some(outcome)
    } else {
        let in_force = match in_force {
            Some(in_force) => Some(in_force),
            None => recover_in_force(&fleetsync, &ctx, &key).await,
        };
        match in_force {
            Some(in_force) => {
                let outcome = converge(&ctx, &in_force, guard, true).await;
                if matches!(outcome, Outcome::Applied { .. }) {
                    remember(&ctx, &key, |memory| memory.converged_at = Some(now));
                }
                Some(outcome)
            }
            None => None,
        }
    };
    if let Some(outcome) = outcome {
        report(&fleetsync, &ctx, &outcome, fetch).await?;
    }
    let next_fetch = ctx
        .memory()
        .get(&key)
        .map_or(now + interval, |memory| memory.next_fetch);
    Ok(Action::requeue(
        next_fetch.saturating_duration_since(Instant::now()),
    ))
}

/// Whether `loaded` is the commit `in_force` was loaded from (same repository, ref, path and
/// commit).
fn same_commit(in_force: Option<&Loaded>, loaded: &Loaded) -> bool {
    in_force.is_some_and(|in_force| {
        in_force.origin.commit().is_some() && in_force.origin == loaded.origin
    })
}

fn remember(ctx: &Context, key: &ObjectRef<FleetSync>, change: impl FnOnce(&mut Memory)) {
    let mut memory = ctx.memory();
    let entry = memory.entry(key.clone()).or_insert_with(|| Memory {
        generation: None,
        fetch_request: None,
        next_fetch: Instant::now(),
        in_force: None,
        converged_at: None,
    });
    change(entry);
}

/// After a restart nothing is in memory: the commit in force is the one the status says was
/// applied last.
async fn recover_in_force(
    fleetsync: &FleetSync,
    ctx: &Context,
    key: &ObjectRef<FleetSync>,
) -> Option<Arc<Loaded>> {
    let commit = fleetsync.status.as_ref()?.last_applied_commit.clone()?;
    match fetch_commit(fleetsync, Some(commit.clone()), &ctx.client).await {
        Ok(loaded) => {
            let loaded = Arc::new(loaded);
            remember(ctx, key, |memory| memory.in_force = Some(loaded.clone()));
            Some(loaded)
        }
        Err(outcome) => {
            warn!(%commit, reason = outcome.reason(), "cannot load the commit in force again");
            None
        }
    }
}

/// Whether the FleetSync's ref still points at the commit of `in_force`: fetched and resolved,
/// its tree not read. A fleet of 10,000 Spokes is 10,000 files to parse and validate, which
/// a fetch every interval of an unchanged repository did over again. A failure says no: the
/// full fetch that follows reports it.
async fn still_at(fleetsync: &FleetSync, in_force: &Loaded) -> bool {
    let Some(in_force) = in_force.origin.commit().map(str::to_string) else {
        return false;
    };
    let source = source_spec(fleetsync, None, None);
    let current = tokio::task::spawn_blocking(move || crate::source::current_commit(&source));
    match current.await {
        Ok(Ok(Some(commit))) => commit == in_force,
        Ok(Ok(None)) => false,
        Ok(Err(err)) => {
            debug!(%err, "cannot resolve the ref; fetching in full");
            false
        }
        Err(err) => {
            debug!(%err, "resolving the ref stopped; fetching in full");
            false
        }
    }
}

/// Where and how the FleetSync's fleet is read: its repo at its ref (or at `commit`), as
/// commits only, signed as `verify` says.
fn source_spec(
    fleetsync: &FleetSync,
    commit: Option<String>,
    verify: Option<crate::source::Verification>,
) -> SourceSpec {
    let spec = &fleetsync.spec;
    SourceSpec {
        location: spec.repo.clone(),
        // "HEAD" (the default) is the remote's default branch, or a local repository's HEAD.
        git_ref: commit
            .or_else(|| Some(spec.git_ref.clone()).filter(|r| r != "HEAD" && !r.is_empty())),
        path: spec.path.clone(),
        // The tree of a resolved commit, never a work tree's edits.
        commits_only: true,
        verify,
    }
}

/// Reads and loads the FleetSync's repo at its ref (or at `commit`), signed as its spec
/// requires; a failure is the outcome.
async fn fetch_commit(
    fleetsync: &FleetSync,
    commit: Option<String>,
    client: &Client,
) -> Result<Loaded, Outcome> {
    let verify = super::trust::verification(client, fleetsync, commit.is_some()).await?;
    let source = source_spec(fleetsync, commit, verify);
    // git2 blocks: fetching and reading a tree run off the async workers.
    let loaded = tokio::task::spawn_blocking(move || load_fleet(&source))
        .await
        .map_err(|err| Outcome::Failed {
            commit: None,
            message: format!("loading the fleet stopped: {err}"),
        })?;
    match loaded {
        Ok((origin, fleet)) => Ok(Loaded { origin, fleet }),
        Err(LoadError::Source(err)) => {
            Err(
                super::trust::refusal(&err).unwrap_or_else(|| Outcome::SourceUnavailable {
                    message: err.to_string(),
                }),
            )
        }
        Err(LoadError::Invalid {
            origin,
            diagnostics,
        }) => Err(Outcome::Invalid {
            commit: Commit::of(&origin),
            problems: diagnostics.iter().map(ToString::to_string).collect(),
        }),
    }
}

/// The hub's name in `fleet`: the one configured, or the fleet's only hub.
fn hub_name(fleet: &Fleet, configured: Option<&str>) -> Result<String, String> {
    match configured {
        Some(name) if fleet.hubs.contains_key(name) => Ok(name.to_string()),
        Some(name) => Err(format!(
            "the fleet has no hub {name:?} (hubs: {}); sync never deletes the hub it runs on",
            fleet.hubs.keys().cloned().collect::<Vec<_>>().join(", ")
        )),
        None => match fleet.hubs.keys().collect::<Vec<_>>().as_slice() {
            [only] => Ok((*only).clone()),
            [] => Err("the fleet has no hub".to_string()),
            many => Err(format!(
                "the fleet has {} hubs ({}); run sync with --hub NAME to say which one this is",
                many.len(),
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        },
    }
}

/// Observes this hub, plans `loaded` against it and applies the plan unless the prune guard
/// holds it back (the [`crate::pipeline`], deletions already under way left out).
async fn converge(ctx: &Context, loaded: &Loaded, guard: PruneGuard, drift: bool) -> Outcome {
    let commit = Commit::of(&loaded.origin);
    let hub = match hub_name(&loaded.fleet, ctx.hub.as_deref()) {
        Ok(hub) => hub,
        Err(problem) => {
            return Outcome::Invalid {
                commit,
                problems: vec![problem],
            };
        }
    };
    let started = Instant::now();
    // The plan is written at once and shown to no one (no diffs): the applies tell what
    // changed. A commit's goes without dry runs; putting drift right asks them: an apply that
    // changes nothing still marks the Hub's Spokes as being written (see `apply::apply_hub`),
    // which is drift again.
    let mut planning = if drift {
        Planning::new(loaded)
    } else {
        Planning::new(loaded).without_dry_runs()
    }
    .unshown();
    if let Err(err) = planning.observe(&hub, &ctx.client).await {
        return Outcome::Failed {
            commit,
            message: err.to_string(),
        };
    }
    let observed = started.elapsed();
    let planned = planning.plan(guard).into_writes(&hub);
    debug!(
        hub,
        observed_s = observed.as_secs_f64(),
        planned_s = (started.elapsed() - observed).as_secs_f64(),
        changes = planned.as_ref().map_or(0, |plan| plan.changes.len()),
        "observed and planned the hub"
    );
    let Some(hub_plan) = planned else {
        return Outcome::Applied {
            commit,
            objects: Vec::new(),
            drift,
        };
    };
    if let Some(block) = hub_plan.prune_blocked {
        return Outcome::PruneBlocked { commit, block };
    }
    if let Some(prepare) = &ctx.prepare
        && let Err(message) = prepare(&loaded.fleet, &hub).await
    {
        return Outcome::Failed { commit, message };
    }
    let writing = Instant::now();
    let applied = apply_hub(&hub_plan, &ctx.client).await;
    debug!(
        hub,
        written_s = writing.elapsed().as_secs_f64(),
        "wrote the hub's plan"
    );
    match applied {
        Ok(applied) => Outcome::Applied {
            commit,
            objects: applied.objects,
            drift,
        },
        Err(err) => Outcome::Failed {
            commit,
            message: err.to_string(),
        },
    }
}

/// Writes the FleetSync's status, its events and the events of the objects written, and counts
/// the sync.
///
/// Only a fetch writes the status: re-applying the commit in force after drift leaves what the
/// last fetch found (an invalid newer commit, say) on display. Events: one per applied commit
/// (and per drift put right), with the commit and what changed; a Warning when the sync stops
/// being Ready, or fails for another reason or commit, and `Recovered` when it is Ready again —
/// a retry that fails as the last one did is no news.
async fn report(
    fleetsync: &FleetSync,
    ctx: &Context,
    outcome: &Outcome,
    fetched: bool,
) -> Result<(), KubeError> {
    let name = fleetsync.name_any();
    let current = fleetsync.status.clone().unwrap_or_default();
    let next = next_status(
        &current,
        outcome,
        fleetsync.metadata.generation,
        Time(Timestamp::now()),
    );
    let changed = fetched && next != current;
    ctx.metrics.sync_finished(outcome.result_label());
    ctx.readiness.work_done();
    if fetched && let Some(commit) = &next.last_applied_commit {
        ctx.metrics
            .applied_commit(&name, current.last_applied_commit.as_deref(), commit);
    }
    let fleetsync_ref = crate::events::reference(fleetsync);
    let in_force = current.last_applied_commit.as_deref();
    if let Outcome::Applied {
        commit,
        objects,
        drift,
    } = outcome
    {
        let newly_applied = fetched && next.last_applied_commit != current.last_applied_commit;
        if newly_applied || !objects.is_empty() {
            let commit_text = commit
                .as_ref()
                .map_or_else(|| "the fleet".to_string(), ToString::to_string);
            let changes = if objects.is_empty() {
                "nothing to change on the hub".to_string()
            } else {
                Outcome::counts(objects)
            };
            let (reason, note) = if *drift {
                (
                    "DriftReverted",
                    format!("put {commit_text} back in force: {changes}"),
                )
            } else {
                ("Applied", format!("applied {commit_text}: {changes}"))
            };
            info!(commit = outcome.sha(), drift, "{note}");
            if newly_applied && !*drift {
                ctx.notify(fleetsync, NoticeEvent::Applied, outcome, &note);
            }
            ctx.events
                .publish_written(&fleetsync_ref, EventType::Normal, reason, "Sync", note)
                .await;
            for object in objects {
                ctx.metrics.object_changed(object.action);
            }
            // Queued, not written: the status does not wait for an Event per object (a commit
            // that changes every spoke's lease wrote 10,000 of them first).
            let publishing = Instant::now();
            for object in objects {
                publish_on_object(ctx, object, &name, &commit_text).await;
            }
            debug!(
                events = objects.len(),
                queued_s = publishing.elapsed().as_secs_f64(),
                "queued the events of the objects written"
            );
        }
    }
    let news = if fetched {
        transition(&current, &next)
    } else if matches!(outcome, Outcome::Applied { .. }) {
        None
    } else {
        // Putting the commit in force back failed: each drift is its own occurrence.
        Some(Transition::NotReady)
    };
    match news {
        Some(Transition::NotReady) => {
            let note = outcome.message(in_force);
            warn!(reason = outcome.reason(), "{note}");
            if outcome.stalled() {
                ctx.notify(fleetsync, NoticeEvent::Stalled, outcome, &note);
            }
            ctx.events
                .publish_written(
                    &fleetsync_ref,
                    EventType::Warning,
                    outcome.reason(),
                    "Sync",
                    note,
                )
                .await;
        }
        Some(Transition::Recovered { after }) => {
            let note = format!("{}; Ready again after {after}", outcome.message(in_force));
            info!("{note}");
            ctx.notify(fleetsync, NoticeEvent::Recovered, outcome, &note);
            ctx.events
                .publish_written(
                    &fleetsync_ref,
                    EventType::Normal,
                    REASON_RECOVERED,
                    "Sync",
                    note,
                )
                .await;
        }
        None => {}
    }
    // Status last: whoever waits for it finds the FleetSync's Events and metrics already there
    // (the Events about the objects it wrote follow from the queue).
    if changed {
        let api: Api<FleetSync> = Api::namespaced(
            ctx.client.clone(),
            fleetsync.namespace().as_deref().unwrap_or(SYSTEM_NAMESPACE),
        );
        // Only the conditions this write owns: another (RolloutHalted) has a writer of its own,
        // and a stale copy from this FleetSync's cache must not undo it.
        let mut written = next.clone();
        written
            .conditions
            .retain(|condition| SYNC_CONDITIONS.contains(&condition.type_.as_str()));
        let patch = json!({
            "apiVersion": FleetSync::api_version(&()),
            "kind": FleetSync::kind(&()),
            "status": written,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(STATUS_FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(KubeError::on(
            format!("FleetSync {name}"),
            "write its status",
        ))?;
    }
    Ok(())
}

async fn publish_on_object(ctx: &Context, object: &WrittenObject, fleetsync: &str, commit: &str) {
    let (reason, action) = match object.action {
        crate::plan::Action::Create => ("Created", "Apply"),
        crate::plan::Action::Update => ("Updated", "Apply"),
        crate::plan::Action::Delete => ("Deleted", "Delete"),
    };
    let verb = object.action.past_tense();
    let kind = object.key.kind;
    let reference = ObjectReference {
        api_version: Some(kind.api_version().to_string()),
        kind: Some(kind.as_str().to_string()),
        name: Some(object.key.name.clone()),
        namespace: object.key.namespace.clone(),
        uid: object.uid.clone(),
        ..ObjectReference::default()
    };
    let note = format!("{verb} by FleetSync {fleetsync} from {commit}");
    // Events are for people: the reporter logs one it cannot write, the sync goes on.
    ctx.events
        .publish(&reference, EventType::Normal, reason, action, note)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet_with_hubs(names: &[&str]) -> Fleet {
        let mut fleet = Fleet::default();
        for name in names {
            let hub: Hub = serde_json::from_value(json!({
                "apiVersion": "fleetform.io/v1alpha1", "kind": "Hub",
                "metadata": {"name": name}, "spec": {"kubeconfig": {"inCluster": true}},
            }))
            .unwrap();
            fleet.hubs.insert(name.to_string(), hub);
        }
        fleet
    }

    #[test]
    fn the_hub_is_the_named_one_or_the_fleets_only_hub() {
        assert_eq!(hub_name(&fleet_with_hubs(&["east"]), None).unwrap(), "east");
        let two = fleet_with_hubs(&["east", "west"]);
        assert_eq!(hub_name(&two, Some("west")).unwrap(), "west");
        let ambiguous = hub_name(&two, None).unwrap_err();
        assert!(ambiguous.contains("--hub NAME"), "{ambiguous}");
        let missing = hub_name(&two, Some("north")).unwrap_err();
        assert!(missing.contains("no hub \"north\""), "{missing}");
    }
}
