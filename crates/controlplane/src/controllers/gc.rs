//! The garbage collector, as kube-controller-manager's: an object whose owners
//! (`metadata.ownerReferences`) are all gone is deleted, in the background unless its own
//! finalizers ask for orphaning or foreground deletion; a reference to a gone owner is dropped
//! from an object that still has a live one; an owner deleted with `orphan` lets its dependents
//! go free, and one deleted in the foreground waits for its blocking dependents
//! (`blockOwnerDeletion`) to go first.

use std::sync::Arc;

use serde_json::Value;

use super::{delete, update, warn_failed, without_finalizer};
use crate::api::ApiServer;
use crate::meta::ObjectMeta;
use crate::resource::{FOREGROUND, ORPHAN, Part};
use crate::storage::Event;

/// One entry of `metadata.ownerReferences`, as the collector reads it.
struct OwnerRef {
    uid: String,
    name: String,
    block: bool,
}

fn owner_refs(o: &Value) -> Vec<OwnerRef> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some(OwnerRef {
                uid: r.get("uid")?.as_str()?.to_string(),
                name: r
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                block: r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect()
}

/// What an owner reference of a dependent points at.
enum Owner {
    /// Absent (or not the object the reference names).
    Gone,
    /// Present and being deleted in the foreground: it waits for its dependents.
    WaitingForDependents,
    /// Present otherwise.
    Solid,
}

/// The owner `r` of a dependent in namespace `ns`. A namespaced owner must live in the
/// dependent's namespace, and be the object the reference names.
fn owner(api: &ApiServer, ns: &str, r: &OwnerRef) -> Owner {
    let Some((key, owner_ns, name)) = api.store.locate_uid(&r.uid) else {
        return Owner::Gone;
    };
    if name != r.name || (!owner_ns.is_empty() && owner_ns != ns) {
        return Owner::Gone;
    }
    // Owners are read on every write of their dependents: decoded only when being deleted.
    let Some(raw) = api.store.get_stored(&key, &owner_ns, &name) else {
        return Owner::Gone;
    };
    if memchr::memmem::find(&raw, b"\"deletionTimestamp\"").is_none() {
        return Owner::Solid;
    }
    let o = crate::storage::decode(&raw);
    if o.is_deleting() && o.finalizers().iter().any(|f| f == FOREGROUND) {
        Owner::WaitingForDependents
    } else {
        Owner::Solid
    }
}

/// Decides about one dependent, as kube-controller-manager's `attemptToDeleteItem`: with a
/// solid owner left, references to gone or foreground-deleting owners are dropped; otherwise
/// the dependent is deleted.
async fn attempt(api: &ApiServer, key: &str, ns: &str, name: &str) {
    let Some(dep) = api.store.get(key, ns, name) else {
        return;
    };
    let refs = owner_refs(&dep);
    if refs.is_empty() || dep.is_deleting() {
        return;
    }
    let owners: Vec<(String, Owner)> = refs
        .iter()
        .map(|r| (r.uid.clone(), owner(api, ns, r)))
        .collect();
    let solid = owners.iter().any(|(_, o)| matches!(o, Owner::Solid));
    if solid {
        let dropped: Vec<String> = owners
            .into_iter()
            .filter(|(_, o)| !matches!(o, Owner::Solid))
            .map(|(uid, _)| uid)
            .collect();
        if !dropped.is_empty() {
            let result = update(api, key, ns, name, Part::Main, |cur| {
                without_owners(cur, &dropped)
            })
            .await;
            warn_failed("dropping references to gone owners", key, ns, name, result);
        }
        return;
    }
    let waiting = owners
        .iter()
        .any(|(_, o)| matches!(o, Owner::WaitingForDependents));
    let fins = dep.finalizers();
    let propagation = if waiting && !api.store.dependents_of(dep.uid()).is_empty() {
        "Foreground"
    } else if fins.iter().any(|f| f == ORPHAN) {
        "Orphan"
    } else if fins.iter().any(|f| f == FOREGROUND) {
        "Foreground"
    } else {
        "Background"
    };
    let result = delete(api, key, ns, name, propagation).await;
    warn_failed("collecting a dependent", key, ns, name, result);
}

/// `cur` without its references to `uids` (no `ownerReferences` at all when none is left, as
/// kube-apiserver stores it); None when it has none of them.
fn without_owners(cur: &Value, uids: &[String]) -> Option<Value> {
    let refs = cur.pointer("/metadata/ownerReferences")?.as_array()?;
    let kept: Vec<Value> = refs
        .iter()
        .filter(|r| {
            !r.get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| uids.iter().any(|x| x == u))
        })
        .cloned()
        .collect();
    if kept.len() == refs.len() {
        return None;
    }
    let mut next = cur.clone();
    let meta = crate::meta::meta_mut(&mut next);
    if kept.is_empty() {
        meta.remove("ownerReferences");
    } else {
        meta.insert("ownerReferences".into(), Value::Array(kept));
    }
    Some(next)
}

/// An owner being deleted: orphaning or foreground deletion of its dependents.
async fn deleting_owner(api: &ApiServer, key: &str, owner: &Value) {
    let fins = owner.finalizers();
    let (ns, name, uid) = (owner.namespace(), owner.name(), owner.uid());
    if fins.iter().any(|f| f == ORPHAN) {
        let uids = [uid.to_string()];
        for (dkey, dns, dname) in api.store.dependents_of(uid) {
            let result = update(api, &dkey, &dns, &dname, Part::Main, |cur| {
                without_owners(cur, &uids)
            })
            .await;
            warn_failed("orphaning a dependent", &dkey, &dns, &dname, result);
        }
        let result = update(api, key, ns, name, Part::Main, |cur| {
            without_finalizer(cur, ORPHAN)
        })
        .await;
        warn_failed("removing the orphan finalizer", key, ns, name, result);
    }
    if fins.iter().any(|f| f == FOREGROUND) {
        for (dkey, dns, dname) in api.store.dependents_of(uid) {
            attempt(api, &dkey, &dns, &dname).await;
        }
        if blocking_dependents(api, uid) == 0 {
            let result = update(api, key, ns, name, Part::Main, |cur| {
                without_finalizer(cur, FOREGROUND)
            })
            .await;
            warn_failed("removing the foreground finalizer", key, ns, name, result);
        }
    }
}

/// How many dependents of `uid` still block its deletion.
fn blocking_dependents(api: &ApiServer, uid: &str) -> usize {
    api.store
        .dependents_of(uid)
        .into_iter()
        .filter_map(|(k, ns, n)| api.store.get(&k, &ns, &n))
        .filter(|d| owner_refs(d).iter().any(|r| r.uid == uid && r.block))
        .count()
}

/// An object was removed: its dependents may be garbage, and an owner waiting for it in the
/// foreground may go.
pub(super) async fn deleted(api: &ApiServer, object: &Value) {
    for (key, ns, name) in api.store.dependents_of(object.uid()) {
        attempt(api, &key, &ns, &name).await;
    }
    let owners: Vec<String> = owner_refs(object).into_iter().map(|r| r.uid).collect();
    look_again_at_owners(api, &owners).await;
}

/// Owners being deleted, looked at again now that a dependent went or let go of them.
async fn look_again_at_owners(api: &ApiServer, uids: &[String]) {
    for uid in uids {
        if let Some((okey, ons, oname)) = api.store.locate_uid(uid)
            && let Some(o) = api.store.get(&okey, &ons, &oname)
            && o.is_deleting()
        {
            deleting_owner(api, &okey, &o).await;
        }
    }
}

/// An object was written: an owner being deleted, or a dependent of owners that are gone.
pub(super) async fn written(api: &ApiServer, e: &Event) {
    // Most writes neither delete nor own: they are passed over without decoding the object.
    let deleting = memchr::memmem::find(&e.object, b"\"deletionTimestamp\"").is_some();
    let owned = memchr::memmem::find(&e.object, b"\"ownerReferences\"").is_some();
    let owned_before = e
        .prev
        .as_ref()
        .is_some_and(|p| memchr::memmem::find(p, b"\"ownerReferences\"").is_some());
    if !deleting && !owned && !owned_before {
        return;
    }
    let object = e.decode();
    if object.is_deleting() {
        deleting_owner(api, &e.key, &object).await;
    }
    if owned_before && let Some(prev) = e.decode_prev() {
        // A dependent that let go of an owner no longer blocks it.
        let now: Vec<String> = owner_refs(&object).into_iter().map(|r| r.uid).collect();
        let released: Vec<String> = owner_refs(&prev)
            .into_iter()
            .map(|r| r.uid)
            .filter(|u| !now.contains(u))
            .collect();
        look_again_at_owners(api, &released).await;
    }
    if owned
        && owner_refs(&object)
            .iter()
            .any(|r| !matches!(owner(api, &e.namespace, r), Owner::Solid))
    {
        attempt(api, &e.key, &e.namespace, &e.name).await;
    }
}

/// Catches up: owners being deleted, and dependents of owners that are gone.
pub(super) async fn resync(api: &Arc<ApiServer>) {
    for info in api.registry.all() {
        let key = info.storage_key();
        let (_, objects) = api.store.list(&key, None, None);
        for o in &objects {
            if o.is_deleting() {
                deleting_owner(api, &key, o).await;
            }
            let ns = o.namespace();
            if owner_refs(o)
                .iter()
                .any(|r| !matches!(owner(api, ns, r), Owner::Solid))
            {
                attempt(api, &key, ns, o.name()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dropping_the_last_owner_removes_the_field() {
        let dep = json!({"metadata": {"name": "d", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "ua"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "ub"}]}});
        let one = without_owners(&dep, &["ua".into()]).unwrap();
        assert_eq!(
            one["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "ub"}])
        );
        let none = without_owners(&one, &["ub".into()]).unwrap();
        assert_eq!(none["metadata"], json!({"name": "d"}));
        assert_eq!(without_owners(&none, &["ub".into()]), None);
    }
}
