//! The Secret holding an addon registration's client certificate on the spoke (DESIGN §4.3,
//! seed 001): `<addon>-hub-kubeconfig` (kube-apiserver signer: key, certificate and a kubeconfig)
//! or `<addon>-<signer>-client-cert` (custom signer: key and certificate), in the addon's install
//! namespace.
//!
//! The Secret records the registration its certificate was requested for (signer and effective
//! subject) as an annotation, so a restarted agent keeps a certificate that still serves the
//! registration and asks for a new one when the registration changed. This module builds and
//! decides; it must not read or write a cluster.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use super::rotation::{CertificateLifetime, registration_needs_new_csr};
use crate::api::addon::RegistrationConfig;

/// Annotation of an addon certificate Secret: the registration (signer and effective subject,
/// JSON) its certificate was requested for.
pub const ANNOTATION_REGISTRATION: &str = "fleetform.io/addon-registration";
/// Key of an addon certificate Secret holding the certificate (PEM).
pub const KEY_TLS_CRT: &str = "tls.crt";
/// Key of an addon certificate Secret holding the private key (PEM).
pub const KEY_TLS_KEY: &str = "tls.key";
/// Key of an `<addon>-hub-kubeconfig` Secret holding a kubeconfig using the certificate.
pub const KEY_KUBECONFIG: &str = "kubeconfig";

/// The issued certificate of one addon registration.
pub struct AddonCertificate<'a> {
    pub cluster: &'a str,
    pub addon: &'a str,
    pub namespace: &'a str,
    pub registration: &'a RegistrationConfig,
    pub certificate_pem: &'a str,
    pub key_pem: &'a str,
    /// A kubeconfig using the certificate (kube-apiserver signer only).
    pub kubeconfig: Option<&'a str>,
}

impl AddonCertificate<'_> {
    /// The Secret holding it.
    pub fn to_secret(&self) -> Secret {
        let mut data = BTreeMap::from([
            (KEY_TLS_CRT.to_string(), bytes(self.certificate_pem)),
            (KEY_TLS_KEY.to_string(), bytes(self.key_pem)),
        ]);
        if let Some(kubeconfig) = self.kubeconfig {
            data.insert(KEY_KUBECONFIG.to_string(), bytes(kubeconfig));
        }
        Secret {
            metadata: ObjectMeta {
                name: Some(self.registration.secret_name(self.addon)),
                namespace: Some(self.namespace.to_string()),
                annotations: Some(BTreeMap::from([(
                    ANNOTATION_REGISTRATION.to_string(),
                    recorded(self.registration, self.cluster, self.addon),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_string()),
            data: Some(data),
            ..Secret::default()
        }
    }
}

fn bytes(text: &str) -> ByteString {
    ByteString(text.as_bytes().to_vec())
}

/// The registration as recorded on the Secret: its signer and effective subject.
fn recorded(registration: &RegistrationConfig, cluster: &str, addon: &str) -> String {
    let effective = RegistrationConfig {
        signer_name: registration.signer_name.clone(),
        subject: Some(registration.effective_subject(cluster, addon)),
    };
    serde_json::to_string(&effective).unwrap_or_default()
}

/// The lifetime of the certificate in `secret` if it still serves `registration` at `now`: it
/// was requested for the same signer and effective subject, and has not expired. `None`: request
/// a new one.
pub fn stored_certificate(
    secret: &Secret,
    registration: &RegistrationConfig,
    cluster: &str,
    addon: &str,
    now: Timestamp,
) -> Option<CertificateLifetime> {
    let issued_for: RegistrationConfig = secret
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_REGISTRATION)
        .and_then(|text| serde_json::from_str(text).ok())?;
    if registration_needs_new_csr(Some(&issued_for), registration, cluster, addon) {
        return None;
    }
    let ByteString(certificate) = secret.data.as_ref()?.get(KEY_TLS_CRT)?;
    secret.data.as_ref()?.get(KEY_TLS_KEY)?;
    let lifetime = CertificateLifetime::from_pem(certificate).ok()?;
    (now < lifetime.not_after).then_some(lifetime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::addon::Subject;
    use crate::api::vocabulary::SIGNER_KUBE_APISERVER_CLIENT;
    use rcgen::{CertificateParams, KeyPair};

    fn certificate() -> (String, String) {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(2026, 1, 3);
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    fn kube() -> RegistrationConfig {
        RegistrationConfig {
            signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
            subject: None,
        }
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn secret_for(registration: &RegistrationConfig, kubeconfig: Option<&str>) -> Secret {
        let (cert, key) = certificate();
        AddonCertificate {
            cluster: "c1",
            addon: "hello",
            namespace: "hello-ns",
            registration,
            certificate_pem: &cert,
            key_pem: &key,
            kubeconfig,
        }
        .to_secret()
    }

    #[test]
    fn secret_is_named_for_the_signer_and_holds_key_and_certificate() {
        let secret = secret_for(&kube(), Some("KUBECONFIG"));
        assert_eq!(
            secret.metadata.name.as_deref(),
            Some("hello-hub-kubeconfig")
        );
        assert_eq!(secret.metadata.namespace.as_deref(), Some("hello-ns"));
        let data = secret.data.unwrap();
        assert!(data.contains_key(KEY_TLS_CRT) && data.contains_key(KEY_TLS_KEY));
        assert_eq!(data[KEY_KUBECONFIG].0, b"KUBECONFIG");
        let custom = RegistrationConfig {
            signer_name: "example.com/signer".into(),
            subject: None,
        };
        let secret = secret_for(&custom, None);
        assert_eq!(
            secret.metadata.name.as_deref(),
            Some("hello-example.com-signer-client-cert")
        );
        assert!(!secret.data.unwrap().contains_key(KEY_KUBECONFIG));
    }

    #[test]
    fn stored_certificate_serves_the_same_registration_until_it_expires() {
        let secret = secret_for(&kube(), None);
        let explicit_default = RegistrationConfig {
            subject: Some(Subject::default_for("c1", "hello")),
            ..kube()
        };
        let during = at("2026-01-02T00:00:00Z");
        assert!(stored_certificate(&secret, &kube(), "c1", "hello", during).is_some());
        assert!(stored_certificate(&secret, &explicit_default, "c1", "hello", during).is_some());
        assert!(
            stored_certificate(&secret, &kube(), "c1", "hello", at("2026-01-03T00:00:00Z"))
                .is_none()
        );
    }

    #[test]
    fn changed_registration_or_unreadable_secret_needs_a_new_certificate() {
        let secret = secret_for(&kube(), None);
        let during = at("2026-01-02T00:00:00Z");
        let other_subject = RegistrationConfig {
            subject: Some(Subject {
                user: "someone".into(),
                ..Subject::default()
            }),
            ..kube()
        };
        assert!(stored_certificate(&secret, &other_subject, "c1", "hello", during).is_none());
        let mut unannotated = secret.clone();
        unannotated.metadata.annotations = None;
        assert!(stored_certificate(&unannotated, &kube(), "c1", "hello", during).is_none());
        let mut broken = secret;
        broken
            .data
            .as_mut()
            .unwrap()
            .insert(KEY_TLS_CRT.into(), ByteString(b"junk".to_vec()));
        assert!(stored_certificate(&broken, &kube(), "c1", "hello", during).is_none());
    }
}
