//! What a request asks, read once from its method, path and query, as kube-apiserver's
//! `RequestInfo`: whether it addresses a resource, its verb, API group and version, namespace,
//! resource, subresource and name.
//!
//! Authorization, the router (and through the target it routes to, admission), the request
//! counter and the request log all read the one value [`RequestInfo::new`] makes, so what RBAC
//! allows is what the handler does. Pure: whether the resource is served is the router's
//! question.

use std::fmt;

use http::Method;

/// Decoded query parameters.
#[derive(Debug, Clone, Default)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    pub fn parse(q: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(kk, _)| kk == k)
            .map(|(_, v)| v.as_str())
    }
    pub fn all(&self, k: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(kk, _)| kk == k)
            .map(|(_, v)| v.as_str())
            .collect()
    }
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1"))
    }
}

/// What a request asks: a resource request's API verb, as RBAC and kube-apiserver's audit log
/// name it, or the verb of anything else.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
    /// A non-resource request's method in lower case (`get` for GET and HEAD), or, empty, the
    /// verb of a resource request whose method is no API operation (OPTIONS).
    Other(String),
}

impl Verb {
    /// Whether the verb changes stored state.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
        )
    }

    pub fn as_str(&self) -> &str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Other(verb) => verb,
        }
    }
}

impl Verb {
    /// The verb as kube-apiserver's `apiserver_request_total` names it (`POST` for create,
    /// `PUT` for update, ...); `None` for a verb that is no API operation.
    pub fn metric_name(&self) -> Option<&'static str> {
        Some(match self {
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Create => "POST",
            Verb::Update => "PUT",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
            Verb::DeleteCollection => "DELETECOLLECTION",
            Verb::Other(_) => return None,
        })
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Subresources of a Namespace, which its path names where other resources' paths name a
/// resource in the namespace (`namespaces/NAME/status`, not `namespaces/NAME/configmaps`).
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// One request, as kube-apiserver's `RequestInfo` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The path addresses a resource (`/api/VERSION/...` or `/apis/GROUP/VERSION/...` with
    /// something after the version).
    pub is_resource_request: bool,
    /// The URL path as sent (not decoded).
    pub path: String,
    pub verb: Verb,
    /// `api` or `apis`; empty for non-resource requests.
    pub api_prefix: String,
    /// Empty for the core group.
    pub api_group: String,
    pub api_version: String,
    /// Where the request is scoped: `namespaces/NAME/...` in the path, or the Namespace a
    /// `namespaces/NAME` path names itself (so that a RoleBinding in a namespace can grant
    /// access to that Namespace). Empty for cluster scope and all-namespace requests.
    pub namespace: String,
    /// The plural resource, e.g. `configmaps`.
    pub resource: String,
    /// `status`, `scale`, ... when the path names one.
    pub subresource: String,
    /// The object the path names, or the one a list or watch selects with
    /// `fieldSelector=metadata.name=NAME` (so that a role limited by `resourceNames` may list
    /// and watch the objects it names).
    pub name: String,
    /// A resource request's path from the resource on (decoded): resource, name, subresource
    /// and whatever follows; every segment of the path for a non-resource request.
    pub parts: Vec<String>,
}

impl RequestInfo {
    /// Reads a request: `path` as sent (empty segments are skipped, the others
    /// percent-decoded) and its query (`watch`, `fieldSelector`).
    pub fn new(method: &Method, path: &str, query: &Query) -> RequestInfo {
        let mut segments: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        let grouped = match segments.as_slice() {
            [prefix, _, rest @ ..] if prefix == "api" && !rest.is_empty() => false,
            [prefix, _, _, rest @ ..] if prefix == "apis" && !rest.is_empty() => true,
            _ => {
                let verb = match *method {
                    Method::GET | Method::HEAD => "get".to_string(),
                    ref other => other.as_str().to_ascii_lowercase(),
                };
                return RequestInfo {
                    is_resource_request: false,
                    path: path.to_string(),
                    verb: Verb::Other(verb),
                    api_prefix: String::new(),
                    api_group: String::new(),
                    api_version: String::new(),
                    namespace: String::new(),
                    resource: String::new(),
                    subresource: String::new(),
                    name: String::new(),
                    parts: segments,
                };
            }
        };
        // The segments are moved into the fields they become, not copied.
        let mut head = segments.drain(..if grouped { 3 } else { 2 });
        let api_prefix = head.next().unwrap_or_default();
        let api_group = if grouped {
            head.next().unwrap_or_default()
        } else {
            String::new()
        };
        let api_version = head.next().unwrap_or_default();
        drop(head);
        let mut rest = segments;
        let watch_prefix = rest.first().is_some_and(|s| s == "watch");
        if watch_prefix {
            rest.remove(0);
        }
        let mut namespace = String::new();
        if let [first, ns, more @ ..] = rest.as_slice()
            && first == "namespaces"
        {
            if more
                .first()
                .is_some_and(|r| !NAMESPACE_SUBRESOURCES.contains(&r.as_str()))
            {
                namespace = rest.drain(..2).nth(1).unwrap_or_default();
            } else {
                namespace = ns.clone();
            }
        }
        let part = |i: usize| rest.get(i).cloned().unwrap_or_default();
        let (resource, mut name, subresource) = (part(0), part(1), part(2));
        let verb = match *method {
            _ if watch_prefix => Verb::Watch,
            Method::GET | Method::HEAD if !name.is_empty() => Verb::Get,
            Method::GET | Method::HEAD if query.flag("watch") => Verb::Watch,
            Method::GET | Method::HEAD => Verb::List,
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE if name.is_empty() => Verb::DeleteCollection,
            Method::DELETE => Verb::Delete,
            _ => Verb::Other(String::new()),
        };
        if name.is_empty() && matches!(verb, Verb::List | Verb::Watch) {
            name = selected_name(query.get("fieldSelector")).unwrap_or_default();
        }
        RequestInfo {
            is_resource_request: true,
            path: path.to_string(),
            verb,
            api_prefix,
            api_group,
            api_version,
            namespace,
            resource,
            subresource,
            name,
            parts: rest,
        }
    }

    /// The name of the object the path names (a list or watch narrowed by a field selector
    /// names none).
    pub fn path_name(&self) -> Option<&str> {
        self.parts.get(1).map(String::as_str)
    }

    /// Whether [`Self::namespace`] is the Namespace the path names (`/api/v1/namespaces/NAME`
    /// and its subresources) rather than a scope the path puts a resource in.
    pub fn names_its_namespace(&self) -> bool {
        self.parts.first().is_some_and(|r| r == "namespaces")
            && self.path_name() == Some(self.namespace.as_str())
    }
}

/// The one name a field selector asks for (`metadata.name=NAME` or `metadata.name==NAME`, and
/// nothing else).
fn selected_name(field_selector: Option<&str>) -> Option<String> {
    let selector = field_selector?;
    let wanted = selector
        .strip_prefix("metadata.name==")
        .or_else(|| selector.strip_prefix("metadata.name="))?;
    (!wanted.is_empty() && !wanted.contains(',')).then(|| wanted.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resource request's expected reading: verb, prefix, group, version, namespace,
    /// resource, subresource, name, parts.
    struct Want<'a>(
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a [&'a str],
    );

    fn read(method: &str, url: &str) -> RequestInfo {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        RequestInfo::new(&method, path, &Query::parse(Some(query)))
    }

    #[test]
    fn resource_paths_read_as_kube_apiserver_reads_them() {
        #[rustfmt::skip]
        let cases: &[(&str, &str, Want<'_>)] = &[
            // Collections and objects, namespaced and not.
            ("GET", "/api/v1/namespaces", Want("list", "api", "", "v1", "", "namespaces", "", "", &["namespaces"])),
            ("GET", "/api/v1/namespaces/other", Want("get", "api", "", "v1", "other", "namespaces", "", "other", &["namespaces", "other"])),
            ("PATCH", "/api/v1/namespaces/new", Want("patch", "api", "", "v1", "new", "namespaces", "", "new", &["namespaces", "new"])),
            ("GET", "/api/v1/namespaces/other/pods", Want("list", "api", "", "v1", "other", "pods", "", "", &["pods"])),
            ("GET", "/api/v1/namespaces/other/pods/foo", Want("get", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"])),
            ("HEAD", "/api/v1/namespaces/other/pods/foo", Want("get", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"])),
            ("GET", "/api/v1/pods", Want("list", "api", "", "v1", "", "pods", "", "", &["pods"])),
            ("HEAD", "/api/v1/pods", Want("list", "api", "", "v1", "", "pods", "", "", &["pods"])),
            // Watches: the legacy prefix, or watch=true|1 on a collection only.
            ("GET", "/api/v1/watch/pods", Want("watch", "api", "", "v1", "", "pods", "", "", &["pods"])),
            ("GET", "/api/v1/pods?watch=true", Want("watch", "api", "", "v1", "", "pods", "", "", &["pods"])),
            ("GET", "/api/v1/pods?watch=false", Want("list", "api", "", "v1", "", "pods", "", "", &["pods"])),
            ("GET", "/api/v1/watch/namespaces/other/pods", Want("watch", "api", "", "v1", "other", "pods", "", "", &["pods"])),
            ("GET", "/api/v1/namespaces/other/pods?watch=1", Want("watch", "api", "", "v1", "other", "pods", "", "", &["pods"])),
            ("GET", "/api/v1/namespaces/other/pods?watch=0", Want("list", "api", "", "v1", "other", "pods", "", "", &["pods"])),
            ("GET", "/api/v1/namespaces/other/pods/foo?watch=true", Want("get", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"])),
            ("GET", "/api/v1/watch/namespaces/other/pods/foo", Want("watch", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"])),
            ("POST", "/api/v1/watch/namespaces/other/pods", Want("watch", "api", "", "v1", "other", "pods", "", "", &["pods"])),
            // Subresources, the Namespace's own included.
            ("GET", "/api/v1/namespaces/other/pods/foo/status", Want("get", "api", "", "v1", "other", "pods", "status", "foo", &["pods", "foo", "status"])),
            ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", Want("get", "api", "", "v1", "other", "pods", "proxy", "foo", &["pods", "foo", "proxy", "subpath"])),
            ("PUT", "/api/v1/namespaces/other/finalize", Want("update", "api", "", "v1", "other", "namespaces", "finalize", "other", &["namespaces", "other", "finalize"])),
            ("PUT", "/api/v1/namespaces/other/status", Want("update", "api", "", "v1", "other", "namespaces", "status", "other", &["namespaces", "other", "status"])),
            ("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/c/approval", Want("update", "apis", "certificates.k8s.io", "v1", "", "certificatesigningrequests", "approval", "c", &["certificatesigningrequests", "c", "approval"])),
            // Writes.
            ("PATCH", "/api/v1/namespaces/other/pods/foo", Want("patch", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"])),
            ("DELETE", "/api/v1/namespaces/other/pods/foo", Want("delete", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"])),
            ("POST", "/api/v1/namespaces/other/pods", Want("create", "api", "", "v1", "other", "pods", "", "", &["pods"])),
            ("DELETE", "/api/v1/nodes", Want("deletecollection", "api", "", "v1", "", "nodes", "", "", &["nodes"])),
            ("DELETE", "/api/v1/namespaces", Want("deletecollection", "api", "", "v1", "", "namespaces", "", "", &["namespaces"])),
            ("DELETE", "/apis/apps/v1/namespaces/other/deployments", Want("deletecollection", "apis", "apps", "v1", "other", "deployments", "", "", &["deployments"])),
            ("OPTIONS", "/api/v1/pods", Want("", "api", "", "v1", "", "pods", "", "", &["pods"])),
            // Groups and versions.
            ("POST", "/apis/extensions/v1/namespaces/other/pods", Want("create", "apis", "extensions", "v1", "other", "pods", "", "", &["pods"])),
            ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", Want("create", "apis", "extensions", "v1beta3", "other", "pods", "", "", &["pods"])),
            ("GET", "/apis/batch/v1/job/foo/scale", Want("get", "apis", "batch", "v1", "", "job", "scale", "foo", &["job", "foo", "scale"])),
            // A list or watch narrowed to one name by a field selector is a request for it.
            ("GET", "/apis/g/v/things?fieldSelector=metadata.name%3Dn1", Want("list", "apis", "g", "v", "", "things", "", "n1", &["things"])),
            ("GET", "/apis/g/v/things?watch=true&fieldSelector=metadata.name%3D%3Dn1", Want("watch", "apis", "g", "v", "", "things", "", "n1", &["things"])),
            ("GET", "/apis/g/v/things?fieldSelector=metadata.name%3Dn1,a%3Db", Want("list", "apis", "g", "v", "", "things", "", "", &["things"])),
            ("GET", "/apis/g/v/things?fieldSelector=spec.x%3Dn1", Want("list", "apis", "g", "v", "", "things", "", "", &["things"])),
            ("POST", "/apis/g/v/things?fieldSelector=metadata.name%3Dn1", Want("create", "apis", "g", "v", "", "things", "", "", &["things"])),
            // Segments are decoded; empty ones are skipped.
            ("GET", "/api/v1/namespaces/a%2Fb//configmaps/x%20y", Want("get", "api", "", "v1", "a/b", "configmaps", "", "x y", &["configmaps", "x y"])),
        ];
        for (method, url, want) in cases {
            let info = read(method, url);
            let Want(verb, prefix, group, version, namespace, resource, subresource, name, parts) =
                want;
            let got = (
                info.is_resource_request,
                info.verb.as_str(),
                info.api_prefix.as_str(),
                info.api_group.as_str(),
                info.api_version.as_str(),
                info.namespace.as_str(),
                info.resource.as_str(),
                info.subresource.as_str(),
                info.name.as_str(),
                info.parts.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            let expected = (
                true,
                *verb,
                *prefix,
                *group,
                *version,
                *namespace,
                *resource,
                *subresource,
                *name,
                parts.to_vec(),
            );
            assert_eq!(got, expected, "{method} {url}");
            assert_eq!(info.path, url.split('?').next().unwrap(), "{method} {url}");
        }
    }

    #[test]
    fn other_paths_are_non_resource_requests_with_the_method_as_verb() {
        for (method, url, verb) in [
            ("GET", "/", "get"),
            ("GET", "/api", "get"),
            ("GET", "/api/v1", "get"),
            ("GET", "/api/v1/", "get"),
            ("GET", "/apis", "get"),
            ("GET", "/apis/apps", "get"),
            ("GET", "/apis/apps/v1", "get"),
            ("GET", "/apis/apps/v1/", "get"),
            ("HEAD", "/healthz", "get"),
            ("GET", "/not-api/v1/pods", "get"),
            ("GET", "/openapi/v3/apis/apps/v1", "get"),
            ("POST", "/metrics", "post"),
            ("PUT", "/version", "put"),
        ] {
            let info = read(method, url);
            assert!(!info.is_resource_request, "{method} {url}");
            assert_eq!(info.verb, Verb::Other(verb.into()), "{method} {url}");
            assert_eq!(info.path, url);
            assert_eq!(
                (
                    info.resource.as_str(),
                    info.namespace.as_str(),
                    info.name.as_str()
                ),
                ("", "", "")
            );
        }
        let discovery = read("GET", "/apis/apps/v1");
        assert_eq!(discovery.parts, ["apis", "apps", "v1"]);
    }

    #[test]
    fn a_namespace_path_names_its_namespace_only_when_it_names_a_namespace() {
        assert!(read("GET", "/api/v1/namespaces/a").names_its_namespace());
        assert!(read("PUT", "/api/v1/namespaces/a/finalize").names_its_namespace());
        assert!(!read("GET", "/api/v1/namespaces/a/configmaps/a").names_its_namespace());
        assert!(!read("GET", "/api/v1/namespaces/a/namespaces").names_its_namespace());
        assert!(!read("GET", "/api/v1/namespaces/a/namespaces/b").names_its_namespace());
        assert_eq!(
            read("GET", "/api/v1/namespaces/a/configmaps").path_name(),
            None
        );
        assert_eq!(
            read("GET", "/api/v1/configmaps?fieldSelector=metadata.name%3Dx").path_name(),
            None
        );
    }
}
