//! Counting the resource requests a control plane receives, by verb and resource, so a caller
//! (a benchmark, a test) can tell how many writes some workload costs the server, and by whom
//! (a test of one component's requests among several clients').
//!
//! A request is counted once its target resolves to a served resource, whatever its outcome
//! (refused, conflicting or failed requests were still received). Discovery, health and
//! OpenAPI requests are not counted. Counting is one short critical section per request.
//!
//! A server serves its counts at `/metrics` as kube-apiserver serves its own there (see
//! [`RequestCounter::metrics_text`]), so a client in another process (a benchmark of a
//! deployment) reads them the same way from either.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::request_info::RequestInfo;
pub use crate::request_info::Verb;

/// A verb on a resource: `group` is empty for the core group; `resource` is the plural,
/// followed by `/subresource` when there is one (`managedclusters/status`). `dry_run` marks a
/// write sent with `dryRun=All`: answered as the write would be, nothing stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKind {
    pub verb: Verb,
    pub group: String,
    pub resource: String,
    pub dry_run: bool,
}

/// The live counters of one control plane.
#[derive(Debug, Default)]
pub struct RequestCounter {
    counts: Mutex<Counts>,
}

/// Counts by user, group, resource, subresource, verb and whether it was a dry run, nested so
/// that a request finds its counter by its own strings and copies none of them once the counter
/// exists.
type Counts =
    HashMap<String, HashMap<String, HashMap<String, HashMap<String, HashMap<(Verb, bool), u64>>>>>;

/// The entry for `key`, made empty when there is none.
fn slot<'m, V: Default>(map: &'m mut HashMap<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_string(), V::default());
    }
    map.get_mut(key).expect("inserted above")
}

impl RequestCounter {
    /// Counts a request of `user` to a served resource, a dry run (`dryRun=All`) apart (a verb
    /// that is no API operation is not counted).
    pub fn record(&self, request: &RequestInfo, user: &str, dry_run: bool) {
        if matches!(request.verb, Verb::Other(_)) {
            return;
        }
        let mut counts = self.lock();
        let by_verb = slot(
            slot(
                slot(slot(&mut counts, user), &request.api_group),
                &request.resource,
            ),
            &request.subresource,
        );
        let key = (request.verb.clone(), dry_run);
        *by_verb.entry(key).or_insert(0) += 1;
    }

    /// The counts as kube-apiserver's `apiserver_request_total` counter in the Prometheus text
    /// format, with the subset of its labels counted here (`verb`, `dry_run`, `group`,
    /// `resource`, `subresource`; no `code`, `scope`, `version` or `component`). Verbs are named
    /// as kube-apiserver's metrics name them: `LIST` and `WATCH` beside the methods `GET`,
    /// `POST` (create), `PUT` (update), `PATCH`, `DELETE` and `DELETECOLLECTION` (server-side
    /// apply is counted as `PATCH`, not apart as `APPLY`); `dry_run` is `All` for a request sent
    /// with `dryRun=All`, empty otherwise. Series are sorted, for a stable page.
    ///
    /// Then the same counts of each ServiceAccount apart, as `fleetform_apiserver_request_total`
    /// with a `user` label: kube-apiserver counts no requests by user (its audit log says who),
    /// and a benchmark of a deployment tells a component's requests from those of the agents
    /// beside it by them. Other users (people, agents' certificates) are not listed one by one.
    pub fn metrics_text(&self) -> String {
        let mut all: BTreeMap<Labels<'_>, u64> = BTreeMap::new();
        let mut by_service_account: BTreeMap<Labels<'_>, u64> = BTreeMap::new();
        let counts = self.lock();
        for counted in counted(&counts) {
            let Some(verb) = counted.verb.metric_name() else {
                continue;
            };
            let labels = Labels {
                user: "",
                verb,
                dry_run: if counted.dry_run { "All" } else { "" },
                group: counted.group,
                resource: counted.resource,
                subresource: counted.subresource,
            };
            if counted.user.starts_with(SERVICE_ACCOUNT_PREFIX) {
                let of_user = Labels {
                    user: counted.user,
                    ..labels
                };
                *by_service_account.entry(of_user).or_default() += counted.n;
            }
            *all.entry(labels).or_default() += counted.n;
        }
        let mut text = String::from(
            "# HELP apiserver_request_total Resource requests received, by verb, dry run, API group, resource and subresource, whatever their outcome.\n# TYPE apiserver_request_total counter\n",
        );
        write_series(&mut text, "apiserver_request_total", &all);
        text.push_str(
            "# HELP fleetform_apiserver_request_total Resource requests received from each ServiceAccount, by verb, dry run, API group, resource and subresource, whatever their outcome.\n# TYPE fleetform_apiserver_request_total counter\n",
        );
        write_series(
            &mut text,
            "fleetform_apiserver_request_total",
            &by_service_account,
        );
        text
    }

    /// Every user's requests so far.
    pub fn snapshot(&self) -> RequestCounts {
        self.snapshot_where(|_| true)
    }

    /// The requests of `user` so far.
    pub fn snapshot_of(&self, user: &str) -> RequestCounts {
        self.snapshot_where(|name| name == user)
    }

    fn snapshot_where(&self, of_user: impl Fn(&str) -> bool) -> RequestCounts {
        let counts = self.lock();
        let mut out: BTreeMap<RequestKind, u64> = BTreeMap::new();
        for counted in counted(&counts) {
            if !of_user(counted.user) {
                continue;
            }
            let resource = if counted.subresource.is_empty() {
                counted.resource.to_string()
            } else {
                format!("{}/{}", counted.resource, counted.subresource)
            };
            let kind = RequestKind {
                verb: counted.verb.clone(),
                group: counted.group.to_string(),
                resource,
                dry_run: counted.dry_run,
            };
            *out.entry(kind).or_default() += counted.n;
        }
        RequestCounts(out)
    }

    /// A poisoned lock only means another request panicked mid-increment; counts stay usable.
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Every count: user, group, resource, subresource, verb, whether a dry run, and how many.
fn counted(counts: &Counts) -> impl Iterator<Item = Counted<'_>> {
    counts.iter().flat_map(|(user, groups)| {
        groups.iter().flat_map(move |(group, resources)| {
            resources.iter().flat_map(move |(resource, subresources)| {
                subresources.iter().flat_map(move |(subresource, by_verb)| {
                    by_verb.iter().map(move |((verb, dry_run), n)| Counted {
                        user,
                        group,
                        resource,
                        subresource,
                        verb,
                        dry_run: *dry_run,
                        n: *n,
                    })
                })
            })
        })
    })
}

/// One counter of [`Counts`].
struct Counted<'c> {
    user: &'c str,
    group: &'c str,
    resource: &'c str,
    subresource: &'c str,
    verb: &'c Verb,
    dry_run: bool,
    n: u64,
}

/// How a ServiceAccount's user name begins.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// A series' labels: `user` is left out when empty.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Labels<'c> {
    user: &'c str,
    verb: &'c str,
    dry_run: &'c str,
    group: &'c str,
    resource: &'c str,
    subresource: &'c str,
}

/// Appends a counter's series, sorted (for a stable page).
fn write_series(text: &mut String, name: &str, series: &BTreeMap<Labels<'_>, u64>) {
    for (labels, n) in series {
        let user = if labels.user.is_empty() {
            String::new()
        } else {
            format!("user=\"{}\",", label_value(labels.user))
        };
        text.push_str(&format!(
            "{name}{{{user}verb=\"{}\",dry_run=\"{}\",group=\"{}\",resource=\"{}\",subresource=\"{}\"}} {n}\n",
            labels.verb,
            labels.dry_run,
            label_value(labels.group),
            label_value(labels.resource),
            label_value(labels.subresource)
        ));
    }
}

/// A label value escaped as the Prometheus text format asks (backslash, quote, newline).
fn label_value(value: &str) -> std::borrow::Cow<'_, str> {
    if value.contains(['\\', '"', '\n']) {
        value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
            .into()
    } else {
        value.into()
    }
}

/// Request counts at one instant, since the control plane started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts(BTreeMap<RequestKind, u64>);

impl RequestCounts {
    /// Every count, ordered by verb, group and resource.
    pub fn iter(&self) -> impl Iterator<Item = (&RequestKind, u64)> {
        self.0.iter().map(|(k, v)| (k, *v))
    }

    /// All requests counted.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Requests that change stored state (create, update, patch, delete; not dry runs).
    pub fn writes(&self) -> u64 {
        self.iter()
            .filter(|(k, _)| k.verb.is_write() && !k.dry_run)
            .map(|(_, n)| n)
            .sum()
    }

    /// Write requests to one resource (`resource` as in [`RequestKind`]; not dry runs).
    pub fn writes_to(&self, group: &str, resource: &str) -> u64 {
        self.iter()
            .filter(|(k, _)| {
                k.verb.is_write() && !k.dry_run && k.group == group && k.resource == resource
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// What was counted after `earlier` (a snapshot of the same control plane).
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        RequestCounts(
            self.0
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v - earlier.0.get(k).copied().unwrap_or(0).min(*v),
                    )
                })
                .filter(|(_, v)| *v > 0)
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: http::Method, path: &str) -> RequestInfo {
        RequestInfo::new(&method, path, &crate::request_info::Query::default())
    }

    #[test]
    fn writes_and_differences_count_only_what_changed_state_in_between() {
        use http::Method;
        let lease = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l";
        let counter = RequestCounter::default();
        counter.record(
            &request(
                Method::POST,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
            ),
            "writer",
            false,
        );
        counter.record(&request(Method::GET, lease), "reader", false);
        let before = counter.snapshot();
        counter.record(&request(Method::PATCH, lease), "writer", false);
        counter.record(&request(Method::PATCH, lease), "writer", false);
        counter.record(
            &request(
                Method::PATCH,
                "/apis/cluster.open-cluster-management.io/v1/managedclusters/c/status",
            ),
            "writer",
            false,
        );
        counter.record(
            &request(Method::GET, "/apis/coordination.k8s.io/v1/watch/leases"),
            "writer",
            false,
        );
        counter.record(&request(Method::OPTIONS, lease), "writer", false);
        // A dry run is a request, not a write: nothing was stored.
        counter.record(&request(Method::PATCH, lease), "writer", true);
        let after = counter.snapshot();
        assert_eq!(after.total(), 7);
        assert_eq!(after.writes(), 4);
        let window = after.since(&before);
        assert_eq!(window.total(), 5);
        assert_eq!(window.writes(), 3);
        assert_eq!(window.writes_to("coordination.k8s.io", "leases"), 2);
        assert_eq!(
            window.writes_to(
                "cluster.open-cluster-management.io",
                "managedclusters/status"
            ),
            1
        );
        assert_eq!(
            window.writes_to("cluster.open-cluster-management.io", "managedclusters"),
            0
        );
        // By whom: the reader's GET, and the writer's every other request.
        assert_eq!(counter.snapshot_of("reader").total(), 1);
        assert_eq!(counter.snapshot_of("writer").total(), 6);
        assert_eq!(counter.snapshot_of("writer").writes(), 4);
        assert_eq!(counter.snapshot_of("nobody"), RequestCounts::default());
    }

    #[test]
    fn the_metrics_page_counts_every_request_and_each_service_accounts_apart() {
        use http::Method;
        let lease = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l";
        let hub = "system:serviceaccount:fleetform-system:fleetform";
        let counter = RequestCounter::default();
        counter.record(&request(Method::PATCH, lease), hub, false);
        counter.record(&request(Method::PATCH, lease), hub, false);
        counter.record(
            &request(Method::PATCH, lease),
            "system:open-cluster-management:c1:a",
            false,
        );
        counter.record(&request(Method::PATCH, lease), hub, true);
        let text = counter.metrics_text();
        let series = |dry_run: &str| {
            format!(
                "verb=\"PATCH\",dry_run=\"{dry_run}\",group=\"coordination.k8s.io\",resource=\"leases\",subresource=\"\""
            )
        };
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("resource=\"leases\""))
            .collect();
        assert_eq!(
            lines,
            [
                format!("apiserver_request_total{{{}}} 3", series("")),
                format!("apiserver_request_total{{{}}} 1", series("All")),
                format!(
                    "fleetform_apiserver_request_total{{user=\"{hub}\",{}}} 2",
                    series("")
                ),
                format!(
                    "fleetform_apiserver_request_total{{user=\"{hub}\",{}}} 1",
                    series("All")
                ),
            ],
            "{text}"
        );
    }
}
