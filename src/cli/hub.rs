//! `fleetform hub`: run the hub loops until SIGTERM.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio_util::sync::CancellationToken;

use super::exit;
use crate::hub::HubConfig;
use crate::hub::conversion_webhook::{self, WebhookConfig};
use crate::reconciler::ReconcilerConfig;
use crate::reconciler::install::KnownEndpoint;

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
    let shutdown = CancellationToken::new();
    let webhook = match args.webhook_addr {
        Some(addr) => {
            let config = WebhookConfig {
                client: client.clone(),
                addr,
                extra_names: args.webhook_dns_names,
            };
            match conversion_webhook::serve(config, shutdown.clone()).await {
                Ok(webhook) => Some(webhook),
                Err(err) => {
                    eprintln!("error: hub: the conversion webhook: {err}");
                    return exit::INTERNAL;
                }
            }
        }
        None => None,
    };
    let loops = tokio::spawn(crate::hub::run(
        HubConfig {
            client: client.clone(),
            access: access.clone(),
        },
        shutdown.clone(),
    ));
    let reconciler = tokio::spawn(crate::reconciler::run(
        ReconcilerConfig {
            client,
            access,
            known_endpoint,
        },
        shutdown.clone(),
    ));
    super::shutdown_signal().await;
    shutdown.cancel();
    if let Some(webhook) = webhook {
        webhook.stopped().await;
    }
    match (loops.await, reconciler.await) {
        (Ok(()), Ok(())) => exit::OK,
        (Err(err), _) | (_, Err(err)) => {
            eprintln!("error: the hub loops failed: {err}");
            exit::INTERNAL
        }
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
