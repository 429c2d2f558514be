//! The control plane's certificate authority: created at first start, kept in `DIR/pki` with
//! owner-only permissions and reused on restart; it signs the serving certificate, the admin
//! client certificate and approved client CSRs. The ServiceAccount token key is kept beside it
//! the same way.
//!
//! Owns key material and files only; which CSRs get signed is the CSR controller's decision.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::pki_types::pem::PemObject;
use time::{Duration, OffsetDateTime};

use super::tokens::SigningKey;

/// The shortest certificate a CSR may ask for (`spec.expirationSeconds`), as Kubernetes.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// Lifetime of CSR-issued certificates that ask for none (kube-controller-manager's default).
pub const DEFAULT_CLIENT_SECONDS: i64 = 365 * 24 * 3600;
const CA_LIFETIME_DAYS: i64 = 10 * 365;
const SERVING_LIFETIME_DAYS: i64 = 365;
/// Certificates start a little in the past so clocks slightly behind ours accept them.
const BACKDATE: Duration = Duration::minutes(5);

/// Why the CA or its files could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error(transparent)]
    KeyPermissions(#[from] crate::private_files::PrivateError),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a usable certificate or key: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    TokenKey {
        path: PathBuf,
        source: super::tokens::KeyError,
    },
}

/// Why a CSR was not signed (written into the CSR's `Failed` condition).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SignError {
    #[error("invalid certificate request: {0}")]
    BadRequest(String),
    #[error("invalid usage for client certificate: {0}")]
    Usage(String),
    #[error("signing failed: {0}")]
    Signing(String),
}

/// A signing CA.
pub struct CertificateAuthority {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
    not_after: OffsetDateTime,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("CertificateAuthority")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct CertifiedKey {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for CertifiedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertifiedKey").finish_non_exhaustive()
    }
}

/// The CA plus the serving certificate.
#[derive(Debug)]
pub struct Pki {
    pub ca: CertificateAuthority,
    pub serving: CertifiedKey,
}

fn serial() -> SerialNumber {
    let bytes: [u8; 16] = rand::random();
    let mut bytes = bytes.to_vec();
    // A positive integer.
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

impl CertificateAuthority {
    /// A new self-signed CA valid for ten years.
    pub fn generate(now: OffsetDateTime) -> Result<(Self, String), CaError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "fleetform-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = now - BACKDATE;
        params.not_after = now + Duration::days(CA_LIFETIME_DAYS);
        params.serial_number = Some(serial());
        let cert = params.self_signed(&key)?;
        let key_pem = key.serialize_pem();
        let ca = Self::from_pem(&cert.pem(), &key_pem, Path::new("(generated)"))?;
        Ok((ca, key_pem))
    }

    /// Loads a CA from PEM; `origin` names the files in errors.
    pub fn from_pem(cert_pem: &str, key_pem: &str, origin: &Path) -> Result<Self, CaError> {
        let corrupt = |detail: String| CaError::Corrupt {
            path: origin.to_path_buf(),
            detail,
        };
        let key = KeyPair::from_pem(key_pem).map_err(|e| corrupt(e.to_string()))?;
        let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
            .map_err(|e| corrupt(e.to_string()))?;
        let cert = pem.parse_x509().map_err(|e| corrupt(e.to_string()))?;
        let not_after = cert.validity().not_after.to_datetime();
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| corrupt(e.to_string()))?;
        Ok(CertificateAuthority {
            cert_pem: cert_pem.to_string(),
            issuer,
            not_after,
        })
    }

    /// The CA certificate (what clients trust).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// When the CA itself expires; nothing it signs outlives it.
    pub fn not_after(&self) -> OffsetDateTime {
        self.not_after
    }

    /// A serving certificate for these host names and IP addresses.
    pub fn issue_serving(
        &self,
        hosts: &[String],
        now: OffsetDateTime,
    ) -> Result<CertifiedKey, CaError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "fleetform-apiserver");
        for h in hosts {
            let san = match h.parse::<std::net::IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(h.clone().try_into()?),
            };
            if !params.subject_alt_names.contains(&san) {
                params.subject_alt_names.push(san);
            }
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = now - BACKDATE;
        params.not_after = (now + Duration::days(SERVING_LIFETIME_DAYS)).min(self.not_after);
        params.serial_number = Some(serial());
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A client certificate for `user` in `groups`, valid between the two instants.
    pub fn issue_client(
        &self,
        user: &str,
        groups: &[&str],
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> Result<CertifiedKey, CaError> {
        let key = KeyPair::generate()?;
        let mut params = client_params(not_before, not_after.min(self.not_after));
        params.distinguished_name.push(DnType::CommonName, user);
        for g in groups {
            params.distinguished_name.push(DnType::OrganizationName, *g);
        }
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Signs a PEM CSR as a client certificate for its subject, valid for
    /// `expiration_seconds` (at least [`MIN_EXPIRATION_SECONDS`], default one year), never longer
    /// than `max_seconds` (kube-controller-manager's `--cluster-signing-duration`; it wins over
    /// the floor, as there) and never past the CA's own expiry. The certificate starts up to five
    /// minutes in the past for clocks behind ours, but never by more than a tenth of its lifetime,
    /// so that a short certificate is not mostly spent when it is issued.
    pub fn sign_client_csr(
        &self,
        csr_pem: &str,
        expiration_seconds: Option<i64>,
        max_seconds: Option<i64>,
        now: OffsetDateTime,
    ) -> Result<String, SignError> {
        let csr = CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| SignError::BadRequest(e.to_string()))?;
        let mut seconds = expiration_seconds
            .unwrap_or(DEFAULT_CLIENT_SECONDS)
            .max(MIN_EXPIRATION_SECONDS);
        if let Some(max) = max_seconds {
            seconds = seconds.min(max.max(1));
        }
        let not_after = now
            .checked_add(Duration::seconds(seconds))
            .unwrap_or(self.not_after)
            .min(self.not_after);
        let backdate = BACKDATE.min(Duration::seconds(seconds) / 10);
        let mut params = client_params(now - backdate, not_after);
        params.distinguished_name = csr.params.distinguished_name.clone();
        if params.distinguished_name.get(&DnType::CommonName).is_none() {
            return Err(SignError::BadRequest(
                "the subject has no common name".into(),
            ));
        }
        let issued = params
            .signed_by(&csr.public_key, &self.issuer)
            .map_err(|e| SignError::Signing(e.to_string()))?;
        let requested_subject = requested_subject_der(csr_pem)?;
        let der = with_subject(issued.der(), &requested_subject, self.issuer.key())?;
        Ok(pem_certificate(&der))
    }
}

/// The subject of a PEM CSR exactly as requested (DER).
fn requested_subject_der(csr_pem: &str) -> Result<Vec<u8>, SignError> {
    let bad = |detail: String| SignError::BadRequest(detail);
    let block = x509_parser::pem::parse_x509_pem(csr_pem.as_bytes())
        .map_err(|e| bad(e.to_string()))?
        .1;
    let (_, request) =
        <x509_parser::certification_request::X509CertificationRequest as x509_parser::prelude::FromDer<_>>::from_der(&block.contents)
            .map_err(|e| bad(e.to_string()))?;
    Ok(request.certification_request_info.subject.as_raw().to_vec())
}

/// `certificate` with its subject replaced by `subject` (DER) and signed again by `key`.
///
/// rcgen keeps one value per attribute type, so it would issue a certificate for
/// `O=group-a, O=group-b` with one group only; Kubernetes copies the requested subject as it
/// is, and client certificates carry their groups that way. So rcgen issues the certificate
/// (validity, key, extensions, signature algorithm) and the requested subject is put back in.
fn with_subject(certificate: &[u8], subject: &[u8], key: &KeyPair) -> Result<Vec<u8>, SignError> {
    let malformed = || SignError::Signing("the issued certificate is not well-formed DER".into());
    let outer = der_contents(certificate).ok_or_else(malformed)?;
    let tbs_len = der_element_len(outer).ok_or_else(malformed)?;
    let (tbs, rest) = outer.split_at(tbs_len);
    let algorithm_len = der_element_len(rest).ok_or_else(malformed)?;
    let algorithm = &rest[..algorithm_len];
    let fields = der_contents(tbs).ok_or_else(malformed)?;
    // version [0], serialNumber, signature, issuer, validity, then subject.
    let mut start = 0;
    for _ in 0..5 {
        start += der_element_len(&fields[start..]).ok_or_else(malformed)?;
    }
    let end = start + der_element_len(&fields[start..]).ok_or_else(malformed)?;
    let mut tbs_fields = fields[..start].to_vec();
    tbs_fields.extend_from_slice(subject);
    tbs_fields.extend_from_slice(&fields[end..]);
    let tbs = der_element(0x30, &tbs_fields);
    let signature =
        rcgen::SigningKey::sign(key, &tbs).map_err(|e| SignError::Signing(e.to_string()))?;
    let mut bits = vec![0u8];
    bits.extend_from_slice(&signature);
    let mut body = tbs;
    body.extend_from_slice(algorithm);
    body.extend_from_slice(&der_element(0x03, &bits));
    Ok(der_element(0x30, &body))
}

/// The length of the DER element at the start of `der` (header included).
fn der_element_len(der: &[u8]) -> Option<usize> {
    let (header, len) = der_header(der)?;
    let total = header.checked_add(len)?;
    (total <= der.len()).then_some(total)
}

/// The contents of the DER element at the start of `der`.
fn der_contents(der: &[u8]) -> Option<&[u8]> {
    let (header, len) = der_header(der)?;
    der.get(header..header.checked_add(len)?)
}

/// (header length, content length) of the DER element at the start of `der`.
fn der_header(der: &[u8]) -> Option<(usize, usize)> {
    let first = *der.get(1)?;
    if first < 0x80 {
        return Some((2, usize::from(first)));
    }
    let count = usize::from(first & 0x7f);
    if count == 0 || count > 4 {
        return None;
    }
    let len = der
        .get(2..2 + count)?
        .iter()
        .fold(0usize, |len, byte| (len << 8) | usize::from(*byte));
    Some((2 + count, len))
}

fn der_element(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|byte| *byte == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(contents);
    out
}

fn pem_certificate(der: &[u8]) -> String {
    pem_block("CERTIFICATE", der)
}

fn pem_block(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

fn client_params(not_before: OffsetDateTime, not_after: OffsetDateTime) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.not_before = not_before;
    params.not_after = not_after;
    params.serial_number = Some(serial());
    params.use_authority_key_identifier_extension = true;
    params
}

/// Checks a CSR's `spec.usages` for the kube-apiserver-client signer: client auth is
/// required, and digital signature and key encipherment are the only others allowed.
pub fn check_client_usages(usages: &[String]) -> Result<(), SignError> {
    if let Some(bad) = usages.iter().find(|u| {
        !matches!(
            u.as_str(),
            "client auth" | "digital signature" | "key encipherment"
        )
    }) {
        return Err(SignError::Usage(format!("{bad:?} is not allowed")));
    }
    if !usages.iter().any(|u| u == "client auth") {
        return Err(SignError::Usage("\"client auth\" is required".into()));
    }
    Ok(())
}

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVING_CERT: &str = "apiserver.crt";
const SERVING_KEY: &str = "apiserver.key";
const TOKEN_KEY: &str = "sa.key";

/// The CA of control planes without a data dir: one per process, so that an in-memory control
/// plane restarted on the same address is still trusted by the kubeconfigs handed out before
/// (as a restarted control plane with a data dir is). Certificates of other processes' CAs
/// are still refused.
fn process_ca(now: OffsetDateTime) -> Result<CertificateAuthority, CaError> {
    static PROCESS_CA: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();
    if PROCESS_CA.get().is_none() {
        let (ca, key_pem) = CertificateAuthority::generate(now)?;
        let _ = PROCESS_CA.set((ca.cert_pem().to_string(), key_pem));
    }
    match PROCESS_CA.get() {
        Some((cert, key)) => CertificateAuthority::from_pem(cert, key, Path::new("(in memory)")),
        None => CertificateAuthority::generate(now).map(|(ca, _)| ca),
    }
}

/// Loads the CA a control plane with the data dir `dir` created (`DIR/pki`), refusing a key
/// file others may read.
pub fn load_ca(dir: &Path) -> Result<CertificateAuthority, CaError> {
    let pki = dir.join("pki");
    let (ca_cert, ca_key) = (pki.join(CA_CERT), pki.join(CA_KEY));
    check_private(&ca_key)?;
    CertificateAuthority::from_pem(&read(&ca_cert)?, &read(&ca_key)?, &ca_cert)
}

/// Loads the CA and serving certificate from `DIR/pki`, creating them at first start (and
/// the serving certificate again when a host is missing from it). With no directory, the CA
/// is the process's (see [`process_ca`]) and the serving certificate is new.
pub fn load_or_create(data_dir: Option<&Path>, hosts: &[String]) -> Result<Pki, CaError> {
    let now = OffsetDateTime::now_utc();
    let Some(dir) = data_dir else {
        let ca = process_ca(now)?;
        let serving = ca.issue_serving(hosts, now)?;
        return Ok(Pki { ca, serving });
    };
    let pki = dir.join("pki");
    fs::create_dir_all(&pki).map_err(io("create", &pki))?;
    fs::set_permissions(&pki, fs::Permissions::from_mode(0o700)).map_err(io("chmod", &pki))?;
    let (ca_cert, ca_key) = (pki.join(CA_CERT), pki.join(CA_KEY));
    let ca = if ca_key.exists() {
        check_private(&ca_key)?;
        let cert = read(&ca_cert)?;
        CertificateAuthority::from_pem(&cert, &read(&ca_key)?, &ca_cert)?
    } else {
        let (ca, key_pem) = CertificateAuthority::generate(now)?;
        write_private(&ca_key, &key_pem)?;
        write_private(&ca_cert, ca.cert_pem())?;
        ca
    };
    let (cert_path, key_path) = (pki.join(SERVING_CERT), pki.join(SERVING_KEY));
    if key_path.exists() {
        check_private(&key_path)?;
        let serving = CertifiedKey {
            cert_pem: read(&cert_path)?,
            key_pem: read(&key_path)?,
        };
        if covers_hosts(&serving.cert_pem, hosts) {
            return Ok(Pki { ca, serving });
        }
    }
    let serving = ca.issue_serving(hosts, now)?;
    write_private(&key_path, &serving.key_pem)?;
    write_private(&cert_path, &serving.cert_pem)?;
    Ok(Pki { ca, serving })
}

/// The key ServiceAccount tokens are signed with: `DIR/pki/sa.key` (PKCS#8 PEM), made at first
/// start, so that tokens stay valid across restarts; with no directory, a new one.
pub fn load_or_create_token_key(data_dir: Option<&Path>) -> Result<SigningKey, CaError> {
    let generated = |path: &Path| {
        SigningKey::generate().map_err(|source| CaError::TokenKey {
            path: path.to_path_buf(),
            source,
        })
    };
    let Some(dir) = data_dir else {
        return Ok(generated(Path::new("(in memory)"))?.0);
    };
    let pki = dir.join("pki");
    fs::create_dir_all(&pki).map_err(io("create", &pki))?;
    let path = pki.join(TOKEN_KEY);
    if path.exists() {
        check_private(&path)?;
        let pem = read(&path)?;
        let der =
            rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| {
                CaError::Corrupt {
                    path: path.clone(),
                    detail: e.to_string(),
                }
            })?;
        return SigningKey::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|source| CaError::TokenKey { path, source });
    }
    let (key, pkcs8) = generated(&path)?;
    write_private(&path, &pem_block("PRIVATE KEY", &pkcs8))?;
    Ok(key)
}

fn covers_hosts(cert_pem: &str, hosts: &[String]) -> bool {
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()) else {
        return false;
    };
    let Ok(cert) = pem.parse_x509() else {
        return false;
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return false;
    };
    let names: Vec<String> = san
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
            x509_parser::extensions::GeneralName::IPAddress(b) => match b.len() {
                4 => <[u8; 4]>::try_from(*b)
                    .ok()
                    .map(|a| std::net::IpAddr::from(a).to_string()),
                16 => <[u8; 16]>::try_from(*b)
                    .ok()
                    .map(|a| std::net::IpAddr::from(a).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let still_valid =
        cert.validity().not_after.to_datetime() > OffsetDateTime::now_utc() + Duration::days(1);
    still_valid && hosts.iter().all(|h| names.contains(h))
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CaError {
    let path = path.to_path_buf();
    move |source| CaError::Io {
        action,
        path,
        source,
    }
}

fn read(path: &Path) -> Result<String, CaError> {
    fs::read_to_string(path).map_err(io("read", path))
}

/// Refuses key files that group or others may read or write.
fn check_private(path: &Path) -> Result<(), CaError> {
    crate::private_files::check("private key", path, crate::private_files::FILE_MODE)?;
    Ok(())
}

fn write_private(path: &Path, contents: &str) -> Result<(), CaError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io("write", path))?;
    f.write_all(contents.as_bytes())
        .map_err(io("write", path))?;
    f.sync_all().map_err(io("write", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        vec!["localhost".into(), "127.0.0.1".into()]
    }

    fn parse(pem: &str) -> (String, Vec<String>, OffsetDateTime, Vec<u8>) {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        let orgs = cert
            .subject()
            .iter_organization()
            .map(|o| o.as_str().unwrap().to_string())
            .collect();
        let eku = cert.extended_key_usage().unwrap().unwrap().value.clone();
        let mut flags = Vec::new();
        if eku.client_auth {
            flags.push(1);
        }
        if eku.server_auth {
            flags.push(2);
        }
        (cn, orgs, cert.validity().not_after.to_datetime(), flags)
    }

    fn csr(cn: &str, org: &str) -> String {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::default();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.distinguished_name.push(DnType::OrganizationName, org);
        p.serialize_request(&key).unwrap().pem().unwrap()
    }

    #[test]
    fn ca_files_are_created_owner_only_and_reused_on_restart() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(Some(dir.path()), &hosts()).unwrap();
        for f in [CA_KEY, CA_CERT, SERVING_KEY, SERVING_CERT] {
            let mode = fs::metadata(dir.path().join("pki").join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        let second = load_or_create(Some(dir.path()), &hosts()).unwrap();
        assert_eq!(first.ca.cert_pem(), second.ca.cert_pem());
        assert_eq!(first.serving.cert_pem, second.serving.cert_pem);
    }

    #[test]
    fn in_memory_control_planes_of_one_process_share_a_ca() {
        let a = load_or_create(None, &hosts()).unwrap();
        let b = load_or_create(None, &hosts()).unwrap();
        assert_eq!(a.ca.cert_pem(), b.ca.cert_pem());
        assert_ne!(a.serving.cert_pem, b.serving.cert_pem);
    }

    #[test]
    fn serving_certificate_is_reissued_for_a_new_host_with_the_same_ca() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(Some(dir.path()), &hosts()).unwrap();
        let mut more = hosts();
        more.push("10.1.2.3".into());
        let second = load_or_create(Some(dir.path()), &more).unwrap();
        assert_eq!(first.ca.cert_pem(), second.ca.cert_pem());
        assert_ne!(first.serving.cert_pem, second.serving.cert_pem);
        assert!(covers_hosts(&second.serving.cert_pem, &more));
    }

    #[test]
    fn key_readable_by_others_is_refused_with_a_clear_message() {
        let dir = tempfile::tempdir().unwrap();
        load_or_create(Some(dir.path()), &hosts()).unwrap();
        let key = dir.path().join("pki").join(CA_KEY);
        fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_or_create(Some(dir.path()), &hosts()).unwrap_err();
        assert!(matches!(
            err,
            CaError::KeyPermissions(crate::private_files::PrivateError::Exposed(
                crate::private_files::Exposed { mode: 0o644, .. }
            ))
        ));
        let msg = err.to_string();
        assert!(msg.contains("readable by group or others"), "{msg}");
        assert!(msg.contains("chmod 600"), "{msg}");
    }

    #[test]
    fn csr_is_signed_for_client_auth_with_its_subject() {
        let now = OffsetDateTime::now_utc();
        let (ca, _) = CertificateAuthority::generate(now).unwrap();
        let pem = ca
            .sign_client_csr(&csr("spoke-1", "fleet:spokes"), Some(3600), None, now)
            .unwrap();
        let (cn, orgs, not_after, eku) = parse(&pem);
        assert_eq!(cn, "spoke-1");
        assert_eq!(orgs, ["fleet:spokes"]);
        assert_eq!(eku, [1]);
        assert!((not_after - (now + Duration::hours(1))).abs() < Duration::seconds(2));
    }

    #[test]
    fn csr_expiration_has_a_ten_minute_floor_and_the_ca_as_ceiling() {
        let now = OffsetDateTime::now_utc();
        let (ca, _) = CertificateAuthority::generate(now).unwrap();
        let short = ca
            .sign_client_csr(&csr("a", "b"), Some(60), None, now)
            .unwrap();
        assert!((parse(&short).2 - (now + Duration::seconds(600))).abs() < Duration::seconds(2));
        let long = ca
            .sign_client_csr(&csr("a", "b"), Some(i64::MAX), None, now)
            .unwrap();
        assert!(parse(&long).2 <= ca.not_after());
    }

    #[test]
    fn cluster_signing_duration_caps_the_lifetime_below_the_floor() {
        let now = OffsetDateTime::now_utc();
        let (ca, _) = CertificateAuthority::generate(now).unwrap();
        let capped = ca
            .sign_client_csr(&csr("a", "b"), Some(3600), Some(10), now)
            .unwrap();
        assert!((parse(&capped).2 - (now + Duration::seconds(10))).abs() < Duration::seconds(2));
        let (_, cert) = x509_parser::pem::parse_x509_pem(capped.as_bytes()).unwrap();
        let not_before = cert
            .parse_x509()
            .unwrap()
            .validity()
            .not_before
            .to_datetime();
        assert!(
            now - not_before <= Duration::seconds(2),
            "a 10 s certificate is backdated by at most a tenth of it"
        );
        let longer = ca
            .sign_client_csr(&csr("a", "b"), Some(60), Some(86_400), now)
            .unwrap();
        assert!((parse(&longer).2 - (now + Duration::seconds(600))).abs() < Duration::seconds(2));
    }

    /// A PEM CSR for `CN=user` in every group of `groups` (rcgen writes one O at most).
    fn csr_with_groups(user: &str, groups: &[&str]) -> String {
        use rcgen::PublicKeyData;
        let key = KeyPair::generate().unwrap();
        let attribute = |oid: &[u8], value: &str| {
            let mut pair = der_element(0x06, oid);
            pair.extend(der_element(0x0c, value.as_bytes()));
            der_element(0x31, &der_element(0x30, &pair))
        };
        let mut names = Vec::new();
        for group in groups {
            names.extend(attribute(&[0x55, 0x04, 0x0a], group));
        }
        names.extend(attribute(&[0x55, 0x04, 0x03], user));
        let mut info = der_element(0x02, &[0]);
        info.extend(der_element(0x30, &names));
        info.extend(key.subject_public_key_info());
        info.extend(der_element(0xa0, &[]));
        let info = der_element(0x30, &info);
        let signature = rcgen::SigningKey::sign(&key, &info).unwrap();
        let mut bits = vec![0];
        bits.extend(signature);
        let mut request = info;
        request.extend(der_element(
            0x30,
            &der_element(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]),
        ));
        request.extend(der_element(0x03, &bits));
        let der = der_element(0x30, &request);
        pem_certificate(&der).replace("CERTIFICATE", "CERTIFICATE REQUEST")
    }

    #[test]
    fn every_requested_group_is_kept_and_the_certificate_verifies() {
        let now = OffsetDateTime::now_utc();
        let (ca, _) = CertificateAuthority::generate(now).unwrap();
        let groups = [
            "system:open-cluster-management:c1",
            "system:open-cluster-management:managed-clusters",
            "system:authenticated",
        ];
        let pem = ca
            .sign_client_csr(&csr_with_groups("agent", &groups), Some(3600), None, now)
            .unwrap();
        let (cn, orgs, _, eku) = parse(&pem);
        assert_eq!(cn, "agent");
        assert_eq!(orgs, groups);
        assert_eq!(eku, [1]);
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = block.parse_x509().unwrap();
        let (_, ca_block) = x509_parser::pem::parse_x509_pem(ca.cert_pem().as_bytes()).unwrap();
        let ca_cert = ca_block.parse_x509().unwrap();
        cert.verify_signature(Some(ca_cert.public_key()))
            .expect("signed by the CA");
        assert_eq!(cert.issuer(), ca_cert.subject());
    }

    #[test]
    fn garbage_csr_is_a_bad_request() {
        let now = OffsetDateTime::now_utc();
        let (ca, _) = CertificateAuthority::generate(now).unwrap();
        assert!(matches!(
            ca.sign_client_csr("not a csr", None, None, now),
            Err(SignError::BadRequest(_))
        ));
    }

    #[test]
    fn client_usages_must_include_client_auth_and_nothing_for_servers() {
        let u = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            check_client_usages(&u(&["digital signature", "client auth"])),
            Ok(())
        );
        assert!(check_client_usages(&u(&["server auth", "client auth"])).is_err());
        assert!(check_client_usages(&u(&["digital signature"])).is_err());
    }

    #[test]
    fn serving_certificate_names_its_hosts_for_server_auth() {
        let now = OffsetDateTime::now_utc();
        let (ca, _) = CertificateAuthority::generate(now).unwrap();
        let s = ca.issue_serving(&hosts(), now).unwrap();
        assert_eq!(parse(&s.cert_pem).3, [2]);
        assert!(covers_hosts(&s.cert_pem, &hosts()));
    }
}
