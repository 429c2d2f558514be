//! The production path, as a platform engineer runs fleetform on real clusters: three separate
//! `fleetform controlplane` processes over TCP stand in for a hub and two spokes; `fleetform hub`
//! and `fleetform sync` run as their own processes under the hub ServiceAccount's identity with
//! `deploy/hub/rbac.yaml`; each agent runs as its own `fleetform agent` process, started from its
//! Deployment's arguments (this test plays kubelet) under the agent ServiceAccount's identity with
//! the RBAC the reconciler installs. Only the human steps (installing fleetform on the hub,
//! handing it the spokes' kubeconfigs, creating an addon's namespace as its deployer would) use
//! an administrator. The walk: join, an addon's certificate, a commit, an unjoin and a change of
//! the hub's endpoint that reaches agents that have already pivoted.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fleetform::api::ManagedCluster;
use fleetform::api::fleet::{SYSTEM_NAMESPACE, Spoke};
use fleetform::api::vocabulary::{AGENT_NAMESPACE, HUB_KUBECONFIG_SECRET};
use fleetform::reconciler::install::{AGENT_CLUSTER_ROLE, APP_AGENT, LABEL_APP};
use fleetform_controlplane::Identities;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use support::fleet::{Repo, wait_gone};
use support::{client_for, wait_for};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// One `fleetform controlplane` process and what its administrator holds.
struct Plane {
    _process: Child,
    dir: tempfile::TempDir,
    url: String,
    admin_kubeconfig: String,
    admin: Client,
    identities: Identities,
}

impl Plane {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig_path = dir.path().join("admin.kubeconfig");
        let process = Command::new(env!("CARGO_BIN_EXE_fleetform"))
            .args(["controlplane", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("state"))
            .arg("--kubeconfig-out")
            .arg(&kubeconfig_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start fleetform controlplane");
        let admin_kubeconfig = wait_for_file(&kubeconfig_path).await;
        let parsed: serde_json::Value = serde_yaml::from_str(&admin_kubeconfig).unwrap();
        let url = parsed["clusters"][0]["cluster"]["server"]
            .as_str()
            .unwrap()
            .to_string();
        let identities = Identities::from_data_dir(&url, &dir.path().join("state")).unwrap();
        Plane {
            _process: process,
            admin: client_for(&admin_kubeconfig).await,
            admin_kubeconfig,
            dir,
            url,
            identities,
        }
    }

    /// Writes a kubeconfig of the ServiceAccount `namespace`/`name` and returns its path.
    fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let path = self
            .dir
            .path()
            .join(format!("{namespace}.{name}.kubeconfig"));
        let kubeconfig = self
            .identities
            .service_account_kubeconfig(namespace, name)
            .unwrap();
        std::fs::write(&path, kubeconfig).unwrap();
        path
    }

    fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state/pki/ca.crt")).unwrap()
    }
}

async fn wait_for_file(path: &Path) -> String {
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} never appeared", path.display());
}

/// A `fleetform` process that is stopped when the test ends.
fn fleetform(args: &[&str], kubeconfig: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("FLEETFORM_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start fleetform")
}

/// Whether the kernel may back `process`'s memory with transparent huge pages (its status's
/// `THP_enabled`).
fn thp_enabled(process: &Child) -> String {
    let pid = process.id().expect("the process runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("THP_enabled:"))
        .unwrap_or_else(|| panic!("the kernel reports no THP_enabled: {status}"))
        .trim()
        .to_string()
}

/// Plays kubelet for the agent Deployments of one spoke: runs each as a `fleetform agent`
/// process with its container's arguments and environment, as its pod's ServiceAccount,
/// restarting it when the template changes (its pods' readiness: [`pod_readiness`]).
fn kubelet(spoke: &Plane) -> JoinHandle<()> {
    let admin = spoke.admin.clone();
    let identities = spoke.identities.clone();
    let dir = spoke.dir.path().to_path_buf();
    tokio::spawn(async move {
        let deployments: Api<Deployment> = Api::namespaced(admin, AGENT_NAMESPACE);
        let config = watcher::Config::default().labels(&format!("{LABEL_APP}={APP_AGENT}"));
        let mut events = watcher(deployments, config).default_backoff().boxed();
        let mut running: Option<(String, Child)> = None;
        while let Some(event) = events.next().await {
            let (deleted, deployment) = match event {
                Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => (false, d),
                Ok(watcher::Event::Delete(d)) => (true, d),
                _ => continue,
            };
            let template = deployment.spec.clone().unwrap_or_default().template;
            let fingerprint = serde_json::to_string(&template).unwrap();
            if deleted || deployment.metadata.deletion_timestamp.is_some() {
                running = None;
                continue;
            }
            if running
                .as_ref()
                .is_some_and(|(seen, _)| *seen == fingerprint)
            {
                continue;
            }
            let pod = template.spec.unwrap_or_default();
            let container = pod.containers[0].clone();
            let labels = template
                .metadata
                .unwrap_or_default()
                .labels
                .unwrap_or_default();
            let mut env = BTreeMap::new();
            for var in container.env.unwrap_or_default() {
                let value = match (var.value, var.value_from) {
                    (Some(value), _) => value,
                    (None, Some(from)) => {
                        let path = from.field_ref.unwrap().field_path;
                        if path == "metadata.name" {
                            pod_name(&deployment.name_any(), &fingerprint)
                        } else {
                            let key = path
                                .trim_start_matches("metadata.labels['")
                                .trim_end_matches("']");
                            labels.get(key).cloned().unwrap_or_default()
                        }
                    }
                    _ => continue,
                };
                env.insert(var.name, value);
            }
            // Each pod has a network namespace of its own; here they share the host's.
            let mut args = container.args.unwrap_or_default();
            if let Some(at) = args.iter().position(|arg| arg == "--health-addr") {
                args[at + 1] = "127.0.0.1:0".to_string();
            }
            let service_account = pod.service_account_name.unwrap_or_default();
            let kubeconfig = dir.join(format!("pod.{service_account}.kubeconfig"));
            std::fs::write(
                &kubeconfig,
                identities
                    .service_account_kubeconfig(AGENT_NAMESPACE, &service_account)
                    .unwrap(),
            )
            .unwrap();
            // The old agent is stopped as kubelet stops a pod (SIGTERM, then its grace), so it
            // lets go of its election Lease, before the new one starts.
            if let Some((_, old)) = running.take() {
                stop_gracefully(old).await;
            }
            let child = Command::new(env!("CARGO_BIN_EXE_fleetform"))
                .args(&args)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .envs(env)
                .env("FLEETFORM_LOG", "warn")
                .stdout(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("start the agent");
            running = Some((fingerprint, child));
        }
    })
}

/// Plays kubelet's part in the pods of one spoke's agent namespace: each pod the control
/// plane's ReplicaSet controller makes is reported Running and Ready (its agent is the process
/// [`kubelet`] runs), so the deployment controller reports the Deployment available.
fn pod_readiness(spoke: &Plane) -> JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(spoke.admin.clone(), AGENT_NAMESPACE);
    tokio::spawn(async move {
        let mut changes = watcher(pods.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(pod)) = changes.next().await {
            let ready = pod
                .status
                .as_ref()
                .and_then(|status| status.conditions.as_ref())
                .is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                });
            if ready || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let status = json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}});
            let _ = pods
                .patch_status(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await;
        }
    })
}

/// The name of the pod of `deployment` running the template `fingerprint`, shaped as a
/// ReplicaSet names its pods.
fn pod_name(deployment: &str, fingerprint: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    fingerprint.hash(&mut hasher);
    format!(
        "{deployment}-{:010x}-agent",
        hasher.finish() & 0xff_ffff_ffff
    )
}

/// Stops an agent as kubelet stops its container: SIGTERM, and SIGKILL once its grace is over.
async fn stop_gracefully(mut agent: Child) {
    if let Some(pid) = agent.id().and_then(|pid| i32::try_from(pid).ok()) {
        // SAFETY: a plain kill(2) of a child this test started and has not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    if tokio::time::timeout(Duration::from_secs(30), agent.wait())
        .await
        .is_err()
    {
        let _ = agent.kill().await;
    }
}

fn hub_document(hub: &Plane, api_server: &str) -> String {
    let ca: String = hub
        .ca_pem()
        .lines()
        .map(|line| format!("    {line}\n"))
        .collect();
    format!(
        "apiVersion: fleetform.io/v1alpha1
kind: Hub
metadata:
  name: hub
spec:
  kubeconfig:
    inCluster: true
  apiServer: {api_server}
  caBundle: |
{ca}  registration:
    leaseDurationSeconds: 1
"
    )
}

const ADDON: &str = "apiVersion: fleetform.io/v1alpha1
kind: AddOn
metadata:
  name: hello
spec:
  installNamespace: hello-ns
  registrations:
    - signerName: kubernetes.io/kube-apiserver-client
";

fn spoke_document(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: fleetform.io/v1alpha1
kind: Spoke
metadata:
  name: {name}
spec:
  hubRef: hub
  kubeconfig:
    secretRef: {{namespace: fleetform-system, name: {name}-kubeconfig, key: kubeconfig}}
  addons: [hello]
{extra}"
    )
}

fn joined_and_available(cluster: &ManagedCluster) -> bool {
    cluster.is_joined() && cluster.is_available()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_component_in_its_own_process_with_its_production_identity() {
    let hub = Plane::start().await;
    let spoke_a = Plane::start().await;
    let spoke_b = Plane::start().await;

    // What a human does on the hub: install fleetform, hand it the spokes' kubeconfigs.
    fleetform::apply::install_hub("hub", &hub.admin)
        .await
        .unwrap();
    fleetform::deploy::install_hub_rbac(&hub.admin)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(hub.admin.clone(), SYSTEM_NAMESPACE);
    for (name, spoke) in [("a", &spoke_a), ("b", &spoke_b)] {
        let mut secret = Secret::default();
        secret.metadata.name = Some(format!("{name}-kubeconfig"));
        secret.data = Some(BTreeMap::from([(
            "kubeconfig".to_string(),
            ByteString(spoke.admin_kubeconfig.clone().into_bytes()),
        )]));
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
    let repo = Repo::new();
    repo.commit(
        "a hub, an addon and two spokes",
        &[
            ("hubs/hub.yaml", Some(&hub_document(&hub, &hub.url))),
            ("addons/hello.yaml", Some(ADDON)),
            ("spokes/a.yaml", Some(&spoke_document("a", ""))),
            ("spokes/b.yaml", Some(&spoke_document("b", ""))),
        ],
    );
    let fleetsync = json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
        "metadata": {"name": "fleet", "namespace": SYSTEM_NAMESPACE},
        "spec": {"repo": repo.path().display().to_string(), "ref": "HEAD",
                 "intervalSeconds": 1, "allowPrune": true},
    });
    Api::<fleetform::api::FleetSync>::namespaced(hub.admin.clone(), SYSTEM_NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(fleetsync).unwrap(),
        )
        .await
        .unwrap();

    // fleetform on the hub, as its ServiceAccount; a kubelet per spoke.
    let hub_identity = hub.service_account_kubeconfig(
        fleetform::deploy::HUB_SERVICE_ACCOUNT_NAMESPACE,
        fleetform::deploy::HUB_SERVICE_ACCOUNT,
    );
    let hub_loops = fleetform(&["hub", "--metrics-addr", "127.0.0.1:0"], &hub_identity);
    let sync = fleetform(
        &[
            "sync",
            "--metrics-addr",
            "127.0.0.1:0",
            "--lease-duration-seconds",
            "2",
        ],
        &hub_identity,
    );
    let kubelets = [
        kubelet(&spoke_a),
        kubelet(&spoke_b),
        pod_readiness(&spoke_a),
        pod_readiness(&spoke_b),
    ];

    // Join: both registered by certificate, accepted, joined, available.
    let clusters: Api<ManagedCluster> = Api::all(hub.admin.clone());
    for name in ["a", "b"] {
        wait_for(
            &clusters,
            name,
            "joined and available",
            joined_and_available,
        )
        .await;
    }

    // Every write fleetform made names its writer: none is left to kube-apiserver's `unknown`,
    // the field manager of a write that names neither a manager nor a User-Agent.
    let spokes: Api<Spoke> = Api::namespaced(hub.admin.clone(), SYSTEM_NAMESPACE);
    let namespaces: Api<Namespace> = Api::all(hub.admin.clone());
    for name in ["a", "b"] {
        let cluster = clusters.get(name).await.unwrap();
        let spoke = spokes.get(name).await.unwrap();
        let namespace = namespaces.get(name).await.unwrap();
        for (kind, entries) in [
            ("ManagedCluster", cluster.managed_fields()),
            ("Spoke", spoke.managed_fields()),
            ("Namespace", namespace.managed_fields()),
        ] {
            let managers: Vec<_> = entries
                .iter()
                .filter_map(|e| e.manager.as_deref())
                .collect();
            assert!(
                !managers.is_empty() && managers.iter().all(|m| m.starts_with("fleetform")),
                "{kind} {name} written by {managers:?}"
            );
        }
    }

    // The hub and the sync (which have run by now) keep no transparent huge pages, counted
    // whole in the RSS their pods are sized on.
    for process in [&hub_loops, &sync] {
        assert_eq!(thp_enabled(process), "0");
    }

    // An addon: once its deployer made its namespace, the agent gets its certificate.
    Api::<Namespace>::all(spoke_a.admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "hello-ns"}})).unwrap(),
        )
        .await
        .unwrap();
    wait_for(
        &Api::<Secret>::namespaced(spoke_a.admin.clone(), "hello-ns"),
        "hello-hub-kubeconfig",
        "the addon's certificate",
        |_| true,
    )
    .await;

    // A commit: a's leases get longer.
    repo.commit(
        "a: 2 s leases",
        &[(
            "spokes/a.yaml",
            Some(&spoke_document("a", "  leaseDurationSeconds: 2\n")),
        )],
    );
    wait_for(&clusters, "a", "2 s leases", |c| {
        c.lease_duration_seconds() == 2
    })
    .await;

    // Unjoin: b leaves; its agent removes itself with its own rights, RBAC included.
    repo.commit("b leaves", &[("spokes/b.yaml", None)]);
    wait_gone(&spokes, "b").await;
    wait_gone(&clusters, "b").await;
    wait_gone(
        &Api::<Namespace>::all(spoke_b.admin.clone()),
        AGENT_NAMESPACE,
    )
    .await;
    wait_gone(
        &Api::<ClusterRole>::all(spoke_b.admin.clone()),
        AGENT_CLUSTER_ROLE,
    )
    .await;

    // The hub's endpoint changes (another name its certificate serves): a's pivoted agent
    // is given the new address and registers through it.
    let localhost = hub.url.replace("127.0.0.1", "localhost");
    repo.commit(
        "the hub behind another name",
        &[("hubs/hub.yaml", Some(&hub_document(&hub, &localhost)))],
    );
    let agent_secrets: Api<Secret> = Api::namespaced(spoke_a.admin.clone(), AGENT_NAMESPACE);
    let expected = localhost.clone();
    wait_for(
        &agent_secrets,
        HUB_KUBECONFIG_SECRET,
        "the new endpoint",
        move |secret| {
            secret
                .data
                .as_ref()
                .and_then(|data| data.get("kubeconfig"))
                .is_some_and(|kubeconfig| {
                    String::from_utf8_lossy(&kubeconfig.0).contains(&expected)
                })
        },
    )
    .await;
    wait_for(&clusters, "a", "joined and available", joined_and_available).await;
    for kubelet in kubelets {
        kubelet.abort();
    }
}
