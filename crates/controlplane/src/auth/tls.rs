//! The TLS listener's configuration: the serving certificate, ALPN for h2 and HTTP/1.1, and
//! client certificates that are requested but not required.
//!
//! As kube-apiserver does, a client certificate the CA did not issue (or an expired one) does
//! not fail the handshake: the connection proceeds unauthenticated and its requests get 401.
//! The handshake still proves the client holds the certificate's key.

use std::sync::Arc;

use rustls::DistinguishedName;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime, pem::PemObject};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ServerConfig, WebPkiClientVerifier};

use super::ca::Pki;
use crate::user::UserInfo;

/// Why TLS could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("unusable certificate or key PEM: {0}")]
    Pem(String),
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// What a connection's client certificate says about its peer.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerIdentity {
    /// No certificate was presented.
    None,
    /// A certificate issued by our CA and valid now.
    Verified(UserInfo),
    /// A certificate we do not trust (another CA, expired, not for client auth).
    Untrusted,
}

/// Accepts any client certificate during the handshake (after checking the client's
/// signature) so that trust can be decided per request.
#[derive(Debug)]
struct RequestClientCert {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The TLS side of a secured control plane.
pub struct TlsSetup {
    pub config: Arc<ServerConfig>,
    trust: Arc<dyn ClientCertVerifier>,
}

impl TlsSetup {
    pub fn new(pki: &Pki) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        let ca = CertificateDer::from_pem_slice(pki.ca.cert_pem().as_bytes())
            .map_err(|e| TlsError::Pem(e.to_string()))?;
        roots
            .add(ca.clone())
            .map_err(|e| TlsError::Pem(e.to_string()))?;
        let trust = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let mut chain = vec![
            CertificateDer::from_pem_slice(pki.serving.cert_pem.as_bytes())
                .map_err(|e| TlsError::Pem(e.to_string()))?,
        ];
        chain.push(ca);
        let key = PrivateKeyDer::from_pem_slice(pki.serving.key_pem.as_bytes())
            .map_err(|e| TlsError::Pem(e.to_string()))?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_client_cert_verifier(Arc::new(RequestClientCert {
                inner: trust.clone(),
            }))
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsSetup {
            config: Arc::new(config),
            trust,
        })
    }

    /// Decides who a connection's certificate chain (leaf first) names.
    pub fn identify(&self, chain: Option<&[CertificateDer<'static>]>) -> PeerIdentity {
        let Some((leaf, intermediates)) = chain.and_then(|c| c.split_first()) else {
            return PeerIdentity::None;
        };
        if self
            .trust
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .is_err()
        {
            return PeerIdentity::Untrusted;
        }
        match super::authn::certificate_user(leaf) {
            Some(u) => PeerIdentity::Verified(u),
            None => PeerIdentity::Untrusted,
        }
    }
}
