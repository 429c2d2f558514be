//! Running until a shutdown signal, as `fleetform controlplane` does, and the kubeconfig
//! the control plane hands out.

use crate::common;

use common::{client_for, client_from_kubeconfig, private_dir};
use fleetform_controlplane::ControlPlane;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test]
async fn run_until_serves_until_the_signal_then_stops() {
    let (url_tx, url_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let dir = private_dir();
    let data = dir.path().to_path_buf();
    let server = tokio::spawn(async move {
        ControlPlane::builder()
            .data_dir(Some(data))
            .run_until(
                async {
                    let _ = stop_rx.await;
                },
                |plane| {
                    let _ = url_tx.send((plane.url(), plane.kubeconfig()));
                },
            )
            .await
    });
    let (url, kubeconfig) = url_rx.await.unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&kubeconfig).unwrap();
    assert_eq!(parsed["clusters"][0]["cluster"]["server"], url.as_str());
    let api: Api<ConfigMap> = Api::default_namespaced(client_from_kubeconfig(&kubeconfig).await);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
    assert!(api.get("a").await.is_err(), "the server no longer answers");
    // The data directory is released: another control plane can open it at once.
    let again = ControlPlane::builder()
        .data_dir(Some(dir.path().to_path_buf()))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> =
        Api::default_namespaced(client_from_kubeconfig(&again.kubeconfig()).await);
    assert!(api.get("a").await.is_ok());
}

#[tokio::test]
async fn a_bad_listen_address_is_a_clear_start_error() {
    let first = ControlPlane::builder().start().await.unwrap();
    let err = ControlPlane::builder()
        .listen(first.addr())
        .start()
        .await
        .err()
        .expect("port in use");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot listen on {}", first.addr())),
        "{err}"
    );
}

#[tokio::test]
async fn sigterm_stops_the_server_cleanly_with_open_watches() {
    use futures::StreamExt;
    use kube::api::WatchParams;
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_controlplane-serve"))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().unwrap();
    let url = line.strip_prefix("listening on ").unwrap().to_string();
    let api: Api<ConfigMap> = Api::default_namespaced(client_for(&url));
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let pid = child.id().unwrap().to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
        .await
        .expect("exits promptly")
        .unwrap();
    assert!(status.success(), "{status}");
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while watch.next().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the watch was closed");
}
