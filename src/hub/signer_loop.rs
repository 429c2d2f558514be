//! The hub's addon CSR loop (DESIGN §4.3, seed 001): approves or denies the CSRs of addon
//! registrations as [`decide_addon`] says, and signs those of custom signers with the CA their
//! AddOn document names, as [`decide_signing`] says.
//!
//! The loop watches CSRs labelled `open-cluster-management.io/addon-name`; what an addon may
//! register with comes from its AddOn document, carried on its ClusterManagementAddOn as the
//! `fleetform.io/addon-spec` annotation, and whether it is enabled on the cluster from its
//! ManagedClusterAddOn, read when the CSR is judged. A CSR of an addon the hub does not know (or
//! whose ClusterManagementAddOn is not fleetform's) stays pending and is judged again when the
//! ClusterManagementAddOn changes. A denial of the cluster's agent is explained on the
//! ManagedClusterAddOn, and denials of one registration are paced by a [`DenialPacer`]: a CSR to
//! deny too soon after the last waits its turn. Registration CSRs are the
//! [`super::approval_loop`]'s.

use std::sync::{Arc, Mutex};

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument, warn};

use super::approval::{
    AddOnRequestContext, DenialPacer, Enablement, Verdict, decide_addon, denial_condition,
    requested_by_cluster_agent,
};
use super::approval_loop::write_approval;
use super::cache;
use super::metrics::CsrKind;
use super::run::{Context, FIELD_MANAGER, HubError};
use super::signing::{
    MAX_CUSTOM_SIGNER_SECONDS, SIGNER_CA_CERT_KEY, SIGNER_CA_KEY_KEY, Signing, decide_signing,
};
use crate::api::ManagedClusterAddOn;
use crate::api::addon::ClusterManagementAddOn;
use crate::api::fleet::AddOnSpec;
use crate::api::vocabulary::{CSR_FAILED, LABEL_ADDON_NAME, LABEL_CLUSTER_NAME};
use crate::plan::desired::{ADDON_SPEC_ANNOTATION, carried_addon_spec};
use crate::runtime::conditions::set_conditions;
use crate::runtime::controller::refs_where;
use crate::runtime::error::KubeError;
use crate::runtime::watch::{Share, cached_or_read};
use fleetform_controlplane::auth::ca::CertificateAuthority;

/// The loop's context: the hub, its addons' documents, and the pace of its denials.
struct Signer {
    hub: Arc<Context>,
    documents: Store<ClusterManagementAddOn>,
    denials: Mutex<DenialPacer>,
}

pub(crate) async fn run(
    ctx: Arc<Context>,
    documents: cache::DocumentLoop,
    shutdown: CancellationToken,
) {
    let errors = ctx.error_policy("addon CSR loop");
    let csrs: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    let controller = cache::controller(
        csrs,
        watcher::Config::default().labels(LABEL_ADDON_NAME),
        cache::csr_as_signed,
    );
    let store = controller.store();
    let Share {
        store: documents,
        events,
    } = documents;
    let documents_changed = events.touched_objects();
    let signer = Arc::new(Signer {
        hub: ctx.clone(),
        documents,
        denials: Mutex::new(DenialPacer::default()),
    });
    let controller = controller.watches_stream(documents_changed, move |addon| {
        refs_where(&store, |csr| {
            label(csr, LABEL_ADDON_NAME) == Some(&*addon.name_any())
        })
    });
    errors.drive(controller, reconcile, signer, shutdown).await;
}

fn label<'a>(csr: &'a CertificateSigningRequest, key: &str) -> Option<&'a str> {
    csr.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

#[instrument(skip(signer, csr), fields(csr = csr.name_any()))]
async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    signer: Arc<Signer>,
) -> Result<Action, HubError> {
    let ctx = &signer.hub;
    let (Some(cluster), Some(addon)) = (
        label(&csr, LABEL_CLUSTER_NAME),
        label(&csr, LABEL_ADDON_NAME),
    ) else {
        return Ok(Action::await_change());
    };
    let Some(spec) = addon_spec(&ctx.client, &signer.documents, addon).await? else {
        debug!(
            addon,
            "no AddOn document for this addon; the CSR stays pending"
        );
        return Ok(Action::await_change());
    };
    let registrations = spec.registrations;
    let enablement = enablement(ctx, cluster, addon).await?;
    let decision = decide_addon(
        &csr,
        AddOnRequestContext {
            cluster,
            addon,
            registrations: &registrations,
            enablement,
        },
    );
    let now = Timestamp::now();
    if let Some(condition) = decision.condition(now) {
        let key = (
            cluster.to_string(),
            addon.to_string(),
            csr.spec.signer_name.clone(),
        );
        if decision.verdict == Verdict::Deny {
            let paced = lock(&signer.denials).try_deny(&key, now);
            if let Err(wait) = paced {
                debug!(
                    reason = decision.reason,
                    "addon CSR to deny; this registration was denied moments ago, so not before {wait:?}"
                );
                return Ok(Action::requeue(wait));
            }
        }
        write_approval(ctx, &csr, condition).await?;
        let approved = decision.verdict == Verdict::Approve;
        ctx.metrics.csr_decided(CsrKind::Addon, approved);
        if approved {
            lock(&signer.denials).approved(&key);
            info!(reason = decision.reason, "addon CSR approved");
        } else {
            info!(reason = decision.reason, "addon CSR denied");
            if enablement != Enablement::NotEnabled && requested_by_cluster_agent(&csr, cluster) {
                explain_denial(ctx, &csr, cluster, addon, &decision.reason, now).await;
            }
        }
        // The approval arrives as a new version of the CSR, which is then signed.
        return Ok(Action::await_change());
    }
    match decide_signing(&csr, &registrations) {
        Signing::Skip => {}
        Signing::Sign(secret_ref) => {
            let name = csr.name_any();
            match sign(ctx, &csr, &secret_ref).await? {
                Ok(certificate) => {
                    let mut signed = (*csr).clone();
                    signed
                        .status
                        .get_or_insert_with(Default::default)
                        .certificate = Some(ByteString(certificate.into_bytes()));
                    write_status(ctx, &name, &signed).await?;
                    info!(signer = csr.spec.signer_name, "addon CSR signed");
                }
                Err(message) => fail(ctx, &csr, message).await?,
            }
        }
        Signing::Fail(message) => fail(ctx, &csr, message).await?,
    }
    Ok(Action::await_change())
}

/// The pacer, whether or not a reconcile panicked while holding it (it holds no invariant a
/// panic could break).
fn lock(denials: &Mutex<DenialPacer>) -> std::sync::MutexGuard<'_, DenialPacer> {
    denials
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `addon` is enabled on `cluster`: its ManagedClusterAddOn in the cluster's namespace,
/// read now (a cache could still hold one just deleted).
async fn enablement(ctx: &Context, cluster: &str, addon: &str) -> Result<Enablement, HubError> {
    let found = Api::<ManagedClusterAddOn>::namespaced(ctx.client.clone(), cluster)
        .get_opt(addon)
        .await
        .map_err(KubeError::on(
            format!("ManagedClusterAddOn {cluster}/{addon}"),
            "read",
        ))?;
    Ok(match found {
        None => Enablement::NotEnabled,
        Some(found) if found.metadata.deletion_timestamp.is_some() => Enablement::BeingDeleted,
        Some(_) => Enablement::Enabled,
    })
}

/// Says on the ManagedClusterAddOn why its agent's CSR was denied. A failure to say it is logged:
/// the CSR carries the reason too.
async fn explain_denial(
    ctx: &Context,
    csr: &CertificateSigningRequest,
    cluster: &str,
    addon: &str,
    reason: &str,
    now: Timestamp,
) {
    let condition = denial_condition(&csr.name_any(), &csr.spec.signer_name, reason, now);
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
    if let Err(err) =
        set_conditions(&addons, addon, FIELD_MANAGER, |_| vec![condition.clone()]).await
    {
        warn!(%err, cluster, addon, "cannot say on the ManagedClusterAddOn why its CSR was denied");
    }
}

/// The AddOn document of `addon`, carried by its ClusterManagementAddOn (from `documents`, read
/// through `client` until its watch has listed); `None` if the hub has no such addon or its
/// ClusterManagementAddOn is not fleetform's (OCM's addon manager, or whoever wrote it, handles
/// that addon's registrations).
pub(crate) async fn addon_spec(
    client: &Client,
    documents: &Store<ClusterManagementAddOn>,
    addon: &str,
) -> Result<Option<AddOnSpec>, HubError> {
    let api = Api::<ClusterManagementAddOn>::all(client.clone());
    let Some(found) = cached_or_read(documents, &api, addon)
        .await
        .map_err(KubeError::on(
            format!("ClusterManagementAddOn {addon}"),
            "read",
        ))?
    else {
        return Ok(None);
    };
    match carried_addon_spec(&found) {
        None => Ok(None),
        Some(Ok(spec)) => Ok(Some(spec)),
        Some(Err(err)) => {
            warn!(
                addon,
                %err,
                "annotation {ADDON_SPEC_ANNOTATION} of ClusterManagementAddOn {addon} is not an AddOn spec; its registrations are left alone and its CSRs pending"
            );
            Ok(None)
        }
    }
}

/// Signs `csr` with the CA in `secret_ref`: the certificate PEM, or why it cannot be signed.
async fn sign(
    ctx: &Context,
    csr: &CertificateSigningRequest,
    secret_ref: &crate::api::fleet::SecretRef,
) -> Result<Result<String, String>, HubError> {
    let object = format!("Secret {}/{}", secret_ref.namespace, secret_ref.name);
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), &secret_ref.namespace)
        .get_opt(&secret_ref.name)
        .await
        .map_err(KubeError::on(&object, "read"))?;
    let Some(secret) = secret else {
        return Ok(Err(format!("signer CA {object} does not exist")));
    };
    let key = |name: &str| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(name))
            .and_then(|ByteString(bytes)| String::from_utf8(bytes.clone()).ok())
    };
    let (Some(cert_pem), Some(key_pem)) = (key(SIGNER_CA_CERT_KEY), key(SIGNER_CA_KEY_KEY)) else {
        return Ok(Err(format!(
            "signer CA {object} lacks {SIGNER_CA_CERT_KEY} or {SIGNER_CA_KEY_KEY}"
        )));
    };
    let ca =
        match CertificateAuthority::from_pem(&cert_pem, &key_pem, std::path::Path::new(&object)) {
            Ok(ca) => ca,
            Err(err) => return Ok(Err(err.to_string())),
        };
    let request = String::from_utf8_lossy(&csr.spec.request.0).into_owned();
    let expiration = csr.spec.expiration_seconds.map(i64::from);
    Ok(ca
        .sign_client_csr(
            &request,
            expiration,
            Some(MAX_CUSTOM_SIGNER_SECONDS),
            time::OffsetDateTime::now_utc(),
        )
        .map_err(|err| err.to_string()))
}

async fn fail(
    ctx: &Context,
    csr: &CertificateSigningRequest,
    message: String,
) -> Result<(), HubError> {
    warn!(
        csr = csr.name_any(),
        reason = message,
        "addon CSR not signed"
    );
    let now = Time(Timestamp::now());
    let mut failed = csr.clone();
    failed
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: CSR_FAILED.to_string(),
            status: "True".to_string(),
            reason: Some("SignerValidationFailure".to_string()),
            message: Some(message),
            last_update_time: Some(now.clone()),
            last_transition_time: Some(now),
        });
    write_status(ctx, &csr.name_any(), &failed).await
}

async fn write_status(
    ctx: &Context,
    name: &str,
    csr: &CertificateSigningRequest,
) -> Result<(), HubError> {
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    Ok(Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .replace_status(name, &params, csr)
        .await
        .map(|_| ())
        .map_err(KubeError::on(
            format!("CertificateSigningRequest {name}"),
            "write its status",
        ))?)
}
