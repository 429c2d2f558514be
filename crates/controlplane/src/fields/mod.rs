//! Field management as kube-apiserver does it with structured-merge-diff: the types of
//! objects ([`schema`]), sets of field paths and their `fieldsV1` form ([`set`]), values
//! walked with their type ([`typed`]: checking, owned fields, comparison, merge, removal)
//! and `metadata.managedFields` kept through updates and server-side applies ([`manager`]).
//!
//! Pure: JSON in and out, no storage, no HTTP.

pub mod decode;
pub mod encode;
pub mod manager;
pub mod schema;
pub mod set;
pub mod typed;

pub use manager::{Applied, ApplyError, FieldManager, Managed, Versions};
pub use schema::ObjectType;
pub use set::Set;
