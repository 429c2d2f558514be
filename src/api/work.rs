//! OCM's ManifestWork (`work.open-cluster-management.io/v1`): resources the hub asks a spoke's
//! work agent to apply, stored in the cluster's namespace on the hub.
//!
//! fleetform only reads ManifestWorks: unjoining a spoke waits while works other than addon
//! works remain in its namespace. The manifests themselves are kept as raw objects.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::addon;
use super::vocabulary::{LABEL_ADDON_NAME, WORK_CONDITION_APPLIED};

/// API group of ManifestWork.
pub const GROUP: &str = "work.open-cluster-management.io";

/// The resources a ManifestWork applies on its managed cluster, and how deleting it treats them.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "work.open-cluster-management.io",
    version = "v1",
    kind = "ManifestWork",
    namespaced,
    status = "ManifestWorkStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "Resources the hub asks a managed cluster's work agent to apply; lives in the cluster's namespace."
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ManifestWorkSpec {
    #[serde(default)]
    pub workload: ManifestsTemplate,
    /// What deleting the work does to its resources; Foreground when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
}

/// The manifests of a work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestsTemplate {
    /// Complete Kubernetes objects, kept as they were written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "raw_objects_schema")]
    pub manifests: Vec<serde_json::Value>,
}

fn raw_objects_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true
        }
    })
}

/// What deleting a work does to the resources it applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOption {
    #[serde(default)]
    #[schemars(extend("default" = "Foreground"))]
    pub propagation_policy: DeletePropagationPolicy,
    /// Resources left in place by a `SelectivelyOrphan` deletion.
    // OCM's JSON name is plural, its Go name singular.
    #[serde(
        default,
        rename = "selectivelyOrphans",
        skip_serializing_if = "Option::is_none"
    )]
    pub selectively_orphan: Option<SelectivelyOrphan>,
    /// Seconds after completion before the work is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i64>,
}

/// How deleting a work treats its resources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletePropagationPolicy {
    /// The resources are deleted before the work goes.
    #[default]
    Foreground,
    /// The resources stay on the spoke.
    Orphan,
    /// Only the resources matched by `selectivelyOrphans` stay.
    SelectivelyOrphan,
}

/// Resources a `SelectivelyOrphan` deletion leaves on the spoke.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectivelyOrphan {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphaning_rules: Vec<ResourceIdentifier>,
}

/// One resource on the spoke, by group, resource, namespace and name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceIdentifier {
    #[serde(default)]
    pub group: String,
    pub resource: String,
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

/// What the work agent reports about a work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkStatus {
    /// Conditions of the whole work: Applied, Available, Degraded, Progressing...
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::null_as_default"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_status: Option<ManifestResourceStatus>,
}

/// Per-manifest status of a work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestResourceStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<ManifestCondition>,
}

/// The status of one manifest of a work.
// Status feedback is kept by the schema but not modelled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ManifestCondition {
    pub resource_meta: ManifestResourceMeta,
    /// Conditions of this manifest, one per type.
    // Always serialised (OCM's schema requires it); Go writes `null` for none.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub conditions: Vec<Condition>,
}

/// Which resource a manifest is, and its position in the work.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestResourceMeta {
    pub ordinal: i32,
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

impl ManifestWork {
    /// The condition of this type, if the work has one.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        super::find_condition(self.conditions(), type_)
    }

    /// All conditions of the work (none before the work agent reports).
    pub fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |status| &status.conditions)
    }

    /// The addon this work deploys, if it is an addon work: OCM's addon framework labels every
    /// work it creates with `open-cluster-management.io/addon-name`.
    pub fn addon_name(&self) -> Option<&str> {
        self.labels().get(LABEL_ADDON_NAME).map(String::as_str)
    }

    /// Whether the work belongs to an addon: labelled with the addon's name, or owned by a
    /// ManagedClusterAddOn (addon managers that do not use OCM's framework set only the owner).
    pub fn is_addon_work(&self) -> bool {
        self.addon_name().is_some()
            || self.owner_references().iter().any(|owner| {
                owner.kind == "ManagedClusterAddOn"
                    && owner.api_version.split('/').next() == Some(addon::GROUP)
            })
    }

    /// Whether the work agent reports every manifest applied (`Applied` is True).
    pub fn is_applied(&self) -> bool {
        super::is_condition_true(self.conditions(), WORK_CONDITION_APPLIED)
    }

    /// Whether the work is being deleted (its resources may still be on the spoke).
    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::schema_check::schema_errors;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use serde_json::json;

    fn ocm_written_work(labels: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "work.open-cluster-management.io/v1",
            "kind": "ManifestWork",
            "metadata": {"name": "addon-hello-deploy-0", "namespace": "cluster1", "labels": labels},
            "spec": {
                "workload": {"manifests": [{
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "default"},
                    "data": {"k": "v"}
                }]},
                "deleteOption": {"propagationPolicy": "SelectivelyOrphan",
                                 "selectivelyOrphans": {"orphaningRules": [
                                     {"group": "", "resource": "configmaps",
                                      "name": "cm", "namespace": "default"}]}},
                "manifestConfigs": [{"resourceIdentifier": {"group": "", "resource": "configmaps",
                                                            "name": "cm", "namespace": "default"}}]
            },
            "status": {
                "conditions": [{
                    "type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
                    "message": "", "lastTransitionTime": "2026-01-02T03:04:05Z"
                }],
                "resourceStatus": {"manifests": [{
                    "resourceMeta": {"ordinal": 0, "group": "", "version": "v1", "kind": "ConfigMap",
                                     "resource": "configmaps", "name": "cm", "namespace": "default"},
                    "statusFeedback": {},
                    "conditions": null
                }]}
            }
        })
    }

    #[test]
    fn reads_a_work_written_by_ocm_and_keeps_its_manifests_raw() {
        let work: ManifestWork =
            serde_json::from_value(ocm_written_work(json!({LABEL_ADDON_NAME: "hello"}))).unwrap();
        assert_eq!(work.spec.workload.manifests[0]["data"], json!({"k": "v"}));
        let delete = work.spec.delete_option.as_ref().unwrap();
        assert_eq!(
            delete.propagation_policy,
            DeletePropagationPolicy::SelectivelyOrphan
        );
        assert_eq!(
            delete.selectively_orphan.as_ref().unwrap().orphaning_rules[0].name,
            "cm"
        );
        let manifests = &work
            .status
            .as_ref()
            .unwrap()
            .resource_status
            .as_ref()
            .unwrap()
            .manifests;
        assert_eq!(manifests[0].resource_meta.kind, "ConfigMap");
        assert!(manifests[0].conditions.is_empty());
        assert!(work.is_applied());
        assert!(!work.is_deleting());
    }

    /// The work as the API server validates it: it drops `null`s of non-nullable fields first.
    fn stored(mut work: serde_json::Value) -> serde_json::Value {
        work["status"]["resourceStatus"]["manifests"][0]["conditions"] = json!([]);
        work
    }

    #[test]
    fn crd_accepts_works_written_by_ocm() {
        let value = stored(ocm_written_work(json!({LABEL_ADDON_NAME: "hello"})));
        assert_eq!(schema_errors(&value), Vec::<String>::new());
    }

    #[test]
    fn crd_rejects_manifests_that_are_not_objects() {
        let mut value = stored(ocm_written_work(json!({})));
        value["spec"]["workload"]["manifests"] = json!(["not an object"]);
        let errors = schema_errors(&value);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("/spec/workload/manifests/0"),
            "{errors:?}"
        );
    }

    #[test]
    fn addon_works_are_told_apart_by_label() {
        let addon_work: ManifestWork =
            serde_json::from_value(ocm_written_work(json!({LABEL_ADDON_NAME: "hello"}))).unwrap();
        assert!(addon_work.is_addon_work());
        assert_eq!(addon_work.addon_name(), Some("hello"));
        let user_work: ManifestWork =
            serde_json::from_value(ocm_written_work(json!({"app": "hello"}))).unwrap();
        assert!(!user_work.is_addon_work());
        assert_eq!(user_work.addon_name(), None);
    }

    #[test]
    fn works_owned_by_an_addon_are_addon_works() {
        let mut work = ManifestWork::new("w", ManifestWorkSpec::default());
        work.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "addon.open-cluster-management.io/v1alpha1".into(),
            kind: "ManagedClusterAddOn".into(),
            name: "hello".into(),
            uid: "1".into(),
            ..Default::default()
        }]);
        assert!(work.is_addon_work());
        work.metadata.owner_references.as_mut().unwrap()[0].api_version = "example.com/v1".into();
        assert!(!work.is_addon_work());
    }

    #[test]
    fn work_without_status_is_not_applied() {
        let work = ManifestWork::new("w", ManifestWorkSpec::default());
        assert!(!work.is_applied());
        assert!(work.condition(WORK_CONDITION_APPLIED).is_none());
    }
}
