//! Installing (or upgrading) fleetform on a hub: the install set of [`super::manifests`] written
//! in its order by server-side apply, each write said as kubectl says it (created, configured,
//! unchanged), then waiting — by watch, within one deadline — until every CRD is Established
//! and the hub Deployment has rolled out. A FleetSync is written once its CRD is Established.
//! Whether a CRD is established and how far a rollout is are pure judgements
//! ([`established`], [`rollout`]).

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use tokio::time::Instant;

use super::manifests::{HUB_DEPLOYMENT, HubSettings, hub_manifests};
use super::{Applied, InstallError, apply_document};
use crate::api::fleet::SYSTEM_NAMESPACE;

/// What an installation is doing, for its progress display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// One object written, and what the write did.
    Applied { object: String, applied: Applied },
    /// Still waiting on `what` (the same for every event of one wait), which is at `state`.
    Waiting { what: String, state: String },
    /// The wait on `what` is over, at `state`.
    Ready { what: String, state: String },
    /// The API server warned about the write of `object` (as kubectl prints `Warning: text`).
    Warning { object: String, text: String },
}

/// How an installation ended well.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Installed {
    /// Every object of the install set, as `Kind name` (or `Kind namespace/name`), with what
    /// its write did.
    pub objects: Vec<(String, Applied)>,
}

impl Installed {
    /// Whether the installation changed the cluster at all.
    pub fn changed(&self) -> bool {
        self.objects.iter().any(|(_, applied)| applied.changed())
    }
}

/// Why an installation did not finish.
#[derive(Debug, thiserror::Error)]
pub enum InstallFailed {
    #[error(transparent)]
    Apply(#[from] InstallError),
    #[error("cannot watch {what}: {source}")]
    Watch {
        what: String,
        #[source]
        source: watcher::Error,
    },
    #[error("the watch of {0} ended")]
    WatchEnded(String),
    #[error("timed out after {seconds} s waiting for {waiting}")]
    Timeout { waiting: String, seconds: u64 },
    #[error("Deployment {SYSTEM_NAMESPACE}/{HUB_DEPLOYMENT}: {0}")]
    RolloutFailed(String),
}

/// How long to wait, and for what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    /// How long the waits of the installation may take together.
    pub timeout: Duration,
    /// Whether to wait for the hub Deployment to roll out (the CRDs are always waited for: the
    /// FleetSync and everything fleetform does after need them served).
    pub rollout: bool,
}

/// Installs fleetform as `settings` say on `client`'s cluster and waits as `wait` says,
/// reporting each step to `report`.
pub async fn install(
    client: &Client,
    settings: &HubSettings,
    wait: Wait,
    report: impl FnMut(Event),
) -> Result<Installed, InstallFailed> {
    // Every write's warnings are said with the object written.
    let (client, warnings) = crate::runtime::warnings::recording(client);
    let client = &client;
    let mut progress = Progress {
        report,
        waiting: String::new(),
        warnings,
    };
    let manifests = hub_manifests(settings);
    // Custom resources wait for their CRDs: kubectl would fail them with "no matches for kind".
    let (custom, built_in): (Vec<&Value>, Vec<&Value>) = manifests
        .iter()
        .partition(|manifest| manifest["apiVersion"] == "fleetform.io/v1alpha1");
    let mut installed = Installed::default();
    for manifest in built_in {
        installed
            .objects
            .push(apply(client, manifest, &mut progress).await?);
    }
    let crds: BTreeSet<String> = manifests
        .iter()
        .filter(|manifest| manifest["kind"] == "CustomResourceDefinition")
        .filter_map(|manifest| manifest["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    // The timeout is for the waits; the writes before have the client's own timeouts.
    let deadline = Instant::now() + wait.timeout;
    let waited = tokio::time::timeout_at(deadline, crds_established(client, crds, &mut progress));
    waited
        .await
        .map_err(|_| progress.timed_out(wait.timeout))??;
    for manifest in custom {
        installed
            .objects
            .push(apply(client, manifest, &mut progress).await?);
    }
    if wait.rollout {
        let waited = tokio::time::timeout_at(deadline, rolled_out(client, &mut progress));
        waited
            .await
            .map_err(|_| progress.timed_out(wait.timeout))??;
    }
    Ok(installed)
}

/// The caller's report, the last wait reported (what a timeout names), and the server's
/// warnings not yet said.
struct Progress<R> {
    report: R,
    waiting: String,
    warnings: crate::runtime::warnings::Warnings,
}

impl<R: FnMut(Event)> Progress<R> {
    fn waiting(&mut self, what: &str, state: String) {
        self.waiting = format!("{what}: {state}");
        (self.report)(Event::Waiting {
            what: what.to_string(),
            state,
        });
    }

    fn ready(&mut self, what: &str, state: String) {
        (self.report)(Event::Ready {
            what: what.to_string(),
            state,
        });
    }

    fn timed_out(&self, timeout: Duration) -> InstallFailed {
        InstallFailed::Timeout {
            waiting: self.waiting.clone(),
            seconds: timeout.as_secs(),
        }
    }
}

async fn apply<R: FnMut(Event)>(
    client: &Client,
    manifest: &Value,
    progress: &mut Progress<R>,
) -> Result<(String, Applied), InstallFailed> {
    let applied = apply_document(client, manifest).await?;
    (progress.report)(Event::Applied {
        object: describe(manifest),
        applied,
    });
    for text in progress.warnings.take() {
        (progress.report)(Event::Warning {
            object: describe(manifest),
            text,
        });
    }
    Ok((describe(manifest), applied))
}

/// `Kind name`, or `Kind namespace/name`, as messages name a manifest.
pub fn describe(manifest: &Value) -> String {
    let kind = manifest["kind"].as_str().unwrap_or_default();
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
    match manifest["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Whether a CRD is served: its `Established` condition is True.
pub fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

async fn crds_established<R: FnMut(Event)>(
    client: &Client,
    names: BTreeSet<String>,
    progress: &mut Progress<R>,
) -> Result<(), InstallFailed> {
    const WHAT: &str = "CRDs established";
    let total = names.len();
    let mut pending = names;
    let mut listed = false;
    // What a timeout names before the first list is in.
    progress.waiting = WHAT.to_string();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut events = watcher(api, watcher::Config::default()).boxed();
    // Said only once the CRDs there are listed, so an upgrade's already served ones say nothing.
    while let Some(event) = events
        .try_next()
        .await
        .map_err(|source| InstallFailed::Watch {
            what: "CustomResourceDefinitions".to_string(),
            source,
        })?
    {
        match event {
            watcher::Event::Apply(crd) | watcher::Event::InitApply(crd) if established(&crd) => {
                pending.remove(&crd.name_any());
            }
            watcher::Event::InitDone => listed = true,
            _ => {}
        }
        if pending.is_empty() {
            progress.ready(WHAT, format!("{total}/{total}"));
            return Ok(());
        }
        if listed {
            progress.waiting(WHAT, format!("{}/{total}", total - pending.len()));
        }
    }
    Err(InstallFailed::WatchEnded(
        "CustomResourceDefinitions".to_string(),
    ))
}

/// How far a Deployment's rollout is, judged as `kubectl rollout status` judges it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollout {
    /// Every replica runs the current template and is available.
    Complete,
    /// Still rolling out: what it waits on.
    Progressing(String),
    /// The Deployment controller gave up (its progress deadline passed).
    Failed(String),
}

pub fn rollout(deployment: &Deployment) -> Rollout {
    let status = deployment.status.clone().unwrap_or_default();
    if deployment.metadata.generation > status.observed_generation {
        return Rollout::Progressing("the Deployment controller has not seen the update".into());
    }
    let progressing = status
        .conditions
        .iter()
        .flatten()
        .find(|condition| condition.type_ == "Progressing");
    if let Some(condition) = progressing
        && condition.reason.as_deref() == Some("ProgressDeadlineExceeded")
    {
        return Rollout::Failed(format!(
            "exceeded its progress deadline: {}",
            condition.message.as_deref().unwrap_or_default()
        ));
    }
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.replicas)
        .unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    let replicas = status.replicas.unwrap_or(0);
    if updated < wanted {
        Rollout::Progressing(format!("{updated} of {wanted} replicas updated"))
    } else if replicas > updated {
        Rollout::Progressing(format!(
            "{} old replicas pending termination",
            replicas - updated
        ))
    } else if available < updated {
        Rollout::Progressing(format!("{available} of {updated} replicas available"))
    } else {
        Rollout::Complete
    }
}

async fn rolled_out<R: FnMut(Event)>(
    client: &Client,
    progress: &mut Progress<R>,
) -> Result<(), InstallFailed> {
    let what = format!("Deployment {SYSTEM_NAMESPACE}/{HUB_DEPLOYMENT}");
    let api: Api<Deployment> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let config = watcher::Config::default().fields(&format!("metadata.name={HUB_DEPLOYMENT}"));
    let mut deployments = watcher(api, config).applied_objects().boxed();
    progress.waiting(&what, "rolling out".to_string());
    while let Some(deployment) =
        deployments
            .try_next()
            .await
            .map_err(|source| InstallFailed::Watch {
                what: what.clone(),
                source,
            })?
    {
        match rollout(&deployment) {
            Rollout::Complete => {
                progress.ready(&what, "available".to_string());
                return Ok(());
            }
            Rollout::Progressing(state) => progress.waiting(&what, state),
            Rollout::Failed(reason) => return Err(InstallFailed::RolloutFailed(reason)),
        }
    }
    Err(InstallFailed::WatchEnded(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    fn deployment(status: Value) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": HUB_DEPLOYMENT, "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_rollout_is_complete_once_every_replica_is_updated_and_available() {
        let progressing = |status| match rollout(&deployment(status)) {
            Rollout::Progressing(state) => state,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            progressing(json!({"observedGeneration": 1})),
            "the Deployment controller has not seen the update"
        );
        assert_eq!(
            progressing(json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1})),
            "1 of 2 replicas updated"
        );
        assert_eq!(
            progressing(json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2})),
            "1 old replicas pending termination"
        );
        assert_eq!(
            progressing(
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1})
            ),
            "1 of 2 replicas available"
        );
        assert_eq!(
            rollout(&deployment(
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2})
            )),
            Rollout::Complete
        );
        let stuck = json!({"observedGeneration": 2, "conditions": [{
            "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
            "message": "ReplicaSet \"fleetform-hub-1\" has timed out progressing."}]});
        assert!(
            matches!(rollout(&deployment(stuck)), Rollout::Failed(reason) if reason.contains("timed out"))
        );
    }
}
