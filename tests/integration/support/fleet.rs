//! A whole fleet as `fleetform up` runs it (embedded clusters, agents, hub loops, reconciler and
//! sync, each under its production identity), driven by commits to a fleet repo in a temporary
//! git repository.

use std::path::Path;
use std::process::Output;

use fleetform::api::FleetSync;
use fleetform::api::fleet::{Phase, SYSTEM_NAMESPACE, Spoke};
use fleetform::api::is_condition_true;
use fleetform::api::vocabulary::CONDITION_PIVOT_COMPLETE;
use fleetform::up::{self, UpConfig};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};

use super::{PATIENCE, wait_for};

/// A fleet repo in a temporary git repository.
pub struct Repo {
    dir: tempfile::TempDir,
    pub repo: git2::Repository,
}

impl Repo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        Repo { dir, repo }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `files` (path → contents; `None` deletes) and commits them.
    pub fn commit(&self, message: &str, files: &[(&str, Option<&str>)]) {
        for (path, contents) in files {
            let full = self.path().join(path);
            match contents {
                Some(contents) => {
                    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                    std::fs::write(&full, contents).unwrap();
                }
                None => std::fs::remove_file(&full).unwrap(),
            }
        }
        super::commit_all(&self.repo, message);
    }
}

/// A Hub document of an embedded hub with 1 s leases.
pub const HUB: &str = "apiVersion: fleetform.io/v1alpha1
kind: Hub
metadata:
  name: hub
spec:
  kubeconfig:
    embedded: {}
  registration:
    leaseDurationSeconds: 1
    clusterClaimsMax: 20
";

/// Two AddOns: `metrics` (installed in metrics-agent) and `logging` (in logging-agent).
pub const ADDONS: &str = "apiVersion: fleetform.io/v1alpha1
kind: AddOn
metadata:
  name: metrics
spec:
  installNamespace: metrics-agent
---
apiVersion: fleetform.io/v1alpha1
kind: AddOn
metadata:
  name: logging
spec:
  installNamespace: logging-agent
";

/// A Spoke document of an embedded spoke `name` of `hub`, with `extra` appended to its spec.
pub fn spoke(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: fleetform.io/v1alpha1
kind: Spoke
metadata:
  name: {name}
  labels:
    env: test
spec:
  hubRef: hub
  kubeconfig:
    embedded: {{}}
{extra}"
    )
}

/// The hub document (embedded, 1 s leases) with `agent_version` if any and `rollout` as its
/// `spec.rollout` (YAML indented by four).
pub fn rolling_hub(agent_version: Option<&str>, rollout: &str) -> String {
    let agent = agent_version
        .map(|version| format!("  agent:\n    version: {version}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: fleetform.io/v1alpha1
kind: Hub
metadata:
  name: hub
spec:
  kubeconfig:
    embedded: {{}}
  registration:
    leaseDurationSeconds: 1
{agent}  rollout:
{rollout}"
    )
}

/// The fleet running: its embedded clusters and loops, and an administrator's client of the hub.
pub struct Fleet {
    pub repo: Repo,
    pub data_dir: tempfile::TempDir,
    running: Option<up::Running>,
    pub hub: Client,
}

impl Fleet {
    pub async fn up(repo: Repo) -> Self {
        // RUST_LOG=fleetform=info shows what the loops do when a test fails.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        // Owner-only, as `up` wants its data dir (a temporary directory is not by default).
        let data_dir = tempfile::Builder::new()
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
            .unwrap();
        let (_, fleet) = fleetform::source::load_fleet(&fleetform::source::SourceSpec {
            location: repo.path().display().to_string(),
            ..Default::default()
        })
        .expect("a valid fleet");
        let running = up::start(
            &fleet,
            UpConfig {
                interval: std::time::Duration::from_secs(1),
                addon_lease_duration: std::time::Duration::from_secs(1),
                ..UpConfig::new(data_dir.path(), repo.path().display().to_string())
            },
        )
        .await
        .expect("the fleet starts");
        let hub = running.hubs[0].client.clone();
        Fleet {
            repo,
            data_dir,
            running: Some(running),
            hub,
        }
    }

    /// What `up` runs.
    pub fn running(&self) -> &up::Running {
        self.running.as_ref().expect("the fleet runs")
    }

    /// An administrator's client of the spoke cluster `name`.
    pub fn spoke_client(&self, name: &str) -> Client {
        self.running
            .as_ref()
            .and_then(|running| running.spoke_client(name))
            .unwrap_or_else(|| panic!("no spoke cluster {name}"))
    }

    /// The requests the spoke cluster `name`'s API server has answered.
    pub fn spoke_request_counts(
        &self,
        name: &str,
    ) -> fleetform_controlplane::requests::RequestCounts {
        self.running
            .as_ref()
            .and_then(|running| running.spoke_request_counts(name))
            .unwrap_or_else(|| panic!("no spoke cluster {name}"))
    }

    /// Runs the `fleetform` binary against this fleet's data dir.
    pub async fn fleetform(&self, args: &[&str]) -> Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
            .args(args)
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .env("NO_COLOR", "1")
            .output()
            .await
            .expect("run fleetform")
    }

    /// The commit the repo's HEAD is at.
    pub fn head(&self) -> String {
        super::head_commit(&self.repo.repo)
    }

    pub fn fleet_syncs(&self) -> Api<FleetSync> {
        Api::namespaced(self.hub.clone(), SYSTEM_NAMESPACE)
    }

    /// Waits until `up`'s sync has applied the repo's HEAD.
    pub async fn synced(&self) {
        let head = self.head();
        wait_for(
            &self.fleet_syncs(),
            up::FLEET_SYNC,
            "HEAD applied",
            move |sync: &FleetSync| {
                sync.status
                    .as_ref()
                    .and_then(|s| s.last_applied_commit.as_deref())
                    == Some(&head)
            },
        )
        .await;
    }

    pub fn spokes(&self) -> Api<Spoke> {
        Api::namespaced(self.hub.clone(), SYSTEM_NAMESPACE)
    }

    /// Waits until the Spoke `name` is Running and its agent has pivoted.
    pub async fn wait_running(&self, name: &str) -> Spoke {
        wait_for(
            &self.spokes(),
            name,
            "Running and pivoted",
            |spoke: &Spoke| {
                let status = spoke.status.as_ref();
                status.and_then(|s| s.phase) == Some(Phase::Running)
                    && status
                        .is_some_and(|s| is_condition_true(&s.conditions, CONDITION_PIVOT_COMPLETE))
            },
        )
        .await
    }

    /// Stops every loop and cluster of the fleet.
    pub async fn shutdown(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await;
        }
    }
}

/// Waits, by watch, until the object `name` is gone; fails after [`PATIENCE`].
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::time::timeout(
        PATIENCE,
        await_condition(api.clone(), name, |object: Option<&K>| object.is_none()),
    )
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {name} to be gone"))
    .unwrap();
}
