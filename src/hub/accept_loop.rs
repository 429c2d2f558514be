//! The hub's accept loop (DESIGN §4.1): what `hubAcceptsClient` means on the hub.
//!
//! For each ManagedCluster it gathers what [`super::acceptance`] decides on — whether a Spoke
//! declares it, whether the hub accepted it before, whether a Hub's auto-approval lists the
//! requester of one of its registration CSRs, whether the hub checks who may set
//! `hubAcceptsClient` — and does what that says. Accepting creates the
//! cluster namespace, the RBAC that lets the cluster's agent touch only its own ManagedCluster
//! and status, its lease, its addons' status, CSRs and Events (and, on a fleetform hub, read its
//! Spoke and Hub), bound to the users of this join's certificates and of its requests still
//! pending (kept on the namespace, written once bound: see [`super::acceptance`]), the
//! `managed-cluster-lease` (renewed now, so a new cluster gets five durations to report), and
//! then sets HubAcceptedManagedCluster True. CSRs are watched, so a newly approved certificate is
//! bound as soon as it is issued. When `hubAcceptsClient` is false, or was true and is no longer,
//! the RBAC is removed and the condition set False. The namespace is kept: it holds the
//! cluster's addons and history, and removing it is the unjoin's job (seed 004). A cluster that
//! asks to join and is not in git gets nothing, and one Normal Event saying so; one a person
//! allowed to accept accepted is accepted, with one Warning Event saying it is not in git.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument};

use super::acceptance::{
    ANNOTATION_AUTOMATICALLY_ACCEPTED_ON, ANNOTATION_JOIN_USERS, AcceptCheck, Acceptance, Facts,
    JoinRecord, OCM_MANAGED_CLUSTER_VALIDATOR, REASON_NOT_IN_GIT, decide, join_users,
    requested_by_one_of, webhook_checks_accept,
};
use super::approval::registration_cluster;
use super::cache;
use super::lease::clock_synced_condition;
use super::run::{Context, FIELD_MANAGER, HubError};
use crate::api::ManagedCluster;
use crate::api::fleet::{Hub, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::{
    CLUSTER_LEASE_NAME, CONDITION_CLOCK_SYNCED, CONDITION_HUB_ACCEPTED, LABEL_CLUSTER_NAME,
    MANAGED_BY, MANAGED_BY_LABEL, REASON_HUB_CLUSTER_ADMIN_ACCEPTED,
    REASON_HUB_CLUSTER_ADMIN_DENIED, REGISTRATION_CLUSTER_ROLE, STATUS_FALSE, STATUS_TRUE,
};
use crate::events::{self, EventType, Reporter};
use crate::reconciler::install::{agent_hub_role_binding, agent_hub_role_name};
use crate::runtime::conditions::set_conditions_once_from;
use crate::runtime::controller::refs_where;
use crate::runtime::error::{Category, KubeError, is_conflict, is_forbidden, is_not_found};
use crate::runtime::watch::Share;

/// What the accept loop keeps besides the hub loops' context.
struct AcceptContext {
    hub: Arc<Context>,
    /// The hub's CSRs that name a cluster, as the watch last saw them.
    csrs: Store<CertificateSigningRequest>,
    /// Those CSRs by the cluster they name.
    csrs_by_cluster: cache::CsrsByCluster,
    /// The hub loops' cache of Spokes ([`cache::SpokeCache`]), where fleetform's CRDs are
    /// installed.
    spokes: Option<Store<Spoke>>,
    /// The Hubs, as the watch that wakes this loop on them keeps them, where fleetform's CRDs
    /// are installed.
    hubs: Option<Store<Hub>>,
    events: Reporter,
    /// Clusters (by uid, whether `hubAcceptsClient` was set, and why) already reported as not
    /// in git, so each is reported once: when it asks, if someone sets `hubAcceptsClient`, and
    /// when a person accepts it.
    reported: Mutex<HashSet<(String, bool, NotInGit)>>,
    /// When this process last applied [`REGISTRATION_CLUSTER_ROLE`]: before the first
    /// RoleBinding refers to it, and again once [`REWRITE_AFTER`] has passed (putting back
    /// what was changed or deleted by hand, as each cluster's RBAC is).
    registration_role: tokio::sync::Mutex<Option<Instant>>,
    /// What an acceptance last wrote for each cluster and when: a change of what the loop
    /// judges of a ManagedCluster ([`judged`]) or of its CSRs wakes the loop, and writing its
    /// namespace and RBAC again each time cost a joining fleet seven server-side applies per
    /// wake-up.
    written: Mutex<HashMap<String, Written>>,
}

/// What an acceptance wrote for a cluster.
struct Written {
    /// A digest of its join: the cluster's uid, its users, its owner.
    join: u64,
    /// The cluster's uid.
    uid: String,
    /// The record of this join's users its namespace holds since (its join-users annotation):
    /// only this loop writes it, so until [`REWRITE_AFTER`] it is not read again on each
    /// wake-up (a request per change of a joining cluster).
    record: Option<String>,
    at: Instant,
}

/// How long an acceptance already written is not written again for the same join; past it, the
/// next wake-up writes it again (putting right what was changed by hand meanwhile).
const REWRITE_AFTER: Duration = Duration::from_secs(600);

/// What the loop reads of fleetform's own objects, where their CRDs are installed.
pub(crate) struct Fleet {
    /// The hub loops' cache of Spokes ([`cache::SpokeCache`]).
    pub spokes: Store<Spoke>,
    /// The loop's share of a watch of the Hubs.
    pub hubs: Share<Hub>,
}

/// Runs the loop; `fleet` is there where fleetform's CRDs (Hub, Spoke) are installed.
pub(crate) async fn run(
    ctx: Arc<Context>,
    cluster_cache: cache::ClusterLoop,
    csr_cache: cache::CsrLoop,
    csrs_by_cluster: cache::CsrsByCluster,
    fleet: Option<Fleet>,
    shutdown: CancellationToken,
) {
    let errors = ctx.error_policy("accept loop");
    let client = ctx.client.clone();
    let csrs = csr_cache.store;
    let csr_changes = csr_cache.events.touched_objects();
    // Woken by what it judges of a cluster, not by each of its changes: a new lease duration, a
    // taint or an agent's condition decides nothing here, and each such wake-up past
    // REWRITE_AFTER wrote the join again (8 writes a spoke in a 10,000-spoke lease change).
    let clusters = cluster_cache.store;
    let controller = Controller::for_stream(
        cluster_cache
            .events
            .applied_objects()
            .predicate_filter(judged, Default::default()),
        clusters.clone(),
    );
    let mut controller = controller.watches_stream(csr_changes, |csr| {
        registration_cluster(&csr).map(ObjectRef::new)
    });
    let (spokes, hubs) = match fleet {
        Some(Fleet { spokes, hubs }) => {
            // A Hub's auto-approval users may now allow clusters that asked earlier.
            let changes = hubs
                .events
                .applied_objects()
                .predicate_filter(predicates::generation, Default::default());
            controller =
                controller.watches_stream(changes, move |_| refs_where(&clusters, |_| true));
            (Some(spokes), Some(hubs.store))
        }
        None => (None, None),
    };
    let accept_ctx = Arc::new(AcceptContext {
        hub: ctx,
        csrs,
        csrs_by_cluster,
        spokes,
        hubs,
        events: Reporter::new(client, FIELD_MANAGER, "accept-loop"),
        reported: Mutex::default(),
        registration_role: tokio::sync::Mutex::new(None),
        written: Mutex::default(),
    });
    let events = accept_ctx.events.clone();
    errors
        .drive(controller, reconcile, accept_ctx, shutdown)
        .await;
    events.flush_at_stop().await;
}

/// What the loop judges of a ManagedCluster: which it is and whose, its labels and annotations
/// (the reconciler's marks on a cluster whose Spoke was declared after it asked, the
/// auto-acceptance), whether it is being deleted, `hubAcceptsClient` and HubAccepted.
fn judged(cluster: &ManagedCluster) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let meta = &cluster.metadata;
    meta.uid.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.deletion_timestamp.is_some().hash(&mut hasher);
    for owner in meta.owner_references.iter().flatten() {
        (&owner.uid, owner.controller).hash(&mut hasher);
    }
    cluster.spec.hub_accepts_client.hash(&mut hasher);
    crate::api::is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED).hash(&mut hasher);
    cluster
        .condition(CONDITION_CLOCK_SYNCED)
        .is_some()
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// How soon a condition a newer write overtook is written again, from the store's copy by then.
const OVERTAKEN_RETRY: Duration = Duration::from_secs(1);

/// Name of the ClusterRole and ClusterRoleBinding of a cluster's agent.
pub fn cluster_role_name(cluster: &str) -> String {
    format!("open-cluster-management:managedcluster:{cluster}")
}

/// Name of the RoleBinding of a cluster's agent in its namespace (and of the Role it was bound
/// to before [`REGISTRATION_CLUSTER_ROLE`]).
pub fn registration_role_name(cluster: &str) -> String {
    format!("open-cluster-management:managedcluster:{cluster}:registration")
}

#[instrument(skip(ctx, cluster), fields(cluster = cluster.name_any()))]
async fn reconcile(
    cluster: Arc<ManagedCluster>,
    ctx: Arc<AcceptContext>,
) -> Result<Action, HubError> {
    let name = cluster.name_any();
    let accepted_before =
        crate::api::is_condition_true(cluster.conditions(), CONDITION_HUB_ACCEPTED);
    let mut facts = Facts {
        hub_accepts_client: cluster.spec.hub_accepts_client,
        accepted_before,
        auto_accepted_before: cluster
            .annotations()
            .contains_key(ANNOTATION_AUTOMATICALLY_ACCEPTED_ON),
        ..Facts::default()
    };
    // An accepted cluster stays accepted whatever else holds: nothing more to read.
    if !(cluster.hub_accepts_client() && accepted_before) {
        facts.declared = declared(&ctx, &name).await?;
        if !facts.declared && !accepted_before {
            facts.auto_approved = auto_approved(&ctx, &name).await?;
        }
        if cluster.hub_accepts_client() && !facts.declared && !facts.auto_approved {
            facts.accept_checked = accept_checked(&ctx.hub).await?;
        }
    }
    // A condition written from a copy another write has overtaken is not written: the loop
    // judges the cluster again shortly, from the store's copy by then (the overtaking write may
    // change nothing it is woken by).
    let overtaken = Ok(Action::requeue(OVERTAKEN_RETRY));
    match decide(&facts) {
        Acceptance::Accept => {
            accept(&ctx, &cluster).await?;
            if !accepted_before {
                if !set_accepted(&ctx.hub, &cluster, true).await? {
                    return overtaken;
                }
                info!("cluster accepted");
            }
        }
        Acceptance::AcceptNotInGit => {
            accept(&ctx, &cluster).await?;
            if !set_accepted(&ctx.hub, &cluster, true).await? {
                return overtaken;
            }
            info!("cluster accepted by a person allowed to, though not in git");
            report_not_in_git(&ctx, &cluster, NotInGit::Accepted).await;
        }
        Acceptance::AutoAccept => auto_accept(&ctx.hub, &cluster).await?,
        Acceptance::Revoke => {
            ctx.written().remove(&name);
            revoke(&ctx, &name).await?;
            if !set_accepted(&ctx.hub, &cluster, false).await? {
                return overtaken;
            }
            if accepted_before {
                info!("cluster no longer accepted; its agent's RBAC is removed");
            }
        }
        Acceptance::NotInGit => report_not_in_git(&ctx, &cluster, NotInGit::Refused).await,
        Acceptance::Wait => {}
    }
    Ok(Action::await_change())
}

/// Whether a Spoke declares the cluster `name`: yes when the Spokes' cache holds it; otherwise
/// (not in it, or not listed yet) as the hub says, since the cache may not have a Spoke just
/// declared, and a "no" can refuse the cluster or accept it as not in git. This loop is not
/// woken by Spokes: the reconciler's writes to the ManagedCluster of a Spoke declared later do.
async fn declared(ctx: &AcceptContext, name: &str) -> Result<bool, HubError> {
    if !ctx.fleet_crds() {
        return Ok(false);
    }
    if let Some(spokes) = &ctx.spokes
        && spokes
            .get(&ObjectRef::new(name).within(SYSTEM_NAMESPACE))
            .is_some()
    {
        return Ok(true);
    }
    Ok(
        Api::<Spoke>::namespaced(ctx.hub.client.clone(), SYSTEM_NAMESPACE)
            .get_opt(name)
            .await
            .map(|spoke| spoke.is_some())
            .map_err(KubeError::on(
                format!("Spoke {SYSTEM_NAMESPACE}/{name}"),
                "read",
            ))?,
    )
}

/// Whether a user a Hub's `registration.autoApproval.users` lists requested a registration CSR
/// of the cluster `name`.
async fn auto_approved(ctx: &AcceptContext, name: &str) -> Result<bool, HubError> {
    let Some(hubs) = &ctx.hubs else {
        return Ok(false);
    };
    let users = cache::auto_approval_users(hubs, &ctx.hub.client).await?;
    Ok(!users.is_empty()
        && ctx
            .csrs_by_cluster
            .of(&ctx.csrs, name)
            .iter()
            .any(|csr| requested_by_one_of(csr, name, &users)))
}

/// Accepts the cluster as OCM's auto-approval does: `hubAcceptsClient` and the annotation that
/// it was done once, so a later denial is not undone.
async fn auto_accept(ctx: &Context, cluster: &ManagedCluster) -> Result<(), HubError> {
    let name = cluster.name_any();
    let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let patch = json!({
        "metadata": {
            "resourceVersion": cluster.resource_version(),
            "annotations": {ANNOTATION_AUTOMATICALLY_ACCEPTED_ON: now},
        },
        "spec": {"hubAcceptsClient": true},
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    Api::<ManagedCluster>::all(ctx.client.clone())
        .patch(&name, &params, &Patch::Merge(&patch))
        .await
        .map_err(KubeError::on(
            format!("ManagedCluster {name}"),
            "auto-accept",
        ))?;
    info!("cluster auto-approved: a Hub's registration.autoApproval lists its requester");
    Ok(())
}

/// Whether the hub's API server lets only a user allowed to `update managedclusters/accept` set
/// `hubAcceptsClient` (see [`AcceptCheck`]).
async fn accept_checked(ctx: &Context) -> Result<bool, HubError> {
    if ctx.accept_check == AcceptCheck::InProcess {
        return Ok(true);
    }
    let read = Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone())
        .get_opt(OCM_MANAGED_CLUSTER_VALIDATOR)
        .await;
    match read {
        Ok(config) => Ok(config.as_ref().is_some_and(webhook_checks_accept)),
        // Not served, or not readable: nothing known checks it.
        Err(err) if is_not_found(&err) || is_forbidden(&err) => Ok(false),
        Err(err) => Err(KubeError::on(
            format!("ValidatingWebhookConfiguration {OCM_MANAGED_CLUSTER_VALIDATOR}"),
            "read",
        )(err)
        .into()),
    }
}

/// Why a cluster not in git is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum NotInGit {
    /// It asked to join, or someone set `hubAcceptsClient` where nothing checks who did: it
    /// stays un-accepted.
    Refused,
    /// A person allowed to accept it did: it is accepted, and fleetform leaves it as it is.
    Accepted,
}

/// One Event per cluster (and per process) saying it is not in git: a Normal one while it stays
/// un-accepted (one more if someone sets `hubAcceptsClient` where nothing checks who did), a
/// Warning once a person accepted it.
async fn report_not_in_git(ctx: &AcceptContext, cluster: &ManagedCluster, why: NotInGit) {
    let set_anyway = cluster.hub_accepts_client();
    let first = ctx
        .reported
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert((cluster.uid().unwrap_or_default(), set_anyway, why));
    if !first {
        return;
    }
    let name = cluster.name_any();
    let (kind, note) = match why {
        NotInGit::Accepted => (
            EventType::Warning,
            format!(
                "cluster {name} is not in git: a user allowed to update managedclusters/accept accepted it (hubAcceptsClient), so it joins as OCM's hub lets it; fleetform keeps it joined and never prunes it, and its lifecycle is that user's (declare a Spoke {name} to manage it from git, or set hubAcceptsClient: false to deny it)"
            ),
        ),
        NotInGit::Refused if set_anyway => {
            info!(
                "hubAcceptsClient is set, but the cluster is not in git and nothing on this hub checks who set it; it stays un-accepted"
            );
            (
                EventType::Normal,
                format!(
                    "cluster {name} has hubAcceptsClient set, but is not in git, and this hub has no admission that checks who may accept (OCM's registration webhook): it is not accepted until a Spoke declares it (or a Hub's registration.autoApproval lists its requester)"
                ),
            )
        }
        NotInGit::Refused => {
            info!("cluster asked to join, not in git; it stays un-accepted");
            (
                EventType::Normal,
                format!(
                    "cluster {name} asked to join, not in git: it stays un-accepted until a Spoke declares it, a Hub's registration.autoApproval lists its requester, or a user allowed to update managedclusters/accept sets hubAcceptsClient (clusteradm accept)"
                ),
            )
        }
    };
    ctx.events
        .publish(
            &events::reference(cluster),
            kind,
            REASON_NOT_IN_GIT,
            "Accept",
            note,
        )
        .await;
}

async fn accept(ctx: &AcceptContext, managed_cluster: &ManagedCluster) -> Result<(), HubError> {
    let client = &ctx.hub.client;
    let cluster = managed_cluster.name_any();
    let cluster = cluster.as_str();
    let uid = managed_cluster.uid().unwrap_or_default();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let remembered = ctx
        .written()
        .get(cluster)
        .filter(|written| written.uid == uid && written.at.elapsed() < REWRITE_AFTER)
        .map(|written| written.record.clone());
    // The lease, once made for this join, is the agent's to renew.
    let lease_made = remembered.is_some();
    let written_record = match remembered {
        Some(record) => record,
        None => namespaces
            .get_opt(cluster)
            .await
            .map_err(KubeError::on(format!("namespace {cluster}"), "read"))?
            .and_then(|namespace| namespace.annotations().get(ANNOTATION_JOIN_USERS).cloned()),
    };
    let recorded = JoinRecord::of_join(written_record.as_deref(), &uid);
    let since = managed_cluster
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |created| created.0);
    let csrs = ctx.csrs_by_cluster.of(&ctx.csrs, cluster);
    let mut record = join_users(
        (cluster, &uid),
        since,
        csrs.iter().map(|csr| &**csr),
        recorded.users,
    );
    record.users.retain(|user| !recorded.earlier.contains(user));
    record
        .pending
        .retain(|user| !recorded.earlier.contains(user));
    record.earlier = recorded.earlier;
    let users = record.bound();
    let owner = managed_cluster
        .controller_owner_ref(&())
        .map(|owner| json!([owner]));
    let join = {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (&uid, &users, owner.as_ref().map(Value::to_string)).hash(&mut hasher);
        hasher.finish()
    };
    if ctx
        .written()
        .get(cluster)
        .is_some_and(|written| written.join == join && written.at.elapsed() < REWRITE_AFTER)
    {
        return Ok(());
    }
    // The namespace first, with the record it has, for the RBAC that lives in it; the record of
    // this join's users last, once they are bound: the approval loop approves a new agent's
    // certificate only when the record names it.
    let cluster_namespace = |record: Option<&str>| {
        let mut namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": cluster,
            "labels": { LABEL_CLUSTER_NAME: cluster },
        }});
        if let Some(record) = record {
            namespace["metadata"]["annotations"] = json!({ ANNOTATION_JOIN_USERS: record });
        }
        namespace
    };
    apply::<Namespace>(
        &namespaces,
        cluster,
        cluster_namespace(written_record.as_deref()),
    )
    .await?;
    let cluster_roles = Api::<ClusterRole>::all(client.clone());
    {
        let mut applied = ctx.registration_role.lock().await;
        if applied.is_none_or(|at| at.elapsed() >= REWRITE_AFTER) {
            let role = registration_cluster_role();
            apply(&cluster_roles, REGISTRATION_CLUSTER_ROLE, role).await?;
            *applied = Some(Instant::now());
        }
    }
    let objects = rbac(cluster, &users);
    for (name, mut object) in objects {
        if let Some(owner) = &owner {
            object["metadata"]["ownerReferences"] = owner.clone();
        }
        match object["kind"].as_str() {
            Some("ClusterRole") => apply(&cluster_roles, &name, object).await?,
            Some("ClusterRoleBinding") => {
                apply::<ClusterRoleBinding>(&Api::all(client.clone()), &name, object).await?
            }
            _ => bind_registration_role(client, cluster, &name, object).await?,
        }
    }
    if ctx.fleet_crds() {
        bind_spoke_role(ctx, cluster, &users, owner).await?;
    }
    let annotation = record.to_annotation();
    if written_record.as_deref() != Some(annotation.as_str()) {
        apply::<Namespace>(&namespaces, cluster, cluster_namespace(Some(&annotation))).await?;
    }
    if !lease_made {
        ensure_lease(&ctx.hub, cluster).await?;
    }
    ctx.written().insert(
        cluster.to_string(),
        Written {
            join,
            uid,
            record: Some(annotation),
            at: Instant::now(),
        },
    );
    Ok(())
}

impl AcceptContext {
    /// fleetform's CRDs (Hub, Spoke) are installed: clusters can be declared, and agents get
    /// their Spoke's RBAC in `fleetform-system`.
    fn fleet_crds(&self) -> bool {
        self.spokes.is_some()
    }

    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<String, Written>> {
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Applies the RoleBinding of the cluster's agent in its namespace. One bound to the cluster's
/// own Role, as hubs before [`REGISTRATION_CLUSTER_ROLE`] made it, cannot be changed to bind
/// another (its `roleRef` is immutable: 422 Invalid): it is replaced, and that Role, this
/// loop's, deleted.
async fn bind_registration_role(
    client: &kube::Client,
    cluster: &str,
    name: &str,
    binding: Value,
) -> Result<(), HubError> {
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), cluster);
    let refused = match apply(&bindings, name, binding.clone()).await {
        Err(HubError::Kube(err)) if err.category() == Category::Invalid => HubError::Kube(err),
        result => return result,
    };
    let failed = |action| KubeError::on(format!("RoleBinding {cluster}/{name}"), action);
    let bound_before = bindings.get_opt(name).await.map_err(failed("read"))?;
    if bound_before.is_none_or(|before| before.role_ref.kind != "Role") {
        return Err(refused);
    }
    info!("the agent's RoleBinding bound the cluster's own Role; binding the hub-wide one");
    let gone = |result: kube::Result<_>| match result {
        Err(err) if !is_not_found(&err) => Err(failed("replace")(err)),
        _ => Ok(()),
    };
    gone(
        bindings
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
    )?;
    apply(&bindings, name, binding).await?;
    gone(
        Api::<Role>::namespaced(client.clone(), cluster)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
    )?;
    Ok(())
}

/// [`REGISTRATION_CLUSTER_ROLE`]: what an accepted cluster's agent may do in its cluster
/// namespace, where its RoleBinding grants it.
fn registration_cluster_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {
            "name": REGISTRATION_CLUSTER_ROLE,
            "labels": { MANAGED_BY_LABEL: MANAGED_BY },
        },
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": [CLUSTER_LEASE_NAME], "verbs": ["get", "update", "patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["addon.open-cluster-management.io"], "resources": ["managedclusteraddons"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["addon.open-cluster-management.io"], "resources": ["managedclusteraddons/status"],
             "verbs": ["get", "update", "patch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
             "verbs": ["create", "update", "patch"]},
        ],
    })
}

/// Binds the Role in `fleetform-system` that lets the cluster's agent read its Spoke and Hub
/// (the reconciler's, see [`agent_hub_role_binding`]) to this join's users. A hub without that
/// namespace declares no Spoke: nothing to bind.
async fn bind_spoke_role(
    ctx: &AcceptContext,
    cluster: &str,
    users: &BTreeSet<String>,
    owner: Option<Value>,
) -> Result<(), HubError> {
    let name = agent_hub_role_name(cluster);
    let mut binding =
        serde_json::to_value(agent_hub_role_binding(cluster, users)).map_err(|source| {
            HubError::Build {
                object: format!("RoleBinding {name}"),
                source,
            }
        })?;
    binding["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    binding["kind"] = json!("RoleBinding");
    if let Some(owner) = owner {
        binding["metadata"]["ownerReferences"] = owner;
    }
    let bindings = Api::<RoleBinding>::namespaced(ctx.hub.client.clone(), SYSTEM_NAMESPACE);
    match apply(&bindings, &name, binding).await {
        Err(HubError::Kube(err)) if is_not_found(&err.source) => Ok(()),
        result => result,
    }
}

/// The RBAC of a cluster's agent, by name: a ClusterRole and binding for its own ManagedCluster
/// and CSRs, and a binding in its namespace of [`REGISTRATION_CLUSTER_ROLE`] for its lease,
/// addons and Events, all bound to `users` (this join's certificates). The loop makes the
/// ManagedCluster their owner, so deleting the cluster deletes them.
fn rbac(cluster: &str, users: &BTreeSet<String>) -> Vec<(String, Value)> {
    let cluster_role = cluster_role_name(cluster);
    let role = registration_role_name(cluster);
    let labels = json!({ LABEL_CLUSTER_NAME: cluster });
    let subjects: Vec<Value> = users
        .iter()
        .map(|user| json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}))
        .collect();
    vec![
        (
            cluster_role.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": cluster_role, "labels": labels},
                "rules": [
                    {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"],
                     "resourceNames": [cluster], "verbs": ["get", "list", "watch", "update", "patch"]},
                    {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters/status"],
                     "resourceNames": [cluster], "verbs": ["get", "update", "patch"]},
                    {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                     "verbs": ["create", "get", "list", "watch"]},
                ],
            }),
        ),
        (
            cluster_role.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": cluster_role, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
                "subjects": subjects,
            }),
        ),
        (
            role.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": role, "namespace": cluster, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": REGISTRATION_CLUSTER_ROLE},
                "subjects": subjects,
            }),
        ),
    ]
}

async fn apply<K>(api: &Api<K>, name: &str, object: Value) -> Result<(), HubError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let kind = object["kind"].as_str().unwrap_or("object").to_string();
    Ok(api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .map(|_| ())
        .map_err(KubeError::on(format!("{kind} {name}"), "apply"))?)
}

/// Creates the cluster's lease, renewed now, unless it exists: the create's 409 Conflict says
/// it does (a new cluster has none, so reading it first was a request more per join).
async fn ensure_lease(ctx: &Context, cluster: &str) -> Result<(), HubError> {
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), cluster);
    let object = format!("Lease {cluster}/{CLUSTER_LEASE_NAME}");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {
            "name": CLUSTER_LEASE_NAME,
            "namespace": cluster,
            "labels": {LABEL_CLUSTER_NAME: cluster},
        },
        "spec": {"renewTime": MicroTime(Timestamp::now())},
    }))
    .map_err(|source| HubError::Build {
        object: object.clone(),
        source,
    })?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    match leases.create(&params, &lease).await {
        Ok(_) => Ok(()),
        Err(err) if is_conflict(&err) => Ok(()),
        Err(err) => Err(KubeError::on(object, "create")(err).into()),
    }
}

/// Deletes the RBAC of a cluster's agent (and the Role of its own that hubs before
/// [`REGISTRATION_CLUSTER_ROLE`] made); what is already gone is fine. The namespace and its
/// record of this join's users stay: accepted again, the same agent is bound again.
async fn revoke(ctx: &AcceptContext, cluster: &str) -> Result<(), HubError> {
    let client = &ctx.hub.client;
    let params = DeleteParams::default();
    let cluster_role = cluster_role_name(cluster);
    let role = registration_role_name(cluster);
    let mut results = vec![
        Api::<ClusterRoleBinding>::all(client.clone())
            .delete(&cluster_role, &params)
            .await
            .map(|_| ()),
        Api::<ClusterRole>::all(client.clone())
            .delete(&cluster_role, &params)
            .await
            .map(|_| ()),
        Api::<RoleBinding>::namespaced(client.clone(), cluster)
            .delete(&role, &params)
            .await
            .map(|_| ()),
        Api::<Role>::namespaced(client.clone(), cluster)
            .delete(&role, &params)
            .await
            .map(|_| ()),
    ];
    if ctx.fleet_crds() {
        results.push(
            Api::<RoleBinding>::namespaced(client.clone(), SYSTEM_NAMESPACE)
                .delete(&agent_hub_role_name(cluster), &params)
                .await
                .map(|_| ()),
        );
    }
    for result in results {
        match result {
            Ok(()) => {}
            Err(err) if is_not_found(&err) => {}
            Err(err) => {
                return Err(
                    KubeError::on(format!("RBAC of cluster {cluster}"), "delete")(err).into(),
                );
            }
        }
    }
    Ok(())
}

/// Sets HubAcceptedManagedCluster on `cluster`, the watch's copy, written from that copy (no
/// read). Returns whether it holds; not when another write came first (409 Conflict), whose
/// event wakes the loop again. A cluster accepted for the first time has had its lease renewed
/// by this hub a moment ago ([`accept`]), so the same write says its clock is synced: the
/// expiry loop, woken by that lease, would otherwise write it a moment later from a copy
/// this write has overtaken (a 409 Conflict or two per joining cluster, then the write).
async fn set_accepted(
    ctx: &Context,
    cluster: &ManagedCluster,
    accepted: bool,
) -> Result<bool, HubError> {
    let now = Timestamp::now();
    let condition = if accepted {
        Condition {
            type_: CONDITION_HUB_ACCEPTED.to_string(),
            status: STATUS_TRUE.to_string(),
            reason: REASON_HUB_CLUSTER_ADMIN_ACCEPTED.to_string(),
            message: "Accepted by hub cluster admin".to_string(),
            observed_generation: None,
            last_transition_time: Time(now),
        }
    } else {
        Condition {
            type_: CONDITION_HUB_ACCEPTED.to_string(),
            status: STATUS_FALSE.to_string(),
            reason: REASON_HUB_CLUSTER_ADMIN_DENIED.to_string(),
            message: "Denied by hub cluster admin".to_string(),
            observed_generation: None,
            last_transition_time: Time(now),
        }
    };
    let mut conditions = vec![condition];
    if accepted && cluster.condition(CONDITION_CLOCK_SYNCED).is_none() {
        conditions.push(clock_synced_condition(true, now));
    }
    let clusters: Api<ManagedCluster> = Api::all(ctx.client.clone());
    match set_conditions_once_from(&clusters, cluster, FIELD_MANAGER, |_| conditions.clone()).await
    {
        Ok(_) => Ok(true),
        Err(err) if is_conflict(&err) => Ok(false),
        Err(err) => Err(KubeError::on(
            format!("ManagedCluster {}", cluster.name_any()),
            "set HubAcceptedManagedCluster",
        )(err)
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_wakes_on_what_it_judges_of_a_cluster_not_on_its_lease_taints_or_agent_conditions() {
        let cluster: ManagedCluster = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": "c1", "uid": "u1"},
            "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60},
        }))
        .unwrap();
        let before = judged(&cluster);
        let changed = |change: &dyn Fn(&mut ManagedCluster)| {
            let mut cluster = cluster.clone();
            change(&mut cluster);
            judged(&cluster) != before
        };
        let condition = |type_: &str| Condition {
            type_: type_.to_string(),
            status: STATUS_TRUE.to_string(),
            reason: "R".to_string(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        };
        assert!(!changed(&|c| c.spec.lease_duration_seconds = Some(120)));
        assert!(!changed(&|c| {
            c.spec.taints = serde_json::from_value(json!([
                {"key": "cluster.open-cluster-management.io/unreachable", "effect": "NoSelect"}
            ]))
            .unwrap()
        }));
        assert!(!changed(&|c| {
            c.status
                .get_or_insert_default()
                .conditions
                .push(condition("ManagedClusterJoined"))
        }));
        assert!(changed(&|c| c.spec.hub_accepts_client = Some(false)));
        assert!(changed(&|c| {
            c.status
                .get_or_insert_default()
                .conditions
                .push(condition(CONDITION_HUB_ACCEPTED))
        }));
        assert!(changed(&|c| {
            c.metadata.labels = Some([("a".to_string(), "b".to_string())].into())
        }));
        assert!(changed(&|c| {
            c.metadata.annotations = Some([("a".to_string(), "b".to_string())].into())
        }));
    }

    #[test]
    fn agent_rbac_names_only_its_own_cluster_and_binds_only_this_joins_users() {
        let users = BTreeSet::from(["system:open-cluster-management:c1:agent1".to_string()]);
        // The cluster's own objects, and the hub-wide role its namespace's binding grants.
        let mut objects = rbac("c1", &users);
        let kinds: Vec<&str> = objects
            .iter()
            .filter_map(|(_, object)| object["kind"].as_str())
            .collect();
        assert_eq!(kinds, ["ClusterRole", "ClusterRoleBinding", "RoleBinding"]);
        assert_eq!(objects[2].1["metadata"]["namespace"], "c1");
        assert_eq!(
            objects[2].1["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                   "name": REGISTRATION_CLUSTER_ROLE})
        );
        objects.push((
            REGISTRATION_CLUSTER_ROLE.to_string(),
            registration_cluster_role(),
        ));
        for (_, object) in &objects {
            for rule in object["rules"].as_array().into_iter().flatten() {
                let resources: Vec<&str> = rule["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if resources.iter().any(|r| r.starts_with("managedclusters")) {
                    assert_eq!(rule["resourceNames"], json!(["c1"]), "{rule}");
                }
                if resources.contains(&"leases") && rule["verbs"] != json!(["create"]) {
                    assert_eq!(rule["resourceNames"], json!([CLUSTER_LEASE_NAME]), "{rule}");
                }
            }
            if let Some(subjects) = object.get("subjects") {
                assert_eq!(
                    subjects,
                    &json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                             "name": "system:open-cluster-management:c1:agent1"}])
                );
            }
        }
    }
}
