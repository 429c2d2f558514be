//! What fleetform installs on a cluster besides the fleet's own objects, and how.
//!
//! - [`manifests`]: the install set of a hub, rendered without I/O — the one source of
//!   `fleetform install`, `install --export`, `deploy/` and the hub ServiceAccount's RBAC that
//!   `fleetform up` and the integration tests grant ([`hub_rbac`]), so the hub loops, the
//!   lifecycle reconciler and sync run there with exactly the rights a real installation gives
//!   them, never as an administrator.
//! - [`install`]: applying it (server-side apply, field manager `fleetform`) and waiting until
//!   the CRDs are Established and the hub Deployment available.
//! - [`uninstall`]: removing it, after the spokes are unjoined.
//! - CRDs are written only where fleetform owns them: a CRD of that name that fleetform did not
//!   write (OCM's own, or another installer's) is left as it is.

pub mod install;
pub mod manifests;
pub mod uninstall;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::api::fleet::SYSTEM_NAMESPACE;
use crate::api::vocabulary::{MANAGED_BY, MANAGED_BY_LABEL};
pub use manifests::hub_rbac;

/// The ServiceAccount the hub side (`fleetform hub`, `fleetform sync`) runs as.
pub const HUB_SERVICE_ACCOUNT: &str = "fleetform";
/// The namespace of [`HUB_SERVICE_ACCOUNT`].
pub const HUB_SERVICE_ACCOUNT_NAMESPACE: &str = SYSTEM_NAMESPACE;

/// Field manager of the manifests fleetform installs.
const FIELD_MANAGER: &str = "fleetform";

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

/// What applying one manifest did, as kubectl says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// It was not there.
    Created,
    /// It was there and is changed (or fleetform took over fields of it).
    Configured,
    /// It was there as the manifest says: the server wrote nothing.
    Unchanged,
    /// A CRD of that name without fleetform's mark is there: left as it is.
    LeftAlone,
}

impl Applied {
    /// Whether the cluster changed.
    pub fn changed(self) -> bool {
        matches!(self, Applied::Created | Applied::Configured)
    }
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Applied::Created => "created",
            Applied::Configured => "configured",
            Applied::Unchanged => "unchanged",
            Applied::LeftAlone => "left alone (not fleetform's)",
        })
    }
}

/// Whether an object carries fleetform's mark.
pub fn is_marked(object: &impl ResourceExt) -> bool {
    object
        .labels()
        .get(MANAGED_BY_LABEL)
        .is_some_and(|value| value == MANAGED_BY)
}

/// Writes `crd` (server-side apply, field manager `fleetform`) unless the cluster already has a
/// CRD of that name without fleetform's mark: an OCM hub's own CRDs may serve more versions or
/// other schemas than fleetform knows, and are not fleetform's to rewrite.
pub async fn install_crd(
    client: &Client,
    crd: &CustomResourceDefinition,
) -> Result<Applied, InstallError> {
    let mut object = serde_json::to_value(crd).map_err(|err| InstallError {
        kind: "CustomResourceDefinition".to_string(),
        name: crd.metadata.name.clone().unwrap_or_default(),
        source: kube::Error::SerdeError(err),
    })?;
    object["apiVersion"] = "apiextensions.k8s.io/v1".into();
    object["kind"] = "CustomResourceDefinition".into();
    apply_document(client, &object).await
}

/// Server-side applies one manifest (field manager `fleetform`, forcing conflicts) and says
/// what that did: a write the server found changed nothing keeps the object's resourceVersion.
/// A CRD fleetform did not write is left alone (see [`install_crd`]).
pub async fn apply_document(client: &Client, document: &Value) -> Result<Applied, InstallError> {
    let text = |pointer: &str| document.pointer(pointer).and_then(Value::as_str);
    let kind = text("/kind").unwrap_or_default().to_string();
    let name = text("/metadata/name").unwrap_or_default().to_string();
    let api = dynamic_api(client, document);
    let failed = |source| InstallError {
        kind: kind.clone(),
        name: name.clone(),
        source,
    };
    let before = api.get_opt(&name).await.map_err(failed)?;
    if kind == "CustomResourceDefinition"
        && let Some(existing) = &before
        && !is_marked(existing)
    {
        return Ok(Applied::LeftAlone);
    }
    let after = api
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(document),
        )
        .await
        .map_err(failed)?;
    Ok(match before {
        None => Applied::Created,
        Some(before) if before.resource_version() == after.resource_version() => Applied::Unchanged,
        Some(_) => Applied::Configured,
    })
}

/// The API of a manifest's kind, where it lives (cluster-scoped when it names no namespace).
fn dynamic_api(client: &Client, document: &Value) -> Api<DynamicObject> {
    let text = |pointer: &str| document.pointer(pointer).and_then(Value::as_str);
    let api_version = text("/apiVersion").unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = text("/kind").unwrap_or_default();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    match text("/metadata/namespace") {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}
