//! The GitOps commands against an embedded hub: `plan` (a fresh hub plans installation and
//! joins, a converged hub plans nothing, a commit's changes show as steps and diffs), `apply`
//! (from a source or a saved plan, refusing stale ones) and `status`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use fleetform::access::{ClusterRole, embedded_kubeconfig};
use fleetform::api::fleet::SYSTEM_NAMESPACE;
use fleetform::observe::{FIELD_MANAGER, api_resource};
use fleetform::plan::desired::hub_objects;
use fleetform_controlplane::RunningControlPlane;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

/// An embedded hub named `hub` (as the example fleet declares it), registered where
/// `fleetform up` would register it.
struct EmbeddedHub {
    server: RunningControlPlane,
    data_dir: tempfile::TempDir,
    client: kube::Client,
}

impl EmbeddedHub {
    async fn start() -> Self {
        let server = fleetform::embedded::builder()
            .listen("127.0.0.1:0".parse().unwrap())
            .start()
            .await
            .expect("control plane starts");
        let data_dir = tempfile::tempdir().unwrap();
        let path = embedded_kubeconfig(data_dir.path(), ClusterRole::Hub, "hub");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, server.kubeconfig()).unwrap();
        let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        EmbeddedHub {
            server,
            data_dir,
            client,
        }
    }

    /// Does what `apply` will: CRDs, the system namespace, then every desired object.
    async fn converge(&self, fleet_dir: &Path) {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for crd in fleetform::api::crds() {
            let name = crd.metadata.name.clone().unwrap();
            crds.patch(&name, &params, &Patch::Apply(&crd))
                .await
                .expect("apply CRD");
        }
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}});
        namespaces
            .patch(SYSTEM_NAMESPACE, &params, &Patch::Apply(&namespace))
            .await
            .expect("apply namespace");
        let (_, fleet) = fleetform::source::load_fleet(&fleetform::source::SourceSpec {
            location: fleet_dir.display().to_string(),
            ..Default::default()
        })
        .expect("valid fleet");
        for (key, object) in hub_objects(&fleet, "hub") {
            let resource = api_resource(key.kind);
            let api: Api<DynamicObject> = match &key.namespace {
                Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
                None => Api::all_with(self.client.clone(), &resource),
            };
            api.patch(&key.name, &params, &Patch::Apply(&object))
                .await
                .unwrap_or_else(|err| panic!("apply {key}: {err}"));
        }
    }

    async fn plan(&self, fleet_dir: &Path, extra: &[&str]) -> Output {
        self.run("plan", fleet_dir, extra).await
    }

    /// `fleetform COMMAND FLEET_DIR EXTRA…` against this hub.
    async fn run(&self, command_name: &str, fleet_dir: &Path, extra: &[&str]) -> Output {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"));
        command
            .arg(command_name)
            .arg(fleet_dir)
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .args(extra)
            .env("NO_COLOR", "1");
        command.output().await.expect("run fleetform")
    }
}

fn example_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    support::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
        &fleet,
    );
    (dir, fleet)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Stdout and stderr of a run that must have exited with `code`.
fn exited(output: &Output, code: i32) -> (String, String) {
    let (out, err) = (
        stdout(output),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert_eq!(output.status.code(), Some(code), "{out}{err}");
    (out, err)
}

#[tokio::test]
async fn a_fresh_hub_plans_installation_joins_and_addons() {
    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    let output = hub.plan(&fleet, &[]).await;
    let text = stdout(&output);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("1. install fleetform's CRDs and hub components"),
        "{text}"
    );
    assert!(
        text.contains("join spoke dev (install its agent and bootstrap token)"),
        "{text}"
    );
    assert!(
        text.contains("enable addon observability on staging (namespace observability-staging)"),
        "{text}"
    );
    assert!(
        text.contains("+ create Spoke fleetform-system/prod"),
        "{text}"
    );
    assert!(
        text.contains("Plan: 8 to create, 0 to update, 0 to delete; 18 lifecycle steps."),
        "{text}"
    );

    for format in ["json", "yaml"] {
        let output = hub.plan(&fleet, &["-o", format]).await;
        assert_eq!(output.status.code(), Some(2), "{format}");
        let plan: serde_json::Value = serde_yaml::from_slice(&output.stdout).unwrap();
        assert_eq!(plan["formatVersion"], "1", "{format}");
        let counts = serde_json::json!({"create": 8, "update": 0, "delete": 0, "steps": 18, "pendingClusters": 0});
        assert_eq!(plan["summary"], counts, "{format}");
        assert_eq!(plan["hubs"][0]["hub"], "hub", "{format}");
        assert_eq!(plan["hubs"][0]["summary"], counts, "{format}");
    }
    hub.server.shutdown().await;
}

#[tokio::test]
async fn a_converged_hub_plans_nothing_and_a_change_shows_as_steps_and_a_diff() {
    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    hub.converge(&fleet).await;

    let unchanged = hub.plan(&fleet, &[]).await;
    assert_eq!(
        unchanged.status.code(),
        Some(0),
        "{}{}",
        stdout(&unchanged),
        String::from_utf8_lossy(&unchanged.stderr)
    );
    assert!(
        stdout(&unchanged).contains("No changes"),
        "{}",
        stdout(&unchanged)
    );

    let spokes = fleet.join("spokes/edge.yaml");
    let edited = std::fs::read_to_string(&spokes)
        .unwrap()
        .replace("leaseDurationSeconds: 10", "leaseDurationSeconds: 15")
        .replace(
            "      - config-policy\n    - name: observability",
            "    - name: observability",
        );
    std::fs::write(&spokes, edited).unwrap();
    let saved = fleet.parent().unwrap().join("plan.json");
    let changed = hub.plan(&fleet, &["--out", saved.to_str().unwrap()]).await;
    let text = stdout(&changed);
    assert_eq!(changed.status.code(), Some(2), "{text}");
    assert!(
        text.contains("change lease duration of dev from 10s to 15s"),
        "{text}"
    );
    assert!(
        text.contains("~ update Spoke fleetform-system/dev"),
        "{text}"
    );
    assert!(text.contains("-  leaseDurationSeconds: 10"), "{text}");
    assert!(text.contains("+  leaseDurationSeconds: 15"), "{text}");

    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    let versions = &saved["hubs"][0]["readVersions"];
    assert!(
        versions["Spoke fleetform-system/dev"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty()),
        "{versions}"
    );

    let markdown = hub.plan(&fleet, &["-o", "markdown"]).await;
    assert!(
        stdout(&markdown).starts_with("### fleetform plan"),
        "{}",
        stdout(&markdown)
    );
    hub.server.shutdown().await;
}

#[tokio::test]
async fn an_embedded_hub_that_is_not_running_is_a_clear_error() {
    let (_dir, fleet) = example_copy();
    let data_dir = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .arg("plan")
        .arg(&fleet)
        .arg("--data-dir")
        .arg(data_dir.path())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("hub hub: the embedded cluster has no kubeconfig at"),
        "{stderr}"
    );
    assert!(stderr.contains("fleetform up"), "{stderr}");
}

async fn fleetform(args: &[&std::ffi::OsStr]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run fleetform")
}

/// `fleetform apply` of the example fleet on `hub`, without waiting (no reconciler runs there).
async fn apply_now(hub: &EmbeddedHub, fleet: &Path) -> Output {
    fleetform(&[
        "apply".as_ref(),
        fleet.as_os_str(),
        "--data-dir".as_ref(),
        hub.data_dir.path().as_os_str(),
        "--auto-approve".as_ref(),
        "--no-wait".as_ref(),
    ])
    .await
}

#[tokio::test]
async fn apply_does_not_delete_again_a_spoke_already_being_deleted() {
    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    let first = apply_now(&hub, &fleet).await;
    assert_eq!(first.status.code(), Some(0), "{}", stdout(&first));
    // dev's unjoin takes its time: a finalizer holds it (as the reconciler's do).
    let spokes: Api<DynamicObject> = Api::namespaced_with(
        hub.client.clone(),
        SYSTEM_NAMESPACE,
        &api_resource(fleetform::plan::ObjectKind::Spoke),
    );
    let hold = serde_json::json!({"metadata": {"finalizers": ["example.com/hold"]}});
    spokes
        .patch("dev", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    // dev leaves the fleet.
    let spokes_file = fleet.join("spokes/edge.yaml");
    let text = std::fs::read_to_string(&spokes_file).unwrap();
    let without_dev: Vec<&str> = text
        .split("\n---\n")
        .filter(|document| !document.contains("name: dev\n"))
        .collect();
    std::fs::write(&spokes_file, without_dev.join("\n---\n")).unwrap();
    let deleting = apply_now(&hub, &fleet).await;
    assert_eq!(deleting.status.code(), Some(0), "{}", stdout(&deleting));
    assert!(
        stdout(&deleting).contains("hub hub: delete Spoke fleetform-system/dev"),
        "{}",
        stdout(&deleting)
    );
    let terminating = spokes.get("dev").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());

    // Applied again while dev still leaves: nothing to delete, nothing deleted.
    let again = apply_now(&hub, &fleet).await;
    let text = stdout(&again);
    assert_eq!(again.status.code(), Some(0), "{text}");
    assert!(
        !text.contains("delete Spoke fleetform-system/dev"),
        "{text}"
    );
    assert!(
        text.contains("No changes: the fleet matches the repo."),
        "{text}"
    );
    hub.server.shutdown().await;
}

#[tokio::test]
async fn apply_installs_the_hub_writes_the_plan_and_refuses_a_stale_saved_plan() {
    let hub = EmbeddedHub::start().await;
    let (dir, fleet) = example_copy();
    let data_dir = hub.data_dir.path().as_os_str();

    let applied = fleetform(&[
        "apply".as_ref(),
        fleet.as_os_str(),
        "--data-dir".as_ref(),
        data_dir,
        "--auto-approve".as_ref(),
        // No lifecycle reconciler runs on this hub: nothing would converge.
        "--no-wait".as_ref(),
    ])
    .await;
    let text = stdout(&applied);
    assert_eq!(
        applied.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    assert!(
        text.contains("hub hub: installed CRD spokes.fleetform.io"),
        "{text}"
    );
    assert!(
        text.contains("hub hub: create Spoke fleetform-system/dev"),
        "{text}"
    );
    let spokes: Api<DynamicObject> = Api::namespaced_with(
        hub.client.clone(),
        SYSTEM_NAMESPACE,
        &api_resource(fleetform::plan::ObjectKind::Spoke),
    );
    let dev = spokes.get("dev").await.expect("apply wrote the Spoke");
    assert_eq!(dev.data["spec"]["leaseDurationSeconds"], 10);
    let again = hub.plan(&fleet, &[]).await;
    assert_eq!(
        again.status.code(),
        Some(0),
        "applying converges the objects: {}",
        stdout(&again)
    );

    // A saved plan applies as long as nobody changed what it read.
    let spoke_file = fleet.join("spokes/edge.yaml");
    let edited = std::fs::read_to_string(&spoke_file)
        .unwrap()
        .replace("leaseDurationSeconds: 10", "leaseDurationSeconds: 12");
    std::fs::write(&spoke_file, edited).unwrap();
    let saved = dir.path().join("plan.json");
    let planned = hub.plan(&fleet, &["--out", saved.to_str().unwrap()]).await;
    assert_eq!(planned.status.code(), Some(2), "{}", stdout(&planned));
    let other = dir.path().join("other.json");
    hub.plan(&fleet, &["--out", other.to_str().unwrap()]).await;

    // A saved plan was reviewed when it was made: it applies without --auto-approve.
    let from_file = fleetform(&[
        "apply".as_ref(),
        saved.as_os_str(),
        "--data-dir".as_ref(),
        data_dir,
        // No lifecycle reconciler runs on this hub: nothing would converge.
        "--no-wait".as_ref(),
    ])
    .await;
    assert_eq!(
        from_file.status.code(),
        Some(0),
        "{}{}",
        stdout(&from_file),
        String::from_utf8_lossy(&from_file.stderr)
    );
    assert_eq!(
        spokes.get("dev").await.unwrap().data["spec"]["leaseDurationSeconds"],
        12
    );

    // The other saved plan read the Spoke before that apply changed it.
    let stale = fleetform(&[
        "apply".as_ref(),
        other.as_os_str(),
        "--data-dir".as_ref(),
        data_dir,
        // No lifecycle reconciler runs on this hub: nothing would converge.
        "--no-wait".as_ref(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&stale.stderr);
    assert_eq!(stale.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("plan is stale"), "{stderr}");
    assert!(
        stderr.contains("hub hub: Spoke fleetform-system/dev changed (resourceVersion"),
        "{stderr}"
    );
    hub.server.shutdown().await;
}

/// A ManagedCluster as an agent and the hub loops leave it once `name` has joined and renews.
async fn register(client: &kube::Client, name: &str) {
    let params = PatchParams::apply("test-agent").force();
    let clusters: Api<fleetform::api::ManagedCluster> = Api::all(client.clone());
    let cluster = serde_json::json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": name}, "spec": {"hubAcceptsClient": true},
    });
    clusters
        .patch(name, &params, &Patch::Apply(&cluster))
        .await
        .expect("apply cluster");
    let now = "2026-01-01T00:00:00Z";
    let status = serde_json::json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "status": {
            "conditions": [
                {"type": "ManagedClusterJoined", "status": "True", "reason": "ManagedClusterJoined", "message": "", "lastTransitionTime": now},
                {"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "ManagedClusterAvailable", "message": "", "lastTransitionTime": now},
            ],
            "clusterClaims": [{"name": "id.k8s.io", "value": name}],
        },
    });
    clusters
        .patch_status(name, &params, &Patch::Apply(&status))
        .await
        .expect("apply cluster status");
}

#[tokio::test]
async fn status_shows_one_row_per_spoke_and_follows_changes_with_watch() {
    use tokio::io::AsyncBufReadExt;

    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    hub.converge(&fleet).await;
    let data_dir = hub.data_dir.path().as_os_str();

    let status = hub.run("status", &fleet, &["-o", "json"]).await;
    assert_eq!(
        status.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();

    // `status -o json | head`: the reader went away before fleetform wrote.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let unread = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args([
            "status".as_ref(),
            fleet.as_os_str(),
            "--data-dir".as_ref(),
            data_dir,
        ])
        .args(["-o", "json"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        // Not `output()`: it would replace the closed stdout with a pipe of its own.
        .spawn()
        .unwrap()
        .wait_with_output()
        .await
        .unwrap();
    assert_eq!(unread.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&unread.stderr), "");
    let states: Vec<(&str, &str, bool)> = rows["spokes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["spoke"].as_str().unwrap(),
                row["state"].as_str().unwrap(),
                row["joined"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("dev", "PENDING", false),
            ("local-cluster", "PENDING", false),
            ("prod", "PENDING", false),
            ("staging", "PENDING", false)
        ]
    );

    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args([
            "status".as_ref(),
            fleet.as_os_str(),
            "--data-dir".as_ref(),
            data_dir,
            "--watch".as_ref(),
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start status --watch");
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut first = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.is_empty() {
            break;
        }
        first.push(line);
    }
    assert_eq!(first.len(), 5, "{first:#?}");
    assert!(first[0].starts_with("SPOKE"), "{first:#?}");

    register(&hub.client, "dev").await;
    let mut second = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.is_empty() {
                break;
            }
            second.push(line);
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), read)
        .await
        .expect("a second table after the change");
    let dev = second
        .iter()
        .find(|line| line.starts_with("dev "))
        .expect("a row for dev");
    assert!(dev.contains("ONLINE") && dev.contains("yes"), "{second:#?}");
    hub.server.shutdown().await;
}

#[tokio::test]
async fn status_watch_on_a_hub_without_the_fleetsync_crd_says_so_and_exits_1() {
    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    hub.converge(&fleet).await;
    // A hub installed before FleetSyncs existed.
    Api::<CustomResourceDefinition>::all(hub.client.clone())
        .delete("fleetsyncs.fleetform.io", &Default::default())
        .await
        .unwrap();
    let plain = hub.run("status", &fleet, &[]).await;
    assert_eq!(
        plain.status.code(),
        Some(0),
        "without --watch it has no FleetSync to show: {}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let watching = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .arg("status")
        .arg(&fleet)
        .arg("--data-dir")
        .arg(hub.data_dir.path())
        .arg("--watch")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let watched = tokio::time::timeout(support::PATIENCE, watching.wait_with_output())
        .await
        .expect("status --watch ends rather than waiting for what is not served")
        .unwrap();
    let stderr = String::from_utf8_lossy(&watched.stderr);
    assert_eq!(watched.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error: hub hub: FleetSyncs are not served there (CRD fleetsyncs.fleetform.io is not installed)"
        ) && stderr.contains("fleetform crds"),
        "{stderr}"
    );
    hub.server.shutdown().await;
}

/// `fleetform apply FLEET --no-wait` with a terminal for stdin, answering `answer`.
async fn apply_answering(hub: &EmbeddedHub, fleet: &Path, answer: &str) -> Output {
    use std::io::Write;
    let (screen, mut keyboard) = support::terminal();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .arg("apply")
        .arg(fleet)
        .arg("--data-dir")
        .arg(hub.data_dir.path())
        // No lifecycle reconciler runs on this hub: nothing would converge.
        .arg("--no-wait")
        .env("NO_COLOR", "1")
        .stdin(screen)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fleetform apply");
    // The terminal keeps the line until apply reads it.
    keyboard
        .write_all(format!("{answer}\n").as_bytes())
        .unwrap();
    let output = child.wait_with_output().await.unwrap();
    drop(keyboard);
    output
}

#[tokio::test]
async fn apply_asks_on_a_terminal_and_without_one_needs_auto_approve() {
    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    let installed = || async {
        Api::<CustomResourceDefinition>::all(hub.client.clone())
            .get_opt("spokes.fleetform.io")
            .await
            .unwrap()
            .is_some()
    };

    // No terminal to ask on (stdin is /dev/null here), and no --auto-approve.
    let unasked = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .arg("apply")
        .arg(&fleet)
        .arg("--data-dir")
        .arg(hub.data_dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let (shown, stderr) = exited(&unasked, 1);
    assert!(
        stderr.contains("stdin is not a terminal") && stderr.contains("--auto-approve"),
        "{stderr}"
    );
    assert!(
        shown.contains("+ create Spoke fleetform-system/dev"),
        "the plan is shown: {shown}"
    );
    assert!(!installed().await, "nothing is written");

    let (shown, stderr) = exited(&apply_answering(&hub, &fleet, "no").await, 1);
    assert!(
        shown.contains("Do you want to perform these actions?")
            && shown.contains("Only 'yes' will be accepted to approve."),
        "{shown}"
    );
    assert!(stderr.contains("Apply cancelled."), "{stderr}");
    assert!(!installed().await, "a declined plan writes nothing");

    let (shown, _) = exited(&apply_answering(&hub, &fleet, "yes").await, 0);
    assert!(
        shown.contains("hub hub: create Spoke fleetform-system/dev"),
        "{shown}"
    );
    assert!(installed().await);
    hub.server.shutdown().await;
}

#[tokio::test]
async fn apply_is_not_converged_when_a_spoke_it_wrote_is_deleted() {
    use tokio::io::AsyncBufReadExt;

    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    // A fleet of one spoke, dev: once it is gone, no spoke is left to wait for.
    std::fs::remove_file(fleet.join("spokes/local-cluster.yaml")).unwrap();
    let spokes_file = fleet.join("spokes/edge.yaml");
    let all = std::fs::read_to_string(&spokes_file).unwrap();
    let dev = all.split("\n---\n").next().unwrap().to_string();
    std::fs::write(&spokes_file, dev).unwrap();

    let mut apply = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .arg("apply")
        .arg(&fleet)
        .arg("--data-dir")
        .arg(hub.data_dir.path())
        .args(["--auto-approve", "--timeout", "120"])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run fleetform apply");
    let mut lines = tokio::io::BufReader::new(apply.stdout.take().unwrap()).lines();
    let mut shown = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        let applied = line.starts_with("Applied ");
        shown.push(line);
        if applied {
            break;
        }
    }
    // Someone else deletes the spoke while apply waits for it (no reconciler runs here).
    let spokes: Api<DynamicObject> = Api::namespaced_with(
        hub.client.clone(),
        SYSTEM_NAMESPACE,
        &api_resource(fleetform::plan::ObjectKind::Spoke),
    );
    spokes
        .delete("dev", &Default::default())
        .await
        .expect("delete dev");
    while let Some(line) = lines.next_line().await.unwrap() {
        shown.push(line);
    }
    let output = apply.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{shown:#?}{stderr}");
    assert!(!shown.iter().any(|line| line == "Converged."), "{shown:#?}");
    assert!(
        stderr.contains("hub hub: Spoke fleetform-system/dev was deleted after apply wrote it"),
        "{stderr}"
    );
    hub.server.shutdown().await;
}

/// Puts `status` (conditions and the rest) on a fleetform object, as its controller would.
async fn set_status(api: &Api<DynamicObject>, name: &str, kind: &str, status: serde_json::Value) {
    let patch =
        serde_json::json!({"apiVersion": "fleetform.io/v1alpha1", "kind": kind, "status": status});
    api.patch_status(
        name,
        &PatchParams::apply("test-controller").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap_or_else(|err| panic!("status of {kind} {name}: {err}"));
}

#[tokio::test]
async fn status_shows_why_a_spoke_needs_attention_and_each_fleetsync() {
    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    hub.converge(&fleet).await;
    let now = "2026-01-01T00:00:00Z";
    let spokes: Api<DynamicObject> = Api::namespaced_with(
        hub.client.clone(),
        SYSTEM_NAMESPACE,
        &api_resource(fleetform::plan::ObjectKind::Spoke),
    );
    let unreachable = "cannot reach the spoke: spoke dev: cannot use kubeconfig Secret fleetform-system/dev key \"kubeconfig\": no such key";
    set_status(
        &spokes,
        "dev",
        "Spoke",
        serde_json::json!({"phase": "Joining", "conditions": [
            {"type": "Reconciled", "status": "False", "reason": "SpokeUnreachable", "message": unreachable, "lastTransitionTime": now},
            {"type": "SpokeJoined", "status": "False", "reason": "Joining", "message": "installing the agent", "lastTransitionTime": now},
        ]}),
    )
    .await;
    set_status(
        &spokes,
        "prod",
        "Spoke",
        serde_json::json!({"phase": "Joining", "conditions": [
            {"type": "Reconciled", "status": "True", "reason": "Reconciled", "message": "the last pass went through", "lastTransitionTime": now},
            {"type": "SpokeJoined", "status": "False", "reason": "Joining", "message": "waiting for the agent to register", "lastTransitionTime": now},
        ]}),
    )
    .await;
    let fleetsyncs: Api<DynamicObject> = Api::namespaced_with(
        hub.client.clone(),
        SYSTEM_NAMESPACE,
        &kube::api::ApiResource::erase::<fleetform::api::FleetSync>(&()),
    );
    let fleetsync = serde_json::json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
        "metadata": {"name": "fleet"},
        "spec": {"repo": "https://git.example/fleet.git", "ref": "main"},
    });
    fleetsyncs
        .patch(
            "fleet",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&fleetsync),
        )
        .await
        .unwrap();
    let (good, bad) = ("1".repeat(40), "2".repeat(40));
    let stalled = format!(
        "commit {bad} is invalid; commit {good} stays in force:\n  spokes/gamma.yaml:6:3: /spec/hubRef: hubRef is required"
    );
    set_status(
        &fleetsyncs,
        "fleet",
        "FleetSync",
        serde_json::json!({
            "lastAppliedCommit": good, "lastAttemptedCommit": bad,
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "InvalidCommit", "message": stalled, "lastTransitionTime": now},
                {"type": "Stalled", "status": "True", "reason": "InvalidCommit", "message": stalled, "lastTransitionTime": now},
            ],
        }),
    )
    .await;

    let text = hub.run("status", &fleet, &[]).await;
    let (shown, _) = exited(&text, 0);
    let lines: Vec<&str> = shown.lines().collect();
    assert!(lines[0].ends_with("CLAIMS  REASON"), "{shown}");
    let row = |spoke: &str| {
        lines
            .iter()
            .find(|line| line.starts_with(&format!("{spoke} ")))
            .unwrap_or_else(|| panic!("a row for {spoke}: {shown}"))
            .to_string()
    };
    assert!(row("dev").ends_with("SpokeUnreachable"), "{shown}");
    assert!(row("prod").ends_with("Joining"), "{shown}");
    assert!(row("staging").ends_with('-'), "{shown}");
    assert!(
        lines.contains(&format!("hub/dev: SpokeUnreachable: {unreachable}").as_str()),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "FleetSync fleet on hub hub (https://git.example/fleet.git at main): Stalled, applied 1111111, attempted 2222222: InvalidCommit: {stalled}"
        )),
        "{shown}"
    );

    let json = hub.run("status", &fleet, &["-o", "json"]).await;
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let dev = report["spokes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["spoke"] == "dev")
        .unwrap();
    assert_eq!(dev["reason"], "SpokeUnreachable");
    assert_eq!(dev["message"], unreachable);
    assert_eq!(
        report["fleetSyncs"],
        serde_json::json!([{
            "fleetSync": "fleet", "hub": "hub", "repo": "https://git.example/fleet.git", "ref": "main",
            "state": "Stalled", "lastAppliedCommit": good, "lastAttemptedCommit": bad,
            "reason": "InvalidCommit", "message": stalled,
        }])
    );
    hub.server.shutdown().await;
}

#[tokio::test]
async fn status_of_an_invalid_source_shows_the_live_fleet_then_the_problems() {
    let hub = EmbeddedHub::start().await;
    let (_dir, fleet) = example_copy();
    hub.converge(&fleet).await;
    let spokes_file = fleet.join("spokes/edge.yaml");
    let broken = std::fs::read_to_string(&spokes_file).unwrap().replacen(
        "leaseDurationSeconds: 10",
        "leaseDurationSeconds: 0",
        1,
    );
    std::fs::write(&spokes_file, broken).unwrap();

    let text = hub.run("status", &fleet, &[]).await;
    let (shown, _) = exited(&text, 1);
    let position = |needle: &str| {
        shown
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} in {shown}"))
    };
    let table = position("SPOKE ");
    let dev = position("\ndev ");
    let problem = position(
        "spokes/edge.yaml:13:25: /spec/leaseDurationSeconds: must be between 1 and 3600, got 0",
    );
    assert!(table < dev && dev < problem, "{shown}");
    assert!(shown.contains("invalid: 1 error in 1 file"), "{shown}");

    let json = hub.run("status", &fleet, &["-o", "json"]).await;
    assert_eq!(json.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["spokes"].as_array().unwrap().len(), 4, "{report}");
    assert_eq!(report["errors"][0]["file"], "spokes/edge.yaml", "{report}");
    hub.server.shutdown().await;
}
