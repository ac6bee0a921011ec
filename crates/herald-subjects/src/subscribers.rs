//! The subscribers of one subject (or one pattern ending) as readers see
//! them: an immutable list that each write replaces, so a reader on the
//! delivery path sees it before or after a change and never half of one.
//!
//! Copying a flat list on every write made a subject's subscribe and
//! unsubscribe cost every subscriber already there: 10,000 clients joining
//! one subject (a reconnection storm) cloned and later dropped 50 million
//! subscriber handles, each a reference count on a line of its own. Here
//! the list is made of shared chunks of at most [`CHUNK`] subscribers: a
//! write copies the one chunk it changes and the chunk pointers, and every
//! other chunk stays shared between the old list and the new one.
//!
//! Chunks stay at least half full on average: an append fills the last
//! chunk before opening another, and a removal that leaves a chunk small
//! enough merges it with a neighbour, so no two neighbours together hold
//! [`CHUNK`] or fewer.

use std::sync::Arc;

/// Most subscribers one chunk holds: what a write copies beyond the chunk
/// pointers. Large enough that a list of thousands is a few dozen chunks,
/// small enough that copying one is a few cache lines of handles.
pub(crate) const CHUNK: usize = 64;

/// An immutable list of subscribers in shared chunks. Cloning it is one
/// reference count; [`Subscribers::with`] and [`Subscribers::without`]
/// build the changed list and leave this one as it was.
pub(crate) struct Subscribers<V> {
    /// Never holds an empty chunk.
    chunks: Arc<[Arc<[V]>]>,
    len: usize,
}

impl<V> Clone for Subscribers<V> {
    fn clone(&self) -> Self {
        Self {
            chunks: Arc::clone(&self.chunks),
            len: self.len,
        }
    }
}

impl<V> std::fmt::Debug for Subscribers<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscribers")
            .field("len", &self.len)
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

impl<V> Subscribers<V> {
    /// No subscribers.
    pub(crate) fn empty() -> Self {
        Self {
            chunks: Arc::from(Vec::new()),
            len: 0,
        }
    }

    /// True with no subscribers.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every subscriber, in the order they were added (removals aside).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &V> {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    #[cfg(test)]
    fn chunk_lens(&self) -> Vec<usize> {
        self.chunks.iter().map(|chunk| chunk.len()).collect()
    }
}

impl<V: Clone + PartialEq> Subscribers<V> {
    /// One subscriber.
    pub(crate) fn one(subscriber: V) -> Self {
        Self {
            chunks: Arc::from(vec![Arc::from(vec![subscriber])]),
            len: 1,
        }
    }

    /// True if `subscriber` is in the list.
    pub(crate) fn contains(&self, subscriber: &V) -> bool {
        self.iter().any(|s| s == subscriber)
    }

    /// The list with `subscriber` appended: the last chunk copied with it,
    /// or a chunk of its own when the last is full.
    pub(crate) fn with(&self, subscriber: V) -> Self {
        let mut chunks = self.chunks.to_vec();
        match chunks.last_mut() {
            Some(last) if last.len() < CHUNK => {
                let mut grown = Vec::with_capacity(last.len() + 1);
                grown.extend_from_slice(last);
                grown.push(subscriber);
                *last = Arc::from(grown);
            }
            _ => chunks.push(Arc::from(vec![subscriber])),
        }
        Self {
            chunks: Arc::from(chunks),
            len: self.len + 1,
        }
    }

    /// The list without `subscriber`, or `None` if it is not there: its
    /// chunk copied without it, merged with a neighbour when the two fit
    /// in one, or gone when it held nothing else.
    pub(crate) fn without(&self, subscriber: &V) -> Option<Self> {
        let (at, place) = self
            .chunks
            .iter()
            .enumerate()
            .find_map(|(at, chunk)| Some((at, chunk.iter().position(|s| s == subscriber)?)))?;
        let mut chunks = self.chunks.to_vec();
        let old = &chunks[at];
        let mut shrunk = Vec::with_capacity(old.len() - 1);
        shrunk.extend_from_slice(&old[..place]);
        shrunk.extend_from_slice(&old[place + 1..]);
        if shrunk.is_empty() {
            chunks.remove(at);
        } else {
            let fits = |neighbour: &Arc<[V]>| neighbour.len() + shrunk.len() <= CHUNK;
            if at + 1 < chunks.len() && fits(&chunks[at + 1]) {
                shrunk.extend_from_slice(&chunks[at + 1]);
                chunks.remove(at + 1);
                chunks[at] = Arc::from(shrunk);
            } else if at > 0 && fits(&chunks[at - 1]) {
                let mut merged = chunks[at - 1].to_vec();
                merged.extend(shrunk);
                chunks.remove(at);
                chunks[at - 1] = Arc::from(merged);
            } else {
                chunks[at] = Arc::from(shrunk);
            }
        }
        Some(Self {
            chunks: Arc::from(chunks),
            len: self.len - 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn listed(list: &Subscribers<u32>) -> Vec<u32> {
        list.iter().copied().collect()
    }

    /// No chunk is empty, none holds more than `CHUNK`, and no two
    /// neighbours would fit in one.
    fn assert_packed(list: &Subscribers<u32>) {
        let lens = list.chunk_lens();
        assert!(lens.iter().all(|&n| (1..=CHUNK).contains(&n)), "{lens:?}");
        assert!(
            lens.windows(2).all(|pair| pair[0] + pair[1] > CHUNK),
            "{lens:?}"
        );
        assert_eq!(lens.iter().sum::<usize>(), list.len);
    }

    #[test]
    fn a_write_shares_every_chunk_it_does_not_change() {
        let mut list = Subscribers::one(0u32);
        for i in 1..(CHUNK as u32 * 3) {
            list = list.with(i);
        }
        assert_eq!(list.chunk_lens(), vec![CHUNK, CHUNK, CHUNK]);
        let appended = list.with(1_000);
        let removed = list.without(&(CHUNK as u32 + 5)).expect("it is there");
        for (i, chunk) in list.chunks.iter().enumerate() {
            assert!(Arc::ptr_eq(chunk, &appended.chunks[i]));
            if i != 1 {
                assert!(Arc::ptr_eq(chunk, &removed.chunks[i]));
            }
        }
        // The old list is untouched by either.
        assert_eq!(listed(&list), (0..CHUNK as u32 * 3).collect::<Vec<_>>());
        assert_eq!(appended.len, CHUNK * 3 + 1);
        assert_eq!(removed.len, CHUNK * 3 - 1);
    }

    #[test]
    fn removing_everyone_leaves_an_empty_list_and_an_absent_one_is_refused() {
        let mut list = Subscribers::empty();
        for i in 0..200u32 {
            list = list.with(i);
        }
        assert!(list.without(&999).is_none());
        for i in (0..200u32).rev().step_by(2).chain((0..200u32).step_by(2)) {
            list = list.without(&i).expect("each once");
            assert_packed(&list);
        }
        assert!(list.is_empty());
        assert!(list.chunk_lens().is_empty());
        assert_eq!(listed(&list), Vec::<u32>::new());
    }

    proptest! {
        #[test]
        fn writes_agree_with_a_plain_list(ops in prop::collection::vec((any::<bool>(), 0u32..300), 1..600)) {
            let mut list = Subscribers::empty();
            let mut model: Vec<u32> = Vec::new();
            for (add, value) in ops {
                if add {
                    if list.contains(&value) {
                        prop_assert!(model.contains(&value));
                        continue;
                    }
                    list = list.with(value);
                    model.push(value);
                } else {
                    let next = list.without(&value);
                    let place = model.iter().position(|&v| v == value);
                    prop_assert_eq!(next.is_some(), place.is_some());
                    if let (Some(next), Some(place)) = (next, place) {
                        list = next;
                        model.remove(place);
                    }
                }
                prop_assert_eq!(listed(&list), model.clone());
                assert_packed(&list);
            }
        }
    }
}
