//! `fleetform up [SOURCE]`: run a whole fleet on this machine and tell its story on stdout:
//! each commit applied (short SHA, subject, what changed), the sync stalling and recovering,
//! each spoke's progress, spoke clusters started and removed, and `converged`. Everything is
//! followed by watches on the hubs (FleetSync Events, Spokes, ManagedClusters and their addons),
//! not by polling.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

use futures::stream::{BoxStream, select_all};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, reflector as reflect};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::{ClusterArgs, exit};
use crate::api::fleet::SYSTEM_NAMESPACE;
use crate::api::{FleetSync, ManagedCluster, ManagedClusterAddOn, Spoke};
use crate::runtime::watch::BackingOff;
use crate::source::SourceSpec;
use crate::status::{HubState, SpokeRow};
use crate::up::{self, ClusterChange, UpConfig};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The fleet: a directory (in a git work tree: its repository is followed), a local git
    /// repository, or a git URL.
    #[arg(env = super::SOURCE_ENV, default_value = super::DEFAULT_SOURCE)]
    source: String,
    /// Branch, tag or commit to follow (default: HEAD).
    #[arg(long = "ref")]
    git_ref: Option<String>,
    /// Directory of the fleet inside the repository.
    #[arg(long)]
    path: Option<String>,
    /// Seconds between two fetches of the repository.
    #[arg(long, default_value_t = 5)]
    interval: u64,
    /// Where to serve the dashboard (port 0, or the address taken: any free port).
    #[arg(long, default_value = crate::dashboard::DEFAULT_UP_ADDR)]
    dashboard_addr: std::net::SocketAddr,
    /// Serve no dashboard.
    #[arg(long)]
    no_dashboard: bool,
    #[command(flatten)]
    clusters: ClusterArgs,
}

pub async fn run(args: Args) -> u8 {
    let spec = SourceSpec {
        location: args.source.clone(),
        git_ref: args.git_ref.clone(),
        path: args.path.clone(),
        // `up` follows commits: it starts the clusters the committed fleet declares.
        commits_only: true,
        verify: None,
    };
    let (_, fleet) = match super::load_fleet_or_report(&spec) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let (repo, path) = follow(&spec);
    let access = args.clusters.access();
    let config = UpConfig {
        git_ref: args.git_ref.clone().unwrap_or_else(|| "HEAD".to_string()),
        path,
        interval: Duration::from_secs(args.interval.max(1)),
        dashboard_addr: (!args.no_dashboard).then_some(args.dashboard_addr),
        ..UpConfig::new(access.data_dir.clone(), repo)
    };
    // What the sync reports from here on is news; what it said in an earlier run is not.
    let started = Timestamp::now();
    outln!("data dir: {}", config.data_dir.display());
    let running = match up::start(&fleet, config.clone()).await {
        Ok(running) => running,
        Err(err) => {
            errln!("error: {err}");
            return exit::INVALID_INPUT;
        }
    };
    let clusters = running
        .hubs
        .iter()
        .map(|hub| ("hub", hub.name.clone(), hub.url(), hub.kubeconfig.clone()))
        .chain(
            running
                .spokes()
                .into_iter()
                .map(|(name, url, kubeconfig)| ("spoke", name, url, kubeconfig)),
        );
    for (role, name, url, kubeconfig) in clusters {
        outln!(
            "{role:<5} {name:<20} {url}  kubeconfig: {}",
            kubeconfig.display()
        );
    }
    if let Some(url) = running.dashboard_url() {
        outln!("dashboard: {url}");
    }
    outln!(
        "following {} at {}{} every {} s; Ctrl-C stops (state is kept)",
        config.repo,
        config.git_ref,
        config
            .path
            .as_deref()
            .map(|path| format!(" (path {path})"))
            .unwrap_or_default(),
        config.interval.as_secs()
    );
    let progress = show_progress(&running, &args.source, started);
    tokio::select! {
        _ = super::shutdown_signal() => {}
        _ = progress => {}
    }
    outln!("stopping (Ctrl-C again to stop at once)");
    tokio::select! {
        _ = running.shutdown() => {}
        _ = super::shutdown_signal() => outln!("stopped at once"),
    }
    exit::OK
}

/// What a FleetSync follows for `spec`: a directory inside a git work tree is followed through
/// its repository (so commits, not edits, are what gets applied); anything else as it is.
fn follow(spec: &SourceSpec) -> (String, Option<String>) {
    let location = Path::new(&spec.location);
    let within = |root: &Path| -> Option<(String, Option<String>)> {
        let full = location.canonicalize().ok()?;
        let root = root.canonicalize().ok()?;
        let relative = full.strip_prefix(&root).ok()?;
        let mut path = relative.to_string_lossy().to_string();
        if let Some(extra) = &spec.path {
            path = if path.is_empty() {
                extra.clone()
            } else {
                format!("{path}/{extra}")
            };
        }
        Some((
            root.display().to_string(),
            (!path.is_empty()).then_some(path),
        ))
    };
    if location.is_dir()
        && let Ok(repo) = git2::Repository::discover(location)
        && let Some(found) = repo.workdir().and_then(within)
    {
        return found;
    }
    (spec.location.clone(), spec.path.clone())
}

/// Something the console may have to tell.
enum Happening {
    /// A watch of hub `hub` (an index of `Running::hubs`) changed; `synced` when a listing
    /// finished.
    Hub { hub: usize, synced: bool },
    /// The sync of hub `hub` published an Event about its FleetSync.
    SyncEvent { hub: usize, event: Box<Event> },
    /// A spoke cluster started or was removed.
    Cluster(ClusterChange),
}

/// The objects of a store.
fn owned<K: Resource<DynamicType = ()> + Clone>(store: &Store<K>) -> Vec<K> {
    store
        .state()
        .iter()
        .map(|object| (**object).clone())
        .collect()
}

/// What one hub's watches hold.
struct HubStores {
    name: String,
    spokes: Store<Spoke>,
    clusters: Store<ManagedCluster>,
    addons: Store<ManagedClusterAddOn>,
    /// Listings finished so far; rows are shown once all three watches have listed.
    synced: usize,
}

/// The watches whose objects make a hub's rows.
const ROW_WATCHES: usize = 3;

impl HubStores {
    fn state(&self) -> HubState {
        HubState {
            hub: self.name.clone(),
            spokes: owned(&self.spokes),
            clusters: self
                .clusters
                .state()
                .into_iter()
                .map(|cluster| {
                    (
                        cluster.metadata.name.clone().unwrap_or_default(),
                        (*cluster).clone(),
                    )
                })
                .collect(),
            addons: owned(&self.addons),
            // Lease ages and FleetSyncs are not part of a progress line (up prints the
            // FleetSync's story from its Events).
            leases: BTreeMap::new(),
            fleet_syncs: Vec::new(),
            hub_status: None,
        }
    }
}

/// A watch of `api` kept in a store; each change is a [`Happening::Hub`] of `hub`.
fn watched<K>(api: Api<K>, hub: usize) -> (Store<K>, BoxStream<'static, Happening>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflect(writer, watcher(api, watcher::Config::default()))
        .backing_off()
        .filter_map(move |event| {
            std::future::ready(match event {
                Ok(watcher::Event::InitDone) => Some(Happening::Hub { hub, synced: true }),
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                    Some(Happening::Hub { hub, synced: false })
                }
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) | Err(_) => None,
            })
        })
        .boxed();
    (store, stream)
}

/// The Events `fleetform-sync` publishes about the hub's FleetSyncs.
fn sync_events(client: Client, hub: usize) -> BoxStream<'static, Happening> {
    watcher(
        Api::<Event>::namespaced(client, SYSTEM_NAMESPACE),
        watcher::Config::default(),
    )
    .backing_off()
    .applied_objects()
    .filter_map(move |event| {
        std::future::ready(match event {
            Ok(event)
                if event.reporting_controller.as_deref() == Some(crate::sync::CONTROLLER_NAME)
                    && event.regarding.as_ref().and_then(|r| r.kind.as_deref())
                        == Some(FleetSync::kind(&()).as_ref()) =>
            {
                Some(Happening::SyncEvent {
                    hub,
                    event: Box::new(event),
                })
            }
            _ => None,
        })
    })
    .boxed()
}

/// Spoke clusters started and removed, from `up` itself.
fn cluster_changes(running: &up::Running) -> BoxStream<'static, Happening> {
    futures::stream::unfold(running.cluster_changes(), |mut changes| async move {
        loop {
            match changes.recv().await {
                Ok(change) => return Some((Happening::Cluster(change), changes)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .boxed()
}

/// Prints what happens to the fleet as it happens: the sync's Events since `started`, a line
/// whenever a spoke's phase, state, availability or addon health changes or the spoke is gone,
/// spoke clusters started and removed, and `converged` when every spoke is Running.
async fn show_progress(running: &up::Running, source: &str, started: Timestamp) {
    let mut streams = vec![cluster_changes(running)];
    let mut hubs = Vec::new();
    for (index, hub) in running.hubs.iter().enumerate() {
        let (spokes, spoke_changes) = watched(
            Api::<Spoke>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE),
            index,
        );
        let (clusters, cluster_changes) =
            watched(Api::<ManagedCluster>::all(hub.client.clone()), index);
        let (addons, addon_changes) =
            watched(Api::<ManagedClusterAddOn>::all(hub.client.clone()), index);
        streams.extend([
            spoke_changes,
            cluster_changes,
            addon_changes,
            sync_events(hub.client.clone(), index),
        ]);
        hubs.push(HubStores {
            name: hub.name.clone(),
            spokes,
            clusters,
            addons,
            synced: 0,
        });
    }
    let mut happenings = select_all(streams);
    let mut console = Console::default();
    while let Some(first) = happenings.next().await {
        // Take everything that is already there, then show the rows once.
        let mut changed_hubs = HashSet::new();
        let mut next = Some(first);
        while let Some(happening) = next {
            match happening {
                Happening::Hub { hub, synced } => {
                    if synced {
                        hubs[hub].synced += 1;
                    }
                    changed_hubs.insert(hub);
                }
                Happening::SyncEvent { hub, event } => {
                    console.sync_event(&hubs[hub].name, &event, started);
                }
                Happening::Cluster(change) => console.cluster_change(&change),
            }
            next = happenings.next().now_or_never().flatten();
        }
        for hub in changed_hubs {
            let stores = &hubs[hub];
            if stores.synced >= ROW_WATCHES {
                let rows = crate::status::rows(&stores.state(), Timestamp::now());
                console.rows(&stores.name, &rows);
            }
        }
        console.converged(source);
    }
}

/// What the console has shown.
#[derive(Default)]
struct Console {
    /// The last line shown per (hub, spoke), and whether that spoke is Running.
    rows: BTreeMap<(String, String), (String, bool)>,
    events: HashSet<String>,
    /// Every spoke was Running when last looked at.
    converged: bool,
}

fn now() -> String {
    Timestamp::now().strftime("%H:%M:%S").to_string()
}

impl Console {
    fn sync_event(&mut self, hub: &str, event: &Event, started: Timestamp) {
        let uid = event.metadata.uid.clone().unwrap_or_default();
        let recent = event
            .event_time
            .as_ref()
            .is_some_and(|time| time.0 >= started);
        if !recent || !self.events.insert(uid) {
            return;
        }
        let note = event.note.as_deref().unwrap_or_default();
        if event.type_.as_deref() == Some("Warning") {
            outln!(
                "{} {hub}: {}: {note}",
                now(),
                event.reason.as_deref().unwrap_or_default()
            );
        } else {
            outln!("{} {hub}: {note}", now());
        }
    }

    fn cluster_change(&mut self, change: &ClusterChange) {
        match change {
            ClusterChange::Started {
                spoke,
                url,
                kubeconfig,
            } => outln!(
                "{} spoke cluster {spoke} started: {url}  kubeconfig: {}",
                now(),
                kubeconfig.display()
            ),
            ClusterChange::Removed {
                spoke,
                dir,
                error: None,
            } => outln!(
                "{} spoke cluster {spoke} stopped, {} deleted",
                now(),
                dir.display()
            ),
            ClusterChange::Removed {
                spoke,
                dir,
                error: Some(err),
            } => outln!(
                "{} spoke cluster {spoke} stopped; cannot delete {}: {err}",
                now(),
                dir.display()
            ),
        }
    }

    /// Shows the rows of `hub` that changed, and its spokes that are gone.
    fn rows(&mut self, hub: &str, rows: &[SpokeRow]) {
        let gone: Vec<(String, String)> = self
            .rows
            .keys()
            .filter(|(of, spoke)| of == hub && !rows.iter().any(|row| &row.spoke == spoke))
            .cloned()
            .collect();
        for key in gone {
            self.rows.remove(&key);
            outln!("{} {}/{}: removed", now(), key.0, key.1);
        }
        for row in rows {
            let line = progress_line(row);
            let key = (row.hub.clone(), row.spoke.clone());
            if self.rows.get(&key).map(|(shown, _)| shown) != Some(&line) {
                outln!("{} {line}", now());
                let running = row.phase.as_deref() == Some("Running");
                self.rows.insert(key, (line, running));
            }
        }
    }

    /// Says `converged` when every spoke is Running, where one was not before.
    fn converged(&mut self, source: &str) {
        let spokes = self.rows.len();
        let all_running = spokes > 0 && self.rows.values().all(|(_, running)| *running);
        if !all_running || self.converged {
            self.converged = all_running;
            return;
        }
        self.converged = true;
        outln!(
            "{} converged: {spokes} spoke(s) Running; `fleetform status {source}` shows them, a commit changes them",
            now(),
        );
    }
}

fn progress_line(row: &SpokeRow) -> String {
    format!(
        "{}/{}: {} {} available={} joined={} addons {}/{}",
        row.hub,
        row.spoke,
        row.phase.as_deref().unwrap_or("-"),
        row.state,
        row.available.as_deref().unwrap_or("-"),
        row.joined,
        row.addons_available,
        row.addons
    )
}
