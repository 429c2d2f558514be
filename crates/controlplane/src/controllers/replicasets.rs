//! The ReplicaSet controller: a ReplicaSet has as many Pods as it asks for, made from its
//! template, and reports them in its status. Nothing runs Pods here, so they stay Pending and
//! are never ready, as on a cluster without nodes. It runs once ReplicaSets and Pods are
//! served. Pods without a controller are not adopted.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::deployments::{RS_KEY, controlled_by, controller_of};
use super::{create, delete, set, update, warn_failed};
use crate::api::ApiServer;
use crate::meta::{ObjectMeta, now_rfc3339};
use crate::resource::Part;
use crate::storage::{Event, EventType};

const PODS_KEY: &str = "/pods";
/// The most Pods one sync makes, as kube-controller-manager's `burstReplicas`.
const BURST: i64 = 500;

fn served(api: &ApiServer) -> bool {
    api.registry.lookup("apps", "v1", "replicasets").is_some()
        && api.registry.lookup("", "v1", "pods").is_some()
}

/// A ReplicaSet changed, or one of its Pods did.
pub(super) async fn react(api: &ApiServer, e: &Event) {
    match &*e.key {
        RS_KEY if e.kind != EventType::Deleted => sync(api, &e.namespace, &e.name).await,
        PODS_KEY => {
            if memchr::memmem::find(&e.object, b"\"ReplicaSet\"").is_some()
                && let Some(owner) = controller_of(&e.decode(), "ReplicaSet")
            {
                sync(api, &e.namespace, &owner).await;
            }
        }
        _ => {}
    }
}

pub(super) async fn resync(api: &ApiServer) {
    if !served(api) {
        return;
    }
    let (_, all) = api.store.list(RS_KEY, None, None);
    for rs in all {
        sync(api, rs.namespace(), rs.name()).await;
    }
}

/// What one sync of a ReplicaSet does.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// How many Pods to make.
    pub create: i64,
    /// The Pods to delete.
    pub delete: Vec<String>,
}

fn active(pod: &Value) -> bool {
    !pod.is_deleting()
        && !matches!(
            pod.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
}

fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Decides the Pods of a ReplicaSet from those it controls (kube's `manageReplicas`): too few
/// are made up, too many deleted, those not ready and the newest first.
pub fn decide(rs: &Value, pods: &[Arc<Value>]) -> Plan {
    let want = rs
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let mut running: Vec<&Value> = pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| active(p))
        .collect();
    let have = i64::try_from(running.len()).unwrap_or(i64::MAX);
    if rs.is_deleting() || have == want {
        return Plan {
            create: 0,
            delete: Vec::new(),
        };
    }
    if have < want {
        return Plan {
            create: (want - have).min(BURST),
            delete: Vec::new(),
        };
    }
    running.sort_by(|a, b| {
        (ready(a), std::cmp::Reverse(a.meta_str("creationTimestamp")))
            .cmp(&(ready(b), std::cmp::Reverse(b.meta_str("creationTimestamp"))))
    });
    let extra = usize::try_from(have - want).unwrap_or(0);
    Plan {
        create: 0,
        delete: running
            .into_iter()
            .take(extra)
            .map(|p| p.name().to_string())
            .collect(),
    }
}

/// The ReplicaSet's status from the Pods it controlled when the sync began (kube's
/// `calculateStatus`), with a failure to make or delete Pods as its ReplicaFailure condition.
pub fn status(
    rs: &Value,
    pods: &[Arc<Value>],
    failure: Option<(&str, String)>,
    now: &str,
) -> Value {
    let template_labels = rs
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let running: Vec<&Value> = pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| active(p))
        .collect();
    let count = |f: &dyn Fn(&Value) -> bool| running.iter().filter(|p| f(p)).count();
    let fully_labeled = count(&|p: &Value| {
        let labels = p.labels().cloned().unwrap_or_default();
        template_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    });
    let ready_count = count(&ready);
    let mut s = Map::new();
    s.insert("replicas".into(), json!(running.len()));
    for (field, n) in [
        ("fullyLabeledReplicas", fully_labeled),
        ("readyReplicas", ready_count),
        ("availableReplicas", ready_count),
    ] {
        if n > 0 {
            s.insert(field.into(), json!(n));
        }
    }
    let terminating = pods.iter().filter(|p| p.is_deleting()).count();
    s.insert("terminatingReplicas".into(), json!(terminating));
    if let Some(g) = rs
        .pointer("/metadata/generation")
        .filter(|g| g.as_i64() != Some(0))
    {
        s.insert("observedGeneration".into(), g.clone());
    }
    let mut conditions: Vec<Value> = rs
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let had_failure = conditions.iter().any(|c| c["type"] == "ReplicaFailure");
    match failure {
        Some((reason, message)) if !had_failure => conditions.push(json!({
            "type": "ReplicaFailure", "status": "True", "lastTransitionTime": now,
            "reason": reason, "message": message})),
        None if had_failure => conditions.retain(|c| c["type"] != "ReplicaFailure"),
        _ => {}
    }
    if !conditions.is_empty() {
        s.insert("conditions".into(), Value::Array(conditions));
    }
    Value::Object(s)
}

/// A Pod of `rs` as its template says (kube's `GetPodFromTemplate`).
fn pod_from(rs: &Value) -> Value {
    let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut metadata = Map::new();
    metadata.insert("generateName".into(), json!(format!("{}-", rs.name())));
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(v) = template.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), v.clone());
        }
    }
    metadata.insert(
        "ownerReferences".into(),
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs.name(), "uid": rs.uid(),
            "controller": true, "blockOwnerDeletion": true}]),
    );
    json!({"metadata": metadata, "spec": template.get("spec").cloned().unwrap_or(json!({}))})
}

/// One sync of the ReplicaSet `ns/name`.
async fn sync(api: &ApiServer, ns: &str, name: &str) {
    if !served(api) {
        return;
    }
    let Some(rs) = api.store.get(RS_KEY, ns, name) else {
        return;
    };
    let (_, all) = api.store.list(PODS_KEY, Some(ns), None);
    let pods: Vec<Arc<Value>> = all
        .into_iter()
        .filter(|p| controlled_by(p, rs.uid()))
        .collect();
    let decided = decide(&rs, &pods);
    let mut failure = None;
    for _ in 0..decided.create {
        if let Err(e) = create(api, PODS_KEY, ns, pod_from(&rs)).await {
            failure = Some(("FailedCreate", e.to_string()));
            break;
        }
    }
    for pod in &decided.delete {
        if let Err(e) = delete(api, PODS_KEY, ns, pod, "Background").await {
            failure = Some(("FailedDelete", e.to_string()));
        }
    }
    let now = now_rfc3339();
    let result = update(api, RS_KEY, ns, name, Part::Status, |cur| {
        let status = status(cur, &pods, failure.clone(), &now);
        if cur.get("status") == Some(&status) {
            return None;
        }
        let mut next = cur.clone();
        set(&mut next, &["status"], status);
        Some(next)
    })
    .await;
    warn_failed("reporting a ReplicaSet's status", RS_KEY, ns, name, result);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(replicas: i64) -> Value {
        json!({"metadata": {"name": "web-abc", "uid": "rs-uid", "generation": 1},
            "spec": {"replicas": replicas,
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    }

    fn pod(name: &str, created: &str, ready: bool) -> Arc<Value> {
        Arc::new(
            json!({"metadata": {"name": name, "creationTimestamp": created,
                "labels": {"app": "web", "pod-template-hash": "abc"}},
            "status": {"phase": "Pending", "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}]}}),
        )
    }

    #[test]
    fn missing_pods_are_made_and_extra_ones_deleted_unready_and_newest_first() {
        assert_eq!(decide(&rs(3), &[pod("a", "t1", false)]).create, 2);
        let pods = [
            pod("old-ready", "t1", true),
            pod("new-ready", "t3", true),
            pod("old-pending", "t2", false),
            pod("new-pending", "t4", false),
        ];
        assert_eq!(
            decide(&rs(1), &pods).delete,
            ["new-pending", "old-pending", "new-ready"]
        );
        let mut deleting = rs(3);
        deleting["metadata"]["deletionTimestamp"] = json!("t");
        assert_eq!(
            decide(&deleting, &[]).create,
            0,
            "no Pods for a ReplicaSet being deleted"
        );
    }

    #[test]
    fn a_pod_of_the_template_is_owned_by_its_replica_set() {
        let p = pod_from(&rs(1));
        assert_eq!(p["metadata"]["generateName"], "web-abc-");
        assert_eq!(p["metadata"]["labels"]["pod-template-hash"], "abc");
        assert_eq!(
            p["metadata"]["ownerReferences"][0],
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
                "uid": "rs-uid", "controller": true, "blockOwnerDeletion": true})
        );
        assert_eq!(p["spec"]["containers"][0]["image"], "i");
    }

    #[test]
    fn the_status_counts_pods_and_reports_a_failure_to_make_them() {
        let pods = [pod("a", "t1", true), pod("b", "t2", false)];
        assert_eq!(
            status(&rs(2), &pods, None, "now"),
            json!({"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 1,
                "availableReplicas": 1, "terminatingReplicas": 0, "observedGeneration": 1})
        );
        let failed = status(
            &rs(2),
            &[],
            Some(("FailedCreate", "pods \"x\" is forbidden".into())),
            "now",
        );
        assert_eq!(failed["replicas"], 0);
        assert_eq!(
            failed["conditions"],
            json!([{"type": "ReplicaFailure", "status": "True", "lastTransitionTime": "now",
                "reason": "FailedCreate", "message": "pods \"x\" is forbidden"}])
        );
        let mut recovered = rs(2);
        recovered["status"] = failed;
        assert_eq!(
            status(&recovered, &pods, None, "later").get("conditions"),
            None
        );
    }
}
