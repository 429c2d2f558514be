//! fleetform's CRDs of OCM's kinds accept and reject what OCM's own CRDs do, field by field: a
//! table of objects shaped as OCM's API documents them, written to an embedded control plane
//! through kube-rs, each expected to be accepted or refused naming the field OCM's validation
//! names; then the defaults OCM's CRDs apply and the fields they prune.

use crate::support;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::Cluster;

/// How a case's object is written.
#[derive(Clone, Copy, Debug)]
enum Write {
    /// Created as it is.
    Create,
    /// Created without its status, then its status merge-patched through the status
    /// subresource (a create ignores status).
    Status,
}

/// What OCM's CRD does with the object.
#[derive(Clone, Copy, Debug)]
enum Expect {
    Accepted,
    /// Refused (422), naming this field.
    Rejected(&'static str),
}

use Expect::{Accepted, Rejected};
use Write::{Create, Status};

struct Case {
    what: &'static str,
    write: Write,
    object: Value,
    expect: Expect,
}

fn case(what: &'static str, write: Write, object: Value, expect: Expect) -> Case {
    Case {
        what,
        write,
        object,
        expect,
    }
}

const NAMESPACE: &str = "cluster1";

fn cluster(spec: Value) -> Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
           "spec": spec})
}

fn cluster_status(status: Value) -> Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
           "spec": {"hubAcceptsClient": true}, "status": status})
}

fn condition(type_: &str, status: &str, reason: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": "",
           "lastTransitionTime": "2026-01-02T03:04:05Z"})
}

fn taint(key: &str, effect: &str) -> Value {
    json!({"key": key, "effect": effect, "timeAdded": "2026-01-02T03:04:05Z"})
}

fn claim(spec: Value) -> Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
           "spec": spec})
}

fn cluster_set(spec: Value) -> Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
           "kind": "ManagedClusterSet", "spec": spec})
}

fn binding(spec: Value) -> Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
           "kind": "ManagedClusterSetBinding", "spec": spec})
}

fn addon(version: &str, spec: Value, status: Value) -> Value {
    json!({"apiVersion": format!("addon.open-cluster-management.io/{version}"),
           "kind": "ManagedClusterAddOn", "spec": spec, "status": status})
}

fn management(version: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("addon.open-cluster-management.io/{version}"),
           "kind": "ClusterManagementAddOn", "spec": spec})
}

fn placement_with_rollout(rollout: Value) -> Value {
    json!({"installStrategy": {"type": "Placements", "placements": [
        {"namespace": "default", "name": "all", "rolloutStrategy": rollout}]}})
}

fn work(spec: Value) -> Value {
    json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
           "spec": spec})
}

fn manifest_config(option: Value) -> Value {
    let mut config = json!({"resourceIdentifier": {"resource": "configmaps", "name": "cm",
                                                  "namespace": "default"}});
    config
        .as_object_mut()
        .unwrap()
        .extend(option.as_object().unwrap().clone());
    work(json!({"manifestConfigs": [config]}))
}

fn executor(subject: Value) -> Value {
    work(json!({"executor": {"subject": subject}}))
}

fn cases() -> Vec<Case> {
    vec![
        // ManagedCluster (cluster.open-cluster-management.io/v1)
        case(
            "a ManagedCluster without spec",
            Create,
            json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster"}),
            Accepted,
        ),
        case(
            "a ManagedCluster as OCM's agent and hub write it",
            Create,
            cluster(json!({"hubAcceptsClient": true, "leaseDurationSeconds": 60,
                            "managedClusterClientConfigs": [{"url": "https://c1:6443", "caBundle": "Y2E="}],
                            "taints": [{"key": "cluster.open-cluster-management.io/unreachable",
                                        "effect": "NoSelect", "timeAdded": null}]})),
            Accepted,
        ),
        case(
            "a client config without url",
            Create,
            cluster(json!({"managedClusterClientConfigs": [{"caBundle": "Y2E="}]})),
            Rejected("spec.managedClusterClientConfigs[0].url"),
        ),
        case(
            "a taint key with a colon",
            Create,
            cluster(json!({"taints": [taint("a:b", "NoSelect")]})),
            Rejected("spec.taints[0].key"),
        ),
        case(
            "a taint key longer than 316",
            Create,
            cluster(json!({"taints": [taint(&"k".repeat(317), "NoSelect")]})),
            Rejected("spec.taints[0].key"),
        ),
        case(
            "a taint value longer than 1024",
            Create,
            cluster(
                json!({"taints": [{"key": "k", "value": "v".repeat(1025), "effect": "NoSelect"}]}),
            ),
            Rejected("spec.taints[0].value"),
        ),
        case(
            "a taint effect OCM does not know",
            Create,
            cluster(json!({"taints": [taint("k", "NoExecute")]})),
            Rejected("spec.taints[0].effect"),
        ),
        case(
            "a taint without effect",
            Create,
            cluster(json!({"taints": [{"key": "k"}]})),
            Rejected("spec.taints[0].effect"),
        ),
        case(
            "a lease duration that is not an integer",
            Create,
            cluster(json!({"leaseDurationSeconds": "60s"})),
            Rejected("spec.leaseDurationSeconds"),
        ),
        case(
            "a status as OCM's agent writes it",
            Status,
            cluster_status(json!({
                 "conditions": [condition("ManagedClusterConditionAvailable", "True", "ManagedClusterAvailable")],
                 "capacity": {"cpu": 18, "memory": "72001Mi"},
                 "allocatable": {"cpu": "15500m", "memory": "65257Mi"},
                 "version": {"kubernetes": "v1.34.1"},
                 "clusterClaims": [{"name": "id.k8s.io", "value": "c1"}],
                 "managedNamespaces": [{"clusterSet": "default", "name": "apps",
                                        "conditions": [condition("NamespaceAvailable", "True", "Created")]}]})),
            Accepted,
        ),
        case(
            "a condition status Maybe",
            Status,
            cluster_status(
                json!({"conditions": [condition("ManagedClusterJoined", "Maybe", "Joined")]}),
            ),
            Rejected("status.conditions[0].status"),
        ),
        case(
            "a condition without reason",
            Status,
            cluster_status(
                json!({"conditions": [{"type": "ManagedClusterJoined", "status": "True",
                                                   "message": "", "lastTransitionTime": "2026-01-02T03:04:05Z"}]}),
            ),
            Rejected("status.conditions[0].reason"),
        ),
        case(
            "a condition reason with a space",
            Status,
            cluster_status(
                json!({"conditions": [condition("ManagedClusterJoined", "True", "Joined now")]}),
            ),
            Rejected("status.conditions[0].reason"),
        ),
        case(
            "a condition type with a space",
            Status,
            cluster_status(json!({"conditions": [condition("Cluster Joined", "True", "Joined")]})),
            Rejected("status.conditions[0].type"),
        ),
        case(
            "a capacity that is no quantity",
            Status,
            cluster_status(json!({"capacity": {"cpu": "lots"}})),
            Rejected("status.capacity.cpu"),
        ),
        case(
            "an empty claim value",
            Status,
            cluster_status(json!({"clusterClaims": [{"name": "region", "value": ""}]})),
            Rejected("status.clusterClaims[0].value"),
        ),
        case(
            "a managed namespace that is no DNS label",
            Status,
            cluster_status(
                json!({"managedNamespaces": [{"clusterSet": "default", "name": "Apps"}]}),
            ),
            Rejected("status.managedNamespaces[0].name"),
        ),
        case(
            "a managed namespace without its set",
            Status,
            cluster_status(json!({"managedNamespaces": [{"name": "apps"}]})),
            Rejected("status.managedNamespaces[0].clusterSet"),
        ),
        // ClusterClaim (cluster.open-cluster-management.io/v1alpha1)
        case(
            "a ClusterClaim without spec",
            Create,
            json!({"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim"}),
            Accepted,
        ),
        case(
            "a ClusterClaim",
            Create,
            claim(json!({"value": "eu-west-1"})),
            Accepted,
        ),
        case(
            "an empty ClusterClaim value",
            Create,
            claim(json!({"value": ""})),
            Rejected("spec.value"),
        ),
        case(
            "a ClusterClaim value longer than 1024",
            Create,
            claim(json!({"value": "v".repeat(1025)})),
            Rejected("spec.value"),
        ),
        // ManagedClusterSet and ManagedClusterSetBinding (cluster.open-cluster-management.io/v1beta2)
        case(
            "a ManagedClusterSet without spec",
            Create,
            json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet"}),
            Accepted,
        ),
        case(
            "a label-selector ManagedClusterSet",
            Create,
            cluster_set(
                json!({"clusterSelector": {"selectorType": "LabelSelector", "labelSelector": {
                 "matchLabels": {"vendor": "OpenShift"},
                 "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}},
                 "managedNamespaces": [{"name": "apps"}]}),
            ),
            Accepted,
        ),
        case(
            "a selector type OCM does not know",
            Create,
            cluster_set(json!({"clusterSelector": {"selectorType": "Everything"}})),
            Rejected("spec.clusterSelector.selectorType"),
        ),
        case(
            "a match expression without operator",
            Create,
            cluster_set(json!({"clusterSelector": {"selectorType": "LabelSelector",
                                "labelSelector": {"matchExpressions": [{"key": "env"}]}}})),
            Rejected("spec.clusterSelector.labelSelector.matchExpressions[0].operator"),
        ),
        case(
            "a set's namespace that is no DNS label",
            Create,
            cluster_set(json!({"managedNamespaces": [{"name": "Bad_Name"}]})),
            Rejected("spec.managedNamespaces[0].name"),
        ),
        case(
            "a ManagedClusterSetBinding without spec",
            Create,
            json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
                    "kind": "ManagedClusterSetBinding"}),
            Accepted,
        ),
        case(
            "a ManagedClusterSetBinding",
            Create,
            binding(json!({"clusterSet": "default"})),
            Accepted,
        ),
        case(
            "a binding to an empty set name",
            Create,
            binding(json!({"clusterSet": ""})),
            Rejected("spec.clusterSet"),
        ),
        // ManagedClusterAddOn (addon.open-cluster-management.io/v1alpha1, v1beta1)
        case(
            "a ManagedClusterAddOn without spec",
            Create,
            json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn"}),
            Rejected("spec"),
        ),
        case(
            "a v1beta1 ManagedClusterAddOn without spec",
            Create,
            json!({"apiVersion": "addon.open-cluster-management.io/v1beta1", "kind": "ManagedClusterAddOn"}),
            Rejected("spec"),
        ),
        case(
            "an install namespace that is no DNS label",
            Create,
            addon("v1alpha1", json!({"installNamespace": "Bad_NS"}), json!({})),
            Rejected("spec.installNamespace"),
        ),
        case(
            "an addon config without name",
            Create,
            addon(
                "v1alpha1",
                json!({"configs": [{"resource": "addondeploymentconfigs"}]}),
                json!({}),
            ),
            Rejected("spec.configs[0].name"),
        ),
        case(
            "an addon status as OCM writes it",
            Status,
            addon(
                "v1alpha1",
                json!({}),
                json!({
                 "conditions": [condition("Available", "True", "ManagedClusterAddOnLeaseUpdated")],
                 "relatedObjects": [{"group": "addon.open-cluster-management.io",
                                     "resource": "clustermanagementaddons", "name": "hello"}],
                 "registrations": [{"signerName": "kubernetes.io/kube-apiserver-client",
                                    "subject": {"user": "u", "groups": ["g"]}}],
                 "healthCheck": {"mode": "Customized"},
                 "kubeClientDriver": "csr"}),
            ),
            Accepted,
        ),
        case(
            "a kube client driver OCM does not know",
            Status,
            addon("v1alpha1", json!({}), json!({"kubeClientDriver": "bogus"})),
            Rejected("status.kubeClientDriver"),
        ),
        case(
            "a registration signer without a slash",
            Status,
            addon(
                "v1alpha1",
                json!({}),
                json!({"registrations": [{"signerName": "no-slash"}]}),
            ),
            Rejected("status.registrations[0].signerName"),
        ),
        case(
            "a health check mode OCM does not know",
            Status,
            addon(
                "v1alpha1",
                json!({}),
                json!({"healthCheck": {"mode": "Sometimes"}}),
            ),
            Rejected("status.healthCheck.mode"),
        ),
        case(
            "a related object without group",
            Status,
            addon(
                "v1alpha1",
                json!({}),
                json!({"relatedObjects": [{"resource": "r", "name": "n"}]}),
            ),
            Rejected("status.relatedObjects[0].group"),
        ),
        case(
            "a v1beta1 registration without type",
            Status,
            addon(
                "v1beta1",
                json!({}),
                json!({"registrations": [{"kubeClient": {}}]}),
            ),
            Rejected("status.registrations[0].type"),
        ),
        case(
            "a v1beta1 registration type OCM does not know",
            Status,
            addon(
                "v1beta1",
                json!({}),
                json!({"registrations": [{"type": "token"}]}),
            ),
            Rejected("status.registrations[0].type"),
        ),
        case(
            "a v1beta1 install namespace, which v1beta1 does not have",
            Create,
            addon(
                "v1beta1",
                json!({"installNamespace": "hello", "configs": [{"resource": "r"}]}),
                json!({}),
            ),
            Rejected("spec.configs[0].name"),
        ),
        // ClusterManagementAddOn (addon.open-cluster-management.io/v1alpha1, v1beta1)
        case(
            "a ClusterManagementAddOn without spec",
            Create,
            json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn"}),
            Rejected("spec"),
        ),
        case(
            "a ClusterManagementAddOn as fleetform writes it",
            Create,
            management(
                "v1alpha1",
                json!({"addOnMeta": {"displayName": "hello"},
                                          "installStrategy": {"type": "Manual"}}),
            ),
            Accepted,
        ),
        case(
            "an install strategy OCM does not know",
            Create,
            management("v1alpha1", json!({"installStrategy": {"type": "Auto"}})),
            Rejected("spec.installStrategy.type"),
        ),
        case(
            "a progressive rollout",
            Create,
            management(
                "v1alpha1",
                placement_with_rollout(json!({"type": "Progressive",
                 "progressive": {"maxConcurrency": "25%", "maxFailures": 2, "progressDeadline": "10m",
                                 "mandatoryDecisionGroups": [{"groupName": "canary"}]}})),
            ),
            Accepted,
        ),
        case(
            "a rollout failure budget over 100%",
            Create,
            management(
                "v1alpha1",
                placement_with_rollout(json!({"type": "All",
                 "all": {"maxFailures": "150%"}})),
            ),
            Rejected("maxFailures"),
        ),
        case(
            "a rollout deadline in words",
            Create,
            management(
                "v1alpha1",
                placement_with_rollout(json!({"type": "All",
                 "all": {"progressDeadline": "ten minutes"}})),
            ),
            Rejected("progressDeadline"),
        ),
        case(
            "a rollout type OCM does not know",
            Create,
            management(
                "v1alpha1",
                placement_with_rollout(json!({"type": "Canary"})),
            ),
            Rejected("rolloutStrategy.type"),
        ),
        case(
            "a placement without namespace",
            Create,
            management(
                "v1alpha1",
                json!({"installStrategy": {"type": "Placements",
                                                               "placements": [{"name": "all"}]}}),
            ),
            Rejected("spec.installStrategy.placements[0].namespace"),
        ),
        case(
            "a v1beta1 default config without name",
            Create,
            management(
                "v1beta1",
                json!({"defaultConfigs": [{"resource": "addondeploymentconfigs"}]}),
            ),
            Rejected("spec.defaultConfigs[0].name"),
        ),
        // ManifestWork (work.open-cluster-management.io/v1)
        case(
            "a ManifestWork without spec",
            Create,
            json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork"}),
            Accepted,
        ),
        case(
            "a ManifestWork with every option",
            Create,
            work(json!({
                 "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": "cm", "namespace": "default"}}]},
                 "deleteOption": {"propagationPolicy": "SelectivelyOrphan", "selectivelyOrphans": {
                     "orphaningRules": [{"resource": "configmaps", "name": "cm", "namespace": "default"}]}},
                 "manifestConfigs": [{
                     "resourceIdentifier": {"resource": "configmaps", "name": "cm", "namespace": "default"},
                     "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [{"name": "replicas", "path": ".replicas"}]}],
                     "updateStrategy": {"type": "ServerSideApply", "serverSideApply": {
                         "force": true, "fieldManager": "work-agent-apps",
                         "ignoreFields": [{"condition": "OnSpokeChange", "jsonPaths": [".data"]}]}},
                     "conditionRules": [{"type": "CEL", "condition": "Ready",
                                         "celExpressions": ["object.data.ready == 'yes'"]}],
                     "feedbackScrapeType": "Watch"}],
                 "executor": {"subject": {"type": "ServiceAccount",
                                          "serviceAccount": {"namespace": "default", "name": "deployer"}}}})),
            Accepted,
        ),
        case(
            "an executor that is no service account",
            Create,
            executor(
                json!({"type": "User", "serviceAccount": {"namespace": "default", "name": "me"}}),
            ),
            Rejected("spec.executor.subject.type"),
        ),
        case(
            "an executor without type",
            Create,
            executor(json!({"serviceAccount": {"namespace": "default", "name": "me"}})),
            Rejected("spec.executor.subject.type"),
        ),
        case(
            "an executor service account that is no DNS name",
            Create,
            executor(
                json!({"type": "ServiceAccount", "serviceAccount": {"namespace": "default", "name": "Me Too"}}),
            ),
            Rejected("spec.executor.subject.serviceAccount.name"),
        ),
        case(
            "an executor service account without namespace",
            Create,
            executor(json!({"type": "ServiceAccount", "serviceAccount": {"name": "me"}})),
            Rejected("spec.executor.subject.serviceAccount.namespace"),
        ),
        case(
            "a manifest that is not an object",
            Create,
            work(json!({"workload": {"manifests": ["not an object"]}})),
            Rejected("spec.workload.manifests[0]"),
        ),
        case(
            "a deletion policy OCM does not know",
            Create,
            work(json!({"deleteOption": {"propagationPolicy": "Background"}})),
            Rejected("spec.deleteOption.propagationPolicy"),
        ),
        case(
            "a manifest config without resource identifier",
            Create,
            work(json!({"manifestConfigs": [{"feedbackScrapeType": "Poll"}]})),
            Rejected("spec.manifestConfigs[0].resourceIdentifier"),
        ),
        case(
            "an update strategy OCM does not know",
            Create,
            manifest_config(json!({"updateStrategy": {"type": "Patch"}})),
            Rejected("spec.manifestConfigs[0].updateStrategy.type"),
        ),
        case(
            "a field manager not starting with work-agent",
            Create,
            manifest_config(json!({"updateStrategy": {"type": "ServerSideApply",
                                                       "serverSideApply": {"fieldManager": "me"}}})),
            Rejected("spec.manifestConfigs[0].updateStrategy.serverSideApply.fieldManager"),
        ),
        case(
            "a feedback rule type OCM does not know",
            Create,
            manifest_config(json!({"feedbackRules": [{"type": "Everything"}]})),
            Rejected("spec.manifestConfigs[0].feedbackRules[0].type"),
        ),
        case(
            "a feedback scrape type OCM does not know",
            Create,
            manifest_config(json!({"feedbackScrapeType": "Push"})),
            Rejected("spec.manifestConfigs[0].feedbackScrapeType"),
        ),
        case(
            "a condition rule without condition",
            Create,
            manifest_config(json!({"conditionRules": [{"type": "WellKnownConditions"}]})),
            Rejected("spec.manifestConfigs[0].conditionRules[0].condition"),
        ),
        case(
            "a status feedback value of an unknown type",
            Status,
            json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                    "spec": {}, "status": {"resourceStatus": {"manifests": [{
                        "resourceMeta": {"ordinal": 0}, "conditions": [],
                        "statusFeedback": {"values": [{"name": "replicas",
                                                       "fieldValue": {"type": "Float"}}]}}]}}}),
            Rejected("status.resourceStatus.manifests[0].statusFeedback.values[0].fieldValue.type"),
        ),
        case(
            "a manifest status without conditions",
            Status,
            json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                    "spec": {}, "status": {"resourceStatus": {"manifests": [{"resourceMeta": {"ordinal": 0}}]}}}),
            Rejected("status.resourceStatus.manifests[0].conditions"),
        ),
    ]
}

/// The cases OCM's CRDs decide with CEL rules or list-type uniqueness, which the embedded
/// control plane does not enforce yet.
fn cel_and_list_type_cases() -> Vec<Case> {
    vec![
        case(
            "a CEL condition rule with an empty condition",
            Create,
            manifest_config(json!({"conditionRules": [{"type": "CEL", "condition": "",
                                                        "celExpressions": ["true"]}]})),
            Rejected("spec.manifestConfigs[0].conditionRules[0]"),
        ),
        case(
            "two condition rules for one condition",
            Create,
            manifest_config(json!({"conditionRules": [
                 {"type": "WellKnownConditions", "condition": "Ready"},
                 {"type": "WellKnownConditions", "condition": "Ready"}]})),
            Rejected("spec.manifestConfigs[0].conditionRules[1]"),
        ),
        case(
            "two cluster conditions of one type",
            Status,
            cluster_status(json!({"conditions": [
                 condition("ManagedClusterJoined", "True", "Joined"),
                 condition("ManagedClusterJoined", "False", "Left")]})),
            Rejected("status.conditions[1]"),
        ),
        case(
            "two supported configs of one kind",
            Create,
            management(
                "v1alpha1",
                json!({"supportedConfigs": [
                 {"group": "", "resource": "configmaps"}, {"group": "", "resource": "configmaps"}]}),
            ),
            Rejected("spec.supportedConfigs[1]"),
        ),
        case(
            "a label selector's values listed twice is fine (atomic list)",
            Create,
            cluster_set(
                json!({"clusterSelector": {"selectorType": "LabelSelector", "labelSelector": {
                 "matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "a"]}]}}}),
            ),
            Accepted,
        ),
    ]
}

fn api_for(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap();
    let kind = object["kind"].as_str().unwrap();
    let (plural, namespaced) = match kind {
        "ManagedCluster" => ("managedclusters", false),
        "ClusterClaim" => ("clusterclaims", false),
        "ManagedClusterSet" => ("managedclustersets", false),
        "ManagedClusterSetBinding" => ("managedclustersetbindings", true),
        "ManagedClusterAddOn" => ("managedclusteraddons", true),
        "ClusterManagementAddOn" => ("clustermanagementaddons", false),
        "ManifestWork" => ("manifestworks", true),
        other => panic!("no resource for {other}"),
    };
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    if namespaced {
        Api::namespaced_with(client.clone(), NAMESPACE, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    }
}

/// Writes a case's object as `name`; the error message if the server refused it.
async fn write(client: &Client, case: &Case, name: &str) -> Result<Value, String> {
    let mut object = case.object.clone();
    object["metadata"] = json!({"name": name});
    let status = match case.write {
        Write::Create => None,
        Write::Status => object.as_object_mut().unwrap().remove("status"),
    };
    let api = api_for(client, &object);
    let refused = |err: kube::Error| match err {
        kube::Error::Api(status) if status.code == 422 => status.message,
        other => panic!("{}: not a validation error: {other}", case.what),
    };
    let dynamic: DynamicObject = serde_json::from_value(object).unwrap();
    let created = api
        .create(&PostParams::default(), &dynamic)
        .await
        .map_err(refused)?;
    let written = match status {
        None => created,
        Some(status) => api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .map_err(refused)?,
    };
    Ok(serde_json::to_value(written).unwrap())
}

/// Runs the cases; each line of the answer is a case whose outcome differs from OCM's.
async fn disagreements(client: &Client, cases: &[Case], prefix: &str) -> Vec<String> {
    let mut differing = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let name = format!("{prefix}-{index}");
        match (write(client, case, &name).await, case.expect) {
            (Ok(_), Expect::Accepted) => {}
            (Err(message), Expect::Rejected(field)) if message.contains(field) => {}
            (Ok(_), Expect::Rejected(field)) => {
                differing.push(format!("{}: accepted; OCM refuses {field}", case.what))
            }
            (Err(message), expect) => differing.push(format!(
                "{}: refused ({message}); OCM: {expect:?}",
                case.what
            )),
        }
    }
    differing
}

async fn hub() -> Cluster {
    let hub = Cluster::start().await;
    hub.namespace(NAMESPACE).await;
    hub
}

#[tokio::test]
async fn ocm_kinds_accept_and_reject_what_ocms_crds_do() {
    let hub = hub().await;
    let differing = disagreements(&hub.client, &cases(), "case").await;
    assert!(
        differing.is_empty(),
        "fleetform's CRDs disagree with OCM's:\n  {}",
        differing.join("\n  ")
    );
}

#[tokio::test]

async fn ocm_kinds_apply_ocms_cel_rules_and_list_types() {
    let hub = hub().await;
    let differing = disagreements(&hub.client, &cel_and_list_type_cases(), "cel").await;
    assert!(
        differing.is_empty(),
        "fleetform's CRDs disagree with OCM's:\n  {}",
        differing.join("\n  ")
    );
}

#[tokio::test]
async fn ocm_kinds_are_defaulted_as_ocms_crds_default_them() {
    let hub = hub().await;
    let written = |name: &'static str, object: Value| {
        let case = case("defaults", Create, object, Accepted);
        let client = hub.client.clone();
        async move { write(&client, &case, name).await.unwrap() }
    };
    let cluster = written("cluster", cluster(json!({"hubAcceptsClient": true}))).await;
    assert_eq!(cluster["spec"]["leaseDurationSeconds"], 60);
    let set = written(
        "set",
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
                             "kind": "ManagedClusterSet"}),
    )
    .await;
    assert_eq!(
        set["spec"],
        json!({"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}})
    );
    let addon = written("addon", addon("v1alpha1", json!({}), json!({}))).await;
    assert_eq!(
        addon["spec"]["installNamespace"],
        "open-cluster-management-agent-addon"
    );
    let offered = written("offered", management("v1alpha1", json!({}))).await;
    assert_eq!(
        offered["spec"]["installStrategy"],
        json!({"type": "Manual"})
    );
    let rollout = written("rollout", management(
        "v1alpha1",
        json!({"installStrategy": {"type": "Placements", "placements": [
            {"namespace": "default", "name": "all", "rolloutStrategy": {"type": "All", "all": {}}}]}}),
    ))
    .await;
    let all = &rollout["spec"]["installStrategy"]["placements"][0]["rolloutStrategy"]["all"];
    assert_eq!(
        *all,
        json!({"maxFailures": 0, "minSuccessTime": "0", "progressDeadline": "None"})
    );
    let work = written(
        "work",
        manifest_config(json!({"updateStrategy": {"serverSideApply": {}}})),
    )
    .await;
    let config = &work["spec"]["manifestConfigs"][0];
    assert_eq!(config["feedbackScrapeType"], "Poll");
    assert_eq!(
        config["updateStrategy"],
        json!({"type": "Update", "serverSideApply": {"fieldManager": "work-agent"}})
    );
}

#[tokio::test]
async fn status_fields_ocm_does_not_define_are_pruned() {
    let hub = hub().await;
    let case = case(
        "fleetform's old node health",
        Status,
        cluster_status(json!({
            "version": {"kubernetes": "v1.34.1"},
            "nodeHealth": {"total": 3, "ready": 3},
        })),
        Accepted,
    );
    let written = write(&hub.client, &case, "pruned").await.unwrap();
    assert_eq!(
        written["status"],
        json!({"version": {"kubernetes": "v1.34.1"}})
    );
}
