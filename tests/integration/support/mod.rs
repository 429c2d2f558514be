//! Fixtures of the registration tests: embedded hubs and spokes, the hub loops and agents
//! running in-process, and waiting on watch events with a timeout.

#![allow(dead_code)]

pub mod fleet;
pub mod pod_security;

use std::net::SocketAddr;
use std::time::Duration;

use fleetform::agent::registration::BOOTSTRAP_KUBECONFIG_KEY;
use fleetform::agent::{AgentConfig, HubConnection};
use fleetform::api::ManagedCluster;
use fleetform::api::bootstrap_token::{BootstrapToken, bootstrap_kubeconfig, token_secret};
use fleetform::api::fleet::{KubeconfigSource, SYSTEM_NAMESPACE, Spoke, SpokeSpec};
use fleetform::api::vocabulary::{AGENT_NAMESPACE, BOOTSTRAP_HUB_KUBECONFIG_SECRET};
use fleetform::hub::HubConfig;
use fleetform::reconciler::tokens::BOOTSTRAP_TOKEN_TTL;
use fleetform_controlplane::RunningControlPlane;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector;
use kube::runtime::wait::await_condition;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a test waits for something that should happen within a few lease durations. Its
/// slack is for CI: the suite runs its tests side by side on two cores, where a step of a few
/// seconds alone has taken over 30 (a rollout test's spokes, one after another).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Logs fleetform's tracing to the test's output when `RUST_LOG` is set (to read a failure).
fn log_if_asked() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// An embedded cluster with fleetform's CRDs installed.
pub struct Cluster {
    pub server: RunningControlPlane,
    pub client: Client,
}

impl Cluster {
    pub async fn start() -> Self {
        Self::start_at("127.0.0.1:0".parse().unwrap()).await
    }

    /// Starts a cluster on a given address (to bring a stopped one back on its port).
    pub async fn start_at(addr: SocketAddr) -> Self {
        Self::start_with(fleetform::embedded::builder().listen(addr)).await
    }

    /// Stops the cluster's API server and keeps its address from other sockets (connections to it
    /// are refused meanwhile, as to a cluster that is down) until [`Stopped::start`].
    pub async fn stop(self) -> Stopped {
        let addr = self.server.addr();
        self.server.shutdown().await;
        let hold = tokio::net::TcpSocket::new_v4().expect("a socket");
        hold.set_reuseaddr(true).expect("SO_REUSEADDR");
        // Bound but not listening: the port is ours, and nobody answers on it.
        hold.bind(addr).expect("hold the stopped cluster's address");
        Stopped { addr, hold }
    }

    /// Starts a cluster whose CSR signer issues certificates of at most `max` (a hub whose agents
    /// rotate their certificates within a test).
    pub async fn start_signing_for(max: Duration) -> Self {
        Self::start_with(fleetform::embedded::builder().cluster_signing_duration(max)).await
    }

    /// A cluster whose agent Deployments the tests (or `up`'s kubelet stand-in) play, rolling
    /// them and reporting their status: no deployment controller runs to report otherwise.
    async fn start_with(builder: fleetform_controlplane::ControlPlaneBuilder) -> Self {
        log_if_asked();
        let server = builder
            .without_workload_controllers()
            .start()
            .await
            .expect("control plane starts");
        let client = client_for(&server.kubeconfig()).await;
        let params = PatchParams::apply("fleetform-test").force();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in fleetform::api::crds() {
            let name = crd.metadata.name.clone().unwrap();
            crds.patch(&name, &params, &Patch::Apply(&crd))
                .await
                .expect("apply CRD");
        }
        Cluster { server, client }
    }

    pub fn kubeconfig(&self) -> String {
        self.server.kubeconfig()
    }

    pub async fn namespace(&self, name: &str) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        namespaces
            .patch(
                name,
                &PatchParams::apply("fleetform-test").force(),
                &Patch::Apply(
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                ),
            )
            .await
            .expect("apply namespace");
    }

    /// A client of the hub ServiceAccount with exactly the RBAC `deploy/hub/rbac.yaml` grants
    /// (installed here): what the hub loops, the reconciler and sync run as in production.
    pub async fn hub_identity(&self) -> Client {
        self.namespace(SYSTEM_NAMESPACE).await;
        fleetform::deploy::install_hub_rbac(&self.client)
            .await
            .expect("grant the hub ServiceAccount its RBAC");
        self.service_account_client(
            fleetform::deploy::HUB_SERVICE_ACCOUNT_NAMESPACE,
            fleetform::deploy::HUB_SERVICE_ACCOUNT,
        )
        .await
    }

    /// A client of the agent ServiceAccount on this spoke with the RBAC the reconciler installs
    /// (installed here): what an agent runs as on its spoke.
    pub async fn agent_identity(&self) -> Client {
        use fleetform::reconciler::install;
        let objects = [
            serde_json::to_value(install::agent_namespace()),
            serde_json::to_value(install::agent_service_account()),
            serde_json::to_value(install::agent_cluster_role()),
            serde_json::to_value(install::agent_cluster_role_binding()),
        ];
        for object in objects {
            fleetform::deploy::apply_document(&self.client, &object.unwrap())
                .await
                .expect("install the agent's RBAC");
        }
        self.service_account_client(AGENT_NAMESPACE, install::AGENT_DEPLOYMENT)
            .await
    }

    async fn service_account_client(&self, namespace: &str, name: &str) -> Client {
        let kubeconfig = self
            .server
            .identities()
            .expect("a secure cluster")
            .service_account_kubeconfig(namespace, name)
            .expect("issue the ServiceAccount's identity");
        client_for(&kubeconfig).await
    }

    /// Declares a spoke in git, as sync does (the hub approves CSRs of declared spokes only).
    pub async fn declare_spoke(&self, name: &str) {
        self.namespace(SYSTEM_NAMESPACE).await;
        let spoke = Spoke::new(
            name,
            SpokeSpec {
                hub_ref: "hub".into(),
                kubeconfig: KubeconfigSource {
                    in_cluster: Some(true),
                    ..Default::default()
                },
                lease_duration_seconds: None,
                cluster_claims_max: None,
                agent: None,
                addons: Vec::new(),
                availability: Default::default(),
                cleanup: Default::default(),
                taints: Vec::new(),
                cluster_set: None,
            },
        );
        Api::<Spoke>::namespaced(self.client.clone(), SYSTEM_NAMESPACE)
            .create(&PostParams::default(), &spoke)
            .await
            .expect("declare the spoke");
    }

    /// Issues a bootstrap token of `cluster` on this hub, as the lifecycle reconciler does.
    pub async fn issue_bootstrap_token(&self, cluster: &str) -> BootstrapToken {
        let token = BootstrapToken::generate();
        Api::<Secret>::namespaced(self.client.clone(), "kube-system")
            .create(
                &PostParams::default(),
                &token_secret(
                    cluster,
                    &token.id,
                    &token.secret,
                    Timestamp::now().checked_add(BOOTSTRAP_TOKEN_TTL).unwrap(),
                ),
            )
            .await
            .expect("create the bootstrap token");
        token
    }

    /// A bootstrap kubeconfig reaching this hub with `token`.
    pub fn bootstrap_kubeconfig(&self, token: &BootstrapToken) -> String {
        let ca = self.server.certificate_authority().expect("a secure hub");
        bootstrap_kubeconfig(&self.server.url(), ca.cert_pem(), &token.bearer())
    }

    /// Writes this spoke's `bootstrap-hub-kubeconfig` Secret (and the agent namespace), as the
    /// lifecycle reconciler does.
    pub async fn install_bootstrap(&self, kubeconfig: &str) {
        self.namespace(AGENT_NAMESPACE).await;
        Api::<Secret>::namespaced(self.client.clone(), AGENT_NAMESPACE)
            .patch(
                BOOTSTRAP_HUB_KUBECONFIG_SECRET,
                &PatchParams::apply("fleetform-test").force(),
                &Patch::Apply(json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": BOOTSTRAP_HUB_KUBECONFIG_SECRET},
                    "data": {BOOTSTRAP_KUBECONFIG_KEY: ByteString(kubeconfig.as_bytes().to_vec())},
                })),
            )
            .await
            .expect("write the bootstrap secret");
    }
}

pub async fn client_for(kubeconfig: &str) -> Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A stopped cluster's address, held until it starts again.
pub struct Stopped {
    pub addr: SocketAddr,
    hold: tokio::net::TcpSocket,
}

impl Stopped {
    /// A new cluster on the stopped one's address.
    pub async fn start(self) -> Cluster {
        drop(self.hold);
        Cluster::start_at(self.addr).await
    }
}

/// A task run until its token is cancelled.
pub struct Running {
    pub stop: CancellationToken,
    pub handle: JoinHandle<()>,
}

impl Running {
    /// Stops the task and waits until it has ended, so nothing it does is still in flight.
    pub async fn stop(self) {
        self.stop.cancel();
        self.handle.await.expect("task ends cleanly");
    }
}

/// Runs the hub loops against `hub`, as the hub ServiceAccount.
pub async fn start_hub_loops(hub: &Cluster) -> Running {
    let stop = CancellationToken::new();
    let config = HubConfig {
        client: hub.hub_identity().await,
        access: fleetform::access::Access::default(),
        metrics: Default::default(),
        // The embedded control plane checks who may accept, as OCM's webhook does.
        accept_check: fleetform::hub::run::AcceptCheck::InProcess,
    };
    let handle = tokio::spawn(fleetform::hub::run(config, stop.clone()));
    Running { stop, handle }
}

/// Where agents are told `hub` is: its own URL and CA.
pub fn known_endpoint(hub: &Cluster) -> fleetform::reconciler::install::KnownEndpoint {
    fleetform::reconciler::install::KnownEndpoint {
        server: Some(hub.server.url()),
        ca_pem: hub
            .server
            .certificate_authority()
            .map(|ca| ca.cert_pem().to_string()),
    }
}

/// A hub process on `hub` as the hub ServiceAccount, telling agents to reach the hub at its own
/// URL and CA ([`known_endpoint`]), leading at once, serving nothing (no admin server or
/// webhook) and running no sync.
pub async fn hub_process_config(hub: &Cluster) -> fleetform::hub::process::HubProcessConfig {
    fleetform::hub::process::HubProcessConfig {
        client: hub.hub_identity().await,
        access: fleetform::access::Access::default(),
        known_endpoint: known_endpoint(hub),
        election: None,
        admin_addr: None,
        webhook: None,
        sync: None,
        accept_check: fleetform::hub::run::AcceptCheck::InProcess,
    }
}

/// Runs the lifecycle reconciler against `hub`, as the hub ServiceAccount, telling agents to
/// reach the hub at its own URL and CA.
pub async fn start_reconciler(hub: &Cluster) -> Running {
    let stop = CancellationToken::new();
    let config = fleetform::reconciler::ReconcilerConfig {
        client: hub.hub_identity().await,
        access: fleetform::access::Access::default(),
        known_endpoint: known_endpoint(hub),
        metrics: Default::default(),
    };
    let handle = tokio::spawn(fleetform::reconciler::run(config, stop.clone()));
    Running { stop, handle }
}

/// Declares on `hub` a Hub `hub` (1 s leases, in-cluster) and a Spoke `name` reached through a
/// kubeconfig Secret of `spoke`, as a fleet repo applied by `fleetform apply` would.
pub async fn declare_fleet_of_one(hub: &Cluster, spoke: &Cluster, name: &str) {
    use base64::Engine;
    let secret = format!("{name}-kubeconfig");
    let fleet = [
        json!({"apiVersion": "fleetform.io/v1alpha1", "kind": "Hub",
            "metadata": {"name": "hub", "namespace": SYSTEM_NAMESPACE},
            "spec": {"kubeconfig": {"inCluster": true}, "registration": {"leaseDurationSeconds": 1}}}),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": SYSTEM_NAMESPACE},
            "data": {"kubeconfig": base64::engine::general_purpose::STANDARD.encode(spoke.kubeconfig())}}),
        json!({"apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
            "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE},
            "spec": {"hubRef": "hub", "kubeconfig": {"secretRef": {
                "namespace": SYSTEM_NAMESPACE, "name": secret, "key": "kubeconfig"}}}}),
    ];
    for document in &fleet {
        fleetform::deploy::apply_document(&hub.client, document)
            .await
            .unwrap();
    }
}

/// Prepares `spoke` to register to `hub` as `name` the way the lifecycle reconciler does: the
/// spoke declared on the hub, a bootstrap token of its own, and its bootstrap Secret.
pub async fn prepare_registration(hub: &Cluster, spoke: &Cluster, name: &str) {
    hub.declare_spoke(name).await;
    let token = hub.issue_bootstrap_token(name).await;
    spoke
        .install_bootstrap(&hub.bootstrap_kubeconfig(&token))
        .await;
}

/// An agent for `name` on `spoke` registering to `hub` with its bootstrap Secret (see
/// [`prepare_registration`]), running as the agent ServiceAccount, with 1 s addon leases.
pub async fn agent_config(spoke: &Cluster, name: &str) -> AgentConfig {
    let mut config = AgentConfig::new(
        name,
        HubConnection::BootstrapSecret,
        spoke.agent_identity().await,
    );
    config.addon_lease_duration = Duration::from_secs(1);
    config
}

/// [`prepare_registration`], then [`agent_config`].
pub async fn registering_agent(hub: &Cluster, spoke: &Cluster, name: &str) -> AgentConfig {
    prepare_registration(hub, spoke, name).await;
    agent_config(spoke, name).await
}

pub fn start_agent(config: AgentConfig) -> Running {
    let stop = CancellationToken::new();
    let token = stop.clone();
    let handle = tokio::spawn(async move {
        fleetform::agent::run(config, token)
            .await
            .expect("agent runs");
    });
    Running { stop, handle }
}

/// Waits, by watch, until the object satisfies `condition`; fails the test after [`PATIENCE`].
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    condition: impl Fn(&K) -> bool + Send + Sync + 'static,
) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let found = tokio::time::timeout(
        PATIENCE,
        await_condition(api.clone(), name, move |object: Option<&K>| {
            object.is_some_and(&condition)
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {name}: {what}"))
    .unwrap_or_else(|err| panic!("watching {name}: {err}"));
    found.unwrap_or_else(|| panic!("{name} is gone while waiting for: {what}"))
}

/// Waits, by watch, until the objects (with `labels`, if any) satisfy `done`; fails after
/// [`PATIENCE`].
pub async fn wait_for_list<K>(
    api: Api<K>,
    labels: Option<&str>,
    what: &str,
    done: impl Fn(&[K]) -> bool,
) -> Vec<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let mut config = watcher::Config::default();
    if let Some(labels) = labels {
        config = config.labels(labels);
    }
    let (reader, writer) = reflector::store();
    // A watch error (a resourceVersion compacted away while the machine is busy, say) is
    // recovered from by the watcher, which lists again; one that persists ends in the timeout,
    // which names it.
    let mut events = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .boxed();
    let mut synced = false;
    let mut last_error = None;
    let found = tokio::time::timeout(PATIENCE, async {
        while let Some(event) = events.next().await {
            match event {
                Err(err) => {
                    last_error = Some(err.to_string());
                    continue;
                }
                Ok(watcher::Event::InitDone) => synced = true,
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
                Ok(_) => {}
            }
            let objects: Vec<K> = reader.state().iter().map(|o| (**o).clone()).collect();
            if synced && done(&objects) {
                return objects;
            }
        }
        panic!("watch ended while waiting for: {what}");
    })
    .await;
    found.unwrap_or_else(|_| {
        panic!(
            "timed out waiting for: {what} (last watch error: {})",
            last_error.as_deref().unwrap_or("none")
        )
    })
}

/// Accepts a cluster the way the lifecycle reconciler will: `hubAcceptsClient` and the lease
/// duration on its spec.
pub async fn accept(hub: &Cluster, name: &str, lease_duration_seconds: i32) {
    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    clusters
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hubAcceptsClient": true, "leaseDurationSeconds": lease_duration_seconds}})),
        )
        .await
        .expect("accept the cluster");
}

/// The status of the cluster's condition of this type, if it has one.
pub fn condition_status(cluster: &ManagedCluster, type_: &str) -> Option<String> {
    cluster.condition(type_).map(|c| c.status.clone())
}

/// Waits, by watch, until this very object (by uid) is deleted; fails after [`PATIENCE`].
pub async fn wait_deleted<K>(api: &Api<K>, object: &K)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let uid = object.meta().uid.clone().unwrap_or_default();
    tokio::time::timeout(
        PATIENCE,
        await_condition(
            api.clone(),
            &name,
            kube::runtime::conditions::is_deleted(&uid),
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {name} to be deleted"))
    .unwrap_or_else(|err| panic!("watching {name}: {err}"));
}

/// The commit `repo`'s HEAD is at.
pub fn head_commit(repo: &git2::Repository) -> String {
    repo.head()
        .and_then(|head| head.peel_to_commit())
        .expect("HEAD is a commit")
        .id()
        .to_string()
}

/// Stages every change in `repo`'s work tree (removals too) and commits it on HEAD; returns the
/// commit's id.
pub fn commit_all(repo: &git2::Repository, message: &str) -> String {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.update_all(["*"], None).expect("stage removed files");
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let author = git2::Signature::now("test", "test@example.com").unwrap();
    let parent = repo.head().ok().and_then(|head| head.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &author, &author, message, &tree, &parents)
        .unwrap()
        .to_string()
}

/// Copies the directory `from` (files and subdirectories) to `to`.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A new git repository (branch `main`) whose first commit holds the example fleet under
/// `fleet/`.
pub fn example_fleet_repo() -> (tempfile::TempDir, git2::Repository) {
    let dir = tempfile::tempdir().unwrap();
    let mut init = git2::RepositoryInitOptions::new();
    init.initial_head("main");
    let repo = git2::Repository::init_opts(dir.path(), &init).unwrap();
    copy_dir(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
        &dir.path().join("fleet"),
    );
    commit_all(&repo, "example fleet");
    (dir, repo)
}

/// GETs `path` from an admin endpoint (`/metrics`, `/healthz`, `/readyz`) at `addr`: the status
/// code and the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let (code, response) = http_response(addr, path, None).await;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (code, body)
}

/// GETs `path` from `addr`, with `token` as a bearer if given: the status code and the whole
/// response, head and body.
pub async fn http_response(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let bearer = token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{bearer}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response}"));
    (code, response)
}

/// The value of the series `series` (name and labels, exactly) on `/metrics` at `addr`.
pub async fn metric(addr: SocketAddr, series: &str) -> Option<f64> {
    let (_, metrics) = http_get(addr, "/metrics").await;
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

/// Waits until the series `series` on `/metrics` at `addr` reaches `at_least`; fails after
/// [`PATIENCE`].
pub async fn wait_for_metric(addr: SocketAddr, series: &str, at_least: f64) {
    let reached = async {
        loop {
            if metric(addr, series)
                .await
                .is_some_and(|value| value >= at_least)
            {
                return;
            }
            // The endpoint has no watch: look again shortly.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(PATIENCE, reached)
        .await
        .unwrap_or_else(|_| panic!("{series} never reached {at_least}"));
}

/// Fails unless every Event of `events` is named as client-go's recorders name theirs,
/// `<object>.<nanoseconds in hex>`, with no `generateName` (kube-apiserver refuses fleetform's
/// old `<object>.` with 422), and the name is a DNS-1123 subdomain.
pub fn assert_named_as_client_go(events: &[k8s_openapi::api::events::v1::Event]) {
    for event in events {
        let name = event.metadata.name.as_deref().unwrap_or_default();
        let about = event
            .regarding
            .as_ref()
            .and_then(|regarding| regarding.name.as_deref())
            .unwrap_or_default();
        assert_eq!(event.metadata.generate_name, None, "{name}: generated");
        let (object, nanos) = name
            .rsplit_once('.')
            .unwrap_or_else(|| panic!("{name}: not <object>.<hex>"));
        assert_eq!(
            object,
            fleetform::events::event_name(about, 0)
                .strip_suffix(".0")
                .unwrap_or_default(),
            "{name}: not named for {about}"
        );
        assert!(
            !nanos.is_empty() && nanos.len() <= 16 && u64::from_str_radix(nanos, 16).is_ok(),
            "{name}: not <object>.<nanoseconds in hex>"
        );
        assert!(
            fleetform::fleet::names::dns1123_subdomain_error(name).is_none(),
            "{name}: not a DNS-1123 subdomain"
        );
    }
}

/// A pseudo-terminal: the end a program reads as its terminal, and the end that types into it.
pub fn terminal() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // SAFETY: plain libc calls on a descriptor this function owns; each result is checked
    // before the descriptor is used or handed to `File`.
    let (keyboard, path) = unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(fd >= 0, "posix_openpt");
        assert_eq!(libc::grantpt(fd), 0, "grantpt");
        assert_eq!(libc::unlockpt(fd), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
        let path = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        (std::fs::File::from_raw_fd(fd), path)
    };
    let screen = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
        .expect("open the terminal");
    (screen, keyboard)
}
