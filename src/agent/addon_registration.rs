//! Addon registrations (DESIGN §4.3, seed 001): for every entry of a ManagedClusterAddOn's
//! `status.registrations`, a client certificate requested by the agent on the hub and kept in a
//! Secret of the addon's install namespace on the spoke, rotated before it expires and requested
//! again when the registration changes.
//!
//! The cluster's ManagedClusterAddOns are watched on the hub; each registration (addon and signer)
//! gets a task, replaced when its registration or install namespace changes and stopped when it
//! disappears. What a Secret holds and whether it still serves a registration is
//! [`super::addon_secret`]'s decision, the CSR is [`super::rotation`]'s; this module waits,
//! requests and writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector;
use kube::runtime::wait::await_condition;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::addon_secret::{AddonCertificate, stored_certificate};
use super::hub_identity::{CsrState, csr_state, hub_kubeconfig, may_request_addon_certificate};
use super::rotation::addon_registration_csr;
use super::run::{Context, FIELD_MANAGER, MAX_RETRY_DELAY, RETRY_DELAY};
use crate::api::ManagedClusterAddOn;
use crate::api::addon::RegistrationConfig;
use crate::api::vocabulary::{
    CONDITION_CERTIFICATE_ROTATED, LABEL_ADDON_NAME, LABEL_CLUSTER_NAME,
    REASON_CLIENT_CERTIFICATE_UPDATE_FAILED, REASON_CLIENT_CERTIFICATE_UPDATED,
    SIGNER_KUBE_APISERVER_CLIENT, STATUS_FALSE, STATUS_TRUE,
};
use crate::runtime::clock::sleep_until;
use crate::runtime::conditions::set_conditions;
use crate::runtime::retry::Retry;
use crate::runtime::task_set::TaskSet;
use crate::runtime::watch::backing_off;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// How long a registration waits before asking again after a refused CSR or a failed write; it
/// doubles with every failure in a row.
const REQUEST_AGAIN_DELAY: Duration = Duration::from_secs(5);
/// The longest wait between two requests of one registration.
const REQUEST_AGAIN_MAX: Duration = Duration::from_secs(300);

/// One registration of one addon: the addon, its install namespace and the registration.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Wanted {
    addon: String,
    namespace: String,
    registration: RegistrationConfig,
}

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    // Until the hub accepts the cluster, its agent may not read the cluster's addons there.
    if !ctx.accepted(&shutdown).await {
        return;
    }
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(ctx.hub.clone(), ctx.name());
    let (reader, writer) = reflector::store();
    let mut events = std::pin::pin!(
        backing_off(watcher(addons, watcher::Config::default()))
            .reflect(writer)
            .take_until(shutdown.cancelled())
    );
    let mut registrations = TaskSet::new("addon registration");
    let mut watching = Retry::new(
        "watching ManagedClusterAddOns for registrations",
        ctx.name(),
        RETRY_DELAY,
        MAX_RETRY_DELAY,
    );
    while let Some(event) = events.next().await {
        match event {
            Err(err) => {
                watching.failed(&err);
                continue;
            }
            Ok(watcher::Event::InitDone) => watching.succeeded(),
            // The store is complete once the listing is done.
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
            Ok(_) => {}
        }
        registrations
            .converge(wanted_registrations(&reader.state()), |_, wanted, stop| {
                keep_certificate(ctx.clone(), wanted.clone(), stop)
            })
            .await;
    }
    registrations.shutdown().await;
}

/// Every registration of these addons, by addon and signer.
fn wanted_registrations(addons: &[Arc<ManagedClusterAddOn>]) -> BTreeMap<(String, String), Wanted> {
    addons
        .iter()
        .flat_map(|addon| {
            let name = addon.name_any();
            let namespace = addon.install_namespace().to_string();
            addon.registrations().iter().map(move |registration| {
                (
                    (name.clone(), registration.signer_name.clone()),
                    Wanted {
                        addon: name.clone(),
                        namespace: namespace.clone(),
                        registration: registration.clone(),
                    },
                )
            })
        })
        .collect()
}

/// Keeps a valid certificate for one registration in its Secret until `stop`. A certificate is
/// requested only once its install namespace exists (a Secret cannot be stored before), and one
/// that was issued is written until it is stored, never requested again meanwhile: a missing
/// namespace or a failing write must not become a CSR every few seconds.
async fn keep_certificate(ctx: Arc<Context>, wanted: Wanted, stop: CancellationToken) {
    let secret_name = wanted.registration.secret_name(&wanted.addon);
    let secrets: Api<Secret> = Api::namespaced(ctx.spoke.clone(), &wanted.namespace);
    let mut backoff = Backoff::default();
    loop {
        let stored = match secrets.get_opt(&secret_name).await {
            Ok(secret) => secret.and_then(|secret| {
                stored_certificate(
                    &secret,
                    &wanted.registration,
                    ctx.name(),
                    &wanted.addon,
                    Timestamp::now(),
                )
            }),
            Err(err) => {
                warn!(%err, namespace = wanted.namespace, "reading Secret {secret_name}");
                None
            }
        };
        if let Some(lifetime) = stored {
            let deadline = lifetime.rotation_deadline(fastrand::f64());
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = sleep_until(deadline) => {}
            }
        }
        if !install_namespace_exists(&ctx, &wanted, &stop).await {
            return;
        }
        let renewed = tokio::select! {
            _ = stop.cancelled() => return,
            renewed = request(&ctx, &wanted) => renewed,
        };
        match renewed {
            Ok(secret) => {
                if !store(&ctx, &wanted, &secrets, secret, &stop).await {
                    return;
                }
                backoff = Backoff::default();
                continue;
            }
            Err(err) => warn!(
                cluster = ctx.name(),
                addon = wanted.addon,
                signer = wanted.registration.signer_name,
                "addon registration: {err}; asking again in {:?}",
                backoff.peek()
            ),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
}

/// Exponential delays between requests a hub refused: from [`REQUEST_AGAIN_DELAY`] doubling to
/// [`REQUEST_AGAIN_MAX`].
#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
}

impl Backoff {
    fn peek(&self) -> Duration {
        REQUEST_AGAIN_DELAY
            .saturating_mul(2u32.saturating_pow(self.failures.min(16)))
            .min(REQUEST_AGAIN_MAX)
    }

    fn next_delay(&mut self) -> Duration {
        let delay = self.peek();
        self.failures = self.failures.saturating_add(1);
        delay
    }
}

/// Waits until the registration's install namespace exists on the spoke (whoever deploys the
/// addon creates it); `false` when stopped first. Says so once, then looks again with backoff.
async fn install_namespace_exists(
    ctx: &Context,
    wanted: &Wanted,
    stop: &CancellationToken,
) -> bool {
    let namespaces: Api<Namespace> = Api::all(ctx.spoke.clone());
    let mut backoff = Backoff::default();
    loop {
        match namespaces.get_opt(&wanted.namespace).await {
            Ok(Some(_)) => return true,
            Ok(None) if backoff.failures == 0 => {
                let message = format!(
                    "install namespace {} does not exist on the spoke; the {} certificate is requested once it does (whoever deploys the addon creates it)",
                    wanted.namespace, wanted.registration.signer_name
                );
                info!(cluster = ctx.name(), addon = wanted.addon, "{message}");
                report(ctx, wanted, false, message).await;
            }
            Ok(None) => {}
            Err(err) => warn!(%err, "cannot read namespace {}", wanted.namespace),
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
}

/// Writes an issued certificate's Secret until it is stored; `false` when stopped first.
async fn store(
    ctx: &Context,
    wanted: &Wanted,
    secrets: &Api<Secret>,
    secret: Secret,
    stop: &CancellationToken,
) -> bool {
    let secret_name = wanted.registration.secret_name(&wanted.addon);
    let mut secret = serde_json::to_value(secret).unwrap_or_default();
    secret["apiVersion"] = "v1".into();
    secret["kind"] = "Secret".into();
    let mut backoff = Backoff::default();
    loop {
        match secrets
            .patch(
                &secret_name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&secret),
            )
            .await
        {
            Ok(_) => {
                let message = format!(
                    "the {} certificate is stored in Secret {}/{secret_name}",
                    wanted.registration.signer_name, wanted.namespace
                );
                info!(cluster = ctx.name(), addon = wanted.addon, "{message}");
                report(ctx, wanted, true, message).await;
                return true;
            }
            Err(err) => warn!(
                %err,
                "writing Secret {}/{secret_name}; trying again in {:?}",
                wanted.namespace,
                backoff.peek()
            ),
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
}

/// Says on the ManagedClusterAddOn, as OCM's agent does with `ClusterCertificateRotated`, whether
/// the registration's certificate was stored and, if not, why. A failure to say it is logged:
/// the certificate matters more than the report.
async fn report(ctx: &Context, wanted: &Wanted, stored: bool, message: String) {
    let (status, reason) = if stored {
        (STATUS_TRUE, REASON_CLIENT_CERTIFICATE_UPDATED)
    } else {
        (STATUS_FALSE, REASON_CLIENT_CERTIFICATE_UPDATE_FAILED)
    };
    let condition = Condition {
        type_: CONDITION_CERTIFICATE_ROTATED.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: None,
        last_transition_time: Time(Timestamp::now()),
    };
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(ctx.hub.clone(), ctx.name());
    if let Err(err) = set_conditions(&addons, &wanted.addon, FIELD_MANAGER, |_| {
        vec![condition.clone()]
    })
    .await
    {
        warn!(%err, addon = wanted.addon, "cannot report the addon's certificate");
    }
}

/// Requests a certificate for the registration and waits for it: the Secret to store.
async fn request(ctx: &Context, wanted: &Wanted) -> Result<Secret, String> {
    let cluster = ctx.name();
    let pending = addon_registration_csr(
        &wanted.registration,
        cluster,
        &wanted.addon,
        ctx.config.client_cert_expiration_seconds,
    )
    .map_err(|err| err.to_string())?;
    let csrs: Api<CertificateSigningRequest> = Api::all(ctx.hub.clone());
    let selector = format!(
        "{LABEL_CLUSTER_NAME}={cluster},{LABEL_ADDON_NAME}={}",
        wanted.addon
    );
    let earlier = csrs
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|err| format!("cannot list the addon's CSRs: {err}"))?;
    if !may_request_addon_certificate(&earlier.items, &wanted.registration.signer_name) {
        return Err(
            "a CSR of this registration is pending; no new one until the hub answers it".into(),
        );
    }
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let name = csrs
        .create(&params, &pending.csr)
        .await
        .map_err(|err| format!("cannot create a CSR: {err}"))?
        .name_any();
    let answered = await_condition(csrs, &name, |csr: Option<&CertificateSigningRequest>| {
        csr.is_some_and(|csr| !matches!(csr_state(csr), CsrState::Pending | CsrState::Approved))
    })
    .await
    .map_err(|err| format!("watching CSR {name}: {err}"))?;
    let certificate = match answered.as_ref().map(csr_state) {
        Some(CsrState::Issued(certificate)) => certificate,
        Some(CsrState::Refused(why)) => return Err(format!("CSR {name} refused: {why}")),
        _ => return Err(format!("CSR {name} is gone")),
    };
    let kubeconfig = if wanted.registration.signer_name == SIGNER_KUBE_APISERVER_CLIENT {
        match &ctx.hub_kubeconfig {
            Some(base) => Some(
                hub_kubeconfig(base, &certificate, &pending.private_key_pem)
                    .map_err(|err| err.to_string())?,
            ),
            None => {
                warn!(
                    addon = wanted.addon,
                    "the agent's hub client has no kubeconfig; the addon's Secret holds no kubeconfig"
                );
                None
            }
        }
    } else {
        None
    };
    Ok(AddonCertificate {
        cluster,
        addon: &wanted.addon,
        namespace: &wanted.namespace,
        registration: &wanted.registration,
        certificate_pem: &certificate,
        key_pem: &pending.private_key_pem,
        kubeconfig: kubeconfig.as_deref(),
    }
    .to_secret())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::addon::{ManagedClusterAddOnSpec, ManagedClusterAddOnStatus};

    fn addon(name: &str, namespace: Option<&str>, signers: &[&str]) -> Arc<ManagedClusterAddOn> {
        let mut addon = ManagedClusterAddOn::new(
            name,
            ManagedClusterAddOnSpec {
                install_namespace: namespace.map(str::to_string),
                ..Default::default()
            },
        );
        addon.status = Some(ManagedClusterAddOnStatus {
            registrations: signers
                .iter()
                .map(|signer| RegistrationConfig {
                    signer_name: signer.to_string(),
                    subject: None,
                })
                .collect(),
            ..Default::default()
        });
        Arc::new(addon)
    }

    #[test]
    fn every_registration_of_every_addon_is_wanted_once_in_its_install_namespace() {
        let wanted = wanted_registrations(&[
            addon(
                "a",
                Some("a-ns"),
                &[SIGNER_KUBE_APISERVER_CLIENT, "example.com/x"],
            ),
            addon("b", None, &[SIGNER_KUBE_APISERVER_CLIENT]),
            addon("c", Some("c-ns"), &[]),
        ]);
        let keys: Vec<(&str, &str)> = wanted
            .keys()
            .map(|(addon, signer)| (addon.as_str(), signer.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("a", "example.com/x"),
                ("a", SIGNER_KUBE_APISERVER_CLIENT),
                ("b", SIGNER_KUBE_APISERVER_CLIENT)
            ]
        );
        assert_eq!(
            wanted[&("a".into(), "example.com/x".into())].namespace,
            "a-ns"
        );
        assert_eq!(
            wanted[&("b".into(), SIGNER_KUBE_APISERVER_CLIENT.into())].namespace,
            crate::api::vocabulary::DEFAULT_ADDON_INSTALL_NAMESPACE
        );
    }
}
