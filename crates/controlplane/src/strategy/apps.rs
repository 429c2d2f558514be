//! apps/v1: Deployments.

use serde_json::{Value, json};

use super::{PodAdmission, ResourceStrategy, Validation};
use crate::error::FieldError;
use crate::registry::{CellSource, PrinterColumn, ResourceInfo};
use crate::scale::{ScalePaths, SelectorSource};

/// Deployments: kube-apiserver's defaults (their pod template's too), a selector and template labels required, replicas
/// not negative, a generation, and a `/scale` subresource. Status is written only through
/// `/status` (nothing here runs them).
#[derive(Debug)]
pub struct Deployments;

impl ResourceStrategy for Deployments {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::computed(
                "Ready",
                CellSource::Ratio(vec!["status", "readyReplicas"], vec!["spec", "replicas"]),
            ),
            PrinterColumn::path("Up-to-date", "integer", ".status.updatedReplicas"),
            PrinterColumn::path("Available", "integer", ".status.availableReplicas"),
        ]
    }

    fn categories(&self) -> &'static [&'static str] {
        &["all"]
    }

    /// kube-apiserver's Deployment status writes keep all but the labels of the request's
    /// metadata: the deployment controller records the revision annotation with the status.
    fn status_writes_metadata(&self) -> &'static [&'static str] {
        &["annotations", "finalizers", "ownerReferences"]
    }

    fn scale(&self) -> Option<ScalePaths> {
        Some(ScalePaths {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: SelectorSource::MatchLabelsAt("/spec/selector".into()),
        })
    }

    fn default(&self, obj: &mut Value) {
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        let spec = o.entry("spec").or_insert(json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.entry("replicas").or_insert(json!(1));
            s.entry("revisionHistoryLimit").or_insert(json!(10));
            s.entry("progressDeadlineSeconds").or_insert(json!(600));
            let strategy = s.entry("strategy").or_insert(json!({}));
            if let Some(st) = strategy.as_object_mut() {
                let kind = st.entry("type").or_insert(json!("RollingUpdate"));
                if *kind == "RollingUpdate" {
                    let rolling = st.entry("rollingUpdate").or_insert(json!({}));
                    if let Some(r) = rolling.as_object_mut() {
                        r.entry("maxUnavailable").or_insert(json!("25%"));
                        r.entry("maxSurge").or_insert(json!("25%"));
                    }
                }
            }
            if let Some(template) = s.get_mut("template") {
                super::pods::default_pod_template(template);
            }
        }
    }

    /// A new Deployment's status is its Go type's zero value, `{}`, until its controller writes.
    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
    }

    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/spec/template"))
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, _part: crate::objects::Part) {
        if let Some(template) = next.pointer_mut("/spec/template") {
            super::pods::default_pod_template(template);
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        let errs = &mut check.errors;
        if obj.pointer("/spec/selector").is_none() {
            errs.push(FieldError::required("spec.selector", ""));
        }
        if obj.pointer("/spec/template/metadata/labels").is_none() {
            errs.push(FieldError::required("spec.template.metadata.labels", ""));
        }
        let pod_spec = obj.pointer("/spec/template/spec").unwrap_or(&Value::Null);
        super::pods::validate_pod_spec(pod_spec, "spec.template.spec", errs);
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
}
