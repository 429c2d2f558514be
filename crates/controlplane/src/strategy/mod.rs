//! Per-resource behaviour, as kube-apiserver's registry strategies: each built-in kind has a
//! [`ResourceStrategy`] (one module per API group), and every custom resource shares one
//! ([`apiextensions::CustomResources`]). A strategy says what is particular about its resource:
//! defaults and server-set fields on create, what an update keeps of the stored object,
//! validation, generation, what a delete does, the checks its writes need beyond RBAC, how it
//! is stored and printed, and which field selectors it takes. What every object shares
//! (metadata, subresources, finalizers, preconditions) is [`crate::objects`]'.
//!
//! The registry names each resource's strategy ([`crate::registry::ResourceInfo::strategy`]);
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

use std::borrow::Cow;
use std::fmt;

use serde_json::Value;

use crate::error::{ApiResult, FieldError};
use crate::meta::NameRule;
use crate::objects::{DeleteOptions, DeleteOutcome, Part};
use crate::registry::ResourceInfo;
use crate::scale::ScalePaths;
use crate::storage::WriteOp;
use crate::table::PrinterColumn;
use crate::typed::TypedField;
use crate::user::UserInfo;

/// A check a write needs beyond RBAC's on its own verb (kube-apiserver's admission for CSRs,
/// and RBAC's escalation check on roles and bindings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCheck {
    /// The requester needs this verb (`approve`, `sign`) on the CSR's signer.
    Signer(&'static str),
    /// The object, as it would be stored, may grant only what the requester holds, unless they
    /// may `escalate` (roles) or `bind` (bindings).
    Escalation,
}

/// An object being validated: the resource it is written through, the stored object when it
/// is an update, the part of it the write is through, and the field errors found so far.
pub struct Validation<'a> {
    pub info: &'a ResourceInfo,
    pub old: Option<&'a Value>,
    pub part: Part,
    pub errors: Vec<FieldError>,
}

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

/// Where a resource's objects are stored when that is not under their own resource: the
/// storage key and the apiVersion stored objects carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredAs {
    pub key: &'static str,
    pub api_version: &'static str,
}

/// What kube-apiserver's pod admission (ServiceAccount, Priority, DefaultTolerationSeconds and
/// PodSecurity, see [`crate::pod_admission`]) has to do with a resource's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodAdmission {
    /// The objects are Pods: admitted as new pods, and held to the namespace's PodSecurity
    /// `enforce` level.
    Pod,
    /// The objects hold a pod template at this JSON pointer (`/spec/template` of a Deployment,
    /// `/spec/jobTemplate/spec/template` of a CronJob): PodSecurity warns about it.
    Template(&'static str),
    /// The objects are Namespaces, whose labels set the PodSecurity levels.
    Namespace,
}

/// What is particular about one resource. Every method has the behaviour most resources share
/// as its default.
pub trait ResourceStrategy: fmt::Debug + Send + Sync {
    /// How object names are checked.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Whether `metadata.generation` counts changes outside metadata and status.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// Whether a PUT without a resourceVersion may replace the stored object
    /// (kube-apiserver's `AllowUnconditionalUpdate`).
    fn allows_unconditional_update(&self) -> bool {
        true
    }

    /// Whether a PUT of a missing object creates it (kube-apiserver's `AllowCreateOnUpdate`:
    /// Leases, Events, Services, Endpoints, RBAC objects).
    fn allows_create_on_update(&self) -> bool {
        false
    }

    /// The fields of a built-in kind whose decoding can fail (see [`crate::typed`]).
    fn typed_fields(&self) -> &'static [TypedField] {
        &[]
    }

    /// Whether patches may be strategic merge patches (built-in kinds know their merge keys;
    /// custom resources do not).
    fn accepts_strategic_merge(&self) -> bool {
        true
    }

    /// Field selectors accepted beyond `metadata.name` and `metadata.namespace`.
    fn field_selectors(&self) -> &'static [&'static str] {
        &[]
    }

    /// The columns `kubectl get` shows for a built-in kind (a custom resource's come from its
    /// CRD).
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        Vec::new()
    }

    /// Where a built-in kind's `/scale` subresource reads and writes, when it has one.
    fn scale(&self) -> Option<ScalePaths> {
        None
    }

    /// Where objects are stored, when not under their own resource.
    fn stored_as(&self) -> Option<StoredAs> {
        None
    }

    /// An object written through this resource, in its stored form.
    fn to_stored(&self, obj: Value) -> Value {
        obj
    }

    /// A stored object in the form this resource serves it (before apiVersion and kind are
    /// set).
    fn to_served(&self, obj: Value) -> Value {
        obj
    }

    /// Whether [`Self::to_served`] leaves every object as stored: then an object stored at
    /// this resource's version and kind is served as its stored bytes, never decoded.
    fn serves_as_stored(&self) -> bool {
        true
    }

    /// The stored field a field selector of this resource names.
    fn stored_field<'p>(&self, path: &'p str) -> Cow<'p, str> {
        Cow::Borrowed(path)
    }

    /// The defaults kube-apiserver applies when it decodes an object of this kind (its
    /// `SetDefaults_*`): applied before the writer's fields are recorded, so the writer owns
    /// them, unlike the server-set fields of [`Self::prepare_for_create`].
    fn default(&self, _obj: &mut Value) {}

    /// What a write through `part` may not change, so its writer owns none of it (kube's
    /// `GetResetFields`): by default `status` through the main resource of a kind with a
    /// status subresource, and `spec` through `/status`.
    fn reset_fields(&self, info: &ResourceInfo, part: Part) -> &'static [&'static [&'static str]] {
        match part {
            Part::Main if info.has_status() => &[&["status"]],
            Part::Status => &[&["spec"]],
            _ => &[],
        }
    }

    /// Sets defaults and server-owned fields of a new object, once its metadata is set and
    /// before it is validated.
    fn prepare_for_create(&self, _info: &ResourceInfo, _obj: &mut Value, _now: &str) {}

    /// Records who creates the object, when the resource keeps that.
    fn record_requester(&self, _obj: &mut Value, _user: &UserInfo) {}

    /// The metadata fields a write through `/status` takes from the request; the others keep
    /// their stored values (what custom resources and most kinds do).
    fn status_writes_metadata(&self) -> &'static [&'static str] {
        &[]
    }

    /// Adjusts an update of `cur` through `part` (made of the request and what the part may
    /// not change), before it is validated: what the resource keeps or recomputes itself.
    fn prepare_for_update(&self, _cur: &Value, _next: &mut Value, _part: Part) {}

    /// Validates (and normalises) an object of this resource, adding what is wrong to
    /// `check.errors`; an update is first refused changes to what may not change once set.
    fn validate(&self, _obj: &mut Value, _check: &mut Validation<'_>) {}

    /// What kube-apiserver warns of when a valid object is created (its strategy's
    /// `WarningsOnCreate`).
    fn warnings_on_create(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// What kube-apiserver warns of when a valid object is updated from `old`.
    fn warnings_on_update(&self, _obj: &Value, _old: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Refuses a new object, validated and admitted by the embedder's plugins, as
    /// kube-apiserver's own validating admission of the resource does (403).
    fn admit_create(&self, _info: &ResourceInfo, _obj: &Value) -> ApiResult<()> {
        Ok(())
    }

    /// What a write through `part` needs checked beyond RBAC.
    fn write_check(&self, _part: Part) -> Option<WriteCheck> {
        None
    }

    /// Whether objects of this resource define served resources (CRDs): the registry follows
    /// each write.
    fn defines_resources(&self) -> bool {
        false
    }

    /// What deleting `cur` does once its preconditions hold: by default finalizers and the
    /// propagation policy decide (see [`crate::objects::delete_by_finalizers`]).
    fn delete(
        &self,
        info: &ResourceInfo,
        cur: &Value,
        opts: &DeleteOptions,
        now: &str,
    ) -> ApiResult<(WriteOp, DeleteOutcome)> {
        crate::objects::delete_by_finalizers(info, cur, opts, now)
    }

    /// Whether `next`, an object being deleted whose last finalizer goes, is removed (a
    /// Namespace also waits for the finalizers of its spec).
    fn removed_once_finalized(&self, _next: &Value) -> bool {
        true
    }

    /// What kube-apiserver's pod admission does with the resource's objects, if anything.
    fn pod_admission(&self) -> Option<PodAdmission> {
        None
    }

    /// Whether a delete that removed the object answers with the object rather than a
    /// `Status`.
    fn returns_deleted_object(&self) -> bool {
        false
    }
}
