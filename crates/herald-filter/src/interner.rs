//! Process-wide ids for the names filters read (JSON paths, header
//! names): the same name written in two filters gets the same id, so what
//! one filter's test read out of a record (a JSON field `DecodedRecord`
//! keeps, a header's column in `Columns`) serves the other's.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, OnceLock};

/// Distinct names given an id, per table; past it (or past
/// [`IDS_BYTES_MAX`]) new names go without one (and are looked up every
/// time), so filters written by clients, every filter parsed (push
/// subscriptions' too), cannot grow a table without bound.
pub(crate) const IDS_MAX: usize = 1 << 16;
/// Bytes of names a table holds at most.
pub(crate) const IDS_BYTES_MAX: usize = 1 << 20;

/// One table of names and their ids.
pub(crate) struct Interner<K> {
    ids: OnceLock<Mutex<Table<K>>>,
}

/// The names given an id, and the bytes they hold.
struct Table<K> {
    ids: HashMap<K, u32>,
    bytes: usize,
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
            bytes: 0,
        }
    }
}

impl<K: Hash + Eq> Interner<K> {
    /// An empty table, for a `static`.
    pub(crate) const fn new() -> Self {
        Self {
            ids: OnceLock::new(),
        }
    }

    /// The id of `name` (of `bytes` bytes), given one now if it has none;
    /// `None` once the table holds [`IDS_MAX`] names or it would pass
    /// [`IDS_BYTES_MAX`].
    pub(crate) fn id<Q>(&self, name: &Q, bytes: usize) -> Option<u32>
    where
        K: std::borrow::Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut table = self
            .ids
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(&id) = table.ids.get(name) {
            return Some(id);
        }
        let held = table.bytes.saturating_add(bytes);
        if table.ids.len() >= IDS_MAX || held > IDS_BYTES_MAX {
            return None;
        }
        let id = table.ids.len() as u32;
        table.ids.insert(K::from(name), id);
        table.bytes = held;
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_gives_ids_until_its_bytes_are_held() {
        let table: Interner<Box<[u8]>> = Interner::new();
        let name = |i: usize| format!("{i:0>1024}").into_bytes();
        let first = table.id(&name(0)[..], 1024);
        assert_eq!(first, Some(0));
        assert_eq!(
            table.id(&name(0)[..], 1024),
            first,
            "the same name, the same id"
        );
        for i in 1..IDS_BYTES_MAX / 1024 {
            assert_eq!(table.id(&name(i)[..], 1024), Some(i as u32));
        }
        assert_eq!(
            table.id(&name(usize::MAX)[..], 1024),
            None,
            "past the bytes"
        );
        assert_eq!(
            table.id(&name(5)[..], 1024),
            Some(5),
            "known names keep theirs"
        );
    }
}
