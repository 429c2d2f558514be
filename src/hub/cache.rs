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

use kube::runtime::controller::Controller;
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, reflector};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::api::addon::ManagedClusterAddOnStatus;
use crate::api::{ManagedCluster, ManagedClusterAddOn};

/// A controller over `api`'s objects (as `Controller::new`), whose cache keeps them as `cut`
/// leaves them; its reconciles see the same cut objects.
pub(crate) fn controller<K>(api: Api<K>, config: watcher::Config, cut: fn(&mut K)) -> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash + Unpin,
{
    let (reader, writer) = reflector::store();
    let objects = watcher(api, config)
        .default_backoff()
        .modify(cut)
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(objects, reader)
}

/// Drops the managed fields, which no hub loop reads.
pub(crate) fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// A ManagedCluster as the accept and expiry loops read it: its metadata (no managed fields),
/// acceptance, lease duration and taints, and its conditions. What its agent reports of the
/// spoke (capacity, allocatable, version, claims, managed namespaces) and the client configs
/// (a CA bundle each) are cut.
pub(crate) fn cluster_as_judged(cluster: &mut ManagedCluster) {
    without_managed_fields(cluster);
    cluster.spec.managed_cluster_client_configs = Vec::new();
    if let Some(status) = cluster.status.as_mut() {
        *status = crate::api::cluster::ManagedClusterStatus {
            conditions: std::mem::take(&mut status.conditions),
            ..Default::default()
        };
    }
}

/// A ManagedClusterAddOn as the registrations loop reads it: which one it is (name, namespace,
/// uid, resourceVersion, deletion) and its `status.registrations`; its spec, labels,
/// annotations, conditions and the rest of its status are cut.
pub(crate) fn addon_registrations(addon: &mut ManagedClusterAddOn) {
    let meta = &mut addon.metadata;
    meta.managed_fields = None;
    meta.labels = None;
    meta.annotations = None;
    addon.spec = Default::default();
    if let Some(status) = addon.status.as_mut() {
        *status = ManagedClusterAddOnStatus {
            registrations: std::mem::take(&mut status.registrations),
            ..Default::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_judged_cluster_keeps_what_acceptance_and_expiry_read() {
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
        cluster_as_judged(&mut cluster);
        assert_eq!(cluster.metadata.managed_fields, None);
        assert!(cluster.spec.managed_cluster_client_configs.is_empty());
        let status = cluster.status.as_ref().unwrap();
        assert!(status.capacity.is_empty() && status.version.is_none());
        assert!(status.cluster_claims.is_empty());
        // Everything else is as it was.
        expected.metadata.managed_fields = None;
        expected.spec.managed_cluster_client_configs = Vec::new();
        expected.status = Some(crate::api::cluster::ManagedClusterStatus {
            conditions: expected.status.unwrap().conditions,
            ..Default::default()
        });
        assert_eq!(cluster, expected);
    }

    #[test]
    fn an_addon_keeps_its_identity_and_registrations() {
        let mut addon: ManagedClusterAddOn = serde_json::from_value(json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": "a", "namespace": "spoke-1", "uid": "u2", "resourceVersion": "9",
                "deletionTimestamp": "2026-11-26T00:00:00Z", "labels": {"l": "v"}},
            "spec": {"installNamespace": "ns"},
            "status": {
                "conditions": [{"type": "Available", "status": "True", "reason": "r",
                    "message": "", "lastTransitionTime": "2026-11-26T00:00:00Z"}],
                "registrations": [{"signerName": "kubernetes.io/kube-apiserver-client"}],
            },
        }))
        .unwrap();
        addon.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        let registrations = addon.registrations().to_vec();
        addon_registrations(&mut addon);
        assert_eq!(addon.registrations(), registrations.as_slice());
        assert_eq!(addon.metadata.name.as_deref(), Some("a"));
        assert_eq!(addon.metadata.namespace.as_deref(), Some("spoke-1"));
        assert_eq!(addon.metadata.uid.as_deref(), Some("u2"));
        assert_eq!(addon.metadata.resource_version.as_deref(), Some("9"));
        assert!(addon.metadata.deletion_timestamp.is_some());
        assert_eq!(addon.metadata.managed_fields, None);
        assert_eq!(addon.metadata.labels, None);
        assert_eq!(addon.spec, Default::default());
        assert!(addon.status.as_ref().unwrap().conditions.is_empty());
    }
}
