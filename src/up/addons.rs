//! Addons under `fleetform up`: a minimal agent for every enabled addon.
//!
//! On an OCM hub the addon manager deploys each enabled addon's agent to its spoke (a
//! ManifestWork the spoke's work agent applies), and that agent renews a Lease named after the
//! addon in its install namespace every 60 s (OCM's addon lease updater), which the spoke's
//! agent turns into the addon's Available condition on the hub. `up` runs no pods, so this
//! deployer plays both parts for each ManagedClusterAddOn of a cluster `up` runs (an embedded
//! spoke, or the hub as its own spoke) whose health is judged by its lease: as the spoke's
//! administrator (the work agent's part) it creates the install namespace if missing, a
//! ServiceAccount `<addon>-agent` and a Role and RoleBinding of that name that let it create
//! Leases there and read and update the addon's own, nothing else; then it renews the Lease
//! every `leaseDurationSeconds` as that ServiceAccount (the addon agent's part). An addon whose
//! ManagedClusterAddOn goes (disabled, or its spoke unjoined) stops renewing, and what was
//! created for it is deleted, all but the namespace, which may hold other addons' agents and
//! the spoke agent's registration secrets. `up` stopping leaves everything as it is, as a
//! kubelet stopping leaves its pods' objects.
//!
//! It only deploys: the spoke's agent judges the lease (`agent::addon_health`) and writes the
//! condition, as it does for a real addon.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{ClusterReach, SpokeClusters};
use crate::api::ManagedClusterAddOn;
use crate::api::addon::HealthCheckMode;
use crate::api::fleet::{SYSTEM_NAMESPACE, Spoke};
use crate::plan::desired::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::runtime::error::is_conflict;
use crate::runtime::finalizers::delete_if_present;
use crate::runtime::task_set::TaskSet;
use crate::runtime::watch::{Change, object_changes};

/// Field manager of what the deployer writes on spokes.
const FIELD_MANAGER: &str = "fleetform-up";
/// How soon a deployment that failed is tried again.
const RETRY_DELAY: Duration = Duration::from_secs(2);

/// What the addon deployer of one hub works with.
pub(crate) struct Deployer {
    /// The hub, as the person running `up`: OCM's addon manager reads every cluster's addons.
    pub hub: Client,
    /// The hub's own cluster, where a hub-as-spoke's addons run.
    pub hub_cluster: ClusterReach,
    /// The spokes' clusters `up` runs.
    pub spokes: Arc<SpokeClusters>,
    /// How often a lease is renewed, and the `leaseDurationSeconds` written on it.
    pub lease_duration: Duration,
}

/// Runs an agent for every enabled addon of the hub's clusters `up` runs, until `shutdown`.
pub(crate) async fn run(deployer: Deployer, shutdown: CancellationToken) {
    let deployer = Arc::new(deployer);
    let api: Api<ManagedClusterAddOn> = Api::all(deployer.hub.clone());
    let mut changes = object_changes(api, watcher::Config::default(), &shutdown);
    // Each agent runs in the install namespace it was started for.
    let mut agents = TaskSet::new("addon agent");
    while let Some(change) = changes.next().await {
        match change {
            Err(err) => warn!(%err, "watching ManagedClusterAddOns to run their agents"),
            Ok(Change::Applied(addon)) => {
                let run = |namespace: &String, stop| {
                    run_agent(
                        deployer.clone(),
                        key(&addon),
                        namespace.clone(),
                        stop,
                        shutdown.clone(),
                    )
                };
                let wanted = wanted_namespace(&addon);
                agents
                    .ensure(ObjectRef::from_obj(&addon), wanted, run)
                    .await;
            }
            Ok(Change::Deleted(addon)) => {
                agents.stop(&addon).await;
            }
        }
    }
    // Each agent sees `shutdown` and ends leaving its objects.
    agents.shutdown().await;
}

/// An addon: the cluster (its ManagedClusterAddOn's namespace) and the addon's name.
type AddonKey = (String, String);

fn key(addon: &ManagedClusterAddOn) -> AddonKey {
    (addon.namespace().unwrap_or_default(), addon.name_any())
}

/// The install namespace the addon's agent should run in; `None` when it should not run: the
/// addon is being deleted, or reports its own health (`Customized`), so no lease is judged.
fn wanted_namespace(addon: &ManagedClusterAddOn) -> Option<String> {
    (addon.metadata.deletion_timestamp.is_none()
        && addon.health_check_mode() == HealthCheckMode::Lease)
        .then(|| addon.install_namespace().to_string())
}

/// Deploys one addon's agent and renews its lease until it is stopped: retired (its addon
/// disabled, or moved to another install namespace), it deletes what it created; stopped
/// because `up` stops (`shutdown`), it leaves everything.
async fn run_agent(
    deployer: Arc<Deployer>,
    (cluster, addon): AddonKey,
    namespace: String,
    stop: CancellationToken,
    shutdown: CancellationToken,
) {
    let agent = Agent {
        addon: &addon,
        namespace: &namespace,
        lease_duration: deployer.lease_duration,
    };
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = serve(&deployer, &cluster, &agent) => {
            // Not a cluster of `up`'s: nothing was deployed, nothing to undo.
            return;
        }
    }
    if shutdown.is_cancelled() {
        return;
    }
    let Ok(Runs::Here(reach)) = where_it_runs(&deployer, &cluster).await else {
        return;
    };
    match agent.undeploy(&reach.admin).await {
        Ok(()) => info!(
            cluster,
            addon, "addon disabled: its agent stopped and removed"
        ),
        // Its spoke went with it (unjoined, its cluster stopped): nothing is left to remove.
        Err(err) if !matches!(where_it_runs(&deployer, &cluster).await, Ok(Runs::Here(_))) => {
            debug!(cluster, addon, %err, "addon disabled with its spoke");
        }
        Err(err) => {
            warn!(cluster, addon, %err, "addon disabled: its agent stopped, but what it left could not all be removed")
        }
    }
}

/// Where a cluster's addons run.
enum Runs {
    Here(ClusterReach),
    /// An embedded spoke whose cluster has not started yet.
    NotYet,
    /// Not on a cluster `up` runs.
    Elsewhere,
}

async fn where_it_runs(deployer: &Deployer, cluster: &str) -> Result<Runs, kube::Error> {
    let spokes: Api<Spoke> = Api::namespaced(deployer.hub.clone(), SYSTEM_NAMESPACE);
    let Some(spoke) = spokes.get_opt(cluster).await? else {
        return Ok(Runs::Elsewhere);
    };
    Ok(if spoke.spec.kubeconfig.embedded.is_some() {
        deployer
            .spokes
            .reach(cluster)
            .map_or(Runs::NotYet, Runs::Here)
    } else if spoke.spec.kubeconfig.is_in_cluster() {
        Runs::Here(deployer.hub_cluster.clone())
    } else {
        Runs::Elsewhere
    })
}

/// Waits until the cluster runs, deploys the agent and renews its lease; returns only when the
/// cluster is not one `up` runs.
async fn serve(deployer: &Deployer, cluster: &str, agent: &Agent<'_>) {
    let reach = loop {
        // Subscribed before looking, so a start in between is not missed.
        let mut changes = deployer.spokes.subscribe();
        match where_it_runs(deployer, cluster).await {
            Ok(Runs::Here(reach)) => break reach,
            Ok(Runs::Elsewhere) => {
                debug!(
                    cluster,
                    addon = agent.addon,
                    "not a cluster `up` runs: its addons are not `up`'s to run"
                );
                return;
            }
            Ok(Runs::NotYet) => {
                let _ = changes.recv().await;
            }
            Err(err) => {
                warn!(cluster, addon = agent.addon, %err, "cannot read the addon's Spoke");
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    };
    let leases = loop {
        match agent.deploy(&reach).await {
            Ok(leases) => break leases,
            Err(err) => {
                warn!(cluster, addon = agent.addon, %err, "cannot deploy the addon's agent; trying again");
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    };
    info!(
        cluster,
        addon = agent.addon,
        namespace = agent.namespace,
        "addon agent running"
    );
    let mut tick = tokio::time::interval(agent.lease_duration);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        match agent.renew(&leases).await {
            Ok(()) if failing => {
                info!(cluster, addon = agent.addon, "addon lease renewed again");
                failing = false;
            }
            Ok(()) => {}
            Err(err) if !failing => {
                warn!(cluster, addon = agent.addon, %err, "cannot renew the addon lease; trying again every lease duration");
                failing = true;
            }
            Err(err) => debug!(cluster, addon = agent.addon, %err, "cannot renew the addon lease"),
        }
    }
}

/// One addon's minimal agent on its cluster.
struct Agent<'a> {
    addon: &'a str,
    namespace: &'a str,
    lease_duration: Duration,
}

impl Agent<'_> {
    /// The ServiceAccount the agent runs as, and the name of its Role and RoleBinding.
    fn identity(&self) -> String {
        format!("{}-agent", self.addon)
    }

    /// Creates the install namespace if missing and the agent's identity (as the cluster's
    /// administrator); returns the leases of the install namespace as the agent sees them.
    async fn deploy(&self, reach: &ClusterReach) -> Result<Api<Lease>, String> {
        let admin = &reach.admin;
        let failed = |what: &str| {
            let what = what.to_string();
            move |err: kube::Error| format!("{what}: {err}")
        };
        let namespaces: Api<Namespace> = Api::all(admin.clone());
        // Created if missing, never taken over: it may be someone else's.
        if namespaces
            .get_opt(self.namespace)
            .await
            .map_err(failed("read its install namespace"))?
            .is_none()
        {
            let namespace = Namespace {
                metadata: marked(self.namespace, None),
                ..Namespace::default()
            };
            match namespaces.create(&PostParams::default(), &namespace).await {
                Ok(_) => {}
                Err(err) if is_conflict(&err) => {}
                Err(err) => return Err(failed("create its install namespace")(err)),
            }
        }
        let identity = self.identity();
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        let metadata = json!({
            "name": identity,
            "namespace": self.namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
        });
        Api::<ServiceAccount>::namespaced(admin.clone(), self.namespace)
            .patch(
                &identity,
                &apply,
                &Patch::Apply(
                    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}),
                ),
            )
            .await
            .map_err(failed("write its ServiceAccount"))?;
        // Creating cannot be limited to one name in RBAC; reading and renewing can.
        Api::<Role>::namespaced(admin.clone(), self.namespace)
            .patch(
                &identity,
                &apply,
                &Patch::Apply(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": metadata,
                    "rules": [
                        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                         "verbs": ["create"]},
                        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                         "resourceNames": [self.addon], "verbs": ["get", "update"]},
                    ],
                })),
            )
            .await
            .map_err(failed("write its Role"))?;
        Api::<RoleBinding>::namespaced(admin.clone(), self.namespace)
            .patch(
                &identity,
                &apply,
                &Patch::Apply(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": metadata,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": identity},
                    "subjects": [{"kind": "ServiceAccount", "name": identity, "namespace": self.namespace}],
                })),
            )
            .await
            .map_err(failed("write its RoleBinding"))?;
        let client = reach
            .service_account_client(self.namespace, &identity)
            .await?;
        Ok(Api::namespaced(client, self.namespace))
    }

    /// Renews the addon's lease, creating it if there is none, as OCM's addon lease updater
    /// does.
    async fn renew(&self, leases: &Api<Lease>) -> Result<(), kube::Error> {
        let now = MicroTime(Timestamp::now());
        let seconds = i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        match leases.get_opt(self.addon).await? {
            Some(mut lease) => {
                let spec = lease.spec.get_or_insert_default();
                spec.renew_time = Some(now);
                spec.lease_duration_seconds = Some(seconds);
                leases
                    .replace(self.addon, &PostParams::default(), &lease)
                    .await?;
            }
            None => {
                let lease = Lease {
                    metadata: marked(self.addon, Some(self.namespace)),
                    spec: Some(LeaseSpec {
                        lease_duration_seconds: Some(seconds),
                        renew_time: Some(now),
                        ..LeaseSpec::default()
                    }),
                };
                leases.create(&PostParams::default(), &lease).await?;
            }
        }
        Ok(())
    }

    /// Deletes the lease and the agent's identity (those fleetform created), as the cluster's
    /// administrator; the namespace stays.
    async fn undeploy(&self, admin: &Client) -> Result<(), kube::Error> {
        let identity = self.identity();
        let results = [
            delete_marked(
                Api::<Lease>::namespaced(admin.clone(), self.namespace),
                self.addon,
            )
            .await,
            delete_marked(
                Api::<RoleBinding>::namespaced(admin.clone(), self.namespace),
                &identity,
            )
            .await,
            delete_marked(
                Api::<Role>::namespaced(admin.clone(), self.namespace),
                &identity,
            )
            .await,
            delete_marked(
                Api::<ServiceAccount>::namespaced(admin.clone(), self.namespace),
                &identity,
            )
            .await,
        ];
        results.into_iter().collect()
    }
}

/// Metadata with fleetform's mark.
fn marked(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into()),
        ..ObjectMeta::default()
    }
}

/// Deletes `name` if it carries fleetform's mark: what someone else made is left alone.
async fn delete_marked<K>(api: Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let ours = api.get_opt(name).await?.is_some_and(|object| {
        object.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
    });
    if !ours {
        return Ok(());
    }
    delete_if_present(&api, name).await
}
