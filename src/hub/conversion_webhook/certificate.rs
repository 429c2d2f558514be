//! The conversion webhook's certificate, decided without I/O: a CA and a serving certificate for
//! the `fleetform-hub` Service's DNS names as Secret [`WEBHOOK_SECRET`] holds them, when each is
//! due ([`WebhookCertificate::renewal`]: the serving certificate when less than [`RENEW_BEFORE`]
//! of it is left, the CA when it could no longer outlive a new serving certificate), issuing them
//! (a renewed CA leads the bundle and the previous one stays until it expires, so replicas still
//! serving its certificates stay trusted), and which CRDs get the CA bundle ([`injection`]: only
//! those carrying fleetform's mark, never an OCM hub's own).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PublicKeyData, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;

use crate::api::vocabulary::{MANAGED_BY, MANAGED_BY_LABEL};

/// Secret in `fleetform-system` holding the webhook's CA and serving certificate.
pub const WEBHOOK_SECRET: &str = "fleetform-hub-webhook";
/// Key of [`WEBHOOK_SECRET`]: the CA bundle (PEM) kube-apiserver trusts, the current CA first.
pub const CA_CERT_KEY: &str = "ca.crt";
/// Key of [`WEBHOOK_SECRET`]: the current CA's private key (PEM), to sign the next serving
/// certificate with the same CA. It signs nothing but this webhook's certificates.
pub const CA_KEY_KEY: &str = "ca.key";
/// Key of [`WEBHOOK_SECRET`]: the serving certificate (PEM).
pub const TLS_CERT_KEY: &str = "tls.crt";
/// Key of [`WEBHOOK_SECRET`]: the serving certificate's private key (PEM).
pub const TLS_KEY_KEY: &str = "tls.key";

/// How long a CA is valid.
pub const CA_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// How long a serving certificate is valid.
pub const SERVING_LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);
/// A serving certificate with less than this left is renewed.
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);
/// Certificates start this much before they are issued, for clocks a little behind ours.
const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// The webhook's certificate material as [`WEBHOOK_SECRET`] holds it (PEM). Its `Debug` leaves
/// the keys out.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookCertificate {
    /// Every CA kube-apiserver is to trust: the current one first, then earlier ones until they
    /// expire ([`CA_CERT_KEY`]).
    pub ca_bundle: String,
    /// The current CA's key; absent from a Secret fleetform did not write ([`CA_KEY_KEY`]).
    ca_key: Option<String>,
    /// The serving certificate ([`TLS_CERT_KEY`]).
    pub cert: String,
    /// Its key ([`TLS_KEY_KEY`]).
    key: String,
}

impl std::fmt::Debug for WebhookCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookCertificate")
            .field("ca_bundle", &self.ca_bundle)
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

/// What a held certificate needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Nothing: it serves every name, is signed by the current CA, and has time left.
    Keep,
    /// A new serving certificate from the current CA.
    Serving,
    /// A new CA (and so a new serving certificate): the CA is missing, unusable or could not
    /// outlive a new serving certificate.
    Authority,
}

impl WebhookCertificate {
    /// A new CA and a serving certificate for `names`, issued at `now`.
    pub fn issue(names: &[String], now: OffsetDateTime) -> Result<Self, rcgen::Error> {
        let (ca_cert, ca_key) = new_authority(&format!("{WEBHOOK_SECRET}-ca"), now)?;
        let (cert, key) = new_serving(&ca_cert, &ca_key, names, now)?;
        Ok(WebhookCertificate {
            ca_bundle: ca_cert,
            ca_key: Some(ca_key),
            cert,
            key,
        })
    }

    /// What this certificate needs at `now` to serve `names`.
    pub fn renewal(&self, names: &[String], now: OffsetDateTime) -> Renewal {
        let now = now.unix_timestamp();
        let Some(ca) = self.authority() else {
            return Renewal::Authority;
        };
        let Ok((_, ca_cert)) = X509Certificate::from_der(&ca.der) else {
            return Renewal::Authority;
        };
        if seconds_left(&ca_cert, now) < lifetime_seconds(SERVING_LIFETIME) {
            return Renewal::Authority;
        }
        let Some(serving) = first_der(&self.cert) else {
            return Renewal::Serving;
        };
        let Ok((_, cert)) = X509Certificate::from_der(&serving) else {
            return Renewal::Serving;
        };
        let due = seconds_left(&cert, now) < lifetime_seconds(RENEW_BEFORE)
            || cert.validity().not_before.timestamp() > now
            || cert.verify_signature(Some(ca_cert.public_key())).is_err()
            || !key_matches(&self.key, &cert)
            || !serves_every_name(&cert, names);
        if due { Renewal::Serving } else { Renewal::Keep }
    }

    /// This certificate with `renewal` done at `now`: a new serving certificate for `names`,
    /// from the current CA or a new one. A new CA leads the bundle; the earlier CAs stay in it
    /// until they expire, so serving certificates they signed stay trusted meanwhile.
    pub fn renewed(
        &self,
        renewal: Renewal,
        names: &[String],
        now: OffsetDateTime,
    ) -> Result<Self, rcgen::Error> {
        match (renewal, self.authority()) {
            (Renewal::Keep, _) => Ok(self.clone()),
            (Renewal::Serving, Some(ca)) => {
                let (cert, key) = new_serving(&ca.cert_pem, &ca.key_pem, names, now)?;
                Ok(WebhookCertificate {
                    cert,
                    key,
                    ..self.clone()
                })
            }
            (Renewal::Serving | Renewal::Authority, _) => {
                let mut issued = Self::issue(names, now)?;
                for earlier in pem::parse_many(&self.ca_bundle).unwrap_or_default() {
                    let unexpired = X509Certificate::from_der(earlier.contents())
                        .is_ok_and(|(_, cert)| seconds_left(&cert, now.unix_timestamp()) > 0);
                    if unexpired {
                        issued.ca_bundle.push_str(&encode(&earlier));
                    }
                }
                Ok(issued)
            }
        }
    }

    /// The certificate a Secret holds, if it has the keys (the CA key only when fleetform wrote
    /// it).
    pub fn from_secret(secret: &Secret) -> Option<Self> {
        let data = secret.data.as_ref()?;
        let text = |key: &str| {
            data.get(key)
                .and_then(|value| String::from_utf8(value.0.clone()).ok())
        };
        Some(WebhookCertificate {
            ca_bundle: text(CA_CERT_KEY)?,
            ca_key: text(CA_KEY_KEY),
            cert: text(TLS_CERT_KEY)?,
            key: text(TLS_KEY_KEY)?,
        })
    }

    /// The Secret's `data`: [`CA_CERT_KEY`], [`TLS_CERT_KEY`], [`TLS_KEY_KEY`] and, when held,
    /// [`CA_KEY_KEY`].
    pub fn secret_data(&self) -> BTreeMap<String, ByteString> {
        let mut data = BTreeMap::from([
            (CA_CERT_KEY, &self.ca_bundle),
            (TLS_CERT_KEY, &self.cert),
            (TLS_KEY_KEY, &self.key),
        ]);
        if let Some(ca_key) = &self.ca_key {
            data.insert(CA_KEY_KEY, ca_key);
        }
        data.into_iter()
            .map(|(key, value)| (key.to_string(), ByteString(value.as_bytes().to_vec())))
            .collect()
    }

    /// The current CA (the bundle's first certificate) with its key, when they match.
    fn authority(&self) -> Option<Authority> {
        let key_pem = self.ca_key.clone()?;
        let first = pem::parse_many(&self.ca_bundle).ok()?.into_iter().next()?;
        let der = first.contents().to_vec();
        let (_, cert) = X509Certificate::from_der(&der).ok()?;
        if !key_matches(&key_pem, &cert) {
            return None;
        }
        Some(Authority {
            cert_pem: encode(&first),
            key_pem,
            der,
        })
    }

    /// The serving certificate and key as rustls serves them.
    pub(super) fn certified_key(&self) -> Result<CertifiedKey, String> {
        let chain: Vec<CertificateDer<'static>> = pem::parse_many(&self.cert)
            .map_err(|err| format!("{TLS_CERT_KEY}: {err}"))?
            .into_iter()
            .map(|block| CertificateDer::from(block.into_contents()))
            .collect();
        if chain.is_empty() {
            return Err(format!("{TLS_CERT_KEY} holds no certificate"));
        }
        let key = pem::parse(&self.key).map_err(|err| format!("{TLS_KEY_KEY}: {err}"))?;
        let key = PrivateKeyDer::try_from(key.into_contents())
            .map_err(|err| format!("{TLS_KEY_KEY}: {err}"))?;
        CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider())
            .map_err(|err| format!("{TLS_CERT_KEY} and {TLS_KEY_KEY}: {err}"))
    }
}

struct Authority {
    cert_pem: String,
    key_pem: String,
    der: Vec<u8>,
}

/// PEM with `\n` line endings, as rcgen writes it (so a bundle reads as one text).
fn encode(block: &pem::Pem) -> String {
    pem::encode_config(
        block,
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

fn lifetime_seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

fn seconds_left(cert: &X509Certificate<'_>, now: i64) -> i64 {
    cert.validity().not_after.timestamp().saturating_sub(now)
}

fn first_der(pem_text: &str) -> Option<Vec<u8>> {
    pem::parse_many(pem_text)
        .ok()?
        .into_iter()
        .next()
        .map(pem::Pem::into_contents)
}

fn key_matches(key_pem: &str, cert: &X509Certificate<'_>) -> bool {
    KeyPair::from_pem(key_pem)
        .is_ok_and(|key| key.subject_public_key_info() == cert.public_key().raw)
}

fn serves_every_name(cert: &X509Certificate<'_>, names: &[String]) -> bool {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return names.is_empty();
    };
    let served: Vec<String> = san
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some(dns.to_string()),
            GeneralName::IPAddress(octets) => ip_of(octets).map(|ip| ip.to_string()),
            _ => None,
        })
        .collect();
    names.iter().all(|name| {
        let name = name
            .parse::<IpAddr>()
            .map_or_else(|_| name.clone(), |ip| ip.to_string());
        served.contains(&name)
    })
}

fn ip_of(octets: &[u8]) -> Option<IpAddr> {
    match octets.len() {
        4 => <[u8; 4]>::try_from(octets).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(octets).ok().map(IpAddr::from),
        _ => None,
    }
}

fn serial() -> SerialNumber {
    let mut bytes: [u8; 16] = std::array::from_fn(|_| fastrand::u8(..));
    // A positive integer, as RFC 5280 asks.
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

/// A self-signed CA named `common_name` (certificate and key, PEM) valid for [`CA_LIFETIME`]
/// from `now`.
pub(crate) fn new_authority(
    common_name: &str,
    now: OffsetDateTime,
) -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = now - BACKDATE;
    params.not_after = now + CA_LIFETIME;
    params.serial_number = Some(serial());
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate (certificate and key, PEM) for `names`, valid for [`SERVING_LIFETIME`]
/// from `now`, signed by the CA.
fn new_serving(
    ca_cert_pem: &str,
    ca_key_pem: &str,
    names: &[String],
    now: OffsetDateTime,
) -> Result<(String, String), rcgen::Error> {
    let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, KeyPair::from_pem(ca_key_pem)?)?;
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(names.to_vec())?;
    if let Some(first) = names.first() {
        params
            .distinguished_name
            .push(DnType::CommonName, first.as_str());
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = now - BACKDATE;
    params.not_after = now + SERVING_LIFETIME;
    params.serial_number = Some(serial());
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn marked(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|labels| labels.get(MANAGED_BY_LABEL))
        .is_some_and(|value| value == MANAGED_BY)
}

/// What to do with [`WEBHOOK_SECRET`] as it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretPlan {
    /// Serve the certificate it holds.
    Serve(WebhookCertificate),
    /// Write this certificate into it (create it, when there was none), issued for this reason.
    Write(WebhookCertificate, Renewal),
    /// A Secret fleetform did not write, with no certificate to serve: what it lacks.
    Unusable(String),
}

/// What to do with `secret` (`None`: there is none) to serve `names` at `now`: a Secret
/// fleetform wrote (its mark) is renewed when due; one it did not write is served as it is,
/// however close to expiry, and never rewritten.
pub fn secret_plan(
    secret: Option<&Secret>,
    names: &[String],
    now: OffsetDateTime,
) -> Result<SecretPlan, rcgen::Error> {
    let held = secret.and_then(WebhookCertificate::from_secret);
    if secret.is_some_and(|secret| !marked(&secret.metadata)) {
        return Ok(held.map_or_else(
            || {
                SecretPlan::Unusable(format!(
                    "it lacks {CA_CERT_KEY}, {TLS_CERT_KEY} or {TLS_KEY_KEY}"
                ))
            },
            SecretPlan::Serve,
        ));
    }
    let Some(held) = held else {
        return Ok(SecretPlan::Write(
            WebhookCertificate::issue(names, now)?,
            Renewal::Authority,
        ));
    };
    Ok(match held.renewal(names, now) {
        Renewal::Keep => SecretPlan::Serve(held),
        renewal => SecretPlan::Write(held.renewed(renewal, names, now)?, renewal),
    })
}

/// What [`WebhookCertificate`] a CRD's `caBundle` calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injection {
    /// Fleetform's CRD with another bundle (or none): write it.
    Write,
    /// Fleetform's CRD with this bundle already.
    Current,
    /// Not fleetform's CRD (no mark: OCM's own, another installer's), or not converted by a
    /// webhook: leave it alone.
    NotOurs,
}

/// Whether `crd` is to get `ca_bundle` into `spec.conversion.webhook.clientConfig.caBundle`.
pub fn injection(crd: &CustomResourceDefinition, ca_bundle: &str) -> Injection {
    let client_config = crd
        .spec
        .conversion
        .as_ref()
        .and_then(|conversion| conversion.webhook.as_ref())
        .and_then(|webhook| webhook.client_config.as_ref());
    match client_config {
        Some(config) if marked(&crd.metadata) => {
            if config
                .ca_bundle
                .as_ref()
                .is_some_and(|held| held.0 == ca_bundle.as_bytes())
            {
                Injection::Current
            } else {
                Injection::Write
            }
        }
        _ => Injection::NotOurs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::CONVERTED_CRDS;
    use crate::hub::conversion_webhook::dns_names;

    fn names() -> Vec<String> {
        dns_names(&[])
    }

    fn days(n: i64) -> time::Duration {
        time::Duration::days(n)
    }

    fn at() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    #[test]
    fn a_new_certificate_is_kept_until_a_month_before_it_expires() {
        let issued = WebhookCertificate::issue(&names(), at()).unwrap();
        assert_eq!(issued.renewal(&names(), at()), Renewal::Keep);
        assert_eq!(issued.renewal(&names(), at() + days(59)), Renewal::Keep);
        assert_eq!(issued.renewal(&names(), at() + days(61)), Renewal::Serving);
    }

    #[test]
    fn a_name_the_certificate_lacks_renews_it() {
        let issued = WebhookCertificate::issue(&names(), at()).unwrap();
        let more = dns_names(&["webhook.example.com".into(), "10.0.0.7".into()]);
        assert_eq!(issued.renewal(&more, at()), Renewal::Serving);
        let renewed = issued.renewed(Renewal::Serving, &more, at()).unwrap();
        assert_eq!(renewed.renewal(&more, at()), Renewal::Keep);
    }

    #[test]
    fn a_renewed_serving_certificate_keeps_the_ca() {
        let issued = WebhookCertificate::issue(&names(), at()).unwrap();
        let later = at() + days(61);
        let renewed = issued.renewed(Renewal::Serving, &names(), later).unwrap();
        assert_eq!(renewed.ca_bundle, issued.ca_bundle);
        assert_ne!(renewed.cert, issued.cert);
        assert_eq!(renewed.renewal(&names(), later), Renewal::Keep);
    }

    #[test]
    fn a_ca_that_cannot_outlive_a_new_serving_certificate_is_renewed_and_kept_in_the_bundle() {
        let issued = WebhookCertificate::issue(&names(), at()).unwrap();
        let late = at() + days(300);
        assert_eq!(issued.renewal(&names(), late), Renewal::Authority);
        let renewed = issued.renewed(Renewal::Authority, &names(), late).unwrap();
        assert_eq!(renewed.renewal(&names(), late), Renewal::Keep);
        let bundle = pem::parse_many(&renewed.ca_bundle).unwrap();
        assert_eq!(bundle.len(), 2, "the new CA and the earlier one");
        assert!(renewed.ca_bundle.ends_with(&issued.ca_bundle));
        // Once the earlier CA has expired it leaves the bundle.
        let much_later = at() + days(400);
        let again = renewed
            .renewed(Renewal::Authority, &names(), much_later)
            .unwrap();
        assert_eq!(pem::parse_many(&again.ca_bundle).unwrap().len(), 2);
        assert!(!again.ca_bundle.contains(&issued.ca_bundle));
    }

    #[test]
    fn a_certificate_without_its_ca_key_or_with_a_stranger_s_key_is_reissued() {
        let issued = WebhookCertificate::issue(&names(), at()).unwrap();
        let other = WebhookCertificate::issue(&names(), at()).unwrap();
        let no_ca_key = WebhookCertificate {
            ca_key: None,
            ..issued.clone()
        };
        assert_eq!(no_ca_key.renewal(&names(), at()), Renewal::Authority);
        let wrong_key = WebhookCertificate {
            key: other.key.clone(),
            ..issued.clone()
        };
        assert_eq!(wrong_key.renewal(&names(), at()), Renewal::Serving);
        let other_ca = WebhookCertificate {
            cert: other.cert.clone(),
            key: other.key.clone(),
            ..issued.clone()
        };
        assert_eq!(other_ca.renewal(&names(), at()), Renewal::Serving);
        let garbage = WebhookCertificate {
            cert: "not a certificate".into(),
            ..issued
        };
        assert_eq!(garbage.renewal(&names(), at()), Renewal::Serving);
    }

    #[test]
    fn the_secret_round_trips_the_certificate() {
        let issued = WebhookCertificate::issue(&names(), at()).unwrap();
        let secret = Secret {
            data: Some(issued.secret_data()),
            ..Secret::default()
        };
        assert_eq!(
            WebhookCertificate::from_secret(&secret),
            Some(issued.clone())
        );
        assert!(issued.certified_key().is_ok());
        assert!(!format!("{issued:?}").contains("PRIVATE KEY"));
    }

    fn secret(certificate: Option<&WebhookCertificate>, ours: bool) -> Secret {
        let mut secret = Secret {
            data: certificate.map(WebhookCertificate::secret_data),
            ..Secret::default()
        };
        if ours {
            secret.metadata.labels = Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_string(),
                MANAGED_BY.to_string(),
            )]));
        }
        secret
    }

    #[test]
    fn the_secret_is_created_then_served_then_renewed_when_due() {
        let SecretPlan::Write(issued, Renewal::Authority) =
            secret_plan(None, &names(), at()).unwrap()
        else {
            panic!("a new CA and certificate")
        };
        let ours = secret(Some(&issued), true);
        assert_eq!(
            secret_plan(Some(&ours), &names(), at()).unwrap(),
            SecretPlan::Serve(issued.clone())
        );
        let SecretPlan::Write(renewed, Renewal::Serving) =
            secret_plan(Some(&ours), &names(), at() + days(61)).unwrap()
        else {
            panic!("a new serving certificate")
        };
        assert_eq!(renewed.ca_bundle, issued.ca_bundle);
        let emptied = secret(None, true);
        assert!(matches!(
            secret_plan(Some(&emptied), &names(), at()).unwrap(),
            SecretPlan::Write(_, Renewal::Authority)
        ));
    }

    #[test]
    fn a_secret_fleetform_did_not_write_is_served_as_it_is_or_refused() {
        let mut theirs = WebhookCertificate::issue(&names(), at()).unwrap();
        theirs.ca_key = None;
        let late = at() + days(89);
        assert_eq!(
            secret_plan(Some(&secret(Some(&theirs), false)), &names(), late).unwrap(),
            SecretPlan::Serve(theirs)
        );
        let SecretPlan::Unusable(why) =
            secret_plan(Some(&secret(None, false)), &names(), at()).unwrap()
        else {
            panic!("nothing to serve")
        };
        assert!(why.contains(TLS_CERT_KEY), "{why}");
    }

    fn crd(labels: &[(&str, &str)], ca_bundle: Option<&str>) -> CustomResourceDefinition {
        let mut crd = crate::api::crds()
            .into_iter()
            .find(|crd| crd.metadata.name.as_deref() == Some(CONVERTED_CRDS[0]))
            .unwrap();
        crd.metadata.labels = Some(
            labels
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        );
        let config = crd
            .spec
            .conversion
            .as_mut()
            .and_then(|conversion| conversion.webhook.as_mut())
            .and_then(|webhook| webhook.client_config.as_mut())
            .unwrap();
        config.ca_bundle = ca_bundle.map(|bundle| ByteString(bundle.as_bytes().to_vec()));
        crd
    }

    #[test]
    fn only_fleetform_s_crds_get_the_ca_and_only_when_it_differs() {
        let ours = [(MANAGED_BY_LABEL, MANAGED_BY)];
        assert_eq!(injection(&crd(&ours, None), "CA"), Injection::Write);
        assert_eq!(injection(&crd(&ours, Some("old")), "CA"), Injection::Write);
        assert_eq!(injection(&crd(&ours, Some("CA")), "CA"), Injection::Current);
        assert_eq!(injection(&crd(&[], None), "CA"), Injection::NotOurs);
        let someone_else = [(MANAGED_BY_LABEL, "ocm")];
        assert_eq!(
            injection(&crd(&someone_else, None), "CA"),
            Injection::NotOurs
        );
        let mut no_webhook = crd(&ours, None);
        no_webhook.spec.conversion = None;
        assert_eq!(injection(&no_webhook, "CA"), Injection::NotOurs);
    }
}
