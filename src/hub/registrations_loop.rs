//! The hub's addon registrations loop (DESIGN §4.3, seed 001): writes each ManagedClusterAddOn's
//! `status.registrations` from its AddOn document, as OCM's addon manager writes them from an
//! addon's registration options, so that the agent — fleetform's, or OCM's registration agent —
//! requests the certificates the hub approves.
//!
//! What is written is [`status_registrations`]: each registration's signer and subject, OCM's
//! default subject where the document names no user. It is written only when it differs from what
//! the ManagedClusterAddOn says, with a merge patch carrying the `resourceVersion` read (a lost
//! race is retried from a fresh read). ManagedClusterAddOns whose ClusterManagementAddOn is not
//! fleetform's (no `fleetform.io/addon-spec` annotation) are left alone: OCM's addon manager owns
//! their registrations. The loop wakes for a new ManagedClusterAddOn, for a change of its
//! registrations (not for every condition its agent writes), and for every ManagedClusterAddOn of
//! an addon whose ClusterManagementAddOn changes. It reads the ManagedClusterAddOns from the
//! hub process's one cache of them, the reconciler's (`super::cache::with_reconciler`).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument};

use super::approval::status_registrations;
use super::cache;
use super::run::{Context, FIELD_MANAGER, HubError};
use super::signer_loop::addon_spec;
use crate::api::ManagedClusterAddOn;
use crate::api::addon::ClusterManagementAddOn;
use crate::runtime::controller::refs_where;
use crate::runtime::error::KubeError;
use crate::runtime::watch::Share;

pub(crate) async fn run(
    ctx: Arc<Context>,
    addons: cache::AddonLoop,
    documents: cache::DocumentLoop,
    shutdown: CancellationToken,
) {
    let errors = ctx.error_policy("addon registrations loop");
    let Share {
        store: reader,
        events,
    } = addons;
    let changed = events
        .applied_objects()
        .predicate_filter(registrations_hash, Default::default());
    let by_addon = reader.clone();
    let Share {
        store: documents,
        events,
    } = documents;
    let documents_changed = events.touched_objects();
    let controller = Controller::for_stream(changed, reader).watches_stream(
        documents_changed,
        // The ManagedClusterAddOns of the addon on every cluster.
        move |addon| refs_where(&by_addon, |found| found.name_any() == addon.name_any()),
    );
    let ctx = Arc::new(Registrations {
        hub: ctx,
        documents,
    });
    errors.drive(controller, reconcile, ctx, shutdown).await;
}

/// The loop's context: the hub, and its addons' documents.
struct Registrations {
    hub: Arc<Context>,
    documents: Store<ClusterManagementAddOn>,
}

/// What the loop looks at in a ManagedClusterAddOn: which one it is and its registrations.
fn registrations_hash(addon: &ManagedClusterAddOn) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    addon.uid().hash(&mut hasher);
    serde_json::to_string(addon.registrations())
        .ok()?
        .hash(&mut hasher);
    Some(hasher.finish())
}

#[instrument(skip(registrations, addon), fields(addon = addon.name_any(), cluster = addon.namespace()))]
async fn reconcile(
    addon: Arc<ManagedClusterAddOn>,
    registrations: Arc<Registrations>,
) -> Result<Action, HubError> {
    let ctx = &registrations.hub;
    let (Some(cluster), name) = (addon.namespace(), addon.name_any()) else {
        return Ok(Action::await_change());
    };
    let Some(spec) = addon_spec(&ctx.client, &registrations.documents, &name).await? else {
        debug!("not an addon of fleetform's; its registrations are left alone");
        return Ok(Action::await_change());
    };
    let wanted = status_registrations(&spec.registrations, &cluster, &name);
    let nothing_to_write = |addon: &ManagedClusterAddOn| {
        addon.metadata.deletion_timestamp.is_some() || addon.registrations() == wanted.as_slice()
    };
    if nothing_to_write(&addon) {
        return Ok(Action::await_change());
    }
    // Read afresh before writing: the patch carries the resourceVersion, and the cache may be
    // behind.
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), &cluster);
    let object = format!("ManagedClusterAddOn {cluster}/{name}");
    let Some(addon) = addons
        .get_opt(&name)
        .await
        .map_err(KubeError::on(&object, "read"))?
        .filter(|addon| !nothing_to_write(addon))
    else {
        return Ok(Action::await_change());
    };
    let patch = json!({
        "metadata": {"resourceVersion": addon.resource_version()},
        "status": {"registrations": wanted},
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    addons
        .patch_status(&name, &params, &Patch::Merge(&patch))
        .await
        .map_err(KubeError::on(&object, "write its registrations"))?;
    info!(
        registrations = wanted.len(),
        "registrations written from the AddOn document"
    );
    Ok(Action::await_change())
}
