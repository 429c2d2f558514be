//! OCM's addon kinds at `addon.open-cluster-management.io/v1beta1`, the version OCM's newer
//! tools use. The API server stores `v1alpha1`; [`crate::api::conversion`] converts.
//!
//! What differs from `v1alpha1`: a ManagedClusterAddOn has no `spec.installNamespace` (OCM keeps
//! it in an annotation), its registrations say `kubeClient` or `customSigner` instead of naming
//! a signer, its config references drop their deprecated top-level name; a
//! ClusterManagementAddOn has `defaultConfigs` instead of `supportedConfigs` and no
//! `addOnConfiguration`. Everything else is shared with [`super`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    AddOnConfig, AddOnMeta, ConfigGroupResource, ConfigSpecHash, DefaultConfigReference,
    HealthCheck, InstallProgression, InstallStrategy, KubeClientDriver, ObjectReference,
};
use crate::api::schema;

/// How an addon is installed on one managed cluster.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
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
    /// Configuration objects of this addon on this cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
}

/// What the addon's agent, the hub and the addon's manager report about an addon on a cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnStatus {
    /// Conditions of the addon, one per type.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::api::null_as_default"
    )]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
    /// Objects related to the addon.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,
    /// Copied from the addon's ClusterManagementAddOn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
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
    /// Credentials the addon's agent needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationConfig>,
    /// How the addon's health is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// A configuration of an addon on a cluster and the state of its rollout there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReference {
    #[serde(default)]
    pub group: String,
    #[schemars(length(min = 1))]
    pub resource: String,
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

/// Credentials an addon's agent registers for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationConfig {
    #[serde(rename = "type")]
    pub type_: RegistrationType,
    /// Settings of a `kubeClient` registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_client: Option<KubeClientConfig>,
    /// Settings of a `customSigner` registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_signer: Option<CustomSignerConfig>,
}

/// Kind of credentials a registration asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RegistrationType {
    /// Credentials for the hub's API server (`kubernetes.io/kube-apiserver-client`).
    #[default]
    KubeClient,
    /// A certificate from another signer.
    CustomSigner,
}

/// A registration for the hub's API server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeClientConfig {
    /// Identity of the credentials; OCM's default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<KubeClientSubject>,
    /// How the credentials are obtained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<KubeClientDriver>,
}

/// The identity of an addon's hub credentials.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KubeClientSubject {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// A registration for a certificate of another signer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomSignerConfig {
    #[schemars(
        length(min = 5, max = 571),
        regex(pattern = r"^([a-z0-9][a-z0-9-]*[a-z0-9]\.)+[a-z]+\/[a-z0-9-\.]+$")
    )]
    pub signer_name: String,
    /// Subject of the certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

/// The subject of a custom signer's certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organization_units: Vec<String>,
}

/// What the hub knows of an addon it offers.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
    kind = "ClusterManagementAddOn",
    status = "ClusterManagementAddOnStatus",
    derive = "Default",
    derive = "PartialEq",
    shortname = "cma",
    shortname = "cmas",
    doc = "An addon this hub offers to its managed clusters.",
    printcolumn = r#"{"name":"DISPLAY NAME","type":"string","jsonPath":".spec.addOnMeta.displayName"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    /// The default configuration object of each configuration kind the addon takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["group", "resource"]
    ))]
    pub default_configs: Vec<AddOnConfig>,
    /// Which clusters OCM's addon manager installs the addon on by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"type": "Manual"}))]
    pub install_strategy: Option<InstallStrategy>,
}

/// Configuration references and install progress, written by OCM's addon manager.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnStatus {
    /// The default configuration of each configuration kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_config_references: Vec<DefaultConfigReference>,
    /// The rollout of the addon's configurations over each placement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_progressions: Vec<InstallProgression>,
}
