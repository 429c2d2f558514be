//! Object storage: the authoritative in-memory state (every current object, an event history
//! window for watch resume (`history`), label and field indexes for selected reads (`index`),
//! per-resource event fan-out) in front of a durable [`Backend`].
//!
//! Every write goes through [`Store::write`]: under one lock it checks the caller's
//! preconditions against the current object, assigns the next resourceVersion, updates the
//! cache, records the event and publishes it; the returned [`Ack`] resolves once the backend
//! has made the write durable, and only then may the write be acknowledged to a client.
//! The backend commits in resourceVersion order, so what survives a crash is always a prefix
//! of the acknowledged history. This module knows nothing of HTTP or of resource semantics:
//! its failures are [`StorageError`]s, which the API layer words for clients.

mod history;
mod index;
pub mod memory;
pub mod sqlite;

pub use history::{Clock, HistoryLimits, SystemClock};
pub use index::{Indexed, Lookup};

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

use crate::error::ApiError;
use crate::meta::ObjectMeta;
use history::History;
use index::Indexes;

/// The kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ADDED" => Some(EventType::Added),
            "MODIFIED" => Some(EventType::Modified),
            "DELETED" => Some(EventType::Deleted),
            _ => None,
        }
    }
}

/// One change to one object, at one resourceVersion.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: i64,
    /// Storage key `group/plural`.
    pub key: Arc<str>,
    pub namespace: String,
    pub name: String,
    pub kind: EventType,
    /// The object after the change (for deletes: its last state, at the delete's rv) as
    /// stored: compact JSON, the very bytes the cache and the durable writer hold, shared by
    /// every watcher that shows it as stored. The history keeps these, never a decoded copy.
    pub object: Bytes,
    /// The object before the change as it was stored, when known (not kept across restarts).
    pub prev: Option<Bytes>,
    /// What metadata-only watches show of `object`, made by the first of them to need it.
    pub head: OnceLock<Option<StoredHead>>,
}

/// A stored object's type and its metadata as a PartialObjectMetadata: made once per event for
/// every metadata-only watcher (each agent's watch of its Hub, whose status names every spoke,
/// decoded the whole object for itself).
#[derive(Debug, Clone)]
pub struct StoredHead {
    pub api_version: String,
    pub kind: String,
    /// The PartialObjectMetadata, as compact JSON.
    pub partial: Bytes,
}

impl StoredHead {
    fn of(raw: &[u8]) -> Option<StoredHead> {
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(rename = "apiVersion", default)]
            api_version: String,
            #[serde(default)]
            kind: String,
            #[serde(default)]
            metadata: Value,
        }
        let head: Head = serde_json::from_slice(raw).ok()?;
        let partial = crate::meta::partial_of(head.metadata);
        let mut raw = Vec::new();
        crate::encode::write_json(&partial, &mut raw);
        Some(StoredHead {
            api_version: head.api_version,
            kind: head.kind,
            partial: Bytes::from(raw),
        })
    }
}

impl Event {
    /// What a metadata-only watch shows of the object (None when it is not a JSON object).
    pub fn head(&self) -> Option<&StoredHead> {
        self.head
            .get_or_init(|| StoredHead::of(&self.object))
            .as_ref()
    }

    /// The object after the change.
    pub fn decode(&self) -> Value {
        decode(&self.object)
    }

    /// The object before the change, when known.
    pub fn decode_prev(&self) -> Option<Value> {
        self.prev.as_deref().map(decode)
    }
}

/// Failures of the store and its durable backend.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("data directory {dir}: {message}")]
    DataDir { dir: String, message: String },
    #[error(
        "data directory {dir} holds a database that is not a fleetform control-plane store ({detail}); refusing to use it"
    )]
    Foreign { dir: String, detail: String },
    #[error(
        "data directory {dir} holds a corrupt database: {detail}; restore it from a backup or move it away"
    )]
    Corrupt { dir: String, detail: String },
    #[error("data directory {dir} is in use by another control plane")]
    InUse { dir: String },
    #[error(transparent)]
    Private(#[from] crate::private_files::PrivateError),
    #[error("storage: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("storage: stored object is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("storage writer has stopped")]
    WriterGone,
    /// A commit failed earlier: later writes would build on state that is not durable.
    #[error("storage failed; the control plane no longer accepts writes")]
    Failed,
    #[error("the server is shutting down")]
    ShuttingDown,
    /// A write decided to leave alone or delete an object that is not there.
    #[error("no object to {0}")]
    NoObject(&'static str),
}

/// Why [`Store::write`] stored nothing: its caller's decision refused the write, or the store
/// could not take it.
#[derive(Debug, thiserror::Error)]
pub enum WriteError<E> {
    #[error(transparent)]
    Refused(E),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// What a backend holds at start.
#[derive(Debug, Default)]
pub struct Loaded {
    pub rv: i64,
    /// Highest resourceVersion whose event is no longer in the history.
    pub compacted_rv: i64,
    pub objects: Vec<(String, String, String, Value)>,
    pub history: Vec<Event>,
}

/// A durable home for objects and their change history.
pub trait Backend: Send + 'static {
    /// Reads everything back at start.
    fn load(&mut self) -> Result<Loaded, StorageError>;
    /// Makes a batch of events durable, in order, in one transaction.
    fn commit(&mut self, batch: &[Arc<Event>], compact_below: i64) -> Result<(), StorageError>;
}

/// Resolves once a write is durable.
pub struct Ack(Option<oneshot::Receiver<Result<(), String>>>);

impl Ack {
    /// Waits for durability.
    pub async fn wait(self) -> Result<(), StorageError> {
        match self.0 {
            None => Ok(()),
            Some(rx) => match rx.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) | Err(_) => Err(StorageError::WriterGone),
            },
        }
    }
}

/// What a write closure decides.
pub enum WriteOp {
    /// Store this object (create or replace).
    Put(Value),
    /// Remove the object.
    Delete,
    /// Remove the object, whose last state is this (an update that let it go: its last
    /// finalizer removed); watchers and the writer see this state.
    DeleteAs(Value),
    /// Change nothing; answer with the current object.
    Unchanged,
}

/// An object as [`Store::read`] read it.
pub struct Read {
    pub object: Arc<Value>,
    raw: Bytes,
}

impl Read {
    /// Whether `raw` is the very buffer this was parsed from. Stored bytes are never changed
    /// in place and this read keeps its buffer alive, so the same address is the same object.
    fn holds(&self, raw: &Bytes) -> bool {
        self.raw.as_ptr() == raw.as_ptr() && self.raw.len() == raw.len()
    }
}

/// The result of a write.
pub struct Written {
    /// The stored object (for deletes: the last state).
    pub object: Arc<Value>,
    /// Its stored bytes, when it is stored (not a dry run, not a delete).
    pub stored: Option<Bytes>,
    pub ack: Ack,
}

type ObjKey = (String, String);
type Slot = (String, String, String);

/// One resource's current objects by namespace, then name, in list order. A lookup searches
/// the names of one namespace (not every object by namespace and name, comparing both at each
/// step) and builds no key.
#[derive(Default)]
pub(super) struct Objects(BTreeMap<String, BTreeMap<String, Bytes>>);

impl Objects {
    pub(super) fn get(&self, ns: &str, name: &str) -> Option<&Bytes> {
        self.0.get(ns)?.get(name)
    }

    fn insert(&mut self, ns: &str, name: &str, raw: Bytes) {
        let names = match self.0.get_mut(ns) {
            Some(names) => names,
            None => self.0.entry(ns.to_string()).or_default(),
        };
        match names.get_mut(name) {
            Some(kept) => *kept = raw,
            None => {
                names.insert(name.to_string(), raw);
            }
        }
    }

    fn remove(&mut self, ns: &str, name: &str) {
        if let Some(names) = self.0.get_mut(ns) {
            names.remove(name);
            if names.is_empty() {
                self.0.remove(ns);
            }
        }
    }

    /// Every object, in list order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &str, &Bytes)> {
        self.after(None, None)
    }

    /// The objects (of namespace `ns`, or all) after `after`, in list order.
    fn after<'a>(
        &'a self,
        ns: Option<&'a str>,
        after: Option<(&'a str, &'a str)>,
    ) -> impl Iterator<Item = (&'a str, &'a str, &'a Bytes)> {
        use std::ops::Bound;
        let first = ns.or(after.map(|(ans, _)| ans));
        let namespaces = match first {
            Some(first) => self
                .0
                .range::<str, _>((Bound::Included(first), Bound::Unbounded)),
            None => self.0.range::<str, _>(..),
        };
        namespaces
            .take_while(move |(ons, _)| ns.is_none_or(|n| n == ons.as_str()))
            .flat_map(move |(ons, names)| {
                let ons = ons.as_str();
                // Resuming after a name of this namespace, or past it altogether (only a
                // namespace asked for can come before where the listing resumes).
                let (start, past) = match after {
                    Some((ans, aname)) if ans == ons => (Bound::Excluded(aname), false),
                    Some((ans, _)) => (Bound::Unbounded, ans > ons),
                    None => (Bound::Unbounded, false),
                };
                names
                    .range::<str, _>((start, Bound::Unbounded))
                    .take(if past { 0 } else { usize::MAX })
                    .map(move |(name, raw)| (ons, name.as_str(), raw))
            })
    }
}

struct Inner {
    rv: i64,
    /// Current objects by resource, kept serialised (a parsed `Value` costs ten times the
    /// memory).
    objects: HashMap<String, Objects>,
    uids: HashMap<String, Slot>,
    dependents: HashMap<String, HashSet<Slot>>,
    /// Label and field indexes by resource, built as selectors ask for them.
    indexes: HashMap<String, Indexes>,
    history: History,
    /// Watch channels by resource.
    channels: HashMap<String, Channels>,
    all: broadcast::Sender<Arc<Event>>,
    writer: Writer,
    /// The resourceVersion of the last write to each resource since start (absent: none yet).
    written: HashMap<String, i64>,
}

/// Where writes go after the cache.
enum Writer {
    /// Nothing to persist.
    Memory,
    /// The durable writer thread's queue.
    Durable(std::sync::mpsc::Sender<PersistItem>),
    /// Closed for shutdown: writes are refused.
    Closed,
}

type PersistItem = (Arc<Event>, i64, Option<oneshot::Sender<Result<(), String>>>);

/// The in-memory state plus its durable writer.
pub struct Store {
    inner: Mutex<Inner>,
    /// Set by the writer when a commit fails; from then on writes are refused.
    failed: Arc<std::sync::atomic::AtomicBool>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// A subscription to one resource's events.
pub type EventReceiver = broadcast::Receiver<Arc<Event>>;

/// The watch channel capacities, for a whole resource, one namespace of it and one object; a
/// watcher that falls further behind catches up from the history window.
const CHANNEL_CAPACITY: usize = 1024;
/// The default backlog of [`Store::open`]: about a minute of writes at 1,000 writes/s, 2 MiB.
pub const DEFAULT_BACKLOG: usize = 65536;
const NAMESPACE_CHANNEL_CAPACITY: usize = 256;
const OBJECT_CHANNEL_CAPACITY: usize = 16;

/// Which events of a resource a watcher is sent: a fleet's agents each watch their own cluster
/// object or namespace on a hub, so a write wakes the watchers it concerns, not all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Namespace(String),
    /// One object, by namespace ("" when cluster-scoped) and name.
    Object(String, String),
}

/// The watch channels of one resource, by scope.
#[derive(Default)]
struct Channels {
    all: Option<broadcast::Sender<Arc<Event>>>,
    namespaces: HashMap<String, broadcast::Sender<Arc<Event>>>,
    objects: HashMap<String, HashMap<String, broadcast::Sender<Arc<Event>>>>,
}

impl Channels {
    fn subscribe(&mut self, scope: &Scope) -> EventReceiver {
        let sender = match scope {
            Scope::All => self
                .all
                .get_or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0),
            Scope::Namespace(ns) => self
                .namespaces
                .entry(ns.clone())
                .or_insert_with(|| broadcast::channel(NAMESPACE_CHANNEL_CAPACITY).0),
            Scope::Object(ns, name) => self
                .objects
                .entry(ns.clone())
                .or_default()
                .entry(name.clone())
                .or_insert_with(|| broadcast::channel(OBJECT_CHANNEL_CAPACITY).0),
        };
        sender.subscribe()
    }

    /// Sends `event` to every channel whose scope holds it, dropping channels nobody reads.
    fn publish(&mut self, event: &Arc<Event>) {
        if let Some(tx) = &self.all
            && tx.send(event.clone()).is_err()
        {
            self.all = None;
        }
        if let Some(tx) = self.namespaces.get(&event.namespace)
            && tx.send(event.clone()).is_err()
        {
            self.namespaces.remove(&event.namespace);
        }
        if let Some(names) = self.objects.get_mut(&event.namespace) {
            if let Some(tx) = names.get(&event.name)
                && tx.send(event.clone()).is_err()
            {
                names.remove(&event.name);
            }
            if names.is_empty() {
                self.objects.remove(&event.namespace);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.all.is_none() && self.namespaces.is_empty() && self.objects.is_empty()
    }
}

/// Why a watch cannot start where it asked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expired {
    pub requested: i64,
    pub oldest: i64,
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.meta_field("ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Inner {
    fn index(&mut self, slot: &Slot, old: Option<&Value>, new: Option<&Value>) {
        if let Some(indexes) = self.indexes.get_mut(&slot.0) {
            indexes.update(&(slot.1.clone(), slot.2.clone()), old, new);
        }
        // Most writes are updates that keep the object's uid and owners: nothing to move.
        let (old_owners, new_owners) = (old.map(owner_uids), new.map(owner_uids));
        let same_uid = matches!((old, new), (Some(o), Some(n)) if o.uid() == n.uid());
        if let Some(old) = old.filter(|_| !same_uid) {
            self.uids.remove(old.uid());
        }
        if let Some(new) = new.filter(|n| !same_uid && !n.uid().is_empty()) {
            self.uids.insert(new.uid().to_string(), slot.clone());
        }
        if old_owners == new_owners {
            return;
        }
        for o in old_owners.into_iter().flatten() {
            if let Some(set) = self.dependents.get_mut(&o) {
                set.remove(slot);
                if set.is_empty() {
                    self.dependents.remove(&o);
                }
            }
        }
        for o in new_owners.into_iter().flatten() {
            self.dependents.entry(o).or_default().insert(slot.clone());
        }
    }

    fn record(&mut self, event: Arc<Event>) {
        self.history.push(event.clone());
        if let Some(channels) = self.channels.get_mut(&*event.key) {
            channels.publish(&event);
            if channels.is_empty() {
                self.channels.remove(&*event.key);
            }
        }
        let _ = self.all.send(event);
    }
}

impl Store {
    /// Builds the store from a backend's contents and starts its writer thread. `backlog` is how
    /// many events the server's own controllers ([`Self::subscribe_all`]) may fall behind by
    /// before they resync; its slots are allocated up front.
    pub fn open(
        mut backend: Box<dyn Backend>,
        history: HistoryLimits,
        durable: bool,
        backlog: usize,
    ) -> Result<Arc<Store>, StorageError> {
        let loaded = backend.load()?;
        let (all, _) = broadcast::channel(backlog.max(1));
        let mut inner = Inner {
            rv: loaded.rv,
            objects: HashMap::new(),
            uids: HashMap::new(),
            dependents: HashMap::new(),
            indexes: HashMap::new(),
            history: History::new(history, loaded.compacted_rv),
            channels: HashMap::new(),
            all,
            writer: Writer::Memory,
            written: HashMap::new(),
        };
        for (key, ns, name, obj) in loaded.objects {
            let slot = (key.clone(), ns.clone(), name.clone());
            inner.index(&slot, None, Some(&obj));
            inner
                .objects
                .entry(key)
                .or_default()
                .insert(&ns, &name, serialise(&obj));
        }
        // Events read back count as recorded now: their times were not kept.
        for e in loaded.history {
            inner.history.push(Arc::new(e));
        }
        let mut thread = None;
        let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        if durable {
            let (tx, rx) = std::sync::mpsc::channel::<PersistItem>();
            let failed = failed.clone();
            thread = Some(
                std::thread::Builder::new()
                    .name("controlplane-writer".into())
                    .spawn(move || run_writer(backend, rx, &failed))
                    .map_err(|e| StorageError::DataDir {
                        dir: String::new(),
                        message: format!("cannot start writer thread: {e}"),
                    })?,
            );
            inner.writer = Writer::Durable(tx);
        }
        Ok(Arc::new(Store {
            failed,
            inner: Mutex::new(inner),
            writer_thread: Mutex::new(thread),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Refuses further writes, lets the writer commit what it has, and waits for it to
    /// release the database. Blocking: call from a blocking context.
    pub fn close(&self) {
        let writer = std::mem::replace(&mut self.lock().writer, Writer::Closed);
        drop(writer);
        let thread = self
            .writer_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    /// Whether storage is healthy (no failed commit).
    pub fn healthy(&self) -> bool {
        !self.failed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The current resourceVersion.
    pub fn current_rv(&self) -> i64 {
        self.lock().rv
    }

    /// The resourceVersion of the last write to resource `key` since the store opened, 0 when
    /// there was none: what a cache of anything derived from that resource is stamped with.
    pub fn last_write(&self, key: &str) -> i64 {
        self.lock().written.get(key).copied().unwrap_or(0)
    }

    /// One object.
    pub fn get(&self, key: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.get_stored(key, ns, name).map(|raw| parse(&raw))
    }

    /// One object, with the bytes it was parsed from: a write after it
    /// ([`Store::write_after`]) that finds the object unchanged takes it as read.
    pub fn read(&self, key: &str, ns: &str, name: &str) -> Option<Read> {
        self.get_stored(key, ns, name).map(|raw| Read {
            object: parse(&raw),
            raw,
        })
    }

    /// One object as stored ([`decode`] reads it).
    pub fn get_stored(&self, key: &str, ns: &str, name: &str) -> Option<Bytes> {
        self.lock()
            .objects
            .get(key)
            .and_then(|m| m.get(ns, name))
            .cloned()
    }

    /// Objects of one resource (in one namespace, or all), ordered by namespace and name,
    /// starting after `after`, with the rv they were read at.
    pub fn list(
        &self,
        key: &str,
        ns: Option<&str>,
        after: Option<(&str, &str)>,
    ) -> (i64, Vec<Arc<Value>>) {
        let (rv, raw) = {
            let inner = self.lock();
            (inner.rv, collect(&inner, key, ns, after))
        };
        (rv, raw.iter().map(parse).collect())
    }

    /// Objects of one resource (in one namespace, or all) that may satisfy every one of
    /// `lookups`, ordered by namespace and name, with the rv they were read at: those of the
    /// most selective lookup's index, so a selected list decodes what it returns rather than
    /// the whole resource. The caller still applies its whole selector to what comes back.
    /// They come as stored ([`decode`] reads one), so a caller that needs a page of them
    /// decodes that page, not the resource.
    pub fn select(&self, key: &str, ns: Option<&str>, lookups: &[Lookup]) -> (i64, Vec<Bytes>) {
        let mut inner = self.lock();
        (inner.rv, selected(&mut inner, key, ns, lookups))
    }

    /// Objects of one resource as they were at resourceVersion `at` (for the later pages of
    /// a paginated list), reconstructed by undoing the changes made since from the history;
    /// as stored, like [`Store::select`]'s.
    pub fn list_at(
        &self,
        key: &str,
        ns: Option<&str>,
        after: (&str, &str),
        at: i64,
    ) -> Result<Vec<Bytes>, Expired> {
        let (current, changes) = {
            let inner = self.lock();
            let changes = inner.history.since(key, at)?;
            (keyed(&inner, key, ns, Some(after)), changes)
        };
        let expired = Expired {
            requested: at,
            oldest: 0,
        };
        let mut state: BTreeMap<ObjKey, Bytes> = current.into_iter().collect();
        let wanted =
            |id: &ObjKey| (id.0.as_str(), id.1.as_str()) > after && ns.is_none_or(|n| n == id.0);
        for e in changes.iter().rev() {
            let id = (e.namespace.clone(), e.name.clone());
            if !wanted(&id) {
                continue;
            }
            match (e.kind, &e.prev) {
                (EventType::Added, _) => {
                    state.remove(&id);
                }
                (_, Some(prev)) => {
                    state.insert(id, prev.clone());
                }
                // Events read back from disk do not carry the previous state.
                (_, None) => return Err(expired),
            }
        }
        Ok(state.into_values().collect())
    }

    /// Where an object with this uid lives.
    pub fn locate_uid(&self, uid: &str) -> Option<(String, String, String)> {
        self.lock().uids.get(uid).cloned()
    }

    /// Objects naming `uid` in their ownerReferences.
    pub fn dependents_of(&self, uid: &str) -> Vec<(String, String, String)> {
        self.lock()
            .dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every namespaced object in a namespace, across resources.
    pub fn in_namespace(&self, ns: &str) -> Vec<(String, Arc<Value>)> {
        let mut raw = Vec::new();
        {
            let inner = self.lock();
            for key in inner.objects.keys() {
                for obj in collect(&inner, key, Some(ns), None) {
                    raw.push((key.clone(), obj));
                }
            }
        }
        raw.into_iter().map(|(k, r)| (k, parse(&r))).collect()
    }

    /// A consistent snapshot of the objects of one resource in `scope`, plus a subscription to
    /// later events in it.
    /// `lookups` narrow the snapshot as in [`Self::select`].
    pub fn list_and_subscribe(
        &self,
        key: &str,
        scope: &Scope,
        lookups: &[Lookup],
    ) -> (i64, Vec<Arc<Value>>, EventReceiver) {
        let (rv, raw, rx) = {
            let mut inner = self.lock();
            let raw = match scope {
                Scope::All => selected(&mut inner, key, None, lookups),
                Scope::Namespace(ns) => selected(&mut inner, key, Some(ns), lookups),
                Scope::Object(ns, name) => inner
                    .objects
                    .get(key)
                    .and_then(|objects| objects.get(ns, name))
                    .cloned()
                    .into_iter()
                    .collect(),
            };
            let rx = subscribe(&mut inner, key, scope);
            (inner.rv, raw, rx)
        };
        (rv, raw.iter().map(parse).collect(), rx)
    }

    /// Events of one resource after `since`, plus a subscription to the rest of those in
    /// `scope` (the events returned are of every scope).
    pub fn events_since(
        &self,
        key: &str,
        since: i64,
        scope: &Scope,
    ) -> Result<(Vec<Arc<Event>>, EventReceiver), Expired> {
        let mut inner = self.lock();
        let events = inner.history.since(key, since)?;
        let rx = subscribe(&mut inner, key, scope);
        Ok((events, rx))
    }

    /// Events of one resource after `since` (for a watcher that fell behind).
    pub fn replay(&self, key: &str, since: i64) -> Result<Vec<Arc<Event>>, Expired> {
        self.lock().history.since(key, since)
    }

    /// A subscription to every event (for the server's own controllers).
    pub fn subscribe_all(&self) -> broadcast::Receiver<Arc<Event>> {
        self.lock().all.subscribe()
    }

    /// Reads the object at `(key, ns, name)`, lets `decide` choose what to do, and applies it.
    /// `decide` runs under the store lock: it must be quick and must not touch the store; its
    /// error refuses the write ([`WriteError::Refused`]). With `dry_run` the decision is
    /// returned as if stored, but nothing changes.
    pub fn write<F, E>(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        dry_run: bool,
        decide: F,
    ) -> Result<Written, WriteError<E>>
    where
        F: FnOnce(Option<&Arc<Value>>) -> Result<WriteOp, E>,
    {
        self.write_after(key, ns, name, dry_run, None, decide)
    }

    /// [`Store::write`] after a [`Store::read`] of the object: when it is still what was
    /// read (the same stored bytes), `decide` gets the object as read instead of a new parse.
    pub fn write_after<F, E>(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        dry_run: bool,
        read: Option<&Read>,
        decide: F,
    ) -> Result<Written, WriteError<E>>
    where
        F: FnOnce(Option<&Arc<Value>>) -> Result<WriteOp, E>,
    {
        let mut inner = self.lock();
        let stored = inner
            .objects
            .get(key)
            .and_then(|m| m.get(ns, name))
            .cloned();
        let current = stored.as_ref().map(|raw| match read {
            Some(read) if read.holds(raw) => read.object.clone(),
            _ => parse(raw),
        });
        let op = decide(current.as_ref()).map_err(WriteError::Refused)?;
        let (kind, mut object) = match op {
            WriteOp::Unchanged => {
                let object = current.ok_or(StorageError::NoObject("leave unchanged"))?;
                return Ok(Written {
                    object,
                    stored,
                    ack: Ack(None),
                });
            }
            WriteOp::Put(v) => (
                if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                },
                v,
            ),
            WriteOp::Delete => match &current {
                Some(c) => (EventType::Deleted, (**c).clone()),
                None => return Err(StorageError::NoObject("delete").into()),
            },
            WriteOp::DeleteAs(last) => match &current {
                Some(_) => (EventType::Deleted, last),
                None => return Err(StorageError::NoObject("delete").into()),
            },
        };
        if self.failed.load(std::sync::atomic::Ordering::SeqCst) && !dry_run {
            return Err(StorageError::Failed.into());
        }
        if matches!(inner.writer, Writer::Closed) && !dry_run {
            return Err(StorageError::ShuttingDown.into());
        }
        let rv = inner.rv + 1;
        crate::meta::meta_mut(&mut object)
            .insert("resourceVersion".into(), Value::String(rv.to_string()));
        let object = Arc::new(object);
        if dry_run {
            return Ok(Written {
                object,
                stored: None,
                ack: Ack(None),
            });
        }
        inner.rv = rv;
        inner.written.insert(key.to_string(), rv);
        let slot = (key.to_string(), ns.to_string(), name.to_string());
        let new_ref = (kind != EventType::Deleted).then(|| object.clone());
        inner.index(&slot, current.as_deref(), new_ref.as_deref());
        let raw = serialise(&object);
        let map = match inner.objects.get_mut(key) {
            Some(map) => map,
            None => inner.objects.entry(key.to_string()).or_default(),
        };
        let kept = if new_ref.is_some() {
            map.insert(ns, name, raw.clone());
            Some(raw.clone())
        } else {
            map.remove(ns, name);
            None
        };
        let event = Arc::new(Event {
            rv,
            key: Arc::from(key),
            namespace: ns.to_string(),
            name: name.to_string(),
            kind,
            object: raw,
            prev: stored,
            head: OnceLock::new(),
        });
        let compact_below = inner.history.compacted_rv();
        inner.record(event.clone());
        let ack = match &inner.writer {
            Writer::Memory | Writer::Closed => Ack(None),
            Writer::Durable(tx) => {
                let (atx, arx) = oneshot::channel();
                // Sent under the lock so the writer sees events in resourceVersion order.
                if tx.send((event, compact_below, Some(atx))).is_err() {
                    return Err(StorageError::WriterGone.into());
                }
                Ack(Some(arx))
            }
        };
        Ok(Written {
            object,
            stored: kept,
            ack,
        })
    }
}

/// An object's stored form: the bytes it is answered in ([`crate::encode::json`]), so that it
/// is served as stored without being decoded. The buffer is cut to its length: it lives as
/// long as the object and its events, and serialising leaves up to half of it spare.
fn serialise(v: &Value) -> Bytes {
    let mut raw = crate::encode::json(v);
    raw.shrink_to_fit();
    Bytes::from(raw)
}

/// An object as stored. Stored bytes were serialised from a `Value` by this process (or read
/// back from a database whose bodies were checked at start), so they parse.
pub fn decode(raw: &[u8]) -> Value {
    serde_json::from_slice(raw).unwrap_or(Value::Null)
}

/// Whether a stored object says it is of `api_version` and `kind`: read without decoding the
/// rest of it.
pub fn stored_as(raw: &[u8], api_version: &str, kind: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct TypeMeta<'a> {
        #[serde(rename = "apiVersion", borrow, default)]
        api_version: Cow<'a, str>,
        #[serde(borrow, default)]
        kind: Cow<'a, str>,
    }
    serde_json::from_slice::<TypeMeta>(raw)
        .is_ok_and(|meta| meta.api_version == api_version && meta.kind == kind)
}

fn parse(raw: &Bytes) -> Arc<Value> {
    Arc::new(decode(raw))
}

fn collect(inner: &Inner, key: &str, ns: Option<&str>, after: Option<(&str, &str)>) -> Vec<Bytes> {
    keyed(inner, key, ns, after)
        .into_iter()
        .map(|(_, raw)| raw)
        .collect()
}

/// [`collect`] with each object's namespace and name.
fn keyed(
    inner: &Inner,
    key: &str,
    ns: Option<&str>,
    after: Option<(&str, &str)>,
) -> Vec<(ObjKey, Bytes)> {
    let Some(map) = inner.objects.get(key) else {
        return Vec::new();
    };
    map.after(ns, after)
        .map(|(ons, name, raw)| ((ons.to_string(), name.to_string()), raw.clone()))
        .collect()
}

/// The stored objects [`Store::select`] answers with. A `metadata.namespace` lookup narrows the
/// namespace, a `metadata.name` one in a known namespace is a key, the rest go by index.
fn selected(inner: &mut Inner, key: &str, ns: Option<&str>, lookups: &[Lookup]) -> Vec<Bytes> {
    let field = |path: &str, lookup: &Lookup| matches!(&lookup.on, Indexed::Field(p) if p == path);
    let mut ns = ns.map(str::to_string);
    for lookup in lookups.iter().filter(|l| field("metadata.namespace", l)) {
        match (&ns, lookup.values.as_slice()) {
            (None, [only]) => ns = Some(only.clone()),
            (Some(ns), values) if values.contains(ns) => {}
            (None, _) => {}
            (Some(_), _) => return Vec::new(),
        }
    }
    let lookups: Vec<&Lookup> = lookups
        .iter()
        .filter(|l| !field("metadata.namespace", l))
        .collect();
    let Some(objects) = inner.objects.get(key) else {
        return Vec::new();
    };
    if let Some(ns) = &ns
        && let Some(by_name) = lookups.iter().find(|l| field("metadata.name", l))
    {
        return by_name
            .values
            .iter()
            .filter_map(|name| objects.get(ns, name).cloned())
            .collect();
    }
    if lookups.is_empty() {
        return collect(inner, key, ns.as_deref(), None);
    }
    inner
        .indexes
        .entry(key.to_string())
        .or_default()
        .candidates(&lookups, objects)
        .into_iter()
        .filter(|(ons, _)| ns.as_ref().is_none_or(|n| n == ons))
        .filter_map(|(ons, name)| objects.get(&ons, &name).cloned())
        .collect()
}

fn subscribe(inner: &mut Inner, key: &str, scope: &Scope) -> EventReceiver {
    inner
        .channels
        .entry(key.to_string())
        .or_default()
        .subscribe(scope)
}

/// Most events committed in one transaction.
const MAX_BATCH: usize = 1024;

fn run_writer(
    mut backend: Box<dyn Backend>,
    rx: std::sync::mpsc::Receiver<PersistItem>,
    failed: &std::sync::atomic::AtomicBool,
) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        let compact_below = batch.iter().map(|(_, c, _)| *c).max().unwrap_or(0);
        let events: Vec<Arc<Event>> = batch.iter().map(|(e, _, _)| e.clone()).collect();
        let result = backend
            .commit(&events, compact_below)
            .map_err(|e| e.to_string());
        if let Err(e) = &result {
            tracing::error!(error = %e, "storage commit failed");
        }
        for (_, _, ack) in batch {
            if let Some(ack) = ack {
                let _ = ack.send(result.clone());
            }
        }
        if result.is_err() {
            failed.store(true, std::sync::atomic::Ordering::SeqCst);
            // Later writes would build on state that is not durable: stop acknowledging.
            return;
        }
    }
}

/// The store's failures as clients see them: unavailable while it takes no writes, an
/// internal error otherwise.
impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Failed | StorageError::ShuttingDown | StorageError::WriterGone => {
                ApiError::ServiceUnavailable(e.to_string())
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// A write refused by its own decision answers that decision's error.
impl From<WriteError<ApiError>> for ApiError {
    fn from(e: WriteError<ApiError>) -> Self {
        match e {
            WriteError::Refused(e) => e,
            WriteError::Storage(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;
    use serde_json::json;

    #[test]
    fn objects_list_by_namespace_and_name_and_resume_after_one() {
        let mut objects = Objects::default();
        for (ns, name) in [("b", "z"), ("a", "y"), ("b", "x"), ("a", "x")] {
            objects.insert(ns, name, Bytes::from(format!("{ns}/{name}")));
        }
        objects.insert("a", "y", Bytes::from("a/y again"));
        objects.remove("b", "z");
        let listed = |ns: Option<&str>, after: Option<(&str, &str)>| -> Vec<String> {
            objects
                .after(ns, after)
                .map(|(ns, name, raw)| format!("{ns}/{name}={}", String::from_utf8_lossy(raw)))
                .collect()
        };
        assert_eq!(listed(None, None), ["a/x=a/x", "a/y=a/y again", "b/x=b/x"]);
        assert_eq!(listed(None, Some(("a", "x"))), ["a/y=a/y again", "b/x=b/x"]);
        assert_eq!(listed(Some("a"), None), ["a/x=a/x", "a/y=a/y again"]);
        assert_eq!(listed(Some("a"), Some(("a", "x"))), ["a/y=a/y again"]);
        assert!(listed(Some("a"), Some(("b", "x"))).is_empty());
        assert_eq!(objects.get("b", "x").map(|raw| &raw[..]), Some(&b"b/x"[..]));
        assert_eq!(objects.get("b", "z"), None);
    }

    fn store() -> Arc<Store> {
        Store::open(
            Box::new(memory::MemoryBackend),
            HistoryLimits::default(),
            false,
            DEFAULT_BACKLOG,
        )
        .unwrap()
    }

    fn put(s: &Store, name: &str) -> Arc<Value> {
        s.write("/configmaps", "ns", name, false, |_| {
            Ok::<_, Infallible>(WriteOp::Put(
                json!({"metadata": {"name": name, "namespace": "ns"}}),
            ))
        })
        .unwrap()
        .object
    }

    #[test]
    fn writes_assign_increasing_resource_versions() {
        let s = store();
        let a = put(&s, "a");
        let b = put(&s, "b");
        assert_eq!(a.resource_version(), "1");
        assert_eq!(b.resource_version(), "2");
        assert_eq!(s.list("/configmaps", Some("ns"), None).1.len(), 2);
        assert_eq!(
            s.list("/configmaps", Some("ns"), Some(("ns", "a"))).1.len(),
            1
        );
    }

    #[test]
    fn dry_run_changes_nothing() {
        let s = store();
        s.write("/configmaps", "ns", "a", true, |_| {
            Ok::<_, Infallible>(WriteOp::Put(json!({})))
        })
        .unwrap();
        assert_eq!(s.current_rv(), 0);
        assert!(s.get("/configmaps", "ns", "a").is_none());
    }

    #[test]
    fn a_closed_store_refuses_writes_but_answers_dry_runs() {
        let s = store();
        s.close();
        let write = |dry_run| {
            s.write("/configmaps", "ns", "a", dry_run, |_| {
                Ok::<_, Infallible>(WriteOp::Put(json!({})))
            })
        };
        assert!(matches!(
            write(false),
            Err(WriteError::Storage(StorageError::ShuttingDown))
        ));
        assert!(write(true).is_ok());
        assert!(s.get("/configmaps", "ns", "a").is_none());
    }
}
