//! The one plan → apply pipeline that `fleetform plan`, `fleetform apply` and `fleetform sync`
//! run on a loaded fleet ([`crate::source`]): each hub observed against the objects the fleet
//! wants there ([`crate::observe`]), one plan for the fleet ([`crate::plan`]), and a hub's part
//! of it written ([`crate::apply::apply_hub`]).
//!
//! What tells the callers apart stays with them and comes in as inputs: how a fleet is loaded
//! (`commits_only` for whatever follows a repository), which hubs are observed and how each is
//! reached, the prune guard, and whether a hub's part is written as planned (`apply`, which shows
//! it first and asks) or without deleting again what is already being deleted ([`Planned::writes`],
//! `sync`). `plan` stops after planning.

use kube::Client;

use crate::fleet::Fleet;
use crate::observe::{DryRuns, ObserveError, observe_hub_with};
use crate::plan::desired::hub_objects_stored;
use crate::plan::{self, Diffs, HubPlan, Observed, Plan, PruneGuard};
use crate::source::Origin;

/// A fleet that loaded, with where it came from.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub origin: Origin,
    pub fleet: Fleet,
}

/// A fleet's hubs being observed one by one, to plan the fleet against them.
pub struct Planning<'a> {
    loaded: &'a Loaded,
    observed: Observed,
    dry_runs: DryRuns,
    diffs: Diffs,
}

impl<'a> Planning<'a> {
    /// Nothing observed yet: a plan now would treat every hub as empty.
    pub fn new(loaded: &'a Loaded) -> Self {
        Planning {
            loaded,
            observed: Observed::new(),
            dry_runs: DryRuns::Each,
            diffs: Diffs::Shown,
        }
    }

    /// Observing without server-side dry runs ([`DryRuns::None`]): for a plan written at once
    /// by [`crate::apply::apply_hub`], which reports only the objects its applies changed.
    pub fn without_dry_runs(self) -> Self {
        Planning {
            dry_runs: DryRuns::None,
            ..self
        }
    }

    /// Planning without the changes' diffs ([`Diffs::Skipped`]): for a plan no one reads.
    pub fn unshown(self) -> Self {
        Planning {
            diffs: Diffs::Skipped,
            ..self
        }
    }

    /// Observes the hub `hub`, reached by `client`, against the objects the fleet wants there
    /// (their server-side dry runs included).
    pub async fn observe(&mut self, hub: &str, client: &Client) -> Result<(), ObserveError> {
        let desired = hub_objects_stored(&self.loaded.fleet, hub);
        let observed = observe_hub_with(hub, client, &desired, self.dry_runs).await?;
        self.observed.insert(hub.to_string(), observed);
        Ok(())
    }

    /// The plan of the fleet against the hubs observed.
    pub fn plan(self, guard: PruneGuard) -> Planned {
        let loaded = self.loaded;
        Planned {
            plan: plan::plan_with(
                &loaded.fleet,
                loaded.origin.clone(),
                &self.observed,
                guard,
                self.diffs,
            ),
            observed: self.observed,
        }
    }
}

/// A plan, with what it was made against.
#[derive(Clone, Debug)]
pub struct Planned {
    pub plan: Plan,
    pub observed: Observed,
}

impl Planned {
    /// `hub`'s part of the plan, to write as a loop keeping the hub at its commit does: an
    /// object already being deleted (a Spoke whose finalizers run its unjoin) changes on its way
    /// out, and deleting it again is no news and no drift put right.
    pub fn writes(&self, hub: &str) -> Option<HubPlan> {
        let writes = self.plan.hubs.iter().find(|plan| plan.hub == hub)?.clone();
        Some(self.under_way_left_out(hub, writes))
    }

    /// [`Planned::writes`], taking `hub`'s part out of the plan rather than copying it (a
    /// commit that changes every spoke held its plan twice at the sync's peak).
    pub fn into_writes(mut self, hub: &str) -> Option<HubPlan> {
        let at = self.plan.hubs.iter().position(|plan| plan.hub == hub)?;
        let writes = self.plan.hubs.swap_remove(at);
        Some(self.under_way_left_out(hub, writes))
    }

    fn under_way_left_out(&self, hub: &str, mut writes: HubPlan) -> HubPlan {
        if let Some(observed) = self.observed.get(hub) {
            writes.leave_out_deletions_under_way(observed);
        }
        writes
    }
}
