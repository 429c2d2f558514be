//! kube-apiserver's built-in admission of what holds a pod, as its clients see it: a new Pod
//! gets its ServiceAccount (and the `kube-api-access-*` token volume every container mounts),
//! its priority and the default tolerations of unready and unreachable nodes; and PodSecurity
//! holds pods, pod templates and namespace labels to the namespace's levels (see
//! [`crate::podsecurity`]).
//!
//! Which resources this concerns is their strategy's
//! ([`crate::resource::ResourceStrategy::pod_admission`]). What is added to a new Pod is added
//! after its managed fields are recorded, as kube-apiserver's mutating admission runs after its
//! field manager; PodSecurity runs last, on the object as it would be stored. Both run for dry
//! runs too, and for every client, administrators included; the server's own controllers write
//! without them.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::meta::{ObjectMeta, random_suffix};
use crate::objects::{kind_subject, subject};
use crate::podsecurity::{self, LabelChange, Verdict};
use crate::resource::{PodAdmission, ResourceInfo};
use crate::storage::Store;

/// Where a ServiceAccount's token, CA and namespace are mounted in every container.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The prefix of the projected volume that holds them.
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";
/// The lifetime kube-apiserver gives the projected token (an hour, and a few seconds that tell
/// its own tokens apart).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
const PRIORITY_CLASSES: &str = "scheduling.k8s.io/priorityclasses";
/// The two PriorityClasses kube-apiserver always knows, whether or not they are stored.
const SYSTEM_PRIORITIES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];
/// How often, and how far apart, the `default` ServiceAccount is looked for before a Pod is
/// refused: the serviceaccount controller makes it just after its namespace.
const DEFAULT_ACCOUNT_ATTEMPTS: u32 = 10;

/// What admitting a new Pod reads from the store: its ServiceAccount and the PriorityClasses.
#[derive(Debug, Clone)]
pub struct NewPodFacts {
    service_account: Result<Arc<Value>, String>,
    priority_class: PriorityClassFact,
}

#[derive(Debug, Clone)]
enum PriorityClassFact {
    /// The pod names a class: the stored one, if any.
    Named(Option<Arc<Value>>),
    /// The pod names none: the cluster's global default class, if any.
    GlobalDefault(Option<Arc<Value>>),
}

/// Reads what admitting `pod` in `namespace` needs. A missing `default` ServiceAccount is looked
/// for again for a while, as kube-apiserver does, since the serviceaccount controller makes it
/// just after the namespace.
pub async fn new_pod_facts(store: &Store, namespace: &str, pod: &Value) -> NewPodFacts {
    let account = service_account_name(pod);
    let mut service_account = store.get("/serviceaccounts", namespace, &account);
    let attempts = if account == "default" {
        DEFAULT_ACCOUNT_ATTEMPTS
    } else {
        1
    };
    for _ in 1..attempts {
        if service_account.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100 + rand::random::<u64>() % 100)).await;
        service_account = store.get("/serviceaccounts", namespace, &account);
    }
    let class = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    let priority_class = match class {
        Some(name) => PriorityClassFact::Named(store.get(PRIORITY_CLASSES, "", name)),
        None => PriorityClassFact::GlobalDefault(global_default_class(store)),
    };
    NewPodFacts {
        service_account: service_account
            .ok_or_else(|| format!("serviceaccount {account:?} not found")),
        priority_class,
    }
}

/// The global default PriorityClass; of several, the lowest.
fn global_default_class(store: &Store) -> Option<Arc<Value>> {
    let (_, classes) = store.select(PRIORITY_CLASSES, Some(""), &[]);
    classes
        .iter()
        .map(|raw| crate::storage::decode(raw))
        .filter(|c| c.get("globalDefault").and_then(Value::as_bool) == Some(true))
        .min_by_key(|c| c.get("value").and_then(Value::as_i64).unwrap_or(0))
        .map(Arc::new)
}

fn service_account_name(pod: &Value) -> String {
    ["serviceAccountName", "serviceAccount"]
        .iter()
        .filter_map(|f| pod.pointer(&format!("/spec/{f}")).and_then(Value::as_str))
        .find(|n| !n.is_empty())
        .unwrap_or("default")
        .to_string()
}

/// What kube-apiserver's mutating admission adds to a new Pod: the ServiceAccount (and, unless
/// the pod or the account opts out, the token volume each container mounts, and the account's
/// image pull secrets), the priority and preemption policy of its PriorityClass, and the
/// tolerations of unready and unreachable nodes for five minutes. Refused (403) as
/// kube-apiserver refuses it when the ServiceAccount or the PriorityClass is missing or the pod
/// sets a priority of its own.
pub fn admit_new_pod(info: &ResourceInfo, pod: &mut Value, facts: &NewPodFacts) -> ApiResult<()> {
    let name = pod.name().to_string();
    let namespace = pod.namespace().to_string();
    let forbidden = |reason: String| ApiError::Forbidden {
        subject: subject(info, &name),
        message: format!("pods {name:?} is forbidden: {reason}"),
        cause: None,
    };
    let account = service_account_name(pod);
    let service_account = facts.service_account.as_ref().map_err(|e| {
        forbidden(format!(
            "error looking up service account {namespace}/{account}: {e}"
        ))
    })?;
    let (priority, preemption, class_name) =
        priority(pod, &facts.priority_class).map_err(forbidden)?;
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    if automounts(spec, service_account) {
        mount_token(spec);
    }
    if spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
        && let Some(secrets) = service_account
            .get("imagePullSecrets")
            .and_then(Value::as_array)
            .filter(|s| !s.is_empty())
    {
        let names: Vec<Value> = secrets
            .iter()
            .map(|s| json!({"name": s.get("name").cloned().unwrap_or(json!(""))}))
            .collect();
        spec.insert("imagePullSecrets".into(), Value::Array(names));
    }
    if let Some(class) = class_name {
        spec.insert("priorityClassName".into(), json!(class));
    }
    spec.insert("priority".into(), json!(priority));
    spec.insert("preemptionPolicy".into(), json!(preemption));
    default_tolerations(spec);
    Ok(())
}

/// The pod's choice wins, then the account's; a token is mounted unless either says no.
fn automounts(spec: &Map<String, Value>, account: &Value) -> bool {
    spec.get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            account
                .get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true)
}

/// Every container without a mount at the token path mounts the `kube-api-access-*` volume,
/// which is added when one does.
fn mount_token(spec: &mut Map<String, Value>) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .find(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
        .map(str::to_string);
    let volume = existing
        .clone()
        .unwrap_or_else(|| format!("{TOKEN_VOLUME_PREFIX}{}", random_suffix()));
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            if mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
            {
                continue;
            }
            mounts.push(json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}));
            mounted = true;
        }
    }
    if mounted && existing.is_none() {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if let Some(volumes) = volumes.as_array_mut() {
            volumes.push(json!({"name": volume, "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                        "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ],
                "defaultMode": 420}}));
        }
    }
}

/// The pod's priority, preemption policy and (when a global default gave it) class name, as
/// the Priority admission plugin resolves them; the reason it refuses the pod otherwise.
fn priority(
    pod: &Value,
    class: &PriorityClassFact,
) -> Result<(i64, String, Option<String>), String> {
    let asked = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let preempt = |c: &Value| {
        c.get("preemptionPolicy")
            .and_then(Value::as_str)
            .unwrap_or("PreemptLowerPriority")
            .to_string()
    };
    let value = |c: &Value| c.get("value").and_then(Value::as_i64).unwrap_or(0);
    let (priority, preemption, name) = match class {
        PriorityClassFact::GlobalDefault(None) => (0, "PreemptLowerPriority".to_string(), None),
        PriorityClassFact::GlobalDefault(Some(c)) => {
            (value(c), preempt(c), Some(c.name().to_string()))
        }
        PriorityClassFact::Named(Some(c)) => (value(c), preempt(c), None),
        PriorityClassFact::Named(None) => match SYSTEM_PRIORITIES.iter().find(|(n, _)| *n == asked)
        {
            Some((_, v)) => (*v, "PreemptLowerPriority".to_string(), None),
            None => return Err(format!("no PriorityClass with name {asked} was found")),
        },
    };
    if let Some(given) = pod.pointer("/spec/priority").and_then(Value::as_i64)
        && given != priority
    {
        return Err(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        ));
    }
    if let Some(given) = pod
        .pointer("/spec/preemptionPolicy")
        .and_then(Value::as_str)
        && given != preemption
    {
        return Err(format!(
            "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {preemption} from the given PriorityClass name"
        ));
    }
    Ok((priority, preemption, name))
}

/// Tolerates unready and unreachable nodes for five minutes, unless the pod already tolerates
/// them (by key, or every key) for `NoExecute` (or every effect).
fn default_tolerations(spec: &mut Map<String, Value>) {
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = tolerations.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = list.iter().any(|t| {
            let field = |f: &str| t.get(f).and_then(Value::as_str).unwrap_or("");
            (field("key") == key || field("key").is_empty())
                && (field("effect") == "NoExecute" || field("effect").is_empty())
        });
        if !tolerated {
            list.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}),
            );
        }
    }
}

/// A Pod's subresources PodSecurity leaves alone (none of them changes what it judges).
const UNJUDGED_POD_PARTS: &[&str] = &[
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// PodSecurity's verdict on a write of `obj` (`old` when it is an update) through `info`'s
/// `subresource`, in `namespace`: the warnings to answer with, or kube-apiserver's refusal —
/// 403 for a Pod that violates its namespace's `enforce` level, 422 for a Namespace whose labels
/// name no level. A Namespace given a stricter `enforce` level is warned about the pods it holds.
pub fn pod_security(
    store: &Store,
    info: &ResourceInfo,
    subresource: &str,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let Some(role) = info.strategy.pod_admission() else {
        return Ok(Vec::new());
    };
    match role {
        PodAdmission::Namespace => namespace_labels(store, info, subresource, obj, old),
        PodAdmission::Pod if UNJUDGED_POD_PARTS.contains(&subresource) => Ok(Vec::new()),
        PodAdmission::Pod => {
            if old.is_some_and(|old| !podsecurity::significant_pod_update(old, obj)) {
                return Ok(Vec::new());
            }
            let name = obj.name();
            let Some(namespace) = store.get("/namespaces", "", obj.namespace()) else {
                return Err(ApiError::Internal(format!(
                    "failed to lookup namespace {:?}",
                    obj.namespace()
                )));
            };
            let (policy, _) = podsecurity::policy(podsecurity::labels(&namespace));
            let empty = json!({});
            let verdict = podsecurity::judge(
                &policy,
                obj.get("metadata").unwrap_or(&empty),
                obj.get("spec").unwrap_or(&empty),
                true,
            );
            match verdict {
                Verdict::Admitted(warnings) => Ok(warnings),
                Verdict::Refused(reason) => Err(ApiError::Forbidden {
                    subject: subject(info, name),
                    message: format!("pods {name:?} is forbidden: {reason}"),
                    cause: None,
                }),
            }
        }
        PodAdmission::Template(_) if !subresource.is_empty() => Ok(Vec::new()),
        PodAdmission::Template(at) => {
            let (Some(namespace), Some(template)) = (
                store.get("/namespaces", "", obj.namespace()),
                obj.pointer(at),
            ) else {
                return Ok(Vec::new());
            };
            let (policy, _) = podsecurity::policy(podsecurity::labels(&namespace));
            let (metadata, spec) = podsecurity::template_parts(template);
            match podsecurity::judge(&policy, metadata, spec, false) {
                Verdict::Admitted(warnings) => Ok(warnings),
                Verdict::Refused(_) => Ok(Vec::new()),
            }
        }
    }
}

fn namespace_labels(
    store: &Store,
    info: &ResourceInfo,
    subresource: &str,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    if !subresource.is_empty() {
        return Ok(Vec::new());
    }
    let change = podsecurity::label_change(podsecurity::labels(obj), old.map(podsecurity::labels));
    match change {
        LabelChange::Invalid(errors) => {
            Err(ApiError::invalid(kind_subject(info, obj.name()), errors))
        }
        LabelChange::Admitted(None) => Ok(Vec::new()),
        LabelChange::Admitted(Some(enforce)) => {
            let (_, pods) = store.select("/pods", Some(obj.name()), &[]);
            let pods: Vec<Value> = pods.iter().map(|raw| crate::storage::decode(raw)).collect();
            Ok(podsecurity::existing_pod_warnings(
                obj.name(),
                enforce,
                &pods,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn pods() -> Arc<ResourceInfo> {
        Registry::with_builtins().lookup("", "v1", "pods").unwrap()
    }

    fn facts(account: Value) -> NewPodFacts {
        NewPodFacts {
            service_account: Ok(Arc::new(account)),
            priority_class: PriorityClassFact::GlobalDefault(None),
        }
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
    }

    #[test]
    fn a_new_pod_gets_its_account_priority_and_tolerations() {
        let mut p = pod(json!({"automountServiceAccountToken": false,
            "containers": [{"name": "c", "image": "i"}]}));
        admit_new_pod(
            &pods(),
            &mut p,
            &facts(json!({"metadata": {"name": "default"}})),
        )
        .unwrap();
        let spec = &p["spec"];
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
        assert_eq!(
            spec["tolerations"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}
            ])
        );
        assert!(
            spec.get("volumes").is_none(),
            "the pod opted out of the token"
        );
    }

    #[test]
    fn every_container_mounts_the_account_s_token_volume() {
        let mut p = pod(json!({"serviceAccountName": "agent",
            "initContainers": [{"name": "i", "image": "i"}],
            "containers": [{"name": "c", "image": "i"},
                {"name": "own", "image": "i", "volumeMounts": [{"name": "mine",
                    "mountPath": TOKEN_MOUNT_PATH}]}],
            "tolerations": [{"operator": "Exists"}]}));
        admit_new_pod(
            &pods(),
            &mut p,
            &facts(json!({"metadata": {"name": "agent"}})),
        )
        .unwrap();
        let spec = &p["spec"];
        let volume = spec["volumes"][0]["name"].as_str().unwrap();
        assert!(
            volume.starts_with("kube-api-access-") && volume.len() == 21,
            "{volume}"
        );
        assert_eq!(
            spec["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"],
            json!({"expirationSeconds": 3607, "path": "token"})
        );
        for c in [&spec["initContainers"][0], &spec["containers"][0]] {
            assert_eq!(
                c["volumeMounts"],
                json!([{"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}])
            );
        }
        assert_eq!(
            spec["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            spec["tolerations"],
            json!([{"operator": "Exists"}]),
            "tolerating everything tolerates unready nodes"
        );
        let mut quiet = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
        let no_automount = json!({"metadata": {"name": "default"},
            "automountServiceAccountToken": false});
        admit_new_pod(&pods(), &mut quiet, &facts(no_automount)).unwrap();
        assert!(quiet["spec"].get("volumes").is_none());
    }

    #[test]
    fn a_missing_account_or_class_refuses_the_pod_as_kube_apiserver_does() {
        let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
        let missing = NewPodFacts {
            service_account: Err("serviceaccount \"default\" not found".into()),
            priority_class: PriorityClassFact::GlobalDefault(None),
        };
        let err = admit_new_pod(&pods(), &mut p, &missing).unwrap_err();
        assert_eq!(err.code(), 403);
        assert_eq!(
            err.to_string(),
            "pods \"p\" is forbidden: error looking up service account ns/default: serviceaccount \"default\" not found"
        );
        let mut p = pod(json!({"priorityClassName": "gold",
            "containers": [{"name": "c", "image": "i"}]}));
        let no_class = NewPodFacts {
            priority_class: PriorityClassFact::Named(None),
            ..facts(json!({}))
        };
        let err = admit_new_pod(&pods(), &mut p, &no_class).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pods \"p\" is forbidden: no PriorityClass with name gold was found"
        );
        let mut critical = pod(json!({"priorityClassName": "system-node-critical",
            "containers": [{"name": "c", "image": "i"}]}));
        admit_new_pod(&pods(), &mut critical, &no_class).unwrap();
        assert_eq!(critical["spec"]["priority"], 2_000_001_000);
        let mut own = pod(json!({"priority": 7, "containers": [{"name": "c", "image": "i"}]}));
        let err = admit_new_pod(&pods(), &mut own, &facts(json!({}))).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"),
            "{err}"
        );
    }

    #[test]
    fn a_global_default_class_names_itself_on_the_pod() {
        let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
        let with_default = NewPodFacts {
            priority_class: PriorityClassFact::GlobalDefault(Some(Arc::new(json!({
                "metadata": {"name": "normal"}, "value": 1000, "globalDefault": true,
                "preemptionPolicy": "Never"})))),
            ..facts(json!({}))
        };
        admit_new_pod(&pods(), &mut p, &with_default).unwrap();
        assert_eq!(p["spec"]["priorityClassName"], "normal");
        assert_eq!(p["spec"]["priority"], 1000);
        assert_eq!(p["spec"]["preemptionPolicy"], "Never");
    }
}
