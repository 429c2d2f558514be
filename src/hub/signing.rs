//! Whether the hub signs an addon CSR itself (DESIGN §4.3, seed 001): approved CSRs of a custom
//! signer that an AddOn document declares with a `signerSecretRef` are signed with the CA in that
//! Secret, for the lifetime they ask for (`spec.expirationSeconds`, at least 600 s) up to
//! [`MAX_CUSTOM_SIGNER_SECONDS`]. CSRs of `kubernetes.io/kube-apiserver-client` are the API
//! server's to sign; CSRs that are pending, refused or already signed are left alone. This module
//! only decides.

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

use crate::api::fleet::{AddOnRegistration, SecretRef};
use crate::api::vocabulary::{CSR_APPROVED, CSR_DENIED, CSR_FAILED, SIGNER_KUBE_APISERVER_CLIENT};

/// Key of a signer Secret holding the CA certificate (PEM).
pub const SIGNER_CA_CERT_KEY: &str = "tls.crt";
/// Key of a signer Secret holding the CA's private key (PEM).
pub const SIGNER_CA_KEY_KEY: &str = "tls.key";
/// The longest life of a certificate the hub signs for a custom signer, and the life of one whose
/// CSR asks for none: one year, as kube-controller-manager's default `--cluster-signing-duration`
/// caps those of `kubernetes.io/kube-apiserver-client`. A CSR asking for more gets this much.
pub const MAX_CUSTOM_SIGNER_SECONDS: i64 = 365 * 24 * 3600;

/// What the hub does about signing one CSR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signing {
    /// Not the hub's to sign, or not yet, or done.
    Skip,
    /// Sign with the CA in this Secret.
    Sign(SecretRef),
    /// Mark the CSR Failed: an approved request the hub cannot sign.
    Fail(String),
}

/// Whether `csr` holds an issued certificate.
pub fn is_signed(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|status| status.certificate.as_ref())
        .is_some_and(|certificate| !certificate.0.is_empty())
}

/// Decides about signing `csr` with the AddOn document's `registrations`.
pub fn decide_signing(
    csr: &CertificateSigningRequest,
    registrations: &[AddOnRegistration],
) -> Signing {
    let signer = csr.spec.signer_name.as_str();
    if signer == SIGNER_KUBE_APISERVER_CLIENT {
        return Signing::Skip;
    }
    let status = csr.status.as_ref();
    let conditions = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let has = |type_: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    if !has(CSR_APPROVED) || has(CSR_DENIED) || has(CSR_FAILED) || is_signed(csr) {
        return Signing::Skip;
    }
    match registrations.iter().find(|r| r.signer_name == signer) {
        None => Signing::Skip,
        Some(registration) => match &registration.signer_secret_ref {
            Some(secret) => Signing::Sign(secret.clone()),
            None => Signing::Fail(format!(
                "signer {signer} has no signerSecretRef in its AddOn document"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };

    const CUSTOM: &str = "example.com/signer";

    fn csr(
        signer: &str,
        conditions: &[&str],
        certificate: Option<&str>,
    ) -> CertificateSigningRequest {
        let mut csr = CertificateSigningRequest::default();
        csr.spec.signer_name = signer.into();
        csr.status = Some(CertificateSigningRequestStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|type_| CertificateSigningRequestCondition {
                        type_: type_.to_string(),
                        status: "True".into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            certificate: certificate.map(|c| ByteString(c.as_bytes().to_vec())),
        });
        csr
    }

    fn registrations(secret: Option<SecretRef>) -> Vec<AddOnRegistration> {
        vec![AddOnRegistration {
            signer_name: CUSTOM.into(),
            subject: None,
            signer_secret_ref: secret,
        }]
    }

    fn ca() -> SecretRef {
        SecretRef {
            namespace: "ns".into(),
            name: "ca".into(),
        }
    }

    #[test]
    fn approved_custom_signer_csr_is_signed_with_its_ca() {
        assert_eq!(
            decide_signing(
                &csr(CUSTOM, &[CSR_APPROVED], None),
                &registrations(Some(ca()))
            ),
            Signing::Sign(ca())
        );
    }

    #[test]
    fn pending_refused_signed_kube_and_unknown_signer_csrs_are_left_alone() {
        let regs = registrations(Some(ca()));
        for skipped in [
            csr(CUSTOM, &[], None),
            csr(CUSTOM, &[CSR_APPROVED, CSR_DENIED], None),
            csr(CUSTOM, &[CSR_APPROVED, CSR_FAILED], None),
            csr(CUSTOM, &[CSR_APPROVED], Some("PEM")),
            csr(SIGNER_KUBE_APISERVER_CLIENT, &[CSR_APPROVED], None),
            csr("other.example.com/x", &[CSR_APPROVED], None),
        ] {
            assert_eq!(
                decide_signing(&skipped, &regs),
                Signing::Skip,
                "{skipped:?}"
            );
        }
    }

    #[test]
    fn custom_signer_without_a_ca_fails_the_csr() {
        assert!(matches!(
            decide_signing(&csr(CUSTOM, &[CSR_APPROVED], None), &registrations(None)),
            Signing::Fail(_)
        ));
    }
}
