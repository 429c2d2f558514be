//! autoscaling/v2 and autoscaling/v1: HorizontalPodAutoscalers, stored at v2 and served at
//! both versions (v1 shows a CPU target where v2 has metrics). Nothing scales anything here.

use serde_json::{Map, Value, json};

use super::set_default;
use crate::resource::{Part, ResourceInfo, ResourceStrategy, StoredAs};
use crate::table::{PrinterColumn, doc, workload};

/// Where both versions' objects are stored.
const STORED: StoredAs = StoredAs {
    key: "autoscaling/horizontalpodautoscalers",
    api_version: "autoscaling/v2",
};

/// HorizontalPodAutoscalers at one version: kube-apiserver's defaults (one replica at least,
/// 80% CPU when no metric is given), a generation, and a status reset on create.
#[derive(Debug)]
pub struct HorizontalPodAutoscalers {
    /// Served as autoscaling/v1 (converted from and to the stored v2).
    pub v1: bool,
}

/// autoscaling/v2 HorizontalPodAutoscalers.
pub static V2: HorizontalPodAutoscalers = HorizontalPodAutoscalers { v1: false };
/// autoscaling/v1 HorizontalPodAutoscalers.
pub static V1: HorizontalPodAutoscalers = HorizontalPodAutoscalers { v1: true };

fn cpu_metric(utilization: Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

/// The stored (v2) object's defaults.
fn defaults(obj: &mut Value) {
    let Some(spec) = obj
        .as_object_mut()
        .and_then(|o| o.entry("spec").or_insert(json!({})).as_object_mut())
    else {
        return;
    };
    set_default(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert("metrics".into(), json!([cpu_metric(json!(80))]));
    }
}

/// The CPU utilization a v2 metric list targets or reports, when one of its metrics is it.
fn cpu_utilization(metrics: Option<&Value>, at: &str) -> Option<Value> {
    metrics?.as_array()?.iter().find_map(|m| {
        let resource = m.get("resource")?;
        (m.get("type")? == "Resource" && resource.get("name")? == "cpu")
            .then(|| {
                resource
                    .pointer(&format!("/{at}/averageUtilization"))
                    .cloned()
            })
            .flatten()
    })
}

/// An autoscaling/v1 object as stored at v2.
fn v1_to_v2(mut obj: Value) -> Value {
    let Some(o) = obj.as_object_mut() else {
        return obj;
    };
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(cpu) = spec.remove("targetCPUUtilizationPercentage")
    {
        spec.insert("metrics".into(), json!([cpu_metric(cpu)]));
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut)
        && let Some(cpu) = status.remove("currentCPUUtilizationPercentage")
    {
        status.insert(
            "currentMetrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": cpu}}}]),
        );
    }
    obj
}

/// A stored v2 object as autoscaling/v1 shows it.
fn v2_to_v1(mut obj: Value) -> Value {
    let Some(o) = obj.as_object_mut() else {
        return obj;
    };
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        let cpu = cpu_utilization(spec.get("metrics"), "target");
        spec.remove("metrics");
        spec.remove("behavior");
        if let Some(cpu) = cpu {
            spec.insert("targetCPUUtilizationPercentage".into(), cpu);
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        let cpu = cpu_utilization(status.get("currentMetrics"), "current");
        status.remove("currentMetrics");
        status.remove("conditions");
        set_default(status, "currentReplicas", json!(0));
        if let Some(cpu) = cpu {
            status.insert("currentCPUUtilizationPercentage".into(), cpu);
        }
    }
    obj
}

/// `cpu: 20%/80%`, as `kubectl get hpa` shows a CPU target (either version).
fn targets(obj: &Value) -> Value {
    let target = obj
        .pointer("/spec/targetCPUUtilizationPercentage")
        .cloned()
        .or_else(|| cpu_utilization(obj.pointer("/spec/metrics"), "target"));
    let current = obj
        .pointer("/status/currentCPUUtilizationPercentage")
        .cloned()
        .or_else(|| cpu_utilization(obj.pointer("/status/currentMetrics"), "current"));
    match target {
        Some(target) => {
            let current = current.map_or("<unknown>".to_string(), |c| format!("{c}%"));
            json!(format!("cpu: {current}/{target}%"))
        }
        None => json!("<none>"),
    }
}

impl ResourceStrategy for HorizontalPodAutoscalers {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn stored_as(&self) -> Option<StoredAs> {
        Some(STORED)
    }

    fn to_stored(&self, obj: Value) -> Value {
        if self.v1 { v1_to_v2(obj) } else { obj }
    }

    fn to_served(&self, obj: Value) -> Value {
        if self.v1 { v2_to_v1(obj) } else { obj }
    }

    fn serves_as_stored(&self) -> bool {
        !self.v1
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let spec = |f| doc("autoscaling/v2", "HorizontalPodAutoscalerSpec", f);
        vec![
            PrinterColumn::cell("Reference", "string", spec("scaleTargetRef"), |o, _| {
                let s = |k: &str| {
                    o.pointer(&format!("/spec/scaleTargetRef/{k}"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                json!(format!("{}/{}", s("kind"), s("name")))
            }),
            PrinterColumn::cell("Targets", "string", spec("metrics"), |o, _| targets(o)),
            PrinterColumn::cell("MinPods", "string", spec("minReplicas"), |o, _| {
                match o.pointer("/spec/minReplicas") {
                    Some(v) => workload::text(Some(v)),
                    None => json!("<unset>"),
                }
            }),
            PrinterColumn::cell("MaxPods", "string", spec("maxReplicas"), |o, _| {
                workload::count(o, "/spec/maxReplicas")
            }),
            PrinterColumn::cell(
                "Replicas",
                "string",
                doc(
                    "autoscaling/v2",
                    "HorizontalPodAutoscalerStatus",
                    "currentReplicas",
                ),
                |o, _| workload::count(o, "/status/currentReplicas"),
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        defaults(obj);
        if let Some(o) = obj.as_object_mut() {
            let mut status = Map::new();
            status.insert("desiredReplicas".into(), json!(0));
            o.insert("status".into(), Value::Object(status));
        }
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            defaults(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{prepare_create, present};
    use crate::registry::Registry;

    #[test]
    fn an_autoscaler_made_at_v1_is_stored_at_v2_and_served_at_both() {
        let registry = Registry::with_builtins();
        let v1 = registry
            .lookup("autoscaling", "v1", "horizontalpodautoscalers")
            .unwrap();
        let v2 = registry
            .lookup("autoscaling", "v2", "horizontalpodautoscalers")
            .unwrap();
        assert_eq!(v1.storage_key(), v2.storage_key());
        let stored = prepare_create(
            &v1,
            "ns",
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "h"}, "spec": {"maxReplicas": 5,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "targetCPUUtilizationPercentage": 50}}),
            "2026-01-01T00:00:00Z",
        )
        .unwrap();
        assert_eq!(stored["apiVersion"], "autoscaling/v2");
        assert_eq!(stored["spec"]["metrics"], json!([cpu_metric(json!(50))]));
        assert_eq!(stored["spec"]["minReplicas"], 1);
        let at_v1 = present(&v1, stored.clone());
        assert_eq!(at_v1["apiVersion"], "autoscaling/v1");
        assert_eq!(at_v1["spec"]["targetCPUUtilizationPercentage"], 50);
        assert!(at_v1["spec"].get("metrics").is_none());
        assert_eq!(
            at_v1["status"],
            json!({"currentReplicas": 0, "desiredReplicas": 0})
        );
        assert_eq!(targets(&at_v1), json!("cpu: <unknown>/50%"));
        let at_v2 = present(&v2, stored);
        assert_eq!(targets(&at_v2), json!("cpu: <unknown>/50%"));
    }

    #[test]
    fn an_autoscaler_without_metrics_targets_80_percent_cpu() {
        let v2 = Registry::with_builtins()
            .lookup("autoscaling", "v2", "horizontalpodautoscalers")
            .unwrap();
        let stored = prepare_create(
            &v2,
            "ns",
            json!({"metadata": {"name": "h"}, "spec": {"maxReplicas": 3,
                "scaleTargetRef": {"kind": "Deployment", "name": "web"}}}),
            "t",
        )
        .unwrap();
        assert_eq!(stored["spec"]["metrics"], json!([cpu_metric(json!(80))]));
    }
}
