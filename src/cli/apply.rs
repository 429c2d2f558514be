//! `fleetform apply`: carry out a plan — made now from a source, or saved by `plan --out`.

use std::path::Path;

use super::plan::{GuardArgs, build, colour};
use super::{ClusterArgs, SourceArgs, exit};
use crate::apply::apply_hub;
use crate::observe::observe_hub;
use crate::plan::{Plan, render, stale_reasons};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A fleet source (as for `plan`), or a plan file saved with `fleetform plan --out FILE`.
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    clusters: ClusterArgs,
    #[command(flatten)]
    guard: GuardArgs,
}

pub async fn run(args: Args) -> u8 {
    let saved = Path::new(&args.source.source);
    let plan = if saved.is_file() {
        match read_saved(saved, &args.clusters).await {
            Ok(plan) => plan,
            Err(code) => return code,
        }
    } else {
        match build(&args.source, &args.clusters, args.guard.guard()).await {
            Ok(plan) => plan,
            Err(code) => return code,
        }
    };
    print!("{}", render::text(&plan, colour()));
    if plan.prune_blocked() {
        eprintln!(
            "error: the prune guard holds this plan back; plan again with --allow-prune to unjoin that many spokes"
        );
        return exit::INVALID_INPUT;
    }
    let access = args.clusters.access();
    for hub in plan
        .hubs
        .iter()
        .filter(|hub| !hub.changes.is_empty() || !hub.steps.is_empty())
    {
        let Some(source) = &hub.kubeconfig else {
            eprintln!(
                "error: hub {}: the plan does not say how to reach it",
                hub.hub
            );
            return exit::INVALID_INPUT;
        };
        let client = match access.hub_at(&hub.hub, source).await {
            Ok(client) => client,
            Err(err) => {
                eprintln!("error: {err}");
                return exit::INVALID_INPUT;
            }
        };
        match apply_hub(hub, &client).await {
            Ok(applied) => {
                for crd in &applied.installed_crds {
                    println!("hub {}: installed CRD {crd}", hub.hub);
                }
                for written in &applied.written {
                    println!("hub {}: {written}", hub.hub);
                }
            }
            Err(err) => {
                eprintln!("error: {err}");
                return exit::INVALID_INPUT;
            }
        }
    }
    println!("Applied {}.", plan.source);
    exit::OK
}

/// Reads a saved plan and checks it still matches every hub it covers.
async fn read_saved(path: &Path, clusters: &ClusterArgs) -> Result<Plan, u8> {
    let text = std::fs::read(path).map_err(|err| {
        eprintln!("error: cannot read {}: {err}", path.display());
        exit::INVALID_INPUT
    })?;
    let plan: Plan = serde_json::from_slice(&text).map_err(|err| {
        eprintln!(
            "error: {} is not a saved plan (from `fleetform plan --out`): {err}",
            path.display()
        );
        exit::INVALID_INPUT
    })?;
    let access = clusters.access();
    let mut stale = Vec::new();
    for hub in &plan.hubs {
        let Some(source) = &hub.kubeconfig else {
            continue;
        };
        let client = access.hub_at(&hub.hub, source).await.map_err(|err| {
            eprintln!("error: {err}");
            exit::INVALID_INPUT
        })?;
        let observed = observe_hub(&hub.hub, &client, &Default::default())
            .await
            .map_err(|err| {
                eprintln!("error: {err}");
                exit::INVALID_INPUT
            })?;
        stale.extend(
            stale_reasons(hub, &observed)
                .into_iter()
                .map(|reason| format!("hub {}: {reason}", hub.hub)),
        );
    }
    if !stale.is_empty() {
        eprintln!(
            "error: plan is stale: the hub changed since {} was made:",
            path.display()
        );
        for reason in stale {
            eprintln!("  {reason}");
        }
        eprintln!("plan again to see what applying would do now");
        return Err(exit::INVALID_INPUT);
    }
    Ok(plan)
}
