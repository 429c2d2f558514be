//! The core group's stored kinds beyond those [`super::core`] and [`super::events`] own:
//! ReplicationControllers, PodTemplates, Endpoints, PersistentVolumeClaims,
//! PersistentVolumes, LimitRanges and ResourceQuotas, with kube-apiserver's defaults.

use serde_json::{Map, Value, json};

use super::{default_pod_template, set_default};
use crate::resource::{Part, PodAdmission, ResourceInfo, ResourceStrategy};
use crate::scale::{ScalePaths, SelectorSource};
use crate::table::{PrinterColumn, doc, workload};

/// ReplicationControllers: a selector and labels taken from the template when not given,
/// one replica unless given, a generation and `/scale`.
#[derive(Debug)]
pub struct ReplicationControllers;

fn replication_controller_defaults(obj: &mut Value) {
    let labels = obj.pointer("/spec/template/metadata/labels").cloned();
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(labels) = labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
        if let Some(spec) = o.entry("spec").or_insert(json!({})).as_object_mut()
            && spec
                .get("selector")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            spec.insert("selector".into(), labels.clone());
        }
        let meta = o.entry("metadata").or_insert(json!({}));
        if let Some(meta) = meta.as_object_mut()
            && meta
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            meta.insert("labels".into(), labels);
        }
    }
    if let Some(spec) = o.entry("spec").or_insert(json!({})).as_object_mut() {
        set_default(spec, "replicas", json!(1));
    }
    default_pod_template(obj, "/spec/template");
}

impl ResourceStrategy for ReplicationControllers {
    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/spec/template"))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        workload::replica_columns(
            "v1",
            "ReplicationControllerSpec",
            "ReplicationControllerStatus",
        )
    }

    fn scale(&self) -> Option<ScalePaths> {
        Some(ScalePaths {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: SelectorSource::MapAt("/spec/selector".into()),
        })
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        replication_controller_defaults(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"replicas": 0}));
        }
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            replication_controller_defaults(next);
        }
    }
}

/// PodTemplates: their template defaulted as every pod template is.
#[derive(Debug)]
pub struct PodTemplates;

impl ResourceStrategy for PodTemplates {
    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/template"))
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Containers",
                "string",
                "Names of each container in the template.",
                |o, _| workload::container_field(o.pointer("/template/spec"), "name"),
            ),
            PrinterColumn::cell(
                "Images",
                "string",
                "Images referenced by each container in the template.",
                |o, _| workload::container_field(o.pointer("/template/spec"), "image"),
            ),
            PrinterColumn::cell(
                "Pod Labels",
                "string",
                "The labels for the pod template.",
                |o, _| workload::labels(o.pointer("/template/metadata/labels")),
            ),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        default_pod_template(obj, "/template");
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            default_pod_template(next, "/template");
        }
    }
}

/// Sets `protocol: TCP` on each port of `ports` that has none.
pub(super) fn default_protocols(ports: Option<&mut Value>) {
    for port in ports
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        set_default(port, "protocol", json!("TCP"));
    }
}

/// Endpoints: their ports' protocol TCP unless given.
#[derive(Debug)]
pub struct Endpoints;

fn endpoints_defaults(obj: &mut Value) {
    for subset in obj
        .get_mut("subsets")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        default_protocols(subset.get_mut("ports"));
    }
}

impl ResourceStrategy for Endpoints {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Endpoints",
                "string",
                doc("v1", "Endpoints", "subsets"),
                |o, _| workload::endpoints(o),
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        endpoints_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            endpoints_defaults(next);
        }
    }
}

/// A claim's defaults, for PersistentVolumeClaims and the claim templates of StatefulSets:
/// a filesystem volume, and a `Pending` phase until bound.
pub(super) fn default_claim(claim: &mut Value) {
    let Some(o) = claim.as_object_mut() else {
        return;
    };
    if let Some(spec) = o.entry("spec").or_insert(json!({})).as_object_mut() {
        set_default(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(status) = o.entry("status").or_insert(json!({})).as_object_mut() {
        set_default(status, "phase", json!("Pending"));
    }
}

/// PersistentVolumeClaims: a filesystem volume and a `Pending` phase (nothing binds them here),
/// answered with the object when deleted.
#[derive(Debug)]
pub struct PersistentVolumeClaims;

impl ResourceStrategy for PersistentVolumeClaims {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let status = |f| doc("v1", "PersistentVolumeClaimStatus", f);
        vec![
            PrinterColumn::cell("Status", "string", status("phase"), |o, _| {
                workload::text(o.pointer("/status/phase"))
            }),
            PrinterColumn::cell(
                "Volume",
                "string",
                doc("v1", "PersistentVolumeClaimSpec", "volumeName"),
                |o, _| workload::text(o.pointer("/spec/volumeName")),
            ),
            PrinterColumn::cell("Capacity", "string", status("capacity"), |o, _| {
                workload::text(o.pointer("/status/capacity/storage"))
            }),
            PrinterColumn::cell("Access Modes", "string", status("accessModes"), |o, _| {
                workload::access_modes(o.pointer("/status/accessModes"))
            }),
            PrinterColumn::cell(
                "StorageClass",
                "string",
                "StorageClass of the pvc",
                |o, _| workload::text(o.pointer("/spec/storageClassName")),
            ),
            PrinterColumn::cell(
                "VolumeAttributesClass",
                "string",
                "VolumeAttributesClass of the pvc",
                |o, _| workload::or_none(o.pointer("/spec/volumeAttributesClassName")),
            ),
            PrinterColumn::age(),
            PrinterColumn::cell(
                "VolumeMode",
                "string",
                doc("v1", "PersistentVolumeClaimSpec", "volumeMode"),
                |o, _| workload::text(o.pointer("/spec/volumeMode")),
            )
            .wide(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
        default_claim(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            default_claim(next);
        }
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// PersistentVolumes: retained when released and a filesystem volume unless given, and a
/// `Pending` phase; answered with the object when deleted.
#[derive(Debug)]
pub struct PersistentVolumes;

fn volume_defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(spec) = o.entry("spec").or_insert(json!({})).as_object_mut() {
        set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        set_default(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(status) = o.entry("status").or_insert(json!({})).as_object_mut() {
        set_default(status, "phase", json!("Pending"));
    }
}

impl ResourceStrategy for PersistentVolumes {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let spec = |f| doc("v1", "PersistentVolumeSpec", f);
        let status = |f| doc("v1", "PersistentVolumeStatus", f);
        vec![
            PrinterColumn::cell("Capacity", "string", spec("capacity"), |o, _| {
                workload::text(o.pointer("/spec/capacity/storage"))
            }),
            PrinterColumn::cell("Access Modes", "string", spec("accessModes"), |o, _| {
                workload::access_modes(o.pointer("/spec/accessModes"))
            }),
            PrinterColumn::cell(
                "Reclaim Policy",
                "string",
                spec("persistentVolumeReclaimPolicy"),
                |o, _| workload::text(o.pointer("/spec/persistentVolumeReclaimPolicy")),
            ),
            PrinterColumn::cell("Status", "string", status("phase"), |o, _| {
                workload::text(o.pointer("/status/phase"))
            }),
            PrinterColumn::cell("Claim", "string", spec("claimRef"), |o, _| {
                match o.pointer("/spec/claimRef") {
                    Some(claim) => json!(format!(
                        "{}/{}",
                        claim.get("namespace").and_then(Value::as_str).unwrap_or(""),
                        claim.get("name").and_then(Value::as_str).unwrap_or("")
                    )),
                    None => json!(""),
                }
            }),
            PrinterColumn::cell(
                "StorageClass",
                "string",
                "StorageClass of the pv",
                |o, _| workload::text(o.pointer("/spec/storageClassName")),
            ),
            PrinterColumn::cell(
                "VolumeAttributesClass",
                "string",
                "VolumeAttributesClass of the pv",
                |o, _| workload::or_none(o.pointer("/spec/volumeAttributesClassName")),
            ),
            PrinterColumn::cell("Reason", "string", status("reason"), |o, _| {
                workload::text(o.pointer("/status/reason"))
            }),
            PrinterColumn::age(),
            PrinterColumn::cell("VolumeMode", "string", spec("volumeMode"), |o, _| {
                workload::text(o.pointer("/spec/volumeMode"))
            })
            .wide(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
        volume_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            volume_defaults(next);
        }
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// LimitRanges: a container limit's `default` is its `max` and its `defaultRequest` its
/// `default` (then its `max`), as kube-apiserver fills them in.
#[derive(Debug)]
pub struct LimitRanges;

fn limit_range_defaults(obj: &mut Value) {
    for limit in obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        if limit.get("type") != Some(&json!("Container")) {
            continue;
        }
        let max = limit.get("max").and_then(Value::as_object).cloned();
        let default = limit.entry("default").or_insert(json!({}));
        if let (Some(default), Some(max)) = (default.as_object_mut(), &max) {
            for (k, v) in max {
                default.entry(k.clone()).or_insert(v.clone());
            }
        }
        let default = limit.get("default").and_then(Value::as_object).cloned();
        let request = limit.entry("defaultRequest").or_insert(json!({}));
        if let (Some(request), Some(default)) = (request.as_object_mut(), &default) {
            for (k, v) in default {
                request.entry(k.clone()).or_insert(v.clone());
            }
        }
        for field in ["default", "defaultRequest"] {
            if limit
                .get(field)
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                limit.remove(field);
            }
        }
    }
}

impl ResourceStrategy for LimitRanges {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn {
            name: "Created At".into(),
            type_: "date".into(),
            format: String::new(),
            description: doc("meta.k8s.io/v1", "ObjectMeta", "creationTimestamp").into(),
            priority: 0,
            source: crate::table::CellSource::Fn(|o, _| {
                o.pointer("/metadata/creationTimestamp")
                    .cloned()
                    .unwrap_or(Value::Null)
            }),
        }]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        limit_range_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            limit_range_defaults(next);
        }
    }
}

/// ResourceQuotas: an empty status until a quota controller fills it (none runs here).
#[derive(Debug)]
pub struct ResourceQuotas;

impl ResourceStrategy for ResourceQuotas {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::age(),
            PrinterColumn::cell(
                "Request",
                "string",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
                |o, _| workload::quota(o, "requests."),
            ),
            PrinterColumn::cell(
                "Limit",
                "string",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
                |o, _| workload::quota(o, "limits."),
            ),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::prepare_create;
    use crate::registry::Registry;

    fn create(plural: &str, obj: Value) -> Value {
        let info = Registry::with_builtins().lookup("", "v1", plural).unwrap();
        prepare_create(&info, "ns", obj, "2026-01-01T00:00:00Z").unwrap()
    }

    #[test]
    fn a_replication_controller_takes_its_selector_and_labels_from_its_template() {
        let rc = create(
            "replicationcontrollers",
            json!({"metadata": {"name": "rc"}, "spec": {"template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        );
        assert_eq!(rc["spec"]["selector"], json!({"app": "a"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "a"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        assert_eq!(rc["status"], json!({"replicas": 0}));
    }

    #[test]
    fn claims_and_volumes_are_pending_filesystems() {
        let pvc = create(
            "persistentvolumeclaims",
            json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Bound"}}),
        );
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pvc["status"], json!({"phase": "Pending"}));
        let pv = create(
            "persistentvolumes",
            json!({"metadata": {"name": "v"}, "spec": {"capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}}),
        );
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["status"]["phase"], "Pending");
    }

    #[test]
    fn endpoint_ports_default_to_tcp_and_container_limits_to_their_max() {
        let ep = create(
            "endpoints",
            json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}],
                "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]}),
        );
        assert_eq!(
            ep["subsets"][0]["ports"],
            json!([{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}])
        );
        let lr = create(
            "limitranges",
            json!({"metadata": {"name": "l"}, "spec": {"limits": [
                {"type": "Container", "max": {"cpu": "1"}},
                {"type": "Pod", "max": {"cpu": "2"}}]}}),
        );
        assert_eq!(lr["spec"]["limits"][0]["default"], json!({"cpu": "1"}));
        assert_eq!(
            lr["spec"]["limits"][0]["defaultRequest"],
            json!({"cpu": "1"})
        );
        assert!(lr["spec"]["limits"][1].get("default").is_none());
    }
}
