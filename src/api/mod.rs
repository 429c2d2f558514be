//! Kubernetes API types: fleetform's own kinds (Hub, Spoke, FleetSync) and the Open Cluster
//! Management kinds it reads and writes (ManagedCluster, ClusterClaim, ManagedClusterSet,
//! ManagedClusterSetBinding, ManagedClusterAddOn, ClusterManagementAddOn, ManifestWork), their
//! CRDs (OCM's with OCM's validation, [`schema`]), the conversion between the addon kinds'
//! versions, the condition helpers every loop uses, and the shared vocabulary of condition types,
//! reasons, taints, labels, annotations and finalizers ([`vocabulary`]), of OCM identities
//! ([`identity`]) and of bootstrap tokens ([`bootstrap_token`]): whatever two components must
//! spell alike is here, so that none imports it from the other.
//!
//! This module only describes objects. It never talks to a cluster and holds no policy: what a
//! condition or taint means for a spoke's lifecycle belongs to the reconciler, agent and hub
//! loops.

/// Lets the spec of a kind be absent (or `null`) on the wire and read as the default spec, as
/// OCM's CRDs allow for most kinds. The spec type carries `#[serde(remote = "Self")]`, which
/// turns serde's derived code into inherent functions that these trait impls wrap.
macro_rules! spec_may_be_absent {
    ($spec:ty) => {
        impl<'de> serde::Deserialize<'de> for $spec {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Present($spec);
                impl<'de> serde::Deserialize<'de> for Present {
                    fn deserialize<D: serde::Deserializer<'de>>(
                        deserializer: D,
                    ) -> Result<Self, D::Error> {
                        <$spec>::deserialize(deserializer).map(Present)
                    }
                }
                let present = Option::<Present>::deserialize(deserializer)?;
                Ok(present.map_or_else(Default::default, |Present(spec)| spec))
            }
        }

        impl serde::Serialize for $spec {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$spec>::serialize(self, serializer)
            }
        }
    };
}
pub(crate) use spec_may_be_absent;

pub mod addon;
pub mod bootstrap_token;
pub mod cluster;
pub mod clusterset;
pub mod conversion;
pub mod fleet;
pub mod identity;
pub mod schema;
pub mod vocabulary;
pub mod work;

use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResourceExt;
use serde::{Deserialize, Deserializer};

pub use addon::{ClusterManagementAddOn, ManagedClusterAddOn};
pub use cluster::{ClusterClaim, ManagedCluster};
pub use clusterset::{ManagedClusterSet, ManagedClusterSetBinding};
pub use fleet::{FleetSync, Hub, Spoke};
pub use work::ManifestWork;

/// Every CRD fleetform uses: its own kinds first, then OCM's, in a fixed order, each carrying
/// fleetform's mark.
pub fn crds() -> Vec<CustomResourceDefinition> {
    CRDS.clone()
}

/// The CRDs, generated from the types once: generating their schemas costs milliseconds, and
/// the reconciler brings the ClusterClaim CRD to a spoke on every pass.
static CRDS: std::sync::LazyLock<Vec<CustomResourceDefinition>> =
    std::sync::LazyLock::new(generate_crds);

fn generate_crds() -> Vec<CustomResourceDefinition> {
    use schema::Spec::{Optional, Required};
    let addon_kind = |versions| {
        let mut crd = schema::served_together(versions, "v1alpha1");
        crd.spec.conversion = Some(schema::conversion_webhook());
        crd
    };
    let crds = vec![
        Hub::crd(),
        Spoke::crd(),
        FleetSync::crd(),
        schema::crd::<ManagedCluster>(Optional),
        schema::crd::<ClusterClaim>(Optional),
        schema::crd::<ManagedClusterSet>(Optional),
        schema::crd::<ManagedClusterSetBinding>(Optional),
        addon_kind(vec![
            schema::crd::<ManagedClusterAddOn>(Required),
            schema::crd::<addon::v1beta1::ManagedClusterAddOn>(Required),
        ]),
        addon_kind(vec![
            schema::crd::<ClusterManagementAddOn>(Required),
            schema::crd::<addon::v1beta1::ClusterManagementAddOn>(Required),
        ]),
        schema::crd::<ManifestWork>(Optional),
    ];
    // Marked, so that an upgrade rewrites only the CRDs fleetform installed.
    crds.into_iter()
        .map(schema::with_known_formats)
        .map(|mut crd| {
            crd.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(
                    vocabulary::MANAGED_BY_LABEL.to_string(),
                    vocabulary::MANAGED_BY.to_string(),
                );
            crd
        })
        .collect()
}

/// The ClusterClaim CRD as [`crds`] has it: the one CRD an agent brings to its spoke.
pub fn cluster_claim_crd() -> CustomResourceDefinition {
    let name = <ClusterClaim as CustomResourceExt>::crd_name();
    CRDS.iter()
        .find(|crd| crd.metadata.name.as_deref() == Some(name))
        .cloned()
        .unwrap_or_else(ClusterClaim::crd)
}

/// One CRD as a YAML document.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> String {
    serde_yaml::to_string(crd).expect("a CustomResourceDefinition always serialises to YAML")
}

/// Every CRD of [`crds`] as one multi-document YAML stream, ready for `kubectl apply -f -`.
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .map(|crd| format!("---\n{}", crd_yaml(crd)))
        .collect()
}

/// The file a CRD is written to: `<plural>.<group>.yaml`, i.e. the CRD's name.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    format!("{name}.yaml")
}

/// Every CRD of [`crds`] as (file name, YAML document), in the order of [`crds`].
pub fn crd_files() -> Vec<(String, String)> {
    crds()
        .iter()
        .map(|crd| (crd_file_name(crd), crd_yaml(crd)))
        .collect()
}

/// Writes one file per CRD into `dir` (created if missing) and returns the paths written.
/// Files already there are overwritten; other files are left alone.
pub fn write_crds(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    crd_files()
        .into_iter()
        .map(|(name, yaml)| {
            let path = dir.join(name);
            std::fs::write(&path, yaml)?;
            Ok(path)
        })
        .collect()
}

/// Objects with a `status.conditions` list (what [`crate::runtime::conditions`] writes).
pub trait HasConditions {
    fn current_conditions(&self) -> &[Condition];
}

impl HasConditions for ManagedCluster {
    fn current_conditions(&self) -> &[Condition] {
        self.conditions()
    }
}

impl HasConditions for ManagedClusterAddOn {
    fn current_conditions(&self) -> &[Condition] {
        self.conditions()
    }
}

impl HasConditions for fleet::Hub {
    fn current_conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |status| status.conditions.as_slice())
    }
}

impl HasConditions for Spoke {
    fn current_conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |status| status.conditions.as_slice())
    }
}

/// The condition of this type in a list of conditions.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|condition| condition.type_ == type_)
}

/// Whether the condition of this type is present and True.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_)
        .is_some_and(|condition| condition.status == vocabulary::STATUS_TRUE)
}

/// Sets a condition the way Kubernetes' `meta.SetStatusCondition` does: adds it if its type is
/// new; otherwise updates status, reason, message and observedGeneration, and takes the new
/// `lastTransitionTime` only if the status changed. Pass the current time as
/// `lastTransitionTime`. Returns whether anything changed, so callers can skip no-op writes.
pub fn set_condition(conditions: &mut Vec<Condition>, condition: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        conditions.push(condition);
        return true;
    };
    let before = existing.clone();
    if existing.status != condition.status {
        existing.status = condition.status;
        existing.last_transition_time = condition.last_transition_time;
    }
    existing.reason = condition.reason;
    existing.message = condition.message;
    existing.observed_generation = condition.observed_generation;
    *existing != before
}

/// Removes the condition of this type; returns whether there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let len = conditions.len();
    conditions.retain(|condition| condition.type_ != type_);
    conditions.len() != len
}

/// Reads `null` as the type's default: Go writes `null` for an empty slice that has no
/// `omitempty`, and such fields are `Vec`s here.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Checks objects against the CRD schemas of [`crds`] the way an API server would, as far as
/// JSON Schema can: `null`s of fields that are not nullable are dropped first (as an API server
/// does), OpenAPI's `nullable` becomes a `null` type, `x-kubernetes-*` keys are ignored.
#[cfg(test)]
pub(crate) mod schema_check {
    use serde_json::{Value, json};

    use super::crds;

    /// Why the API server would reject this object under fleetform's CRDs (empty if it would
    /// not). The CRD and version are found by the object's `apiVersion` and `kind`.
    pub(crate) fn schema_errors(object: &Value) -> Vec<String> {
        let (group, version) = object["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .split_once('/')
            .unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let crd = crds()
            .into_iter()
            .find(|crd| crd.spec.group == group && crd.spec.names.kind == kind)
            .unwrap_or_else(|| panic!("no CRD for {group} {kind}"));
        let served = crd
            .spec
            .versions
            .iter()
            .find(|served| served.name == version)
            .unwrap_or_else(|| panic!("{kind} is not served at {version}"));
        let schema =
            serde_json::to_value(&served.schema.as_ref().unwrap().open_api_v3_schema).unwrap();
        let mut object = object.clone();
        drop_nulls(&schema, &mut object);
        errors(&schema, &object)
    }

    /// Removes the `null`s the schema does not allow, as an API server does before validating.
    fn drop_nulls(schema: &Value, instance: &mut Value) {
        match instance {
            Value::Object(map) => {
                map.retain(|key, value| {
                    let field = &schema["properties"][key];
                    !value.is_null() || field["nullable"] == true
                });
                for (key, value) in map.iter_mut() {
                    let field = match &schema["properties"][key] {
                        Value::Null => &schema["additionalProperties"],
                        field => field,
                    };
                    drop_nulls(field, value);
                }
            }
            Value::Array(items) => items
                .iter_mut()
                .for_each(|item| drop_nulls(&schema["items"], item)),
            _ => {}
        }
    }

    /// Errors of `instance` against one OpenAPI v3 schema node.
    pub(crate) fn errors(openapi: &Value, instance: &Value) -> Vec<String> {
        let validator = jsonschema::validator_for(&to_json_schema(openapi.clone())).unwrap();
        validator
            .iter_errors(instance)
            .map(|error| format!("{}: {error}", error.instance_path()))
            .collect()
    }

    fn to_json_schema(mut schema: Value) -> Value {
        if let Value::Object(map) = &mut schema {
            if map.remove("nullable") == Some(Value::Bool(true))
                && let Some(type_) = map.get("type").cloned()
            {
                map.insert("type".into(), json!([type_, "null"]));
            }
            for value in map.values_mut() {
                *value = to_json_schema(value.take());
            }
        } else if let Value::Array(items) = &mut schema {
            for value in items {
                *value = to_json_schema(value.take());
            }
        }
        schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::Value;
    use std::collections::BTreeSet;

    const BLESS_VAR: &str = "FLEETFORM_BLESS";

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn condition(type_: &str, status: &str, reason: &str, time: Time) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: time,
        }
    }

    #[test]
    fn set_condition_adds_a_new_type() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            condition("Ready", "True", "Ok", at(1))
        ));
        assert_eq!(conditions, [condition("Ready", "True", "Ok", at(1))]);
    }

    #[test]
    fn set_condition_keeps_transition_time_while_status_holds() {
        let mut conditions = vec![condition("Ready", "True", "Ok", at(1))];
        assert!(!set_condition(
            &mut conditions,
            condition("Ready", "True", "Ok", at(2))
        ));
        assert_eq!(conditions[0].last_transition_time, at(1));

        assert!(set_condition(
            &mut conditions,
            condition("Ready", "True", "StillOk", at(3))
        ));
        assert_eq!(conditions[0].reason, "StillOk");
        assert_eq!(conditions[0].last_transition_time, at(1));
    }

    #[test]
    fn set_condition_moves_transition_time_when_status_changes() {
        let mut conditions = vec![
            condition("Other", "True", "Ok", at(1)),
            condition("Ready", "True", "Ok", at(1)),
        ];
        assert!(set_condition(
            &mut conditions,
            condition("Ready", "Unknown", "Lost", at(5))
        ));
        assert_eq!(conditions[1], condition("Ready", "Unknown", "Lost", at(5)));
        assert_eq!(conditions[0], condition("Other", "True", "Ok", at(1)));
    }

    #[test]
    fn find_and_remove_condition_by_type() {
        let mut conditions = vec![
            condition("A", "True", "Ok", at(1)),
            condition("B", "False", "No", at(1)),
        ];
        assert_eq!(find_condition(&conditions, "B").unwrap().status, "False");
        assert!(is_condition_true(&conditions, "A"));
        assert!(!is_condition_true(&conditions, "B"));
        assert!(!is_condition_true(&conditions, "C"));
        assert!(remove_condition(&mut conditions, "A"));
        assert!(!remove_condition(&mut conditions, "A"));
        assert!(find_condition(&conditions, "A").is_none());
    }

    #[test]
    fn crds_have_unique_names_in_a_stable_order() {
        let names: Vec<String> = crds().iter().map(crd_file_name).collect();
        assert_eq!(
            names,
            [
                "hubs.fleetform.io.yaml",
                "spokes.fleetform.io.yaml",
                "fleetsyncs.fleetform.io.yaml",
                "managedclusters.cluster.open-cluster-management.io.yaml",
                "clusterclaims.cluster.open-cluster-management.io.yaml",
                "managedclustersets.cluster.open-cluster-management.io.yaml",
                "managedclustersetbindings.cluster.open-cluster-management.io.yaml",
                "managedclusteraddons.addon.open-cluster-management.io.yaml",
                "clustermanagementaddons.addon.open-cluster-management.io.yaml",
                "manifestworks.work.open-cluster-management.io.yaml",
            ]
        );
        assert_eq!(crds_yaml(), crds_yaml());
        assert_eq!(crds_yaml().matches("\n---\n").count() + 1, names.len());
    }

    #[test]
    fn fleetform_kinds_share_the_fleetform_category() {
        let in_category: Vec<String> = crds()
            .into_iter()
            .filter(|crd| {
                let categories = crd.spec.names.categories.as_deref().unwrap_or_default();
                categories.iter().any(|category| category == "fleetform")
            })
            .map(|crd| crd.spec.names.kind)
            .collect();
        assert_eq!(in_category, ["Hub", "Spoke", "FleetSync"]);
    }

    /// What fleetform's CRD of an OCM kind must share with OCM's own CRD.
    struct OcmCrd {
        name: &'static str,
        scope: &'static str,
        short_names: &'static [&'static str],
        /// Served versions, the stored one first, each with its printer columns.
        versions: &'static [(&'static str, &'static [&'static str])],
        status_subresource: bool,
        spec_required: bool,
    }

    const ADDON_COLUMNS: &[&str] = &["Available", "Degraded", "Progressing"];

    const OCM_CRDS: [OcmCrd; 7] = [
        OcmCrd {
            name: "managedclusters.cluster.open-cluster-management.io",
            scope: "Cluster",
            short_names: &["mcl", "mcls"],
            versions: &[(
                "v1",
                &[
                    "Hub Accepted",
                    "Managed Cluster URLs",
                    "Joined",
                    "Available",
                    "Age",
                ],
            )],
            status_subresource: true,
            spec_required: false,
        },
        OcmCrd {
            name: "clusterclaims.cluster.open-cluster-management.io",
            scope: "Cluster",
            short_names: &[],
            versions: &[("v1alpha1", &[])],
            status_subresource: false,
            spec_required: false,
        },
        OcmCrd {
            name: "managedclustersets.cluster.open-cluster-management.io",
            scope: "Cluster",
            short_names: &["mclset", "mclsets"],
            versions: &[("v1beta2", &["Empty", "Age"])],
            status_subresource: true,
            spec_required: false,
        },
        OcmCrd {
            name: "managedclustersetbindings.cluster.open-cluster-management.io",
            scope: "Namespaced",
            short_names: &["mclsetbinding", "mclsetbindings"],
            versions: &[("v1beta2", &[])],
            status_subresource: true,
            spec_required: false,
        },
        OcmCrd {
            name: "managedclusteraddons.addon.open-cluster-management.io",
            scope: "Namespaced",
            short_names: &["mca", "mcas"],
            versions: &[("v1alpha1", ADDON_COLUMNS), ("v1beta1", ADDON_COLUMNS)],
            status_subresource: true,
            spec_required: true,
        },
        OcmCrd {
            name: "clustermanagementaddons.addon.open-cluster-management.io",
            scope: "Cluster",
            short_names: &["cma", "cmas"],
            versions: &[
                ("v1alpha1", &["DISPLAY NAME", "CRD NAME"]),
                ("v1beta1", &["DISPLAY NAME"]),
            ],
            status_subresource: true,
            spec_required: true,
        },
        OcmCrd {
            name: "manifestworks.work.open-cluster-management.io",
            scope: "Namespaced",
            short_names: &[],
            versions: &[("v1", &[])],
            status_subresource: true,
            spec_required: false,
        },
    ];

    #[test]
    fn ocm_crds_match_ocms_names_scopes_versions_and_columns() {
        let crds = crds();
        for expected in OCM_CRDS {
            let name = expected.name;
            let crd = crds
                .iter()
                .find(|crd| crd.metadata.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("no CRD {name}"));
            assert_eq!(crd.spec.scope, expected.scope, "{name}");
            let short_names = crd.spec.names.short_names.as_deref().unwrap_or_default();
            assert_eq!(short_names, expected.short_names, "{name}");
            assert_eq!(crd.spec.names.categories, None, "{name}");
            let served: Vec<(&str, bool, bool)> = crd
                .spec
                .versions
                .iter()
                .map(|version| (version.name.as_str(), version.served, version.storage))
                .collect();
            let wanted: Vec<(&str, bool, bool)> = expected
                .versions
                .iter()
                .enumerate()
                .map(|(index, (version, _))| (*version, true, index == 0))
                .collect();
            assert_eq!(served, wanted, "{name}");
            for (version, (_, columns)) in crd.spec.versions.iter().zip(expected.versions) {
                let printed: Vec<&str> = version
                    .additional_printer_columns
                    .iter()
                    .flatten()
                    .map(|column| column.name.as_str())
                    .collect();
                assert_eq!(printed, *columns, "{name} {}", version.name);
                let status = version
                    .subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref());
                assert_eq!(status.is_some(), expected.status_subresource, "{name}");
                let schema = version.schema.as_ref().unwrap();
                let root = schema.open_api_v3_schema.as_ref().unwrap();
                let required = root.required.as_deref().unwrap_or_default();
                assert_eq!(
                    required.contains(&"spec".to_string()),
                    expected.spec_required,
                    "{name} {}",
                    version.name
                );
            }
        }
    }

    #[test]
    fn addon_crds_convert_through_the_hub_webhook() {
        for crd in crds().iter().filter(|crd| crd.spec.versions.len() > 1) {
            let conversion = serde_json::to_value(&crd.spec.conversion).unwrap();
            assert_eq!(
                conversion,
                serde_json::json!({
                    "strategy": "Webhook",
                    "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": {"service": {
                            "namespace": "fleetform-system", "name": "fleetform-hub",
                            "path": "/convert", "port": 9443,
                        }},
                    },
                }),
                "{}",
                crd.spec.names.kind
            );
        }
    }

    /// OCM's CRDs keep unknown fields only inside a ManifestWork's manifests; anything else an
    /// OCM CRD does not declare (such as a fleetform-only status field) is pruned.
    #[test]
    fn ocm_schemas_keep_unknown_fields_only_in_manifests() {
        fn open_paths(node: &Value, path: &str, found: &mut Vec<String>) {
            let Value::Object(map) = node else { return };
            if map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
                found.push(path.to_string());
            }
            for (name, child) in map
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                open_paths(child, &format!("{path}.{name}"), found);
            }
            for key in ["items", "additionalProperties"] {
                if let Some(child) = map.get(key) {
                    open_paths(child, &format!("{path}[]"), found);
                }
            }
        }
        let mut found = Vec::new();
        for crd in crds().iter().filter(|crd| crd.spec.group != fleet::GROUP) {
            for version in &crd.spec.versions {
                let schema = serde_json::to_value(&version.schema).unwrap();
                let path = format!("{}/{}", crd.spec.names.kind, version.name);
                open_paths(&schema["openAPIV3Schema"], &path, &mut found);
            }
        }
        assert_eq!(found, ["ManifestWork/v1.spec.workload.manifests[]"]);
    }

    /// kube-apiserver answers every write of a CRD whose schema has a format it does not know
    /// with a warning (`unrecognized format "uint32"`), and checks nothing of that format.
    #[test]
    fn crd_schemas_use_only_formats_kube_apiserver_knows() {
        fn check(node: &Value, path: &str, problems: &mut Vec<String>) {
            match node {
                Value::Object(map) => {
                    if let Some(Value::String(format)) = map.get("format") {
                        let type_ = map.get("type").and_then(Value::as_str);
                        let known = match type_ {
                            Some("integer") => ["int32", "int64"].contains(&format.as_str()),
                            Some("number") => ["float", "double"].contains(&format.as_str()),
                            Some("string") => {
                                ["date-time", "byte", "uri", "hostname"].contains(&format.as_str())
                            }
                            _ => false,
                        };
                        if !known {
                            problems.push(format!("{path}: {type_:?} format {format:?}"));
                        }
                    }
                    for (key, child) in map {
                        check(child, &format!("{path}/{key}"), problems);
                    }
                }
                Value::Array(items) => items.iter().for_each(|item| check(item, path, problems)),
                _ => {}
            }
        }
        let mut problems = Vec::new();
        for crd in crds() {
            for version in &crd.spec.versions {
                let schema = serde_json::to_value(&version.schema).unwrap();
                let name = crd.metadata.name.as_deref().unwrap();
                check(&schema, &format!("{name}/{}", version.name), &mut problems);
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
        // A width the known formats cannot say is kept as bounds.
        let hubs = crds()
            .into_iter()
            .find(|crd| crd.metadata.name.as_deref() == Some("hubs.fleetform.io"))
            .unwrap();
        let text = serde_json::to_string(&hubs).unwrap();
        assert!(text.contains(r#""maximum":4294967295.0"#), "{text}");
    }

    /// The API server refuses a CRD whose defaults do not satisfy their own schema.
    #[test]
    fn crd_defaults_satisfy_their_own_schemas() {
        fn check(node: &Value, path: &str, problems: &mut Vec<String>) {
            match node {
                Value::Object(map) => {
                    if let Some(default) = map.get("default") {
                        for error in schema_check::errors(node, default) {
                            problems.push(format!("{path}: default {default}: {error}"));
                        }
                    }
                    for (key, child) in map {
                        check(child, &format!("{path}/{key}"), problems);
                    }
                }
                Value::Array(items) => items.iter().for_each(|item| check(item, path, problems)),
                _ => {}
            }
        }
        let mut problems = Vec::new();
        for crd in crds() {
            for version in &crd.spec.versions {
                let schema = serde_json::to_value(&version.schema).unwrap();
                let name = crd.metadata.name.as_deref().unwrap();
                check(&schema, &format!("{name}/{}", version.name), &mut problems);
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    /// The API server refuses a CRD schema that is not structural: every field needs a type
    /// unless it is declared int-or-string or open.
    #[test]
    fn crd_schemas_are_structural() {
        fn check(node: &Value, path: &str, problems: &mut Vec<String>) {
            let Value::Object(map) = node else { return };
            let open = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
                || map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
            if !open && !map.contains_key("type") {
                problems.push(format!("{path} has no type"));
            }
            for (key, children) in [
                ("properties", map.get("properties")),
                ("additionalProperties", map.get("additionalProperties")),
            ] {
                if let Some(Value::Object(children)) = children {
                    if key == "properties" {
                        for (name, child) in children {
                            check(child, &format!("{path}.{name}"), problems);
                        }
                    } else {
                        check(
                            &Value::Object(children.clone()),
                            &format!("{path}.*"),
                            problems,
                        );
                    }
                }
            }
            if let Some(items) = map.get("items") {
                check(items, &format!("{path}[]"), problems);
            }
        }
        let mut problems = Vec::new();
        for crd in crds() {
            for version in &crd.spec.versions {
                let schema = version.schema.as_ref().unwrap();
                let schema = serde_json::to_value(&schema.open_api_v3_schema).unwrap();
                let name = crd.metadata.name.as_deref().unwrap();
                check(&schema, &format!("{name}/{}", version.name), &mut problems);
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    /// Fails when `deploy/crds/` differs from [`crds`]. To regenerate:
    /// `FLEETFORM_BLESS=1 cargo test --lib crds_are_current` (or `fleetform crds --out-dir deploy/crds`).
    #[test]
    fn crds_are_current() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds");
        let expected = crd_files();
        if std::env::var_os(BLESS_VAR).is_some() {
            write_crds(&dir).unwrap();
            for stale in yaml_files(&dir) {
                if !expected.iter().any(|(name, _)| *name == stale) {
                    std::fs::remove_file(dir.join(&stale)).unwrap();
                }
            }
        }
        let mut problems = Vec::new();
        for (name, yaml) in &expected {
            match std::fs::read_to_string(dir.join(name)) {
                Ok(found) if found == *yaml => {}
                Ok(_) => problems.push(format!("{name} is out of date")),
                Err(_) => problems.push(format!("{name} is missing")),
            }
        }
        for name in yaml_files(&dir) {
            if !expected.iter().any(|(expected, _)| *expected == name) {
                problems.push(format!("{name} is not a CRD fleetform generates"));
            }
        }
        assert!(
            problems.is_empty(),
            "deploy/crds/ differs from api::crds():\n  {}\nregenerate with `{BLESS_VAR}=1 cargo test --lib crds_are_current` \
             (or `fleetform crds --out-dir deploy/crds`)",
            problems.join("\n  ")
        );
    }

    fn yaml_files(dir: &Path) -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".yaml"))
            .collect()
    }
}
