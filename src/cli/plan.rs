//! `fleetform plan`: what applying a commit of the fleet repo would change.

use std::path::PathBuf;

use super::output::{self, Output};
use super::{ClusterArgs, Empty, SourceArgs, exit};
use crate::pipeline::{Loaded, Planned, Planning};
use crate::plan::{Plan, PruneGuard, render};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanOutput {
    #[default]
    Text,
    Json,
    Yaml,
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
    /// How to print the plan: text (diffs and steps), the plan document as JSON or YAML (what
    /// `--out` saves), or Markdown for a pull request comment.
    #[arg(short, long, value_enum, default_value_t)]
    output: PlanOutput,
    /// Accept a source without any fleet document (otherwise an error). Such a fleet names no
    /// hub, so its plan changes nothing.
    #[arg(long)]
    allow_empty: bool,
    /// Save the plan (with the commit and every object version it read) for `fleetform apply FILE`.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub async fn run(args: Args) -> u8 {
    let empty = Empty::from_flag(args.allow_empty);
    let plan = match build(&args.source, empty, &args.clusters, args.guard.guard()).await {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    if let Some(path) = &args.out
        && let Err(err) = save(&plan, path)
    {
        errln!("error: cannot save the plan to {}: {err}", path.display());
        return exit::INTERNAL;
    }
    match args.output {
        PlanOutput::Text => out!("{}", render::text(&plan, colour())),
        PlanOutput::Markdown => out!("{}", render::markdown(&plan)),
        PlanOutput::Json => output::print_data(Output::Json, &render::document(&plan)),
        PlanOutput::Yaml => output::print_data(Output::Yaml, &render::document(&plan)),
    }
    if plan.has_changes() {
        exit::CHANGES
    } else {
        exit::OK
    }
}

/// Loads the fleet, observes each of its hubs and plans (the [`crate::pipeline`]); on failure,
/// says why and returns the exit code.
pub async fn build(
    source: &SourceArgs,
    empty: Empty,
    clusters: &ClusterArgs,
    guard: PruneGuard,
) -> Result<Plan, u8> {
    Ok(build_planned(source, empty, clusters, guard).await?.plan)
}

/// [`build`], with what the plan was made against.
pub async fn build_planned(
    source: &SourceArgs,
    empty: Empty,
    clusters: &ClusterArgs,
    guard: PruneGuard,
) -> Result<Planned, u8> {
    let (origin, fleet) = super::load_reported(&source.spec(), empty)?;
    let loaded = Loaded { origin, fleet };
    let access = clusters.access();
    let mut planning = Planning::new(&loaded);
    for (name, hub) in &loaded.fleet.hubs {
        let reached = access.hub(hub).await.map_err(|err| {
            errln!("error: {err}");
            exit::INVALID_INPUT
        })?;
        planning
            .observe(name, &reached.client())
            .await
            .map_err(|err| {
                errln!("error: {}", super::at(&err, &reached));
                exit::INVALID_INPUT
            })?;
    }
    Ok(planning.plan(guard))
}

fn save(plan: &Plan, path: &std::path::Path) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(&render::document(plan)).map_err(std::io::Error::other)?;
    std::fs::write(path, json)
}

/// Whether plans printed to stdout are coloured.
pub fn colour() -> bool {
    output::colour_on(&std::io::stdout())
}
