//! Integration tests of fleetform: the CLI, the hub loops, agents and whole fleets under `up`,
//! against the embedded control plane.
//!
//! One binary (one link) for every integration test of the crate; each module is the tests of
//! one behaviour, run by `cargo test --test integration <module>::`.

mod support;

mod agent_hub_cli;
mod apply_beside_sync;
mod cert_registration;
mod cli;
mod controlplane_cli;
mod conversion_webhook;
mod corpus;
mod csr_approval;
mod dashboard;
mod day2;
mod deploy;
mod docs;
mod events;
mod gitops;
mod ha_hub;
mod hub_loop_reads;
mod hub_security;
mod install;
mod layering;
mod lifecycle;
mod loader_props;
mod notify;
mod observer;
mod ocm_schemas;
mod production_path;
mod reconciler_reads;
mod registration;
mod rollout;
mod sync;
mod transport;
mod trust;
mod unjoin;
