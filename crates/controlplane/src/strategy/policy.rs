//! policy/v1: PodDisruptionBudgets. Nothing evicts pods here, so their status stays as created
//! until a client writes it.

use serde_json::{Value, json};

use crate::error::FieldError;
use crate::resource::{ResourceInfo, ResourceStrategy, Validation};
use crate::table::{PrinterColumn, workload};

/// PodDisruptionBudgets: a generation, a zero status on create, and at most one of
/// `minAvailable` and `maxUnavailable`.
#[derive(Debug)]
pub struct PodDisruptionBudgets;

impl ResourceStrategy for PodDisruptionBudgets {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Min Available",
                "string",
                "The minimum number of pods that must be available.",
                |o, _| not_applicable(o.pointer("/spec/minAvailable")),
            ),
            PrinterColumn::cell(
                "Max Unavailable",
                "string",
                "The maximum number of pods that may be unavailable.",
                |o, _| not_applicable(o.pointer("/spec/maxUnavailable")),
            ),
            PrinterColumn::cell(
                "Allowed Disruptions",
                "integer",
                "Calculated number of pods that may be disrupted at this time.",
                |o, _| workload::count(o, "/status/disruptionsAllowed"),
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.insert(
                "status".into(),
                json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                    "expectedPods": 0}),
            );
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        let set = |p: &str| obj.pointer(p).is_some_and(|v| !v.is_null());
        if set("/spec/minAvailable") && set("/spec/maxUnavailable") {
            check.errors.push(FieldError::invalid(
                "spec",
                obj.pointer("/spec").unwrap_or(&Value::Null),
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
    }
}

/// A budget's bound, or `N/A` when not set.
fn not_applicable(v: Option<&Value>) -> Value {
    match v {
        Some(v) if !v.is_null() => workload::text(Some(v)),
        _ => json!("N/A"),
    }
}
