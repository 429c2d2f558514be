//! The `fleetform` command line: argument parsing, output formats and exit codes. Commands are
//! thin: they call into the library and render what it returns.

pub(crate) mod agent;
mod apply;
mod controlplane;
mod crds;
mod hub;
mod plan;
mod status;
mod sync;
mod up;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Exit codes every command shares.
pub mod exit {
    /// Success (for `plan`: no changes).
    pub const OK: u8 = 0;
    /// The input is wrong: an invalid fleet repo, a bad argument, an unknown ref, an unreachable
    /// repository.
    pub const INVALID_INPUT: u8 = 1;
    /// `plan` only: the plan has changes.
    pub const CHANGES: u8 = 2;
    /// fleetform itself failed (its cache, an output it could not write, a bug).
    pub const INTERNAL: u8 = 3;
    /// `apply` only: the objects were written but the fleet did not converge within
    /// `--timeout`.
    pub const NOT_CONVERGED: u8 = 4;
}

#[derive(Debug, Parser)]
#[command(
    name = "fleetform",
    version,
    about = "Keep a fleet of Kubernetes clusters in line with a git repository"
)]
pub struct Cli {
    /// Log filter (tracing's EnvFilter syntax); overrides RUST_LOG.
    #[arg(long, global = true, env = "FLEETFORM_LOG", default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a fleet repo: schema, then the rules across documents. Exit 0 valid, 1 invalid.
    Validate(validate::Args),
    /// Show what applying the fleet repo would change. Exit 0 no changes, 2 changes, 1 error.
    Plan(plan::Args),
    /// Write what a plan says: from a fleet source, or a plan saved with `plan --out`.
    Apply(apply::Args),
    /// Run the in-cluster GitOps controller: keep this hub in line with its FleetSyncs' commits.
    Sync(sync::Args),
    /// One row per spoke: phase, state, availability, agent, lease age, nodes, addons, claims.
    Status(status::Args),
    /// Print the CustomResourceDefinitions fleetform uses, or write one file per CRD.
    Crds(crds::Args),
    /// Run an embedded Kubernetes-compatible API server until SIGTERM or Ctrl-C.
    Controlplane(controlplane::Args),
    /// Run a spoke's agent: register (by certificate with a bootstrap kubeconfig, or with a hub
    /// kubeconfig as it is), renew the lease, report status, claims and addon health, keep addon
    /// certificates.
    Agent(agent::Args),
    /// Run a whole fleet on this machine: embedded hubs and spokes, their agents, the hub loops
    /// and sync against SOURCE (default examples/fleet-repo), until Ctrl-C.
    Up(up::Args),
    /// Run the hub loops and the lifecycle reconciler: join, accept and unjoin spokes, judge
    /// registration and addon CSRs, sign custom-signer CSRs, expire leases, observe poll-mode
    /// spokes.
    Hub(hub::Args),
}

/// How a command renders data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
    Yaml,
}

/// Whether `args` (without the program name) is a valid `fleetform` command line; the error is
/// clap's message. Manifests that run fleetform are checked with it.
pub fn check_args<S: AsRef<str>>(args: &[S]) -> Result<(), String> {
    let argv = std::iter::once("fleetform").chain(args.iter().map(AsRef::as_ref));
    Cli::try_parse_from(argv)
        .map(|_| ())
        .map_err(|err| err.render().to_string())
}

/// Parses the arguments, runs the command and returns its exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() {
                exit::INVALID_INPUT
            } else {
                exit::OK
            });
        }
    };
    init_tracing(&cli.log);
    let code = match cli.command {
        Command::Validate(args) => validate::run(args),
        Command::Plan(args) => with_runtime(plan::run(args)),
        Command::Apply(args) => with_runtime(apply::run(args)),
        Command::Status(args) => with_runtime(status::run(args)),
        Command::Sync(args) => with_runtime(sync::run(args)),
        Command::Crds(args) => crds::run(args),
        Command::Controlplane(args) => with_runtime(controlplane::run(args)),
        Command::Agent(args) => with_runtime(agent::run(args)),
        Command::Hub(args) => with_runtime(hub::run(args)),
        Command::Up(args) => with_runtime(up::run(args)),
    };
    ExitCode::from(code)
}

/// Runs an async command on a multi-threaded runtime; only the commands that talk to clusters
/// need one.
fn with_runtime(command: impl std::future::Future<Output = u8>) -> u8 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(command),
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            exit::INTERNAL
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C: the one shutdown signal every long-running command shares.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn init_tracing(filter: &str) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|env| tracing_subscriber::EnvFilter::try_new(env).ok())
        .or_else(|| tracing_subscriber::EnvFilter::try_new(filter).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Where to read a fleet repo from: the arguments `validate`, `plan` and `apply` share.
#[derive(Debug, clap::Args)]
pub struct SourceArgs {
    /// A directory, a local git repository, or a git URL (file://, https://, ssh://).
    #[arg(default_value = ".")]
    source: String,
    /// Branch, tag or commit to read (git sources only); default: HEAD or the remote's default
    /// branch.
    #[arg(long = "ref")]
    git_ref: Option<String>,
    /// Directory of the fleet inside the source.
    #[arg(long)]
    path: Option<String>,
}

impl SourceArgs {
    fn spec(&self) -> crate::source::SourceSpec {
        crate::source::SourceSpec {
            location: self.source.clone(),
            git_ref: self.git_ref.clone(),
            path: self.path.clone(),
            commits_only: false,
        }
    }
}

/// How to reach clusters: the kubeconfig flags kubectl has, and where embedded clusters live.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    /// Kubeconfig fleetform runs with (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Context of that kubeconfig for the cluster fleetform runs with.
    #[arg(long, global = true)]
    context: Option<String>,
    /// Where `fleetform up` keeps its embedded clusters (default: $FLEETFORM_DATA_DIR or
    /// ~/.local/share/fleetform).
    #[arg(long, global = true)]
    data_dir: Option<std::path::PathBuf>,
}

impl ClusterArgs {
    fn access(&self) -> crate::access::Access {
        crate::access::Access {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            data_dir: self
                .data_dir
                .clone()
                .unwrap_or_else(crate::access::default_data_dir),
        }
    }
}

/// Prints validation problems, one per line, and a count.
fn print_diagnostics(errors: &[crate::fleet::Diagnostic]) {
    for error in errors {
        println!("{error}");
    }
    let files: std::collections::BTreeSet<&str> = errors.iter().map(|e| e.file.as_str()).collect();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    println!(
        "invalid: {} in {}",
        plural(errors.len(), "error"),
        plural(files.len(), "file")
    );
}

/// Prints a value as JSON (for `text` and `json`) or YAML.
fn print_data(output: Output, value: &impl serde::Serialize) {
    let rendered = match output {
        Output::Yaml => serde_yaml::to_string(value).map_err(|e| e.to_string()),
        Output::Text | Output::Json => {
            serde_json::to_string_pretty(value).map_err(|e| e.to_string())
        }
    };
    match rendered {
        Ok(text) => println!("{}", text.trim_end()),
        Err(err) => eprintln!("error: cannot render output: {err}"),
    }
}

/// Loads the fleet at `spec`; an unreadable source or an invalid fleet is reported (with every
/// diagnostic) and becomes the exit code to return.
pub(crate) fn load_fleet_or_report(
    spec: &crate::source::SourceSpec,
) -> Result<(crate::source::Origin, crate::fleet::Fleet), u8> {
    use crate::source::LoadError;
    match crate::source::load_fleet(spec) {
        Ok(loaded) => Ok(loaded),
        Err(LoadError::Source(err)) => {
            eprintln!("error: {err}");
            Err(if err.is_internal() {
                exit::INTERNAL
            } else {
                exit::INVALID_INPUT
            })
        }
        Err(LoadError::Invalid {
            origin,
            diagnostics,
        }) => {
            println!("source: {origin}");
            print_diagnostics(&diagnostics);
            Err(exit::INVALID_INPUT)
        }
    }
}

/// Writes `contents` to `path` readable by its owner only (kubeconfigs hold credentials),
/// creating its directory.
pub(crate) fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents.as_bytes())
}
