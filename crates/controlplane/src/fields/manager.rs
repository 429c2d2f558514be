//! `metadata.managedFields` as kube-apiserver's field manager keeps them.
//!
//! Every write records who set what. An ordinary write (create, update, patch) gives its
//! manager, with operation `Update` at the request's version (and subresource), the fields it
//! added or changed, and takes them from everyone else; fields it removed leave every owner.
//! A server-side apply merges its configuration into the object, owns exactly the fields the
//! configuration sets, removes the fields it set last time and no longer sets (unless someone
//! else owns them), and conflicts with other managers owning what it would change, unless
//! forced. Fields a write's part may not change (`status` through the main resource, `spec`
//! through `/status`: the strategy's reset fields) are owned by nobody through it, and nobody
//! owns the metadata only the server sets.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::schema::ObjectType;
use super::set::{PathElement, Set, path_string};
use super::typed::{self, Comparison, TypeError, errors_string};
use crate::meta::ObjectMeta;

/// `Apply` or `Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: String,
    /// What the manager owns; changed through [`Entry::set_fields`].
    fields: Set,
    /// The entry as read, when it was in the form [`Managed::encode`] writes, while `fields`
    /// is unchanged: written back with its time instead of encoded again (most writes leave
    /// most entries as they were).
    read: Option<Map<String, Value>>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.manager,
            self.operation,
            &self.api_version,
            &self.time,
            &self.subresource,
            &self.fields,
        ) == (
            &other.manager,
            other.operation,
            &other.api_version,
            &other.time,
            &other.subresource,
            &other.fields,
        )
    }
}

impl Entry {
    pub fn new(
        manager: &str,
        operation: Operation,
        api_version: &str,
        time: Option<String>,
        subresource: &str,
        fields: Set,
    ) -> Entry {
        Entry {
            manager: manager.to_string(),
            operation,
            api_version: api_version.to_string(),
            time,
            subresource: subresource.to_string(),
            fields,
            read: None,
        }
    }

    /// Sets what the manager owns; unchanged fields keep their encoding.
    fn set_fields(&mut self, fields: Set) {
        if fields != self.fields {
            self.fields = fields;
            self.read = None;
        }
    }

    /// Whether two entries are the same manager: appliers are one whatever their version,
    /// updaters one per version.
    fn same(&self, manager: &str, operation: Operation, api_version: &str, sub: &str) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == sub
            && (operation == Operation::Apply || self.api_version == api_version)
    }

    /// The manager as conflicts name it: `"bob"`, `"bob" using v1`, with its subresource.
    fn named(&self) -> String {
        let mut s = super::set::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!(
                "{s} with subresource {}",
                super::set::go_quote(&self.subresource)
            );
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// The entries of an object's `metadata.managedFields`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Managed(pub Vec<Entry>);

impl Managed {
    /// Reads the `metadata.managedFields` of a stored object; an error names what is
    /// malformed.
    pub fn decode(obj: &Value) -> Result<Managed, String> {
        Self::from_list(obj.meta_field("managedFields").cloned(), true)
    }

    /// Reads `entries`. Entries `stored` (this field manager's own encoding, read back) are
    /// kept as read, to be written back as they are while unchanged; a request's may be in
    /// any form kube accepts, and are encoded again.
    fn from_list(entries: Option<Value>, stored: bool) -> Result<Managed, String> {
        let entries = match entries {
            None | Some(Value::Null) => return Ok(Managed::default()),
            Some(Value::Array(entries)) => entries,
            Some(_) => return Err("managedFields must be a list".into()),
        };
        let mut out = Vec::new();
        for (i, e) in entries.into_iter().enumerate() {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let operation = match e.get("operation").and_then(Value::as_str) {
                Some("Apply") => Operation::Apply,
                Some("Update") => Operation::Update,
                other => return Err(format!("managedFields[{i}]: invalid operation {other:?}")),
            };
            if e.get("fieldsType").and_then(Value::as_str) != Some("FieldsV1") {
                return Err(format!(
                    "managedFields[{i}]: invalid fieldsType {:?}",
                    e.get("fieldsType")
                ));
            }
            let fields = Set::from_fields_v1(e.get("fieldsV1").unwrap_or(&json!({})))
                .ok_or_else(|| format!("managedFields[{i}]: invalid fieldsV1"))?;
            let entry = Entry {
                manager: s("manager"),
                operation,
                api_version: s("apiVersion"),
                time: e.get("time").and_then(Value::as_str).map(str::to_string),
                subresource: s("subresource"),
                fields,
                read: None,
            };
            let read = match e {
                Value::Object(m) if stored && as_encoded(&m) => Some(m),
                _ => None,
            };
            out.push(Entry { read, ..entry });
        }
        Ok(Managed(out))
    }

    /// Writes the entries into `obj` in kube's order (operation, time, manager, version,
    /// subresource), or removes `managedFields` when there are none.
    pub fn encode(mut self, obj: &mut Value) {
        self.0.retain(|e| !e.fields.is_empty());
        self.0.sort_by(|a, b| {
            (
                a.operation,
                &a.time,
                &a.manager,
                &a.api_version,
                &a.subresource,
            )
                .cmp(&(
                    b.operation,
                    &b.time,
                    &b.manager,
                    &b.api_version,
                    &b.subresource,
                ))
        });
        let entries: Vec<Value> = self
            .0
            .into_iter()
            .map(|e| {
                if let Some(mut m) = e.read {
                    match e.time {
                        Some(t) => m.insert("time".into(), Value::String(t)),
                        None => m.remove("time"),
                    };
                    return Value::Object(m);
                }
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.manager));
                m.insert("operation".into(), json!(e.operation.as_str()));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.fields.to_fields_v1());
                if !e.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.subresource));
                }
                Value::Object(m)
            })
            .collect();
        let meta = crate::meta::meta_mut(obj);
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }

    fn find(&self, manager: &str, op: Operation, version: &str, sub: &str) -> Option<usize> {
        self.0
            .iter()
            .position(|e| e.same(manager, op, version, sub))
    }
}

/// Whether a stored entry is in the form [`Managed::encode`] writes: strings where it writes
/// strings, no empty subresource, nothing else (objects stored before may differ).
fn as_encoded(m: &Map<String, Value>) -> bool {
    m.iter().all(|(k, v)| match k.as_str() {
        "manager" | "operation" | "apiVersion" | "time" | "fieldsType" => v.is_string(),
        "subresource" => v.as_str().is_some_and(|s| !s.is_empty()),
        "fieldsV1" => true,
        _ => false,
    }) && [
        "manager",
        "operation",
        "apiVersion",
        "fieldsType",
        "fieldsV1",
    ]
    .iter()
    .all(|k| m.contains_key(*k))
}

/// Whether `managedFields` in a request asks to drop every entry (`[]` or `[{}]`).
fn asks_reset(obj: &Value) -> bool {
    match obj.meta_field("managedFields") {
        Some(Value::Array(a)) => {
            a.is_empty() || (a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty))
        }
        _ => false,
    }
}

/// The paths only the server sets, owned by nobody.
static SERVER_METADATA: LazyLock<Set> = LazyLock::new(server_metadata);

fn server_metadata() -> Set {
    let mut s = Set::new();
    let f = |n: &str| PathElement::Field(n.into());
    for top in ["apiVersion", "kind", "metadata"] {
        s.insert(&[f(top)]);
    }
    for m in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[f("metadata"), f(m)]);
    }
    s
}

/// What a write changes at one version: the fields it adds or sets to something else, and
/// those it removes.
struct Change {
    changed: Set,
    removed: Set,
}

impl From<Comparison> for Change {
    fn from(c: Comparison) -> Change {
        let mut changed = c.modified;
        changed.union_with(&c.added);
        Change {
            changed,
            removed: c.removed,
        }
    }
}

/// An object as served at another version, for managers that wrote at that version.
pub trait Versions {
    /// `obj` at `api_version` with that version's type; None when it is not served.
    fn convert(&self, obj: &Value, api_version: &str) -> Option<(Value, ObjectType)>;
}

/// No other version: managers of other versions are dropped.
pub struct OneVersion;

impl Versions for OneVersion {
    fn convert(&self, _obj: &Value, _api_version: &str) -> Option<(Value, ObjectType)> {
        None
    }
}

/// A field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The owner, as kube names it in messages.
    pub manager: String,
    /// The field, as kube prints paths: `.data.k`.
    pub field: String,
}

/// Why an apply failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyError {
    /// Fields owned by other managers (409).
    Conflicts(Vec<Conflict>),
    /// A malformed configuration (400).
    BadRequest(String),
    /// What kube answers as a plain 500: a configuration its type cannot hold.
    Untyped(String),
}

impl ApplyError {
    /// The message kube-apiserver gives for conflicts.
    pub fn conflict_message(conflicts: &[Conflict]) -> String {
        if let [c] = conflicts {
            return format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                c.manager, c.field
            );
        }
        let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            for c in conflicts.iter().filter(|c| c.manager == m) {
                lines.push(format!("- {}", c.field));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    }
}

/// The result of an apply.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The merged object, with its managed fields.
    Changed(Value),
    /// Nothing but the managed fields changed: the live object with them.
    Unchanged(Value),
}

/// One write's field management: the type and version of the request, its subresource and
/// the fields it may not set.
pub struct FieldManager<'a> {
    pub ty: &'a ObjectType,
    /// The request's `group/version`.
    pub api_version: &'a str,
    /// `""` or `"status"`...
    pub subresource: &'a str,
    /// What the request's part may not change (its strategy's reset fields).
    pub reset: &'a Set,
    pub versions: &'a dyn Versions,
    /// The write's time, RFC 3339 in seconds.
    pub now: &'a str,
    /// `namespace/name; group/version, Kind=kind` as kube names objects in errors.
    pub describe: &'a dyn Fn(&Value) -> String,
    /// Whether the type of a version never changes (a built-in kind's; a custom resource's
    /// schema may): then a live object whose managed fields were all written at this version
    /// was typed by this type when written (an untyped object is stored without managed
    /// fields) and is not checked again.
    pub live_typed: bool,
}

impl FieldManager<'_> {
    /// Records an ordinary write of `new` over `live` (the zero object of a create) by
    /// `manager`, setting `new`'s managedFields. A subresource write keeps the live entries;
    /// a main write may replace them with its own, or drop them with `[]`.
    pub fn update(&self, live: &Value, new: &mut Value, manager: &str) {
        let reset = asks_reset(new);
        let given = crate::meta::meta_mut(new).remove("managedFields");
        // Most writes send the stored entries back untouched (a patch that leaves them alone).
        let untouched = given.as_ref() == live.meta_field("managedFields");
        let given = Managed::from_list(given, untouched);
        let mut managed = if !self.subresource.is_empty() {
            Managed::decode(live).unwrap_or_default()
        } else if reset {
            Managed::default()
        } else {
            match given {
                Ok(m) if !m.0.is_empty() => m,
                _ => Managed::decode(live).unwrap_or_default(),
            }
        };
        // kube-apiserver starts tracking an object's fields only when it is created: an update
        // of an object without any (never tracked, or reset with `[]`) leaves it without.
        let existing = live
            .meta_field("uid")
            .and_then(Value::as_str)
            .is_some_and(|uid| !uid.is_empty());
        if managed.0.is_empty() && existing {
            return;
        }
        let (schema, root) = (&self.ty.schema, self.ty.root);
        // kube keeps no managed fields for objects its type cannot hold.
        // Tracked, and only ever written at this version: typed as it is now when written.
        let live_tracked = self.live_typed
            && live
                .meta_field("managedFields")
                .and_then(Value::as_array)
                .is_some_and(|entries| {
                    !entries.is_empty()
                        && entries.iter().all(|e| {
                            e.get("apiVersion").and_then(Value::as_str) == Some(self.api_version)
                        })
                });
        if !typed::validate(schema, root, new, true).is_empty()
            || (!live_tracked && !typed::validate(schema, root, live, true).is_empty())
        {
            return;
        }
        let change = Change::from(typed::compare(schema, root, live, new).without(self.reset));
        let (sub, version) = (self.subresource, self.api_version);
        let own = managed.find(manager, Operation::Update, version, sub);
        self.settle_others(&mut managed, live, new, &change, own);
        let mine = change.changed.difference(&SERVER_METADATA);
        let now = Some(self.now.to_string());
        match own {
            // What the writer changed it loses and takes again: settled in one step, so that
            // an entry left as it was keeps its encoding.
            Some(i) => {
                let e = &mut managed.0[i];
                let mut fields = e.fields.difference(&change.changed);
                fields = fields.difference(&change.removed);
                if !mine.is_empty() {
                    fields.union_with(&mine);
                    e.time = now;
                }
                e.set_fields(fields);
            }
            None if !mine.is_empty() => managed.0.push(Entry::new(
                manager,
                Operation::Update,
                version,
                now,
                sub,
                mine,
            )),
            None => {}
        }
        managed.encode(new);
    }

    /// Takes from every manager but `skip` what the write changes (or, when `refuse`, says
    /// which of their fields it would change), and what it removes.
    /// `change` is the write's at the request's version; entries of other versions are
    /// compared at theirs.
    fn settle_others(
        &self,
        managed: &mut Managed,
        live: &Value,
        new: &Value,
        change: &Change,
        skip: Option<usize>,
    ) -> Vec<(usize, Set)> {
        let mut at_other_versions: HashMap<String, Option<Change>> = HashMap::new();
        let mut conflicts = Vec::new();
        for (i, e) in managed.0.iter_mut().enumerate() {
            if Some(i) == skip {
                continue;
            }
            let change = if e.api_version == self.api_version {
                Some(change)
            } else {
                at_other_versions
                    .entry(e.api_version.clone())
                    .or_insert_with(|| {
                        let (live, ty) = self.versions.convert(live, &e.api_version)?;
                        let (new, _) = self.versions.convert(new, &e.api_version)?;
                        let compare = typed::compare(&ty.schema, ty.root, &live, &new);
                        Some(Change::from(compare.without(self.reset)))
                    })
                    .as_ref()
            };
            let Some(change) = change else {
                // Written at a version no longer served: kube forgets the entry.
                e.set_fields(Set::new());
                continue;
            };
            let taken = e.fields.intersection(&change.changed);
            let kept = e.fields.difference(&taken).difference(&change.removed);
            if !taken.is_empty() {
                conflicts.push((i, taken));
            }
            e.set_fields(kept);
        }
        conflicts
    }

    /// Applies `config` by `manager` to `live` (the zero object when creating).
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Applied, ApplyError> {
        if config
            .meta_field("managedFields")
            .is_some_and(|m| !m.is_null())
        {
            return Err(ApplyError::BadRequest(
                "metadata.managedFields must be nil".into(),
            ));
        }
        let (schema, root) = (&self.ty.schema, self.ty.root);
        let errs = typed::validate(schema, root, config, false);
        if !errs.is_empty() {
            return Err(ApplyError::Untyped(format!(
                "failed to create typed patch object ({}): {}",
                (self.describe)(config),
                errors_string(&errs)
            )));
        }
        let errs = typed::validate(schema, root, live, true);
        if !errs.is_empty() {
            return Err(ApplyError::Untyped(format!(
                "failed to create typed live object ({}): {}",
                (self.describe)(live),
                errors_string(&errs)
            )));
        }
        let mut managed = Managed::decode(live)
            .map_err(|e| ApplyError::Untyped(format!("failed to decode managed fields: {e}")))?;
        let mut live = live.clone();
        crate::meta::meta_mut(&mut live).remove("managedFields");
        let merged = typed::merge(schema, root, &live, config).map_err(|e: Vec<TypeError>| {
            ApplyError::Untyped(format!("failed to merge config: {}", errors_string(&e)))
        })?;
        let sub = self.subresource;
        let last = managed
            .find(manager, Operation::Apply, self.api_version, sub)
            .map(|i| managed.0[i].clone());
        let set = typed::field_set(schema, root, config).recursive_difference(self.reset);
        let mine = Entry::new(
            manager,
            Operation::Apply,
            self.api_version,
            last.as_ref().and_then(|l| l.time.clone()),
            sub,
            set,
        );
        let mine_at = match managed.find(manager, Operation::Apply, self.api_version, sub) {
            Some(i) => {
                managed.0[i] = mine;
                i
            }
            None => {
                managed.0.push(mine);
                managed.0.len() - 1
            }
        };
        let merged = match &last {
            Some(last) if !last.fields.is_empty() => self.prune(merged, &managed, last),
            _ => merged,
        };
        let change = Change::from(typed::compare(schema, root, &live, &merged).without(self.reset));
        let before = managed.clone();
        let taken = self.settle_others(&mut managed, &live, &merged, &change, Some(mine_at));
        if !taken.is_empty() && !force {
            let mut conflicts: Vec<(String, Conflict)> = Vec::new();
            for (i, set) in taken {
                let owner = &before.0[i];
                for path in set.paths() {
                    conflicts.push((
                        owner.named(),
                        Conflict {
                            manager: owner.named(),
                            field: path_string(&path),
                        },
                    ));
                }
            }
            conflicts.sort_by(|a, b| a.0.cmp(&b.0));
            return Err(ApplyError::Conflicts(
                conflicts.into_iter().map(|(_, c)| c).collect(),
            ));
        }
        let server = &*SERVER_METADATA;
        let changed = !typed::values_equal(&live, &merged);
        let e = &mut managed.0[mine_at];
        e.set_fields(e.fields.difference(server));
        if changed {
            e.time = Some(self.now.to_string());
        }
        let mut out = if changed { merged } else { live };
        managed.encode(&mut out);
        Ok(if changed {
            Applied::Changed(out)
        } else {
            Applied::Unchanged(out)
        })
    }

    /// Removes from `merged` what `last` (the applier's previous apply) set and its new
    /// configuration does not, unless another manager owns it.
    fn prune(&self, merged: Value, managed: &Managed, last: &Entry) -> Value {
        let Some((merged_at_last, ty)) = self.at_version(&merged, &last.api_version) else {
            return merged;
        };
        let (schema, root) = (&ty.schema, ty.root);
        let named = |s: &Set| typed::with_named_fields(schema, root, s);
        let mut pruned = typed::remove_items(schema, root, &merged_at_last, &named(&last.fields));
        // Put back what any manager (the applier's new configuration included) owns.
        let mut owned: Vec<(String, Set)> = Vec::new();
        for e in &managed.0 {
            match owned.iter_mut().find(|(v, _)| *v == e.api_version) {
                Some((_, s)) => s.union_with(&e.fields),
                None => owned.push((e.api_version.clone(), e.fields.clone())),
            }
        }
        owned.sort_by_key(|(v, _)| *v != last.api_version);
        for (version, set) in owned {
            let (Some((m, vty)), Some((p, _))) = (
                self.at_version(&merged, &version),
                self.at_version_from(&pruned, &last.api_version, &version),
            ) else {
                continue;
            };
            let (vs, vr) = (&vty.schema, vty.root);
            let vnamed = |s: &Set| typed::with_named_fields(vs, vr, s);
            let drop = vnamed(&typed::field_set(vs, vr, &m))
                .difference(&vnamed(&typed::field_set(vs, vr, &p)).union(&vnamed(&set)));
            let repaired = typed::remove_items(vs, vr, &m, &drop);
            match self.at_version_from(&repaired, &version, &last.api_version) {
                Some((r, _)) => pruned = r,
                None => continue,
            }
        }
        // Put back what was removed but not set by the applier last time.
        let merged_set = named(&typed::field_set(schema, root, &merged_at_last));
        let pruned_set = named(&typed::field_set(schema, root, &pruned));
        let dangling = merged_set
            .difference(&pruned_set)
            .intersection(&named(&last.fields));
        let out = typed::remove_items(schema, root, &merged_at_last, &dangling);
        self.at_version_from(&out, &last.api_version, self.api_version)
            .map(|(v, _)| v)
            .unwrap_or(merged)
    }

    /// `obj` (at the request's version) at `version`.
    fn at_version(&self, obj: &Value, version: &str) -> Option<(Value, ObjectType)> {
        self.at_version_from(obj, self.api_version, version)
    }

    fn at_version_from(&self, obj: &Value, from: &str, to: &str) -> Option<(Value, ObjectType)> {
        if from == to {
            let ty = if to == self.api_version {
                self.ty.clone()
            } else {
                self.versions.convert(obj, to)?.1
            };
            return Some((obj.clone(), ty));
        }
        self.versions.convert(obj, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::schema::ObjectType;

    fn cm() -> ObjectType {
        ObjectType::builtin("v1", "ConfigMap").unwrap()
    }

    fn describe(_: &Value) -> String {
        "/ssa; /v1, Kind=ConfigMap".into()
    }

    fn manager<'a>(ty: &'a ObjectType, reset: &'a Set) -> FieldManager<'a> {
        FieldManager {
            ty,
            api_version: "v1",
            subresource: "",
            reset,
            versions: &OneVersion,
            now: "2026-01-01T00:00:00Z",
            describe: &describe,
            live_typed: true,
        }
    }

    fn config(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data})
    }

    fn applied(r: Result<Applied, ApplyError>) -> Value {
        match r {
            Ok(Applied::Changed(v) | Applied::Unchanged(v)) => v,
            Err(e) => panic!("apply failed: {e:?}"),
        }
    }

    fn fields_of(obj: &Value) -> Vec<(String, Value)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap().to_string(),
                    e["fieldsV1"].clone(),
                )
            })
            .collect()
    }

    #[test]
    fn only_a_create_starts_tracking_fields() {
        let (ty, reset) = (cm(), Set::new());
        let fm = manager(&ty, &reset);
        let mut created = config(json!({"k": "v1"}));
        fm.update(&ty.zero(), &mut created, "alice");
        assert_eq!(
            fields_of(&created),
            vec![("alice".into(), json!({"f:data": {".": {}, "f:k": {}}}))]
        );
        // Stored without managed fields (or reset with []): an update records nobody.
        let mut live = config(json!({"k": "v1"}));
        live["metadata"]["uid"] = json!("u1");
        let mut next = live.clone();
        next["data"]["k"] = json!("v2");
        fm.update(&live, &mut next, "bob");
        assert_eq!(next["metadata"].get("managedFields"), None);
        let mut tracked = created.clone();
        tracked["metadata"]["uid"] = json!("u1");
        let mut reset_all = tracked.clone();
        reset_all["metadata"]["managedFields"] = json!([]);
        fm.update(&tracked, &mut reset_all, "bob");
        assert_eq!(reset_all["metadata"].get("managedFields"), None);
        // A tracked object's update is recorded.
        let mut next = tracked.clone();
        next["data"]["k"] = json!("v2");
        fm.update(&tracked, &mut next, "bob");
        assert_eq!(
            fields_of(&next),
            vec![
                ("alice".into(), json!({"f:data": {}})),
                ("bob".into(), json!({"f:data": {"f:k": {}}}))
            ]
        );
    }

    #[test]
    fn a_conflict_names_the_owner_and_force_takes_the_field() {
        let (ty, reset) = (cm(), Set::new());
        let fm = manager(&ty, &reset);
        let zero = ty.zero();
        let live = applied(fm.apply(&zero, &config(json!({"k": "v1"})), "alice", false));
        assert_eq!(
            fields_of(&live),
            vec![("alice".into(), json!({"f:data": {"f:k": {}}}))]
        );
        let again = fm.apply(&live, &config(json!({"k": "v1"})), "alice", false);
        assert!(matches!(again, Ok(Applied::Unchanged(_))));
        let Err(ApplyError::Conflicts(c)) =
            fm.apply(&live, &config(json!({"k": "v2"})), "bob", false)
        else {
            panic!("expected a conflict")
        };
        assert_eq!(
            ApplyError::conflict_message(&c),
            "Apply failed with 1 conflict: conflict with \"alice\": .data.k"
        );
        let forced = applied(fm.apply(&live, &config(json!({"k": "v2"})), "bob", true));
        assert_eq!(
            fields_of(&forced),
            vec![("bob".into(), json!({"f:data": {"f:k": {}}}))]
        );
        // alice's next configuration drops k: bob owns it, so it stays.
        let next = applied(fm.apply(&forced, &config(json!({"other": "x"})), "alice", false));
        assert_eq!(next["data"], json!({"k": "v2", "other": "x"}));
    }

    #[test]
    fn an_apply_removes_what_it_no_longer_sets() {
        let (ty, reset) = (cm(), Set::new());
        let fm = manager(&ty, &reset);
        let live = applied(fm.apply(&ty.zero(), &config(json!({"a": "1", "b": "2"})), "a", false));
        let next = applied(fm.apply(&live, &config(json!({"a": "1"})), "a", false));
        assert_eq!(next["data"], json!({"a": "1"}));
    }

    #[test]
    fn an_update_owns_what_it_adds_or_changes_and_takes_it_from_others() {
        let (ty, reset) = (cm(), Set::new());
        let fm = manager(&ty, &reset);
        let live = applied(fm.apply(&ty.zero(), &config(json!({"k": "v"})), "alice", false));
        let mut new = live.clone();
        new["data"]["k"] = json!("changed");
        new["metadata"]["labels"] = json!({"a": "b"});
        fm.update(&live, &mut new, "kubectl-edit");
        assert_eq!(
            fields_of(&new),
            vec![(
                "kubectl-edit".into(),
                json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
            )]
        );
        assert_eq!(new["metadata"]["managedFields"][0]["operation"], "Update");
    }

    #[test]
    fn entries_a_request_sends_are_written_in_kubes_form_stored_ones_as_they_were() {
        let (ty, reset) = (cm(), Set::new());
        let fm = manager(&ty, &reset);
        let live = applied(fm.apply(&ty.zero(), &config(json!({"k": "v"})), "alice", false));
        // bob adds a key, sending the stored entries back: alice's is written as stored.
        let mut new = live.clone();
        new["data"]["other"] = json!("x");
        fm.update(&live, &mut new, "bob");
        assert_eq!(
            new["metadata"]["managedFields"][0],
            live["metadata"]["managedFields"][0]
        );
        // The same entry sent in another form kube accepts is written as kube writes it.
        let mut new = live.clone();
        new["data"]["other"] = json!("x");
        let entry = &mut new["metadata"]["managedFields"][0];
        entry["fieldsV1"] = json!({"f:data": {"f:k": {".": {}}}});
        fm.update(&live, &mut new, "bob");
        assert_eq!(
            fields_of(&new),
            vec![
                ("alice".into(), json!({"f:data": {"f:k": {}}})),
                ("bob".into(), json!({"f:data": {"f:other": {}}}))
            ]
        );
    }

    #[test]
    fn a_create_owns_what_it_sets_beyond_the_zero_object() {
        let ty = ObjectType::builtin("v1", "Event").unwrap();
        let reset = Set::new();
        let fm = FieldManager {
            ty: &ty,
            ..manager(&ty, &reset)
        };
        let mut event = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": "obj.", "namespace": "n"},
            "involvedObject": {"kind": "ConfigMap", "name": "obj"}, "reason": "Synced",
            "source": {"component": "c"}, "reportingComponent": "", "reportingInstance": "",
            "eventTime": null, "firstTimestamp": "2020-01-01T00:00:00Z"});
        fm.update(&ty.zero(), &mut event, "unknown");
        assert_eq!(
            fields_of(&event),
            vec![(
                "unknown".into(),
                json!({"f:firstTimestamp": {}, "f:involvedObject": {},
                    "f:metadata": {"f:generateName": {}}, "f:reason": {},
                    "f:source": {"f:component": {}}})
            )]
        );
    }
}
