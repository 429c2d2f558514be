//! Custom addon signers under `fleetform up`: the CA Secret an AddOn's `signerSecretRef` names.
//!
//! On a real hub that Secret is the addon's operator's to provide (OCM's observability operator
//! creates its signer CA); the hub signs the addon's CSRs with it and fails them, saying so,
//! while it is missing. `up` runs no operators, so for every ClusterManagementAddOn that
//! carries fleetform's AddOn document it creates each such Secret that does not exist yet: a
//! self-signed CA (`tls.crt`, `tls.key`) marked as fleetform's. A Secret that exists, whoever
//! made it, is left as it is.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::api::ClusterManagementAddOn;
use crate::api::fleet::SecretRef;
use crate::api::vocabulary::SIGNER_KUBE_APISERVER_CLIENT;
use crate::hub::conversion_webhook::certificate::new_authority;
use crate::hub::signing::{SIGNER_CA_CERT_KEY, SIGNER_CA_KEY_KEY};
use crate::plan::desired::{MANAGED_BY, MANAGED_BY_LABEL, carried_addon_spec};
use crate::runtime::error::is_conflict;
use crate::runtime::watch::{Change, object_changes};

/// How soon a Secret that could not be written is tried again.
const RETRY_DELAY: Duration = Duration::from_secs(2);

/// The signer CA Secrets the AddOn document of `addon` names for custom signers.
pub fn signer_secrets(addon: &ClusterManagementAddOn) -> Vec<(String, SecretRef)> {
    let Some(Ok(spec)) = carried_addon_spec(addon) else {
        return Vec::new();
    };
    spec.registrations
        .into_iter()
        .filter(|registration| registration.signer_name != SIGNER_KUBE_APISERVER_CLIENT)
        .filter_map(|registration| {
            Some((registration.signer_name, registration.signer_secret_ref?))
        })
        .collect()
}

/// Creates the signer CA Secrets the hub's addons name, as they appear, until `shutdown`.
pub(crate) async fn run(hub: Client, shutdown: CancellationToken) {
    let addons = Api::<ClusterManagementAddOn>::all(hub.clone());
    let mut changes = object_changes(addons, watcher::Config::default(), &shutdown);
    while let Some(change) = changes.next().await {
        let Ok(Change::Applied(addon)) = change else {
            continue;
        };
        for (signer, secret) in signer_secrets(&addon) {
            while let Err(err) = ensure(&hub, &signer, &secret).await {
                warn!(
                    addon = addon.name_any(),
                    secret = format!("{}/{}", secret.namespace, secret.name),
                    %err,
                    "cannot create the signer's CA Secret; trying again"
                );
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(RETRY_DELAY) => {}
                }
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum SignerError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("cannot make a CA: {0}")]
    Ca(#[from] rcgen::Error),
}

/// Creates `secret` with a new CA for `signer` unless it exists.
async fn ensure(hub: &Client, signer: &str, secret: &SecretRef) -> Result<(), SignerError> {
    let secrets = Api::<Secret>::namespaced(hub.clone(), &secret.namespace);
    if secrets.get_opt(&secret.name).await?.is_some() {
        return Ok(());
    }
    let (cert, key) = new_authority(signer, time::OffsetDateTime::now_utc())?;
    let created = Secret {
        metadata: ObjectMeta {
            name: Some(secret.name.clone()),
            namespace: Some(secret.namespace.clone()),
            labels: Some([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(
            [
                (
                    SIGNER_CA_CERT_KEY.to_string(),
                    ByteString(cert.into_bytes()),
                ),
                (SIGNER_CA_KEY_KEY.to_string(), ByteString(key.into_bytes())),
            ]
            .into(),
        ),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &created).await {
        Ok(_) => {
            info!(
                signer,
                secret = format!("{}/{}", secret.namespace, secret.name),
                "created the signer's CA Secret (up plays the addon's operator)"
            );
            Ok(())
        }
        // Someone else made it meanwhile: theirs stands.
        Err(err) if is_conflict(&err) => Ok(()),
        Err(err) => Err(err.into()),
    }
}
