//! Events: core/v1 Events, and events.k8s.io/v1 Events, which are the same objects stored as
//! core/v1 Events and converted on every read, write and watch (see [`crate::events`]).

use std::borrow::Cow;

use serde_json::Value;

use super::{ResourceStrategy, StoredAs};
use crate::registry::{CellSource, PrinterColumn};

/// core/v1 Events: selectable by the object they are about, their reason and type.
#[derive(Debug)]
pub struct CoreEvents;

impl ResourceStrategy for CoreEvents {
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

/// events.k8s.io/v1 Events: core/v1 Events under their events.k8s.io field names.
#[derive(Debug)]
pub struct EventsV1;

impl ResourceStrategy for EventsV1 {
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
