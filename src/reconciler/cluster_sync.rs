//! What the Spoke says its ManagedCluster carries: labels, lease duration and taints.
//!
//! Other writers share those fields (the agent, the lease loop's availability taints, people with
//! kubectl), so the reconciler only owns the labels and taints it put there itself. It remembers
//! their keys in two annotations on the ManagedCluster; a key that leaves the Spoke is removed,
//! anything else is left alone.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use serde_json::{Value, json};

use crate::api::ManagedCluster;
use crate::api::cluster::Taint;
use crate::api::fleet::{SpokeTaint, TaintEffect};

/// Annotation on a ManagedCluster: the label keys the Spoke put there.
pub const ANNOTATION_SPOKE_LABELS: &str = "fleetform.io/spoke-labels";
/// Annotation on a ManagedCluster: the taint keys the Spoke put there.
pub const ANNOTATION_SPOKE_TAINTS: &str = "fleetform.io/spoke-taints";

/// What the Spoke wants on its ManagedCluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedCluster<'a> {
    pub labels: &'a BTreeMap<String, String>,
    pub lease_duration_seconds: i32,
    pub taints: &'a [SpokeTaint],
}

fn owned_keys(cluster: &ManagedCluster, annotation: &str) -> BTreeSet<String> {
    cluster
        .annotations()
        .get(annotation)
        .map(|keys| {
            keys.split(',')
                .filter(|key| !key.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn join_keys<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    keys.map(String::as_str).collect::<Vec<_>>().join(",")
}

/// Whether the ManagedCluster differs from what the Spoke wants.
pub fn drifted(cluster: &ManagedCluster, wanted: &WantedCluster<'_>) -> bool {
    let labels = cluster.labels();
    let label_drift = wanted
        .labels
        .iter()
        .any(|(key, value)| labels.get(key) != Some(value))
        || owned_keys(cluster, ANNOTATION_SPOKE_LABELS)
            .iter()
            .any(|key| !wanted.labels.contains_key(key) && labels.contains_key(key));
    let taint_drift = wanted.taints.iter().any(|want| {
        !cluster.spec.taints.iter().any(|have| {
            have.key == want.key && have.value == want.value && have.effect == want.effect
        })
    }) || owned_keys(cluster, ANNOTATION_SPOKE_TAINTS)
        .iter()
        .any(|key| {
            !wanted.taints.iter().any(|want| &want.key == key)
                && cluster.spec.taints.iter().any(|have| &have.key == key)
        });
    label_drift
        || taint_drift
        || cluster.spec.lease_duration_seconds != Some(wanted.lease_duration_seconds)
}

/// The merge patch that brings the ManagedCluster in line, with `hubAcceptsClient` when
/// accepting. When the Spoke's taints change, it replaces the taint list others write too (the
/// hub's availability taints), so it is guarded by the resourceVersion; otherwise the list is
/// left out and so is the guard: labels and annotations merge key by key, the rest are the
/// reconciler's alone, and a joining cluster's taints change under it (a 409 Conflict and a
/// pass more for one spoke in two). Taints already there keep their `timeAdded`; new ones carry
/// none: the server sets it (OCM's webhook refuses one from a client).
pub fn patch(cluster: &ManagedCluster, wanted: &WantedCluster<'_>, accept: bool) -> Value {
    let mut labels = serde_json::Map::new();
    for key in owned_keys(cluster, ANNOTATION_SPOKE_LABELS) {
        if !wanted.labels.contains_key(&key) {
            labels.insert(key, Value::Null);
        }
    }
    for (key, value) in wanted.labels {
        labels.insert(key.clone(), json!(value));
    }
    let dropped = owned_keys(cluster, ANNOTATION_SPOKE_TAINTS);
    let mut taints: Vec<Taint> = cluster
        .spec
        .taints
        .iter()
        .filter(|taint| {
            !dropped.contains(&taint.key) && !wanted.taints.iter().any(|w| w.key == taint.key)
        })
        .cloned()
        .collect();
    for want in wanted.taints {
        let kept = cluster.spec.taints.iter().find(|have| {
            have.key == want.key && have.value == want.value && have.effect == want.effect
        });
        taints.push(kept.cloned().unwrap_or_else(|| Taint {
            key: want.key.clone(),
            value: want.value.clone(),
            effect: want.effect,
            time_added: None,
        }));
    }
    let mut spec = json!({"leaseDurationSeconds": wanted.lease_duration_seconds});
    if accept {
        spec["hubAcceptsClient"] = json!(true);
    }
    let mut patch = json!({
        "metadata": {
            "labels": labels,
            "annotations": {
                ANNOTATION_SPOKE_LABELS: join_keys(wanted.labels.keys()),
                ANNOTATION_SPOKE_TAINTS: join_keys(wanted.taints.iter().map(|t| &t.key)),
            },
        },
        "spec": spec,
    });
    if taints != cluster.spec.taints {
        patch["spec"]["taints"] = json!(taints);
        patch["metadata"]["resourceVersion"] = json!(cluster.resource_version());
    }
    patch
}

/// The merge patch adding the taint `key` (effect NoSelect, `timeAdded` the server's) unless it
/// is there.
pub fn add_taint(cluster: &ManagedCluster, key: &str) -> Option<Value> {
    if cluster.spec.taints.iter().any(|taint| taint.key == key) {
        return None;
    }
    let mut taints = cluster.spec.taints.clone();
    taints.push(Taint {
        key: key.to_string(),
        value: None,
        effect: TaintEffect::NoSelect,
        time_added: None,
    });
    Some(json!({
        "metadata": {"resourceVersion": cluster.resource_version()},
        "spec": {"taints": taints},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::cluster::ManagedClusterSpec;

    fn cluster(patch: Option<&Value>) -> ManagedCluster {
        let mut cluster = ManagedCluster::new("spoke", ManagedClusterSpec::default());
        if let Some(patch) = patch {
            let mut value = serde_json::to_value(&cluster).unwrap();
            json_merge(&mut value, patch);
            cluster = serde_json::from_value(value).unwrap();
        }
        cluster
    }

    fn json_merge(target: &mut Value, patch: &Value) {
        match (target, patch) {
            (Value::Object(target), Value::Object(patch)) => {
                for (key, value) in patch {
                    if value.is_null() {
                        target.remove(key);
                    } else {
                        json_merge(target.entry(key.clone()).or_insert(Value::Null), value);
                    }
                }
            }
            (target, patch) => *target = patch.clone(),
        }
    }

    #[test]
    fn applying_the_patch_settles_and_a_dropped_label_or_taint_is_removed_alone() {
        let labels = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let taints = vec![SpokeTaint {
            key: "gpu".into(),
            value: None,
            effect: TaintEffect::NoSelect,
        }];
        let wanted = WantedCluster {
            labels: &labels,
            lease_duration_seconds: 10,
            taints: &taints,
        };
        // Someone else's label and taint are there already.
        let mut start: ManagedCluster = cluster(Some(&json!({
            "metadata": {"labels": {"team": "a"}},
            "spec": {"taints": [{"key": "other", "effect": "NoSelect"}]},
        })));
        assert!(drifted(&start, &wanted));
        let mut value = serde_json::to_value(&start).unwrap();
        json_merge(&mut value, &patch(&start, &wanted, true));
        start = serde_json::from_value(value).unwrap();
        assert!(!drifted(&start, &wanted));
        assert!(start.hub_accepts_client());
        assert_eq!(start.labels().get("team").map(String::as_str), Some("a"));

        let none = BTreeMap::new();
        let dropped = WantedCluster {
            labels: &none,
            lease_duration_seconds: 10,
            taints: &[],
        };
        assert!(drifted(&start, &dropped));
        let mut value = serde_json::to_value(&start).unwrap();
        json_merge(&mut value, &patch(&start, &dropped, false));
        let after: ManagedCluster = serde_json::from_value(value).unwrap();
        assert!(!drifted(&after, &dropped));
        assert!(!after.labels().contains_key("env"));
        assert_eq!(after.labels().get("team").map(String::as_str), Some("a"));
        let keys: Vec<_> = after.spec.taints.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["other"]);
    }

    #[test]
    fn only_a_patch_that_replaces_the_taints_is_guarded_by_the_resource_version() {
        let labels = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let mut start = cluster(Some(&json!({
            "metadata": {"resourceVersion": "7"},
            "spec": {"taints": [{"key": "cluster.open-cluster-management.io/unreachable",
                                 "effect": "NoSelect"}]},
        })));
        let untainted = WantedCluster {
            labels: &labels,
            lease_duration_seconds: 10,
            taints: &[],
        };
        // The hub's availability taint is not the Spoke's: left to its writer, unguarded.
        let accept = patch(&start, &untainted, true);
        assert!(accept["spec"].get("taints").is_none(), "{accept}");
        assert!(
            accept["metadata"].get("resourceVersion").is_none(),
            "{accept}"
        );
        let mut value = serde_json::to_value(&start).unwrap();
        json_merge(&mut value, &accept);
        start = serde_json::from_value(value).unwrap();
        assert!(!drifted(&start, &untainted));
        assert_eq!(start.spec.taints.len(), 1);

        let gpu = [SpokeTaint {
            key: "gpu".into(),
            value: None,
            effect: TaintEffect::NoSelect,
        }];
        let tainted = WantedCluster {
            taints: &gpu,
            ..untainted
        };
        let taint = patch(&start, &tainted, false);
        assert_eq!(taint["metadata"]["resourceVersion"], "7", "{taint}");
        assert_eq!(taint["spec"]["taints"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn a_lease_duration_change_is_drift() {
        let labels = BTreeMap::new();
        let mut wanted = WantedCluster {
            labels: &labels,
            lease_duration_seconds: 60,
            taints: &[],
        };
        let start = cluster(Some(&patch(&cluster(None), &wanted, false)));
        assert!(!drifted(&start, &wanted));
        wanted.lease_duration_seconds = 5;
        assert!(drifted(&start, &wanted));
    }

    #[test]
    fn add_taint_is_idempotent() {
        let start = cluster(None);
        let patched = add_taint(&start, "fleetform.io/terminating").unwrap();
        let tainted = cluster(Some(&patched));
        assert!(add_taint(&tainted, "fleetform.io/terminating").is_none());
    }
}
