//! The hub-wide RBAC of bootstrap token holders (DESIGN §4.1): what a spoke's agent may do on
//! the hub before it holds a certificate of its own. Every token holder is in the group
//! [`BOOTSTRAP_GROUP`], which the ClusterRole here lets create a ManagedCluster and CSRs and read
//! one by name, and nothing else: it lists and watches no ManagedCluster, and lists no CSR (the
//! agent watches its own CSR by name). The token itself is [`crate::api::bootstrap_token`]; its
//! lifetime, the lifecycle reconciler's.
//!
//! The builders here are pure; [`ensure_rbac`] is the one write, made by the hub loops at start.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::run::{FIELD_MANAGER, HubError};
use crate::api::bootstrap_token::BOOTSTRAP_GROUP;
use crate::runtime::error::KubeError;

/// Name of the hub-wide ClusterRole and ClusterRoleBinding of [`BOOTSTRAP_GROUP`].
pub const BOOTSTRAP_ROLE_NAME: &str = "system:open-cluster-management:bootstrap";

/// The hub-wide ClusterRole of bootstrap token holders, less than OCM's bootstrap role: create a
/// ManagedCluster and get one by name; create a CSR, get one by name and watch one (the agent
/// narrows its watch to its own CSR's name). No list of either, no watch of ManagedClusters, no
/// clusterset join: a token holder cannot see the fleet.
pub fn bootstrap_cluster_role() -> ClusterRole {
    let rule = |group: &str, resource: &str, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(vec![resource.to_string()]),
        verbs: verbs.iter().map(|verb| verb.to_string()).collect(),
        ..PolicyRule::default()
    };
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(BOOTSTRAP_ROLE_NAME.to_string()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
            rule(
                "cluster.open-cluster-management.io",
                "managedclusters",
                &["create", "get"],
            ),
            rule(
                "certificates.k8s.io",
                "certificatesigningrequests",
                &["create", "get", "watch"],
            ),
        ]),
        ..ClusterRole::default()
    }
}

/// Binds [`bootstrap_cluster_role`] to [`BOOTSTRAP_GROUP`].
pub fn bootstrap_cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(BOOTSTRAP_ROLE_NAME.to_string()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_string(),
            kind: "ClusterRole".to_string(),
            name: BOOTSTRAP_ROLE_NAME.to_string(),
        },
        subjects: Some(vec![Subject {
            kind: "Group".to_string(),
            api_group: Some("rbac.authorization.k8s.io".to_string()),
            name: BOOTSTRAP_GROUP.to_string(),
            namespace: None,
        }]),
    }
}

/// Applies the bootstrap ClusterRole and its binding (server-side apply; idempotent).
pub async fn ensure_rbac(client: &Client) -> Result<(), HubError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut role =
        serde_json::to_value(bootstrap_cluster_role()).map_err(|source| HubError::Build {
            object: format!("ClusterRole {BOOTSTRAP_ROLE_NAME}"),
            source,
        })?;
    role["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    role["kind"] = json!("ClusterRole");
    Api::<ClusterRole>::all(client.clone())
        .patch(BOOTSTRAP_ROLE_NAME, &params, &Patch::Apply(&role))
        .await
        .map_err(KubeError::on(
            format!("ClusterRole {BOOTSTRAP_ROLE_NAME}"),
            "apply",
        ))?;
    let mut binding = serde_json::to_value(bootstrap_cluster_role_binding()).map_err(|source| {
        HubError::Build {
            object: format!("ClusterRoleBinding {BOOTSTRAP_ROLE_NAME}"),
            source,
        }
    })?;
    binding["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    binding["kind"] = json!("ClusterRoleBinding");
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(BOOTSTRAP_ROLE_NAME, &params, &Patch::Apply(&binding))
        .await
        .map_err(KubeError::on(
            format!("ClusterRoleBinding {BOOTSTRAP_ROLE_NAME}"),
            "apply",
        ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_role_may_register_and_nothing_more() {
        let role = bootstrap_cluster_role();
        let mut granted: Vec<(String, String)> = Vec::new();
        for rule in role.rules.unwrap() {
            assert!(rule.resource_names.is_none());
            for resource in rule.resources.unwrap() {
                for verb in &rule.verbs {
                    granted.push((resource.clone(), verb.clone()));
                }
            }
        }
        let granted: Vec<(&str, &str)> = granted
            .iter()
            .map(|(resource, verb)| (resource.as_str(), verb.as_str()))
            .collect();
        assert_eq!(
            granted,
            [
                ("managedclusters", "create"),
                ("managedclusters", "get"),
                ("certificatesigningrequests", "create"),
                ("certificatesigningrequests", "get"),
                ("certificatesigningrequests", "watch"),
            ],
            "no list of anything, no watch of ManagedClusters"
        );
        let binding = bootstrap_cluster_role_binding();
        assert_eq!(binding.subjects.unwrap()[0].name, BOOTSTRAP_GROUP);
        assert_eq!(binding.role_ref.name, BOOTSTRAP_ROLE_NAME);
    }
}
