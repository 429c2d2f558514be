//! `deploy/` and the Dockerfile: `deploy/` is exactly what fleetform renders (the install set of
//! `fleetform install`, the agent as the reconciler installs it), every manifest parses and
//! applies to a Kubernetes API server and references only what exists (ServiceAccounts,
//! ClusterRoles, fleetform commands and flags, the image), and the Dockerfile copies only what
//! the repository has.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fleetform::reconciler::install::DEFAULT_AGENT_IMAGE;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::discovery::Discovery;
use kube::{Api, Client};
use serde_json::Value;

const BLESS_VAR: &str = "FLEETFORM_BLESS";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every document of every manifest under `deploy/` (the kustomization is not one), with the
/// file it came from.
fn manifests() -> Vec<(PathBuf, Value)> {
    let mut documents = Vec::new();
    for path in files_under(&root().join("deploy")) {
        if path.extension().is_none_or(|ext| ext != "yaml") || path.ends_with("kustomization.yaml")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            if !value.is_null() {
                documents.push((path.clone(), value));
            }
        }
    }
    documents
}

fn of_kind<'a>(documents: &'a [(PathBuf, Value)], kind: &str) -> Vec<&'a Value> {
    documents
        .iter()
        .map(|(_, value)| value)
        .filter(|value| value["kind"] == kind)
        .collect()
}

fn name(value: &Value) -> String {
    let metadata = &value["metadata"];
    match metadata["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{}", metadata["name"].as_str().unwrap_or("")),
        None => metadata["name"].as_str().unwrap_or("").to_string(),
    }
}

#[test]
fn deploy_is_what_fleetform_renders() {
    let bless = std::env::var_os(BLESS_VAR).is_some();
    let mut stale = Vec::new();
    let mut generated = BTreeSet::new();
    for (path, contents) in fleetform::deploy::manifests::deploy_files() {
        let file = root().join("deploy").join(&path);
        if bless {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, &contents).unwrap();
        }
        if std::fs::read_to_string(&file).ok().as_deref() != Some(contents.as_str()) {
            stale.push(path.clone());
        }
        generated.insert(file);
    }
    assert!(
        stale.is_empty(),
        "deploy/ differs from what fleetform renders ({}); regenerate with `{BLESS_VAR}=1 cargo \
         test --test integration deploy::`",
        stale.join(", ")
    );
    // Nothing else in deploy/ but the READMEs: a manifest left there would be in no install.
    let others: Vec<PathBuf> = files_under(&root().join("deploy"))
        .into_iter()
        .filter(|file| !generated.contains(file) && !file.ends_with("README.md"))
        .collect();
    assert!(others.is_empty(), "not generated: {others:?}");
}

#[test]
fn manifests_reference_only_what_exists() {
    let documents = manifests();
    assert!(!documents.is_empty());
    let service_accounts: BTreeSet<String> = of_kind(&documents, "ServiceAccount")
        .into_iter()
        .map(name)
        .collect();
    let cluster_roles: BTreeSet<String> = of_kind(&documents, "ClusterRole")
        .into_iter()
        .map(name)
        .collect();
    for binding in of_kind(&documents, "ClusterRoleBinding") {
        let role = binding["roleRef"]["name"].as_str().unwrap_or("");
        assert!(
            cluster_roles.contains(role),
            "ClusterRoleBinding {} binds the unknown ClusterRole {role}",
            name(binding)
        );
        for subject in binding["subjects"].as_array().into_iter().flatten() {
            let account = format!(
                "{}/{}",
                subject["namespace"].as_str().unwrap_or(""),
                subject["name"].as_str().unwrap_or("")
            );
            assert!(
                service_accounts.contains(&account),
                "ClusterRoleBinding {} binds the unknown ServiceAccount {account}",
                name(binding)
            );
        }
    }
    let deployments = of_kind(&documents, "Deployment");
    assert!(deployments.len() >= 2, "a hub and an agent Deployment");
    for deployment in deployments {
        let pod = &deployment["spec"]["template"]["spec"];
        let account = format!(
            "{}/{}",
            deployment["metadata"]["namespace"].as_str().unwrap_or(""),
            pod["serviceAccountName"].as_str().unwrap_or("")
        );
        assert!(
            service_accounts.contains(&account),
            "Deployment {} runs as the unknown ServiceAccount {account}",
            name(deployment)
        );
        for container in pod["containers"].as_array().into_iter().flatten() {
            let image = container["image"].as_str().unwrap_or("");
            assert!(
                image.starts_with(&format!("{DEFAULT_AGENT_IMAGE}:")),
                "Deployment {} runs {image}, not fleetform's image",
                name(deployment)
            );
            let args: Vec<&str> = container["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if let Err(err) = fleetform::cli::check_args(&args) {
                panic!(
                    "Deployment {} runs `fleetform {}`, which fleetform refuses:\n{err}",
                    name(deployment),
                    args.join(" ")
                );
            }
        }
    }
    // The CRDs are the ones fleetform generates (src/api keeps deploy/crds current).
    let crds: BTreeSet<String> = of_kind(&documents, "CustomResourceDefinition")
        .into_iter()
        .map(name)
        .collect();
    let generated: BTreeSet<String> = fleetform::api::crds()
        .into_iter()
        .filter_map(|crd| crd.metadata.name)
        .collect();
    assert_eq!(crds, generated);
}

#[test]
fn the_dockerfile_copies_what_the_repository_has_and_builds_fleetform() {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let mut copies = 0;
    for line in dockerfile.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("COPY ") else {
            continue;
        };
        if rest.starts_with("--from") {
            continue;
        }
        let parts: Vec<&str> = rest.split_whitespace().collect();
        for source in &parts[..parts.len().saturating_sub(1)] {
            copies += 1;
            assert!(
                Path::new(&root()).join(source).exists(),
                "the Dockerfile copies {source}, which the repository does not have"
            );
        }
    }
    assert!(copies > 0);
    assert!(dockerfile.contains("--bin fleetform"));
    assert!(dockerfile.contains("ENTRYPOINT [\"/usr/local/bin/fleetform\"]"));
}

#[tokio::test]
async fn every_manifest_applies_to_an_api_server() {
    let server = fleetform::embedded::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .start()
        .await
        .unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(config).unwrap();
    let mut documents = manifests();
    // CRDs and namespaces first, as `kubectl apply -f deploy/ -R` would need them.
    documents.sort_by_key(|(_, value)| match value["kind"].as_str() {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    });
    let mut discovery: Option<Discovery> = None;
    for (path, document) in &documents {
        if document["kind"] != "CustomResourceDefinition" && discovery.is_none() {
            discovery = Some(Discovery::new(client.clone()).run().await.unwrap());
        }
        let api_version = document["apiVersion"].as_str().unwrap_or("");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = document["kind"].as_str().unwrap_or("");
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = match &discovery {
            Some(discovery) => discovery.resolve_gvk(&gvk).unwrap_or_else(|| {
                panic!("{}: the server has no {api_version} {kind}", path.display())
            }),
            None => kube::discovery::pinned_kind(&client, &gvk).await.unwrap(),
        };
        let api: Api<DynamicObject> = match document["metadata"]["namespace"].as_str() {
            Some(namespace) if capabilities.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        let object_name = document["metadata"]["name"].as_str().unwrap_or("");
        api.patch(
            object_name,
            &PatchParams::apply("deploy-test").force(),
            &Patch::Apply(document),
        )
        .await
        .unwrap_or_else(|err| panic!("{}: {kind} {object_name}: {err}", path.display()));
    }
    server.shutdown().await;
}

/// Every workload fleetform installs (the hub Deployment, the agent Deployment) passes PodSecurity
/// `restricted`, so it runs in a namespace that enforces it.
#[test]
fn every_workload_passes_pod_security_restricted() {
    let documents = manifests();
    let deployments = of_kind(&documents, "Deployment");
    let names: BTreeSet<String> = deployments.iter().map(|d| name(d)).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "fleetform-system/fleetform-hub".to_string(),
            "open-cluster-management-agent/fleetform-agent".to_string()
        ])
    );
    for deployment in deployments {
        let broken = crate::support::pod_security::restricted_violations(
            &deployment["spec"]["template"]["spec"],
        );
        assert!(broken.is_empty(), "{}: {broken:#?}", name(deployment));
    }
}
