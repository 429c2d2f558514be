//! Keeping the conversion webhook's certificate: [`current_certificate`] reads Secret
//! [`WEBHOOK_SECRET`] and creates or renews it as [`secret_plan`] says (replicas share it: the
//! first write wins and the others adopt it); the keeper serves what it holds, looks again every
//! day and whenever a converted CRD changes, and writes the CA bundle into the CRDs
//! [`injection`] picks.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde_json::json;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::WebhookError;
use super::certificate::{
    Injection, SecretPlan, WEBHOOK_SECRET, WebhookCertificate, injection, secret_plan,
};
use crate::api::fleet::SYSTEM_NAMESPACE;
use crate::api::vocabulary::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::embedded::CONVERTED_CRDS;
use crate::hub::run::{FIELD_MANAGER, RETRY_DELAY};
use crate::runtime::watch::BackingOff;

/// How often the keeper looks at the Secret when nothing else makes it look.
pub(super) const CHECK_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// How often a write of the Secret that lost a race to another replica is tried again from a
/// fresh read (the winner's certificate is normally adopted at the first).
const SECRET_ATTEMPTS: usize = 3;

/// Reads the webhook's certificate from [`WEBHOOK_SECRET`] and does what [`secret_plan`] says:
/// serves it, or creates or renews it. Replicas racing to write it: the loser reads the
/// winner's back (the resourceVersion read makes its replace a 409).
pub(super) async fn current_certificate(
    secrets: &Api<Secret>,
    names: &[String],
    now: OffsetDateTime,
) -> Result<WebhookCertificate, WebhookError> {
    let failed = |action| move |source| WebhookError::Secret { action, source };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    for _ in 0..SECRET_ATTEMPTS {
        let existing = secrets
            .get_opt(WEBHOOK_SECRET)
            .await
            .map_err(failed("read"))?;
        let (certificate, renewal) = match secret_plan(existing.as_ref(), names, now)? {
            SecretPlan::Serve(certificate) => return Ok(certificate),
            SecretPlan::Unusable(why) => return Err(WebhookError::Unservable(why)),
            SecretPlan::Write(certificate, renewal) => (certificate, renewal),
        };
        let written = match existing {
            None => secrets.create(&params, &new_secret(&certificate)).await,
            Some(mut secret) => {
                secret.data = Some(certificate.secret_data());
                secret.string_data = None;
                secrets.replace(WEBHOOK_SECRET, &params, &secret).await
            }
        };
        match written {
            Ok(_) => {
                info!(?renewal, "conversion webhook: certificate issued");
                return Ok(certificate);
            }
            Err(err) if crate::runtime::error::is_conflict(&err) => {
                debug!("conversion webhook: another replica wrote the certificate; reading it");
            }
            Err(err) => return Err(failed("write")(err)),
        }
    }
    Err(WebhookError::Contended)
}

/// [`WEBHOOK_SECRET`] as fleetform creates it, holding `certificate`.
fn new_secret(certificate: &WebhookCertificate) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(WEBHOOK_SECRET.into()),
            namespace: Some(SYSTEM_NAMESPACE.into()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_string(),
                MANAGED_BY.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(certificate.secret_data()),
        ..Secret::default()
    }
}

/// The serving certificate handshakes use: the keeper swaps it when it renews, so connections
/// made afterwards get the new one without a restart.
#[derive(Debug)]
pub(super) struct ServedCertificate(RwLock<Arc<CertifiedKey>>);

impl ServedCertificate {
    pub(super) fn new(certificate: &WebhookCertificate) -> Result<Self, String> {
        Ok(ServedCertificate(RwLock::new(Arc::new(
            certificate.certified_key()?,
        ))))
    }

    fn set(&self, certificate: &WebhookCertificate) -> Result<(), String> {
        let key = Arc::new(certificate.certified_key()?);
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = key;
        Ok(())
    }
}

impl ResolvesServerCert for ServedCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.0
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }
}

/// Keeps the served certificate in line with the Secret and the CRDs' `caBundle` with it.
pub(super) struct Keeper {
    pub(super) secrets: Api<Secret>,
    pub(super) crds: Api<CustomResourceDefinition>,
    pub(super) names: Vec<String>,
    pub(super) held: WebhookCertificate,
    pub(super) served: Arc<ServedCertificate>,
}

impl Keeper {
    /// Takes the certificate from the Secret (renewing it when due), writes its CA bundle into
    /// the CRDs, then serves it: in that order, so that kube-apiserver trusts a new CA before
    /// anything it signed is served.
    async fn refresh(&mut self) -> Result<(), WebhookError> {
        let current =
            current_certificate(&self.secrets, &self.names, OffsetDateTime::now_utc()).await?;
        self.inject_all(&current.ca_bundle).await?;
        if current != self.held {
            self.served
                .set(&current)
                .map_err(WebhookError::Unservable)?;
            info!("conversion webhook: serving the certificate of the Secret");
            self.held = current;
        }
        Ok(())
    }

    /// Writes `ca_bundle` into every converted CRD that is fleetform's and holds another one.
    pub(super) async fn inject_all(&self, ca_bundle: &str) -> Result<(), WebhookError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        for name in CONVERTED_CRDS {
            let failed = |action| {
                move |source| WebhookError::Crd {
                    name: name.to_string(),
                    action,
                    source,
                }
            };
            let Some(crd) = self.crds.get_opt(name).await.map_err(failed("read"))? else {
                continue;
            };
            if injection(&crd, ca_bundle) != Injection::Write {
                continue;
            }
            // The resourceVersion makes the patch fail rather than land on a CRD replaced since
            // it was read (by one without the mark, say).
            let patch = json!({
                "metadata": {"resourceVersion": crd.metadata.resource_version},
                "spec": {"conversion": {"webhook": {"clientConfig": {
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_bundle),
                }}}},
            });
            self.crds
                .patch(name, &params, &Patch::Merge(&patch))
                .await
                .map_err(failed("write its caBundle"))?;
            info!(crd = name, "conversion webhook: CA bundle written");
        }
        Ok(())
    }

    /// A converted CRD changed. If it is fleetform's and holds another bundle, the Secret may
    /// have moved on (another replica renewed it): take it from there before writing, so that
    /// replicas never write each other's bundles back and forth.
    async fn crd_changed(&mut self, crd: &CustomResourceDefinition) -> Result<(), WebhookError> {
        if injection(crd, &self.held.ca_bundle) != Injection::Write {
            return Ok(());
        }
        self.refresh().await
    }

    /// Looks at the Secret every [`CHECK_INTERVAL`] and at the CRDs whenever they change, until
    /// `shutdown`; a failed step is tried again after [`RETRY_DELAY`].
    pub(super) async fn run(
        mut self,
        mut next_check: tokio::time::Instant,
        shutdown: CancellationToken,
    ) {
        let watches = CONVERTED_CRDS.map(|name| {
            let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
            watcher(self.crds.clone(), config)
                .backing_off()
                .applied_objects()
                .boxed()
        });
        let mut changes = futures::stream::select_all(watches);
        loop {
            let outcome = tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(next_check) => {
                    next_check = tokio::time::Instant::now() + CHECK_INTERVAL;
                    self.refresh().await
                }
                Some(change) = changes.next() => match change {
                    Ok(crd) => self.crd_changed(&crd).await,
                    Err(err) => {
                        warn!(%err, "conversion webhook: cannot watch the addon CRDs");
                        Ok(())
                    }
                },
            };
            if let Err(err) = outcome {
                warn!(%err, "conversion webhook: retrying");
                next_check = next_check.min(tokio::time::Instant::now() + RETRY_DELAY);
            }
        }
    }
}
