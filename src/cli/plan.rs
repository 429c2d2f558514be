//! `fleetform plan`: what applying a commit of the fleet repo would change.

use std::io::IsTerminal;
use std::path::PathBuf;

use super::{ClusterArgs, SourceArgs, exit};
use crate::observe::observe_hub;
use crate::plan::{self, Observed, Plan, PruneGuard, render};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanOutput {
    #[default]
    Text,
    Json,
    Markdown,
}

/// The prune guard's flags, shared by `plan` and `apply`.
#[derive(Debug, clap::Args)]
pub struct GuardArgs {
    /// Let the plan unjoin more spokes than the prune guard allows.
    #[arg(long)]
    allow_prune: bool,
    /// Percentage of a hub's spokes a plan may unjoin without --allow-prune (at least one may).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
    max_prune_percent: u32,
}

impl GuardArgs {
    pub fn guard(&self) -> PruneGuard {
        PruneGuard {
            max_percent: self.max_prune_percent,
            allow_prune: self.allow_prune,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    clusters: ClusterArgs,
    #[command(flatten)]
    guard: GuardArgs,
    #[arg(short, long, value_enum, default_value_t)]
    output: PlanOutput,
    /// Save the plan (with the commit and every object version it read) for `fleetform apply FILE`.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub async fn run(args: Args) -> u8 {
    let plan = match build(&args.source, &args.clusters, args.guard.guard()).await {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    if let Some(path) = &args.out
        && let Err(err) = save(&plan, path)
    {
        eprintln!("error: cannot save the plan to {}: {err}", path.display());
        return exit::INTERNAL;
    }
    match args.output {
        PlanOutput::Text => print!("{}", render::text(&plan, colour())),
        PlanOutput::Markdown => print!("{}", render::markdown(&plan)),
        PlanOutput::Json => match serde_json::to_string_pretty(&plan) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("error: cannot render the plan: {err}");
                return exit::INTERNAL;
            }
        },
    }
    if plan.has_changes() {
        exit::CHANGES
    } else {
        exit::OK
    }
}

/// Loads the fleet, observes each of its hubs and plans; on failure, says why and returns the
/// exit code.
pub async fn build(
    source: &SourceArgs,
    clusters: &ClusterArgs,
    guard: PruneGuard,
) -> Result<Plan, u8> {
    let (origin, fleet) = super::load_fleet_or_report(&source.spec())?;
    let access = clusters.access();
    let mut observed = Observed::new();
    for (name, hub) in &fleet.hubs {
        let client = access.hub(hub).await.map_err(|err| {
            eprintln!("error: {err}");
            exit::INVALID_INPUT
        })?;
        let hub = observe_hub(name, &client, &plan::desired::hub_objects(&fleet, name))
            .await
            .map_err(|err| {
                eprintln!("error: {err}");
                exit::INVALID_INPUT
            })?;
        observed.insert(name.clone(), hub);
    }
    Ok(plan::plan(&fleet, origin, &observed, guard))
}

fn save(plan: &Plan, path: &std::path::Path) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(plan).map_err(std::io::Error::other)?;
    std::fs::write(path, json)
}

/// Colour only on a terminal, and never with `NO_COLOR` set.
pub fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
