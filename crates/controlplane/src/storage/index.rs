//! Secondary indexes of a resource's objects by the value of one label or one selectable field,
//! so a list (or a watch's initial events) selected by equality — a fleet's
//! `open-cluster-management.io/cluster-name=<cluster>`, a CSR's `spec.signerName` — costs what
//! it returns rather than a decode of every object of the resource.
//!
//! An index is built the first time a selector asks for it (one scan) and kept up to date by
//! every write after that; which labels and fields matter is learnt from the clients, so the
//! store needs no list of them. An index holds the keys of the objects with a value, not the
//! objects.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::{ObjKey, Objects};
use crate::selectors;

/// What objects are indexed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Indexed {
    /// A label's value; objects without the label are not in the index.
    Label(String),
    /// A field's value as field selectors read it (absent is the empty string).
    Field(String),
}

impl Indexed {
    fn value(&self, obj: &Value) -> Option<String> {
        match self {
            Indexed::Label(key) => selectors::label_value(obj, key).map(str::to_string),
            Indexed::Field(path) => Some(selectors::field_value(obj, path)),
        }
    }

    /// [`Self::value`] of a stored object, decoding only its labels when that is all it needs
    /// (an index is built under the store lock, from every object of the resource).
    fn stored_value(&self, raw: &[u8]) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Object {
            metadata: Option<Metadata>,
        }
        #[derive(serde::Deserialize)]
        struct Metadata {
            labels: Option<HashMap<String, Value>>,
        }
        match self {
            Indexed::Label(key) => serde_json::from_slice::<Object>(raw)
                .ok()?
                .metadata?
                .labels?
                .remove(key)?
                .as_str()
                .map(str::to_string),
            Indexed::Field(_) => self.value(&super::decode(raw)),
        }
    }
}

/// Objects whose value for `on` is one of `values`: an equality requirement of a selector.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup {
    pub on: Indexed,
    pub values: Vec<String>,
}

/// One index: each value and the objects holding it, in list order.
type Index = HashMap<String, BTreeSet<ObjKey>>;

/// The indexes of one resource.
#[derive(Default)]
pub(super) struct Indexes(HashMap<Indexed, Index>);

impl Indexes {
    /// Keeps every index true after the object at `id` changed from `old` to `new` (None:
    /// absent).
    pub(super) fn update(&mut self, id: &ObjKey, old: Option<&Value>, new: Option<&Value>) {
        for (on, index) in &mut self.0 {
            let before = old.and_then(|o| on.value(o));
            let after = new.and_then(|n| on.value(n));
            if before == after {
                continue;
            }
            if let Some(value) = before
                && let Some(ids) = index.get_mut(&value)
            {
                ids.remove(id);
                if ids.is_empty() {
                    index.remove(&value);
                }
            }
            if let Some(value) = after {
                index.entry(value).or_default().insert(id.clone());
            }
        }
    }

    /// The objects that may satisfy every one of `lookups` (at least one), in list order:
    /// those of the most selective lookup. Indexes asked for the first time are built from
    /// `objects`.
    pub(super) fn candidates(
        &mut self,
        lookups: &[&Lookup],
        objects: &Objects,
    ) -> BTreeSet<ObjKey> {
        for &lookup in lookups {
            if !self.0.contains_key(&lookup.on) {
                let mut index = Index::new();
                for (ns, name, raw) in objects.iter() {
                    if let Some(value) = lookup.on.stored_value(raw) {
                        let id = (ns.to_string(), name.to_string());
                        index.entry(value).or_default().insert(id);
                    }
                }
                self.0.insert(lookup.on.clone(), index);
            }
        }
        let holders = |lookup: &Lookup| -> Vec<&BTreeSet<ObjKey>> {
            let index = &self.0[&lookup.on];
            lookup
                .values
                .iter()
                .filter_map(|value| index.get(value))
                .collect()
        };
        lookups
            .iter()
            .map(|&lookup| holders(lookup))
            .min_by_key(|sets| sets.iter().map(|ids| ids.len()).sum::<usize>())
            .map(|sets| sets.into_iter().flatten().cloned().collect())
            .unwrap_or_default()
    }
}
