//! Who a request comes from and what they may do: authentication ([`authn`], ServiceAccount
//! [`tokens`]), RBAC authorization ([`rbac`]), the reviews that answer both ([`reviews`]), the
//! certificate authority behind TLS and CSR signing ([`ca`]), and the controllers of
//! kube-controller-manager that serve identities: the CSR signer ([`csr_signer`]) and the
//! token controller ([`token_controller`]).
//!
//! `authn`, `tokens`, `rbac` and `reviews` are pure (no HTTP, no storage); the request path
//! ([`gate`]) wires them in.

pub mod authn;
pub mod ca;
pub mod csr_signer;
pub mod gate;
pub mod rbac;
pub mod reviews;
pub mod tls;
pub mod token_controller;
pub mod tokens;
