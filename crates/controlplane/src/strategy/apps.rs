//! apps/v1: Deployments, ReplicaSets, StatefulSets, DaemonSets (ControllerRevisions are plain).
//! Nothing here runs them: their status is written only through `/status` (the deployment
//! controller is [`crate::controllers`]').

use serde_json::{Value, json};

use super::{default_pod_template, set_default};
use crate::error::FieldError;
use crate::resource::{Part, PodAdmission, ResourceInfo, ResourceStrategy, Validation};
use crate::scale::{ScalePaths, SelectorSource};
use crate::table::{PrinterColumn, doc, workload};

/// `/scale` of a workload whose desired count is `spec.replicas`.
fn replicas_scale() -> Option<ScalePaths> {
    Some(ScalePaths {
        spec_replicas: "/spec/replicas".into(),
        status_replicas: "/status/replicas".into(),
        selector: SelectorSource::MatchLabelsAt("/spec/selector".into()),
    })
}

/// Sets `defaults` on the object's spec and its pod template's (at `/spec/template`).
fn default_spec(obj: &mut Value, defaults: fn(&mut serde_json::Map<String, Value>)) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(spec) = o.entry("spec").or_insert(json!({})).as_object_mut() {
        defaults(spec);
    }
    default_pod_template(obj, "/spec/template");
}

/// A new workload's status, as kube-apiserver resets it on create.
fn reset_status(obj: &mut Value, status: Value) {
    if let Some(o) = obj.as_object_mut() {
        o.insert("status".into(), status);
    }
}

/// What every workload with a selector, a pod template and replicas is refused for.
fn validate_workload(obj: &Value, errs: &mut Vec<FieldError>) {
    validate_selector_and_template(obj, errs);
    if let Some(r) = obj.pointer("/spec/replicas")
        && r.as_i64().is_none_or(|n| n < 0)
    {
        errs.push(FieldError::invalid(
            "spec.replicas",
            r,
            "must be greater than or equal to 0",
        ));
    }
}

/// A selector and template labels required, and the pod template's spec valid as a pod's.
fn validate_selector_and_template(obj: &Value, errs: &mut Vec<FieldError>) {
    if obj.pointer("/spec/selector").is_none() {
        errs.push(FieldError::required("spec.selector", ""));
    }
    if obj.pointer("/spec/template/metadata/labels").is_none() {
        errs.push(FieldError::required("spec.template.metadata.labels", ""));
    }
    let pod_spec = obj.pointer("/spec/template/spec").unwrap_or(&Value::Null);
    super::pods::validate_pod_spec(pod_spec, "spec.template.spec", errs);
}

/// Deployments: kube-apiserver's defaults (their pod template's too), a selector and template
/// labels required, replicas not negative, a generation, and a `/scale` subresource.
#[derive(Debug)]
pub struct Deployments;

fn deployment_defaults(spec: &mut serde_json::Map<String, Value>) {
    set_default(spec, "replicas", json!(1));
    let strategy = spec.entry("strategy").or_insert(json!({})).as_object_mut();
    if let Some(strategy) = strategy {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            let rolling = strategy.entry("rollingUpdate").or_insert(json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                set_default(rolling, "maxUnavailable", json!("25%"));
                set_default(rolling, "maxSurge", json!("25%"));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
}

impl ResourceStrategy for Deployments {
    /// kube-apiserver's Deployment status writes keep all but the labels of the request's
    /// metadata: the deployment controller records the revision annotation with the status.
    fn status_writes_metadata(&self) -> &'static [&'static str] {
        &["annotations", "finalizers", "ownerReferences"]
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/spec/template"))
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let status = |f| doc("apps/v1", "DeploymentStatus", f);
        vec![
            PrinterColumn::cell(
                "Ready",
                "string",
                "Number of the pod with ready state",
                |o, _| workload::ratio(o, "/status/readyReplicas", "/spec/replicas"),
            ),
            PrinterColumn::cell("Up-to-date", "string", status("updatedReplicas"), |o, _| {
                workload::count(o, "/status/updatedReplicas")
            }),
            PrinterColumn::cell(
                "Available",
                "string",
                status("availableReplicas"),
                |o, _| workload::count(o, "/status/availableReplicas"),
            ),
            PrinterColumn::age(),
            workload::containers_column(),
            workload::images_column(),
            workload::selector_column(doc("apps/v1", "DeploymentSpec", "selector")),
        ]
    }

    fn scale(&self) -> Option<ScalePaths> {
        replicas_scale()
    }

    /// kube-apiserver's decode-time defaults, owned by the writer.
    fn default(&self, obj: &mut Value) {
        default_spec(obj, deployment_defaults);
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        default_spec(obj, deployment_defaults);
        reset_status(obj, json!({}));
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            default_spec(next, deployment_defaults);
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        validate_workload(obj, &mut check.errors);
    }
}

/// ReplicaSets: one replica unless given, a generation, `/scale`, and status reset on create.
#[derive(Debug)]
pub struct ReplicaSets;

fn replica_set_defaults(spec: &mut serde_json::Map<String, Value>) {
    set_default(spec, "replicas", json!(1));
}

impl ResourceStrategy for ReplicaSets {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/spec/template"))
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        workload::replica_columns("apps/v1", "ReplicaSetSpec", "ReplicaSetStatus")
    }

    fn scale(&self) -> Option<ScalePaths> {
        replicas_scale()
    }

    /// kube-apiserver's decode-time defaults, owned by the writer.
    fn default(&self, obj: &mut Value) {
        default_spec(obj, replica_set_defaults);
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        default_spec(obj, replica_set_defaults);
        reset_status(obj, json!({"replicas": 0}));
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            default_spec(next, replica_set_defaults);
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        validate_workload(obj, &mut check.errors);
    }
}

/// StatefulSets: kube-apiserver's defaults (ordered pod management, rolling updates,
/// retained claims), their claim templates defaulted as claims, a generation and `/scale`.
#[derive(Debug)]
pub struct StatefulSets;

fn stateful_set_defaults(spec: &mut serde_json::Map<String, Value>) {
    set_default(spec, "replicas", json!(1));
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    let update = spec
        .entry("updateStrategy")
        .or_insert(json!({}))
        .as_object_mut();
    if let Some(update) = update {
        set_default(update, "type", json!("RollingUpdate"));
        if update.get("type") == Some(&json!("RollingUpdate")) {
            let rolling = update.entry("rollingUpdate").or_insert(json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                set_default(rolling, "partition", json!(0));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    let retention = spec
        .entry("persistentVolumeClaimRetentionPolicy")
        .or_insert(json!({}))
        .as_object_mut();
    if let Some(retention) = retention {
        set_default(retention, "whenDeleted", json!("Retain"));
        set_default(retention, "whenScaled", json!("Retain"));
    }
    for claim in spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        super::core_kinds::default_claim(claim);
    }
}

impl ResourceStrategy for StatefulSets {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/spec/template"))
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Ready",
                "string",
                "Number of the pod with ready state",
                |o, _| workload::ratio(o, "/status/readyReplicas", "/spec/replicas"),
            ),
            PrinterColumn::age(),
            workload::containers_column(),
            workload::images_column(),
        ]
    }

    fn scale(&self) -> Option<ScalePaths> {
        replicas_scale()
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        default_spec(obj, stateful_set_defaults);
        reset_status(obj, json!({"replicas": 0, "availableReplicas": 0}));
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            default_spec(next, stateful_set_defaults);
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        validate_workload(obj, &mut check.errors);
    }
}

/// DaemonSets: rolling updates of one pod at a time unless given, a generation, and status
/// reset on create.
#[derive(Debug)]
pub struct DaemonSets;

fn daemon_set_defaults(spec: &mut serde_json::Map<String, Value>) {
    let update = spec
        .entry("updateStrategy")
        .or_insert(json!({}))
        .as_object_mut();
    if let Some(update) = update {
        set_default(update, "type", json!("RollingUpdate"));
        if update.get("type") == Some(&json!("RollingUpdate")) {
            let rolling = update.entry("rollingUpdate").or_insert(json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                set_default(rolling, "maxUnavailable", json!(1));
                set_default(rolling, "maxSurge", json!(0));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
}

impl ResourceStrategy for DaemonSets {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/spec/template"))
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let status = |f| doc("apps/v1", "DaemonSetStatus", f);
        vec![
            PrinterColumn::cell(
                "Desired",
                "integer",
                status("desiredNumberScheduled"),
                |o, _| workload::count(o, "/status/desiredNumberScheduled"),
            ),
            PrinterColumn::cell(
                "Current",
                "integer",
                status("currentNumberScheduled"),
                |o, _| workload::count(o, "/status/currentNumberScheduled"),
            ),
            PrinterColumn::cell("Ready", "integer", status("numberReady"), |o, _| {
                workload::count(o, "/status/numberReady")
            }),
            PrinterColumn::cell(
                "Up-to-date",
                "integer",
                status("updatedNumberScheduled"),
                |o, _| workload::count(o, "/status/updatedNumberScheduled"),
            ),
            PrinterColumn::cell("Available", "integer", status("numberAvailable"), |o, _| {
                workload::count(o, "/status/numberAvailable")
            }),
            PrinterColumn::cell(
                "Node Selector",
                "string",
                doc("v1", "PodSpec", "nodeSelector"),
                |o, _| workload::labels(o.pointer("/spec/template/spec/nodeSelector")),
            ),
            PrinterColumn::age(),
            workload::containers_column(),
            workload::images_column(),
            workload::selector_column(doc("apps/v1", "DaemonSetSpec", "selector")),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        default_spec(obj, daemon_set_defaults);
        reset_status(
            obj,
            json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                "desiredNumberScheduled": 0, "numberReady": 0}),
        );
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            default_spec(next, daemon_set_defaults);
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        validate_selector_and_template(obj, &mut check.errors);
    }
}

/// ControllerRevisions: printed with the controller that owns them.
#[derive(Debug)]
pub struct ControllerRevisions;

impl ResourceStrategy for ControllerRevisions {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Controller",
                "string",
                "Controller of the object",
                |o, _| workload::controller(o),
            ),
            PrinterColumn::cell(
                "Revision",
                "string",
                doc("apps/v1", "ControllerRevision", "revision"),
                |o, _| o.get("revision").cloned().unwrap_or(json!(0)),
            ),
            PrinterColumn::age(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::prepare_create;
    use crate::registry::Registry;

    fn create(plural: &str, obj: Value) -> Value {
        let info = Registry::with_builtins()
            .lookup("apps", "v1", plural)
            .unwrap();
        prepare_create(&info, "ns", obj, "2026-01-01T00:00:00Z").unwrap()
    }

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}})
    }

    #[test]
    fn a_deployment_gets_kube_apiserver_s_spec_defaults_and_an_empty_status() {
        let d = create(
            "deployments",
            json!({"metadata": {"name": "d"}, "status": {"replicas": 9},
                "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template()}}),
        );
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(d["status"], json!({}));
        assert_eq!(d["metadata"]["generation"], 1);
    }

    #[test]
    fn a_recreate_deployment_gets_no_rolling_update_parameters() {
        let d = create(
            "deployments",
            json!({"metadata": {"name": "d"}, "spec": {"strategy": {"type": "Recreate"},
                "selector": {"matchLabels": {"app": "a"}}, "template": template()}}),
        );
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn stateful_sets_and_daemon_sets_get_their_defaults_and_statuses() {
        let s = create(
            "statefulsets",
            json!({"metadata": {"name": "s"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
                "serviceName": "s", "template": template(),
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"]}}]}}),
        );
        assert_eq!(s["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            s["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            s["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(
            s["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert_eq!(s["status"], json!({"replicas": 0, "availableReplicas": 0}));
        let d = create(
            "daemonsets",
            json!({"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
                "template": template()}}),
        );
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(d["status"]["numberReady"], 0);
        let r = create(
            "replicasets",
            json!({"metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
                "template": template()}}),
        );
        assert_eq!(r["spec"]["replicas"], 1);
        assert_eq!(r["status"], json!({"replicas": 0}));
    }

    #[test]
    fn a_workload_without_a_selector_is_refused() {
        let info = Registry::with_builtins()
            .lookup("apps", "v1", "replicasets")
            .unwrap();
        let err = prepare_create(
            &info,
            "ns",
            json!({"metadata": {"name": "rs"}, "spec": {"template": template()}}),
            "t",
        )
        .err()
        .unwrap();
        assert_eq!(err.code(), 422);
        assert!(
            err.to_string().contains("spec.selector: Required value"),
            "{err}"
        );
    }
}
