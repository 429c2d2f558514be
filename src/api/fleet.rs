//! fleetform's own kinds (`fleetform.io/v1alpha1`): Hub, Spoke and FleetSync, and a Hub's rollout
//! of agent changes (its spec and the state it keeps in the Hub's status).
//!
//! Hub and Spoke are both the documents of the fleet repo and the custom resources the hub stores
//! in `fleetform-system`: what git says is, field for field, what the cluster gets. Defaults are
//! applied on deserialisation, so a loaded document always carries its effective values.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of fleetform's kinds.
pub const GROUP: &str = "fleetform.io";
/// The one served version of fleetform's kinds and of the fleet repo format.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every fleet repo document.
pub const API_VERSION: &str = "fleetform.io/v1alpha1";
/// Namespace on the hub that holds the Hub, Spoke and FleetSync objects.
pub const SYSTEM_NAMESPACE: &str = "fleetform-system";

/// How fleetform reaches a cluster's API server. Exactly one source is set (checked by
/// validation, not by the type, so that every violation in a repo can be reported at once).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigSource {
    /// A context of the kubeconfig fleetform itself runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// A key of a Secret on the hub holding a kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyRef>,
    /// The cluster fleetform runs in. On a Spoke this marks the hub registered as its own spoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_cluster: Option<bool>,
    /// An embedded control plane that fleetform starts itself (single-machine fleets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedded: Option<EmbeddedCluster>,
}

impl KubeconfigSource {
    /// The names of the sources that are set, in field order.
    pub fn sources(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        if self.context.is_some() {
            set.push("context");
        }
        if self.secret_ref.is_some() {
            set.push("secretRef");
        }
        if self.in_cluster == Some(true) {
            set.push("inCluster");
        }
        if self.embedded.is_some() {
            set.push("embedded");
        }
        set
    }

    /// Whether this is the in-cluster source (for a Spoke: the hub registered as a spoke).
    pub fn is_in_cluster(&self) -> bool {
        self.in_cluster == Some(true)
    }
}

/// A reference to one key of a Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyRef {
    /// Namespace of the Secret on the hub.
    pub namespace: String,
    /// Name of the Secret.
    pub name: String,
    /// The key of the Secret's data that holds the value.
    pub key: String,
}

/// A reference to a Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretRef {
    /// Namespace of the Secret on the hub.
    pub namespace: String,
    /// Name of the Secret.
    pub name: String,
}

/// An embedded control plane; it has no settings yet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EmbeddedCluster {}

/// The agent bundle a spoke runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentSpec {
    /// Bundle version; a change upgrades every agent that does not override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Container image of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// Registration settings a hub gives its spokes unless a spoke overrides them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationSpec {
    /// How often agents renew their lease; the hub marks a cluster Unknown after five missed.
    #[serde(default = "default_lease_duration_seconds")]
    pub lease_duration_seconds: i32,
    /// How many ClusterClaims a spoke reports in all; reserved claims are never cut.
    #[serde(default = "default_cluster_claims_max")]
    pub cluster_claims_max: i32,
    /// Lifetime of the client certificates the hub issues to agents.
    #[serde(default = "default_client_cert_expiration_seconds")]
    pub client_cert_expiration_seconds: i32,
    /// Clusters the hub accepts without a Spoke in git.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_approval: Option<AutoApprovalSpec>,
}

impl Default for RegistrationSpec {
    fn default() -> Self {
        Self {
            lease_duration_seconds: default_lease_duration_seconds(),
            cluster_claims_max: default_cluster_claims_max(),
            client_cert_expiration_seconds: default_client_cert_expiration_seconds(),
            auto_approval: None,
        }
    }
}

/// Which clusters a hub accepts without a Spoke in git, as OCM's ManagedClusterAutoApproval
/// does: a cluster whose registration CSR one of `users` requested (the requester the API server
/// records, which no client can forge) is accepted once; a later denial stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AutoApprovalSpec {
    /// Usernames, e.g. `system:serviceaccount:open-cluster-management:cluster-bootstrap`.
    #[serde(default)]
    pub users: Vec<String>,
}

fn default_lease_duration_seconds() -> i32 {
    60
}
fn default_cluster_claims_max() -> i32 {
    20
}
fn default_client_cert_expiration_seconds() -> i32 {
    86_400
}

/// A hub: a cluster that spokes register to.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "fleetform.io",
    version = "v1alpha1",
    kind = "Hub",
    namespaced,
    category = "fleetform",
    status = "HubStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"API Server","type":"string","jsonPath":".spec.apiServer"}"#,
    printcolumn = r#"{"name":"Agent","type":"string","jsonPath":".spec.agent.version"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HubSpec {
    pub kubeconfig: KubeconfigSource,
    /// The API server URL spokes use to reach this hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server: Option<String>,
    /// The CA bundle (PEM) spokes trust for `apiServer`, for a hub behind a load balancer or
    /// proxy whose certificate the hub's own CA did not issue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// A Secret on the hub holding that CA bundle (PEM), instead of `caBundle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle_secret_ref: Option<SecretKeyRef>,
    /// The agent bundle every spoke of this hub runs unless it overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSpec>,
    #[serde(default)]
    pub registration: RegistrationSpec,
    /// How a change that reaches many of this hub's spokes (their agent, addons or lease duration)
    /// reaches them: all at once, or in waves.
    #[serde(default, skip_serializing_if = "RolloutSpec::is_default")]
    pub rollout: RolloutSpec,
}

/// How a change that reaches many spokes rolls out (their agent, addons or lease duration): all
/// at once, or in waves, each spoke counting as done once it has had its new settings, Available,
/// for `minSuccessSeconds`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    #[serde(default)]
    pub strategy: RolloutStrategy,
    /// For `Groups`: the groups in the order they roll out; spokes no group selects go last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<RolloutGroup>,
    /// How many spokes (or what percent of them, rounded down but at least one) may be moving at
    /// once; no limit when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<SpokeCount>,
    /// How many spokes (or what percent of those rolled out) may fail before the rollout halts;
    /// a new target, or `paused: true` then `false`, resumes it.
    #[serde(default)]
    pub max_failures: SpokeCount,
    /// Bake time: how long a spoke must have had its new settings (agent running, addons
    /// Available, lease duration), Available, to count as done.
    #[serde(default)]
    pub min_success_seconds: i64,
    /// How long a spoke may take from its release to done before it counts as failed.
    #[serde(default = "default_progress_deadline_seconds")]
    pub progress_deadline_seconds: i64,
    /// What happens to a spoke that is not Available when its turn comes.
    #[serde(default)]
    pub offline: OfflinePolicy,
    /// Release no more spokes until unset; those released carry on.
    #[serde(default)]
    pub paused: bool,
}

impl Default for RolloutSpec {
    fn default() -> Self {
        Self {
            strategy: RolloutStrategy::default(),
            groups: Vec::new(),
            max_concurrency: None,
            max_failures: SpokeCount::default(),
            min_success_seconds: 0,
            progress_deadline_seconds: default_progress_deadline_seconds(),
            offline: OfflinePolicy::default(),
            paused: false,
        }
    }
}

impl RolloutSpec {
    /// Whether this is the rollout a Hub without `rollout` has (so it is not written back).
    pub fn is_default(&self) -> bool {
        *self == RolloutSpec::default()
    }
}

fn default_progress_deadline_seconds() -> i64 {
    600
}

/// How a rollout orders its spokes (OCM's RolloutStrategy types, by fleetform's names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RolloutStrategy {
    /// Every spoke at once.
    #[default]
    All,
    /// Spokes in name order, `maxConcurrency` at a time.
    Progressive,
    /// `groups` in order, each finished before the next starts.
    Groups,
}

/// What a rollout does with a spoke that is not Available when its turn comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OfflinePolicy {
    /// Pass it over (skippedOffline) and release it once every other spoke is done and it is back.
    #[default]
    Skip,
    /// Release it anyway; it holds its place until it is done or its progress deadline passes.
    Wait,
}

/// One group of a `Groups` rollout: the spokes its selector or names choose.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutGroup {
    /// The group's name, as `plan`, `status` and the Hub's status show its wave.
    pub name: String,
    /// Spokes whose labels include all of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<GroupSelector>,
    /// Spokes by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spokes: Vec<String>,
    /// Overrides the rollout's `maxConcurrency` within this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<SpokeCount>,
}

/// A label selector by equality, as a Deployment's `matchLabels`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSelector {
    /// Labels a spoke must all have, with these values.
    pub match_labels: std::collections::BTreeMap<String, String>,
}

/// A number of spokes: a count (`3`) or a percentage of those concerned (`"10%"`), as OCM's
/// `maxConcurrency` and `maxFailures`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpokeCount {
    Count(u32),
    Percent(u32),
}

impl Default for SpokeCount {
    fn default() -> Self {
        SpokeCount::Count(0)
    }
}

impl SpokeCount {
    /// How many of `total` spokes this is: a percentage rounds down.
    pub fn of(self, total: usize) -> usize {
        match self {
            SpokeCount::Count(count) => count as usize,
            SpokeCount::Percent(percent) => total.saturating_mul(percent as usize) / 100,
        }
    }
}

impl std::fmt::Display for SpokeCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpokeCount::Count(count) => write!(f, "{count}"),
            SpokeCount::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

impl Serialize for SpokeCount {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SpokeCount::Count(count) => serializer.serialize_u32(*count),
            SpokeCount::Percent(_) => serializer.serialize_str(&self.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for SpokeCount {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Count(u32),
            Text(String),
        }
        match Written::deserialize(deserializer)? {
            Written::Count(count) => Ok(SpokeCount::Count(count)),
            Written::Text(text) => text
                .strip_suffix('%')
                .and_then(|percent| percent.parse::<u32>().ok())
                .filter(|percent| *percent <= 100)
                .map(SpokeCount::Percent)
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "{text:?} is neither a count nor a percentage from 0% to 100%"
                    ))
                }),
        }
    }
}

// A count or a percentage: Kubernetes' int-or-string, as OCM's `maxConcurrency` is typed; the
// fleet repo's schema adds the pattern and bounds (`fleet::schema`).
impl JsonSchema for SpokeCount {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SpokeCount".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A number of spokes, or a percentage of them (\"10%\").",
            "x-kubernetes-int-or-string": true
        })
    }
}

/// Where a rollout stands, kept in the Hub's status so that a restart or a new leader resumes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// What rolls out: the hub's agent version and a digest of its spokes' targets
    /// (`VERSION/DIGEST`); for an addon's rollout, `ADDON/DIGEST`.
    pub target: String,
    /// The wave (1-based, in rollout order) the rollout is on; none once every spoke is through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<u32>,
    /// Why the rollout releases no more spokes: failures passed `maxFailures`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    /// Failures an operator accepted by pausing the halted rollout (`paused: true`): they no
    /// longer count against `maxFailures`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accepted_failures: u32,
    /// Each spoke of the hub that runs an agent, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spokes: Vec<SpokeRollout>,
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

/// One spoke's place in its hub's rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpokeRollout {
    pub name: String,
    /// The digest of the settings the spoke is to have: its agent's configuration hash, the
    /// addons fleetform enables on it and its lease duration.
    pub target: String,
    /// The agent configuration hash among them (what the agent's own upgrade is gated on).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent: String,
    pub state: SpokeRolloutState,
    /// When the spoke was released to move to `target`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Since when it has run `target` and been Available (its bake started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where one spoke is in a rollout.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum SpokeRolloutState {
    /// Not released yet: it keeps the agent it runs.
    Pending,
    /// Released: moving to the target, or baking on it.
    InProgress,
    Succeeded,
    /// Released, but not done within its progress deadline.
    Failed,
    /// Not Available when its turn came (`offline: Skip`); released once the others are done.
    SkippedOffline,
}

/// Observed state of a Hub.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HubStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The rollout of the hub's agent to its spokes (absent for `strategy: All`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// The rollouts of the addons with a `spec.rollout` of their own to this hub's spokes (those
    /// whose strategy is not `All`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addon_rollouts: Vec<AddonRollout>,
}

/// Where the rollout of one addon to a hub's spokes stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonRollout {
    pub addon: String,
    pub rollout: RolloutStatus,
}

/// An addon a spoke runs: by name, or with its own install namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SpokeAddon {
    Name(String),
    Configured(ConfiguredAddon),
}

// A structural CRD schema cannot say "string or object", so the CRD keeps the item as written;
// the fleet repo's own JSON Schema (generated by `fleet::schema` from `ConfiguredAddon`) checks
// its shape.
impl JsonSchema for SpokeAddon {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SpokeAddon".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An addon name, or {name, installNamespace}.",
            "x-kubernetes-preserve-unknown-fields": true
        })
    }
}

/// An addon of a spoke with settings of its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfiguredAddon {
    /// Name of an AddOn of the fleet.
    pub name: String,
    /// Overrides the AddOn's install namespace on this spoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_namespace: Option<String>,
}

impl SpokeAddon {
    pub fn name(&self) -> &str {
        match self {
            SpokeAddon::Name(name) => name,
            SpokeAddon::Configured(addon) => &addon.name,
        }
    }

    pub fn install_namespace(&self) -> Option<&str> {
        match self {
            SpokeAddon::Name(_) => None,
            SpokeAddon::Configured(addon) => addon.install_namespace.as_deref(),
        }
    }
}

/// How the hub learns whether a spoke is available: from the lease its agent renews, or by
/// polling the spoke's API server itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AvailabilityMode {
    /// The spoke's agent renews a lease on the hub.
    #[default]
    Lease,
    /// The hub polls the spoke's API server itself.
    Poll,
}

/// Availability settings of a spoke.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AvailabilitySpec {
    #[serde(default)]
    pub mode: AvailabilityMode,
    /// Seconds between two polls of a healthy spoke (`poll` mode).
    #[serde(default = "default_poll_interval_seconds")]
    pub poll_interval_seconds: i32,
    /// Multiplier of the retry delay after a failed poll.
    #[serde(default = "default_backoff")]
    pub backoff: i32,
    /// Base delay before retrying a failed poll.
    #[serde(default = "default_backoff_delay_seconds")]
    pub backoff_delay_seconds: i32,
    /// Failed polls before the spoke is OFFLINE for good; -1 retries forever.
    #[serde(default = "default_backoff_limit")]
    pub backoff_limit: i32,
}

impl Default for AvailabilitySpec {
    fn default() -> Self {
        Self {
            mode: AvailabilityMode::default(),
            poll_interval_seconds: default_poll_interval_seconds(),
            backoff: default_backoff(),
            backoff_delay_seconds: default_backoff_delay_seconds(),
            backoff_limit: default_backoff_limit(),
        }
    }
}

fn default_poll_interval_seconds() -> i32 {
    30
}
fn default_backoff() -> i32 {
    1
}
fn default_backoff_delay_seconds() -> i32 {
    5
}
fn default_backoff_limit() -> i32 {
    -1
}

/// What unjoining a spoke does when its Spoke is deleted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupSpec {
    /// Taint the cluster so workloads drain before it unjoins, instead of refusing while
    /// ManifestWorks remain.
    #[serde(default)]
    pub force_cluster_drain: bool,
    /// Delete the agent's namespace on the spoke once it has unjoined.
    #[serde(default = "default_true")]
    pub purge_agent_namespace: bool,
    /// How long a deletion waits for the agent to unjoin while the cluster is Unknown or cannot
    /// be reached; then the hub completes the unjoin itself and lists what may be left on the
    /// spoke. The annotation `fleetform.io/force-unjoin: "true"` does it at once.
    #[serde(default = "default_unjoin_timeout")]
    pub unjoin_timeout_seconds: i64,
}

impl Default for CleanupSpec {
    fn default() -> Self {
        Self {
            force_cluster_drain: bool::default(),
            purge_agent_namespace: default_true(),
            unjoin_timeout_seconds: default_unjoin_timeout(),
        }
    }
}

/// [`CleanupSpec::unjoin_timeout_seconds`] when the fleet repo sets none: ten minutes.
pub const DEFAULT_UNJOIN_TIMEOUT_SECONDS: i64 = 600;

fn default_unjoin_timeout() -> i64 {
    DEFAULT_UNJOIN_TIMEOUT_SECONDS
}

fn default_true() -> bool {
    true
}

/// Effect of a taint on a ManagedCluster, as OCM defines them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintEffect {
    NoSelect,
    PreferNoSelect,
    NoSelectIfNew,
}

/// A taint the fleet repo puts on a spoke's ManagedCluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SpokeTaint {
    /// The taint's key, a qualified name (`example.com/maintenance`).
    pub key: String,
    /// The taint's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: TaintEffect,
}

/// A spoke: a cluster registered to a hub.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "fleetform.io",
    version = "v1alpha1",
    kind = "Spoke",
    namespaced,
    category = "fleetform",
    status = "SpokeStatus",
    printcolumn = r#"{"name":"Hub","type":"string","jsonPath":".spec.hubRef"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Agent","type":"string","jsonPath":".status.agentVersion"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SpokeSpec {
    /// Name of the Hub this spoke registers to.
    pub hub_ref: String,
    pub kubeconfig: KubeconfigSource,
    /// Overrides the hub's `registration.leaseDurationSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    /// Overrides the hub's `registration.clusterClaimsMax`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_claims_max: Option<i32>,
    /// Overrides the hub's agent bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSpec>,
    /// The addons enabled on this spoke: AddOn names, or `{name, installNamespace}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addons: Vec<SpokeAddon>,
    #[serde(default)]
    pub availability: AvailabilitySpec,
    #[serde(default)]
    pub cleanup: CleanupSpec,
    /// Taints on the spoke's ManagedCluster, which placements respect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<SpokeTaint>,
    /// The ManagedClusterSet the spoke's cluster belongs to (OCM's `clusterset` label, which
    /// placements select on); `default` when unset, as OCM puts a cluster no one placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_set: Option<String>,
}

impl SpokeSpec {
    /// The spoke's cluster set: [`SpokeSpec::cluster_set`], else OCM's `default`.
    pub fn cluster_set(&self) -> &str {
        self.cluster_set
            .as_deref()
            .unwrap_or(crate::api::vocabulary::CLUSTER_SET_DEFAULT)
    }

    /// Whether this spoke is its hub registered as a spoke of itself.
    pub fn is_hub_as_spoke(&self) -> bool {
        self.kubeconfig.is_in_cluster()
    }
}

/// Lifecycle phase of a Hub or Spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    Initializing,
    Joining,
    Running,
    Unhealthy,
    Deleting,
}

/// Observed state of a Spoke.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpokeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Agent bundle version running on the spoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// Hash of the agent configuration running on the spoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_config_hash: Option<String>,
    /// The agent's Deployment on the spoke as the agent last saw it, written by the agent when
    /// it changes (edited, replaced, removed), so that the hub's reconciler looks at the spoke
    /// then rather than at its next resync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_deployment: Option<AgentDeploymentSeen>,
    /// The agent configuration hash the spoke's agent may upgrade itself to: the one its Hub
    /// calls for, once the hub's rollout has released the spoke to it (at once without a
    /// rollout). Written by the hub's reconciler, so that an agent follows its own Spoke rather
    /// than the Hub's status, which names every spoke of the hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_agent: Option<String>,
    /// What the spoke has now of the other settings a hub's rollout rolls out, as the hub's
    /// reconciler last read them on the hub (absent until the spoke has joined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<AppliedSettings>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The addons fleetform has enabled on a spoke (its ManagedClusterAddOns) and its
/// ManagedCluster's lease duration: what a spoke the rollout has not released keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedSettings {
    /// Each addon by name, with its install namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addons: Vec<AppliedAddon>,
    /// Of those, the addons not Available.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable_addons: Vec<String>,
    pub lease_duration_seconds: i32,
}

/// The agent's Deployment as its agent saw it: empty when there was none (removed, or being
/// removed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentDeploymentSeen {
    /// Its uid: another one is a Deployment put back or replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Its `metadata.generation`: another one is a change of its spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

impl AgentDeploymentSeen {
    /// `deployment` as seen: `None` (or one being deleted) is seen as none.
    pub fn of(deployment: Option<&k8s_openapi::api::apps::v1::Deployment>) -> Self {
        match deployment {
            Some(deployment) if deployment.metadata.deletion_timestamp.is_none() => Self {
                uid: deployment.metadata.uid.clone(),
                generation: deployment.metadata.generation,
            },
            _ => Self::default(),
        }
    }
}

/// One addon enabled on a spoke.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedAddon {
    pub name: String,
    pub install_namespace: String,
}

/// A git source the in-cluster sync controller keeps the fleet in line with.
#[derive(CustomResource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "fleetform.io",
    version = "v1alpha1",
    kind = "FleetSync",
    namespaced,
    category = "fleetform",
    status = "FleetSyncStatus",
    printcolumn = r#"{"name":"Repo","type":"string","jsonPath":".spec.repo"}"#,
    printcolumn = r#"{"name":"Ref","type":"string","jsonPath":".spec.ref"}"#,
    printcolumn = r#"{"name":"Commit","type":"string","jsonPath":".status.lastAppliedCommit"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FleetSyncSpec {
    /// URL of the fleet repo (file://, https:// or ssh://).
    pub repo: String,
    /// Branch, tag or commit to follow.
    #[serde(default = "default_ref", rename = "ref")]
    pub git_ref: String,
    /// Directory of the fleet inside the repo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Seconds between two fetches.
    #[serde(default = "default_sync_interval_seconds")]
    pub interval_seconds: i32,
    /// Unjoin more spokes than the prune guard allows.
    #[serde(default)]
    pub allow_prune: bool,
    /// Apply only commits signed by a trusted key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifySpec>,
    /// Fetch at once when the repository's host posts a push to `fleetform sync
    /// --webhook-addr` (`POST /hooks/NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
    /// Where to send a message when a commit is applied, the sync stalls, or it recovers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<NotifySpec>,
}

/// What a notification provider accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NotifyProvider {
    /// A JSON object: `fleetSync`, `namespace`, `event`, `reason`, `commit`, `message`, `folded`.
    #[default]
    Generic,
    /// A Slack-compatible incoming webhook: `{"text": …}`.
    Slack,
}

/// A notification provider of a FleetSync.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotifySpec {
    #[serde(default, rename = "type")]
    pub provider: NotifyProvider,
    /// The Secret (in the FleetSync's namespace) whose `address` is the URL to post to; for
    /// `generic`, an optional `token` signs the body (`X-Signature: sha256=HMAC`).
    pub secret_ref: LocalSecretRef,
}

/// A FleetSync's push receiver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSpec {
    /// The Secret (in the FleetSync's namespace) whose `token` authenticates pushes: the HMAC key
    /// of GitHub's `X-Hub-Signature-256` and of `X-Signature`, or GitLab's `X-Gitlab-Token`.
    pub secret_ref: LocalSecretRef,
}

/// Which signature a FleetSync requires before it applies a commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VerifyMode {
    /// The commit the ref resolves to carries the signature.
    #[default]
    #[serde(rename = "HEAD")]
    Head,
    /// The ref names an annotated tag that carries the signature.
    Tag,
}

/// A FleetSync's signature requirement: an unsigned or wrongly signed commit is never applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifySpec {
    #[serde(default)]
    pub mode: VerifyMode,
    /// The Secret (in the FleetSync's namespace) holding the trusted keys: SSH keys as
    /// `allowed_signers` lines and/or ASCII-armored OpenPGP public keys, under any data keys.
    pub secret_ref: LocalSecretRef,
}

/// A Secret in the namespace of the object that names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalSecretRef {
    pub name: String,
}

fn default_ref() -> String {
    "HEAD".to_string()
}
fn default_sync_interval_seconds() -> i32 {
    60
}

/// Observed state of a FleetSync.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetSyncStatus {
    /// The commit whose fleet is in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_commit: Option<String>,
    /// The newest commit fetched, applied or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The last commits fetched, newest first (at most 5): what became of each and what its plan
    /// changed on the hub.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_syncs: Vec<SyncRecord>,
}

/// One commit a FleetSync fetched, and what became of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncRecord {
    pub commit: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// The key that signed it, when the FleetSync verifies signatures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    pub time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    /// `Applied`, or why not (`InvalidCommit`, `PruneBlocked`, `SignatureInvalid`, `ApplyFailed`).
    pub reason: String,
    /// The plan's summary (`1 created, 2 updated, 0 deleted`), or what went wrong.
    pub summary: String,
    /// The objects its plan wrote (`updated Spoke fleetform-system/dev`), the first 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
}

/// How the hub judges an addon's health.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum HealthCheckMode {
    /// The addon renews a Lease in its install namespace on the spoke.
    #[default]
    Lease,
    /// The addon reports its own health; fleetform leaves the condition to it.
    Customized,
}

/// Health checking of an addon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HealthCheck {
    #[serde(default)]
    pub mode: HealthCheckMode,
}

/// The subject of an addon's client certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationSubject {
    /// The certificate's user (common name); OCM's default subject when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The certificate's groups (organizations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The certificate's organizational units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organization_units: Vec<String>,
}

/// A client certificate an addon's agent gets on the hub.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOnRegistration {
    /// `kubernetes.io/kube-apiserver-client`, or a custom signer.
    pub signer_name: String,
    /// The subject the certificate is issued for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<RegistrationSubject>,
    /// For a custom signer: the hub Secret holding its CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer_secret_ref: Option<SecretRef>,
}

/// What an AddOn document declares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOnSpec {
    /// Namespace on the spoke the addon is installed in.
    #[serde(default = "default_addon_install_namespace")]
    pub install_namespace: String,
    #[serde(default)]
    pub health_check: HealthCheck,
    /// The client certificates the addon's agent gets on the hub, one per signer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<AddOnRegistration>,
    /// How enabling and disabling this addon reaches the spokes, apart from their hubs'
    /// rollouts (as OCM's installStrategy rolloutStrategy of a ClusterManagementAddOn); without
    /// it, the addon rolls out with everything else under each hub's `spec.rollout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutSpec>,
}

impl Default for AddOnSpec {
    fn default() -> Self {
        Self {
            install_namespace: default_addon_install_namespace(),
            health_check: HealthCheck::default(),
            registrations: Vec::new(),
            rollout: None,
        }
    }
}

fn default_addon_install_namespace() -> String {
    super::vocabulary::DEFAULT_ADDON_INSTALL_NAMESPACE.to_string()
}

/// An addon of the fleet repo; the hub gets one ClusterManagementAddOn per AddOn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AddOn {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: AddOnSpec,
}
