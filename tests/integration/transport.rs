//! Clients for a control plane running in the same process reach it without a socket, and are
//! still exactly who their credentials say: certificate users and bootstrap tokens get their own
//! rights, a stopped plane refuses them, a plane started again at the address serves them again.
//!
//! One test, so that nothing else in this binary opens file descriptors while it counts them.

use std::time::Duration;

use base64::Engine;
use fleetform::api::bootstrap_token::{bootstrap_kubeconfig, token_secret};
use fleetform::reconciler::tokens::BOOTSTRAP_TOKEN_TTL;
use fleetform::transport;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, PostParams, WatchParams};
use kube::{Api, Client};
use serde_json::json;

/// Open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| dir.count())
        .unwrap_or(0)
}

/// A kubeconfig for `server` authenticating as `user` in `groups` by a certificate of the
/// plane's CA.
fn certificate_kubeconfig(
    plane: &fleetform_controlplane::RunningControlPlane,
    user: &str,
    groups: &[&str],
) -> String {
    let ca = plane.certificate_authority().expect("a secured plane");
    let now = time::OffsetDateTime::now_utc();
    let issued = ca
        .issue_client(
            user,
            groups,
            now - time::Duration::minutes(1),
            now + time::Duration::hours(1),
        )
        .expect("issue a client certificate");
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": plane.url(), "certificate-authority-data": b64(ca.cert_pem())}}],
        "users": [{"name": "u", "user": {"client-certificate-data": b64(&issued.cert_pem), "client-key-data": b64(&issued.key_pem)}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    })
    .to_string()
}

/// `count` watches of `api`'s ConfigMaps, each returned once the server has answered: established.
async fn watching(
    api: &Api<ConfigMap>,
    count: usize,
) -> Vec<futures::stream::BoxStream<'static, kube::Result<kube::api::WatchEvent<ConfigMap>>>> {
    let mut watches = Vec::new();
    for _ in 0..count {
        let stream = api
            .watch(&WatchParams::default(), "0")
            .await
            .expect("watching")
            .boxed();
        watches.push(stream);
    }
    watches
}

/// A TCP proxy to `target` on a port of its own: its URL, and how many connections it accepted.
async fn counting_proxy(
    target: std::net::SocketAddr,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (url, accepted)
}

/// The status code and message of the refusal a client of `kubeconfig` gets listing namespaces.
async fn listing_namespaces_refused(kubeconfig: &str) -> (u16, String) {
    let client = transport::client_from_kubeconfig(kubeconfig)
        .await
        .expect("a client");
    match Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn in_process_clients_need_no_socket_and_keep_their_identity() {
    // Owner-only, as a control plane's data directory must be.
    let dir = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap();
    let plane = fleetform::embedded::builder()
        .data_dir(Some(dir.path().to_path_buf()))
        .start()
        .await
        .expect("control plane starts");
    let addr = plane.addr();
    let served = transport::serve_locally(&plane);
    let admin = transport::client_from_kubeconfig(&plane.kubeconfig())
        .await
        .expect("admin client");

    // Fifty watches cost no file descriptor (over the network, each is a connection, and both
    // of its ends would be in this process).
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    configmaps.list(&ListParams::default()).await.expect("list");
    let before = open_fds();
    let watches = watching(&configmaps, 50).await;
    let opened = open_fds().saturating_sub(before);
    assert!(
        opened < 10,
        "50 in-process watches opened {opened} file descriptors"
    );
    drop(watches);

    // A certificate user is only who the certificate names: no rights but its own.
    let (code, message) =
        listing_namespaces_refused(&certificate_kubeconfig(&plane, "nobody", &[])).await;
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("\"nobody\""), "{message}");

    // A bootstrap token authenticates as its bootstrap group; a token nobody issued as nobody.
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &token_secret(
                "spoke-1",
                "abcdef",
                "0123456789abcdef",
                Timestamp::now().checked_add(BOOTSTRAP_TOKEN_TTL).unwrap(),
            ),
        )
        .await
        .expect("store the bootstrap token");
    let ca_pem = plane
        .certificate_authority()
        .unwrap()
        .cert_pem()
        .to_string();
    let with_token = |token: &str| bootstrap_kubeconfig(&plane.url(), &ca_pem, token);
    let (code, message) = listing_namespaces_refused(&with_token("abcdef.0123456789abcdef")).await;
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("system:bootstrap:abcdef"), "{message}");
    let (code, message) = listing_namespaces_refused(&with_token("abcdef.ffffffffffffffff")).await;
    assert_eq!(code, 401, "{message}");

    // Over the network a client speaks HTTP/2, as client-go does with kube-apiserver: its
    // watches and requests share one connection (over HTTP/1.1 each watch holds its own).
    let (proxy_url, connections) = counting_proxy(addr).await;
    let kubeconfig = certificate_kubeconfig(&plane, "admin", &["system:masters"])
        .replace(&plane.url(), &proxy_url);
    let remote = transport::client_from_kubeconfig(&kubeconfig)
        .await
        .expect("a network client");
    let configmaps: Api<ConfigMap> = Api::namespaced(remote.clone(), "default");
    configmaps.list(&ListParams::default()).await.expect("list");
    let mut watches = watching(&configmaps, 5).await;
    let mut configmap = ConfigMap::default();
    configmap.metadata.name = Some("over-http2".into());
    configmaps
        .create(&PostParams::default(), &configmap)
        .await
        .expect("create while five watches are open");
    for watch in &mut watches {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("every watch sees the create");
        assert!(
            matches!(event, Some(Ok(kube::api::WatchEvent::Added(_)))),
            "{event:?}"
        );
    }
    assert_eq!(
        connections.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "a list, five watches and a create over the network"
    );
    drop(watches);

    // A stopped plane refuses, as a closed port would.
    plane.shutdown().await;
    let refused = Api::<Namespace>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .expect_err("a stopped plane answers");
    assert!(
        format!("{refused:?}").contains("ConnectionRefused"),
        "{refused:?}"
    );
    drop(served);

    // Started again at its address, it serves the same client again.
    let plane = fleetform::embedded::builder()
        .data_dir(Some(dir.path().to_path_buf()))
        .listen(addr)
        .start()
        .await
        .expect("control plane restarts");
    let _served = transport::serve_locally(&plane);
    let listed = tokio::time::timeout(
        Duration::from_secs(10),
        Api::<Secret>::namespaced(admin.clone(), "kube-system").list(&ListParams::default()),
    )
    .await
    .expect("an answer")
    .expect("the restarted plane serves the old client");
    assert!(
        listed
            .items
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some("bootstrap-token-abcdef"))
    );
    let _: Client = admin;
}
