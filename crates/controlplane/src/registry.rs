//! The resource registry: what the server serves. Each entry is a [`ResourceInfo`] (one
//! resource of one group-version). Built-in resources are listed here (`BUILTINS`) and
//! registered at start: a new built-in kind is one entry there and, when its objects have
//! behaviour of their own, a strategy in [`crate::strategy`]. CustomResourceDefinitions add
//! and remove entries while the server runs
//! ([`crate::strategy::apiextensions::resources_from_crd`]).
//!
//! This module owns names and shapes only; it never touches stored objects.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::resource::{
    ResourceInfo, ResourceStrategy, STATUS_VERBS, Subresource, storage_version_hash,
};
use crate::strategy;

/// What discovery lists for most resources.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One built-in resource as discovery lists it; what its objects do is its strategy's.
pub struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    verbs: &'static [&'static str],
    stored: bool,
    /// The version kube-apiserver stores objects at, when it is not the served one (its
    /// storage version hash tells it).
    hashed_as: Option<&'static str>,
    subresources: &'static [BuiltinSub],
    strategy: &'static dyn ResourceStrategy,
}

/// A built-in resource's subresource: its name, the kind it answers with (None: the
/// resource's own), that kind's group and version when they differ, and its verbs.
pub struct BuiltinSub(
    &'static str,
    Option<&'static str>,
    Option<(&'static str, &'static str)>,
    &'static [&'static str],
);

/// The `status` subresource.
const STATUS: BuiltinSub = BuiltinSub("status", None, None, STATUS_VERBS);

/// The resource's own kind, for [`sub`].
const SAME: Option<&str> = None;

const fn sub(
    name: &'static str,
    kind: Option<&'static str>,
    group_version: Option<(&'static str, &'static str)>,
    verbs: &'static [&'static str],
) -> BuiltinSub {
    BuiltinSub(name, kind, group_version, verbs)
}

/// A stored resource with every verb, no short names, categories or subresources.
const fn res(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    strategy: &'static dyn ResourceStrategy,
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        namespaced,
        short: &[],
        categories: &[],
        verbs: ALL_VERBS,
        stored: true,
        hashed_as: None,
        subresources: &[],
        strategy,
    }
}

impl Builtin {
    const fn short(self, short: &'static [&'static str]) -> Self {
        Builtin { short, ..self }
    }
    const fn categories(self, categories: &'static [&'static str]) -> Self {
        Builtin { categories, ..self }
    }
    const fn verbs(self, verbs: &'static [&'static str]) -> Self {
        Builtin { verbs, ..self }
    }
    const fn subresources(self, subresources: &'static [BuiltinSub]) -> Self {
        Builtin {
            subresources,
            ..self
        }
    }
    /// Stored by kube-apiserver at another version (CRDs: `v1beta1`), as its storage version
    /// hash says.
    const fn hashed_as(self, version: &'static str) -> Self {
        Builtin {
            hashed_as: Some(version),
            ..self
        }
    }
    /// Answered by a handler of its own, never stored.
    const fn answered(self) -> Self {
        Builtin {
            stored: false,
            ..self
        }
    }

    fn info(&self) -> ResourceInfo {
        let mut subresources: Vec<Subresource> = self
            .subresources
            .iter()
            .map(|BuiltinSub(name, kind, gv, verbs)| Subresource {
                name: name.to_string(),
                kind: kind.unwrap_or(self.kind).to_string(),
                group_version: gv.map(|(g, v)| (g.to_string(), v.to_string())),
                verbs,
            })
            .collect();
        let scale = self.strategy.scale();
        if scale.is_some() {
            subresources.push(Subresource::scale());
        }
        subresources.sort_by(|a, b| a.name.cmp(&b.name));
        let stored_as = match (self.hashed_as, self.strategy.stored_as()) {
            (Some(version), _) if self.group.is_empty() => version.to_string(),
            (Some(version), _) => format!("{}/{version}", self.group),
            (None, Some(stored)) => stored.api_version.to_string(),
            (None, None) if self.group.is_empty() => self.version.to_string(),
            (None, None) => format!("{}/{}", self.group, self.version),
        };
        ResourceInfo {
            group: self.group.into(),
            version: self.version.into(),
            kind: self.kind.into(),
            list_kind: format!("{}List", self.kind),
            plural: self.plural.into(),
            singular: self.kind.to_lowercase(),
            namespaced: self.namespaced,
            short_names: self.short.iter().map(|s| s.to_string()).collect(),
            categories: self.categories.iter().map(|c| c.to_string()).collect(),
            verbs: self.verbs,
            stored: self.stored,
            storage_version_hash: self
                .stored
                .then(|| storage_version_hash(&stored_as, self.kind)),
            subresources,
            printer_columns: self.strategy.printer_columns(),
            strategy: self.strategy,
            custom: None,
            scale,
            fields: crate::fields::ObjectType::builtin(
                &ResourceInfo::api_version_of(self.group, self.version),
                self.kind,
            ),
        }
    }
}

/// Every built-in resource, its group placed where kube-apiserver places it in discovery
/// (the order of groups here is the order `/apis` lists them in).
static BUILTINS: &[Builtin] = {
    use strategy::{
        PLAIN, apiextensions, apiregistration, apps, autoscaling, batch, certificates,
        coordination, core, core_kinds, discovery, events, networking, pods, policy, rbac,
        scheduling, storage,
    };
    &[
        res("", "v1", "Binding", "bindings", true, &PLAIN)
            .verbs(&["create"])
            .answered(),
        res(
            "",
            "v1",
            "ComponentStatus",
            "componentstatuses",
            false,
            &PLAIN,
        )
        .short(&["cs"])
        .verbs(&["get", "list"])
        .answered(),
        res("", "v1", "ConfigMap", "configmaps", true, &core::ConfigMaps).short(&["cm"]),
        res(
            "",
            "v1",
            "Endpoints",
            "endpoints",
            true,
            &core_kinds::Endpoints,
        )
        .short(&["ep"]),
        res("", "v1", "Event", "events", true, &events::CoreEvents).short(&["ev"]),
        res(
            "",
            "v1",
            "LimitRange",
            "limitranges",
            true,
            &core_kinds::LimitRanges,
        )
        .short(&["limits"]),
        res(
            "",
            "v1",
            "Namespace",
            "namespaces",
            false,
            &core::Namespaces,
        )
        .short(&["ns"])
        .verbs(&[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ])
        .subresources(&[sub("finalize", SAME, None, &["update"]), STATUS]),
        res("", "v1", "Node", "nodes", false, &core::Nodes)
            .short(&["no"])
            .subresources(&[
                sub(
                    "proxy",
                    Some("NodeProxyOptions"),
                    None,
                    &["create", "delete", "get", "patch", "update"],
                ),
                STATUS,
            ]),
        res(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            &core_kinds::PersistentVolumeClaims,
        )
        .short(&["pvc"])
        .subresources(&[STATUS]),
        res(
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            false,
            &core_kinds::PersistentVolumes,
        )
        .short(&["pv"])
        .subresources(&[STATUS]),
        // Nothing runs them: a pod stays Pending, as on a cluster without nodes.
        res("", "v1", "Pod", "pods", true, &pods::Pods)
            .short(&["po"])
            .categories(&["all"])
            .subresources(&[
                sub("attach", Some("PodAttachOptions"), None, &["create", "get"]),
                sub("binding", Some("Binding"), None, &["create"]),
                sub(
                    "ephemeralcontainers",
                    SAME,
                    None,
                    &["get", "patch", "update"],
                ),
                sub(
                    "eviction",
                    Some("Eviction"),
                    Some(("policy", "v1")),
                    &["create"],
                ),
                sub("exec", Some("PodExecOptions"), None, &["create", "get"]),
                sub("log", SAME, None, &["get"]),
                sub(
                    "portforward",
                    Some("PodPortForwardOptions"),
                    None,
                    &["create", "get"],
                ),
                sub(
                    "proxy",
                    Some("PodProxyOptions"),
                    None,
                    &["create", "delete", "get", "patch", "update"],
                ),
                sub("resize", SAME, None, &["get", "patch", "update"]),
                STATUS,
            ]),
        res(
            "",
            "v1",
            "PodTemplate",
            "podtemplates",
            true,
            &core_kinds::PodTemplates,
        ),
        res(
            "",
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            true,
            &core_kinds::ReplicationControllers,
        )
        .short(&["rc"])
        .categories(&["all"])
        .subresources(&[STATUS]),
        res(
            "",
            "v1",
            "ResourceQuota",
            "resourcequotas",
            true,
            &core_kinds::ResourceQuotas,
        )
        .short(&["quota"])
        .subresources(&[STATUS]),
        res("", "v1", "Secret", "secrets", true, &core::Secrets),
        res(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &core::ServiceAccounts,
        )
        .short(&["sa"])
        .subresources(&[sub(
            "token",
            Some("TokenRequest"),
            Some(("authentication.k8s.io", "v1")),
            &["create"],
        )]),
        res("", "v1", "Service", "services", true, &core::Services)
            .short(&["svc"])
            .categories(&["all"])
            .subresources(&[
                sub(
                    "proxy",
                    Some("ServiceProxyOptions"),
                    None,
                    &["create", "delete", "get", "patch", "update"],
                ),
                STATUS,
            ]),
        res(
            "apiregistration.k8s.io",
            "v1",
            "APIService",
            "apiservices",
            false,
            &apiregistration::ApiServices,
        )
        .categories(&["api-extensions"])
        .subresources(&[STATUS]),
        res(
            "apps",
            "v1",
            "ControllerRevision",
            "controllerrevisions",
            true,
            &apps::ControllerRevisions,
        ),
        res(
            "apps",
            "v1",
            "DaemonSet",
            "daemonsets",
            true,
            &apps::DaemonSets,
        )
        .short(&["ds"])
        .categories(&["all"])
        .subresources(&[STATUS]),
        res(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            &apps::Deployments,
        )
        .short(&["deploy"])
        .categories(&["all"])
        .subresources(&[STATUS]),
        res(
            "apps",
            "v1",
            "ReplicaSet",
            "replicasets",
            true,
            &apps::ReplicaSets,
        )
        .short(&["rs"])
        .categories(&["all"])
        .subresources(&[STATUS]),
        res(
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            true,
            &apps::StatefulSets,
        )
        .short(&["sts"])
        .categories(&["all"])
        .subresources(&[STATUS]),
        res(
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            &events::EventsV1,
        )
        .short(&["ev"]),
        res(
            "authentication.k8s.io",
            "v1",
            "SelfSubjectReview",
            "selfsubjectreviews",
            false,
            &PLAIN,
        )
        .verbs(&["create"])
        .answered(),
        res(
            "authentication.k8s.io",
            "v1",
            "TokenReview",
            "tokenreviews",
            false,
            &PLAIN,
        )
        .verbs(&["create"])
        .answered(),
        res(
            "authorization.k8s.io",
            "v1",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            true,
            &PLAIN,
        )
        .verbs(&["create"])
        .answered(),
        res(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            false,
            &PLAIN,
        )
        .verbs(&["create"])
        .answered(),
        res(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            false,
            &PLAIN,
        )
        .verbs(&["create"])
        .answered(),
        res(
            "authorization.k8s.io",
            "v1",
            "SubjectAccessReview",
            "subjectaccessreviews",
            false,
            &PLAIN,
        )
        .verbs(&["create"])
        .answered(),
        res(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
            &autoscaling::V2,
        )
        .short(&["hpa"])
        .categories(&["all"])
        .subresources(&[STATUS]),
        res(
            "autoscaling",
            "v1",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
            &autoscaling::V1,
        )
        .short(&["hpa"])
        .categories(&["all"])
        .subresources(&[STATUS]),
        res("batch", "v1", "CronJob", "cronjobs", true, &batch::CronJobs)
            .short(&["cj"])
            .categories(&["all"])
            .subresources(&[STATUS]),
        res("batch", "v1", "Job", "jobs", true, &batch::Jobs)
            .categories(&["all"])
            .subresources(&[STATUS]),
        res(
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            false,
            &certificates::CertificateSigningRequests,
        )
        .short(&["csr"])
        .subresources(&[
            sub("approval", SAME, None, &["get", "patch", "update"]),
            STATUS,
        ]),
        res(
            "networking.k8s.io",
            "v1",
            "IngressClass",
            "ingressclasses",
            false,
            &networking::IngressClasses,
        ),
        res(
            "networking.k8s.io",
            "v1",
            "Ingress",
            "ingresses",
            true,
            &networking::Ingresses,
        )
        .short(&["ing"])
        .subresources(&[STATUS]),
        res(
            "networking.k8s.io",
            "v1",
            "IPAddress",
            "ipaddresses",
            false,
            &PLAIN,
        )
        .short(&["ip"]),
        res(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            true,
            &networking::NetworkPolicies,
        )
        .short(&["netpol"]),
        res(
            "networking.k8s.io",
            "v1",
            "ServiceCIDR",
            "servicecidrs",
            false,
            &PLAIN,
        )
        .subresources(&[STATUS]),
        res(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
            &policy::PodDisruptionBudgets,
        )
        .short(&["pdb"])
        .subresources(&[STATUS]),
        res(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            &rbac::Bindings,
        ),
        res(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            &rbac::Roles,
        ),
        res(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            &rbac::Bindings,
        ),
        res(
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            true,
            &rbac::Roles,
        ),
        res(
            "storage.k8s.io",
            "v1",
            "CSIDriver",
            "csidrivers",
            false,
            &storage::CsiDrivers,
        ),
        res(
            "storage.k8s.io",
            "v1",
            "CSINode",
            "csinodes",
            false,
            &storage::CSI_NODES,
        ),
        res(
            "storage.k8s.io",
            "v1",
            "CSIStorageCapacity",
            "csistoragecapacities",
            true,
            &PLAIN,
        ),
        res(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            false,
            &storage::StorageClasses,
        )
        .short(&["sc"]),
        res(
            "storage.k8s.io",
            "v1",
            "VolumeAttachment",
            "volumeattachments",
            false,
            &storage::VOLUME_ATTACHMENTS,
        )
        .subresources(&[STATUS]),
        res(
            "storage.k8s.io",
            "v1",
            "VolumeAttributesClass",
            "volumeattributesclasses",
            false,
            &PLAIN,
        )
        .short(&["vac"]),
        res(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingAdmissionPolicy",
            "mutatingadmissionpolicies",
            false,
            &PLAIN,
        )
        .categories(&["api-extensions"]),
        res(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
            false,
            &PLAIN,
        )
        .categories(&["api-extensions"]),
        res(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
            &PLAIN,
        )
        .categories(&["api-extensions"]),
        res(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            false,
            &PLAIN,
        )
        .categories(&["api-extensions"])
        .subresources(&[STATUS]),
        res(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            false,
            &PLAIN,
        )
        .categories(&["api-extensions"]),
        res(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            &PLAIN,
        )
        .categories(&["api-extensions"]),
        res(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &apiextensions::CustomResourceDefinitions,
        )
        .hashed_as("v1beta1")
        .short(&["crd", "crds"])
        .categories(&["api-extensions"])
        .subresources(&[STATUS]),
        res(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            false,
            &scheduling::PriorityClasses,
        )
        .short(&["pc"]),
        res(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            &coordination::Leases,
        ),
        res(
            "node.k8s.io",
            "v1",
            "RuntimeClass",
            "runtimeclasses",
            false,
            &PLAIN,
        ),
        res(
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            true,
            &discovery::EndpointSlices,
        ),
        res(
            "resource.k8s.io",
            "v1",
            "DeviceClass",
            "deviceclasses",
            false,
            &PLAIN,
        ),
        res(
            "resource.k8s.io",
            "v1",
            "ResourceClaim",
            "resourceclaims",
            true,
            &PLAIN,
        )
        .subresources(&[STATUS]),
        res(
            "resource.k8s.io",
            "v1",
            "ResourceClaimTemplate",
            "resourceclaimtemplates",
            true,
            &PLAIN,
        ),
        res(
            "resource.k8s.io",
            "v1",
            "ResourceSlice",
            "resourceslices",
            false,
            &PLAIN,
        ),
        res(
            "flowcontrol.apiserver.k8s.io",
            "v1",
            "FlowSchema",
            "flowschemas",
            false,
            &PLAIN,
        )
        .subresources(&[STATUS]),
        res(
            "flowcontrol.apiserver.k8s.io",
            "v1",
            "PriorityLevelConfiguration",
            "prioritylevelconfigurations",
            false,
            &PLAIN,
        )
        .subresources(&[STATUS]),
    ]
};

/// The built-in groups in the order discovery lists them (the core group first).
fn builtin_group_rank(group: &str) -> Option<usize> {
    let mut seen = 0;
    let mut last = None;
    for b in BUILTINS {
        if last != Some(b.group) {
            if b.group == group {
                return Some(seen);
            }
            seen += 1;
            last = Some(b.group);
        }
    }
    None
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
        for info in BUILTINS.iter().map(Builtin::info) {
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

    /// Whether `group`/`version` is a built-in group version (not one a CRD adds).
    pub fn serves_builtin(&self, group: &str, version: &str) -> bool {
        self.resources_in(group, version)
            .iter()
            .any(|r| r.custom.is_none())
    }

    /// Every entry, ordered by group, version, plural.
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

    /// Named groups (not the core group) with their versions, preferred first, in the order
    /// kube-apiserver lists them: built-in groups in their place, then the groups of CRDs as
    /// kube-aggregator orders their APIServices of equal priority (by `version.group`).
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
        let rank = |g: &GroupVersions| match builtin_group_rank(&g.group) {
            Some(rank) => (0, rank, String::new()),
            None => (
                1,
                0,
                g.versions
                    .iter()
                    .map(|v| format!("{v}.{}", g.group))
                    .min()
                    .unwrap_or_default(),
            ),
        };
        out.sort_by_cached_key(rank);
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
    use serde_json::json;

    #[test]
    fn every_built_in_resource_has_its_kube_type() {
        // Its managed fields, apply and fieldValidation need it (see `tools/builtin_types.py`).
        let missing: Vec<String> = Registry::with_builtins()
            .all()
            .iter()
            // Reviews and bindings are answered, never stored: their fields are recorded
            // from their JSON (`writes::record_unstored`).
            .filter(|info| info.stored && info.fields.is_none())
            .map(|info| format!("{}/{} {}", info.group, info.version, info.kind))
            .collect();
        assert!(
            missing.is_empty(),
            "no type in fields/builtin.types: {missing:?}"
        );
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
        let infos = crate::strategy::apiextensions::resources_from_crd(&crd).unwrap();
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
