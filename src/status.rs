//! `fleetform status`: one row per spoke, gathered from its hub — lifecycle phase, Krake-style
//! state, availability, agent version, lease age, node health, addon health and claims.
//! [`rows`] is pure; [`gather`] only reads.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;

use crate::api::cluster::NodeHealthStatus;
use crate::api::fleet::{AvailabilityMode, SYSTEM_NAMESPACE};
use crate::api::vocabulary::{
    CLUSTER_LEASE_NAME, CONDITION_AVAILABLE, CONDITION_JOINED, CONDITION_ONLINE, STATUS_TRUE,
};
use crate::api::{ManagedCluster, ManagedClusterAddOn, Spoke};
use crate::hub::observer::{ClusterState, state_from_conditions};

/// What a hub holds about its spokes.
#[derive(Clone, Debug, Default)]
pub struct HubState {
    pub hub: String,
    pub spokes: Vec<Spoke>,
    pub clusters: BTreeMap<String, ManagedCluster>,
    pub addons: Vec<ManagedClusterAddOn>,
    /// `managed-cluster-lease` of each cluster, by cluster namespace.
    pub leases: BTreeMap<String, Lease>,
}

/// One spoke's line of `fleetform status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpokeRow {
    pub spoke: String,
    pub hub: String,
    /// Lifecycle phase of the Spoke (Initializing, Joining, Running, Unhealthy, Deleting).
    pub phase: Option<String>,
    /// Krake's name for the cluster's state (DESIGN §4.5).
    pub state: String,
    /// `ManagedClusterConditionAvailable`: True, False or Unknown.
    pub available: Option<String>,
    pub joined: bool,
    pub agent_version: Option<String>,
    /// Seconds since the agent last renewed its lease.
    pub lease_age_seconds: Option<i64>,
    pub nodes: Option<NodeHealthStatus>,
    pub addons_available: usize,
    pub addons: usize,
    pub claims: usize,
}

/// The rows of one hub's spokes, sorted by name.
pub fn rows(state: &HubState, now: Timestamp) -> Vec<SpokeRow> {
    let mut rows: Vec<SpokeRow> = state
        .spokes
        .iter()
        .map(|spoke| {
            let name = spoke.metadata.name.clone().unwrap_or_default();
            let cluster = state.clusters.get(&name);
            let condition = |type_: &str| cluster.and_then(|cluster| cluster.condition(type_));
            let status = spoke.status.as_ref();
            let cluster_state = match spoke.spec.availability.mode {
                AvailabilityMode::Poll => status
                    .and_then(|status| {
                        status
                            .conditions
                            .iter()
                            .find(|c| c.type_ == CONDITION_ONLINE)
                    })
                    .map(|condition| condition.reason.clone())
                    .unwrap_or_else(|| ClusterState::Pending.to_string()),
                AvailabilityMode::Lease => cluster
                    .map(state_from_conditions)
                    .unwrap_or(ClusterState::Pending)
                    .to_string(),
            };
            let addons: Vec<&ManagedClusterAddOn> = state
                .addons
                .iter()
                .filter(|addon| addon.metadata.namespace.as_deref() == Some(name.as_str()))
                .collect();
            let lease_age_seconds = state
                .leases
                .get(&name)
                .and_then(|lease| lease.spec.as_ref()?.renew_time.as_ref())
                .map(|renewed| now.duration_since(renewed.0).as_secs().max(0));
            SpokeRow {
                hub: state.hub.clone(),
                phase: status
                    .and_then(|status| status.phase)
                    .map(|phase| format!("{phase:?}")),
                state: cluster_state,
                available: condition(CONDITION_AVAILABLE).map(|c| c.status.clone()),
                joined: condition(CONDITION_JOINED).is_some_and(|c| c.status == STATUS_TRUE),
                agent_version: status.and_then(|status| status.agent_version.clone()),
                lease_age_seconds,
                nodes: cluster.and_then(ManagedCluster::node_health),
                addons_available: addons.iter().filter(|addon| addon.is_available()).count(),
                addons: addons.len(),
                claims: cluster
                    .and_then(|cluster| cluster.status.as_ref())
                    .map_or(0, |status| status.cluster_claims.len()),
                spoke: name,
            }
        })
        .collect();
    rows.sort_by(|a, b| a.spoke.cmp(&b.spoke));
    rows
}

/// Reads what a hub holds about its spokes.
pub async fn gather(hub: &str, client: &Client) -> Result<HubState, kube::Error> {
    let all = ListParams::default();
    let spokes = Api::<Spoke>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .list(&all)
        .await?;
    let clusters = Api::<ManagedCluster>::all(client.clone())
        .list(&all)
        .await?;
    let addons = Api::<ManagedClusterAddOn>::all(client.clone())
        .list(&all)
        .await?;
    let leases = Api::<Lease>::all(client.clone())
        .list(&ListParams::default().fields(&format!("metadata.name={CLUSTER_LEASE_NAME}")))
        .await?;
    Ok(HubState {
        hub: hub.to_string(),
        spokes: spokes.items,
        clusters: clusters
            .items
            .into_iter()
            .map(|cluster| (cluster.metadata.name.clone().unwrap_or_default(), cluster))
            .collect(),
        addons: addons.items,
        leases: leases
            .items
            .into_iter()
            .filter_map(|lease| Some((lease.metadata.namespace.clone()?, lease)))
            .collect(),
    })
}

/// The rows as a table for a terminal.
pub fn table(rows: &[SpokeRow]) -> String {
    let header = [
        "SPOKE",
        "HUB",
        "PHASE",
        "STATE",
        "AVAILABLE",
        "JOINED",
        "AGENT",
        "LEASE AGE",
        "NODES",
        "ADDONS",
        "CLAIMS",
    ];
    let dash = || "-".to_string();
    let lines: Vec<[String; 11]> = rows
        .iter()
        .map(|row| {
            [
                row.spoke.clone(),
                row.hub.clone(),
                row.phase.clone().unwrap_or_else(dash),
                row.state.clone(),
                row.available.clone().unwrap_or_else(dash),
                if row.joined { "yes" } else { "no" }.to_string(),
                row.agent_version.clone().unwrap_or_else(dash),
                row.lease_age_seconds
                    .map_or_else(dash, |age| format!("{age}s")),
                row.nodes.as_ref().map_or_else(dash, |nodes| {
                    let mut text = format!("{}/{}", nodes.ready, nodes.total);
                    for (count, what) in [
                        (nodes.pid_pressure, "pid"),
                        (nodes.memory_pressure, "mem"),
                        (nodes.disk_pressure, "disk"),
                    ] {
                        if count > 0 {
                            text.push_str(&format!(" {what}:{count}"));
                        }
                    }
                    text
                }),
                format!("{}/{}", row.addons_available, row.addons),
                row.claims.to_string(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            lines
                .iter()
                .map(|line| line[column].chars().count())
                .chain([header[column].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let render = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = render(header.to_vec());
    for line in &lines {
        out.push_str(&render(line.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
    use serde_json::{Value, json};

    fn spoke(name: &str, mode: &str, status: Value) -> Spoke {
        serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
            "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE},
            "spec": {"hubRef": "hub", "kubeconfig": {"embedded": {}}, "availability": {"mode": mode}},
            "status": status,
        }))
        .unwrap()
    }

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }
    }

    fn now() -> Timestamp {
        "2026-11-25T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_joined_available_spoke_shows_online_with_its_lease_age_nodes_addons_and_claims() {
        let mut cluster: ManagedCluster = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": "dev", "annotations": {
                "fleetform.io/node-health": r#"{"total":3,"ready":2,"pidPressure":0,"memoryPressure":1,"diskPressure":0,"underPressure":1}"#,
            }},
            "spec": {"hubAcceptsClient": true},
            "status": {
                "clusterClaims": [{"name": "id.k8s.io", "value": "dev"}, {"name": "region", "value": "eu"}],
            },
        }))
        .unwrap();
        let status = cluster.status.as_mut().unwrap();
        status.conditions = vec![
            condition(CONDITION_JOINED, "True", "ManagedClusterJoined"),
            condition(CONDITION_AVAILABLE, "True", "ManagedClusterAvailable"),
        ];
        let addon = |name: &str, available: &str| -> ManagedClusterAddOn {
            serde_json::from_value(json!({
                "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
                "metadata": {"name": name, "namespace": "dev"}, "spec": {},
                "status": {"conditions": [condition("Available", available, "x")]},
            }))
            .unwrap()
        };
        let mut lease = Lease::default();
        lease.metadata.namespace = Some("dev".into());
        lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            renew_time: Some(MicroTime("2026-11-25T11:59:53Z".parse().unwrap())),
            ..Default::default()
        });
        let state = HubState {
            hub: "hub".into(),
            spokes: vec![spoke(
                "dev",
                "lease",
                json!({"phase": "Running", "agentVersion": "1.0.0"}),
            )],
            clusters: BTreeMap::from([("dev".to_string(), cluster)]),
            addons: vec![addon("metrics", "True"), addon("logging", "False")],
            leases: BTreeMap::from([("dev".to_string(), lease)]),
        };
        let rows = rows(&state, now());
        assert_eq!(
            rows,
            [SpokeRow {
                spoke: "dev".into(),
                hub: "hub".into(),
                phase: Some("Running".into()),
                state: "ONLINE".into(),
                available: Some("True".into()),
                joined: true,
                agent_version: Some("1.0.0".into()),
                lease_age_seconds: Some(7),
                nodes: Some(NodeHealthStatus {
                    ready: 2,
                    total: 3,
                    memory_pressure: 1,
                    under_pressure: 1,
                    ..NodeHealthStatus::default()
                }),
                addons_available: 1,
                addons: 2,
                claims: 2,
            }]
        );
        let table = table(&rows);
        assert!(table.starts_with("SPOKE  HUB  PHASE    STATE"), "{table}");
        assert!(table.contains("2/3 mem:1"), "{table}");
        assert!(table.contains("1/2"), "{table}");
    }

    #[test]
    fn spokes_not_registered_yet_are_pending_and_poll_mode_spokes_show_the_observers_state() {
        let observed = json!({"conditions": [condition(CONDITION_ONLINE, "False", "DEGRADED")]});
        let state = HubState {
            hub: "hub".into(),
            spokes: vec![spoke("b", "poll", observed), spoke("a", "lease", json!({}))],
            ..HubState::default()
        };
        let rows = rows(&state, now());
        assert_eq!(
            rows.iter()
                .map(|row| (row.spoke.as_str(), row.state.as_str(), row.joined))
                .collect::<Vec<_>>(),
            [("a", "PENDING", false), ("b", "DEGRADED", false)]
        );
        assert!(table(&rows).lines().nth(1).unwrap().contains("-"));
    }
}
