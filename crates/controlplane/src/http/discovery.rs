//! Discovery and health documents: /version, /api, /api/v1, /apis, /apis/G, /apis/G/V,
//! /healthz, /livez, /readyz. `/api` and `/apis` answer aggregated discovery
//! (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) to clients that ask for it, and the
//! legacy documents otherwise. Besides the registry's resources they list the reviews, which
//! are answered by handlers of their own and can only be created.

use serde_json::{Value, json};

use crate::registry::{GroupVersions, Registry, ResourceInfo};

/// A create-only resource answered from the request alone, never stored.
struct Review {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    /// Asked in a namespace (LocalSubjectAccessReview).
    namespaced: bool,
}

/// The reviews this server answers (see [`crate::http`]'s routes).
const REVIEWS: [Review; 6] = [
    Review {
        group: "authentication.k8s.io",
        version: "v1",
        plural: "selfsubjectreviews",
        kind: "SelfSubjectReview",
        namespaced: false,
    },
    Review {
        group: "authentication.k8s.io",
        version: "v1",
        plural: "tokenreviews",
        kind: "TokenReview",
        namespaced: false,
    },
    Review {
        group: "authorization.k8s.io",
        version: "v1",
        plural: "localsubjectaccessreviews",
        kind: "LocalSubjectAccessReview",
        namespaced: true,
    },
    Review {
        group: "authorization.k8s.io",
        version: "v1",
        plural: "selfsubjectaccessreviews",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
    },
    Review {
        group: "authorization.k8s.io",
        version: "v1",
        plural: "selfsubjectrulesreviews",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
    },
    Review {
        group: "authorization.k8s.io",
        version: "v1",
        plural: "subjectaccessreviews",
        kind: "SubjectAccessReview",
        namespaced: false,
    },
];

fn reviews_in<'a>(group: &'a str, version: &'a str) -> impl Iterator<Item = &'static Review> + 'a {
    REVIEWS
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

/// The registry's groups plus the reviews' groups.
fn served_groups(registry: &Registry) -> Vec<GroupVersions> {
    let mut groups = registry.groups();
    for r in &REVIEWS {
        match groups.iter_mut().find(|g| g.group == r.group) {
            Some(g) if !g.versions.iter().any(|v| v == r.version) => {
                g.versions.push(r.version.to_string())
            }
            Some(_) => {}
            None => groups.push(GroupVersions {
                group: r.group.to_string(),
                versions: vec![r.version.to_string()],
            }),
        }
    }
    groups
}

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
    let groups: Vec<Value> = served_groups(registry)
        .iter()
        .map(|g| group_doc(&g.group, &g.versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// GET /apis/G
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let g = served_groups(registry)
        .into_iter()
        .find(|g| g.group == name)?;
    let mut doc = group_doc(&g.group, &g.versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn resource_entries(info: &ResourceInfo) -> Vec<Value> {
    let mut main = json!({
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": ResourceInfo::verbs(),
    });
    if !info.short_names.is_empty() {
        main["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        main["categories"] = json!(info.categories);
    }
    let mut out = vec![main];
    for sub in &info.subresources {
        let verbs = match sub.as_str() {
            "finalize" => json!(["update"]),
            "token" => json!(["create"]),
            _ => json!(["get", "patch", "update"]),
        };
        let mut entry = json!({
            "name": format!("{}/{sub}", info.plural),
            "singularName": "",
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": verbs,
        });
        if sub == "scale" {
            entry["group"] = json!("autoscaling");
            entry["version"] = json!("v1");
            entry["kind"] = json!("Scale");
        }
        if sub == "token" {
            entry["group"] = json!("authentication.k8s.io");
            entry["version"] = json!("v1");
            entry["kind"] = json!("TokenRequest");
        }
        out.push(entry);
    }
    out
}

/// GET /api/v1 or /apis/G/V; None when the group-version is not served.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = registry.resources_in(group, version);
    let reviews: Vec<Value> = reviews_in(group, version)
        .map(|r| {
            json!({"name": r.plural, "singularName": r.kind.to_lowercase(),
                "namespaced": r.namespaced, "kind": r.kind, "verbs": ["create"]})
        })
        .collect();
    if infos.is_empty() && reviews.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut resources: Vec<Value> = infos.iter().flat_map(|i| resource_entries(i)).collect();
    resources.extend(reviews);
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
        "resources": resources}),
    )
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

fn resource_discovery(info: &ResourceInfo) -> Value {
    let subresources: Vec<Value> = info
        .subresources
        .iter()
        .map(|sub| {
            let (kind, verbs) = match sub.as_str() {
                "scale" => (
                    gvk("autoscaling", "v1", "Scale"),
                    json!(["get", "patch", "update"]),
                ),
                "finalize" => (
                    gvk(&info.group, &info.version, &info.kind),
                    json!(["update"]),
                ),
                "token" => (
                    gvk("authentication.k8s.io", "v1", "TokenRequest"),
                    json!(["create"]),
                ),
                _ => (
                    gvk(&info.group, &info.version, &info.kind),
                    json!(["get", "patch", "update"]),
                ),
            };
            json!({"subresource": sub, "responseKind": kind, "verbs": verbs})
        })
        .collect();
    let mut r = json!({
        "resource": info.plural,
        "responseKind": gvk(&info.group, &info.version, &info.kind),
        "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": info.singular,
        "verbs": ResourceInfo::verbs(),
    });
    if !info.short_names.is_empty() {
        r["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        r["categories"] = json!(info.categories);
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
            let mut resources: Vec<Value> = registry
                .resources_in(group, v)
                .iter()
                .map(|i| resource_discovery(i))
                .collect();
            resources.extend(reviews_in(group, v).map(|r| {
                json!({"resource": r.plural, "responseKind": gvk(r.group, r.version, r.kind),
                    "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                    "singularResource": r.kind.to_lowercase(),
                    "verbs": ["create"]})
            }));
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group}, "versions": vs})
}

/// Aggregated discovery of the core group (`/api`) or of every named group (`/apis`).
pub fn aggregated(registry: &Registry, core: bool) -> Value {
    let items = if core {
        vec![group_discovery(registry, "", &["v1".to_string()])]
    } else {
        served_groups(registry)
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

    #[test]
    fn verbose_health_lists_checks() {
        let (code, body) = health("readyz", true, true);
        assert_eq!(code, 200);
        assert!(body.contains("[+]ping ok") && body.ends_with("readyz check passed\n"));
        assert_eq!(health("readyz", false, false).0, 500);
    }
}
