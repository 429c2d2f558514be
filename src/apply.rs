//! Carrying out a plan's object changes on a hub: day 0 (fleetform's CRDs and namespace on a hub
//! that lacks them), then server-side apply of every created or updated object (field manager
//! `fleetform`) and deletion of the objects git no longer holds. The lifecycle steps those
//! objects set off are the reconciler's: this module only writes what the plan says.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use tracing::warn;

use crate::api::fleet::{Hub, SYSTEM_NAMESPACE};
use crate::observe::{FIELD_MANAGER, IN_FLIGHT, api_resource};
use crate::plan::desired::ObjectKind;
use crate::plan::{Action, HubPlan, ObjectChange, ObjectKey, ReadVersion, Step};

/// Why a plan could not be carried out on a hub.
#[derive(Debug, thiserror::Error)]
#[error("hub {hub}: cannot {action}: {source}")]
pub struct ApplyError {
    pub hub: String,
    pub action: String,
    #[source]
    pub source: kube::Error,
}

/// What applying a hub's plan wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// CRDs installed (day 0); OCM's own CRDs already on the hub are left as they are.
    pub installed_crds: Vec<String>,
    /// `create`/`update`/`delete` and the object, in the order they were done.
    pub written: Vec<String>,
    /// The same objects with what was done to them and, when the server returned it, their uid
    /// (so that events can name them).
    pub objects: Vec<WrittenObject>,
}

/// One object a plan's apply wrote or deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenObject {
    pub action: Action,
    pub key: ObjectKey,
    pub uid: Option<String>,
    /// The object's `metadata.generation` as written: a later one means someone changed its
    /// spec since (see [`crate::converge`]).
    pub generation: Option<i64>,
}

/// Day 0 on the hub `hub`: fleetform's CRDs (any CRD of the same name that fleetform did not
/// write, OCM's own included, is left as it is) and its namespace. Returns the CRDs written;
/// running it again is harmless.
pub async fn install_hub(hub: &str, client: &Client) -> Result<Vec<String>, ApplyError> {
    let failed = |action: String| {
        let hub = hub.to_string();
        move |source| ApplyError {
            hub,
            action,
            source,
        }
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut installed = Vec::new();
    for crd in crate::api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let written = crate::deploy::install_crd(client, &crd)
            .await
            .map_err(|err| failed(format!("install CRD {name}"))(err.source))?;
        if written.changed() {
            installed.push(name);
        }
    }
    let namespace = crate::deploy::manifests::namespace();
    Api::<Namespace>::all(client.clone())
        .patch(SYSTEM_NAMESPACE, &params, &Patch::Apply(&namespace))
        .await
        .map_err(failed(format!("create namespace {SYSTEM_NAMESPACE}")))?;
    Ok(installed)
}

/// Writes a hub's plan: installation first when the plan asks for it, then object changes in
/// plan order, up to [`IN_FLIGHT`] at once within each run of one kind and action.
pub async fn apply_hub(plan: &HubPlan, client: &Client) -> Result<Applied, ApplyError> {
    let mut applied = Applied::default();
    if plan.steps.contains(&Step::InstallHub) {
        applied.installed_crds = install_hub(&plan.hub, client).await?;
    }
    // While Spokes change, their Hub's rollout waits to see them all (see
    // `rollout::ANNOTATION_WRITING_SPOKES`); the mark comes off however the writes end.
    let marked = changes_spokes(plan)
        && mark_writing_spokes(client, &plan.hub, Some(Timestamp::now())).await;
    let written = write_changes(plan, client, &mut applied).await;
    if marked {
        mark_writing_spokes(client, &plan.hub, None).await;
    }
    written.map(|()| applied)
}

/// Whether `plan` changes Spokes of a Hub that stays (a new Hub's spokes all join: no
/// rollout).
fn changes_spokes(plan: &HubPlan) -> bool {
    let of_kind = |kind: ObjectKind, action: Action| {
        plan.changes
            .iter()
            .any(|change| change.key.kind == kind && change.action == action)
    };
    of_kind(ObjectKind::Spoke, Action::Update) && !of_kind(ObjectKind::Hub, Action::Create)
}

/// Puts on the Hub `hub` the mark that the writing of its Spokes `began`, or takes it off
/// (`None`); whether it did. A Hub not there has nothing to hold; a mark that cannot be written
/// is said in the log and holds nothing (one left on holds the rollout 5 minutes at most).
async fn mark_writing_spokes(client: &Client, hub: &str, began: Option<Timestamp>) -> bool {
    let patch = serde_json::json!({"metadata": {"annotations": {
        crate::rollout::ANNOTATION_WRITING_SPOKES: began.map(|at| at.to_string()),
    }}});
    let params = PatchParams {
        field_manager: Some(WRITING_SPOKES_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let hubs: Api<Hub> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    match hubs.patch(hub, &params, &Patch::Merge(&patch)).await {
        Ok(_) => true,
        Err(kube::Error::Api(status)) if status.code == 404 => false,
        Err(err) => {
            let doing = if began.is_some() { "mark" } else { "unmark" };
            warn!(hub, %err, "cannot {doing} the Hub's Spokes as being written");
            false
        }
    }
}

/// The field manager of the mark [`mark_writing_spokes`] writes.
const WRITING_SPOKES_MANAGER: &str = "fleetform-writing-spokes";

/// Writes a plan's object changes in plan order into `applied`.
async fn write_changes(
    plan: &HubPlan,
    client: &Client,
    applied: &mut Applied,
) -> Result<(), ApplyError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    // Plan order holds between runs of changes of one kind and action (hubs before their
    // spokes, say); within a run the writes are independent and go out together.
    for run in plan
        .changes
        .chunk_by(|a, b| a.key.kind == b.key.kind && a.action == b.action)
    {
        let writes: Vec<_> = run
            .iter()
            .map(|change| write_change(&plan.hub, client, change, &plan.read_versions, &params))
            .collect();
        let written: Vec<Option<WrittenObject>> = futures::stream::iter(writes)
            .buffered(IN_FLIGHT)
            .try_collect()
            .await?;
        for object in written.into_iter().flatten() {
            let verb = match object.action {
                Action::Create => "create",
                Action::Update => "update",
                Action::Delete => "delete",
            };
            applied.written.push(format!("{verb} {}", object.key));
            applied.objects.push(object);
        }
    }
    Ok(())
}

/// Writes one change of a plan; `None` when it has nothing to write.
async fn write_change(
    hub: &str,
    client: &Client,
    change: &ObjectChange,
    plan_reads: &BTreeMap<String, ReadVersion>,
    params: &PatchParams,
) -> Result<Option<WrittenObject>, ApplyError> {
    let failed = |action: String| {
        move |source| ApplyError {
            hub: hub.to_string(),
            action,
            source,
        }
    };
    let api = dynamic(client, &change.key);
    let (uid, generation) = match (change.action, &change.desired) {
        (Action::Create | Action::Update, Some(object)) => {
            let written = api
                .patch(&change.key.name, params, &Patch::Apply(object))
                .await
                .map_err(failed(format!("apply {}", change.key)))?
                .metadata;
            // An apply that stored nothing leaves the version the plan read: no change (a plan
            // made without dry runs cannot tell a server's defaults from a change).
            let read = plan_read_version(plan_reads, &change.key);
            if change.action == Action::Update
                && read.is_some()
                && read == written.resource_version.as_deref()
            {
                return Ok(None);
            }
            (written.uid, written.generation)
        }
        (Action::Delete, _) => {
            // An object already being deleted (a plan saved before its deletion began) is on
            // its way out: deleting it again is no write of this plan's.
            let live = api
                .get_opt(&change.key.name)
                .await
                .map_err(failed(format!("read {}", change.key)))?;
            if live.is_none_or(|live| live.metadata.deletion_timestamp.is_some()) {
                return Ok(None);
            }
            // Deleting sets off the object's finalizers; a 404 means someone was first.
            match api.delete(&change.key.name, &DeleteParams::default()).await {
                Ok(deleted) => (deleted.left().and_then(|object| object.metadata.uid), None),
                Err(kube::Error::Api(status)) if status.code == 404 => (None, None),
                Err(err) => return Err(failed(format!("delete {}", change.key))(err)),
            }
        }
        (Action::Create | Action::Update, None) => return Ok(None),
    };
    Ok(Some(WrittenObject {
        action: change.action,
        key: change.key.clone(),
        uid,
        generation,
    }))
}

/// The resourceVersion of `key` the plan read, if it read one.
fn plan_read_version<'a>(
    reads: &'a BTreeMap<String, ReadVersion>,
    key: &ObjectKey,
) -> Option<&'a str> {
    reads
        .get(&key.to_string())
        .map(|read| read.resource_version.as_str())
        .filter(|version| !version.is_empty())
}

fn dynamic(client: &Client, key: &ObjectKey) -> Api<DynamicObject> {
    let resource = api_resource(key.kind);
    match &key.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}
