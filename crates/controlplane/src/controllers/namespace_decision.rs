//! What the namespace controller makes of a terminating namespace, as kube-controller-manager's
//! namespace deleter decides it: pure, the facts in (the namespace, what its content pass left
//! and what failed), the writes out (the five deletion conditions, and the `kubernetes`
//! finalizer's removal once nothing is left). [`super::namespaces`] gathers the facts and writes.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::strategy::core::{KUBERNETES_FINALIZER, spec_finalizers};

/// The condition types the namespace controller owns, in the order it first sets them.
pub const CONDITION_TYPES: [&str; 5] = [
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
];

/// The reason and message of each condition type when nothing is wrong (status `False`).
fn healthy(kind: &str) -> (&'static str, &'static str) {
    match kind {
        "NamespaceDeletionDiscoveryFailure" => (
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        "NamespaceDeletionGroupVersionParsingFailure" => (
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        "NamespaceDeletionContentFailure" => (
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        "NamespaceContentRemaining" => ("ContentRemoved", "All content successfully removed"),
        _ => (
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished",
        ),
    }
}

/// A resource as the namespace controller names it: plural, group and version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Resource {
    pub group: String,
    pub version: String,
    pub plural: String,
}

impl Resource {
    /// `widgets.golden.example.com`, `configmaps.` (the core group is empty, and still dotted).
    fn counted_as(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// Go's `GroupVersionResource` as it prints in an error: `/v1, Resource=configmaps`.
    fn printed(&self) -> String {
        format!("{}/{}, Resource={}", self.group, self.version, self.plural)
    }
}

/// What one content pass over a namespace found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Content {
    /// How many objects of each resource remain.
    remaining: BTreeMap<String, usize>,
    /// How many remaining objects each finalizer holds, over every resource.
    finalizers: BTreeMap<String, usize>,
    /// Deletions that failed, as their errors read.
    errors: Vec<String>,
    /// Whether the pass went over every resource. The Pods go first: while any remain, the
    /// rest waits and the pass reports no totals (so the remaining-content conditions read as
    /// healthy, as kube-controller-manager's do then).
    counted: bool,
}

impl Content {
    /// A pass that went over every resource.
    pub fn counted() -> Self {
        Content {
            counted: true,
            ..Default::default()
        }
    }

    /// A pass stopped after the Pods, some of which remain.
    pub fn pods_remain() -> Self {
        Content::default()
    }

    /// Adds what remained of `resource` in `namespace` once its objects were deleted: the
    /// finalizers of each object left. Objects left with no finalizer on any of them should have
    /// gone, which is an error.
    pub fn left(&mut self, namespace: &str, resource: &Resource, objects: &[Vec<String>]) {
        if objects.is_empty() {
            return;
        }
        let mut held = false;
        for finalizers in objects {
            for f in finalizers {
                held = true;
                *self.finalizers.entry(f.clone()).or_default() += 1;
            }
        }
        *self.remaining.entry(resource.counted_as()).or_default() += objects.len();
        if !held {
            self.errors.push(format!(
                "unexpected items still remain in namespace: {namespace} for gvr: {}",
                resource.printed()
            ));
        }
    }

    /// A deletion that failed.
    pub fn failed(&mut self, error: String) {
        self.errors.push(error);
    }

    /// Whether nothing remains and nothing failed: the namespace may be finalized.
    pub fn is_empty(&self) -> bool {
        self.counted && self.remaining.is_empty() && self.errors.is_empty()
    }

    /// The conditions this pass reports, one of each type, failing ones `True`.
    fn conditions(&self) -> Vec<(&'static str, bool, String, String)> {
        CONDITION_TYPES
            .iter()
            .map(|&kind| {
                let failing = match kind {
                    "NamespaceDeletionContentFailure" if !self.errors.is_empty() => {
                        let mut errors = self.errors.clone();
                        errors.sort();
                        Some((
                            "ContentDeletionFailed",
                            format!(
                                "Failed to delete all resource types, {} remaining: {}",
                                errors.len(),
                                errors.join(", ")
                            ),
                        ))
                    }
                    "NamespaceContentRemaining" if self.counted && !self.remaining.is_empty() => {
                        let mut each: Vec<String> = self
                            .remaining
                            .iter()
                            .map(|(r, n)| format!("{r} has {n} resource instances"))
                            .collect();
                        each.sort();
                        Some((
                            "SomeResourcesRemain",
                            format!("Some resources are remaining: {}", each.join(", ")),
                        ))
                    }
                    "NamespaceFinalizersRemaining"
                        if self.counted && !self.finalizers.is_empty() =>
                    {
                        let mut each: Vec<String> = self
                            .finalizers
                            .iter()
                            .map(|(f, n)| format!("{f} in {n} resource instances"))
                            .collect();
                        each.sort();
                        Some((
                            "SomeFinalizersRemain",
                            format!(
                                "Some content in the namespace has finalizers remaining: {}",
                                each.join(", ")
                            ),
                        ))
                    }
                    _ => None,
                };
                match failing {
                    Some((reason, message)) => (kind, true, reason.to_string(), message),
                    None => {
                        let (reason, message) = healthy(kind);
                        (kind, false, reason.to_string(), message.to_string())
                    }
                }
            })
            .collect()
    }
}

/// What to write after a content pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The namespace's new `status.conditions`, when they change.
    pub conditions: Option<Vec<Value>>,
    /// The namespace's new `spec.finalizers` (through `/finalize`), once it is empty.
    pub finalize: Option<Vec<String>>,
}

/// Decides about a terminating namespace after a content pass, at `now`.
pub fn decide(namespace: &Value, content: &Content, now: &str) -> Decision {
    let current = namespace
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let conditions = updated_conditions(current, content, now);
    let finalize = content.is_empty().then(|| {
        let mut rest: Vec<String> = spec_finalizers(namespace.get("spec"))
            .into_iter()
            .filter(|f| f != KUBERNETES_FINALIZER)
            .collect();
        rest.sort();
        rest.dedup();
        rest
    });
    Decision {
        conditions,
        finalize,
    }
}

/// `current` with each owned condition set to what `content` reports: a new type is appended,
/// a changed one rewritten in place (its lastTransitionTime moves only when its status does);
/// other types are kept. None when nothing changes.
fn updated_conditions(mut current: Vec<Value>, content: &Content, now: &str) -> Option<Vec<Value>> {
    let mut changed = false;
    for (kind, failing, reason, message) in content.conditions() {
        let status = if failing { "True" } else { "False" };
        let existing = current
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind));
        match existing {
            None => {
                current.push(
                    json!({"type": kind, "status": status, "lastTransitionTime": now,
                    "reason": reason, "message": message}),
                );
                changed = true;
            }
            Some(c) => {
                let same =
                    |field: &str, want: &str| c.get(field).and_then(Value::as_str) == Some(want);
                if same("status", status) && same("reason", &reason) && same("message", &message) {
                    continue;
                }
                if !same("status", status) {
                    c["lastTransitionTime"] = json!(now);
                }
                c["status"] = json!(status);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
                changed = true;
            }
        }
    }
    changed.then_some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terminating(conditions: Value, finalizers: &[&str]) -> Value {
        json!({"metadata": {"name": "team", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"finalizers": finalizers},
            "status": {"phase": "Terminating", "conditions": conditions}})
    }

    fn widgets() -> Resource {
        Resource {
            group: "golden.example.com".into(),
            version: "v1".into(),
            plural: "widgets".into(),
        }
    }

    fn configmaps() -> Resource {
        Resource {
            group: String::new(),
            version: "v1".into(),
            plural: "configmaps".into(),
        }
    }

    fn by_type<'a>(conditions: &'a [Value], kind: &str) -> &'a Value {
        conditions
            .iter()
            .find(|c| c["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {conditions:?}"))
    }

    #[test]
    fn a_held_custom_resource_is_reported_as_kube_controller_manager_reports_it() {
        let mut content = Content::counted();
        content.left(
            "team",
            &widgets(),
            &[vec!["golden.example.com/hold".into()]],
        );
        let d = decide(&terminating(json!([]), &["kubernetes"]), &content, "t1");
        assert_eq!(d.finalize, None, "content remains");
        let conditions = d.conditions.expect("first conditions");
        let types: Vec<&str> = conditions
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(types, CONDITION_TYPES);
        assert_eq!(
            by_type(&conditions, "NamespaceContentRemaining"),
            &json!({"type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": "t1",
                "reason": "SomeResourcesRemain",
                "message": "Some resources are remaining: widgets.golden.example.com has 1 resource instances"})
        );
        assert_eq!(
            by_type(&conditions, "NamespaceFinalizersRemaining"),
            &json!({"type": "NamespaceFinalizersRemaining", "status": "True", "lastTransitionTime": "t1",
                "reason": "SomeFinalizersRemain",
                "message": "Some content in the namespace has finalizers remaining: golden.example.com/hold in 1 resource instances"})
        );
        assert_eq!(
            by_type(&conditions, "NamespaceDeletionContentFailure"),
            &json!({"type": "NamespaceDeletionContentFailure", "status": "False", "lastTransitionTime": "t1",
                "reason": "ContentDeleted",
                "message": "All content successfully deleted, may be waiting on finalization"})
        );
        for (kind, reason, message) in [
            (
                "NamespaceDeletionDiscoveryFailure",
                "ResourcesDiscovered",
                "All resources successfully discovered",
            ),
            (
                "NamespaceDeletionGroupVersionParsingFailure",
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed",
            ),
        ] {
            let c = by_type(&conditions, kind);
            assert_eq!(
                (&c["status"], &c["reason"], &c["message"]),
                (&json!("False"), &json!(reason), &json!(message))
            );
        }
    }

    #[test]
    fn remaining_resources_and_finalizers_are_counted_and_sorted() {
        let mut content = Content::counted();
        content.left(
            "team",
            &widgets(),
            &[
                vec!["b/hold".into(), "a/hold".into()],
                vec!["b/hold".into()],
            ],
        );
        content.left("team", &configmaps(), &[vec!["b/hold".into()]]);
        let d = decide(&terminating(json!([]), &["kubernetes"]), &content, "t");
        let conditions = d.conditions.unwrap();
        assert_eq!(
            by_type(&conditions, "NamespaceContentRemaining")["message"],
            "Some resources are remaining: configmaps. has 1 resource instances, widgets.golden.example.com has 2 resource instances"
        );
        assert_eq!(
            by_type(&conditions, "NamespaceFinalizersRemaining")["message"],
            "Some content in the namespace has finalizers remaining: a/hold in 1 resource instances, b/hold in 3 resource instances"
        );
    }

    #[test]
    fn objects_left_without_finalizers_are_a_content_failure() {
        let mut content = Content::counted();
        content.left("team", &configmaps(), &[vec![]]);
        content.failed("configmaps \"x\" is forbidden: nope".into());
        let d = decide(&terminating(json!([]), &["kubernetes"]), &content, "t");
        assert_eq!(d.finalize, None);
        let failure = by_type(
            d.conditions.as_deref().unwrap(),
            "NamespaceDeletionContentFailure",
        )
        .clone();
        assert_eq!(failure["status"], "True");
        assert_eq!(failure["reason"], "ContentDeletionFailed");
        assert_eq!(
            failure["message"],
            "Failed to delete all resource types, 2 remaining: configmaps \"x\" is forbidden: nope, unexpected items still remain in namespace: team for gvr: /v1, Resource=configmaps"
        );
    }

    #[test]
    fn an_empty_namespace_is_finalized_keeping_other_finalizers() {
        let d = decide(
            &terminating(
                json!([]),
                &["kubernetes", "z.example.com/x", "a.example.com/y"],
            ),
            &Content::counted(),
            "t",
        );
        assert_eq!(
            d.finalize,
            Some(vec![
                "a.example.com/y".to_string(),
                "z.example.com/x".to_string()
            ])
        );
        let conditions = d.conditions.unwrap();
        assert!(
            conditions.iter().all(|c| c["status"] == "False"),
            "{conditions:?}"
        );
        assert_eq!(
            by_type(&conditions, "NamespaceContentRemaining")["reason"],
            "ContentRemoved"
        );
        assert_eq!(
            by_type(&conditions, "NamespaceFinalizersRemaining")["reason"],
            "ContentHasNoFinalizers"
        );
    }

    #[test]
    fn conditions_already_reported_are_not_written_again() {
        let mut content = Content::counted();
        content.left("team", &widgets(), &[vec!["h".into()]]);
        let first = decide(&terminating(json!([]), &["kubernetes"]), &content, "t1")
            .conditions
            .unwrap();
        let again = decide(&terminating(json!(first), &["kubernetes"]), &content, "t2");
        assert_eq!(again.conditions, None);
    }

    #[test]
    fn a_cleared_condition_moves_its_transition_time_and_a_reworded_one_keeps_it() {
        let mut two = Content::counted();
        two.left("team", &widgets(), &[vec!["h".into()], vec!["h".into()]]);
        let first = decide(&terminating(json!([]), &["kubernetes"]), &two, "t1")
            .conditions
            .unwrap();
        let mut one = Content::counted();
        one.left("team", &widgets(), &[vec!["h".into()]]);
        let reworded = decide(&terminating(json!(first), &["kubernetes"]), &one, "t2")
            .conditions
            .unwrap();
        let remaining = by_type(&reworded, "NamespaceContentRemaining");
        assert_eq!(remaining["lastTransitionTime"], "t1", "still True");
        assert_eq!(
            remaining["message"],
            "Some resources are remaining: widgets.golden.example.com has 1 resource instances"
        );
        let cleared = decide(
            &terminating(json!(reworded), &["kubernetes"]),
            &Content::counted(),
            "t3",
        )
        .conditions
        .unwrap();
        let remaining = by_type(&cleared, "NamespaceContentRemaining");
        assert_eq!(
            (
                &remaining["status"],
                &remaining["lastTransitionTime"],
                &remaining["reason"]
            ),
            (&json!("False"), &json!("t3"), &json!("ContentRemoved"))
        );
        assert_eq!(
            by_type(&cleared, "NamespaceDeletionDiscoveryFailure")["lastTransitionTime"],
            "t1"
        );
    }

    #[test]
    fn other_conditions_are_kept() {
        let theirs = json!({"type": "Example", "status": "True"});
        let d = decide(
            &terminating(json!([theirs]), &["kubernetes"]),
            &Content::counted(),
            "t",
        );
        let conditions = d.conditions.unwrap();
        assert_eq!(conditions[0], theirs);
        assert_eq!(conditions.len(), 6);
    }

    #[test]
    fn while_pods_remain_nothing_else_is_counted_nor_finalized() {
        let d = decide(
            &terminating(json!([]), &["kubernetes"]),
            &Content::pods_remain(),
            "t",
        );
        assert_eq!(d.finalize, None);
        let conditions = d.conditions.unwrap();
        assert_eq!(
            by_type(&conditions, "NamespaceContentRemaining")["status"],
            "False"
        );
        assert_eq!(
            by_type(&conditions, "NamespaceFinalizersRemaining")["status"],
            "False"
        );
    }
}
