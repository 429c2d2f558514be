//! `plan` and `apply` on a hub a FleetSync manages, with `fleetform sync` running there: plan
//! names the FleetSync, apply refuses to write, and `apply --force` writes, warns, and reports
//! the change reverted by the FleetSync instead of converged.

use crate::support;

use std::path::Path;
use std::process::Output;

use fleetform::access::{ClusterRole, embedded_kubeconfig};
use fleetform::api::Spoke;
use fleetform::api::fleet::{FleetSync, SYSTEM_NAMESPACE};
use fleetform::sync::SyncConfig;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::{Cluster, wait_for};
use tokio_util::sync::CancellationToken;

async fn fleetform(args: &[&str], data_dir: &Path) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run fleetform")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn lease_duration(spoke: &Spoke) -> Option<i32> {
    spoke.spec.lease_duration_seconds
}

#[tokio::test]
async fn apply_beside_a_fleetsync_is_refused_and_when_forced_is_reported_reverted() {
    let hub = Cluster::start().await;
    // The CLI reaches the hub as `fleetform up` registers it: the fleet's hub is `embedded`.
    let data_dir = tempfile::tempdir().unwrap();
    let kubeconfig = embedded_kubeconfig(data_dir.path(), ClusterRole::Hub, "hub");
    std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
    std::fs::write(&kubeconfig, hub.kubeconfig()).unwrap();

    let (dir, repo) = support::example_fleet_repo();
    let head = support::head_commit(&repo);
    let stop = CancellationToken::new();
    let sync = fleetform::sync::start(
        SyncConfig::new(hub.hub_identity().await, "only"),
        stop.clone(),
    )
    .await
    .expect("sync starts");
    let fleetsyncs: Api<FleetSync> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let repo_url = dir.path().display().to_string();
    let fleetsync: FleetSync = serde_json::from_value(json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
        "metadata": {"name": "fleet", "namespace": SYSTEM_NAMESPACE},
        "spec": {"repo": repo_url, "ref": "main", "path": "fleet", "intervalSeconds": 3600},
    }))
    .unwrap();
    fleetsyncs
        .create(&PostParams::default(), &fleetsync)
        .await
        .unwrap();
    let applied = head.clone();
    wait_for(&fleetsyncs, "fleet", "the commit applied", move |fs| {
        fs.status
            .as_ref()
            .and_then(|s| s.last_applied_commit.as_deref())
            == Some(applied.as_str())
    })
    .await;

    // An edit nobody committed: only `apply` of the directory would write it.
    let edge = dir.path().join("fleet/spokes/edge.yaml");
    let edited = std::fs::read_to_string(&edge).unwrap().replacen(
        "leaseDurationSeconds: 10",
        "leaseDurationSeconds: 15",
        1,
    );
    std::fs::write(&edge, edited).unwrap();
    let fleet = dir.path().join("fleet");
    let fleet = fleet.to_str().unwrap();

    let plan = fleetform(&["plan", fleet], data_dir.path()).await;
    let shown = text(&plan.stdout);
    assert_eq!(plan.status.code(), Some(2), "{shown}{}", text(&plan.stderr));
    assert!(
        shown.contains(&format!(
            "! FleetSync fleet ({repo_url} at main, path fleet, commit {} in force) manages this hub",
            &head[..7]
        )),
        "{shown}"
    );
    let document = fleetform(&["plan", fleet, "-o", "json"], data_dir.path()).await;
    let document: serde_json::Value = serde_json::from_slice(&document.stdout).unwrap();
    assert_eq!(
        document["hubs"][0]["managedBy"],
        json!([{"fleetSync": "fleet", "repo": repo_url, "ref": "main", "path": "fleet", "lastAppliedCommit": head}])
    );

    let refused = fleetform(&["apply", fleet, "--auto-approve"], data_dir.path()).await;
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: hub hub: FleetSync fleet (")
            && stderr.contains("commit and push the change")
            && stderr.contains("--force"),
        "{stderr}"
    );
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    assert_eq!(
        lease_duration(&spokes.get("dev").await.unwrap()),
        Some(10),
        "a refused apply writes nothing"
    );

    let forced = fleetform(
        &[
            "apply",
            fleet,
            "--auto-approve",
            "--force",
            "--timeout",
            "120",
        ],
        data_dir.path(),
    )
    .await;
    let (stdout, stderr) = (text(&forced.stdout), text(&forced.stderr));
    assert!(
        stderr.contains("warning: hub hub: FleetSync fleet ("),
        "{stderr}"
    );
    assert!(
        stdout.contains("hub hub: update Spoke fleetform-system/dev"),
        "{stdout}"
    );
    assert_eq!(forced.status.code(), Some(4), "{stdout}{stderr}");
    assert!(!stdout.contains("Converged."), "{stdout}");
    assert!(
        stderr.contains("hub hub: Spoke fleetform-system/dev was changed after apply wrote it")
            && stderr.contains("reverted by FleetSync fleet ("),
        "{stderr}"
    );
    assert_eq!(
        lease_duration(&spokes.get("dev").await.unwrap()),
        Some(10),
        "the FleetSync put its commit back"
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}
