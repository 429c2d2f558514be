//! `fleetform sync`: run the in-cluster GitOps controller until SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::exit;
use crate::sync::{DEFAULT_METRICS_ADDR, SyncConfig};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
    /// The hub this runs on, by its name in the fleet (default: the fleet's only hub).
    #[arg(long)]
    hub: Option<String>,
    /// Namespace of the FleetSyncs to serve and of the leader Lease.
    #[arg(long, default_value = crate::api::fleet::SYSTEM_NAMESPACE)]
    namespace: String,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = DEFAULT_METRICS_ADDR)]
    metrics_addr: SocketAddr,
    /// Where to receive pushes (POST /hooks/FLEETSYNC; GitHub, GitLab or generic HMAC) for
    /// FleetSyncs with spec.webhook; not served without it.
    #[arg(long)]
    webhook_addr: Option<SocketAddr>,
    /// Where to serve the dashboard; not served without it.
    #[arg(long)]
    dashboard_addr: Option<SocketAddr>,
    /// The Secret NAMESPACE/NAME whose key `token` a dashboard viewer must present (as
    /// `Authorization: Bearer`, or once as `?token=`); without it anyone reaching the address may
    /// look (serve it on 127.0.0.1 behind `kubectl port-forward`).
    #[arg(long, requires = "dashboard_addr")]
    dashboard_token_secret: Option<crate::dashboard::SecretName>,
    /// This replica's name in the leader election (default: $POD_NAME, else host name and pid).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Seconds the leader Lease holds without renewal.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600))]
    lease_duration_seconds: u64,
    /// Percentage of the hub's spokes a commit may unjoin unless the FleetSync sets allowPrune.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
    max_prune_percent: u32,
}

pub async fn run(args: Args) -> u8 {
    let access = args.cluster.access();
    let client =
        match super::hub::kube_client(access.kubeconfig.as_deref(), access.context.clone()).await {
            Ok(client) => client,
            Err(err) => {
                errln!("error: sync: {err}");
                return exit::INVALID_INPUT;
            }
        };
    let identity = args
        .identity
        .unwrap_or_else(crate::runtime::leader::default_identity);
    let config = SyncConfig {
        hub: args.hub,
        namespace: args.namespace,
        metrics_addr: Some(args.metrics_addr),
        webhook_addr: args.webhook_addr,
        lease_duration: Duration::from_secs(args.lease_duration_seconds),
        max_prune_percent: args.max_prune_percent,
        ..SyncConfig::new(client.clone(), identity)
    };
    let shutdown = CancellationToken::new();
    // Every replica serves the dashboard: it only reads.
    let dashboard = match args.dashboard_addr {
        Some(addr) => {
            let hub = match config.hub.clone() {
                Some(hub) => hub,
                None => only_hub(&client, &config.namespace).await,
            };
            let dashboard = crate::dashboard::DashboardConfig {
                addr,
                hubs: vec![(hub, client.clone())],
                token_secret: args.dashboard_token_secret,
                any_port_if_taken: false,
            };
            match crate::dashboard::start(dashboard, shutdown.clone()).await {
                Ok(running) => {
                    outln!("dashboard: {}", running.url());
                    Some(running)
                }
                Err(err) => {
                    errln!("error: sync: {err}");
                    return exit::INVALID_INPUT;
                }
            }
        }
        None => None,
    };
    let running = match crate::sync::start(config, shutdown.clone()).await {
        Ok(running) => running,
        Err(err) => {
            errln!("error: sync: {err}");
            return exit::INVALID_INPUT;
        }
    };
    super::shutdown_signal().await;
    shutdown.cancel();
    running.stopped().await;
    if let Some(dashboard) = dashboard {
        dashboard.stopped().await;
    }
    exit::OK
}

/// The name of the one Hub in `namespace` (what the sync serves without `--hub`), else `hub`.
async fn only_hub(client: &kube::Client, namespace: &str) -> String {
    let hubs = kube::Api::<crate::api::Hub>::namespaced(client.clone(), namespace)
        .list(&kube::api::ListParams::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default();
    match hubs.as_slice() {
        [hub] => hub
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| "hub".to_string()),
        _ => "hub".to_string(),
    }
}
