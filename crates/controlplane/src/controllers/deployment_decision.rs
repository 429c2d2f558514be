//! What the deployment controller makes of a Deployment and the ReplicaSets it controls, as
//! kube-controller-manager's decides it: pure, the facts in (the Deployment, its ReplicaSets,
//! the time), the writes out (a new ReplicaSet for the current template, the replica counts of
//! each, the Deployment's status and revision). [`super::deployments`] gathers and writes.
//!
//! A ReplicaSet is named after its template's hash (`pod-template-hash`), kube-controller-manager's
//! own ([`super::template_hash`]).

use serde_json::{Map, Value, json};

use super::template_hash::template_hash;
use crate::meta::{ObjectMeta, parse_time};

/// The annotation holding a Deployment's (and each of its ReplicaSets') revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The label that ties a ReplicaSet and its Pods to one template.
pub const HASH_LABEL: &str = "pod-template-hash";
/// Annotations of a Deployment not copied to its ReplicaSets.
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// What the controller knows when it syncs one Deployment.
pub struct Facts<'a> {
    pub deployment: &'a Value,
    /// The ReplicaSets the Deployment controls, in any order.
    pub replica_sets: &'a [Value],
    /// Now, as stored timestamps are written and in seconds.
    pub now: &'a str,
    pub now_seconds: i64,
}

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create this ReplicaSet.
    Create(Value),
    /// Set a ReplicaSet's `spec.replicas` and these annotations.
    Scale {
        name: String,
        replicas: i64,
        annotations: Map<String, Value>,
    },
    /// Write the Deployment's status, with its revision annotation, through `/status`.
    Status {
        revision: Option<String>,
        status: Value,
    },
}

/// What one sync writes, in order, and when to look again (the progress deadline).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub recheck_in_seconds: Option<i64>,
}

fn int(v: Option<&Value>, default: i64) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(default)
}

fn spec_replicas(o: &Value) -> i64 {
    int(o.pointer("/spec/replicas"), 1)
}

fn status_int(o: &Value, field: &str) -> i64 {
    int(o.pointer(&format!("/status/{field}")), 0)
}

fn revision(o: &Value) -> i64 {
    o.pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// A template without its `pod-template-hash` label, to compare templates by.
fn without_hash(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(labels) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(HASH_LABEL);
    }
    t
}

/// `maxSurge` or `maxUnavailable` of `desired` replicas: a count, or a percentage rounded up
/// (surge) or down (unavailable).
fn scaled(v: Option<&Value>, desired: i64, round_up: bool) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => match s.strip_suffix('%') {
            Some(p) => {
                let percent: i64 = p.parse().unwrap_or(0);
                let scaled = percent * desired;
                if round_up {
                    (scaled + 99) / 100
                } else {
                    scaled / 100
                }
            }
            None => s.parse().unwrap_or(0),
        },
        _ => 0,
    }
}

fn rolling(d: &Value) -> bool {
    d.pointer("/spec/strategy/type").and_then(Value::as_str) != Some("Recreate")
}

/// `maxSurge` and `maxUnavailable` of a rolling update, never both 0.
fn fenceposts(d: &Value) -> (i64, i64) {
    let desired = spec_replicas(d);
    let surge = scaled(
        d.pointer("/spec/strategy/rollingUpdate/maxSurge"),
        desired,
        true,
    );
    let unavailable = scaled(
        d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        desired,
        false,
    );
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn max_unavailable(d: &Value) -> i64 {
    let desired = spec_replicas(d);
    if !rolling(d) || desired == 0 {
        return 0;
    }
    fenceposts(d).1.min(desired)
}

fn max_surge(d: &Value) -> i64 {
    if rolling(d) { fenceposts(d).0 } else { 0 }
}

/// The replicas the new ReplicaSet may have now, given the others' (kube's `NewRSNewReplicas`).
fn new_rs_replicas(d: &Value, others_total: i64, new_now: i64) -> i64 {
    let desired = spec_replicas(d);
    if !rolling(d) {
        return desired;
    }
    let max_total = desired + max_surge(d);
    let current = others_total + new_now;
    if current >= max_total {
        return new_now;
    }
    new_now + (max_total - current).min(desired - new_now)
}

/// A ReplicaSet as the plan sees it: its name, replicas as they will be, its status and
/// creation time.
struct Rs<'a> {
    object: &'a Value,
    replicas: i64,
}

impl Rs<'_> {
    fn name(&self) -> &str {
        self.object.name()
    }
    fn available(&self) -> i64 {
        status_int(self.object, "availableReplicas")
    }
}

/// Decides one sync of a Deployment.
pub fn plan(f: &Facts<'_>) -> Plan {
    let d = f.deployment;
    let template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let collisions = d.pointer("/status/collisionCount").and_then(Value::as_i64);
    let hash = template_hash(&template, collisions);
    let mut sets: Vec<&Value> = f.replica_sets.iter().collect();
    sets.sort_by(|a, b| {
        (a.meta_str("creationTimestamp"), a.name())
            .cmp(&(b.meta_str("creationTimestamp"), b.name()))
    });
    // The ReplicaSet of the current template: by its hash, or by an equal template.
    let current = sets
        .iter()
        .position(|rs| {
            rs.pointer("/spec/template/metadata/labels")
                .and_then(|l| l.get(HASH_LABEL))
                .and_then(Value::as_str)
                == Some(hash.as_str())
        })
        .or_else(|| {
            let want = without_hash(&template);
            sets.iter().position(|rs| {
                rs.pointer("/spec/template").map(without_hash).as_ref() == Some(&want)
            })
        });
    let new_rs = current.map(|i| sets.remove(i));
    let mut old: Vec<Rs> = sets
        .iter()
        .map(|o| Rs {
            object: o,
            replicas: spec_replicas(o),
        })
        .collect();
    let old_total: i64 = old.iter().map(|rs| rs.replicas).sum();
    let max_old_revision = old.iter().map(|rs| revision(rs.object)).max().unwrap_or(0);
    let paused = d.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
    let acting = !d.is_deleting() && !paused;

    let mut plan = Plan::default();
    let mut conditions = d
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let old_running = old.iter().any(|rs| status_int(rs.object, "replicas") > 0);
    // Recreate makes the new ReplicaSet once the old ones have no Pods left.
    let create = acting && new_rs.is_none() && (rolling(d) || (old_total == 0 && !old_running));
    let created = create.then(|| {
        let name = format!("{}-{hash}", d.name());
        let replicas = new_rs_replicas(d, old_total, 0);
        set_condition(
            &mut conditions,
            condition(
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                &format!("Created new replica set {name:?}"),
                f.now,
            ),
        );
        new_replica_set(d, &template, &hash, &name, replicas, max_old_revision + 1)
    });
    if let Some(rs) = &created {
        plan.actions.push(Action::Create(rs.clone()));
    }
    let mut new = new_rs.or(created.as_ref()).map(|o| Rs {
        object: o,
        replicas: spec_replicas(o),
    });
    let mut revision_now = None;
    if acting {
        if let Some(new) = new.as_mut() {
            let wanted = revision(new.object).max(max_old_revision + 1);
            revision_now = Some(wanted.to_string());
            let target = if !rolling(d) {
                if old_running || old_total > 0 {
                    new.replicas
                } else {
                    spec_replicas(d)
                }
            } else if new.replicas > spec_replicas(d) {
                spec_replicas(d)
            } else {
                new_rs_replicas(d, old_total, new.replicas)
            };
            let annotations = replica_set_annotations(d, new.object, wanted);
            let stored = new
                .object
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if target != new.replicas || annotations != stored {
                new.replicas = target;
                plan.actions.push(Action::Scale {
                    name: new.name().to_string(),
                    replicas: target,
                    annotations,
                });
            }
        }
        scale_down_old(d, new.as_ref(), &mut old, &mut plan);
    }

    // The status, from the ReplicaSets as they now are.
    let new_status = status(f, d, new.as_ref(), &old, conditions);
    let mut recheck = None;
    let status = rollout_status(f, d, new.as_ref(), new_status, paused, &mut recheck);
    let stored_revision = d
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str);
    let revision_changed = revision_now
        .as_deref()
        .is_some_and(|r| Some(r) != stored_revision);
    if d.get("status") != Some(&status) || revision_changed {
        plan.actions.push(Action::Status {
            revision: revision_now.filter(|_| revision_changed),
            status,
        });
    }
    plan.recheck_in_seconds = recheck;
    plan
}

/// Scales old ReplicaSets down: all at once for Recreate; for a rolling update as far as the
/// Deployment's availability allows (kube's `reconcileOldReplicaSets`).
fn scale_down_old(d: &Value, new: Option<&Rs<'_>>, old: &mut [Rs<'_>], plan: &mut Plan) {
    let scale = |rs: &mut Rs<'_>, to: i64, plan: &mut Plan| {
        if rs.replicas != to {
            rs.replicas = to;
            let mut annotations = rs
                .object
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            annotations.insert(DESIRED_REPLICAS.into(), json!(spec_replicas(d).to_string()));
            annotations.insert(
                MAX_REPLICAS.into(),
                json!((spec_replicas(d) + max_surge(d)).to_string()),
            );
            plan.actions.push(Action::Scale {
                name: rs.name().to_string(),
                replicas: to,
                annotations,
            });
        }
    };
    if !rolling(d) {
        for rs in old.iter_mut() {
            scale(rs, 0, plan);
        }
        return;
    }
    let old_total: i64 = old.iter().map(|rs| rs.replicas).sum();
    if old_total == 0 {
        return;
    }
    let new_replicas = new.map_or(0, |n| n.replicas);
    let all = old_total + new_replicas;
    let min_available = spec_replicas(d) - max_unavailable(d);
    let new_unavailable = new.map_or(0, |n| (n.replicas - n.available()).max(0));
    let mut budget = all - min_available - new_unavailable;
    if budget <= 0 {
        return;
    }
    // Unhealthy replicas first, oldest ReplicaSets first.
    for rs in old.iter_mut() {
        if budget <= 0 {
            break;
        }
        let unhealthy = (rs.replicas - rs.available()).max(0).min(budget);
        if unhealthy > 0 {
            let to = rs.replicas - unhealthy;
            budget -= unhealthy;
            scale(rs, to, plan);
        }
    }
    // Then available ones, down to the minimum available.
    let available: i64 = old.iter().map(Rs::available).sum::<i64>() + new.map_or(0, Rs::available);
    let mut left = (available - min_available).min(old.iter().map(|rs| rs.replicas).sum());
    for rs in old.iter_mut() {
        if left <= 0 {
            break;
        }
        let down = rs.replicas.min(left);
        if down > 0 {
            left -= down;
            let to = rs.replicas - down;
            scale(rs, to, plan);
        }
    }
}

/// The annotations of the new ReplicaSet: the Deployment's (those copied), its revision, and
/// the replica counts it was scaled for.
fn replica_set_annotations(d: &Value, rs: &Value, revision: i64) -> Map<String, Value> {
    let mut out = rs
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(theirs) = d
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for (k, v) in theirs {
            if !NOT_COPIED.contains(&k.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out.insert(REVISION.into(), json!(revision.to_string()));
    out.insert(DESIRED_REPLICAS.into(), json!(spec_replicas(d).to_string()));
    out.insert(
        MAX_REPLICAS.into(),
        json!((spec_replicas(d) + max_surge(d)).to_string()),
    );
    out
}

/// The ReplicaSet of the Deployment's current template.
fn new_replica_set(
    d: &Value,
    template: &Value,
    hash: &str,
    name: &str,
    replicas: i64,
    revision: i64,
) -> Value {
    let mut template = template.clone();
    let labels = {
        let meta = crate::meta::meta_mut(&mut template);
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        labels[HASH_LABEL] = json!(hash);
        labels.clone()
    };
    let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
    if !selector.is_object() {
        selector = json!({});
    }
    let match_labels = selector
        .as_object_mut()
        .map(|s| s.entry("matchLabels").or_insert_with(|| json!({})));
    if let Some(m) = match_labels.filter(|m| m.is_object()) {
        m[HASH_LABEL] = json!(hash);
    }
    let owner = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": d.name(),
        "uid": d.uid(), "controller": true, "blockOwnerDeletion": true});
    let mut spec = json!({"replicas": replicas, "selector": selector, "template": template});
    if let Some(m) = d
        .pointer("/spec/minReadySeconds")
        .filter(|m| m.as_i64() != Some(0))
    {
        spec["minReadySeconds"] = m.clone();
    }
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": d.namespace(), "labels": labels,
            "annotations": replica_set_annotations(d, &json!({}), revision),
            "ownerReferences": [owner]},
        "spec": spec})
}

fn condition(kind: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": status, "lastUpdateTime": now, "lastTransitionTime": now,
        "reason": reason, "message": message})
}

fn find<'a>(conditions: &'a [Value], kind: &str) -> Option<&'a Value> {
    conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// kube's `SetDeploymentCondition`: unchanged when status and reason are; otherwise the
/// condition moves to the end, keeping its transition time while its status holds.
fn set_condition(conditions: &mut Vec<Value>, mut new: Value) {
    let kind = new["type"].as_str().unwrap_or_default().to_string();
    if let Some(cur) = find(conditions, &kind) {
        if cur.get("status") == new.get("status") && cur.get("reason") == new.get("reason") {
            return;
        }
        if cur.get("status") == new.get("status")
            && let Some(t) = cur.get("lastTransitionTime")
        {
            new["lastTransitionTime"] = t.clone();
        }
    }
    remove_condition(conditions, &kind);
    conditions.push(new);
}

fn remove_condition(conditions: &mut Vec<Value>, kind: &str) {
    conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some(kind));
}

/// kube's `calculateStatus`: counts from the ReplicaSets, and the Available condition.
fn status(
    f: &Facts<'_>,
    d: &Value,
    new: Option<&Rs<'_>>,
    old: &[Rs<'_>],
    mut conditions: Vec<Value>,
) -> Map<String, Value> {
    let all: Vec<(&Value, i64)> = old
        .iter()
        .map(|rs| (rs.object, rs.replicas))
        .chain(new.map(|n| (n.object, n.replicas)))
        .collect();
    let sum = |field: &str| -> i64 { all.iter().map(|(rs, _)| status_int(rs, field)).sum() };
    let available = sum("availableReplicas");
    let total: i64 = all.iter().map(|(_, replicas)| replicas).sum();
    let updated = new.map_or(0, |n| status_int(n.object, "replicas"));
    let mut s = Map::new();
    s.insert(
        "observedGeneration".into(),
        json!(int(d.pointer("/metadata/generation"), 0)),
    );
    let counts = [
        ("replicas", sum("replicas")),
        ("updatedReplicas", updated),
        ("readyReplicas", sum("readyReplicas")),
        ("availableReplicas", available),
        ("unavailableReplicas", (total - available).max(0)),
    ];
    for (field, n) in counts {
        if n != 0 {
            s.insert(field.into(), json!(n));
        }
    }
    s.insert(
        "terminatingReplicas".into(),
        json!(sum("terminatingReplicas")),
    );
    if let Some(c) = d.pointer("/status/collisionCount") {
        s.insert("collisionCount".into(), c.clone());
    }
    let minimum = if available >= spec_replicas(d) - max_unavailable(d) {
        condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            f.now,
        )
    } else {
        condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            f.now,
        )
    };
    set_condition(&mut conditions, minimum);
    s.insert("conditions".into(), Value::Array(conditions));
    s
}

/// kube's `syncRolloutStatus`: the Progressing condition (progress, completion, the progress
/// deadline, a pause), the ReplicaSets' failures, and when to look again for the deadline.
fn rollout_status(
    f: &Facts<'_>,
    d: &Value,
    new: Option<&Rs<'_>>,
    mut s: Map<String, Value>,
    paused: bool,
    recheck: &mut Option<i64>,
) -> Value {
    let mut conditions: Vec<Value> = s
        .remove("conditions")
        .and_then(|c| c.as_array().cloned())
        .unwrap_or_default();
    let new_name = new.map(Rs::name);
    let current = find(&conditions, "Progressing").cloned();
    let reason = |c: &Option<Value>| {
        c.as_ref()
            .and_then(|c| c.get("reason"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let get = |field: &str| s.get(field).and_then(Value::as_i64).unwrap_or(0);
    let old_get = |field: &str| status_int(d, field);
    let desired = spec_replicas(d);
    let deadline = d
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64);
    if paused {
        if reason(&current).as_deref() != Some("DeploymentPaused") {
            set_condition(
                &mut conditions,
                condition(
                    "Progressing",
                    "Unknown",
                    "DeploymentPaused",
                    "Deployment is paused",
                    f.now,
                ),
            );
        }
    } else if reason(&current).as_deref() == Some("DeploymentPaused") {
        set_condition(
            &mut conditions,
            condition(
                "Progressing",
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed",
                f.now,
            ),
        );
    }
    let current = find(&conditions, "Progressing").cloned();
    let complete_before = get("replicas") == get("updatedReplicas")
        && reason(&current).as_deref() == Some("NewReplicaSetAvailable");
    if let Some(deadline) = deadline.filter(|_| !paused && !complete_before) {
        let complete = get("updatedReplicas") == desired
            && get("replicas") == desired
            && get("availableReplicas") == desired
            && get("observedGeneration") >= int(d.pointer("/metadata/generation"), 0);
        let progressing = get("updatedReplicas") > old_get("updatedReplicas")
            || (get("replicas") - get("updatedReplicas"))
                < (old_get("replicas") - old_get("updatedReplicas"))
            || get("readyReplicas") > old_get("readyReplicas")
            || get("availableReplicas") > old_get("availableReplicas");
        let about = |what: &str| match new_name {
            Some(n) => format!("ReplicaSet {n:?} {what}"),
            None => format!("Deployment {:?} {what}", d.name()),
        };
        if complete {
            set_condition(
                &mut conditions,
                condition(
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable",
                    &about("has successfully progressed."),
                    f.now,
                ),
            );
        } else if progressing {
            let mut c = condition(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                &about("is progressing."),
                f.now,
            );
            // Progress moves lastUpdateTime, even with the same reason.
            if let Some(cur) = current.as_ref().filter(|c| c["status"] == "True") {
                c["lastTransitionTime"] = cur["lastTransitionTime"].clone();
            }
            remove_condition(&mut conditions, "Progressing");
            conditions.push(c);
        } else if let Some(cur) = &current {
            let since = cur
                .get("lastUpdateTime")
                .and_then(Value::as_str)
                .and_then(parse_time);
            match reason(&current).as_deref() {
                Some("ProgressDeadlineExceeded") | Some("NewReplicaSetAvailable") => {}
                _ => match since {
                    Some(t) if t + deadline < f.now_seconds => set_condition(
                        &mut conditions,
                        condition(
                            "Progressing",
                            "False",
                            "ProgressDeadlineExceeded",
                            &about("has timed out progressing."),
                            f.now,
                        ),
                    ),
                    Some(t) => *recheck = Some(t + deadline - f.now_seconds + 1),
                    None => {}
                },
            }
        }
    }
    // The ReplicaSets' failures to make or delete Pods show on the Deployment.
    let failure = new
        .map(|n| n.object)
        .into_iter()
        .filter_map(|rs| {
            rs.pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| find(c, "ReplicaFailure").cloned())
        })
        .next();
    match failure {
        Some(rf) => {
            let since = rf.get("lastTransitionTime").cloned();
            let c = json!({"type": "ReplicaFailure", "status": rf["status"],
                "lastUpdateTime": f.now, "lastTransitionTime": since.unwrap_or(json!(f.now)),
                "reason": rf["reason"], "message": rf["message"]});
            set_condition(&mut conditions, c);
        }
        None => remove_condition(&mut conditions, "ReplicaFailure"),
    }
    s.insert("conditions".into(), Value::Array(conditions));
    Value::Object(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": 1,
                "annotations": {"team": "a"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "i:1"}]}},
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}})
    }

    fn facts<'a>(d: &'a Value, rss: &'a [Value], now_seconds: i64) -> Facts<'a> {
        Facts {
            deployment: d,
            replica_sets: rss,
            now: "2026-01-01T00:00:00Z",
            now_seconds,
        }
    }

    const NOW: i64 = 1_767_225_600;

    /// The ReplicaSet a plan creates, as stored, with the Pods its controller counted.
    fn stored(plan: &Plan, pods: i64) -> Value {
        let Some(Action::Create(rs)) = plan.actions.first() else {
            panic!("no ReplicaSet created: {plan:?}")
        };
        let mut rs = rs.clone();
        rs["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        rs["status"] =
            json!({"replicas": pods, "fullyLabeledReplicas": pods, "observedGeneration": 1});
        rs
    }

    fn status_of(plan: &Plan) -> (Option<String>, Value) {
        plan.actions
            .iter()
            .find_map(|a| match a {
                Action::Status { revision, status } => Some((revision.clone(), status.clone())),
                _ => None,
            })
            .expect("a status write")
    }

    #[test]
    fn a_new_deployment_gets_a_replica_set_and_reports_it_as_kube_controller_manager_does() {
        let d = deployment(1);
        let first = plan(&facts(&d, &[], NOW));
        let rs = stored(&first, 0);
        let hash = template_hash(&d["spec"]["template"], None);
        assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
        assert_eq!(
            rs["spec"]["replicas"], 1,
            "max surge lets the one replica start at once"
        );
        assert_eq!(
            rs["metadata"]["labels"],
            json!({"app": "web", "pod-template-hash": hash})
        );
        assert_eq!(
            rs["spec"]["selector"],
            json!({"matchLabels": {"app": "web", "pod-template-hash": hash}})
        );
        assert_eq!(
            rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"],
            hash
        );
        assert_eq!(
            rs["metadata"]["annotations"],
            json!({"team": "a", "deployment.kubernetes.io/revision": "1",
                "deployment.kubernetes.io/desired-replicas": "1",
                "deployment.kubernetes.io/max-replicas": "2"})
        );
        assert_eq!(
            rs["metadata"]["ownerReferences"],
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-uid",
                "controller": true, "blockOwnerDeletion": true}])
        );
        let (revision, status) = status_of(&first);
        assert_eq!(revision.as_deref(), Some("1"));
        assert_eq!(status["observedGeneration"], 1);
        assert_eq!(status["unavailableReplicas"], 1);
        assert_eq!(status.get("replicas"), None, "no Pod counted yet");
        let progressing = find(status["conditions"].as_array().unwrap(), "Progressing").unwrap();
        assert_eq!(progressing["reason"], "NewReplicaSetCreated");
        assert_eq!(
            progressing["message"],
            format!("Created new replica set \"web-{hash}\"")
        );

        // The ReplicaSet counted its Pod: the rollout progresses.
        let rs = stored(&first, 1);
        let mut d2 = d.clone();
        d2["metadata"]["annotations"][REVISION] = json!("1");
        d2["status"] = status;
        let second = plan(&facts(&d2, std::slice::from_ref(&rs), NOW));
        assert_eq!(second.actions.len(), 1, "{:?}", second.actions);
        let (revision, status) = status_of(&second);
        assert_eq!(revision, None, "the revision is recorded already");
        assert_eq!(
            status,
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                "unavailableReplicas": 1, "terminatingReplicas": 0,
                "conditions": [
                    {"type": "Available", "status": "False",
                     "lastUpdateTime": "2026-01-01T00:00:00Z",
                     "lastTransitionTime": "2026-01-01T00:00:00Z",
                     "reason": "MinimumReplicasUnavailable",
                     "message": "Deployment does not have minimum availability."},
                    {"type": "Progressing", "status": "True",
                     "lastUpdateTime": "2026-01-01T00:00:00Z",
                     "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "ReplicaSetUpdated",
                     "message": format!("ReplicaSet \"web-{hash}\" is progressing.")}]})
        );
        // Nothing more to do, until the progress deadline.
        let mut d3 = d2.clone();
        d3["status"] = status;
        let third = plan(&facts(&d3, std::slice::from_ref(&rs), NOW + 5));
        assert_eq!(third.actions, vec![]);
        assert_eq!(third.recheck_in_seconds, Some(596));
        let late = plan(&facts(&d3, std::slice::from_ref(&rs), NOW + 601));
        let (_, status) = status_of(&late);
        let progressing = find(status["conditions"].as_array().unwrap(), "Progressing").unwrap();
        assert_eq!(
            (
                &progressing["status"],
                &progressing["reason"],
                &progressing["message"]
            ),
            (
                &json!("False"),
                &json!("ProgressDeadlineExceeded"),
                &json!(format!(
                    "ReplicaSet \"web-{hash}\" has timed out progressing."
                ))
            )
        );
    }

    #[test]
    fn a_deployment_of_no_replicas_is_complete_and_available() {
        let d = deployment(0);
        let first = plan(&facts(&d, &[], NOW));
        let rs = stored(&first, 0);
        assert_eq!(rs["spec"]["replicas"], 0);
        let (_, status) = status_of(&first);
        let conditions = status["conditions"].as_array().unwrap();
        assert_eq!(
            find(conditions, "Available").unwrap()["reason"],
            "MinimumReplicasAvailable"
        );
        assert_eq!(
            find(conditions, "Progressing").unwrap()["reason"],
            "NewReplicaSetAvailable"
        );
    }

    #[test]
    fn a_changed_template_rolls_out_a_new_replica_set_within_surge_and_availability() {
        let d = deployment(4);
        let first = plan(&facts(&d, &[], NOW));
        let mut old = stored(&first, 4);
        old["spec"]["replicas"] = json!(4);
        old["status"]["availableReplicas"] = json!(4);
        let mut d2 = d.clone();
        d2["spec"]["template"]["spec"]["containers"][0]["image"] = json!("i:2");
        d2["metadata"]["generation"] = json!(2);
        let p = plan(&facts(&d2, std::slice::from_ref(&old), NOW));
        let Some(Action::Create(new)) = p.actions.first() else {
            panic!("{p:?}")
        };
        assert_eq!(new["spec"]["replicas"], 1, "4 + 25% surge: one more Pod");
        assert_eq!(new["metadata"]["annotations"][REVISION], "2");
        // The old ReplicaSet goes down to 3: one unavailable allowed of 4, the new one's Pod
        // not available yet.
        let scaled: Vec<(String, i64)> = p
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Scale { name, replicas, .. } => Some((name.clone(), *replicas)),
                _ => None,
            })
            .collect();
        assert_eq!(scaled, [(old.name().to_string(), 3)]);
    }

    #[test]
    fn without_available_pods_an_old_replica_set_is_not_scaled_down() {
        let d = deployment(1);
        let mut old = stored(&plan(&facts(&d, &[], NOW)), 1);
        old["spec"]["replicas"] = json!(1);
        let mut d2 = d.clone();
        d2["spec"]["template"]["spec"]["containers"][0]["image"] = json!("i:2");
        let p = plan(&facts(&d2, std::slice::from_ref(&old), NOW));
        assert!(
            p.actions.iter().all(|a| !matches!(a, Action::Scale { .. })),
            "{p:?}"
        );
    }

    #[test]
    fn a_deployment_being_deleted_or_paused_makes_no_replica_set() {
        let mut d = deployment(1);
        d["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(
            plan(&facts(&d, &[], NOW))
                .actions
                .iter()
                .all(|a| matches!(a, Action::Status { .. }))
        );
        let mut paused = deployment(1);
        paused["spec"]["paused"] = json!(true);
        let p = plan(&facts(&paused, &[], NOW));
        let (_, status) = status_of(&p);
        assert_eq!(p.actions.len(), 1);
        assert_eq!(
            find(status["conditions"].as_array().unwrap(), "Progressing").unwrap()["reason"],
            "DeploymentPaused"
        );
    }

    #[test]
    fn a_replica_failure_shows_on_the_deployment() {
        let d = deployment(1);
        let mut rs = stored(&plan(&facts(&d, &[], NOW)), 0);
        rs["status"]["conditions"] = json!([{"type": "ReplicaFailure", "status": "True",
            "reason": "FailedCreate", "message": "pods \"web-x\" is forbidden: nope",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        let (_, status) = status_of(&plan(&facts(&d, &[rs], NOW)));
        let failure = find(status["conditions"].as_array().unwrap(), "ReplicaFailure").unwrap();
        assert_eq!(failure["reason"], "FailedCreate");
        assert_eq!(failure["message"], "pods \"web-x\" is forbidden: nope");
    }

    #[test]
    fn surge_rounds_up_and_unavailability_down_never_both_zero() {
        let mut d = deployment(10);
        assert_eq!(fenceposts(&d), (3, 2));
        d["spec"]["strategy"]["rollingUpdate"] = json!({"maxSurge": 0, "maxUnavailable": "5%"});
        assert_eq!(fenceposts(&d), (0, 1));
        d["spec"]["strategy"] = json!({"type": "Recreate"});
        assert_eq!((max_surge(&d), max_unavailable(&d)), (0, 0));
    }
}
