//! Watch streams: initial events, resume from a resourceVersion, bookmarks, selectors
//! (objects entering or leaving a selector appear as ADDED or DELETED), 410 Expired past the
//! history window, `timeoutSeconds`, and clean ends on server shutdown.
//!
//! Each watch is one task reading its resource's broadcast channel and writing encoded
//! events into a bounded channel the HTTP body drains. A watcher that falls behind the
//! broadcast catches up from the store's history.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::api::{ApiServer, Filter, Target};
use crate::error::{ApiError, ApiResult};
use crate::meta::ObjectMeta;
use crate::objects::present;
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
    q: &crate::api::Query,
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
    info: Arc<crate::registry::ResourceInfo>,
    api_version: String,
    metadata_only: bool,
    table: Option<IncludeObject>,
    columns_sent: bool,
}

impl Encoder {
    /// Encodes a stored event, reusing its shared serialisation when this watch shows
    /// objects exactly as stored.
    fn stored_event(&mut self, kind: &str, e: &Event) -> Bytes {
        let as_stored = self.table.is_none()
            && !self.metadata_only
            && e.object.get("apiVersion").and_then(Value::as_str) == Some(&self.api_version)
            && e.object.get("kind").and_then(Value::as_str) == Some(self.info.kind.as_str());
        if !as_stored {
            return self.event(kind, &e.object);
        }
        let obj = e.encoded_object();
        let mut buf = Vec::with_capacity(obj.len() + 40);
        buf.extend_from_slice(b"{\"type\":\"");
        buf.extend_from_slice(kind.as_bytes());
        buf.extend_from_slice(b"\",\"object\":");
        buf.extend_from_slice(obj);
        buf.extend_from_slice(b"}\n");
        Bytes::from(buf)
    }

    fn event(&mut self, kind: &str, obj: &Value) -> Bytes {
        let shown = present(&self.info, obj);
        let object = match self.table {
            None if self.metadata_only => table::partial(&shown),
            None => shown,
            Some(include) => {
                let with = !self.columns_sent;
                self.columns_sent = true;
                let rv = shown.resource_version().to_string();
                table::table(
                    &self.info,
                    &[shown],
                    include,
                    json!({"resourceVersion": rv}),
                    with,
                )
            }
        };
        line(&json!({"type": kind, "object": object}))
    }

    fn bookmark(&self, rv: i64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(&json!({"type": "BOOKMARK", "object": {
            "kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": meta}}))
    }
}

fn line(v: &Value) -> Bytes {
    let mut s = v.to_string();
    s.push('\n');
    Bytes::from(s)
}

fn expired_event(e: Expired) -> Bytes {
    let status = ApiError::Expired {
        requested: e.requested,
        oldest: e.oldest,
    }
    .to_status();
    line(&json!({"type": "ERROR", "object": status}))
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
    let ns = spec.target.namespace.clone();
    let mut enc = Encoder {
        api_version: spec.target.info.api_version(),
        metadata_only: spec.metadata_only,
        info: spec.target.info.clone(),
        table: spec.table,
        columns_sent: false,
    };
    let matches = move |obj: &Value, filter: &Filter| {
        (ns.is_empty() || obj.namespace() == ns) && filter.matches(obj)
    };
    let mut first: Vec<Bytes> = Vec::new();
    // A streaming list (sendInitialEvents) starts from the current state whatever
    // resourceVersion it names: the state is at least as new as that.
    let start_from = match spec.resource_version {
        Some(rv) if !spec.send_initial_events => Some(rv),
        _ => None,
    };
    // What this watch can see: one namespace, or one object when its name is selected too.
    let name = spec.filter.fields.exact_name().map(str::to_string);
    let scope = match (spec.target.namespace.as_str(), name) {
        ("", Some(name)) if !spec.target.info.namespaced => Scope::Object(String::new(), name),
        ("", _) => Scope::All,
        (ns, Some(name)) => Scope::Object(ns.to_string(), name),
        (ns, None) => Scope::Namespace(ns.to_string()),
    };
    let (mut last_rv, sub) = match start_from {
        None => {
            let (rv, items, sub) = server.store.list_and_subscribe(&key, &scope);
            if spec.send_initial_events {
                for obj in items.iter().filter(|o| matches(o, &spec.filter)) {
                    first.push(enc.event("ADDED", obj));
                }
                if spec.bookmarks {
                    first.push(enc.bookmark(rv, true));
                }
            }
            (rv, Some(sub))
        }
        Some(since) => match server.store.events_since(&key, since, &scope) {
            Ok((events, sub)) => {
                let mut last = since;
                for e in events {
                    if let Some(b) = translate(&mut enc, &e, &spec.filter, &matches) {
                        first.push(b);
                    }
                    last = e.rv;
                }
                (last, Some(sub))
            }
            Err(expired) => {
                first.push(expired_event(expired));
                (since, None)
            }
        },
    };
    let filter = spec.filter;
    let timeout = spec.timeout;
    let bookmarks = spec.bookmarks;
    tokio::spawn(async move {
        for b in first {
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let Some(mut sub) = sub else { return };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(bookmark_every);
        tick.tick().await;
        loop {
            tokio::select! {
                r = sub.recv() => match r {
                    Ok(e) => {
                        if e.rv <= last_rv { continue; }
                        last_rv = e.rv;
                        if let Some(b) = translate(&mut enc, &e, &filter, &matches)
                            && tx.send(b).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if catch_up(&server, &key, &mut last_rv, &mut enc, &filter, &matches, &tx).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = tick.tick(), if bookmarks => {
                    if bookmark(&server, &key, &mut sub, &mut last_rv, &mut enc, &filter, &matches, &tx).await.is_err() {
                        return;
                    }
                }
                _ = &mut deadline => {
                    // As kube-apiserver does, a watch that times out ends with a bookmark, so
                    // its client resumes from now rather than from a resourceVersion the history
                    // may no longer reach (which would cost it a full list).
                    if bookmarks {
                        let _ = bookmark(&server, &key, &mut sub, &mut last_rv, &mut enc, &filter, &matches, &tx).await;
                    }
                    return;
                }
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    rx
}

/// Sends what is in the watch's channel, then a bookmark at the store's current
/// resourceVersion; `Err` when the watch has ended.
#[allow(clippy::too_many_arguments)]
async fn bookmark(
    server: &ApiServer,
    key: &str,
    sub: &mut crate::storage::EventReceiver,
    last_rv: &mut i64,
    enc: &mut Encoder,
    filter: &Filter,
    matches: &impl Fn(&Value, &Filter) -> bool,
    tx: &mpsc::Sender<Bytes>,
) -> Result<(), ()> {
    // Everything up to `rv` in this watch's scope is in its channel by now (events are sent
    // under the store's lock), so the bookmark may say `rv`.
    let rv = server.store.current_rv();
    loop {
        match sub.try_recv() {
            Ok(e) => {
                if e.rv <= *last_rv {
                    continue;
                }
                *last_rv = e.rv;
                if let Some(b) = translate(enc, &e, filter, matches)
                    && tx.send(b).await.is_err()
                {
                    return Err(());
                }
            }
            Err(broadcast::error::TryRecvError::Lagged(_)) => {
                catch_up(server, key, last_rv, enc, filter, matches, tx).await?;
            }
            Err(_) => break,
        }
    }
    *last_rv = (*last_rv).max(rv);
    tx.send(enc.bookmark(*last_rv, false)).await.map_err(|_| ())
}

/// Sends a watcher that fell behind its channel the events after `last_rv` from the store's
/// history; `Err` when the watch has ended (its client left, or the history no longer reaches
/// back that far, which the client is told).
async fn catch_up(
    server: &ApiServer,
    key: &str,
    last_rv: &mut i64,
    enc: &mut Encoder,
    filter: &Filter,
    matches: &impl Fn(&Value, &Filter) -> bool,
    tx: &mpsc::Sender<Bytes>,
) -> Result<(), ()> {
    match server.store.replay(key, *last_rv) {
        Ok(events) => {
            for e in events {
                *last_rv = e.rv;
                if let Some(b) = translate(enc, &e, filter, matches)
                    && tx.send(b).await.is_err()
                {
                    return Err(());
                }
            }
            Ok(())
        }
        Err(expired) => {
            let _ = tx.send(expired_event(expired)).await;
            Err(())
        }
    }
}

/// Turns a stored event into what this watcher sees, honouring selector transitions.
fn translate(
    enc: &mut Encoder,
    e: &Event,
    filter: &Filter,
    matches: &impl Fn(&Value, &Filter) -> bool,
) -> Option<Bytes> {
    let now = matches(&e.object, filter);
    let before = e.prev.as_deref().map(|p| matches(p, filter)).unwrap_or(now);
    let kind = match e.kind {
        EventType::Added if now => "ADDED",
        EventType::Deleted if now || before => "DELETED",
        EventType::Modified if now && before => "MODIFIED",
        EventType::Modified if now => "ADDED",
        EventType::Modified if before => "DELETED",
        _ => return None,
    };
    Some(enc.stored_event(kind, e))
}
