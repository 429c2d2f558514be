//! discovery.k8s.io/v1: EndpointSlices.

use serde_json::{Value, json};

use super::set_default;
use crate::resource::{Part, ResourceInfo, ResourceStrategy};
use crate::table::{PrinterColumn, doc};

/// EndpointSlices: a generation, and ports named `""` with protocol TCP unless given.
#[derive(Debug)]
pub struct EndpointSlices;

fn endpoint_slice_defaults(obj: &mut Value) {
    for port in obj
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        set_default(port, "name", json!(""));
        set_default(port, "protocol", json!("TCP"));
    }
}

/// The first three of `items`, and how many more, as kubectl lists them.
fn at_most_three(items: Vec<String>, none: &str) -> Value {
    json!(match items.len() {
        0 => none.to_string(),
        1..=3 => items.join(","),
        n => format!("{} + {} more...", items[..3].join(","), n - 3),
    })
}

impl ResourceStrategy for EndpointSlices {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let field = |f| doc("discovery.k8s.io/v1", "EndpointSlice", f);
        vec![
            PrinterColumn::cell("AddressType", "string", field("addressType"), |o, _| {
                o.get("addressType").cloned().unwrap_or(json!(""))
            }),
            PrinterColumn::cell("Ports", "string", field("ports"), |o, _| {
                let ports: Vec<String> = o
                    .get("ports")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|p| match p.get("port").and_then(Value::as_i64) {
                        Some(port) => port.to_string(),
                        None => "<unset>".to_string(),
                    })
                    .collect();
                at_most_three(ports, "<unset>")
            }),
            PrinterColumn::cell("Endpoints", "string", field("endpoints"), |o, _| {
                let addresses: Vec<String> = o
                    .get("endpoints")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.get("addresses").and_then(Value::as_array))
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect();
                at_most_three(addresses, "<unset>")
            }),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        endpoint_slice_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            endpoint_slice_defaults(next);
        }
    }
}
