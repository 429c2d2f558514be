//! scheduling.k8s.io/v1: PriorityClasses.

use serde_json::{Value, json};

use super::set_default;
use crate::error::FieldError;
use crate::resource::{Part, ResourceInfo, ResourceStrategy, Validation};
use crate::table::{PrinterColumn, doc, workload};

/// PriorityClasses: preempting lower priorities unless given, and a value required.
#[derive(Debug)]
pub struct PriorityClasses;

fn priority_class_defaults(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        set_default(o, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
}

impl ResourceStrategy for PriorityClasses {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let field = |f| doc("scheduling.k8s.io/v1", "PriorityClass", f);
        vec![
            PrinterColumn::cell("Value", "integer", field("value"), |o, _| {
                workload::count(o, "/value")
            }),
            PrinterColumn::cell(
                "Global-Default",
                "boolean",
                field("globalDefault"),
                |o, _| {
                    json!(
                        o.get("globalDefault")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                    )
                },
            ),
            PrinterColumn::age(),
            PrinterColumn::cell(
                "PreemptionPolicy",
                "string",
                field("preemptionPolicy"),
                |o, _| workload::text(o.get("preemptionPolicy")),
            ),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        priority_class_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            priority_class_defaults(next);
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if obj.get("value").is_none_or(Value::is_null) {
            check.errors.push(FieldError::required("value", ""));
        }
    }
}
