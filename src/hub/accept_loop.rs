//! The hub's accept loop (DESIGN §4.1): what `hubAcceptsClient` means on the hub.
//!
//! For a ManagedCluster with `hubAcceptsClient: true` the loop creates the cluster namespace, the
//! RBAC that lets the cluster's agent (group `system:open-cluster-management:<cluster>`) touch
//! only its own ManagedCluster and status, its lease, its addons' status, CSRs and Events, the
//! `managed-cluster-lease` (renewed now, so a new cluster gets five durations to report), and
//! then sets HubAcceptedManagedCluster True. When `hubAcceptsClient` is false, or was true and is
//! no longer, the RBAC is removed and the condition set False. The namespace is kept: it holds
//! the cluster's addons and history, and removing it is the unjoin's job (seed 004).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument};

use super::approval::cluster_group;
use super::conditions::{is_conflict, is_not_found, set_conditions};
use super::run::{Context, FIELD_MANAGER, HubError};
use crate::api::ManagedCluster;
use crate::api::vocabulary::{
    CLUSTER_LEASE_NAME, CONDITION_HUB_ACCEPTED, LABEL_CLUSTER_NAME,
    REASON_HUB_CLUSTER_ADMIN_ACCEPTED, REASON_HUB_CLUSTER_ADMIN_DENIED, STATUS_FALSE, STATUS_TRUE,
};

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let clusters: Api<ManagedCluster> = Api::all(ctx.client.clone());
    Controller::new(clusters, watcher::Config::default())
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move { super::run::log_outcome(result, "accept loop") })
        .await;
}

fn error_policy(_: Arc<ManagedCluster>, err: &HubError, _: Arc<Context>) -> Action {
    super::run::retry_after(err, "accepting a cluster")
}

/// Name of the ClusterRole and ClusterRoleBinding of a cluster's agent.
pub fn cluster_role_name(cluster: &str) -> String {
    format!("open-cluster-management:managedcluster:{cluster}")
}

/// Name of the Role and RoleBinding of a cluster's agent in its namespace.
pub fn registration_role_name(cluster: &str) -> String {
    format!("open-cluster-management:managedcluster:{cluster}:registration")
}

#[instrument(skip(ctx, cluster), fields(cluster = cluster.name_any()))]
async fn reconcile(cluster: Arc<ManagedCluster>, ctx: Arc<Context>) -> Result<Action, HubError> {
    let name = cluster.name_any();
    let accepted_before =
        crate::api::is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED);
    if cluster.hub_accepts_client() {
        accept(&ctx, &cluster).await?;
        set_accepted(&ctx, &name, true).await?;
        if !accepted_before {
            info!("cluster accepted");
        }
    } else if cluster.spec.hub_accepts_client == Some(false) || accepted_before {
        revoke(&ctx, &name).await?;
        set_accepted(&ctx, &name, false).await?;
        if accepted_before {
            info!("cluster no longer accepted; its agent's RBAC is removed");
        }
    }
    Ok(Action::await_change())
}

async fn accept(ctx: &Context, managed_cluster: &ManagedCluster) -> Result<(), HubError> {
    let cluster = managed_cluster.name_any();
    let cluster = cluster.as_str();
    let labels = json!({ LABEL_CLUSTER_NAME: cluster });
    apply::<Namespace>(
        &Api::all(ctx.client.clone()),
        cluster,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster, "labels": labels}}),
    )
    .await?;
    let owner = managed_cluster
        .controller_owner_ref(&())
        .map(|owner| json!([owner]));
    for (name, mut object) in rbac(cluster) {
        if let Some(owner) = &owner {
            object["metadata"]["ownerReferences"] = owner.clone();
        }
        match object["kind"].as_str() {
            Some("ClusterRole") => {
                apply::<ClusterRole>(&Api::all(ctx.client.clone()), &name, object).await?
            }
            Some("ClusterRoleBinding") => {
                apply::<ClusterRoleBinding>(&Api::all(ctx.client.clone()), &name, object).await?
            }
            Some("Role") => {
                apply::<Role>(&Api::namespaced(ctx.client.clone(), cluster), &name, object).await?
            }
            _ => {
                apply::<RoleBinding>(&Api::namespaced(ctx.client.clone(), cluster), &name, object)
                    .await?
            }
        }
    }
    ensure_lease(ctx, cluster).await
}

/// The RBAC of a cluster's agent, by name: a ClusterRole and binding for its own ManagedCluster
/// and CSRs, a Role and binding in its namespace for its lease, addons and Events. The loop makes
/// the ManagedCluster their owner, so deleting the cluster deletes them.
fn rbac(cluster: &str) -> Vec<(String, Value)> {
    let group = cluster_group(cluster);
    let cluster_role = cluster_role_name(cluster);
    let role = registration_role_name(cluster);
    let labels = json!({ LABEL_CLUSTER_NAME: cluster });
    let subjects =
        json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}]);
    vec![
        (
            cluster_role.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": cluster_role, "labels": labels},
                "rules": [
                    {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"],
                     "resourceNames": [cluster], "verbs": ["get", "list", "watch", "update", "patch"]},
                    {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters/status"],
                     "resourceNames": [cluster], "verbs": ["get", "update", "patch"]},
                    {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                     "verbs": ["create", "get", "list", "watch"]},
                ],
            }),
        ),
        (
            cluster_role.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": cluster_role, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
                "subjects": subjects,
            }),
        ),
        (
            role.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": role, "namespace": cluster, "labels": labels},
                "rules": [
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                     "resourceNames": [CLUSTER_LEASE_NAME], "verbs": ["get", "update", "patch"]},
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                    {"apiGroups": ["addon.open-cluster-management.io"], "resources": ["managedclusteraddons"],
                     "verbs": ["get", "list", "watch"]},
                    {"apiGroups": ["addon.open-cluster-management.io"], "resources": ["managedclusteraddons/status"],
                     "verbs": ["get", "update", "patch"]},
                    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
                     "verbs": ["create", "update", "patch"]},
                ],
            }),
        ),
        (
            role.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": role, "namespace": cluster, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": subjects,
            }),
        ),
    ]
}

async fn apply<K>(api: &Api<K>, name: &str, object: Value) -> Result<(), HubError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let kind = object["kind"].as_str().unwrap_or("object").to_string();
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .map(|_| ())
    .map_err(HubError::kube(format!("{kind} {name}"), "apply"))
}

/// Creates the cluster's lease, renewed now, unless it exists.
async fn ensure_lease(ctx: &Context, cluster: &str) -> Result<(), HubError> {
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), cluster);
    let object = format!("Lease {cluster}/{CLUSTER_LEASE_NAME}");
    if leases
        .get_opt(CLUSTER_LEASE_NAME)
        .await
        .map_err(HubError::kube(&object, "read"))?
        .is_some()
    {
        return Ok(());
    }
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {
            "name": CLUSTER_LEASE_NAME,
            "namespace": cluster,
            "labels": {LABEL_CLUSTER_NAME: cluster},
        },
        "spec": {"renewTime": MicroTime(Timestamp::now())},
    }))
    .map_err(|source| HubError::Build {
        object: object.clone(),
        source,
    })?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    match leases.create(&params, &lease).await {
        Ok(_) => Ok(()),
        Err(err) if is_conflict(&err) => Ok(()),
        Err(err) => Err(HubError::kube(object, "create")(err)),
    }
}

/// Deletes the RBAC of a cluster's agent; what is already gone is fine.
async fn revoke(ctx: &Context, cluster: &str) -> Result<(), HubError> {
    let params = DeleteParams::default();
    let cluster_role = cluster_role_name(cluster);
    let role = registration_role_name(cluster);
    let results = [
        Api::<ClusterRoleBinding>::all(ctx.client.clone())
            .delete(&cluster_role, &params)
            .await
            .map(|_| ()),
        Api::<ClusterRole>::all(ctx.client.clone())
            .delete(&cluster_role, &params)
            .await
            .map(|_| ()),
        Api::<RoleBinding>::namespaced(ctx.client.clone(), cluster)
            .delete(&role, &params)
            .await
            .map(|_| ()),
        Api::<Role>::namespaced(ctx.client.clone(), cluster)
            .delete(&role, &params)
            .await
            .map(|_| ()),
    ];
    for result in results {
        match result {
            Ok(()) => {}
            Err(err) if is_not_found(&err) => {}
            Err(err) => {
                return Err(HubError::kube(
                    format!("RBAC of cluster {cluster}"),
                    "delete",
                )(err));
            }
        }
    }
    Ok(())
}

async fn set_accepted(ctx: &Context, cluster: &str, accepted: bool) -> Result<(), HubError> {
    let condition = if accepted {
        Condition {
            type_: CONDITION_HUB_ACCEPTED.to_string(),
            status: STATUS_TRUE.to_string(),
            reason: REASON_HUB_CLUSTER_ADMIN_ACCEPTED.to_string(),
            message: "Accepted by hub cluster admin".to_string(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::now()),
        }
    } else {
        Condition {
            type_: CONDITION_HUB_ACCEPTED.to_string(),
            status: STATUS_FALSE.to_string(),
            reason: REASON_HUB_CLUSTER_ADMIN_DENIED.to_string(),
            message: "Denied by hub cluster admin".to_string(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::now()),
        }
    };
    let clusters: Api<ManagedCluster> = Api::all(ctx.client.clone());
    set_conditions(&clusters, cluster, FIELD_MANAGER, |_| {
        vec![condition.clone()]
    })
    .await
    .map(|_| ())
    .map_err(HubError::kube(
        format!("ManagedCluster {cluster}"),
        "set HubAcceptedManagedCluster",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_rbac_names_only_its_own_cluster_and_binds_only_its_group() {
        let objects = rbac("c1");
        let kinds: Vec<&str> = objects
            .iter()
            .filter_map(|(_, object)| object["kind"].as_str())
            .collect();
        assert_eq!(
            kinds,
            ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
        );
        for (_, object) in &objects {
            for rule in object["rules"].as_array().into_iter().flatten() {
                let resources: Vec<&str> = rule["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if resources.iter().any(|r| r.starts_with("managedclusters")) {
                    assert_eq!(rule["resourceNames"], json!(["c1"]), "{rule}");
                }
                if resources.contains(&"leases") && rule["verbs"] != json!(["create"]) {
                    assert_eq!(rule["resourceNames"], json!([CLUSTER_LEASE_NAME]), "{rule}");
                }
            }
            if let Some(subjects) = object.get("subjects") {
                assert_eq!(
                    subjects,
                    &json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                             "name": "system:open-cluster-management:c1"}])
                );
            }
        }
        assert_eq!(objects[2].1["metadata"]["namespace"], "c1");
    }
}
