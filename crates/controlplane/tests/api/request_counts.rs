//! The request counter: what a client sends is what the server counts, by verb and resource.

use crate::common::{TestPlane, client_from_kubeconfig};
use fleetform_controlplane::ControlPlane;
use fleetform_controlplane::requests::Verb;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Creates the Lease `l` and patches it `patches` times.
async fn create_and_patch(leases: &Api<Lease>, patches: usize) {
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "l"}})).unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    for _ in 0..patches {
        leases
            .patch(
                "l",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"holderIdentity": "x"}})),
            )
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn counts_each_write_and_read_by_verb_and_resource() {
    let plane = ControlPlane::builder()
        .insecure_http()
        .start()
        .await
        .expect("control plane starts");
    let client = kube::Client::new(plane.in_process_service(), "default");
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let before = plane.request_counts();
    create_and_patch(&leases, 3).await;
    leases.get("l").await.unwrap();
    leases.list(&Default::default()).await.unwrap();
    // A dry run is counted as a request, apart, and not as a write: nothing is stored.
    leases
        .patch(
            "l",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "y"}})),
        )
        .await
        .unwrap();
    let counted = plane.request_counts().since(&before);
    assert_eq!(counted.writes(), 4, "{counted:?}");
    assert_eq!(counted.writes_to("coordination.k8s.io", "leases"), 4);
    assert_eq!(counted.total(), 7, "{counted:?}");
    let patches = |dry_run: bool| -> u64 {
        counted
            .iter()
            .filter(|(kind, _)| kind.verb == Verb::Patch && kind.dry_run == dry_run)
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!((patches(false), patches(true)), (3, 1), "{counted:?}");
    plane.shutdown().await;
}

/// Sends `GET /metrics`; its status code and text.
async fn metrics(client: &kube::Client) -> (u16, String) {
    let req = http::Request::get("/metrics")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.expect("the server answers");
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn metrics_serve_the_counts_as_kube_apiserver_names_them_to_whom_rbac_lets_read_them() {
    let t = TestPlane::start().await;
    let leases: Api<Lease> = Api::namespaced(t.client.clone(), "default");
    create_and_patch(&leases, 2).await;
    leases.list(&Default::default()).await.unwrap();

    let (code, text) = metrics(&t.client).await;
    assert_eq!(code, 200, "{text}");
    let series = |verb: &str| {
        format!(
            "apiserver_request_total{{verb=\"{verb}\",dry_run=\"\",group=\"coordination.k8s.io\",resource=\"leases\",subresource=\"\"}} "
        )
    };
    let count = |verb: &str| -> Option<u64> {
        let series = series(verb);
        text.lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .and_then(|n| n.parse().ok())
    };
    assert_eq!(count("POST"), Some(1), "{text}");
    assert_eq!(count("PATCH"), Some(2), "{text}");
    assert_eq!(count("LIST"), Some(1), "{text}");
    assert_eq!(count("GET"), None, "no single Lease was read: {text}");
    assert!(
        text.contains("# TYPE apiserver_request_total counter\n"),
        "{text}"
    );

    // Like kube-apiserver's, the page is for those RBAC lets `get` `/metrics`.
    let identities = t.plane.identities().expect("a secured control plane");
    let nobody = client_from_kubeconfig(
        &identities
            .service_account_kubeconfig("default", "nobody")
            .unwrap(),
    )
    .await;
    let (code, text) = metrics(&nobody).await;
    assert_eq!(code, 403, "{text}");
    t.plane.shutdown().await;
}
