//! Notifications of a FleetSync's transitions (`spec.notify`): a commit applied, the sync
//! stalled (an invalid commit, the prune guard, a signature), Ready again, and on its hub a spoke
//! Available → Unknown (or False) and back, a rollout halted and resumed (found by
//! [`super::watch`]). Each provider is a generic webhook (JSON) or a Slack-compatible one, at the
//! `address` its Secret holds.
//!
//! Sending never holds up a sync: notices go through a bounded queue to one delivery task
//! (a full queue drops the notice, logged). Per FleetSync and provider, a notice equal to the
//! last one about the same subject (the FleetSync, a spoke, a hub) is dropped, and after a
//! message the next one waits for the end of the window ([`DEFAULT_WINDOW`]). Every subject
//! shares that one window: what happened meanwhile goes as one message carrying the latest notice
//! of each subject and the count of those folded into them, so a flapping spoke, or a hundred
//! spokes going Unknown at once, send one message per window. A delivery that fails is retried
//! with backoff ([`ATTEMPTS`] in all); one the receiver refuses (4xx) is not.

use std::collections::HashMap;
use std::time::Duration;

use http::{Method, Request, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::api::fleet::{FleetSync, NotifyProvider, NotifySpec, SYSTEM_NAMESPACE};

/// After a message, how long further ones for the same FleetSync and provider are folded.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// Deliveries of one message, the first included.
pub const ATTEMPTS: u32 = 5;
/// The first retry's delay; each next one doubles it.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// Notices waiting for the delivery task; more are dropped.
const QUEUE: usize = 1024;
/// The key of a provider's Secret that holds the URL to post to.
pub const ADDRESS_KEY: &str = "address";
/// The optional key of a generic provider's Secret whose value signs the body
/// (`X-Signature: sha256=HMAC`, as the push receiver checks).
pub const TOKEN_KEY: &str = "token";

/// What happened to a FleetSync or on its hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Event {
    Applied,
    Stalled,
    Recovered,
    /// A spoke's `ManagedClusterConditionAvailable` left True (Unknown or False).
    SpokeUnavailable,
    /// A spoke's `ManagedClusterConditionAvailable` is True again.
    SpokeAvailable,
    /// A hub's `RolloutHalted` turned True.
    RolloutHalted,
    /// A hub's `RolloutHalted` is False again.
    RolloutResumed,
}

/// What a notice is about: each subject's latest notice is kept apart when notices fold.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "kind", content = "name")]
pub enum Subject {
    FleetSync,
    Spoke(String),
    Hub(String),
}

/// One transition of one FleetSync, or of a spoke or hub it manages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub event: Event,
    pub subject: Subject,
    /// The condition or event reason (`Applied`, `SignatureInvalid`, `Recovered`,
    /// `ManagedClusterLeaseUpdateStopped`, …).
    pub reason: String,
    pub commit: Option<String>,
    pub message: String,
}

/// The notice of `event`, which `outcome` came to, in the words of its Event `note`.
pub fn notice(event: Event, outcome: &super::status::Outcome, note: &str) -> Notice {
    Notice {
        event,
        subject: Subject::FleetSync,
        reason: match event {
            Event::Recovered => super::status::REASON_RECOVERED.to_string(),
            _ => outcome.reason().to_string(),
        },
        commit: outcome.sha().map(str::to_string),
        message: note.to_string(),
    }
}

impl Notice {
    /// Whether `other` says the same thing (its wording aside).
    fn same(&self, other: &Notice) -> bool {
        self.event == other.event
            && self.subject == other.subject
            && self.reason == other.reason
            && self.commit == other.commit
    }
}

/// What to do with a notice for one FleetSync and provider.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// Send it now.
    Send,
    /// Hold it (as the latest) and send at this instant.
    HoldUntil(Instant),
    /// Hold it; a send is already due at the window's end.
    Held,
    /// The last message said the same.
    Duplicate,
}

/// The messages of one FleetSync and provider: deduplication and the window.
#[derive(Debug, Default)]
struct Outbox {
    /// When the last message went.
    last_sent: Option<Instant>,
    /// The latest notice of each subject, sent or held: what a duplicate is judged against.
    latest: HashMap<Subject, Notice>,
    /// The notices held for the window's end (the latest of each subject, oldest subject first)
    /// and how many earlier ones were folded into them.
    held: Vec<Notice>,
    folded: u32,
}

impl Outbox {
    fn offer(&mut self, notice: Notice, now: Instant, window: Duration) -> Decision {
        if self
            .latest
            .get(&notice.subject)
            .is_some_and(|latest| latest.same(&notice))
        {
            return Decision::Duplicate;
        }
        self.latest.insert(notice.subject.clone(), notice.clone());
        match self.last_sent {
            Some(at) if now < at + window => {
                let due = !self.held.is_empty();
                if let Some(earlier) = self.held.iter().position(|h| h.subject == notice.subject) {
                    self.held.remove(earlier);
                    self.folded += 1;
                }
                self.held.push(notice);
                if due {
                    Decision::Held
                } else {
                    Decision::HoldUntil(at + window)
                }
            }
            _ => {
                self.last_sent = Some(now);
                Decision::Send
            }
        }
    }

    /// At the window's end: the held notices to send, with how many earlier ones they stand for.
    fn flush(&mut self, now: Instant) -> Option<(Vec<Notice>, u32)> {
        if self.held.is_empty() {
            return None;
        }
        self.last_sent = Some(now);
        let folded = std::mem::take(&mut self.folded);
        Some((std::mem::take(&mut self.held), folded))
    }
}

/// A message on its way to a provider.
struct Delivery {
    namespace: String,
    fleetsync: String,
    provider: NotifySpec,
    /// The latest notice of each subject, oldest first; never empty.
    notices: Vec<Notice>,
    /// How many earlier notices of the same subjects were folded into them.
    folded: u32,
}

enum Work {
    Notice {
        namespace: String,
        fleetsync: String,
        providers: Vec<NotifySpec>,
        notice: Notice,
    },
    Flush {
        key: (String, usize),
        namespace: String,
        fleetsync: String,
        provider: NotifySpec,
    },
}

/// The handle reconciles notify through; cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    work: mpsc::Sender<Work>,
}

impl Notifier {
    /// Starts the delivery task (until `stop`), folding messages within `window`.
    pub fn start(client: Client, window: Duration, stop: CancellationToken) -> Notifier {
        let (work, queue) = mpsc::channel(QUEUE);
        tokio::spawn(deliver(client, window, work.clone(), queue, stop));
        Notifier { work }
    }

    /// Queues `notice` for every provider of `fleetsync`; never waits.
    pub fn notify(&self, fleetsync: &FleetSync, notice: Notice) {
        if fleetsync.spec.notify.is_empty() {
            return;
        }
        let work = Work::Notice {
            namespace: fleetsync
                .namespace()
                .unwrap_or_else(|| SYSTEM_NAMESPACE.into()),
            fleetsync: fleetsync.name_any(),
            providers: fleetsync.spec.notify.clone(),
            notice,
        };
        if self.work.try_send(work).is_err() {
            warn!(
                fleetsync = fleetsync.name_any(),
                "notifications: the queue is full; a notice is dropped"
            );
        }
    }
}

async fn deliver(
    client: Client,
    window: Duration,
    work: mpsc::Sender<Work>,
    mut queue: mpsc::Receiver<Work>,
    stop: CancellationToken,
) {
    let mut outboxes: HashMap<(String, usize), Outbox> = HashMap::new();
    let http = http_client();
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = queue.recv() => match next { Some(next) => next, None => return },
        };
        let send = |delivery: Delivery| {
            tokio::spawn(send_with_retries(
                client.clone(),
                http.clone(),
                delivery,
                stop.clone(),
            ));
        };
        match next {
            Work::Notice {
                namespace,
                fleetsync,
                providers,
                notice,
            } => {
                for (index, provider) in providers.into_iter().enumerate() {
                    let key = (format!("{namespace}/{fleetsync}"), index);
                    let outbox = outboxes.entry(key.clone()).or_default();
                    match outbox.offer(notice.clone(), Instant::now(), window) {
                        Decision::Send => send(Delivery {
                            namespace: namespace.clone(),
                            fleetsync: fleetsync.clone(),
                            provider,
                            notices: vec![notice.clone()],
                            folded: 0,
                        }),
                        Decision::HoldUntil(at) => {
                            let work = work.clone();
                            let flush = Work::Flush {
                                key,
                                namespace: namespace.clone(),
                                fleetsync: fleetsync.clone(),
                                provider,
                            };
                            let stop = stop.clone();
                            tokio::spawn(async move {
                                tokio::select! {
                                    _ = stop.cancelled() => {}
                                    _ = tokio::time::sleep_until(at) => {
                                        let _ = work.send(flush).await;
                                    }
                                }
                            });
                        }
                        Decision::Held | Decision::Duplicate => {}
                    }
                }
            }
            Work::Flush {
                key,
                namespace,
                fleetsync,
                provider,
            } => {
                let flushed = outboxes
                    .get_mut(&key)
                    .and_then(|outbox| outbox.flush(Instant::now()));
                if let Some((notices, folded)) = flushed {
                    send(Delivery {
                        namespace,
                        fleetsync,
                        provider,
                        notices,
                        folded,
                    });
                }
            }
        }
    }
}

type Https = HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

fn http_client() -> Option<Https> {
    let connector = match hyper_rustls::HttpsConnectorBuilder::new().with_native_roots() {
        Ok(builder) => builder.https_or_http().enable_http1().build(),
        Err(err) => {
            warn!(%err, "notifications: no CA certificates to reach https:// receivers");
            return None;
        }
    };
    Some(HttpClient::builder(TokioExecutor::new()).build(connector))
}

/// Why one delivery failed, and whether to try again.
struct Failure {
    message: String,
    retry: bool,
}

async fn send_with_retries(
    client: Client,
    http: Option<Https>,
    delivery: Delivery,
    stop: CancellationToken,
) {
    let Some(http) = http else {
        return;
    };
    let mut delay = FIRST_RETRY;
    for attempt in 1..=ATTEMPTS {
        match send_once(&client, &http, &delivery).await {
            Ok(()) => {
                debug!(fleetsync = delivery.fleetsync, "notification sent");
                return;
            }
            Err(failure) if failure.retry && attempt < ATTEMPTS => {
                debug!(
                    fleetsync = delivery.fleetsync,
                    attempt,
                    message = failure.message,
                    "notification failed; retrying"
                );
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
                delay *= 2;
            }
            Err(failure) => {
                warn!(
                    fleetsync = delivery.fleetsync,
                    secret = delivery.provider.secret_ref.name,
                    attempts = attempt,
                    "notification not sent: {}",
                    failure.message
                );
                return;
            }
        }
    }
}

async fn send_once(client: &Client, http: &Https, delivery: &Delivery) -> Result<(), Failure> {
    let secret_name = &delivery.provider.secret_ref.name;
    let secret = Api::<Secret>::namespaced(client.clone(), &delivery.namespace)
        .get_opt(secret_name)
        .await
        .map_err(|err| Failure {
            message: format!("cannot read Secret {secret_name}: {err}"),
            retry: true,
        })?;
    let data = secret.and_then(|secret| secret.data).unwrap_or_default();
    let address = data
        .get(ADDRESS_KEY)
        .and_then(|address| std::str::from_utf8(&address.0).ok())
        .map(str::trim)
        .filter(|address| !address.is_empty())
        .ok_or_else(|| Failure {
            message: format!("Secret {secret_name} has no {ADDRESS_KEY}"),
            retry: false,
        })?;
    let body = payload(delivery);
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(address)
        .header(http::header::CONTENT_TYPE, "application/json");
    if delivery.provider.provider == NotifyProvider::Generic
        && let Some(token) = data.get(TOKEN_KEY)
    {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &token.0);
        let tag = ring::hmac::sign(&key, &body);
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        request = request.header("X-Signature", format!("sha256={hex}"));
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|err| Failure {
            message: format!("Secret {secret_name}: {ADDRESS_KEY} is not a URL: {err}"),
            retry: false,
        })?;
    let response = http.request(request).await.map_err(|err| Failure {
        message: format!("POST {address}: {err}"),
        retry: true,
    })?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(Failure {
            message: format!("POST {address}: {status}"),
            retry: status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS,
        })
    }
}

/// The body for the delivery's provider. Generic: the latest notice's fields, `folded`, and
/// `notices` (the latest of each subject the message carries, oldest first, the latest last).
fn payload(delivery: &Delivery) -> Vec<u8> {
    let Delivery {
        namespace,
        fleetsync,
        notices,
        folded,
        ..
    } = delivery;
    let Some(latest) = notices.last() else {
        return Vec::new();
    };
    let value = match delivery.provider.provider {
        NotifyProvider::Generic => {
            let fields = |notice: &Notice| {
                json!({
                    "event": notice.event,
                    "subject": notice.subject,
                    "reason": notice.reason,
                    "commit": notice.commit,
                    "message": notice.message,
                })
            };
            let mut value = fields(latest);
            value["fleetSync"] = json!(fleetsync);
            value["namespace"] = json!(namespace);
            value["folded"] = json!(folded);
            value["notices"] = notices.iter().map(fields).collect();
            value
        }
        NotifyProvider::Slack => {
            let line = |notice: &Notice| {
                let icon = match notice.event {
                    Event::Applied => ":white_check_mark:",
                    Event::Stalled | Event::SpokeUnavailable | Event::RolloutHalted => ":warning:",
                    Event::Recovered | Event::SpokeAvailable | Event::RolloutResumed => {
                        ":large_green_circle:"
                    }
                };
                format!(
                    "{icon} FleetSync {namespace}/{fleetsync}: {}",
                    notice.message
                )
            };
            let mut text = notices.iter().map(line).collect::<Vec<_>>().join("\n");
            if *folded > 0 {
                text.push_str(&format!(
                    "\n({folded} earlier changes folded into this message)"
                ));
            }
            json!({ "text": text })
        }
    };
    serde_json::to_vec(&value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(event: Event, commit: &str) -> Notice {
        Notice {
            event,
            subject: Subject::FleetSync,
            reason: format!("{event:?}"),
            commit: Some(commit.to_string()),
            message: format!("{event:?} {commit}"),
        }
    }

    fn spoke(name: &str, event: Event) -> Notice {
        Notice {
            event,
            subject: Subject::Spoke(name.to_string()),
            reason: format!("{event:?}"),
            commit: None,
            message: format!("spoke {name}: {event:?}"),
        }
    }

    #[test]
    fn a_flapping_sync_sends_one_message_per_window_with_a_count() {
        let window = Duration::from_secs(60);
        let start = Instant::now();
        let mut outbox = Outbox::default();
        assert_eq!(
            outbox.offer(notice(Event::Applied, "a"), start, window),
            Decision::Send
        );
        assert_eq!(
            outbox.offer(notice(Event::Applied, "a"), start, window),
            Decision::Duplicate
        );
        assert_eq!(
            outbox.offer(notice(Event::Stalled, "b"), start, window),
            Decision::HoldUntil(start + window)
        );
        for _ in 0..5 {
            assert_eq!(
                outbox.offer(notice(Event::Recovered, "b"), start, window),
                Decision::Held
            );
            assert_eq!(
                outbox.offer(notice(Event::Stalled, "b"), start, window),
                Decision::Held
            );
        }
        let (latest, folded) = outbox.flush(start + window).unwrap();
        assert_eq!((latest, folded), (vec![notice(Event::Stalled, "b")], 10));
        assert_eq!(outbox.flush(start + window), None);
        assert_eq!(
            outbox.offer(notice(Event::Recovered, "b"), start + window * 2, window),
            Decision::Send
        );
    }

    #[test]
    fn spokes_share_the_window_and_each_keeps_its_latest_notice() {
        let window = Duration::from_secs(60);
        let start = Instant::now();
        let mut outbox = Outbox::default();
        assert_eq!(
            outbox.offer(spoke("a", Event::SpokeUnavailable), start, window),
            Decision::Send
        );
        // Another spoke in the same window waits for it rather than opening a window of its own.
        assert_eq!(
            outbox.offer(spoke("b", Event::SpokeUnavailable), start, window),
            Decision::HoldUntil(start + window)
        );
        // A flapping spoke folds into its own latest notice; the others keep theirs.
        for _ in 0..3 {
            for event in [Event::SpokeAvailable, Event::SpokeUnavailable] {
                assert_eq!(
                    outbox.offer(spoke("a", event), start, window),
                    Decision::Held
                );
            }
        }
        assert_eq!(
            outbox.offer(spoke("a", Event::SpokeAvailable), start, window),
            Decision::Held
        );
        assert_eq!(
            outbox.offer(spoke("b", Event::SpokeUnavailable), start, window),
            Decision::Duplicate,
            "the same news of the same spoke"
        );
        let (notices, folded) = outbox.flush(start + window).unwrap();
        assert_eq!(
            notices,
            vec![
                spoke("b", Event::SpokeUnavailable),
                spoke("a", Event::SpokeAvailable)
            ]
        );
        assert_eq!(folded, 6);
    }
}
