//! Client certificates of the agent and its addons (DESIGN §4.1 and §4.3, seed 001): when one is
//! due for rotation, when a registration needs a new CSR, and the CSRs themselves.
//!
//! A certificate is rotated once 20–25% of its lifetime remains; the exact point is drawn per
//! certificate by the caller's jitter so that a fleet registered at once does not rotate at once.
//! The agent's registration CSR asks for `CN=system:open-cluster-management:<cluster>:<agent-id>`
//! and `O=[system:open-cluster-management:<cluster>, system:open-cluster-management:managed-clusters]`
//! on an ECDSA P-256 key; an addon's asks for the subject of its registration.
//!
//! Certificate requests are written here rather than with rcgen's request builder because
//! rcgen keeps one value per attribute type and the agent's subject needs two organisations (as
//! does an addon's default subject). The key pair is rcgen's.
//!
//! This module builds and decides; it must not create, read or store anything on a cluster.
//! Names of the addon secrets come from [`RegistrationConfig::secret_name`].

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PublicKeyData, SigningKey};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

use crate::api::addon::{RegistrationConfig, Subject};
use crate::api::identity::{
    USAGE_CLIENT_AUTH, USAGES_ALSO_ALLOWED, agent_common_name, agent_organizations,
};
use crate::api::vocabulary::{LABEL_ADDON_NAME, LABEL_CLUSTER_NAME, SIGNER_KUBE_APISERVER_CLIENT};

/// Rotation starts once this share of the lifetime is left (jitter 0)...
const ROTATE_WITH_MOST_LEFT: f64 = 0.25;
/// ...and is done by the time only this share is left (jitter 1).
const ROTATE_WITH_LEAST_LEFT: f64 = 0.20;

/// When a certificate is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CertificateLifetime {
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

/// Why a certificate could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("the certificate is not PEM: {0}")]
    NotPem(#[from] pem::PemError),
    #[error("the PEM block is {0:?}, not a CERTIFICATE")]
    WrongPemBlock(String),
    #[error("the certificate cannot be parsed: {0}")]
    Unparseable(String),
    #[error("the certificate's validity is out of range")]
    ValidityOutOfRange,
}

impl CertificateLifetime {
    /// The lifetime of the first certificate of a PEM bundle (the leaf, in `tls.crt`).
    pub fn from_pem(certificate_pem: &[u8]) -> Result<Self, CertificateError> {
        let block = pem::parse(certificate_pem)?;
        if block.tag() != "CERTIFICATE" {
            return Err(CertificateError::WrongPemBlock(block.tag().to_string()));
        }
        let (_, certificate) = X509Certificate::from_der(block.contents())
            .map_err(|error| CertificateError::Unparseable(error.to_string()))?;
        let validity = certificate.validity();
        let instant = |time: &x509_parser::time::ASN1Time| {
            Timestamp::from_second(time.timestamp())
                .map_err(|_| CertificateError::ValidityOutOfRange)
        };
        Ok(CertificateLifetime {
            not_before: instant(&validity.not_before)?,
            not_after: instant(&validity.not_after)?,
        })
    }

    /// When to rotate: after 75–80% of the lifetime, i.e. with 25% (jitter 0) down to 20%
    /// (jitter 1) of it left. `jitter` is a random fraction in [0, 1] drawn once per certificate;
    /// values outside are clamped. A certificate that ends before it starts is due at once.
    pub fn rotation_deadline(&self, jitter: f64) -> Timestamp {
        let lifetime = self.not_before.duration_until(self.not_after);
        if lifetime.is_negative() || lifetime.is_zero() {
            return self.not_before;
        }
        let jitter = if jitter.is_nan() {
            0.0
        } else {
            jitter.clamp(0.0, 1.0)
        };
        let left =
            ROTATE_WITH_MOST_LEFT - (ROTATE_WITH_MOST_LEFT - ROTATE_WITH_LEAST_LEFT) * jitter;
        let elapsed = lifetime.mul_f64(1.0 - left);
        self.not_before
            .checked_add(elapsed)
            .unwrap_or(self.not_after)
    }

    /// Whether the certificate must be rotated at `now`.
    pub fn needs_rotation(&self, now: Timestamp, jitter: f64) -> bool {
        now >= self.rotation_deadline(jitter)
    }
}

/// Whether a registration's certificate must be requested again because the registration
/// changed: another signer, or another effective subject (an unset subject and OCM's default
/// subject written out are the same). `issued_for` is the registration the current certificate
/// was requested for, `None` if there is none.
pub fn registration_needs_new_csr(
    issued_for: Option<&RegistrationConfig>,
    desired: &RegistrationConfig,
    cluster: &str,
    addon: &str,
) -> bool {
    match issued_for {
        None => true,
        Some(issued) => {
            issued.signer_name != desired.signer_name
                || issued.effective_subject(cluster, addon)
                    != desired.effective_subject(cluster, addon)
        }
    }
}

/// The subject a certificate request asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CsrSubject {
    pub common_name: String,
    /// `O`: the Kubernetes groups.
    pub organizations: Vec<String>,
    /// `OU`.
    pub organizational_units: Vec<String>,
}

impl From<&Subject> for CsrSubject {
    fn from(subject: &Subject) -> Self {
        CsrSubject {
            common_name: subject.user.clone(),
            organizations: subject.groups.clone(),
            organizational_units: subject.organization_units.clone(),
        }
    }
}

impl CsrSubject {
    /// The subject of a spoke agent's hub identity (DESIGN §4.1).
    pub fn agent(cluster: &str, agent_id: &str) -> Self {
        CsrSubject {
            common_name: agent_common_name(cluster, agent_id),
            organizations: agent_organizations(cluster).to_vec(),
            organizational_units: Vec::new(),
        }
    }

    /// The subject of an addon registration's certificate on a cluster (its own, or OCM's
    /// default).
    pub fn addon(registration: &RegistrationConfig, cluster: &str, addon: &str) -> Self {
        CsrSubject::from(&registration.effective_subject(cluster, addon))
    }
}

/// Why a certificate request could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    #[error("cannot generate or use the ECDSA P-256 key: {0}")]
    Key(#[from] rcgen::Error),
}

const OID_COMMON_NAME: &[u64] = &[2, 5, 4, 3];
const OID_ORGANIZATION: &[u64] = &[2, 5, 4, 10];
const OID_ORGANIZATIONAL_UNIT: &[u64] = &[2, 5, 4, 11];
const OID_ECDSA_WITH_SHA256: &[u64] = &[1, 2, 840, 10045, 4, 3, 2];

/// A PKCS#10 certificate request for `subject`, signed by `key`, as PEM. Attributes are written
/// in Go's order (O, OU, CN), one per RDN, as UTF8Strings; the request asks for no extensions:
/// a Kubernetes CSR carries its usages in `spec.usages`.
pub fn certificate_request_pem(subject: &CsrSubject, key: &KeyPair) -> Result<String, CsrError> {
    let attributes: Vec<(&[u64], &str)> = subject
        .organizations
        .iter()
        .map(|value| (OID_ORGANIZATION, value.as_str()))
        .chain(
            subject
                .organizational_units
                .iter()
                .map(|value| (OID_ORGANIZATIONAL_UNIT, value.as_str())),
        )
        .chain(std::iter::once((
            OID_COMMON_NAME,
            subject.common_name.as_str(),
        )))
        .collect();
    let public_key = key.subject_public_key_info();
    let info = yasna::construct_der(|writer| {
        writer.write_sequence(|writer| {
            writer.next().write_u8(0);
            writer.next().write_sequence(|writer| {
                for (oid, value) in &attributes {
                    writer.next().write_set(|writer| {
                        writer.next().write_sequence(|writer| {
                            writer
                                .next()
                                .write_oid(&yasna::models::ObjectIdentifier::from_slice(oid));
                            writer.next().write_utf8_string(value);
                        });
                    });
                }
            });
            writer.next().write_der(&public_key);
            writer
                .next()
                .write_tagged_implicit(yasna::Tag::context(0), |writer| {
                    writer.write_set(|_| {});
                });
        });
    });
    let signature = key.sign(&info)?;
    let request = yasna::construct_der(|writer| {
        writer.write_sequence(|writer| {
            writer.next().write_der(&info);
            writer.next().write_sequence(|writer| {
                writer
                    .next()
                    .write_oid(&yasna::models::ObjectIdentifier::from_slice(
                        OID_ECDSA_WITH_SHA256,
                    ));
            });
            writer
                .next()
                .write_bitvec_bytes(&signature, signature.len() * 8);
        });
    });
    Ok(pem::encode(&pem::Pem::new("CERTIFICATE REQUEST", request)))
}

/// A CSR ready to create on the hub, and the private key to keep once it is issued.
#[derive(Clone, Debug)]
pub struct PendingCertificate {
    pub csr: CertificateSigningRequest,
    /// PKCS#8 PEM of the key the CSR was signed with (`tls.key` once the certificate arrives).
    pub private_key_pem: String,
}

/// How long the requested certificate should live (`spec.expirationSeconds`); the hub's
/// `clientCertExpirationSeconds`, or `None` to leave it to the signer.
pub type ExpirationSeconds = Option<i32>;

/// The agent's registration CSR (DESIGN §4.1): a fresh ECDSA P-256 key, the agent's subject,
/// the kube-apiserver-client signer, generateName `<cluster>-` and the cluster-name label.
pub fn registration_csr(
    cluster: &str,
    agent_id: &str,
    expiration: ExpirationSeconds,
) -> Result<PendingCertificate, CsrError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    pending_certificate(
        &CsrSubject::agent(cluster, agent_id),
        SIGNER_KUBE_APISERVER_CLIENT,
        format!("{cluster}-"),
        BTreeMap::from([(LABEL_CLUSTER_NAME.to_string(), cluster.to_string())]),
        expiration,
        key,
    )
}

/// An addon registration's CSR (DESIGN §4.3): a fresh ECDSA P-256 key, the registration's
/// subject and signer, generateName `addon-<cluster>-<addon>-` and the cluster-name and addon-name
/// labels the hub looks for.
pub fn addon_registration_csr(
    registration: &RegistrationConfig,
    cluster: &str,
    addon: &str,
    expiration: ExpirationSeconds,
) -> Result<PendingCertificate, CsrError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    pending_certificate(
        &CsrSubject::addon(registration, cluster, addon),
        &registration.signer_name,
        format!("addon-{cluster}-{addon}-"),
        BTreeMap::from([
            (LABEL_CLUSTER_NAME.to_string(), cluster.to_string()),
            (LABEL_ADDON_NAME.to_string(), addon.to_string()),
        ]),
        expiration,
        key,
    )
}

fn pending_certificate(
    subject: &CsrSubject,
    signer: &str,
    generate_name: String,
    labels: BTreeMap<String, String>,
    expiration: ExpirationSeconds,
    key: KeyPair,
) -> Result<PendingCertificate, CsrError> {
    let request = certificate_request_pem(subject, &key)?;
    let usages = USAGES_ALSO_ALLOWED
        .iter()
        .chain([&USAGE_CLIENT_AUTH])
        .map(|usage| usage.to_string())
        .collect();
    Ok(PendingCertificate {
        csr: CertificateSigningRequest {
            metadata: ObjectMeta {
                generate_name: Some(generate_name),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(request.into_bytes()),
                signer_name: signer.to_string(),
                usages: Some(usages),
                expiration_seconds: expiration,
                ..CertificateSigningRequestSpec::default()
            },
            status: None,
        },
        private_key_pem: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::addon::Subject;
    use crate::api::fleet::AddOnRegistration;
    use crate::hub::approval::{
        AddOnRequestContext, Enablement, SpokeIdentity, Verdict, decide_addon, decide_registration,
        read_request,
    };

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn day_long() -> CertificateLifetime {
        CertificateLifetime {
            not_before: at(0),
            not_after: at(86_400),
        }
    }

    #[test]
    fn rotation_starts_with_a_quarter_of_the_lifetime_left() {
        let cert = day_long();
        assert_eq!(cert.rotation_deadline(0.0), at(64_800));
        assert!(!cert.needs_rotation(at(64_799), 0.0));
        assert!(cert.needs_rotation(at(64_800), 0.0));
    }

    #[test]
    fn rotation_is_done_with_a_fifth_of_the_lifetime_left() {
        let cert = day_long();
        assert_eq!(cert.rotation_deadline(1.0), at(69_120));
        assert!(!cert.needs_rotation(at(69_119), 1.0));
        assert!(cert.needs_rotation(at(69_120), 1.0));
    }

    #[test]
    fn jitter_spreads_rotation_inside_the_window() {
        let cert = day_long();
        assert_eq!(cert.rotation_deadline(0.5), at(66_960));
        for jitter in [-3.0, f64::NAN] {
            assert_eq!(cert.rotation_deadline(jitter), at(64_800));
        }
        assert_eq!(cert.rotation_deadline(7.0), at(69_120));
    }

    #[test]
    fn certificate_ending_before_it_starts_is_due_at_once() {
        let cert = CertificateLifetime {
            not_before: at(100),
            not_after: at(50),
        };
        assert!(cert.needs_rotation(at(100), 0.5));
    }

    #[test]
    fn lifetime_is_read_from_a_pem_certificate() {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["spoke".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(2026, 1, 2);
        let cert = params.self_signed(&key).unwrap();
        let lifetime = CertificateLifetime::from_pem(cert.pem().as_bytes()).unwrap();
        assert_eq!(
            lifetime.not_before,
            "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap()
        );
        assert_eq!(
            lifetime.not_after,
            "2026-01-02T00:00:00Z".parse::<Timestamp>().unwrap()
        );
    }

    #[test]
    fn unreadable_certificates_are_errors_not_panics() {
        for bytes in [
            &b""[..],
            b"garbage",
            b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",
            b"-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n",
        ] {
            assert!(CertificateLifetime::from_pem(bytes).is_err(), "{bytes:?}");
        }
    }

    fn kube_registration(subject: Option<Subject>) -> RegistrationConfig {
        RegistrationConfig {
            signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
            subject,
        }
    }

    #[test]
    fn changed_signer_or_subject_needs_a_new_csr() {
        let issued = kube_registration(None);
        let mut other_signer = issued.clone();
        other_signer.signer_name = "example.com/signer".into();
        let other_subject = kube_registration(Some(Subject {
            user: "someone".into(),
            ..Subject::default()
        }));
        assert!(registration_needs_new_csr(None, &issued, "c1", "a1"));
        assert!(registration_needs_new_csr(
            Some(&issued),
            &other_signer,
            "c1",
            "a1"
        ));
        assert!(registration_needs_new_csr(
            Some(&issued),
            &other_subject,
            "c1",
            "a1"
        ));
    }

    #[test]
    fn unchanged_or_equivalent_registration_keeps_its_certificate() {
        let implicit = kube_registration(None);
        let explicit = kube_registration(Some(Subject::default_for("c1", "a1")));
        assert!(!registration_needs_new_csr(
            Some(&implicit),
            &implicit,
            "c1",
            "a1"
        ));
        assert!(!registration_needs_new_csr(
            Some(&implicit),
            &explicit,
            "c1",
            "a1"
        ));
    }

    #[test]
    fn addon_secret_names_follow_the_signer() {
        assert_eq!(
            kube_registration(None).secret_name("observability"),
            "observability-hub-kubeconfig"
        );
        let custom = RegistrationConfig {
            signer_name: "open-cluster-management.io/observability-signer".into(),
            subject: None,
        };
        assert_eq!(
            custom.secret_name("observability"),
            "observability-open-cluster-management.io-observability-signer-client-cert"
        );
    }

    #[test]
    fn registration_csr_asks_for_the_agents_identity() {
        let pending = registration_csr("spoke1", "agent-7", Some(86_400)).unwrap();
        let csr = &pending.csr;
        assert_eq!(csr.metadata.generate_name.as_deref(), Some("spoke1-"));
        assert_eq!(
            csr.metadata.labels.as_ref().unwrap()[LABEL_CLUSTER_NAME],
            "spoke1"
        );
        assert_eq!(csr.spec.signer_name, SIGNER_KUBE_APISERVER_CLIENT);
        assert_eq!(csr.spec.expiration_seconds, Some(86_400));
        assert_eq!(
            csr.spec.usages.as_deref().unwrap(),
            ["digital signature", "key encipherment", "client auth"]
        );
        let subject = read_request(&csr.spec.request.0).unwrap();
        assert_eq!(
            subject.common_name,
            "system:open-cluster-management:spoke1:agent-7"
        );
        assert_eq!(
            subject.organizations,
            [
                "system:open-cluster-management:spoke1",
                "system:open-cluster-management:managed-clusters"
            ]
        );
        assert!(subject.organizational_units.is_empty());
    }

    #[test]
    fn registration_csr_key_is_an_ecdsa_p256_key_matching_the_request() {
        let pending = registration_csr("spoke1", "agent-7", None).unwrap();
        let key = KeyPair::from_pem(&pending.private_key_pem).unwrap();
        assert_eq!(key.algorithm(), &PKCS_ECDSA_P256_SHA256);
        let block = pem::parse(&pending.csr.spec.request.0).unwrap();
        let (_, request) = x509_parser::certification_request::X509CertificationRequest::from_der(
            block.contents(),
        )
        .unwrap();
        assert_eq!(
            request.certification_request_info.subject_pki.raw,
            key.subject_public_key_info().as_slice()
        );
    }

    #[test]
    fn registration_csr_is_approved_by_the_hub_for_its_spoke() {
        let mut csr = registration_csr("spoke1", "agent-7", None).unwrap().csr;
        csr.spec.username = Some("system:bootstrap:tok123".into());
        let spoke = SpokeIdentity {
            cluster: "spoke1".into(),
            declared: true,
            accepted: true,
            bootstrap_token_ids: vec!["tok123".into()],
            auto_approval_users: Vec::new(),
            bound_users: [crate::api::identity::agent_common_name("spoke1", "agent-7")].into(),
        };
        assert_eq!(
            decide_registration(&csr, Some(&spoke)).verdict,
            Verdict::Approve
        );
    }

    #[test]
    fn addon_csr_carries_the_registration_subject_and_labels() {
        let registration = RegistrationConfig {
            signer_name: "open-cluster-management.io/observability-signer".into(),
            subject: Some(Subject {
                user: "observability-spoke1".into(),
                groups: vec!["observability".into()],
                organization_units: vec!["acm".into(), "ops".into()],
            }),
        };
        let pending =
            addon_registration_csr(&registration, "spoke1", "observability", None).unwrap();
        let csr = &pending.csr;
        assert_eq!(
            csr.metadata.generate_name.as_deref(),
            Some("addon-spoke1-observability-")
        );
        let labels = csr.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[LABEL_CLUSTER_NAME], "spoke1");
        assert_eq!(labels[LABEL_ADDON_NAME], "observability");
        assert_eq!(csr.spec.signer_name, registration.signer_name);
        let subject = read_request(&csr.spec.request.0).unwrap();
        assert_eq!(
            CsrSubject {
                common_name: subject.common_name,
                organizations: subject.organizations,
                organizational_units: subject.organizational_units,
            },
            CsrSubject::addon(&registration, "spoke1", "observability")
        );
    }

    #[test]
    fn default_addon_csr_is_approved_by_the_hub() {
        let registration = kube_registration(None);
        let mut csr = addon_registration_csr(&registration, "spoke1", "observability", None)
            .unwrap()
            .csr;
        csr.spec.username = Some("system:open-cluster-management:spoke1:agent-7".into());
        csr.spec.groups = Some(agent_organizations("spoke1").to_vec());
        let subject = read_request(&csr.spec.request.0).unwrap();
        assert_eq!(subject.organizations.len(), 2, "OCM's default subject");
        let registrations = [AddOnRegistration {
            signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
            subject: None,
            signer_secret_ref: None,
        }];
        let decision = decide_addon(
            &csr,
            AddOnRequestContext {
                cluster: "spoke1",
                addon: "observability",
                registrations: &registrations,
                enablement: Enablement::Enabled,
            },
        );
        assert_eq!(decision.verdict, Verdict::Approve, "{}", decision.reason);
    }
}
