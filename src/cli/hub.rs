//! `fleetform hub`: run the hub process (hub loops and lifecycle reconciler while leading,
//! conversion webhook and admin endpoint always) until SIGTERM.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio_util::sync::CancellationToken;

use super::exit;
use crate::api::fleet::SYSTEM_NAMESPACE;
use crate::hub::conversion_webhook::WebhookConfig;
use crate::hub::process::{self, DEFAULT_ADMIN_ADDR, HubProcessConfig, LEASE_NAME};
use crate::hub::run::AcceptCheck;
use crate::reconciler::install::KnownEndpoint;
use crate::runtime::leader::{self, Election};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
    /// The URL agents on spokes reach this hub at, written into their bootstrap kubeconfigs
    /// for Hubs that set no `spec.apiServer` (default: the server of the kubeconfig the hub runs
    /// with, unless that is the in-cluster address, which spokes cannot reach: then a Hub must
    /// set `spec.apiServer`).
    #[arg(long)]
    agent_hub_url: Option<String>,
    /// A PEM file with the CA bundle agents trust for the hub, for Hubs that set no `caBundle`
    /// (default: the CA of the kubeconfig the hub runs with).
    #[arg(long)]
    agent_hub_ca_file: Option<std::path::PathBuf>,
    /// Serve the addon kinds' conversion webhook (HTTPS `POST /convert`, `/healthz`) at this
    /// address, e.g. `0.0.0.0:9443` behind Service `fleetform-hub`; its certificate is kept in
    /// Secret `fleetform-system/fleetform-hub-webhook` and its CA in the addon CRDs fleetform
    /// installed (default: not served).
    #[arg(long, value_name = "ADDR")]
    webhook_addr: Option<std::net::SocketAddr>,
    /// A name (DNS name or IP address) the webhook's certificate carries besides
    /// `fleetform-hub.fleetform-system.svc` and `.svc.cluster.local`; repeatable.
    #[arg(
        long = "webhook-dns-name",
        value_name = "NAME",
        requires = "webhook_addr"
    )]
    webhook_dns_names: Vec<String>,
    /// Take part in the election on the Lease `fleetform-system/fleetform-hub`, so that of
    /// several replicas only the holder runs the hub loops and the lifecycle reconciler; with
    /// `false` this process runs them at once, and must be the only one.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    leader_elect: bool,
    /// This replica's name in the leader election (default: $POD_NAME, else host name and pid).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Seconds the leader Lease holds without renewal.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600))]
    lease_duration_seconds: u64,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
    metrics_addr: SocketAddr,
}

pub async fn run(args: Args) -> u8 {
    let access = args.cluster.access();
    let config = match kube_config(access.kubeconfig.as_deref(), access.context.clone()).await {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: hub: {err}");
            return exit::INVALID_INPUT;
        }
    };
    let ca_from_file = match &args.agent_hub_ca_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(pem) => Some(pem),
            Err(err) => {
                eprintln!("error: --agent-hub-ca-file {}: {err}", path.display());
                return exit::INVALID_INPUT;
            }
        },
        None => None,
    };
    let in_cluster = Config::incluster()
        .ok()
        .is_some_and(|in_cluster| in_cluster.cluster_url == config.cluster_url);
    let known_endpoint = KnownEndpoint {
        server: args.agent_hub_url.or_else(|| {
            (!in_cluster).then(|| {
                config
                    .cluster_url
                    .to_string()
                    .trim_end_matches('/')
                    .to_string()
            })
        }),
        ca_pem: ca_from_file.or_else(|| {
            config.root_cert.as_ref().map(|certs| {
                certs
                    .iter()
                    .map(|der| pem::encode(&pem::Pem::new("CERTIFICATE", der.clone())))
                    .collect()
            })
        }),
    };
    let client = match crate::transport::client(config) {
        Ok(client) => client,
        Err(err) => {
            eprintln!("error: hub: {err}");
            return exit::INVALID_INPUT;
        }
    };
    if let Err(message) = namespace_exists(&client, &config_url(&known_endpoint)).await {
        eprintln!("error: hub: {message}");
        return exit::INVALID_INPUT;
    }
    let election = args.leader_elect.then(|| Election {
        namespace: SYSTEM_NAMESPACE.to_string(),
        lease_name: LEASE_NAME.to_string(),
        identity: args.identity.unwrap_or_else(leader::default_identity),
        lease_duration: Duration::from_secs(args.lease_duration_seconds),
    });
    let config = HubProcessConfig {
        client: client.clone(),
        access,
        known_endpoint,
        election,
        admin_addr: Some(args.metrics_addr),
        webhook: args.webhook_addr.map(|addr| WebhookConfig {
            client,
            addr,
            extra_names: args.webhook_dns_names,
        }),
        sync: None,
        // A hub elsewhere: a person's acceptance is honoured where a webhook checks it.
        accept_check: AcceptCheck::Webhook,
    };
    let shutdown = CancellationToken::new();
    let running = match process::start(config, shutdown.clone()).await {
        Ok(running) => running,
        Err(err) => {
            eprintln!("error: hub: {err}");
            return exit::INTERNAL;
        }
    };
    super::shutdown_signal().await;
    shutdown.cancel();
    running.stopped().await;
    exit::OK
}

/// Where the hub process runs, for its messages.
fn config_url(known: &KnownEndpoint) -> String {
    known
        .server
        .clone()
        .unwrap_or_else(|| "the in-cluster API server".to_string())
}

/// Whether the hub's namespace is there: everything the hub keeps (its leader Lease, its
/// Spokes and Hubs, the webhook's Secret) lives in it, so without it nothing could start. A
/// hub that may not read namespaces is let through: its loops say what they miss.
async fn namespace_exists(client: &Client, at: &str) -> Result<(), String> {
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    match namespaces.get_opt(SYSTEM_NAMESPACE).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!(
            "namespace {SYSTEM_NAMESPACE} does not exist at {at}; the hub keeps its leader Lease, Hubs and Spokes there: install fleetform on this cluster first (`fleetform install`, or `kubectl apply -k deploy/hub`)"
        )),
        Err(err)
            if crate::runtime::error::Category::of(&err)
                == crate::runtime::error::Category::Forbidden =>
        {
            Ok(())
        }
        Err(err) => Err(format!(
            "cannot read namespace {SYSTEM_NAMESPACE} at {at}: {err}"
        )),
    }
}

/// A client from a kubeconfig file, or the usual lookup (in-cluster, $KUBECONFIG,
/// ~/.kube/config) without one.
pub(super) async fn kube_client(
    path: Option<&Path>,
    context: Option<String>,
) -> Result<Client, String> {
    let config = kube_config(path, context).await?;
    crate::transport::client(config).map_err(|err| err.to_string())
}

/// The client configuration [`kube_client`] builds its client from.
async fn kube_config(path: Option<&Path>, context: Option<String>) -> Result<Config, String> {
    let options = KubeConfigOptions {
        context,
        ..KubeConfigOptions::default()
    };
    let config = match path {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|err| err.to_string())?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|err| err.to_string())?
        }
        None if options.context.is_none() => {
            Config::infer().await.map_err(|err| err.to_string())?
        }
        None => Config::from_kubeconfig(&options)
            .await
            .map_err(|err| err.to_string())?,
    };
    Ok(config)
}
