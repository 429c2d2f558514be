//! fleetform keeps a fleet of Kubernetes clusters — hubs, the spoke clusters registered to them,
//! and the addons on those spokes — in line with a git repository.
//!
//! - [`fleet`]: the fleet repo format, loading, validation and its reference page (pure).
//! - [`source`]: reading a fleet repo from a directory or a git commit.
//! - [`plan`]: desired fleet + observed state → an ordered plan (pure).
//! - [`api`]: the Kubernetes types fleetform reads and writes (OCM's and its own).
//! - [`access`]: reaching a hub's or spoke's cluster from its kubeconfig source.
//! - [`observe`]: reading what a hub holds, for the planner.
//! - [`admission`]: OCM's ManagedCluster admission webhooks, in every control plane fleetform
//!   starts ([`embedded`]).
//! - [`apply`]: writing a plan's object changes to a hub.
//! - [`pipeline`]: observe → plan → apply, as `plan`, `apply` and `sync` run it.
//! - [`deploy`]: what fleetform installs on a hub (the install set, its RBAC, `deploy/`), and
//!   installing and uninstalling it.
//! - [`reconciler`]: the Spoke lifecycle — join, accept, addons, unjoin in finalizer order.
//! - [`rollout`]: a hub's agent rolled out to its spokes in waves — which spokes move when (pure).
//! - [`hub`]: the hub loops' decisions: lease expiry, the cluster observer, CSR approval (pure).
//! - [`agent`]: the agent's decisions: availability, addon health, claims, certificates (pure).
//! - [`status`]: one row per spoke, from what its hub holds.
//! - [`sync`]: the in-cluster GitOps controller (`fleetform sync`).
//! - [`runtime`]: the machinery between decisions and kube-rs every component shares: Kubernetes
//!   errors and the error policy, conditions, finalizers, CRD presence, one task per object.
//! - [`cli`]: the `fleetform` command line, and the pages generated from it and the schemas
//!   (`cli::docs`: the CLI and fleet repo references, the man pages).

pub mod access;
pub mod admission;
pub mod agent;
pub mod api;
pub mod apply;
pub mod cli;
pub mod converge;
pub mod dashboard;
pub mod deploy;
pub mod embedded;
pub mod events;
pub mod fleet;
pub mod health;
pub mod hub;
pub mod observe;
pub mod pipeline;
pub mod plan;
pub mod reconciler;
pub mod rollout;
pub mod runtime;
pub mod source;
pub mod status;
pub mod sync;
pub mod transport;
pub mod up;
