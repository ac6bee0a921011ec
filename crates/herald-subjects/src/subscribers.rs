//! The subscribers of one subject (or one pattern ending) as readers see
//! them: an immutable list that each write replaces, so a reader on the
//! delivery path sees it before or after a change and never half of one.
//!
//! Copying a flat list on every write made a subject's subscribe and
//! unsubscribe cost every subscriber already there: 10,000 clients joining
//! one subject (a reconnection storm) cloned and later dropped 50 million
//! subscriber handles, each a reference count on a line of its own. Here
//! a list longer than [`CHUNK`] subscribers is made of shared chunks of at
//! most that many: a write copies the one chunk it changes (and a
//! neighbour it merges with) and the chunk pointers, and every other chunk
//! stays shared between the old list and the new one. A list of two to
//! [`CHUNK`] is one flat slice, read with no more hops than before.
//!
//! Most subjects have one subscriber (a client's own inbox, a device's
//! state): that one is held in the list itself, with no allocation of its
//! own, so the delivery path's lookup in a map far larger than the cache
//! reaches the subscriber without one more pointer to chase.
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

/// An immutable list of subscribers. Cloning it is one reference count;
/// [`Subscribers::with`] and [`Subscribers::without`] build the changed
/// list and leave this one as it was. Which form it takes follows from its
/// length alone: no two neighbouring chunks fit in one, so a list of two
/// chunks or more holds more than [`CHUNK`].
pub(crate) enum Subscribers<V> {
    /// Exactly one, held inline.
    One(V),
    /// None, or two to [`CHUNK`]: one slice, one pointer from the map
    /// entry.
    Flat(Arc<[V]>),
    /// More than [`CHUNK`], in at least two shared chunks, none empty.
    Chunked { chunks: Arc<[Arc<[V]>]>, len: usize },
}

impl<V: Clone> Clone for Subscribers<V> {
    fn clone(&self) -> Self {
        match self {
            Self::One(subscriber) => Self::One(subscriber.clone()),
            Self::Flat(list) => Self::Flat(Arc::clone(list)),
            Self::Chunked { chunks, len } => Self::Chunked {
                chunks: Arc::clone(chunks),
                len: *len,
            },
        }
    }
}

impl<V> std::fmt::Debug for Subscribers<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscribers")
            .field("len", &self.len())
            .field("slices", &self.slices().count())
            .finish()
    }
}

impl<V> Subscribers<V> {
    /// No subscribers.
    pub(crate) fn empty() -> Self {
        Self::Flat(Arc::from(Vec::new()))
    }

    fn len(&self) -> usize {
        match self {
            Self::One(_) => 1,
            Self::Flat(list) => list.len(),
            Self::Chunked { len, .. } => *len,
        }
    }

    /// True with no subscribers.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The subscribers held in place (one, or a flat list) and the
    /// chunks of a chunked one: one of the two is empty.
    fn parts(&self) -> (&[V], &[Arc<[V]>]) {
        match self {
            Self::One(subscriber) => (std::slice::from_ref(subscriber), &[]),
            Self::Flat(list) => (list, &[]),
            Self::Chunked { chunks, .. } => (&[], chunks),
        }
    }

    /// The chunks of a list that is not `One`, none empty: a flat list is
    /// one (or none).
    fn chunks(&self) -> &[Arc<[V]>] {
        match self {
            Self::One(_) => &[],
            Self::Flat(list) if list.is_empty() => &[],
            Self::Flat(list) => std::slice::from_ref(list),
            Self::Chunked { chunks, .. } => chunks,
        }
    }

    /// Every subscriber, in the order they were added (removals aside).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &V> {
        let (inline, chunks) = self.parts();
        inline
            .iter()
            .chain(chunks.iter().flat_map(|chunk| chunk.iter()))
    }

    /// Every subscriber, as the slices that hold them, in order: one for
    /// a lone subscriber or a flat list, one per chunk of a chunked one.
    pub(crate) fn slices(&self) -> impl Iterator<Item = &[V]> {
        let (inline, chunks) = self.parts();
        (!inline.is_empty())
            .then_some(inline)
            .into_iter()
            .chain(chunks.iter().map(|chunk| &chunk[..]))
    }

    /// The first subscriber, if any: where the delivery path will read
    /// first.
    pub(crate) fn first(&self) -> Option<&V> {
        let (inline, chunks) = self.parts();
        inline
            .first()
            .or_else(|| chunks.first().and_then(|chunk| chunk.first()))
    }

    #[cfg(test)]
    fn chunk_lens(&self) -> Vec<usize> {
        match self {
            Self::One(_) => vec![1],
            _ => self.chunks().iter().map(|chunk| chunk.len()).collect(),
        }
    }
}

impl<V: Clone + PartialEq> Subscribers<V> {
    /// One subscriber.
    pub(crate) fn one(subscriber: V) -> Self {
        Self::One(subscriber)
    }

    /// The chunks to rewrite: a `One` as a chunk of its own.
    fn chunk_vec(&self) -> Vec<Arc<[V]>> {
        match self {
            Self::One(subscriber) => vec![Arc::from(vec![subscriber.clone()])],
            _ => self.chunks().to_vec(),
        }
    }

    /// The list made of `chunks` (none empty, packed), holding `len`.
    fn from_chunks(mut chunks: Vec<Arc<[V]>>, len: usize) -> Self {
        match chunks.len() {
            0 => Self::empty(),
            1 if len == 1 => Self::One(chunks[0][0].clone()),
            1 => Self::Flat(chunks.pop().unwrap_or_else(|| Arc::from(Vec::new()))),
            _ => Self::Chunked {
                chunks: Arc::from(chunks),
                len,
            },
        }
    }

    /// True if `subscriber` is in the list.
    pub(crate) fn contains(&self, subscriber: &V) -> bool {
        self.iter().any(|s| s == subscriber)
    }

    /// The list with `subscriber` appended: the last chunk copied with it,
    /// or a chunk of its own when the last is full.
    pub(crate) fn with(&self, subscriber: V) -> Self {
        let mut chunks = self.chunk_vec();
        match chunks.last_mut() {
            Some(last) if last.len() < CHUNK => {
                let mut grown = Vec::with_capacity(last.len() + 1);
                grown.extend_from_slice(last);
                grown.push(subscriber);
                *last = Arc::from(grown);
            }
            _ => chunks.push(Arc::from(vec![subscriber])),
        }
        Self::from_chunks(chunks, self.len() + 1)
    }

    /// The list without `subscriber`, or `None` if it is not there: its
    /// chunk copied without it, merged with a neighbour (copied too) when
    /// the two fit in one, or gone when it held nothing else.
    pub(crate) fn without(&self, subscriber: &V) -> Option<Self> {
        let mut chunks = self.chunk_vec();
        let (at, place) = chunks
            .iter()
            .enumerate()
            .find_map(|(at, chunk)| Some((at, chunk.iter().position(|s| s == subscriber)?)))?;
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
        Some(Self::from_chunks(chunks, self.len() - 1))
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
        assert_eq!(lens.iter().sum::<usize>(), list.len());
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
        for (i, chunk) in list.chunks().iter().enumerate() {
            assert!(Arc::ptr_eq(chunk, &appended.chunks()[i]));
            if i != 1 {
                assert!(Arc::ptr_eq(chunk, &removed.chunks()[i]));
            }
        }
        // The old list is untouched by either.
        assert_eq!(listed(&list), (0..CHUNK as u32 * 3).collect::<Vec<_>>());
        assert_eq!(appended.len(), CHUNK * 3 + 1);
        assert_eq!(removed.len(), CHUNK * 3 - 1);
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

    /// `n` subscribers 0..n, in order.
    fn of(n: u32) -> Subscribers<u32> {
        (1..n).fold(Subscribers::one(0), |list, i| list.with(i))
    }

    #[test]
    fn a_lone_subscriber_is_held_inline_and_a_second_makes_a_list() {
        let one = Subscribers::one(7u32);
        assert!(matches!(one, Subscribers::One(7)));
        assert_eq!((one.len(), one.first()), (1, Some(&7)));
        let two = one.with(8);
        assert!(matches!(two, Subscribers::Flat(_)));
        assert_eq!(listed(&two), vec![7, 8]);
        assert!(matches!(two.without(&7), Some(Subscribers::One(8))));
        assert!(one.without(&8).is_none());
        let none = one.without(&7).expect("it is there");
        assert!(none.is_empty());
        assert_eq!(none.first(), None);
    }

    #[test]
    fn a_short_list_is_flat_and_a_long_one_chunked_both_ways() {
        let full = of(CHUNK as u32);
        assert!(matches!(full, Subscribers::Flat(_)));
        let over = full.with(1_000);
        assert!(matches!(over, Subscribers::Chunked { .. }));
        assert_eq!(over.chunk_lens(), vec![CHUNK, 1]);
        // Back to the length of one chunk: flat again, sharing the chunk.
        let back = over.without(&1_000).expect("it is there");
        let Subscribers::Flat(list) = &back else {
            panic!("{back:?} should be flat");
        };
        assert!(Arc::ptr_eq(list, &over.chunks()[0]));
        assert_eq!(listed(&back), (0..CHUNK as u32).collect::<Vec<_>>());
    }

    #[test]
    fn a_shrunk_chunk_merges_into_the_one_before_it_when_the_next_is_too_full() {
        let c = CHUNK as u32;
        let mut list = of(2 * c);
        // The second chunk down to 10: with the first (64) it does not fit.
        for i in c + 10..2 * c {
            list = list.without(&i).expect("it is there");
        }
        list = list.with(5_000);
        assert_eq!(list.chunk_lens(), vec![CHUNK, 11]);
        // Take 10 out of the first: 54 + 11 fit, and the first has no
        // chunk before it, so the second merges in behind it.
        for i in 0..10 {
            list = list.without(&i).expect("it is there");
        }
        assert_packed(&list);
        let mut expected: Vec<u32> = (10..c + 10).collect();
        expected.push(5_000);
        assert_eq!(listed(&list), expected);
        // Three chunks, the first down to 40; the middle one shrinks until
        // 40 + 25 = 65, and its next removal leaves 24: the last chunk is
        // too full for it, so it merges into the chunk before it, behind it.
        let mut list = of(3 * c);
        for i in 0..24 {
            list = list.without(&i).expect("it is there");
        }
        assert_eq!(list.chunk_lens(), vec![40, CHUNK, CHUNK]);
        for i in c..c + 39 {
            list = list.without(&i).expect("it is there");
        }
        assert_eq!(list.chunk_lens(), vec![40, 25, CHUNK]);
        list = list.without(&(c + 39)).expect("it is there");
        assert_eq!(list.chunk_lens(), vec![CHUNK, CHUNK]);
        let expected: Vec<u32> = (24..c).chain(c + 40..3 * c).collect();
        assert_eq!(listed(&list), expected);
    }

    #[test]
    fn a_chunk_of_one_emptied_between_two_full_ones_leaves_them_side_by_side() {
        let c = CHUNK as u32;
        let mut list = of(3 * c);
        // The middle chunk down to its last subscriber: with full chunks
        // on both sides it never fits in either.
        for i in c..2 * c - 1 {
            list = list.without(&i).expect("it is there");
        }
        assert_eq!(list.chunk_lens(), vec![CHUNK, 1, CHUNK]);
        let list = list.without(&(2 * c - 1)).expect("it is there");
        assert_eq!(list.chunk_lens(), vec![CHUNK, CHUNK]);
        let expected: Vec<u32> = (0..c).chain(2 * c..3 * c).collect();
        assert_eq!(listed(&list), expected);
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
