//! `fleetform controlplane` as a user runs it: it serves, writes a private kubeconfig that
//! kube-rs uses unchanged, keeps what it was told across a restart, and stops cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};

struct Server {
    child: Child,
}

impl Server {
    /// Starts the command and waits for its "serving at" line.
    fn start(data_dir: &Path, kubeconfig: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fleetform"))
            .args(["controlplane", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .arg("--kubeconfig-out")
            .arg(kubeconfig)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start fleetform controlplane");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().expect("a line").expect("utf-8");
        assert!(
            first.starts_with("control plane serving at https://127.0.0.1:"),
            "{first}"
        );
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child }
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        self.child.wait().expect("wait")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    let parsed = kube::config::Kubeconfig::from_yaml(&text).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(parsed, &Default::default())
        .await
        .expect("kubeconfig is usable");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn controlplane_serves_kube_clients_persists_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let kubeconfig = dir.path().join("kubeconfig");

    let server = Server::start(&data, &kubeconfig);
    let mode = std::fs::metadata(&kubeconfig).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "the kubeconfig is readable by its owner only"
    );
    let namespaces: Api<Namespace> = Api::all(client(&kubeconfig).await);
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some("kept".into());
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");

    let server = Server::start(&data, &kubeconfig);
    let namespaces: Api<Namespace> = Api::all(client(&kubeconfig).await);
    let kept = namespaces
        .get("kept")
        .await
        .expect("the namespace survived a restart");
    assert!(kept.metadata.uid.is_some());
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn insecure_http_is_refused_on_a_non_loopback_address() {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(["controlplane", "--listen", "0.0.0.0:0", "--insecure-http"])
        .output()
        .expect("run fleetform controlplane");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--insecure-http") && stderr.contains("loopback"),
        "{stderr}"
    );
}

#[test]
fn insecure_http_serves_plain_http_on_loopback() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(["controlplane", "--listen", "127.0.0.1:0", "--insecure-http"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start fleetform controlplane");
    let stdout = child.stdout.take().expect("stdout");
    let first = BufReader::new(stdout)
        .lines()
        .next()
        .expect("a line")
        .expect("utf-8");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        first.starts_with("control plane serving at http://127.0.0.1:"),
        "{first}"
    );
}
