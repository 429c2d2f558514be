//! `fleetform status`: one row per spoke of every hub of the fleet.

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;
use kube::{Api, Client};

use super::{ClusterArgs, Output, SourceArgs, exit, print_data};
use crate::api::{ManagedCluster, ManagedClusterAddOn, Spoke};

use crate::status::{SpokeRow, gather, rows, table};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    clusters: ClusterArgs,
    #[arg(short, long, value_enum, default_value_t)]
    output: Output,
    /// Keep printing the rows whenever a spoke, cluster, addon or lease changes.
    #[arg(short, long)]
    watch: bool,
}

pub async fn run(args: Args) -> u8 {
    let (_, fleet) = match super::load_fleet_or_report(&args.source.spec()) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let access = args.clusters.access();
    let mut hubs = Vec::new();
    for (name, hub) in &fleet.hubs {
        match access.hub(hub).await {
            Ok(client) => hubs.push((name.clone(), client)),
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
                None => return exit::OK,
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
                Output::Text => out!("{}", table(&current)),
                Output::Json | Output::Yaml => print_data(args.output, &current),
            }
            if changes.is_some() && args.output == Output::Text {
                outln!();
            }
            last = Some(current);
        }
        // Nobody reads any more (`status --watch | head`): stop, as a SIGPIPE would.
        let Some(changes) = changes.as_mut().filter(|_| !super::output::stdout_closed()) else {
            return exit::OK;
        };
        loop {
            tokio::select! {
                signal = changes.next() => match signal {
                    Some(Signal::Change) => break,
                    Some(Signal::Ready) => {}
                    None => return exit::OK,
                },
                _ = super::shutdown_signal() => return exit::OK,
            }
        }
    }
}

async fn collect(hubs: &[(String, Client)]) -> Result<Vec<SpokeRow>, String> {
    let mut all = Vec::new();
    for (name, client) in hubs {
        let state = gather(name, client)
            .await
            .map_err(|err| format!("hub {name}: {err}"))?;
        all.extend(rows(&state, Timestamp::now()));
    }
    Ok(all)
}

/// How many kinds `--watch` follows on each hub (see [`changes`]).
const WATCHED_KINDS: usize = 4;

/// What the watches behind `--watch` report.
enum Signal {
    /// One watch has replayed what existed when it started.
    Ready,
    /// Something a row shows changed.
    Change,
}

/// Watches of Spokes, ManagedClusters, ManagedClusterAddOns and Leases on every hub.
fn changes(hubs: &[(String, Client)]) -> impl futures::Stream<Item = Signal> + Unpin {
    fn changes_of<K>(api: Api<K>) -> futures::stream::BoxStream<'static, Signal>
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    {
        watcher(api, watcher::Config::default())
            .filter_map(|event| async move {
                match event {
                    Ok(watcher::Event::InitDone) => Some(Signal::Ready),
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                        Some(Signal::Change)
                    }
                    _ => None,
                }
            })
            .boxed()
    }
    futures::stream::select_all(hubs.iter().flat_map(|(_, client)| -> [_; WATCHED_KINDS] {
        [
            changes_of(Api::<Spoke>::all(client.clone())),
            changes_of(Api::<ManagedCluster>::all(client.clone())),
            changes_of(Api::<ManagedClusterAddOn>::all(client.clone())),
            changes_of(Api::<Lease>::all(client.clone())),
        ]
    }))
}
