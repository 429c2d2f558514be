//! networking.k8s.io/v1: Ingresses, IngressClasses and NetworkPolicies (IPAddresses and
//! ServiceCIDRs are plain). Nothing routes here: Ingresses get no address.

use serde_json::{Value, json};

use super::{core_kinds::default_protocols, set_default};
use crate::resource::{Part, ResourceInfo, ResourceStrategy};
use crate::table::{PrinterColumn, doc, workload};

/// Ingresses: a generation and an empty load balancer status on create.
#[derive(Debug)]
pub struct Ingresses;

impl ResourceStrategy for Ingresses {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Class",
                "string",
                "The name of the IngressClass resource that should be used for additional configuration",
                |o, _| workload::or_none(o.pointer("/spec/ingressClassName")),
            ),
            PrinterColumn::cell(
                "Hosts",
                "string",
                "Hosts that incoming requests are matched against before the ingress rule",
                |o, _| ingress_hosts(o),
            ),
            PrinterColumn::cell(
                "Address",
                "string",
                "Address is a list containing ingress points for the load-balancer",
                |o, _| workload::load_balancer(o.pointer("/status/loadBalancer/ingress")),
            ),
            PrinterColumn::cell(
                "Ports",
                "string",
                "Ports of TLS configurations that open",
                |o, _| {
                    let tls = o
                        .pointer("/spec/tls")
                        .and_then(Value::as_array)
                        .is_some_and(|t| !t.is_empty());
                    json!(if tls { "80, 443" } else { "80" })
                },
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"loadBalancer": {}}));
        }
    }
}

/// The hosts an Ingress's rules match, as `kubectl get` lists them (`*` for none, the first
/// three and how many more).
fn ingress_hosts(obj: &Value) -> Value {
    let hosts: Vec<&str> = obj
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("host").and_then(Value::as_str))
        .filter(|h| !h.is_empty())
        .collect();
    json!(match hosts.len() {
        0 => "*".to_string(),
        1..=3 => hosts.join(","),
        n => format!("{} + {} more...", hosts[..3].join(","), n - 3),
    })
}

/// IngressClasses: parameters cluster-scoped unless given.
#[derive(Debug)]
pub struct IngressClasses;

fn ingress_class_defaults(obj: &mut Value) {
    if let Some(parameters) = obj
        .pointer_mut("/spec/parameters")
        .and_then(Value::as_object_mut)
    {
        set_default(parameters, "scope", json!("Cluster"));
    }
}

impl ResourceStrategy for IngressClasses {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Controller",
                "string",
                "Controller that is responsible for handling this class",
                |o, _| workload::text(o.pointer("/spec/controller")),
            ),
            PrinterColumn::cell(
                "Parameters",
                "string",
                "A reference to a resource with additional parameters",
                |o, _| match o.pointer("/spec/parameters") {
                    Some(p) => {
                        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
                        let group = match s("apiGroup") {
                            "" => String::new(),
                            g => format!(".{g}"),
                        };
                        json!(format!("{}{group}/{}", s("kind"), s("name")))
                    }
                    None => json!("<none>"),
                },
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        ingress_class_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            ingress_class_defaults(next);
        }
    }
}

/// NetworkPolicies: policy types from the rules they have (Ingress always, Egress when it has
/// egress rules) and ports' protocol TCP unless given.
#[derive(Debug)]
pub struct NetworkPolicies;

fn network_policy_defaults(obj: &mut Value) {
    let Some(spec) = obj
        .as_object_mut()
        .and_then(|o| o.entry("spec").or_insert(json!({})).as_object_mut())
    else {
        return;
    };
    for direction in ["ingress", "egress"] {
        for rule in spec
            .get_mut(direction)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            default_protocols(rule.get_mut("ports"));
        }
    }
    if spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        let mut types = vec![json!("Ingress")];
        if spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty())
        {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}

impl ResourceStrategy for NetworkPolicies {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell(
                "Pod-Selector",
                "string",
                doc("networking.k8s.io/v1", "NetworkPolicySpec", "podSelector"),
                |o, _| workload::selector(o.pointer("/spec/podSelector")),
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        network_policy_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            network_policy_defaults(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::prepare_create;
    use crate::registry::Registry;

    fn create(plural: &str, obj: Value) -> Value {
        let info = Registry::with_builtins()
            .lookup("networking.k8s.io", "v1", plural)
            .unwrap();
        prepare_create(&info, "ns", obj, "2026-01-01T00:00:00Z").unwrap()
    }

    #[test]
    fn a_network_policy_gets_its_policy_types_and_port_protocols() {
        let np = create(
            "networkpolicies",
            json!({"metadata": {"name": "n"}, "spec": {"podSelector": {},
                "ingress": [{"ports": [{"port": 80}]}], "egress": [{}]}}),
        );
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(
            np["spec"]["ingress"][0]["ports"],
            json!([{"port": 80, "protocol": "TCP"}])
        );
        let only_ingress = create(
            "networkpolicies",
            json!({"metadata": {"name": "n"}, "spec": {"podSelector": {}}}),
        );
        assert_eq!(only_ingress["spec"]["policyTypes"], json!(["Ingress"]));
    }

    #[test]
    fn an_ingress_starts_with_an_empty_load_balancer_and_lists_its_hosts() {
        let ing = create(
            "ingresses",
            json!({"metadata": {"name": "i"}, "spec": {"rules": [{"host": "a"}, {"host": "b"},
                {"host": "c"}, {"host": "d"}]}}),
        );
        assert_eq!(ing["status"], json!({"loadBalancer": {}}));
        assert_eq!(ingress_hosts(&ing), json!("a,b,c + 1 more..."));
        assert_eq!(ingress_hosts(&json!({})), json!("*"));
    }
}
