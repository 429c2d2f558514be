//! `fleetform hub` and `fleetform agent` as processes against embedded control planes: the agent
//! registers (with a hub kubeconfig as it is, or by certificate with a bootstrap kubeconfig), the
//! hub accepts, the cluster joins and is available, and both stop cleanly on SIGTERM.

use crate::support;

use std::path::Path;
use std::process::Stdio;

use fleetform::api::ManagedCluster;
use fleetform::api::vocabulary::{
    AGENT_NAMESPACE, CONDITION_AVAILABLE, HUB_KUBECONFIG_SECRET, STATUS_TRUE,
};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use support::{Cluster, PATIENCE, accept, condition_status, wait_for};
use tokio::process::{Child, Command};

fn fleetform(args: &[&str], kubeconfigs: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(args)
        .current_dir(kubeconfigs)
        .env("FLEETFORM_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start fleetform")
}

/// Sends SIGTERM and expects a clean exit.
async fn terminate(child: Child, what: &str) {
    let pid = child.id().expect("still running").to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not stop on SIGTERM"))
        .unwrap();
    assert!(
        output.status.success(),
        "{what} exited with {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn hub_and_agent_commands_join_a_spoke_and_stop_on_sigterm() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    // The hub accepts only clusters git declares.
    hub.declare_spoke("spoke-a").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hub.kubeconfig"), hub.kubeconfig()).unwrap();
    std::fs::write(dir.path().join("spoke.kubeconfig"), spoke.kubeconfig()).unwrap();

    let hub_process = fleetform(
        &[
            "hub",
            "--kubeconfig",
            "hub.kubeconfig",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        dir.path(),
    );
    let agent_process = fleetform(
        &[
            "agent",
            "--hub-kubeconfig",
            "hub.kubeconfig",
            "--kubeconfig",
            "spoke.kubeconfig",
            "--cluster-name",
            "spoke-a",
            "--spoke-url",
            &spoke.server.url(),
        ],
        dir.path(),
    );
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let registered = wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    assert_eq!(
        registered.spec.managed_cluster_client_configs[0].url,
        spoke.server.url()
    );
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "joined and available", |c| {
        c.is_joined() && condition_status(c, CONDITION_AVAILABLE).as_deref() == Some(STATUS_TRUE)
    })
    .await;

    terminate(agent_process, "fleetform agent").await;
    terminate(hub_process, "fleetform hub").await;
}

#[tokio::test]
async fn agent_command_registers_by_certificate_with_a_bootstrap_kubeconfig() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    hub.declare_spoke("spoke-a").await;
    let token = hub.issue_bootstrap_token("spoke-a").await;
    spoke.namespace(AGENT_NAMESPACE).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hub.kubeconfig"), hub.kubeconfig()).unwrap();
    std::fs::write(dir.path().join("spoke.kubeconfig"), spoke.kubeconfig()).unwrap();
    std::fs::write(
        dir.path().join("bootstrap.kubeconfig"),
        hub.bootstrap_kubeconfig(&token),
    )
    .unwrap();

    let hub_process = fleetform(
        &[
            "hub",
            "--kubeconfig",
            "hub.kubeconfig",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        dir.path(),
    );
    let agent_process = fleetform(
        &[
            "agent",
            "--bootstrap-kubeconfig",
            "bootstrap.kubeconfig",
            "--kubeconfig",
            "spoke.kubeconfig",
            "--cluster-name",
            "spoke-a",
        ],
        dir.path(),
    );
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(
        &clusters,
        "spoke-a",
        "registered with the bootstrap token",
        |_| true,
    )
    .await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "joined and available", |c| {
        c.is_joined() && condition_status(c, CONDITION_AVAILABLE).as_deref() == Some(STATUS_TRUE)
    })
    .await;
    let secrets: Api<Secret> = Api::namespaced(spoke.client.clone(), AGENT_NAMESPACE);
    let stored = wait_for(&secrets, HUB_KUBECONFIG_SECRET, "identity stored", |_| true).await;
    assert!(stored.data.unwrap_or_default().contains_key("tls.crt"));

    terminate(agent_process, "fleetform agent").await;
    terminate(hub_process, "fleetform hub").await;
}

#[tokio::test]
async fn an_agent_that_cannot_start_says_why_and_exits_at_once() {
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hub.kubeconfig"), hub.kubeconfig()).unwrap();
    std::fs::write(dir.path().join("spoke.kubeconfig"), spoke.kubeconfig()).unwrap();
    // Its health port is taken.
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = taken.local_addr().unwrap().to_string();

    let agent = fleetform(
        &[
            "agent",
            "--hub-kubeconfig",
            "hub.kubeconfig",
            "--kubeconfig",
            "spoke.kubeconfig",
            "--cluster-name",
            "spoke-a",
            "--health-addr",
            &port,
        ],
        dir.path(),
    );
    // No SIGTERM: a kubelet restarts only what exits.
    let output = tokio::time::timeout(PATIENCE, agent.wait_with_output())
        .await
        .expect("the agent exits by itself")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: cluster spoke-a: cannot serve its health endpoint on {port}"
        )),
        "{stderr}"
    );
    drop(taken);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_cluster_an_admin_deleted_backs_off_and_says_each_failure_once() {
    use fleetform::reconciler::install::AGENT_DEPLOYMENT;
    let hub = Cluster::start().await;
    let spoke = Cluster::start().await;
    let _loops = support::start_hub_loops(&hub).await;
    hub.declare_spoke("spoke-a").await;
    let token = hub.issue_bootstrap_token("spoke-a").await;
    // The agent as its ServiceAccount on the spoke, registering with its bootstrap token.
    spoke.agent_identity().await;
    let agent_kubeconfig = spoke
        .server
        .identities()
        .unwrap()
        .service_account_kubeconfig(AGENT_NAMESPACE, AGENT_DEPLOYMENT)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spoke.kubeconfig"), agent_kubeconfig).unwrap();
    std::fs::write(
        dir.path().join("bootstrap.kubeconfig"),
        hub.bootstrap_kubeconfig(&token),
    )
    .unwrap();
    // Logged as by default, and the retries' own lines too, to count the attempts.
    let mut agent = Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args([
            "agent",
            "--bootstrap-kubeconfig",
            "bootstrap.kubeconfig",
            "--kubeconfig",
            "spoke.kubeconfig",
            "--cluster-name",
            "spoke-a",
        ])
        .current_dir(dir.path())
        .env(
            "FLEETFORM_LOG",
            "warn,kube_runtime::watcher=error,fleetform::runtime::retry=debug",
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let stderr = agent.stderr.take().unwrap();
    tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut stderr = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = stderr.next_line().await {
            let _ = lines_tx.send(line);
        }
    });
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    wait_for(&clusters, "spoke-a", "registered", |_| true).await;
    accept(&hub, "spoke-a", 1).await;
    wait_for(&clusters, "spoke-a", "joined and available", |c| {
        c.is_joined() && condition_status(c, CONDITION_AVAILABLE).as_deref() == Some(STATUS_TRUE)
    })
    .await;

    // An administrator deletes the cluster; the agent may no longer create it.
    let joined = clusters.get("spoke-a").await.unwrap();
    clusters
        .delete("spoke-a", &Default::default())
        .await
        .unwrap();
    support::wait_deleted(&clusters, &joined).await;
    let mut seen: Vec<String> = Vec::new();
    let attempts = |seen: &[String]| {
        seen.iter()
            .filter(|line| line.contains("cannot create its ManagedCluster"))
            .count()
    };
    let tried = tokio::time::timeout(PATIENCE, async {
        while attempts(&seen) < 3 {
            match lines.recv().await {
                Some(line) => seen.push(line),
                None => return,
            }
        }
    })
    .await
    .is_ok();
    let pid = agent.id().unwrap().to_string();
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    tokio::time::timeout(PATIENCE, agent.wait())
        .await
        .unwrap()
        .unwrap();
    while let Some(line) = lines.recv().await {
        seen.push(line);
    }
    let stderr = seen.join("\n");
    assert!(
        tried && attempts(&seen) >= 3,
        "the agent did not try to create its cluster again:\n{stderr}"
    );
    // Each failure is said once: no warning repeats (the time each line begins with aside).
    let mut warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains(" WARN "))
        .map(|line| line.split_once(' ').map_or(line, |(_, rest)| rest))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|line| line.contains("creating the ManagedCluster")),
        "{stderr}"
    );
    let said = warnings.len();
    warnings.sort();
    warnings.dedup();
    assert_eq!(warnings.len(), said, "a warning repeats:\n{stderr}");
}
