//! The request counter: what a client sends is what the server counts, by verb and resource.

use fleetform_controlplane::ControlPlane;
use fleetform_controlplane::requests::Verb;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

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
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "l"}})).unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    for _ in 0..3 {
        leases
            .patch(
                "l",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"holderIdentity": "x"}})),
            )
            .await
            .unwrap();
    }
    leases.get("l").await.unwrap();
    leases.list(&Default::default()).await.unwrap();
    let counted = plane.request_counts().since(&before);
    assert_eq!(counted.writes(), 4, "{counted:?}");
    assert_eq!(counted.writes_to("coordination.k8s.io", "leases"), 4);
    assert_eq!(counted.total(), 6, "{counted:?}");
    let patches: u64 = counted
        .iter()
        .filter(|(kind, _)| kind.verb == Verb::Patch)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(patches, 3);
    plane.shutdown().await;
}
