//! What a watch says of each object, as a loop that keeps something per object needs it: this
//! object was created or changed, or it is gone. kube-runtime's watcher lists again after it
//! reconnects, and an object deleted while it was away simply is not in that list; [`changes`]
//! turns its absence into a [`Change::Deleted`], so that nothing is kept for an object that no
//! longer exists.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::Backoff;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// How many objects a list (a watch's or a plan's) asks for at once. A page of 500 Spokes or
/// ManagedClusters, decoded with who owns which field (most of each object) before that is
/// dropped, was 6-7 MB; 100 keep a page near a megabyte, for 100 lists of a 10,000-spoke hub.
pub const LIST_PAGE: u32 = 100;

/// What happened to one watched object.
pub enum Change<K: Resource> {
    /// Created or changed, or listed again after the watch reconnected.
    Applied(K),
    /// Deleted, or missing from the list after the watch reconnected.
    Deleted(ObjectRef<K>),
}

/// `events` with a pause after each failure that grows while the watch keeps failing (kube's
/// default, up to 30 s). kube's own `default_backoff` starts over at the `Init` its watcher yields
/// before every new listing, so a watch whose listing is refused (403: the watcher's rights are
/// gone) was tried again about every second for ever; this one starts over only once the watch
/// delivers something past that.
pub fn backing_off<K, S>(
    events: S,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    K: Send + 'static,
{
    let start = (events.boxed(), watcher::DefaultBackoff::default(), None);
    futures::stream::unfold(start, |(mut events, mut backoff, pause)| async move {
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
        let event = events.next().await?;
        let pause = match &event {
            Err(_) => backoff.next(),
            Ok(watcher::Event::Init) => None,
            Ok(_) => {
                backoff.reset();
                None
            }
        };
        Some((event, (events, backoff, pause)))
    })
}

/// [`backing_off`] as a method of a watcher's stream, where kube's `default_backoff` was.
pub trait BackingOff<K>:
    Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + Sized + 'static
{
    /// This stream, pausing ever longer while it fails ([`backing_off`]).
    fn backing_off(
        self,
    ) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
    where
        K: Send + 'static,
    {
        backing_off(self)
    }
}

impl<K, S> BackingOff<K> for S where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + Sized + 'static
{
}

/// The [`Change`]s of the objects of `api` that `config` selects, watched (with a backoff that
/// grows while the watch fails: [`backing_off`]) until `shutdown`.
pub fn object_changes<K>(
    api: Api<K>,
    config: watcher::Config,
    shutdown: &CancellationToken,
) -> BoxStream<'static, Result<Change<K>, watcher::Error>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send,
{
    changes(backing_off(watcher(api, config)))
        .take_until(shutdown.clone().cancelled_owned())
        .boxed()
}

/// The [`Change`]s of the objects `events` (a watcher's) reports, its errors passed on.
pub fn changes<K, E>(
    events: impl Stream<Item = Result<watcher::Event<K>, E>>,
) -> impl Stream<Item = Result<Change<K>, E>>
where
    K: Resource + Clone,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let mut known: HashSet<ObjectRef<K>> = HashSet::new();
    // The objects of a listing in progress.
    let mut listed: HashSet<ObjectRef<K>> = HashSet::new();
    events
        .map(move |event| {
            let changes: Vec<Result<Change<K>, E>> = match event {
                Err(err) => vec![Err(err)],
                Ok(watcher::Event::Init) => {
                    listed.clear();
                    Vec::new()
                }
                Ok(watcher::Event::InitApply(object)) => {
                    let reference = ObjectRef::from_obj(&object);
                    listed.insert(reference.clone());
                    known.insert(reference);
                    vec![Ok(Change::Applied(object))]
                }
                Ok(watcher::Event::InitDone) => {
                    let gone: Vec<ObjectRef<K>> = known.difference(&listed).cloned().collect();
                    listed.clear();
                    gone.into_iter()
                        .map(|reference| {
                            known.remove(&reference);
                            Ok(Change::Deleted(reference))
                        })
                        .collect()
                }
                Ok(watcher::Event::Apply(object)) => {
                    known.insert(ObjectRef::from_obj(&object));
                    vec![Ok(Change::Applied(object))]
                }
                Ok(watcher::Event::Delete(object)) => {
                    let reference = ObjectRef::from_obj(&object);
                    known.remove(&reference);
                    vec![Ok(Change::Deleted(reference))]
                }
            };
            futures::stream::iter(changes)
        })
        .flatten()
}

/// The objects `events` (a watcher's) shows whose `facts` changed since it last showed them,
/// and each deleted, its errors passed on: what wakes a loop that reads only those facts of an
/// object. A listing again after a reconnect wakes nothing for an object whose facts held.
pub fn fact_changes<K, E>(
    events: impl Stream<Item = Result<watcher::Event<K>, E>>,
    facts: impl Fn(&K) -> u64,
) -> impl Stream<Item = Result<K, E>>
where
    K: Resource,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let mut seen: HashMap<ObjectRef<K>, u64> = HashMap::new();
    events
        .map(move |event| {
            let changed = match event {
                Err(err) => return futures::stream::iter(Some(Err(err))),
                Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                Ok(watcher::Event::Delete(object)) => {
                    seen.remove(&ObjectRef::from_obj(&object));
                    Some(object)
                }
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    let now = facts(&object);
                    (seen.insert(ObjectRef::from_obj(&object), now) != Some(now)).then_some(object)
                }
            };
            futures::stream::iter(changed.map(Ok))
        })
        .flatten()
}

/// One watch for two loops: `events` as they come, and a copy of each (its errors left to the
/// first, which reports them) for a second loop woken by the same objects, so that the process
/// decodes and caches them once. The copy is made as the first is polled: both must be.
pub fn tee<T, E>(
    events: impl Stream<Item = Result<T, E>>,
) -> (
    impl Stream<Item = Result<T, E>>,
    impl Stream<Item = Result<T, E>>,
)
where
    T: Clone,
{
    let (first, [second]) = copied(events);
    (first, second)
}

/// [`tee`] for `N` more loops: `events` as they come, and `N` copies of each, made as the first
/// stream is polled (which reports the watch's errors). A copy its loop dropped is no longer
/// made; the others go on.
pub fn copied<T, E, const N: usize>(
    events: impl Stream<Item = Result<T, E>>,
) -> (
    impl Stream<Item = Result<T, E>>,
    [impl Stream<Item = Result<T, E>>; N],
)
where
    T: Clone,
{
    let mut senders = Vec::with_capacity(N);
    let copies = std::array::from_fn(|_| {
        let (sender, copies) = futures::channel::mpsc::unbounded();
        senders.push(sender);
        copies.map(Ok)
    });
    let first = events.inspect(move |event| {
        if let Ok(event) = event {
            // A loop that has ended (or never ran) gets no more copies.
            senders.retain(|sender| sender.unbounded_send(event.clone()).is_ok());
        }
    });
    (first, copies)
}

/// `api`'s objects as a watch applies them, each cut by `cut` first, and the cache that keeps
/// them so (kube-runtime's reflector store), filled as the stream is polled.
pub fn cached<K>(
    api: Api<K>,
    config: watcher::Config,
    cut: fn(&mut K),
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash + Unpin,
{
    let (reader, events) = cached_events(api, config, cut);
    (reader, events.applied_objects())
}

/// [`cached`], yielding the watch's events themselves (deletions and relistings too) for
/// whoever needs more than the objects applied.
pub fn cached_events<K>(
    api: Api<K>,
    config: watcher::Config,
    cut: fn(&mut K),
) -> (
    Store<K>,
    impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash + Unpin,
{
    let (reader, writer) = reflector::store();
    let events = cut_watch(api, config, cut).reflect(writer);
    (reader, events)
}

/// The events of a watch of `api`'s objects that `config` selects, each object cut by `cut`,
/// pausing ever longer while it fails ([`backing_off`]): what a cache of them is filled from.
pub fn cut_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    cut: fn(&mut K),
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    backing_off(watcher(api, config)).modify(cut)
}

/// One loop's share of a watch: the store the watch keeps, and the watch's events (or its copy
/// of them, [`copied`]), which the loop polls.
pub struct Share<K: Resource + 'static>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    pub store: Store<K>,
    pub events: BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
}

impl<K> Share<K>
where
    K: Resource + Clone + Send + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// This share, and `N` more of the same watch and store ([`copied`]): this one polls the
    /// watch and reports its errors. Every share is to be taken before any is polled (a later
    /// one would miss the first list).
    pub fn copied<const N: usize>(mut self) -> (Share<K>, [Share<K>; N]) {
        let copies = self.copies();
        (self, copies)
    }

    /// `N` more shares of this one's watch and store ([`Share::copied`]), this one polling the
    /// watch from now on.
    pub fn copies<const N: usize>(&mut self) -> [Share<K>; N] {
        let events = std::mem::replace(&mut self.events, futures::stream::empty().boxed());
        let (first, copies) = copied(events);
        self.events = first.boxed();
        copies.map(|events| Share {
            store: self.store.clone(),
            events: events.boxed(),
        })
    }
}

/// [`cached_events`] as one loop's [`Share`].
pub fn share<K>(api: Api<K>, config: watcher::Config, cut: fn(&mut K)) -> Share<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash + Unpin,
{
    let (store, events) = cached_events(api, config, cut);
    Share {
        store,
        events: events.boxed(),
    }
}

/// A controller over `api`'s objects (as `Controller::new`), whose cache keeps them as `cut`
/// leaves them ([`cached`]); its reconciles see the same cut objects.
pub fn cached_controller<K>(api: Api<K>, config: watcher::Config, cut: fn(&mut K)) -> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash + Unpin,
{
    let (reader, objects) = cached(api, config, cut);
    Controller::for_stream(objects, reader)
}

/// Whether `store`'s watch has listed its objects. Until then an object it lacks may exist: a
/// reader must not take "not listed yet" for "none".
pub fn has_listed<K>(store: &Store<K>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

/// The object `name` (of `api`'s namespace): from `store` once its watch has listed, read
/// through `api` until then.
pub async fn cached_or_read<K>(
    store: &Store<K>,
    api: &Api<K>,
    name: &str,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash,
{
    if !has_listed(store) {
        return api.get_opt(name).await;
    }
    let reference = ObjectRef::new(name);
    let reference = match api.namespace() {
        Some(namespace) => reference.within(namespace),
        None => reference,
    };
    Ok(store.get(&reference).map(|object| (*object).clone()))
}

/// Every object of `store` once its watch has listed them, listed from `api` until then (as
/// [`cached_or_read`] reads one): "not listed yet" must not read as none.
pub async fn cached_or_listed<K>(store: &Store<K>, api: &Api<K>) -> Result<Vec<Arc<K>>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash,
{
    if has_listed(store) {
        return Ok(store.state());
    }
    let listed = api.list(&Default::default()).await?;
    Ok(listed.items.into_iter().map(Arc::new).collect())
}

/// Drops the managed fields, which no loop of fleetform's reads: what a cache keeps of every
/// object it holds.
pub fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Keeps of a cached object's labels or annotations the entries `keep` says, and none at all
/// (`None`) when that leaves none: a B-tree map keeps its first node (about half a kilobyte)
/// once emptied, and a cache holds one for every object.
pub fn keep_only(map: &mut Option<BTreeMap<String, String>>, keep: impl Fn(&str) -> bool) {
    if let Some(entries) = map.as_mut() {
        entries.retain(|key, _| keep(key));
    }
    if map.as_ref().is_some_and(BTreeMap::is_empty) {
        *map = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn object(name: &str, value: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.to_string());
        object.metadata.namespace = Some("ns".to_string());
        object.data = Some([("value".to_string(), value.to_string())].into());
        object
    }

    /// The changes, as `+name=value` (applied) and `-name` (deleted).
    fn seen(events: Vec<watcher::Event<ConfigMap>>) -> Vec<String> {
        let events = futures::stream::iter(events.into_iter().map(Ok::<_, watcher::Error>));
        futures::executor::block_on(changes(events).collect::<Vec<_>>())
            .into_iter()
            .map(|change| match change.expect("no error was sent") {
                Change::Applied(object) => format!(
                    "+{}={}",
                    object.metadata.name.unwrap_or_default(),
                    object.data.unwrap_or_default()["value"]
                ),
                Change::Deleted(reference) => format!("-{}", reference.name),
            })
            .collect()
    }

    #[test]
    fn a_map_kept_of_nothing_is_none() {
        let mut map = Some(BTreeMap::from([
            ("keep".to_string(), "1".to_string()),
            ("drop".to_string(), "2".to_string()),
        ]));
        keep_only(&mut map, |key| key == "keep");
        assert_eq!(map, Some(BTreeMap::from([("keep".into(), "1".into())])));
        keep_only(&mut map, |_| false);
        assert_eq!(map, None);
        keep_only(&mut map, |_| true);
        assert_eq!(map, None);
    }

    #[test]
    fn objects_gone_while_the_watch_was_away_are_deleted_when_it_lists_again() {
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        let changes = seen(vec![
            Init,
            InitApply(object("a", "1")),
            InitApply(object("b", "1")),
            InitApply(object("c", "1")),
            InitDone,
            Apply(object("a", "2")),
            Delete(object("c", "1")),
            // The watch reconnects: b went meanwhile, a changed, d is new.
            Init,
            InitApply(object("a", "3")),
            InitApply(object("d", "1")),
            InitDone,
        ]);
        assert_eq!(
            changes,
            ["+a=1", "+b=1", "+c=1", "+a=2", "-c", "+a=3", "+d=1", "-b"]
        );
    }

    #[test]
    fn a_teed_watch_shows_both_loops_every_event_and_reports_its_errors_once() {
        let events =
            futures::stream::iter(vec![Ok("a1"), Err("the watch failed"), Ok("b1"), Ok("a2")]);
        let (first, second) = tee(events);
        let first: Vec<_> = futures::executor::block_on(first.collect());
        assert_eq!(
            first,
            [Ok("a1"), Err("the watch failed"), Ok("b1"), Ok("a2")]
        );
        // Copied as the first was polled; it ended, so the copies end too.
        let second: Vec<_> = futures::executor::block_on(second.collect());
        assert_eq!(second, [Ok("a1"), Ok("b1"), Ok("a2")]);
    }

    #[test]
    fn each_copy_of_a_watch_sees_every_event_though_another_copy_was_dropped() {
        let events = futures::stream::iter(vec![Ok("a1"), Err("the watch failed"), Ok("b1")]);
        let (first, [dropped, second, third]) = copied(events);
        drop(dropped);
        let first: Vec<_> = futures::executor::block_on(first.collect());
        assert_eq!(first, [Ok("a1"), Err("the watch failed"), Ok("b1")]);
        for copy in [second, third] {
            let seen: Vec<Result<&str, &str>> = futures::executor::block_on(copy.collect());
            assert_eq!(seen, [Ok("a1"), Ok("b1")]);
        }
    }
}
