//! apiregistration.k8s.io/v1: APIServices, stored only. This server aggregates no other API
//! server: an APIService is never dialled, and its group is not served through it.

use serde_json::{Value, json};

use crate::resource::{ResourceInfo, ResourceStrategy};
use crate::table::PrinterColumn;

/// APIServices: an empty status on create (no availability controller runs here).
#[derive(Debug)]
pub struct ApiServices;

impl ResourceStrategy for ApiServices {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Service",
                "string",
                "The reference to the service that hosts this API endpoint.",
                |o, _| match o.pointer("/spec/service") {
                    Some(svc) => json!(format!(
                        "{}/{}",
                        svc.get("namespace").and_then(Value::as_str).unwrap_or(""),
                        svc.get("name").and_then(Value::as_str).unwrap_or("")
                    )),
                    None => json!("Local"),
                },
            ),
            PrinterColumn::cell(
                "Available",
                "string",
                "Whether this service is available.",
                |o, _| {
                    let available = o
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .find(|c| c.get("type") == Some(&json!("Available")));
                    let s = |c: &Value, k: &str| {
                        c.get(k).and_then(Value::as_str).unwrap_or("").to_string()
                    };
                    json!(match available {
                        None => "Unknown".to_string(),
                        Some(c) if s(c, "status") == "True" => "True".to_string(),
                        Some(c) => format!("{} ({})", s(c, "status"), s(c, "reason")),
                    })
                },
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
    }
}
