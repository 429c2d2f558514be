//! Events fleetform publishes (`events.k8s.io/v1`, which `kubectl get events` and `kubectl
//! describe` show), one object per occurrence.
//!
//! kube-runtime's `Recorder` folds occurrences with the same reason into one Event whose note is
//! the first occurrence's and whose count grows: eleven applied commits read as the first
//! commit's message with `count: 11`. What fleetform reports (a commit applied, a spoke removed,
//! a sync stalled) differs each time, so each occurrence is its own Event. Publishing is best
//! effort: an Event that cannot be written is logged, never an error of the work it reports.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::warn;

/// Longest note kube-apiserver accepts on an Event.
const MAX_NOTE_BYTES: usize = 1024;

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
        if let Err(err) = api.create(&PostParams::default(), &event).await {
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
    let name = regarding.name.as_deref().unwrap_or("object");
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
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
        assert_eq!(event.metadata.generate_name.as_deref(), Some("dev."));
    }
}
