//! OCM's addon kinds: ClusterManagementAddOn, one per addon on the hub, and ManagedClusterAddOn,
//! one per addon enabled on a cluster, in that cluster's namespace.
//!
//! OCM serves both at `addon.open-cluster-management.io/v1alpha1`, the version stored, and at
//! `v1beta1` ([`v1beta1`]); fleetform reads and writes `v1alpha1`, the types of this module, and
//! [`super::conversion`] converts between the two. Shapes and validation are OCM's (see
//! [`super::schema`]). The types that are the same in both versions are defined here once.

pub mod v1beta1;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::identity;
use super::schema::{self, DNS_LABEL};
use super::vocabulary::{
    ADDON_CONDITION_AVAILABLE, DEFAULT_ADDON_INSTALL_NAMESPACE, SIGNER_KUBE_APISERVER_CLIENT,
};

/// API group of the addon kinds.
pub const GROUP: &str = "addon.open-cluster-management.io";

/// How an addon is installed on one managed cluster. The ManagedClusterAddOn lives in the
/// cluster's namespace on the hub; its name is the addon's name.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ManagedClusterAddOn",
    namespaced,
    status = "ManagedClusterAddOnStatus",
    derive = "Default",
    derive = "PartialEq",
    shortname = "mca",
    shortname = "mcas",
    doc = "An addon enabled on one managed cluster, in that cluster's namespace on the hub.",
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name":"Degraded","type":"string","jsonPath":".status.conditions[?(@.type==\"Degraded\")].status"}"#,
    printcolumn = r#"{"name":"Progressing","type":"string","jsonPath":".status.conditions[?(@.type==\"Progressing\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnSpec {
    /// Namespace on the spoke the addon's agent runs in; the server defaults it to
    /// `open-cluster-management-agent-addon`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 63),
        pattern(DNS_LABEL),
        extend("default" = "open-cluster-management-agent-addon")
    )]
    pub install_namespace: Option<String>,
    /// Configuration objects of this addon on this cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
}

/// A reference to a configuration object of an addon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AddOnConfig {
    /// API group of the configuration's resource; empty for the core group.
    #[serde(default)]
    pub group: String,
    #[schemars(length(min = 1))]
    pub resource: String,
    /// Namespace of the configuration; unset for a cluster-scoped one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[schemars(length(min = 1))]
    pub name: String,
}

/// What the addon's agent, the hub and the addon's manager report about an addon on a cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnStatus {
    /// Conditions of the addon, one per type; `Available` tells whether its agent is alive.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::null_as_default"
    )]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
    /// Objects related to the addon (its ClusterManagementAddOn, its namespaces...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,
    /// Copied from the addon's ClusterManagementAddOn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    /// Deprecated: where the addon's configuration CRD and CR are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_configuration: Option<ConfigCoordinates>,
    /// Configuration kinds a ManagedClusterAddOn may override.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["group", "resource"]
    ))]
    pub supported_configs: Vec<ConfigGroupResource>,
    /// The configurations in effect, and how far their rollout got.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<ConfigReference>,
    /// Namespace on the spoke holding the addon's registration secrets and lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Client certificates the addon's agent needs: one CSR, and one secret, per entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationConfig>,
    /// How the addon's health is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// How the addon's agent gets its kube-apiserver client credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_client_driver: Option<KubeClientDriver>,
}

/// A reference to an object related to an addon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectReference {
    pub group: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

/// Display metadata of an addon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOnMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The group and resource of an addon configuration kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigGroupResource {
    #[serde(default)]
    pub group: String,
    #[schemars(length(min = 1))]
    pub resource: String,
}

/// A configuration of an addon on a cluster and the state of its rollout there. The top-level
/// `namespace` and `name` are deprecated copies of `desiredConfig`'s.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReference {
    #[serde(default)]
    pub group: String,
    #[schemars(length(min = 1))]
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[schemars(length(min = 1))]
    pub name: String,
    /// Generation of the configuration last seen by the addon's manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_generation: Option<i64>,
    /// The configuration the cluster should have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
    /// The configuration the cluster last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_config: Option<ConfigSpecHash>,
}

/// A configuration object and the hash of its spec.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSpecHash {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub spec_hash: String,
}

/// One client certificate an addon's agent registers with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationConfig {
    /// Signer of the certificate; unique among an addon's registrations.
    #[schemars(
        length(min = 5, max = 571),
        regex(pattern = r"^([a-z0-9][a-z0-9-]*[a-z0-9]\.)+[a-z]+\/[a-z0-9-\.]+$")
    )]
    pub signer_name: String,
    /// Subject of the certificate; OCM's default subject when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl RegistrationConfig {
    /// The subject the addon's CSR must carry: the configured one if it names a user, else
    /// OCM's default subject for this cluster and addon.
    pub fn effective_subject(&self, cluster: &str, addon: &str) -> Subject {
        match &self.subject {
            Some(subject) if !subject.user.is_empty() => subject.clone(),
            _ => Subject::default_for(cluster, addon),
        }
    }

    /// Name of the secret, in the addon's install namespace, holding this registration's
    /// certificate: `<addon>-hub-kubeconfig` for the kube-apiserver signer, else
    /// `<addon>-<signer with / replaced by ->-client-cert`.
    pub fn secret_name(&self, addon: &str) -> String {
        if self.signer_name == SIGNER_KUBE_APISERVER_CLIENT {
            format!("{addon}-hub-kubeconfig")
        } else {
            format!("{addon}-{}-client-cert", self.signer_name.replace('/', "-"))
        }
    }
}

/// The identity in an addon's client certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Subject {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Organisational units of the certificate.
    // OCM's JSON name is singular although it is a list; the fleet repo's AddOn document says
    // `organizationUnits`.
    #[serde(
        default,
        rename = "organizationUnit",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub organization_units: Vec<String>,
}

impl Subject {
    /// OCM's default subject of an addon agent whose agent name is the addon's name, with the two
    /// groups OCM's addon manager writes (older agents also asked for `system:authenticated`).
    pub fn default_for(cluster: &str, addon: &str) -> Self {
        Self {
            user: identity::addon_agent_user(cluster, addon),
            groups: vec![
                identity::addon_cluster_group(cluster, addon),
                identity::addon_group(addon),
            ],
            organization_units: Vec::new(),
        }
    }
}

/// How an addon's health is judged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HealthCheck {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Lease"))]
    pub mode: Option<HealthCheckMode>,
}

/// Who keeps an addon's `Available` condition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum HealthCheckMode {
    /// The addon renews a lease on its spoke and the agent derives `Available` from it.
    #[default]
    Lease,
    /// The addon sets its own conditions.
    Customized,
}

impl ManagedClusterAddOn {
    /// The condition of this type, if the addon has one.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        super::find_condition(self.conditions(), type_)
    }

    /// All conditions of the addon (none before any status is written).
    pub fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |status| &status.conditions)
    }

    /// Whether the addon is available (`Available` is True).
    pub fn is_available(&self) -> bool {
        super::is_condition_true(self.conditions(), ADDON_CONDITION_AVAILABLE)
    }

    /// The namespace the addon's agent runs in on the spoke, where its lease and registration
    /// secrets live. Like OCM's registration agent: `status.namespace` (set by the addon's
    /// manager), else `spec.installNamespace`, else `open-cluster-management-agent-addon`.
    pub fn install_namespace(&self) -> &str {
        let from_status = self
            .status
            .as_ref()
            .and_then(|status| status.namespace.as_deref());
        [from_status, self.spec.install_namespace.as_deref()]
            .into_iter()
            .flatten()
            .find(|namespace| !namespace.is_empty())
            .unwrap_or(DEFAULT_ADDON_INSTALL_NAMESPACE)
    }

    /// How the addon's health is judged (Lease unless its status says otherwise).
    pub fn health_check_mode(&self) -> HealthCheckMode {
        self.status
            .as_ref()
            .and_then(|status| status.health_check.as_ref())
            .and_then(|check| check.mode)
            .unwrap_or_default()
    }

    /// The registrations the addon asks for.
    pub fn registrations(&self) -> &[RegistrationConfig] {
        self.status
            .as_ref()
            .map_or(&[], |status| &status.registrations)
    }
}

/// How an addon's agent gets its kube-apiserver client credentials.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KubeClientDriver {
    /// A client certificate, by CSR.
    #[default]
    Csr,
    /// A service account token.
    Token,
}

/// What the hub knows of an addon it offers. The ClusterManagementAddOn is cluster-scoped; its
/// name is the addon's name.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ClusterManagementAddOn",
    status = "ClusterManagementAddOnStatus",
    derive = "Default",
    derive = "PartialEq",
    shortname = "cma",
    shortname = "cmas",
    doc = "An addon this hub offers to its managed clusters.",
    printcolumn = r#"{"name":"DISPLAY NAME","type":"string","jsonPath":".spec.addOnMeta.displayName"}"#,
    printcolumn = r#"{"name":"CRD NAME","type":"string","jsonPath":".spec.addOnConfiguration.crdName"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    /// Deprecated: where the addon's configuration CRD and CR are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_configuration: Option<ConfigCoordinates>,
    /// Configuration kinds the addon takes, with their defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["group", "resource"]
    ))]
    pub supported_configs: Vec<ConfigMeta>,
    /// Which clusters OCM's addon manager installs the addon on by itself; `Manual` (the
    /// default) leaves enabling it per cluster to whoever creates ManagedClusterAddOns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"type": "Manual"}))]
    pub install_strategy: Option<InstallStrategy>,
}

/// Where an addon's configuration CRD and CR are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigCoordinates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crd_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cr_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_generation: Option<i64>,
}

/// A configuration kind an addon takes, and its default object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMeta {
    #[serde(default)]
    pub group: String,
    #[schemars(length(min = 1))]
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_config: Option<ConfigReferent>,
}

/// The namespace and name of an addon configuration object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigReferent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[schemars(length(min = 1))]
    pub name: String,
}

/// How OCM's addon manager installs an addon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallStrategy {
    #[serde(default, rename = "type")]
    pub type_: InstallStrategyType,
    /// Placements whose clusters get the addon (type `Placements`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["namespace", "name"]
    ))]
    pub placements: Vec<PlacementStrategy>,
}

/// Kind of an install strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum InstallStrategyType {
    /// Addons are enabled per cluster by someone else (fleetform).
    #[default]
    Manual,
    /// OCM's addon manager enables the addon on the clusters of the listed placements.
    Placements,
}

/// A placement whose clusters get an addon, with its configuration there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStrategy {
    #[schemars(length(min = 1))]
    pub namespace: String,
    #[schemars(length(min = 1))]
    pub name: String,
    /// Configurations of the addon on this placement's clusters, over the defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
    /// How configuration changes roll out over the placement's clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"type": "All"}))]
    pub rollout_strategy: Option<RolloutStrategy>,
}

/// How a change rolls out over the clusters of a placement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    #[serde(default, rename = "type")]
    pub type_: RolloutType,
    /// Settings of an `All` rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<RolloutAll>,
    /// Settings of a `Progressive` rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive: Option<RolloutProgressive>,
    /// Settings of a `ProgressivePerGroup` rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive_per_group: Option<RolloutProgressivePerGroup>,
}

/// Kind of rollout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RolloutType {
    /// Every cluster at once.
    #[default]
    All,
    /// A bounded number of clusters at a time.
    Progressive,
    /// One decision group of the placement at a time.
    ProgressivePerGroup,
}

/// Settings of an `All` rollout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RolloutAll {
    #[serde(flatten)]
    pub config: RolloutConfig,
}

/// Settings of a `Progressive` rollout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressive {
    #[serde(flatten)]
    pub config: RolloutConfig,
    /// Decision groups rolled out first, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
    /// How many clusters (or what percentage) roll out at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::count_or_percent")]
    pub max_concurrency: Option<IntOrString>,
}

/// Settings of a `ProgressivePerGroup` rollout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressivePerGroup {
    #[serde(flatten)]
    pub config: RolloutConfig,
    /// Decision groups rolled out first, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
}

/// What every kind of rollout says: how long a cluster has, and how many may fail.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutConfig {
    /// How long a cluster must stay healthy to count as done (a duration such as `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "0"))]
    pub min_success_time: Option<String>,
    /// How long a cluster may take before it counts as failed (`10m`), or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(PROGRESS_DEADLINE), extend("default" = "None"))]
    pub progress_deadline: Option<String>,
    /// How many clusters (or what percentage) may fail before the rollout stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::count_or_percent", extend("default" = 0))]
    pub max_failures: Option<IntOrString>,
}

/// `pattern` of a rollout's progress deadline.
const PROGRESS_DEADLINE: &str = "^(([0-9])+[h|m|s])|None$";

/// A decision group of a placement, by name or by index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MandatoryDecisionGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_index: Option<i32>,
}

/// Configuration references and install progress, written by OCM's addon manager.
// OCM spells the first field `defaultconfigReferences` in this version only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnStatus {
    /// The default configuration of each configuration kind.
    #[serde(
        default,
        rename = "defaultconfigReferences",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub default_config_references: Vec<DefaultConfigReference>,
    /// The rollout of the addon's configurations over each placement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_progressions: Vec<InstallProgression>,
}

/// The default configuration of a configuration kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefaultConfigReference {
    #[serde(default)]
    pub group: String,
    #[schemars(length(min = 1))]
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
}

/// The rollout of an addon's configurations over one placement.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallProgression {
    #[schemars(length(min = 1))]
    pub namespace: String,
    #[schemars(length(min = 1))]
    pub name: String,
    /// Each configuration's desired, last applied and last known good object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<InstallConfigReference>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::null_as_default"
    )]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// A configuration's rollout over one placement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallConfigReference {
    #[serde(default)]
    pub group: String,
    #[schemars(length(min = 1))]
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_config: Option<ConfigSpecHash>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_known_good_config: Option<ConfigSpecHash>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::schema_check::schema_errors;
    use crate::api::vocabulary::{REASON_ADDON_LEASE_UPDATED, STATUS_TRUE};
    use serde_json::json;

    fn ocm_written_addon() -> serde_json::Value {
        json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": "helloworld", "namespace": "cluster1"},
            "spec": {"installNamespace": "hello"},
            "status": {
                "conditions": [{
                    "type": "Available", "status": "True",
                    "reason": "ManagedClusterAddOnLeaseUpdated", "message": "",
                    "lastTransitionTime": "2026-01-02T03:04:05Z"
                }],
                "addOnMeta": {"displayName": "Hello"},
                "healthCheck": {"mode": "Customized"},
                "namespace": "hello",
                "registrations": [{
                    "signerName": "example.com/signer",
                    "subject": {"user": "u", "groups": ["g"], "organizationUnit": ["ou"]}
                }],
                "configReferences": [{"group": "", "resource": "configmaps", "name": "c",
                                      "lastObservedGeneration": 1, "desiredConfig": null,
                                      "lastAppliedConfig": null}]
            }
        })
    }

    #[test]
    fn reads_a_managed_cluster_addon_written_by_ocm() {
        let addon: ManagedClusterAddOn = serde_json::from_value(ocm_written_addon()).unwrap();
        assert!(addon.is_available());
        let available = addon.condition(ADDON_CONDITION_AVAILABLE).unwrap();
        assert_eq!(
            (available.status.as_str(), available.reason.as_str()),
            (STATUS_TRUE, REASON_ADDON_LEASE_UPDATED)
        );
        assert_eq!(addon.install_namespace(), "hello");
        let mut moved = addon.clone();
        moved.status.as_mut().unwrap().namespace = Some("elsewhere".into());
        assert_eq!(
            moved.install_namespace(),
            "elsewhere",
            "status.namespace wins over the spec"
        );
        assert_eq!(addon.health_check_mode(), HealthCheckMode::Customized);
        let subject = addon.registrations()[0].subject.as_ref().unwrap();
        assert_eq!(subject.organization_units, ["ou"]);
    }

    #[test]
    fn crd_accepts_addons_written_by_ocm_and_by_fleetform() {
        assert_eq!(schema_errors(&ocm_written_addon()), Vec::<String>::new());
        let addon: ManagedClusterAddOn = serde_json::from_value(ocm_written_addon()).unwrap();
        assert_eq!(
            schema_errors(&serde_json::to_value(&addon).unwrap()),
            Vec::<String>::new()
        );
        let enabled = ManagedClusterAddOn::new("hello", ManagedClusterAddOnSpec::default());
        assert_eq!(
            schema_errors(&serde_json::to_value(&enabled).unwrap()),
            Vec::<String>::new()
        );
        let offered = ClusterManagementAddOn::new(
            "hello",
            ClusterManagementAddOnSpec {
                add_on_meta: Some(AddOnMeta {
                    display_name: Some("Hello".into()),
                    description: None,
                }),
                ..Default::default()
            },
        );
        assert_eq!(
            schema_errors(&serde_json::to_value(&offered).unwrap()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn crd_rejects_a_registration_without_a_valid_signer() {
        let mut addon = ocm_written_addon();
        addon["status"]["registrations"][0]["signerName"] = json!("no-slash");
        assert_eq!(schema_errors(&addon).len(), 1);
    }

    #[test]
    fn organization_units_use_ocms_singular_json_name() {
        let subject = Subject {
            user: "u".into(),
            groups: vec![],
            organization_units: vec!["ou".into()],
        };
        assert_eq!(
            serde_json::to_value(&subject).unwrap(),
            json!({"user": "u", "organizationUnit": ["ou"]})
        );
    }

    #[test]
    fn addon_without_install_namespace_or_health_check_uses_ocm_defaults() {
        let addon = ManagedClusterAddOn::new("helloworld", ManagedClusterAddOnSpec::default());
        assert_eq!(
            addon.install_namespace(),
            "open-cluster-management-agent-addon"
        );
        assert_eq!(addon.health_check_mode(), HealthCheckMode::Lease);
        assert!(!addon.is_available());
        assert_eq!(serde_json::to_value(&addon.spec).unwrap(), json!({}));
    }

    #[test]
    fn unset_subject_means_ocms_default_subject() {
        let registration = RegistrationConfig {
            signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
            subject: None,
        };
        let subject = registration.effective_subject("c1", "hello");
        assert_eq!(
            subject.user,
            "system:open-cluster-management:cluster:c1:addon:hello:agent:hello"
        );
        assert_eq!(
            subject.groups,
            [
                "system:open-cluster-management:cluster:c1:addon:hello",
                "system:open-cluster-management:addon:hello",
            ]
        );
        let custom = RegistrationConfig {
            subject: Some(Subject {
                user: "me".into(),
                ..Default::default()
            }),
            ..registration
        };
        assert_eq!(custom.effective_subject("c1", "hello").user, "me");
    }

    #[test]
    fn registration_secret_is_named_after_addon_and_signer() {
        let kube = RegistrationConfig {
            signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
            subject: None,
        };
        assert_eq!(kube.secret_name("hello"), "hello-hub-kubeconfig");
        let custom = RegistrationConfig {
            signer_name: "example.com/my-signer".into(),
            subject: None,
        };
        assert_eq!(
            custom.secret_name("hello"),
            "hello-example.com-my-signer-client-cert"
        );
    }

    #[test]
    fn cluster_management_addon_round_trips_install_strategy() {
        let value = json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "ClusterManagementAddOn",
            "metadata": {"name": "helloworld"},
            "spec": {
                "addOnMeta": {"displayName": "Hello", "description": "says hello"},
                "supportedConfigs": [{"group": "addon.open-cluster-management.io",
                                      "resource": "addondeploymentconfigs"}],
                "installStrategy": {"type": "Placements",
                                    "placements": [{"namespace": "default", "name": "all"}]}
            }
        });
        assert_eq!(schema_errors(&value), Vec::<String>::new());
        let addon: ClusterManagementAddOn = serde_json::from_value(value.clone()).unwrap();
        let strategy = addon.spec.install_strategy.as_ref().unwrap();
        assert_eq!(strategy.type_, InstallStrategyType::Placements);
        assert_eq!(serde_json::to_value(&addon).unwrap(), value);
    }
}
