//! Playing kubelet for agent Deployments on an embedded cluster.
//!
//! An embedded control plane runs no pods, so `fleetform up` runs each agent Deployment itself:
//! one in-process agent per pod of a Deployment labelled `app=fleetform-agent`, started from the
//! container's arguments (parsed exactly as `fleetform agent` parses them) under the identity of
//! the pod's ServiceAccount (as a kubelet mounts its token), with the pod's name. A Deployment
//! whose template changes is rolled as the deployment controller rolls it: under `Recreate` its
//! pod is stopped before the next starts; under `RollingUpdate` (what fleetform installs) the
//! next starts beside it and it stops only once the next one is ready (the agent's own
//! readiness), so an upgrade to an agent that never starts leaves the one that runs. A pod that
//! is not ready yet is replaced at once by a newer template. The Deployment's status reports one
//! available replica while a ready agent runs, as a kubelet's would. An image from a registry
//! under `.invalid` (a name that never resolves, RFC 2606) never pulls: its pod never runs, as a
//! real kubelet's would not — how a test makes an upgrade fail.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use fleetform_controlplane::Identities;

use crate::agent::{AgentLoops, HubConnection};
use crate::plan::desired::stable_hash;
use crate::reconciler::install::{APP_AGENT, LABEL_APP};
use crate::runtime::task_set::TaskSet;
use crate::runtime::watch::{Change, object_changes};

/// How long a failed agent waits before it is started again.
const RESTART_DELAY: Duration = Duration::from_secs(2);

/// Runs the agents of `cluster`'s agent Deployments until `shutdown`; each reaches its hub
/// through `hub` (the bootstrap flow reads the spoke's own secrets, so one value serves all) and
/// its spoke as its pod's ServiceAccount, whose credentials `identities` issues (`client`, the
/// kubelet's own, reports Deployment status; it also serves agents when there are no
/// identities to issue, on a cluster serving plain HTTP). Its agents run `loops`.
pub async fn run(
    cluster_name: String,
    client: Client,
    identities: Option<Identities>,
    hub: HubConnection,
    loops: AgentLoops,
    shutdown: CancellationToken,
) {
    let node = Node {
        cluster_name,
        client,
        identities,
        hub,
        loops,
    };
    register_node(&node).await;
    let deployments: Api<Deployment> = Api::all(node.client.clone());
    let config = watcher::Config::default().labels(&format!("{LABEL_APP}={APP_AGENT}"));
    let mut changes = object_changes(deployments, config, &shutdown);
    // One task per Deployment rolls its pods; each hears the Deployment's every version.
    let mut rollers = TaskSet::new("agent Deployment");
    let mut versions: HashMap<ObjectRef<Deployment>, watch::Sender<Deployment>> = HashMap::new();
    while let Some(change) = changes.next().await {
        match change {
            Err(err) => warn!(cluster = node.cluster_name, %err, "watching agent Deployments"),
            Ok(Change::Applied(deployment)) => {
                if deployment.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let key = ObjectRef::from_obj(&deployment);
                match versions.get(&key) {
                    Some(version) if !version.is_closed() => {
                        version.send_replace(deployment);
                    }
                    _ => {
                        let (version, heard) = watch::channel(deployment);
                        versions.insert(key.clone(), version);
                        let node = node.clone();
                        rollers.start(key, (), |stop| roll(node, heard, stop)).await;
                    }
                }
            }
            Ok(Change::Deleted(deployment)) => {
                versions.remove(&deployment);
                if rollers.stop(&deployment).await {
                    info!(
                        cluster = node.cluster_name,
                        deployment = deployment.name,
                        "agent Deployment deleted: its agent stopped"
                    );
                }
            }
        }
    }
    rollers.shutdown().await;
}

/// What the kubelet of one cluster runs pods with.
#[derive(Clone)]
struct Node {
    cluster_name: String,
    client: Client,
    identities: Option<Identities>,
    hub: HubConnection,
    loops: AgentLoops,
}

/// One pod of an agent Deployment: the template it runs, and whether its agent is ready.
struct Pod {
    template: String,
    ready: watch::Receiver<bool>,
    stop: CancellationToken,
    handle: JoinHandle<()>,
}

impl Pod {
    fn start(node: &Node, deployment: &Deployment, template: String) -> Pod {
        let (ready_tx, ready) = watch::channel(false);
        let stop = CancellationToken::new();
        // As a ReplicaSet names its pods: the Deployment, its template, a random suffix.
        let name = format!(
            "{}-{}-{:05x}",
            deployment.name_any(),
            template.get(..10).unwrap_or(&template),
            fastrand::u32(..0xfffff)
        );
        let handle = tokio::spawn(run_pod(
            node.clone(),
            deployment.clone(),
            name,
            ready_tx,
            stop.clone(),
        ));
        Pod {
            template,
            ready,
            stop,
            handle,
        }
    }

    fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    async fn stop(self) {
        self.stop.cancel();
        if let Err(err) = self.handle.await {
            warn!(%err, "an agent pod ended abnormally");
        }
    }
}

/// Rolls one agent Deployment, whose every version `deployment` hears, until `stop`: the pod
/// that serves, and the one it rolls to until that one is ready; its status says whether a
/// ready agent runs.
async fn roll(node: Node, mut deployment: watch::Receiver<Deployment>, stop: CancellationToken) {
    let mut serving: Option<Pod> = None;
    let mut next: Option<Pod> = None;
    let mut reported = None;
    loop {
        let current = deployment.borrow_and_update().clone();
        let template = template_of(&current);
        let newest = next.as_ref().or(serving.as_ref()).map(|pod| &pod.template);
        if newest != Some(&template) {
            // A pod not ready yet is of no use: the newest template replaces it at once.
            if let Some(pod) = next.take() {
                pod.stop().await;
            }
            if serving.is_some() && recreates(&current) {
                if let Some(pod) = serving.take() {
                    pod.stop().await;
                }
            } else if serving.is_some() {
                info!(
                    cluster = node.cluster_name,
                    deployment = current.name_any(),
                    "agent Deployment changed: starting its new agent beside the one that runs"
                );
            }
            next = Some(Pod::start(&node, &current, template.clone()));
        }
        if next.as_ref().is_some_and(Pod::is_ready) {
            if let Some(pod) = serving.take() {
                info!(
                    cluster = node.cluster_name,
                    deployment = current.name_any(),
                    "the new agent is ready: stopping the one it replaces"
                );
                pod.stop().await;
            }
            serving = next.take();
        }
        let available = serving.as_ref().is_some_and(Pod::is_ready);
        let updated = next.is_none();
        let status = (current.metadata.generation, available, updated);
        if reported != Some(status) {
            report(&node.client, &current, available, updated).await;
            reported = Some(status);
        }
        let next_ready = async {
            match next.as_mut() {
                Some(pod) => pod.ready.changed().await,
                None => std::future::pending().await,
            }
        };
        let serving_ready = async {
            match serving.as_mut() {
                Some(pod) => pod.ready.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.cancelled() => break,
            changed = deployment.changed() => if changed.is_err() { break },
            // A pod that ended for good (its arguments refused) tells nothing more.
            Ok(()) = next_ready => {}
            Ok(()) = serving_ready => {}
        }
    }
    for pod in [next, serving].into_iter().flatten() {
        pod.stop().await;
    }
}

/// The hash of `deployment`'s pod template: a new one is a new pod.
fn template_of(deployment: &Deployment) -> String {
    deployment
        .spec
        .as_ref()
        .map(|spec| stable_hash(&serde_json::to_string(&spec.template).unwrap_or_default()))
        .unwrap_or_default()
}

/// Whether `deployment` is rolled by stopping its pod before the next starts.
fn recreates(deployment: &Deployment) -> bool {
    deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.strategy.as_ref())
        .and_then(|strategy| strategy.type_.as_deref())
        == Some("Recreate")
}

/// Runs the agent of one pod, named `name`, telling `ready` whether it is ready (its agent's
/// own readiness), restarting it after a failure.
async fn run_pod(
    node: Node,
    deployment: Deployment,
    name: String,
    ready: watch::Sender<bool>,
    stop: CancellationToken,
) {
    let Node {
        cluster_name,
        client,
        identities,
        hub,
        loops,
    } = node;
    let deployment_name = deployment.name_any();
    let namespace = deployment.namespace().unwrap_or_default();
    let args: Vec<String> = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.as_ref())
        .and_then(|pod| pod.containers.first())
        .and_then(|container| container.args.clone())
        .unwrap_or_default();
    let service_account = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.as_ref())
        .and_then(|pod| pod.service_account_name.clone())
        .unwrap_or_else(|| "default".to_string());
    if let Some(registry) = unpullable_registry(&deployment) {
        warn!(
            cluster = cluster_name,
            deployment = deployment_name,
            registry,
            "cannot pull the agent's image: its registry does not resolve"
        );
        stop.cancelled().await;
        return;
    }
    loop {
        let parsed = match crate::agent::args::parse_container_args(&args) {
            Ok(parsed) => parsed,
            Err(err) => {
                warn!(
                    cluster = cluster_name,
                    deployment = deployment_name,
                    "cannot start the agent: {err}"
                );
                return;
            }
        };
        let pod_client = match super::service_account_client(
            identities.as_ref(),
            &client,
            &namespace,
            &service_account,
        )
        .await
        {
            Ok(pod_client) => pod_client,
            Err(err) => {
                warn!(
                    cluster = cluster_name,
                    deployment = deployment_name,
                    "cannot start the agent: {err}"
                );
                return;
            }
        };
        let mut config = parsed
            .with_env(&container_env(&deployment, &name))
            .into_config(pod_client, hub.clone());
        config.agent_namespace = namespace.clone();
        // Pods of one node share this process: each would bind the same health port. The
        // kubelet stand-in follows its agents' readiness without probing it.
        config.health_addr = None;
        config.loops = loops;
        let readiness = crate::health::Readiness::new("the agent is starting");
        let mut readiness_changes = readiness.changes();
        let forward = ready.clone();
        let forwarding = tokio::spawn(async move {
            loop {
                let now = readiness_changes.borrow_and_update().is_ok();
                forward.send_if_modified(|ready| std::mem::replace(ready, now) != now);
                if readiness_changes.changed().await.is_err() {
                    return;
                }
            }
        });
        info!(
            cluster = cluster_name,
            agent = config.cluster_name,
            pod = name,
            "agent started"
        );
        let ran = crate::agent::run::run_with(config, readiness, stop.clone()).await;
        forwarding.abort();
        ready.send_replace(false);
        match ran {
            Ok(()) => return,
            Err(err) => {
                warn!(cluster = cluster_name, deployment = deployment_name, %err, "agent failed; restarting");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(RESTART_DELAY) => {}
        }
    }
}

/// The registry of the agent container's image when it is under `.invalid`.
fn unpullable_registry(deployment: &Deployment) -> Option<String> {
    let image = deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()?;
    let (registry, _) = image.split_once('/')?;
    let host = registry.split(':').next().unwrap_or(registry);
    host.ends_with(".invalid").then(|| registry.to_string())
}

/// The environment of the Deployment's agent container as a kubelet gives it to the pod `pod`:
/// literal values, and `fieldRef`s to the pod's labels (how an agent learns the version it was
/// started for) and name.
fn container_env(deployment: &Deployment, pod: &str) -> std::collections::BTreeMap<String, String> {
    let Some(template) = deployment.spec.as_ref().map(|spec| &spec.template) else {
        return Default::default();
    };
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    let field = |path: &str| {
        if path == "metadata.name" {
            return Some(pod.to_string());
        }
        let key = path.strip_prefix("metadata.labels['")?.strip_suffix("']")?;
        labels?.get(key).cloned()
    };
    template
        .spec
        .as_ref()
        .and_then(|pod| pod.containers.first())
        .and_then(|container| container.env.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|var| {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => Some(value.clone()),
                (None, Some(from)) => field(&from.field_ref.as_ref()?.field_path),
                (None, None) => None,
            }?;
            Some((var.name.clone(), value))
        })
        .collect()
}

/// Registers this kubelet's Node, as a kubelet does, with this machine's CPUs and memory as its
/// capacity and every condition healthy, so that the agent reports capacity and node health
/// (OCM's placement reads them) for an embedded cluster too.
async fn register_node(node: &Node) {
    let name = format!("{}-node", node.cluster_name);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|meminfo| {
            meminfo
                .lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|value| {
                    value
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .unwrap_or(0);
    let capacity =
        json!({"cpu": cpus.to_string(), "memory": format!("{memory_kib}Ki"), "pods": "110"});
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason,
               "message": "fleetform up plays kubelet for this embedded cluster",
               "lastHeartbeatTime": k8s_openapi::jiff::Timestamp::now(),
               "lastTransitionTime": k8s_openapi::jiff::Timestamp::now()})
    };
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(node.client.clone());
    let object = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "node-role.kubernetes.io/worker": ""}},
    });
    let status = json!({"status": {
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            condition("Ready", "True", "KubeletReady"),
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
        ],
    }});
    let params = PatchParams::apply("fleetform-up-kubelet").force();
    let registered = match nodes.patch(&name, &params, &Patch::Apply(&object)).await {
        Ok(_) => nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map(|_| ()),
        Err(err) => Err(err),
    };
    if let Err(err) = registered {
        warn!(cluster = node.cluster_name, %err, "cannot register the embedded cluster's Node");
    }
}

/// Writes the Deployment's status as a kubelet and the deployment controller would: one
/// replica, `available` while a ready agent runs, `updated` once the pod that runs is of its
/// template.
async fn report(client: &Client, deployment: &Deployment, available: bool, updated: bool) {
    let api: Api<Deployment> =
        Api::namespaced(client.clone(), &deployment.namespace().unwrap_or_default());
    let ready = i32::from(available);
    let status = json!({"status": {
        "observedGeneration": deployment.metadata.generation,
        "replicas": 1,
        "updatedReplicas": i32::from(updated),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": 1 - ready,
    }});
    if let Err(err) = api
        .patch_status(
            &deployment.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
    {
        warn!(deployment = deployment.name_any(), %err, "cannot report the agent Deployment's status");
    }
}
