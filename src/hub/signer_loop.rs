//! The hub's addon CSR loop (DESIGN §4.3, seed 001): approves or denies the CSRs of addon
//! registrations as [`decide_addon`] says, and signs those of custom signers with the CA their
//! AddOn document names, as [`decide_signing`] says.
//!
//! The loop watches CSRs labelled `open-cluster-management.io/addon-name`; what an addon may
//! register with comes from its AddOn document, carried on its ClusterManagementAddOn as the
//! `fleetform.io/addon-spec` annotation. A CSR of an addon the hub does not know stays pending and
//! is judged again when the ClusterManagementAddOn changes. Registration CSRs are the
//! [`super::approval_loop`]'s.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument, warn};

use super::approval::{AddOnRequestContext, Verdict, decide_addon};
use super::run::{Context, FIELD_MANAGER, HubError};
use super::signing::{CSR_FAILED, SIGNER_CA_CERT_KEY, SIGNER_CA_KEY_KEY, Signing, decide_signing};
use crate::api::addon::ClusterManagementAddOn;
use crate::api::fleet::{AddOnRegistration, AddOnSpec};
use crate::api::vocabulary::{LABEL_ADDON_NAME, LABEL_CLUSTER_NAME};
use crate::plan::desired::ADDON_SPEC_ANNOTATION;
use fleetform_controlplane::auth::ca::CertificateAuthority;

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let csrs: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    let controller = Controller::new(csrs, watcher::Config::default().labels(LABEL_ADDON_NAME));
    let store = controller.store();
    controller
        .watches(
            Api::<ClusterManagementAddOn>::all(ctx.client.clone()),
            watcher::Config::default(),
            move |addon| requests_of(&store, &addon.name_any()),
        )
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move { super::run::log_outcome(result, "addon CSR loop") })
        .await;
}

fn label<'a>(csr: &'a CertificateSigningRequest, key: &str) -> Option<&'a str> {
    csr.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The CSRs of `addon`, to judge again when its AddOn document changes.
fn requests_of(
    store: &Store<CertificateSigningRequest>,
    addon: &str,
) -> Vec<ObjectRef<CertificateSigningRequest>> {
    store
        .state()
        .iter()
        .filter(|csr| label(csr, LABEL_ADDON_NAME) == Some(addon))
        .map(|csr| ObjectRef::from_obj(csr.as_ref()))
        .collect()
}

fn error_policy(_: Arc<CertificateSigningRequest>, err: &HubError, _: Arc<Context>) -> Action {
    super::run::retry_after(err, "handling an addon CSR")
}

#[instrument(skip(ctx, csr), fields(csr = csr.name_any()))]
async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    ctx: Arc<Context>,
) -> Result<Action, HubError> {
    let (Some(cluster), Some(addon)) = (
        label(&csr, LABEL_CLUSTER_NAME),
        label(&csr, LABEL_ADDON_NAME),
    ) else {
        return Ok(Action::await_change());
    };
    let Some(registrations) = addon_registrations(&ctx, addon).await? else {
        debug!(
            addon,
            "no AddOn document for this addon; the CSR stays pending"
        );
        return Ok(Action::await_change());
    };
    let decision = decide_addon(
        &csr,
        AddOnRequestContext {
            cluster,
            addon,
            registrations: &registrations,
        },
    );
    if let Some(condition) = decision.condition(Timestamp::now()) {
        write_approval(&ctx, &csr, condition).await?;
        match decision.verdict {
            Verdict::Approve => info!(reason = decision.reason, "addon CSR approved"),
            _ => info!(reason = decision.reason, "addon CSR denied"),
        }
        // The approval arrives as a new version of the CSR, which is then signed.
        return Ok(Action::await_change());
    }
    match decide_signing(&csr, &registrations) {
        Signing::Skip => {}
        Signing::Sign(secret_ref) => {
            let name = csr.name_any();
            match sign(&ctx, &csr, &secret_ref).await? {
                Ok(certificate) => {
                    let mut signed = (*csr).clone();
                    signed
                        .status
                        .get_or_insert_with(Default::default)
                        .certificate = Some(ByteString(certificate.into_bytes()));
                    write_status(&ctx, &name, &signed).await?;
                    info!(signer = csr.spec.signer_name, "addon CSR signed");
                }
                Err(message) => fail(&ctx, &csr, message).await?,
            }
        }
        Signing::Fail(message) => fail(&ctx, &csr, message).await?,
    }
    Ok(Action::await_change())
}

/// The registrations of the AddOn document of `addon`; `None` if the hub has no such addon.
async fn addon_registrations(
    ctx: &Context,
    addon: &str,
) -> Result<Option<Vec<AddOnRegistration>>, HubError> {
    let Some(found) = Api::<ClusterManagementAddOn>::all(ctx.client.clone())
        .get_opt(addon)
        .await
        .map_err(HubError::kube(
            format!("ClusterManagementAddOn {addon}"),
            "read",
        ))?
    else {
        return Ok(None);
    };
    let Some(text) = found.annotations().get(ADDON_SPEC_ANNOTATION) else {
        return Ok(None);
    };
    match serde_json::from_str::<AddOnSpec>(text) {
        Ok(spec) => Ok(Some(spec.registrations)),
        Err(err) => {
            warn!(
                addon,
                %err,
                "annotation {ADDON_SPEC_ANNOTATION} of ClusterManagementAddOn {addon} is not an AddOn spec; its CSRs stay pending"
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
        .map_err(HubError::kube(&object, "read"))?;
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
        .sign_client_csr(&request, expiration, None, time::OffsetDateTime::now_utc())
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
    Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .replace_status(name, &params, csr)
        .await
        .map(|_| ())
        .map_err(HubError::kube(
            format!("CertificateSigningRequest {name}"),
            "write its status",
        ))
}

async fn write_approval(
    ctx: &Context,
    csr: &CertificateSigningRequest,
    condition: CertificateSigningRequestCondition,
) -> Result<(), HubError> {
    let name = csr.name_any();
    let mut decided = csr.clone();
    decided
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(condition);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .replace_subresource::<CertificateSigningRequest>("approval", &name, &params, &decided)
        .await
        .map(|_| ())
        .map_err(HubError::kube(
            format!("CertificateSigningRequest {name}"),
            "write its approval",
        ))
}
