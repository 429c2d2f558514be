//! The server's own controllers, reacting to stored events the way kube-controller-manager
//! and the apiextensions server would: garbage collection through ownerReferences
//! (background, foreground and orphan), namespace deletion (contents first, then the
//! namespace), and CRD deletion (its objects first, then the CRD).
//!
//! They act only through [`ApiServer`] writes, so their effects are ordinary events.

use std::convert::Infallible;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::api::{ApiServer, Target};
use crate::meta::ObjectMeta;
use crate::objects::{DeleteOptions, FOREGROUND, ORPHAN, Part};
use crate::storage::{Event, EventType, WriteOp};
use crate::strategy::apiextensions::CRD_CLEANUP;

const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
const NS_KEY: &str = "/namespaces";

/// Runs until shutdown.
pub async fn run(api: Arc<ApiServer>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut rx = api.store.subscribe_all();
    crate::events::migrate_stored_apart(&api.store).await;
    resync(&api).await;
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Ok(e) => react(&api, &e).await,
                Err(RecvError::Lagged(_)) => resync(&api).await,
                Err(RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

async fn resync(api: &ApiServer) {
    let (_, namespaces) = api.store.list(NS_KEY, None, None);
    for ns in namespaces.iter().filter(|n| n.is_deleting()) {
        reconcile_namespace(api, ns.name()).await;
    }
    let (_, crds) = api.store.list(CRD_KEY, None, None);
    for crd in crds.iter().filter(|c| c.is_deleting()) {
        reconcile_crd(api, crd.name()).await;
    }
    for info in api.registry.all() {
        let (_, objs) = api.store.list(&info.storage_key(), None, None);
        for o in objs.iter().filter(|o| o.is_deleting()) {
            reconcile_owner(api, &info.storage_key(), o).await;
        }
        for o in &objs {
            for r in owner_refs(o) {
                if api.store.locate_uid(&r).is_none() {
                    reconcile_dependents(api, &r).await;
                }
            }
        }
    }
}

fn owner_refs(o: &Value) -> Vec<String> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
        .collect()
}

async fn react(api: &ApiServer, e: &Event) {
    let key = &*e.key;
    match e.kind {
        EventType::Deleted => {
            let object = e.decode();
            reconcile_dependents(api, object.uid()).await;
            for owner in owner_refs(&object) {
                if let Some((okey, ons, oname)) = api.store.locate_uid(&owner)
                    && let Some(o) = api.store.get(&okey, &ons, &oname)
                    && o.is_deleting()
                {
                    reconcile_owner(api, &okey, &o).await;
                }
            }
            if !e.namespace.is_empty()
                && api
                    .store
                    .get(NS_KEY, "", &e.namespace)
                    .is_some_and(|n| n.is_deleting())
            {
                reconcile_namespace(api, &e.namespace).await;
            }
            if let Some(crd) = crd_of(api, key)
                && crd.is_deleting()
            {
                reconcile_crd(api, crd.name()).await;
            }
        }
        EventType::Added | EventType::Modified => {
            // Most writes are not deletions: they are passed over without decoding the object.
            if memchr::memmem::find(&e.object, b"\"deletionTimestamp\"").is_none() {
                return;
            }
            let object = e.decode();
            if !object.is_deleting() {
                return;
            }
            if key == NS_KEY {
                reconcile_namespace(api, &e.name).await;
            } else if key == CRD_KEY {
                reconcile_crd(api, &e.name).await;
            }
            reconcile_owner(api, key, &object).await;
        }
    }
}

fn crd_of(api: &ApiServer, key: &str) -> Option<Arc<Value>> {
    let info = api.registry.by_storage_key(key)?;
    let custom = info.custom.as_ref()?;
    api.store.get(CRD_KEY, "", &custom.crd_name)
}

fn target_for(api: &ApiServer, key: &str, ns: &str, name: &str) -> Option<Target> {
    Some(Target {
        info: api.registry.by_storage_key(key)?,
        namespace: ns.to_string(),
        name: Some(name.to_string()),
        part: Part::Main,
    })
}

async fn delete(api: &ApiServer, key: &str, ns: &str, name: &str, propagation: Option<&str>) {
    let Some(t) = target_for(api, key, ns, name) else {
        return;
    };
    let opts = DeleteOptions {
        propagation: propagation.map(str::to_string),
        ..Default::default()
    };
    if let Err(e) = api.delete(&t, &opts).await
        && e.code() != 404
    {
        tracing::warn!(%key, %ns, %name, error = %e, "controller delete failed");
    }
}

async fn drop_finalizer(api: &ApiServer, key: &str, ns: &str, name: &str, finalizer: &str) {
    let result = api
        .modify(key, ns, name, |cur| {
            let fins = cur.finalizers();
            if !fins.iter().any(|f| f == finalizer) {
                return None;
            }
            let mut next = cur.clone();
            let kept: Vec<String> = fins.into_iter().filter(|f| f != finalizer).collect();
            crate::meta::meta_mut(&mut next).insert("finalizers".into(), json!(kept));
            Some(next)
        })
        .await;
    if let Err(e) = result {
        tracing::warn!(%key, %ns, %name, error = %e, "removing finalizer failed");
    }
}

/// Background collection: dependents whose owners are all gone are deleted; references to
/// a gone owner are dropped from dependents that still have a live owner.
async fn reconcile_dependents(api: &ApiServer, owner_uid: &str) {
    if owner_uid.is_empty() || api.store.locate_uid(owner_uid).is_some() {
        return;
    }
    for (key, ns, name) in api.store.dependents_of(owner_uid) {
        let Some(dep) = api.store.get(&key, &ns, &name) else {
            continue;
        };
        let live_owner = owner_refs(&dep)
            .iter()
            .any(|u| u != owner_uid && api.store.locate_uid(u).is_some());
        if live_owner {
            let uid = owner_uid.to_string();
            let _ = api
                .modify(&key, &ns, &name, |cur| {
                    let mut next = cur.clone();
                    if let Some(Value::Array(refs)) = next.pointer_mut("/metadata/ownerReferences")
                    {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&uid));
                    }
                    Some(next)
                })
                .await;
        } else if !dep.is_deleting() {
            delete(api, &key, &ns, &name, None).await;
        }
    }
}

/// Foreground and orphan deletion of an owner that is being deleted.
async fn reconcile_owner(api: &ApiServer, key: &str, owner: &Value) {
    let fins = owner.finalizers();
    let (ns, name, uid) = (owner.namespace(), owner.name(), owner.uid());
    if fins.iter().any(|f| f == ORPHAN) {
        for (dkey, dns, dname) in api.store.dependents_of(uid) {
            let uid = uid.to_string();
            let _ = api
                .modify(&dkey, &dns, &dname, |cur| {
                    let mut next = cur.clone();
                    if let Some(Value::Array(refs)) = next.pointer_mut("/metadata/ownerReferences")
                    {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&uid));
                    }
                    Some(next)
                })
                .await;
        }
        drop_finalizer(api, key, ns, name, ORPHAN).await;
    }
    if fins.iter().any(|f| f == FOREGROUND) {
        let deps = api.store.dependents_of(uid);
        if deps.is_empty() {
            drop_finalizer(api, key, ns, name, FOREGROUND).await;
            return;
        }
        for (dkey, dns, dname) in deps {
            if let Some(d) = api.store.get(&dkey, &dns, &dname)
                && !d.is_deleting()
            {
                delete(api, &dkey, &dns, &dname, Some("Foreground")).await;
            }
        }
    }
}

/// Deletes everything in a terminating namespace, then the namespace itself.
async fn reconcile_namespace(api: &ApiServer, ns: &str) {
    let contents = api.store.in_namespace(ns);
    if contents.is_empty() {
        let t = target_for(api, NS_KEY, "", ns);
        if let Some(t) = t {
            let written = api.store.write(NS_KEY, "", ns, false, |cur| {
                Ok::<_, Infallible>(match cur {
                    Some(c) if c.is_deleting() => WriteOp::Delete,
                    _ => WriteOp::Unchanged,
                })
            });
            if let Ok(w) = written {
                let _ = w.ack.wait().await;
            }
            drop(t);
        }
        return;
    }
    for (key, obj) in contents {
        if !obj.is_deleting() {
            delete(api, &key, ns, obj.name(), None).await;
        }
    }
}

/// Deletes a terminating CRD's objects, then releases the CRD.
async fn reconcile_crd(api: &ApiServer, name: &str) {
    let Some(crd) = api.store.get(CRD_KEY, "", name) else {
        return;
    };
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    let key = format!("{group}/{plural}");
    let (_, objs) = api.store.list(&key, None, None);
    if objs.is_empty() {
        drop_finalizer(api, CRD_KEY, "", name, CRD_CLEANUP).await;
        return;
    }
    for o in objs.iter().filter(|o| !o.is_deleting()) {
        delete(api, &key, o.namespace(), o.name(), None).await;
    }
}

impl ApiServer {
    /// Serves every stored CRD (at start).
    pub fn restore_crds(&self) {
        let (_, crds) = self.store.list(CRD_KEY, None, None);
        for crd in crds {
            self.sync_crd(crd.name());
        }
    }

    /// Creates default, kube-system, kube-public and kube-node-lease if absent.
    pub async fn ensure_system_namespaces(&self) {
        let Some(info) = self.registry.lookup("", "v1", "namespaces") else {
            return;
        };
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            if self.store.get(NS_KEY, "", name).is_some() {
                continue;
            }
            let t = Target {
                info: info.clone(),
                namespace: String::new(),
                name: None,
                part: Part::Main,
            };
            let opts = crate::api::WriteOptions {
                user_agent_manager: "kube-apiserver".into(),
                ..Default::default()
            };
            let _ = self
                .create(&t, json!({"metadata": {"name": name}}), &opts)
                .await;
        }
    }
}
