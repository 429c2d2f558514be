//! `fleetform agent`: run the agent of one spoke until SIGTERM.

use super::hub::kube_client;
use tokio_util::sync::CancellationToken;

use super::exit;
use crate::agent::HubConnection;
use crate::agent::args::AgentArgs;

pub async fn run(args: AgentArgs) -> u8 {
    let spoke = match kube_client(args.kubeconfig.as_deref(), args.context.clone()).await {
        Ok(client) => client,
        Err(err) => {
            eprintln!("error: spoke: {err}");
            return exit::INVALID_INPUT;
        }
    };
    let hub = match (
        args.hub_kubeconfig.clone(),
        args.bootstrap_kubeconfig.clone(),
    ) {
        (Some(path), _) => HubConnection::KubeconfigFile {
            path,
            context: args.hub_context.clone(),
        },
        (None, Some(path)) => match std::fs::read_to_string(&path) {
            Ok(text) => HubConnection::Bootstrap(text),
            Err(err) => {
                eprintln!("error: bootstrap kubeconfig {}: {err}", path.display());
                return exit::INVALID_INPUT;
            }
        },
        (None, None) => HubConnection::BootstrapSecret,
    };
    let config = args.into_config(spoke, hub);
    let shutdown = CancellationToken::new();
    let mut agent = tokio::spawn(crate::agent::run(config, shutdown.clone()));
    // An agent that cannot start (its health port taken, say) ends at once: it must exit, with
    // its error, for the kubelet to restart it, not wait for a SIGTERM that never comes.
    let ended = tokio::select! {
        ended = &mut agent => ended,
        () = super::shutdown_signal() => {
            shutdown.cancel();
            agent.await
        }
    };
    match ended {
        Ok(Ok(())) => exit::OK,
        Ok(Err(err)) => {
            eprintln!("error: {err}");
            exit::INVALID_INPUT
        }
        Err(err) => {
            eprintln!("error: the agent failed: {err}");
            exit::INTERNAL
        }
    }
}
