//! fleetform keeps a fleet of Kubernetes clusters — hubs, the spoke clusters registered to them,
//! and the addons on those spokes — in line with a git repository.
//!
//! - [`fleet`]: the fleet repo format, loading and validation (pure).
//! - [`source`]: reading a fleet repo from a directory or a git commit.
//! - [`plan`]: desired fleet + observed state → an ordered plan (pure).
//! - [`api`]: the Kubernetes types fleetform reads and writes (OCM's and its own).
//! - [`cli`]: the `fleetform` command line.

pub mod api;
pub mod cli;
pub mod fleet;
pub mod plan;
pub mod source;
