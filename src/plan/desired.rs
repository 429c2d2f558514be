//! What a fleet asks each hub to hold: its Hub and Spoke objects in `fleetform-system` and one
//! ClusterManagementAddOn per AddOn, rendered as the exact objects `apply` writes.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::fleet::{API_VERSION, AddOn, Hub, SYSTEM_NAMESPACE, Spoke};
use crate::fleet::Fleet;

use crate::api::vocabulary::LABEL_CLUSTER_SET;
pub use crate::api::vocabulary::{MANAGED_BY, MANAGED_BY_LABEL};

/// Annotation of a ClusterManagementAddOn carrying its AddOn document's spec, which the hub
/// loops read to approve and sign the addon's CSRs.
pub const ADDON_SPEC_ANNOTATION: &str = "fleetform.io/addon-spec";

/// The AddOn document a ClusterManagementAddOn carries in [`ADDON_SPEC_ANNOTATION`]: `None` when
/// it carries none (it is not fleetform's), an error when the annotation is not an AddOn spec.
pub fn carried_addon_spec(
    addon: &crate::api::ClusterManagementAddOn,
) -> Option<Result<crate::api::fleet::AddOnSpec, serde_json::Error>> {
    let text = addon
        .metadata
        .annotations
        .as_ref()?
        .get(ADDON_SPEC_ANNOTATION)?;
    Some(serde_json::from_str(text))
}

/// The kinds of object a plan writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectKind {
    Hub,
    Spoke,
    ClusterManagementAddOn,
}

impl ObjectKind {
    pub fn api_version(self) -> &'static str {
        match self {
            ObjectKind::Hub | ObjectKind::Spoke => API_VERSION,
            ObjectKind::ClusterManagementAddOn => "addon.open-cluster-management.io/v1alpha1",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Hub => "Hub",
            ObjectKind::Spoke => "Spoke",
            ObjectKind::ClusterManagementAddOn => "ClusterManagementAddOn",
        }
    }
}

/// Identifies one object on one hub.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    pub kind: ObjectKind,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    pub fn namespaced(kind: ObjectKind, name: &str) -> Self {
        ObjectKey {
            kind,
            namespace: Some(SYSTEM_NAMESPACE.to_string()),
            name: name.to_string(),
        }
    }

    pub fn cluster(kind: ObjectKind, name: &str) -> Self {
        ObjectKey {
            kind,
            namespace: None,
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind.as_str(), self.name),
            None => write!(f, "{} {}", self.kind.as_str(), self.name),
        }
    }
}

/// The settings an agent runs with; a change to any of them makes the agent upgrade itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    pub version: String,
    pub image: Option<String>,
    pub hub_api_server: Option<String>,
    pub client_cert_expiration_seconds: i32,
    /// The hub's CA bundle as the fleet repo gives it (inline, or where the Secret is); left out
    /// of the hash when unset, so hubs without one keep their agents' hashes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hub_ca_bundle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hub_ca_bundle_secret_ref: Option<crate::api::fleet::SecretKeyRef>,
}

impl AgentConfig {
    /// A short, stable hash of the configuration (over its canonical JSON).
    pub fn hash(&self) -> String {
        stable_hash(&serde_json::to_string(self).unwrap_or_default())
    }
}

/// FNV-1a of `text` as 16 hex digits: stable across processes, versions and machines.
pub fn stable_hash(text: &str) -> String {
    let mut hasher = StableHasher::default();
    hasher.update(text.as_bytes());
    hasher.finish_hex()
}

/// FNV-1a, written to like a file so that serialisers can stream into it.
pub struct StableHasher(u64);

impl Default for StableHasher {
    fn default() -> Self {
        StableHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl StableHasher {
    pub fn update(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn finish_hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

impl std::io::Write for StableHasher {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The values a spoke ends up with once its hub's defaults are applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectiveSpoke {
    pub lease_duration_seconds: i32,
    pub cluster_claims_max: i32,
    pub agent: AgentConfig,
    /// Addon name → install namespace.
    pub addons: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

/// The version agents run when neither the hub nor the spoke names one.
pub const DEFAULT_AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A spoke's effective settings under its hub; addons not in `addons` are skipped.
pub fn effective(spoke: &Spoke, hub: &Hub, addons: &BTreeMap<String, AddOn>) -> EffectiveSpoke {
    let registration = &hub.spec.registration;
    EffectiveSpoke {
        lease_duration_seconds: spoke
            .spec
            .lease_duration_seconds
            .unwrap_or(registration.lease_duration_seconds),
        cluster_claims_max: spoke
            .spec
            .cluster_claims_max
            .unwrap_or(registration.cluster_claims_max),
        agent: agent_config(spoke.spec.agent.as_ref(), hub),
        addons: spoke
            .spec
            .addons
            .iter()
            .filter_map(|addon| {
                let doc = addons.get(addon.name())?;
                let namespace = addon
                    .install_namespace()
                    .unwrap_or(&doc.spec.install_namespace);
                Some((addon.name().to_string(), namespace.to_string()))
            })
            .collect(),
        labels: spoke
            .metadata
            .labels
            .iter()
            .flatten()
            .filter(|(key, _)| key.as_str() != MANAGED_BY_LABEL)
            .map(|(key, value)| (key.clone(), value.clone()))
            .chain([(
                LABEL_CLUSTER_SET.to_string(),
                spoke.spec.cluster_set().to_string(),
            )])
            .collect(),
    }
}

/// The agent a spoke with `overrides` runs under `hub`; with none, the hub's own agent (what its
/// rollout rolls out).
pub fn agent_config(overrides: Option<&crate::api::fleet::AgentSpec>, hub: &Hub) -> AgentConfig {
    let field = |pick: fn(&crate::api::fleet::AgentSpec) -> Option<&String>| {
        overrides
            .and_then(pick)
            .or_else(|| hub.spec.agent.as_ref().and_then(pick))
            .cloned()
    };
    AgentConfig {
        version: field(|agent| agent.version.as_ref())
            .unwrap_or_else(|| DEFAULT_AGENT_VERSION.to_string()),
        image: field(|agent| agent.image.as_ref()),
        hub_api_server: hub.spec.api_server.clone(),
        client_cert_expiration_seconds: hub.spec.registration.client_cert_expiration_seconds,
        hub_ca_bundle: hub.spec.ca_bundle.clone(),
        hub_ca_bundle_secret_ref: hub.spec.ca_bundle_secret_ref.clone(),
    }
}

/// [`hub_objects`], each kept as its text ([`Stored`](super::Stored)) while a hub is observed
/// against them: 10,000 Spokes' objects as trees were a fifth of the sync's peak.
pub fn hub_objects_stored(fleet: &Fleet, hub_name: &str) -> BTreeMap<ObjectKey, super::Stored> {
    hub_objects(fleet, hub_name)
        .map(|(key, object)| (key, super::Stored::new(&object)))
        .collect()
}

/// Every object one hub should hold, in key order, each rendered when the iterator reaches it:
/// whoever keeps them decides how (a plan of 10,000 Spokes held them all as trees at once, a
/// third of the sync's peak).
pub fn hub_objects<'a>(
    fleet: &'a Fleet,
    hub_name: &'a str,
) -> impl Iterator<Item = (ObjectKey, Value)> + 'a {
    hub_object_keys(fleet, hub_name).filter_map(|key| {
        let object = hub_object(fleet, &key)?;
        Some((key, object))
    })
}

/// The keys of [`hub_objects`], in the same order, nothing rendered: the Hub, its Spokes and a
/// ClusterManagementAddOn per AddOn, or nothing when the fleet has no hub of that name.
pub fn hub_object_keys<'a>(
    fleet: &'a Fleet,
    hub_name: &'a str,
) -> impl Iterator<Item = ObjectKey> + 'a {
    let declared = fleet.hubs.contains_key(hub_name);
    let hub = declared.then(|| ObjectKey::namespaced(ObjectKind::Hub, hub_name));
    let spokes = fleet
        .spokes
        .iter()
        .filter(move |(_, spoke)| declared && spoke.spec.hub_ref == hub_name)
        .map(|(name, _)| ObjectKey::namespaced(ObjectKind::Spoke, name));
    let addons = fleet
        .addons
        .keys()
        .filter(move |_| declared)
        .map(|name| ObjectKey::cluster(ObjectKind::ClusterManagementAddOn, name));
    hub.into_iter().chain(spokes).chain(addons)
}

/// The object of the fleet `key` names, rendered as `apply` writes it; `None` when the fleet
/// declares none of that kind and name.
pub(super) fn hub_object(fleet: &Fleet, key: &ObjectKey) -> Option<Value> {
    let in_system_namespace = |metadata: &ObjectMeta, spec: Value| {
        object(key.kind, Some(SYSTEM_NAMESPACE), metadata, spec)
    };
    match key.kind {
        ObjectKind::Hub => fleet
            .hubs
            .get(&key.name)
            .map(|hub| in_system_namespace(&hub.metadata, json!(hub.spec))),
        ObjectKind::Spoke => fleet
            .spokes
            .get(&key.name)
            .map(|spoke| in_system_namespace(&spoke.metadata, json!(spoke.spec))),
        ObjectKind::ClusterManagementAddOn => {
            let addon = fleet.addons.get(&key.name)?;
            let mut metadata = addon.metadata.clone();
            metadata.annotations.get_or_insert_default().insert(
                ADDON_SPEC_ANNOTATION.to_string(),
                serde_json::to_string(&addon.spec).unwrap_or_default(),
            );
            let spec = json!({
                "addOnMeta": {"displayName": key.name},
                "installStrategy": {"type": "Manual"},
            });
            Some(object(key.kind, None, &metadata, spec))
        }
    }
}

fn object(kind: ObjectKind, namespace: Option<&str>, source: &ObjectMeta, spec: Value) -> Value {
    let mut labels = source.labels.clone().unwrap_or_default();
    labels.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string());
    let mut metadata = json!({
        "name": source.name.clone().unwrap_or_default(),
        "labels": labels,
    });
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    if let Some(annotations) = source.annotations.as_ref().filter(|a| !a.is_empty()) {
        metadata["annotations"] = json!(annotations);
    }
    json!({
        "apiVersion": kind.api_version(),
        "kind": kind.as_str(),
        "metadata": metadata,
        "spec": spec,
    })
}
