//! SQLite durability: state and resourceVersions survive restarts, watches resume across
//! them, corrupt, foreign or group-readable data directories are refused at start, the
//! directory and database are owner-only, and a SIGKILL in the middle of a write load loses
//! no acknowledged write.

use crate::common;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{TestPlane, api_error, client_for, private_dir};
use fleetform_controlplane::{ControlPlane, StartError};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"n": "0"}})).unwrap()
}

#[tokio::test]
async fn restart_keeps_objects_resource_versions_and_watch_history() {
    let dir = private_dir();
    let builder = || ControlPlane::builder().data_dir(Some(dir.path().to_path_buf()));
    let t = TestPlane::with(builder()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let a = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let a_rv = a.metadata.resource_version.clone().unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    let last = t.plane.resource_version();
    t.plane.shutdown().await;

    let t = TestPlane::with(builder()).await;
    assert_eq!(t.plane.resource_version(), last);
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let got = api.get("a").await.unwrap();
    assert_eq!(got.metadata.uid, a.metadata.uid);
    let c = api.create(&PostParams::default(), &cm("c")).await.unwrap();
    let c_rv: i64 = c.metadata.resource_version.unwrap().parse().unwrap();
    assert_eq!(c_rv, last + 1, "resourceVersions continue after a restart");
    let mut s = api
        .watch(&WatchParams::default(), &a_rv)
        .await
        .unwrap()
        .boxed();
    let mut names = Vec::new();
    for _ in 0..2 {
        match tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(o) => names.push(o.metadata.name.unwrap()),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, ["b", "c"], "a watch resumes across the restart");
}

#[tokio::test]
async fn corrupt_and_foreign_data_directories_are_refused() {
    let dir = private_dir();
    let db = dir.path().join("controlplane.db");
    std::fs::write(&db, vec![0x42; 4096]).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = ControlPlane::builder()
        .data_dir(Some(dir.path().to_path_buf()))
        .start()
        .await
        .err()
        .expect("corrupt database refused");
    assert!(matches!(err, StartError::Storage(_)));
    assert!(err.to_string().contains("corrupt database"), "{err}");

    let foreign = private_dir();
    std::fs::create_dir(foreign.path().join("member")).unwrap();
    let err = ControlPlane::builder()
        .data_dir(Some(foreign.path().to_path_buf()))
        .start()
        .await
        .err()
        .expect("foreign directory refused");
    assert!(
        err.to_string()
            .contains("not a fleetform control-plane store"),
        "{err}"
    );
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn the_data_directory_and_database_files_are_owner_only() {
    let dir = private_dir();
    let data = dir.path().join("new").join("state");
    let t = TestPlane::with(ControlPlane::builder().data_dir(Some(data.clone()))).await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    assert_eq!(mode(&data), 0o700, "the data directory");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), want, "{}", path.display());
        files.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    files.sort();
    assert!(
        files.starts_with(&["controlplane.db".into(), "controlplane.db-wal".into()]),
        "{files:?}"
    );
}

#[tokio::test]
async fn a_data_directory_or_database_open_to_others_is_refused() {
    let dir = private_dir();
    let data = dir.path().join("state");
    let builder = || ControlPlane::builder().data_dir(Some(data.clone()));
    builder().start().await.unwrap().shutdown().await;

    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = builder().start().await.err().expect("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to start: data directory {d} is readable by group or others (mode 755); run `chmod 700 {d}`",
            d = data.display()
        )
    );

    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
    let db = data.join("controlplane.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    let err = builder().start().await.err().expect("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to start: database {d} is readable by group or others (mode 640); run `chmod 600 {d}`",
            d = db.display()
        )
    );

    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    builder()
        .start()
        .await
        .expect("starts once fixed")
        .shutdown()
        .await;
}

#[tokio::test]
async fn a_second_control_plane_cannot_share_a_data_directory() {
    let dir = private_dir();
    let builder = || ControlPlane::builder().data_dir(Some(dir.path().to_path_buf()));
    let first = TestPlane::with(builder()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(first.client.clone());
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let err = builder().start().await.err().expect("second start refused");
    assert!(
        err.to_string().contains("in use by another control plane"),
        "{err}"
    );
}

/// Starts the `controlplane-serve` binary and returns it with its URL.
async fn spawn_server(dir: &std::path::Path) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_controlplane-serve"))
        .arg("--data-dir")
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let url = line.strip_prefix("listening on ").unwrap().to_string();
    (child, url)
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_load_loses_no_acknowledged_write() {
    let dir = private_dir();
    let (mut child, url) = spawn_server(dir.path()).await;
    let client = client_for(&url);
    // Highest acknowledged counter per object (0 = created).
    let acked: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let (enough_tx, mut enough_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut writers = Vec::new();
    for w in 0..16 {
        let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
        let acked = acked.clone();
        let enough = enough_tx.clone();
        writers.push(tokio::spawn(async move {
            let name = format!("w{w}");
            if api
                .create(&PostParams::default(), &cm(&name))
                .await
                .is_err()
            {
                return;
            }
            acked.lock().unwrap().insert(name.clone(), 0);
            for n in 1u64.. {
                let patch = Patch::Merge(json!({"data": {"n": n.to_string()}}));
                if api
                    .patch(&name, &PatchParams::default(), &patch)
                    .await
                    .is_err()
                {
                    return;
                }
                acked.lock().unwrap().insert(name.clone(), n);
                if n == 20 {
                    let _ = enough.send(());
                }
            }
        }));
    }
    drop(enough_tx);
    for _ in 0..16 {
        enough_rx
            .recv()
            .await
            .expect("every writer reaches 20 updates");
    }
    child.start_kill().unwrap(); // SIGKILL while the writers keep going
    child.wait().await.unwrap();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), 16);

    let t = TestPlane::with(ControlPlane::builder().data_dir(Some(dir.path().to_path_buf()))).await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for (name, n) in acked {
        let got = api
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("{name} lost: {e}"));
        let stored: u64 = got.data.unwrap()["n"].parse().unwrap();
        assert!(stored >= n, "{name}: acknowledged n={n}, found n={stored}");
    }
    assert_eq!(api_error(api.get("never").await).code, 404);
}

#[tokio::test]
async fn custom_resources_are_served_again_after_a_restart() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::DynamicObject;
    use kube::core::{ApiResource, GroupVersionKind};
    let dir = private_dir();
    let builder = || ControlPlane::builder().data_dir(Some(dir.path().to_path_buf()));
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gadget"),
        "gadgets",
    );
    let t = TestPlane::with(builder()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    let crd = serde_json::from_value(json!({"metadata": {"name": "gadgets.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
        "versions": [{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let gadgets: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &ar);
    let g: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"x": 1}}))
        .unwrap();
    gadgets.create(&PostParams::default(), &g).await.unwrap();
    t.plane.shutdown().await;

    let t = TestPlane::with(builder()).await;
    let gadgets: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &ar);
    assert_eq!(gadgets.get("g").await.unwrap().data["spec"]["x"], 1);
}
