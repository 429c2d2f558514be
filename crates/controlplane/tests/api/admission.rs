//! Admission plugins over HTTP: what a plugin is shown for each kind of write (create, update,
//! subresource update, patch, server-side apply, delete, dry run), that it may change the object
//! and deny the request (answered as a webhook's denial, administrators included), that plugins
//! run in order, that one may ask RBAC what the requester may do, and that writes racing on
//! one object, each admitted apart, all land.

use crate::common;

use std::sync::{Arc, Mutex};

use fleetform_controlplane::admission::{
    AdmissionPlugin, AdmissionRequest, Denial, Operation, ResourceAccess,
};
use fleetform_controlplane::{ControlPlane, RunningControlPlane};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const TOKEN: &str = "alice-admission-token";

/// Stamps configmaps, refuses `forbidden` labels and `protected` deletes, lets only those who
/// may `create` `configmaps/approve` set `data.approved`, and writes down what it saw.
struct Gatekeeper {
    seen: Mutex<Vec<String>>,
}

impl AdmissionPlugin for Gatekeeper {
    fn name(&self) -> &str {
        "gatekeeper.example.com"
    }

    fn admit(&self, r: &mut AdmissionRequest<'_>) -> Result<(), Denial> {
        self.seen.lock().unwrap().push(format!(
            "{} {}/{}/{} {}/{} sub={:?} by {} ({}) dry={} old={}",
            r.operation.as_str(),
            r.group,
            r.version,
            r.resource,
            r.namespace,
            r.name,
            r.subresource,
            r.user.name,
            r.user.groups.join(","),
            r.dry_run,
            r.old_object.is_some(),
        ));
        if r.resource != "configmaps" {
            return Ok(());
        }
        if r.operation == Operation::Delete {
            let protected = r
                .old_object
                .and_then(|o| o.pointer("/metadata/labels/protected"))
                .is_some();
            return match protected {
                true => Err(Denial::forbidden("protected configmaps stay")),
                false => Ok(()),
            };
        }
        let Some(object) = r.object.as_mut() else {
            return Ok(());
        };
        if object.pointer("/metadata/labels/forbidden").is_some() {
            return Err(Denial::forbidden("the label forbidden may not be set"));
        }
        let approved =
            |o: Option<&Value>| o.and_then(|o| o.pointer("/data/approved")) == Some(&json!("true"));
        if approved(Some(object)) && !approved(r.old_object) {
            let may = r.authorizer.allowed(
                r.user,
                &ResourceAccess {
                    verb: "create",
                    group: "",
                    resource: "configmaps",
                    subresource: "approve",
                    namespace: r.namespace,
                    name: r.name,
                },
            );
            if !may {
                return Err(Denial::forbidden(format!(
                    "user {} cannot approve configmap {}",
                    r.user.name, r.name
                )));
            }
        }
        object["metadata"]["annotations"]["example.com/stamped-by"] = json!(r.user.name);
        Ok(())
    }
}

/// Runs after the gatekeeper: proves the order by copying its stamp, and sets a value the
/// server must refuse when asked to.
struct Second;

impl AdmissionPlugin for Second {
    fn name(&self) -> &str {
        "second.example.com"
    }

    fn admit(&self, r: &mut AdmissionRequest<'_>) -> Result<(), Denial> {
        let Some(object) = r.object.as_mut().filter(|_| r.resource == "configmaps") else {
            return Ok(());
        };
        let stamp = object
            .pointer("/metadata/annotations/example.com~1stamped-by")
            .cloned();
        if let Some(stamp) = stamp {
            object["data"]["seen-stamp"] = stamp;
        }
        if object.pointer("/data/break").is_some() {
            object["metadata"]["labels"]["bad label"] = json!("x");
        }
        // Server-owned metadata is not the plugin's to change.
        object["metadata"]["uid"] = json!("forged");
        Ok(())
    }
}

struct Plane {
    plane: RunningControlPlane,
    gatekeeper: Arc<Gatekeeper>,
    admin: kube::Client,
    _dir: tempfile::TempDir,
}

async fn start() -> Plane {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{TOKEN},alice,1001,\"dev\"\n")).unwrap();
    let gatekeeper = Arc::new(Gatekeeper {
        seen: Mutex::new(Vec::new()),
    });
    let plane = ControlPlane::builder()
        .token_auth_file(tokens)
        .admission(gatekeeper.clone())
        .admission(Arc::new(Second))
        .start()
        .await
        .expect("control plane starts");
    let admin = common::client_from_kubeconfig(&plane.kubeconfig()).await;
    Plane {
        plane,
        gatekeeper,
        admin,
        _dir: dir,
    }
}

impl Plane {
    async fn alice(&self) -> kube::Client {
        let mut kc: Value = serde_json::from_str(&self.plane.kubeconfig()).unwrap();
        kc["users"][0]["user"] = json!({"token": TOKEN});
        common::client_from_kubeconfig(&kc.to_string()).await
    }

    fn seen(&self) -> Vec<String> {
        std::mem::take(&mut self.gatekeeper.seen.lock().unwrap())
    }

    async fn grant(&self, name: &str, rules: Value) {
        let role: ClusterRole = serde_json::from_value(json!({
            "metadata": {"name": name}, "rules": rules}))
        .unwrap();
        Api::<ClusterRole>::all(self.admin.clone())
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}))
        .unwrap();
        Api::<RoleBinding>::namespaced(self.admin.clone(), "default")
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }
}

fn cm(name: &str, labels: Value, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": data}))
        .unwrap()
}

fn annotation(c: &ConfigMap) -> Option<&str> {
    c.metadata
        .annotations
        .as_ref()?
        .get("example.com/stamped-by")
        .map(String::as_str)
}

#[tokio::test]
async fn plugins_see_every_write_change_objects_and_deny_as_webhooks() {
    let p = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(p.admin.clone());
    p.seen();

    let created = api
        .create(
            &PostParams::default(),
            &cm("a", json!({}), json!({"k": "v"})),
        )
        .await
        .unwrap();
    assert_eq!(annotation(&created), Some("system:admin"), "mutated");
    assert_eq!(
        created.data.as_ref().unwrap()["seen-stamp"],
        "system:admin",
        "the second plugin ran after the first"
    );
    assert_ne!(
        created.metadata.uid.as_deref(),
        Some("forged"),
        "server-owned metadata stays the server's"
    );
    assert_eq!(
        api.get("a").await.unwrap().metadata.uid,
        created.metadata.uid
    );

    let denied = common::api_error(
        api.create(
            &PostParams::default(),
            &cm("b", json!({"forbidden": "yes"}), json!({})),
        )
        .await,
    );
    assert_eq!(
        (denied.code, denied.reason.as_str(), denied.message.as_str()),
        (
            403,
            "Forbidden",
            r#"admission webhook "gatekeeper.example.com" denied the request: the label forbidden may not be set"#
        )
    );
    let dry = common::api_error(
        api.create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &cm("b", json!({"forbidden": "yes"}), json!({})),
        )
        .await,
    );
    assert_eq!(dry.code, 403, "dry runs are admitted too");

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "w");
    let denied = common::api_error(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"forbidden": "x"}}})),
        )
        .await,
    );
    assert_eq!(denied.code, 403, "the patched object is admitted");
    let mut replaced = api.get("a").await.unwrap();
    replaced
        .data
        .as_mut()
        .unwrap()
        .insert("break".into(), "1".into());
    let invalid = common::api_error(api.replace("a", &PostParams::default(), &replaced).await);
    assert_eq!(invalid.code, 422, "a plugin's change is validated");
    assert!(invalid.message.contains("bad label"), "{}", invalid.message);

    let applied = api
        .patch(
            "c",
            &PatchParams::apply("tester"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "labels": {"protected": "yes"}}})),
        )
        .await
        .unwrap();
    assert_eq!(annotation(&applied), Some("system:admin"));
    let denied = common::api_error(api.delete("c", &DeleteParams::default()).await);
    assert_eq!(
        denied.message,
        r#"admission webhook "gatekeeper.example.com" denied the request: protected configmaps stay"#
    );
    api.delete("a", &DeleteParams::default()).await.unwrap();

    let deployments: Api<Deployment> = Api::default_namespaced(p.admin.clone());
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "web:1"}]}}}}))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    deployments
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 1}})),
        )
        .await
        .unwrap();

    let admin = "system:admin (system:masters,system:authenticated)";
    assert_eq!(
        p.seen(),
        [
            format!("CREATE /v1/configmaps default/a sub=\"\" by {admin} dry=false old=false"),
            format!("CREATE /v1/configmaps default/b sub=\"\" by {admin} dry=false old=false"),
            format!("CREATE /v1/configmaps default/b sub=\"\" by {admin} dry=true old=false"),
            format!("UPDATE /v1/configmaps default/a sub=\"\" by {admin} dry=false old=true"),
            format!("UPDATE /v1/configmaps default/a sub=\"\" by {admin} dry=false old=true"),
            format!("UPDATE /v1/configmaps default/a sub=\"\" by {admin} dry=false old=true"),
            format!("CREATE /v1/configmaps default/c sub=\"\" by {admin} dry=false old=false"),
            format!("DELETE /v1/configmaps default/c sub=\"\" by {admin} dry=false old=true"),
            format!("DELETE /v1/configmaps default/a sub=\"\" by {admin} dry=false old=true"),
            format!(
                "CREATE apps/v1/deployments default/web sub=\"\" by {admin} dry=false old=false"
            ),
            format!(
                "UPDATE apps/v1/deployments default/web sub=\"status\" by {admin} dry=false old=true"
            ),
        ]
    );
}

#[tokio::test]
async fn plugins_ask_rbac_what_the_requester_may_do() {
    let p = start().await;
    p.grant(
        "edit-configmaps",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "patch"]}]),
    )
    .await;
    let alice: Api<ConfigMap> = Api::default_namespaced(p.alice().await);
    let created = alice
        .create(&PostParams::default(), &cm("req", json!({}), json!({})))
        .await
        .unwrap();
    assert_eq!(annotation(&created), Some("alice"));
    let approve = Patch::Merge(json!({"data": {"approved": "true"}}));
    let denied = common::api_error(alice.patch("req", &PatchParams::default(), &approve).await);
    assert_eq!(
        (denied.code, denied.message.as_str()),
        (
            403,
            r#"admission webhook "gatekeeper.example.com" denied the request: user alice cannot approve configmap req"#
        )
    );
    p.grant(
        "approve-configmaps",
        json!([{"apiGroups": [""], "resources": ["configmaps/approve"], "verbs": ["create"]}]),
    )
    .await;
    let approved = alice
        .patch("req", &PatchParams::default(), &approve)
        .await
        .expect("allowed once RBAC grants create on configmaps/approve");
    assert_eq!(approved.data.unwrap()["approved"], "true");
    let seen = p.seen();
    assert!(
        seen.iter()
            .any(|s| s.starts_with("UPDATE /v1/configmaps default/req")
                && s.contains("by alice (dev,system:authenticated)")),
        "{seen:?}"
    );
    // The in-process transport is an administrator, and still admitted.
    let in_process = kube::Client::new(p.plane.in_process_service(), "default");
    let denied = common::api_error(
        Api::<ConfigMap>::default_namespaced(in_process)
            .create(
                &PostParams::default(),
                &cm("x", json!({"forbidden": "1"}), json!({})),
            )
            .await,
    );
    assert_eq!(denied.code, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_patches_of_one_object_all_land() {
    let p = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(p.admin.clone());
    api.create(&PostParams::default(), &cm("shared", json!({}), json!({})))
        .await
        .unwrap();
    let writers: Vec<_> = (0..32)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(async move {
                let patch = Patch::Merge(json!({"data": {format!("k{i}"): "v"}}));
                api.patch("shared", &PatchParams::default(), &patch).await
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap().expect("every patch lands");
    }
    let data = api.get("shared").await.unwrap().data.unwrap();
    for i in 0..32 {
        assert!(data.contains_key(&format!("k{i}")), "k{i} in {data:?}");
    }
}
