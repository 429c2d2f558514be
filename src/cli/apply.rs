//! `fleetform apply`: carry out a plan — made now from a source, or saved by `plan --out`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use super::plan::{GuardArgs, build_planned, colour};
use super::{ClusterArgs, Empty, SourceArgs, exit};
use crate::apply::apply_hub;
use crate::converge::{self, HubWrites, Progress};
use crate::observe::observe_hub;
use crate::plan::render::{self, read_document};
use crate::plan::{HubPlan, ManagingSync, Plan, stale_reasons};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A fleet source (as for `plan`), or a plan file saved with `fleetform plan --out FILE`.
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    clusters: ClusterArgs,
    #[command(flatten)]
    guard: GuardArgs,
    /// Accept a source without any fleet document (otherwise an error). Such a fleet names no
    /// hub, so applying it changes nothing.
    #[arg(long)]
    allow_empty: bool,
    /// Apply without asking first. Without it, apply shows the plan and asks on the terminal,
    /// and refuses when stdin is not one. A saved plan file is applied without asking.
    #[arg(long)]
    auto_approve: bool,
    /// Write even to a hub a FleetSync manages. The FleetSync reverts whatever is not in its
    /// commit, so this only lasts until its next sync.
    #[arg(long)]
    force: bool,
    /// Only write the objects; do not wait for the spokes to converge.
    #[arg(long)]
    no_wait: bool,
    /// Seconds to wait for every spoke to be Running (and every removed one gone).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

pub async fn run(args: Args) -> u8 {
    let saved = Path::new(&args.source.source);
    let from_file = saved.is_file();
    let plan = if from_file {
        if let Err(code) = super::verify::refuse_with_saved_plan(&args.source) {
            return code;
        }
        match read_saved(saved, &args.clusters).await {
            Ok(plan) => plan,
            Err(code) => return code,
        }
    } else {
        let empty = Empty::from_flag(args.allow_empty);
        match build_planned(&args.source, empty, &args.clusters, args.guard.guard()).await {
            // What is already being deleted (a Spoke whose finalizers run its unjoin) is not
            // deleted again: apply writes what sync would.
            Ok(planned) => Plan {
                hubs: planned
                    .plan
                    .hubs
                    .iter()
                    .filter_map(|hub| planned.writes(&hub.hub))
                    .collect(),
                ..planned.plan
            },
            Err(code) => return code,
        }
    };
    out!("{}", render::text(&plan, colour()));
    if plan.prune_blocked() {
        errln!(
            "error: the prune guard holds this plan back; plan again with --allow-prune to unjoin that many spokes"
        );
        return exit::INVALID_INPUT;
    }
    let changing: Vec<&HubPlan> = plan
        .hubs
        .iter()
        .filter(|hub| !hub.changes.is_empty() || !hub.steps.is_empty())
        .collect();
    if let Err(code) = beside_fleet_syncs(&changing, args.force) {
        return code;
    }
    // A saved plan was reviewed when it was saved (terraform applies one without asking).
    if !changing.is_empty()
        && !from_file
        && !args.auto_approve
        && let Err(code) = approved().await
    {
        return code;
    }
    let access = args.clusters.access();
    let mut hubs = Vec::new();
    for hub in changing {
        let Some(source) = &hub.kubeconfig else {
            errln!(
                "error: hub {}: the plan does not say how to reach it",
                hub.hub
            );
            return exit::INVALID_INPUT;
        };
        let reached = match access.hub_at(&hub.hub, source).await {
            Ok(reached) => reached,
            Err(err) => {
                errln!("error: {err}");
                return exit::INVALID_INPUT;
            }
        };
        let client = reached.client();
        match apply_hub(hub, &client).await {
            Ok(applied) => {
                for crd in &applied.installed_crds {
                    outln!("hub {}: installed CRD {crd}", hub.hub);
                }
                for written in &applied.written {
                    outln!("hub {}: {written}", hub.hub);
                }
                hubs.push(HubWrites {
                    hub: hub.hub.clone(),
                    client,
                    written: applied.objects,
                });
            }
            Err(err) => {
                errln!("error: {}", super::at(&err, &reached));
                return exit::INVALID_INPUT;
            }
        }
    }
    outln!("Applied {}.", plan.source);
    if args.no_wait || hubs.is_empty() {
        return exit::OK;
    }
    let timeout = Duration::from_secs(args.timeout);
    let mut shown = ProgressView::new(std::io::stdout().is_terminal());
    match converge::wait(&hubs, timeout, |progress| shown.update(progress)).await {
        Ok(()) => {
            outln!("Converged.");
            exit::OK
        }
        Err(err) => {
            errln!("error: {err}");
            if err.reverted_by_sync() {
                errln!(
                    "a FleetSync keeps this hub at its commit: commit and push the change for it to apply"
                );
            }
            exit::NOT_CONVERGED
        }
    }
}

/// Refuses to write to hubs a FleetSync manages, unless `force`; with it, warns that the
/// FleetSync will revert what is not in its commit.
fn beside_fleet_syncs(changing: &[&HubPlan], force: bool) -> Result<(), u8> {
    let managed: Vec<(&str, &ManagingSync)> = changing
        .iter()
        .flat_map(|hub| hub.managed_by.iter().map(|sync| (hub.hub.as_str(), sync)))
        .collect();
    if managed.is_empty() {
        return Ok(());
    }
    let level = if force { "warning" } else { "error" };
    for (hub, sync) in &managed {
        errln!(
            "{level}: hub {hub}: {sync} manages this hub and reverts whatever is not in its commit within seconds"
        );
    }
    if force {
        return Ok(());
    }
    errln!(
        "commit and push the change for the FleetSync to apply it, or pass --force to write it anyway until the FleetSync reverts it"
    );
    Err(exit::INVALID_INPUT)
}

/// Asks on the terminal whether to carry out the plan shown; without a terminal to ask on, it
/// refuses (`--auto-approve` says yes ahead of time).
async fn approved() -> Result<(), u8> {
    if !std::io::stdin().is_terminal() {
        errln!(
            "error: apply asks before it writes, and stdin is not a terminal to ask on: pass --auto-approve to apply this plan"
        );
        return Err(exit::INVALID_INPUT);
    }
    outln!();
    outln!("Do you want to perform these actions?");
    outln!(
        "  fleetform will write the changes shown above. Only 'yes' will be accepted to approve."
    );
    outln!();
    out!("  Enter a value: ");
    super::output::flush_stdout();
    let answer = tokio::task::spawn_blocking(|| {
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer).map(|_| answer)
    })
    .await;
    match answer {
        Ok(Ok(answer)) if answer.trim() == "yes" => {
            outln!();
            Ok(())
        }
        _ => {
            errln!("Apply cancelled.");
            Err(exit::INVALID_INPUT)
        }
    }
}

/// How apply shows its spokes converging: on a terminal one line per spoke, redrawn in place;
/// otherwise a line whenever a spoke's state changes.
struct ProgressView {
    terminal: bool,
    drawn: usize,
    last: BTreeMap<String, String>,
}

impl ProgressView {
    fn new(terminal: bool) -> Self {
        ProgressView {
            terminal,
            drawn: 0,
            last: BTreeMap::new(),
        }
    }

    fn update(&mut self, progress: &[Progress]) {
        if self.terminal {
            // Up over what was drawn, then every line cleared and written again.
            if self.drawn > 0 {
                out!("\x1b[{}A", self.drawn);
            }
            for line in progress {
                outln!("\x1b[2K{line}");
            }
            for _ in progress.len()..self.drawn {
                outln!("\x1b[2K");
            }
            self.drawn = progress.len().max(self.drawn);
            return;
        }
        for line in progress {
            let key = format!("{}/{}", line.hub, line.spoke);
            let text = line.to_string();
            if self.last.get(&key) != Some(&text) {
                outln!("{text}");
                self.last.insert(key, text);
            }
        }
    }
}

/// Reads a saved plan and checks it still matches every hub it covers.
async fn read_saved(path: &Path, clusters: &ClusterArgs) -> Result<Plan, u8> {
    let text = std::fs::read(path).map_err(|err| {
        errln!("error: cannot read {}: {err}", path.display());
        exit::INVALID_INPUT
    })?;
    let mut plan = read_document(&text).map_err(|err| {
        errln!(
            "error: {}: cannot read it as a saved plan (from `fleetform plan --out`): {err}",
            path.display()
        );
        exit::INVALID_INPUT
    })?;
    let access = clusters.access();
    let mut stale = Vec::new();
    for hub in &mut plan.hubs {
        let Some(source) = &hub.kubeconfig else {
            continue;
        };
        let reached = access.hub_at(&hub.hub, source).await.map_err(|err| {
            errln!("error: {err}");
            exit::INVALID_INPUT
        })?;
        let observed = observe_hub(&hub.hub, &reached.client(), &Default::default())
            .await
            .map_err(|err| {
                errln!("error: {}", super::at(&err, &reached));
                exit::INVALID_INPUT
            })?;
        stale.extend(
            stale_reasons(hub, &observed)
                .into_iter()
                .map(|reason| format!("hub {}: {reason}", hub.hub)),
        );
        // Who manages the hub now, not when the plan was saved.
        hub.managed_by = observed.fleet_syncs;
    }
    if !stale.is_empty() {
        errln!(
            "error: plan is stale: the hub changed since {} was made:",
            path.display()
        );
        for reason in stale {
            errln!("  {reason}");
        }
        errln!("plan again to see what applying would do now");
        return Err(exit::INVALID_INPUT);
    }
    Ok(plan)
}
