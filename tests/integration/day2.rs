//! An operator's bad day, end to end on `fleetform up`'s clusters: an agent deleted or edited on
//! its spoke is put back, a spoke whose cluster is gone is removed (after the unjoin timeout, or
//! at once with the force annotation) with what may be left on it said, what fleetform did not
//! create is left alone, and a reconcile error lands on the Spoke.

use crate::support;

use fleetform::api::fleet::{SYSTEM_NAMESPACE, Spoke};
use fleetform::api::vocabulary::{
    AGENT_NAMESPACE, ANNOTATION_FORCE_UNJOIN, BOOTSTRAP_HUB_KUBECONFIG_SECRET,
    CONDITION_RECONCILED, CONDITION_UNJOINED, HUB_KUBECONFIG_SECRET, LABEL_CLUSTER_SET,
    REASON_UNJOINED_BY_HUB, REASON_WAITING_FOR_AGENT_UNJOIN,
};
use fleetform::api::{ManagedCluster, ManagedClusterAddOn, ManagedClusterSet};
use fleetform::reconciler::install::AGENT_DEPLOYMENT;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::fleet::{ADDONS, Fleet, HUB, Repo, spoke, wait_gone};
use support::wait_for;

fn condition(spoke: &Spoke, type_: &str) -> Option<(String, String, String)> {
    spoke
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The Events about the Spoke `name` with `reason`.
async fn events(fleet: &Fleet, name: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(fleet.hub.clone(), SYSTEM_NAMESPACE)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|event| {
            event.reason.as_deref() == Some(reason)
                && event.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("Spoke") && r.name.as_deref() == Some(name)
                })
        })
        .collect()
}

/// A fleet of the hub and three embedded spokes, the third with `gamma_extra` in its spec.
async fn three_spokes(gamma_extra: &str) -> Fleet {
    let repo = Repo::new();
    repo.commit(
        "a hub and three spokes",
        &[
            ("hubs/hub.yaml", Some(HUB)),
            ("addons/addons.yaml", Some(ADDONS)),
            ("spokes/alpha.yaml", Some(&spoke("alpha", ""))),
            ("spokes/beta.yaml", Some(&spoke("beta", ""))),
            ("spokes/gamma.yaml", Some(&spoke("gamma", gamma_extra))),
        ],
    );
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    for name in ["alpha", "beta", "gamma"] {
        fleet.wait_running(name).await;
    }
    fleet
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spokes_join_their_cluster_sets_and_the_hub_keeps_the_default_and_global_sets() {
    let fleet = three_spokes("  clusterSet: edge-sites\n").await;
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub.clone());
    let set_of = |cluster: &ManagedCluster| cluster.labels().get(LABEL_CLUSTER_SET).cloned();
    assert_eq!(
        set_of(&clusters.get("alpha").await.unwrap()).as_deref(),
        Some("default")
    );
    let gamma = wait_for(&clusters, "gamma", "in its set", move |c| {
        c.labels().get(LABEL_CLUSTER_SET).map(String::as_str) == Some("edge-sites")
    })
    .await;
    assert!(gamma.is_joined());
    let sets: Api<ManagedClusterSet> = Api::all(fleet.hub.clone());
    let global = sets.get("global").await.expect("the global set");
    assert_eq!(
        serde_json::to_value(&global.spec).unwrap()["clusterSelector"]["selectorType"],
        "LabelSelector"
    );
    sets.get("default").await.expect("the default set");
    // up's kubelet registers a Node, so placement has capacity and node health to read.
    let alpha = wait_for(&clusters, "alpha", "capacity reported", |c| {
        c.status
            .as_ref()
            .is_some_and(|status| status.capacity.contains_key("cpu"))
    })
    .await;
    let health = alpha.node_health().expect("node health");
    assert_eq!((health.ready, health.total), (1, 1), "{health:?}");
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_agent_is_put_back_and_an_addon_fleetform_did_not_enable_is_left_alone() {
    let fleet = three_spokes("").await;
    let deployments: Api<Deployment> =
        Api::namespaced(fleet.spoke_client("alpha"), AGENT_NAMESPACE);
    let first = deployments.get(AGENT_DEPLOYMENT).await.unwrap();
    deployments
        .delete(AGENT_DEPLOYMENT, &DeleteParams::default())
        .await
        .unwrap();
    let first_uid = first.uid();
    let back = wait_for(&deployments, AGENT_DEPLOYMENT, "put back", move |d| {
        d.uid() != first_uid
    })
    .await;
    assert_eq!(
        back.spec, first.spec,
        "the same agent, as the hub renders it"
    );
    fleet.wait_running("alpha").await;
    // Its agent reports the Deployment it sees on the Spoke: how the hub hears of an edit or
    // removal on the spoke before its next look there.
    let spokes: Api<Spoke> = Api::namespaced(fleet.hub.clone(), SYSTEM_NAMESPACE);
    let reports = |deployment: &Deployment| {
        let (uid, generation) = (deployment.uid(), deployment.metadata.generation);
        move |spoke: &Spoke| {
            spoke
                .status
                .as_ref()
                .and_then(|status| status.agent_deployment.as_ref())
                .is_some_and(|seen| seen.uid == uid && seen.generation == generation)
        }
    };
    wait_for(
        &spokes,
        "alpha",
        "the agent reports the Deployment put back",
        reports(&back),
    )
    .await;

    // An edit (someone points the agent at another image) is put back too.
    deployments
        .patch(
            AGENT_DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "agent", "image": "example.com/not-fleetform:1"}
            ]}}}})),
        )
        .await
        .unwrap();
    let wanted = first.spec.clone();
    let reverted = wait_for(&deployments, AGENT_DEPLOYMENT, "edit reverted", move |d| {
        d.spec == wanted
    })
    .await;
    assert!(reverted.metadata.generation > back.metadata.generation);
    wait_for(
        &spokes,
        "alpha",
        "the agent reports the edit reverted",
        reports(&reverted),
    )
    .await;

    // An addon an OCM tool enabled (no fleetform mark) survives the reconciler's passes.
    let addons: Api<ManagedClusterAddOn> = Api::namespaced(fleet.hub.clone(), "alpha");
    let foreign: ManagedClusterAddOn = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ManagedClusterAddOn",
        "metadata": {"name": "from-clusteradm", "namespace": "alpha"},
        "spec": {"installNamespace": "elsewhere"},
    }))
    .unwrap();
    addons
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    // A commit the reconciler acts on after it has seen the foreign addon.
    fleet.repo.commit(
        "alpha: metrics",
        &[(
            "spokes/alpha.yaml",
            Some(&spoke("alpha", "  addons: [metrics]\n")),
        )],
    );
    fleet.synced().await;
    wait_for(&addons, "metrics", "enabled", |_| true).await;
    fleet.wait_running("alpha").await;
    assert!(
        addons.get_opt("from-clusteradm").await.unwrap().is_some(),
        "fleetform deleted an addon it did not enable"
    );
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoke_whose_cluster_is_gone_is_removed_after_the_unjoin_timeout_saying_what_is_left() {
    let fleet = three_spokes("  cleanup:\n    unjoinTimeoutSeconds: 8\n").await;
    assert!(fleet.running().stop_spoke("gamma").await);
    fleet
        .repo
        .commit("gamma is gone", &[("spokes/gamma.yaml", None)]);
    fleet.synced().await;

    let waiting = wait_for(&fleet.spokes(), "gamma", "waiting for its agent", |s| {
        condition(s, CONDITION_UNJOINED).is_some_and(|(status, reason, _)| {
            status == "False" && reason == REASON_WAITING_FOR_AGENT_UNJOIN
        })
    })
    .await;
    let (_, _, message) = condition(&waiting, CONDITION_UNJOINED).unwrap();
    assert!(message.contains(ANNOTATION_FORCE_UNJOIN), "{message}");

    wait_gone(&fleet.spokes(), "gamma").await;
    let unjoined = events(&fleet, "gamma", REASON_UNJOINED_BY_HUB).await;
    assert_eq!(unjoined.len(), 1, "{unjoined:?}");
    let note = unjoined[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("could not clean the spoke") && note.contains(AGENT_NAMESPACE),
        "the Event lists what may be left on the spoke: {note}"
    );
    // The others are untouched.
    fleet.wait_running("alpha").await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_force_annotation_removes_a_dead_spoke_at_once() {
    // A timeout far beyond the test: only the annotation can end the wait.
    let fleet = three_spokes("  cleanup:\n    unjoinTimeoutSeconds: 86400\n").await;
    assert!(fleet.running().stop_spoke("gamma").await);
    fleet
        .spokes()
        .patch(
            "gamma",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION_FORCE_UNJOIN: "true"}}})),
        )
        .await
        .unwrap();
    fleet
        .repo
        .commit("gamma is gone", &[("spokes/gamma.yaml", None)]);
    fleet.synced().await;
    wait_gone(&fleet.spokes(), "gamma").await;
    assert_eq!(
        events(&fleet, "gamma", REASON_UNJOINED_BY_HUB).await.len(),
        1
    );
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoke_the_hub_cannot_reach_says_why_on_its_conditions_and_in_one_event() {
    let repo = Repo::new();
    let unreachable = "apiVersion: fleetform.io/v1alpha1
kind: Spoke
metadata:
  name: lost
spec:
  hubRef: hub
  kubeconfig:
    secretRef: {namespace: fleetform-system, name: lost-kubeconfig, key: kubeconfig}
";
    repo.commit(
        "a hub and a spoke whose kubeconfig Secret does not exist",
        &[
            ("hubs/hub.yaml", Some(HUB)),
            ("spokes/lost.yaml", Some(unreachable)),
        ],
    );
    let fleet = Fleet::up(repo).await;
    fleet.synced().await;
    let failed = wait_for(&fleet.spokes(), "lost", "Reconciled False", |s| {
        condition(s, CONDITION_RECONCILED).is_some_and(|(status, ..)| status == "False")
    })
    .await;
    let (_, reason, message) = condition(&failed, CONDITION_RECONCILED).unwrap();
    assert_eq!(reason, "SpokeUnreachable");
    assert!(
        message.contains("lost-kubeconfig"),
        "the message names where the kubeconfig was looked for: {message}"
    );
    let warnings = events(&fleet, "lost", "SpokeUnreachable").await;
    assert_eq!(
        warnings.len(),
        1,
        "one Event, not one per retry: {warnings:?}"
    );
    let status = fleet
        .fleetform(&["status", &fleet.repo.path().display().to_string()])
        .await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("lost"), "{text}");
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_hub_endpoint_reaches_agents_that_have_pivoted() {
    let fleet = three_spokes("").await;
    let hub_url = fleet.running().hubs[0].url();
    let localhost = hub_url.replace("127.0.0.1", "localhost");
    let hash_of = |spoke: &Spoke| {
        spoke
            .status
            .as_ref()
            .and_then(|s| s.agent_config_hash.clone())
    };
    let before = hash_of(&fleet.spokes().get("alpha").await.unwrap());
    fleet.repo.commit(
        "the hub behind another name",
        &[(
            "hubs/hub.yaml",
            Some(&format!("{HUB}  apiServer: {localhost}\n")),
        )],
    );
    fleet.synced().await;
    for name in ["alpha", "beta", "gamma"] {
        let secrets: Api<Secret> = Api::namespaced(fleet.spoke_client(name), AGENT_NAMESPACE);
        for secret in [BOOTSTRAP_HUB_KUBECONFIG_SECRET, HUB_KUBECONFIG_SECRET] {
            let expected = localhost.clone();
            wait_for(&secrets, secret, "the new endpoint", move |secret| {
                secret
                    .data
                    .as_ref()
                    .and_then(|data| data.get("kubeconfig"))
                    .is_some_and(|kubeconfig| {
                        String::from_utf8_lossy(&kubeconfig.0).contains(&expected)
                    })
            })
            .await;
        }
    }
    // The agents run the new configuration and say so; nothing is left to plan.
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub.clone());
    for name in ["alpha", "beta", "gamma"] {
        let before = before.clone();
        wait_for(
            &fleet.spokes(),
            name,
            "reports the new configuration",
            move |s| hash_of(s).is_some() && hash_of(s) != before,
        )
        .await;
        wait_for(&clusters, name, "available", |c| {
            c.is_joined() && c.is_available()
        })
        .await;
    }
    let repo = fleet.repo.path().display().to_string();
    let plan = fleet.fleetform(&["plan", &repo]).await;
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plan.stdout)
    );
    fleet.shutdown().await;
}
