//! Integration tests of the embedded control plane over its real HTTP API, with kube-rs and
//! kubectl.
//!
//! One binary (one link) for every integration test of the crate; each module is the tests of
//! one behaviour, run by `cargo test --test api <module>::`.

mod common;

mod admission;
mod builtin_kinds;
mod controllers;
mod conversion;
mod crd_enforcement;
mod durability;
mod events;
mod golden;
mod indexes;
mod kube_api;
mod kube_crd;
mod kube_watch;
mod kubectl;
mod layering;
mod lifecycle;
mod list_by_name;
mod malformed_requests;
mod pod_security;
mod pods;
mod request_counts;
mod request_routing;
mod secret_logging;
mod security;
mod service_accounts;
mod strategies;
mod watch_history;
