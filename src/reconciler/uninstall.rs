//! Removing an agent from its spoke, in an order where every step still has the rights it needs
//! when the agent removes itself with its own ServiceAccount: first its hub credentials (so the
//! agent can drop its Spoke's finalizer in between, with the client it already holds), then its
//! workload, and last its ClusterRole, whose deletion ends the agent's rights on the spoke. The
//! ClusterRoleBinding is owned by the ClusterRole and the ClusterRole by the agent namespace (see
//! [`super::install`]), so the garbage collector removes what no step can: the binding that
//! grants the last step.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::install::{AGENT_CLUSTER_ROLE, AGENT_DEPLOYMENT};
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

/// Deletes the agent's namespace (and with it the Deployment), or only the Deployment when the
/// namespace is kept, then the agent's ClusterRole: the last call the agent can make.
pub async fn remove_workload(spoke: &Client, purge_namespace: bool) -> Result<(), String> {
    if purge_namespace {
        delete(&Api::<Namespace>::all(spoke.clone()), AGENT_NAMESPACE).await?;
    } else {
        delete(
            &Api::<Deployment>::namespaced(spoke.clone(), AGENT_NAMESPACE),
            AGENT_DEPLOYMENT,
        )
        .await?;
    }
    delete(&Api::<ClusterRole>::all(spoke.clone()), AGENT_CLUSTER_ROLE).await
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
            "Deployment {AGENT_NAMESPACE}/{AGENT_DEPLOYMENT} and Secrets {BOOTSTRAP_HUB_KUBECONFIG_SECRET}, {HUB_KUBECONFIG_SECRET}"
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
