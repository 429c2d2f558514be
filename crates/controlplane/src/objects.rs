//! Object semantics shared by every resource, as kube-apiserver applies them: what create,
//! update and delete do to metadata (uid, creationTimestamp, generation, finalizers,
//! deletionTimestamp), how subresources split spec from status, preconditions, and the Status
//! errors each rule produces. What is particular to one resource is its [`crate::strategy`]'s,
//! which these rules call at kube-apiserver's points (a delete that no strategy makes its own is
//! [`crate::resource::delete_by_finalizers`]).
//!
//! Pure functions over JSON: no storage, no HTTP. Handlers call them inside a store write.

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult, FieldError, Subject};
use crate::meta::{ObjectMeta, meta_mut, new_uid};
use crate::names;
use crate::resource::{DeleteOptions, DeleteOutcome, Part, ResourceInfo, Validation};
use crate::storage::WriteOp;

/// The subject of NotFound/AlreadyExists/Conflict errors: plural resource and group.
pub fn subject(info: &ResourceInfo, name: &str) -> Subject {
    Subject {
        group: info.group.clone(),
        kind: info.plural.clone(),
        name: name.to_string(),
    }
}

/// The subject of Invalid errors: Kind and the group of the kind kube-apiserver decodes it to
/// (events.k8s.io Events are core Events inside).
pub fn kind_subject(info: &ResourceInfo, name: &str) -> Subject {
    let group = match info.strategy.stored_as() {
        Some(stored) => stored
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
            .to_string(),
        None => info.group.clone(),
    };
    Subject {
        group,
        kind: info.kind.clone(),
        name: name.to_string(),
    }
}

/// Metadata fields only the server sets; clients' values are replaced on update.
const SERVER_OWNED: [&str; 5] = [
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
];

/// Gives the object the apiVersion and kind of the version it is served at.
pub fn present(info: &ResourceInfo, obj: Value) -> Value {
    let mut out = info.strategy.to_served(obj);
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(info.api_version()));
        m.insert("kind".into(), Value::String(info.kind.clone()));
    }
    out
}

/// Refuses an object that is not a JSON object, or names another version or kind than the
/// resource's (400, as kube-apiserver's decoder does).
pub fn check_type_meta(info: &ResourceInfo, obj: &Value) -> ApiResult<()> {
    if !obj.is_object() {
        return Err(ApiError::BadRequest(
            "the object provided is not a JSON object".into(),
        ));
    }
    if let Some(av) = obj.get("apiVersion") {
        let av = av.as_str().unwrap_or("");
        let ok = av == info.api_version()
            || info
                .custom
                .as_ref()
                .is_some_and(|_| av.starts_with(&format!("{}/", info.group)));
        if !ok {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                info.api_version()
            )));
        }
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let cannot_handle = |why: String| {
        let kind = if kind.is_empty() { &info.kind } else { kind };
        ApiError::BadRequest(format!(
            "{kind} in version {:?} cannot be handled as a {}: {why}",
            info.version, info.kind
        ))
    };
    if !kind.is_empty() && kind != info.kind {
        if info.custom.is_some() {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                info.kind
            )));
        }
        // A built-in kind's decoder finds no conversion from the body's kind to its own.
        let internal = info.group.split('.').next().filter(|g| !g.is_empty());
        return Err(cannot_handle(format!(
            "converting ({}.{kind}) to ({}.{}): unknown conversion",
            info.version,
            internal.unwrap_or("core"),
            info.kind
        )));
    }
    if let Some(m) = obj.get("metadata")
        && !m.is_object()
    {
        return Err(ApiError::BadRequest(
            "metadata in the data must be an object".into(),
        ));
    }
    if info.custom.is_none() {
        let typed = crate::typed::OBJECT_META
            .iter()
            .chain(info.strategy.typed_fields());
        if let Some(why) = typed
            .clone()
            .find_map(|f| crate::typed::first_error(obj, std::slice::from_ref(f)))
        {
            return Err(cannot_handle(why));
        }
    }
    Ok(())
}

/// An update's body names the object its URL names (kube-apiserver's `checkName`, before it
/// looks the object up).
pub fn check_names(body: &Value, name: &str, namespace: &str) -> ApiResult<()> {
    if body.name() != name {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            body.name()
        )));
    }
    let body_namespace = body.namespace();
    if !namespace.is_empty() && !body_namespace.is_empty() && body_namespace != namespace {
        return Err(ApiError::BadRequest(format!(
            "the namespace of the object ({body_namespace}) does not match the namespace on the URL ({namespace})"
        )));
    }
    Ok(())
}

/// The name kube-apiserver makes of a `generateName`: the prefix, cut to 58 characters, and five
/// random characters.
pub fn generated_name(prefix: &str) -> String {
    let cut: String = prefix.chars().take(58).collect();
    format!("{cut}{}", crate::meta::random_suffix())
}

/// Turns a create request body into the object to store (without resourceVersion).
pub fn prepare_create(info: &ResourceInfo, ns: &str, obj: Value, now: &str) -> ApiResult<Value> {
    check_type_meta(info, &obj)?;
    let mut obj = info.strategy.to_stored(obj);
    let body_ns = obj.namespace().to_string();
    if info.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    let mut name = obj.name().to_string();
    let generate = obj.meta_str("generateName").unwrap_or("").to_string();
    if name.is_empty() && !generate.is_empty() {
        name = generated_name(&generate);
    }
    if name.is_empty() {
        return Err(ApiError::invalid(
            kind_subject(info, ""),
            vec![FieldError::required(
                "metadata.name",
                "name or generateName is required",
            )],
        ));
    }
    {
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        if info.namespaced {
            m.insert("namespace".into(), json!(ns));
        } else {
            m.remove("namespace");
        }
        for f in SERVER_OWNED {
            m.remove(f);
        }
        m.remove("resourceVersion");
        m.insert("uid".into(), json!(new_uid()));
        m.insert("creationTimestamp".into(), json!(now));
        if info.strategy.tracks_generation() {
            m.insert("generation".into(), json!(1));
        }
    }
    let o = obj.as_object_mut().expect("checked object above");
    o.insert("apiVersion".into(), json!(info.storage_api_version()));
    o.insert("kind".into(), json!(info.kind));
    info.strategy.prepare_for_create(info, &mut obj, now);
    validate(info, &mut obj, None)?;
    Ok(obj)
}

/// Validation and normalisation: the metadata every object shares, then the resource's own
/// (see [`crate::resource::ResourceStrategy::validate`]); Invalid lists every field error.
pub fn validate(info: &ResourceInfo, obj: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    validate_part(info, obj, old, Part::Main)
}

/// [`validate`] of a write through `part` of the object.
pub fn validate_part(
    info: &ResourceInfo,
    obj: &mut Value,
    old: Option<&Value>,
    part: Part,
) -> ApiResult<()> {
    let name = obj.name().to_string();
    let mut errs = Vec::new();
    let rule = info.strategy.name_rule();
    if let Some(generate) = obj.meta_str("generateName").filter(|g| !g.is_empty()) {
        errs.extend(
            names::name(generate, rule, true)
                .into_iter()
                .map(|m| FieldError::invalid("metadata.generateName", &json!(generate), m)),
        );
    }
    errs.extend(
        names::name(&name, rule, false)
            .into_iter()
            .map(|m| FieldError::invalid("metadata.name", &json!(name), m)),
    );
    if let Some(labels) = obj.meta_field("labels") {
        errs.extend(names::labels(labels, "metadata.labels"));
    }
    if let Some(a) = obj.meta_field("annotations") {
        errs.extend(names::annotations(a, "metadata.annotations"));
    }
    if let Some(f) = obj.meta_field("finalizers")
        && !f.is_null()
        && !f.as_array().is_some_and(|a| a.iter().all(Value::is_string))
    {
        errs.push(FieldError::invalid(
            "metadata.finalizers",
            f,
            "must be a list of strings",
        ));
    }
    if let Some(refs) = obj.meta_field("ownerReferences") {
        errs.extend(crate::meta::validate_owner_references(refs));
    }
    let mut check = Validation {
        info,
        old,
        part,
        errors: errs,
    };
    info.strategy.validate(obj, &mut check);
    if check.errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(kind_subject(info, &name), check.errors))
    }
}

/// Whether two maps are equal in every field but those `skip` names; nothing is copied.
fn equal_except(a: &Map<String, Value>, b: &Map<String, Value>, skip: &[&str]) -> bool {
    let kept = |m: &Map<String, Value>| m.keys().filter(|k| !skip.contains(&k.as_str())).count();
    kept(a) == kept(b)
        && a.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .all(|(k, v)| b.get(k) == Some(v))
}

/// Whether `next` differs from `cur` in more than its metadata and status: what makes a new
/// generation.
fn spec_changed(cur: &Value, next: &Value) -> bool {
    match (cur.as_object(), next.as_object()) {
        (Some(cur), Some(next)) => {
            !equal_except(cur, next, &["metadata", "status", "apiVersion", "kind"])
        }
        _ => cur != next,
    }
}

/// Whether a write of `next` over `cur` changes nothing: they differ at most in the
/// resourceVersion and the times of field managers' entries (a manager re-applying the same
/// fields is a no-op, a new co-owner is not).
fn unchanged(cur: &Value, next: &Value) -> bool {
    let (Some(cur), Some(next)) = (cur.as_object(), next.as_object()) else {
        return cur == next;
    };
    if !equal_except(cur, next, &["metadata"]) {
        return false;
    }
    let empty = Map::new();
    let (cur, next) = (
        cur.get("metadata")
            .and_then(Value::as_object)
            .unwrap_or(&empty),
        next.get("metadata")
            .and_then(Value::as_object)
            .unwrap_or(&empty),
    );
    if !equal_except(cur, next, &["resourceVersion", "managedFields"]) {
        return false;
    }
    match (cur.get("managedFields"), next.get("managedFields")) {
        (Some(Value::Array(cur)), Some(Value::Array(next))) => {
            cur.len() == next.len()
                && cur
                    .iter()
                    .zip(next)
                    .all(|(c, n)| match (c.as_object(), n.as_object()) {
                        (Some(c), Some(n)) => equal_except(c, n, &["time"]),
                        _ => c == n,
                    })
        }
        (cur, next) => cur == next,
    }
}

/// Decides an update of `cur` to `new`: [`prepare_update`], then [`settle_update`].
pub fn decide_update(
    info: &ResourceInfo,
    cur: &Value,
    new: Value,
    part: Part,
    require_rv: bool,
) -> ApiResult<WriteOp> {
    let next = prepare_update(info, cur, new, part, require_rv)?;
    settle_update(info, cur, next)
}

/// The object an update of `cur` to `new` would store (what admission sees): conflicts,
/// immutable metadata, subresource splitting, defaults and validation.
pub fn prepare_update(
    info: &ResourceInfo,
    cur: &Value,
    new: Value,
    part: Part,
    require_rv: bool,
) -> ApiResult<Value> {
    check_type_meta(info, &new)?;
    let mut new = info.strategy.to_stored(new);
    let name = cur.name().to_string();
    check_names(&new, &name, cur.namespace())?;
    match new.resource_version() {
        "" if require_rv && !info.strategy.allows_unconditional_update() => {
            return Err(ApiError::invalid(
                subject(info, &name),
                vec![FieldError::invalid(
                    "metadata.resourceVersion",
                    &json!(0),
                    "must be specified for an update",
                )],
            ));
        }
        "" => {}
        rv if rv != cur.resource_version() => {
            return Err(ApiError::Conflict(subject(info, &name)));
        }
        _ => {}
    }
    let mut next = match part {
        Part::Main | Part::Scale => {
            if info.has_status()
                && let Some(o) = new.as_object_mut()
            {
                match cur.get("status") {
                    Some(s) => o.insert("status".into(), s.clone()),
                    None => o.remove("status"),
                };
            }
            new
        }
        Part::Status => {
            let mut next = cur.clone();
            if let Some(o) = next.as_object_mut() {
                match new.get("status") {
                    Some(s) => o.insert("status".into(), s.clone()),
                    None => o.remove("status"),
                };
            }
            carry_meta(&mut next, &new);
            let sent = new.meta().cloned().unwrap_or_default();
            let m = meta_mut(&mut next);
            for f in info.strategy.status_writes_metadata() {
                match sent.get(*f) {
                    Some(v) => m.insert((*f).to_string(), v.clone()),
                    None => m.remove(*f),
                };
            }
            next
        }
        // The object as sent: its strategy keeps what approval may not change (as
        // kube-apiserver's CSR approval strategy, which takes the metadata as sent).
        Part::Approval => new,
        Part::Finalize => {
            let mut next = cur.clone();
            let fin = new
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or(json!([]));
            let spec = next
                .as_object_mut()
                .map(|o| o.entry("spec").or_insert(json!({})));
            if let Some(Value::Object(s)) = spec {
                s.insert("finalizers".into(), fin);
            }
            next
        }
    };
    {
        let cur_meta = cur.meta().cloned().unwrap_or_default();
        let m = meta_mut(&mut next);
        for f in SERVER_OWNED.iter().chain(["name", "namespace"].iter()) {
            match cur_meta.get(*f) {
                Some(v) => m.insert((*f).to_string(), v.clone()),
                None => m.remove(*f),
            };
        }
        m.remove("generateName")
            .map(|g| m.insert("generateName".into(), g));
    }
    if let Some(o) = next.as_object_mut() {
        o.insert(
            "apiVersion".into(),
            cur.get("apiVersion")
                .cloned()
                .unwrap_or(json!(info.storage_api_version())),
        );
        o.insert("kind".into(), json!(info.kind));
    }
    info.strategy.prepare_for_update(cur, &mut next, part);
    if matches!(part, Part::Main | Part::Status | Part::Approval) {
        validate_part(info, &mut next, Some(cur), part)?;
    }
    Ok(next)
}

/// What storing `next` over `cur` comes to: finalizer rules, generation, removal once the last
/// finalizer of a deleting object goes, or no change at all.
pub fn settle_update(info: &ResourceInfo, cur: &Value, mut next: Value) -> ApiResult<WriteOp> {
    let name = cur.name();
    if cur.is_deleting() {
        let old: Vec<String> = cur.finalizers();
        let added: Vec<String> = next
            .finalizers()
            .into_iter()
            .filter(|f| !old.contains(f))
            .collect();
        if !added.is_empty() {
            let list: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
            let refusal = FieldError::forbidden(
                "metadata.finalizers",
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    list.join(", ")
                ),
            );
            // kube-apiserver checks metadata updates twice (its common checks and the
            // strategy's), and lists this refusal from both.
            return Err(ApiError::invalid(
                kind_subject(info, name),
                vec![refusal.clone(), refusal],
            ));
        }
    }
    if info.strategy.tracks_generation() && spec_changed(cur, &next) {
        let g = cur
            .meta_field("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut next).insert("generation".into(), json!(g + 1));
    }
    if cur.is_deleting()
        && next.finalizers().is_empty()
        && info.strategy.removed_once_finalized(&next)
    {
        return Ok(WriteOp::DeleteAs(next));
    }
    if unchanged(cur, &next) {
        return Ok(WriteOp::Unchanged);
    }
    Ok(WriteOp::Put(next))
}

/// Puts back what only the server sets (uid, timestamps, generation, resourceVersion, name,
/// namespace, apiVersion, kind) after someone else, such as an admission plugin, had the object.
pub fn keep_server_metadata(before: &Value, after: &mut Value) {
    let kept = before.meta().cloned().unwrap_or_default();
    let m = meta_mut(after);
    for f in SERVER_OWNED
        .iter()
        .chain(["name", "namespace", "resourceVersion"].iter())
    {
        match kept.get(*f) {
            Some(v) => m.insert((*f).to_string(), v.clone()),
            None => m.remove(*f),
        };
    }
    if let Some(o) = after.as_object_mut() {
        for f in ["apiVersion", "kind"] {
            match before.get(f) {
                Some(v) => o.insert(f.into(), v.clone()),
                None => o.remove(f),
            };
        }
    }
}

/// Like kube-apiserver, a status write keeps the stored metadata except managedFields.
fn carry_meta(next: &mut Value, new: &Value) {
    if let Some(mf) = new.meta_field("managedFields") {
        meta_mut(next).insert("managedFields".into(), mf.clone());
    }
}

/// Decides a delete: preconditions, then what the resource's strategy makes of it.
pub fn decide_delete(
    info: &ResourceInfo,
    cur: &Value,
    opts: &DeleteOptions,
    now: &str,
) -> ApiResult<(WriteOp, DeleteOutcome)> {
    let name = cur.name().to_string();
    let subject = kind_subject(info, &name);
    let precondition = |what: &str, want: &str, have: &str, might: &str| {
        let message = format!(
            "Operation cannot be fulfilled on {} {name:?}: the {what} in the precondition ({want}) does not match the {what} in record ({have}). The object might have been {might}",
            subject.qualified()
        );
        ApiError::ConflictMessage {
            subject: subject.clone(),
            message,
            causes: Vec::new(),
        }
    };
    if let Some(u) = &opts.precondition_uid
        && u != cur.uid()
    {
        return Err(precondition(
            "UID",
            u,
            cur.uid(),
            "deleted and then recreated",
        ));
    }
    if let Some(r) = &opts.precondition_rv
        && r != cur.resource_version()
    {
        return Err(precondition(
            "ResourceVersion",
            r,
            cur.resource_version(),
            "modified",
        ));
    }
    info.strategy.delete(info, cur, opts, now)
}

/// The `Status` answered for a delete that removed an object at once.
pub fn delete_success(info: &ResourceInfo, obj: &Value) -> Value {
    let mut details = Map::new();
    details.insert("name".into(), json!(obj.name()));
    if !info.group.is_empty() {
        details.insert("group".into(), json!(info.group));
    }
    details.insert("kind".into(), json!(info.plural));
    details.insert("uid".into(), json!(obj.uid()));
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": details})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn info(g: &str, p: &str) -> std::sync::Arc<ResourceInfo> {
        Registry::with_builtins().lookup(g, "v1", p).unwrap()
    }

    #[test]
    fn a_write_that_changes_only_versions_and_manager_times_changes_nothing() {
        let cur = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"},
            "metadata": {"name": "c", "resourceVersion": "5", "labels": {"x": "y"},
                "managedFields": [{"manager": "m", "time": "2024-01-01T00:00:00Z"}]}});
        let mut again = cur.clone();
        again["metadata"]["resourceVersion"] = json!("6");
        again["metadata"]["managedFields"][0]["time"] = json!("2024-02-02T00:00:00Z");
        assert!(unchanged(&cur, &again));
        assert!(!spec_changed(&cur, &again));
        for (at, value) in [
            ("/data/a", json!("2")),
            ("/metadata/labels/x", json!("z")),
            ("/metadata/managedFields/0/manager", json!("n")),
        ] {
            let mut changed = again.clone();
            *changed.pointer_mut(at).unwrap() = value;
            assert!(!unchanged(&cur, &changed), "{at}");
        }
        let mut co_owned = again.clone();
        co_owned["metadata"]["managedFields"]
            .as_array_mut()
            .unwrap()
            .push(json!({"manager": "n"}));
        assert!(!unchanged(&cur, &co_owned));
        // A generation counts changes outside metadata and status only.
        let mut status = again.clone();
        status["status"] = json!({"ok": true});
        assert!(!spec_changed(&cur, &status) && !unchanged(&cur, &status));
        let mut data = again.clone();
        data["data"]["b"] = json!("2");
        assert!(spec_changed(&cur, &data));
    }

    /// A create as the API takes it: decoded with the kind's defaults, then prepared.
    fn created(info: &ResourceInfo, mut obj: Value) -> Value {
        info.strategy.default(&mut obj);
        prepare_create(info, "ns", obj, "2024-01-01T00:00:00Z").unwrap()
    }

    fn stored(obj: Value) -> Value {
        let mut o = created(&info("apps", "deployments"), obj);
        meta_mut(&mut o).insert("resourceVersion".into(), json!("5"));
        o
    }

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    }

    #[test]
    fn create_sets_server_metadata_and_defaults() {
        let o = stored(deployment());
        assert_eq!(o.namespace(), "ns");
        assert_eq!(o.uid().len(), 36);
        assert_eq!(o["metadata"]["generation"], 1);
        assert_eq!(o["spec"]["replicas"], 1);
    }

    #[test]
    fn a_service_gets_kube_apiserver_s_spec_defaults() {
        let o = created(
            &info("", "services"),
            json!({"metadata": {"name": "web"}, "spec": {"selector": {"a": "b"},
                "ports": [{"port": 443}, {"port": 9443, "targetPort": "webhook", "protocol": "UDP"}]}}),
        );
        assert_eq!(o["spec"]["type"], "ClusterIP");
        assert_eq!(o["spec"]["sessionAffinity"], "None");
        assert_eq!(
            o["spec"]["ports"],
            json!([{"port": 443, "targetPort": 443, "protocol": "TCP"},
                {"port": 9443, "targetPort": "webhook", "protocol": "UDP"}])
        );
    }

    #[test]
    fn generate_name_gets_a_random_suffix() {
        let o = prepare_create(
            &info("", "configmaps"),
            "ns",
            json!({"metadata": {"generateName": "cfg-"}}),
            "t",
        )
        .unwrap();
        assert!(o.name().starts_with("cfg-") && o.name().len() == 9);
    }

    #[test]
    fn generation_bumps_on_spec_change_only() {
        let cur = stored(deployment());
        let mut labels_only = cur.clone();
        labels_only["metadata"]["labels"] = json!({"x": "y"});
        let WriteOp::Put(next) = decide_update(
            &info("apps", "deployments"),
            &cur,
            labels_only,
            Part::Main,
            true,
        )
        .unwrap() else {
            panic!("expected a write")
        };
        assert_eq!(next["metadata"]["generation"], 1);
        let mut spec = cur.clone();
        spec["spec"]["replicas"] = json!(3);
        let WriteOp::Put(next) =
            decide_update(&info("apps", "deployments"), &cur, spec, Part::Main, true).unwrap()
        else {
            panic!("expected a write")
        };
        assert_eq!(next["metadata"]["generation"], 2);
    }

    #[test]
    fn stale_resource_version_conflicts() {
        let cur = stored(deployment());
        let mut new = cur.clone();
        new["metadata"]["resourceVersion"] = json!("4");
        let err = decide_update(&info("apps", "deployments"), &cur, new, Part::Main, true)
            .err()
            .unwrap();
        assert_eq!(err.code(), 409);
    }

    #[test]
    fn main_writes_ignore_status_and_status_writes_ignore_spec() {
        let i = info("apps", "deployments");
        let mut cur = stored(deployment());
        cur["status"] = json!({"replicas": 1});
        let mut new = cur.clone();
        new["status"] = json!({"replicas": 9});
        new["spec"]["replicas"] = json!(9);
        let WriteOp::Put(main) = decide_update(&i, &cur, new.clone(), Part::Main, true).unwrap()
        else {
            panic!()
        };
        assert_eq!(main["status"]["replicas"], 1);
        assert_eq!(main["spec"]["replicas"], 9);
        let WriteOp::Put(st) = decide_update(&i, &cur, new, Part::Status, true).unwrap() else {
            panic!()
        };
        assert_eq!(st["status"]["replicas"], 9);
        assert_eq!(st["spec"]["replicas"], 1);
        let mut annotated = cur.clone();
        annotated["status"] = json!({"replicas": 2});
        annotated["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "1"});
        let WriteOp::Put(st) = decide_update(&i, &cur, annotated, Part::Status, true).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            st["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1",
            "a Deployment's status write takes the request's annotations: {st}"
        );
    }

    #[test]
    fn no_new_finalizers_once_deleting_and_last_finalizer_removes() {
        let i = info("", "configmaps");
        let mut cur = prepare_create(
            &i,
            "ns",
            json!({"metadata": {"name": "c", "finalizers": ["a"]}}),
            "t",
        )
        .unwrap();
        meta_mut(&mut cur).insert("resourceVersion".into(), json!("3"));
        let (op, outcome) = decide_delete(&i, &cur, &DeleteOptions::default(), "t2").unwrap();
        assert_eq!(outcome, DeleteOutcome::Pending);
        let WriteOp::Put(marked) = op else { panic!() };
        assert_eq!(marked.meta_str("deletionTimestamp"), Some("t2"));
        let mut more = marked.clone();
        more["metadata"]["finalizers"] = json!(["a", "b"]);
        let err = decide_update(&i, &marked, more, Part::Main, true)
            .err()
            .unwrap();
        assert_eq!(err.code(), 422);
        assert!(err.to_string().contains("no new finalizers"), "{err}");
        let mut none = marked.clone();
        none["metadata"]["finalizers"] = json!([]);
        assert!(matches!(
            decide_update(&i, &marked, none, Part::Main, true).unwrap(),
            WriteOp::DeleteAs(last) if last.finalizers().is_empty()
        ));
    }

    #[test]
    fn system_namespaces_may_not_be_deleted() {
        let i = info("", "namespaces");
        let ns = prepare_create(&i, "", json!({"metadata": {"name": "default"}}), "t").unwrap();
        let err = decide_delete(&i, &ns, &DeleteOptions::default(), "t")
            .err()
            .unwrap();
        assert_eq!(err.code(), 403);
        assert_eq!(
            err.to_string(),
            "namespaces \"default\" is forbidden: this namespace may not be deleted"
        );
    }

    #[test]
    fn immutable_config_maps_and_role_refs_refuse_changes() {
        let i = info("", "configmaps");
        let mut cur = prepare_create(
            &i,
            "ns",
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "immutable": true}),
            "t",
        )
        .unwrap();
        meta_mut(&mut cur).insert("resourceVersion".into(), json!("2"));
        let mut changed = cur.clone();
        changed["data"]["a"] = json!("2");
        let err = decide_update(&i, &cur, changed, Part::Main, true)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("data: Forbidden: field is immutable when `immutable` is set"),
            "{err}"
        );
        let b = Registry::with_builtins()
            .lookup("rbac.authorization.k8s.io", "v1", "rolebindings")
            .unwrap();
        let rb = json!({"metadata": {"name": "rb"}, "roleRef": {"kind": "Role", "name": "a", "apiGroup": "rbac.authorization.k8s.io"}, "subjects": []});
        let mut cur = prepare_create(&b, "ns", rb, "t").unwrap();
        meta_mut(&mut cur).insert("resourceVersion".into(), json!("2"));
        let mut changed = cur.clone();
        changed["roleRef"]["name"] = json!("b");
        let err = decide_update(&b, &cur, changed, Part::Main, true)
            .err()
            .unwrap();
        assert!(err.to_string().contains("roleRef: Invalid value"), "{err}");
        assert!(err.to_string().contains("cannot change roleRef"), "{err}");
    }

    #[test]
    fn an_unknown_propagation_policy_is_refused_as_delete_options() {
        let opts = DeleteOptions {
            propagation: Some("Sideways".into()),
            ..Default::default()
        };
        let err = opts.validate().err().unwrap();
        assert_eq!(err.code(), 422);
        assert_eq!(
            err.to_string(),
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        );
        for ok in [None, Some("Foreground"), Some("Background"), Some("Orphan")] {
            let opts = DeleteOptions {
                propagation: ok.map(str::to_string),
                ..Default::default()
            };
            assert!(opts.validate().is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn a_namespace_is_labelled_finalized_by_kubernetes_and_marked_terminating() {
        let i = info("", "namespaces");
        let mut ns = prepare_create(
            &i,
            "",
            json!({"metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "x"}},
                "spec": {"finalizers": ["example.com/keep"]}, "status": {"phase": "Terminating"}}),
            "t",
        )
        .unwrap();
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team"
        );
        assert_eq!(
            ns["spec"]["finalizers"],
            json!(["example.com/keep", "kubernetes"])
        );
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        meta_mut(&mut ns).insert("resourceVersion".into(), json!("2"));

        // Only /finalize changes the spec's finalizers; the label follows the name.
        let mut edited = ns.clone();
        edited["spec"]["finalizers"] = json!([]);
        edited["metadata"]["labels"] = json!({});
        edited["metadata"]["annotations"] = json!({"note": "kept"});
        let WriteOp::Put(next) = decide_update(&i, &ns, edited.clone(), Part::Main, true).unwrap()
        else {
            panic!("expected a write")
        };
        assert_eq!(next["spec"], ns["spec"]);
        assert_eq!(
            next["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team"
        );

        let (op, outcome) = decide_delete(&i, &ns, &DeleteOptions::default(), "t2").unwrap();
        assert_eq!(outcome, DeleteOutcome::Pending);
        let WriteOp::Put(mut terminating) = op else {
            panic!("marked, not removed")
        };
        assert_eq!(terminating["status"]["phase"], "Terminating");
        assert_eq!(terminating.meta_str("deletionTimestamp"), Some("t2"));
        assert_eq!(
            terminating["metadata"].get("deletionGracePeriodSeconds"),
            None
        );
        meta_mut(&mut terminating).insert("resourceVersion".into(), json!("3"));

        // Finalizing away `kubernetes` leaves the client's; with none left the namespace goes.
        let mut finalized = terminating.clone();
        finalized["spec"]["finalizers"] = json!(["example.com/keep"]);
        let WriteOp::Put(kept) =
            decide_update(&i, &terminating, finalized, Part::Finalize, true).unwrap()
        else {
            panic!("another finalizer holds it")
        };
        let mut last = kept.clone();
        last["spec"]["finalizers"] = json!([]);
        assert!(matches!(
            decide_update(&i, &kept, last, Part::Finalize, true).unwrap(),
            WriteOp::DeleteAs(_)
        ));
    }

    #[test]
    fn delete_preconditions_are_checked() {
        let i = info("", "configmaps");
        let cur = prepare_create(&i, "ns", json!({"metadata": {"name": "c"}}), "t").unwrap();
        let opts = DeleteOptions {
            precondition_uid: Some("nope".into()),
            ..Default::default()
        };
        let err = decide_delete(&i, &cur, &opts, "t").err().unwrap();
        assert_eq!(err.code(), 409);
        assert_eq!(
            err.to_string(),
            format!(
                "Operation cannot be fulfilled on ConfigMap \"c\": the UID in the precondition (nope) does not match the UID in record ({}). The object might have been deleted and then recreated",
                cur.uid()
            )
        );
    }

    #[test]
    fn secrets_string_data_becomes_base64_data() {
        let o = prepare_create(
            &info("", "secrets"),
            "ns",
            json!({"metadata": {"name": "s"}, "stringData": {"k": "hello"}}),
            "t",
        )
        .unwrap();
        assert_eq!(o["data"]["k"], "aGVsbG8=");
        assert!(
            prepare_create(
                &info("", "secrets"),
                "ns",
                json!({"metadata": {"name": "s"}, "data": {"k": "***"}}),
                "t"
            )
            .is_err()
        );
    }
}
