//! Conversion of the addon kinds between the versions OCM serves them in: `v1alpha1`, the
//! version stored, and `v1beta1`. It converts exactly as OCM's addon manager does, so objects
//! read through either version look the same on a fleetform hub as on an OCM one:
//!
//! - ManagedClusterAddOn: `spec.installNamespace` has no place in `v1beta1` and travels in the
//!   annotation [`ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE`]; a registration whose signer is
//!   `kubernetes.io/kube-apiserver-client` is a `kubeClient` registration, any other a
//!   `customSigner` one; `status.kubeClientDriver` is the driver of the `kubeClient`
//!   registrations; a config reference's deprecated top-level name is its desired config's.
//! - ClusterManagementAddOn: `supportedConfigs` are `defaultConfigs`, a kind without a default
//!   named [`RESERVED_NO_DEFAULT_CONFIG_NAME`].
//!
//! Like OCM's, the conversion drops what `v1beta1` cannot say: `addOnConfiguration` (deprecated),
//! the organisational units of a `kubeClient` registration, a driver with no `kubeClient`
//! registration to carry it. Everything else survives a round trip.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::addon::{self, ConfigReferent, v1beta1};
use super::vocabulary::{
    ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE, RESERVED_NO_DEFAULT_CONFIG_NAME,
    SIGNER_KUBE_APISERVER_CLIENT,
};

/// `apiVersion` of the stored version of the addon kinds.
pub const ADDON_V1ALPHA1: &str = "addon.open-cluster-management.io/v1alpha1";
/// `apiVersion` of the addon kinds' newer version.
pub const ADDON_V1BETA1: &str = "addon.open-cluster-management.io/v1beta1";

/// Converts a ManagedClusterAddOn or ClusterManagementAddOn to `to_api_version`
/// (`addon.open-cluster-management.io/v1alpha1` or `.../v1beta1`), as a CRD conversion webhook
/// does for each object of a ConversionReview. An object already at that version comes back
/// unchanged. The error says which object could not be converted and why.
pub fn convert_addon(object: Value, to_api_version: &str) -> Result<Value, String> {
    let from = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let name = [
        &object["metadata"]["namespace"],
        &object["metadata"]["name"],
    ]
    .iter()
    .filter_map(|part| part.as_str())
    .collect::<Vec<_>>()
    .join("/");
    let described = format!("{kind} {name:?} ({from})");
    for version in [from.as_str(), to_api_version] {
        if version != ADDON_V1ALPHA1 && version != ADDON_V1BETA1 {
            return Err(format!(
                "cannot convert {described} to {to_api_version}: the addon kinds are served at \
                 {ADDON_V1ALPHA1} and {ADDON_V1BETA1} only"
            ));
        }
    }
    if from == to_api_version {
        return Ok(object);
    }
    let to_beta = to_api_version == ADDON_V1BETA1;
    let unreadable = |err: serde_json::Error| format!("{described} cannot be read: {err}");
    match kind.as_str() {
        "ManagedClusterAddOn" if to_beta => convert(object, managed_to_v1beta1).map_err(unreadable),
        "ManagedClusterAddOn" => convert(object, managed_to_v1alpha1).map_err(unreadable),
        "ClusterManagementAddOn" if to_beta => {
            convert(object, management_to_v1beta1).map_err(unreadable)
        }
        "ClusterManagementAddOn" => convert(object, management_to_v1alpha1).map_err(unreadable),
        _ => Err(format!(
            "cannot convert {described}: only ManagedClusterAddOn and ClusterManagementAddOn \
             have more than one version"
        )),
    }
}

fn convert<From: DeserializeOwned, To: Serialize>(
    object: Value,
    conversion: fn(From) -> To,
) -> Result<Value, serde_json::Error> {
    serde_json::to_value(conversion(serde_json::from_value(object)?))
}

fn managed_to_v1beta1(alpha: addon::ManagedClusterAddOn) -> v1beta1::ManagedClusterAddOn {
    let mut metadata = alpha.metadata;
    if let Some(namespace) = alpha.spec.install_namespace.filter(|ns| !ns.is_empty()) {
        metadata
            .annotations
            .get_or_insert_default()
            .insert(ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE.to_string(), namespace);
    }
    let status = alpha.status.map(|status| {
        let driver = status.kube_client_driver;
        v1beta1::ManagedClusterAddOnStatus {
            conditions: status.conditions,
            related_objects: status.related_objects,
            add_on_meta: status.add_on_meta,
            supported_configs: status.supported_configs,
            config_references: status
                .config_references
                .into_iter()
                .map(|reference| v1beta1::ConfigReference {
                    group: reference.group,
                    resource: reference.resource,
                    last_observed_generation: reference.last_observed_generation,
                    desired_config: reference.desired_config,
                    last_applied_config: reference.last_applied_config,
                })
                .collect(),
            namespace: status.namespace,
            registrations: status
                .registrations
                .into_iter()
                .map(|registration| registration_to_v1beta1(registration, driver))
                .collect(),
            health_check: status.health_check,
        }
    });
    v1beta1::ManagedClusterAddOn {
        metadata,
        spec: v1beta1::ManagedClusterAddOnSpec {
            configs: alpha.spec.configs,
        },
        status,
    }
}

fn registration_to_v1beta1(
    registration: addon::RegistrationConfig,
    driver: Option<addon::KubeClientDriver>,
) -> v1beta1::RegistrationConfig {
    let subject = registration.subject;
    if registration.signer_name == SIGNER_KUBE_APISERVER_CLIENT {
        v1beta1::RegistrationConfig {
            type_: v1beta1::RegistrationType::KubeClient,
            kube_client: Some(v1beta1::KubeClientConfig {
                subject: subject.map(|subject| v1beta1::KubeClientSubject {
                    user: subject.user,
                    groups: subject.groups,
                }),
                driver,
            }),
            custom_signer: None,
        }
    } else {
        v1beta1::RegistrationConfig {
            type_: v1beta1::RegistrationType::CustomSigner,
            kube_client: None,
            custom_signer: Some(v1beta1::CustomSignerConfig {
                signer_name: registration.signer_name,
                subject: subject.map(|subject| v1beta1::Subject {
                    user: subject.user,
                    groups: subject.groups,
                    organization_units: subject.organization_units,
                }),
            }),
        }
    }
}

fn managed_to_v1alpha1(beta: v1beta1::ManagedClusterAddOn) -> addon::ManagedClusterAddOn {
    let mut metadata = beta.metadata;
    let install_namespace = metadata
        .annotations
        .as_mut()
        .and_then(|annotations| annotations.remove(ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE));
    if metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.is_empty())
    {
        metadata.annotations = None;
    }
    let status = beta.status.map(|status| {
        let kube_client_driver = status
            .registrations
            .iter()
            .find(|registration| registration.type_ == v1beta1::RegistrationType::KubeClient)
            .and_then(|registration| registration.kube_client.as_ref())
            .and_then(|kube_client| kube_client.driver);
        addon::ManagedClusterAddOnStatus {
            conditions: status.conditions,
            related_objects: status.related_objects,
            add_on_meta: status.add_on_meta,
            add_on_configuration: None,
            supported_configs: status.supported_configs,
            config_references: status
                .config_references
                .into_iter()
                .map(|reference| {
                    let referent = reference.desired_config.as_ref();
                    addon::ConfigReference {
                        group: reference.group,
                        resource: reference.resource,
                        namespace: referent.and_then(|config| config.namespace.clone()),
                        name: referent
                            .map(|config| config.name.clone())
                            .unwrap_or_default(),
                        last_observed_generation: reference.last_observed_generation,
                        desired_config: reference.desired_config,
                        last_applied_config: reference.last_applied_config,
                    }
                })
                .collect(),
            namespace: status.namespace,
            registrations: status
                .registrations
                .into_iter()
                .map(registration_to_v1alpha1)
                .collect(),
            health_check: status.health_check,
            kube_client_driver,
        }
    });
    addon::ManagedClusterAddOn {
        metadata,
        spec: addon::ManagedClusterAddOnSpec {
            install_namespace,
            configs: beta.spec.configs,
        },
        status,
    }
}

fn registration_to_v1alpha1(
    registration: v1beta1::RegistrationConfig,
) -> addon::RegistrationConfig {
    match registration.type_ {
        v1beta1::RegistrationType::KubeClient => addon::RegistrationConfig {
            signer_name: SIGNER_KUBE_APISERVER_CLIENT.to_string(),
            subject: registration
                .kube_client
                .and_then(|kube_client| kube_client.subject)
                .map(|subject| addon::Subject {
                    user: subject.user,
                    groups: subject.groups,
                    organization_units: Vec::new(),
                }),
        },
        v1beta1::RegistrationType::CustomSigner => {
            let signer = registration.custom_signer.unwrap_or_default();
            addon::RegistrationConfig {
                signer_name: signer.signer_name,
                subject: signer.subject.map(|subject| addon::Subject {
                    user: subject.user,
                    groups: subject.groups,
                    organization_units: subject.organization_units,
                }),
            }
        }
    }
}

fn management_to_v1beta1(alpha: addon::ClusterManagementAddOn) -> v1beta1::ClusterManagementAddOn {
    let default_configs = alpha
        .spec
        .supported_configs
        .into_iter()
        .map(|config| {
            let referent = config.default_config.unwrap_or_else(|| ConfigReferent {
                namespace: None,
                name: RESERVED_NO_DEFAULT_CONFIG_NAME.to_string(),
            });
            addon::AddOnConfig {
                group: config.group,
                resource: config.resource,
                namespace: referent.namespace,
                name: referent.name,
            }
        })
        .collect();
    v1beta1::ClusterManagementAddOn {
        metadata: alpha.metadata,
        spec: v1beta1::ClusterManagementAddOnSpec {
            add_on_meta: alpha.spec.add_on_meta,
            default_configs,
            install_strategy: alpha.spec.install_strategy,
        },
        status: alpha
            .status
            .map(|status| v1beta1::ClusterManagementAddOnStatus {
                default_config_references: status.default_config_references,
                install_progressions: status.install_progressions,
            }),
    }
}

fn management_to_v1alpha1(beta: v1beta1::ClusterManagementAddOn) -> addon::ClusterManagementAddOn {
    let supported_configs = beta
        .spec
        .default_configs
        .into_iter()
        .map(|config| {
            let has_default =
                !config.name.is_empty() && config.name != RESERVED_NO_DEFAULT_CONFIG_NAME;
            addon::ConfigMeta {
                group: config.group,
                resource: config.resource,
                default_config: has_default.then_some(ConfigReferent {
                    namespace: config.namespace,
                    name: config.name,
                }),
            }
        })
        .collect();
    addon::ClusterManagementAddOn {
        metadata: beta.metadata,
        spec: addon::ClusterManagementAddOnSpec {
            add_on_meta: beta.spec.add_on_meta,
            add_on_configuration: None,
            supported_configs,
            install_strategy: beta.spec.install_strategy,
        },
        status: beta
            .status
            .map(|status| addon::ClusterManagementAddOnStatus {
                default_config_references: status.default_config_references,
                install_progressions: status.install_progressions,
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::schema_check::schema_errors;
    use serde_json::json;

    const CONFIG_GROUP: &str = "addon.open-cluster-management.io";

    fn condition() -> Value {
        json!({
            "type": "Available", "status": "True", "reason": "ManagedClusterAddOnLeaseUpdated",
            "message": "", "lastTransitionTime": "2026-01-02T03:04:05Z"
        })
    }

    fn spec_hash(hash: &str) -> Value {
        json!({"namespace": "cluster1", "name": "deploy-config", "specHash": hash})
    }

    /// A ManagedClusterAddOn as the API server stores it (`v1alpha1`), with every field OCM's
    /// addon manager, registration agent and addon agent write.
    fn managed_v1alpha1() -> Value {
        json!({
            "apiVersion": ADDON_V1ALPHA1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": "helloworld", "namespace": "cluster1", "uid": "u-1",
                         "resourceVersion": "7", "labels": {"app": "hello"}},
            "spec": {
                "installNamespace": "hello",
                "configs": [{"group": CONFIG_GROUP, "resource": "addondeploymentconfigs",
                             "namespace": "cluster1", "name": "deploy-config"}]
            },
            "status": {
                "conditions": [condition()],
                "relatedObjects": [{"group": CONFIG_GROUP, "resource": "clustermanagementaddons",
                                    "name": "helloworld"}],
                "addOnMeta": {"displayName": "Hello", "description": "says hello"},
                "supportedConfigs": [{"group": CONFIG_GROUP, "resource": "addondeploymentconfigs"}],
                "configReferences": [{
                    "group": CONFIG_GROUP, "resource": "addondeploymentconfigs",
                    "namespace": "cluster1", "name": "deploy-config", "lastObservedGeneration": 2,
                    "desiredConfig": spec_hash("b"), "lastAppliedConfig": spec_hash("a")
                }],
                "namespace": "hello",
                "registrations": [
                    {"signerName": "kubernetes.io/kube-apiserver-client",
                     "subject": {"user": "system:open-cluster-management:cluster:cluster1:addon:helloworld:agent:helloworld",
                                 "groups": ["system:open-cluster-management:cluster:cluster1:addon:helloworld"]}},
                    {"signerName": "example.com/signer",
                     "subject": {"user": "u", "groups": ["g"], "organizationUnit": ["ou"]}}
                ],
                "healthCheck": {"mode": "Customized"},
                "kubeClientDriver": "token"
            }
        })
    }

    /// [`managed_v1alpha1`] as OCM serves it at `v1beta1`.
    fn managed_v1beta1() -> Value {
        json!({
            "apiVersion": ADDON_V1BETA1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": "helloworld", "namespace": "cluster1", "uid": "u-1",
                         "resourceVersion": "7", "labels": {"app": "hello"},
                         "annotations": {ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE: "hello"}},
            "spec": {
                "configs": [{"group": CONFIG_GROUP, "resource": "addondeploymentconfigs",
                             "namespace": "cluster1", "name": "deploy-config"}]
            },
            "status": {
                "conditions": [condition()],
                "relatedObjects": [{"group": CONFIG_GROUP, "resource": "clustermanagementaddons",
                                    "name": "helloworld"}],
                "addOnMeta": {"displayName": "Hello", "description": "says hello"},
                "supportedConfigs": [{"group": CONFIG_GROUP, "resource": "addondeploymentconfigs"}],
                "configReferences": [{
                    "group": CONFIG_GROUP, "resource": "addondeploymentconfigs",
                    "lastObservedGeneration": 2,
                    "desiredConfig": spec_hash("b"), "lastAppliedConfig": spec_hash("a")
                }],
                "namespace": "hello",
                "registrations": [
                    {"type": "kubeClient",
                     "kubeClient": {
                         "subject": {"user": "system:open-cluster-management:cluster:cluster1:addon:helloworld:agent:helloworld",
                                     "groups": ["system:open-cluster-management:cluster:cluster1:addon:helloworld"]},
                         "driver": "token"}},
                    {"type": "customSigner",
                     "customSigner": {"signerName": "example.com/signer",
                                      "subject": {"user": "u", "groups": ["g"], "organizationUnits": ["ou"]}}}
                ],
                "healthCheck": {"mode": "Customized"}
            }
        })
    }

    fn management_v1alpha1() -> Value {
        json!({
            "apiVersion": ADDON_V1ALPHA1,
            "kind": "ClusterManagementAddOn",
            "metadata": {"name": "helloworld"},
            "spec": {
                "addOnMeta": {"displayName": "Hello"},
                "supportedConfigs": [
                    {"group": CONFIG_GROUP, "resource": "addondeploymentconfigs",
                     "defaultConfig": {"namespace": "open-cluster-management", "name": "deploy-config"}},
                    {"group": "", "resource": "configmaps"}
                ],
                "installStrategy": {"type": "Placements", "placements": [{
                    "namespace": "default", "name": "all",
                    "configs": [{"group": "", "resource": "configmaps", "name": "hello"}],
                    "rolloutStrategy": {"type": "Progressive", "progressive": {
                        "maxConcurrency": "25%", "maxFailures": 0, "minSuccessTime": "0",
                        "progressDeadline": "None",
                        "mandatoryDecisionGroups": [{"groupName": "canary"}]}}
                }]}
            },
            "status": {
                "defaultconfigReferences": [{"group": CONFIG_GROUP,
                                             "resource": "addondeploymentconfigs",
                                             "desiredConfig": spec_hash("b")}],
                "installProgressions": [{
                    "namespace": "default", "name": "all",
                    "configReferences": [{"group": CONFIG_GROUP, "resource": "addondeploymentconfigs",
                                          "desiredConfig": spec_hash("b"),
                                          "lastAppliedConfig": spec_hash("a"),
                                          "lastKnownGoodConfig": spec_hash("a")}],
                    "conditions": [condition()]
                }]
            }
        })
    }

    fn management_v1beta1() -> Value {
        let mut beta = management_v1alpha1();
        beta["apiVersion"] = json!(ADDON_V1BETA1);
        let spec = beta["spec"].as_object_mut().unwrap();
        spec.remove("supportedConfigs");
        spec.insert(
            "defaultConfigs".into(),
            json!([
                {"group": CONFIG_GROUP, "resource": "addondeploymentconfigs",
                 "namespace": "open-cluster-management", "name": "deploy-config"},
                {"group": "", "resource": "configmaps", "name": RESERVED_NO_DEFAULT_CONFIG_NAME}
            ]),
        );
        let status = beta["status"].as_object_mut().unwrap();
        let references = status.remove("defaultconfigReferences").unwrap();
        status.insert("defaultConfigReferences".into(), references);
        beta
    }

    #[test]
    fn fixtures_are_valid_at_their_versions() {
        for object in [
            managed_v1alpha1(),
            managed_v1beta1(),
            management_v1alpha1(),
            management_v1beta1(),
        ] {
            assert_eq!(schema_errors(&object), Vec::<String>::new(), "{object:#}");
        }
    }

    #[test]
    fn managed_cluster_addon_converts_as_ocm_converts_it() {
        assert_eq!(
            convert_addon(managed_v1alpha1(), ADDON_V1BETA1).unwrap(),
            managed_v1beta1()
        );
        assert_eq!(
            convert_addon(managed_v1beta1(), ADDON_V1ALPHA1).unwrap(),
            managed_v1alpha1()
        );
    }

    #[test]
    fn cluster_management_addon_converts_as_ocm_converts_it() {
        assert_eq!(
            convert_addon(management_v1alpha1(), ADDON_V1BETA1).unwrap(),
            management_v1beta1()
        );
        assert_eq!(
            convert_addon(management_v1beta1(), ADDON_V1ALPHA1).unwrap(),
            management_v1alpha1()
        );
    }

    #[test]
    fn objects_round_trip_through_the_other_version() {
        for (object, other) in [
            (managed_v1alpha1(), ADDON_V1BETA1),
            (managed_v1beta1(), ADDON_V1ALPHA1),
            (management_v1alpha1(), ADDON_V1BETA1),
            (management_v1beta1(), ADDON_V1ALPHA1),
        ] {
            let own = object["apiVersion"].as_str().unwrap().to_string();
            let there = convert_addon(object.clone(), other).unwrap();
            assert_eq!(schema_errors(&there), Vec::<String>::new(), "{there:#}");
            assert_eq!(convert_addon(there, &own).unwrap(), object);
        }
    }

    #[test]
    fn an_object_at_the_wanted_version_comes_back_unchanged() {
        let mut object = managed_v1alpha1();
        object["status"]["unknownToFleetform"] = json!(1);
        assert_eq!(convert_addon(object.clone(), ADDON_V1ALPHA1), Ok(object));
    }

    #[test]
    fn a_v1beta1_addon_without_install_namespace_or_kube_client_reads_without_them() {
        let beta = json!({
            "apiVersion": ADDON_V1BETA1, "kind": "ManagedClusterAddOn",
            "metadata": {"name": "hello", "namespace": "cluster1"},
            "spec": {},
            "status": {
                "registrations": [{"type": "customSigner",
                                   "customSigner": {"signerName": "example.com/signer"}}],
                "configReferences": [{"group": "", "resource": "configmaps", "lastObservedGeneration": 1}]
            }
        });
        let alpha = convert_addon(beta, ADDON_V1ALPHA1).unwrap();
        assert_eq!(alpha["spec"], json!({}));
        assert_eq!(alpha["metadata"].get("annotations"), None);
        assert_eq!(
            alpha["status"]["registrations"],
            json!([{"signerName": "example.com/signer"}])
        );
        assert_eq!(alpha["status"].get("kubeClientDriver"), None);
        assert_eq!(
            alpha["status"]["configReferences"][0]["name"],
            json!(""),
            "no desired config, so no deprecated name"
        );
    }

    #[test]
    fn the_driver_reaches_every_kube_client_registration_and_comes_back_from_the_first() {
        let mut alpha = managed_v1alpha1();
        alpha["status"]["registrations"][1]["signerName"] = json!(SIGNER_KUBE_APISERVER_CLIENT);
        let beta = convert_addon(alpha, ADDON_V1BETA1).unwrap();
        let registrations = beta["status"]["registrations"].as_array().unwrap();
        for registration in registrations {
            assert_eq!(registration["type"], "kubeClient");
            assert_eq!(registration["kubeClient"]["driver"], "token");
        }
        let mut beta = beta;
        beta["status"]["registrations"][1]["kubeClient"]["driver"] = json!("csr");
        let alpha = convert_addon(beta, ADDON_V1ALPHA1).unwrap();
        assert_eq!(alpha["status"]["kubeClientDriver"], "token");
    }

    #[test]
    fn what_v1beta1_cannot_say_is_dropped_as_ocm_drops_it() {
        let mut alpha = managed_v1alpha1();
        alpha["status"]["addOnConfiguration"] = json!({"crdName": "c", "crName": "r"});
        alpha["status"]["registrations"][0]["subject"]["organizationUnit"] = json!(["ou"]);
        let back =
            convert_addon(convert_addon(alpha, ADDON_V1BETA1).unwrap(), ADDON_V1ALPHA1).unwrap();
        assert_eq!(back, managed_v1alpha1());

        let mut management = management_v1alpha1();
        management["spec"]["addOnConfiguration"] = json!({"crdName": "c"});
        let back = convert_addon(
            convert_addon(management, ADDON_V1BETA1).unwrap(),
            ADDON_V1ALPHA1,
        )
        .unwrap();
        assert_eq!(back, management_v1alpha1());
    }

    #[test]
    fn objects_that_cannot_be_converted_are_refused_with_a_reason() {
        let mut bad_status = managed_v1alpha1();
        bad_status["status"]["registrations"] = json!("not a list");
        let mut other_group = managed_v1alpha1();
        other_group["apiVersion"] = json!("example.com/v1alpha1");
        let mut other_kind = managed_v1alpha1();
        other_kind["kind"] = json!("AddOnDeploymentConfig");
        for (object, to, expected) in [
            (
                bad_status,
                ADDON_V1BETA1,
                "ManagedClusterAddOn \"cluster1/helloworld\" (addon.open-cluster-management.io/v1alpha1) cannot be read: ",
            ),
            (other_group, ADDON_V1BETA1, "the addon kinds are served at"),
            (
                managed_v1alpha1(),
                "addon.open-cluster-management.io/v2",
                "cannot convert ManagedClusterAddOn \"cluster1/helloworld\"",
            ),
            (
                other_kind,
                ADDON_V1BETA1,
                "only ManagedClusterAddOn and ClusterManagementAddOn",
            ),
            (json!(null), ADDON_V1BETA1, "cannot convert"),
        ] {
            let error = convert_addon(object, to).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
    }
}
