//! Cells built-in kinds share, as kube-apiserver's printers compute them: counts and ratios of
//! replicas, a pod template's containers and images, label selectors, and texts that show
//! `<none>` when absent.

use serde_json::{Value, json};

use super::{PrinterColumn, doc};

/// The integer at `pointer`, 0 when absent (Go's zero value).
pub fn count(obj: &Value, pointer: &str) -> Value {
    json!(obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0))
}

/// `ready/desired`.
pub fn ratio(obj: &Value, ready: &str, desired: &str) -> Value {
    let n = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    json!(format!("{}/{}", n(ready), n(desired)))
}

/// A string (or number) as text, `""` when absent.
pub fn text(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => json!(s),
        Some(Value::Null) | None => json!(""),
        Some(other) => json!(other.to_string()),
    }
}

/// A string, or `<none>` when absent or empty.
pub fn or_none(v: Option<&Value>) -> Value {
    match v.and_then(Value::as_str) {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!("<none>"),
    }
}

/// A field of each container of a pod spec (`name`, `image`), comma-joined.
pub fn container_field(pod_spec: Option<&Value>, field: &str) -> Value {
    let values: Vec<&str> = pod_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get(field).and_then(Value::as_str))
        .collect();
    json!(values.join(","))
}

/// `k=v,...` of a label map, `<none>` when empty.
pub fn labels(v: Option<&Value>) -> Value {
    let pairs: Vec<String> = v
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    json!(match pairs.is_empty() {
        true => "<none>".to_string(),
        false => pairs.join(","),
    })
}

/// A LabelSelector as selector text (`app=web,tier in (a,b)`), `<none>` when it selects
/// everything.
pub fn selector(v: Option<&Value>) -> Value {
    let Some(sel) = v else {
        return json!("<none>");
    };
    let mut parts: Vec<String> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    for req in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = req.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = req
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match req.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.to_string(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        });
    }
    json!(match parts.is_empty() {
        true => "<none>".to_string(),
        false => parts.join(","),
    })
}

/// The wide Containers column of a workload whose template is `/spec/template`.
pub fn containers_column() -> PrinterColumn {
    PrinterColumn::cell(
        "Containers",
        "string",
        "Names of each container in the template.",
        |o, _| container_field(o.pointer("/spec/template/spec"), "name"),
    )
    .wide()
}

/// The wide Images column of a workload whose template is `/spec/template`.
pub fn images_column() -> PrinterColumn {
    PrinterColumn::cell(
        "Images",
        "string",
        "Images referenced by each container in the template.",
        |o, _| container_field(o.pointer("/spec/template/spec"), "image"),
    )
    .wide()
}

/// The wide Selector column of a workload whose selector is `/spec/selector`.
pub fn selector_column(description: &str) -> PrinterColumn {
    PrinterColumn::cell("Selector", "string", description, |o, _| {
        selector(o.pointer("/spec/selector"))
    })
    .wide()
}

/// ReplicaSets' and ReplicationControllers' columns: Desired, Current, Ready, Age and the wide
/// ones.
pub fn replica_columns(version: &str, spec: &str, status: &str) -> Vec<PrinterColumn> {
    vec![
        PrinterColumn::cell(
            "Desired",
            "integer",
            doc(version, spec, "replicas"),
            |o, _| count(o, "/spec/replicas"),
        ),
        PrinterColumn::cell(
            "Current",
            "integer",
            doc(version, status, "replicas"),
            |o, _| count(o, "/status/replicas"),
        ),
        PrinterColumn::cell(
            "Ready",
            "integer",
            doc(version, status, "readyReplicas"),
            |o, _| count(o, "/status/readyReplicas"),
        ),
        PrinterColumn::age(),
        containers_column(),
        images_column(),
        PrinterColumn::cell(
            "Selector",
            "string",
            doc(version, spec, "selector"),
            |o, _| {
                match o.pointer("/spec/selector") {
                    // A ReplicationController's selector is a plain label map.
                    Some(sel)
                        if sel.get("matchLabels").is_none()
                            && sel.get("matchExpressions").is_none() =>
                    {
                        labels(Some(sel))
                    }
                    sel => selector(sel),
                }
            },
        )
        .wide(),
    ]
}

/// `Kind/name` of the object's controller (its owner with `controller: true`), `<none>`.
pub fn controller(obj: &Value) -> Value {
    let owner = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true));
    match owner {
        Some(r) => {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
            let group = s("apiVersion").split_once('/').map_or("", |(g, _)| g);
            let kind = match group {
                "" => s("kind").to_string(),
                g => format!("{}.{g}", s("kind")),
            };
            json!(format!("{kind}/{}", s("name")))
        }
        None => json!("<none>"),
    }
}

/// An Endpoints' addresses with their ports (`10.0.0.1:80`), the first three and how many
/// more; `<none>` when there are none.
pub fn endpoints(obj: &Value) -> Value {
    let mut list = Vec::new();
    for subset in obj
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ports: Vec<i64> = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("port").and_then(Value::as_i64))
            .collect();
        for address in subset
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("ip").and_then(Value::as_str))
        {
            if ports.is_empty() {
                list.push(address.to_string());
            }
            for port in &ports {
                list.push(format!("{address}:{port}"));
            }
        }
    }
    json!(match list.len() {
        0 => "<none>".to_string(),
        1..=3 => list.join(","),
        n => format!("{} + {} more...", list[..3].join(","), n - 3),
    })
}

/// Access modes as kubectl abbreviates them (`RWO,ROX`).
pub fn access_modes(v: Option<&Value>) -> Value {
    let modes: Vec<&str> = v
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect();
    json!(modes.join(","))
}

/// A quota's used/hard pairs whose names start with `prefix` (`requests.cpu: 0/1`).
pub fn quota(obj: &Value, prefix: &str) -> Value {
    let hard = obj.pointer("/status/hard").and_then(Value::as_object);
    let used = obj.pointer("/status/used").and_then(Value::as_object);
    let pairs: Vec<String> = hard
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, h)| {
            let u = used
                .and_then(|u| u.get(k))
                .and_then(Value::as_str)
                .unwrap_or("0");
            format!("{k}: {u}/{}", h.as_str().unwrap_or(""))
        })
        .collect();
    json!(pairs.join(", "))
}

/// A load balancer's ingress points (IPs or hostnames), comma-joined.
pub fn load_balancer(v: Option<&Value>) -> Value {
    let points: Vec<&str> = v
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i.get("ip")
                .or_else(|| i.get("hostname"))
                .and_then(Value::as_str)
        })
        .collect();
    json!(points.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_and_labels_read_like_kubectl() {
        let sel = json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "x", "operator": "DoesNotExist"}]});
        assert_eq!(selector(Some(&sel)), json!("app=web,tier in (a,b),!x"));
        assert_eq!(selector(Some(&json!({}))), json!("<none>"));
        assert_eq!(labels(None), json!("<none>"));
    }

    #[test]
    fn a_controller_is_named_with_its_group() {
        let rs = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "Deployment", "name": "web", "controller": true}]}});
        assert_eq!(controller(&rs), json!("Deployment.apps/web"));
        assert_eq!(controller(&json!({})), json!("<none>"));
    }

    #[test]
    fn endpoints_list_addresses_with_ports() {
        let ep = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
            "ports": [{"port": 80}, {"port": 443}]}]});
        assert_eq!(
            endpoints(&ep),
            json!("10.0.0.1:80,10.0.0.1:443,10.0.0.2:80 + 1 more...")
        );
    }
}
