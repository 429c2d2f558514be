//! Whether a CRD is installed, so that a component starts only the loops whose kinds exist
//! ("missing CRDs degrade, never crash").

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, CustomResourceExt};
use tracing::warn;

/// What a cluster says of a CRD.
#[derive(Debug)]
pub enum Presence {
    Installed,
    Missing,
    /// The cluster could not be asked (no right to read CRDs, unreachable, ...).
    Unknown(kube::Error),
}

/// Whether the CRD of `K` is installed on `client`'s cluster.
pub async fn presence<K: CustomResourceExt>(client: &Client) -> Presence {
    match Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(K::crd_name())
        .await
    {
        Ok(Some(_)) => Presence::Installed,
        Ok(None) => Presence::Missing,
        Err(err) => Presence::Unknown(err),
    }
}

/// Whether the CRD of `K` is installed; says so (a warning naming the CRD and `consequence`,
/// what goes without it) when it is not, or cannot be told.
pub async fn installed<K: CustomResourceExt>(client: &Client, consequence: &str) -> bool {
    let name = K::crd_name();
    match presence::<K>(client).await {
        Presence::Installed => true,
        Presence::Missing => {
            warn!(
                crd = name,
                "CRD not installed; {consequence} (install it with `fleetform crds | kubectl apply -f -`)"
            );
            false
        }
        Presence::Unknown(err) => {
            warn!(crd = name, %err, "cannot check the CRD; {consequence}");
            false
        }
    }
}
