//! The install set, rendered without I/O: every object a hub runs fleetform with — the CRDs,
//! the `fleetform-system` namespace, the hub ServiceAccount and its RBAC, the Service of the
//! addon kinds' conversion webhook, the Deployment running `fleetform hub` and `fleetform sync`,
//! and optionally a FleetSync — in the order they are applied, and the files of `deploy/` (a
//! kustomize base) rendered from them.
//!
//! This is the one source: `fleetform install` applies it, `fleetform install --export` prints
//! it, `fleetform up` and the tests grant the hub ServiceAccount [`hub_rbac`], and a test keeps
//! `deploy/` equal to [`deploy_files`].

use serde_json::{Value, json};

use crate::api::fleet::{FleetSyncSpec, SYSTEM_NAMESPACE};
use crate::api::schema::{CONVERSION_PORT, CONVERSION_SERVICE};
use crate::api::vocabulary::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::plan::desired::{AgentConfig, DEFAULT_AGENT_VERSION, EffectiveSpoke};
use crate::reconciler::install::{DEFAULT_AGENT_IMAGE, manual_install_yaml};

use super::{HUB_SERVICE_ACCOUNT, HUB_SERVICE_ACCOUNT_NAMESPACE};

/// Name of the hub's Deployment (and of the Service in front of its conversion webhook).
pub const HUB_DEPLOYMENT: &str = CONVERSION_SERVICE;
/// Name of the hub ServiceAccount's ClusterRole and ClusterRoleBinding.
pub const HUB_CLUSTER_ROLE: &str = "fleetform:hub";
/// Name of the FleetSync `fleetform install --sync-repo` writes.
pub const FLEET_SYNC: &str = "fleet";
/// Label selecting the hub's pods.
const LABEL_APP: &str = "app";
/// Where the sync container keeps its clones: an emptyDir, as the root filesystem is read-only.
const SYNC_CACHE_DIR: &str = "/var/cache/fleetform";
/// Port of the sync container's `/metrics`, `/healthz` and `/readyz`.
const SYNC_METRICS_PORT: i32 = 9090;
/// Port of the hub container's `/metrics`, `/healthz` and `/readyz`.
const HUB_METRICS_PORT: i32 = 9091;
/// Replicas of the hub Deployment unless told otherwise: the hub loops and sync each elect a
/// leader, so a second replica takes over within a Lease's duration when one goes.
pub const DEFAULT_REPLICAS: i32 = 2;
/// Port of the sync container's push receiver.
const SYNC_WEBHOOK_PORT: i32 = 9292;
/// Name of the Service in front of the push receiver.
pub const SYNC_WEBHOOK_SERVICE: &str = "fleetform-sync-webhook";

/// The image of this fleetform: the one `install` runs unless told otherwise.
pub fn default_image() -> String {
    format!("{DEFAULT_AGENT_IMAGE}:{DEFAULT_AGENT_VERSION}")
}

/// What an installation can be told; everything else is fixed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubSettings {
    /// The image both containers run.
    pub image: String,
    /// Replicas of the hub Deployment.
    pub replicas: i32,
    /// `fleetform hub --agent-hub-url`: where agents reach the hub, for Hubs that set no
    /// `spec.apiServer`.
    pub agent_hub_url: Option<String>,
    /// The fleet repo the hub follows, as the FleetSync [`FLEET_SYNC`].
    pub fleet_sync: Option<FleetSyncSpec>,
}

impl Default for HubSettings {
    fn default() -> Self {
        HubSettings {
            image: default_image(),
            replicas: DEFAULT_REPLICAS,
            agent_hub_url: None,
            fleet_sync: None,
        }
    }
}

/// The install set for `settings`, in the order it is applied: the order kustomize puts a
/// build in (namespace, CRDs, ServiceAccount, RBAC, Service, Deployment; kinds it does not know
/// last), so that `install --export` and `kubectl kustomize deploy/` print the same. It is a
/// dependency order too: the namespace before what lives in it, and the FleetSync (if any)
/// after its CRD.
pub fn hub_manifests(settings: &HubSettings) -> Vec<Value> {
    let mut manifests = vec![namespace()];
    manifests.extend(crds());
    manifests.extend(hub_rbac());
    manifests.push(conversion_service());
    manifests.push(sync_webhook_service());
    manifests.push(hub_deployment(settings));
    manifests.extend(settings.fleet_sync.as_ref().map(fleet_sync));
    manifests
}

/// fleetform's CRDs as manifests, by name (kustomize's order within a kind).
fn crds() -> Vec<Value> {
    let mut crds: Vec<Value> = crate::api::crds()
        .iter()
        .filter_map(|crd| serde_json::to_value(crd).ok())
        .collect();
    crds.sort_by(|a, b| {
        let name = |crd: &Value| {
            crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        name(a).cmp(&name(b))
    });
    crds
}

fn marked(extra: Value) -> Value {
    let mut labels = json!({ MANAGED_BY_LABEL: MANAGED_BY });
    if let (Some(labels), Value::Object(extra)) = (labels.as_object_mut(), extra) {
        labels.extend(extra);
    }
    labels
}

/// fleetform's namespace on a hub: its Hub, Spoke and FleetSync objects and the controller.
pub fn namespace() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": SYSTEM_NAMESPACE, "labels": marked(json!({}))},
    })
}

/// The hub ServiceAccount, its ClusterRole and the binding: what `fleetform hub` (hub loops,
/// lifecycle reconciler, conversion webhook) and `fleetform sync` may do. Nothing here is
/// cluster-admin, and the role cannot grant more than it holds (no `escalate` or `bind`): the
/// RBAC the hub writes for clusters (per-cluster roles, the bootstrap role, an agent's role in
/// `fleetform-system`) grants only rights this role has itself.
pub fn hub_rbac() -> Vec<Value> {
    let all = json!([
        "get", "list", "watch", "create", "update", "patch", "delete"
    ]);
    let read = json!(["get", "list", "watch"]);
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": HUB_SERVICE_ACCOUNT,
                "namespace": HUB_SERVICE_ACCOUNT_NAMESPACE,
                "labels": marked(json!({})),
            },
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": HUB_CLUSTER_ROLE, "labels": marked(json!({}))},
            "rules": [
                // Its own kinds: sync writes Hubs and Spokes, the reconciler their finalizers
                // and status, sync the FleetSyncs' status.
                {"apiGroups": ["fleetform.io"],
                 "resources": ["hubs", "hubs/status", "spokes", "spokes/status", "fleetsyncs", "fleetsyncs/status"],
                 "verbs": all},
                // Registration: the reconciler and hub loops keep ManagedClusters (spec, status,
                // deletion on unjoin).
                {"apiGroups": ["cluster.open-cluster-management.io"],
                 "resources": ["managedclusters", "managedclusters/status", "clusterclaims"],
                 "verbs": all},
                // The default and global sets OCM's hub keeps, and each Spoke's cluster set.
                {"apiGroups": ["cluster.open-cluster-management.io"],
                 "resources": ["managedclustersets"],
                 "verbs": ["get", "list", "watch", "create"]},
                // OCM's admission (and fleetform's embedded one) lets only holders of these set
                // hubAcceptsClient (accepting declared or auto-approved clusters) and a
                // ManagedCluster's clusterset label (a Spoke's cluster set).
                {"apiGroups": ["register.open-cluster-management.io"],
                 "resources": ["managedclusters/accept"],
                 "verbs": ["update"]},
                {"apiGroups": ["cluster.open-cluster-management.io"],
                 "resources": ["managedclustersets/join"],
                 "verbs": ["create"]},
                // Addons: enablement per spoke, their registrations and health, one
                // ClusterManagementAddOn per AddOn.
                {"apiGroups": ["addon.open-cluster-management.io"],
                 "resources": ["managedclusteraddons", "managedclusteraddons/status", "clustermanagementaddons"],
                 "verbs": all},
                // Read only: active ManifestWorks hold an unjoin.
                {"apiGroups": ["work.open-cluster-management.io"],
                 "resources": ["manifestworks"],
                 "verbs": read},
                // Registration and addon CSRs: approval, signing for custom signers, cleanup.
                {"apiGroups": ["certificates.k8s.io"],
                 "resources": ["certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"],
                 "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                {"apiGroups": ["certificates.k8s.io"],
                 "resources": ["signers"],
                 "verbs": ["approve", "sign"]},
                // Cluster namespaces (created on accept, deleted on unjoin); bootstrap token
                // Secrets in kube-system, the webhook's certificate, spokes' kubeconfig and
                // signers' CA Secrets; Events.
                {"apiGroups": [""],
                 "resources": ["namespaces", "secrets", "serviceaccounts", "events"],
                 "verbs": all},
                // Events: published by every loop, and read by sync's dashboard
                // (`--dashboard-addr`), which shows them.
                {"apiGroups": ["events.k8s.io"],
                 "resources": ["events"],
                 "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                // Cluster leases (expiry), and the leader elections of the hub loops
                // (`fleetform-hub`) and sync (`fleetform-sync`).
                {"apiGroups": ["coordination.k8s.io"],
                 "resources": ["leases"],
                 "verbs": all},
                // The per-cluster RBAC of accepted clusters, the bootstrap role, and each
                // agent's role for its Spoke.
                {"apiGroups": ["rbac.authorization.k8s.io"],
                 "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"],
                 "verbs": all},
                // CRDs: day 0 of `apply` and the conversion webhook's caBundle; never delete.
                {"apiGroups": ["apiextensions.k8s.io"],
                 "resources": ["customresourcedefinitions"],
                 "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                // Read only, OCM's registration webhook only: whether it checks who may accept a
                // cluster, so that a person's acceptance of one not in git is honoured.
                {"apiGroups": ["admissionregistration.k8s.io"],
                 "resources": ["validatingwebhookconfigurations"],
                 "resourceNames": [crate::hub::acceptance::OCM_MANAGED_CLUSTER_VALIDATOR],
                 "verbs": ["get"]},
                // Read only, and only because the agent's ClusterRole on a hub that is its own
                // spoke (inCluster) reads nodes, and the hub may grant only what it holds.
                {"apiGroups": [""],
                 "resources": ["nodes"],
                 "verbs": read},
                // The agent Deployment of the hub as its own spoke (inCluster).
                {"apiGroups": ["apps"],
                 "resources": ["deployments", "deployments/status"],
                 "verbs": all},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": HUB_CLUSTER_ROLE, "labels": marked(json!({}))},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": HUB_CLUSTER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": HUB_SERVICE_ACCOUNT, "namespace": HUB_SERVICE_ACCOUNT_NAMESPACE}],
        }),
    ]
}

/// The Service the addon CRDs send their ConversionReviews to (`/convert` on its port 9443),
/// served by the hub container.
pub fn conversion_service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": CONVERSION_SERVICE,
            "namespace": SYSTEM_NAMESPACE,
            "labels": marked(json!({ LABEL_APP: HUB_DEPLOYMENT })),
        },
        "spec": {
            // The webhook answers as soon as the hub container runs; the pod's readiness also
            // waits on the leading sync's first pass, which must not take conversion down with
            // it.
            "publishNotReadyAddresses": true,
            "selector": { LABEL_APP: HUB_DEPLOYMENT },
            "ports": [{"name": "webhook", "port": CONVERSION_PORT, "targetPort": "webhook", "protocol": "TCP"}],
        },
    })
}

/// The Service in front of sync's push receiver (`POST /hooks/FLEETSYNC` on its port 80):
/// expose it (an Ingress, a LoadBalancer) for the repository's host to reach.
pub fn sync_webhook_service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": SYNC_WEBHOOK_SERVICE,
            "namespace": SYSTEM_NAMESPACE,
            "labels": marked(json!({ LABEL_APP: HUB_DEPLOYMENT })),
        },
        "spec": {
            // Every replica receives: the fetch request it writes reaches the leader.
            "selector": { LABEL_APP: HUB_DEPLOYMENT },
            "ports": [{"name": "push", "port": 80, "targetPort": "push", "protocol": "TCP"}],
        },
    })
}

/// The hub Deployment: `fleetform hub` (hub loops, lifecycle reconciler, conversion webhook)
/// and `fleetform sync` (the FleetSyncs of `fleetform-system`), as the hub ServiceAccount.
pub fn hub_deployment(settings: &HubSettings) -> Value {
    let mut hub_args = vec![
        "hub".to_string(),
        "--webhook-addr".to_string(),
        format!("0.0.0.0:{CONVERSION_PORT}"),
        "--metrics-addr".to_string(),
        format!("0.0.0.0:{HUB_METRICS_PORT}"),
    ];
    if let Some(url) = &settings.agent_hub_url {
        hub_args.extend(["--agent-hub-url".to_string(), url.clone()]);
    }
    let security = json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "capabilities": {"drop": ["ALL"]},
    });
    let log = json!({"name": "FLEETFORM_LOG", "value": "info"});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": HUB_DEPLOYMENT,
            "namespace": SYSTEM_NAMESPACE,
            "labels": marked(json!({ LABEL_APP: HUB_DEPLOYMENT })),
        },
        "spec": {
            "replicas": settings.replicas,
            "selector": {"matchLabels": { LABEL_APP: HUB_DEPLOYMENT }},
            "template": {
                "metadata": {"labels": { LABEL_APP: HUB_DEPLOYMENT }},
                "spec": {
                    "serviceAccountName": HUB_SERVICE_ACCOUNT,
                    // PodSecurity `restricted`, so the hub runs in a namespace that enforces it.
                    "securityContext": {
                        "runAsNonRoot": true,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "hub",
                            "image": settings.image,
                            "args": hub_args,
                            "env": [
                                log,
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            ],
                            "ports": [
                                {"name": "webhook", "containerPort": CONVERSION_PORT},
                                {"name": "hub-metrics", "containerPort": HUB_METRICS_PORT},
                            ],
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "hub-metrics"}},
                            // A follower is ready too: it serves the conversion webhook.
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": "hub-metrics"}},
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                            "securityContext": security,
                        },
                        {
                            "name": "sync",
                            "image": settings.image,
                            "args": [
                                "sync",
                                "--metrics-addr", format!("0.0.0.0:{SYNC_METRICS_PORT}"),
                                "--webhook-addr", format!("0.0.0.0:{SYNC_WEBHOOK_PORT}"),
                            ],
                            "env": [
                                log,
                                {"name": "FLEETFORM_CACHE_DIR", "value": SYNC_CACHE_DIR},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            ],
                            "ports": [
                                {"name": "metrics", "containerPort": SYNC_METRICS_PORT},
                                {"name": "push", "containerPort": SYNC_WEBHOOK_PORT},
                            ],
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}},
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"}},
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                            "securityContext": security,
                            "volumeMounts": [{"name": "cache", "mountPath": SYNC_CACHE_DIR}],
                        },
                    ],
                    "volumes": [{"name": "cache", "emptyDir": {}}],
                },
            },
        },
    })
}

/// The FleetSync [`FLEET_SYNC`]: the fleet repo the hub follows.
pub fn fleet_sync(spec: &FleetSyncSpec) -> Value {
    json!({
        "apiVersion": "fleetform.io/v1alpha1",
        "kind": "FleetSync",
        "metadata": {"name": FLEET_SYNC, "namespace": SYSTEM_NAMESPACE, "labels": marked(json!({}))},
        "spec": spec,
    })
}

/// Documents as one YAML stream (`---` before each), ready for `kubectl apply -f -`.
pub fn yaml_stream(documents: &[Value]) -> String {
    documents
        .iter()
        .filter_map(|document| serde_yaml::to_string(document).ok())
        .map(|document| format!("---\n{document}"))
        .collect()
}

/// What an agent installed by hand is rendered for (`fleetform install agent --export`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSettings {
    pub cluster_name: String,
    /// The hub's `spec.apiServer`.
    pub hub_url: Option<String>,
    /// The spoke's API server as the hub reaches it (the ManagedCluster's client config).
    pub spoke_url: Option<String>,
    /// The agent's image (default: this fleetform's).
    pub image: Option<String>,
}

/// The agent's objects on a spoke, as the lifecycle reconciler renders them for a spoke with
/// the fleet's defaults (see [`manual_install_yaml`]).
pub fn agent_yaml(settings: &AgentSettings) -> String {
    let effective = EffectiveSpoke {
        lease_duration_seconds: crate::api::fleet::RegistrationSpec::default()
            .lease_duration_seconds,
        cluster_claims_max: crate::api::fleet::RegistrationSpec::default().cluster_claims_max,
        agent: AgentConfig {
            version: DEFAULT_AGENT_VERSION.to_string(),
            image: settings.image.clone(),
            hub_api_server: settings.hub_url.clone(),
            client_cert_expiration_seconds: crate::api::fleet::RegistrationSpec::default()
                .client_cert_expiration_seconds,
            hub_ca_bundle: None,
            hub_ca_bundle_secret_ref: None,
        },
        addons: Default::default(),
        labels: Default::default(),
    };
    manual_install_yaml(
        &settings.cluster_name,
        &effective,
        settings.spoke_url.as_deref(),
    )
}

/// How `deploy/`'s files say they are regenerated.
const REGENERATE: &str = "FLEETFORM_BLESS=1 cargo test --test integration deploy::";

/// Every generated file of `deploy/` (path relative to it, contents): the kustomize base —
/// `kustomization.yaml`, the CRDs (`crds/`, as `fleetform crds --out-dir` writes them) and
/// `hub/` — which builds to what `install --export` prints with its defaults; the example
/// FleetSync, kept out of the base (a FleetSync applied together with its CRD fails on a fresh
/// cluster: its kind is not served yet when kubectl maps it); and the agent as the reconciler
/// installs it.
pub fn deploy_files() -> Vec<(String, String)> {
    let generated = |what: &str, body: String| format!("{what}\n# Generated: {REGENERATE}\n{body}");
    let hub = |name: &str, what: &str, documents: &[Value]| {
        (
            format!("hub/{name}"),
            generated(what, yaml_stream(documents)),
        )
    };
    let mut crd_files: Vec<(String, String)> = crate::api::crd_files()
        .into_iter()
        .map(|(name, yaml)| (format!("crds/{name}"), yaml))
        .collect();
    crd_files.sort();
    let namespace = hub(
        "namespace.yaml",
        "# fleetform's namespace on a hub: Hub, Spoke and FleetSync objects, and the controller.",
        &[namespace()],
    );
    let rest = [
        hub(
            "rbac.yaml",
            "# The hub ServiceAccount and what it may do (docs/install/rbac.md says why).",
            &hub_rbac(),
        ),
        hub(
            "service.yaml",
            "# The addon kinds' conversion webhook (the CRDs send ConversionReviews to /convert), and\n\
             # sync's push receiver (POST /hooks/FLEETSYNC; expose it for the repository's host).",
            &[conversion_service(), sync_webhook_service()],
        ),
        hub(
            "deployment.yaml",
            "# fleetform hub (hub loops, lifecycle reconciler, conversion webhook) and fleetform sync.",
            &[hub_deployment(&HubSettings::default())],
        ),
    ];
    // The install set's own order (kustomize sorts a build by kind anyway).
    let resources: String = std::iter::once(&namespace)
        .chain(&crd_files)
        .chain(&rest)
        .map(|(path, _)| format!("- {path}\n"))
        .collect();
    let kustomization = generated(
        "# fleetform on a hub: `kubectl apply -k deploy/`, or the base of an overlay that sets the\n\
         # image, replicas or resources (see docs/install/hub.md).",
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{resources}"
        ),
    );
    let example = FleetSyncSpec {
        repo: "https://github.com/example/fleet.git".to_string(),
        git_ref: "main".to_string(),
        path: Some("fleet".to_string()),
        interval_seconds: 60,
        allow_prune: false,
        verify: None,
        webhook: None,
        notify: Vec::new(),
    };
    let fleet_sync = generated(
        "# The fleet repo a hub follows: edit repo, ref and path, and apply it once the base is\n\
         # installed (a private repo: give the sync container FLEETFORM_GIT_TOKEN).",
        yaml_stream(&[fleet_sync(&example)]),
    );
    let agent = AgentSettings {
        cluster_name: "spoke-1".to_string(),
        hub_url: None,
        spoke_url: Some("https://spoke-1.example.com:6443".to_string()),
        image: None,
    };
    let agent = generated(
        "# The agent of the spoke `spoke-1`, as the lifecycle reconciler installs it (see README.md):\n\
         # fleetform install agent --export --cluster-name spoke-1 --spoke-url https://spoke-1.example.com:6443",
        agent_yaml(&agent),
    );
    let mut files = vec![("kustomization.yaml".to_string(), kustomization), namespace];
    files.extend(crd_files);
    files.extend(rest);
    files.push(("examples/fleetsync.yaml".to_string(), fleet_sync));
    files.push(("agent/agent.yaml".to_string(), agent));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hub_rbac_grants_the_hub_service_account_and_nothing_else() {
        let documents = hub_rbac();
        let kinds: Vec<&str> = documents
            .iter()
            .filter_map(|d| d["kind"].as_str())
            .collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
        );
        assert_eq!(
            documents[2]["subjects"],
            json!([{
                "kind": "ServiceAccount",
                "name": HUB_SERVICE_ACCOUNT,
                "namespace": HUB_SERVICE_ACCOUNT_NAMESPACE,
            }])
        );
        assert_eq!(documents[2]["roleRef"]["name"], HUB_CLUSTER_ROLE);
        // Least privilege: no wildcard, and no way to grant itself more than it holds.
        for rule in documents[1]["rules"].as_array().unwrap() {
            for field in ["apiGroups", "resources", "verbs"] {
                assert!(!rule[field].to_string().contains('*'), "{rule}");
            }
            for verb in ["escalate", "bind", "impersonate"] {
                assert!(!rule["verbs"].to_string().contains(verb), "{rule}");
            }
        }
        assert!(
            !documents
                .iter()
                .any(|d| d.to_string().contains("cluster-admin"))
        );
    }

    #[test]
    fn the_install_set_is_marked_and_carries_the_rbac_the_hub_runs_with() {
        let manifests = hub_manifests(&HubSettings::default());
        for manifest in &manifests {
            assert_eq!(
                manifest["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY,
                "{}",
                manifest["metadata"]["name"]
            );
        }
        for document in hub_rbac() {
            assert!(manifests.contains(&document), "{}", document["kind"]);
        }
        // Namespace first, the Deployment last of the built-in kinds, the FleetSync after all.
        let with_sync = hub_manifests(&HubSettings {
            fleet_sync: Some(
                serde_json::from_value(json!({"repo": "https://example.com/f.git"})).unwrap(),
            ),
            ..HubSettings::default()
        });
        let kinds: Vec<&str> = with_sync
            .iter()
            .filter_map(|m| m["kind"].as_str())
            .collect();
        assert_eq!(kinds.first(), Some(&"Namespace"));
        assert_eq!(&kinds[kinds.len() - 2..], ["Deployment", "FleetSync"]);
    }

    #[test]
    fn settings_reach_the_deployment() {
        let deployment = hub_deployment(&HubSettings {
            image: "registry.example.com/fleetform:dev".to_string(),
            replicas: 3,
            agent_hub_url: Some("https://hub.example.com:6443".to_string()),
            fleet_sync: None,
        });
        assert_eq!(deployment["spec"]["replicas"], 3);
        assert_eq!(
            hub_deployment(&HubSettings::default())["spec"]["replicas"],
            2,
            "a replica takes over when the other goes"
        );
        let containers = deployment["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        for container in containers {
            assert_eq!(container["image"], "registry.example.com/fleetform:dev");
            let args: Vec<&str> = container["args"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            crate::cli::check_args(&args).unwrap();
        }
        assert_eq!(
            containers[0]["args"],
            json!([
                "hub",
                "--webhook-addr",
                "0.0.0.0:9443",
                "--metrics-addr",
                "0.0.0.0:9091",
                "--agent-hub-url",
                "https://hub.example.com:6443"
            ])
        );
        assert_eq!(
            default_image(),
            format!("ghcr.io/fleetform/fleetform:{}", env!("CARGO_PKG_VERSION"))
        );
    }
}
