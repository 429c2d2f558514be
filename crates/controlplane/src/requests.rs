//! Counting the resource requests a control plane receives, by verb and resource, so a caller
//! (a benchmark, a test) can tell how many writes some workload costs the server.
//!
//! A request is counted once its target resolves to a served resource, whatever its outcome
//! (refused, conflicting or failed requests were still received). Discovery, health and
//! OpenAPI requests are not counted. Counting is one short critical section per request.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use http::Method;

/// What a request asks of a resource, as kube-apiserver's audit log names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    /// The verb of a request by its method, whether it names an object and whether it watches;
    /// `None` for methods that are not resource operations.
    pub fn of(method: &Method, named: bool, watch: bool) -> Option<Verb> {
        Some(match *method {
            Method::GET if watch => Verb::Watch,
            Method::GET if named => Verb::Get,
            Method::GET => Verb::List,
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE if named => Verb::Delete,
            Method::DELETE => Verb::DeleteCollection,
            _ => return None,
        })
    }

    /// Whether the verb changes stored state.
    pub fn is_write(self) -> bool {
        !matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

/// A verb on a resource: `group` is empty for the core group; `resource` is the plural,
/// followed by `/subresource` when there is one (`managedclusters/status`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKind {
    pub verb: Verb,
    pub group: String,
    pub resource: String,
}

/// The live counters of one control plane.
#[derive(Debug, Default)]
pub struct RequestCounter {
    counts: Mutex<HashMap<RequestKind, u64>>,
}

impl RequestCounter {
    pub fn record(&self, verb: Verb, group: &str, plural: &str, subresource: Option<&str>) {
        let resource = match subresource {
            Some(sub) => format!("{plural}/{sub}"),
            None => plural.to_string(),
        };
        let kind = RequestKind {
            verb,
            group: group.to_string(),
            resource,
        };
        // A poisoned lock only means another request panicked mid-increment; counts stay usable.
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *counts.entry(kind).or_insert(0) += 1;
    }

    pub fn snapshot(&self) -> RequestCounts {
        let counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        RequestCounts(counts.iter().map(|(k, v)| (k.clone(), *v)).collect())
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

    /// Requests that change stored state (create, update, patch, delete).
    pub fn writes(&self) -> u64 {
        self.iter()
            .filter(|(k, _)| k.verb.is_write())
            .map(|(_, n)| n)
            .sum()
    }

    /// Write requests to one resource (`resource` as in [`RequestKind`]).
    pub fn writes_to(&self, group: &str, resource: &str) -> u64 {
        self.iter()
            .filter(|(k, _)| k.verb.is_write() && k.group == group && k.resource == resource)
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

    #[test]
    fn verbs_follow_method_name_and_watch() {
        assert_eq!(Verb::of(&Method::GET, true, false), Some(Verb::Get));
        assert_eq!(Verb::of(&Method::GET, false, false), Some(Verb::List));
        assert_eq!(Verb::of(&Method::GET, false, true), Some(Verb::Watch));
        assert_eq!(Verb::of(&Method::GET, true, true), Some(Verb::Watch));
        assert_eq!(Verb::of(&Method::POST, false, false), Some(Verb::Create));
        assert_eq!(Verb::of(&Method::PUT, true, false), Some(Verb::Update));
        assert_eq!(Verb::of(&Method::PATCH, true, false), Some(Verb::Patch));
        assert_eq!(Verb::of(&Method::DELETE, true, false), Some(Verb::Delete));
        assert_eq!(
            Verb::of(&Method::DELETE, false, false),
            Some(Verb::DeleteCollection)
        );
        assert_eq!(Verb::of(&Method::OPTIONS, false, false), None);
    }

    #[test]
    fn writes_and_differences_count_only_what_changed_state_in_between() {
        let counter = RequestCounter::default();
        counter.record(Verb::Create, "coordination.k8s.io", "leases", None);
        counter.record(Verb::Get, "coordination.k8s.io", "leases", None);
        let before = counter.snapshot();
        counter.record(Verb::Patch, "coordination.k8s.io", "leases", None);
        counter.record(Verb::Patch, "coordination.k8s.io", "leases", None);
        counter.record(
            Verb::Patch,
            "cluster.open-cluster-management.io",
            "managedclusters",
            Some("status"),
        );
        counter.record(Verb::Watch, "coordination.k8s.io", "leases", None);
        let after = counter.snapshot();
        assert_eq!(after.total(), 6);
        assert_eq!(after.writes(), 4);
        let window = after.since(&before);
        assert_eq!(window.total(), 4);
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
    }
}
