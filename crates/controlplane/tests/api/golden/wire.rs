//! Raw HTTPS to the control plane, as the corpus was recorded: HTTP/1.1, no User-Agent, and as
//! one of three callers: the administrator's client certificate, a bearer token with no
//! certificate, or nobody at all.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

/// Whether a request presents the administrator's client certificate (a bearer token, when
/// there is one, travels in the request's own `Authorization` header).
#[derive(Clone, Copy)]
pub enum Caller {
    Admin,
    NoCertificate,
}

/// What the server answered.
pub struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    pub warnings: Vec<String>,
    pub body: Bytes,
}

/// Connections to one control plane.
pub struct Wire {
    addr: SocketAddr,
    admin: Arc<rustls::ClientConfig>,
    nobody: Arc<rustls::ClientConfig>,
}

/// How long one request (a watch included) may take before the replay calls it a difference.
const REQUEST_DEADLINE: Duration = Duration::from_secs(60);

impl Wire {
    /// Connections to the server an admin kubeconfig points at.
    pub fn from_kubeconfig(addr: SocketAddr, kubeconfig: &str) -> Wire {
        let kc: Value = serde_yaml::from_str(kubeconfig).expect("kubeconfig parses");
        let data = |v: &Value| {
            base64::engine::general_purpose::STANDARD
                .decode(v.as_str().expect("kubeconfig data is a string"))
                .expect("kubeconfig data is base64")
        };
        let ca = data(&kc["clusters"][0]["cluster"]["certificate-authority-data"]);
        let cert = data(&kc["users"][0]["user"]["client-certificate-data"]);
        let key = data(&kc["users"][0]["user"]["client-key-data"]);

        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&ca) {
            roots.add(c.expect("CA PEM")).expect("CA certificate");
        }
        let builder = || {
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots.clone())
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert)
            .collect::<Result<_, _>>()
            .expect("client certificate PEM");
        let key = PrivateKeyDer::from_pem_slice(&key).expect("client key PEM");
        Wire {
            addr,
            admin: Arc::new(
                builder()
                    .with_client_auth_cert(chain, key)
                    .expect("client auth"),
            ),
            nobody: Arc::new(builder().with_no_client_auth()),
        }
    }

    /// Sends one request on a connection of its own and reads the whole answer (a watch until
    /// the server ends it).
    pub async fn send(
        &self,
        caller: Caller,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<Answer, String> {
        tokio::time::timeout(
            REQUEST_DEADLINE,
            self.exchange(caller, method, path, headers, body),
        )
        .await
        .map_err(|_| format!("no complete answer within {REQUEST_DEADLINE:?}"))?
    }

    async fn exchange(
        &self,
        caller: Caller,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<Answer, String> {
        let tls = match caller {
            Caller::Admin => self.admin.clone(),
            Caller::NoCertificate => self.nobody.clone(),
        };
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let name = ServerName::IpAddress(self.addr.ip().into());
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(conn);

        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("Host", self.addr.to_string());
        let mut has_accept = false;
        for (name, value) in headers {
            has_accept |= name.eq_ignore_ascii_case("accept");
            request = request.header(name.as_str(), value.as_str());
        }
        if !has_accept {
            request = request.header("Accept", "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| format!("request: {e}"))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("send: {e}"))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            content_type,
            warnings,
            body,
        })
    }
}
