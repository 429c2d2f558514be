//! The core group's kinds: Namespaces, Secrets, ConfigMaps, ServiceAccounts and Nodes (Events
//! are [`super::events`]').

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, FieldError};
use crate::meta::{NameRule, ObjectMeta, meta_mut};
use crate::names;
use crate::objects::subject;
use crate::resource::{
    DeleteOptions, DeleteOutcome, FOREGROUND, ORPHAN, Part, PodAdmission, ResourceInfo,
    ResourceStrategy, Validation,
};
use crate::storage::WriteOp;
use crate::table::{CellSource, PrinterColumn};
use crate::typed::{GoType, TypedField};

/// The type of Secrets holding a ServiceAccount's legacy token (filled by the token
/// controller, [`crate::auth::token_controller`]).
pub const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming a token Secret's ServiceAccount.
pub const SERVICE_ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";

/// The label every Namespace carries with its own name, so selectors can pick namespaces by
/// name (kube-apiserver sets it on every write).
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// The finalizer in a Namespace's `spec.finalizers` that the namespace controller removes once
/// the namespace is empty.
pub const KUBERNETES_FINALIZER: &str = "kubernetes";

/// Namespaces: named as DNS labels and labelled with their name; created Active with the
/// `kubernetes` finalizer in `spec.finalizers` (beside any the client asks for), which only
/// `/finalize` may change. A DELETE marks them Terminating for the namespace controller (see
/// [`crate::controllers::namespaces`]); they go once both `spec.finalizers` and
/// `metadata.finalizers` are empty. The system namespaces may not be deleted.
#[derive(Debug)]
pub struct Namespaces;

impl ResourceStrategy for Namespaces {
    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::path("Status", "string", ".status.phase")
                .described("The status of the namespace"),
        ]
    }

    /// The label naming the namespace, which selectors of namespaces rely on.
    fn default(&self, obj: &mut Value) {
        label_with_name(obj);
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        label_with_name(obj);
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        let mut finalizers = spec_finalizers(o.get("spec"));
        if !finalizers.iter().any(|f| f == KUBERNETES_FINALIZER) {
            finalizers.push(KUBERNETES_FINALIZER.to_string());
        }
        o.insert("spec".into(), json!({"finalizers": finalizers}));
        o.insert("status".into(), json!({"phase": "Active"}));
    }

    fn prepare_for_update(&self, cur: &Value, next: &mut Value, part: Part) {
        label_with_name(next);
        // Only `/finalize` changes the finalizers of the spec.
        if matches!(part, Part::Main | Part::Scale)
            && let Some(o) = next.as_object_mut()
        {
            match cur.get("spec") {
                Some(spec) => o.insert("spec".into(), spec.clone()),
                None => o.remove("spec"),
            };
        }
    }

    fn delete(
        &self,
        info: &ResourceInfo,
        cur: &Value,
        opts: &DeleteOptions,
        now: &str,
    ) -> ApiResult<(WriteOp, DeleteOutcome)> {
        let name = cur.name();
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::Forbidden {
                subject: subject(info, name),
                message: format!(
                    "namespaces {name:?} is forbidden: this namespace may not be deleted"
                ),
                cause: None,
            });
        }
        if cur.is_deleting() {
            // Only a finalized namespace goes; until then a DELETE answers it as it is.
            if spec_finalizers(cur.get("spec")).is_empty() {
                return crate::resource::delete_by_finalizers(info, cur, opts, now);
            }
            return Ok((WriteOp::Unchanged, DeleteOutcome::Pending));
        }
        let mut next = cur.clone();
        let meta = meta_mut(&mut next);
        meta.insert("deletionTimestamp".into(), json!(now));
        let mut finalizers = cur.finalizers();
        let asked = match opts.propagation.as_deref() {
            Some("Orphan") => Some(ORPHAN),
            Some("Foreground") => Some(FOREGROUND),
            _ => None,
        };
        if let Some(f) = asked
            && !finalizers.iter().any(|x| x == f)
        {
            finalizers.push(f.to_string());
            meta.insert("finalizers".into(), json!(finalizers));
        }
        if let Some(o) = next.as_object_mut() {
            let status = o.entry("status").or_insert_with(|| json!({}));
            if let Some(s) = status.as_object_mut() {
                s.insert("phase".into(), json!("Terminating"));
            }
        }
        Ok((WriteOp::Put(next), DeleteOutcome::Pending))
    }

    fn removed_once_finalized(&self, next: &Value) -> bool {
        spec_finalizers(next.get("spec")).is_empty()
    }

    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Namespace)
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// Sets the `kubernetes.io/metadata.name` label to the namespace's name.
fn label_with_name(obj: &mut Value) {
    let name = obj.name().to_string();
    if name.is_empty() {
        return;
    }
    let meta = meta_mut(obj);
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(l) = labels.as_object_mut() {
        l.insert(NAME_LABEL.into(), json!(name));
    }
}

/// A Namespace's `spec.finalizers`.
pub fn spec_finalizers(spec: Option<&Value>) -> Vec<String> {
    spec.and_then(|s| s.get("finalizers"))
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Secrets: type `Opaque` unless given, `stringData` folded into base64 `data`, the type and
/// (when `immutable`) the contents fixed once set.
#[derive(Debug)]
pub struct Secrets;

impl ResourceStrategy for Secrets {
    fn typed_fields(&self) -> &'static [TypedField] {
        const FIELDS: &[TypedField] = &[
            TypedField::new("data", "Secret", GoType::BytesMap),
            TypedField::new("stringData", "Secret", GoType::StringMap),
        ];
        FIELDS
    }

    fn field_selectors(&self) -> &'static [&'static str] {
        &["type"]
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::path("Type", "string", ".type")
                .described(crate::table::doc("v1", "Secret", "type")),
            PrinterColumn::computed("Data", CellSource::Count(vec!["data"]))
                .described(crate::table::doc("v1", "Secret", "data")),
        ]
    }

    /// `stringData` folds into `data` as kube-apiserver's decoding does (so its writer owns
    /// `data`), and the type defaults to Opaque.
    fn default(&self, obj: &mut Value) {
        if obj.get("stringData").is_some_and(Value::is_object) {
            secret_data(obj, &mut Vec::new());
        }
        if let Some(o) = obj.as_object_mut()
            && o.get("type")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            o.insert("type".into(), json!("Opaque"));
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if let Some(old) = check.old {
            if old.get("type") != obj.get("type") {
                check.errors.push(FieldError::invalid(
                    "type",
                    obj.get("type").unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
            immutable_contents(old, obj, &mut check.errors);
        }
        secret_data(obj, &mut check.errors);
        // A ServiceAccount token Secret names its ServiceAccount; the token controller fills in
        // the rest.
        if obj.get("type").and_then(Value::as_str) == Some(TOKEN_SECRET_TYPE)
            && obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(SERVICE_ACCOUNT_NAME))
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            check.errors.push(FieldError::required(
                format!("metadata.annotations[{SERVICE_ACCOUNT_NAME}]"),
                "",
            ));
        }
    }
}

/// ConfigMaps: `data` and `binaryData` map names to strings, and are fixed once `immutable`.
#[derive(Debug)]
pub struct ConfigMaps;

impl ResourceStrategy for ConfigMaps {
    fn typed_fields(&self) -> &'static [TypedField] {
        const FIELDS: &[TypedField] = &[
            TypedField::new("data", "ConfigMap", GoType::StringMap),
            TypedField::new("binaryData", "ConfigMap", GoType::BytesMap),
        ];
        FIELDS
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::computed("Data", CellSource::Count(vec!["data"]))
                .described(crate::table::doc("v1", "ConfigMap", "data")),
        ]
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if let Some(old) = check.old {
            immutable_contents(old, obj, &mut check.errors);
        }
        for field in ["data", "binaryData"] {
            if let Some(d) = obj.get(field) {
                check.errors.extend(names::config_keys(d, field));
            }
        }
        if let (Some(data), Some(binary)) = (
            obj.get("data").and_then(Value::as_object),
            obj.get("binaryData").and_then(Value::as_object),
        ) {
            for key in data.keys().filter(|k| binary.contains_key(*k)) {
                check.errors.push(FieldError::invalid(
                    format!("data[{key}]"),
                    &json!(key),
                    "duplicate of key present in binaryData",
                ));
            }
        }
    }
}

/// ServiceAccounts: printed with their secrets, answered with the object when deleted.
#[derive(Debug)]
pub struct ServiceAccounts;

impl ResourceStrategy for ServiceAccounts {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::computed("Secrets", CellSource::Count(vec!["secrets"]))
                .described(crate::table::doc("v1", "ServiceAccount", "secrets")),
        ]
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// Services: kube-apiserver's spec defaults, a cluster IP of their own (from 10.96.0.0/12,
/// as kubeadm's clusters have; nothing routes to it here) and node ports for NodePort and
/// LoadBalancer Services, answered with the object when deleted.
#[derive(Debug)]
pub struct Services;

/// Where Services' cluster IPs are taken from: 10.96.0.0/12, less its first two addresses
/// (the network's and the `kubernetes` Service's).
fn cluster_ip() -> String {
    let offset = 2 + rand::random::<u32>() % ((1 << 20) - 3);
    let ip = (10 << 24 | 96 << 16) + offset;
    std::net::Ipv4Addr::from(ip).to_string()
}

/// A node port from kube-apiserver's default range, 30000-32767.
fn node_port() -> u16 {
    30000 + rand::random::<u16>() % 2768
}

fn service_defaults(spec: &mut serde_json::Map<String, Value>) {
    super::set_default(spec, "type", json!("ClusterIP"));
    super::set_default(spec, "sessionAffinity", json!("None"));
    if spec.get("sessionAffinity") == Some(&json!("ClientIP")) {
        let config = spec.entry("sessionAffinityConfig").or_insert(json!({}));
        if let Some(client) = config
            .as_object_mut()
            .map(|c| c.entry("clientIP").or_insert(json!({})))
            .and_then(Value::as_object_mut)
        {
            super::set_default(client, "timeoutSeconds", json!(10800));
        }
    }
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    let node_ports = matches!(kind.as_str(), "NodePort" | "LoadBalancer");
    for port in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        super::set_default(port, "protocol", json!("TCP"));
        if let Some(number) = port.get("port").cloned() {
            super::set_default(port, "targetPort", number);
        }
        if node_ports {
            super::set_default(port, "nodePort", json!(node_port()));
        }
    }
    if kind == "ExternalName" {
        return;
    }
    super::set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    if node_ports {
        super::set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        super::set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    let ip = match spec.get("clusterIP").and_then(Value::as_str) {
        Some(ip) if !ip.is_empty() => ip.to_string(),
        _ => cluster_ip(),
    };
    spec.insert("clusterIP".into(), json!(ip));
}

/// What kube-apiserver's Service storage sets after decoding (so the writer owns none of it):
/// the allocated addresses' list, families and policy.
fn service_ip_families(spec: &mut serde_json::Map<String, Value>) {
    let Some(ip) = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    super::set_default(spec, "clusterIPs", json!([ip]));
    super::set_default(spec, "ipFamilies", json!(["IPv4"]));
    super::set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
}

impl ResourceStrategy for Services {
    fn allows_create_on_update(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let spec = |f| crate::table::doc("v1", "ServiceSpec", f);
        vec![
            PrinterColumn::cell("Type", "string", spec("type"), |o, _| {
                crate::table::workload::text(o.pointer("/spec/type"))
            }),
            PrinterColumn::cell("Cluster-IP", "string", spec("clusterIP"), |o, _| {
                crate::table::workload::or_none(o.pointer("/spec/clusterIP"))
            }),
            PrinterColumn::cell("External-IP", "string", spec("externalIPs"), |o, _| {
                service_external(o)
            }),
            PrinterColumn::cell("Port(s)", "string", spec("ports"), |o, _| service_ports(o)),
            PrinterColumn::age(),
            PrinterColumn::cell("Selector", "string", spec("selector"), |o, _| {
                crate::table::workload::labels(o.pointer("/spec/selector"))
            })
            .wide(),
        ]
    }

    fn default(&self, obj: &mut Value) {
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        if let Some(spec) = o.entry("spec").or_insert(json!({})).as_object_mut() {
            service_defaults(spec);
        }
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main
            && let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut)
        {
            service_ip_families(spec);
        }
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            service_ip_families(spec);
        }
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"loadBalancer": {}}));
        }
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// A Service's external addresses as `kubectl get` shows them.
fn service_external(obj: &Value) -> Value {
    let kind = obj.pointer("/spec/type").and_then(Value::as_str);
    if kind == Some("ExternalName") {
        return crate::table::workload::text(obj.pointer("/spec/externalName"));
    }
    let mut ips: Vec<String> = obj
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if kind == Some("LoadBalancer") {
        let lb = crate::table::workload::load_balancer(obj.pointer("/status/loadBalancer/ingress"));
        match lb.as_str() {
            Some("") | None if ips.is_empty() => return json!("<pending>"),
            Some(lb) if !lb.is_empty() => ips.push(lb.to_string()),
            _ => {}
        }
    }
    json!(match ips.is_empty() {
        true => "<none>".to_string(),
        false => ips.join(","),
    })
}

/// `80/TCP,443:30443/TCP`.
fn service_ports(obj: &Value) -> Value {
    let ports: Vec<String> = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let port = p.get("port").map(Value::to_string).unwrap_or_default();
            let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(node) => format!("{port}:{node}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect();
    json!(match ports.is_empty() {
        true => "<none>".to_string(),
        false => ports.join(","),
    })
}

/// Nodes: printed with their readiness, roles and kubelet version.
#[derive(Debug)]
pub struct Nodes;

impl ResourceStrategy for Nodes {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::computed("Status", CellSource::NodeStatus),
            PrinterColumn::computed("Roles", CellSource::NodeRoles),
            PrinterColumn::path("Age", "date", ".metadata.creationTimestamp"),
            PrinterColumn::path("Version", "string", ".status.nodeInfo.kubeletVersion"),
        ]
    }
}

/// The contents of a ConfigMap or Secret marked `immutable` may not change, nor the mark.
fn immutable_contents(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    for f in ["data", "binaryData"] {
        if old.get(f) != new.get(f) {
            errs.push(FieldError::forbidden(
                f,
                "field is immutable when `immutable` is set",
            ));
        }
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
}

/// Moves `stringData` into `data` (decoding has checked that `data` holds base64) and checks
/// its keys.
fn secret_data(obj: &mut Value, errs: &mut Vec<FieldError>) {
    let Some(o) = obj.as_object_mut() else { return };
    if let Some(sd) = o.remove("stringData") {
        let Some(sd) = sd.as_object() else {
            errs.push(FieldError::invalid(
                "stringData",
                &sd,
                "must be a map of strings",
            ));
            return;
        };
        let data = o.entry("data").or_insert(json!({}));
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                d.insert(k.clone(), json!(STANDARD.encode(v.as_str().unwrap_or(""))));
            }
        }
    }
    if let Some(d) = o.get("data") {
        errs.extend(names::config_keys(d, "data"));
    }
}
