//! Removing an agent from its spoke, in two stages so that the agent removing itself can drop
//! its Spoke's finalizer in between: first its credentials and RBAC, then its workload (deleting
//! the Deployment ends the agent).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::install::{AGENT_CLUSTER_ROLE, AGENT_DEPLOYMENT};
use super::objects::delete_if_present;
use crate::api::vocabulary::{
    AGENT_NAMESPACE, BOOTSTRAP_HUB_KUBECONFIG_SECRET, HUB_KUBECONFIG_SECRET,
};

/// Deletes the agent's hub credentials (bootstrap and issued) and its RBAC on the spoke.
pub async fn remove_credentials(spoke: &Client) -> Result<(), String> {
    let secrets = Api::<Secret>::namespaced(spoke.clone(), AGENT_NAMESPACE);
    for secret in [BOOTSTRAP_HUB_KUBECONFIG_SECRET, HUB_KUBECONFIG_SECRET] {
        delete(&secrets, secret).await?;
    }
    delete(
        &Api::<ClusterRoleBinding>::all(spoke.clone()),
        AGENT_CLUSTER_ROLE,
    )
    .await?;
    delete(&Api::<ClusterRole>::all(spoke.clone()), AGENT_CLUSTER_ROLE).await
}

/// Deletes the agent's namespace (and with it the Deployment), or only the Deployment when the
/// namespace is kept.
pub async fn remove_workload(spoke: &Client, purge_namespace: bool) -> Result<(), String> {
    if purge_namespace {
        delete(&Api::<Namespace>::all(spoke.clone()), AGENT_NAMESPACE).await
    } else {
        delete(
            &Api::<Deployment>::namespaced(spoke.clone(), AGENT_NAMESPACE),
            AGENT_DEPLOYMENT,
        )
        .await
    }
}

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), String>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    delete_if_present(api, name)
        .await
        .map_err(|err| format!("cannot delete {} {name}: {err}", K::kind(&())))
}
