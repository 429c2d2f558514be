//! OCM's ManifestWork (`work.open-cluster-management.io/v1`): resources the hub asks a spoke's
//! work agent to apply, stored in the cluster's namespace on the hub.
//!
//! fleetform only reads ManifestWorks: unjoining a spoke waits while works other than addon
//! works remain in its namespace. The manifests themselves are kept as raw objects; every other
//! field and its validation is OCM's (see [`super::schema`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::addon;
use super::schema::{self, DNS_SUBDOMAIN};
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
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct ManifestWorkSpec {
    #[serde(default, skip_serializing_if = "ManifestsTemplate::is_empty")]
    pub workload: ManifestsTemplate,
    /// What deleting the work does to its resources; Foreground when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
    /// How the work agent applies, watches and reports individual resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest_configs: Vec<ManifestConfigOption>,
    /// Whom the work agent acts as when it applies the resources; itself when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ManifestWorkExecutor>,
}

super::spec_may_be_absent!(ManifestWorkSpec);

/// The manifests of a work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestsTemplate {
    /// Complete Kubernetes objects, kept as they were written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "raw_objects_schema")]
    pub manifests: Vec<serde_json::Value>,
}

impl ManifestsTemplate {
    fn is_empty(&self) -> bool {
        self.manifests.is_empty()
    }
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
    /// API group of the resource; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub resource: String,
    pub name: String,
    /// Namespace of the resource; empty for a cluster-scoped one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// How the work agent treats one resource of a work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestConfigOption {
    /// The resource this option is for.
    pub resource_identifier: ResourceIdentifier,
    /// Status fields of the resource to report in the work's status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback_rules: Vec<FeedbackRule>,
    /// How the resource is written to the spoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Conditions of the resource to report, derived by rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["condition"]
    ))]
    pub condition_rules: Vec<ConditionRule>,
    /// Whether status feedback is polled or watched.
    #[serde(default)]
    pub feedback_scrape_type: FeedbackScrapeType,
}

/// Status fields of a resource to report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackRule {
    #[serde(rename = "type")]
    pub type_: FeedbackType,
    /// The fields of a `JSONPaths` rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub json_paths: Vec<JsonPath>,
}

/// Which status fields a feedback rule reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FeedbackType {
    /// The fields the work agent knows for the resource's kind.
    #[default]
    WellKnownStatus,
    /// The fields the rule's `jsonPaths` name.
    #[serde(rename = "JSONPaths")]
    JsonPaths,
}

/// A named status field of a resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JsonPath {
    /// Name the value is reported under.
    pub name: String,
    /// API version to read the resource in; the manifest's when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// JSONPath of the field, relative to `.status`.
    pub path: String,
}

/// How a resource of a work is written to the spoke.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    #[serde(rename = "type")]
    #[schemars(extend("default" = "Update"))]
    pub type_: UpdateStrategyType,
    /// Settings of a `ServerSideApply` strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApplyConfig>,
}

/// How a resource is written to the spoke.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpdateStrategyType {
    /// Replaced by an update when it differs.
    #[default]
    Update,
    /// Created once, never updated.
    CreateOnly,
    /// Written by server-side apply.
    ServerSideApply,
    /// Only read, for status feedback.
    ReadOnly,
}

/// Settings of a server-side apply of a resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerSideApplyConfig {
    /// Whether conflicts with other managers are overridden.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// Field manager of the apply; must start with `work-agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern("^work-agent"), extend("default" = "work-agent"))]
    pub field_manager: Option<String>,
    /// Fields the work agent leaves alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["condition"]
    ))]
    pub ignore_fields: Vec<IgnoreField>,
}

/// Fields of a resource the work agent does not correct, and when.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreField {
    #[schemars(extend("default" = "OnSpokePresent"))]
    pub condition: IgnoreFieldsCondition,
    /// The fields, as JSONPaths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_paths: Vec<String>,
    /// The fields, as JSON pointers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_pointers: Vec<String>,
    /// The fields, as jq path expressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jq_path_expressions: Vec<String>,
}

/// When ignored fields stay as the spoke has them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum IgnoreFieldsCondition {
    /// Whenever the field exists on the spoke.
    #[default]
    OnSpokePresent,
    /// Only while the work's manifest is unchanged.
    OnSpokeChange,
}

/// A condition of a resource to report, and the rule it is derived by.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.type != 'CEL' || self.condition != \"\"",
    "message": "Condition is required for CEL rules",
}]))]
pub struct ConditionRule {
    /// Type of the reported condition.
    pub condition: String,
    #[serde(rename = "type")]
    pub type_: ConditionRuleType,
    /// CEL expressions that must all be true for the condition to be True (type `CEL`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
    /// Message of the reported condition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// CEL expression computing the message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message_expression: String,
}

/// How a reported condition is derived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionRuleType {
    /// The work agent's own rules for well-known conditions.
    #[default]
    WellKnownConditions,
    /// The rule's `celExpressions`.
    #[serde(rename = "CEL")]
    Cel,
}

/// When status feedback is collected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FeedbackScrapeType {
    /// At the work agent's resync interval.
    #[default]
    Poll,
    /// As the resource changes.
    Watch,
}

/// Whom the work agent acts as.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestWorkExecutor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<ManifestWorkExecutorSubject>,
}

/// The identity a work's resources are applied with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkExecutorSubject {
    #[serde(rename = "type")]
    pub type_: ExecutorSubjectType,
    /// The service account of a `ServiceAccount` subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSubject>,
}

/// Kind of executor identity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ExecutorSubjectType {
    /// A service account on the spoke.
    #[default]
    ServiceAccount,
}

/// A service account on the spoke.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServiceAccountSubject {
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub namespace: String,
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: String,
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
    #[schemars(schema_with = "schema::conditions")]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCondition {
    pub resource_meta: ManifestResourceMeta,
    /// Status fields reported by the manifest's feedback rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_feedback: Option<StatusFeedback>,
    /// Conditions of this manifest, one per type.
    // Always serialised (OCM's schema requires it); Go writes `null` for none.
    #[serde(deserialize_with = "super::null_as_default")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// Status fields of a manifest's resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusFeedback {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub values: Vec<FeedbackValue>,
}

/// One reported status field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    pub name: String,
    pub field_value: FieldValue,
}

/// The value of a reported status field, in the member its type names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldValue {
    #[serde(rename = "type")]
    pub type_: ValueType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boolean: Option<bool>,
    /// A JSON value, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub json_raw: Option<String>,
}

/// Type of a reported status field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ValueType {
    #[default]
    Integer,
    String,
    Boolean,
    JsonRaw,
}

/// Which resource a manifest is, and its position in the work.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestResourceMeta {
    pub ordinal: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
