//! Events fleetform publishes (`events.k8s.io/v1`, which `kubectl get events` and `kubectl
//! describe` show), one object per occurrence, and the names every Event fleetform writes gets.
//!
//! kube-runtime's `Recorder` folds occurrences with the same reason into one Event whose note is
//! the first occurrence's and whose count grows: eleven applied commits read as the first
//! commit's message with `count: 11`. What fleetform reports (a commit applied, a spoke removed,
//! a sync stalled) differs each time, so each occurrence is its own Event. Publishing is best
//! effort: an Event that cannot be written is logged, never an error of the work it reports.
//!
//! Every Event is named as client-go's recorders name theirs, `<object>.<nanoseconds in hex>`
//! ([`event_name`]): kube-apiserver refuses a `generateName` that does not end in an
//! alphanumeric (`spoke.` is refused with 422), and a name that is the object's lets `kubectl`
//! users see what an Event is about at a glance. Two Events of one process never share a
//! timestamp, and a name another process took meanwhile is made again ([`create`]), so no
//! occurrence is lost to a clash.

use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::warn;

use crate::runtime::error::is_conflict;

/// Longest note kube-apiserver accepts on an Event.
const MAX_NOTE_BYTES: usize = 1024;
/// Longest object name kube-apiserver accepts (a DNS-1123 subdomain).
const MAX_NAME_BYTES: usize = 253;
/// How many names an Event is tried under before it is given up (each clash makes a new one).
const NAME_ATTEMPTS: usize = 3;

/// The nanoseconds since the epoch the last Event name of this process was made with.
static LAST_NAMED: AtomicU64 = AtomicU64::new(0);

/// The instant (nanoseconds since the epoch) a new Event's name is made with: `now`, or just
/// after the last one this process used when the clock has not moved past it, so that two Events
/// about one object never get one name.
fn naming_instant(now: u64) -> u64 {
    let previous = LAST_NAMED
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
            Some(now.max(last.saturating_add(1)))
        })
        .unwrap_or_else(|last| last);
    now.max(previous.saturating_add(1))
}

/// The name of an Event about the object `object` made at `nanos` (since the epoch), as
/// client-go's recorders name theirs: `<object>.<nanos in hex>`. The object's part is cut down
/// to what a DNS-1123 subdomain allows (an RBAC object's name may hold `:`; a long name leaves no
/// room for the suffix), so the name is always one kube-apiserver accepts.
pub fn event_name(object: &str, nanos: u64) -> String {
    let suffix = format!(".{nanos:x}");
    let lowered: String = object
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect();
    let mut prefix = String::new();
    for label in lowered.split('.') {
        let label = label.trim_matches('-');
        if label.is_empty() {
            continue;
        }
        let room = (MAX_NAME_BYTES - suffix.len()).saturating_sub(prefix.len());
        let separator = usize::from(!prefix.is_empty());
        if room <= separator {
            break;
        }
        let label = label[..label.len().min(room - separator)].trim_end_matches('-');
        if label.is_empty() {
            break;
        }
        if separator == 1 {
            prefix.push('.');
        }
        prefix.push_str(label);
    }
    if prefix.is_empty() {
        prefix.push_str("object");
    }
    prefix + &suffix
}

/// Creates `event` through `api`, named for the object `about` by [`event_name`]. A name taken
/// meanwhile (another process's Event about the same object in the same nanosecond) is made
/// again, so the occurrence is not lost.
pub async fn create<K>(api: &Api<K>, about: &str, mut event: K) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        let now = u64::try_from(Timestamp::now().as_nanosecond()).unwrap_or_default();
        let meta = event.meta_mut();
        meta.name = Some(event_name(about, naming_instant(now)));
        meta.generate_name = None;
        match api.create(&PostParams::default(), &event).await {
            Err(err) if is_conflict(&err) && attempts < NAME_ATTEMPTS => continue,
            result => return result,
        }
    }
}

/// Normal or Warning, as Kubernetes spells them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Publishes Events as one controller (`reportingController`) of one process
/// (`reportingInstance`).
#[derive(Clone)]
pub struct Reporter {
    client: Client,
    controller: String,
    instance: String,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("controller", &self.controller)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Reporter {
    pub fn new(client: Client, controller: impl Into<String>, instance: impl Into<String>) -> Self {
        Reporter {
            client,
            controller: controller.into(),
            instance: instance.into(),
        }
    }

    /// Publishes one Event about `regarding` in its namespace (`default` for a cluster-scoped
    /// object), with `reason` (CamelCase), `action` (what was done) and a note for people.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        kind: EventType,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let event = event(
            (&self.controller, &self.instance),
            regarding,
            &namespace,
            (kind, reason, action),
            note.into(),
        );
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let about = regarding.name.as_deref().unwrap_or_default();
        if let Err(err) = create(&api, about, event).await {
            warn!(
                %err,
                reason,
                object = regarding.name.as_deref().unwrap_or_default(),
                "cannot publish an Event"
            );
        }
    }
}

/// The Event `reporter` (controller, instance) publishes about `regarding`.
fn event(
    (controller, instance): (&str, &str),
    regarding: &ObjectReference,
    namespace: &str,
    (kind, reason, action): (EventType, &str, &str),
    mut note: String,
) -> Event {
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES - 3;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    Event {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(Timestamp::now())),
        type_: Some(kind.as_str().to_string()),
        reason: Some(reason.to_string()),
        action: Some(action.to_string()),
        note: Some(note),
        regarding: Some(regarding.clone()),
        reporting_controller: Some(controller.to_string()),
        reporting_instance: Some(instance.to_string()),
        ..Event::default()
    }
}

/// A reference to `object` for an Event's `regarding`.
pub fn reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).to_string()),
        kind: Some(K::kind(&()).to_string()),
        name: Some(object.name_any()),
        namespace: object.namespace(),
        uid: object.uid(),
        resource_version: object.resource_version(),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_note_is_cut_at_what_the_api_server_accepts_on_a_character_boundary() {
        let regarding = ObjectReference {
            name: Some("dev".into()),
            ..ObjectReference::default()
        };
        let event = event(
            ("fleetform", "test"),
            &regarding,
            "default",
            (EventType::Normal, "Applied", "Apply"),
            "é".repeat(2000),
        );
        let note = event.note.unwrap();
        assert!(note.len() <= MAX_NOTE_BYTES, "{}", note.len());
        assert!(note.ends_with("..."));
    }

    /// What kube-apiserver checks of an object name (a DNS-1123 subdomain).
    fn is_subdomain(name: &str) -> bool {
        name.len() <= MAX_NAME_BYTES
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    }

    #[test]
    fn events_are_named_as_client_go_names_them() {
        assert_eq!(
            event_name("dev", 0x17a2_b3c4_d5e6_f789),
            "dev.17a2b3c4d5e6f789"
        );
        assert_eq!(event_name("fleet.example.com", 255), "fleet.example.com.ff");
    }

    #[test]
    fn an_event_name_is_one_the_api_server_accepts_whatever_the_object_is_called() {
        let long = "a".repeat(MAX_NAME_BYTES);
        for object in [
            "system:open-cluster-management:dev:agent",
            "Upper.Case",
            "-dashes-.-.dots.",
            "",
            ":::",
            long.as_str(),
            &format!("{}.{}", "b".repeat(230), "c".repeat(30)),
            &format!("{}-{}", "d".repeat(235), "e".repeat(30)),
        ] {
            let name = event_name(object, u64::MAX);
            assert!(is_subdomain(&name), "{object:?} gives {name:?}");
            assert!(name.ends_with(".ffffffffffffffff"), "{name}");
        }
        assert_eq!(
            event_name("system:open-cluster-management:dev", 1),
            "system-open-cluster-management-dev.1"
        );
    }

    #[test]
    fn two_events_of_one_instant_get_two_names() {
        let first = naming_instant(1_000);
        let second = naming_instant(1_000);
        let after_a_step_back = naming_instant(10);
        assert!(first >= 1_000);
        assert!(second > first);
        assert!(after_a_step_back > second);
    }
}
