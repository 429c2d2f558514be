//! A bootstrap token as the API server reads it (a Secret `bootstrap-token-<id>` in
//! `kube-system`), fleetform's per-spoke shape of it, and the bootstrap kubeconfig that carries it
//! to the spoke (DESIGN §4.1).
//!
//! A token is issued to one spoke only: its Secret carries the cluster-name label the hub's
//! approval loop reads, so the hub approves a registration CSR only when it comes from the token
//! of the spoke it names. Every token holder is in the group [`BOOTSTRAP_GROUP`], which the
//! hub-wide bootstrap ClusterRole binds. Building these is pure; the lifecycle reconciler writes
//! them and keeps their lifetime.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::vocabulary::LABEL_CLUSTER_NAME;

/// Namespace of bootstrap token Secrets.
pub const BOOTSTRAP_TOKEN_NAMESPACE: &str = "kube-system";
/// Type of a bootstrap token Secret.
pub const BOOTSTRAP_TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";
/// Key of a bootstrap token Secret holding the token's id.
pub const BOOTSTRAP_TOKEN_ID_KEY: &str = "token-id";
/// Key of a bootstrap token Secret holding the token's secret half.
pub const BOOTSTRAP_TOKEN_SECRET_KEY: &str = "token-secret";
/// Key of a bootstrap token Secret holding the instant (RFC 3339) after which the API server no
/// longer accepts the token.
pub const BOOTSTRAP_TOKEN_EXPIRATION_KEY: &str = "expiration";
/// The group of every spoke's bootstrap token (its `auth-extra-groups`).
pub const BOOTSTRAP_GROUP: &str = "system:bootstrappers:managedcluster";

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

/// The cluster a bootstrap token Secret is for (its cluster-name label), if it names one.
pub fn token_cluster(token: &Secret) -> Option<&str> {
    token
        .metadata
        .labels
        .as_ref()?
        .get(LABEL_CLUSTER_NAME)
        .map(String::as_str)
        .filter(|name| !name.is_empty())
}

/// When the token of a `bootstrap-token-<id>` Secret expires; `None` if it never does (no
/// `expiration`) or the value is not an RFC 3339 instant (which the API server treats as
/// expired).
pub fn token_expiration(secret: &Secret) -> Option<Timestamp> {
    let ByteString(bytes) = secret.data.as_ref()?.get(BOOTSTRAP_TOKEN_EXPIRATION_KEY)?;
    std::str::from_utf8(bytes).ok()?.parse().ok()
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
    fn an_expiration_patch_sets_what_token_expiration_reads() {
        let until = Timestamp::from_second(1_800_000_000).unwrap();
        let mut token = token_secret("spoke-a", "abc123", "0123456789abcdef", Timestamp::MAX);
        let patch = expiration_patch(until);
        let encoded = patch["data"][BOOTSTRAP_TOKEN_EXPIRATION_KEY]
            .as_str()
            .unwrap();
        token.data.as_mut().unwrap().insert(
            BOOTSTRAP_TOKEN_EXPIRATION_KEY.to_string(),
            ByteString(
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .unwrap(),
            ),
        );
        assert_eq!(token_expiration(&token), Some(until));
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
}
