//! The words fleetform shares with OCM and with its own components: condition types and reasons,
//! taints, labels, finalizers and the names of well-known objects.
//!
//! Every OCM string here is spelled exactly as OCM spells it, because OCM tools and addons match
//! on them. Nothing here has behaviour; the loops that set these conditions own their meaning.

/// `status` of a condition that holds.
pub const STATUS_TRUE: &str = "True";
/// `status` of a condition that does not hold.
pub const STATUS_FALSE: &str = "False";
/// `status` of a condition nobody can currently vouch for (e.g. a lease stopped being renewed).
pub const STATUS_UNKNOWN: &str = "Unknown";

// --- ManagedCluster conditions ---------------------------------------------------------------

/// ManagedCluster condition: the hub accepts (True) or refuses (False) the cluster's agent.
pub const CONDITION_HUB_ACCEPTED: &str = "HubAcceptedManagedCluster";
/// Reason of [`CONDITION_HUB_ACCEPTED`] True: `spec.hubAcceptsClient` is true.
pub const REASON_HUB_CLUSTER_ADMIN_ACCEPTED: &str = "HubClusterAdminAccepted";
/// Reason of [`CONDITION_HUB_ACCEPTED`] False: `spec.hubAcceptsClient` is false.
pub const REASON_HUB_CLUSTER_ADMIN_DENIED: &str = "HubClusterAdminDenied";

/// ManagedCluster condition: the agent holds an approved hub certificate.
pub const CONDITION_JOINED: &str = "ManagedClusterJoined";
/// Reason of [`CONDITION_JOINED`] True (OCM uses the condition type as its reason).
pub const REASON_JOINED: &str = "ManagedClusterJoined";

/// ManagedCluster condition: the spoke's API server and agent are healthy and its lease is fresh.
pub const CONDITION_AVAILABLE: &str = "ManagedClusterConditionAvailable";
/// Reason of [`CONDITION_AVAILABLE`] True: `/livez` answers and the agent is running.
pub const REASON_AVAILABLE: &str = "ManagedClusterAvailable";
/// Reason of [`CONDITION_AVAILABLE`] False: the spoke's API server failed its health probe.
pub const REASON_KUBE_API_SERVER_UNAVAILABLE: &str = "ManagedClusterKubeAPIServerUnavailable";
/// Reason of [`CONDITION_AVAILABLE`] Unknown: the hub saw no lease renewal for five durations.
pub const REASON_LEASE_UPDATE_STOPPED: &str = "ManagedClusterLeaseUpdateStopped";

/// ManagedCluster condition: the agent's clock agrees with the hub's (lease renewals are judged
/// by it).
pub const CONDITION_CLOCK_SYNCED: &str = "ManagedClusterConditionClockSynced";

/// ManagedCluster condition: the agent's last client certificate rotation.
pub const CONDITION_CERTIFICATE_ROTATED: &str = "ClusterCertificateRotated";
/// Reason of [`CONDITION_CERTIFICATE_ROTATED`] True: a new certificate was stored.
pub const REASON_CLIENT_CERTIFICATE_UPDATED: &str = "ClientCertificateUpdated";
/// Reason of [`CONDITION_CERTIFICATE_ROTATED`] False: the rotation failed.
pub const REASON_CLIENT_CERTIFICATE_UPDATE_FAILED: &str = "ClientCertificateUpdateFailed";

// --- ManagedClusterAddOn conditions ----------------------------------------------------------

/// ManagedClusterAddOn condition: the addon's agent on the spoke is alive.
pub const ADDON_CONDITION_AVAILABLE: &str = "Available";
/// ManagedClusterAddOn condition OCM prints as a column; fleetform does not set it.
pub const ADDON_CONDITION_DEGRADED: &str = "Degraded";
/// ManagedClusterAddOn condition OCM prints as a column; fleetform does not set it.
pub const ADDON_CONDITION_PROGRESSING: &str = "Progressing";
/// Reason of [`ADDON_CONDITION_AVAILABLE`] True: the addon renews its lease.
pub const REASON_ADDON_LEASE_UPDATED: &str = "ManagedClusterAddOnLeaseUpdated";
/// Reason of [`ADDON_CONDITION_AVAILABLE`] False: the addon's lease exists but is stale.
pub const REASON_ADDON_LEASE_UPDATE_STOPPED: &str = "ManagedClusterAddOnLeaseUpdateStopped";
/// Reason of [`ADDON_CONDITION_AVAILABLE`] Unknown: the addon has no lease (or its cluster is
/// itself Unknown).
pub const REASON_ADDON_LEASE_NOT_FOUND: &str = "ManagedClusterAddOnLeaseNotFound";

// --- CertificateSigningRequest conditions ------------------------------------------------------

/// CSR condition type of an approval.
pub const CSR_APPROVED: &str = "Approved";
/// CSR condition type of a denial.
pub const CSR_DENIED: &str = "Denied";
/// CSR condition type a signer writes when it cannot sign an approved request.
pub const CSR_FAILED: &str = "Failed";

// --- ManagedClusterSet and ManagedClusterSetBinding conditions ------------------------------

/// ManagedClusterSet condition: True when no cluster is in the set.
pub const CLUSTER_SET_CONDITION_EMPTY: &str = "ClusterSetEmpty";
/// ManagedClusterSetBinding condition: True when the set it names exists.
pub const CLUSTER_SET_BINDING_CONDITION_BOUND: &str = "Bound";

// --- ManifestWork conditions -----------------------------------------------------------------

/// ManifestWork condition: the work agent applied every manifest of the work.
pub const WORK_CONDITION_APPLIED: &str = "Applied";
/// ManifestWork condition: every resource of the work exists on the spoke.
pub const WORK_CONDITION_AVAILABLE: &str = "Available";

// --- Taints (effect NoSelect) ----------------------------------------------------------------

/// Taint OCM puts on a cluster whose Available condition is Unknown (or missing).
pub const TAINT_UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
/// Taint OCM puts on a cluster whose Available condition is False.
pub const TAINT_UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";
/// Taint fleetform puts on a spoke being unjoined, so placements stop selecting it.
pub const TAINT_TERMINATING: &str = "fleetform.io/terminating";
/// Taint fleetform puts on a spoke with `cleanup.forceClusterDrain`, so workloads drain off it
/// before it unjoins.
pub const TAINT_WORKLOAD_CLEANUP: &str = "fleetform.io/workload-cleanup";

// --- Labels ----------------------------------------------------------------------------------

/// Label naming the cluster on its CSRs and leases (and other per-cluster hub objects).
pub const LABEL_CLUSTER_NAME: &str = "open-cluster-management.io/cluster-name";
/// Label on a ClusterClaim that keeps it on the spoke: the agent does not report it to the hub.
pub const LABEL_SPOKE_ONLY: &str = "open-cluster-management.io/spoke-only";
/// Label naming the addon on hub objects that belong to it, ManifestWorks included.
pub const LABEL_ADDON_NAME: &str = "open-cluster-management.io/addon-name";

/// Label putting a ManagedCluster in the ManagedClusterSet it names.
pub const LABEL_CLUSTER_SET: &str = "cluster.open-cluster-management.io/clusterset";

// --- Annotations -----------------------------------------------------------------------------

/// Annotation of a ManagedCluster holding fleetform's summary of its nodes as JSON (ready, PID,
/// memory and disk pressure counts). An annotation, because an OCM CRD prunes unknown status
/// fields, and because both the agent (which may patch its own ManagedCluster) and the hub can
/// write it.
pub const ANNOTATION_NODE_HEALTH: &str = "fleetform.io/node-health";

/// Annotation that carries a ManagedClusterAddOn's `spec.installNamespace` while it is read or
/// written as `v1beta1`, which has no such field (OCM's conversion uses it too).
pub const ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE: &str =
    "addon.open-cluster-management.io/v1alpha1-install-namespace";

/// The `name` a `v1beta1` ClusterManagementAddOn's default config has when its `v1alpha1`
/// supported config had no default (OCM's conversion reserves it; it is no valid object name).
pub const RESERVED_NO_DEFAULT_CONFIG_NAME: &str = "__reserved_no_default__";

// --- ManagedClusterSets ----------------------------------------------------------------------

/// The ManagedClusterSet OCM's hub puts every cluster in that no other set claims.
pub const CLUSTER_SET_DEFAULT: &str = "default";
/// The ManagedClusterSet OCM's hub keeps that selects every cluster (by an empty label selector).
pub const CLUSTER_SET_GLOBAL: &str = "global";

// --- Cluster claims --------------------------------------------------------------------------

/// Reserved claim: a unique identifier of the cluster.
pub const CLAIM_ID: &str = "id.k8s.io";
/// Reserved claim: the cluster's Kubernetes version.
pub const CLAIM_KUBE_VERSION: &str = "kubeversion.open-cluster-management.io";
/// Reserved claim: the platform the cluster runs on (AWS, GCE, ...).
pub const CLAIM_PLATFORM: &str = "platform.open-cluster-management.io";
/// Reserved claim: the product the cluster is (OpenShift, EKS, ...).
pub const CLAIM_PRODUCT: &str = "product.open-cluster-management.io";
/// Claims reported before every custom claim and never cut by `clusterClaimsMax`, sorted.
pub const RESERVED_CLAIM_NAMES: [&str; 4] =
    [CLAIM_ID, CLAIM_KUBE_VERSION, CLAIM_PLATFORM, CLAIM_PRODUCT];

/// Whether a claim name is one of OCM's reserved names.
pub fn is_reserved_claim(name: &str) -> bool {
    RESERVED_CLAIM_NAMES.contains(&name)
}

// --- fleetform's mark ------------------------------------------------------------------------

/// Label on everything fleetform creates (with the value [`MANAGED_BY`]): pruning, drift
/// correction and upgrades select on it and leave anything without it alone.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "fleetform";

// --- fleetform's own conditions --------------------------------------------------------------

/// Spoke condition: the spoke's ManagedCluster is accepted and joined.
pub const CONDITION_SPOKE_JOINED: &str = "SpokeJoined";
/// Spoke condition: the agent on the spoke has taken over day-2 operations from the hub.
pub const CONDITION_PIVOT_COMPLETE: &str = "PivotComplete";
/// Spoke condition: the spoke's ManagedClusterAddOns match its `spec.addons`.
pub const CONDITION_ADDONS_CONFIGURED: &str = "AddonsConfigured";
/// Spoke condition: the agent runs the desired version and configuration.
pub const CONDITION_AGENT_SYNCED: &str = "AgentSynced";
/// Spoke or Hub condition: the last cleanup step failed; the message says which and why.
pub const CONDITION_CLEANUP_FAILED: &str = "CleanupFailed";
/// Hub condition: True while the hub's agent rollout releases no more spokes because more failed
/// than `rollout.maxFailures` allows; the message names them and why. A new target (a commit) or
/// pausing the rollout (`paused: true`, then false) resumes it. The FleetSync that manages the
/// hub carries a condition of the same type while it is True.
pub const CONDITION_ROLLOUT_HALTED: &str = "RolloutHalted";
/// FleetSync condition: the last fetched commit is applied.
pub const CONDITION_READY: &str = "Ready";
/// FleetSync condition: syncing cannot progress without a change (bad commit, prune guard).
pub const CONDITION_STALLED: &str = "Stalled";
/// Spoke condition the hub's observer writes for a poll-mode spoke: True when it is ONLINE; the
/// reason is Krake's state name.
pub const CONDITION_ONLINE: &str = "Online";
/// Spoke condition: whether the reconciler's last pass went through; False names what failed
/// (the reason is its category: `SpokeUnreachable`, `Forbidden`, `HubEndpointUnknown`, ...) and
/// what to do, and the pass is retried with backoff.
pub const CONDITION_RECONCILED: &str = "Reconciled";
/// Spoke condition while it is deleted: False says what the unjoin waits on
/// ([`REASON_WAITING_FOR_AGENT_UNJOIN`], [`REASON_MANIFEST_WORKS_REMAIN`], ...), True how it
/// ended ([`REASON_UNJOINED_BY_HUB`] when the hub did the spoke's side itself).
pub const CONDITION_UNJOINED: &str = "Unjoined";
/// Reason of [`CONDITION_UNJOINED`] False: the agent is to remove itself from the spoke.
pub const REASON_WAITING_FOR_AGENT_UNJOIN: &str = "WaitingForAgentUnjoin";
/// Reason of [`CONDITION_UNJOINED`] False: active ManifestWorks block the unjoin.
pub const REASON_MANIFEST_WORKS_REMAIN: &str = "ManifestWorksRemain";
/// Reason of [`CONDITION_UNJOINED`] False: what the unjoin removed from the hub is still being
/// deleted (a namespace terminates until the namespace controller has emptied it).
pub const REASON_HUB_OBJECTS_TERMINATING: &str = "HubObjectsTerminating";
/// Reason of [`CONDITION_UNJOINED`] False: what the unjoin removed from the hub is held by a
/// finalizer nobody removes; the message names the object, the finalizer and what to do.
pub const REASON_HELD_BY_FINALIZER: &str = "HeldByFinalizer";
/// Reason of [`CONDITION_UNJOINED`] False: the unjoin is under way.
pub const REASON_UNJOINING: &str = "Unjoining";
/// Reason of [`CONDITION_UNJOINED`] True: the hub completed the unjoin without the agent.
pub const REASON_UNJOINED_BY_HUB: &str = "UnjoinedByHub";
/// Spoke annotation: `"true"` makes the hub complete an unjoin at once instead of waiting for
/// the agent (a dead or destroyed spoke).
pub const ANNOTATION_FORCE_UNJOIN: &str = "fleetform.io/force-unjoin";

// --- Finalizers on the Spoke CR (seed 004's cleanup order) -----------------------------------

/// Added by the hub; removed once the hub's pre-flight checks pass, which lets the spoke unjoin.
pub const FINALIZER_HUB_CLEANUP_PREFLIGHT: &str = "fleetform.io/hub-cleanup-preflight";
/// Added by the hub; removed after the hub-side cleanup that follows the spoke's unjoin.
pub const FINALIZER_HUB_CLEANUP: &str = "fleetform.io/hub-cleanup";
/// Added by the agent (by the hub for hub-as-spoke); removed once the spoke has unjoined.
pub const FINALIZER_SPOKE_CLEANUP: &str = "fleetform.io/spoke-cleanup";

// --- Well-known objects ----------------------------------------------------------------------

/// Lease the agent renews in its cluster namespace on the hub.
pub const CLUSTER_LEASE_NAME: &str = "managed-cluster-lease";

/// Name of the hub-wide ClusterRole of every accepted cluster's agent in its cluster namespace:
/// its lease, its addons and their status, Events. Each cluster's RoleBinding grants it in
/// that namespace only, as OCM's hub grants its `open-cluster-management:managedcluster:registration`;
/// its rules name no cluster, so one role serves the fleet (where each cluster had a Role of
/// its own: a write and an object more per join).
pub const REGISTRATION_CLUSTER_ROLE: &str = "fleetform:managedcluster:registration";
/// Namespace of the agent on the spoke.
pub const AGENT_NAMESPACE: &str = "open-cluster-management-agent";
/// Namespace addons are installed in unless they say otherwise.
pub const DEFAULT_ADDON_INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// Secret in [`AGENT_NAMESPACE`] holding the agent's issued hub credentials.
pub const HUB_KUBECONFIG_SECRET: &str = "hub-kubeconfig-secret";
/// Secret in [`AGENT_NAMESPACE`] holding the per-spoke bootstrap kubeconfig.
pub const BOOTSTRAP_HUB_KUBECONFIG_SECRET: &str = "bootstrap-hub-kubeconfig";
/// Key of [`HUB_KUBECONFIG_SECRET`]: a kubeconfig using the issued certificate.
pub const HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG: &str = "kubeconfig";
/// Key of [`HUB_KUBECONFIG_SECRET`]: the issued client certificate (PEM).
pub const HUB_KUBECONFIG_SECRET_KEY_TLS_CRT: &str = "tls.crt";
/// Key of [`HUB_KUBECONFIG_SECRET`]: the client certificate's private key (PEM).
pub const HUB_KUBECONFIG_SECRET_KEY_TLS_KEY: &str = "tls.key";
/// Key of [`HUB_KUBECONFIG_SECRET`]: the name the cluster registered under.
pub const HUB_KUBECONFIG_SECRET_KEY_CLUSTER_NAME: &str = "cluster-name";
/// Key of [`HUB_KUBECONFIG_SECRET`]: the agent id in the certificate's common name.
pub const HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME: &str = "agent-name";
/// Signer of the client certificates agents (and kube-client addons) use against the hub.
pub const SIGNER_KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_claims_are_sorted_so_they_can_be_reported_in_order() {
        let mut sorted = RESERVED_CLAIM_NAMES;
        sorted.sort_unstable();
        assert_eq!(sorted, RESERVED_CLAIM_NAMES);
    }

    #[test]
    fn only_ocm_reserved_names_are_reserved() {
        assert!(is_reserved_claim("id.k8s.io"));
        assert!(is_reserved_claim("product.open-cluster-management.io"));
        assert!(!is_reserved_claim("id.openshift.io"));
        assert!(!is_reserved_claim(""));
    }
}
