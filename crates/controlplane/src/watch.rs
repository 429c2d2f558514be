//! Watch streams: initial events, resume from a resourceVersion, bookmarks, selectors
//! (objects entering or leaving a selector appear as ADDED or DELETED), 410 Expired past the
//! history window, `timeoutSeconds`, and clean ends on server shutdown.
//!
//! Each watch is one task reading its resource's broadcast channel and writing encoded
//! events into a bounded channel the HTTP body drains. A watcher that falls behind the
//! broadcast catches up from the store's history.

use std::sync::Arc;
use std::time::Duration;

/// How long before a watch times out it gets its last bookmark.
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::api::{ApiServer, Filter, Target};
use crate::error::{ApiError, ApiResult};
use crate::meta::ObjectMeta;
use crate::storage::{Event, EventType, Expired, Scope};
use crate::table::{self, IncludeObject};

/// What a watch asked for.
pub struct WatchSpec {
    pub target: Target,
    pub filter: Filter,
    /// Start after this resourceVersion; None means "now, with initial events".
    pub resource_version: Option<i64>,
    pub send_initial_events: bool,
    pub bookmarks: bool,
    pub timeout: Duration,
    /// Render objects as single-row Tables.
    pub table: Option<IncludeObject>,
    /// Render objects as PartialObjectMetadata.
    pub metadata_only: bool,
}

/// Reads the watch parameters of a request.
pub fn spec_from_query(
    target: Target,
    q: &crate::request_info::Query,
    table: Option<IncludeObject>,
    default_timeout: Duration,
) -> ApiResult<WatchSpec> {
    let filter = Filter::from_query(&target.info, q)?;
    let rv = match q.get("resourceVersion") {
        None | Some("") | Some("0") => None,
        Some(s) => Some(
            s.parse::<i64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {s:?}")))?,
        ),
    };
    let explicit_initial = q.get("sendInitialEvents").map(|v| v == "true" || v == "1");
    if explicit_initial == Some(true)
        && q.get("resourceVersionMatch").unwrap_or("") != "NotOlderThan"
    {
        return Err(ApiError::invalid(
            crate::objects::kind_subject(&target.info, ""),
            vec![crate::error::FieldError::forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )],
        ));
    }
    let send_initial_events = match explicit_initial {
        Some(v) => v,
        None => rv.is_none(),
    };
    let timeout = match q.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid timeoutSeconds: {t:?}")))?,
        ),
        None => default_timeout,
    };
    Ok(WatchSpec {
        target,
        filter,
        resource_version: rv,
        send_initial_events,
        bookmarks: q.flag("allowWatchBookmarks"),
        timeout,
        table,
        metadata_only: false,
    })
}

struct Encoder {
    /// Whose converters show objects at the watched version.
    server: Arc<ApiServer>,
    info: Arc<crate::resource::ResourceInfo>,
    api_version: String,
    metadata_only: bool,
    table: Option<IncludeObject>,
    columns_sent: bool,
}

impl Encoder {
    /// Encodes a stored event, reusing its shared serialisation when this watch shows
    /// objects exactly as stored.
    fn stored_event(&mut self, kind: &str, e: &Event) -> ApiResult<Bytes> {
        if self.table.is_none() && self.metadata_only {
            // The metadata, made once for every such watcher, when no conversion is needed.
            if let Some(head) = e
                .head()
                .filter(|h| h.api_version == self.api_version && h.kind == self.info.kind)
            {
                return Ok(framed(kind, &head.partial));
            }
        } else if self.table.is_none() && crate::api::served_as_stored(&self.info, &e.object) {
            return Ok(framed(kind, &e.object));
        }
        self.event(kind, &e.decode())
    }

    /// Encodes an event with the object as this watch shows it.
    fn event(&mut self, kind: &str, obj: &Value) -> ApiResult<Bytes> {
        let shown = self.server.conversions.served_one(&self.info, obj)?;
        let object = match self.table {
            None if self.metadata_only => table::partial(&shown),
            None => shown,
            Some(include) => {
                let with = !self.columns_sent;
                self.columns_sent = true;
                let rv = shown.resource_version().to_string();
                table::table(
                    &self.info.printer_columns,
                    &[shown],
                    include,
                    json!({"resourceVersion": rv}),
                    with,
                )
            }
        };
        Ok(line(kind, &object))
    }

    fn bookmark(&self, rv: i64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            "BOOKMARK",
            &json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": meta}),
        )
    }
}

/// A watch event line of type `kind` around `object`, already JSON (as stored: its newline
/// left out).
fn framed(kind: &str, object: &[u8]) -> Bytes {
    let object = object.strip_suffix(b"\n").unwrap_or(object);
    let mut buf = Vec::with_capacity(object.len() + 40);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(kind.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    buf.extend_from_slice(object);
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

/// A watch event line of type `kind` around `object`.
fn line(kind: &str, object: &Value) -> Bytes {
    let mut raw = Vec::with_capacity(256);
    crate::encode::write_json(object, &mut raw);
    framed(kind, &raw)
}

fn expired_event(e: Expired) -> Bytes {
    error_event(&ApiError::Expired {
        requested: e.requested,
        oldest: e.oldest,
    })
}

/// The ERROR event that ends a watch.
fn error_event(e: &ApiError) -> Bytes {
    line("ERROR", &e.to_status())
}

/// Starts a watch; the returned channel yields encoded events until the watch ends.
pub fn start(
    server: Arc<ApiServer>,
    spec: WatchSpec,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    bookmark_every: Duration,
) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let key = spec.target.key();
    // What this watch can see: one namespace, or one object when its name is selected too.
    let name = spec.filter.fields.exact_name().map(str::to_string);
    let scope = match (spec.target.namespace.as_str(), name) {
        ("", Some(name)) if !spec.target.info.namespaced => Scope::Object(String::new(), name),
        ("", _) => Scope::All,
        (ns, Some(name)) => Scope::Object(ns.to_string(), name),
        (ns, None) => Scope::Namespace(ns.to_string()),
    };
    let mut feed = Feed {
        enc: Encoder {
            server: server.clone(),
            api_version: spec.target.info.api_version(),
            metadata_only: spec.metadata_only,
            info: spec.target.info.clone(),
            table: spec.table,
            columns_sent: false,
        },
        namespace: spec.target.namespace.clone(),
        filter: spec.filter,
        server: server.clone(),
        key: key.clone(),
        tx,
        last_rv: 0,
    };
    // A streaming list (sendInitialEvents) starts from the current state whatever
    // resourceVersion it names: the state is at least as new as that.
    let start_from = match spec.resource_version {
        Some(rv) if !spec.send_initial_events => Some(rv),
        _ => None,
    };
    let mut initial: Vec<Bytes> = Vec::new();
    let (missed, sub) = match start_from {
        None => {
            let (rv, items, sub) =
                server
                    .store
                    .list_and_subscribe(&key, &scope, &feed.filter.lookups());
            let mut sub = Some(sub);
            if spec.send_initial_events {
                for obj in &items {
                    if !feed.matches(obj) {
                        continue;
                    }
                    match feed.enc.event("ADDED", obj) {
                        Ok(event) => initial.push(event),
                        Err(e) => {
                            initial.push(error_event(&e));
                            sub = None;
                            break;
                        }
                    }
                }
                if spec.bookmarks && sub.is_some() {
                    initial.push(feed.enc.bookmark(rv, true));
                }
            }
            feed.last_rv = rv;
            (Vec::new(), sub)
        }
        Some(since) => {
            feed.last_rv = since;
            match server.store.events_since(&key, since, &scope) {
                Ok((events, sub)) => (events, Some(sub)),
                Err(expired) => {
                    initial.push(expired_event(expired));
                    (Vec::new(), None)
                }
            }
        }
    };
    let timeout = spec.timeout;
    let bookmarks = spec.bookmarks;
    tokio::spawn(async move {
        for b in initial {
            if feed.tx.send(b).await.is_err() {
                return;
            }
        }
        for e in missed {
            if feed.send(&e).await.is_err() {
                return;
            }
        }
        let Some(mut sub) = sub else { return };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(bookmark_every);
        tick.tick().await;
        // As kube-apiserver does, a watch that lasts longer than 2 s gets a bookmark 2 s before
        // it times out, so its client resumes from then rather than from a resourceVersion the
        // history may no longer reach (which would cost it a full list); a shorter one gets
        // none.
        let before_deadline = timeout
            .checked_sub(PRE_TIMEOUT_BOOKMARK)
            .filter(|d| !d.is_zero());
        let pre_timeout = tokio::time::sleep(before_deadline.unwrap_or(timeout));
        tokio::pin!(pre_timeout);
        let mut pre_timeout_due = bookmarks && before_deadline.is_some();
        loop {
            let sent = tokio::select! {
                r = sub.recv() => match r {
                    Ok(e) => feed.send(&e).await,
                    Err(broadcast::error::RecvError::Lagged(_)) => feed.catch_up().await,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = tick.tick(), if bookmarks => feed.bookmark(&mut sub).await,
                _ = &mut pre_timeout, if pre_timeout_due => {
                    pre_timeout_due = false;
                    feed.bookmark(&mut sub).await
                }
                _ = &mut deadline => return,
                _ = shutdown.changed() => return,
                _ = feed.tx.closed() => return,
            };
            if sent.is_err() {
                return;
            }
        }
    });
    rx
}

/// The watch has ended: its client left, or it was told its history is gone.
struct Ended;

/// What a running watch sends its client, and the resourceVersion it has sent up to.
struct Feed {
    server: Arc<ApiServer>,
    key: String,
    /// The watched namespace; empty for all.
    namespace: String,
    filter: Filter,
    enc: Encoder,
    tx: mpsc::Sender<Bytes>,
    last_rv: i64,
}

impl Feed {
    fn matches(&self, obj: &Value) -> bool {
        (self.namespace.is_empty() || obj.namespace() == self.namespace) && self.filter.matches(obj)
    }

    /// Sends a stored event as this watch sees it (if it sees it), unless it was sent already.
    async fn send(&mut self, e: &Event) -> Result<(), Ended> {
        if e.rv <= self.last_rv {
            return Ok(());
        }
        self.last_rv = e.rv;
        match self.translate(e) {
            Ok(Some(b)) => self.tx.send(b).await.map_err(|_| Ended),
            Ok(None) => Ok(()),
            // An object this watch cannot be shown ends it, as kube-apiserver's watch ends
            // when it cannot encode an event; the client hears why.
            Err(error) => {
                let _ = self.tx.send(error_event(&error)).await;
                Err(Ended)
            }
        }
    }

    /// Turns a stored event into what this watch sees, honouring selector transitions. Objects
    /// are decoded only when a selector has to look inside them.
    fn translate(&mut self, e: &Event) -> ApiResult<Option<Bytes>> {
        if !self.namespace.is_empty() && e.namespace != self.namespace {
            return Ok(None);
        }
        let (now, before) = if self.filter.is_empty() {
            (true, true)
        } else if let Some(matched) = self.filter.matches_name(&e.namespace, &e.name) {
            // A name and namespace never change: no need to decode either version.
            (matched, matched)
        } else {
            let now = self.filter.matches(&e.decode());
            let before = e.decode_prev().map_or(now, |p| self.filter.matches(&p));
            (now, before)
        };
        let kind = match e.kind {
            EventType::Added if now => "ADDED",
            EventType::Deleted if now || before => "DELETED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            _ => return Ok(None),
        };
        self.enc.stored_event(kind, e).map(Some)
    }

    /// After falling behind its channel: the events since the last one sent, from the store's
    /// history (or, past it, the 410 that tells the client to list again).
    async fn catch_up(&mut self) -> Result<(), Ended> {
        match self.server.store.replay(&self.key, self.last_rv) {
            Ok(events) => {
                for e in events {
                    self.send(&e).await?;
                }
                Ok(())
            }
            Err(expired) => {
                let _ = self.tx.send(expired_event(expired)).await;
                Err(Ended)
            }
        }
    }

    /// Sends what is waiting in the channel, then a bookmark at the store's current
    /// resourceVersion.
    async fn bookmark(&mut self, sub: &mut crate::storage::EventReceiver) -> Result<(), Ended> {
        // Everything up to `rv` in this watch's scope is in its channel by now (events are sent
        // under the store's lock), so the bookmark may say `rv`.
        let rv = self.server.store.current_rv();
        loop {
            match sub.try_recv() {
                Ok(e) => self.send(&e).await?,
                Err(broadcast::error::TryRecvError::Lagged(_)) => self.catch_up().await?,
                Err(_) => break,
            }
        }
        self.last_rv = self.last_rv.max(rv);
        let bookmark = self.enc.bookmark(self.last_rv, false);
        self.tx.send(bookmark).await.map_err(|_| Ended)
    }
}
