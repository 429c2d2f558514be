//! Shared test fixtures: a control plane per test on an ephemeral port, and a kube client.
#![allow(dead_code)]

use std::time::Duration;

use fleetform_controlplane::{ControlPlane, ControlPlaneBuilder, RunningControlPlane};

/// A control plane and a client pointed at it.
pub struct TestPlane {
    pub plane: RunningControlPlane,
    pub client: kube::Client,
}

impl TestPlane {
    pub async fn start() -> Self {
        Self::with(ControlPlane::builder()).await
    }

    pub async fn with(builder: ControlPlaneBuilder) -> Self {
        let plane = builder.start().await.expect("control plane starts");
        let client = client_from_kubeconfig(&plane.kubeconfig()).await;
        TestPlane { plane, client }
    }
}

/// A kube client from a kubeconfig the control plane handed out (TLS and the admin
/// certificate by default), default namespace `default`.
pub async fn client_from_kubeconfig(kubeconfig: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).expect("valid kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("usable kubeconfig");
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).expect("client builds")
}

/// A kube client for a plain-HTTP URL, default namespace `default`.
pub fn client_for(url: &str) -> kube::Client {
    let mut config = kube::Config::new(url.parse().expect("valid url"));
    config.default_namespace = "default".into();
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).expect("client builds")
}

/// An owner-only temporary directory, as a control plane's data directory must be.
pub fn private_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .expect("temporary directory")
}

/// A clock for the watch history that moves only when a test advances it, so that minutes of
/// history are data, not waiting.
#[derive(Debug)]
pub struct ManualClock(std::sync::Mutex<std::time::Instant>);

impl ManualClock {
    pub fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(ManualClock(
            std::sync::Mutex::new(std::time::Instant::now()),
        ))
    }

    pub fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl fleetform_controlplane::Clock for ManualClock {
    fn now(&self) -> std::time::Instant {
        *self.0.lock().unwrap()
    }
}

/// A signed PKCS#10 request for `cn`, as a CSR's `spec.request` holds it (base64 of its PEM):
/// kube-apiserver refuses a CSR whose request is anything else.
pub fn csr_request(cn: &str) -> String {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let pem = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .expect("a CSR");
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// A PEM certificate (self-signed for `cn`), as a signer writes into a CSR's
/// `status.certificate`.
pub fn certificate_pem(cn: &str) -> String {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.self_signed(&key).expect("a certificate").pem()
}

/// Unwraps an API error response.
pub fn api_error<T: std::fmt::Debug>(r: kube::Result<T>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}
