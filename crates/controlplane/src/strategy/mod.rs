//! Per-resource behaviour, as kube-apiserver's registry strategies: each built-in kind has a
//! [`ResourceStrategy`] (one module per API group), and every custom resource shares one
//! ([`apiextensions::CustomResources`]). A strategy says what is particular about its resource:
//! defaults and server-set fields on create, what an update keeps of the stored object,
//! validation, generation, what a delete does, the checks its writes need beyond RBAC, how it
//! is stored and printed, and which field selectors it takes. What every object shares
//! (metadata, subresources, finalizers, preconditions) is [`crate::objects`]'. The trait and
//! the types its hooks take are [`crate::resource`]'s; this module holds the strategies and
//! what they share.
//!
//! The registry names each resource's strategy ([`crate::resource::ResourceInfo::strategy`]);
//! nothing else asks which resource it is handling. Pure: JSON in and out, no storage, no HTTP.

pub mod apiextensions;
pub mod apiregistration;
pub mod apps;
pub mod autoscaling;
pub mod batch;
pub mod certificates;
pub mod coordination;
pub mod core;
pub mod core_kinds;
pub mod discovery;
pub mod events;
pub mod networking;
pub mod pods;
pub mod policy;
pub mod rbac;
pub mod scheduling;
pub mod storage;

use serde_json::Value;

use crate::resource::ResourceStrategy;

/// Sets `key` to `value` unless it holds one already (kube-apiserver's defaulting: a field
/// absent or null takes its default).
pub(crate) fn set_default(map: &mut serde_json::Map<String, Value>, key: &str, value: Value) {
    match map.get(key) {
        Some(v) if !v.is_null() => {}
        _ => {
            map.insert(key.to_string(), value);
        }
    }
}

/// The pod template at `pointer` of a workload, defaulted as kube-apiserver defaults every
/// pod template (see [`pods::default_pod_template`]).
pub(crate) fn default_pod_template(obj: &mut Value, pointer: &str) {
    if let Some(template) = obj.pointer_mut(pointer) {
        pods::default_pod_template(template);
    }
}

/// A built-in kind with no behaviour of its own: stored as written, with the rules every
/// object shares.
#[derive(Debug)]
pub struct Plain {
    /// Whether `metadata.generation` counts changes of the spec.
    pub generation: bool,
    /// Whether a delete answers with the deleted object (kube-apiserver's
    /// `ReturnDeletedObject`).
    pub returns_object: bool,
}

/// Stored as written; a delete answers a Status.
pub static PLAIN: Plain = Plain {
    generation: false,
    returns_object: false,
};

impl ResourceStrategy for Plain {
    fn tracks_generation(&self) -> bool {
        self.generation
    }

    fn returns_deleted_object(&self) -> bool {
        self.returns_object
    }
}
