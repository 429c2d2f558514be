//! Gathering the [`Facts`] about one Spoke from the hub and, while the hub still owns it, the
//! spoke itself.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersion;
use kube::{Api, Client, ResourceExt};

use super::clients::SpokeClients;
use super::cluster_sync::{WantedCluster, drifted};
use super::install::{
    AGENT_CLUSTER_ROLE, AGENT_DEPLOYMENT, HubEndpoint, agent_deployment, agent_deployment_digest,
    bootstrap_current, deployment_current,
};
use super::lifecycle::{AgentRead, Facts, Terminating, agent_facts};
use crate::access::Reached;
use crate::agent::hub_identity::{HubIdentity, bootstrap_fingerprint};
use crate::api::bootstrap_token::BOOTSTRAP_TOKEN_NAMESPACE;
use crate::api::fleet::{AddOn, AppliedSettings, Hub, Spoke};
use crate::api::vocabulary::{
    AGENT_NAMESPACE, ANNOTATION_FORCE_UNJOIN, BOOTSTRAP_HUB_KUBECONFIG_SECRET, CONDITION_AVAILABLE,
    CONDITION_PIVOT_COMPLETE, CONDITION_SPOKE_JOINED, HUB_KUBECONFIG_SECRET,
    HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG, LABEL_CLUSTER_NAME, STATUS_TRUE,
};
use crate::api::{
    ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn, ManifestWork, is_condition_true,
};
use crate::plan::desired::{
    EffectiveSpoke, MANAGED_BY, MANAGED_BY_LABEL, carried_addon_spec, effective,
};

use super::run::{FIELD_MANAGER, ReconcileError};
use crate::runtime::error::KubeError;

/// What one pass knows about a Spoke: the facts and the objects they came from.
pub(crate) struct Gathered {
    pub facts: Facts,
    pub effective: EffectiveSpoke,
    pub cluster: Option<ManagedCluster>,
    /// The hub's bootstrap token Secrets of this spoke (not listed once the spoke is bootstrapped
    /// and they were seen gone).
    pub tokens: Vec<Secret>,
    /// The spoke has joined and its agent holds a certificate it can keep using: it needs no
    /// bootstrap token.
    pub bootstrapped: bool,
    /// The spoke's bootstrap kubeconfig reaches the hub as the hub would write it now.
    pub bootstrap_current: bool,
    /// The agent Deployment on the spoke stays as it is: the hub's rollout has not released the
    /// spoke to the agent it wants.
    pub keep_agent: bool,
    /// What the spoke has of the settings a rollout rolls out besides its agent, as read now
    /// (none until it has joined): reported in its status for the hub's rollout.
    pub applied: Option<AppliedSettings>,
}

/// The AddOn documents `cmas` carry, by name.
pub(crate) fn addon_documents<'a>(
    cmas: impl IntoIterator<Item = &'a ClusterManagementAddOn>,
) -> BTreeMap<String, AddOn> {
    cmas.into_iter()
        .filter_map(|cma| {
            let spec = carried_addon_spec(cma)?.ok()?;
            Some((
                cma.name_any(),
                AddOn {
                    metadata: cma.metadata.clone(),
                    spec,
                },
            ))
        })
        .collect()
}

/// What the reconciler already knows of a spoke, without asking the hub.
pub(crate) struct Known {
    /// Its ManagedCluster, from the reconciler's watch of them.
    pub cluster: Option<ManagedCluster>,
    /// The ManagedClusterAddOns of its cluster's namespace, from the reconciler's watch of them.
    pub addons: Vec<ManagedClusterAddOn>,
    /// Its bootstrap tokens, from the reconciler's watch of them.
    pub tokens: Vec<Secret>,
    /// How long a read of the spoke that found its agent settled ([`AgentSeen::settled`])
    /// stands for another, while nothing it depends on changed (see [`gather`]).
    pub settled_read_stands: Duration,
}

/// Gathers the facts about `spoke` of `hub`. The spoke is read unless its agent unjoins by itself
/// (after the pivot, the agent reports itself; the hub only puts back what was removed or
/// changed there).
pub(crate) async fn gather(
    client: &Client,
    spokes: &SpokeClients,
    spoke: &Spoke,
    hub: &Hub,
    endpoint: &HubEndpoint,
    addon_docs: &BTreeMap<String, AddOn>,
    known: Known,
) -> Result<Gathered, ReconcileError> {
    let name = spoke.name_any();
    let mut effective = effective(spoke, hub, addon_docs);
    let Known {
        cluster,
        addons,
        tokens,
        settled_read_stands,
    } = known;
    // Only the addons fleetform enabled (its mark): one an OCM tool or a person enabled is not
    // fleetform's to disable.
    let marked: Vec<ManagedClusterAddOn> = addons
        .into_iter()
        .filter(|addon| {
            addon.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
        })
        .collect();
    let enabled_addons: BTreeMap<String, String> = marked
        .iter()
        .map(|addon| (addon.name_any(), addon.install_namespace().to_string()))
        .collect();
    let applied = cluster
        .as_ref()
        .filter(|cluster| cluster.is_joined())
        .and_then(|cluster| cluster.spec.lease_duration_seconds)
        .map(|lease| {
            let unavailable = marked
                .iter()
                .filter(|addon| !addon.is_available())
                .map(ResourceExt::name_any)
                .collect();
            crate::rollout::applied(&enabled_addons, unavailable, lease)
        });
    let status_conditions = spoke
        .status
        .as_ref()
        .map(|status| status.conditions.as_slice())
        .unwrap_or_default();
    let pivoted = is_condition_true(status_conditions, CONDITION_PIVOT_COMPLETE);
    // A spoke a former pass saw joined got what git wanted then (a join is not a rollout); from
    // then on, one the hub's rollout (or an addon's own) has not released keeps the addons and
    // lease duration it has, as read now, so that a restart holds it just the same.
    let established = is_condition_true(status_conditions, CONDITION_SPOKE_JOINED);
    let gate = crate::rollout::gate(
        hub,
        &name,
        &crate::rollout::own_rollouts(addon_docs),
        &effective,
        &enabled_addons,
        cluster
            .as_ref()
            .and_then(|cluster| cluster.spec.lease_duration_seconds),
    );
    if established {
        effective.addons = gate.addons;
        effective.lease_duration_seconds = gate.lease_duration_seconds;
    }
    let hub_as_spoke = spoke.spec.is_hub_as_spoke();
    let deleting = spoke.metadata.deletion_timestamp.is_some();
    let by_cluster = ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}={name}"));
    let csrs = if deleting {
        Api::<CertificateSigningRequest>::all(client.clone())
            .list(&by_cluster)
            .await
            .map_err(KubeError::on(format!("CSRs of {name}"), "list"))?
            .items
    } else {
        Vec::new()
    };
    // What only an unjoin reads (what it must wait for or refuse over): read only while the
    // Spoke is deleted, not on each pass of a joining fleet (two requests of ten per pass).
    let (namespace, active_works, terminating) = if deleting {
        let namespace = Api::<Namespace>::all(client.clone())
            .get_opt(&name)
            .await
            .map_err(KubeError::on(format!("namespace {name}"), "read"))?;
        let active_works = Api::<ManifestWork>::namespaced(client.clone(), &name)
            .list(&ListParams::default())
            .await
            .map_err(KubeError::on(format!("ManifestWorks of {name}"), "list"))?
            .into_iter()
            .filter(|work| !work.is_addon_work() && !work.is_deleting())
            .map(|work| work.name_any())
            .collect();
        let terminating = terminating(client, namespace.as_ref(), cluster.as_ref()).await;
        (namespace, active_works, terminating)
    } else {
        (None, Vec::new(), Vec::new())
    };

    // The hub looks at the spoke while it owns the agent, and afterwards to put back what was
    // removed or changed there; not while the agent unjoins by itself.
    //
    // A read that found the agent settled stands for one while nothing it depends on changed
    // (the agent the fleet wants there, where it reaches the hub, the spoke's cluster, what
    // the agent reports of its Deployment), no pass acted on the spoke since, and it is younger
    // than the fleet's resync: a pass woken by a change on the hub (every spoke's, when the
    // fleet's lease changes) reads nothing on the spoke, where each read was a TLS handshake
    // and eight requests there. A resync comes later than that, and reads.
    //
    // Whether a read stands is known without a client, from where the agent was told the hub
    // is when the spoke was last reached by this kubeconfig (a client is made anew from kept
    // credentials, with its TLS configuration: 10,000 of them in a settled fleet's lease change).
    let mut on_spoke = None;
    if !deleting || !pivoted || hub_as_spoke {
        // The digests of the agent the fleet wants there, told its spoke is at `url`, and of
        // what a read depends on.
        let digests = |url: &str| {
            let digest = agent_deployment_digest(&name, &effective, Some(url));
            let depends = read_depends_on(spoke, cluster.as_ref(), digest, endpoint);
            (digest, depends)
        };
        let stands = !deleting
            && spokes.kept_url(spoke).is_some_and(|url| {
                let url = spoke_url(url.as_deref(), endpoint);
                spokes.settled_within(&name, digests(url).1, settled_read_stands)
            });
        let read = if stands {
            Ok(AgentSeen::SETTLED)
        } else {
            match spokes.get(spoke, client).await {
                Ok(reached) => {
                    let url = spoke_url(reached.url.as_deref(), endpoint);
                    let (digest, depends) = digests(url);
                    let desired = agent_deployment(&name, &effective, Some(url));
                    let wanted = Wanted {
                        deployment: &desired,
                        digest,
                        endpoint,
                    };
                    let read = SpokeAgent::read(&reached, &name, &wanted, spokes)
                        .await
                        .map(|read| AgentSeen::of(&read, &desired));
                    match &read {
                        Ok(seen) if seen.settled() => spokes.saw_settled(&name, depends),
                        _ => spokes.unsettle(&name),
                    }
                    read
                }
                Err(err) => Err(ReconcileError::Access(err)),
            }
        };
        if read.is_err() {
            spokes.forget(&name);
        }
        match read {
            Ok(read) => on_spoke = Some(read),
            // A spoke that cannot be reached must not hold its own deletion forever.
            Err(err) if deleting => {
                tracing::warn!(%err, "the spoke cannot be reached; taking its agent for gone");
            }
            Err(err) => return Err(err),
        }
    }
    // The spoke needs no bootstrap token any more: it has joined and its agent holds a
    // certificate it can keep using (and renew by itself).
    let bootstrapped = cluster.as_ref().is_some_and(|c| c.is_joined())
        && on_spoke.is_some_and(|on_spoke| on_spoke.identity_held);
    // A running agent its hub's rollout has not released to another agent stays as it is (a
    // join is no rollout; a target that changes only addons or lease leaves the agent as git
    // has it, so a Deployment edited on the spoke is still put back).
    let reported_agent = spoke
        .status
        .as_ref()
        .and_then(|status| status.agent_config_hash.as_deref());
    let keep_agent = pivoted
        && on_spoke.is_some_and(|on_spoke| on_spoke.has_deployment)
        && reported_agent != Some(effective.agent.hash().as_str())
        && !gate.released;
    let read = on_spoke.map(|on_spoke| AgentRead {
        installed: on_spoke.installed,
        bootstrap_current: on_spoke.bootstrap_current,
        election_rbac: on_spoke.election_rbac,
        outdated: on_spoke.outdated,
        // A Deployment the rollout keeps is not put back either (a pass would apply all but
        // it, and find it edited again).
        edited: on_spoke.edited && !keep_agent,
    });
    let (agent_installed, agent_outdated, agent_drifted) =
        agent_facts(read.as_ref(), pivoted, bootstrapped, !tokens.is_empty());
    let bootstrap_current = read.is_some_and(|read| read.bootstrap_current);

    // Since when no agent has run on the spoke, if none does: its Deployment has no ready
    // replica and its cluster has not been Available since then (no agent renews the lease).
    let unavailable_since = cluster.as_ref().and_then(unavailable_since);
    let agent_down_since = on_spoke
        .filter(|on_spoke| on_spoke.none_available)
        .and(unavailable_since);
    let wanted = WantedCluster {
        labels: &effective.labels,
        lease_duration_seconds: effective.lease_duration_seconds,
        taints: &spoke.spec.taints,
    };
    let facts = Facts {
        deleting,
        finalizers: spoke.finalizers().iter().cloned().collect(),
        hub_as_spoke,
        force_cluster_drain: spoke.spec.cleanup.force_cluster_drain,
        agent_installed,
        cluster_exists: cluster.is_some(),
        accepted: cluster.as_ref().is_some_and(|c| c.hub_accepts_client()),
        joined: cluster.as_ref().is_some_and(|c| c.is_joined()),
        pivoted,
        available: cluster.as_ref().is_some_and(|c| c.is_available()),
        taints: cluster
            .iter()
            .flat_map(|c| c.spec.taints.iter().map(|taint| taint.key.clone()))
            .collect(),
        wanted_addons: effective.addons.clone(),
        enabled_addons,
        active_works,
        cluster_spec_drifted: cluster.as_ref().is_some_and(|c| drifted(c, &wanted)),
        agent_outdated: agent_outdated && !keep_agent,
        agent_superseded: agent_outdated,
        agent_drifted,
        hub_leftovers: cluster
            .as_ref()
            .is_some_and(|c| c.metadata.deletion_timestamp.is_none())
            || namespace
                .as_ref()
                .is_some_and(|ns| ns.metadata.deletion_timestamp.is_none())
            || !csrs.is_empty()
            || !tokens.is_empty(),
        terminating,
        now: Timestamp::now(),
        unavailable_since,
        agent_down_since,
        progress_deadline: Duration::from_secs(
            u64::try_from(hub.spec.rollout.progress_deadline_seconds).unwrap_or(0),
        ),
        unjoin_timeout: Duration::from_secs(
            u64::try_from(spoke.spec.cleanup.unjoin_timeout_seconds).unwrap_or(0),
        ),
        force_unjoin: spoke
            .annotations()
            .get(ANNOTATION_FORCE_UNJOIN)
            .is_some_and(|value| value == "true"),
    };
    Ok(Gathered {
        facts,
        effective,
        cluster,
        tokens,
        bootstrapped,
        bootstrap_current,
        keep_agent,
        applied,
    })
}

/// What of a deleted spoke's is still being deleted on the hub: its namespace while it
/// terminates, with what holds it, and its ManagedCluster while a finalizer holds it.
async fn terminating(
    client: &Client,
    namespace: Option<&Namespace>,
    cluster: Option<&ManagedCluster>,
) -> Vec<Terminating> {
    let mut terminating = Vec::new();
    if let Some(namespace) = namespace
        && let Some(since) = &namespace.metadata.deletion_timestamp
    {
        terminating.push(Terminating {
            object: format!("Namespace {}", namespace.name_any()),
            since: since.0,
            held_by: namespace_holders(client, namespace).await,
        });
    }
    if let Some(cluster) = cluster
        && let Some(since) = &cluster.metadata.deletion_timestamp
    {
        let object = format!("ManagedCluster {}", cluster.name_any());
        let finalizers = cluster.finalizers().to_vec();
        terminating.push(Terminating {
            object: object.clone(),
            since: since.0,
            held_by: if finalizers.is_empty() {
                Vec::new()
            } else {
                vec![(object, finalizers)]
            },
        });
    }
    terminating
}

/// What the namespace controller says is left in a terminating namespace, from its conditions:
/// the resources with objects left (`plural.group`, or `plural` for the core group) and the
/// finalizers that hold some of them; nothing before it has looked, or once nothing holds it.
pub(crate) fn remaining_in(namespace: &Namespace) -> (Vec<String>, Vec<String>) {
    let conditions = namespace
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_deref())
        .unwrap_or_default();
    let listed = |type_: &str, separator: &str| -> Vec<String> {
        conditions
            .iter()
            .filter(|c| c.type_ == type_ && c.status == STATUS_TRUE)
            .filter_map(|c| c.message.as_deref()?.split_once(": ").map(|(_, list)| list))
            .flat_map(|list| list.split(", "))
            .filter_map(|entry| {
                entry
                    .split_once(separator)
                    .map(|(what, _)| what.to_string())
            })
            .collect()
    };
    let finalizers = listed("NamespaceFinalizersRemaining", " in ");
    if finalizers.is_empty() {
        return (Vec::new(), Vec::new());
    }
    (listed("NamespaceContentRemaining", " has "), finalizers)
}

/// The objects in a terminating namespace that finalizers hold, as `Kind namespace/name` with
/// their finalizers. A resource whose objects the hub may not read (or cannot find) is named as
/// the namespace controller names it, with the finalizers it names.
async fn namespace_holders(client: &Client, namespace: &Namespace) -> Vec<(String, Vec<String>)> {
    let (resources, finalizers) = remaining_in(namespace);
    let name = namespace.name_any();
    let mut holders = Vec::new();
    for resource in resources {
        let held = held_objects(client, &name, &resource).await;
        match held {
            Some(objects) if !objects.is_empty() => holders.extend(objects),
            Some(_) => {}
            None => holders.push((
                format!("{resource} in namespace {name}"),
                finalizers.clone(),
            )),
        }
    }
    holders
}

/// The objects of `resource` (`plural.group`) in `namespace` that carry finalizers; `None` when
/// they cannot be read.
async fn held_objects(
    client: &Client,
    namespace: &str,
    resource: &str,
) -> Option<Vec<(String, Vec<String>)>> {
    let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
    let api_resource = if group.is_empty() {
        kube::discovery::oneshot::pinned_group(client, &GroupVersion::gv("", "v1"))
            .await
            .ok()?
            .recommended_resources()
            .into_iter()
            .find(|(found, _)| found.plural == plural)?
            .0
    } else {
        kube::discovery::oneshot::group(client, group)
            .await
            .ok()?
            .recommended_resources()
            .into_iter()
            .find(|(found, _)| found.plural == plural)?
            .0
    };
    let objects = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &api_resource)
        .list(&ListParams::default())
        .await
        .ok()?;
    Some(
        objects
            .items
            .into_iter()
            .filter(|object| !object.finalizers().is_empty())
            .map(|object| {
                (
                    format!("{} {namespace}/{}", api_resource.kind, object.name_any()),
                    object.finalizers().to_vec(),
                )
            })
            .collect(),
    )
}

/// The hub's bootstrap token Secrets of the spoke `name`.
pub(crate) async fn tokens(client: &Client, name: &str) -> Result<Vec<Secret>, ReconcileError> {
    let by_cluster = ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}={name}"));
    Ok(
        Api::<Secret>::namespaced(client.clone(), BOOTSTRAP_TOKEN_NAMESPACE)
            .list(&by_cluster)
            .await
            .map_err(KubeError::on(format!("bootstrap tokens of {name}"), "list"))?
            .items,
    )
}

/// Since when `cluster` has not been Available: the last transition of its Available condition,
/// when that is not True.
fn unavailable_since(cluster: &ManagedCluster) -> Option<Timestamp> {
    let condition = cluster.condition(CONDITION_AVAILABLE)?;
    (condition.status != STATUS_TRUE).then_some(condition.last_transition_time.0)
}

/// What a pass takes from a read of the spoke ([`SpokeAgent`]), against the agent Deployment
/// the fleet wants there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AgentSeen {
    installed: bool,
    bootstrap_current: bool,
    identity_held: bool,
    election_rbac: bool,
    has_deployment: bool,
    /// Its Deployment is not the one wanted.
    outdated: bool,
    edited: bool,
    /// Its Deployment runs no ready agent.
    none_available: bool,
}

impl AgentSeen {
    /// An agent with nothing for the hub to do: installed as wanted, holding its identity,
    /// running.
    const SETTLED: AgentSeen = AgentSeen {
        installed: true,
        bootstrap_current: true,
        identity_held: true,
        election_rbac: true,
        has_deployment: true,
        outdated: false,
        edited: false,
        none_available: false,
    };

    fn of(read: &SpokeAgent, desired: &Deployment) -> Self {
        AgentSeen {
            installed: read.installed(),
            bootstrap_current: read.bootstrap_current,
            identity_held: read.identity_held,
            election_rbac: read.election_rbac,
            has_deployment: read.deployment.is_some(),
            outdated: read
                .deployment
                .as_ref()
                .is_some_and(|current| !deployment_current(current, desired)),
            edited: read.edited,
            none_available: read.none_available(),
        }
    }

    fn settled(&self) -> bool {
        *self == Self::SETTLED
    }
}

/// What tells whether the agent Deployment `live` needs anything of the one wanted (`wanted`,
/// its [`agent_deployment_digest`]): its uid and generation, which moves with every change of its
/// spec, and what is wanted of it. `None` for one without either.
pub(crate) fn unedited_key(live: &Deployment, wanted: u64) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let uid = live.metadata.uid.as_deref()?;
    let generation = live.metadata.generation?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (uid, generation, wanted).hash(&mut hasher);
    Some(hasher.finish())
}

/// The spoke's API server as the hub reaches it, which its agent is told (for its
/// ManagedCluster's `managedClusterClientConfigs`): the URL it was reached at, or the hub's own
/// (a hub-as-spoke is reached with the hub's client).
pub(crate) fn spoke_url<'a>(reached_url: Option<&'a str>, endpoint: &'a HubEndpoint) -> &'a str {
    reached_url.unwrap_or(&endpoint.server)
}

/// What a read of the spoke found depends on, besides the spoke itself: the agent Deployment
/// wanted there (its [`agent_deployment_digest`]), where agents reach the hub, the spoke's
/// cluster (which one, whether it joined and is Available: an agent that stopped shows there
/// first), and what the agent last reported of its Deployment, version and configuration. A
/// change of any makes a read that found the agent settled stand for nothing.
fn read_depends_on(
    spoke: &Spoke,
    cluster: Option<&ManagedCluster>,
    desired: u64,
    endpoint: &HubEndpoint,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    desired.hash(&mut hasher);
    endpoint.server.hash(&mut hasher);
    endpoint.ca_pem.hash(&mut hasher);
    spoke.metadata.uid.hash(&mut hasher);
    cluster
        .map(|cluster| {
            (
                cluster.metadata.uid.as_ref(),
                cluster.is_joined(),
                cluster.is_available(),
            )
        })
        .hash(&mut hasher);
    if let Some(status) = &spoke.status {
        status.agent_deployment.hash(&mut hasher);
        status.agent_version.hash(&mut hasher);
        status.agent_config_hash.hash(&mut hasher);
    }
    hasher.finish()
}

/// What of the agent is on the spoke.
#[derive(Default)]
struct SpokeAgent {
    namespace: bool,
    bootstrap_secret: bool,
    /// The bootstrap kubeconfig reaches the hub where it is now.
    bootstrap_current: bool,
    /// `hub-kubeconfig-secret` holds a certificate the agent would keep using: of this cluster,
    /// obtained with the current bootstrap kubeconfig, not expired.
    identity_held: bool,
    /// The Role and RoleBinding of its election are there.
    election_rbac: bool,
    deployment: Option<Deployment>,
    /// Applying the desired Deployment would change it: it was edited (or is outdated).
    edited: bool,
}

/// What a read of a spoke compares what it finds with.
struct Wanted<'a> {
    /// The agent Deployment wanted there, and its [`agent_deployment_digest`].
    deployment: &'a Deployment,
    digest: u64,
    /// Where its agents are to reach the hub.
    endpoint: &'a HubEndpoint,
}

impl SpokeAgent {
    /// Reads what of the agent is on the spoke `cluster`; whether its Deployment needs anything
    /// is asked of the spoke (a dry run) unless `known` holds it as needing nothing since.
    async fn read(
        reached: &Reached,
        cluster: &str,
        wanted: &Wanted<'_>,
        known: &SpokeClients,
    ) -> Result<Self, ReconcileError> {
        let endpoint = wanted.endpoint;
        let spoke = &reached.client();
        let unreachable = |what: &'static str| {
            move |err: kube::Error| {
                let message = format!("cannot read {what} at {}: {err}", reached.describe());
                ReconcileError::on_spoke(message, &err)
            }
        };
        let namespace = Api::<Namespace>::all(spoke.clone())
            .get_opt(AGENT_NAMESPACE)
            .await
            .map_err(unreachable("the agent namespace"))?
            .is_some_and(|namespace| namespace.metadata.deletion_timestamp.is_none());
        let bootstrap = Api::<Secret>::namespaced(spoke.clone(), AGENT_NAMESPACE)
            .get_opt(BOOTSTRAP_HUB_KUBECONFIG_SECRET)
            .await
            .map_err(unreachable("the bootstrap secret"))?;
        let bootstrap_kubeconfig = bootstrap
            .as_ref()
            .and_then(|secret| secret.data.as_ref())
            .and_then(|data| data.get(HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG))
            .and_then(|bytes| std::str::from_utf8(&bytes.0).ok());
        let bootstrap_current =
            bootstrap_kubeconfig.is_some_and(|kubeconfig| bootstrap_current(kubeconfig, endpoint));
        let identity = Api::<Secret>::namespaced(spoke.clone(), AGENT_NAMESPACE)
            .get_opt(HUB_KUBECONFIG_SECRET)
            .await
            .map_err(unreachable("the agent's hub identity"))?;
        let identity_held =
            identity
                .zip(bootstrap_kubeconfig)
                .is_some_and(|(identity, bootstrap)| {
                    HubIdentity::from_secret(
                        &identity,
                        cluster,
                        &bootstrap_fingerprint(bootstrap),
                        Timestamp::now(),
                    )
                    .is_ok()
                });
        // Without them an agent that elects (see `install::agent_deployment`) never acts, and
        // its Deployment never rolls to it: an agent installed before it elected has none.
        let election_rbac = Api::<Role>::namespaced(spoke.clone(), AGENT_NAMESPACE)
            .get_opt(AGENT_CLUSTER_ROLE)
            .await
            .map_err(unreachable("the agent's election Role"))?
            .is_some()
            && Api::<RoleBinding>::namespaced(spoke.clone(), AGENT_NAMESPACE)
                .get_opt(AGENT_CLUSTER_ROLE)
                .await
                .map_err(unreachable("the agent's election RoleBinding"))?
                .is_some();
        let deployments = Api::<Deployment>::namespaced(spoke.clone(), AGENT_NAMESPACE);
        let deployment = deployments
            .get_opt(AGENT_DEPLOYMENT)
            .await
            .map_err(unreachable("the agent Deployment"))?;
        let edited = match &deployment {
            Some(live) => {
                let seen = unedited_key(live, wanted.digest);
                if seen.is_some_and(|seen| known.known_unedited(cluster, seen)) {
                    false
                } else {
                    let edited = would_change(&deployments, live, wanted.deployment)
                        .await
                        .map_err(unreachable("the agent Deployment (dry run)"))?;
                    if let (false, Some(seen)) = (edited, seen) {
                        known.saw_unedited(cluster, seen);
                    }
                    edited
                }
            }
            None => false,
        };
        Ok(SpokeAgent {
            namespace,
            bootstrap_secret: bootstrap.is_some(),
            bootstrap_current,
            identity_held,
            election_rbac,
            deployment,
            edited,
        })
    }

    fn installed(&self) -> bool {
        self.namespace && self.bootstrap_secret && self.deployment.is_some()
    }

    /// Whether its Deployment runs no ready agent.
    fn none_available(&self) -> bool {
        self.deployment.as_ref().is_some_and(|deployment| {
            deployment
                .status
                .as_ref()
                .and_then(|status| status.available_replicas)
                .unwrap_or(0)
                == 0
        })
    }
}

/// Whether applying `desired` would change the spec of `live`: a server-side dry run, so that
/// defaults the server fills in never count as a change.
async fn would_change(
    api: &Api<Deployment>,
    live: &Deployment,
    desired: &Deployment,
) -> Result<bool, kube::Error> {
    let mut object = serde_json::to_value(desired).map_err(kube::Error::SerdeError)?;
    object["apiVersion"] = "apps/v1".into();
    object["kind"] = "Deployment".into();
    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let applied = api
        .patch(AGENT_DEPLOYMENT, &params, &Patch::Apply(&object))
        .await?;
    Ok(applied.metadata.generation != live.metadata.generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_deployment_is_known_as_wanted_only_at_its_uid_and_generation_for_the_one_wanted() {
        let at = |uid: Option<&str>, generation: Option<i64>| Deployment {
            metadata: kube::api::ObjectMeta {
                uid: uid.map(str::to_string),
                generation,
                ..Default::default()
            },
            ..Default::default()
        };
        let seen = unedited_key(&at(Some("u1"), Some(2)), 7);
        assert!(seen.is_some());
        assert_eq!(seen, unedited_key(&at(Some("u1"), Some(2)), 7));
        assert_ne!(
            seen,
            unedited_key(&at(Some("u1"), Some(3)), 7),
            "its spec changed"
        );
        assert_ne!(seen, unedited_key(&at(Some("u2"), Some(2)), 7), "made anew");
        assert_ne!(
            seen,
            unedited_key(&at(Some("u1"), Some(2)), 8),
            "another is wanted"
        );
        assert_eq!(unedited_key(&at(None, Some(2)), 7), None);
        assert_eq!(unedited_key(&at(Some("u1"), None), 7), None);
    }

    #[test]
    fn what_holds_a_terminating_namespace_is_read_from_the_namespace_controllers_conditions() {
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "spoke-a", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Terminating", "conditions": [
                {"type": "NamespaceDeletionContentFailure", "status": "False",
                 "reason": "ContentDeleted", "message": "All content successfully deleted, may be waiting on finalization"},
                {"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain",
                 "message": "Some resources are remaining: configmaps has 2 resource instances, widgets.golden.example.com has 1 resource instances"},
                {"type": "NamespaceFinalizersRemaining", "status": "True", "reason": "SomeFinalizersRemain",
                 "message": "Some content in the namespace has finalizers remaining: golden.example.com/hold in 1 resource instances"},
            ]},
        }))
        .unwrap();
        assert_eq!(
            remaining_in(&namespace),
            (
                vec![
                    "configmaps".to_string(),
                    "widgets.golden.example.com".to_string()
                ],
                vec!["golden.example.com/hold".to_string()]
            )
        );
        // Content the namespace controller is still deleting, nothing holding it: nothing to
        // name.
        let mut emptying = namespace.clone();
        if let Some(conditions) = emptying.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            conditions.retain(|c| c.type_ != "NamespaceFinalizersRemaining");
        }
        assert_eq!(remaining_in(&emptying), (Vec::new(), Vec::new()));
    }
}
