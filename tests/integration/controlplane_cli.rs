//! `fleetform controlplane` as a user runs it: it serves, writes a private kubeconfig that
//! kube-rs uses unchanged, keeps what it was told across a restart in an owner-only data
//! directory (refusing one that others may read), and stops cleanly on SIGTERM.

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
        Self::start_under_umask(data_dir, kubeconfig, None)
    }

    /// As [`Self::start`], with the process umask set first (through a shell) when given.
    fn start_under_umask(data_dir: &Path, kubeconfig: &Path, umask: Option<&str>) -> Server {
        let fleetform = env!("CARGO_BIN_EXE_fleetform");
        let mut command = match umask {
            None => Command::new(fleetform),
            Some(mask) => {
                let mut sh = Command::new("sh");
                sh.args([
                    "-c",
                    &format!("umask {mask} && exec \"$0\" \"$@\""),
                    fleetform,
                ]);
                sh
            }
        };
        let mut child = command
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

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn controlplane_state_is_owner_only_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let kubeconfig = dir.path().join("kubeconfig");
    let server = Server::start_under_umask(&data, &kubeconfig, Some("000"));
    let namespaces: Api<Namespace> = Api::all(client(&kubeconfig).await);
    namespaces.get("default").await.expect("the server answers");
    assert_eq!(mode(&data), 0o700, "the data directory");
    let mut found = Vec::new();
    let mut pending = vec![data.clone()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                assert_eq!(mode(&path), 0o700, "{}", path.display());
                pending.push(path);
            } else {
                assert_eq!(mode(&path), 0o600, "{}", path.display());
                found.push(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    for file in [
        "controlplane.db",
        "controlplane.db-wal",
        "ca.key",
        "apiserver.key",
    ] {
        assert!(found.iter().any(|f| f == file), "{file} in {found:?}");
    }
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn controlplane_refuses_a_data_dir_open_to_others() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(["controlplane", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .output()
        .expect("run fleetform controlplane");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        format!(
            "error: refusing to start: data directory {d} is readable by group or others (mode 755); run `chmod 700 {d}`",
            d = data.display()
        )
    );
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
