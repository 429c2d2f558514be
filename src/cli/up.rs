//! `fleetform up [SOURCE]`: run a whole fleet on this machine and show it converge.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::{ClusterArgs, exit};
use crate::source::SourceSpec;
use crate::status::SpokeRow;
use crate::up::{self, UpConfig};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The fleet: a directory (in a git work tree: its repository is followed), a local git
    /// repository, or a git URL.
    #[arg(env = super::SOURCE_ENV, default_value = super::DEFAULT_SOURCE)]
    source: String,
    /// Branch, tag or commit to follow (default: HEAD).
    #[arg(long = "ref")]
    git_ref: Option<String>,
    /// Directory of the fleet inside the repository.
    #[arg(long)]
    path: Option<String>,
    /// Seconds between two fetches of the repository.
    #[arg(long, default_value_t = 5)]
    interval: u64,
    #[command(flatten)]
    clusters: ClusterArgs,
}

pub async fn run(args: Args) -> u8 {
    let spec = SourceSpec {
        location: args.source.clone(),
        git_ref: args.git_ref.clone(),
        path: args.path.clone(),
        // `up` follows commits: it starts the clusters the committed fleet declares.
        commits_only: true,
    };
    let (_, fleet) = match super::load_fleet_or_report(&spec) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let (repo, path) = follow(&spec);
    let access = args.clusters.access();
    let config = UpConfig {
        data_dir: access.data_dir.clone(),
        repo,
        git_ref: args.git_ref.clone().unwrap_or_else(|| "HEAD".to_string()),
        path,
        interval: Duration::from_secs(args.interval.max(1)),
    };
    println!("data dir: {}", config.data_dir.display());
    let running = match up::start(&fleet, config.clone()).await {
        Ok(running) => running,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::INVALID_INPUT;
        }
    };
    let clusters = running
        .hubs
        .iter()
        .map(|hub| ("hub", hub.name.clone(), hub.url(), hub.kubeconfig.clone()))
        .chain(
            running
                .spokes()
                .into_iter()
                .map(|(name, url, kubeconfig)| ("spoke", name, url, kubeconfig)),
        );
    for (role, name, url, kubeconfig) in clusters {
        println!(
            "{role:<5} {name:<20} {url}  kubeconfig: {}",
            kubeconfig.display()
        );
    }
    println!(
        "following {} at {}{} every {} s; Ctrl-C stops (state is kept)",
        config.repo,
        config.git_ref,
        config
            .path
            .as_deref()
            .map(|path| format!(" (path {path})"))
            .unwrap_or_default(),
        config.interval.as_secs()
    );
    let progress = show_progress(&running, &args.source);
    tokio::select! {
        _ = super::shutdown_signal() => {}
        _ = progress => {}
    }
    println!("stopping (Ctrl-C again to stop at once)");
    tokio::select! {
        _ = running.shutdown() => {}
        _ = super::shutdown_signal() => println!("stopped at once"),
    }
    exit::OK
}

/// What a FleetSync follows for `spec`: a directory inside a git work tree is followed through
/// its repository (so commits, not edits, are what gets applied); anything else as it is.
fn follow(spec: &SourceSpec) -> (String, Option<String>) {
    let location = Path::new(&spec.location);
    let within = |root: &Path| -> Option<(String, Option<String>)> {
        let full = location.canonicalize().ok()?;
        let root = root.canonicalize().ok()?;
        let relative = full.strip_prefix(&root).ok()?;
        let mut path = relative.to_string_lossy().to_string();
        if let Some(extra) = &spec.path {
            path = if path.is_empty() {
                extra.clone()
            } else {
                format!("{path}/{extra}")
            };
        }
        Some((
            root.display().to_string(),
            (!path.is_empty()).then_some(path),
        ))
    };
    if location.is_dir()
        && let Ok(repo) = git2::Repository::discover(location)
        && let Some(found) = repo.workdir().and_then(within)
    {
        return found;
    }
    (spec.location.clone(), spec.path.clone())
}

/// Prints a line whenever a spoke's phase, state, availability or addon health changes.
async fn show_progress(running: &up::Running, source: &str) {
    let mut shown: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut converged = false;
    loop {
        tick.tick().await;
        let mut spokes = 0;
        let mut running_spokes = 0;
        let mut changed = false;
        for hub in &running.hubs {
            let Ok(state) = crate::status::gather(&hub.name, &hub.client).await else {
                continue;
            };
            for row in crate::status::rows(&state, Timestamp::now()) {
                spokes += 1;
                running_spokes += usize::from(row.phase.as_deref() == Some("Running"));
                let line = progress_line(&row);
                let key = (row.hub.clone(), row.spoke.clone());
                if shown.get(&key) != Some(&line) {
                    println!("{} {}", Timestamp::now().strftime("%H:%M:%S"), line);
                    shown.insert(key, line);
                    changed = true;
                }
            }
        }
        if changed {
            converged = false;
        }
        if !converged && spokes > 0 && running_spokes == spokes {
            converged = true;
            println!(
                "{} converged: {spokes} spoke(s) Running; `fleetform status {}` shows them, a commit changes them",
                Timestamp::now().strftime("%H:%M:%S"),
                source
            );
        }
    }
}

fn progress_line(row: &SpokeRow) -> String {
    format!(
        "{}/{}: {} {} available={} joined={} addons {}/{}",
        row.hub,
        row.spoke,
        row.phase.as_deref().unwrap_or("-"),
        row.state,
        row.available.as_deref().unwrap_or("-"),
        row.joined,
        row.addons_available,
        row.addons
    )
}
