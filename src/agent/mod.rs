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
//!
//! Everything here is pure: objects, probe results and the current time in; conditions, CSRs and
//! instants out. The agent's loops own the watches, timers, probes and writes; this module must
//! not talk to a cluster, read the clock or draw random numbers (jitter arrives as an argument).

pub mod addon_health;
pub mod availability;
pub mod claims;
pub mod rotation;
