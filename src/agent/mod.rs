//! The agent's decision logic: what the fleetform agent on a spoke reports to its hub and when it
//! acts (seeds 000, 001, 003; DESIGN §4.1–§4.4).
//!
//! - [`availability`]: the spoke's Available condition from `/livez` and agent-deployment probes
//!   (False only after a failure persists), and when to renew the cluster lease.
//! - [`addon_health`]: an addon's Available condition from its Lease on the spoke, when that
//!   condition would next change, and whether it must be written to the hub at all.
//! - [`claims`]: which ClusterClaims go into `status.clusterClaims` (reserved first, custom ones
//!   cut at `clusterClaimsMax`), and the node summary (version, capacity, allocatable, health).
//! - [`rotation`]: when a client certificate is due for rotation, when a registration needs a
//!   new CSR, and the CSRs themselves (the agent's registration and its addons').
//! - [`addon_secret`]: the Secret holding an addon registration's certificate on the spoke and
//!   whether a stored one still serves the registration.
//! - [`hub_identity`]: the agent's certificate identity as stored in `hub-kubeconfig-secret`,
//!   whether a stored one is used again, where a CSR stands, the pending-CSR limit.
//! - [`day2_decision`]: day 2 once joined: taking the spoke over (finalizer, PivotComplete), the
//!   version it reports, upgrading itself, and the unjoin's order when its Spoke is deleted.
//!
//! The live loops around them, which own the watches, timers, probes and writes:
//!
//! - [`run`]: [`run::run`] starts an agent ([`AgentConfig`]) and its loops, while it holds its
//!   spoke's election Lease when it elects: registration and
//!   joining, [`lease_loop`], [`status_loop`], [`addon_loop`], [`addon_registration`]; [`hub_connection`] is how it
//!   reaches the hub, and [`registration`] trades a bootstrap kubeconfig for a certificate,
//!   rotates it and restarts the loops with each new one; [`day2`] follows the Spoke and acts on
//!   [`day2_decision`]. [`args`] is its command line, which
//!   `fleetform agent` and `fleetform up`'s kubelet stand-in both parse.
//!
//! Everything in the decision modules is pure: objects, probe results and the current time in;
//! conditions, CSRs and instants out. They must not talk to a cluster, read the clock or draw
//! random numbers (jitter arrives as an argument); the loops do, and decide nothing themselves.

pub mod addon_health;
pub mod addon_loop;
pub mod addon_registration;
pub mod addon_secret;
pub mod args;
pub mod availability;
pub mod claims;
pub mod day2;
pub mod day2_decision;
pub mod hub_connection;
pub mod hub_identity;
pub mod lease_loop;
pub mod registration;
pub mod rotation;
pub mod run;
pub mod status_loop;

pub use hub_connection::HubConnection;
pub use run::{AgentConfig, AgentError, AgentLoops, run};
