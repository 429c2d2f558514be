//! The hub's registration CSR loop (DESIGN §4.1): approves or denies the CSRs of spoke agents
//! through the `/approval` subresource, as [`decide_registration`] says.
//!
//! The loop watches CSRs labelled `open-cluster-management.io/cluster-name` and looks up what the
//! hub knows of the spoke each one names: whether a Spoke of that name is declared in
//! `fleetform-system`, whether its ManagedCluster is accepted, and the ids of the spoke's own
//! bootstrap tokens (`bootstrap.kubernetes.io/token` Secrets in `kube-system` labelled with the
//! cluster name; two while one replaces the other), and which agents the accept loop has bound
//! the cluster's RBAC to (the record on its namespace: a request is approved only once its agent
//! is bound). A CSR waiting for its spoke to be declared, accepted or bound stays pending and is
//! judged again when the Spoke, ManagedCluster or cluster namespace changes. Addon CSRs are the
//! [`super::signer_loop`]'s.

use std::sync::Arc;

use futures::TryStreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument};

use super::acceptance::{ANNOTATION_JOIN_USERS, JoinRecord};
use super::approval::{
    SpokeIdentity, Verdict, decide_registration, is_decided, registration_cluster,
};
use super::cache;
use super::metrics::CsrKind;
use super::run::{Context, FIELD_MANAGER, HubError};
use crate::api::ManagedCluster;
use crate::api::bootstrap_token::{
    BOOTSTRAP_TOKEN_ID_KEY, BOOTSTRAP_TOKEN_NAMESPACE, BOOTSTRAP_TOKEN_TYPE,
};
use crate::api::fleet::{Hub, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::LABEL_CLUSTER_NAME;
use crate::runtime::error::KubeError;

pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let errors = ctx.error_policy("CSR approval loop");
    let csrs: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    // The CSRs naming a cluster are judged again when what the hub knows of it changes.
    let by_cluster = cache::csrs_by_cluster();
    let observer = by_cluster.clone();
    let (store, writer) = reflector::store();
    let changes = watcher(csrs, watcher::Config::default().labels(LABEL_CLUSTER_NAME))
        .default_backoff()
        .modify(cache::csr_as_judged)
        .inspect_ok(move |event| observer.observe(event))
        .reflect(writer)
        .applied_objects();
    let (by_spoke, by_managed_cluster) = (by_cluster.clone(), by_cluster.clone());
    let controller = Controller::for_stream(changes, store)
        .watches(
            Api::<Spoke>::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE),
            watcher::Config::default(),
            move |spoke| by_spoke.refs(&spoke.name_any()),
        )
        .watches(
            Api::<ManagedCluster>::all(ctx.client.clone()),
            watcher::Config::default(),
            move |cluster| by_managed_cluster.refs(&cluster.name_any()),
        )
        // The accept loop records there whom it bound.
        .watches(
            Api::<Namespace>::all(ctx.client.clone()),
            watcher::Config::default().labels(LABEL_CLUSTER_NAME),
            move |namespace| by_cluster.refs(&namespace.name_any()),
        );
    errors.drive(controller, reconcile, ctx, shutdown).await;
}

#[instrument(skip(ctx, csr), fields(csr = csr.name_any()))]
async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    ctx: Arc<Context>,
) -> Result<Action, HubError> {
    // A decided CSR is judged again on every change of its cluster's Spoke and ManagedCluster:
    // nothing to read for it.
    let Some(cluster) = registration_cluster(&csr).filter(|_| !is_decided(&csr)) else {
        return Ok(Action::await_change());
    };
    let identity = spoke_identity(&ctx, cluster).await?;
    let decision = decide_registration(&csr, Some(&identity));
    let Some(condition) = decision.condition(Timestamp::now()) else {
        debug!(reason = decision.reason, "CSR left pending");
        return Ok(Action::await_change());
    };
    write_approval(&ctx, &csr, condition).await?;
    let approved = decision.verdict == Verdict::Approve;
    ctx.metrics.csr_decided(CsrKind::Registration, approved);
    if approved {
        info!(reason = decision.reason, "CSR approved");
    } else {
        info!(reason = decision.reason, "CSR denied");
    }
    Ok(Action::await_change())
}

/// What the hub knows of the spoke a CSR names.
async fn spoke_identity(ctx: &Context, cluster: &str) -> Result<SpokeIdentity, HubError> {
    let declared = Api::<Spoke>::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE)
        .get_opt(cluster)
        .await
        .map_err(KubeError::on(
            format!("Spoke {SYSTEM_NAMESPACE}/{cluster}"),
            "read",
        ))?
        .is_some();
    let managed_cluster = Api::<ManagedCluster>::all(ctx.client.clone())
        .get_opt(cluster)
        .await
        .map_err(KubeError::on(format!("ManagedCluster {cluster}"), "read"))?;
    let accepted = managed_cluster
        .as_ref()
        .is_some_and(ManagedCluster::hub_accepts_client);
    // Whom the accept loop has bound this join's RBAC to; nothing before the cluster is accepted.
    let bound_users = match managed_cluster.filter(|_| accepted) {
        None => Default::default(),
        Some(managed_cluster) => Api::<Namespace>::all(ctx.client.clone())
            .get_opt(cluster)
            .await
            .map_err(KubeError::on(format!("namespace {cluster}"), "read"))?
            .map(|namespace| {
                JoinRecord::of_join(
                    namespace
                        .annotations()
                        .get(ANNOTATION_JOIN_USERS)
                        .map(String::as_str),
                    &managed_cluster.uid().unwrap_or_default(),
                )
                .bound()
            })
            .unwrap_or_default(),
    };
    let tokens = Api::<Secret>::namespaced(ctx.client.clone(), BOOTSTRAP_TOKEN_NAMESPACE)
        .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}={cluster}")))
        .await
        .map_err(KubeError::on(
            format!("bootstrap tokens of cluster {cluster}"),
            "list",
        ))?;
    let mut bootstrap_token_ids: Vec<String> = tokens
        .items
        .iter()
        .filter(|secret| secret.type_.as_deref() == Some(BOOTSTRAP_TOKEN_TYPE))
        .filter_map(|secret| {
            let ByteString(id) = secret.data.as_ref()?.get(BOOTSTRAP_TOKEN_ID_KEY)?;
            String::from_utf8(id.clone()).ok()
        })
        .collect();
    bootstrap_token_ids.sort();
    // Only an undeclared, accepted cluster needs to know who may register it.
    let auto_approval_users = if declared || !accepted {
        Vec::new()
    } else {
        Api::<Hub>::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE)
            .list(&ListParams::default())
            .await
            .map_err(KubeError::on(format!("Hubs in {SYSTEM_NAMESPACE}"), "list"))?
            .items
            .into_iter()
            .filter_map(|hub| hub.spec.registration.auto_approval)
            .flat_map(|approval| approval.users)
            .collect()
    };
    Ok(SpokeIdentity {
        cluster: cluster.to_string(),
        declared,
        accepted,
        bootstrap_token_ids,
        auto_approval_users,
        bound_users,
    })
}

/// Writes `condition` (Approved or Denied) into `csr`'s approval subresource.
pub(super) async fn write_approval(
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
    Ok(Api::<CertificateSigningRequest>::all(ctx.client.clone())
        .replace_subresource::<CertificateSigningRequest>("approval", &name, &params, &decided)
        .await
        .map(|_| ())
        .map_err(KubeError::on(
            format!("CertificateSigningRequest {name}"),
            "write its approval",
        ))?)
}
