//! Playing kubelet for agent Deployments on an embedded cluster.
//!
//! An embedded control plane runs no pods, so `fleetform up` runs each agent Deployment itself:
//! one in-process agent per Deployment labelled `app=fleetform-agent`, started from the
//! container's arguments (parsed exactly as `fleetform agent` parses them) under the identity of
//! the pod's ServiceAccount (as a kubelet mounts its token), restarted when the
//! Deployment's template changes (an upgrade), stopped when it is deleted. The Deployment's
//! status reports one available replica while its agent runs, as a kubelet's would. An image
//! from a registry under `.invalid` (a name that never resolves, RFC 2606) never pulls: its pod
//! never runs, as a real kubelet's would not — how a test makes an upgrade fail.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use fleetform_controlplane::Identities;

use crate::agent::{AgentLoops, HubConnection};
use crate::plan::desired::stable_hash;
use crate::reconciler::install::{APP_AGENT, LABEL_APP};
use crate::runtime::task_set::{TaskChange, TaskSet};
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
    let mut pods = TaskSet::new("agent");
    while let Some(change) = changes.next().await {
        match change {
            Err(err) => warn!(cluster = node.cluster_name, %err, "watching agent Deployments"),
            Ok(Change::Applied(deployment)) => schedule(&node, &mut pods, deployment).await,
            Ok(Change::Deleted(deployment)) => {
                if pods.stop(&deployment).await {
                    info!(
                        cluster = node.cluster_name,
                        deployment = deployment.name,
                        "agent Deployment deleted: its agent stopped"
                    );
                }
            }
        }
    }
    pods.shutdown().await;
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

/// Starts the Deployment's agent, or restarts it when its template changed (the spec of its
/// task is the template's hash).
async fn schedule(
    node: &Node,
    pods: &mut TaskSet<ObjectRef<Deployment>, String>,
    deployment: Deployment,
) {
    if deployment.metadata.deletion_timestamp.is_some() {
        return;
    }
    let template = deployment
        .spec
        .as_ref()
        .map(|spec| stable_hash(&serde_json::to_string(&spec.template).unwrap_or_default()))
        .unwrap_or_default();
    let args: Vec<String> = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.as_ref())
        .and_then(|pod| pod.containers.first())
        .and_then(|container| container.args.clone())
        .unwrap_or_default();
    let key = ObjectRef::from_obj(&deployment);
    let name = key.name.clone();
    let run = |_: &String, stop| run_pod(node.clone(), deployment, args, stop);
    if pods.ensure(key, Some(template), run).await == TaskChange::Restarted {
        info!(
            cluster = node.cluster_name,
            deployment = name,
            "agent Deployment changed: its agent restarted"
        );
    }
}

/// Runs one agent and keeps its Deployment's status true, restarting it after a failure.
async fn run_pod(node: Node, deployment: Deployment, args: Vec<String>, stop: CancellationToken) {
    let Node {
        cluster_name,
        client,
        identities,
        hub,
        loops,
    } = node;
    let name = deployment.name_any();
    let namespace = deployment.namespace().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let service_account = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.as_ref())
        .and_then(|pod| pod.service_account_name.clone())
        .unwrap_or_else(|| "default".to_string());
    if let Some(registry) = unpullable_registry(&deployment) {
        warn!(
            cluster = cluster_name,
            deployment = name,
            registry,
            "cannot pull the agent's image: its registry does not resolve"
        );
        report(&api, &deployment, false).await;
        stop.cancelled().await;
        return;
    }
    loop {
        let parsed = match crate::agent::args::parse_container_args(&args) {
            Ok(parsed) => parsed,
            Err(err) => {
                warn!(
                    cluster = cluster_name,
                    deployment = name,
                    "cannot start the agent: {err}"
                );
                report(&api, &deployment, false).await;
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
                    deployment = name,
                    "cannot start the agent: {err}"
                );
                report(&api, &deployment, false).await;
                return;
            }
        };
        let mut config = parsed
            .with_env(&container_env(&deployment))
            .into_config(pod_client, hub.clone());
        config.agent_namespace = namespace.clone();
        // Pods of one node share this process: each would bind the same health port. The
        // kubelet stand-in knows whether its agent runs without probing it.
        config.health_addr = None;
        config.loops = loops;
        report(&api, &deployment, true).await;
        info!(
            cluster = cluster_name,
            agent = config.cluster_name,
            "agent started"
        );
        match crate::agent::run(config, stop.clone()).await {
            Ok(()) => return,
            Err(err) => {
                warn!(cluster = cluster_name, deployment = name, %err, "agent failed; restarting");
                report(&api, &deployment, false).await;
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

/// The environment of the Deployment's agent container as a kubelet gives it: literal values,
/// and `fieldRef`s to the pod's labels (how an agent learns the version it was started for).
fn container_env(deployment: &Deployment) -> std::collections::BTreeMap<String, String> {
    let Some(template) = deployment.spec.as_ref().map(|spec| &spec.template) else {
        return Default::default();
    };
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    let label = |path: &str| {
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
                (None, Some(from)) => label(&from.field_ref.as_ref()?.field_path),
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

/// Writes the Deployment's status as a kubelet and the deployment controller would.
async fn report(api: &Api<Deployment>, deployment: &Deployment, running: bool) {
    let ready = i32::from(running);
    let status = json!({"status": {
        "observedGeneration": deployment.metadata.generation,
        "replicas": 1,
        "updatedReplicas": 1,
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
