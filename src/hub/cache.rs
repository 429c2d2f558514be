//! What the hub loops keep of the objects they watch. A loop's cache (kube-runtime's reflector
//! store) holds every object of its kind for as long as the loop runs, and decoded objects cost
//! several times their stored bytes: at 10,000 clusters × 7 addons these caches were most of the
//! hub's heap. So each cache keeps only what its loop reads, cut before the object is stored
//! (`WatchStreamExt::modify`): never the managed fields (a tree of every field's owner, read by
//! no loop), and of a ManagedCluster or ManagedClusterAddOn only the parts named below. A loop
//! reads anything else afresh from the API when it writes.
//!
//! The cut must keep every field a loop's predicates, mappers and reconciles read: a field cut
//! here reads as absent there.

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use crate::api::addon::ClusterManagementAddOn;
use crate::api::bootstrap_token::BOOTSTRAP_TOKEN_ID_KEY;
use crate::api::fleet::{Hub, SYSTEM_NAMESPACE, Spoke};
use crate::api::vocabulary::LABEL_CLUSTER_NAME;
use crate::api::{ManagedCluster, ManagedClusterAddOn};
use crate::hub::acceptance::ANNOTATION_JOIN_USERS;
use crate::hub::approval::registration_cluster;
use crate::hub::signing::is_signed;

use crate::reconciler::run::{
    Watches, addon_watch, cluster_watch, document_watch, hub_watch, namespace_watch, token_watch,
};
use crate::runtime::index::Index;
use crate::runtime::watch::{Share, keep_only, share};
pub(crate) use crate::runtime::watch::{cached_controller as controller, without_managed_fields};

/// The hub loops' one cache of the Spokes in `fleetform-system`: the approval loop's watch of
/// them (or its copy of the reconciler's, in a hub process) is woken by its changes, and the
/// accept loop reads from it whether a cluster is declared.
pub(crate) struct SpokeCache {
    pub store: Store<Spoke>,
    /// The Spokes the watch created, changed or deleted; whoever polls this keeps `store`.
    pub changes: BoxStream<'static, Result<Spoke, watcher::Error>>,
}

impl From<Share<Spoke>> for SpokeCache {
    fn from(share: Share<Spoke>) -> Self {
        SpokeCache {
            store: share.store,
            changes: share.events.touched_objects().boxed(),
        }
    }
}

/// A Spoke as the accept and approval loops read it: that it is declared, by its name. Its
/// managed fields, labels, annotations and status are cut (its spec, which has no empty form,
/// is kept).
pub(crate) fn spoke_as_declared(spoke: &mut Spoke) {
    let meta = &mut spoke.metadata;
    meta.managed_fields = None;
    meta.labels = None;
    meta.annotations = None;
    spoke.status = None;
}

/// One loop's share of the hub's ManagedCluster watch.
pub(crate) type ClusterLoop = Share<ManagedCluster>;

/// The hub loops' ManagedClusters: the accept, expiry and approval loops read one store, as
/// the reconciler's cut leaves them ([`crate::reconciler::run::cluster_kept`]), and each is woken by its own copy of
/// the watch's events. Each loop kept a watch and a copy of every cluster of its own.
pub(crate) struct ClusterCache {
    pub accept: ClusterLoop,
    pub expiry: ClusterLoop,
    pub approval: ClusterLoop,
}

/// One addon loop's share of the ClusterManagementAddOns, which carry fleetform's AddOn
/// documents in an annotation: the addon CSR loop and the registrations loop read one store (a
/// handful of objects; reading one from there rather than the API saves a request per
/// ManagedClusterAddOn or CSR reconciled).
pub(crate) type DocumentLoop = Share<ClusterManagementAddOn>;

/// The hub loops' ManagedClusterAddOns: the registrations loop's share of a watch of them (as
/// the reconciler's cut leaves them, [`crate::reconciler::run::addon_kept`]).
pub(crate) type AddonLoop = Share<ManagedClusterAddOn>;

/// The hub loops' shares of the watches they read: one watch and cache of each kind, of their
/// own ([`LoopWatches::new`]) or the reconciler's in a hub process ([`with_reconciler`]).
/// Every share is taken before any is polled (a share taken later would miss the first list);
/// a loop that does not run (its CRDs are not served) drops its share unpolled.
pub(crate) struct LoopWatches {
    pub clusters: ClusterCache,
    pub addons: AddonLoop,
    /// The approval loop's share (its [`SpokeCache`], which the accept loop reads too), and
    /// the observer loop's.
    pub spokes: (Share<Spoke>, Share<Spoke>),
    /// The addon CSR loop's share, which polls the watch when the loops have their own, and
    /// the registrations loop's.
    pub documents: (DocumentLoop, DocumentLoop),
    /// The accept loop's (a Hub's auto-approval users).
    pub hubs: Share<Hub>,
    /// The approval loop's.
    pub identities: IdentityCache,
}

/// What the approval loop judges a registration by beyond the cluster and its CSRs: the
/// cluster namespaces, where the accept loop records whom a join bound ([`namespace_as_recorded`]),
/// the spokes' bootstrap tokens, with which of them are each cluster's, and the Hubs (their
/// auto-approval users), as the accept loop's share of their watch keeps them.
pub(crate) struct IdentityCache {
    pub namespaces: Share<Namespace>,
    pub tokens: Share<Secret>,
    pub tokens_by_cluster: Index<Secret>,
    pub hubs: Store<Hub>,
}

/// The users the Hubs' `registration.autoApproval` lists: from `hubs` once its watch has listed
/// them, listed afresh until then.
pub(crate) async fn auto_approval_users(
    hubs: &Store<Hub>,
    client: &Client,
) -> Result<Vec<String>, super::run::HubError> {
    let api = Api::<Hub>::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let hubs = crate::runtime::watch::cached_or_listed(hubs, &api)
        .await
        .map_err(crate::runtime::error::KubeError::on(
            format!("Hubs in {SYSTEM_NAMESPACE}"),
            "list",
        ))?;
    Ok(hubs
        .iter()
        .filter_map(|hub| hub.spec.registration.auto_approval.as_ref())
        .flat_map(|approval| approval.users.iter().cloned())
        .collect())
}

impl LoopWatches {
    /// The hub loops' watches, their own: the accept loop polls the ManagedClusters' (the
    /// expiry and approval loops run only beside it), the observer loop the Spokes' (cut to
    /// [`spoke_as_declared`]; the approval loop runs only beside it).
    pub(crate) fn new(client: &Client) -> Self {
        let (accept, [expiry, approval]) = cluster_watch(client.clone()).copied();
        let (observed, [approved]) = share(
            Api::namespaced(client.clone(), SYSTEM_NAMESPACE),
            watcher::Config::default(),
            spoke_as_declared,
        )
        .copied();
        let (signer, [registrations]) = document_watch(client.clone()).copied();
        let (tokens, tokens_by_cluster) = token_watch(client.clone(), token_as_identified);
        let hubs = hub_watch(client.clone());
        LoopWatches {
            clusters: ClusterCache {
                accept,
                expiry,
                approval,
            },
            addons: addon_watch(client.clone()),
            spokes: (approved, observed),
            documents: (signer, registrations),
            identities: IdentityCache {
                namespaces: namespace_watch(client.clone(), namespace_as_recorded),
                tokens,
                tokens_by_cluster,
                hubs: hubs.store.clone(),
            },
            hubs,
        }
    }
}

/// One watch and cache of each kind the reconciler and the hub loops both read, for a hub
/// process: the reconciler's shares, which poll the watches (it runs whether or not the hub
/// loops find their CRDs), and the hub loops'. Each loop kept a watch and a copy of its own:
/// two of every addon (140 MB of the hub's heap at 70,000 addons), three watches of the Spokes
/// (two caches), three of the AddOn documents and of the Hubs, two of the bootstrap tokens and
/// of the cluster namespaces.
pub(crate) fn with_reconciler(client: &Client) -> (Watches, LoopWatches) {
    let mut reconciler = Watches::keeping_namespaces(client, namespace_as_recorded);
    let [accept, expiry, approval] = reconciler.clusters.copies();
    let [approved, observed] = reconciler.spokes.copies();
    let [signer, registrations] = reconciler.documents.copies();
    let [registrations_addons] = reconciler.cluster_addons.copies();
    let [accepting] = reconciler.hubs.copies();
    let [namespaces] = reconciler.namespaces.copies();
    let [tokens] = reconciler.tokens.copies();
    let loops = LoopWatches {
        clusters: ClusterCache {
            accept,
            expiry,
            approval,
        },
        addons: registrations_addons,
        spokes: (approved, observed),
        documents: (signer, registrations),
        hubs: accepting,
        identities: IdentityCache {
            namespaces,
            tokens,
            tokens_by_cluster: reconciler.tokens_by_cluster.clone(),
            hubs: reconciler.hubs.store.clone(),
        },
    };
    (reconciler, loops)
}

/// A cluster namespace as the approval loop reads it: its name and the accept loop's record
/// of whom it bound (its join-users annotation), and whether it is being deleted (what the
/// reconciler reads of it, [`crate::reconciler::run::namespace_kept`]); every other annotation,
/// its labels, managed fields, spec and status are cut.
pub(crate) fn namespace_as_recorded(namespace: &mut Namespace) {
    let meta = &mut namespace.metadata;
    meta.managed_fields = None;
    meta.labels = None;
    keep_only(&mut meta.annotations, |key| key == ANNOTATION_JOIN_USERS);
    namespace.spec = None;
    namespace.status = None;
}

/// A bootstrap token Secret as the approval loop reads it when it has the watch to itself: its
/// labels (the cluster it is of), type and token id. Its secret and expiration, and its managed
/// fields, are cut: the loop needs only to know whose token a request was made with (in a hub
/// process the reconciler's cache keeps the rest, which it renews and hands out).
pub(crate) fn token_as_identified(token: &mut Secret) {
    token.metadata.managed_fields = None;
    token.metadata.annotations = None;
    if let Some(data) = token.data.as_mut() {
        data.retain(|key, _| key == BOOTSTRAP_TOKEN_ID_KEY);
    }
}

/// A cluster Lease as the lease expiry loop reads it: which it is, when it was made and its
/// spec (who holds it, for how long, when it was renewed). Its labels, annotations, owners
/// and managed fields are cut.
pub(crate) fn lease_as_renewed(lease: &mut Lease) {
    let meta = &mut lease.metadata;
    meta.managed_fields = None;
    meta.labels = None;
    meta.annotations = None;
    meta.owner_references = None;
}

/// A registration CSR as the accept and approval loops read it: who asked (labels, username,
/// groups, the subject of its request, which the accept loop reads of decided ones too: whom a
/// join bound) and what was decided (conditions). Its managed fields and issued certificate are
/// cut.
pub(crate) fn csr_as_asked(csr: &mut CertificateSigningRequest) {
    without_managed_fields(csr);
    if let Some(status) = csr.status.as_mut() {
        status.certificate = None;
    }
}

/// One loop's share of the hub's registration CSR watch.
pub(crate) type CsrLoop = Share<CertificateSigningRequest>;

/// The registration CSRs (those naming a cluster) for the accept and approval loops: one watch
/// and one store ([`csr_as_asked`]), and one index of them by cluster, where each loop kept a
/// watch, a copy of every CSR and an index of its own. The accept loop polls the watch (the
/// approval loop runs only beside it).
pub(crate) struct CsrCache {
    pub accept: CsrLoop,
    pub approval: CsrLoop,
    pub by_cluster: CsrsByCluster,
}

/// A [`CsrCache`] of the CSRs of `client`'s hub.
pub(crate) fn registration_csrs(client: Client) -> CsrCache {
    let (share, by_cluster) = crate::runtime::index::share_indexed(
        Api::<CertificateSigningRequest>::all(client),
        watcher::Config::default().labels(LABEL_CLUSTER_NAME),
        csr_as_asked,
        registration_cluster,
    );
    let (accept, [approval]) = share.copied();
    CsrCache {
        accept,
        approval,
        by_cluster,
    }
}

/// An addon CSR as the signer loop reads it: no managed fields, and once signed (its
/// certificate is how the loop knows), not its request.
pub(crate) fn csr_as_signed(csr: &mut CertificateSigningRequest) {
    without_managed_fields(csr);
    if is_signed(csr) {
        csr.spec.request = ByteString(Vec::new());
    }
}

/// The registration CSRs of each cluster (by the cluster-name label), kept beside a cache of
/// CSRs as its watch delivers them (see [`Index`]).
pub(crate) type CsrsByCluster = Index<CertificateSigningRequest>;

#[cfg(test)]
mod tests {
    use crate::reconciler::run::cluster_kept;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use serde_json::json;

    use super::*;

    fn csr(name: &str, cluster: Option<&str>) -> CertificateSigningRequest {
        let labels =
            cluster.map(|cluster| json!({"open-cluster-management.io/cluster-name": cluster}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"request": "", "signerName": "kubernetes.io/kube-apiserver-client"},
        }))
        .unwrap()
    }

    /// A registration CSR as stored once approved and issued, with its managed fields.
    fn issued_csr(approved: bool) -> CertificateSigningRequest {
        let mut issued = csr("spoke-1-x", Some("spoke-1"));
        issued.spec.request = ByteString(b"-----BEGIN CERTIFICATE REQUEST-----".to_vec());
        issued.spec.username = Some("system:serviceaccount:bootstrap".into());
        issued.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        let conditions = approved.then(|| {
            vec![serde_json::from_value(json!({"type": "Approved", "status": "True"})).unwrap()]
        });
        issued.status = Some(serde_json::from_value(json!({"certificate": "Q0VSVA=="})).unwrap());
        issued.status.as_mut().unwrap().conditions = conditions;
        issued
    }

    #[test]
    fn a_csr_keeps_what_each_loop_reads_of_it() {
        // The accept loop reads who asked and what was decided, the request's subject included.
        let mut asked = issued_csr(true);
        csr_as_asked(&mut asked);
        assert_eq!(asked.metadata.managed_fields, None);
        assert_eq!(asked.status.as_ref().unwrap().certificate, None);
        assert_eq!(asked.spec, issued_csr(true).spec);
        assert_eq!(
            asked.status.as_ref().unwrap().conditions,
            issued_csr(true).status.unwrap().conditions
        );

        // The signer loop knows a signed CSR by its certificate, and needs no request for it.
        let mut signed = issued_csr(true);
        csr_as_signed(&mut signed);
        assert_eq!(signed.metadata.managed_fields, None);
        assert!(signed.spec.request.0.is_empty());
        assert_eq!(signed.status, issued_csr(true).status);
        let mut unsigned = issued_csr(true);
        unsigned.status.as_mut().unwrap().certificate = None;
        csr_as_signed(&mut unsigned);
        assert_eq!(unsigned.spec, issued_csr(true).spec);
    }

    #[test]
    fn a_lease_keeps_what_the_expiry_loop_judges_by() {
        let cluster: ManagedCluster = serde_json::from_value(json!({
            "metadata": {"name": "spoke-1", "creationTimestamp": "2026-11-29T10:00:00Z"},
            "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60},
        }))
        .unwrap();
        let lease = |renewed: Option<&str>| -> Lease {
            serde_json::from_value(json!({
                "metadata": {"name": "managed-cluster-lease", "namespace": "spoke-1",
                    "creationTimestamp": "2026-11-29T10:01:00Z",
                    "labels": {"open-cluster-management.io/cluster-name": "spoke-1"},
                    "annotations": {"note": "x".repeat(500)},
                    "managedFields": [{"manager": "agent"}]},
                "spec": {"holderIdentity": "agent", "renewTime": renewed},
            }))
            .unwrap()
        };
        for renewed in [Some("2026-11-29T10:02:00.000000Z"), None] {
            let whole = lease(renewed);
            let mut cut = whole.clone();
            lease_as_renewed(&mut cut);
            assert_eq!(
                (
                    cut.metadata.labels.as_ref(),
                    cut.metadata.annotations.as_ref()
                ),
                (None, None)
            );
            assert_eq!(cut.metadata.managed_fields, None);
            for now in ["2026-11-29T10:02:30Z", "2026-11-29T10:30:00Z"] {
                let now = now.parse().unwrap();
                assert_eq!(
                    crate::hub::lease::judge_cluster_lease(&cluster, Some(&cut), now),
                    crate::hub::lease::judge_cluster_lease(&cluster, Some(&whole), now),
                );
            }
        }
    }

    #[test]
    fn a_cluster_keeps_what_the_reconciler_and_the_hub_loops_read() {
        let mut cluster: ManagedCluster = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {
                "name": "spoke-1", "uid": "u1", "resourceVersion": "7",
                "annotations": {"a": "b"},
                "managedFields": [{"manager": "agent", "fieldsV1": {"f:status": {}}}],
            },
            "spec": {
                "hubAcceptsClient": true, "leaseDurationSeconds": 10,
                "managedClusterClientConfigs": [{"url": "https://spoke", "caBundle": "Q0E="}],
                "taints": [{"key": "k", "effect": "NoSelect"}],
            },
            "status": {
                "conditions": [{"type": "ManagedClusterConditionAvailable", "status": "True",
                    "reason": "ManagedClusterAvailable", "message": "",
                    "lastTransitionTime": "2026-11-26T00:00:00Z"}],
                "capacity": {"cpu": "4"},
                "version": {"kubernetes": "v1.34.0"},
                "clusterClaims": [{"name": "id.k8s.io", "value": "x"}],
            },
        }))
        .unwrap();
        let mut expected = cluster.clone();
        cluster_kept(&mut cluster);
        assert_eq!(cluster.metadata.managed_fields, None);
        let status = cluster.status.as_ref().unwrap();
        assert!(status.capacity.is_empty() && status.version.is_none());
        assert!(status.cluster_claims.is_empty());
        assert!(cluster.spec.managed_cluster_client_configs.is_empty());
        // Everything else is as it was: the rest of its spec, and its conditions.
        expected.metadata.managed_fields = None;
        expected.spec.managed_cluster_client_configs = Vec::new();
        expected.status = Some(crate::api::cluster::ManagedClusterStatus {
            conditions: expected.status.unwrap().conditions,
            ..Default::default()
        });
        assert_eq!(cluster, expected);
    }

    #[test]
    fn the_approval_loop_keeps_what_it_judges_a_spoke_by() {
        let terminating: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "spoke-1", "labels": {"l": "v"},
                "deletionTimestamp": "2026-11-29T10:00:00Z",
                "annotations": {ANNOTATION_JOIN_USERS: "record", "other": "x"}},
            "status": {"phase": "Terminating"},
        }))
        .unwrap();
        let mut namespace = terminating.clone();
        namespace_as_recorded(&mut namespace);
        assert_eq!(
            namespace.metadata.annotations,
            Some([(ANNOTATION_JOIN_USERS.to_string(), "record".to_string())].into())
        );
        assert_eq!(namespace.metadata.labels, None);
        // The reconciler, which shares this cache in a hub process, is woken by a deletion.
        let mut kept = terminating.clone();
        crate::reconciler::run::namespace_kept(&mut kept);
        for cut in [&namespace, &kept] {
            assert_eq!(
                (&cut.metadata.name, &cut.metadata.deletion_timestamp),
                (
                    &terminating.metadata.name,
                    &terminating.metadata.deletion_timestamp
                )
            );
            assert_eq!(cut.status, None);
        }

        let mut token: Secret = serde_json::from_value(json!({
            "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system",
                "labels": {"open-cluster-management.io/cluster-name": "spoke-1"}},
            "type": "bootstrap.kubernetes.io/token",
            "data": {"token-id": "YWJjZGVm", "token-secret": "c2VjcmV0"},
        }))
        .unwrap();
        let before = token.clone();
        token_as_identified(&mut token);
        assert_eq!(token.metadata.labels, before.metadata.labels);
        assert_eq!(token.type_, before.type_);
        let data = token.data.unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), [BOOTSTRAP_TOKEN_ID_KEY]);
        assert_eq!(
            data[BOOTSTRAP_TOKEN_ID_KEY],
            before.data.unwrap()["token-id"]
        );
    }
}
