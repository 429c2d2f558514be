//! The objects that make up an installed agent (DESIGN §4.1), rendered without I/O.
//!
//! On the spoke: the agent namespace, its ServiceAccount and RBAC, the `bootstrap-hub-kubeconfig`
//! Secret carrying the spoke's own bootstrap token, and the agent Deployment labelled with the
//! agent version and configuration hash. On the hub: the `bootstrap-token-<id>` Secret that
//! token authenticates against, labelled with the cluster it may register.
//!
//! The hub renders these to join a spoke; the agent renders the same Deployment to upgrade
//! itself once it owns day 2, so both sides agree on what "up to date" means: the Deployment's
//! [`LABEL_AGENT_TEMPLATE_HASH`].

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::{Value, json};

use crate::api::bootstrap_token::{
    BOOTSTRAP_TOKEN_ID_KEY, BOOTSTRAP_TOKEN_SECRET_KEY, BootstrapToken,
};
use crate::api::fleet::{GROUP, SYSTEM_NAMESPACE};
use crate::api::vocabulary::{
    AGENT_NAMESPACE, BOOTSTRAP_HUB_KUBECONFIG_SECRET, HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG,
    LABEL_CLUSTER_NAME,
};
use crate::plan::desired::{EffectiveSpoke, MANAGED_BY, MANAGED_BY_LABEL, stable_hash};

/// The ClusterClaim CRD's name, the one CRD the agent reads.
const CLUSTER_CLAIM_CRD: &str = "clusterclaims.cluster.open-cluster-management.io";
/// Name of the agent's Deployment and ServiceAccount on a spoke.
pub const AGENT_DEPLOYMENT: &str = "fleetform-agent";
/// The Lease, in the agent's namespace on its spoke, whose holder is the one agent of the spoke
/// that acts (`fleetform agent --leader-elect`).
pub const ELECTION_LEASE: &str = "fleetform-agent";
/// Name of the agent's ClusterRole and ClusterRoleBinding on a spoke (and of its Role and
/// RoleBinding in its namespace).
pub const AGENT_CLUSTER_ROLE: &str = "fleetform:agent";
/// Label on the agent Deployment: the agent bundle version it runs.
pub const LABEL_AGENT_VERSION: &str = "fleetform.io/agent-version";
/// Label on the agent Deployment: the hash of the agent configuration it runs.
pub const LABEL_AGENT_CONFIG_HASH: &str = "fleetform.io/agent-config-hash";
/// Label on the agent Deployment: the hash of its whole rendered template, so a change of any
/// setting the agent is started with (the claim limit too) rolls it.
pub const LABEL_AGENT_TEMPLATE_HASH: &str = "fleetform.io/agent-template-hash";
/// Label selecting agent pods (and, for `fleetform up`, the Deployments it plays kubelet for).
pub const LABEL_APP: &str = "app";
/// Value of [`LABEL_APP`] on the agent.
pub const APP_AGENT: &str = "fleetform-agent";
/// The image agents run when the fleet names none.
pub const DEFAULT_AGENT_IMAGE: &str = "ghcr.io/fleetform/fleetform";

/// The token a hub's `bootstrap-token-<id>` Secret holds, if it is one.
pub fn stored_token(secret: &Secret) -> Option<BootstrapToken> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|value| String::from_utf8(value.0.clone()).ok())
    };
    Some(BootstrapToken {
        id: text(BOOTSTRAP_TOKEN_ID_KEY)?,
        secret: text(BOOTSTRAP_TOKEN_SECRET_KEY)?,
    })
}

/// Where agents reach their hub: the API server URL and the CA bundle that verifies it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HubEndpoint {
    pub server: String,
    /// PEM; `None` trusts the system roots.
    pub ca_pem: Option<String>,
}

/// What the process running the reconciler knows of how spokes reach its hub, for Hubs that do
/// not say: `fleetform up` knows its embedded hub's URL and CA; `fleetform hub` takes
/// `--agent-hub-url` and `--agent-hub-ca-file`, or the kubeconfig it runs with when that is not
/// the in-cluster one (whose address spokes cannot reach).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownEndpoint {
    pub server: Option<String>,
    pub ca_pem: Option<String>,
}

/// Why the endpoint agents of a hub use cannot be told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error(
        "Hub {hub} sets no spec.apiServer and the hub process knows no address its spokes can reach (in a cluster, its own is the in-cluster one); set spec.apiServer (and caBundle if a proxy or load balancer serves another certificate) in the Hub's document, or run `fleetform hub --agent-hub-url URL`"
    )]
    Unknown { hub: String },
}

/// The endpoint agents of `hub` use: `spec.apiServer`, else what the process knows; the CA from
/// `spec.caBundle`, else `secret_ca` (the bundle `spec.caBundleSecretRef` names, read by the
/// caller), else what the process knows.
pub fn hub_endpoint(
    hub: &str,
    spec: &crate::api::fleet::HubSpec,
    known: &KnownEndpoint,
    secret_ca: Option<String>,
) -> Result<HubEndpoint, EndpointError> {
    let server = spec
        .api_server
        .clone()
        .or_else(|| known.server.clone())
        .ok_or_else(|| EndpointError::Unknown {
            hub: hub.to_string(),
        })?;
    let ca_pem = spec
        .ca_bundle
        .clone()
        .or(secret_ca)
        .or_else(|| known.ca_pem.clone());
    Ok(HubEndpoint { server, ca_pem })
}

/// Whether the spoke's bootstrap kubeconfig reaches the hub at `endpoint`: the one the hub would
/// write now for the token it holds. A kubeconfig that does not parse is not current.
pub fn bootstrap_current(kubeconfig: &str, endpoint: &HubEndpoint) -> bool {
    let Ok(parsed) = serde_yaml::from_str::<Value>(kubeconfig) else {
        return false;
    };
    let Some(bearer) = parsed
        .pointer("/users/0/user/token")
        .and_then(Value::as_str)
    else {
        return false;
    };
    crate::api::bootstrap_token::bootstrap_kubeconfig(
        &endpoint.server,
        endpoint.ca_pem.as_deref().unwrap_or_default(),
        bearer,
    ) == kubeconfig
}

/// The `--spoke-url` an agent Deployment was started with, if any.
pub fn spoke_url_of(deployment: &Deployment) -> Option<&str> {
    let args = deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .args
        .as_ref()?;
    args.windows(2)
        .find(|pair| pair[0] == "--spoke-url")
        .map(|pair| pair[1].as_str())
}

/// A kubeconfig that authenticates to the hub with `token` (the agent's bootstrap identity).
pub fn bootstrap_kubeconfig(hub: &HubEndpoint, token: &BootstrapToken) -> String {
    crate::api::bootstrap_token::bootstrap_kubeconfig(
        &hub.server,
        hub.ca_pem.as_deref().unwrap_or_default(),
        &token.bearer(),
    )
}

/// The spoke's `bootstrap-hub-kubeconfig` Secret.
pub fn bootstrap_hub_kubeconfig_secret(kubeconfig: &str) -> Secret {
    let mut secret: Secret = from_json(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": BOOTSTRAP_HUB_KUBECONFIG_SECRET,
            "namespace": AGENT_NAMESPACE,
            "labels": managed_labels([]),
        },
        "type": "Opaque",
    }))
    .unwrap_or_default();
    secret.data = Some(BTreeMap::from([(
        HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG.to_string(),
        ByteString(kubeconfig.as_bytes().to_vec()),
    )]));
    secret
}

/// The agent's namespace on the spoke.
pub fn agent_namespace() -> Namespace {
    from_json(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": AGENT_NAMESPACE, "labels": managed_labels([])},
    }))
    .unwrap_or_default()
}

/// The agent's ServiceAccount.
pub fn agent_service_account() -> ServiceAccount {
    from_json(json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": AGENT_DEPLOYMENT, "namespace": AGENT_NAMESPACE, "labels": managed_labels([])},
    }))
    .unwrap_or_default()
}

/// What the agent may do on its spoke: read nodes, claims and leases; keep its own and its
/// addons' credentials; report events; upgrade and remove itself (see
/// [`super::uninstall`] for the order that makes removing itself possible).
pub fn agent_cluster_role() -> ClusterRole {
    from_json(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": AGENT_CLUSTER_ROLE, "labels": managed_labels([])},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["clusterclaims"], "verbs": ["get", "list", "watch"]},
            // Whether ClusterClaims are served at all, before watching them.
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": [CLUSTER_CLAIM_CRD], "verbs": ["get"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [ELECTION_LEASE], "verbs": ["delete"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "delete"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch", "patch", "update", "delete"]},
            // Its election's RBAC, which an unjoin that keeps the agent namespace removes.
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "resourceNames": [AGENT_CLUSTER_ROLE], "verbs": ["delete"]},
            // An unjoin makes its binding owned by its ClusterRole (one installed by hand is
            // not), so that the garbage collector takes the binding with the ClusterRole,
            // whose deletion is the unjoin's last step: no step could delete the binding after.
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": [AGENT_CLUSTER_ROLE], "verbs": ["get", "delete"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"], "resourceNames": [AGENT_CLUSTER_ROLE], "verbs": ["get", "patch"]},
        ],
    }))
    .unwrap_or_default()
}

/// `object` owned by `owner`, so that it is garbage-collected when `owner` is deleted: the agent
/// ClusterRole by the agent namespace, the binding by the ClusterRole. `object` unchanged when
/// `owner` has no uid yet.
pub fn owned_by<K: kube::Resource, O: kube::Resource<DynamicType = ()>>(
    mut object: K,
    owner: &O,
) -> K {
    if let Some(reference) = owner.owner_ref(&()) {
        object.meta_mut().owner_references = Some(vec![reference]);
    }
    object
}

/// Binds [`agent_cluster_role`] to the agent's ServiceAccount.
pub fn agent_cluster_role_binding() -> ClusterRoleBinding {
    from_json(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": AGENT_CLUSTER_ROLE, "labels": managed_labels([])},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGENT_CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": AGENT_DEPLOYMENT, "namespace": AGENT_NAMESPACE}],
    }))
    .unwrap_or_default()
}

/// What the agent may do in its own namespace besides: hold the Lease of its election
/// ([`ELECTION_LEASE`]; its ClusterRole lets it delete the Lease when it unjoins, after this
/// Role, so that nothing writes the Lease again).
pub fn agent_election_role() -> Role {
    from_json(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": AGENT_CLUSTER_ROLE, "namespace": AGENT_NAMESPACE, "labels": managed_labels([])},
        "rules": [
            // Creating cannot be limited to a name.
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [ELECTION_LEASE], "verbs": ["get", "update", "patch"]},
        ],
    }))
    .unwrap_or_default()
}

/// Binds [`agent_election_role`] to the agent's ServiceAccount.
pub fn agent_election_role_binding() -> RoleBinding {
    from_json(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": AGENT_CLUSTER_ROLE, "namespace": AGENT_NAMESPACE, "labels": managed_labels([])},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": AGENT_CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": AGENT_DEPLOYMENT, "namespace": AGENT_NAMESPACE}],
    }))
    .unwrap_or_default()
}

/// Port of the agent's health endpoint (`/healthz`, `/readyz`) in its pod.
pub const AGENT_HEALTH_PORT: u16 = 8000;
/// Environment variable carrying the agent version its pod was started for (from the pod's
/// labels, so the agent reports the version that runs, not one merely asked for).
pub const ENV_AGENT_VERSION: &str = "FLEETFORM_AGENT_VERSION";
/// Environment variable carrying the agent configuration hash its pod was started for.
pub const ENV_AGENT_CONFIG_HASH: &str = "FLEETFORM_AGENT_CONFIG_HASH";
/// Environment variable carrying the name of the agent's pod: its name in its election.
pub const ENV_POD_NAME: &str = "POD_NAME";

/// The command line the agent container runs; `fleetform up` parses the same arguments to start
/// its in-process agents, so they cannot disagree. `spoke_url` is the spoke's API server as the
/// hub reaches it, for the ManagedCluster's `managedClusterClientConfigs`.
pub fn agent_args(
    cluster: &str,
    effective: &EffectiveSpoke,
    spoke_url: Option<&str>,
) -> Vec<String> {
    let mut args = vec![
        "agent".to_string(),
        "--cluster-name".to_string(),
        cluster.to_string(),
        "--cluster-claims-max".to_string(),
        effective.cluster_claims_max.to_string(),
        "--client-cert-expiration-seconds".to_string(),
        effective.agent.client_cert_expiration_seconds.to_string(),
        "--deployment".to_string(),
        AGENT_DEPLOYMENT.to_string(),
        "--health-addr".to_string(),
        format!("0.0.0.0:{AGENT_HEALTH_PORT}"),
        "--leader-elect".to_string(),
    ];
    if let Some(url) = spoke_url {
        args.extend(["--spoke-url".to_string(), url.to_string()]);
    }
    args
}

/// The agent Deployment for `cluster` with `effective` settings: one replica, rolled with a
/// surge and none unavailable, so that the agent it runs keeps running until the next one is
/// ready (an upgrade to an agent that never starts leaves the spoke its working agent, which
/// takes the next commit as ever); the two never act at once, for an agent acts only while it
/// holds its Lease ([`agent_election_role`], `--leader-elect`), and is ready once it takes
/// part in that election. Probed on its health endpoint, with requests and limits, and the
/// version and configuration hash it is started for in its pod's labels, which the agent reads
/// back to report what actually runs.
pub fn agent_deployment(
    cluster: &str,
    effective: &EffectiveSpoke,
    spoke_url: Option<&str>,
) -> Deployment {
    let agent = &effective.agent;
    let image = agent
        .image
        .clone()
        .unwrap_or_else(|| format!("{DEFAULT_AGENT_IMAGE}:{}", agent.version));
    let selector = BTreeMap::from([(LABEL_APP.to_string(), APP_AGENT.to_string())]);
    let config_hash = agent.hash();
    let pod_labels = BTreeMap::from([
        (LABEL_APP.to_string(), APP_AGENT.to_string()),
        (LABEL_AGENT_VERSION.to_string(), agent.version.clone()),
        (LABEL_AGENT_CONFIG_HASH.to_string(), config_hash.clone()),
    ]);
    let from_field = |name: &str, path: String| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
    let from_label =
        |name: &str, label: &str| from_field(name, format!("metadata.labels['{label}']"));
    let probe = |path: &str| {
        json!({
            "httpGet": {"path": path, "port": "health"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        })
    };
    let template = json!({
        "metadata": {"labels": pod_labels},
        "spec": {
            "serviceAccountName": AGENT_DEPLOYMENT,
            // PodSecurity `restricted`, so the agent runs in a namespace that enforces it.
            "securityContext": {
                "runAsNonRoot": true,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [{
                "name": "agent",
                "image": image,
                "args": agent_args(cluster, effective, spoke_url),
                "env": [
                    {"name": "FLEETFORM_LOG", "value": "info"},
                    from_label(ENV_AGENT_VERSION, LABEL_AGENT_VERSION),
                    from_label(ENV_AGENT_CONFIG_HASH, LABEL_AGENT_CONFIG_HASH),
                    from_field(ENV_POD_NAME, "metadata.name".to_string()),
                ],
                "ports": [{"name": "health", "containerPort": AGENT_HEALTH_PORT}],
                "readinessProbe": probe("/readyz"),
                "livenessProbe": probe("/healthz"),
                "resources": {
                    "requests": {"cpu": "50m", "memory": "64Mi"},
                    "limits": {"memory": "256Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "runAsNonRoot": true,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        },
    });
    let template_hash = stable_hash(&template.to_string());
    from_json(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": AGENT_DEPLOYMENT,
            "namespace": AGENT_NAMESPACE,
            "labels": managed_labels([
                (LABEL_APP, APP_AGENT),
                (LABEL_CLUSTER_NAME, cluster),
                (LABEL_AGENT_VERSION, &agent.version),
                (LABEL_AGENT_CONFIG_HASH, &config_hash),
                (LABEL_AGENT_TEMPLATE_HASH, &template_hash),
            ]),
        },
        "spec": {
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": {"matchLabels": selector},
            "template": template,
        },
    }))
    .unwrap_or_default()
}

/// A digest of the Deployment [`agent_deployment`] makes of the same arguments, without making
/// it: of what it is made of (the cluster, the agent's settings, the most ClusterClaims it
/// reports, where it is told the spoke is), so that a pass asking only whether what a read of
/// the spoke depended on changed builds no Deployment. Valid within one process (the agent's
/// constants are this build's; the hasher is std's).
pub fn agent_deployment_digest(
    cluster: &str,
    effective: &EffectiveSpoke,
    spoke_url: Option<&str>,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (
        cluster,
        &effective.agent,
        effective.cluster_claims_max,
        spoke_url,
    )
        .hash(&mut hasher);
    hasher.finish()
}

/// A Deployment label's value.
pub fn deployment_label<'a>(deployment: &'a Deployment, key: &str) -> Option<&'a str> {
    deployment
        .metadata
        .labels
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Whether `current` runs what `desired` describes.
pub fn deployment_current(current: &Deployment, desired: &Deployment) -> bool {
    deployment_label(current, LABEL_AGENT_TEMPLATE_HASH).is_some()
        && deployment_label(current, LABEL_AGENT_TEMPLATE_HASH)
            == deployment_label(desired, LABEL_AGENT_TEMPLATE_HASH)
}

fn managed_labels<'a>(
    extra: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    extra
        .into_iter()
        .chain([(MANAGED_BY_LABEL, MANAGED_BY)])
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

/// Typed objects from literal JSON; the literals above are well-formed, so a failure is a bug
/// caught by the tests below, and yields an empty object rather than a panic.
fn from_json<T: serde::de::DeserializeOwned + Default>(value: Value) -> Option<T> {
    serde_json::from_value(value).ok()
}

/// The agent's objects on a spoke as one YAML stream, for installing an agent by hand
/// (`deploy/agent/agent.yaml`): exactly what the reconciler installs (the ClusterClaim CRD
/// included), minus the bootstrap Secret, which carries a credential and is created from the
/// hub's token, and the owner references that let the agent remove all of its RBAC (they name
/// uids only a live cluster has; an agent unjoining sets the one that takes its
/// ClusterRoleBinding with its ClusterRole itself).
pub fn manual_install_yaml(
    cluster: &str,
    effective: &EffectiveSpoke,
    spoke_url: Option<&str>,
) -> String {
    let documents = [
        serde_json::to_value(crate::api::cluster_claim_crd()),
        serde_json::to_value(agent_namespace()),
        serde_json::to_value(agent_service_account()),
        serde_json::to_value(agent_cluster_role()),
        serde_json::to_value(agent_cluster_role_binding()),
        serde_json::to_value(agent_election_role()),
        serde_json::to_value(agent_election_role_binding()),
        serde_json::to_value(agent_deployment(cluster, effective, spoke_url)),
    ];
    documents
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|document| serde_yaml::to_string(&document).ok())
        .map(|document| format!("---\n{document}"))
        .collect()
}

/// Name of the Role (and RoleBinding) in `fleetform-system` on the hub that lets a spoke's agent
/// read its Spoke and Hub and report on its Spoke — day 2 is the agent's.
pub fn agent_hub_role_name(cluster: &str) -> String {
    format!("fleetform:agent:{cluster}")
}

/// The Role of [`agent_hub_role_name`]: the agent's own Spoke (finalizer, status) and its Hub,
/// by name, nothing else in the namespace.
pub fn agent_hub_role(cluster: &str, hub: &str) -> Role {
    from_json(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {
            "name": agent_hub_role_name(cluster),
            "namespace": SYSTEM_NAMESPACE,
            "labels": managed_labels([(LABEL_CLUSTER_NAME, cluster)]),
        },
        "rules": [
            {"apiGroups": [GROUP], "resources": ["spokes"], "resourceNames": [cluster], "verbs": ["get", "list", "watch", "patch", "update"]},
            {"apiGroups": [GROUP], "resources": ["spokes/status"], "resourceNames": [cluster], "verbs": ["get", "patch", "update"]},
            {"apiGroups": [GROUP], "resources": ["hubs"], "resourceNames": [hub], "verbs": ["get", "list", "watch"]},
        ],
    }))
    .unwrap_or_default()
}

/// Binds [`agent_hub_role`] to `users`, the certificates of the cluster's current join (the
/// accept loop writes it as it binds the cluster's other RBAC: see [`crate::hub::acceptance`]).
pub fn agent_hub_role_binding<'a>(
    cluster: &str,
    users: impl IntoIterator<Item = &'a String>,
) -> RoleBinding {
    let subjects: Vec<Value> = users
        .into_iter()
        .map(|user| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}))
        .collect();
    from_json(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": agent_hub_role_name(cluster),
            "namespace": SYSTEM_NAMESPACE,
            "labels": managed_labels([(LABEL_CLUSTER_NAME, cluster)]),
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": agent_hub_role_name(cluster)},
        "subjects": subjects,
    }))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::desired::AgentConfig;

    #[test]
    fn the_agent_deployment_digest_moves_with_what_the_deployment_is_made_of_and_nothing_else() {
        let base = EffectiveSpoke {
            lease_duration_seconds: 60,
            cluster_claims_max: 20,
            agent: AgentConfig {
                version: "0.1.0".to_string(),
                image: None,
                hub_api_server: None,
                client_cert_expiration_seconds: 3600,
                hub_ca_bundle: None,
                hub_ca_bundle_secret_ref: None,
            },
            addons: BTreeMap::new(),
            labels: BTreeMap::new(),
        };
        let url = Some("https://edge:6443");
        let deployment = agent_deployment("edge", &base, url);
        let digest = agent_deployment_digest("edge", &base, url);
        let changed = |what: &str, effective: EffectiveSpoke, cluster: &str, url: Option<&str>| {
            let deployment_moved = agent_deployment(cluster, &effective, url) != deployment;
            let digest_moved = agent_deployment_digest(cluster, &effective, url) != digest;
            assert_eq!(
                deployment_moved, digest_moved,
                "{what}: the Deployment changed {deployment_moved}, its digest {digest_moved}"
            );
            deployment_moved
        };
        let with = |change: &dyn Fn(&mut EffectiveSpoke)| {
            let mut effective = base.clone();
            change(&mut effective);
            effective
        };
        for (what, effective) in [
            ("leases", with(&|e| e.lease_duration_seconds = 30)),
            (
                "addons",
                with(&|e| {
                    e.addons.insert("a".to_string(), "ns".to_string());
                }),
            ),
            (
                "labels",
                with(&|e| {
                    e.labels.insert("env".to_string(), "dev".to_string());
                }),
            ),
        ] {
            assert!(!changed(what, effective, "edge", url), "{what}");
        }
        for (what, effective) in [
            ("claims", with(&|e| e.cluster_claims_max = 5)),
            ("version", with(&|e| e.agent.version = "0.2.0".to_string())),
            (
                "image",
                with(&|e| e.agent.image = Some("agent:dev".to_string())),
            ),
            (
                "certificates",
                with(&|e| e.agent.client_cert_expiration_seconds = 60),
            ),
            (
                "hub CA",
                with(&|e| e.agent.hub_ca_bundle = Some("PEM".to_string())),
            ),
        ] {
            assert!(changed(what, effective, "edge", url), "{what}");
        }
        assert!(changed("cluster", base.clone(), "other", url));
        assert!(changed(
            "spoke URL",
            base.clone(),
            "edge",
            Some("https://b")
        ));
    }
}
