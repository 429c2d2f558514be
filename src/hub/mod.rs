//! The hub loops' decision logic: what the hub concludes about its spokes from leases, polls and
//! certificate signing requests (seeds 000, 001, 002; DESIGN §4.1–§4.5).
//!
//! - [`lease`]: when a cluster's lease has stopped (`renewTime + 5 × leaseDurationSeconds`), the
//!   Available=Unknown condition, the availability taints and the Unknown condition of the
//!   cluster's addons; the one instant the loop must wake up next.
//! - [`observer`]: Krake's cluster observer for `availability.mode: poll` spokes — its eight states,
//!   backoff and node health — and the same state names derived from lease-mode conditions.
//! - [`acceptance`]: whether the hub accepts a cluster (declared in git, or auto-approved) and
//!   which certificates' users its RBAC binds (those of its current join only).
//! - [`approval`]: whether the hub approves, denies or leaves alone a registration or addon CSR,
//!   with the reason that goes into the CSR's condition; [`signing`]: whether the hub signs an
//!   addon CSR of a custom signer itself, and with which CA.
//! - [`bootstrap`]: the hub-wide RBAC of bootstrap token holders (the token itself is
//!   [`crate::api::bootstrap_token`]).
//!
//! The live loops around them, which own the watches, timers and writes and decide nothing
//! themselves:
//!
//! - [`run`]: [`run::start`] starts the hub loops ([`HubConfig`]): [`accept_loop`] (acceptance,
//!   namespace, RBAC, lease and HubAcceptedManagedCluster of accepted clusters), [`expiry_loop`] (lease
//!   expiry, availability taints, addons of Unknown clusters), [`approval_loop`] (registration
//!   CSRs), [`signer_loop`] (addon CSRs: approval and custom signers), [`registrations_loop`]
//!   (ManagedClusterAddOns' registrations from their AddOn documents) and [`observer_loop`]
//!   (poll-mode spokes). `cache` says what each loop keeps of the objects it watches.
//! - [`conversion_webhook`]: the addon kinds' conversion webhook (`fleetform hub
//!   --webhook-addr`) and its self-managed certificate, started apart from the loops.
//! - [`process`]: one hub process, what `fleetform hub` and `fleetform up` run: the webhook and
//!   the admin endpoint on every replica, the loops and the lifecycle reconciler on the leader
//!   of the Lease `fleetform-hub`; [`metrics`]: what it counts.
//!
//! Every function in the decision modules is pure: it takes the objects and the current time as arguments and
//! returns decisions (conditions to set, taints to write, the next instant to wake up). The loops
//! around them own the watches, timers and writes, and must not decide anything themselves; this
//! module must not talk to a cluster, read the clock or sleep.

pub mod accept_loop;
pub mod acceptance;
pub mod approval;
pub mod approval_loop;
pub mod bootstrap;
pub(crate) mod cache;
pub mod cluster_sets;
pub mod conversion_webhook;
pub mod expiry_loop;
pub mod lease;
pub mod metrics;
pub mod observer;
pub mod observer_loop;
pub mod process;
pub mod registrations_loop;
pub mod run;
pub mod signer_loop;
pub mod signing;

pub use run::{HubConfig, HubError, run};
