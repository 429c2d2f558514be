//! Property test: malformed paths, queries, content types and bodies never panic the server
//! and never produce a 500; the server stays healthy afterwards.

use crate::common;

use common::TestPlane;
use proptest::prelude::*;
use serde_json::{Value, json};

const SEGMENTS: &[&str] = &[
    "api",
    "apis",
    "v1",
    "v2",
    "namespaces",
    "default",
    "kube-system",
    "configmaps",
    "secrets",
    "apps",
    "deployments",
    "status",
    "approval",
    "finalize",
    "watch",
    "nodes",
    "leases",
    "certificates.k8s.io",
    "certificatesigningrequests",
    "apiextensions.k8s.io",
    "customresourcedefinitions",
    "openapi",
    "v3",
    "version",
    "healthz",
    "x",
    "%zz",
    "..",
    "a%2Fb",
    "UPPER",
    "name-1",
];

const QUERIES: &[&str] = &[
    "",
    "watch=true&timeoutSeconds=1",
    "watch=1&resourceVersion=abc",
    "labelSelector=a%20in%20(",
    "labelSelector=!!",
    "fieldSelector=spec.x%3D1",
    "fieldSelector=metadata.name",
    "limit=-5",
    "limit=abc",
    "continue=%%%",
    "continue=eyJydiI6MX0=",
    "dryRun=Nope",
    "dryRun=All",
    "propagationPolicy=Sideways",
    "force=maybe",
    "fieldManager=",
    "resourceVersion=-1&watch=true&timeoutSeconds=1",
    "sendInitialEvents=true&watch=true&timeoutSeconds=1",
    "includeObject=Everything",
];

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "text/plain",
    "application/vnd.kubernetes.protobuf",
    "",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z0-9:/ ._-]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("metadata".to_string()),
                    Just("name".to_string()),
                    Just("spec".to_string()),
                    Just("status".to_string()),
                    Just("apiVersion".to_string()),
                    Just("kind".to_string()),
                    Just("finalizers".to_string()),
                    Just("labels".to_string()),
                    Just("op".to_string()),
                    Just("path".to_string()),
                    Just("value".to_string()),
                    Just("data".to_string()),
                    Just("resourceVersion".to_string()),
                    Just("ownerReferences".to_string()),
                    "[a-z$]{1,6}",
                ],
                inner,
                0..5,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        json_value().prop_map(|spec| json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fuzz", "finalizers": spec.clone()}, "data": spec})
        .to_string()
        .into_bytes()),
    ]
}

fn request() -> impl Strategy<Value = (String, String, String, String, Vec<u8>)> {
    (
        prop::sample::select(vec!["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
        prop::collection::vec(prop::sample::select(SEGMENTS.to_vec()), 0..7),
        prop::sample::select(QUERIES.to_vec()),
        prop::sample::select(CONTENT_TYPES.to_vec()),
        body(),
    )
        .prop_map(|(m, segs, q, ct, b)| {
            let path = format!("/{}", segs.join("/"));
            (m.to_string(), path, q.to_string(), ct.to_string(), b)
        })
}

#[test]
fn malformed_requests_never_panic_or_500() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let t = rt.block_on(TestPlane::start());
    let client = t.client.clone();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&request(), |(method, path, query, ct, body)| {
            let uri = if query.is_empty() {
                path.clone()
            } else {
                format!("{path}?{query}")
            };
            let mut req = http::Request::builder().method(method.as_str()).uri(&uri);
            if !ct.is_empty() {
                req = req.header("Content-Type", ct.as_str());
            }
            let Ok(req) = req.body(body.clone()) else {
                return Ok(());
            };
            let status = rt.block_on(async {
                let resp = client.send(req.map(kube::client::Body::from)).await;
                resp.map(|r| r.status().as_u16())
            });
            match status {
                Ok(code) => prop_assert!(code < 500, "{method} {uri} ({ct}) answered {code}"),
                Err(e) => prop_assert!(false, "{method} {uri}: transport error {e}"),
            }
            Ok(())
        })
        .unwrap();
    let health: String = rt
        .block_on(client.request_text(http::Request::get("/readyz").body(Vec::new()).unwrap()))
        .unwrap();
    assert_eq!(health, "ok");
}
