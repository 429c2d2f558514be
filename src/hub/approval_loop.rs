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
//! judged again when the Spoke, ManagedCluster, cluster namespace or a bootstrap token of the
//! cluster changes. What it knows of them it reads from the caches of the watches that wake
//! it, never by a request per CSR change (several per joining spoke). Addon CSRs are the
//! [`super::signer_loop`]'s.

use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument};

use super::acceptance::{ANNOTATION_JOIN_USERS, JoinRecord};
use super::approval::{
    SpokeIdentity, Verdict, decide_registration, is_decided, registration_cluster,
};
use super::cache::{self, SpokeCache};
use super::metrics::CsrKind;
use super::run::{Context, FIELD_MANAGER, HubError};
use crate::api::ManagedCluster;
use crate::api::bootstrap_token::{
    BOOTSTRAP_TOKEN_ID_KEY, BOOTSTRAP_TOKEN_NAMESPACE, BOOTSTRAP_TOKEN_TYPE, token_cluster,
};
use crate::api::fleet::{Hub, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::LABEL_CLUSTER_NAME;
use crate::runtime::error::KubeError;
use crate::runtime::index::Index;
use crate::runtime::watch::cached_or_read;

/// What the approval loop reads what the hub knows of a spoke from: the caches of the watches
/// that wake it (each store takes an event before the event wakes the CSRs it concerns, so a
/// pass never reads a store older than what woke it), cut to what [`spoke_identity`] reads.
struct ApprovalContext {
    hub: Arc<Context>,
    /// The Spokes in `fleetform-system`, shared with the accept loop (see [`super::run`]).
    spokes: Store<Spoke>,
    clusters: Store<ManagedCluster>,
    /// The cluster namespaces (labelled with their cluster's name), with their join record.
    namespaces: Store<Namespace>,
    /// The bootstrap token Secrets of spokes (labelled with their cluster's name), and which
    /// are each cluster's.
    tokens: Store<Secret>,
    tokens_by_cluster: Index<Secret>,
    /// The Hubs (their auto-approval users), as the accept loop's watch of them keeps them.
    hubs: Store<Hub>,
}

pub(crate) async fn run(
    ctx: Arc<Context>,
    cluster_cache: cache::ClusterLoop,
    csr_cache: cache::CsrLoop,
    by_cluster: cache::CsrsByCluster,
    spokes: SpokeCache,
    identities: cache::IdentityCache,
    shutdown: CancellationToken,
) {
    let errors = ctx.error_policy("CSR approval loop");
    // The CSRs naming a cluster are judged again when what the hub knows of it changes.
    let store = csr_cache.store;
    let changes = csr_cache.events.applied_objects();
    let clusters = cluster_cache.store;
    let cluster_changes = cluster_cache.events.touched_objects();
    // The accept loop records in the cluster namespaces whom it bound.
    let cache::IdentityCache {
        namespaces,
        tokens,
        tokens_by_cluster,
        hubs,
    } = identities;
    let namespace_changes = namespaces.events.touched_objects();
    let token_changes = tokens.events.touched_objects();
    let (by_spoke, by_managed_cluster, by_namespace) =
        (by_cluster.clone(), by_cluster.clone(), by_cluster.clone());
    let controller = Controller::for_stream(changes, store)
        .watches_stream(spokes.changes, move |spoke| {
            by_spoke.refs(&spoke.name_any())
        })
        .watches_stream(cluster_changes, move |cluster| {
            by_managed_cluster.refs(&cluster.name_any())
        })
        .watches_stream(namespace_changes, move |namespace| {
            by_namespace.refs(&namespace.name_any())
        })
        .watches_stream(token_changes, move |token| {
            token_cluster(&token)
                .map(|cluster| by_cluster.refs(cluster))
                .unwrap_or_default()
        });
    let approval = Arc::new(ApprovalContext {
        hub: ctx,
        spokes: spokes.store,
        clusters,
        namespaces: namespaces.store,
        tokens: tokens.store,
        tokens_by_cluster,
        hubs,
    });
    errors
        .drive(controller, reconcile, approval, shutdown)
        .await;
}

#[instrument(skip(ctx, csr), fields(csr = csr.name_any()))]
async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    ctx: Arc<ApprovalContext>,
) -> Result<Action, HubError> {
    // A decided CSR is judged again on every change of its cluster's Spoke and ManagedCluster:
    // nothing to read for it.
    let Some(cluster) = registration_cluster(&csr).filter(|_| !is_decided(&csr)) else {
        return Ok(Action::await_change());
    };
    let (mut identity, tokens_cached) = spoke_identity(&ctx, cluster).await?;
    let mut decision = decide_registration(&csr, Some(&identity));
    if decision.verdict == Verdict::Deny && tokens_cached {
        // A denial is final, and the cache may not have a token made a moment ago: a request
        // is denied for its tokens only as a fresh list of them says.
        identity.bootstrap_token_ids = listed_token_ids(&ctx.hub, cluster).await?;
        decision = decide_registration(&csr, Some(&identity));
    }
    let Some(condition) = decision.condition(Timestamp::now()) else {
        debug!(reason = decision.reason, "CSR left pending");
        return Ok(Action::await_change());
    };
    write_approval(&ctx.hub, &csr, condition).await?;
    let approved = decision.verdict == Verdict::Approve;
    ctx.hub.metrics.csr_decided(CsrKind::Registration, approved);
    if approved {
        info!(reason = decision.reason, "CSR approved");
    } else {
        info!(reason = decision.reason, "CSR denied");
    }
    Ok(Action::await_change())
}

/// What the hub knows of the spoke a CSR names, and whether its tokens came from the cache:
/// from the loop's caches once they have listed, read afresh until then. A cache behind the
/// hub says "not yet" (not declared, not accepted, not bound: the CSR stays pending) until the
/// event that brings the change wakes the CSR again; only its tokens could say "deny", which
/// [`reconcile`] checks afresh.
async fn spoke_identity(
    ctx: &ApprovalContext,
    cluster: &str,
) -> Result<(SpokeIdentity, bool), HubError> {
    let client = &ctx.hub.client;
    let spokes = Api::<Spoke>::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let declared = cached_or_read(&ctx.spokes, &spokes, cluster)
        .await
        .map_err(KubeError::on(
            format!("Spoke {SYSTEM_NAMESPACE}/{cluster}"),
            "read",
        ))?
        .is_some();
    let clusters = Api::<ManagedCluster>::all(client.clone());
    let managed_cluster = cached_or_read(&ctx.clusters, &clusters, cluster)
        .await
        .map_err(KubeError::on(format!("ManagedCluster {cluster}"), "read"))?;
    let accepted = managed_cluster
        .as_ref()
        .is_some_and(ManagedCluster::hub_accepts_client);
    // Whom the accept loop has bound this join's RBAC to; nothing before the cluster is accepted.
    let bound_users = match managed_cluster.filter(|_| accepted) {
        None => Default::default(),
        Some(managed_cluster) => {
            let namespaces = Api::<Namespace>::all(client.clone());
            let namespace = cached_or_read(&ctx.namespaces, &namespaces, cluster)
                .await
                .map_err(KubeError::on(format!("namespace {cluster}"), "read"))?;
            namespace
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
                .unwrap_or_default()
        }
    };
    let cached_tokens = ctx.tokens_by_cluster.listed(&ctx.tokens, cluster);
    let tokens_cached = cached_tokens.is_some();
    let bootstrap_token_ids = match cached_tokens {
        Some(tokens) => token_ids(&tokens),
        None => listed_token_ids(&ctx.hub, cluster).await?,
    };
    // Only an undeclared, accepted cluster needs to know who may register it.
    let auto_approval_users = if declared || !accepted {
        Vec::new()
    } else {
        cache::auto_approval_users(&ctx.hubs, client).await?
    };
    Ok((
        SpokeIdentity {
            cluster: cluster.to_string(),
            declared,
            accepted,
            bootstrap_token_ids,
            auto_approval_users,
            bound_users,
        },
        tokens_cached,
    ))
}

/// The ids of the cluster's bootstrap tokens, listed afresh.
async fn listed_token_ids(ctx: &Context, cluster: &str) -> Result<Vec<String>, HubError> {
    let tokens = Api::<Secret>::namespaced(ctx.client.clone(), BOOTSTRAP_TOKEN_NAMESPACE)
        .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}={cluster}")))
        .await
        .map_err(KubeError::on(
            format!("bootstrap tokens of cluster {cluster}"),
            "list",
        ))?;
    Ok(token_ids(&tokens.items))
}

/// The ids of `tokens`, sorted: those of the bootstrap token type only.
fn token_ids(tokens: &[Secret]) -> Vec<String> {
    let mut ids: Vec<String> = tokens
        .iter()
        .filter(|secret| secret.type_.as_deref() == Some(BOOTSTRAP_TOKEN_TYPE))
        .filter_map(|secret| {
            let ByteString(id) = secret.data.as_ref()?.get(BOOTSTRAP_TOKEN_ID_KEY)?;
            String::from_utf8(id.clone()).ok()
        })
        .collect();
    ids.sort();
    ids
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
