//! The per-spoke bootstrap identity (DESIGN §4.1): what a spoke's agent registers with before it
//! holds a certificate of its own.
//!
//! A bootstrap token is issued to one spoke only: its Secret `bootstrap-token-<id>` in
//! `kube-system` carries the cluster-name label the approval loop reads, so the hub approves a
//! registration CSR only when it comes from the token of the spoke it names. Every token holder is
//! in the group [`BOOTSTRAP_GROUP`], which the hub-wide bootstrap ClusterRole lets create a
//! ManagedCluster and CSRs and read one by name, and nothing else: it lists and watches no
//! ManagedCluster, and lists no CSR (the agent watches its own CSR by name).
//!
//! A token lives [`BOOTSTRAP_TOKEN_TTL`] (its Secret's `expiration`, which the API server
//! honours). [`token_upkeep`] says what the lifecycle reconciler does with a spoke's tokens: while
//! the spoke has not joined, push the expiration out again when less than a quarter of the
//! lifetime is left; once it has joined and holds its certificate, delete them (renewals are
//! requested by the certificate itself). A spoke that must bootstrap again gets a new token.
//!
//! The builders here are pure (the lifecycle reconciler installs their output); [`ensure_rbac`]
//! is the one write, made by the hub loops at start.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::approval_loop::{
    BOOTSTRAP_TOKEN_ID_KEY, BOOTSTRAP_TOKEN_NAMESPACE, BOOTSTRAP_TOKEN_TYPE,
};
use super::run::{FIELD_MANAGER, HubError};
use crate::api::vocabulary::LABEL_CLUSTER_NAME;
use crate::runtime::error::KubeError;

/// The group of every spoke's bootstrap token (its `auth-extra-groups`).
pub const BOOTSTRAP_GROUP: &str = "system:bootstrappers:managedcluster";
/// Name of the hub-wide ClusterRole and ClusterRoleBinding of [`BOOTSTRAP_GROUP`].
pub const BOOTSTRAP_ROLE_NAME: &str = "system:open-cluster-management:bootstrap";
/// Key of a bootstrap token Secret holding the token's secret half.
pub const BOOTSTRAP_TOKEN_SECRET_KEY: &str = "token-secret";
/// Key of a bootstrap token Secret holding the instant (RFC 3339) after which the API server no
/// longer accepts the token.
pub const BOOTSTRAP_TOKEN_EXPIRATION_KEY: &str = "expiration";
/// How long a bootstrap token is valid when issued or renewed: a day, so a token that leaks
/// before its spoke joins (or whose spoke never does) is useless a day after fleetform stops
/// renewing it.
pub const BOOTSTRAP_TOKEN_TTL: Duration = Duration::from_secs(24 * 60 * 60);

const TOKEN_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// A bootstrap token: `<id>.<secret>`, six and sixteen characters of `[a-z0-9]`, as the API
/// server reads them. `Debug` never shows the secret half.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapToken {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapToken")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl BootstrapToken {
    /// A new random token.
    pub fn generate() -> Self {
        let draw = |len: usize| {
            (0..len)
                .map(|_| char::from(TOKEN_ALPHABET[fastrand::usize(..TOKEN_ALPHABET.len())]))
                .collect()
        };
        BootstrapToken {
            id: draw(6),
            secret: draw(16),
        }
    }

    /// The bearer token a kubeconfig carries: `<id>.<secret>`.
    pub fn bearer(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }
}

/// The hub Secret that makes `token_id.token_secret` a bootstrap token of `cluster` only, until
/// `expires`: `bootstrap-token-<id>` in `kube-system`, usable for authentication, in
/// [`BOOTSTRAP_GROUP`], labelled with the cluster name (what the approval loop looks the spoke's
/// token up by).
pub fn token_secret(
    cluster: &str,
    token_id: &str,
    token_secret: &str,
    expires: Timestamp,
) -> Secret {
    let expiration = rfc3339(expires);
    let data = [
        (BOOTSTRAP_TOKEN_ID_KEY, token_id),
        (BOOTSTRAP_TOKEN_SECRET_KEY, token_secret),
        (BOOTSTRAP_TOKEN_EXPIRATION_KEY, expiration.as_str()),
        ("usage-bootstrap-authentication", "true"),
        ("auth-extra-groups", BOOTSTRAP_GROUP),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), ByteString(value.as_bytes().to_vec())))
    .collect();
    Secret {
        metadata: ObjectMeta {
            name: Some(format!("bootstrap-token-{token_id}")),
            namespace: Some(BOOTSTRAP_TOKEN_NAMESPACE.to_string()),
            labels: Some(BTreeMap::from([(
                LABEL_CLUSTER_NAME.to_string(),
                cluster.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some(BOOTSTRAP_TOKEN_TYPE.to_string()),
        data: Some(data),
        ..Secret::default()
    }
}

fn rfc3339(instant: Timestamp) -> String {
    instant.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// When the token of a `bootstrap-token-<id>` Secret expires; `None` if it never does (no
/// `expiration`) or the value is not an RFC 3339 instant (which the API server treats as
/// expired).
pub fn token_expiration(secret: &Secret) -> Option<Timestamp> {
    let ByteString(bytes) = secret.data.as_ref()?.get(BOOTSTRAP_TOKEN_EXPIRATION_KEY)?;
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// One thing to do with a spoke's bootstrap token Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenUpkeep {
    /// Set the Secret's `expiration` to this instant.
    Extend { secret: String, until: Timestamp },
    /// Delete the Secret.
    Delete { secret: String },
}

/// What to do with a spoke's bootstrap token Secrets at `now`. `bootstrapped`: the spoke has
/// joined and its agent holds a certificate it can keep using, so it needs no token any more
/// (renewals are requested by the certificate itself). Otherwise each token whose expiration is
/// less than a quarter of [`BOOTSTRAP_TOKEN_TTL`] away (or past, or unreadable, or missing) is
/// extended to a full lifetime from `now`.
pub fn token_upkeep(tokens: &[Secret], bootstrapped: bool, now: Timestamp) -> Vec<TokenUpkeep> {
    let name = |secret: &Secret| secret.metadata.name.clone().unwrap_or_default();
    if bootstrapped {
        return tokens
            .iter()
            .map(|token| TokenUpkeep::Delete {
                secret: name(token),
            })
            .collect();
    }
    let renew_within =
        SignedDuration::try_from(BOOTSTRAP_TOKEN_TTL / 4).unwrap_or(SignedDuration::MAX);
    let until = now
        .checked_add(BOOTSTRAP_TOKEN_TTL)
        .unwrap_or(Timestamp::MAX);
    tokens
        .iter()
        .filter(|token| {
            token_expiration(token).is_none_or(|expires| expires.duration_since(now) < renew_within)
        })
        .map(|token| TokenUpkeep::Extend {
            secret: name(token),
            until,
        })
        .collect()
}

/// The merge patch setting a token Secret's `expiration` to `until`.
pub fn expiration_patch(until: Timestamp) -> serde_json::Value {
    let encoded = base64::engine::general_purpose::STANDARD.encode(rfc3339(until));
    json!({"data": {BOOTSTRAP_TOKEN_EXPIRATION_KEY: encoded}})
}

/// A kubeconfig reaching the hub at `server_url` (trusting `ca_pem`) with a bootstrap `token`
/// (`<id>.<secret>`): what the spoke's `bootstrap-hub-kubeconfig` Secret holds.
pub fn bootstrap_kubeconfig(server_url: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hub", "cluster": {"server": server_url, "certificate-authority-data": ca}}],
        "users": [{"name": "bootstrap", "user": {"token": token}}],
        "contexts": [{"name": "bootstrap", "context": {"cluster": "hub", "user": "bootstrap"}}],
        "current-context": "bootstrap",
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// The hub-wide ClusterRole of bootstrap token holders, less than OCM's bootstrap role: create a
/// ManagedCluster and get one by name; create a CSR, get one by name and watch one (the agent
/// narrows its watch to its own CSR's name). No list of either, no watch of ManagedClusters, no
/// clusterset join: a token holder cannot see the fleet.
pub fn bootstrap_cluster_role() -> ClusterRole {
    let rule = |group: &str, resource: &str, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(vec![resource.to_string()]),
        verbs: verbs.iter().map(|verb| verb.to_string()).collect(),
        ..PolicyRule::default()
    };
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(BOOTSTRAP_ROLE_NAME.to_string()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
            rule(
                "cluster.open-cluster-management.io",
                "managedclusters",
                &["create", "get"],
            ),
            rule(
                "certificates.k8s.io",
                "certificatesigningrequests",
                &["create", "get", "watch"],
            ),
        ]),
        ..ClusterRole::default()
    }
}

/// Binds [`bootstrap_cluster_role`] to [`BOOTSTRAP_GROUP`].
pub fn bootstrap_cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(BOOTSTRAP_ROLE_NAME.to_string()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_string(),
            kind: "ClusterRole".to_string(),
            name: BOOTSTRAP_ROLE_NAME.to_string(),
        },
        subjects: Some(vec![Subject {
            kind: "Group".to_string(),
            api_group: Some("rbac.authorization.k8s.io".to_string()),
            name: BOOTSTRAP_GROUP.to_string(),
            namespace: None,
        }]),
    }
}

/// Applies the bootstrap ClusterRole and its binding (server-side apply; idempotent).
pub async fn ensure_rbac(client: &Client) -> Result<(), HubError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut role =
        serde_json::to_value(bootstrap_cluster_role()).map_err(|source| HubError::Build {
            object: format!("ClusterRole {BOOTSTRAP_ROLE_NAME}"),
            source,
        })?;
    role["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    role["kind"] = json!("ClusterRole");
    Api::<ClusterRole>::all(client.clone())
        .patch(BOOTSTRAP_ROLE_NAME, &params, &Patch::Apply(&role))
        .await
        .map_err(KubeError::on(
            format!("ClusterRole {BOOTSTRAP_ROLE_NAME}"),
            "apply",
        ))?;
    let mut binding = serde_json::to_value(bootstrap_cluster_role_binding()).map_err(|source| {
        HubError::Build {
            object: format!("ClusterRoleBinding {BOOTSTRAP_ROLE_NAME}"),
            source,
        }
    })?;
    binding["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    binding["kind"] = json!("ClusterRoleBinding");
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(BOOTSTRAP_ROLE_NAME, &params, &Patch::Apply(&binding))
        .await
        .map_err(KubeError::on(
            format!("ClusterRoleBinding {BOOTSTRAP_ROLE_NAME}"),
            "apply",
        ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(secret: &Secret, key: &str) -> String {
        String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
    }

    #[test]
    fn token_secret_is_a_bootstrap_token_of_one_cluster() {
        let expires = Timestamp::from_second(1_800_000_000).unwrap();
        let secret = token_secret("spoke-a", "abc123", "0123456789abcdef", expires);
        assert_eq!(
            secret.metadata.name.as_deref(),
            Some("bootstrap-token-abc123")
        );
        assert_eq!(secret.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(secret.type_.as_deref(), Some(BOOTSTRAP_TOKEN_TYPE));
        assert_eq!(
            secret.metadata.labels.as_ref().unwrap()[LABEL_CLUSTER_NAME],
            "spoke-a"
        );
        assert_eq!(data(&secret, "token-id"), "abc123");
        assert_eq!(data(&secret, "token-secret"), "0123456789abcdef");
        assert_eq!(data(&secret, "usage-bootstrap-authentication"), "true");
        assert_eq!(data(&secret, "auth-extra-groups"), BOOTSTRAP_GROUP);
        assert_eq!(data(&secret, "expiration"), "2027-01-15T08:00:00Z");
        assert_eq!(token_expiration(&secret), Some(expires));
    }

    #[test]
    fn tokens_are_extended_in_their_last_quarter_and_deleted_once_the_spoke_holds_its_certificate()
    {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let expiring_in = |hours: i64| {
            let expires = now.checked_add(SignedDuration::from_hours(hours)).unwrap();
            token_secret(
                "spoke-a",
                &format!("tok{hours:03}"),
                "0123456789abcdef",
                expires,
            )
        };
        let mut unlimited = expiring_in(24);
        unlimited
            .data
            .as_mut()
            .unwrap()
            .remove(BOOTSTRAP_TOKEN_EXPIRATION_KEY);
        let tokens = [
            expiring_in(24),
            expiring_in(7),
            expiring_in(5),
            expiring_in(-1),
            unlimited,
        ];
        let until = now.checked_add(BOOTSTRAP_TOKEN_TTL).unwrap();
        let extended: Vec<TokenUpkeep> = token_upkeep(&tokens, false, now);
        assert_eq!(
            extended,
            [
                "bootstrap-token-tok005",
                "bootstrap-token-tok-01",
                "bootstrap-token-tok024"
            ]
            .map(|secret| TokenUpkeep::Extend {
                secret: secret.to_string(),
                until
            })
        );
        let deleted = token_upkeep(&tokens[..2], true, now);
        assert_eq!(
            deleted,
            ["bootstrap-token-tok024", "bootstrap-token-tok007"].map(|secret| {
                TokenUpkeep::Delete {
                    secret: secret.to_string(),
                }
            })
        );
        let mut renewed = tokens[2].clone();
        let patch = expiration_patch(until);
        let encoded = patch["data"][BOOTSTRAP_TOKEN_EXPIRATION_KEY]
            .as_str()
            .unwrap();
        renewed.data.as_mut().unwrap().insert(
            BOOTSTRAP_TOKEN_EXPIRATION_KEY.to_string(),
            ByteString(
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .unwrap(),
            ),
        );
        assert_eq!(token_expiration(&renewed), Some(until));
        assert!(token_upkeep(&[renewed], false, now).is_empty());
    }

    #[test]
    fn generated_tokens_have_the_api_servers_shape_and_hide_their_secret() {
        let token = BootstrapToken::generate();
        let bearer = token.bearer();
        let (id, secret) = bearer.split_once('.').unwrap();
        assert_eq!((id.len(), secret.len()), (6, 16));
        assert!(
            bearer
                .bytes()
                .all(|b| b == b'.' || TOKEN_ALPHABET.contains(&b))
        );
        assert!(!format!("{token:?}").contains(secret));
        assert_ne!(BootstrapToken::generate(), token);
    }

    #[test]
    fn bootstrap_kubeconfig_is_read_by_kube_with_the_token_and_ca() {
        let text = bootstrap_kubeconfig("https://hub:6443", "CA PEM", "abc123.0123456789abcdef");
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://hub:6443"));
        assert_eq!(
            cluster.certificate_authority_data.as_deref(),
            Some(
                base64::engine::general_purpose::STANDARD
                    .encode("CA PEM")
                    .as_str()
            )
        );
        let user = kubeconfig.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.token.is_some());
        assert_eq!(kubeconfig.current_context.as_deref(), Some("bootstrap"));
    }

    #[test]
    fn bootstrap_role_may_register_and_nothing_more() {
        let role = bootstrap_cluster_role();
        let mut granted: Vec<(String, String)> = Vec::new();
        for rule in role.rules.unwrap() {
            assert!(rule.resource_names.is_none());
            for resource in rule.resources.unwrap() {
                for verb in &rule.verbs {
                    granted.push((resource.clone(), verb.clone()));
                }
            }
        }
        let granted: Vec<(&str, &str)> = granted
            .iter()
            .map(|(resource, verb)| (resource.as_str(), verb.as_str()))
            .collect();
        assert_eq!(
            granted,
            [
                ("managedclusters", "create"),
                ("managedclusters", "get"),
                ("certificatesigningrequests", "create"),
                ("certificatesigningrequests", "get"),
                ("certificatesigningrequests", "watch"),
            ],
            "no list of anything, no watch of ManagedClusters"
        );
        let binding = bootstrap_cluster_role_binding();
        assert_eq!(binding.subjects.unwrap()[0].name, BOOTSTRAP_GROUP);
        assert_eq!(binding.role_ref.name, BOOTSTRAP_ROLE_NAME);
    }
}
