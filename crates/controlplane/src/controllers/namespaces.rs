//! The namespace controller: a terminating namespace's content is deleted (its Pods first),
//! what remains is reported in the namespace's conditions, and once nothing remains the
//! `kubernetes` finalizer is removed through `/finalize`, after which the namespace goes (when
//! no other finalizer holds it). What to write is [`super::namespace_decision`]'s.
//!
//! As kube-controller-manager's, the controller first looks at a namespace
//! [`DELETION_GRACE`] after it saw it terminating: until then a client reads the namespace
//! Terminating with no conditions and its content still there, as on a real cluster, and
//! writes admitted just before the deletion have landed before the content is listed. After
//! that, every change to the namespace's content starts another pass.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::namespace_decision::{Content, Resource, decide};
use super::{NS_KEY, set, update, warn_failed};
use crate::api::ApiServer;
use crate::meta::{ObjectMeta, now_rfc3339};
use crate::registry::version_priority;
use crate::resource::{Part, ResourceInfo};
use crate::strategy::core::spec_finalizers;

/// How long after a namespace turns Terminating the controller first looks at it:
/// kube-controller-manager's `namespaceDeletionGracePeriod`.
pub const DELETION_GRACE: Duration = Duration::from_secs(5);

/// The terminating namespaces the controller knows and when each is next looked at.
#[derive(Default)]
pub(super) struct Queue {
    /// Namespaces in their grace, with when it ends.
    waiting: HashMap<String, Instant>,
    /// Namespaces past their grace: a change to their content starts a pass.
    active: HashSet<String>,
    /// Namespaces due for a pass.
    dirty: BTreeSet<String>,
}

impl Queue {
    /// A namespace was seen terminating.
    pub(super) fn seen_deleting(&mut self, name: &str) {
        if self.active.contains(name) {
            self.dirty.insert(name.to_string());
        } else {
            self.waiting
                .entry(name.to_string())
                .or_insert_with(|| Instant::now() + DELETION_GRACE);
        }
    }

    /// Something in namespace `ns` changed.
    pub(super) fn content_changed(&mut self, ns: &str) {
        if self.active.contains(ns) {
            self.dirty.insert(ns.to_string());
        }
    }

    /// The namespace is gone.
    pub(super) fn gone(&mut self, name: &str) {
        self.waiting.remove(name);
        self.active.remove(name);
        self.dirty.remove(name);
    }

    /// When the next grace ends.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.waiting.values().min().copied()
    }

    /// Namespaces whose grace has ended become due.
    pub(super) fn promote_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            self.waiting.remove(&name);
            self.active.insert(name.clone());
            self.dirty.insert(name);
        }
    }

    pub(super) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    pub(super) fn take_dirty(&mut self) -> Option<String> {
        self.dirty.pop_first()
    }
}

/// One pass over the terminating namespace `name`.
pub(super) async fn pass(api: &ApiServer, name: &str) {
    let Some(ns) = api.store.get(NS_KEY, "", name) else {
        return;
    };
    if !ns.is_deleting() {
        return;
    }
    if ns.pointer("/status/phase").and_then(Value::as_str) != Some("Terminating") {
        let result = update(api, NS_KEY, "", name, Part::Status, |cur| {
            let mut next = cur.clone();
            set(&mut next, &["status", "phase"], json!("Terminating"));
            Some(next)
        })
        .await;
        warn_failed("marking a namespace Terminating", NS_KEY, "", name, result);
    }
    // Finalized: only other finalizers of its metadata hold it.
    if spec_finalizers(ns.get("spec")).is_empty() {
        return;
    }
    let content = delete_content(api, name).await;
    let now = now_rfc3339();
    let result = update(api, NS_KEY, "", name, Part::Status, |cur| {
        let conditions = decide(cur, &content, &now).conditions?;
        let mut next = cur.clone();
        set(&mut next, &["status", "conditions"], json!(conditions));
        Some(next)
    })
    .await;
    warn_failed(
        "reporting a namespace's conditions",
        NS_KEY,
        "",
        name,
        result,
    );
    let result = update(api, NS_KEY, "", name, Part::Finalize, |cur| {
        let finalizers = decide(cur, &content, &now).finalize?;
        let mut next = cur.clone();
        set(&mut next, &["spec", "finalizers"], json!(finalizers));
        Some(next)
    })
    .await;
    warn_failed("finalizing a namespace", NS_KEY, "", name, result);
}

/// Deletes the namespace's content, Pods first, and tells what remains.
async fn delete_content(api: &ApiServer, ns: &str) -> Content {
    let resources = namespaced_resources(api);
    let (pods, rest): (Vec<_>, Vec<_>) = resources
        .into_iter()
        .partition(|r| r.group.is_empty() && r.plural == "pods");
    let mut content = Content::counted();
    for info in &pods {
        let left = delete_all(api, info, ns, &mut content).await;
        if !left.is_empty() {
            let mut stopped = Content::pods_remain();
            // Pods still in their termination grace are waited for, not a failure.
            let stuck: Vec<Vec<String>> = left
                .iter()
                .filter(|p| !in_termination_grace(p))
                .map(|p| p.finalizers())
                .collect();
            stopped.left(ns, &resource(info), &stuck);
            return stopped;
        }
    }
    for info in &rest {
        let left = delete_all(api, info, ns, &mut content).await;
        let finalizers: Vec<Vec<String>> = left.iter().map(|o| o.finalizers()).collect();
        content.left(ns, &resource(info), &finalizers);
    }
    content
}

/// Whether a Pod is being deleted gracefully (a kubelet would end it).
fn in_termination_grace(pod: &Value) -> bool {
    pod.is_deleting()
        && pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|s| s > 0)
}

/// Deletes every object of `info` in `ns` (in the background, as kube-controller-manager's
/// deletecollection does) and answers those still there.
async fn delete_all(
    api: &ApiServer,
    info: &ResourceInfo,
    ns: &str,
    content: &mut Content,
) -> Vec<std::sync::Arc<Value>> {
    let key = info.storage_key();
    let (_, objects) = api.store.list(&key, Some(ns), None);
    for o in objects.iter().filter(|o| !o.is_deleting()) {
        if let Err(e) = super::delete(api, &key, ns, o.name(), "Background").await {
            content.failed(e.to_string());
        }
    }
    api.store.list(&key, Some(ns), None).1
}

fn resource(info: &ResourceInfo) -> Resource {
    Resource {
        group: info.group.clone(),
        version: info.version.clone(),
        plural: info.plural.clone(),
    }
}

/// Every namespaced resource at its preferred version, as discovery shows them to
/// kube-controller-manager (a resource served by two groups, as Events are, is listed by each).
fn namespaced_resources(api: &ApiServer) -> Vec<std::sync::Arc<ResourceInfo>> {
    let mut preferred: HashMap<(String, String), std::sync::Arc<ResourceInfo>> = HashMap::new();
    for info in api.registry.all().into_iter().filter(|i| i.namespaced) {
        let id = (info.group.clone(), info.plural.clone());
        match preferred.get(&id) {
            Some(kept) if version_priority(&kept.version) >= version_priority(&info.version) => {}
            _ => {
                preferred.insert(id, info);
            }
        }
    }
    let mut out: Vec<_> = preferred.into_values().collect();
    out.sort_by(|a, b| (&a.group, &a.plural).cmp(&(&b.group, &b.plural)));
    out
}
