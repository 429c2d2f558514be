//! What fleetform installs on a cluster besides the fleet's own objects.
//!
//! - The hub ServiceAccount and the RBAC `deploy/hub/rbac.yaml` grants it. That file is the one
//!   source: the binary carries it, so `fleetform up` and the integration tests run the hub
//!   loops, the lifecycle reconciler and sync with exactly the rights a real installation gives
//!   them, never as an administrator.
//! - CRDs, written only where fleetform owns them: a CRD of that name that fleetform did not
//!   write (OCM's own, or another installer's) is left as it is.

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::api::fleet::SYSTEM_NAMESPACE;
use crate::api::vocabulary::{MANAGED_BY, MANAGED_BY_LABEL};

/// The ServiceAccount the hub side (`fleetform hub`, `fleetform sync`) runs as.
pub const HUB_SERVICE_ACCOUNT: &str = "fleetform";
/// The namespace of [`HUB_SERVICE_ACCOUNT`].
pub const HUB_SERVICE_ACCOUNT_NAMESPACE: &str = SYSTEM_NAMESPACE;

/// `deploy/hub/rbac.yaml`: the hub ServiceAccount, its ClusterRole and the binding.
const HUB_RBAC_YAML: &str = include_str!("../deploy/hub/rbac.yaml");

/// Field manager of the manifests fleetform installs.
const FIELD_MANAGER: &str = "fleetform";

/// The documents of `deploy/hub/rbac.yaml`. The file is part of the binary and a test parses it,
/// so a document that does not parse is a build defect; it is skipped rather than panicking.
pub fn hub_rbac() -> Vec<Value> {
    serde_yaml::Deserializer::from_str(HUB_RBAC_YAML)
        .filter_map(|document| serde::Deserialize::deserialize(document).ok())
        .filter(|value: &Value| value.is_object())
        .collect()
}

/// Why installing manifests failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot apply {kind} {name}: {source}")]
pub struct InstallError {
    pub kind: String,
    pub name: String,
    #[source]
    pub source: kube::Error,
}

/// Grants the hub ServiceAccount its RBAC on `client`'s cluster (server-side apply, field
/// manager `fleetform`); the ServiceAccount's namespace must exist. An administrator's step.
pub async fn install_hub_rbac(client: &Client) -> Result<(), InstallError> {
    for document in hub_rbac() {
        apply_document(client, &document).await?;
    }
    Ok(())
}

/// What [`install_crd`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrdInstall {
    /// The CRD was absent, or carried fleetform's mark, and was written.
    Written,
    /// A CRD of that name without fleetform's mark is there: left alone.
    LeftAlone,
}

/// Writes `crd` (server-side apply, field manager `fleetform`) unless the cluster already has a
/// CRD of that name without fleetform's mark: an OCM hub's own CRDs may serve more versions or
/// other schemas than fleetform knows, and are not fleetform's to rewrite.
pub async fn install_crd(
    client: &Client,
    crd: &CustomResourceDefinition,
) -> Result<CrdInstall, InstallError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let failed = |source| InstallError {
        kind: "CustomResourceDefinition".to_string(),
        name: name.clone(),
        source,
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if let Some(existing) = crds.get_opt(&name).await.map_err(failed)? {
        let ours = existing
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(MANAGED_BY_LABEL))
            .is_some_and(|value| value == MANAGED_BY);
        if !ours {
            return Ok(CrdInstall::LeftAlone);
        }
    }
    let mut object =
        serde_json::to_value(crd).map_err(|err| failed(kube::Error::SerdeError(err)))?;
    object["apiVersion"] = "apiextensions.k8s.io/v1".into();
    object["kind"] = "CustomResourceDefinition".into();
    crds.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .map_err(failed)?;
    Ok(CrdInstall::Written)
}

/// Server-side applies one manifest of a built-in kind.
pub async fn apply_document(client: &Client, document: &Value) -> Result<(), InstallError> {
    let text = |pointer: &str| document.pointer(pointer).and_then(Value::as_str);
    let kind = text("/kind").unwrap_or_default().to_string();
    let name = text("/metadata/name").unwrap_or_default().to_string();
    let (group, version) = match text("/apiVersion").unwrap_or_default().split_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (
            String::new(),
            text("/apiVersion").unwrap_or_default().to_string(),
        ),
    };
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, &kind));
    let api: Api<DynamicObject> = match text("/metadata/namespace") {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(document),
    )
    .await
    .map(|_| ())
    .map_err(|source| InstallError { kind, name, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hub_rbac_grants_the_hub_service_account_and_nothing_else() {
        let documents = hub_rbac();
        let kinds: Vec<&str> = documents
            .iter()
            .filter_map(|d| d["kind"].as_str())
            .collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
        );
        let binding = &documents[2];
        assert_eq!(
            binding["subjects"],
            serde_json::json!([{
                "kind": "ServiceAccount",
                "name": HUB_SERVICE_ACCOUNT,
                "namespace": HUB_SERVICE_ACCOUNT_NAMESPACE,
            }])
        );
        assert!(
            !documents
                .iter()
                .any(|d| d.to_string().contains("cluster-admin")),
            "fleetform is never cluster-admin"
        );
    }
}
