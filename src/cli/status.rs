//! `fleetform status`: one row per spoke of every hub of the fleet, and a line per FleetSync;
//! when the source is invalid, the hubs of its valid documents, then its problems.

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::watcher;
use serde::Serialize;

use super::{ClusterArgs, Empty, Output, SourceArgs, exit, print_data};
use crate::access::Reached;
use crate::api::{FleetSync, Hub, ManagedCluster, ManagedClusterAddOn, Spoke};
use crate::fleet::Diagnostic;
use crate::runtime::watch::BackingOff;
use crate::status::{Report, gather};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    clusters: ClusterArgs,
    /// How to print the rows: a table, or JSON or YAML (`{spokes, fleetSyncs, rollouts, errors}`).
    #[arg(short, long, value_enum, default_value_t)]
    output: Output,
    /// Keep printing the rows whenever a spoke, cluster, addon or lease changes.
    #[arg(short, long)]
    watch: bool,
}

pub async fn run(args: Args) -> u8 {
    // A fleet whose newest commit is invalid still has a live fleet to show: the hubs of the
    // documents that are valid are read, and the problems printed after them.
    let (origin, fleet, problems) = match crate::source::load_fleet_partial(&args.source.spec()) {
        Ok(loaded) => loaded,
        Err(err) => {
            errln!("error: {err}");
            return super::source_error_code(&err);
        }
    };
    if problems.is_empty()
        && let Some(message) = Empty::Refuse.check(&origin, &fleet)
    {
        errln!("error: {message}");
        return exit::INVALID_INPUT;
    }
    let code = if problems.is_empty() {
        exit::OK
    } else {
        exit::INVALID_INPUT
    };
    let access = args.clusters.access();
    let mut hubs = Vec::new();
    for (name, hub) in &fleet.hubs {
        match access.hub(hub).await {
            Ok(reached) => hubs.push((name.clone(), reached)),
            Err(err) => {
                errln!("error: {err}");
                return exit::INVALID_INPUT;
            }
        }
    }
    let mut changes = args.watch.then(|| changes(&hubs));
    if let Some(changes) = changes.as_mut() {
        // Start watching before the first read, so no change can fall between the two.
        let mut ready = 0;
        while ready < WATCHED_KINDS * hubs.len() {
            match changes.next().await {
                Some(Signal::Ready) => ready += 1,
                Some(Signal::Change) => {}
                Some(Signal::NotServed(missing)) => return not_served(&missing),
                None => return code,
            }
        }
    }
    let mut last = None;
    loop {
        let current = match collect(&hubs).await {
            Ok(current) => current,
            Err(message) => {
                errln!("error: {message}");
                return exit::INVALID_INPUT;
            }
        };
        if last.as_ref() != Some(&current) {
            match args.output {
                Output::Text => {
                    out!("{}", current.text());
                    if !problems.is_empty() {
                        outln!();
                        outln!("source: {origin}");
                        super::output::print_diagnostics(&problems);
                    }
                }
                Output::Json | Output::Yaml => print_data(
                    args.output,
                    &Document {
                        report: &current,
                        errors: &problems,
                    },
                ),
            }
            if changes.is_some() && args.output == Output::Text {
                outln!();
            }
            last = Some(current);
        }
        // Nobody reads any more (`status --watch | head`): stop, as a SIGPIPE would.
        let Some(changes) = changes.as_mut().filter(|_| !super::output::stdout_closed()) else {
            return code;
        };
        loop {
            tokio::select! {
                signal = changes.next() => match signal {
                    Some(Signal::Change) => break,
                    Some(Signal::Ready) => {}
                    Some(Signal::NotServed(missing)) => return not_served(&missing),
                    None => return code,
                },
                _ = super::shutdown_signal() => return code,
            }
        }
    }
}

/// `status -o json|yaml`: the report, and the problems of the source when it is invalid.
#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    report: &'a Report,
    #[serde(skip_serializing_if = "<[Diagnostic]>::is_empty")]
    errors: &'a [Diagnostic],
}

async fn collect(hubs: &[(String, Reached)]) -> Result<Report, String> {
    let mut report = Report::default();
    for (name, reached) in hubs {
        let client = reached.client();
        let state = gather(name, &client)
            .await
            .map_err(|err| super::at(&format!("hub {name}: {err}"), reached))?;
        report.add(&state, Timestamp::now());
    }
    Ok(report)
}

/// How many kinds `--watch` follows on each hub (see [`changes`]).
const WATCHED_KINDS: usize = 6;

/// What the watches behind `--watch` report.
enum Signal {
    /// One watch has replayed what existed when it started.
    Ready,
    /// Something a row shows changed.
    Change,
    /// A hub does not serve a kind `--watch` follows.
    NotServed(NotServed),
}

/// A kind a hub does not serve (its CRD is not installed there).
struct NotServed {
    hub: String,
    kind: String,
    crd: String,
}

/// Says that `--watch` cannot follow what `missing` names; the exit code.
fn not_served(missing: &NotServed) -> u8 {
    errln!(
        "error: hub {}: {} are not served there (CRD {} is not installed), so `status --watch` cannot follow them; install fleetform's CRDs on the hub (`fleetform crds | kubectl apply -f -`, or `fleetform install`), or run `status` without --watch",
        missing.hub,
        missing.kind,
        missing.crd
    );
    exit::INVALID_INPUT
}

/// Watches of Spokes, ManagedClusters, ManagedClusterAddOns, Leases, FleetSyncs and Hubs (their
/// rollouts) on every hub.
fn changes(hubs: &[(String, Reached)]) -> impl futures::Stream<Item = Signal> + Unpin {
    fn changes_of<K>(hub: &str, api: Api<K>) -> futures::stream::BoxStream<'static, Signal>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + 'static,
    {
        let missing = NotServed {
            hub: hub.to_string(),
            kind: format!("{}s", K::kind(&())),
            crd: format!("{}.{}", K::plural(&()), K::group(&())),
        };
        let mut missing = Some(missing);
        // A watch that fails is tried again after a pause, not at once.
        watcher(api, watcher::Config::default())
            .backing_off()
            .filter_map(move |event| {
                let signal = match event {
                    Ok(watcher::Event::InitDone) => Some(Signal::Ready),
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                        Some(Signal::Change)
                    }
                    Err(watcher::Error::InitialListFailed(err))
                        if crate::runtime::error::is_not_found(&err) =>
                    {
                        missing.take().map(Signal::NotServed)
                    }
                    _ => None,
                };
                async move { signal }
            })
            .boxed()
    }
    futures::stream::select_all(
        hubs.iter()
            .flat_map(|(hub, reached)| -> [_; WATCHED_KINDS] {
                let client = &reached.client();
                [
                    changes_of(hub, Api::<Spoke>::all(client.clone())),
                    changes_of(hub, Api::<ManagedCluster>::all(client.clone())),
                    changes_of(hub, Api::<ManagedClusterAddOn>::all(client.clone())),
                    changes_of(hub, Api::<Lease>::all(client.clone())),
                    changes_of(hub, Api::<FleetSync>::all(client.clone())),
                    changes_of(hub, Api::<Hub>::all(client.clone())),
                ]
            }),
    )
}
