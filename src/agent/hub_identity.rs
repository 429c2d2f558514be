//! The agent's hub identity (DESIGN §4.1): what `hub-kubeconfig-secret` holds, whether a stored
//! one can be used again, what a CSR's status says, and when the agent may ask for another
//! certificate.
//!
//! An identity is bound to the bootstrap kubeconfig it was obtained with by a fingerprint (a
//! SHA-256 of the kubeconfig, never the kubeconfig itself) kept as an annotation of the secret:
//! when the bootstrap secret changes, the stored identity no longer matches and the agent
//! registers again. This module builds and decides; it must not read or write a cluster.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::config::{Kubeconfig, NamedCluster};
use serde_json::json;

use super::rotation::{CertificateError, CertificateLifetime};
use crate::api::vocabulary::{CSR_APPROVED, CSR_DENIED, CSR_FAILED};
use crate::api::vocabulary::{
    HUB_KUBECONFIG_SECRET, HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME,
    HUB_KUBECONFIG_SECRET_KEY_CLUSTER_NAME, HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG,
    HUB_KUBECONFIG_SECRET_KEY_TLS_CRT, HUB_KUBECONFIG_SECRET_KEY_TLS_KEY, LABEL_ADDON_NAME,
};

/// Annotation of `hub-kubeconfig-secret`: the fingerprint of the bootstrap kubeconfig the
/// identity was obtained with.
pub const ANNOTATION_BOOTSTRAP_FINGERPRINT: &str = "fleetform.io/bootstrap-kubeconfig-sha256";

/// The most pending registration CSRs of one cluster before the agent stops creating more (as
/// OCM): restarts while the hub does not answer must not pile them up.
pub const MAX_PENDING_CSRS: usize = 10;

/// The fingerprint binding an identity to its bootstrap kubeconfig.
pub fn bootstrap_fingerprint(bootstrap_kubeconfig: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bootstrap_kubeconfig.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A new agent id: ten characters of `[a-z0-9]`.
pub fn new_agent_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..10)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect()
}

/// Why a kubeconfig could not be turned into another.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("the bootstrap kubeconfig cannot be read: {0}")]
    Unreadable(String),
    #[error("the bootstrap kubeconfig names no cluster for its current context")]
    NoCluster,
}

/// The hub identity the agent holds: its certificate, key and the kubeconfig using them.
#[derive(Clone)]
pub struct HubIdentity {
    pub cluster: String,
    pub agent_id: String,
    pub kubeconfig: String,
    pub certificate_pem: String,
    pub key_pem: String,
    pub lifetime: CertificateLifetime,
    /// [`bootstrap_fingerprint`] of the bootstrap kubeconfig it was obtained with.
    pub bootstrap_fingerprint: String,
}

impl std::fmt::Debug for HubIdentity {
    // Never the key, nor the kubeconfig that embeds it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubIdentity")
            .field("cluster", &self.cluster)
            .field("agent_id", &self.agent_id)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// Why a stored `hub-kubeconfig-secret` is not used again.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoredIdentityRejected {
    #[error("key {0} is missing or not UTF-8")]
    MissingKey(&'static str),
    #[error("it belongs to cluster {0:?}")]
    OtherCluster(String),
    #[error("its certificate cannot be read: {0}")]
    Certificate(String),
    #[error("its certificate expired at {0}")]
    Expired(Timestamp),
    #[error("it was obtained with another bootstrap kubeconfig")]
    OtherBootstrap,
}

impl HubIdentity {
    /// An identity from a certificate just issued for `key_pem`; its kubeconfig reaches the
    /// hub the bootstrap kubeconfig reaches.
    pub fn issued(
        cluster: &str,
        agent_id: &str,
        bootstrap_kubeconfig: &str,
        certificate_pem: String,
        key_pem: String,
    ) -> Result<Self, IssueError> {
        let lifetime = CertificateLifetime::from_pem(certificate_pem.as_bytes())?;
        let kubeconfig = hub_kubeconfig(bootstrap_kubeconfig, &certificate_pem, &key_pem)?;
        Ok(HubIdentity {
            cluster: cluster.to_string(),
            agent_id: agent_id.to_string(),
            kubeconfig,
            certificate_pem,
            key_pem,
            lifetime,
            bootstrap_fingerprint: bootstrap_fingerprint(bootstrap_kubeconfig),
        })
    }

    /// The identity stored in `hub-kubeconfig-secret`, if it may be used again at `now` by the
    /// agent of `cluster` bootstrapped with the kubeconfig of `fingerprint`.
    pub fn from_secret(
        secret: &Secret,
        cluster: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Self, StoredIdentityRejected> {
        let key = |name: &'static str| {
            secret
                .data
                .as_ref()
                .and_then(|data| data.get(name))
                .and_then(|ByteString(bytes)| String::from_utf8(bytes.clone()).ok())
                .filter(|value| !value.is_empty())
                .ok_or(StoredIdentityRejected::MissingKey(name))
        };
        let stored_cluster = key(HUB_KUBECONFIG_SECRET_KEY_CLUSTER_NAME)?;
        if stored_cluster != cluster {
            return Err(StoredIdentityRejected::OtherCluster(stored_cluster));
        }
        let stored_fingerprint = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(ANNOTATION_BOOTSTRAP_FINGERPRINT));
        if stored_fingerprint.map(String::as_str) != Some(fingerprint) {
            return Err(StoredIdentityRejected::OtherBootstrap);
        }
        let certificate_pem = key(HUB_KUBECONFIG_SECRET_KEY_TLS_CRT)?;
        let lifetime = CertificateLifetime::from_pem(certificate_pem.as_bytes())
            .map_err(|err| StoredIdentityRejected::Certificate(err.to_string()))?;
        if now >= lifetime.not_after {
            return Err(StoredIdentityRejected::Expired(lifetime.not_after));
        }
        Ok(HubIdentity {
            cluster: stored_cluster,
            agent_id: key(HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME)?,
            kubeconfig: key(HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG)?,
            key_pem: key(HUB_KUBECONFIG_SECRET_KEY_TLS_KEY)?,
            certificate_pem,
            lifetime,
            bootstrap_fingerprint: fingerprint.to_string(),
        })
    }

    /// `hub-kubeconfig-secret` in `namespace` holding this identity.
    pub fn to_secret(&self, namespace: &str) -> Secret {
        let data = [
            (HUB_KUBECONFIG_SECRET_KEY_KUBECONFIG, &self.kubeconfig),
            (HUB_KUBECONFIG_SECRET_KEY_TLS_CRT, &self.certificate_pem),
            (HUB_KUBECONFIG_SECRET_KEY_TLS_KEY, &self.key_pem),
            (HUB_KUBECONFIG_SECRET_KEY_CLUSTER_NAME, &self.cluster),
            (HUB_KUBECONFIG_SECRET_KEY_AGENT_NAME, &self.agent_id),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), ByteString(value.as_bytes().to_vec())))
        .collect();
        Secret {
            metadata: ObjectMeta {
                name: Some(HUB_KUBECONFIG_SECRET.to_string()),
                namespace: Some(namespace.to_string()),
                annotations: Some(BTreeMap::from([(
                    ANNOTATION_BOOTSTRAP_FINGERPRINT.to_string(),
                    self.bootstrap_fingerprint.clone(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_string()),
            data: Some(data),
            ..Secret::default()
        }
    }
}

/// Why an issued certificate could not become an identity.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("the issued certificate: {0}")]
    Certificate(#[from] CertificateError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
}

/// A kubeconfig for the cluster of the bootstrap kubeconfig's current context (server, CA, TLS
/// settings) that authenticates with the client certificate and key instead.
pub fn hub_kubeconfig(
    bootstrap_kubeconfig: &str,
    certificate_pem: &str,
    key_pem: &str,
) -> Result<String, KubeconfigError> {
    let bootstrap = Kubeconfig::from_yaml(bootstrap_kubeconfig)
        .map_err(|err| KubeconfigError::Unreadable(err.to_string()))?;
    let context_cluster = bootstrap
        .current_context
        .as_ref()
        .and_then(|current| bootstrap.contexts.iter().find(|c| &c.name == current))
        .and_then(|context| context.context.as_ref())
        .map(|context| context.cluster.clone());
    let named: &NamedCluster = match context_cluster {
        Some(name) => bootstrap.clusters.iter().find(|c| c.name == name),
        None => bootstrap.clusters.first(),
    }
    .ok_or(KubeconfigError::NoCluster)?;
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hub", "cluster": named.cluster}],
        "users": [{"name": "agent", "user": {
            "client-certificate-data": b64(certificate_pem),
            "client-key-data": b64(key_pem),
        }}],
        "contexts": [{"name": "agent", "context": {"cluster": "hub", "user": "agent"}}],
        "current-context": "agent",
    });
    serde_yaml::to_string(&doc).map_err(|err| KubeconfigError::Unreadable(err.to_string()))
}

/// Where a CSR stands, from the requester's side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CsrState {
    Pending,
    /// Approved and signed: the certificate PEM.
    Issued(String),
    /// Approved, not signed yet.
    Approved,
    /// Denied or failed, with the message.
    Refused(String),
}

/// Where `csr` stands.
pub fn csr_state(csr: &CertificateSigningRequest) -> CsrState {
    let status = csr.status.as_ref();
    let conditions = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    if let Some(refused) = conditions
        .iter()
        .find(|c| (c.type_ == CSR_DENIED || c.type_ == CSR_FAILED) && c.status == "True")
    {
        return CsrState::Refused(format!(
            "{}: {}",
            refused.type_,
            refused.message.as_deref().unwrap_or_default()
        ));
    }
    if !conditions.iter().any(|c| c.type_ == CSR_APPROVED) {
        return CsrState::Pending;
    }
    match status
        .and_then(|s| s.certificate.as_ref())
        .map(|ByteString(bytes)| String::from_utf8_lossy(bytes).into_owned())
    {
        Some(certificate) if !certificate.is_empty() => CsrState::Issued(certificate),
        _ => CsrState::Approved,
    }
}

/// Whether the agent may create another registration CSR, given the CSRs labelled with its
/// cluster: only while fewer than [`MAX_PENDING_CSRS`] registration CSRs (addon ones do not
/// count) are pending.
pub fn may_request_certificate(cluster_csrs: &[CertificateSigningRequest]) -> bool {
    pending_registration_csrs(cluster_csrs) < MAX_PENDING_CSRS
}

/// Whether the agent may create a CSR for one registration (an addon's signer), given that
/// addon's CSRs on its cluster: only while none of that signer is pending, so a registration
/// never has more than one CSR waiting for the hub.
pub fn may_request_addon_certificate(
    addon_csrs: &[CertificateSigningRequest],
    signer_name: &str,
) -> bool {
    !addon_csrs
        .iter()
        .any(|csr| csr.spec.signer_name == signer_name && csr_state(csr) == CsrState::Pending)
}

/// How many of these CSRs are pending registration CSRs.
pub fn pending_registration_csrs(cluster_csrs: &[CertificateSigningRequest]) -> usize {
    cluster_csrs
        .iter()
        .filter(|csr| {
            let addon = csr
                .metadata
                .labels
                .as_ref()
                .is_some_and(|labels| labels.contains_key(LABEL_ADDON_NAME));
            !addon && csr_state(csr) == CsrState::Pending
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::rotation::registration_csr;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };
    use rcgen::{CertificateParams, KeyPair};

    const BOOTSTRAP: &str = r#"{"apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "other", "cluster": {"server": "https://other:1"}},
                     {"name": "hub", "cluster": {"server": "https://hub:6443", "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "bootstrap", "user": {"token": "abc123.0123456789abcdef"}}],
        "contexts": [{"name": "bootstrap", "context": {"cluster": "hub", "user": "bootstrap"}}],
        "current-context": "bootstrap"}"#;

    fn certificate(not_after_day: u8) -> (String, String) {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(2026, 1, not_after_day);
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn hub_kubeconfig_keeps_the_hub_and_swaps_the_token_for_the_certificate() {
        let (cert, key) = certificate(2);
        let text = hub_kubeconfig(BOOTSTRAP, &cert, &key).unwrap();
        let kubeconfig = Kubeconfig::from_yaml(&text).unwrap();
        let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://hub:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
        let user = kubeconfig.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(
            user.token.is_none(),
            "the bootstrap token is not carried over"
        );
        assert_eq!(
            user.client_certificate_data.as_deref(),
            Some(
                base64::engine::general_purpose::STANDARD
                    .encode(&cert)
                    .as_str()
            )
        );
        assert!(hub_kubeconfig("clusters: 3", &cert, &key).is_err());
    }

    #[test]
    fn stored_identity_is_reused_only_for_its_cluster_bootstrap_and_lifetime() {
        let (cert, key) = certificate(3);
        let identity = HubIdentity::issued("spoke-a", "agent1", BOOTSTRAP, cert, key).unwrap();
        let secret = identity.to_secret("open-cluster-management-agent");
        let fingerprint = bootstrap_fingerprint(BOOTSTRAP);
        let reused =
            HubIdentity::from_secret(&secret, "spoke-a", &fingerprint, at("2026-01-02T00:00:00Z"))
                .unwrap();
        assert_eq!(reused.agent_id, "agent1");
        assert_eq!(reused.kubeconfig, identity.kubeconfig);
        assert_eq!(
            HubIdentity::from_secret(&secret, "spoke-b", &fingerprint, at("2026-01-02T00:00:00Z"))
                .unwrap_err(),
            StoredIdentityRejected::OtherCluster("spoke-a".into())
        );
        assert_eq!(
            HubIdentity::from_secret(
                &secret,
                "spoke-a",
                &bootstrap_fingerprint("changed"),
                at("2026-01-02T00:00:00Z")
            )
            .unwrap_err(),
            StoredIdentityRejected::OtherBootstrap
        );
        assert!(matches!(
            HubIdentity::from_secret(&secret, "spoke-a", &fingerprint, at("2026-01-03T00:00:00Z")),
            Err(StoredIdentityRejected::Expired(_))
        ));
        let mut broken = secret.clone();
        broken.data.as_mut().unwrap().insert(
            HUB_KUBECONFIG_SECRET_KEY_TLS_CRT.into(),
            ByteString(b"junk".to_vec()),
        );
        assert!(matches!(
            HubIdentity::from_secret(&broken, "spoke-a", &fingerprint, at("2026-01-02T00:00:00Z")),
            Err(StoredIdentityRejected::Certificate(_))
        ));
        broken.data = None;
        assert!(matches!(
            HubIdentity::from_secret(&broken, "spoke-a", &fingerprint, at("2026-01-02T00:00:00Z")),
            Err(StoredIdentityRejected::MissingKey(_))
        ));
    }

    #[test]
    fn identity_debug_shows_no_key() {
        let (cert, key) = certificate(3);
        let identity =
            HubIdentity::issued("spoke-a", "agent1", BOOTSTRAP, cert, key.clone()).unwrap();
        let shown = format!("{identity:?}");
        assert!(!shown.contains("PRIVATE KEY") && !shown.contains(&key));
    }

    fn with_condition(type_: &str, certificate: Option<&str>) -> CertificateSigningRequest {
        let mut csr = registration_csr("spoke-a", "agent1", None).unwrap().csr;
        csr.status = Some(CertificateSigningRequestStatus {
            conditions: Some(vec![CertificateSigningRequestCondition {
                type_: type_.into(),
                status: "True".into(),
                message: Some("why".into()),
                ..Default::default()
            }]),
            certificate: certificate.map(|c| ByteString(c.as_bytes().to_vec())),
        });
        csr
    }

    #[test]
    fn csr_state_follows_conditions_and_certificate() {
        let pending = registration_csr("spoke-a", "agent1", None).unwrap().csr;
        assert_eq!(csr_state(&pending), CsrState::Pending);
        assert_eq!(
            csr_state(&with_condition(CSR_APPROVED, None)),
            CsrState::Approved
        );
        assert_eq!(
            csr_state(&with_condition(CSR_APPROVED, Some("PEM"))),
            CsrState::Issued("PEM".into())
        );
        assert_eq!(
            csr_state(&with_condition(CSR_DENIED, None)),
            CsrState::Refused("Denied: why".into())
        );
    }

    #[test]
    fn at_most_ten_registration_csrs_are_left_pending() {
        let pending = || registration_csr("spoke-a", "agent1", None).unwrap().csr;
        let mut csrs: Vec<_> = (0..9).map(|_| pending()).collect();
        csrs.push(with_condition(CSR_DENIED, None));
        let mut addon = pending();
        addon
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(LABEL_ADDON_NAME.into(), "a".into());
        csrs.push(addon);
        assert_eq!(pending_registration_csrs(&csrs), 9);
        assert!(may_request_certificate(&csrs));
        csrs.push(pending());
        assert!(!may_request_certificate(&csrs));
    }

    #[test]
    fn a_registration_has_at_most_one_csr_pending() {
        let signer = "example.com/signer";
        let mut other_signer = registration_csr("spoke-a", "agent1", None).unwrap().csr;
        other_signer.spec.signer_name = "example.com/other".into();
        let mut csrs = vec![other_signer, with_condition(CSR_DENIED, None)];
        csrs[1].spec.signer_name = signer.into();
        assert!(may_request_addon_certificate(&csrs, signer));
        let mut pending = registration_csr("spoke-a", "agent1", None).unwrap().csr;
        pending.spec.signer_name = signer.into();
        csrs.push(pending);
        assert!(!may_request_addon_certificate(&csrs, signer));
        assert!(may_request_addon_certificate(&csrs, "example.com/third"));
    }

    #[test]
    fn fingerprints_differ_with_the_kubeconfig_and_never_contain_it() {
        let a = bootstrap_fingerprint(BOOTSTRAP);
        assert_eq!(a.len(), 64);
        assert_eq!(a, bootstrap_fingerprint(BOOTSTRAP));
        assert_ne!(
            a,
            bootstrap_fingerprint(&BOOTSTRAP.replace("abc123", "def456"))
        );
    }
}
