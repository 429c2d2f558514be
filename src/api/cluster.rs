//! OCM's cluster kinds: ManagedCluster (`cluster.open-cluster-management.io/v1`, on the hub) and
//! ClusterClaim (`cluster.open-cluster-management.io/v1alpha1`, on the spoke).
//!
//! Field names, scopes, short names, printer columns and validation are OCM's, field for field,
//! so OCM tools read what fleetform writes and the other way round, and the CRDs accept and
//! reject what OCM's do (see [`super::schema`]). fleetform's own facts about a cluster (its node
//! health) travel in annotations: an OCM CRD prunes status fields it does not declare.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::fleet::TaintEffect;
use super::schema::{self, DNS_LABEL, QUALIFIED_NAME};
use super::vocabulary::{
    ANNOTATION_NODE_HEALTH, CONDITION_AVAILABLE, CONDITION_JOINED, LABEL_SPOKE_ONLY, STATUS_TRUE,
};

/// API group of ManagedCluster and ClusterClaim.
pub const GROUP: &str = "cluster.open-cluster-management.io";

/// The lease duration agents use when `spec.leaseDurationSeconds` is unset or zero.
pub const DEFAULT_LEASE_DURATION_SECONDS: i32 = 60;

/// How the hub reaches a managed cluster, and whether it accepts it. The ManagedCluster is
/// cluster-scoped; its name is the cluster's name and the name of its namespace on the hub.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1",
    kind = "ManagedCluster",
    status = "ManagedClusterStatus",
    derive = "Default",
    derive = "PartialEq",
    shortname = "mcl",
    shortname = "mcls",
    doc = "A cluster registered to this hub: how to reach it, whether the hub accepts it, and its reported state.",
    printcolumn = r#"{"name":"Hub Accepted","type":"boolean","jsonPath":".spec.hubAcceptsClient"}"#,
    printcolumn = r#"{"name":"Managed Cluster URLs","type":"string","jsonPath":".spec.managedClusterClientConfigs[*].url"}"#,
    printcolumn = r#"{"name":"Joined","type":"string","jsonPath":".status.conditions[?(@.type==\"ManagedClusterJoined\")].status"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"ManagedClusterConditionAvailable\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct ManagedClusterSpec {
    /// API server addresses of the spoke; empty when the hub cannot reach it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_cluster_client_configs: Vec<ClientConfig>,
    /// Whether the hub accepts the cluster's agent. Set on the hub side only.
    // Optional so that an agent's apply never carries it: a forced `false` from the agent
    // would revoke the acceptance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_accepts_client: Option<bool>,
    /// Seconds between the agent's lease renewals; unset or zero means 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 60))]
    pub lease_duration_seconds: Option<i32>,
    /// Taints keep placements from selecting the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

super::spec_may_be_absent!(ManagedClusterSpec);

/// An API server address of a managed cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientConfig {
    pub url: String,
    /// CA bundle to trust; the system roots when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "base64_schema")]
    pub ca_bundle: Option<ByteString>,
}

fn base64_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "format": "byte"})
}

/// A taint on a managed cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// What the taint says, e.g. `cluster.open-cluster-management.io/unreachable`.
    #[schemars(length(max = 316), pattern(QUALIFIED_NAME))]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub value: Option<String>,
    /// What the taint does to placements that do not tolerate it.
    pub effect: TaintEffect,
    /// When the taint was added.
    // Go writes `null` when unset, hence nullable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("nullable" = true))]
    pub time_added: Option<Time>,
}

/// What the agent and the hub report about a managed cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterStatus {
    /// Conditions of the cluster, one per type.
    // Go writes `null` for none.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::null_as_default"
    )]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
    /// Total resources of the cluster's schedulable nodes, by resource name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "schema::resource_list")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Allocatable resources of the cluster's schedulable nodes, by resource name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "schema::resource_list")]
    pub allocatable: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ManagedClusterVersion>,
    /// Claims synced from the cluster's ClusterClaims: reserved names first, then custom ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_claims: Vec<ManagedClusterClaim>,
    /// Namespaces the cluster's ManagedClusterSets ask to have on it, with their state there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["clusterSet", "name"]
    ))]
    pub managed_namespaces: Vec<ClusterSetManagedNamespace>,
}

/// Health of a cluster's nodes, seed 002's "Node Health": how many are ready and how many are
/// under each kind of pressure, out of how many. It is fleetform's, not OCM's, so it travels in
/// the ManagedCluster's annotation [`ANNOTATION_NODE_HEALTH`] (an OCM CRD would prune it from the
/// status); the agent and the hub's observer count it the same way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeHealth {
    pub total: u32,
    /// Nodes whose Ready condition is not anything but True. Like Krake, a node that reports no
    /// Ready condition at all is counted ready.
    pub ready: u32,
    pub pid_pressure: u32,
    pub memory_pressure: u32,
    pub disk_pressure: u32,
    /// Nodes reporting any condition whose type ends in `Pressure` (Krake's UNHEALTHY test,
    /// which also catches pressure kinds beyond the three counted above).
    pub under_pressure: u32,
}

impl NodeHealth {
    /// Summarises a node list.
    pub fn from_nodes(nodes: &[Node]) -> Self {
        nodes
            .iter()
            .fold(NodeHealth::default(), |mut health, node| {
                let conditions = node
                    .status
                    .as_ref()
                    .and_then(|status| status.conditions.as_deref())
                    .unwrap_or_default();
                let pressing = |kind: &str| {
                    conditions
                        .iter()
                        .any(|c| c.type_.eq_ignore_ascii_case(kind) && c.status == STATUS_TRUE)
                };
                let not_ready = conditions
                    .iter()
                    .any(|c| c.type_.eq_ignore_ascii_case("Ready") && c.status != STATUS_TRUE);
                let any_pressure = conditions.iter().any(|c| {
                    c.type_.to_ascii_lowercase().ends_with("pressure") && c.status == STATUS_TRUE
                });
                health.total += 1;
                health.ready += u32::from(!not_ready);
                health.pid_pressure += u32::from(pressing("PIDPressure"));
                health.memory_pressure += u32::from(pressing("MemoryPressure"));
                health.disk_pressure += u32::from(pressing("DiskPressure"));
                health.under_pressure += u32::from(any_pressure);
                health
            })
    }

    /// Seed 002's table rows: `nodes 3/3`, `nodes_pid_pressure 0/3`, and so on.
    pub fn rows(&self) -> [(&'static str, String); 4] {
        let of = |count: u32| format!("{count}/{}", self.total);
        [
            ("nodes", of(self.ready)),
            ("nodes_pid_pressure", of(self.pid_pressure)),
            ("nodes_memory_pressure", of(self.memory_pressure)),
            ("nodes_disk_pressure", of(self.disk_pressure)),
        ]
    }

    /// The value of annotation [`ANNOTATION_NODE_HEALTH`].
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("node counts always serialise")
    }
}

/// Versions of a managed cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ManagedClusterVersion {
    /// The cluster's Kubernetes version (`v1.34.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
}

/// A ClusterClaim as reported in a ManagedCluster's status.
// Empty strings are omitted, as Go's `omitempty` does; that also keeps an empty default out of
// the schema, where it would break `minLength`.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct ManagedClusterClaim {
    /// Name of the ClusterClaim on the managed cluster.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The claimed value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 1024))]
    pub value: String,
}

/// A namespace a ManagedClusterSet asks its clusters to have, as one cluster reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSetManagedNamespace {
    /// The namespace.
    #[schemars(length(max = 63), pattern(DNS_LABEL))]
    pub name: String,
    /// The ManagedClusterSet that asks for it.
    pub cluster_set: String,
    /// The namespace's state on the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

impl ManagedCluster {
    /// The condition of this type, if the cluster has one.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        super::find_condition(self.conditions(), type_)
    }

    /// All conditions of the cluster (none before any status is written).
    pub fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |status| &status.conditions)
    }

    /// Whether the hub has accepted the cluster.
    pub fn hub_accepts_client(&self) -> bool {
        self.spec.hub_accepts_client == Some(true)
    }

    /// Whether the agent has joined (`ManagedClusterJoined` is True).
    pub fn is_joined(&self) -> bool {
        super::is_condition_true(self.conditions(), CONDITION_JOINED)
    }

    /// Whether the cluster is available (`ManagedClusterConditionAvailable` is True).
    pub fn is_available(&self) -> bool {
        super::is_condition_true(self.conditions(), CONDITION_AVAILABLE)
    }

    /// The lease duration agents must use: the spec's, or 60 when it is unset or zero.
    pub fn lease_duration_seconds(&self) -> i32 {
        match self.spec.lease_duration_seconds {
            Some(seconds) if seconds > 0 => seconds,
            _ => DEFAULT_LEASE_DURATION_SECONDS,
        }
    }

    /// The node health the agent last reported (annotation [`ANNOTATION_NODE_HEALTH`]); `None`
    /// when there is none or it cannot be read.
    pub fn node_health(&self) -> Option<NodeHealth> {
        let value = self.annotations().get(ANNOTATION_NODE_HEALTH)?;
        serde_json::from_str(value).ok()
    }

    /// The taint with this key, if the cluster has one.
    pub fn taint(&self, key: &str) -> Option<&Taint> {
        self.spec.taints.iter().find(|taint| taint.key == key)
    }
}

/// The claim of a ClusterClaim: a fact a spoke states about itself (its id, platform,
/// version...). ClusterClaims are cluster-scoped, on the spoke; the agent copies them into its
/// ManagedCluster's `status.clusterClaims`.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ClusterClaim",
    derive = "Default",
    derive = "PartialEq",
    doc = "A fact a managed cluster states about itself; the agent reports it to the hub unless it is labelled spoke-only."
)]
#[serde(remote = "Self")]
pub struct ClusterClaimSpec {
    /// The claimed value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 1024))]
    pub value: String,
}

super::spec_may_be_absent!(ClusterClaimSpec);

impl ClusterClaim {
    /// Whether the claim stays on the spoke (labelled `open-cluster-management.io/spoke-only`).
    pub fn is_spoke_only(&self) -> bool {
        self.labels().contains_key(LABEL_SPOKE_ONLY)
    }

    /// The claim as the agent reports it in `status.clusterClaims`.
    pub fn to_reported(&self) -> ManagedClusterClaim {
        ManagedClusterClaim {
            name: self.name_any(),
            value: self.spec.value.clone(),
        }
    }
}

/// A Node reporting these conditions (type, status), for tests of what is read from nodes.
#[cfg(test)]
pub(crate) fn node_with_conditions(conditions: &[(&str, &str)]) -> Node {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    Node {
        status: Some(NodeStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(type_, status)| NodeCondition {
                        type_: (*type_).into(),
                        status: (*status).into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::schema_check::schema_errors;
    use crate::api::vocabulary::{
        REASON_LEASE_UPDATE_STOPPED, STATUS_TRUE, STATUS_UNKNOWN, TAINT_UNREACHABLE,
    };
    use serde_json::json;

    /// A ManagedCluster as OCM's registration agent and hub write it, including the `null`s Go
    /// emits for unset slices and times.
    fn ocm_written_cluster() -> serde_json::Value {
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {"name": "cluster1", "labels": {"cloud": "Amazon"}},
            "spec": {
                "hubAcceptsClient": true,
                "leaseDurationSeconds": 60,
                "managedClusterClientConfigs": [{"url": "https://cluster1:6443", "caBundle": "Y2E="}],
                "taints": [{
                    "key": TAINT_UNREACHABLE,
                    "effect": "NoSelect",
                    "timeAdded": null
                }]
            },
            "status": {
                "conditions": [{
                    "type": "ManagedClusterConditionAvailable",
                    "status": "Unknown",
                    "reason": "ManagedClusterLeaseUpdateStopped",
                    "message": "Registration agent stopped updating its lease.",
                    "lastTransitionTime": "2026-01-02T03:04:05Z"
                }],
                "capacity": {"cpu": "18", "memory": "72001Mi"},
                "allocatable": {"cpu": "15", "memory": "65257Mi"},
                "version": {"kubernetes": "v1.34.1"},
                "clusterClaims": [{"name": "id.k8s.io", "value": "cluster1"}],
                "managedNamespaces": [{"clusterSet": "default", "name": "apps"}]
            }
        })
    }

    #[test]
    fn reads_a_managed_cluster_written_by_ocm() {
        let cluster: ManagedCluster = serde_json::from_value(ocm_written_cluster()).unwrap();
        assert!(cluster.hub_accepts_client());
        assert_eq!(cluster.lease_duration_seconds(), 60);
        assert_eq!(
            cluster.spec.managed_cluster_client_configs[0].ca_bundle,
            Some(ByteString(b"ca".to_vec()))
        );
        let taint = cluster.taint(TAINT_UNREACHABLE).unwrap();
        assert_eq!(
            (taint.effect, &taint.time_added),
            (TaintEffect::NoSelect, &None)
        );
        let available = cluster.condition(CONDITION_AVAILABLE).unwrap();
        assert_eq!(available.status, STATUS_UNKNOWN);
        assert_eq!(available.reason, REASON_LEASE_UPDATE_STOPPED);
        assert!(!cluster.is_available());
        let status = cluster.status.as_ref().unwrap();
        assert_eq!(status.allocatable["memory"], Quantity("65257Mi".into()));
        assert_eq!(
            status.version.as_ref().unwrap().kubernetes.as_deref(),
            Some("v1.34.1")
        );
    }

    #[test]
    fn crd_accepts_managed_clusters_written_by_ocm_and_by_fleetform() {
        assert_eq!(schema_errors(&ocm_written_cluster()), Vec::<String>::new());
        let mut cluster: ManagedCluster = serde_json::from_value(ocm_written_cluster()).unwrap();
        cluster.spec.taints[0].time_added = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let written = serde_json::to_value(&cluster).unwrap();
        assert_eq!(schema_errors(&written), Vec::<String>::new());
    }

    #[test]
    fn crd_rejects_a_claim_value_longer_than_ocm_allows() {
        let mut claim = serde_json::to_value(ClusterClaim::new(
            "id.k8s.io",
            ClusterClaimSpec { value: "c1".into() },
        ))
        .unwrap();
        assert_eq!(schema_errors(&claim), Vec::<String>::new());
        claim["spec"]["value"] = json!("x".repeat(1025));
        assert_eq!(schema_errors(&claim).len(), 1);
    }

    #[test]
    fn null_conditions_from_go_read_as_none() {
        let mut value = ocm_written_cluster();
        value["status"]["conditions"] = serde_json::Value::Null;
        let cluster: ManagedCluster = serde_json::from_value(value).unwrap();
        assert!(cluster.conditions().is_empty());
        assert!(cluster.condition(CONDITION_JOINED).is_none());
    }

    #[test]
    fn agent_created_cluster_omits_acceptance_and_lease() {
        let cluster = ManagedCluster::new(
            "cluster1",
            ManagedClusterSpec {
                managed_cluster_client_configs: vec![ClientConfig {
                    url: "https://cluster1:6443".into(),
                    ca_bundle: None,
                }],
                ..Default::default()
            },
        );
        let value = serde_json::to_value(&cluster).unwrap();
        assert_eq!(
            value["spec"],
            json!({"managedClusterClientConfigs": [{"url": "https://cluster1:6443"}]})
        );
        assert!(value.get("status").is_none());
        assert!(!cluster.hub_accepts_client());
    }

    #[test]
    fn zero_or_missing_lease_duration_means_sixty_seconds() {
        let mut cluster = ManagedCluster::new("c", ManagedClusterSpec::default());
        assert_eq!(cluster.lease_duration_seconds(), 60);
        cluster.spec.lease_duration_seconds = Some(0);
        assert_eq!(cluster.lease_duration_seconds(), 60);
        cluster.spec.lease_duration_seconds = Some(1);
        assert_eq!(cluster.lease_duration_seconds(), 1);
    }

    #[test]
    fn joined_reads_the_joined_condition() {
        let mut value = ocm_written_cluster();
        value["status"]["conditions"][0] = json!({
            "type": CONDITION_JOINED, "status": STATUS_TRUE, "reason": "ManagedClusterJoined",
            "message": "", "lastTransitionTime": "2026-01-02T03:04:05Z"
        });
        let cluster: ManagedCluster = serde_json::from_value(value).unwrap();
        assert!(cluster.is_joined());
    }

    #[test]
    fn kinds_without_spec_read_as_the_default_spec() {
        for spec in [None, Some(serde_json::Value::Null)] {
            let mut value = json!({
                "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                "metadata": {"name": "c1"}
            });
            if let Some(spec) = spec.clone() {
                value["spec"] = spec;
            }
            let cluster: ManagedCluster = serde_json::from_value(value).unwrap();
            assert_eq!(cluster.spec, ManagedClusterSpec::default());
            let claim: ClusterClaim = serde_json::from_value(json!({
                "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
                "metadata": {"name": "id.k8s.io"}, "spec": spec
            }))
            .unwrap();
            assert_eq!(claim.spec, ClusterClaimSpec::default());
        }
        let written = serde_json::to_value(ManagedCluster::new("c1", Default::default())).unwrap();
        assert_eq!(written["spec"], json!({}));
    }

    #[test]
    fn node_health_is_read_from_its_annotation() {
        let mut cluster = ManagedCluster::new("c1", ManagedClusterSpec::default());
        assert_eq!(cluster.node_health(), None);
        let health = NodeHealth {
            total: 3,
            ready: 2,
            memory_pressure: 1,
            under_pressure: 1,
            ..NodeHealth::default()
        };
        cluster
            .annotations_mut()
            .insert(ANNOTATION_NODE_HEALTH.into(), health.to_annotation());
        assert_eq!(cluster.node_health(), Some(health));
        cluster
            .annotations_mut()
            .insert(ANNOTATION_NODE_HEALTH.into(), "three nodes".into());
        assert_eq!(cluster.node_health(), None, "unreadable means unknown");
    }

    #[test]
    fn spoke_only_claims_are_recognised_by_label() {
        let mut claim = ClusterClaim::new("region", ClusterClaimSpec { value: "eu".into() });
        assert!(!claim.is_spoke_only());
        assert_eq!(
            claim.to_reported(),
            ManagedClusterClaim {
                name: "region".into(),
                value: "eu".into()
            }
        );
        claim
            .labels_mut()
            .insert(LABEL_SPOKE_ONLY.into(), "".into());
        assert!(claim.is_spoke_only());
    }

    #[test]
    fn node_health_counts_each_pressure_out_of_all_nodes() {
        let node = node_with_conditions;
        let nodes = [
            node(&[
                ("MemoryPressure", "False"),
                ("DiskPressure", "False"),
                ("PIDPressure", "False"),
                ("Ready", "True"),
            ]),
            node(&[("PIDPressure", "True"), ("MemoryPressure", "True")]),
            node(&[("DiskPressure", "True"), ("Ready", "False")]),
            node(&[]),
        ];
        let health = NodeHealth::from_nodes(&nodes);
        assert_eq!(
            health,
            NodeHealth {
                total: 4,
                ready: 3,
                pid_pressure: 1,
                memory_pressure: 1,
                disk_pressure: 1,
                under_pressure: 2,
            }
        );
        assert_eq!(
            health.rows().map(|(name, value)| format!("{name} {value}")),
            [
                "nodes 3/4",
                "nodes_pid_pressure 1/4",
                "nodes_memory_pressure 1/4",
                "nodes_disk_pressure 1/4"
            ]
        );
    }
}
