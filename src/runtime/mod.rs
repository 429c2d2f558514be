//! The layer between fleetform's decisions and kube-rs that every component shares: what a
//! controller, loop or agent needs from the API machinery and is not itself a decision.
//!
//! - [`error`]: a failed Kubernetes call ([`error::KubeError`]) and its category, which metric
//!   labels and Event reasons use.
//! - [`controller`]: the one error policy of every controller and what it does with their
//!   outcomes.
//! - [`conditions`]: writing an object's conditions without losing another writer's.
//! - [`finalizers`]: adding and removing finalizers, and deleting what may be gone already.
//! - [`crd`]: whether a CRD is installed, said when it is not.
//! - [`clock`]: sleeping until the instant a decision named; [`retry`]: the backoff of a loop's
//!   step that fails, and saying its failure once.
//! - [`leader`]: leader election on a Lease, and running leader-gated work for each term.
//! - [`metrics`]: what every controller counts; [`admin`]: the admin endpoint (`/metrics`,
//!   `/healthz`, `/readyz`) on one address, served by [`http`] (plain HTTP/1.1 until a stop).
//! - [`task_set`]: one task per watched object (or per anything keyed), started, restarted and
//!   stopped as what it runs with changes; [`watch`]: the changes of each watched object that
//!   drive it, deletions missed while the watch was away included; [`index`]: a cache's objects
//!   found by a key of theirs (a cluster, a namespace) without a scan.
//! - [`warnings`]: what an API server warns about in its answers, kept for who writes on a
//!   person's behalf.
//!
//! It depends on no component and decides nothing about fleets.

pub mod admin;
pub mod clock;
pub mod conditions;
pub mod controller;
pub mod crd;
pub mod error;
pub mod finalizers;
pub mod http;
pub mod index;
pub mod leader;
pub mod metrics;
pub mod retry;
pub mod task_set;
pub mod warnings;
pub mod watch;
