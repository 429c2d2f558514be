//! A cache's objects found by a key of theirs (the cluster a CSR names, the namespace an addon
//! lives in), kept beside the cache from the events its watch delivers, so that a loop finds a
//! cluster's objects without scanning every object of the kind: with a few per cluster, that
//! scan on each pass over each of 10,000 clusters was quadratic.
//!
//! The index holds references only; the objects are read from the cache ([`Index::of`]), so
//! one the cache no longer holds is never returned. A relist (the watch's `Init` …
//! `InitDone`) builds the index afresh, as the reflector rebuilds its store.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::{StreamExt, TryStreamExt};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::watch::{Share, cut_watch};

/// An object's place in the index: namespace and name.
type Entry = (Option<String>, String);

/// The names of the watched objects of each key.
pub struct Index<K> {
    key: fn(&K) -> Option<&str>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    by_key: HashMap<String, BTreeSet<Entry>>,
    /// What a relist in progress has delivered so far.
    relisting: Option<HashMap<String, BTreeSet<Entry>>>,
}

impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key,
            state: self.state.clone(),
        }
    }
}

impl<K> Index<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash,
{
    /// An empty index of objects by `key` (`None`: the object is indexed nowhere).
    pub fn new(key: fn(&K) -> Option<&str>) -> Self {
        Self {
            key,
            state: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn entry(&self, object: &K) -> Option<(String, Entry)> {
        let key = (self.key)(object)?.to_string();
        let meta = object.meta();
        Some((key, (meta.namespace.clone(), meta.name.clone()?)))
    }

    /// Takes in what the watch delivered (call it before the event reaches the cache's writer,
    /// as `inspect_ok` does).
    pub fn observe(&self, event: &watcher::Event<K>) {
        let mut state = self.state();
        match event {
            watcher::Event::Init => state.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                if let Some((key, entry)) = self.entry(object) {
                    let State {
                        by_key, relisting, ..
                    } = &mut *state;
                    relisting
                        .as_mut()
                        .unwrap_or(by_key)
                        .entry(key)
                        .or_default()
                        .insert(entry);
                }
            }
            watcher::Event::InitDone => {
                if let Some(relisted) = state.relisting.take() {
                    state.by_key = relisted;
                }
            }
            watcher::Event::Apply(object) => {
                if let Some((key, entry)) = self.entry(object) {
                    state.by_key.entry(key).or_default().insert(entry);
                }
            }
            watcher::Event::Delete(object) => {
                if let Some((key, entry)) = self.entry(object)
                    && let Some(entries) = state.by_key.get_mut(&key)
                {
                    entries.remove(&entry);
                    if entries.is_empty() {
                        state.by_key.remove(&key);
                    }
                }
            }
        }
    }

    /// The objects of `key`, as references.
    pub fn refs(&self, key: &str) -> Vec<ObjectRef<K>> {
        self.state()
            .by_key
            .get(key)
            .into_iter()
            .flatten()
            .map(|(namespace, name)| {
                let reference = ObjectRef::new(name);
                match namespace {
                    Some(namespace) => reference.within(namespace),
                    None => reference,
                }
            })
            .collect()
    }

    /// The objects of `key` as `store` holds them, in the order of their namespace and name.
    pub fn of(&self, store: &Store<K>, key: &str) -> Vec<Arc<K>> {
        self.refs(key)
            .iter()
            .filter_map(|reference| store.get(reference))
            .collect()
    }

    /// The objects of `key`, copied, once `store` has listed its objects; `None` until then (a
    /// reader must not take "not listed yet" for "none", and reads them afresh instead).
    pub fn listed(&self, store: &Store<K>, key: &str) -> Option<Vec<K>> {
        super::watch::has_listed(store).then(|| {
            self.of(store, key)
                .iter()
                .map(|object| (**object).clone())
                .collect()
        })
    }
}

/// A watch of `api`'s objects that `config` selects, each cut by `cut`, as one loop's [`Share`]
/// ([`super::watch::share`]), and an index of them by `key` kept as the watch is polled. The
/// index takes each event before the store does: a reader that finds the store listed finds the
/// index listed too (the other way round, a cluster's objects read as none for a moment after
/// each list).
pub fn share_indexed<K>(
    api: Api<K>,
    config: watcher::Config,
    cut: fn(&mut K),
    key: fn(&K) -> Option<&str>,
) -> (Share<K>, Index<K>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Default + Eq + std::hash::Hash + Unpin,
{
    let index = Index::new(key);
    let observer = index.clone();
    let (store, writer) = reflector::store();
    let events = cut_watch(api, config, cut)
        .inspect_ok(move |event| observer.observe(event))
        .reflect(writer)
        .boxed();
    (Share { store, events }, index)
}

/// The namespace of a namespaced object: the key of an index of a namespace's objects.
pub fn namespace<K: Resource>(object: &K) -> Option<&str> {
    object.meta().namespace.as_deref()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn map(namespace: &str, name: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.to_string());
        object.metadata.namespace = Some(namespace.to_string());
        object
    }

    fn names(found: Vec<Arc<ConfigMap>>) -> Vec<String> {
        found
            .iter()
            .map(|object| object.metadata.name.clone().unwrap())
            .collect()
    }

    #[test]
    fn a_keys_objects_are_found_until_deleted_and_a_relist_forgets_what_it_no_longer_lists() {
        let index = Index::new(namespace::<ConfigMap>);
        let (store, mut writer) = kube::runtime::reflector::store();
        assert_eq!(index.listed(&store, "a"), None, "nothing listed yet");
        let mut deliver = |event: watcher::Event<ConfigMap>| {
            index.observe(&event);
            writer.apply_watcher_event(&event);
        };
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(map("a", "two")),
            watcher::Event::InitApply(map("b", "one")),
            watcher::Event::InitDone,
            watcher::Event::Apply(map("a", "one")),
        ] {
            deliver(event);
        }
        assert_eq!(names(index.of(&store, "a")), ["one", "two"]);
        assert_eq!(names(index.of(&store, "b")), ["one"]);
        assert!(index.refs("c").is_empty());
        assert_eq!(index.listed(&store, "c"), Some(Vec::new()), "listed: none");

        deliver(watcher::Event::Delete(map("a", "two")));
        assert_eq!(names(index.of(&store, "a")), ["one"]);

        // A watch that was away relists: what was deleted meanwhile is gone from both.
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(map("a", "one")),
            watcher::Event::InitDone,
        ] {
            deliver(event);
        }
        assert!(index.refs("b").is_empty(), "b/one was not relisted");
        assert_eq!(names(index.of(&store, "a")), ["one"]);
    }
}
