//! Events: core/v1 Events, and events.k8s.io/v1 Events, which are the same objects stored as
//! core/v1 Events and converted on every read, write and watch (see [`crate::events`]).

use std::borrow::Cow;

use serde_json::Value;

use crate::error::FieldError;
use crate::meta::{NameRule, ObjectMeta};
use crate::names;
use crate::resource::{ResourceStrategy, StoredAs, Validation};
use crate::table::{CellSource, PrinterColumn};
use crate::typed::{GoType, TypedField};

/// core/v1 Events: selectable by the object they are about, their reason and type; for
/// backwards compatibility kube-apiserver checks only their contents, not their names.
#[derive(Debug)]
pub struct CoreEvents;

impl ResourceStrategy for CoreEvents {
    fn name_rule(&self) -> NameRule {
        NameRule::Unchecked
    }

    fn to_stored(&self, obj: Value) -> Value {
        crate::events::core_with_zeroes(obj)
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if check.old.is_none() {
            check.errors.extend(event_errors(obj, false));
        }
    }

    fn typed_fields(&self) -> &'static [TypedField] {
        const FIELDS: &[TypedField] = &[
            TypedField::new("firstTimestamp", "Event", GoType::Time),
            TypedField::new("lastTimestamp", "Event", GoType::Time),
            TypedField::new("eventTime", "Event", GoType::MicroTime),
            TypedField::new("series.lastObservedTime", "EventSeries", GoType::MicroTime),
        ];
        FIELDS
    }

    fn allows_create_on_update(&self) -> bool {
        true
    }

    fn field_selectors(&self) -> &'static [&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.name",
            "involvedObject.namespace",
            "involvedObject.uid",
            "reason",
            "type",
        ]
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        columns("involvedObject", "Message", ".message")
    }
}

/// events.k8s.io/v1 Events: core/v1 Events under their events.k8s.io field names, created
/// under the strict rules (a valid name, an `eventTime`).
#[derive(Debug)]
pub struct EventsV1;

impl ResourceStrategy for EventsV1 {
    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if check.old.is_none() {
            check.errors.extend(event_errors(obj, true));
        }
    }

    fn typed_fields(&self) -> &'static [TypedField] {
        const FIELDS: &[TypedField] = &[
            TypedField::new("eventTime", "Event", GoType::MicroTime),
            TypedField::new("series.lastObservedTime", "EventSeries", GoType::MicroTime),
            TypedField::new("deprecatedFirstTimestamp", "Event", GoType::Time),
            TypedField::new("deprecatedLastTimestamp", "Event", GoType::Time),
        ];
        FIELDS
    }

    fn allows_create_on_update(&self) -> bool {
        true
    }

    fn field_selectors(&self) -> &'static [&'static str] {
        &[
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
            "reason",
            "type",
        ]
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        columns("regarding", "Note", ".note")
    }

    fn stored_as(&self) -> Option<StoredAs> {
        Some(StoredAs {
            key: "/events",
            api_version: "v1",
        })
    }

    fn to_stored(&self, obj: Value) -> Value {
        crate::events::to_core(obj)
    }

    fn to_served(&self, obj: Value) -> Value {
        crate::events::to_events_v1(obj)
    }

    fn serves_as_stored(&self) -> bool {
        false
    }

    fn stored_field<'p>(&self, path: &'p str) -> Cow<'p, str> {
        crate::events::core_field(path)
    }
}

/// `kubectl get events`' columns, the object an event is about at `regarding` and its text
/// under `text_column` at `text_path`.
fn columns(regarding: &'static str, text_column: &str, text_path: &str) -> Vec<PrinterColumn> {
    vec![
        PrinterColumn::computed("Last Seen", CellSource::LastSeen),
        PrinterColumn::path("Type", "string", ".type"),
        PrinterColumn::path("Reason", "string", ".reason"),
        PrinterColumn::computed("Object", CellSource::EventObject(regarding)),
        PrinterColumn::path(text_column, "string", text_path),
        PrinterColumn {
            priority: 1,
            ..PrinterColumn::path("Name", "string", ".metadata.name")
        },
    ]
}

/// The most bytes of an Event's reportingInstance, action and reason.
const SHORT_FIELD_LIMIT: usize = 128;
/// The most bytes of an Event's message (note).
const NOTE_LIMIT: usize = 1024;

/// What kube-apiserver refuses in a new Event (in its stored core/v1 form), named by the
/// fields of the group it was written through: the rules every Event meets (its subject in its
/// namespace; once it has an `eventTime`, who reported it, what happened and why), and for
/// events.k8s.io the `eventTime` and series of the newer API.
fn event_errors(obj: &Value, v1: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let text = |field: &str| obj.get(field).and_then(Value::as_str).unwrap_or("");
    let (regarding, controller, note) = if v1 {
        ("regarding", "reportingController", "note")
    } else {
        ("involvedObject", "reportingComponent", "message")
    };
    let namespace = obj.namespace();
    let subject_namespace = obj
        .pointer("/involvedObject/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let timed = obj.get("eventTime").is_some_and(|t| !t.is_null());
    let mismatch = if timed {
        subject_namespace.is_empty() && !matches!(namespace, "default" | "kube-system")
    } else if subject_namespace.is_empty() {
        !matches!(namespace, "" | "default")
    } else {
        namespace != subject_namespace
    };
    if mismatch {
        errs.push(FieldError::invalid(
            format!("{regarding}.namespace"),
            &Value::from(subject_namespace),
            "does not match event.namespace",
        ));
    }
    if timed {
        let reporter = text("reportingComponent");
        if reporter.is_empty() {
            errs.push(FieldError::required(controller, ""));
        }
        for m in names::qualified_name(reporter, "a qualified name") {
            errs.push(FieldError::invalid(controller, &Value::from(reporter), m));
        }
        for (field, what) in [
            ("reportingInstance", "reportingInstance"),
            ("action", "action"),
            ("reason", "reason"),
        ] {
            let value = text(field);
            if value.is_empty() {
                errs.push(FieldError::required(what, ""));
            }
            if value.len() > SHORT_FIELD_LIMIT {
                errs.push(FieldError::invalid(
                    what,
                    &Value::from(""),
                    format!("can have at most {SHORT_FIELD_LIMIT} characters"),
                ));
            }
        }
        if text("message").len() > NOTE_LIMIT {
            errs.push(FieldError::invalid(
                note,
                &Value::from(""),
                format!("can have at most {NOTE_LIMIT} characters"),
            ));
        }
    }
    if v1 {
        if !timed {
            errs.push(FieldError::required("eventTime", ""));
        }
        if let Some(series) = obj.get("series").filter(|s| !s.is_null()) {
            let count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
            if count < 2 {
                errs.push(FieldError::invalid(
                    "series.count",
                    &Value::from(count),
                    "should be at least 2",
                ));
            }
            if series.get("lastObservedTime").is_none_or(Value::is_null) {
                errs.push(FieldError::required("series.lastObservedTime", ""));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1_event(extra: Value) -> Value {
        let mut e = json!({"metadata": {"name": "obj.1", "namespace": "ns"},
            "eventTime": "2020-01-01T00:00:00.000000Z", "reportingComponent": "example.com/recorder",
            "reportingInstance": "r-1", "action": "Reconcile", "reason": "Synced",
            "involvedObject": {"kind": "ConfigMap", "name": "obj", "namespace": "ns"},
            "message": "synced", "type": "Normal"});
        json_patch::merge(&mut e, &extra);
        e
    }

    fn fields(errs: Vec<FieldError>) -> Vec<String> {
        errs.into_iter().map(|e| e.message).collect()
    }

    #[test]
    fn a_complete_event_is_valid_in_either_group() {
        assert!(event_errors(&v1_event(json!({})), true).is_empty());
        assert!(event_errors(&v1_event(json!({})), false).is_empty());
    }

    #[test]
    fn events_k8s_io_requires_an_event_time() {
        assert_eq!(
            fields(event_errors(&v1_event(json!({"eventTime": null})), true)),
            vec!["eventTime: Required value"]
        );
        assert!(event_errors(&v1_event(json!({"eventTime": null})), false).is_empty());
    }

    #[test]
    fn a_timed_event_names_who_reported_what_and_why() {
        let bare = v1_event(json!({"reportingComponent": "", "action": "", "reason": ""}));
        let errs = fields(event_errors(&bare, true));
        assert_eq!(errs[0], "reportingController: Required value");
        assert_eq!(
            errs[1],
            "reportingController: Invalid value: \"\": name part must be non-empty"
        );
        assert!(errs.contains(&"action: Required value".to_string()));
        assert!(errs.contains(&"reason: Required value".to_string()));
        assert!(fields(event_errors(&bare, false))[0].starts_with("reportingComponent:"));
    }

    #[test]
    fn an_event_is_about_an_object_in_its_namespace() {
        let elsewhere =
            v1_event(json!({"eventTime": null, "involvedObject": {"namespace": "other"}}));
        assert_eq!(
            fields(event_errors(&elsewhere, false)),
            vec![
                "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"
            ]
        );
        let unnamed = v1_event(json!({"involvedObject": {"namespace": null}}));
        assert_eq!(
            fields(event_errors(&unnamed, true)),
            vec!["regarding.namespace: Invalid value: \"\": does not match event.namespace"]
        );
    }

    #[test]
    fn a_series_counts_at_least_two() {
        let series = v1_event(json!({"series": {"count": 1}}));
        assert_eq!(
            fields(event_errors(&series, true)),
            vec![
                "series.count: Invalid value: 1: should be at least 2",
                "series.lastObservedTime: Required value"
            ]
        );
    }
}
