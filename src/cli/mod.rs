//! The `fleetform` command line: argument parsing, output formats and exit codes. Commands are
//! thin: they call into the library and render what it returns.

/// `print!` for commands: a closed stdout ends the output quietly (see [`output`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::output::write_stdout(format_args!($($arg)*)) };
}

/// `println!` for commands: a closed stdout ends the output quietly (see [`output`]).
macro_rules! outln {
    () => { $crate::cli::output::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::output::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics, not even on a closed stderr.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cli::output::write_stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) mod agent;
mod apply;
mod completion;
mod controlplane;
mod crds;
pub mod docs;
mod hub;
mod install;
pub(crate) mod output;
mod plan;
mod status;
mod sync;
mod up;
mod validate;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use output::Output;
use output::print_data;

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
    /// `apply`, `install`, `uninstall`: the objects were written but what they wait for did not
    /// come within `--timeout` (the fleet converged, fleetform running, the spokes unjoined).
    pub const NOT_CONVERGED: u8 = 4;
}

#[derive(Debug, Parser)]
#[command(
    name = "fleetform",
    version,
    about = "Keep a fleet of Kubernetes clusters in line with a git repository"
)]
pub struct Cli {
    /// Log filter (tracing's EnvFilter syntax, e.g. `info` or `warn,fleetform=debug`); overrides
    /// RUST_LOG. Without it: RUST_LOG, else `warn,kube_runtime::watcher=error`.
    #[arg(long, global = true, env = "FLEETFORM_LOG", value_parser = parse_log_filter)]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a fleet repo: schemas and the rules across documents, in one pass. Exit 0 valid, 1
    /// invalid.
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
    Agent(crate::agent::args::AgentArgs),
    /// Run a whole fleet on this machine: embedded hubs and spokes, their agents, the hub loops
    /// and sync against SOURCE, until Ctrl-C.
    Up(up::Args),
    /// Run the hub loops and the lifecycle reconciler: join, accept and unjoin spokes, judge
    /// registration and addon CSRs, sign custom-signer CSRs, expire leases, observe poll-mode
    /// spokes.
    Hub(hub::Args),
    /// Install or upgrade fleetform on a hub cluster (CRDs, namespace, RBAC, the hub
    /// Deployment, optionally a FleetSync) and wait until it runs; or print its manifests
    /// (`--export`), or an agent's (`install agent --export`).
    Install(install::Args),
    /// Remove fleetform from a hub cluster, after unjoining every spoke with `--unjoin-all`.
    Uninstall(install::UninstallArgs),
    /// Print a shell completion script: `source <(fleetform completion bash)`.
    Completion(completion::Args),
    /// Check that a commit (or the tag naming it) is signed by a key of a keys file. Exit 0
    /// signed by a trusted key, 1 not.
    Verify(verify::Args),
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
    if matches!(
        cli.command,
        Command::Hub(_) | Command::Sync(_) | Command::Agent(_)
    ) {
        without_transparent_huge_pages();
    }
    init_tracing(cli.log.as_deref());
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
        Command::Install(args) => with_runtime(install::run(args)),
        Command::Uninstall(args) => with_runtime(install::uninstall(args)),
        Command::Completion(args) => completion::run(args),
        Command::Verify(args) => verify::run(args),
    };
    ExitCode::from(output::exit_code(code))
}

/// Keeps the kernel from backing this process's memory with transparent huge pages: for the
/// processes that run as pods with a memory limit (the hub, the sync, the agent), which is
/// sized on their RSS. mimalloc asks for huge pages on its arenas, and a 2 MiB page counts whole
/// in the RSS however little of it is in use: at 10,000 spokes the sync's high-water mark was
/// 239–245 MiB with them and 216–221 without, the hub's 462–469 and 439–443 MiB, at CPU within
/// the runs' spread (docs/sizing.md). The control plane keeps them: without, it took 3–6% more
/// CPU for 10% less RSS.
#[cfg(target_os = "linux")]
fn without_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes integers only and touches no memory of this process; a
    // kernel without it refuses (EINVAL), and the process runs as before.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

#[cfg(not(target_os = "linux"))]
fn without_transparent_huge_pages() {}

/// Runs an async command on a multi-threaded runtime; only the commands that talk to clusters
/// need one.
fn with_runtime(command: impl std::future::Future<Output = u8>) -> u8 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(command),
        Err(err) => {
            errln!("error: cannot start the async runtime: {err}");
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

/// Logs go to stderr, filtered by `--log` when it is given, else by RUST_LOG, else by
/// [`DEFAULT_LOG`]; coloured only on a terminal without `NO_COLOR`.
fn init_tracing(log: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match log {
        // Checked by `parse_log_filter` already.
        Some(log) => EnvFilter::try_new(log).unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG)),
        None => match std::env::var("RUST_LOG") {
            Ok(env) if !env.trim().is_empty() => EnvFilter::try_new(&env).unwrap_or_else(|err| {
                errln!("warning: RUST_LOG={env:?} is not a log filter ({err}); logging at {DEFAULT_LOG}");
                EnvFilter::new(DEFAULT_LOG)
            }),
            _ => EnvFilter::new(DEFAULT_LOG),
        },
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(output::colour_on(&std::io::stderr()))
        .try_init();
}

/// The log filter when neither `--log` nor RUST_LOG sets one: warnings, but not kube-runtime's
/// own of a failed watch, which fleetform's components report themselves, naming what they
/// watched (a joining agent's watches are refused until the hub accepts it: kube-runtime's
/// warning of each repeated it, with the whole API status).
const DEFAULT_LOG: &str = "warn,kube_runtime::watcher=error";

fn parse_log_filter(filter: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(filter)
        .map(|_| filter.to_string())
        .map_err(|err| format!("not a log filter: {err}"))
}

/// The environment variable naming the fleet source of every command that reads one when no
/// SOURCE is given.
pub const SOURCE_ENV: &str = "FLEETFORM_SOURCE";
/// The fleet source when neither SOURCE nor `$FLEETFORM_SOURCE` is given: the current directory.
pub const DEFAULT_SOURCE: &str = ".";

/// Where to read a fleet repo from: the arguments `validate`, `plan`, `apply` and `status`
/// share (`up` takes SOURCE by the same rule).
#[derive(Debug, clap::Args)]
pub struct SourceArgs {
    /// A directory, a local git repository, or a git URL (file://, https://, ssh://).
    #[arg(env = SOURCE_ENV, default_value = DEFAULT_SOURCE)]
    source: String,
    /// Branch, tag or commit to read (git sources only); default: HEAD or the remote's default
    /// branch.
    #[arg(long = "ref")]
    git_ref: Option<String>,
    /// Directory of the fleet inside the source.
    #[arg(long)]
    path: Option<String>,
    #[command(flatten)]
    verify: verify::VerifyArgs,
}

impl SourceArgs {
    fn spec(&self) -> crate::source::SourceSpec {
        crate::source::SourceSpec {
            location: self.source.clone(),
            git_ref: self.git_ref.clone(),
            path: self.path.clone(),
            commits_only: false,
            verify: self.verify.verification(),
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

/// Loads the fleet at `spec`; an unreadable source, an invalid fleet or one with no documents
/// at all is reported (with every diagnostic) and becomes the exit code to return.
pub(crate) fn load_fleet_or_report(
    spec: &crate::source::SourceSpec,
) -> Result<(crate::source::Origin, crate::fleet::Fleet), u8> {
    load_reported(spec, Empty::Refuse)
}

/// What to do with a source that holds no fleet documents at all: a wrong directory, `--path`
/// or ref far more often than a fleet meant to be empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Empty {
    Refuse,
    /// Refuse, naming `--allow-empty` as the way out.
    RefuseUnlessAllowed,
    Allow,
}

impl Empty {
    fn from_flag(allow_empty: bool) -> Self {
        if allow_empty {
            Empty::Allow
        } else {
            Empty::RefuseUnlessAllowed
        }
    }

    /// The error for an empty fleet read from `origin`, or `None` when it is accepted.
    fn check(self, origin: &crate::source::Origin, fleet: &crate::fleet::Fleet) -> Option<String> {
        if self == Empty::Allow || !fleet.is_empty() {
            return None;
        }
        let hint = match self {
            Empty::RefuseUnlessAllowed => "; --allow-empty accepts an empty fleet",
            _ => "",
        };
        let under = match origin {
            crate::source::Origin::Directory { path, .. } => path.display().to_string(),
            crate::source::Origin::Git { .. } => origin.to_string(),
        };
        Some(format!("no fleet documents under {under}{hint}"))
    }
}

/// The exit code for a source that could not be read: fleetform's own failure (its cache), or
/// the input's.
fn source_error_code(err: &crate::source::SourceError) -> u8 {
    if err.is_internal() {
        exit::INTERNAL
    } else {
        exit::INVALID_INPUT
    }
}

fn load_reported(
    spec: &crate::source::SourceSpec,
    empty: Empty,
) -> Result<(crate::source::Origin, crate::fleet::Fleet), u8> {
    use crate::source::LoadError;
    match crate::source::load_fleet(spec) {
        Ok((origin, fleet)) => match empty.check(&origin, &fleet) {
            None => Ok((origin, fleet)),
            Some(message) => {
                errln!("error: {message}");
                Err(exit::INVALID_INPUT)
            }
        },
        Err(LoadError::Source(err)) => {
            errln!("error: {err}");
            Err(source_error_code(&err))
        }
        Err(LoadError::Invalid {
            origin,
            diagnostics,
        }) => {
            outln!("source: {origin}");
            output::print_diagnostics(&diagnostics);
            Err(exit::INVALID_INPUT)
        }
    }
}

/// An error from talking to a cluster, with where the requests went and the kubeconfig that
/// said so.
pub(crate) fn at(err: &impl std::fmt::Display, reached: &crate::access::Reached) -> String {
    format!("{err} (at {})", reached.describe())
}

pub(crate) use crate::access::write_private;
