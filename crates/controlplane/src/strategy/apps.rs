//! apps/v1: Deployments.

use serde_json::{Value, json};

use super::{ResourceStrategy, Validation};
use crate::error::FieldError;
use crate::registry::{CellSource, PrinterColumn, ResourceInfo};
use crate::scale::{ScalePaths, SelectorSource};

/// Deployments: kube-apiserver's defaults, a selector and template labels required, replicas
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

    fn scale(&self) -> Option<ScalePaths> {
        Some(ScalePaths {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: SelectorSource::MatchLabelsAt("/spec/selector".into()),
        })
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        let spec = o.entry("spec").or_insert(json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.entry("replicas").or_insert(json!(1));
            s.entry("revisionHistoryLimit").or_insert(json!(10));
            s.entry("progressDeadlineSeconds").or_insert(json!(600));
            s.entry("strategy")
                .or_insert(json!({"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}));
        }
        o.remove("status");
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        let errs = &mut check.errors;
        if obj.pointer("/spec/selector").is_none() {
            errs.push(FieldError::required("spec.selector", ""));
        }
        if obj.pointer("/spec/template/metadata/labels").is_none() {
            errs.push(FieldError::required("spec.template.metadata.labels", ""));
        }
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
