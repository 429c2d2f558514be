//! An embedded, Kubernetes-wire-compatible API server backed by SQLite.
//!
//! This crate is general API machinery: it knows nothing of fleets, hubs or spokes.
//!
//! Start one with [`ControlPlane::builder`]; it serves kube-apiserver's REST API over HTTPS
//! with client-certificate and token authentication and RBAC (or, when asked, plain HTTP) so
//! kubectl and kube-rs work against it unchanged.
//!
//! Layout: [`resource`] (what describes a served resource, and the strategy trait),
//! [`registry`] (what is served), [`storage`] (objects, history, indexes, durability),
//! [`objects`] (create/update/delete rules every object shares), [`strategy`] (what is
//! particular to each resource), [`api`] (operations), [`admission`] (the
//! embedder's plugins), [`conversion`] (CRD versions), [`watch`], [`patch`] (JSON, merge,
//! strategic, server-side apply), [`crd_schema`], [`selectors`], [`table`], [`scale`], [`openapi`],
//! [`pod_admission`] (kube-apiserver's admission of pods, pod templates and namespaces) and
//! [`podsecurity`] (the Pod Security Standards it holds them to),
//! [`private_files`] (owner-only state on disk), [`encode`] (the bytes objects are stored and
//! answered in: JSON in kube-apiserver's key order, YAML), [`request_info`] (what a request asks, read
//! once for authorization, routing and counting), [`requests`] (request counts),
//! [`controllers`] (kube-controller-manager's part: garbage collection, namespaces, CRD
//! cleanup, ServiceAccounts and their tokens, the root CA, Deployments and ReplicaSets),
//! [`auth`] (TLS, authentication, RBAC, reviews, CSR signing, ServiceAccount tokens),
//! [`token_request`] (`serviceaccounts/token`), [`http`] (routing) and [`server`] (lifecycle).
//! Modules import downward (ARCHITECTURE.md, "The layers of the control plane").

// ApiError carries the Status details it renders; errors are the cold path, so their size
// is not worth boxing for.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod api;
pub mod auth;
pub mod controllers;
pub mod conversion;
pub mod crd_schema;
pub mod encode;
pub mod error;
pub mod events;
pub mod fields;
pub mod gojson;
pub mod http;
pub mod meta;
pub mod names;
pub mod objects;
pub mod openapi;
pub mod patch;
pub mod pod_admission;
pub mod podsecurity;
pub mod private_files;
pub mod protobuf;
pub mod registry;
pub mod request_info;
pub mod requests;
pub mod resource;
pub mod scale;
pub mod selectors;
pub mod server;
pub mod storage;
pub mod strategy;
pub mod table;
pub mod token_request;
pub mod typed;
pub mod user;
pub mod validation_rules;
pub mod watch;
pub mod writes;

pub use server::{
    ControlPlane, ControlPlaneBuilder, Identities, InProcessService, LocalEndpoint,
    RunningControlPlane, StartError,
};
pub use storage::{Clock, SystemClock};
pub use user::UserInfo;
