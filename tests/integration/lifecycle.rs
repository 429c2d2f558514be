//! End to end: an embedded fleet (`fleetform up`'s clusters, agents and loops, in-process) driven
//! only by commits to a fleet repo and the CLI. Spokes join, accept, pivot, follow changes of
//! their addons, lease, claim limit and agent version, and unjoin in finalizer order, leaving
//! nothing behind on hub or spoke (their clusters stopped, their directories deleted). Each
//! enabled addon gets a minimal agent that renews its lease, so it is Available. And `fleetform
//! up` as a process tells the story of each commit on its console.

use crate::support;

use std::path::Path;

use fleetform::api::fleet::{Phase, SYSTEM_NAMESPACE, Spoke};
use fleetform::api::vocabulary::AGENT_NAMESPACE;
use fleetform::api::{FleetSync, ManagedCluster, ManagedClusterAddOn};
use fleetform::reconciler::install::{
    AGENT_CLUSTER_ROLE, AGENT_DEPLOYMENT, LABEL_AGENT_VERSION, deployment_label,
};
use fleetform::up::{self};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::ListParams;
use kube::{Api, Client};
use support::fleet::{ADDONS, Fleet, HUB, Repo, spoke, wait_gone};
use support::{PATIENCE, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_join_change_upgrade_and_unjoin_spokes() {
    let repo = Repo::new();
    repo.commit(
        "a hub and two spokes",
        &[
            ("hubs/hub.yaml", Some(HUB)),
            ("addons/addons.yaml", Some(ADDONS)),
            (
                "spokes/alpha.yaml",
                Some(&spoke("alpha", "  addons: [metrics]\n")),
            ),
            ("spokes/beta.yaml", Some(&spoke("beta", ""))),
            ("spokes/gamma.yaml", Some(&spoke("gamma", ""))),
        ],
    );
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    for name in ["alpha", "beta", "gamma"] {
        fleet.wait_running(name).await;
    }
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub.clone());
    let alpha = clusters.get("alpha").await.unwrap();
    assert!(alpha.hub_accepts_client() && alpha.is_joined());
    assert_eq!(alpha.lease_duration_seconds(), 1);
    assert_eq!(alpha.metadata.labels.as_ref().unwrap()["env"], "test");
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(fleet.hub.clone(), "alpha");
    assert!(addons.get_opt("metrics").await.unwrap().is_some());

    // Addons, lease duration and claim limit change in one commit.
    fleet.repo.commit(
        "alpha: logging instead of metrics, 2 s leases, 5 claims",
        &[(
            "spokes/alpha.yaml",
            Some(&spoke(
                "alpha",
                "  addons: [logging]\n  leaseDurationSeconds: 2\n  clusterClaimsMax: 5\n",
            )),
        )],
    );
    fleet.synced().await;
    wait_for(&addons, "logging", "enabled", |_| true).await;
    wait_gone(&addons, "metrics").await;
    wait_for(&clusters, "alpha", "lease 2 s", |c: &ManagedCluster| {
        c.lease_duration_seconds() == 2
    })
    .await;
    let alpha_deployments: Api<Deployment> =
        Api::namespaced(fleet.spoke_client("alpha"), AGENT_NAMESPACE);
    wait_for(
        &alpha_deployments,
        AGENT_DEPLOYMENT,
        "claims max 5",
        |d: &Deployment| {
            let args = d
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .map(|p| p.containers[0].args.clone().unwrap_or_default())
                .unwrap_or_default();
            args.windows(2)
                .any(|pair| pair[0] == "--cluster-claims-max" && pair[1] == "5")
        },
    )
    .await;

    // An agent version bump: the agent, which owns day 2, upgrades itself.
    fleet.repo.commit(
        "agents 9.9.9",
        &[(
            "hubs/hub.yaml",
            Some(&format!("{HUB}  agent:\n    version: 9.9.9\n")),
        )],
    );
    fleet.synced().await;
    for name in ["alpha", "beta", "gamma"] {
        let deployments: Api<Deployment> =
            Api::namespaced(fleet.spoke_client(name), AGENT_NAMESPACE);
        wait_for(
            &deployments,
            AGENT_DEPLOYMENT,
            "upgraded",
            |d: &Deployment| deployment_label(d, LABEL_AGENT_VERSION) == Some("9.9.9"),
        )
        .await;
        wait_for(&fleet.spokes(), name, "reports 9.9.9", |s: &Spoke| {
            s.status.as_ref().and_then(|s| s.agent_version.as_deref()) == Some("9.9.9")
        })
        .await;
    }

    // beta leaves the repo: it unjoins and nothing of it is left on hub or spoke; once its
    // Spoke is gone, `up` stops its cluster and deletes its directory.
    let beta = fleet.spoke_client("beta");
    let beta_dir = fleet.data_dir.path().join("spokes/beta");
    assert!(beta_dir.join("kubeconfig").exists());
    let mut changes = fleet.running().cluster_changes();
    fleet
        .repo
        .commit("beta leaves", &[("spokes/beta.yaml", None)]);
    // What the agent removes from beta is watched while beta still runs. The agent unjoined
    // with its own ServiceAccount's rights, and took its RBAC with it.
    let (namespaces, roles, bindings) = (
        Api::<Namespace>::all(beta.clone()),
        Api::<ClusterRole>::all(beta.clone()),
        Api::<ClusterRoleBinding>::all(beta),
    );
    tokio::join!(
        wait_gone(&namespaces, AGENT_NAMESPACE),
        wait_gone(&roles, AGENT_CLUSTER_ROLE),
        wait_gone(&bindings, AGENT_CLUSTER_ROLE),
        async {
            fleet.synced().await;
            wait_gone(&fleet.spokes(), "beta").await;
        },
    );
    wait_gone(&clusters, "beta").await;
    wait_gone(&Api::<Namespace>::all(fleet.hub.clone()), "beta").await;
    let removed = tokio::time::timeout(PATIENCE, changes.recv())
        .await
        .expect("beta's cluster removed")
        .unwrap();
    assert_eq!(
        removed,
        up::ClusterChange::Removed {
            spoke: "beta".to_string(),
            dir: beta_dir.clone(),
            error: None
        }
    );
    assert!(!beta_dir.exists(), "beta's directory is deleted");
    assert!(
        fleet.running().spoke_client("beta").is_none(),
        "beta's cluster is stopped"
    );
    let csrs: Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> =
        Api::all(fleet.hub.clone());
    let left = csrs
        .list(&ListParams::default().labels("open-cluster-management.io/cluster-name=beta"))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "beta's CSRs are removed");
    // alpha is untouched, and the CLI sees the fleet as the repo says: nothing to plan.
    fleet.wait_running("alpha").await;
    let repo = fleet.repo.path().display().to_string();
    let plan = fleet.fleetform(&["plan", &repo]).await;
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plan.stdout)
    );
    let status = fleet.fleetform(&["status", &repo]).await;
    let rows = String::from_utf8_lossy(&status.stdout);
    assert!(rows.contains("alpha") && !rows.contains("beta"), "{rows}");

    // An invalid commit is never applied: the sync says why and the fleet stays as it was.
    let good = fleet.head();
    fleet.repo.commit(
        "gamma without a hub",
        &[("spokes/gamma.yaml", Some("apiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata:\n  name: gamma\nspec:\n  kubeconfig:\n    embedded: {}\n"))],
    );
    let bad = fleet.head();
    let stalled = wait_for(
        &fleet.fleet_syncs(),
        up::FLEET_SYNC,
        "invalid commit refused",
        move |sync: &FleetSync| {
            sync.status.as_ref().is_some_and(|status| {
                status.last_attempted_commit.as_deref() == Some(&bad)
                    && status
                        .conditions
                        .iter()
                        .any(|c| c.type_ == "Stalled" && c.status == "True")
            })
        },
    )
    .await;
    let status = stalled.status.unwrap();
    assert_eq!(status.last_applied_commit.as_deref(), Some(good.as_str()));
    let stalled_message = &status
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .unwrap()
        .message;
    assert!(stalled_message.contains("gamma.yaml"), "{stalled_message}");
    assert_eq!(
        fleet.spokes().get("gamma").await.unwrap().spec.hub_ref,
        "hub"
    );
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_as_spoke_failed_pivot_blocking_work_and_hub_deletion() {
    // `stuck`'s agent can never come up: its cluster runs no kubelet (fleetform up plays kubelet
    // for embedded clusters only).
    let stuck = support::Cluster::start().await;
    let repo = Repo::new();
    let stuck_spoke = "apiVersion: fleetform.io/v1alpha1
kind: Spoke
metadata:
  name: stuck
spec:
  hubRef: hub
  kubeconfig:
    secretRef: {namespace: fleetform-system, name: stuck-kubeconfig, key: kubeconfig}
";
    let local_spoke = "apiVersion: fleetform.io/v1alpha1
kind: Spoke
metadata:
  name: local
spec:
  hubRef: hub
  kubeconfig:
    inCluster: true
";
    repo.commit(
        "a hub registered as its own spoke, a spoke whose agent never starts, and delta",
        &[
            ("hubs/hub.yaml", Some(HUB)),
            ("spokes/local.yaml", Some(local_spoke)),
            ("spokes/stuck.yaml", Some(stuck_spoke)),
            ("spokes/delta.yaml", Some(&spoke("delta", ""))),
        ],
    );
    let fleet = Fleet::up(repo).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(fleet.hub.clone(), SYSTEM_NAMESPACE);
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "stuck-kubeconfig"},
        "stringData": {"kubeconfig": stuck.kubeconfig()},
    }))
    .unwrap();
    secrets
        .create(&kube::api::PostParams::default(), &secret)
        .await
        .unwrap();
    fleet.synced().await;
    fleet.wait_running("local").await;
    fleet.wait_running("delta").await;
    let stuck_deployments: Api<Deployment> = Api::namespaced(stuck.client.clone(), AGENT_NAMESPACE);
    wait_for(&stuck_deployments, AGENT_DEPLOYMENT, "installed", |_| true).await;
    // Installed, its agent never comes up (nothing runs it): the spoke stays Joining.
    wait_for(&fleet.spokes(), "stuck", "Joining", |spoke: &Spoke| {
        spoke.status.as_ref().and_then(|s| s.phase) == Some(Phase::Joining)
    })
    .await;
    let local = fleet.spokes().get("local").await.unwrap();
    assert!(
        local
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "fleetform.io/spoke-cleanup"),
        "the hub holds the spoke-cleanup finalizer of a hub-as-spoke"
    );

    // Both leave: the hub unjoins them itself, since no agent will.
    fleet.repo.commit(
        "local and stuck leave",
        &[("spokes/local.yaml", None), ("spokes/stuck.yaml", None)],
    );
    // Two of three spokes is past the prune guard: the sync holds the commit back until told.
    let head = fleet.head();
    let stalled = wait_for(
        &fleet.fleet_syncs(),
        up::FLEET_SYNC,
        "held by the prune guard",
        move |sync: &FleetSync| {
            sync.status.as_ref().is_some_and(|status| {
                status.last_attempted_commit.as_deref() == Some(&head)
                    && status.conditions.iter().any(|c| {
                        c.type_ == "Stalled" && c.status == "True" && c.reason == "PruneBlocked"
                    })
            })
        },
    )
    .await;
    assert_ne!(
        stalled.status.and_then(|s| s.last_applied_commit),
        Some(fleet.head())
    );
    assert!(fleet.spokes().get_opt("local").await.unwrap().is_some());
    fleet
        .fleet_syncs()
        .patch(
            up::FLEET_SYNC,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"allowPrune": true}})),
        )
        .await
        .unwrap();
    fleet.synced().await;
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub.clone());
    wait_gone(&clusters, "local").await;
    wait_gone(&Api::<Namespace>::all(fleet.hub.clone()), "local").await;
    wait_gone(&fleet.spokes(), "stuck").await;
    wait_gone(
        &Api::<Namespace>::all(stuck.client.clone()),
        AGENT_NAMESPACE,
    )
    .await;
    let hub_agent: Api<Deployment> = Api::namespaced(fleet.hub.clone(), AGENT_NAMESPACE);
    wait_gone(&hub_agent, AGENT_DEPLOYMENT).await;

    // A ManifestWork of someone else's holds delta's unjoin until it is gone; deleting the Hub
    // unjoins its spokes first.
    let works: Api<fleetform::api::ManifestWork> = Api::namespaced(fleet.hub.clone(), "delta");
    let work: fleetform::api::ManifestWork = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-app", "namespace": "delta"},
        "spec": {"workload": {"manifests": []}},
    }))
    .unwrap();
    works
        .create(&kube::api::PostParams::default(), &work)
        .await
        .unwrap();
    let hubs: Api<fleetform::api::Hub> = Api::namespaced(fleet.hub.clone(), SYSTEM_NAMESPACE);
    hubs.delete("hub", &Default::default()).await.unwrap();
    let blocked = wait_for(
        &fleet.spokes(),
        "delta",
        "blocked by web-app",
        |s: &Spoke| {
            s.status.as_ref().is_some_and(|status| {
                status.conditions.iter().any(|c| {
                    c.type_ == "CleanupFailed"
                        && c.status == "True"
                        && c.message.contains("web-app")
                })
            })
        },
    )
    .await;
    assert_eq!(blocked.status.and_then(|s| s.phase), Some(Phase::Deleting));
    assert!(
        hubs.get_opt("hub").await.unwrap().is_some(),
        "the Hub waits for its spokes"
    );
    works.delete("web-app", &Default::default()).await.unwrap();
    wait_gone(&fleet.spokes(), "delta").await;
    wait_gone(&clusters, "delta").await;
    wait_gone(&hubs, "hub").await;
    fleet.shutdown().await;
}

fn addon_available(addon: &ManagedClusterAddOn) -> bool {
    addon.condition("Available").is_some_and(|c| {
        c.status == "True" && c.reason == fleetform::api::vocabulary::REASON_ADDON_LEASE_UPDATED
    })
}

/// Whether the ServiceAccount `namespace`/`name` of `cluster` may `verb` the Lease `lease` of
/// `lease_namespace`.
async fn may(
    cluster: &Client,
    (namespace, name): (&str, &str),
    verb: &str,
    (lease_namespace, lease): (&str, &str),
) -> bool {
    let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({
        "spec": {
            "user": format!("system:serviceaccount:{namespace}:{name}"),
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{namespace}"), "system:authenticated"],
            "resourceAttributes": {
                "group": "coordination.k8s.io", "resource": "leases", "verb": verb,
                "namespace": lease_namespace, "name": lease,
            },
        },
    }))
    .unwrap();
    Api::<SubjectAccessReview>::all(cluster.clone())
        .create(&kube::api::PostParams::default(), &review)
        .await
        .expect("review access")
        .status
        .is_some_and(|status| status.allowed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_an_agent_per_enabled_addon_until_the_addon_is_disabled() {
    let repo = Repo::new();
    repo.commit(
        "a spoke with two addons",
        &[
            ("hubs/hub.yaml", Some(HUB)),
            ("addons/addons.yaml", Some(ADDONS)),
            (
                "spokes/alpha.yaml",
                Some(&spoke("alpha", "  addons: [metrics, logging]\n")),
            ),
        ],
    );
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    fleet.wait_running("alpha").await;
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(fleet.hub.clone(), "alpha");
    for name in ["metrics", "logging"] {
        wait_for(&addons, name, "Available by its lease", addon_available).await;
    }
    let repo_path = fleet.repo.path().display().to_string();
    let status = fleet.fleetform(&["status", &repo_path]).await;
    let table = String::from_utf8_lossy(&status.stdout);
    let alpha_row = table
        .lines()
        .find(|line| line.starts_with("alpha "))
        .unwrap_or_else(|| panic!("no row for alpha in\n{table}"));
    assert!(
        alpha_row.split_whitespace().any(|cell| cell == "2/2"),
        "{table}"
    );

    // Each addon's agent runs as a ServiceAccount of its own that may renew its lease only.
    let alpha = fleet.spoke_client("alpha");
    let metrics_agent = ("metrics-agent", "metrics-agent");
    let metrics_leases: Api<Lease> = Api::namespaced(alpha.clone(), "metrics-agent");
    let lease = metrics_leases.get("metrics").await.unwrap();
    assert_eq!(lease.spec.unwrap().lease_duration_seconds, Some(1));
    assert!(
        may(
            &alpha,
            metrics_agent,
            "update",
            ("metrics-agent", "metrics")
        )
        .await
    );
    assert!(!may(&alpha, metrics_agent, "update", ("metrics-agent", "other")).await);
    assert!(
        !may(
            &alpha,
            metrics_agent,
            "delete",
            ("metrics-agent", "metrics")
        )
        .await
    );
    assert!(
        !may(
            &alpha,
            metrics_agent,
            "update",
            ("logging-agent", "logging")
        )
        .await
    );

    // metrics disabled: its agent stops and what was made for it goes, but its namespace stays.
    fleet.repo.commit(
        "alpha: logging only",
        &[(
            "spokes/alpha.yaml",
            Some(&spoke("alpha", "  addons: [logging]\n")),
        )],
    );
    fleet.synced().await;
    wait_gone(&addons, "metrics").await;
    wait_gone(&metrics_leases, "metrics").await;
    wait_gone(
        &Api::<ServiceAccount>::namespaced(alpha.clone(), "metrics-agent"),
        "metrics-agent",
    )
    .await;
    wait_gone(
        &Api::<RoleBinding>::namespaced(alpha.clone(), "metrics-agent"),
        "metrics-agent",
    )
    .await;
    assert!(
        Api::<Namespace>::all(alpha.clone())
            .get_opt("metrics-agent")
            .await
            .unwrap()
            .is_some()
    );
    // Two renewals of logging's lease later, nothing renewed metrics' again.
    let logging_leases: Api<Lease> = Api::namespaced(alpha.clone(), "logging-agent");
    for _ in 0..2 {
        let renewed = logging_leases.get("logging").await.unwrap();
        let before = renewed.spec.and_then(|spec| spec.renew_time);
        wait_for(
            &logging_leases,
            "logging",
            "renewed",
            move |lease: &Lease| {
                lease.spec.as_ref().and_then(|spec| spec.renew_time.clone()) != before
            },
        )
        .await;
    }
    assert!(metrics_leases.get_opt("metrics").await.unwrap().is_none());
    assert!(addon_available(&addons.get("logging").await.unwrap()));
    fleet.shutdown().await;
}

/// `fleetform up` as a process, its stdout read line by line.
struct UpProcess {
    child: tokio::process::Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    reader: tokio::task::JoinHandle<()>,
    stderr: tokio::task::JoinHandle<String>,
    /// Every line read so far, to show when an expected one does not come.
    seen: Vec<String>,
    /// Where in `seen` the lines [`Self::expect`] looks at begin.
    since: usize,
}

impl UpProcess {
    fn start(repo: &Path, data_dir: &Path) -> Self {
        Self::start_with(repo, data_dir, &["--interval", "1", "--log", "info"])
    }

    /// `fleetform up` with `args` besides the repository and data directory.
    fn start_with(repo: &Path, data_dir: &Path, args: &[&str]) -> Self {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
            .arg("up")
            .arg(repo)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env_remove("FLEETFORM_LOG")
            .env_remove("RUST_LOG")
            // Not a terminal, and NO_COLOR unset: no escapes either way.
            .env_remove("NO_COLOR")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start fleetform up");
        let (sender, lines) = tokio::sync::mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        let reader = tokio::spawn(async move {
            let mut stdout = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = stdout.next_line().await {
                let _ = sender.send(line);
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        UpProcess {
            child,
            lines,
            reader,
            stderr,
            seen: Vec::new(),
            since: 0,
        }
    }

    /// Waits for a line of stdout with every one of `parts`, printed since the last
    /// [`Self::mark`] (before or after the lines found so far: some come in no fixed order).
    async fn expect(&mut self, parts: &[&str]) -> String {
        let matches = |line: &str| parts.iter().all(|part| line.contains(part));
        if let Some(line) = self.seen[self.since..].iter().find(|line| matches(line)) {
            return line.clone();
        }
        let found = tokio::time::timeout(PATIENCE, async {
            while let Some(line) = self.lines.recv().await {
                self.seen.push(line.clone());
                if matches(&line) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            _ => panic!(
                "no line with {parts:?} in what `up` printed:\n{}",
                self.seen.join("\n")
            ),
        }
    }

    /// What is printed from now on is what [`Self::expect`] looks at.
    fn mark(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        self.since = self.seen.len();
    }
}

fn short(sha: &str) -> &str {
    &sha[..7]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_tells_the_story_of_each_commit_on_its_console() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new();
    repo.commit(
        "a hub and alpha",
        &[
            ("hubs/hub.yaml", Some(HUB)),
            ("addons/addons.yaml", Some(ADDONS)),
            (
                "spokes/alpha.yaml",
                Some(&spoke("alpha", "  addons: [metrics]\n")),
            ),
        ],
    );
    let home = tempfile::tempdir().unwrap();
    let data_dir = home.path().join("fleetform");
    let mut up = UpProcess::start(repo.path(), &data_dir);
    let head = support::head_commit(&repo.repo);
    up.expect(&[&format!(
        "hub: applied {} \"a hub and alpha\": ",
        short(&head)
    )])
    .await;
    up.expect(&["hub/alpha: Running", "addons 1/1"]).await;
    up.expect(&["converged: 1 spoke(s) Running"]).await;
    for dir in ["", "hubs", "hubs/hub", "spokes", "spokes/alpha"] {
        let mode = std::fs::metadata(data_dir.join(dir))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{dir}");
    }

    // A new embedded spoke: its cluster starts before its Spoke is written.
    up.mark();
    repo.commit(
        "beta joins",
        &[("spokes/beta.yaml", Some(&spoke("beta", "")))],
    );
    up.expect(&["spoke cluster beta started"]).await;
    let head = support::head_commit(&repo.repo);
    up.expect(&[&format!(
        "hub: applied {} \"beta joins\": 1 created",
        short(&head)
    )])
    .await;
    up.expect(&["hub/beta: Running"]).await;

    // An invalid commit stalls the sync; the next one recovers it and removes beta.
    up.mark();
    repo.commit(
        "gamma without a hub",
        &[(
            "spokes/gamma.yaml",
            Some("apiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata:\n  name: gamma\nspec:\n  kubeconfig:\n    embedded: {}\n"),
        )],
    );
    let bad = support::head_commit(&repo.repo);
    up.expect(&[&format!(
        "hub: InvalidCommit: commit {} \"gamma without a hub\" is invalid",
        short(&bad)
    )])
    .await;
    up.mark();
    repo.commit(
        "beta leaves, gamma too",
        &[("spokes/beta.yaml", None), ("spokes/gamma.yaml", None)],
    );
    let fixed = support::head_commit(&repo.repo);
    up.expect(&[&format!(
        "hub: commit {} \"beta leaves, gamma too\" is applied; Ready again after InvalidCommit",
        short(&fixed)
    )])
    .await;
    up.expect(&["hub/beta: removed"]).await;
    let beta_dir = data_dir.join("spokes/beta");
    up.expect(&[&format!(
        "spoke cluster beta stopped, {} deleted",
        beta_dir.display()
    )])
    .await;
    assert!(!beta_dir.exists());

    // Nobody reads stdout any more (`fleetform up | head`): it goes on, and stops cleanly.
    up.reader.abort();
    drop(up.lines);
    let pid = up.child.id().expect("still running").to_string();
    let sent = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(sent.success());
    let status = tokio::time::timeout(PATIENCE, up.child.wait())
        .await
        .expect("up stops on SIGTERM")
        .unwrap();
    let stderr = up.stderr.await.unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(!stderr.contains("no kubeconfig"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let printed = up.seen.join("\n");
    assert!(
        !stderr.contains('\x1b') && !printed.contains('\x1b'),
        "escapes where no terminal reads:\n{printed}\n{stderr}"
    );
}

/// What a new user sees first: `fleetform up` on the example fleet, logging as it does by
/// default, joins every spoke without a warning or an error on its console (each joining agent's
/// first watches were refused, its RBAC bound only after its certificate was issued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_up_of_the_example_fleet_prints_no_warning_or_error() {
    let (dir, _repo) = support::example_fleet_repo();
    let home = tempfile::tempdir().unwrap();
    let mut up = UpProcess::start_with(
        &dir.path().join("fleet"),
        &home.path().join("fleetform"),
        &["--dashboard-addr", "127.0.0.1:0"],
    );
    up.expect(&["converged: 4 spoke(s) Running"]).await;
    let pid = up.child.id().expect("still running").to_string();
    tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    let status = tokio::time::timeout(PATIENCE, up.child.wait())
        .await
        .expect("up stops on SIGTERM")
        .unwrap();
    // What stdout had left, then the whole of stderr.
    while let Some(line) = up.lines.recv().await {
        up.seen.push(line);
    }
    let printed = up.seen.join("\n");
    let stderr = up.stderr.await.unwrap();
    assert!(status.success(), "{status}: {stderr}");
    let noisy: Vec<&str> = stderr
        .lines()
        .chain(printed.lines())
        .filter(|line| {
            line.contains(" WARN ") || line.contains(" ERROR ") || line.starts_with("error")
        })
        .collect();
    assert!(noisy.is_empty(), "{noisy:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_last_the_hubs_client_cert_expiration_seconds() {
    use fleetform::agent::rotation::CertificateLifetime;
    use fleetform::api::vocabulary::HUB_KUBECONFIG_SECRET;
    use k8s_openapi::api::core::v1::Secret;

    let repo = Repo::new();
    let hub = HUB.replace(
        "    clusterClaimsMax: 20\n",
        "    clusterClaimsMax: 20\n    clientCertExpirationSeconds: 600\n",
    );
    let addon = "apiVersion: fleetform.io/v1alpha1
kind: AddOn
metadata:
  name: metrics
spec:
  installNamespace: metrics-agent
  registrations:
    - signerName: kubernetes.io/kube-apiserver-client
";
    repo.commit(
        "a hub whose certificates last ten minutes, a spoke with an addon that registers",
        &[
            ("hubs/hub.yaml", Some(&hub)),
            ("addons/metrics.yaml", Some(addon)),
            (
                "spokes/alpha.yaml",
                Some(&spoke("alpha", "  addons: [metrics]\n")),
            ),
        ],
    );
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    fleet.wait_running("alpha").await;
    // up deploys the addon (its namespace too); the agent stores its certificate there.
    let spoke = fleet.spoke_client("alpha");

    // 600 s, and the signer's backdating of a tenth of that.
    let lasts = |secret: &Secret| {
        let certificate = &secret.data.as_ref().unwrap()["tls.crt"].0;
        let lifetime = CertificateLifetime::from_pem(certificate).unwrap();
        lifetime
            .not_before
            .duration_until(lifetime.not_after)
            .as_secs()
    };
    for (namespace, name) in [
        (AGENT_NAMESPACE, HUB_KUBECONFIG_SECRET),
        ("metrics-agent", "metrics-hub-kubeconfig"),
    ] {
        let secret = wait_for(
            &Api::<Secret>::namespaced(spoke.clone(), namespace),
            name,
            "a certificate",
            |_| true,
        )
        .await;
        let seconds = lasts(&secret);
        assert!(
            (600..=660).contains(&seconds),
            "{namespace}/{name}: the certificate lasts {seconds} s"
        );
    }
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_provides_a_custom_signers_ca_so_its_addon_certificates_are_signed() {
    use k8s_openapi::api::core::v1::Secret;

    let repo = Repo::new();
    let addon = "apiVersion: fleetform.io/v1alpha1
kind: AddOn
metadata:
  name: metrics
spec:
  installNamespace: metrics-agent
  registrations:
    - signerName: example.com/metrics-signer
      signerSecretRef:
        namespace: fleetform-system
        name: metrics-signer-ca
";
    repo.commit(
        "an addon whose certificate a custom signer issues",
        &[
            ("hubs/hub.yaml", Some(HUB)),
            ("addons/metrics.yaml", Some(addon)),
            (
                "spokes/alpha.yaml",
                Some(&spoke("alpha", "  addons: [metrics]\n")),
            ),
        ],
    );
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    fleet.wait_running("alpha").await;
    // No operator runs under up to provide the signer's CA: up does, marked as fleetform's.
    let ca = wait_for(
        &Api::<Secret>::namespaced(fleet.hub.clone(), SYSTEM_NAMESPACE),
        "metrics-signer-ca",
        "the signer's CA",
        |_| true,
    )
    .await;
    assert_eq!(
        kube::ResourceExt::labels(&ca)
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("fleetform")
    );
    let issued = wait_for(
        &Api::<Secret>::namespaced(fleet.spoke_client("alpha"), "metrics-agent"),
        "metrics-example.com-metrics-signer-client-cert",
        "a certificate of the custom signer",
        |_| true,
    )
    .await;
    let certificate = &issued.data.as_ref().unwrap()["tls.crt"].0;
    let issuer = x509_parser::pem::parse_x509_pem(certificate)
        .map(|(_, pem)| pem)
        .unwrap();
    let issuer = issuer.parse_x509().unwrap().issuer().to_string();
    assert!(
        issuer.contains("example.com/metrics-signer"),
        "signed by the CA up made: {issuer}"
    );
    fleet.shutdown().await;
}

/// A lease change is the hub's alone: a spoke whose agent a pass found settled is not read again
/// for it (a TLS handshake and seven requests there, one a read of the agent's election Role:
/// 10,000 of each in a fleet's lease change), and the pass still applies and reports the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_change_reads_nothing_on_a_settled_spoke() {
    let repo = Repo::new();
    repo.commit(
        "a hub and a spoke",
        &[
            ("hubs/hub.yaml", Some(HUB)),
            ("addons/addons.yaml", Some(ADDONS)),
            ("spokes/beta.yaml", Some(&spoke("beta", ""))),
        ],
    );
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    fleet.wait_running("beta").await;
    // The hub's read of the agent: the only request that gets a Role on the spoke (the
    // agent's election Role).
    let agent_reads = |counts: &fleetform_controlplane::requests::RequestCounts| -> u64 {
        counts
            .iter()
            .filter(|(kind, _)| {
                kind.resource == "roles" && kind.verb == fleetform_controlplane::requests::Verb::Get
            })
            .map(|(_, count)| count)
            .sum()
    };
    assert!(
        agent_reads(&fleet.spoke_request_counts("beta")) > 0,
        "the join read the agent on the spoke"
    );
    // Each change applied and reported by a pass that came after every pass before it (a
    // spoke's passes run one at a time): the first after the join's last, the second after
    // the first's.
    let mut counted = None;
    for seconds in [2, 3] {
        let before = fleet.spoke_request_counts("beta");
        fleet.repo.commit(
            &format!("beta: {seconds} s leases"),
            &[(
                "spokes/beta.yaml",
                Some(&spoke(
                    "beta",
                    &format!("  leaseDurationSeconds: {seconds}\n"),
                )),
            )],
        );
        fleet.synced().await;
        wait_for(
            &fleet.spokes(),
            "beta",
            "the new lease applied",
            move |s: &Spoke| {
                let status = s.status.as_ref();
                status.and_then(|s| s.observed_generation) == s.metadata.generation
                    && status
                        .and_then(|s| s.applied.as_ref())
                        .is_some_and(|applied| applied.lease_duration_seconds == seconds)
            },
        )
        .await;
        counted = Some(agent_reads(
            &fleet.spoke_request_counts("beta").since(&before),
        ));
    }
    assert_eq!(
        counted,
        Some(0),
        "the pass that applied the second lease read nothing on the settled spoke"
    );
    fleet.shutdown().await;
}
