//! Process-wide ids for the names filters read (JSON paths, header
//! names): the same name written in two filters gets the same id, so what
//! one filter's test read out of a record (a JSON field `DecodedRecord`
//! keeps, a header's column in `Columns`) serves the other's.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, OnceLock};

/// Distinct names given an id, per table; past it new names go without
/// one (and are looked up every time), so filters written by clients
/// cannot grow a table without bound.
pub(crate) const IDS_MAX: usize = 1 << 16;

/// One table of names and their ids.
pub(crate) struct Interner<K> {
    ids: OnceLock<Mutex<HashMap<K, u32>>>,
}

impl<K: Hash + Eq> Interner<K> {
    /// An empty table, for a `static`.
    pub(crate) const fn new() -> Self {
        Self {
            ids: OnceLock::new(),
        }
    }

    /// The id of `name`, given one now if it has none; `None` once the
    /// table holds [`IDS_MAX`] names.
    pub(crate) fn id<Q>(&self, name: &Q) -> Option<u32>
    where
        K: std::borrow::Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut ids = self
            .ids
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(&id) = ids.get(name) {
            return Some(id);
        }
        if ids.len() >= IDS_MAX {
            return None;
        }
        let id = ids.len() as u32;
        ids.insert(K::from(name), id);
        Some(id)
    }
}
