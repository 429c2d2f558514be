//! OCM's ManagedCluster admission webhooks, as in-process admission plugins of every control
//! plane fleetform starts (see [`crate::embedded`]). On a real hub OCM's registration webhook
//! does the same, if it is installed; fleetform itself never relies on either (the accept loop
//! accepts only what git declares, whoever set `hubAcceptsClient`).
//!
//! Like OCM's, both plugins look at creates and updates of `managedclusters` itself, never at
//! its `status` subresource or at deletes:
//!
//! - [`ManagedClusterMutator`] (OCM's `managedclustermutators` webhook): a taint's `timeAdded`
//!   is the server's. On create every taint gets the time of the request, whatever the client
//!   sent; on update a new or changed taint gets it and may not carry one, and an unchanged
//!   taint must keep the one it has.
//! - [`ManagedClusterValidator`] (OCM's `managedclustervalidators` webhook): the name is a
//!   DNS-1123 label (it names the cluster's namespace), every `managedClusterClientConfigs` URL
//!   is HTTPS, `hubAcceptsClient` becomes true only for a user who may `update`
//!   `managedclusters/accept` in `register.open-cluster-management.io` (so a spoke can neither
//!   accept itself nor re-accept after a denial), and the clusterset label
//!   `cluster.open-cluster-management.io/clusterset` is set, changed or removed only by a user
//!   who may `create` `managedclustersets/join` on the set it leaves and the set it joins.
//!
//! Where they depart from OCM's webhook: the name is checked on every write (OCM checks it only
//! alongside client configs); accepting does not check whether the cluster's namespace is
//! terminating (a plugin reads no other object); and no `clusterset: default` label is added
//! (OCM's `DefaultClusterSet` feature needs the `default` ManagedClusterSet its hub controller
//! keeps, which fleetform does not run).

use fleetform_controlplane::admission::{
    AdmissionPlugin, AdmissionRequest, Denial, Operation, ResourceAccess,
};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::api::vocabulary::LABEL_CLUSTER_SET;

/// OCM's API group of ManagedClusters and ManagedClusterSets.
const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
/// The API group OCM's webhook asks about for accepting a cluster (a virtual resource: RBAC
/// rules name it, nothing serves it).
pub const ACCEPT_GROUP: &str = "register.open-cluster-management.io";
/// Name of the mutating plugin (OCM's webhook's).
pub const MUTATOR_NAME: &str =
    "managedclustermutators.admission.cluster.open-cluster-management.io";
/// Name of the validating plugin (OCM's webhook's).
pub const VALIDATOR_NAME: &str = crate::hub::acceptance::OCM_MANAGED_CLUSTER_VALIDATOR;

/// Whether `request` is one OCM's ManagedCluster webhooks are registered for, with the object
/// written.
fn managed_cluster_write<'r>(request: &'r AdmissionRequest<'_>) -> Option<&'r Value> {
    let write = matches!(request.operation, Operation::Create | Operation::Update);
    let ours = request.group == CLUSTER_GROUP
        && request.resource == "managedclusters"
        && request.subresource.is_empty();
    if write && ours {
        request.object.as_ref()
    } else {
        None
    }
}

/// Sets taints' `timeAdded` as OCM's mutating webhook does.
#[derive(Debug, Clone, Copy, Default)]
pub struct ManagedClusterMutator;

impl AdmissionPlugin for ManagedClusterMutator {
    fn name(&self) -> &str {
        MUTATOR_NAME
    }

    fn admit(&self, request: &mut AdmissionRequest<'_>) -> Result<(), Denial> {
        if managed_cluster_write(request).is_none() {
            return Ok(());
        }
        let old = request.old_object;
        let Some(object) = request.object.as_mut() else {
            return Ok(());
        };
        stamp_taints(object, old, Timestamp::now()).map_err(|keys| {
            Denial::bad_request(format!(
                "It is not allowed to set TimeAdded of Taint {:?}.",
                keys.join(",")
            ))
        })
    }
}

/// Gives the taints of `object` the `timeAdded` the server owns (see the module docs); `old` is
/// the stored object of an update. On refusal, the keys of the taints whose `timeAdded` the
/// client may not set.
pub fn stamp_taints(
    object: &mut Value,
    old: Option<&Value>,
    now: Timestamp,
) -> Result<(), Vec<String>> {
    let now = Value::String(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    let Some(taints) = object
        .pointer_mut("/spec/taints")
        .and_then(Value::as_array_mut)
    else {
        return Ok(());
    };
    let mut refused = Vec::new();
    for taint in taints.iter_mut() {
        let Some(fields) = taint.as_object_mut() else {
            continue;
        };
        let key = fields
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let sent = time_added(fields.get("timeAdded"));
        let Some(old) = old else {
            fields.insert("timeAdded".to_string(), now.clone());
            continue;
        };
        let stored = old
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|stored| stored.get("key").and_then(Value::as_str) == Some(key));
        match stored {
            Some(stored) if same_taint(stored, fields) => {
                if time_added(stored.get("timeAdded")) != sent {
                    refused.push(key.to_string());
                }
            }
            _ if sent.is_some() => refused.push(key.to_string()),
            _ => {
                fields.insert("timeAdded".to_string(), now.clone());
            }
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(refused)
    }
}

/// A taint's `timeAdded` as an instant; `None` when unset (absent, `null`, or Go's zero time).
fn time_added(value: Option<&Value>) -> Option<Timestamp> {
    let text = value?.as_str()?;
    let instant: Timestamp = text.parse().ok()?;
    (instant.as_second() > GO_ZERO_TIME_SECOND).then_some(instant)
}

/// Go's zero time, 0001-01-01T00:00:00Z, which a Go client may send for "unset".
const GO_ZERO_TIME_SECOND: i64 = -62_135_596_800;

/// Whether a stored taint and a written one have the same value and effect (an absent value is
/// the empty one, as in Go).
fn same_taint(stored: &Value, written: &serde_json::Map<String, Value>) -> bool {
    let text = |value: Option<&Value>| {
        value
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    text(stored.get("value")) == text(written.get("value"))
        && text(stored.get("effect")) == text(written.get("effect"))
}

/// Checks names, client config URLs, acceptance and clusterset changes as OCM's validating
/// webhook does.
#[derive(Debug, Clone, Copy, Default)]
pub struct ManagedClusterValidator;

impl AdmissionPlugin for ManagedClusterValidator {
    fn name(&self) -> &str {
        VALIDATOR_NAME
    }

    fn admit(&self, request: &mut AdmissionRequest<'_>) -> Result<(), Denial> {
        let Some(object) = managed_cluster_write(request) else {
            return Ok(());
        };
        let problems = object_problems(request.name, object);
        if !problems.is_empty() {
            return Err(Denial::bad_request(problems.join("\n")));
        }
        let user = request.user;
        let accepts = |cluster: &Value| {
            cluster
                .pointer("/spec/hubAcceptsClient")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let becomes_accepted = accepts(object) && !request.old_object.is_some_and(accepts);
        if becomes_accepted {
            let access = ResourceAccess {
                verb: "update",
                group: ACCEPT_GROUP,
                resource: "managedclusters",
                subresource: "accept",
                namespace: "",
                name: request.name,
            };
            if !request.authorizer.allowed(user, &access) {
                return Err(Denial::forbidden(format!(
                    "managedclusters/accept.{CLUSTER_GROUP} {:?} is forbidden: user {:?} cannot update the HubAcceptsClient field",
                    request.name, user.name
                )));
            }
        }
        let cluster_set = |cluster: &Value| {
            cluster
                .pointer("/metadata/labels")
                .and_then(|labels| labels.get(LABEL_CLUSTER_SET))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let leaving = request.old_object.map(cluster_set).unwrap_or_default();
        let joining = cluster_set(object);
        if leaving == joining {
            return Ok(());
        }
        for set in [leaving, joining].iter().filter(|set| !set.is_empty()) {
            let access = ResourceAccess {
                verb: "create",
                group: CLUSTER_GROUP,
                resource: "managedclustersets",
                subresource: "join",
                namespace: "",
                name: set,
            };
            if !request.authorizer.allowed(user, &access) {
                return Err(Denial::forbidden(format!(
                    "managedclustersets/join.{CLUSTER_GROUP} {set:?} is forbidden: user {:?} cannot add/remove a ManagedCluster to/from ManagedClusterSet {set:?}",
                    user.name
                )));
            }
        }
        Ok(())
    }
}

/// What is wrong with a ManagedCluster's name and client configs, one line each.
pub fn object_problems(name: &str, cluster: &Value) -> Vec<String> {
    let mut problems: Vec<String> = crate::fleet::names::dns1123_label_error(name)
        .map(|error| format!("metadata.name format is not correct: {error}"))
        .into_iter()
        .collect();
    let urls = cluster
        .pointer("/spec/managedClusterClientConfigs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|config| {
            config
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default()
        });
    for url in urls {
        if !is_https_url(url) {
            problems.push(format!("url {url:?} is invalid in client configs"));
        }
    }
    problems
}

fn is_https_url(url: &str) -> bool {
    http::Uri::try_from(url).is_ok_and(|uri| uri.scheme_str() == Some("https"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn cluster(taints: Value) -> Value {
        json!({"metadata": {"name": "c1"}, "spec": {"taints": taints}})
    }

    #[test]
    fn created_taints_get_the_servers_time_whatever_the_client_sent() {
        let mut created = cluster(json!([
            {"key": "a", "effect": "NoSelect", "timeAdded": "2000-01-01T00:00:00Z"},
            {"key": "b", "effect": "NoSelect"},
        ]));
        stamp_taints(&mut created, None, at(1_800_000_000)).unwrap();
        for taint in created["spec"]["taints"].as_array().unwrap() {
            assert_eq!(taint["timeAdded"], "2027-01-15T08:00:00Z");
        }
    }

    #[test]
    fn updates_keep_unchanged_taints_stamp_new_ones_and_refuse_client_times() {
        let stored = cluster(json!([
            {"key": "kept", "effect": "NoSelect", "timeAdded": "2026-01-01T00:00:00Z"},
            {"key": "changed", "effect": "NoSelect", "timeAdded": "2026-01-01T00:00:00Z"},
        ]));
        let mut written = cluster(json!([
            {"key": "kept", "effect": "NoSelect", "timeAdded": "2026-01-01T00:00:00Z"},
            {"key": "changed", "value": "v", "effect": "NoSelect"},
            {"key": "new", "effect": "NoSelect", "timeAdded": null},
        ]));
        stamp_taints(&mut written, Some(&stored), at(1_800_000_000)).unwrap();
        let times: Vec<&Value> = written["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|taint| &taint["timeAdded"])
            .collect();
        assert_eq!(
            times,
            [
                "2026-01-01T00:00:00Z",
                "2027-01-15T08:00:00Z",
                "2027-01-15T08:00:00Z"
            ]
        );

        let mut forged = cluster(json!([
            {"key": "kept", "effect": "NoSelect", "timeAdded": "2025-01-01T00:00:00Z"},
            {"key": "new", "effect": "NoSelect", "timeAdded": "2026-06-01T00:00:00Z"},
            {"key": "changed", "value": "v", "effect": "NoSelect", "timeAdded": "2026-01-01T00:00:00Z"},
        ]));
        assert_eq!(
            stamp_taints(&mut forged, Some(&stored), at(1_800_000_000)),
            Err(vec!["kept".into(), "new".into(), "changed".into()])
        );
    }

    #[test]
    fn names_must_be_labels_and_client_configs_https() {
        let ok = json!({"spec": {"managedClusterClientConfigs": [{"url": "https://spoke:6443"}]}});
        assert!(object_problems("spoke-a", &ok).is_empty());
        let bad = json!({"spec": {"managedClusterClientConfigs": [
            {"url": "http://spoke:6443"}, {"url": ""}, {"url": "https://spoke:6443"},
        ]}});
        let problems = object_problems("Spoke.A", &bad);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("metadata.name format is not correct"));
        assert_eq!(
            problems[1],
            "url \"http://spoke:6443\" is invalid in client configs"
        );
    }
}
