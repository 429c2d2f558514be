//! Who is who on an OCM hub: the names OCM gives a cluster's agent in its certificate, the
//! groups it puts agents and bootstrap token holders in, and the usages a client certificate
//! request may ask for. The agent builds its requests from these and the hub's approver checks
//! requests against them, so both read them here. An addon's default subject is
//! [`Subject::default_for`](super::addon::Subject::default_for).

/// Prefix of every OCM identity: `system:open-cluster-management:`.
pub const OCM_IDENTITY_PREFIX: &str = "system:open-cluster-management:";
/// The group every registered cluster's agent is in.
pub const MANAGED_CLUSTERS_GROUP: &str = "system:open-cluster-management:managed-clusters";
/// Username prefix the API server gives bootstrap token holders.
pub const BOOTSTRAP_USER_PREFIX: &str = "system:bootstrap:";
/// The group of every authenticated user, which older addon agents also ask for in their
/// certificates (OCM's approver still accepts it as a third group of the default subject).
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// CSR usage a client certificate must have.
pub const USAGE_CLIENT_AUTH: &str = "client auth";
/// Usages a client certificate may have besides client auth.
pub const USAGES_ALSO_ALLOWED: [&str; 2] = ["digital signature", "key encipherment"];

/// The common name of a spoke agent's hub identity: `system:open-cluster-management:<cluster>:<agent-id>`.
pub fn agent_common_name(cluster: &str, agent_id: &str) -> String {
    format!("{OCM_IDENTITY_PREFIX}{cluster}:{agent_id}")
}

/// The group of one cluster's agent: `system:open-cluster-management:<cluster>`.
pub fn cluster_group(cluster: &str) -> String {
    format!("{OCM_IDENTITY_PREFIX}{cluster}")
}

/// The organisations of a spoke agent's hub identity, in the order the agent writes them.
pub fn agent_organizations(cluster: &str) -> [String; 2] {
    [cluster_group(cluster), MANAGED_CLUSTERS_GROUP.to_string()]
}

/// The user of an addon agent whose agent name is the addon's name (OCM's default subject):
/// `system:open-cluster-management:cluster:<cluster>:addon:<addon>:agent:<addon>`.
pub fn addon_agent_user(cluster: &str, addon: &str) -> String {
    format!("{}:agent:{addon}", addon_cluster_group(cluster, addon))
}

/// The group of one addon's agents on one cluster:
/// `system:open-cluster-management:cluster:<cluster>:addon:<addon>`.
pub fn addon_cluster_group(cluster: &str, addon: &str) -> String {
    format!("{OCM_IDENTITY_PREFIX}cluster:{cluster}:addon:{addon}")
}

/// The group of one addon's agents on every cluster: `system:open-cluster-management:addon:<addon>`.
pub fn addon_group(addon: &str) -> String {
    format!("{OCM_IDENTITY_PREFIX}addon:{addon}")
}
