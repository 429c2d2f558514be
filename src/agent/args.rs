//! The agent's command line (`fleetform agent …`): its flags, and the agent they describe. An
//! agent container's arguments are parsed here too, exactly as `fleetform agent` parses them:
//! `fleetform up` starts its in-process agents from the Deployments the reconciler renders.

use std::path::PathBuf;
use std::time::Duration;

use super::{AgentConfig, HubConnection};
use crate::api::vocabulary::AGENT_NAMESPACE;

/// The flags of `fleetform agent`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// Kubeconfig of the hub, used as it is. Without it the agent registers by certificate with
    /// a bootstrap kubeconfig: `--bootstrap-kubeconfig`, else the `bootstrap-hub-kubeconfig`
    /// Secret in the agent's namespace on the spoke.
    #[arg(long, conflicts_with = "bootstrap_kubeconfig")]
    pub(crate) hub_kubeconfig: Option<PathBuf>,
    /// Bootstrap kubeconfig to register by certificate with (the issued one is kept in Secret
    /// `hub-kubeconfig-secret` in the agent's namespace).
    #[arg(long)]
    pub(crate) bootstrap_kubeconfig: Option<PathBuf>,
    /// Context of the hub kubeconfig to use (default: its current context).
    #[arg(long)]
    pub(crate) hub_context: Option<String>,
    /// Kubeconfig of the spoke (default: in-cluster, else $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Context of the spoke kubeconfig.
    #[arg(long)]
    pub(crate) context: Option<String>,
    /// Name the spoke registers under.
    #[arg(long)]
    pub(crate) cluster_name: String,
    /// The agent's namespace on the spoke.
    #[arg(long, default_value = AGENT_NAMESPACE)]
    pub(crate) agent_namespace: String,
    /// The agent's own Deployment in its namespace; its available replicas count towards
    /// Available. Without it, only the spoke's API server is probed.
    #[arg(long)]
    pub(crate) deployment: Option<String>,
    /// Most cluster claims reported; reserved claims are never cut.
    #[arg(long, default_value_t = 20)]
    pub(crate) cluster_claims_max: usize,
    /// Seconds a failed probe must persist before Available turns False.
    #[arg(long, default_value_t = 20)]
    pub(crate) failure_grace_seconds: u64,
    /// API server URL of the spoke, for a new ManagedCluster (repeatable).
    #[arg(long)]
    pub(crate) spoke_url: Vec<String>,
    /// Requested lifetime of the client certificates the agent asks for, its own and its
    /// addons' (at least 600; default: the signer's).
    #[arg(long, value_parser = clap::value_parser!(i32).range(600..))]
    pub(crate) client_cert_expiration_seconds: Option<i32>,
    /// Serve `/healthz` and `/readyz` here (the Deployment's probes).
    #[arg(long)]
    pub(crate) health_addr: Option<std::net::SocketAddr>,
    /// The agent version this agent reports running (its pod's label; default: this build's).
    #[arg(long, env = crate::reconciler::install::ENV_AGENT_VERSION)]
    pub(crate) agent_version: Option<String>,
    /// The configuration hash this agent reports running (its pod's label).
    #[arg(long, env = crate::reconciler::install::ENV_AGENT_CONFIG_HASH)]
    pub(crate) agent_config_hash: Option<String>,
    /// Act (register, renew the cluster lease, run day 2, ...) only while holding the Lease
    /// `fleetform-agent` in the agent's namespace, so that of two agents of one spoke running at
    /// once (a Deployment rolling to a new agent) only one acts; ready once it takes part.
    #[arg(long)]
    pub(crate) leader_elect: bool,
    /// This agent's name in that election and on the cluster lease it renews (default:
    /// $POD_NAME, else host name and pid).
    #[arg(long, env = crate::reconciler::install::ENV_POD_NAME)]
    pub(crate) identity: Option<String>,
}

impl AgentArgs {
    /// The agent these arguments describe, on `spoke`, reaching its hub through `hub`.
    pub fn into_config(self, spoke: kube::Client, hub: HubConnection) -> AgentConfig {
        let mut config = AgentConfig::new(self.cluster_name, hub, spoke);
        config.agent_namespace = self.agent_namespace;
        config.deployment = self.deployment;
        config.cluster_claims_max = self.cluster_claims_max;
        config.failure_grace = Duration::from_secs(self.failure_grace_seconds);
        config.spoke_urls = self.spoke_url;
        config.client_cert_expiration_seconds = self.client_cert_expiration_seconds;
        config.health_addr = self.health_addr;
        if let Some(version) = self.agent_version.filter(|v| !v.is_empty()) {
            config.version = version;
        }
        config.config_hash = self.agent_config_hash.filter(|hash| !hash.is_empty());
        if let Some(identity) = self.identity.filter(|identity| !identity.is_empty()) {
            config.identity = identity;
        }
        config.leader_elect = self.leader_elect;
        config
    }

    /// These arguments with what a container's environment gives (its `env`, resolved by
    /// whoever runs it), where the command line says nothing, as clap does with the process's.
    pub fn with_env(mut self, env: &std::collections::BTreeMap<String, String>) -> Self {
        use crate::reconciler::install::{ENV_AGENT_CONFIG_HASH, ENV_AGENT_VERSION, ENV_POD_NAME};
        if self.agent_version.is_none() {
            self.agent_version = env.get(ENV_AGENT_VERSION).cloned();
        }
        if self.agent_config_hash.is_none() {
            self.agent_config_hash = env.get(ENV_AGENT_CONFIG_HASH).cloned();
        }
        if self.identity.is_none() {
            self.identity = env.get(ENV_POD_NAME).cloned();
        }
        self
    }
}

/// The arguments of an agent container (`agent --cluster-name …`), parsed exactly as
/// `fleetform agent` parses them; `fleetform up` starts its in-process agents from these.
pub fn parse_container_args(args: &[String]) -> Result<AgentArgs, String> {
    #[derive(Debug, clap::Parser)]
    #[command(name = "fleetform")]
    struct Container {
        #[command(subcommand)]
        command: ContainerCommand,
    }
    #[derive(Debug, clap::Subcommand)]
    enum ContainerCommand {
        Agent(AgentArgs),
    }
    use clap::Parser;
    let argv = std::iter::once("fleetform").chain(args.iter().map(String::as_str));
    match Container::try_parse_from(argv) {
        Ok(Container {
            command: ContainerCommand::Agent(args),
        }) => Ok(args),
        Err(err) => Err(err.render().to_string().trim().to_string()),
    }
}
