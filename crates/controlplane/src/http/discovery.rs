//! Discovery and health documents: /version, /api, /api/v1, /apis, /apis/G, /apis/G/V,
//! /healthz, /livez, /readyz. `/api` and `/apis` answer aggregated discovery
//! (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) to clients that ask for it, and the
//! legacy documents otherwise; both list every resource of the registry, groups in
//! kube-apiserver's order (see [`Registry::groups`]) and resources by name.

use serde_json::{Map, Value, json};

use crate::registry::Registry;
use crate::resource::ResourceInfo;

/// The Kubernetes version this server speaks.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "gitVersion": "v1.36.0+fleetform",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// GET /api
pub fn core_versions(addr: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]})
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(json!({}));
    json!({"name": group, "versions": vs, "preferredVersion": preferred})
}

/// GET /apis
pub fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|g| group_doc(&g.group, &g.versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// GET /apis/G
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let g = registry.groups().into_iter().find(|g| g.group == name)?;
    let mut doc = group_doc(&g.group, &g.versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn strings(items: &[String]) -> Value {
    json!(items)
}

/// A resource's entries in a legacy APIResourceList: the resource, then its subresources.
fn resource_entries(info: &ResourceInfo) -> Vec<Value> {
    let mut main = Map::new();
    main.insert("name".into(), json!(info.plural));
    main.insert("singularName".into(), json!(info.singular));
    main.insert("namespaced".into(), json!(info.namespaced));
    main.insert("kind".into(), json!(info.kind));
    main.insert("verbs".into(), json!(info.verbs));
    if !info.short_names.is_empty() {
        main.insert("shortNames".into(), strings(&info.short_names));
    }
    if !info.categories.is_empty() {
        main.insert("categories".into(), strings(&info.categories));
    }
    if let Some(hash) = &info.storage_version_hash {
        main.insert("storageVersionHash".into(), json!(hash));
    }
    let mut out = vec![Value::Object(main)];
    for sub in &info.subresources {
        let mut entry = json!({
            "name": format!("{}/{}", info.plural, sub.name),
            "singularName": "",
            "namespaced": info.namespaced,
            "kind": sub.kind,
            "verbs": sub.verbs,
        });
        if let Some((group, version)) = &sub.group_version {
            entry["group"] = json!(group);
            entry["version"] = json!(version);
        }
        out.push(entry);
    }
    out
}

/// GET /api/v1 or /apis/G/V; None when the group-version is not served.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = registry.resources_in(group, version);
    if infos.is_empty() {
        return None;
    }
    let resources: Vec<Value> = infos.iter().flat_map(|i| resource_entries(i)).collect();
    // The core group's list is written without an apiVersion, as kube-apiserver writes it.
    Some(if group.is_empty() {
        json!({"kind": "APIResourceList", "groupVersion": version, "resources": resources})
    } else {
        json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"), "resources": resources})
    })
}

/// The media type of aggregated discovery answers.
pub const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an Accept header asks for aggregated discovery (v2) before anything else.
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let parts: Vec<&str> = first.split(';').map(str::trim).collect();
        parts.contains(&"as=APIGroupDiscoveryList")
            && parts.contains(&"g=apidiscovery.k8s.io")
            && parts.contains(&"v=v2")
    })
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// A resource as aggregated discovery lists it. Built-in kinds are named without their group
/// and version (they are the group-version's own); custom resources' carry them.
fn resource_discovery(info: &ResourceInfo) -> Value {
    let (group, version) = match info.custom {
        Some(_) => (info.group.as_str(), info.version.as_str()),
        None => ("", ""),
    };
    let subresources: Vec<Value> = info
        .subresources
        .iter()
        .map(|sub| {
            let kind = match &sub.group_version {
                Some((g, v)) => gvk(g, v, &sub.kind),
                None => gvk(group, version, &sub.kind),
            };
            json!({"subresource": sub.name, "responseKind": kind, "verbs": sub.verbs})
        })
        .collect();
    let mut r = json!({
        "resource": info.plural,
        "responseKind": gvk(group, version, &info.kind),
        "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": info.singular,
        "verbs": info.verbs,
    });
    if !info.short_names.is_empty() {
        r["shortNames"] = strings(&info.short_names);
    }
    if !info.categories.is_empty() {
        r["categories"] = strings(&info.categories);
    }
    if !subresources.is_empty() {
        r["subresources"] = Value::Array(subresources);
    }
    r
}

fn group_discovery(registry: &Registry, group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = registry
                .resources_in(group, v)
                .iter()
                .map(|i| resource_discovery(i))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    // The core group has no name: its metadata is empty.
    let metadata = if group.is_empty() {
        json!({})
    } else {
        json!({ "name": group })
    };
    json!({"metadata": metadata, "versions": vs})
}

/// Aggregated discovery of the core group (`/api`) or of every named group (`/apis`).
pub fn aggregated(registry: &Registry, core: bool) -> Value {
    let items = if core {
        vec![group_discovery(registry, "", &["v1".to_string()])]
    } else {
        registry
            .groups()
            .iter()
            .map(|g| group_discovery(registry, &g.group, &g.versions))
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {}, "items": items})
}

/// The checks health endpoints report.
const CHECKS: [&str; 4] = ["ping", "log", "storage", "informer-sync"];

/// Body of /healthz, /livez or /readyz.
pub fn health(endpoint: &str, verbose: bool, ready: bool) -> (u16, String) {
    let ok = endpoint != "readyz" || ready;
    let code = if ok { 200 } else { 500 };
    if !verbose {
        return (
            code,
            if ok {
                "ok".into()
            } else {
                "[-]storage failed: reason withheld\nreadyz check failed".into()
            },
        );
    }
    let mut s = String::new();
    for c in CHECKS {
        if c == "storage" && !ok {
            s.push_str("[-]storage failed: reason withheld\n");
        } else {
            s.push_str(&format!("[+]{c} ok\n"));
        }
    }
    let name = endpoint;
    if ok {
        s.push_str(&format!("{name} check passed\n"));
    } else {
        s.push_str(&format!("{name} check failed\n"));
    }
    (code, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resource_list_includes_subresources() {
        let r = Registry::with_builtins();
        let doc = resource_list(&r, "", "v1").unwrap();
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"namespaces/status"));
        assert!(names.contains(&"configmaps"));
        assert!(resource_list(&r, "nope", "v1").is_none());
    }

    fn with_crds(names: &[(&str, &str)]) -> Registry {
        let r = Registry::with_builtins();
        for (group, version) in names {
            let crd = json!({"spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": version, "served": true, "storage": true,
                    "subresources": {"status": {}}}]}});
            r.set_crd(
                &format!("widgets.{group}"),
                crate::strategy::apiextensions::resources_from_crd(&crd).unwrap(),
            );
        }
        r
    }

    #[test]
    fn groups_are_listed_in_kube_apiserver_s_order_crd_groups_last() {
        let r = with_crds(&[("zeta.example.com", "v1"), ("alpha.example.com", "v1beta1")]);
        let names: Vec<String> = group_list(&r)["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names[..4],
            [
                "apiregistration.k8s.io",
                "apps",
                "events.k8s.io",
                "authentication.k8s.io"
            ]
        );
        assert_eq!(
            names[names.len() - 3..],
            [
                "flowcontrol.apiserver.k8s.io",
                // As kube-aggregator orders APIServices of one priority: `v1.zeta...` before
                // `v1beta1.alpha...`.
                "zeta.example.com",
                "alpha.example.com",
            ]
        );
        let autoscaling = group(&r, "autoscaling").unwrap();
        assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
    }

    #[test]
    fn resources_carry_kube_apiserver_s_verbs_and_storage_hashes() {
        let r = with_crds(&[("golden.example.com", "v1")]);
        let core = resource_list(&r, "", "v1").unwrap();
        let find = |doc: &Value, name: &str| {
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == name)
                .cloned()
                .unwrap()
        };
        let namespaces = find(&core, "namespaces");
        assert_eq!(
            namespaces["verbs"],
            json!([
                "create", "delete", "get", "list", "patch", "update", "watch"
            ])
        );
        assert_eq!(namespaces["storageVersionHash"], "Q3oi5N2YM8M=");
        assert!(find(&core, "bindings").get("storageVersionHash").is_none());
        assert_eq!(find(&core, "pods/eviction")["group"], "policy");
        let crds = resource_list(&r, "apiextensions.k8s.io", "v1").unwrap();
        // kube-apiserver still stores CRDs at v1beta1.
        assert_eq!(
            find(&crds, "customresourcedefinitions")["storageVersionHash"],
            "jfWCUB31mvA="
        );
        let widgets = resource_list(&r, "golden.example.com", "v1").unwrap();
        assert_eq!(
            find(&widgets, "widgets")["storageVersionHash"],
            "FtbgEmiKtnw="
        );
        assert_eq!(find(&widgets, "widgets")["verbs"][0], "delete");
    }

    #[test]
    fn aggregated_discovery_names_kinds_of_custom_resources_only_with_their_group() {
        let r = with_crds(&[("golden.example.com", "v1")]);
        let all = aggregated(&r, false);
        let items = all["items"].as_array().unwrap();
        let apps = items
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .unwrap();
        let deployments = &apps["versions"][0]["resources"][2];
        assert_eq!(deployments["resource"], "deployments");
        assert_eq!(
            deployments["responseKind"],
            json!({"group": "", "version": "", "kind": "Deployment"})
        );
        assert_eq!(
            deployments["subresources"][0]["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
        let golden = items.last().unwrap();
        assert_eq!(
            golden["versions"][0]["resources"][0]["subresources"][0]["responseKind"],
            json!({"group": "golden.example.com", "version": "v1", "kind": "Widget"})
        );
        let core = aggregated(&r, true);
        assert_eq!(core["items"][0]["metadata"], json!({}));
    }

    #[test]
    fn verbose_health_lists_checks() {
        let (code, body) = health("readyz", true, true);
        assert_eq!(code, 200);
        assert!(body.contains("[+]ping ok") && body.ends_with("readyz check passed\n"));
        assert_eq!(health("readyz", false, false).0, 500);
    }
}
