//! What describes one served resource: its names, verbs, subresources, printer columns and
//! schema ([`ResourceInfo`], one entry of [`crate::registry`]), and what is particular about
//! its objects ([`ResourceStrategy`], implemented in [`crate::strategy`]), with what the
//! strategy's hooks take and answer: the [`Part`] of an object a write goes through, a
//! [`Validation`], [`DeleteOptions`] and a [`DeleteOutcome`]. The default delete
//! ([`delete_by_finalizers`]: finalizers and the propagation policy decide) is here, beside the
//! trait whose default it is.
//!
//! The object rules ([`crate::objects`]), the strategies, Table output and the API stand on
//! it. Pure: JSON in and out, no storage, no HTTP.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

use crate::error::{ApiError, ApiResult, FieldError, Subject};
use crate::meta::{NameRule, ObjectMeta, meta_mut};
use crate::scale::ScalePaths;
use crate::storage::WriteOp;
use crate::table::PrinterColumn;
use crate::typed::TypedField;
use crate::user::UserInfo;

/// One served resource of one group-version.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// The verbs discovery lists for the resource (and the only ones it is served for).
    pub verbs: &'static [&'static str],
    /// Whether objects are stored; false for resources answered by handlers of their own
    /// (reviews, bindings), which are never kept.
    pub stored: bool,
    /// What legacy discovery lists as `storageVersionHash` (see [`storage_version_hash`]);
    /// None for resources never stored.
    pub storage_version_hash: Option<String>,
    /// Subresources besides the main resource, by name: `status`, `approval`, `finalize`,
    /// `scale`, and those discovery lists but other handlers serve (`pods/exec`, ...).
    pub subresources: Vec<Subresource>,
    pub printer_columns: Vec<PrinterColumn>,
    /// What is particular about the resource's objects (see [`crate::strategy`]).
    pub strategy: &'static dyn ResourceStrategy,
    /// Served from a CustomResourceDefinition.
    pub custom: Option<CustomInfo>,
    /// What the `/scale` subresource reads and writes, when there is one.
    pub scale: Option<ScalePaths>,
    /// The type of the objects as kube-apiserver's decoder and field manager see it; None
    /// for kinds no field is recorded for.
    pub fields: Option<crate::fields::ObjectType>,
}

/// One subresource as discovery lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Subresource {
    pub name: String,
    /// The kind it answers with, and that kind's group and version when they are not the
    /// resource's own (`autoscaling/v1` Scale, `policy/v1` Eviction).
    pub kind: String,
    pub group_version: Option<(String, String)>,
    pub verbs: &'static [&'static str],
}

/// The verbs of `/status` and `/scale`.
pub const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

impl Subresource {
    /// `/scale`, answered as `autoscaling/v1` Scale.
    pub fn scale() -> Self {
        Subresource {
            name: "scale".into(),
            kind: "Scale".into(),
            group_version: Some(("autoscaling".into(), "v1".into())),
            verbs: STATUS_VERBS,
        }
    }

    /// `/status`, answered as the resource's own kind.
    pub fn status(kind: &str) -> Self {
        Subresource {
            name: "status".into(),
            kind: kind.into(),
            group_version: None,
            verbs: STATUS_VERBS,
        }
    }
}

/// What a CRD adds to a resource entry.
#[derive(Debug, Clone)]
pub struct CustomInfo {
    /// metadata.name of the CRD.
    pub crd_name: String,
    /// The version objects are stored at.
    pub storage_version: String,
    /// openAPIV3Schema of this version, if any.
    pub schema: Option<Arc<crate::crd_schema::ObjectSchema>>,
    /// The schema's `x-kubernetes-validations`, compiled when the CRD was read.
    pub rules: Option<Arc<crate::validation_rules::RuleSet>>,
    /// How objects move between versions (`spec.conversion.strategy`).
    pub conversion: ConversionStrategy,
}

/// A CRD's `spec.conversion.strategy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConversionStrategy {
    /// Versions share one schema: only `apiVersion` changes.
    #[default]
    None,
    /// Objects are converted by the CRD's conversion webhook (see [`crate::conversion`]).
    Webhook,
}

impl ResourceInfo {
    /// `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        Self::api_version_of(&self.group, &self.version)
    }

    pub(crate) fn api_version_of(group: &str, version: &str) -> String {
        if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        }
    }

    /// The key objects are stored under: shared by every version of a resource, and by
    /// core/v1 and events.k8s.io/v1 Events (see [`crate::events`]).
    pub fn storage_key(&self) -> String {
        match self.strategy.stored_as() {
            Some(stored) => stored.key.into(),
            None => format!("{}/{}", self.group, self.plural),
        }
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s.name == "status")
    }

    /// The apiVersion objects are stored with.
    pub fn storage_api_version(&self) -> String {
        if let Some(stored) = self.strategy.stored_as() {
            return stored.api_version.into();
        }
        match &self.custom {
            Some(c) if c.storage_version != self.version => {
                format!("{}/{}", self.group, c.storage_version)
            }
            _ => self.api_version(),
        }
    }
}

/// The first 8 bytes of the SHA-256 of the `group/version/kind` objects are stored as, in
/// base64: how discovery tells clients that a resource's storage changed.
pub fn storage_version_hash(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{kind}"));
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
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
    /// propagation policy decide (see [`delete_by_finalizers`]).
    fn delete(
        &self,
        info: &ResourceInfo,
        cur: &Value,
        opts: &DeleteOptions,
        now: &str,
    ) -> ApiResult<(WriteOp, DeleteOutcome)> {
        delete_by_finalizers(info, cur, opts, now)
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

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource: everything but status (when status is a subresource).
    Main,
    Status,
    /// CSR approval: status.conditions (and metadata) only.
    Approval,
    /// Namespace finalize: spec.finalizers only.
    Finalize,
    /// `/scale`: served through [`crate::scale`]; writes become main-resource updates.
    Scale,
}

impl Part {
    /// The subresource's name; empty for the main resource.
    pub fn name(self) -> &'static str {
        match self {
            Part::Main => "",
            Part::Status => "status",
            Part::Approval => "approval",
            Part::Finalize => "finalize",
            Part::Scale => "scale",
        }
    }

    pub fn from_subresource(info: &ResourceInfo, sub: Option<&str>) -> Option<Part> {
        match sub {
            None => Some(Part::Main),
            Some(s) if !info.subresources.iter().any(|x| x.name == s) => None,
            Some("status") => Some(Part::Status),
            Some("approval") => Some(Part::Approval),
            Some("finalize") => Some(Part::Finalize),
            Some("scale") if info.scale.is_some() => Some(Part::Scale),
            Some(_) => None,
        }
    }
}

/// The finalizer the server's garbage collector uses for foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer asking the collector to orphan dependents.
pub const ORPHAN: &str = "orphan";

/// Options of a delete request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteOptions {
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
    /// Who asks (shown to admission plugins); None for the server's own deletes.
    pub user: Option<UserInfo>,
}

impl DeleteOptions {
    /// Checks the options as kube-apiserver does before it looks at the object: an unknown
    /// propagation policy is refused whether or not the object exists.
    pub fn validate(&self) -> ApiResult<()> {
        match self.propagation.as_deref() {
            None | Some("Foreground" | "Background" | "Orphan") => Ok(()),
            Some(other) => Err(ApiError::invalid(
                Subject {
                    group: "meta.k8s.io".into(),
                    kind: "DeleteOptions".into(),
                    name: String::new(),
                },
                vec![FieldError::not_supported(
                    "propagationPolicy",
                    &json!(other),
                    &[
                        json!("Foreground"),
                        json!("Background"),
                        json!("Orphan"),
                        json!("nil"),
                    ],
                )],
            )),
        }
    }

    /// Reads a DeleteOptions body (absent fields keep their query-string values).
    pub fn merge_body(&mut self, body: &Value) -> ApiResult<()> {
        if body.is_null() {
            return Ok(());
        }
        if !body.is_object() {
            return Err(ApiError::BadRequest(
                "DeleteOptions must be a JSON object".into(),
            ));
        }
        if let Some(p) = body.get("propagationPolicy").and_then(Value::as_str) {
            self.propagation = Some(p.to_string());
        }
        if body.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            self.propagation = Some("Orphan".into());
        }
        if let Some(u) = body.pointer("/preconditions/uid").and_then(Value::as_str) {
            self.precondition_uid = Some(u.to_string());
        }
        if let Some(r) = body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
        {
            self.precondition_rv = Some(r.to_string());
        }
        if let Some(d) = body.get("dryRun").and_then(Value::as_array)
            && d.iter().any(|x| x == "All")
        {
            self.dry_run = true;
        }
        Ok(())
    }
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The object is gone.
    Removed,
    /// The object is marked and waits for its finalizers.
    Pending,
    /// The object is marked deleted (the write stores it so, as watchers see it), then removed
    /// at once: kube-apiserver's graceful deletion with a grace period of 0.
    MarkedThenRemoved,
}

/// What deleting `cur` does for most resources: with no finalizers (and none the propagation
/// policy adds) the object goes at once; otherwise it is marked deleted and waits for them.
pub fn delete_by_finalizers(
    info: &ResourceInfo,
    cur: &Value,
    opts: &DeleteOptions,
    now: &str,
) -> ApiResult<(WriteOp, DeleteOutcome)> {
    let mut finalizers = cur.finalizers();
    // The policy was checked with the rest of the options ([`DeleteOptions::validate`]).
    let extra = match opts.propagation.as_deref() {
        Some("Foreground") => Some(FOREGROUND),
        Some("Orphan") => Some(ORPHAN),
        _ => None,
    };
    let mut changed = false;
    if let Some(f) = extra
        && !finalizers.iter().any(|x| x == f)
        && !cur.is_deleting()
    {
        finalizers.push(f.to_string());
        changed = true;
    }
    if finalizers.is_empty() {
        return Ok((WriteOp::Delete, DeleteOutcome::Removed));
    }
    if cur.is_deleting() && !changed {
        return Ok((WriteOp::Unchanged, DeleteOutcome::Pending));
    }
    let mut next = cur.clone();
    let m = meta_mut(&mut next);
    m.insert("finalizers".into(), json!(finalizers));
    if !cur.is_deleting() {
        m.insert("deletionTimestamp".into(), json!(now));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
    }
    if info.strategy.tracks_generation() {
        let g = cur
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        m.insert("generation".into(), json!(g + 1));
    }
    Ok((WriteOp::Put(next), DeleteOutcome::Pending))
}
