//! No credential reaches a log line: requests with wrong, expired and valid tokens and a
//! start with a bad token file are logged at debug level and the output is searched.

use std::io::Write;
use std::sync::{Arc, Mutex};

use fleetform_controlplane::ControlPlane;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const STATIC_TOKEN: &str = "s3cr3t-static-token-value";
const BOOTSTRAP_SECRET: &str = "0123456789abcdef";
const WRONG_TOKEN: &str = "wr0ng-token-never-valid";

async fn client_with_token(kubeconfig: &str, token: &str) -> kube::Client {
    let mut kc: Value = serde_json::from_str(kubeconfig).unwrap();
    kc["users"][0]["user"] = json!({"token": token});
    let kc = kube::config::Kubeconfig::from_yaml(&kc.to_string()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

// Single-threaded so the control plane's tasks log through this test's subscriber.
#[tokio::test(flavor = "current_thread")]
async fn tokens_and_keys_never_appear_in_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().unwrap();
    let bad_file = dir.path().join("bad.csv");
    std::fs::write(&bad_file, format!("{STATIC_TOKEN},onlyuser\n")).unwrap();
    let err = ControlPlane::builder()
        .token_auth_file(bad_file)
        .start()
        .await
        .err()
        .expect("a malformed token file is refused");
    tracing::error!(error = %err, "start failed");
    assert!(!err.to_string().contains(STATIC_TOKEN));

    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{STATIC_TOKEN},alice,1\n")).unwrap();
    let plane = ControlPlane::builder()
        .data_dir(Some(dir.path().join("data")))
        .token_auth_file(tokens)
        .start()
        .await
        .unwrap();
    let kubeconfig = plane.kubeconfig();
    let admin = {
        let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    };
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": "abcdef", "token-secret": BOOTSTRAP_SECRET,
            "usage-bootstrap-authentication": "true", "expiration": "2020-01-01T00:00:00Z"}}))
    .unwrap();
    Api::<Secret>::namespaced(admin, "kube-system")
        .create(&PostParams::default(), &s)
        .await
        .unwrap();
    for token in [
        WRONG_TOKEN.to_string(),
        format!("abcdef.{BOOTSTRAP_SECRET}"),
        STATIC_TOKEN.to_string(),
    ] {
        let c = client_with_token(&kubeconfig, &token).await;
        let r = Api::<ConfigMap>::namespaced(c, "default")
            .list(&ListParams::default())
            .await;
        assert!(r.is_err(), "nobody here may list configmaps");
    }
    plane.shutdown().await;

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("bootstrap token rejected"),
        "logs were captured:\n{logs}"
    );
    let key_b64_marker = "PRIVATE KEY";
    for secret in [STATIC_TOKEN, BOOTSTRAP_SECRET, WRONG_TOKEN, key_b64_marker] {
        assert!(!logs.contains(secret), "{secret:?} leaked into:\n{logs}");
    }
}
