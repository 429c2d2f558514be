//! Reading what a hub holds, for the planner: fleetform's objects there, what a server-side
//! apply of the desired objects would store (dry run), the ManagedClusters registered, and the
//! FleetSyncs that keep the hub at a commit.
//! Reads only; it never changes a cluster.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::fleet::{FleetSync, SYSTEM_NAMESPACE};
use crate::api::vocabulary::{CONDITION_HUB_ACCEPTED, STATUS_TRUE};
use crate::api::{ClusterManagementAddOn, Hub, ManagedCluster, Spoke};
use crate::plan::desired::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::plan::{ClusterRegistration, ManagingSync, ObjectKey, ObjectKind, ObservedHub, Stored};
use crate::runtime::watch::{LIST_PAGE, without_managed_fields};

/// The field manager of every object fleetform applies.
pub const FIELD_MANAGER: &str = "fleetform";

/// Why a hub could not be observed.
#[derive(Debug, thiserror::Error)]
#[error("hub {hub}: cannot {action}: {source}")]
pub struct ObserveError {
    pub hub: String,
    pub action: String,
    #[source]
    pub source: kube::Error,
}

/// The API resource of each kind a plan writes.
pub fn api_resource(kind: ObjectKind) -> ApiResource {
    match kind {
        ObjectKind::Hub => ApiResource::erase::<Hub>(&()),
        ObjectKind::Spoke => ApiResource::erase::<Spoke>(&()),
        ObjectKind::ClusterManagementAddOn => ApiResource::erase::<ClusterManagementAddOn>(&()),
    }
}

fn api(client: &Client, key_kind: ObjectKind, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = api_resource(key_kind);
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// How many requests of one kind (dry runs here, writes in `apply`) are in flight at once: a
/// fleet's thousands of objects are not read or written one round trip at a time.
pub const IN_FLIGHT: usize = 16;

/// Observes one hub against the objects the fleet wants there.
pub async fn observe_hub(
    hub: &str,
    client: &Client,
    desired: &BTreeMap<ObjectKey, Stored>,
) -> Result<ObservedHub, ObserveError> {
    observe_hub_with(hub, client, desired, DryRuns::Each).await
}

/// Whether an observation asks the server what applying each object the fleet changes would
/// store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DryRuns {
    /// A dry run of each: a plan a person reads shows exactly what the server will hold, its
    /// defaults included, and nothing the server would refuse is planned.
    Each,
    /// None: for a writer that applies whatever the plan changes at once and tells what
    /// changed by the answers (the sync). A dry run and then the apply were two requests for
    /// each object a commit changes (20,000 when a fleet's lease changes at 10,000 spokes), and
    /// the sync held every dry run's answer at its peak.
    None,
}

/// As [`observe_hub`], with the dry runs `asked` says.
pub async fn observe_hub_with(
    hub: &str,
    client: &Client,
    desired: &BTreeMap<ObjectKey, Stored>,
    asked: DryRuns,
) -> Result<ObservedHub, ObserveError> {
    let failed = |action: &str| {
        let hub = hub.to_string();
        let action = action.to_string();
        move |source| ObserveError {
            hub,
            action,
            source,
        }
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = true;
    for crd in crate::api::crds() {
        let name = crd.metadata.name.unwrap_or_default();
        if crds
            .get_opt(&name)
            .await
            .map_err(failed("read CRDs"))?
            .is_none()
        {
            installed = false;
        }
    }
    let mut observed = ObservedHub {
        installed,
        ..ObservedHub::default()
    };
    if !installed {
        // Nothing of fleetform's can exist yet, and dry runs of unknown kinds would only fail.
        return Ok(observed);
    }

    let managed = ListParams::default()
        .labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"))
        .limit(LIST_PAGE);
    for (kind, namespace) in [
        (ObjectKind::Hub, Some(SYSTEM_NAMESPACE)),
        (ObjectKind::Spoke, Some(SYSTEM_NAMESPACE)),
        (ObjectKind::ClusterManagementAddOn, None),
    ] {
        let resource = api_resource(kind);
        let path = DynamicObject::url_path(&resource, namespace);
        list_paged(client, path, &managed, |object| {
            keep_listed(&mut observed, kind, object, desired);
        })
        .await
        .map_err(failed(&format!("list {}s", kind.as_str())))?;
    }

    observed.fleet_syncs = Api::<FleetSync>::namespaced(client.clone(), SYSTEM_NAMESPACE)
        .list(&ListParams::default())
        .await
        .map_err(failed("list FleetSyncs"))?
        .into_iter()
        .map(|fleetsync| managing(&fleetsync))
        .collect();

    let namespace_exists = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get_opt(SYSTEM_NAMESPACE)
        .await
        .map_err(failed("read namespaces"))?
        .is_some();
    let dry_run = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let mut dry_runs = Vec::new();
    for (key, object) in desired {
        if asked == DryRuns::None
            || key.namespace.is_some() && !namespace_exists
            || observed.dry_run.contains_key(key)
        {
            continue;
        }
        dry_runs.push(dry_run_apply(hub, client, key, object, &dry_run));
    }
    let dry_run: Vec<(ObjectKey, Stored)> = futures::stream::iter(dry_runs)
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;
    observed.dry_run.extend(dry_run);

    list_paged(
        client,
        ManagedCluster::url_path(&(), None),
        &ListParams::default().limit(LIST_PAGE),
        |cluster: ListedCluster| {
            let registration = cluster.registration();
            observed
                .clusters
                .insert(cluster.metadata.name, registration);
        },
    )
    .await
    .map_err(failed("list ManagedClusters"))?;
    Ok(observed)
}

/// Lists what `params` selects at `path` (a resource's URL path) a page at a time, handing each
/// object to `keep` as a `T`: only one page is ever decoded at once, and only into what `T`
/// reads of it (serde skips the rest unallocated).
async fn list_paged<T: DeserializeOwned>(
    client: &Client,
    path: String,
    params: &ListParams,
    mut keep: impl FnMut(T),
) -> Result<(), kube::Error> {
    let request = kube::core::Request::new(path);
    let mut page = params.clone();
    loop {
        let list: Page<T> = client
            .request(request.list(&page).map_err(kube::Error::BuildRequest)?)
            .await?;
        let next = list.metadata.continue_.filter(|token| !token.is_empty());
        list.items.into_iter().for_each(&mut keep);
        match next {
            Some(token) => page = params.clone().continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// One page of a list, its items decoded as `T`.
#[derive(Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
struct Page<T> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default, deserialize_with = "crate::api::null_as_default")]
    items: Vec<T>,
}

/// What a plan reads of a registered ManagedCluster. Decoding no more than this keeps a page
/// of clusters small: their `managedFields`, claims and CA bundles were most of it.
#[derive(Deserialize)]
struct ListedCluster {
    metadata: ListedName,
    #[serde(default, deserialize_with = "crate::api::null_as_default")]
    spec: ListedClusterSpec,
    #[serde(default, deserialize_with = "crate::api::null_as_default")]
    status: ListedConditions,
}

impl ListedCluster {
    fn registration(&self) -> ClusterRegistration {
        ClusterRegistration {
            hub_accepts_client: self.spec.hub_accepts_client.unwrap_or(false),
            accepted: self.status.conditions.iter().any(|condition| {
                condition.type_ == CONDITION_HUB_ACCEPTED && condition.status == STATUS_TRUE
            }),
        }
    }
}

#[derive(Deserialize)]
struct ListedName {
    #[serde(default, deserialize_with = "crate::api::null_as_default")]
    name: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedClusterSpec {
    hub_accepts_client: Option<bool>,
}

#[derive(Default, Deserialize)]
struct ListedConditions {
    // Go writes `null` for none.
    #[serde(default, deserialize_with = "crate::api::null_as_default")]
    conditions: Vec<ListedCondition>,
}

#[derive(Deserialize)]
struct ListedCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

/// What a plan reads of an observed object's status: a Spoke's phase (whether it is online, for
/// a rollout's waves) and the agent it reports running (whether an upgrade is a step).
const STATUS_READ: [&str; 3] = ["phase", "agentVersion", "agentConfigHash"];

/// Keeps a listed object as a plan reads it; when applying what the fleet wants of it would
/// change nothing ([`applies_nothing`]), the object itself stands for its dry run.
fn keep_listed(
    observed: &mut ObservedHub,
    kind: ObjectKind,
    mut object: DynamicObject,
    desired: &BTreeMap<ObjectKey, Stored>,
) {
    let key = ObjectKey {
        kind,
        namespace: object.metadata.namespace.clone(),
        name: object.metadata.name.clone().unwrap_or_default(),
    };
    // A plan never reads who manages which field, nor a status but for a Spoke's phase and the
    // agent it reports ([`STATUS_READ`]): at 10,000 Spokes the rest (conditions, the addons each
    // has and which of them are unavailable, the agent it was released to) was most of what an
    // observation held. The managed fields are taken out rather than dropped: what fleetform's
    // apply owns tells an unchanged object.
    let managed = object.metadata.managed_fields.take().unwrap_or_default();
    if let Some(status) = object.data.get_mut("status").and_then(Value::as_object_mut) {
        status.retain(|field, _| STATUS_READ.contains(&field.as_str()));
    }
    let mut value = serde_json::to_value(&object).unwrap_or(Value::Null);
    let stored = Stored::new(&value);
    if let Some(wanted) = desired.get(&key)
        && applies_nothing(&value, owned_fields(&managed), &wanted.value())
    {
        if let Some(fields) = value.as_object_mut() {
            fields.remove("status");
        }
        observed.dry_run.insert(key.clone(), Stored::new(&value));
    }
    observed.objects.insert(key, stored);
}

/// The fields fleetform's last server-side apply set, from an object's `managedFields`.
fn owned_fields(managed: &[ManagedFieldsEntry]) -> Option<&Value> {
    managed
        .iter()
        .find(|entry| {
            entry.manager.as_deref() == Some(FIELD_MANAGER)
                && entry.operation.as_deref() == Some("Apply")
                && entry.subresource.as_deref().unwrap_or_default().is_empty()
        })
        .and_then(|entry| Some(&entry.fields_v1.as_ref()?.0))
}

/// Whether fleetform's server-side apply of `desired` would leave `live` as it is, told without
/// asking the server, so a fleet's unchanged objects cost no dry run each (a commit that
/// changes one Spoke of 10,000 is one dry run): every field `desired` sets holds that value
/// already, and every field fleetform's last apply set (`owned`) is one `desired` still sets
/// (an apply removes those it no longer does). Anything it cannot tell this way (an owned list
/// item, an object fleetform never applied, a value written in another form) says no, and the
/// dry run decides.
fn applies_nothing(live: &Value, owned: Option<&Value>, desired: &Value) -> bool {
    let (Some(live), Some(owned), Some(fields)) = (live.as_object(), owned, desired.as_object())
    else {
        return false;
    };
    fields
        .iter()
        .filter(|(field, _)| !matches!(field.as_str(), "apiVersion" | "kind"))
        .all(|(field, value)| live.get(field).is_some_and(|have| holds(have, value)))
        && still_set(owned, desired)
}

/// Whether `have` holds every field of `wanted` with its value (lists and scalars whole).
fn holds(have: &Value, wanted: &Value) -> bool {
    match (have, wanted) {
        (Value::Object(have), Value::Object(wanted)) => wanted
            .iter()
            .all(|(field, value)| have.get(field).is_some_and(|have| holds(have, value))),
        _ => have == wanted,
    }
}

/// Whether every field of a `managedFields` set (`fieldsV1`: `f:<name>` per map field, `.` for
/// the field itself) is set in `desired`. List items by key (`k:`), value (`v:`) or index
/// (`i:`) are not followed: they say no.
fn still_set(fields: &Value, desired: &Value) -> bool {
    let Some(fields) = fields.as_object() else {
        return false;
    };
    fields.iter().all(|(path, below)| {
        if path == "." {
            return true;
        }
        let Some(name) = path.strip_prefix("f:") else {
            return false;
        };
        match desired.get(name) {
            None => false,
            Some(value) => {
                below.as_object().is_some_and(serde_json::Map::is_empty) || still_set(below, value)
            }
        }
    })
}

/// What the server would make of `object` if fleetform applied it.
async fn dry_run_apply(
    hub: &str,
    client: &Client,
    key: &ObjectKey,
    object: &Stored,
    params: &PatchParams,
) -> Result<(ObjectKey, Stored), ObserveError> {
    let mut result = api(client, key.kind, key.namespace.as_deref())
        .patch(&key.name, params, &Patch::Apply(object))
        .await
        .map_err(|source| ObserveError {
            hub: hub.to_string(),
            action: format!("dry-run apply {key}"),
            source,
        })?;
    // What a plan reads of it: what it compares (no status) and the spec it would hold.
    without_managed_fields(&mut result);
    if let Some(fields) = result.data.as_object_mut() {
        fields.remove("status");
    }
    Ok((key.clone(), Stored::new(&result)))
}

/// A FleetSync as the planner names it: which repo, ref and commit keep the hub.
pub(crate) fn managing(fleetsync: &FleetSync) -> ManagingSync {
    ManagingSync {
        fleet_sync: fleetsync.metadata.name.clone().unwrap_or_default(),
        repo: fleetsync.spec.repo.clone(),
        git_ref: fleetsync.spec.git_ref.clone(),
        path: fleetsync.spec.path.clone(),
        last_applied_commit: fleetsync
            .status
            .as_ref()
            .and_then(|status| status.last_applied_commit.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Spoke as fleetform applied it, then defaulted by the server and reported on.
    fn live() -> Value {
        json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
            "metadata": {"name": "edge", "namespace": "fleetform-system", "uid": "u1",
                         "labels": {"app.kubernetes.io/managed-by": "fleetform", "team": "a"},
                         "finalizers": ["fleetform.io/hub-cleanup"]},
            "spec": {"hubRef": "hub", "leaseDurationSeconds": 60, "addons": ["metrics"],
                     "cleanup": {"purgeAgentNamespace": true}},
            "status": {"phase": "Running"},
        })
    }

    fn desired() -> Value {
        json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
            "metadata": {"name": "edge", "namespace": "fleetform-system",
                         "labels": {"app.kubernetes.io/managed-by": "fleetform"}},
            "spec": {"hubRef": "hub", "leaseDurationSeconds": 60, "addons": ["metrics"]},
        })
    }

    /// What fleetform's apply of [`desired`] owns.
    fn owned() -> Value {
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {}}},
            "f:spec": {".": {}, "f:hubRef": {}, "f:leaseDurationSeconds": {}, "f:addons": {}},
        })
    }

    #[test]
    fn a_listed_spoke_keeps_of_its_status_what_a_plan_reads() {
        let mut listed = live();
        listed["status"] = json!({
            "phase": "Running", "agentVersion": "0.1.0", "agentConfigHash": "abc",
            "releasedAgent": "abc", "observedGeneration": 3,
            "applied": {"addons": [{"name": "metrics", "installNamespace": "m"}],
                        "unavailableAddons": ["metrics"], "leaseDurationSeconds": 60},
            "conditions": [{"type": "SpokeJoined", "status": "True"}],
        });
        listed["metadata"]["managedFields"] = json!([{"manager": FIELD_MANAGER,
            "operation": "Apply", "fieldsV1": owned()}]);
        let object: DynamicObject = serde_json::from_value(listed).unwrap();
        let key = ObjectKey::namespaced(ObjectKind::Spoke, "edge");
        let wanted = BTreeMap::from([(key.clone(), Stored::new(&desired()))]);
        let mut observed = ObservedHub::default();
        keep_listed(&mut observed, ObjectKind::Spoke, object, &wanted);
        let kept = observed.objects[&key].value();
        assert_eq!(
            kept["status"],
            json!({"phase": "Running", "agentVersion": "0.1.0", "agentConfigHash": "abc"})
        );
        assert_eq!(kept["metadata"].get("managedFields"), None);
        assert_eq!(kept["spec"], live()["spec"], "the spec as listed");
        // Unchanged by what the fleet wants: the object stands for its dry run, without status.
        assert_eq!(observed.dry_run[&key].value().get("status"), None);
    }

    #[test]
    fn an_object_that_holds_what_the_fleet_wants_needs_no_dry_run() {
        // Server defaults, other writers' labels, finalizers and status make no change.
        assert!(applies_nothing(&live(), Some(&owned()), &desired()));
    }

    #[test]
    fn a_changed_value_a_field_no_longer_wanted_or_what_cannot_be_told_needs_a_dry_run() {
        let mut changed = desired();
        changed["spec"]["leaseDurationSeconds"] = json!(20);
        assert!(!applies_nothing(&live(), Some(&owned()), &changed));
        let mut list = desired();
        list["spec"]["addons"] = json!(["metrics", "logging"]);
        assert!(!applies_nothing(&live(), Some(&owned()), &list));

        // The fleet no longer sets a field fleetform set: the apply removes it.
        let mut dropped = desired();
        dropped["spec"]
            .as_object_mut()
            .unwrap()
            .remove("leaseDurationSeconds");
        assert!(!applies_nothing(&live(), Some(&owned()), &dropped));

        // Changed on the hub by someone else (drift): the apply puts it back.
        let mut drifted = live();
        drifted["spec"]["hubRef"] = json!("other");
        assert!(!applies_nothing(&drifted, Some(&owned()), &desired()));

        // Never applied by fleetform, or owning a list item by key: the dry run decides.
        assert!(!applies_nothing(&live(), None, &desired()));
        let mut by_key = owned();
        by_key["f:spec"]["f:taints"] = json!({"k:{\"key\":\"gpu\"}": {".": {}}});
        let (mut tainted, mut with_taints) = (live(), desired());
        tainted["spec"]["taints"] = json!([{"key": "gpu"}]);
        with_taints["spec"]["taints"] = json!([{"key": "gpu"}]);
        assert!(!applies_nothing(&tainted, Some(&by_key), &with_taints));
    }

    #[test]
    fn a_listed_cluster_is_read_for_its_registration_alone() {
        let page: Page<ListedCluster> = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedClusterList",
            "metadata": {"resourceVersion": "7", "continue": "next"},
            "items": [
                {"metadata": {"name": "accepted", "managedFields": [{"manager": "agent",
                    "fieldsV1": {"f:status": {"f:clusterClaims": {}}}}]},
                 "spec": {"hubAcceptsClient": true, "managedClusterClientConfigs": [
                    {"url": "https://spoke", "caBundle": "Y2E="}]},
                 "status": {"conditions": [
                    {"type": "ManagedClusterJoined", "status": "True"},
                    {"type": "HubAcceptedManagedCluster", "status": "True", "reason": "HubClusterAdminAccepted"}],
                    "clusterClaims": [{"name": "id.k8s.io", "value": "x"}]}},
                {"metadata": {"name": "asked"}, "spec": {"hubAcceptsClient": true},
                 "status": {"conditions": null}},
                {"metadata": {"name": "new"}, "spec": null},
            ],
        }))
        .unwrap();
        assert_eq!(page.metadata.continue_.as_deref(), Some("next"));
        let read: Vec<(&str, bool, bool)> = page
            .items
            .iter()
            .map(|cluster| {
                let registration = cluster.registration();
                (
                    cluster.metadata.name.as_str(),
                    registration.hub_accepts_client,
                    registration.accepted,
                )
            })
            .collect();
        assert_eq!(
            read,
            [
                ("accepted", true, true),
                ("asked", true, false),
                ("new", false, false)
            ]
        );
        let none: Page<ListedCluster> =
            serde_json::from_value(json!({"metadata": {}, "items": null})).unwrap();
        assert!(none.items.is_empty());
    }
}
