//! Events fleetform publishes (`events.k8s.io/v1`, which `kubectl get events` and `kubectl
//! describe` show), one object per occurrence, and the names every Event fleetform writes gets.
//!
//! kube-runtime's `Recorder` folds occurrences with the same reason into one Event whose note is
//! the first occurrence's and whose count grows: eleven applied commits read as the first
//! commit's message with `count: 11`. What fleetform reports (a commit applied, a spoke removed,
//! a sync stalled) differs each time, so each occurrence is its own Event. Publishing is best
//! effort: an Event that cannot be written is logged, never an error of the work it reports.
//!
//! Events are written off the work they report: [`Reporter::publish`] queues one and returns,
//! and a writer task per reporter writes the queue a few at a time ([`WRITES_IN_FLIGHT`]), as
//! client-go's event broadcaster writes from a queue of its own. So a commit that touches every
//! spoke does not wait for an Event per object it wrote (10,000 round trips at 10,000 spokes)
//! before its status says it is applied. Unlike client-go's, a full queue drops nothing: it makes
//! publishers wait. An Event that whoever sees the caller's next write must find (the failure a
//! condition reports, the last word on a Spoke about to be gone) is published with
//! [`Reporter::publish_written`], which returns once it is written; a component that stops calls
//! [`Reporter::flush_at_stop`], so that its last Events are not lost with the process.
//!
//! Every Event is named as client-go's recorders name theirs, `<object>.<nanoseconds in hex>`
//! ([`event_name`]): kube-apiserver refuses a `generateName` that does not end in an
//! alphanumeric (`spoke.` is refused with 422), and a name that is the object's lets `kubectl`
//! users see what an Event is about at a glance. Two Events of one process never share a
//! timestamp, and a name another process took meanwhile is made again ([`create`]), so no
//! occurrence is lost to a clash.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, mpsc};
use tracing::warn;

use crate::runtime::error::is_conflict;

/// Longest note kube-apiserver accepts on an Event.
const MAX_NOTE_BYTES: usize = 1024;
/// Longest object name kube-apiserver accepts (a DNS-1123 subdomain).
const MAX_NAME_BYTES: usize = 253;
/// How many names an Event is tried under before it is given up (each clash makes a new one).
const NAME_ATTEMPTS: usize = 3;
/// How many Events a reporter queues before publishers wait for its writer: a commit's worth
/// at the 10,000 spokes fleetform is sized for (the sync publishes one per object it wrote). An
/// Event takes a KiB or two, and only while it is queued: the channel grows as it fills.
const QUEUE_LENGTH: usize = 10_000;
/// How many Events a reporter's writer has in flight at once.
const WRITES_IN_FLIGHT: usize = 8;
/// How long a stopping component waits for its queued Events to be written.
const FLUSH_AT_STOP: Duration = Duration::from_secs(10);

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
/// (`reportingInstance`). Clones share one queue and writer.
#[derive(Clone)]
pub struct Reporter {
    client: Client,
    controller: String,
    instance: String,
    limits: Limits,
    /// The writer's queue, made (and the writer started) by the first publish, which runs in
    /// the runtime the writer needs. The writer ends once every clone is gone and it is drained.
    queue: Arc<OnceLock<mpsc::Sender<Queued>>>,
    progress: Arc<Progress>,
}

/// How many Events a reporter queues, and how many it writes at once.
#[derive(Clone, Copy, Debug)]
struct Limits {
    queue_length: usize,
    writes_in_flight: usize,
}

/// An Event waiting for the writer.
struct Queued {
    namespace: String,
    about: String,
    reason: String,
    event: Event,
}

/// How many of a reporter's Events are queued or being written, and a wake-up each time one
/// is done.
#[derive(Default)]
struct Progress {
    unwritten: AtomicUsize,
    written: Notify,
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
        let limits = Limits {
            queue_length: QUEUE_LENGTH,
            writes_in_flight: WRITES_IN_FLIGHT,
        };
        Self::with_limits(client, controller, instance, limits)
    }

    fn with_limits(
        client: Client,
        controller: impl Into<String>,
        instance: impl Into<String>,
        limits: Limits,
    ) -> Self {
        Reporter {
            client,
            controller: controller.into(),
            instance: instance.into(),
            limits,
            queue: Arc::default(),
            progress: Arc::default(),
        }
    }

    /// Queues one Event about `regarding` in its namespace (`default` for a cluster-scoped
    /// object), with `reason` (CamelCase), `action` (what was done) and a note for people. It
    /// returns once the Event is queued (waiting only while the queue is full); the writer
    /// writes it soon after, so whoever reads Events right after what the caller writes next
    /// may not find it yet: [`Reporter::publish_written`] is for an Event they must find.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        kind: EventType,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        let queued = self.event(regarding, (kind, reason, action), note.into());
        let queue = self.queue.get_or_init(|| {
            let (queue, events) = mpsc::channel(self.limits.queue_length);
            tokio::spawn(write_queued(
                self.client.clone(),
                events,
                self.progress.clone(),
                self.limits.writes_in_flight,
            ));
            queue
        });
        // A slot first, then the count: a publish given up while it waits counts for nothing.
        match queue.reserve().await {
            Ok(slot) => {
                self.progress.unwritten.fetch_add(1, Ordering::AcqRel);
                slot.send(queued);
            }
            // Only a runtime shutting down takes the writer away.
            Err(_) => warn!(reason, "cannot publish an Event: the process is stopping"),
        }
    }

    /// [`Reporter::publish`], returning once the Event is written: for an Event that whoever
    /// sees what the caller writes next must find too (a failure's, before the condition that
    /// reports it; a Spoke's last, before it is gone). It is written at once, beside the queue,
    /// so an Event queued earlier may be written after it (each keeps the time it happened).
    pub async fn publish_written(
        &self,
        regarding: &ObjectReference,
        kind: EventType,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        write(
            &self.client,
            self.event(regarding, (kind, reason, action), note.into()),
        )
        .await;
    }

    /// Waits until nothing this reporter (or a clone) queued is left to write: each Event is
    /// written, or given up on and logged.
    pub async fn flush(&self) {
        loop {
            let written = self.progress.written.notified();
            tokio::pin!(written);
            // Registered before the count is read, so a write finishing in between wakes it.
            written.as_mut().enable();
            if self.progress.unwritten.load(Ordering::Acquire) == 0 {
                return;
            }
            written.await;
        }
    }

    /// [`Reporter::flush`] for a component that is stopping, so that its last Events are not
    /// lost with the process; at most [`FLUSH_AT_STOP`], so that an API server that is gone or
    /// slow cannot hold the stop.
    pub async fn flush_at_stop(&self) {
        if tokio::time::timeout(FLUSH_AT_STOP, self.flush())
            .await
            .is_err()
        {
            warn!(
                controller = self.controller,
                unwritten = self.progress.unwritten.load(Ordering::Acquire),
                "stopping with Events not written: the API server did not take them within {} s",
                FLUSH_AT_STOP.as_secs()
            );
        }
    }

    fn event(
        &self,
        regarding: &ObjectReference,
        (kind, reason, action): (EventType, &str, &str),
        note: String,
    ) -> Queued {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let event = event(
            (&self.controller, &self.instance),
            regarding,
            &namespace,
            (kind, reason, action),
            note,
        );
        Queued {
            namespace,
            about: regarding.name.clone().unwrap_or_default(),
            reason: reason.to_string(),
            event,
        }
    }
}

/// Writes one Event; one that cannot be written is logged.
async fn write(client: &Client, queued: Queued) {
    let api: Api<Event> = Api::namespaced(client.clone(), &queued.namespace);
    if let Err(err) = create(&api, &queued.about, queued.event).await {
        warn!(
            %err,
            reason = queued.reason,
            object = queued.about,
            "cannot publish an Event"
        );
    }
}

impl Progress {
    fn done(&self) {
        self.unwritten.fetch_sub(1, Ordering::AcqRel);
        self.written.notify_waiters();
    }
}

/// Writes a reporter's queued Events, `in_flight` at a time, until every sender is gone and
/// the queue is drained.
async fn write_queued(
    client: Client,
    events: mpsc::Receiver<Queued>,
    progress: Arc<Progress>,
    in_flight: usize,
) {
    let queued = futures::stream::unfold(events, |mut events| async move {
        events.recv().await.map(|queued| (queued, events))
    });
    queued
        .for_each_concurrent(in_flight, |queued| {
            let (client, progress) = (&client, &progress);
            async move {
                write(client, queued).await;
                progress.done();
            }
        })
        .await;
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

    use std::sync::Mutex;
    use std::task::{Context, Poll};

    use futures::future::BoxFuture;
    use http::{Request, Response};
    use http_body_util::BodyExt;
    use kube::client::Body;
    use tokio::sync::{Semaphore, watch};

    /// An API server whose Event writes the test lets through one by one: it counts the writes
    /// it was sent, holds each until the test opens the gate for it, then keeps it as written.
    #[derive(Clone)]
    struct HeldServer {
        sent: Arc<watch::Sender<usize>>,
        gate: Arc<Semaphore>,
        written: Arc<Mutex<Vec<Event>>>,
    }

    impl HeldServer {
        fn new() -> Self {
            HeldServer {
                sent: Arc::new(watch::channel(0).0),
                gate: Arc::new(Semaphore::new(0)),
                written: Arc::default(),
            }
        }

        fn client(&self) -> Client {
            Client::new(self.clone(), "default")
        }

        /// Resolves once `count` writes have reached the server.
        async fn sent(&self, count: usize) {
            let mut sent = self.sent.subscribe();
            sent.wait_for(|sent| *sent >= count).await.unwrap();
        }

        /// Lets `count` more writes through.
        fn let_through(&self, count: usize) {
            self.gate.add_permits(count);
        }

        /// The notes of the Events written, in the order they were.
        fn written(&self) -> Vec<String> {
            self.written
                .lock()
                .unwrap()
                .iter()
                .map(|event| event.note.clone().unwrap_or_default())
                .collect()
        }
    }

    impl tower_service::Service<Request<Body>> for HeldServer {
        type Response = Response<Body>;
        type Error = kube::Error;
        type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<Body>) -> Self::Future {
            let server = self.clone();
            Box::pin(async move {
                let body = request.into_body().collect().await.unwrap().to_bytes();
                let event: Event = serde_json::from_slice(&body).unwrap();
                server.sent.send_modify(|sent| *sent += 1);
                server.gate.acquire().await.unwrap().forget();
                server.written.lock().unwrap().push(event);
                Response::builder()
                    .status(201)
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_vec()))
                    .map_err(|err| kube::Error::Service(err.into()))
            })
        }
    }

    fn about() -> ObjectReference {
        ObjectReference {
            kind: Some("Spoke".into()),
            name: Some("dev".into()),
            namespace: Some("fleetform-system".into()),
            ..ObjectReference::default()
        }
    }

    async fn publish(reporter: &Reporter, note: &str) {
        reporter
            .publish(&about(), EventType::Normal, "Tested", "Test", note)
            .await;
    }

    #[tokio::test]
    async fn publishing_does_not_wait_for_the_write_and_a_flush_waits_until_it_is_written() {
        let server = HeldServer::new();
        let reporter = Reporter::new(server.client(), "fleetform", "test");
        tokio::select! {
            biased;
            () = publish(&reporter, "applied") => {}
            () = server.sent(1) => panic!("publishing waited for the API server to write the Event"),
        }
        server.sent(1).await;
        let flushed = reporter.flush();
        tokio::pin!(flushed);
        assert!(
            futures::poll!(flushed.as_mut()).is_pending(),
            "a flush returned while the Event was still being written"
        );
        assert!(server.written().is_empty());

        server.let_through(1);
        flushed.await;
        assert_eq!(server.written(), ["applied"]);
    }

    #[tokio::test]
    async fn a_full_queue_makes_publishers_wait_and_loses_no_event() {
        let server = HeldServer::new();
        let limits = Limits {
            queue_length: 2,
            writes_in_flight: 1,
        };
        let reporter = Reporter::with_limits(server.client(), "fleetform", "test", limits);
        // One being written (held by the server), two queued behind it: the queue is full.
        publish(&reporter, "0").await;
        server.sent(1).await;
        publish(&reporter, "1").await;
        publish(&reporter, "2").await;
        let fourth = publish(&reporter, "3");
        tokio::pin!(fourth);
        assert!(
            futures::poll!(fourth.as_mut()).is_pending(),
            "a publish returned though the queue was full"
        );

        server.let_through(4);
        fourth.await;
        reporter.flush().await;
        assert_eq!(server.written(), ["0", "1", "2", "3"]);
    }

    #[tokio::test]
    async fn an_event_published_written_is_written_when_publishing_returns() {
        let server = HeldServer::new();
        let reporter = Reporter::new(server.client(), "fleetform", "test");
        let about = about();
        let published = reporter.publish_written(
            &about,
            EventType::Warning,
            "SpokeUnreachable",
            "Reconcile",
            "no kubeconfig",
        );
        tokio::pin!(published);
        tokio::select! {
            biased;
            () = published.as_mut() => panic!("publishing returned before the Event was written"),
            () = server.sent(1) => {}
        }
        server.let_through(1);
        published.await;
        assert_eq!(server.written(), ["no kubeconfig"]);
    }

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
