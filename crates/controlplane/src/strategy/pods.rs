//! core/v1 Pods, and the PodSpec defaulting every workload's pod template shares.
//!
//! Nothing runs pods here, as on a cluster without nodes: a pod is created Pending and stays so,
//! and an unscheduled pod is gone as soon as it is deleted. What kube-apiserver's defaulting
//! gives a pod and a pod template is [`default_pod_spec`] and [`default_pod_template`], which the
//! strategies of Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs,
//! ReplicationControllers and PodTemplates call on create and on update; a Pod's own extras
//! (`enableServiceLinks`, requests from limits, host-network ports) are [`default_pod`]'s.
//!
//! What kube-apiserver's admission adds to a new Pod (its ServiceAccount and token volume, its
//! priority, the default tolerations) and PodSecurity are not here: they need the store (see
//! [`crate::pod_admission`]). Pure: JSON in and out.

use serde_json::{Map, Value, json};

use crate::error::{ApiResult, FieldError};
use crate::meta::{ObjectMeta, meta_mut};
use crate::resource::{
    DeleteOptions, DeleteOutcome, PodAdmission, ResourceInfo, ResourceStrategy, Validation,
};
use crate::storage::WriteOp;

/// Where the kubelet writes a container's termination message unless told otherwise.
const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// The file mode of secret, configMap, downwardAPI and projected volumes (0644).
const DEFAULT_VOLUME_MODE: i64 = 420;

/// Pods: kube-apiserver's defaults, created Pending with their QoS class, a generation, the
/// spec fixed once created but for what kube lets a pod update change, and removed at once
/// when deleted (no kubelet is there to stop them first).
#[derive(Debug)]
pub struct Pods;

impl ResourceStrategy for Pods {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn field_selectors(&self) -> &'static [&'static str] {
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]
    }

    /// Defaulted as decoded, so the writer owns the defaults (as kube-apiserver records them).
    fn default(&self, obj: &mut Value) {
        default_pod(obj);
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        default_pod(obj);
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        let mut status = Map::new();
        status.insert("phase".into(), json!("Pending"));
        let qos = o.get("spec").map_or("BestEffort", qos_class);
        status.insert("qosClass".into(), json!(qos));
        if o.get("spec")
            .and_then(|s| s.get("schedulingGates"))
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty())
        {
            status.insert(
                "conditions".into(),
                json!([{"type": "PodScheduled", "status": "False", "lastProbeTime": null,
                    "lastTransitionTime": null, "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates"}]),
            );
        }
        o.insert("status".into(), Value::Object(status));
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, _part: crate::resource::Part) {
        default_pod(next);
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        validate_pod_spec(spec, "spec", &mut check.errors);
        if let Some(old) = check.old {
            pod_spec_update(old.get("spec"), obj.get("spec"), &mut check.errors);
        }
    }

    fn delete(
        &self,
        info: &ResourceInfo,
        cur: &Value,
        opts: &DeleteOptions,
        now: &str,
    ) -> ApiResult<(WriteOp, DeleteOutcome)> {
        let (op, outcome) = crate::resource::delete_by_finalizers(info, cur, opts, now)?;
        if outcome != DeleteOutcome::Removed || cur.is_deleting() {
            return Ok((op, outcome));
        }
        // kube-apiserver deletes a pod gracefully: marked (a generation more), then, as no
        // kubelet runs it (it was never scheduled, or it finished), removed at once.
        let mut marked = cur.clone();
        let generation = cur
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let m = meta_mut(&mut marked);
        m.insert("deletionTimestamp".into(), json!(now));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        if generation > 0 {
            m.insert("generation".into(), json!(generation + 1));
        }
        Ok((WriteOp::Put(marked), DeleteOutcome::MarkedThenRemoved))
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Pod)
    }
}

/// A Pod's defaults, as kube-apiserver's decoding gives them: its spec's (see
/// [`default_pod_spec`]) and a Pod's own: `enableServiceLinks`, requests taken from limits where
/// a container sets only limits, and host ports equal to container ports on the host network.
pub fn default_pod(pod: &mut Value) {
    let Some(o) = pod.as_object_mut() else { return };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    let host_network = s.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for list in ["containers", "initContainers"] {
        for c in containers_mut(s, list) {
            requests_from_limits(c);
            if host_network {
                for port in c
                    .get_mut("ports")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_object_mut)
                {
                    if let Some(number) = port.get("containerPort").cloned()
                        && port.get("hostPort").is_none_or(|h| h.as_i64() == Some(0))
                    {
                        port.insert("hostPort".into(), number);
                    }
                }
            }
        }
    }
    s.entry("enableServiceLinks").or_insert(json!(true));
    default_pod_spec(spec);
}

/// A pod template's defaults (`template.spec` as [`default_pod_spec`] gives them), for the
/// template of a workload: a Deployment's `spec.template`, a CronJob's
/// `spec.jobTemplate.spec.template`, a PodTemplate's `template`.
pub fn default_pod_template(template: &mut Value) {
    let Some(t) = template.as_object_mut() else {
        return;
    };
    default_pod_spec(t.entry("spec").or_insert_with(|| json!({})));
}

/// The defaults kube-apiserver gives every PodSpec, a Pod's or a template's: DNS and restart
/// policy, an empty security context, the grace period, the scheduler, each container's pull
/// policy, termination message, empty resources, port protocol and probe defaults, volume modes,
/// and `serviceAccount` mirroring `serviceAccountName` (the deprecated name is still served).
pub fn default_pod_spec(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    s.entry("dnsPolicy").or_insert(json!("ClusterFirst"));
    s.entry("restartPolicy").or_insert(json!("Always"));
    s.entry("securityContext").or_insert(json!({}));
    s.entry("terminationGracePeriodSeconds")
        .or_insert(json!(30));
    s.entry("schedulerName")
        .or_insert(json!("default-scheduler"));
    let named = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    };
    if let Some(account) =
        named(s.get("serviceAccountName")).or_else(|| named(s.get("serviceAccount")))
    {
        s.insert("serviceAccountName".into(), json!(account));
        s.insert("serviceAccount".into(), json!(account));
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in containers_mut(s, list) {
            default_container(c);
        }
    }
    for volume in s
        .get_mut("volumes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        default_volume(volume);
    }
}

fn containers_mut<'a>(
    spec: &'a mut Map<String, Value>,
    list: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    spec.get_mut(list)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn default_container(c: &mut Map<String, Value>) {
    if c.get("imagePullPolicy")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        c.insert("imagePullPolicy".into(), json!(pull_policy(image)));
    }
    c.entry("terminationMessagePath")
        .or_insert(json!(TERMINATION_MESSAGE_PATH));
    c.entry("terminationMessagePolicy").or_insert(json!("File"));
    c.entry("resources").or_insert(json!({}));
    for port in c
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        port.entry("protocol").or_insert(json!("TCP"));
    }
    for env in c
        .get_mut("env")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(field_ref) = env
            .pointer_mut("/valueFrom/fieldRef")
            .and_then(Value::as_object_mut)
        {
            field_ref.entry("apiVersion").or_insert(json!("v1"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            p.entry("timeoutSeconds").or_insert(json!(1));
            p.entry("periodSeconds").or_insert(json!(10));
            p.entry("successThreshold").or_insert(json!(1));
            p.entry("failureThreshold").or_insert(json!(3));
            default_http_get(p);
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(h) = c
            .get_mut("lifecycle")
            .and_then(|l| l.get_mut(hook))
            .and_then(Value::as_object_mut)
        {
            default_http_get(h);
        }
    }
}

fn default_http_get(handler: &mut Map<String, Value>) {
    if let Some(get) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        get.entry("path").or_insert(json!("/"));
        get.entry("scheme").or_insert(json!("HTTP"));
    }
}

/// `Always` for an image tagged `latest` or not tagged at all (which means `latest`),
/// `IfNotPresent` for any other tag or a digest.
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// The volume sources with a default, and an `emptyDir` for a volume that names none.
fn default_volume(v: &mut Map<String, Value>) {
    const SOURCES: &[&str] = &[
        "hostPath",
        "emptyDir",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "gitRepo",
        "secret",
        "nfs",
        "iscsi",
        "glusterfs",
        "persistentVolumeClaim",
        "rbd",
        "flexVolume",
        "cinder",
        "cephfs",
        "flocker",
        "downwardAPI",
        "fc",
        "azureFile",
        "configMap",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "projected",
        "portworxVolume",
        "scaleIO",
        "storageos",
        "csi",
        "ephemeral",
        "image",
    ];
    if !SOURCES.iter().any(|s| v.contains_key(*s)) {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(source).and_then(Value::as_object_mut) {
            s.entry("defaultMode").or_insert(json!(DEFAULT_VOLUME_MODE));
            field_ref_versions(s);
        }
    }
    if let Some(sources) = v
        .get_mut("projected")
        .and_then(|p| p.get_mut("sources"))
        .and_then(Value::as_array_mut)
    {
        for source in sources.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(token) = source
                .get_mut("serviceAccountToken")
                .and_then(Value::as_object_mut)
            {
                token.entry("expirationSeconds").or_insert(json!(3600));
            }
            if let Some(d) = source.get_mut("downwardAPI").and_then(Value::as_object_mut) {
                field_ref_versions(d);
            }
        }
    }
    if let Some(h) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
        h.entry("type").or_insert(json!(""));
    }
    if let Some(claim) = v
        .get_mut("ephemeral")
        .and_then(|e| e.pointer_mut("/volumeClaimTemplate/spec"))
        .and_then(Value::as_object_mut)
    {
        claim.entry("volumeMode").or_insert(json!("Filesystem"));
    }
}

/// A downwardAPI source's `items[].fieldRef.apiVersion` defaults to `v1`.
fn field_ref_versions(source: &mut Map<String, Value>) {
    for item in source
        .get_mut("items")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(f) = item.get_mut("fieldRef").and_then(Value::as_object_mut) {
            f.entry("apiVersion").or_insert(json!("v1"));
        }
    }
}

/// A container that sets only a limit of a resource requests as much.
fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let requests = resources.entry("requests").or_insert_with(|| json!({}));
    if let Some(r) = requests.as_object_mut() {
        for (k, v) in limits {
            r.entry(k).or_insert(v);
        }
    }
}

/// A pod's quality-of-service class, as kube-apiserver computes it from its containers' cpu and
/// memory requests and limits: `Guaranteed` when every container limits both and requests what
/// it limits, `BestEffort` when none asks for either, `Burstable` otherwise.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|l| spec.get(*l).and_then(Value::as_array))
        .flatten()
        .collect();
    let compute = |m: Option<&Value>, r: &str| {
        m.and_then(|m| m.get(r))
            .filter(|q| !quantity_is_zero(q))
            .cloned()
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = c.pointer("/resources/requests");
        let limits = c.pointer("/resources/limits");
        for r in ["cpu", "memory"] {
            let (req, lim) = (compute(requests, r), compute(limits, r));
            any |= req.is_some() || lim.is_some();
            match (&req, &lim) {
                (_, None) => guaranteed = false,
                (Some(q), Some(l)) if !same_quantity(q, l) => guaranteed = false,
                _ => {}
            }
        }
    }
    match (any, guaranteed && !containers.is_empty()) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

fn quantity_is_zero(q: &Value) -> bool {
    match q {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s
            .trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse::<f64>()
            .is_ok_and(|n| n == 0.0),
        _ => false,
    }
}

/// Whether two quantities are equal; those written differently (`1` and `1000m`) are compared
/// as numbers where their suffixes are known.
fn same_quantity(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    match (quantity_value(a), quantity_value(b)) {
        (Some(x), Some(y)) => (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()),
        _ => false,
    }
}

fn quantity_value(q: &Value) -> Option<f64> {
    let s = match q {
        Value::Number(n) => return n.as_f64(),
        Value::String(s) => s.as_str(),
        _ => return None,
    };
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    Some(number * scale)
}

/// What kube-apiserver checks of a PodSpec that a client is likely to get wrong: containers
/// present, each named (a DNS label, unique) with an image, and the policies among their
/// supported values.
pub fn validate_pod_spec(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let containers = spec.get("containers").and_then(Value::as_array);
    if containers.is_none_or(Vec::is_empty) {
        errors.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for list in ["containers", "initContainers"] {
        for (i, c) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("{path}.{list}[{i}]");
            match c.get("name").and_then(Value::as_str).unwrap_or("") {
                "" => errors.push(FieldError::required(format!("{at}.name"), "")),
                name => {
                    let invalid = crate::names::dns1123_label(name);
                    if !invalid.is_empty() {
                        errors.extend(
                            invalid.into_iter().map(|m| {
                                FieldError::invalid(format!("{at}.name"), &json!(name), m)
                            }),
                        );
                    } else if names.contains(&name) {
                        errors.push(FieldError::duplicate(format!("{at}.name"), &json!(name)));
                    }
                    names.push(name);
                }
            }
            if c.get("image")
                .and_then(Value::as_str)
                .is_none_or(|i| i.trim().is_empty())
            {
                errors.push(FieldError::required(format!("{at}.image"), ""));
            }
            one_of(
                c,
                "imagePullPolicy",
                &at,
                &["Always", "IfNotPresent", "Never"],
                errors,
            );
            one_of(
                c,
                "terminationMessagePolicy",
                &at,
                &["File", "FallbackToLogsOnError"],
                errors,
            );
        }
    }
    one_of(
        spec,
        "restartPolicy",
        path,
        &["Always", "OnFailure", "Never"],
        errors,
    );
    one_of(
        spec,
        "dnsPolicy",
        path,
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        errors,
    );
}

fn one_of(obj: &Value, field: &str, path: &str, allowed: &[&str], errors: &mut Vec<FieldError>) {
    if let Some(v) = obj.get(field)
        && !v.as_str().is_some_and(|s| allowed.contains(&s))
    {
        let allowed: Vec<Value> = allowed.iter().map(|a| json!(a)).collect();
        errors.push(FieldError::not_supported(
            format!("{path}.{field}"),
            v,
            &allowed,
        ));
    }
}

/// What a pod update may change of its spec: container images, `activeDeadlineSeconds`, added
/// tolerations, a negative grace period raised to 1, and scheduling gates removed.
const UPDATABLE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn pod_spec_update(old: Option<&Value>, new: Option<&Value>, errors: &mut Vec<FieldError>) {
    let (Some(old), Some(new)) = (old, new) else {
        return;
    };
    if old == new {
        return;
    }
    let mut munged = new.clone();
    if let (Some(m), Some(o)) = (munged.as_object_mut(), old.as_object()) {
        for list in ["containers", "initContainers"] {
            let old_images: Vec<Option<&Value>> = o
                .get(list)
                .and_then(Value::as_array)
                .map(|cs| cs.iter().map(|c| c.get("image")).collect())
                .unwrap_or_default();
            for (i, c) in m
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if let (Some(c), Some(Some(image))) = (c.as_object_mut(), old_images.get(i)) {
                    c.insert("image".into(), (*image).clone());
                }
            }
        }
        let keep = |m: &mut Map<String, Value>, k: &str| match o.get(k) {
            Some(v) => m.insert(k.into(), v.clone()),
            None => m.remove(k),
        };
        keep(m, "activeDeadlineSeconds");
        let old_tolerations = o
            .get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let new_tolerations = m
            .get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if old_tolerations.iter().all(|t| new_tolerations.contains(t)) {
            keep(m, "tolerations");
        }
        let old_grace = o
            .get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64);
        if old_grace.is_some_and(|g| g < 0)
            && m.get("terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                == Some(1)
        {
            keep(m, "terminationGracePeriodSeconds");
        }
        let old_gates = o
            .get("schedulingGates")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let new_gates = m
            .get("schedulingGates")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if new_gates.iter().all(|g| old_gates.contains(g)) {
            keep(m, "schedulingGates");
        }
    }
    if &munged != old {
        errors.push(FieldError::forbidden("spec", UPDATABLE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn a_pod_gets_kube_apiserver_s_defaults() {
        let mut p = pod(json!({"containers": [{"name": "c", "image": "registry.example/none:1"}]}));
        default_pod(&mut p);
        assert_eq!(
            p["spec"],
            json!({
                "containers": [{"name": "c", "image": "registry.example/none:1",
                    "resources": {}, "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst", "securityContext": {},
                "schedulerName": "default-scheduler", "enableServiceLinks": true
            })
        );
    }

    #[test]
    fn a_template_gets_the_spec_defaults_but_not_a_pod_s_own() {
        let mut t = json!({"metadata": {"labels": {"app": "a"}},
            "spec": {"serviceAccountName": "agent",
                "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                    "resources": {"limits": {"cpu": "1"}},
                    "readinessProbe": {"httpGet": {"port": 80}}}],
                "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}}]}});
        default_pod_template(&mut t);
        let spec = &t["spec"];
        assert_eq!(
            spec["serviceAccount"], "agent",
            "the deprecated name mirrors"
        );
        assert!(spec.get("enableServiceLinks").is_none(), "{spec}");
        let c = &spec["containers"][0];
        assert_eq!(
            c["imagePullPolicy"], "Always",
            "an untagged image is latest"
        );
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert!(
            c["resources"].get("requests").is_none(),
            "only pods copy limits"
        );
        assert_eq!(
            c["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
    }

    #[test]
    fn pull_policy_follows_the_image_tag() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx:1.2"), "IfNotPresent");
        assert_eq!(pull_policy("nginx@sha256:abcd"), "IfNotPresent");
    }

    #[test]
    fn a_pod_s_qos_class_follows_its_requests_and_limits() {
        let with = |resources: Value| {
            let mut p = pod(json!({"containers": [{"name": "c", "image": "i",
                "resources": resources}]}));
            default_pod(&mut p);
            qos_class(&p["spec"])
        };
        assert_eq!(with(json!({})), "BestEffort");
        assert_eq!(with(json!({"requests": {"cpu": "100m"}})), "Burstable");
        assert_eq!(
            with(json!({"limits": {"cpu": "1", "memory": "1Gi"}})),
            "Guaranteed",
            "requests default to limits"
        );
        assert_eq!(
            with(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "1000m", "memory": "1Gi"}})),
            "Guaranteed"
        );
        assert_eq!(
            with(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "500m"}})),
            "Burstable"
        );
    }

    #[test]
    fn a_pod_without_containers_or_images_is_invalid() {
        let mut errors = Vec::new();
        validate_pod_spec(
            &json!({"containers": [{"name": "c"}, {"name": "c", "image": "i"}],
                "restartPolicy": "Sometimes"}),
            "spec",
            &mut errors,
        );
        let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "spec.containers[0].image: Required value",
                "spec.containers[1].name: Duplicate value: \"c\"",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ]
        );
        let mut errors = Vec::new();
        validate_pod_spec(&json!({}), "spec", &mut errors);
        assert_eq!(errors[0].message, "spec.containers: Required value");
    }

    #[test]
    fn a_pod_update_may_change_images_and_add_tolerations_only() {
        let old = json!({"containers": [{"name": "c", "image": "a:1"}],
            "tolerations": [{"key": "k", "operator": "Exists"}]});
        let mut errors = Vec::new();
        let mut new = old.clone();
        new["containers"][0]["image"] = json!("a:2");
        new["tolerations"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": "j", "operator": "Exists"}));
        pod_spec_update(Some(&old), Some(&new), &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let mut dropped = old.clone();
        dropped["tolerations"] = json!([]);
        pod_spec_update(Some(&old), Some(&dropped), &mut errors);
        let mut renamed = old.clone();
        renamed["containers"][0]["name"] = json!("d");
        pod_spec_update(Some(&old), Some(&renamed), &mut errors);
        assert_eq!(errors.len(), 2);
        assert!(errors[0].message.starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"));
    }
}
