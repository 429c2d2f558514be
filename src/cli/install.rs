//! `fleetform install` and `fleetform uninstall`: fleetform on a hub cluster (or its manifests,
//! for GitOps), and an agent's manifests for a spoke the hub cannot reach.

use std::io::IsTerminal;
use std::time::Duration;

use super::exit;
use crate::access::Reached;
use crate::api::fleet::{FleetSyncSpec, SYSTEM_NAMESPACE};
use crate::deploy::install::{Event, InstallFailed, Wait, install};
use crate::deploy::manifests::{
    AgentSettings, HubSettings, agent_yaml, default_image, hub_manifests, yaml_stream,
};
use crate::deploy::uninstall::{self, Removed, UninstallError};
use crate::plan::desired::DEFAULT_AGENT_VERSION;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    target: Option<Target>,
    #[command(flatten)]
    cluster: super::ClusterArgs,
    /// The namespace fleetform is installed in; fleetform-system is the only one it runs in:
    /// Hubs and Spokes live there, every agent, `plan` and `status` look for them there, and the
    /// addon CRDs' conversion webhook names its Service there.
    #[arg(long, value_name = "NAMESPACE", default_value = SYSTEM_NAMESPACE)]
    namespace: String,
    /// The image the hub Deployment runs (default: this fleetform's,
    /// ghcr.io/fleetform/fleetform:VERSION).
    #[arg(long)]
    image: Option<String>,
    /// Replicas of the hub Deployment.
    #[arg(long, default_value_t = crate::deploy::manifests::DEFAULT_REPLICAS, value_parser = clap::value_parser!(i32).range(1..=10))]
    replicas: i32,
    /// The URL agents on spokes reach this hub at, for Hubs that set no spec.apiServer
    /// (`fleetform hub --agent-hub-url`).
    #[arg(long, value_name = "URL", value_parser = https_url)]
    agent_hub_url: Option<String>,
    /// Follow this fleet repo: a FleetSync `fleet` in fleetform-system (file://, https://,
    /// ssh://).
    #[arg(long, value_name = "URL")]
    sync_repo: Option<String>,
    /// Branch, tag or commit the FleetSync follows (default: the repo's HEAD).
    #[arg(long, value_name = "REF", requires = "sync_repo")]
    sync_ref: Option<String>,
    /// Directory of the fleet inside the repo.
    #[arg(long, value_name = "DIR", requires = "sync_repo")]
    sync_path: Option<String>,
    /// Seconds between two fetches of the repo.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, requires = "sync_repo",
          value_parser = clap::value_parser!(i32).range(1..=86_400))]
    sync_interval: i32,
    /// Print the manifests as YAML instead of installing them (for a GitOps repo).
    #[arg(long)]
    export: bool,
    /// Do not wait for the hub Deployment to become available (the CRDs are still waited for).
    #[arg(long, conflicts_with = "export")]
    no_wait: bool,
    /// Seconds to wait for the CRDs to be Established and the hub Deployment available; exit 4
    /// when they pass first.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 300,
        conflicts_with = "export"
    )]
    timeout: u64,
}

#[derive(Debug, clap::Subcommand)]
enum Target {
    /// Print the manifests of a spoke's agent as the lifecycle reconciler installs it, for a
    /// spoke the hub cannot reach (needs --export).
    Agent(AgentArgs),
}

#[derive(Debug, clap::Args)]
struct AgentArgs {
    /// Print the manifests (the only way: the reconciler installs agents on spokes it reaches).
    #[arg(long)]
    export: bool,
    /// The spoke's name: its ManagedCluster's and Spoke's.
    #[arg(long)]
    cluster_name: String,
    /// The hub's API server as the Hub's spec.apiServer says it.
    #[arg(long, value_name = "URL", value_parser = https_url)]
    hub_url: Option<String>,
    /// The spoke's API server as the hub reaches it.
    #[arg(long, value_name = "URL", value_parser = https_url)]
    spoke_url: Option<String>,
    /// The agent's image (default: this fleetform's).
    #[arg(long)]
    image: Option<String>,
}

fn https_url(value: &str) -> Result<String, String> {
    match value.strip_prefix("https://") {
        Some(rest) if !rest.is_empty() => Ok(value.trim_end_matches('/').to_string()),
        _ => Err("must be an https:// URL".to_string()),
    }
}

pub async fn run(args: Args) -> u8 {
    if let Some(Target::Agent(agent)) = args.target {
        return export_agent(agent);
    }
    if args.namespace != SYSTEM_NAMESPACE {
        errln!(
            "error: --namespace {}: fleetform runs only in {SYSTEM_NAMESPACE}: Hubs and Spokes live there, every agent, `plan` and `status` look for them there, and the addon CRDs' conversion webhook names its Service there",
            args.namespace
        );
        return exit::INVALID_INPUT;
    }
    let settings = HubSettings {
        image: args.image.unwrap_or_else(default_image),
        replicas: args.replicas,
        agent_hub_url: args.agent_hub_url,
        fleet_sync: args.sync_repo.map(|repo| FleetSyncSpec {
            repo,
            git_ref: args.sync_ref.unwrap_or_else(|| "HEAD".to_string()),
            path: args.sync_path,
            interval_seconds: args.sync_interval,
            allow_prune: false,
            verify: None,
            webhook: None,
            notify: Vec::new(),
        }),
    };
    if args.export {
        out!("{}", yaml_stream(&hub_manifests(&settings)));
        return exit::OK;
    }
    let reached = match reach(&args.cluster).await {
        Ok(reached) => reached,
        Err(code) => return code,
    };
    let wait = Wait {
        timeout: Duration::from_secs(args.timeout),
        rollout: !args.no_wait,
    };
    let mut progress = ProgressLine::new(std::io::stdout().is_terminal());
    let result = install(&reached.client(), &settings, wait, |event| match event {
        Event::Applied { object, applied } => progress.line(&format!("{object} {applied}")),
        Event::Waiting { what, state } => progress.waiting(&what, &state),
        Event::Ready { what, state } => progress.line(&format!("{what}: {state}")),
        // As kubectl says what the server warns about, on stderr.
        Event::Warning { object, text } => {
            progress.clear();
            errln!("Warning: {object}: {text}");
        }
    })
    .await;
    let where_ = reached.describe();
    // A failure is said below what was still waited on, on a line of its own.
    match &result {
        Ok(_) => progress.clear(),
        Err(_) => progress.end(),
    }
    match result {
        Ok(installed) if installed.changed() => {
            let count = |wanted: crate::deploy::Applied| {
                installed
                    .objects
                    .iter()
                    .filter(|(_, applied)| *applied == wanted)
                    .count()
            };
            outln!(
                "fleetform {DEFAULT_AGENT_VERSION} installed on {where_}: {} created, {} configured, {} unchanged.",
                count(crate::deploy::Applied::Created),
                count(crate::deploy::Applied::Configured),
                count(crate::deploy::Applied::Unchanged),
            );
            exit::OK
        }
        Ok(_) => {
            outln!("fleetform {DEFAULT_AGENT_VERSION} is installed on {where_}: no changes.");
            exit::OK
        }
        Err(err @ (InstallFailed::Timeout { .. } | InstallFailed::RolloutFailed(_))) => {
            errln!("error: {err}");
            errln!(
                "the manifests are written; see `kubectl -n fleetform-system describe deployment fleetform-hub` and its pods' logs (on a cluster where nothing runs pods, install with --no-wait)"
            );
            exit::NOT_CONVERGED
        }
        Err(err) => {
            errln!("error: {}", super::at(&err, &reached));
            exit::INVALID_INPUT
        }
    }
}

fn export_agent(args: AgentArgs) -> u8 {
    if !args.export {
        errln!(
            "error: `fleetform install agent` only prints manifests: pass --export (the lifecycle reconciler installs the agent on every spoke it reaches; see deploy/agent/README.md)"
        );
        return exit::INVALID_INPUT;
    }
    out!(
        "{}",
        agent_yaml(&AgentSettings {
            cluster_name: args.cluster_name,
            hub_url: args.hub_url,
            spoke_url: args.spoke_url,
            image: args.image,
        })
    );
    exit::OK
}

/// The cluster of `--kubeconfig` and `--context`, or the error's exit code (said already).
async fn reach(cluster: &super::ClusterArgs) -> Result<Reached, u8> {
    cluster
        .access()
        .own_cluster("the hub")
        .await
        .map_err(|err| {
            errln!("error: {err}");
            exit::INVALID_INPUT
        })
}

#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    cluster: super::ClusterArgs,
    /// Unjoin every spoke first (each Hub is deleted; the lifecycle reconciler unjoins its
    /// spokes), instead of refusing while spokes are joined.
    #[arg(long)]
    unjoin_all: bool,
    /// Seconds to wait for the spokes to unjoin and the Hubs to go; exit 4 when they pass
    /// first.
    #[arg(long, value_name = "SECONDS", default_value_t = 900)]
    timeout: u64,
}

pub async fn uninstall(args: UninstallArgs) -> u8 {
    let reached = match reach(&args.cluster).await {
        Ok(reached) => reached,
        Err(code) => return code,
    };
    let mut removed_any = false;
    let result = uninstall::uninstall(
        &reached.client(),
        args.unjoin_all,
        Duration::from_secs(args.timeout),
        |event| match event {
            uninstall::Event::Removed { object, removed } => {
                removed_any |= removed == Removed::Deleted;
                if removed != Removed::Absent {
                    outln!("{object} {removed}");
                }
            }
            uninstall::Event::Unjoining { spoke, state } => outln!("Spoke {spoke}: {state}"),
            uninstall::Event::Unjoined { spoke } => outln!("Spoke {spoke}: unjoined"),
            uninstall::Event::HubWaiting { hub, state } => {
                outln!("Hub {hub}: waiting to go: {state}")
            }
        },
    )
    .await;
    let where_ = reached.describe();
    match result {
        Ok(()) if removed_any => {
            outln!("fleetform uninstalled from {where_}.");
            exit::OK
        }
        Ok(()) => {
            outln!("fleetform is not installed on {where_}: nothing to remove.");
            exit::OK
        }
        Err(err @ (UninstallError::Timeout { .. } | UninstallError::HubsRemain { .. })) => {
            errln!("error: {err}");
            exit::NOT_CONVERGED
        }
        Err(err @ UninstallError::Refused { .. }) => {
            errln!("error: {err}");
            exit::INVALID_INPUT
        }
        Err(err) => {
            errln!("error: {}", super::at(&err, &reached));
            exit::INVALID_INPUT
        }
    }
}

/// Progress as it happens: lines that stay, and on a terminal one waiting line redrawn in
/// place below them; elsewhere each wait is said once, when it starts.
struct ProgressLine {
    terminal: bool,
    drawn: bool,
    said: Option<String>,
}

impl ProgressLine {
    fn new(terminal: bool) -> Self {
        ProgressLine {
            terminal,
            drawn: false,
            said: None,
        }
    }

    fn line(&mut self, text: &str) {
        self.clear();
        outln!("{text}");
    }

    fn waiting(&mut self, what: &str, state: &str) {
        if self.terminal {
            out!("\r\x1b[2Kwaiting: {what}: {state}");
            super::output::flush_stdout();
            self.drawn = true;
        } else if self.said.as_deref() != Some(what) {
            outln!("waiting: {what}: {state}");
            self.said = Some(what.to_string());
        }
    }

    /// Takes the waiting line away.
    fn clear(&mut self) {
        if self.drawn {
            out!("\r\x1b[2K");
            super::output::flush_stdout();
            self.drawn = false;
        }
    }

    /// Leaves the waiting line as it was drawn last and ends it, so that what follows (an error
    /// on stderr, which is not buffered) starts a line of its own.
    fn end(&mut self) {
        if self.drawn {
            outln!();
            super::output::flush_stdout();
            self.drawn = false;
        }
    }
}
