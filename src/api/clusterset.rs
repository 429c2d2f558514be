//! OCM's cluster sets (`cluster.open-cluster-management.io/v1beta2`, on the hub):
//! ManagedClusterSet, a named group of ManagedClusters, and ManagedClusterSetBinding, which makes
//! a set usable by placements in one namespace.
//!
//! A set holds either the clusters labelled [`LABEL_CLUSTER_SET`] with its name (the default) or
//! those its label selector picks. Shapes and validation are OCM's (see [`super::schema`]).
//!
//! [`LABEL_CLUSTER_SET`]: super::vocabulary::LABEL_CLUSTER_SET

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::{self, DNS_LABEL};

/// Which clusters are in a ManagedClusterSet, and what namespaces they get. The set is
/// cluster-scoped. The default spec, as the API server defaults it, chooses clusters by label.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1beta2",
    kind = "ManagedClusterSet",
    status = "ManagedClusterSetStatus",
    derive = "Default",
    derive = "PartialEq",
    shortname = "mclset",
    shortname = "mclsets",
    doc = "A named group of managed clusters; placements choose clusters from the sets bound to their namespace.",
    printcolumn = r#"{"name":"Empty","type":"string","jsonPath":".status.conditions[?(@.type==\"ClusterSetEmpty\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(extend("default" = {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}}))]
pub struct ManagedClusterSetSpec {
    /// How the set's clusters are chosen.
    #[serde(default)]
    pub cluster_selector: ManagedClusterSelector,
    /// Namespaces every cluster of the set gets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub managed_namespaces: Vec<ManagedNamespace>,
}

super::spec_may_be_absent!(ManagedClusterSetSpec);

/// How a ManagedClusterSet chooses its clusters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSelector {
    #[schemars(extend("default" = "ExclusiveClusterSetLabel"))]
    pub selector_type: SelectorType,
    /// The clusters of a `LabelSelector` set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub label_selector: Option<LabelSelector>,
}

/// How a ManagedClusterSet's clusters are chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SelectorType {
    /// The clusters labelled `cluster.open-cluster-management.io/clusterset=<set>`; a cluster is
    /// in at most one such set.
    #[default]
    ExclusiveClusterSetLabel,
    /// The clusters `labelSelector` picks.
    LabelSelector,
}

/// A namespace a ManagedClusterSet's clusters get.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ManagedNamespace {
    #[schemars(length(max = 63), pattern(DNS_LABEL))]
    pub name: String,
}

/// What OCM's hub reports about a ManagedClusterSet or a ManagedClusterSetBinding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ManagedClusterSetStatus {
    /// Conditions: a set's `ClusterSetEmpty` says whether it has clusters, a binding's `Bound`
    /// whether its set exists.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::null_as_default"
    )]
    #[schemars(schema_with = "schema::condition_list")]
    pub conditions: Vec<Condition>,
}

/// Makes a ManagedClusterSet usable by placements in the binding's namespace. The binding's
/// name must be the set's name.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1beta2",
    kind = "ManagedClusterSetBinding",
    namespaced,
    status = "ManagedClusterSetBindingStatus",
    derive = "Default",
    derive = "PartialEq",
    shortname = "mclsetbinding",
    shortname = "mclsetbindings",
    doc = "Binds a ManagedClusterSet to a namespace, so placements there may choose its clusters."
)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct ManagedClusterSetBindingSpec {
    /// The ManagedClusterSet bound.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub cluster_set: String,
}

super::spec_may_be_absent!(ManagedClusterSetBindingSpec);

/// What OCM's hub reports about a ManagedClusterSetBinding: its conditions, as for a set.
pub type ManagedClusterSetBindingStatus = ManagedClusterSetStatus;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::schema_check::schema_errors;
    use serde_json::json;

    #[test]
    fn a_set_without_spec_chooses_its_clusters_by_label() {
        let set: ManagedClusterSet = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
            "metadata": {"name": "default"}
        }))
        .unwrap();
        assert_eq!(
            set.spec.cluster_selector.selector_type,
            SelectorType::ExclusiveClusterSetLabel
        );
        assert_eq!(
            serde_json::to_value(&set.spec).unwrap(),
            json!({"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}})
        );
    }

    #[test]
    fn reads_the_global_set_and_a_binding_as_ocm_writes_them() {
        let global = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
            "metadata": {"name": "global"},
            "spec": {"clusterSelector": {"selectorType": "LabelSelector", "labelSelector": {}}},
            "status": {"conditions": [{"type": "ClusterSetEmpty", "status": "False",
                                       "reason": "ClustersSelected", "message": "2 ManagedClusters selected",
                                       "lastTransitionTime": "2026-01-02T03:04:05Z"}]}
        });
        assert_eq!(schema_errors(&global), Vec::<String>::new());
        let set: ManagedClusterSet = serde_json::from_value(global).unwrap();
        assert_eq!(
            set.spec.cluster_selector.selector_type,
            SelectorType::LabelSelector
        );
        assert_eq!(
            set.spec.cluster_selector.label_selector,
            Some(LabelSelector::default())
        );
        let binding = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2",
            "kind": "ManagedClusterSetBinding",
            "metadata": {"name": "global", "namespace": "default"},
            "spec": {"clusterSet": "global"}
        });
        assert_eq!(schema_errors(&binding), Vec::<String>::new());
        let binding: ManagedClusterSetBinding = serde_json::from_value(binding).unwrap();
        assert_eq!(binding.spec.cluster_set, "global");
    }
}
