//! Who a request comes from and what they may do: authentication ([`authn`]), RBAC
//! authorization ([`rbac`]) and the certificate authority behind TLS and CSR signing ([`ca`]).
//!
//! These modules are pure (no HTTP, no storage); the request path wires them in.

pub mod authn;
pub mod ca;
pub mod csr_signer;
pub mod gate;
pub mod rbac;
pub mod tls;
