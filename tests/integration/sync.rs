//! `fleetform sync` against an embedded hub: commits applied and picked up, invalid commits and
//! prunes held back with the reason on the FleetSync, drift reverted, leader election between
//! two controllers, and the metrics and health endpoints. Every wait is on a watch.

use crate::support;

use std::path::Path;
use std::time::Duration;

use fleetform::api::fleet::{FleetSync, SYSTEM_NAMESPACE};
use fleetform::api::vocabulary::{CONDITION_READY, CONDITION_STALLED};
use fleetform::api::{ClusterManagementAddOn, Spoke};
use fleetform::sync::{RunningSync, SyncConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::{Cluster, wait_deleted, wait_for};
use tokio_util::sync::CancellationToken;

/// A fleet repo in a temporary git repository (branch `main`, fleet under `fleet/`), starting
/// as the example fleet.
struct FleetRepo {
    dir: tempfile::TempDir,
    repo: git2::Repository,
}

impl FleetRepo {
    fn example() -> Self {
        let (dir, repo) = support::example_fleet_repo();
        FleetRepo { dir, repo }
    }

    /// The commit HEAD is at.
    fn head(&self) -> String {
        support::head_commit(&self.repo)
    }

    fn location(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// Replaces `from` by `to` in a file of the fleet and commits; returns the commit.
    fn edit(&self, file: &str, from: &str, to: &str) -> String {
        let path = self.dir.path().join("fleet").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no {from:?}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
        self.commit(&format!("edit {file}"))
    }

    /// Removes a file of the fleet and commits; returns the commit.
    fn remove(&self, file: &str) -> String {
        std::fs::remove_file(self.dir.path().join("fleet").join(file)).unwrap();
        self.commit(&format!("remove {file}"))
    }

    fn commit(&self, message: &str) -> String {
        support::commit_all(&self.repo, message)
    }

    /// Writes a file of the fleet without committing it.
    fn write_uncommitted(&self, file: &str, text: &str) {
        std::fs::write(self.dir.path().join("fleet").join(file), text).unwrap();
    }

    /// Commits only `file` of the fleet, as `git commit fleet/FILE` would, leaving every other
    /// change uncommitted; returns the commit.
    fn commit_only(&self, file: &str, message: &str) -> String {
        let mut index = self.repo.index().unwrap();
        index
            .add_path(&Path::new("fleet").join(file))
            .expect("stage the file");
        index.write().unwrap();
        let tree = self.repo.find_tree(index.write_tree().unwrap()).unwrap();
        let author = git2::Signature::now("test", "test@example.com").unwrap();
        let parent = self.repo.head().unwrap().peel_to_commit().unwrap();
        self.repo
            .commit(Some("HEAD"), &author, &author, message, &tree, &[&parent])
            .unwrap()
            .to_string()
    }
}

/// An embedded hub with fleetform's CRDs and the `fleetform-system` namespace.
async fn hub() -> Cluster {
    let hub = Cluster::start().await;
    hub.namespace(SYSTEM_NAMESPACE).await;
    hub
}

/// Creates the FleetSync `fleet` following `main` of `repo`.
async fn fleetsync(hub: &Cluster, repo: &FleetRepo, interval_seconds: i32) -> Api<FleetSync> {
    fleetsync_at(hub, repo, "main", interval_seconds).await
}

/// Creates the FleetSync `fleet` following `git_ref` of `repo`.
async fn fleetsync_at(
    hub: &Cluster,
    repo: &FleetRepo,
    git_ref: &str,
    interval_seconds: i32,
) -> Api<FleetSync> {
    let api: Api<FleetSync> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let object: FleetSync = serde_json::from_value(json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
        "metadata": {"name": "fleet", "namespace": SYSTEM_NAMESPACE},
        "spec": {"repo": repo.location(), "ref": git_ref, "path": "fleet", "intervalSeconds": interval_seconds},
    }))
    .unwrap();
    api.create(&PostParams::default(), &object)
        .await
        .expect("create FleetSync");
    api
}

/// A sync controller on `hub` as `identity`, with a 2 s leader Lease and a metrics endpoint on
/// a free port.
async fn start_sync(hub: &Cluster, identity: &str) -> (RunningSync, CancellationToken) {
    let stop = CancellationToken::new();
    let config = SyncConfig {
        metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
        lease_duration: Duration::from_secs(2),
        ..SyncConfig::new(hub.hub_identity().await, identity)
    };
    let running = fleetform::sync::start(config, stop.clone())
        .await
        .expect("sync starts");
    (running, stop)
}

fn condition(fleetsync: &FleetSync, type_: &str) -> Option<(String, String, String)> {
    fleetsync
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn applied(fleetsync: &FleetSync, commit: &str) -> bool {
    fleetsync
        .status
        .as_ref()
        .is_some_and(|s| s.last_applied_commit.as_deref() == Some(commit))
        && condition(fleetsync, CONDITION_READY).is_some_and(|(status, ..)| status == "True")
}

async fn wait_applied(api: &Api<FleetSync>, commit: &str) -> FleetSync {
    let commit = commit.to_string();
    wait_for(api, "fleet", "commit applied and Ready", move |fs| {
        applied(fs, &commit)
    })
    .await
}

fn lease_duration(spoke: &Spoke) -> Option<i32> {
    spoke.spec.lease_duration_seconds
}

/// Edits a field of Spoke `dev` that git sets (its lease duration, 10 in the example fleet) as
/// someone else, and waits for the sync to put git's value back.
async fn drift_on_dev_is_put_back(spokes: &Api<Spoke>) {
    spokes
        .patch(
            "dev",
            &PatchParams::apply("someone").force(),
            &Patch::Apply(json!({
                "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
                "spec": {"leaseDurationSeconds": 99},
            })),
        )
        .await
        .expect("edit a managed field");
    wait_for(spokes, "dev", "lease duration back to git's 10", |spoke| {
        lease_duration(spoke) == Some(10)
    })
    .await;
}

/// The events fleetform-sync published in `fleetform-system` about `kind` `name`, oldest first.
async fn events(hub: &Cluster, kind: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let listed = api.list(&Default::default()).await.expect("list events");
    of_sync_about(&listed.items, kind, name)
}

/// [`events`] once `done` holds of them: the Events about the objects a commit wrote are queued,
/// and may be written after the status says that the commit is applied.
async fn events_once(
    hub: &Cluster,
    kind: &str,
    name: &str,
    what: &str,
    done: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let listed = support::wait_for_list(api, None, what, |listed| {
        done(&of_sync_about(listed, kind, name))
    })
    .await;
    of_sync_about(&listed, kind, name)
}

/// Those of `events` fleetform-sync published about `kind` `name`, oldest first.
fn of_sync_about(events: &[Event], kind: &str, name: &str) -> Vec<Event> {
    let mut events: Vec<Event> = events
        .iter()
        .filter(|event| event.reporting_controller.as_deref() == Some("fleetform-sync"))
        .filter(|event| {
            event
                .regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .cloned()
        .collect();
    support::assert_named_as_client_go(&events);
    // Listed by name, which begins with the object's: the time they happened is their order.
    events.sort_by_key(|event| event.event_time.as_ref().map(|time| time.0));
    events
}

/// The notes of `events` with this reason.
fn notes(events: &[Event], reason: &str) -> Vec<String> {
    events
        .iter()
        .filter(|event| event.reason.as_deref() == Some(reason))
        .map(|event| event.note.clone().unwrap_or_default())
        .collect()
}

/// A commit as events and messages name it: short SHA and subject.
fn named(sha: &str, subject: &str) -> String {
    format!("{} {subject:?}", &sha[..7])
}

fn reasons(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| event.reason.clone())
        .collect()
}

/// GETs `path` from the sync's metrics endpoint: the status code and the body.
async fn get(sync: &RunningSync, path: &str) -> (u16, String) {
    support::http_get(sync.metrics_addr().expect("metrics served"), path).await
}

#[tokio::test]
async fn a_commit_is_applied_with_events_and_a_new_commit_is_picked_up_on_the_interval() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    let fleetsyncs = fleetsync(&hub, &repo, 1).await;

    let synced = wait_applied(&fleetsyncs, &first).await;
    let status = synced.status.clone().unwrap();
    assert_eq!(
        status.last_attempted_commit.as_deref(),
        Some(first.as_str())
    );
    assert_eq!(status.observed_generation, synced.metadata.generation);
    assert_eq!(
        condition(&synced, CONDITION_STALLED).map(|(status, ..)| status),
        Some("False".to_string())
    );
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let dev = spokes.get("dev").await.expect("the commit's Spoke dev");
    assert_eq!(lease_duration(&dev), Some(10));
    let addons: Api<ClusterManagementAddOn> = Api::all(hub.client.clone());
    addons
        .get("observability")
        .await
        .expect("the commit's addon");
    let on_dev = events_once(&hub, "Spoke", "dev", "an Event on Spoke dev", |events| {
        !events.is_empty()
    })
    .await;
    assert_eq!(reasons(&on_dev), ["Created"]);
    let on_fleetsync = events(&hub, "FleetSync", "fleet").await;
    assert_eq!(reasons(&on_fleetsync), ["Applied"]);
    assert_eq!(
        notes(&on_fleetsync, "Applied"),
        [format!(
            "applied {}: 8 created, 0 updated, 0 deleted",
            named(&first, "example fleet")
        )]
    );

    let second = repo.edit(
        "spokes/edge.yaml",
        "leaseDurationSeconds: 10",
        "leaseDurationSeconds: 15",
    );
    wait_applied(&fleetsyncs, &second).await;
    assert_eq!(lease_duration(&spokes.get("dev").await.unwrap()), Some(15));
    let on_dev = events_once(&hub, "Spoke", "dev", "2 Events on Spoke dev", |events| {
        events.len() >= 2
    })
    .await;
    assert_eq!(reasons(&on_dev), ["Created", "Updated"]);
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn each_applied_commit_is_an_event_of_its_own_with_its_subject_and_counts() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    let fleetsyncs = fleetsync(&hub, &repo, 1).await;
    wait_applied(&fleetsyncs, &first).await;

    // Eleven commits, each applied before the next: eleven Events, none folded into another.
    let mut expected = Vec::new();
    for lease in 11..=21 {
        let path = repo.dir.path().join("fleet/spokes/edge.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let before = format!(
            "leaseDurationSeconds: {}",
            if lease == 11 { 10 } else { lease - 1 }
        );
        std::fs::write(
            &path,
            text.replacen(&before, &format!("leaseDurationSeconds: {lease}"), 1),
        )
        .unwrap();
        let subject = format!("dev: {lease} s leases");
        let commit = repo.commit(&subject);
        wait_applied(&fleetsyncs, &commit).await;
        expected.push(format!(
            "applied {}: 0 created, 1 updated, 0 deleted",
            named(&commit, &subject)
        ));
    }
    let applied = notes(&events(&hub, "FleetSync", "fleet").await, "Applied");
    assert_eq!(applied[1..], expected[..], "{applied:#?}");
    let on_dev = events_once(&hub, "Spoke", "dev", "11 updates of Spoke dev", |events| {
        notes(events, "Updated").len() >= 11
    })
    .await;
    assert_eq!(
        notes(&on_dev, "Updated").last(),
        Some(&format!(
            "updated by FleetSync fleet from {}",
            named(&repo.head(), "dev: 21 s leases")
        ))
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn uncommitted_edits_of_the_followed_work_tree_are_never_applied() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    // HEAD of a local work tree, as `fleetform up` follows it.
    let fleetsyncs = fleetsync_at(&hub, &repo, "HEAD", 1).await;
    wait_applied(&fleetsyncs, &first).await;

    // An untracked spoke and a typo, saved but never committed...
    repo.write_uncommitted(
        "spokes/qa.yaml",
        "apiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata:\n  name: qa\nspec:\n  hubRef: hub\n  kubeconfig:\n    embedded: {}\n",
    );
    let hub_doc = std::fs::read_to_string(repo.dir.path().join("fleet/hubs/hub.yaml")).unwrap();
    repo.write_uncommitted(
        "hubs/hub.yaml",
        &hub_doc.replace("spec:", "spec:\n  bogus: 1"),
    );
    // ...beside a commit of one other file.
    repo.write_uncommitted(
        "spokes/edge.yaml",
        &std::fs::read_to_string(repo.dir.path().join("fleet/spokes/edge.yaml"))
            .unwrap()
            .replace("leaseDurationSeconds: 10", "leaseDurationSeconds: 15"),
    );
    let second = repo.commit_only("spokes/edge.yaml", "dev: longer leases");

    let synced = wait_applied(&fleetsyncs, &second).await;
    assert_eq!(
        synced.status.unwrap().last_attempted_commit.as_deref(),
        Some(second.as_str())
    );
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    assert_eq!(lease_duration(&spokes.get("dev").await.unwrap()), Some(15));
    assert!(
        spokes.get_opt("qa").await.unwrap().is_none(),
        "an uncommitted file became a Spoke"
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn an_invalid_commit_is_not_applied_and_its_status_names_the_file() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    let fleetsyncs = fleetsync(&hub, &repo, 1).await;
    wait_applied(&fleetsyncs, &first).await;

    // One commit that both breaks a spoke and drops another: nothing of it may happen.
    std::fs::remove_file(repo.dir.path().join("fleet/spokes/local-cluster.yaml")).unwrap();
    let bad = repo.edit(
        "spokes/edge.yaml",
        "leaseDurationSeconds: 10",
        "leaseDurationSeconds: 0",
    );
    let bad_for_wait = bad.clone();
    let stalled = wait_for(
        &fleetsyncs,
        "fleet",
        "the invalid commit reported",
        move |fs| {
            fs.status
                .as_ref()
                .is_some_and(|s| s.last_attempted_commit.as_deref() == Some(bad_for_wait.as_str()))
        },
    )
    .await;
    let status = stalled.status.clone().unwrap();
    assert_eq!(status.last_applied_commit.as_deref(), Some(first.as_str()));
    let (ready, reason, message) = condition(&stalled, CONDITION_READY).unwrap();
    assert_eq!(
        (ready.as_str(), reason.as_str()),
        ("False", "InvalidCommit")
    );
    assert!(
        message.contains(&format!(
            "commit {} is invalid; commit {} stays in force",
            named(&bad, "edit spokes/edge.yaml"),
            &first[..7]
        )),
        "{message}"
    );
    assert!(
        message.contains("spokes/edge.yaml:") && message.contains("leaseDurationSeconds"),
        "{message}"
    );
    let (stalled_status, stalled_reason, _) = condition(&stalled, CONDITION_STALLED).unwrap();
    assert_eq!(
        (stalled_status.as_str(), stalled_reason.as_str()),
        ("True", "InvalidCommit")
    );
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let local = spokes
        .get("local-cluster")
        .await
        .expect("nothing is deleted because a commit failed to load");
    assert_eq!(lease_duration(&spokes.get("dev").await.unwrap()), Some(10));
    // Every interval fetches the invalid commit again; the Warning said so once.
    support::wait_for_metric(
        sync.metrics_addr().expect("metrics served"),
        "fleetform_sync_syncs_total{result=\"invalid_commit\"}",
        3.0,
    )
    .await;
    let warnings = notes(&events(&hub, "FleetSync", "fleet").await, "InvalidCommit");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "commit {} is invalid",
            named(&bad, "edit spokes/edge.yaml")
        )) && warnings[0].contains("spokes/edge.yaml:"),
        "{warnings:?}"
    );

    // Fixing it in a later commit applies that one, and the sync says it recovered.
    let fixed = repo.edit(
        "spokes/edge.yaml",
        "leaseDurationSeconds: 0",
        "leaseDurationSeconds: 20",
    );
    wait_applied(&fleetsyncs, &fixed).await;
    wait_deleted(&spokes, &local).await;
    let on_fleetsync = events(&hub, "FleetSync", "fleet").await;
    assert_eq!(
        notes(&on_fleetsync, "Recovered"),
        [format!(
            "commit {} is applied; Ready again after InvalidCommit",
            named(&fixed, "edit spokes/edge.yaml")
        )]
    );
    assert_eq!(
        on_fleetsync
            .iter()
            .find(|event| event.reason.as_deref() == Some("InvalidCommit"))
            .and_then(|event| event.type_.as_deref()),
        Some("Warning")
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_repository_is_reported_and_the_applied_commit_stays() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    let fleetsyncs = fleetsync(&hub, &repo, 3600).await;
    wait_applied(&fleetsyncs, &first).await;

    let gone = repo.dir.path().join("moved-away").display().to_string();
    fleetsyncs
        .patch(
            "fleet",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"repo": gone}})),
        )
        .await
        .unwrap();
    let unreachable = wait_for(
        &fleetsyncs,
        "fleet",
        "the repository reported unreachable",
        |fs| condition(fs, CONDITION_READY).is_some_and(|(status, ..)| status == "False"),
    )
    .await;
    let (_, reason, message) = condition(&unreachable, CONDITION_READY).unwrap();
    assert_eq!(reason, "SourceUnavailable");
    assert!(
        message.contains(&format!("{gone}: no such file, directory or repository"))
            && message.contains(&format!("commit {} stays in force", &first[..7])),
        "{message}"
    );
    assert_eq!(
        condition(&unreachable, CONDITION_STALLED).map(|(status, ..)| status),
        Some("False".to_string()),
        "retried every interval, not stalled"
    );
    assert_eq!(
        unreachable.status.unwrap().last_applied_commit.as_deref(),
        Some(first.as_str())
    );
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    assert_eq!(
        spokes.list(&Default::default()).await.unwrap().items.len(),
        4
    );

    // The repository back where it was: Ready again, and an Event says so.
    fleetsyncs
        .patch(
            "fleet",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"repo": repo.location()}})),
        )
        .await
        .unwrap();
    wait_for(&fleetsyncs, "fleet", "Ready again", |fs| {
        condition(fs, CONDITION_READY).is_some_and(|(status, ..)| status == "True")
    })
    .await;
    let on_fleetsync = events(&hub, "FleetSync", "fleet").await;
    let warnings = notes(&on_fleetsync, "SourceUnavailable");
    assert!(
        warnings.len() == 1 && warnings[0].contains(&gone),
        "{warnings:?}"
    );
    assert_eq!(
        notes(&on_fleetsync, "Recovered"),
        [format!(
            "commit {} is applied; Ready again after SourceUnavailable",
            named(&first, "example fleet")
        )]
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn the_prune_guard_stalls_a_commit_until_allow_prune_is_set() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    // An interval far beyond the test: only the spec change below can start the last sync.
    let fleetsyncs = fleetsync(&hub, &repo, 3600).await;
    wait_applied(&fleetsyncs, &first).await;

    let pruning = repo.remove("spokes/edge.yaml");
    // A spec change (a shorter interval) fetches the new commit at once.
    fleetsyncs
        .patch(
            "fleet",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"intervalSeconds": 3599}})),
        )
        .await
        .unwrap();
    let blocked = wait_for(&fleetsyncs, "fleet", "the prune guard holds it", |fs| {
        condition(fs, CONDITION_STALLED).is_some_and(|(status, ..)| status == "True")
    })
    .await;
    let status = blocked.status.clone().unwrap();
    assert_eq!(
        status.last_attempted_commit.as_deref(),
        Some(pruning.as_str())
    );
    assert_eq!(status.last_applied_commit.as_deref(), Some(first.as_str()));
    let (_, reason, message) = condition(&blocked, CONDITION_STALLED).unwrap();
    assert_eq!(reason, "PruneBlocked");
    assert!(
        message.contains("would unjoin 3 of the hub's 4 spokes (dev, prod, staging)")
            && message.contains("spec.allowPrune"),
        "{message}"
    );
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    spokes.get("dev").await.expect("held back: dev stays");

    // While the new commit is held, drift is put back to the commit in force.
    drift_on_dev_is_put_back(&spokes).await;
    let dev = spokes.get("dev").await.unwrap();

    fleetsyncs
        .patch(
            "fleet",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"allowPrune": true}})),
        )
        .await
        .unwrap();
    let synced = wait_applied(&fleetsyncs, &pruning).await;
    assert_eq!(
        condition(&synced, CONDITION_STALLED).map(|(status, ..)| status),
        Some("False".to_string())
    );
    wait_deleted(&spokes, &dev).await;
    events_once(
        &hub,
        "Spoke",
        "dev",
        "the deletion, an event on the Spoke",
        |events| reasons(events).contains(&"Deleted".to_string()),
    )
    .await;
    let on_fleetsync = events(&hub, "FleetSync", "fleet").await;
    let held = notes(&on_fleetsync, "PruneBlocked");
    assert!(
        held.len() == 1
            && held[0].starts_with(&format!(
                "commit {} would unjoin 3",
                named(&pruning, "remove spokes/edge.yaml")
            )),
        "{held:?}"
    );
    assert_eq!(
        notes(&on_fleetsync, "Recovered"),
        [format!(
            "commit {} is applied; Ready again after PruneBlocked",
            named(&pruning, "remove spokes/edge.yaml")
        )]
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn drift_of_managed_objects_is_reverted_without_waiting_for_the_interval() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    let fleetsyncs = fleetsync(&hub, &repo, 3600).await;
    wait_applied(&fleetsyncs, &first).await;

    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    drift_on_dev_is_put_back(&spokes).await;

    let addons: Api<ClusterManagementAddOn> = Api::all(hub.client.clone());
    let deleted = addons.get("config-policy").await.unwrap();
    addons
        .delete("config-policy", &DeleteParams::default())
        .await
        .expect("delete a managed addon");
    let uid = deleted.uid();
    wait_for(
        &addons,
        "config-policy",
        "the addon put back",
        move |addon| addon.uid() != uid,
    )
    .await;
    assert!(
        reasons(&events(&hub, "FleetSync", "fleet").await).contains(&"DriftReverted".to_string())
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn after_a_restart_drift_is_reverted_to_the_last_applied_commit_not_an_invalid_newer_one() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "first-run").await;
    let fleetsyncs = fleetsync(&hub, &repo, 3600).await;
    wait_applied(&fleetsyncs, &first).await;
    stop.cancel();
    sync.stopped().await;

    let bad = repo.edit(
        "spokes/edge.yaml",
        "leaseDurationSeconds: 10",
        "leaseDurationSeconds: 0",
    );
    let (sync, stop) = start_sync(&hub, "second-run").await;
    wait_for(
        &fleetsyncs,
        "fleet",
        "the invalid commit reported",
        move |fs| {
            fs.status
                .as_ref()
                .is_some_and(|s| s.last_attempted_commit.as_deref() == Some(bad.as_str()))
        },
    )
    .await;
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    // Put back to the applied commit's value, not the refused one's.
    drift_on_dev_is_put_back(&spokes).await;
    let (_, reason, _) =
        condition(&fleetsyncs.get("fleet").await.unwrap(), CONDITION_READY).unwrap();
    assert_eq!(
        reason, "InvalidCommit",
        "re-applying the old commit keeps the newer one's verdict"
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn the_sync_command_refuses_a_hub_without_the_fleetsync_crd() {
    let bare = fleetform_controlplane::ControlPlane::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .start()
        .await
        .expect("control plane starts");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, bare.kubeconfig()).unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .arg("sync")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .output()
        .await
        .expect("run fleetform sync");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the FleetSync CRD is not installed on this hub")
            && stderr.contains("fleetform crds"),
        "{stderr}"
    );
    bare.shutdown().await;
}

async fn wait_for_holder(leases: &Api<Lease>, holder: &'static str) {
    wait_for(leases, "fleetform-sync", holder, move |lease| {
        lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(holder)
    })
    .await;
}

#[tokio::test]
async fn only_the_leader_syncs_and_a_follower_takes_over_when_it_stops() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let (a, stop_a) = start_sync(&hub, "a").await;
    wait_for_holder(&leases, "a").await;
    let (b, stop_b) = start_sync(&hub, "b").await;
    let fleetsyncs = fleetsync(&hub, &repo, 3600).await;
    wait_applied(&fleetsyncs, &first).await;

    let applied_by: Vec<Option<String>> = events(&hub, "FleetSync", "fleet")
        .await
        .into_iter()
        .map(|event| event.reporting_instance)
        .collect();
    assert_eq!(applied_by, [Some("a".to_string())]);
    let (_, a_metrics) = get(&a, "/metrics").await;
    assert!(a_metrics.contains("fleetform_sync_leader 1"), "{a_metrics}");
    let (b_ready, _) = get(&b, "/readyz").await;
    assert_eq!(b_ready, 200, "a follower is ready");
    let (_, b_metrics) = get(&b, "/metrics").await;
    assert!(b_metrics.contains("fleetform_sync_leader 0"), "{b_metrics}");
    assert!(
        !b_metrics.contains("fleetform_sync_syncs_total{"),
        "{b_metrics}"
    );

    // A commit the leader will not fetch before its interval is up...
    let second = repo.edit(
        "spokes/edge.yaml",
        "leaseDurationSeconds: 10",
        "leaseDurationSeconds: 11",
    );
    // ...is applied by the follower once the leader stops and releases the Lease.
    stop_a.cancel();
    a.stopped().await;
    wait_for_holder(&leases, "b").await;
    wait_applied(&fleetsyncs, &second).await;
    let applied_by: Vec<Option<String>> = events(&hub, "FleetSync", "fleet")
        .await
        .into_iter()
        .map(|event| event.reporting_instance)
        .collect();
    assert_eq!(applied_by, [Some("a".to_string()), Some("b".to_string())]);
    let (_, b_metrics) = get(&b, "/metrics").await;
    assert!(b_metrics.contains("fleetform_sync_leader 1"), "{b_metrics}");
    stop_b.cancel();
    b.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn a_follower_takes_over_a_lease_its_holder_stopped_renewing() {
    let hub = hub().await;
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    // A replica that crashed while leading: its Lease stays as it left it.
    let crashed: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fleetform-sync", "namespace": SYSTEM_NAMESPACE},
        "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 1,
                 "renewTime": "2026-01-01T00:00:00.000000Z"},
    }))
    .unwrap();
    leases
        .create(&PostParams::default(), &crashed)
        .await
        .expect("create the crashed leader's Lease");
    let (b, stop_b) = start_sync(&hub, "b").await;
    wait_for_holder(&leases, "b").await;
    let lease = leases.get("fleetform-sync").await.unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(1));
    stop_b.cancel();
    b.stopped().await;
    let released = leases.get("fleetform-sync").await.unwrap();
    assert_eq!(
        released.spec.and_then(|s| s.holder_identity),
        None,
        "released on shutdown"
    );
    hub.server.shutdown().await;
}

/// A fetch that finds the commit in force again writes nothing and dry-runs nothing: at 10,000
/// spokes a plan is 10,000 server-side dry runs, so planning again every interval would keep the
/// hub busy. Drift is still put right by watch (the drift tests), and a new commit still lands.
#[tokio::test]
async fn a_commit_fetched_again_is_not_planned_again() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    let fleetsyncs = fleetsync(&hub, &repo, 1).await;
    wait_applied(&fleetsyncs, &first).await;
    let spoke_patches = || {
        hub.server
            .request_counts()
            .iter()
            .filter(|(kind, _)| kind.resource == "spokes" && kind.verb.is_write())
            .map(|(_, count)| count)
            .sum::<u64>()
    };
    let syncs = |metrics: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix("fleetform_sync_syncs_total{result=\"unchanged\"} "))
            .and_then(|count| count.parse().ok())
            .unwrap_or(0)
    };
    let unchanged_syncs = |more: u64| {
        let sync = &sync;
        async move {
            let goal = syncs(&get(sync, "/metrics").await.1) + more;
            let deadline = tokio::time::Instant::now() + support::PATIENCE;
            while syncs(&get(sync, "/metrics").await.1) < goal {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the sync fetches every second"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    // The watch of the Spokes it wrote wakes the sync once more, to put drift right: let that
    // pass settle first.
    unchanged_syncs(2).await;
    let patched = spoke_patches();
    // Three more fetches of the same commit, one a second.
    unchanged_syncs(3).await;
    assert_eq!(
        spoke_patches(),
        patched,
        "no Spoke was written or dry-run for a commit already in force"
    );

    let second = repo.edit(
        "spokes/edge.yaml",
        "leaseDurationSeconds: 10",
        "leaseDurationSeconds: 15",
    );
    wait_applied(&fleetsyncs, &second).await;
    let spokes: Api<Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    assert_eq!(lease_duration(&spokes.get("dev").await.unwrap()), Some(15));
    assert_eq!(
        spoke_patches() - patched,
        1,
        "the one Spoke the commit changes is applied, with no dry run before: the apply's answer tells what changed"
    );
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

#[tokio::test]
async fn metrics_health_and_readiness_answer() {
    let hub = hub().await;
    let repo = FleetRepo::example();
    let first = repo.head();
    let (sync, stop) = start_sync(&hub, "only").await;
    assert_eq!(get(&sync, "/healthz").await, (200, "ok\n".to_string()));
    let fleetsyncs = fleetsync(&hub, &repo, 3600).await;
    wait_applied(&fleetsyncs, &first).await;

    let (ready, _) = get(&sync, "/readyz").await;
    assert_eq!(ready, 200);
    let (code, metrics) = get(&sync, "/metrics").await;
    assert_eq!(code, 200);
    for line in [
        "fleetform_sync_syncs_total{result=\"applied\"} 1".to_string(),
        format!("fleetform_sync_applied_commit_info{{fleetsync=\"fleet\",commit=\"{first}\"}} 1"),
        "fleetform_sync_objects_changed_total{action=\"create\"} 8".to_string(),
        "fleetform_sync_leader 1".to_string(),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    assert!(
        metrics.contains("fleetform_sync_last_sync_timestamp_seconds "),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(|line| line.starts_with(
            "fleetform_sync_reconciles_total{controller=\"sync\",result=\"success\"} "
        )),
        "the controller's passes are counted by the error policy: {metrics}"
    );
    assert_eq!(get(&sync, "/nothing").await.0, 404);
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}
