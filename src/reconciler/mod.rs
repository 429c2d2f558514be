//! The lifecycle reconciler (seed 004, DESIGN §4.6): what the hub side does next for a Spoke —
//! join, accept, addon enablement, syncing its ManagedCluster, and unjoining in finalizer order.
//!
//! - [`lifecycle`] is the pure decision: from what is known about one Spoke ([`lifecycle::Facts`])
//!   to the next [`lifecycle::Action`]s and the phase to report.
//! - [`hub_lifecycle`] is the same for a Hub: its finalizer, its phase, and on deletion the
//!   cascade to its Spokes.
//! - [`install`] renders the agent's objects (spoke and hub side) without I/O; the agent renders
//!   the same Deployment when it upgrades itself.
//! - [`cluster_sync`] computes the ManagedCluster's labels, lease duration and taints.
//! - [`tokens`] decides when a spoke's bootstrap tokens are renewed or deleted.
//! - [`run`] is the loop: it gathers facts ([`facts`]), carries out the actions and reports.
//! - [`rollout`] runs a hub's agent rollout for the Hub controller ([`crate::rollout`] decides);
//!   a spoke the rollout has not released keeps the agent it runs.

mod clients;
pub mod cluster_sync;
mod facts;
pub mod hub_lifecycle;
pub mod install;
pub mod lifecycle;
mod rollout;
pub mod run;
pub mod tokens;
pub mod uninstall;

pub use rollout::RolloutMetrics;
pub use run::{ReconcilerConfig, ReconcilerMetrics, run};
