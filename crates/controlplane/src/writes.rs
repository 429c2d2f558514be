//! What kube-apiserver does to an object a client writes before the resource's strategy sees
//! it: decoding it as the kind's Go type or its CRD's structural schema decodes it (fields
//! neither declares are dropped, and with duplicate JSON keys refused or warned of as
//! `fieldValidation` asks), defaulting it, and recording who set which fields
//! (`managedFields`, see [`crate::fields`]); and the form built-in objects are stored in,
//! the one their Go types encode.
//!
//! Pure functions over the registry's resources and the CRD converters; no storage, no HTTP.

use serde_json::Value;

use crate::conversion::Converters;
use crate::error::{ApiError, ApiResult, FieldError, Subject};
use crate::fields::decode::{Decoded, normalize};
use crate::fields::encode::merge_patched_json;
use crate::fields::manager::OneVersion;
use crate::fields::schema::OBJECT_META;
use crate::fields::set::PathElement;
use crate::fields::{Applied, ApplyError, FieldManager, ObjectType, Set, Versions};
use crate::meta::ObjectMeta;
use crate::patch::Patched;
use crate::registry::Registry;
use crate::resource::{Part, ResourceInfo};

/// The `fieldValidation` a write asks for: what to do with fields the kind does not declare
/// and duplicate JSON keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (kube-apiserver's default).
    #[default]
    Warn,
    /// Refuse the write.
    Strict,
}

impl FieldValidation {
    pub fn parse(value: Option<&str>) -> ApiResult<Self> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::BadRequest(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }

    /// Refuses the write with `refuse(errors)`, warns of the errors, or lets them pass.
    fn judge(
        self,
        errors: Vec<String>,
        warnings: &mut Vec<String>,
        refuse: impl FnOnce(&[String]) -> ApiError,
    ) -> ApiResult<()> {
        if errors.is_empty() {
            return Ok(());
        }
        match self {
            FieldValidation::Strict => Err(refuse(&errors)),
            FieldValidation::Warn => {
                warnings.extend(errors);
                Ok(())
            }
            FieldValidation::Ignore => Ok(()),
        }
    }
}

/// The type a resource's objects are decoded and stored as: its own, or that of the
/// resource it is stored under (events.k8s.io Events are core Events).
fn stored_type(info: &ResourceInfo) -> Option<ObjectType> {
    match info.strategy.stored_as() {
        Some(stored) => ObjectType::builtin(stored.api_version, &info.kind),
        None => info.fields.clone(),
    }
}

/// Decodes `obj` as the kind's type does and defaults it; returns the strict decoding errors
/// of the fields it dropped.
fn decode_kind(info: &ResourceInfo, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    match (&info.custom, &info.fields) {
        (Some(custom), _) => {
            if let Some(schema) = &custom.schema {
                unknown.extend(schema.decode(obj));
            }
            // A custom resource's metadata is decoded as every object's.
            if let Some(meta) = obj.get_mut("metadata")
                && let Some(meta_type) = ObjectType::builtin_named(OBJECT_META)
            {
                let mut dropped = Vec::new();
                normalize(&meta_type.schema, meta_type.root, meta, &mut dropped);
                unknown.extend(dropped.into_iter().map(|p| format!("metadata.{p}")));
            }
        }
        (None, Some(ty)) => {
            info.strategy.default(obj);
            normalize(&ty.schema, ty.root, obj, &mut unknown);
        }
        (None, None) => {}
    }
    unknown
        .into_iter()
        .map(|p| format!("unknown field {}", crate::fields::set::go_quote(&p)))
        .collect()
}

/// A create or update body as the resource takes it: decoded and defaulted, its strict
/// decoding errors refused (400) or warned of.
pub fn take_body(
    info: &ResourceInfo,
    body: Decoded,
    validation: FieldValidation,
    warnings: &mut Vec<String>,
) -> ApiResult<Value> {
    let Decoded {
        mut object,
        mut strict_errors,
    } = body;
    strict_errors.extend(decode_kind(info, &mut object));
    validation.judge(strict_errors, warnings, |errors| {
        ApiError::BadRequest(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
            errors.join(", "),
            kind = info.kind,
            version = info.version,
        ))
    })?;
    Ok(object)
}

/// A patched object as the resource takes it; a strict refusal (422) quotes the patched
/// object as kube-apiserver's patch library wrote it.
pub fn take_patched(
    info: &ResourceInfo,
    patched: Patched,
    validation: FieldValidation,
    warnings: &mut Vec<String>,
) -> ApiResult<Value> {
    let Patched {
        object: mut patched,
        strict_errors: mut patch_errors,
        reached,
    } = patched;
    // Only a strict refusal quotes the object as patched (before decoding drops fields):
    // keep a copy for it rather than encode every patched object.
    let as_patched = (validation == FieldValidation::Strict).then(|| patched.clone());
    patch_errors.extend(decode_kind(info, &mut patched));
    validation.judge(patch_errors, warnings, |errors| {
        let as_patched = as_patched.as_ref().unwrap_or(&patched);
        let quoted = match (&info.custom, &info.fields) {
            (None, Some(ty)) => merge_patched_json(&ty.schema, Some(ty.root), as_patched, &reached),
            _ => as_patched.to_string(),
        };
        ApiError::invalid(
            Subject::default(),
            vec![FieldError::invalid(
                "patch",
                &Value::String(quoted),
                format!("strict decoding error: {}", errors.join(", ")),
            )],
        )
    })?;
    Ok(patched)
}

/// An object an apply made, decoded and defaulted as kube-apiserver does the result of an
/// apply.
pub fn take_applied(info: &ResourceInfo, mut obj: Value) -> Value {
    decode_kind(info, &mut obj);
    obj
}

/// A built-in object (as stored) in the form its Go type encodes it.
pub fn canonical(info: &ResourceInfo, obj: &mut Value) {
    if info.custom.is_none()
        && let Some(ty) = stored_type(info)
    {
        normalize(&ty.schema, ty.root, obj, &mut Vec::new());
    }
}

/// Records `obj`'s writer as kube-apiserver's field manager does for an object it answers but
/// does not store (an access review, a TokenRequest). Their kinds have no type here, so the
/// fields are deduced from the JSON (maps merged by key, lists atomic), against the zero
/// object of their Go types, whose `spec` is a struct always there.
pub fn record_unstored(
    obj: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    now: &str,
) {
    let Some(ty) = ObjectType::builtin_named(crate::fields::schema::DEDUCED) else {
        return;
    };
    let fm = FieldManager {
        ty: &ty,
        api_version,
        subresource,
        reset: &Set::new(),
        versions: &OneVersion,
        now,
        describe: &|_| String::new(),
        live_typed: false,
    };
    fm.update(&serde_json::json!({"spec": {}}), obj, manager);
}

/// `group/version, Kind=kind` as kube prints a group-version-kind.
fn gvk_string(obj: &Value) -> String {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

/// Refuses an apply configuration of another kind or version than the resource's (400).
pub fn check_apply_kind(info: &ResourceInfo, config: &Value) -> ApiResult<()> {
    let api_version = config.get("apiVersion").and_then(Value::as_str);
    let kind = config.get("kind").and_then(Value::as_str);
    if api_version == Some(info.api_version().as_str()) && kind == Some(info.kind.as_str()) {
        return Ok(());
    }
    Err(ApiError::BadRequest(format!(
        "invalid object type: {}",
        gvk_string(config)
    )))
}

/// What a write through `part` may not change, as a field set.
fn reset_set(info: &ResourceInfo, part: Part) -> Set {
    let mut set = Set::new();
    for path in info.strategy.reset_fields(info, part) {
        let path: Vec<PathElement> = path
            .iter()
            .map(|f| PathElement::Field((*f).to_string()))
            .collect();
        set.insert(&path);
    }
    set
}

/// The other versions of a resource, for managers that wrote at them.
struct ServedVersions<'a> {
    info: &'a ResourceInfo,
    registry: &'a Registry,
    conversions: &'a Converters,
}

impl Versions for ServedVersions<'_> {
    fn convert(&self, obj: &Value, api_version: &str) -> Option<(Value, ObjectType)> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let other = self
            .registry
            .resources_in(group, version)
            .into_iter()
            .find(|o| o.kind == self.info.kind && o.storage_key() == self.info.storage_key())?;
        let stored = self
            .conversions
            .stored(self.info, self.info.strategy.to_stored(obj.clone()))
            .ok()?;
        let served = self.conversions.served_one(&other, &stored).ok()?;
        Some((served, other.fields.clone()?))
    }
}

/// The field manager of one write: the resource, the part written and when.
pub struct Recorder<'a> {
    pub info: &'a ResourceInfo,
    pub registry: &'a Registry,
    pub conversions: &'a Converters,
    pub part: Part,
    pub now: &'a str,
}

impl Recorder<'_> {
    fn run<R>(&self, f: impl FnOnce(&FieldManager<'_>) -> R) -> Option<R> {
        let ty = self.info.fields.as_ref()?;
        let reset = reset_set(self.info, self.part);
        let versions = ServedVersions {
            info: self.info,
            registry: self.registry,
            conversions: self.conversions,
        };
        let api_version = self.info.api_version();
        let describe =
            |obj: &Value| format!("{}/{}; {}", obj.namespace(), obj.name(), gvk_string(obj));
        let fm = FieldManager {
            ty,
            api_version: &api_version,
            subresource: self.part.name(),
            reset: &reset,
            versions: &versions,
            now: self.now,
            describe: &describe,
            live_typed: self.info.custom.is_none() && self.info.strategy.stored_as().is_none(),
        };
        Some(f(&fm))
    }

    /// The zero object a create is recorded against: what the kind's Go type decodes `{}`
    /// into (nothing, for a custom resource).
    fn zero(&self) -> Value {
        match (&self.info.custom, &self.info.fields) {
            (None, Some(ty)) => ty.zero(),
            _ => Value::Object(Default::default()),
        }
    }

    /// Records a create of `new` by `manager`.
    pub fn create(&self, new: &mut Value, manager: &str) {
        let zero = self.zero();
        self.update(&zero, new, manager);
    }

    /// Records an update of `live` to `new` by `manager`.
    pub fn update(&self, live: &Value, new: &mut Value, manager: &str) {
        if self.run(|fm| fm.update(live, new, manager)).is_none() {
            crate::meta::meta_mut(new).remove("managedFields");
        }
    }

    /// Applies `config` by `manager` to `live` (None: the object does not exist yet); the
    /// merged object, with its managed fields.
    pub fn apply(
        &self,
        live: Option<&Value>,
        config: &Value,
        manager: &str,
        force: bool,
    ) -> ApiResult<Value> {
        let zero;
        let live = match live {
            Some(l) => l,
            None => {
                zero = self.zero();
                &zero
            }
        };
        let applied = self
            .run(|fm| fm.apply(live, config, manager, force))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "{} does not support server-side apply",
                    self.info.plural
                ))
            })?;
        match applied {
            Ok(Applied::Changed(obj) | Applied::Unchanged(obj)) => Ok(obj),
            Err(ApplyError::Conflicts(conflicts)) => Err(ApiError::ConflictMessage {
                subject: Subject::default(),
                message: ApplyError::conflict_message(&conflicts),
                causes: conflicts
                    .into_iter()
                    .map(|c| (c.field, format!("conflict with {}", c.manager)))
                    .collect(),
            }),
            Err(ApplyError::BadRequest(m)) => Err(ApiError::BadRequest(m)),
            Err(ApplyError::Untyped(m)) => Err(ApiError::Failure(m)),
        }
    }
}
