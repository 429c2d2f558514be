//! The resource registry: what the server serves. Each entry describes one resource of one
//! group-version (names, scope, verbs, subresources, printer columns, schema). Built-in
//! resources are registered at start; CustomResourceDefinitions add and remove entries while
//! the server runs.
//!
//! This module owns names and shapes only; it never touches stored objects.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use crate::strategy::{self, ResourceStrategy};

/// How a printer column's cell is computed from an object.
#[derive(Debug, Clone, PartialEq)]
pub enum CellSource {
    /// A simple JSONPath such as `.spec.replicas`.
    JsonPath(String),
    /// The number of entries of the map or list at a path (ConfigMap DATA, SA SECRETS).
    Count(Vec<&'static str>),
    /// `ready/desired` for workloads.
    Ratio(Vec<&'static str>, Vec<&'static str>),
    /// Comma-joined types of conditions whose status is True (CSR CONDITION).
    TrueConditions,
    /// `Kind/name` of a binding's roleRef.
    RoleRef,
    /// A number of seconds at a path, printed as a duration (`1h`), or `<none>`.
    Seconds(Vec<&'static str>),
    /// A node's readiness from its `Ready` condition (`Ready`, `NotReady`, `Unknown`), with
    /// `SchedulingDisabled` when cordoned.
    NodeStatus,
    /// A node's roles from its `node-role.kubernetes.io/<role>` labels.
    NodeRoles,
    /// Age of an event's last occurrence (lastTimestamp, eventTime or creation).
    LastSeen,
    /// `kind/name` (kind in lower case) of the object an event is about, at this field.
    EventObject(&'static str),
}

/// One column of `kubectl get` output.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub source: CellSource,
}

impl PrinterColumn {
    /// A column showing the value at a simple JSONPath.
    pub fn path(name: &str, type_: &str, path: &str) -> Self {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            source: CellSource::JsonPath(path.into()),
        }
    }
    /// When the object was created, as CRDs and roles show it.
    pub fn created_at() -> Self {
        PrinterColumn::path("Created At", "date-time", ".metadata.creationTimestamp")
    }

    /// A string column computed from the object.
    pub fn computed(name: &str, source: CellSource) -> Self {
        PrinterColumn {
            name: name.into(),
            type_: "string".into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            source,
        }
    }
}

/// One served resource of one group-version.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Subresources besides the main resource: `status`, `approval`, `finalize`, `scale`,
    /// `token` (a ServiceAccount's TokenRequests).
    pub subresources: Vec<String>,
    pub printer_columns: Vec<PrinterColumn>,
    /// What is particular about the resource's objects (see [`crate::strategy`]).
    pub strategy: &'static dyn ResourceStrategy,
    /// Served from a CustomResourceDefinition.
    pub custom: Option<CustomInfo>,
    /// What the `/scale` subresource reads and writes, when there is one.
    pub scale: Option<crate::scale::ScalePaths>,
    /// The type of the objects as kube-apiserver's decoder and field manager see it; None
    /// for kinds no field is recorded for.
    pub fields: Option<crate::fields::ObjectType>,
}

/// What a CRD adds to a resource entry.
#[derive(Debug, Clone)]
pub struct CustomInfo {
    /// metadata.name of the CRD.
    pub crd_name: String,
    /// The version objects are stored at.
    pub storage_version: String,
    /// openAPIV3Schema of this version, if any.
    pub schema: Option<Arc<Value>>,
    /// The schema's `x-kubernetes-validations`, compiled when the CRD was read.
    pub rules: Option<Arc<crate::validation_rules::RuleSet>>,
    /// How objects move between versions (`spec.conversion.strategy`).
    pub conversion: ConversionStrategy,
}

/// A CRD's `spec.conversion.strategy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConversionStrategy {
    /// Versions share one schema: only `apiVersion` changes.
    #[default]
    None,
    /// Objects are converted by the CRD's conversion webhook (see [`crate::conversion`]).
    Webhook,
}

impl ResourceInfo {
    /// `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        Self::api_version_of(&self.group, &self.version)
    }

    fn api_version_of(group: &str, version: &str) -> String {
        if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        }
    }

    /// The key objects are stored under: shared by every version of a resource, and by
    /// core/v1 and events.k8s.io/v1 Events (see [`crate::events`]).
    pub fn storage_key(&self) -> String {
        match self.strategy.stored_as() {
            Some(stored) => stored.key.into(),
            None => format!("{}/{}", self.group, self.plural),
        }
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s == "status")
    }

    /// The apiVersion objects are stored with.
    pub fn storage_api_version(&self) -> String {
        if let Some(stored) = self.strategy.stored_as() {
            return stored.api_version.into();
        }
        match &self.custom {
            Some(c) if c.storage_version != self.version => {
                format!("{}/{}", self.group, c.storage_version)
            }
            _ => self.api_version(),
        }
    }

    /// The verbs advertised in discovery.
    pub fn verbs() -> Value {
        json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    }
}

/// One built-in resource: its names, scope and subresources; the rest is its strategy's.
struct Builtin {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    subresources: &'static [&'static str],
    strategy: &'static dyn ResourceStrategy,
}

fn builtin(b: Builtin) -> ResourceInfo {
    let mut subresources: Vec<String> = b.subresources.iter().map(|s| s.to_string()).collect();
    let scale = b.strategy.scale();
    if scale.is_some() {
        subresources.push("scale".into());
    }
    ResourceInfo {
        group: b.group.into(),
        version: "v1".into(),
        kind: b.kind.into(),
        list_kind: format!("{}List", b.kind),
        plural: b.plural.into(),
        singular: b.kind.to_lowercase(),
        namespaced: b.namespaced,
        short_names: b.short.iter().map(|s| s.to_string()).collect(),
        categories: b
            .strategy
            .categories()
            .iter()
            .map(|c| c.to_string())
            .collect(),
        subresources,
        printer_columns: b.strategy.printer_columns(),
        strategy: b.strategy,
        custom: None,
        scale,
        fields: crate::fields::ObjectType::builtin(
            &ResourceInfo::api_version_of(b.group, "v1"),
            b.kind,
        ),
    }
}

fn builtins() -> Vec<ResourceInfo> {
    use strategy::{apiextensions, apps, certificates, coordination, core, events, pods, rbac};
    let b = |group, kind, plural, namespaced, short, subresources, strategy| {
        builtin(Builtin {
            group,
            kind,
            plural,
            namespaced,
            short,
            subresources,
            strategy,
        })
    };
    vec![
        b(
            "",
            "Namespace",
            "namespaces",
            false,
            &["ns"],
            &["status", "finalize"],
            &core::Namespaces,
        ),
        b("", "Secret", "secrets", true, &[], &[], &core::Secrets),
        b(
            "",
            "ConfigMap",
            "configmaps",
            true,
            &["cm"],
            &[],
            &core::ConfigMaps,
        ),
        b(
            "",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            &["token"],
            &core::ServiceAccounts,
        ),
        // Stored with kube-apiserver's spec defaults; nothing routes to a Service here, so it
        // gets no cluster IP.
        b(
            "",
            "Service",
            "services",
            true,
            &["svc"],
            &["status"],
            &core::Services,
        ),
        // Nothing runs them: a pod stays Pending, as on a cluster without nodes.
        b("", "Pod", "pods", true, &["po"], &["status"], &pods::Pods),
        b(
            "",
            "Event",
            "events",
            true,
            &["ev"],
            &[],
            &events::CoreEvents,
        ),
        b(
            "",
            "Node",
            "nodes",
            false,
            &["no"],
            &["status"],
            &core::Nodes,
        ),
        b(
            "apps",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
            &["status"],
            &apps::Deployments,
        ),
        b(
            "coordination.k8s.io",
            "Lease",
            "leases",
            true,
            &[],
            &[],
            &coordination::Leases,
        ),
        b(
            "events.k8s.io",
            "Event",
            "events",
            true,
            &[],
            &[],
            &events::EventsV1,
        ),
        b(
            "certificates.k8s.io",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            false,
            &["csr"],
            &["approval", "status"],
            &certificates::CertificateSigningRequests,
        ),
        b(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            &["status"],
            &apiextensions::CustomResourceDefinitions,
        ),
        b(
            "rbac.authorization.k8s.io",
            "Role",
            "roles",
            true,
            &[],
            &[],
            &rbac::Roles,
        ),
        b(
            "rbac.authorization.k8s.io",
            "ClusterRole",
            "clusterroles",
            false,
            &[],
            &[],
            &rbac::Roles,
        ),
        b(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            "rolebindings",
            true,
            &[],
            &[],
            &rbac::Bindings,
        ),
        b(
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            &[],
            &[],
            &rbac::Bindings,
        ),
    ]
}

/// Why a CRD could not be turned into served resources.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CrdError {
    #[error("{field}: {message}")]
    Field { field: String, message: String },
}

/// Builds the resource entries a CRD serves (one per served version).
pub fn resources_from_crd(crd: &Value) -> Result<Vec<ResourceInfo>, CrdError> {
    let field = |f: &str, m: &str| CrdError::Field {
        field: f.into(),
        message: m.into(),
    };
    let spec = crd
        .get("spec")
        .ok_or_else(|| field("spec", "Required value"))?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| field("spec.group", "Required value"))?;
    let names = spec
        .get("names")
        .ok_or_else(|| field("spec.names", "Required value"))?;
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let plural = s(names, "plural")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| field("spec.names.plural", "Required value"))?;
    let kind = s(names, "kind")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| field("spec.names.kind", "Required value"))?;
    let singular = s(names, "singular").unwrap_or_else(|| kind.to_lowercase());
    let list_kind = s(names, "listKind").unwrap_or_else(|| format!("{kind}List"));
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strs(names.get("shortNames"));
    let categories = strs(names.get("categories"));
    let namespaced = match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => {
            return Err(field(
                "spec.scope",
                "Unsupported value: supported values: \"Cluster\", \"Namespaced\"",
            ));
        }
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| field("spec.versions", "Required value"))?;
    let storage: Vec<&str> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    if storage.len() != 1 {
        return Err(field(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    let storage_version = storage[0].to_string();
    let conversion = conversion_strategy(spec.get("conversion"))?;
    let preserve_unknown = spec.get("preserveUnknownFields") == Some(&Value::Bool(true));
    let crd_name = format!("{plural}.{group}");
    let mut out = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| field("spec.versions[].name", "Required value"))?;
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let mut subresources = Vec::new();
        if v.pointer("/subresources/status").is_some() {
            subresources.push("status".to_string());
        }
        let scale = v.pointer("/subresources/scale").map(|sc| {
            let path = |k: &str| sc.get(k).and_then(Value::as_str).map(crate::scale::pointer);
            crate::scale::ScalePaths {
                spec_replicas: path("specReplicasPath").unwrap_or_else(|| "/spec/replicas".into()),
                status_replicas: path("statusReplicasPath")
                    .unwrap_or_else(|| "/status/replicas".into()),
                selector: path("labelSelectorPath").map_or(
                    crate::scale::SelectorSource::None,
                    crate::scale::SelectorSource::StringAt,
                ),
            }
        });
        if scale.is_some() {
            subresources.push("scale".to_string());
        }
        let mut printer_columns = Vec::new();
        for c in v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(cname), Some(path)) = (s(c, "name"), s(c, "jsonPath")) else {
                continue;
            };
            printer_columns.push(PrinterColumn {
                name: cname,
                type_: s(c, "type").unwrap_or_else(|| "string".into()),
                format: s(c, "format").unwrap_or_default(),
                description: s(c, "description")
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| {
                        format!("Custom resource definition column (in JSONPath format): {path}")
                    }),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                source: CellSource::JsonPath(path),
            });
        }
        let schema = v.pointer("/schema/openAPIV3Schema");
        let rules = match schema {
            Some(s) => crate::validation_rules::RuleSet::compile(
                s,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
            )
            .map_err(|errors| match errors.into_iter().next() {
                Some(e) => CrdError::Field {
                    field: e.field,
                    message: e.message,
                },
                None => CrdError::Field {
                    field: format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    message: "Invalid value: its rules do not compile".into(),
                },
            })?,
            None => None,
        };
        out.push(ResourceInfo {
            group: group.to_string(),
            version: name.to_string(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced,
            short_names: short_names.clone(),
            categories: categories.clone(),
            subresources,
            printer_columns,
            strategy: &strategy::apiextensions::CustomResources,
            scale,
            fields: Some(crate::fields::schema::Schema::from_crd(
                schema,
                preserve_unknown,
            )),
            custom: Some(CustomInfo {
                crd_name: crd_name.clone(),
                storage_version: storage_version.clone(),
                schema: schema.cloned().map(Arc::new),
                rules,
                conversion,
            }),
        });
    }
    Ok(out)
}

/// Reads `spec.conversion` as kube-apiserver validates it: `None` (the default) or `Webhook`,
/// which needs exactly one of `webhook.clientConfig.url` and `.service`, and
/// `webhook.conversionReviewVersions` naming `v1` or `v1beta1` (errors name the fields as
/// kube-apiserver's internal version does).
fn conversion_strategy(conversion: Option<&Value>) -> Result<ConversionStrategy, CrdError> {
    let field = |f: &str, m: String| CrdError::Field {
        field: format!("spec.conversion.{f}"),
        message: m,
    };
    let Some(conversion) = conversion.filter(|c| !c.is_null()) else {
        return Ok(ConversionStrategy::None);
    };
    let webhook = conversion.get("webhook").filter(|w| !w.is_null());
    match conversion.get("strategy").and_then(Value::as_str) {
        None | Some("None") if webhook.and_then(|w| w.get("clientConfig")).is_some() => Err(field(
            "webhookClientConfig",
            "Forbidden: should not be set when strategy is not set to Webhook".into(),
        )),
        None | Some("None") => Ok(ConversionStrategy::None),
        Some("Webhook") => {
            let client = webhook.and_then(|w| w.get("clientConfig"));
            let Some(client) = client else {
                return Err(field(
                    "webhookClientConfig",
                    "Required value: required when strategy is set to Webhook".into(),
                ));
            };
            if client.get("url").is_some() == client.get("service").is_some() {
                return Err(field(
                    "webhookClientConfig",
                    "Required value: exactly one of url or service is required".into(),
                ));
            }
            let versions = webhook
                .and_then(|w| w.get("conversionReviewVersions"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if versions.is_empty() {
                return Err(field("conversionReviewVersions", "Required value".into()));
            }
            if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
                return Err(field(
                    "conversionReviewVersions",
                    format!(
                        "Invalid value: {}: must include at least one of v1, v1beta1",
                        crate::error::render_value(&Value::Array(versions))
                    ),
                ));
            }
            Ok(ConversionStrategy::Webhook)
        }
        Some(other) => Err(field(
            "strategy",
            format!("Unsupported value: {other:?}: supported values: \"None\", \"Webhook\""),
        )),
    }
}

type Key = (String, String, String);

/// The set of served resources. Cheap to read concurrently.
#[derive(Default)]
pub struct Registry {
    entries: RwLock<BTreeMap<Key, Arc<ResourceInfo>>>,
}

/// One API group with its versions, preferred first.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupVersions {
    pub group: String,
    pub versions: Vec<String>,
}

impl Registry {
    /// A registry holding the built-in resources.
    pub fn with_builtins() -> Self {
        let r = Registry::default();
        for info in builtins() {
            r.insert(info);
        }
        r
    }

    fn insert(&self, info: ResourceInfo) {
        let key = (
            info.group.clone(),
            info.version.clone(),
            info.plural.clone(),
        );
        self.write().insert(key, Arc::new(info));
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Key, Arc<ResourceInfo>>> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Key, Arc<ResourceInfo>>> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry for `group/version` `plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.read()
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Any served version of a storage key (`group/plural`), storage version preferred.
    pub fn by_storage_key(&self, key: &str) -> Option<Arc<ResourceInfo>> {
        let (group, plural) = key.split_once('/')?;
        let entries = self.read();
        let mut found: Option<Arc<ResourceInfo>> = None;
        for ((g, _, p), info) in entries.iter() {
            if g == group && p == plural {
                let is_storage = info
                    .custom
                    .as_ref()
                    .is_none_or(|c| c.storage_version == info.version);
                if is_storage || found.is_none() {
                    found = Some(info.clone());
                }
            }
        }
        found
    }

    /// Every entry, ordered by group, version, plural.
    /// Whether `group`/`version` is a built-in group version (not one a CRD adds).
    pub fn serves_builtin(&self, group: &str, version: &str) -> bool {
        self.resources_in(group, version)
            .iter()
            .any(|r| r.custom.is_none())
    }

    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.read().values().cloned().collect()
    }

    /// Entries of one group-version.
    pub fn resources_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.read()
            .iter()
            .filter(|((g, v, _), _)| g == group && v == version)
            .map(|(_, i)| i.clone())
            .collect()
    }

    /// Named groups (not the core group) with their versions.
    pub fn groups(&self) -> Vec<GroupVersions> {
        let mut out: Vec<GroupVersions> = Vec::new();
        for info in self.read().values() {
            if info.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|g| g.group == info.group) {
                Some(g) => {
                    if !g.versions.contains(&info.version) {
                        g.versions.push(info.version.clone());
                    }
                }
                None => out.push(GroupVersions {
                    group: info.group.clone(),
                    versions: vec![info.version.clone()],
                }),
            }
        }
        for g in &mut out {
            g.versions
                .sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }

    /// Replaces the entries served for a CRD.
    pub fn set_crd(&self, crd_name: &str, infos: Vec<ResourceInfo>) {
        self.remove_crd(crd_name);
        for info in infos {
            self.insert(info);
        }
    }

    /// Stops serving a CRD's resources.
    pub fn remove_crd(&self, crd_name: &str) {
        self.write()
            .retain(|_, info| info.custom.as_ref().is_none_or(|c| c.crd_name != crd_name));
    }
}

/// Kubernetes version ordering: GA > beta > alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major: u32 = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (level, n) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    (level, major, n.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_resource_has_its_kube_type() {
        // Its managed fields, apply and fieldValidation need it (see `tools/builtin_types.py`).
        for info in Registry::with_builtins().all() {
            assert!(
                info.fields.is_some(),
                "{}/{} {} has no type in fields/builtin.types",
                info.group,
                info.version,
                info.kind
            );
        }
    }

    #[test]
    fn builtins_include_every_required_resource() {
        let r = Registry::with_builtins();
        for (g, p) in [
            ("", "namespaces"),
            ("", "secrets"),
            ("", "configmaps"),
            ("", "serviceaccounts"),
            ("", "services"),
            ("", "events"),
            ("", "nodes"),
            ("", "pods"),
            ("apps", "deployments"),
            ("coordination.k8s.io", "leases"),
            ("certificates.k8s.io", "certificatesigningrequests"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ] {
            assert!(r.lookup(g, "v1", p).is_some(), "{g}/{p}");
        }
    }

    #[test]
    fn versions_sort_ga_before_beta_before_alpha() {
        let mut v = vec!["v1alpha1", "v2", "v1beta2", "v1"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, vec!["v2", "v1", "v1beta2", "v1alpha1"]);
    }

    #[test]
    fn crd_serves_only_served_versions_and_knows_storage() {
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
            {"name": "v1beta1", "served": true, "storage": false},
            {"name": "v1alpha1", "served": false, "storage": false}
        ]}});
        let infos = resources_from_crd(&crd).unwrap();
        assert_eq!(infos.len(), 2);
        assert!(infos[0].has_status());
        assert_eq!(infos[1].storage_api_version(), "example.com/v1");
        let r = Registry::with_builtins();
        r.set_crd("widgets.example.com", infos);
        assert!(r.lookup("example.com", "v1beta1", "widgets").is_some());
        r.remove_crd("widgets.example.com");
        assert!(r.lookup("example.com", "v1", "widgets").is_none());
    }
}
