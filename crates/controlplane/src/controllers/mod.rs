//! The server's own controllers, reacting to stored events the way kube-controller-manager and
//! the apiextensions server would: garbage collection through ownerReferences ([`gc`]), the
//! namespace controller ([`namespaces`], its decisions in [`namespace_decision`]), CRD cleanup
//! ([`crds`]), every namespace's `default` ServiceAccount ([`serviceaccounts`]) and
//! `kube-root-ca.crt` ConfigMap ([`root_ca`]), and the deployment and ReplicaSet controllers
//! ([`deployments`], [`replicasets`]; ReplicaSets named by [`template_hash`]) once those
//! resources are served.
//!
//! They act only through [`ApiServer`] writes as `kube-controller-manager`, so their effects are
//! ordinary events, and they are not admitted (as kube-apiserver's own loopback writes are not
//! checked by RBAC).

pub mod crds;
pub mod deployment_decision;
pub mod deployments;
pub mod gc;
pub mod namespace_decision;
pub mod namespaces;
pub mod replicasets;
pub mod root_ca;
pub mod serviceaccounts;
pub mod template_hash;

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::api::{ApiServer, Target, WriteOptions};
use crate::error::{ApiError, ApiResult};
use crate::meta::ObjectMeta;
use crate::resource::{DeleteOptions, Part};
use crate::storage::{Event, EventType};

/// The storage key of Namespaces.
pub(crate) const NS_KEY: &str = "/namespaces";
/// The field manager of every controller write, as kube-controller-manager's.
const MANAGER: &str = "kube-controller-manager";

/// Runs until shutdown. `root_ca` is the CA certificate (PEM) published into every namespace
/// as `kube-root-ca.crt`; a control plane serving plain HTTP has none. `workloads`: whether the
/// deployment and ReplicaSet controllers run.
pub async fn run(
    api: Arc<ApiServer>,
    root_ca: Option<String>,
    workloads: bool,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut rx = api.store.subscribe_all();
    crate::events::migrate_stored_apart(&api.store).await;
    let mut controllers = Controllers {
        api,
        root_ca,
        workloads,
        namespaces: namespaces::Queue::default(),
        deadlines: deployments::Deadlines::default(),
    };
    controllers.resync().await;
    loop {
        let due = controllers.namespaces.next_due();
        let deadline = controllers.deadlines.next_due();
        tokio::select! {
            r = rx.recv() => match r {
                Ok(e) => controllers.react(&e).await,
                Err(RecvError::Lagged(_)) => controllers.resync().await,
                Err(RecvError::Closed) => return,
            },
            _ = sleep_until(due), if due.is_some() => controllers.namespaces.promote_due(),
            _ = sleep_until(deadline), if deadline.is_some() => {
                let api = controllers.api.clone();
                for (ns, name) in controllers.deadlines.take_due() {
                    deployments::sync(&api, &mut controllers.deadlines, &ns, &name).await;
                }
            }
            // Passes wait while events are pending (picked at random among ready branches), so
            // a burst of deletions in one namespace makes few passes over it.
            _ = std::future::ready(()), if controllers.namespaces.has_dirty() => {
                if let Some(ns) = controllers.namespaces.take_dirty() {
                    namespaces::pass(&controllers.api, &ns).await;
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

async fn sleep_until(due: Option<tokio::time::Instant>) {
    if let Some(at) = due {
        tokio::time::sleep_until(at).await;
    }
}

/// What the controllers would make in the namespaces there are at start (their `default`
/// ServiceAccount and `kube-root-ca.crt`), made before the control plane serves, so that a
/// client never meets a new control plane's system namespaces without them.
pub async fn bootstrap(api: &ApiServer, root_ca: Option<&str>) {
    let (_, all) = api.store.list(NS_KEY, None, None);
    for ns in all.iter().filter(|ns| !ns.is_deleting()) {
        serviceaccounts::ensure(api, ns).await;
        if let Some(ca) = root_ca {
            root_ca::ensure(api, ca, ns.name()).await;
        }
    }
}

/// The controllers' shared state.
struct Controllers {
    api: Arc<ApiServer>,
    root_ca: Option<String>,
    /// Whether the deployment and ReplicaSet controllers run (see
    /// `ControlPlaneBuilder::without_workload_controllers`).
    workloads: bool,
    namespaces: namespaces::Queue,
    deadlines: deployments::Deadlines,
}

impl Controllers {
    /// Catches up with everything stored (at start, and after falling behind the events).
    async fn resync(&mut self) {
        let api = self.api.clone();
        let (_, all) = api.store.list(NS_KEY, None, None);
        for ns in all.iter().filter(|ns| ns.is_deleting()) {
            self.namespaces.seen_deleting(ns.name());
        }
        bootstrap(&api, self.root_ca.as_deref()).await;
        crds::resync(&api).await;
        gc::resync(&api).await;
        if self.workloads {
            deployments::resync(&api, &mut self.deadlines).await;
            replicasets::resync(&api).await;
        }
    }

    async fn react(&mut self, e: &Event) {
        let api = self.api.clone();
        let key = &*e.key;
        if !e.namespace.is_empty() {
            self.namespaces.content_changed(&e.namespace);
        }
        if key == NS_KEY {
            self.namespace_changed(e).await;
        }
        match e.kind {
            EventType::Deleted => {
                let object = e.decode();
                gc::deleted(&api, &object).await;
                crds::object_deleted(&api, key).await;
            }
            EventType::Added | EventType::Modified => {
                gc::written(&api, e).await;
                if key == crds::CRD_KEY {
                    crds::written(&api, e).await;
                }
            }
        }
        serviceaccounts::react(&api, e).await;
        if let Some(ca) = &self.root_ca {
            root_ca::react(&api, ca, e).await;
        }
        if self.workloads {
            deployments::react(&api, &mut self.deadlines, e).await;
            replicasets::react(&api, e).await;
        }
    }

    async fn namespace_changed(&mut self, e: &Event) {
        if e.kind == EventType::Deleted {
            self.namespaces.gone(&e.name);
            return;
        }
        let ns = e.decode();
        if ns.is_deleting() {
            self.namespaces.seen_deleting(&e.name);
        } else if e.kind == EventType::Added {
            serviceaccounts::ensure(&self.api, &ns).await;
            if let Some(ca) = &self.root_ca {
                root_ca::ensure(&self.api, ca, &e.name).await;
            }
        }
    }
}

/// The options of every controller write.
fn write_options() -> WriteOptions {
    WriteOptions {
        user_agent_manager: MANAGER.into(),
        ..Default::default()
    }
}

fn target(api: &ApiServer, key: &str, ns: &str, name: Option<&str>, part: Part) -> Option<Target> {
    Some(Target {
        info: api.registry.by_storage_key(key)?,
        namespace: ns.to_string(),
        name: name.map(str::to_string),
        part,
    })
}

/// Creates `object` in `ns` (its name in its metadata); an object that exists already, a
/// namespace that is gone or terminating, and a resource no longer served are not failures.
async fn create(api: &ApiServer, key: &str, ns: &str, object: Value) -> ApiResult<Option<Value>> {
    let Some(t) = target(api, key, ns, None, Part::Main) else {
        return Ok(None);
    };
    match api.create(&t, object, &write_options()).await {
        Ok(answer) => Ok(Some(answer.into_object())),
        Err(ApiError::AlreadyExists(_) | ApiError::NotFound(_)) => Ok(None),
        Err(ApiError::Forbidden { cause: Some(_), .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes what `change` makes of the stored object through `part`, reading it again when
/// another writer came first; nothing when `change` has nothing to change or the object went.
async fn update<F>(
    api: &ApiServer,
    key: &str,
    ns: &str,
    name: &str,
    part: Part,
    change: F,
) -> ApiResult<()>
where
    F: Fn(&Value) -> Option<Value>,
{
    let Some(t) = target(api, key, ns, Some(name), part) else {
        return Ok(());
    };
    for _ in 0..CONFLICT_RETRIES {
        let Some(cur) = api.store.get(key, ns, name) else {
            return Ok(());
        };
        let Some(next) = change(&cur) else {
            return Ok(());
        };
        match api.update(&t, next, &write_options()).await {
            Ok(_) | Err(ApiError::NotFound(_)) => return Ok(()),
            Err(ApiError::Conflict(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::Conflict(crate::objects::subject(&t.info, name)))
}

/// How often a controller write reads the object again after a conflict before it gives up
/// until the object's next event.
const CONFLICT_RETRIES: usize = 5;

/// Deletes an object with a propagation policy; one already gone is not a failure.
async fn delete(
    api: &ApiServer,
    key: &str,
    ns: &str,
    name: &str,
    propagation: &str,
) -> ApiResult<()> {
    let Some(t) = target(api, key, ns, Some(name), Part::Main) else {
        return Ok(());
    };
    let opts = DeleteOptions {
        propagation: Some(propagation.to_string()),
        ..Default::default()
    };
    match api.delete(&t, &opts).await {
        Ok(_) | Err(ApiError::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Logs a failed controller write: the object's next event (or the next resync) tries again.
fn warn_failed(what: &str, key: &str, ns: &str, name: &str, result: ApiResult<()>) {
    if let Err(e) = result {
        tracing::warn!(%key, %ns, %name, error = %e, "{what} failed");
    }
}

/// Sets the field at `path`, making objects of whatever is on the way.
fn set(obj: &mut Value, path: &[&str], value: Value) {
    let mut at = obj;
    for key in path {
        if !at.is_object() {
            *at = json!({});
        }
        let Some(map) = at.as_object_mut() else {
            return;
        };
        at = map.entry(key.to_string()).or_insert(Value::Null);
    }
    *at = value;
}

/// `metadata.finalizers` without `finalizer`, when it has it.
fn without_finalizer(cur: &Value, finalizer: &str) -> Option<Value> {
    let fins = cur.finalizers();
    if !fins.iter().any(|f| f == finalizer) {
        return None;
    }
    let mut next = cur.clone();
    let kept: Vec<String> = fins.into_iter().filter(|f| f != finalizer).collect();
    let meta = crate::meta::meta_mut(&mut next);
    if kept.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), json!(kept));
    }
    Some(next)
}

impl ApiServer {
    /// Serves every stored CRD (at start).
    pub fn restore_crds(&self) {
        let (_, crds) = self.store.list(crds::CRD_KEY, None, None);
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
            let opts = WriteOptions {
                user_agent_manager: "kube-apiserver".into(),
                ..Default::default()
            };
            let _ = self
                .create(&t, json!({"metadata": {"name": name}}), &opts)
                .await;
        }
    }
}
