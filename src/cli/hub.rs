//! `fleetform hub`: run the hub loops until SIGTERM.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio_util::sync::CancellationToken;

use super::exit;
use crate::hub::HubConfig;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
}

pub async fn run(args: Args) -> u8 {
    let access = args.cluster.access();
    let client = match kube_client(access.kubeconfig.as_deref(), access.context.clone()).await {
        Ok(client) => client,
        Err(err) => {
            eprintln!("error: hub: {err}");
            return exit::INVALID_INPUT;
        }
    };
    let shutdown = CancellationToken::new();
    let hub = tokio::spawn(crate::hub::run(
        HubConfig { client, access },
        shutdown.clone(),
    ));
    super::shutdown_signal().await;
    shutdown.cancel();
    match hub.await {
        Ok(()) => exit::OK,
        Err(err) => {
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
    Client::try_from(config).map_err(|err| err.to_string())
}
