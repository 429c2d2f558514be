//! Removing an agent from its spoke, in an order where every step still has the rights it needs
//! when the agent removes itself with its own ServiceAccount: first its hub credentials (so the
//! agent can drop its Spoke's finalizer in between, with the client it already holds), then its
//! workload (its election's Role, RoleBinding and Lease with it), and last its ClusterRole, whose
//! deletion ends the agent's rights on the spoke. The ClusterRoleBinding is owned by the
//! ClusterRole (the reconciler installs it so; for one installed by hand, the step before the
//! last makes it so), so the garbage collector removes what no step can: the binding that
//! grants the last step.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::install::{AGENT_CLUSTER_ROLE, AGENT_DEPLOYMENT, ELECTION_LEASE};
use crate::api::vocabulary::{
    AGENT_NAMESPACE, BOOTSTRAP_HUB_KUBECONFIG_SECRET, HUB_KUBECONFIG_SECRET,
};
use crate::runtime::finalizers::delete_if_present;

/// Deletes the agent's hub credentials on the spoke: the bootstrap and the issued kubeconfig.
pub async fn remove_credentials(spoke: &Client) -> Result<(), String> {
    let secrets = Api::<Secret>::namespaced(spoke.clone(), AGENT_NAMESPACE);
    for secret in [BOOTSTRAP_HUB_KUBECONFIG_SECRET, HUB_KUBECONFIG_SECRET] {
        delete(&secrets, secret).await?;
    }
    Ok(())
}

/// Deletes the agent's namespace (and with it the Deployment), or, when the namespace is kept,
/// its election's RoleBinding, Role and Lease (the Role first: an agent still running cannot
/// write the Lease again) and the Deployment; then makes sure the ClusterRoleBinding goes with
/// the ClusterRole and deletes the ClusterRole: the last call the agent can make.
pub async fn remove_workload(spoke: &Client, purge_namespace: bool) -> Result<(), String> {
    if purge_namespace {
        delete(&Api::<Namespace>::all(spoke.clone()), AGENT_NAMESPACE).await?;
    } else {
        delete(
            &Api::<RoleBinding>::namespaced(spoke.clone(), AGENT_NAMESPACE),
            AGENT_CLUSTER_ROLE,
        )
        .await?;
        delete(
            &Api::<Role>::namespaced(spoke.clone(), AGENT_NAMESPACE),
            AGENT_CLUSTER_ROLE,
        )
        .await?;
        delete(
            &Api::<Lease>::namespaced(spoke.clone(), AGENT_NAMESPACE),
            ELECTION_LEASE,
        )
        .await?;
        delete(
            &Api::<Deployment>::namespaced(spoke.clone(), AGENT_NAMESPACE),
            AGENT_DEPLOYMENT,
        )
        .await?;
    }
    bind_to_role(spoke).await?;
    delete(&Api::<ClusterRole>::all(spoke.clone()), AGENT_CLUSTER_ROLE).await
}

/// Makes the agent's ClusterRoleBinding owned by its ClusterRole, unless it is (or either is
/// gone), so that deleting the ClusterRole takes the binding with it.
async fn bind_to_role(spoke: &Client) -> Result<(), String> {
    let failed = |what: &'static str| {
        move |err: kube::Error| format!("cannot {what} {AGENT_CLUSTER_ROLE}: {err}")
    };
    let Some(role) = Api::<ClusterRole>::all(spoke.clone())
        .get_opt(AGENT_CLUSTER_ROLE)
        .await
        .map_err(failed("read ClusterRole"))?
    else {
        return Ok(());
    };
    let bindings = Api::<ClusterRoleBinding>::all(spoke.clone());
    let Some(binding) = bindings
        .get_opt(AGENT_CLUSTER_ROLE)
        .await
        .map_err(failed("read ClusterRoleBinding"))?
    else {
        return Ok(());
    };
    let Some(owner) = role.owner_ref(&()) else {
        return Ok(());
    };
    if binding
        .owner_references()
        .iter()
        .any(|reference| reference.uid == owner.uid)
    {
        return Ok(());
    }
    let patch = serde_json::json!({"metadata": {"ownerReferences": [owner]}});
    bindings
        .patch(
            AGENT_CLUSTER_ROLE,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
        .map_err(failed("make ClusterRole own ClusterRoleBinding"))
}

/// What an agent leaves on a spoke it could not clean up itself, for an operator to remove.
pub fn leftovers(purge_namespace: bool) -> Vec<String> {
    let mut left = vec![
        format!(
            "Namespace {AGENT_NAMESPACE} (the agent Deployment, its ServiceAccount and Secrets)"
        ),
        format!("ClusterRole and ClusterRoleBinding {AGENT_CLUSTER_ROLE}"),
    ];
    if !purge_namespace {
        left[0] = format!(
            "Deployment {AGENT_NAMESPACE}/{AGENT_DEPLOYMENT}, Secrets {BOOTSTRAP_HUB_KUBECONFIG_SECRET}, {HUB_KUBECONFIG_SECRET}, Role and RoleBinding {AGENT_CLUSTER_ROLE} and Lease {ELECTION_LEASE} in {AGENT_NAMESPACE}"
        );
    }
    left
}

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), String>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    delete_if_present(api, name)
        .await
        .map_err(|err| format!("cannot delete {} {name}: {err}", K::kind(&())))
}
