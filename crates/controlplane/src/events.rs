//! core/v1 Events and events.k8s.io/v1 Events are one set of stored objects, as in
//! kube-apiserver: both resources are stored as core/v1 Events under one storage key, and
//! events.k8s.io/v1 requests are converted on the way in (writes) and out (reads, lists,
//! watches), field by field as kubernetes' `pkg/apis/events/v1` conversion does.

use std::borrow::Cow;
use std::convert::Infallible;

use serde_json::{Map, Value};

use crate::meta::ObjectMeta;
use crate::storage::{Store, WriteOp};

/// Where earlier versions stored events.k8s.io/v1 Events, apart from core/v1 Events.
const STORED_APART: &str = "events.k8s.io/events";

/// Fields renamed between the two schemas: (events.k8s.io/v1, core/v1). Every other field
/// (eventTime, series, related, action, reason, type, reportingInstance, metadata) is the
/// same in both.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: Value, to_core: bool) -> Value {
    let Value::Object(fields) = obj else {
        return obj;
    };
    let out: Map<String, Value> = fields
        .into_iter()
        .map(|(k, v)| {
            let renamed = RENAMED.iter().find_map(|(v1, core)| {
                let (from, to) = if to_core { (v1, core) } else { (core, v1) };
                (k == *from).then_some(*to)
            });
            (renamed.map_or(k, str::to_string), v)
        })
        .collect();
    Value::Object(out)
}

/// The fields a core/v1 Event always has, as Go writes its struct: the zero value of each field
/// without `omitempty` (`source: {}`, `firstTimestamp: null`, `reportingComponent: ""`, ...).
const CORE_ZEROES: [(&str, ZeroValue); 7] = [
    ("involvedObject", ZeroValue::Object),
    ("source", ZeroValue::Object),
    ("firstTimestamp", ZeroValue::Null),
    ("lastTimestamp", ZeroValue::Null),
    ("eventTime", ZeroValue::Null),
    ("reportingComponent", ZeroValue::String),
    ("reportingInstance", ZeroValue::String),
];

/// The same for an events.k8s.io/v1 Event.
const V1_ZEROES: [(&str, ZeroValue); 4] = [
    ("eventTime", ZeroValue::Null),
    ("deprecatedSource", ZeroValue::Object),
    ("deprecatedFirstTimestamp", ZeroValue::Null),
    ("deprecatedLastTimestamp", ZeroValue::Null),
];

/// events.k8s.io/v1 fields with `omitempty`: absent when empty.
const V1_OMITTED_WHEN_EMPTY: [&str; 6] = [
    "reportingController",
    "reportingInstance",
    "action",
    "note",
    "type",
    "deprecatedCount",
];

#[derive(Clone, Copy)]
enum ZeroValue {
    Object,
    Null,
    String,
}

impl ZeroValue {
    fn value(self) -> Value {
        match self {
            ZeroValue::Object => Value::Object(Map::new()),
            ZeroValue::Null => Value::Null,
            ZeroValue::String => Value::String(String::new()),
        }
    }
}

fn with_zeroes(mut obj: Value, zeroes: &[(&str, ZeroValue)]) -> Value {
    if let Some(o) = obj.as_object_mut() {
        for (field, zero) in zeroes {
            o.entry(*field).or_insert_with(|| zero.value());
        }
    }
    obj
}

/// A core/v1 Event as stored: with the zero values of its fields that Go never omits.
pub fn core_with_zeroes(obj: Value) -> Value {
    with_zeroes(obj, &CORE_ZEROES)
}

/// An events.k8s.io/v1 Event in its core/v1 form.
pub fn to_core(obj: Value) -> Value {
    core_with_zeroes(rename(obj, true))
}

/// A core/v1 Event in its events.k8s.io/v1 form (before apiVersion and kind are set).
pub fn to_events_v1(obj: Value) -> Value {
    let mut v1 = rename(obj, false);
    if let Some(o) = v1.as_object_mut() {
        o.retain(|k, v| {
            let empty = match v {
                Value::String(s) => s.is_empty(),
                Value::Number(n) => n.as_i64() == Some(0),
                Value::Null => true,
                _ => false,
            };
            !(empty && V1_OMITTED_WHEN_EMPTY.contains(&k.as_str()))
        });
    }
    with_zeroes(v1, &V1_ZEROES)
}

/// The core/v1 field an events.k8s.io/v1 field selector names (`regarding.name` →
/// `involvedObject.name`).
pub fn core_field(path: &str) -> Cow<'_, str> {
    let (head, rest) = path.split_once('.').unwrap_or((path, ""));
    match RENAMED.iter().find(|(v1, _)| *v1 == head) {
        Some((_, core)) if rest.is_empty() => Cow::Borrowed(core),
        Some((_, core)) => Cow::Owned(format!("{core}.{rest}")),
        None => Cow::Borrowed(path),
    }
}

/// Moves Events that earlier versions stored apart under `events.k8s.io/events` into the
/// shared core/v1 storage, converted (an Event of the same name there wins). Runs at start.
pub async fn migrate_stored_apart(store: &Store) {
    let (_, apart) = store.list(STORED_APART, None, None);
    for event in apart {
        let (ns, name) = (event.namespace().to_string(), event.name().to_string());
        let mut core = to_core((*event).clone());
        if let Some(o) = core.as_object_mut() {
            o.insert("apiVersion".into(), Value::String("v1".into()));
        }
        let moved = store.write("/events", &ns, &name, false, |cur| {
            Ok::<_, Infallible>(match cur {
                Some(_) => WriteOp::Unchanged,
                None => WriteOp::Put(core),
            })
        });
        let removed = store.write(STORED_APART, &ns, &name, false, |_| {
            Ok::<_, Infallible>(WriteOp::Delete)
        });
        for written in [moved, removed].into_iter().flatten() {
            if let Err(e) = written.ack.wait().await {
                tracing::warn!(%ns, %name, error = %e, "moving an events.k8s.io Event into core/v1 storage failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn events_v1() -> std::sync::Arc<crate::resource::ResourceInfo> {
        crate::registry::Registry::with_builtins()
            .lookup("events.k8s.io", "v1", "events")
            .expect("events.k8s.io/v1 events are served")
    }

    #[test]
    fn events_v1_fields_map_to_core_and_back() {
        let v1 = json!({"metadata": {"name": "e"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
            "reportingController": "fleetform.io/agent", "reportingInstance": "agent-1",
            "action": "Join", "reason": "Joined", "type": "Normal", "note": "joined the hub",
            "regarding": {"kind": "Spoke", "name": "s1", "namespace": "fleetform-system", "uid": "u"},
            "related": {"kind": "Hub", "name": "h"},
            "deprecatedSource": {"component": "agent", "host": "n1"},
            "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
            "deprecatedLastTimestamp": "2026-01-01T00:00:01Z", "deprecatedCount": 2});
        let info = events_v1();
        let core = info.strategy.to_stored(v1.clone());
        assert_eq!(core["eventTime"], "2026-01-01T00:00:00.000000Z");
        assert_eq!(
            core,
            json!({"metadata": {"name": "e"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
            "reportingComponent": "fleetform.io/agent", "reportingInstance": "agent-1",
            "action": "Join", "reason": "Joined", "type": "Normal", "message": "joined the hub",
            "involvedObject": {"kind": "Spoke", "name": "s1", "namespace": "fleetform-system", "uid": "u"},
            "related": {"kind": "Hub", "name": "h"},
            "source": {"component": "agent", "host": "n1"},
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:01Z", "count": 2})
        );
        assert_eq!(info.strategy.to_served(core), v1);
    }

    #[test]
    fn each_view_shows_the_other_groups_fields_as_go_zero_values() {
        let info = events_v1();
        let written_as_v1 = json!({"metadata": {"name": "e"}, "eventTime": "2020-01-01T00:00:00.000000Z",
            "reportingController": "c", "reportingInstance": "i", "action": "A", "reason": "R",
            "regarding": {"kind": "ConfigMap", "name": "obj"}, "note": "n", "type": "Normal"});
        let core = info.strategy.to_stored(written_as_v1);
        assert_eq!(core["source"], json!({}));
        assert_eq!(core["firstTimestamp"], Value::Null);
        assert_eq!(core["lastTimestamp"], Value::Null);
        assert!(core.get("count").is_none());
        let written_as_core = core_with_zeroes(json!({"metadata": {"name": "c"},
            "involvedObject": {"kind": "ConfigMap", "name": "obj"}, "reason": "R", "message": "m",
            "source": {"component": "x"}, "count": 1, "type": "Normal"}));
        assert_eq!(written_as_core["eventTime"], Value::Null);
        assert_eq!(written_as_core["reportingComponent"], "");
        let v1 = info.strategy.to_served(written_as_core);
        assert_eq!(v1["eventTime"], Value::Null);
        assert_eq!(v1["deprecatedCount"], 1);
        assert!(v1.get("reportingController").is_none());
        assert!(v1.get("reportingInstance").is_none());
    }

    #[test]
    fn field_selectors_name_the_stored_fields() {
        let info = events_v1();
        let stored = |path| info.strategy.stored_field(path).into_owned();
        assert_eq!(stored("regarding.name"), "involvedObject.name");
        assert_eq!(stored("reason"), "reason");
        assert_eq!(stored("metadata.name"), "metadata.name");
    }

    #[tokio::test]
    async fn events_stored_apart_move_into_core_storage() {
        let store = Store::open(
            Box::new(crate::storage::memory::MemoryBackend),
            Default::default(),
            false,
            crate::storage::DEFAULT_BACKLOG,
        )
        .unwrap();
        let apart = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "ns"}, "note": "old", "reason": "R",
            "regarding": {"kind": "Spoke", "name": "s"}});
        store
            .write(STORED_APART, "ns", "e1", false, |_| {
                Ok::<_, Infallible>(WriteOp::Put(apart))
            })
            .unwrap();
        migrate_stored_apart(&store).await;
        assert!(store.list(STORED_APART, None, None).1.is_empty());
        let moved = store
            .get("/events", "ns", "e1")
            .expect("moved into core storage");
        assert_eq!(moved["apiVersion"], "v1");
        assert_eq!(moved["message"], "old");
        assert_eq!(moved["involvedObject"]["name"], "s");
    }
}
