use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::desired::hub_objects;
use super::*;
use crate::api::fleet::{
    AddOn, AddOnSpec, AgentSpec, EmbeddedCluster, HubSpec, KubeconfigSource, RegistrationSpec,
    SpokeAddon, SpokeSpec,
};
use crate::fleet::Fleet;

/// A fleet under construction: one embedded hub `hub` whose agents run 1.0.0.
struct TestFleet(Fleet);

fn embedded() -> KubeconfigSource {
    KubeconfigSource {
        embedded: Some(EmbeddedCluster {}),
        ..KubeconfigSource::default()
    }
}

impl TestFleet {
    fn new() -> Self {
        let mut fleet = Fleet::default();
        let mut hub = Hub::new(
            "hub",
            HubSpec {
                kubeconfig: embedded(),
                api_server: None,
                ca_bundle: None,
                ca_bundle_secret_ref: None,
                agent: Some(AgentSpec {
                    version: Some("1.0.0".into()),
                    image: None,
                }),
                registration: RegistrationSpec::default(),
                rollout: Default::default(),
            },
        );
        hub.metadata.namespace = None;
        fleet.hubs.insert("hub".into(), hub);
        TestFleet(fleet)
    }

    fn addon(mut self, name: &str) -> Self {
        let mut addon = AddOn {
            metadata: Default::default(),
            spec: AddOnSpec::default(),
        };
        addon.metadata.name = Some(name.into());
        self.0.addons.insert(name.into(), addon);
        self
    }

    fn spoke(self, name: &str) -> Self {
        self.spoke_with(name, |_| {})
    }

    fn spoke_with(mut self, name: &str, edit: impl FnOnce(&mut SpokeSpec)) -> Self {
        let mut spec = SpokeSpec {
            hub_ref: "hub".into(),
            kubeconfig: embedded(),
            lease_duration_seconds: None,
            cluster_claims_max: None,
            agent: None,
            addons: Vec::new(),
            availability: Default::default(),
            cleanup: Default::default(),
            taints: Vec::new(),
            cluster_set: None,
        };
        edit(&mut spec);
        self.0
            .spokes
            .insert(name.into(), Box::new(Spoke::new(name, spec)));
        self
    }

    fn without_spoke(mut self, name: &str) -> Self {
        self.0.spokes.remove(name);
        self
    }

    fn build(self) -> Fleet {
        self.0
    }
}

fn origin() -> Origin {
    Origin::Git {
        repository: "file:///fleet".into(),
        git_ref: "main".into(),
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        path: String::new(),
        subject: "a test fleet".into(),
        signed_by: None,
    }
}

/// The hub as it is once `fleet` has been applied and converged.
fn converged(fleet: &Fleet) -> Observed {
    let mut objects = BTreeMap::new();
    for (index, (key, mut object)) in hub_objects(fleet, "hub").enumerate() {
        object["metadata"]["resourceVersion"] = json!((100 + index).to_string());
        object["metadata"]["uid"] = json!(format!("uid-{index}"));
        object["status"] = json!({"phase": "Running"});
        objects.insert(key, Stored::from(object));
    }
    let clusters = fleet
        .spokes
        .keys()
        .map(|name| {
            (
                name.clone(),
                ClusterRegistration {
                    hub_accepts_client: true,
                    accepted: true,
                },
            )
        })
        .collect();
    BTreeMap::from([(
        "hub".to_string(),
        ObservedHub {
            installed: true,
            objects,
            dry_run: BTreeMap::new(),
            clusters,
            fleet_syncs: Vec::new(),
        },
    )])
}

fn steps(plan: &Plan) -> Vec<String> {
    plan.hubs
        .iter()
        .flat_map(|hub| &hub.steps)
        .map(ToString::to_string)
        .collect()
}

fn guard() -> PruneGuard {
    PruneGuard::default()
}

#[test]
fn a_new_hub_is_installed_then_each_spoke_joined_accepted_and_given_its_addons() {
    let fleet = TestFleet::new()
        .addon("metrics")
        .spoke_with("a", |s| s.addons = vec![SpokeAddon::Name("metrics".into())])
        .build();
    let plan = plan(&fleet, origin(), &Observed::new(), guard());
    assert_eq!(
        steps(&plan),
        [
            "install fleetform's CRDs and hub components",
            "join spoke a (install its agent and bootstrap token)",
            "accept spoke a (hubAcceptsClient, approve its CSR)",
            "enable addon metrics on a (namespace open-cluster-management-agent-addon)",
        ]
    );
    let created: Vec<String> = plan.hubs[0]
        .changes
        .iter()
        .map(|c| c.key.to_string())
        .collect();
    assert_eq!(
        created,
        [
            "Hub fleetform-system/hub",
            "Spoke fleetform-system/a",
            "ClusterManagementAddOn metrics"
        ]
    );
    assert!(
        plan.hubs[0]
            .changes
            .iter()
            .all(|c| c.action == Action::Create)
    );
    assert_eq!(
        plan.summary(),
        "Plan: 3 to create, 0 to update, 0 to delete; 4 lifecycle steps."
    );
}

#[test]
fn a_converged_fleet_plans_nothing() {
    let fleet = TestFleet::new()
        .addon("metrics")
        .spoke("a")
        .spoke("b")
        .build();
    let plan = plan(&fleet, origin(), &converged(&fleet), guard());
    assert!(!plan.has_changes(), "{plan:#?}");
    assert!(render::text(&plan, false).contains("No changes"));
}

#[test]
fn lease_and_claim_limit_changes_show_as_steps_and_as_a_diff() {
    let before = TestFleet::new()
        .spoke_with("a", |s| s.lease_duration_seconds = Some(10))
        .build();
    let after = TestFleet::new()
        .spoke_with("a", |s| {
            s.lease_duration_seconds = Some(20);
            s.cluster_claims_max = Some(5);
        })
        .build();
    let plan = plan(&after, origin(), &converged(&before), guard());
    assert_eq!(
        steps(&plan),
        [
            "change lease duration of a from 10s to 20s",
            "change cluster claim limit of a from 20 to 5",
        ]
    );
    let change = &plan.hubs[0].changes[0];
    assert_eq!(
        (change.action, change.key.to_string()),
        (Action::Update, "Spoke fleetform-system/a".into())
    );
    assert!(
        change.diff.contains("-  leaseDurationSeconds: 10\n"),
        "{}",
        change.diff
    );
    assert!(
        change.diff.contains("+  leaseDurationSeconds: 20\n"),
        "{}",
        change.diff
    );
    assert!(
        change.diff.contains("+  clusterClaimsMax: 5\n"),
        "{}",
        change.diff
    );
}

#[test]
fn a_plan_without_diffs_makes_the_same_changes_and_steps() {
    let before = TestFleet::new()
        .spoke_with("a", |s| s.lease_duration_seconds = Some(10))
        .spoke("gone")
        .build();
    let after = TestFleet::new()
        .spoke_with("a", |s| s.lease_duration_seconds = Some(20))
        .spoke("new")
        .build();
    let observed = converged(&before);
    let shown = plan(&after, origin(), &observed, guard());
    let unshown = super::plan_with(&after, origin(), &observed, guard(), super::Diffs::Skipped);
    let (shown, unshown) = (&shown.hubs[0], &unshown.hubs[0]);
    assert_eq!(shown.changes.len(), 3, "{shown:#?}");
    assert!(shown.changes.iter().all(|change| !change.diff.is_empty()));
    assert!(unshown.changes.iter().all(|change| change.diff.is_empty()));
    let what = |hub: &HubPlan| {
        hub.changes
            .iter()
            .map(|change| (change.key.clone(), change.action, change.desired.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(what(shown), what(unshown));
    assert_eq!(shown.steps, unshown.steps);
    assert_eq!(shown.read_versions, unshown.read_versions);
}

#[test]
fn an_agent_version_bump_upgrades_from_what_the_spoke_reports() {
    let fleet = TestFleet::new().spoke("a").build();
    let mut observed = converged(&fleet);
    let key = ObjectKey::namespaced(ObjectKind::Spoke, "a");
    observed
        .get_mut("hub")
        .unwrap()
        .objects
        .get_mut(&key)
        .unwrap()
        .edit(|object| {
            object["status"] = json!({"agentVersion": "0.9.0", "agentConfigHash": "feedface"})
        });
    let plan = plan(&fleet, origin(), &observed, guard());
    let to = desired::effective(&fleet.spokes["a"], &fleet.hubs["hub"], &fleet.addons)
        .agent
        .hash();
    assert_eq!(
        steps(&plan),
        [format!(
            "upgrade agent of a from 0.9.0 (config feedface) to 1.0.0 (config {to})"
        )]
    );
    assert!(
        plan.hubs[0].changes.is_empty(),
        "an upgrade driven by status changes no object"
    );
}

#[test]
fn addon_list_changes_enable_and_disable_addons() {
    let before = TestFleet::new()
        .addon("metrics")
        .addon("logging")
        .spoke_with("a", |s| s.addons = vec![SpokeAddon::Name("metrics".into())])
        .build();
    let after = TestFleet::new()
        .addon("metrics")
        .addon("logging")
        .spoke_with("a", |s| s.addons = vec![SpokeAddon::Name("logging".into())])
        .build();
    let plan = plan(&after, origin(), &converged(&before), guard());
    assert_eq!(
        steps(&plan),
        [
            "enable addon logging on a (namespace open-cluster-management-agent-addon)",
            "disable addon metrics on a",
        ]
    );
}

#[test]
fn a_spoke_removed_from_git_is_unjoined_within_the_prune_guard() {
    let mut fleet = TestFleet::new();
    for name in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"] {
        fleet = fleet.spoke(name);
    }
    let before = fleet.build();
    let one_gone = TestFleet(before.clone()).without_spoke("a").build();
    let plan_one = plan(&one_gone, origin(), &converged(&before), guard());
    assert_eq!(
        steps(&plan_one),
        ["unjoin spoke a (cleanup in finalizer order)"]
    );
    assert_eq!(plan_one.hubs[0].changes[0].action, Action::Delete);
    assert!(!plan_one.prune_blocked());

    let two_gone = TestFleet(one_gone).without_spoke("b").build();
    let blocked = plan(&two_gone, origin(), &converged(&before), guard());
    let block = blocked.hubs[0].prune_blocked.as_ref().expect("guard holds");
    assert_eq!(
        (block.unjoining.len(), block.limit, block.spokes),
        (2, 1, 11)
    );
    assert!(render::text(&blocked, false).contains("--allow-prune"));

    let allowed = plan(
        &two_gone,
        origin(),
        &converged(&before),
        PruneGuard {
            allow_prune: true,
            ..guard()
        },
    );
    assert!(!allowed.prune_blocked());
}

#[test]
fn deletions_already_under_way_can_be_left_out_and_other_changes_stay() {
    let before = TestFleet::new().spoke("a").spoke("b").build();
    let after = TestFleet(before.clone())
        .without_spoke("a")
        .without_spoke("b")
        .spoke("c")
        .build();
    let mut observed = converged(&before);
    let hub = observed.get_mut("hub").unwrap();
    let a = ObjectKey {
        kind: ObjectKind::Spoke,
        namespace: Some(crate::api::fleet::SYSTEM_NAMESPACE.into()),
        name: "a".into(),
    };
    hub.objects
        .get_mut(&a)
        .unwrap()
        .edit(|object| object["metadata"]["deletionTimestamp"] = json!("2026-11-26T12:00:00Z"));
    let guard = PruneGuard {
        allow_prune: true,
        ..guard()
    };
    let mut hub_plan = plan(&after, origin(), &observed, guard).hubs.remove(0);
    let changes = |plan: &HubPlan| {
        plan.changes
            .iter()
            .map(|change| format!("{:?} {}", change.action, change.key.name))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        changes(&hub_plan),
        ["Create c", "Delete a", "Delete b"],
        "planned as a deletion like any other"
    );
    hub_plan.leave_out_deletions_under_way(&observed["hub"]);
    assert_eq!(changes(&hub_plan), ["Create c", "Delete b"]);
}

#[test]
fn a_hub_removed_from_git_unjoins_its_spokes_then_is_deleted() {
    let before = TestFleet::new().spoke("a").build();
    let plan = plan(
        &Fleet::default(),
        origin(),
        &converged(&before),
        PruneGuard {
            allow_prune: true,
            ..guard()
        },
    );
    assert_eq!(
        steps(&plan),
        [
            "unjoin spoke a (cleanup in finalizer order)",
            "delete the hub (after unjoining its spokes)"
        ]
    );
    assert!(
        plan.hubs[0]
            .changes
            .iter()
            .all(|c| c.action == Action::Delete)
    );
}

#[test]
fn clusters_that_asked_to_join_but_are_not_in_git_are_listed() {
    let fleet = TestFleet::new().spoke("a").build();
    let mut observed = converged(&fleet);
    observed
        .get_mut("hub")
        .unwrap()
        .clusters
        .insert("stranger".into(), ClusterRegistration::default());
    // It set hubAcceptsClient itself (a hub without OCM's webhook lets it): still not accepted.
    observed.get_mut("hub").unwrap().clusters.insert(
        "self-accepted".into(),
        ClusterRegistration {
            hub_accepts_client: true,
            accepted: false,
        },
    );
    let plan = plan(&fleet, origin(), &observed, guard());
    assert_eq!(plan.hubs[0].pending_clusters, ["self-accepted", "stranger"]);
    assert!(plan.summary().contains("2 clusters waiting outside git"));
}

#[test]
fn the_server_side_dry_run_result_keeps_defaults_from_making_false_diffs() {
    let fleet = TestFleet::new().spoke("a").build();
    let mut observed = converged(&fleet);
    let hub = observed.get_mut("hub").unwrap();
    let key = ObjectKey::namespaced(ObjectKind::Spoke, "a");
    // Another manager added a label; without the dry run it would look like drift to undo.
    hub.objects
        .get_mut(&key)
        .unwrap()
        .edit(|object| object["metadata"]["labels"]["team"] = json!("edge"));
    assert!(plan(&fleet, origin(), &observed, guard()).has_changes());
    let hub = observed.get_mut("hub").unwrap();
    let live = hub.objects[&key].clone();
    hub.dry_run.insert(key, live);
    assert!(!plan(&fleet, origin(), &observed, guard()).has_changes());
}

#[test]
fn saved_plans_record_the_resource_version_of_every_object_read() {
    let fleet = TestFleet::new().spoke("a").build();
    let plan = plan(&fleet, origin(), &converged(&fleet), guard());
    assert_eq!(
        plan.hubs[0].read_versions["Spoke fleetform-system/a"].resource_version,
        "101"
    );
    let saved: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    assert_eq!(saved, plan);
}

#[test]
fn a_saved_plan_is_stale_once_what_it_read_changes_but_not_for_status_writes() {
    let fleet = TestFleet::new().spoke("a").spoke("b").build();
    let mut observed = converged(&fleet);
    let plan = plan(&fleet, origin(), &observed, guard());
    let hub = observed.get_mut("hub").unwrap();
    let a = ObjectKey::namespaced(ObjectKind::Spoke, "a");

    hub.objects
        .get_mut(&a)
        .unwrap()
        .edit(|object| object["status"] = json!({"phase": "Unhealthy"}));
    hub.objects
        .get_mut(&a)
        .unwrap()
        .edit(|object| object["metadata"]["resourceVersion"] = json!("900"));
    assert!(stale_reasons(&plan.hubs[0], hub).is_empty());

    hub.objects
        .get_mut(&a)
        .unwrap()
        .edit(|object| object["spec"]["leaseDurationSeconds"] = json!(5));
    hub.objects
        .get_mut(&a)
        .unwrap()
        .edit(|object| object["metadata"]["resourceVersion"] = json!("901"));
    hub.objects
        .remove(&ObjectKey::namespaced(ObjectKind::Spoke, "b"));
    let mut extra = hub.objects[&a].clone();
    extra.edit(|object| object["metadata"]["name"] = json!("c"));
    hub.objects
        .insert(ObjectKey::namespaced(ObjectKind::Spoke, "c"), extra);
    assert_eq!(
        stale_reasons(&plan.hubs[0], hub),
        [
            "Spoke fleetform-system/a changed (resourceVersion 101 → 901)",
            "Spoke fleetform-system/b was deleted",
            "Spoke fleetform-system/c was created",
        ]
    );
}

#[test]
fn secret_values_never_appear_in_a_comparison() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"},
                        "data": {"token": "c2VjcmV0"}});
    let shown = serde_json::to_string(&comparable(&secret)).unwrap();
    assert!(!shown.contains("c2VjcmV0"), "{shown}");
    assert!(shown.contains("(sensitive, "), "{shown}");
}

#[test]
fn markdown_folds_long_diffs_and_text_colours_only_when_asked() {
    let mut fleet = TestFleet::new().spoke("short").build();
    let mut long = fleet.spokes["short"].clone();
    long.metadata.name = Some("long".into());
    long.metadata.labels = Some(
        (0..20)
            .map(|i| (format!("label-{i}"), "x".to_string()))
            .collect(),
    );
    fleet.spokes.insert("long".into(), long);
    let plan = plan(&fleet, origin(), &Observed::new(), guard());
    let markdown = render::markdown(&plan);
    assert!(
        markdown.contains("<details><summary>+ create Spoke fleetform-system/long</summary>"),
        "{markdown}"
    );
    assert!(
        markdown.contains("\n+ create Spoke fleetform-system/short\n\n```diff\n"),
        "{markdown}"
    );
    assert!(markdown.contains("**Plan: 3 to create"), "{markdown}");
    assert!(!render::text(&plan, false).contains('\x1b'));
    assert!(render::text(&plan, true).contains("\x1b[32m+ create"));
}

#[test]
fn a_hubs_objects_come_in_key_order_one_per_key_and_only_its_own() {
    let fleet = TestFleet::new()
        .spoke("b")
        .spoke("a")
        .spoke_with("other", |spec| spec.hub_ref = "another-hub".into())
        .addon("metrics")
        .build();
    let keys: Vec<ObjectKey> = desired::hub_object_keys(&fleet, "hub").collect();
    let rendered: Vec<(ObjectKey, Value)> = hub_objects(&fleet, "hub").collect();
    // The plan tells the objects to delete by these keys, and renders each it keeps in order.
    assert_eq!(
        rendered.iter().map(|(key, _)| key).collect::<Vec<_>>(),
        keys.iter().collect::<Vec<_>>()
    );
    assert!(keys.is_sorted(), "{keys:?}");
    let names: Vec<(&str, &str)> = rendered
        .iter()
        .map(|(key, object)| {
            assert_eq!(object["metadata"]["name"], key.name.as_str());
            (key.kind.as_str(), key.name.as_str())
        })
        .collect();
    assert_eq!(
        names,
        [
            ("Hub", "hub"),
            ("Spoke", "a"),
            ("Spoke", "b"),
            ("ClusterManagementAddOn", "metrics")
        ]
    );
    // A hub the fleet does not declare holds nothing of it.
    assert_eq!(desired::hub_object_keys(&fleet, "another-hub").count(), 0);
}

#[test]
fn addon_documents_become_cluster_management_addons_carrying_their_spec() {
    let fleet = TestFleet::new().addon("metrics").build();
    let objects: BTreeMap<_, _> = hub_objects(&fleet, "hub").collect();
    let cma: &Value = &objects[&ObjectKey::cluster(ObjectKind::ClusterManagementAddOn, "metrics")];
    assert_eq!(
        cma["apiVersion"],
        "addon.open-cluster-management.io/v1alpha1"
    );
    let spec: AddOnSpec = serde_json::from_str(
        cma["metadata"]["annotations"][desired::ADDON_SPEC_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(spec, fleet.addons["metrics"].spec);
    assert_eq!(
        cma["metadata"]["labels"][desired::MANAGED_BY_LABEL],
        "fleetform"
    );
}

#[test]
fn json_maps_write_their_keys_sorted_so_digests_are_stable() {
    // Digests of saved plans hash serde_json's output; should a dependency ever switch on
    // serde_json's `preserve_order`, key order would follow insertion and digests would drift.
    assert_eq!(
        json!({"b": 1, "a": {"d": 2, "c": 3}}).to_string(),
        r#"{"a":{"c":3,"d":2},"b":1}"#
    );
}

#[test]
fn addon_and_lease_changes_roll_out_in_waves_showing_what_changes_on_each_spoke() {
    let progressive = |fleet: &mut Fleet| {
        fleet.hubs.get_mut("hub").unwrap().spec.rollout = crate::api::fleet::RolloutSpec {
            strategy: crate::api::fleet::RolloutStrategy::Progressive,
            max_concurrency: Some(crate::api::fleet::SpokeCount::Count(1)),
            ..Default::default()
        };
    };
    let mut before = TestFleet::new()
        .addon("metrics")
        .addon("logging")
        .spoke_with("a", |s| s.addons = vec![SpokeAddon::Name("logging".into())])
        .spoke("b")
        .build();
    progressive(&mut before);
    let mut after = TestFleet::new()
        .addon("metrics")
        .addon("logging")
        .spoke_with("a", |s| s.addons = vec![SpokeAddon::Name("metrics".into())])
        .spoke_with("b", |s| s.lease_duration_seconds = Some(30))
        .spoke_with("c", |s| s.addons = vec![SpokeAddon::Name("metrics".into())])
        .build();
    progressive(&mut after);
    let plan = plan(&after, origin(), &converged(&before), guard());
    let rollout = plan.hubs[0].rollout.as_ref().expect("a rollout");
    // c joins with everything at once: a join is not a rollout.
    assert_eq!(
        rollout
            .waves
            .iter()
            .map(|wave| wave.spokes.clone())
            .collect::<Vec<_>>(),
        [vec!["a".to_string()], vec!["b".to_string()]]
    );
    let text = render::text(&plan, false);
    assert!(
        text.contains(
            "rollout (Progressive): 2 spoke(s) change in 2 wave(s); the first wave touches 1 (50%)\n    wave 1: a\n    wave 2: b\n    change addons +metrics -logging: a\n    change lease 60 s → 30 s: b\n"
        ),
        "{text}"
    );
    let document = serde_json::to_value(render::document(&plan)).unwrap();
    assert_eq!(
        document["hubs"][0]["rollout"]["changes"],
        json!([
            {"spoke": "a", "enable": ["metrics"], "disable": ["logging"]},
            {"spoke": "b", "leaseDurationSeconds": {"from": 60, "to": 30}},
        ])
    );
}

#[test]
fn an_addon_with_a_rollout_of_its_own_is_planned_apart_from_the_hubs_rollout() {
    let before = TestFleet::new()
        .addon("metrics")
        .spoke("a")
        .spoke("b")
        .build();
    let mut after = TestFleet::new()
        .addon("metrics")
        .spoke_with("a", |s| s.addons = vec![SpokeAddon::Name("metrics".into())])
        .spoke_with("b", |s| {
            s.addons = vec![SpokeAddon::Name("metrics".into())];
            s.lease_duration_seconds = Some(30);
        })
        .build();
    after.addons.get_mut("metrics").unwrap().spec.rollout = Some(crate::api::fleet::RolloutSpec {
        strategy: crate::api::fleet::RolloutStrategy::Progressive,
        max_concurrency: Some(crate::api::fleet::SpokeCount::Count(1)),
        ..Default::default()
    });
    let plan = plan(&after, origin(), &converged(&before), guard());
    let hub = &plan.hubs[0];
    let changes = |rollout: &super::rollout::RolloutPlan| -> Vec<String> {
        rollout
            .changes
            .iter()
            .map(|change| format!("{}: {}", change.spoke, change.describe()))
            .collect()
    };
    assert_eq!(
        changes(hub.rollout.as_ref().expect("the hub's rollout")),
        ["b: lease 60 s → 30 s"],
        "the addon is not the hub's to roll out"
    );
    assert_eq!(hub.addon_rollouts.len(), 1);
    assert_eq!(
        changes(&hub.addon_rollouts[0]),
        ["a: addons +metrics", "b: addons +metrics"]
    );
    let text = render::text(&plan, false);
    assert!(
        text.contains(
            "rollout of addon metrics (Progressive): 2 spoke(s) change in 2 wave(s); the first wave touches 1 (50%)\n    wave 1: a\n    wave 2: b\n"
        ),
        "{text}"
    );
    let document = serde_json::to_value(render::document(&plan)).unwrap();
    assert_eq!(document["hubs"][0]["addonRollouts"][0]["addon"], "metrics");
}
