//! The routing table of one topic: which subscriptions a record key goes to.
//!
//! Read on the delivery path by every partition's tailer, once per record,
//! and written when a subscription comes or goes. Reads take no lock:
//! - literal subjects live in a hash map of herald's own with lock-free
//!   reads that can be asked into the cache ahead (see `literals`), each
//!   key holding an immutable list of subscribers that a write replaces
//!   (see `subscribers`: one held inline, up to 64 one flat slice, past
//!   that shared chunks of which a write copies one or two; keys of up to
//!   24 bytes held in the entry), so a reader sees the list before or
//!   after a change and never half of one;
//! - patterns live in a token trie published as an immutable snapshot
//!   (`arc-swap`); a write copies the path from the root to the changed
//!   node and swaps the root, leaving every other node shared.
//!
//! In front of the literal map sits a [`SubjectFilter`]: most keys no one
//! subscribes to are turned away from one word of it, without probing a
//! map far larger than the cache.
//!
//! Writers are serialised by one mutex per table, off the delivery path. A
//! literal subscribe or unsubscribe costs a scan of its own key's list
//! for the subscriber, a copy of one chunk of it (two when it merges
//! neighbours) and of its chunk pointers, and now and then a rebuild of the filter (linear in the
//! subjects); a pattern one costs the children maps along its path.
//!
//! A tailer reads through a [`TableReader`], taken once per chunk after it
//! has published how far it read: the reader holds the map's guard and
//! the snapshots for the whole batch instead of taking them per record.

use std::collections::HashMap;
use std::hash::BuildHasher as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::filter::SubjectFilter;
use crate::literals::{LiteralMap, MapReader, INLINE_SUBJECT};
use crate::pattern::Token;
use crate::selector::Selector;
use crate::subscribers::Subscribers;
use crate::tokens;

/// The subscriptions of one topic, by subject and by pattern. `V` names a
/// subscription (for example a connection and its subscription id); the
/// same `V` may be routed by several selectors and is then called once for
/// each that matches.
pub struct RoutingTable<V> {
    literals: LiteralMap<V>,
    /// Every subject in `literals` is in it (and some that left since the
    /// last rebuild); replaced whole when resized.
    filter: ArcSwap<SubjectFilter>,
    /// The hash of a subject for both the filter and `literals`, seeded
    /// per process: record keys come from clients, so a fixed hash would
    /// let them aim for one slot.
    hasher: foldhash::fast::RandomState,
    patterns: ArcSwap<Node<V>>,
    writer: Mutex<Writer>,
    literal_routes: AtomicUsize,
    pattern_routes: AtomicUsize,
    /// Bytes of the literal subjects held as keys outside their entries.
    literal_key_bytes: AtomicUsize,
    /// Bytes of the tokens of the patterns held (each route counted).
    pattern_bytes: AtomicUsize,
}

/// What the writers keep under their mutex.
struct Writer {
    /// Subjects whose bits are in the current filter, those removed since
    /// its last rebuild included.
    in_filter: usize,
}

/// How many routes a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableSize {
    /// Distinct literal subjects with at least one subscriber.
    pub subjects: usize,
    /// (literal subject, subscriber) routes.
    pub literal_routes: usize,
    /// (pattern, subscriber) routes.
    pub pattern_routes: usize,
    /// Estimated heap bytes: the literal subjects' map (its slot array and
    /// an allocation per subject), the subject bytes held outside their
    /// entries (past 24) and the pattern bytes, a subscriber entry per
    /// route, and a fixed cost per trie node.
    pub approximate_bytes: usize,
}

/// Estimated bytes of one pattern route beyond its tokens (its share of a
/// trie node and its children map).
const PATTERN_ROUTE_BYTES: usize = 160;

/// One node of the pattern trie: the patterns that reach it, by what comes
/// next.
struct Node<V> {
    /// Children by a literal token.
    literal: HashMap<Box<[u8]>, Arc<Node<V>>>,
    /// The child for `*`.
    one: Option<Arc<Node<V>>>,
    /// Subscribers of patterns that end here with `>`.
    rest: Subscribers<V>,
    /// Subscribers of patterns that end exactly here.
    end: Subscribers<V>,
}

impl<V> Node<V> {
    fn empty() -> Self {
        Self {
            literal: HashMap::new(),
            one: None,
            rest: Subscribers::empty(),
            end: Subscribers::empty(),
        }
    }

    fn is_empty(&self) -> bool {
        self.literal.is_empty() && self.one.is_none() && self.rest.is_empty() && self.end.is_empty()
    }
}

impl<V: Clone> Clone for Node<V> {
    fn clone(&self) -> Self {
        Self {
            literal: self.literal.clone(),
            one: self.one.clone(),
            rest: self.rest.clone(),
            end: self.end.clone(),
        }
    }
}

impl<V: Clone + PartialEq + Send + Sync + 'static> Default for RoutingTable<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone + PartialEq + Send + Sync + 'static> RoutingTable<V> {
    /// An empty table.
    pub fn new() -> Self {
        Self {
            literals: LiteralMap::new(),
            filter: ArcSwap::from_pointee(SubjectFilter::with_capacity(0)),
            hasher: foldhash::fast::RandomState::default(),
            patterns: ArcSwap::from_pointee(Node::empty()),
            writer: Mutex::new(Writer { in_filter: 0 }),
            literal_routes: AtomicUsize::new(0),
            pattern_routes: AtomicUsize::new(0),
            literal_key_bytes: AtomicUsize::new(0),
            pattern_bytes: AtomicUsize::new(0),
        }
    }

    /// Routes the records `selector` names to `subscriber`. False if that
    /// route was already there (nothing changes).
    pub fn insert(&self, selector: &Selector, subscriber: V) -> bool {
        let mut writer = self.writer.lock();
        match selector {
            Selector::Literal(subject) => {
                let hash = self.hash(subject);
                let list = match self.literals.reader().get(hash, subject) {
                    Some(list) if list.contains(&subscriber) => return false,
                    Some(list) => list.with(subscriber),
                    None => {
                        self.literal_key_bytes
                            .fetch_add(heap_bytes(subject), Ordering::Relaxed);
                        // Into the filter before the map: a reader that
                        // finds the route must not be turned away first.
                        let filter = self.filter.load();
                        if writer.in_filter < filter.capacity() {
                            filter.insert(hash);
                            writer.in_filter += 1;
                        } else {
                            writer.in_filter = self.rebuild_filter(Some(hash));
                        }
                        Subscribers::one(subscriber)
                    }
                };
                self.literals.insert(hash, subject, list);
                self.literal_routes.fetch_add(1, Ordering::Relaxed);
                true
            }
            Selector::Pattern(pattern) => {
                let root = self.patterns.load_full();
                let Some(root) = inserted(&root, pattern.tokens(), subscriber) else {
                    return false;
                };
                self.patterns.store(root);
                self.pattern_routes.fetch_add(1, Ordering::Release);
                self.pattern_bytes
                    .fetch_add(pattern_len(pattern), Ordering::Relaxed);
                true
            }
        }
    }

    /// Stops routing the records `selector` names to `subscriber`. False if
    /// there was no such route.
    pub fn remove(&self, selector: &Selector, subscriber: &V) -> bool {
        let mut writer = self.writer.lock();
        match selector {
            Selector::Literal(subject) => {
                let hash = self.hash(subject);
                let Some(rest) = self
                    .literals
                    .reader()
                    .get(hash, subject)
                    .and_then(|list| list.without(subscriber))
                else {
                    return false;
                };
                if rest.is_empty() {
                    self.literals.remove(hash, subject);
                    self.literal_key_bytes
                        .fetch_sub(heap_bytes(subject), Ordering::Relaxed);
                    // Left-over bits only let keys through to the map; once
                    // half the filter's sizing is left-overs, start afresh.
                    let stale = writer.in_filter.saturating_sub(self.literals.len());
                    if stale > self.filter.load().capacity() / 2 {
                        writer.in_filter = self.rebuild_filter(None);
                    }
                } else {
                    self.literals.insert(hash, subject, rest);
                }
                self.literal_routes.fetch_sub(1, Ordering::Relaxed);
                true
            }
            Selector::Pattern(pattern) => {
                let root = self.patterns.load_full();
                let Some(root) = removed(&root, pattern.tokens(), subscriber) else {
                    return false;
                };
                self.patterns
                    .store(root.unwrap_or_else(|| Arc::new(Node::empty())));
                self.pattern_routes.fetch_sub(1, Ordering::Relaxed);
                self.pattern_bytes
                    .fetch_sub(pattern_len(pattern), Ordering::Relaxed);
                true
            }
        }
    }

    /// Calls `deliver` with every subscriber a record with `key` goes to:
    /// those of the literal subject first, then those of each matching
    /// pattern. Takes no lock and allocates nothing. To look up many keys,
    /// take a [`Self::reader`] once instead.
    pub fn for_each_match(&self, key: &[u8], deliver: impl FnMut(&V)) {
        self.reader().for_each_match(key, deliver);
    }

    /// A reader of the table as it is now: a route added or removed after
    /// this call may or may not be seen (what the tailer needs is every
    /// route added before it published how far it read). Meant to be held
    /// for one batch of records, and not across a write by the same
    /// thread: it keeps memory that writers free from being reclaimed
    /// while it lives.
    pub fn reader(&self) -> TableReader<'_, V> {
        // Most tables hold no pattern: skip the snapshot's load then. A
        // pattern inserted concurrently counts from after its store, so a
        // reader that misses it here raced its insertion anyway.
        let patterns = (self.pattern_routes.load(Ordering::Acquire) != 0)
            .then(|| self.patterns.load())
            .filter(|root| !root.is_empty());
        TableReader {
            table: self,
            literals: self.literals.reader(),
            patterns,
        }
    }

    /// Replaces the filter with one sized for twice the subjects now in
    /// `literals` (and `extra`, the hash of a subject about to be added),
    /// holding all of them. Returns how many it holds. Called with the
    /// writer mutex.
    fn rebuild_filter(&self, extra: Option<u64>) -> usize {
        let subjects = self.literals.len() + usize::from(extra.is_some());
        let filter = SubjectFilter::with_capacity(subjects.saturating_mul(2));
        let mut held = 0;
        self.literals.for_each_key(|key| {
            filter.insert(self.hash(key));
            held += 1;
        });
        if let Some(hash) = extra {
            filter.insert(hash);
            held += 1;
        }
        self.filter.store(Arc::new(filter));
        held
    }

    /// How many routes the table holds now.
    pub fn size(&self) -> TableSize {
        let subjects = self.literals.len();
        let literal_routes = self.literal_routes.load(Ordering::Relaxed);
        let pattern_routes = self.pattern_routes.load(Ordering::Relaxed);
        let approximate_bytes = self.filter.load().bytes()
            + self.literals.approximate_bytes()
            + self.literal_key_bytes.load(Ordering::Relaxed)
            + (literal_routes + pattern_routes) * std::mem::size_of::<V>()
            + pattern_routes * PATTERN_ROUTE_BYTES
            + self.pattern_bytes.load(Ordering::Relaxed);
        TableSize {
            subjects,
            literal_routes,
            pattern_routes,
            approximate_bytes,
        }
    }
}

impl<V> RoutingTable<V> {
    /// The hash of `subject` in both the filter and the map.
    fn hash(&self, subject: &[u8]) -> u64 {
        self.hasher.hash_one(subject)
    }
}

/// A table read for one batch of records: see [`RoutingTable::reader`].
pub struct TableReader<'t, V> {
    table: &'t RoutingTable<V>,
    literals: MapReader<'t, V>,
    patterns: Option<arc_swap::Guard<Arc<Node<V>>>>,
}

impl<V> TableReader<'_, V> {
    /// Calls `deliver` with every subscriber a record with `key` goes to:
    /// those of the literal subject first, then those of each matching
    /// pattern. Takes no lock and allocates nothing.
    #[inline]
    pub fn for_each_match(&self, key: &[u8], mut deliver: impl FnMut(&V)) {
        // The filter is loaded per key, not per reader: a rebuild swaps it,
        // and a subject added with the rebuild is only in the new one.
        let hash = self.table.hash(key);
        if self.table.filter.load().may_contain(hash) {
            if let Some(list) = self.literals.get(hash, key) {
                list.iter().for_each(&mut deliver);
            }
        }
        if let Some(root) = &self.patterns {
            walk(root, tokens(key), &mut deliver);
        }
    }

    /// Appends to `out` every subscriber the records with `keys` go to, as
    /// (index of the key in `keys`, slice of subscribers), ascending by
    /// index: for each key those of its literal subject first (a slice per
    /// chunk of its list), then those of each matching pattern, in the
    /// order [`Self::for_each_match`] calls them. Slices, not one entry
    /// per subscriber: a subject with 10,000 subscribers adds about 160.
    ///
    /// Why not one key at a time: with many subjects each lookup misses
    /// the cache several times over (the filter word, the map's slot, its
    /// entry), every miss waiting for the one before. Here the keys go in
    /// groups: the filter words of a group are asked for first, then the
    /// map is asked about those that pass, back to back, then the lists
    /// found, so that the misses of different keys overlap. The
    /// subscribers' own data is the caller's to ask for (see
    /// [`crate::prefetch`]) before it uses them.
    ///
    /// The filter is loaded once per group rather than per key: what a
    /// reader must see is a subject added before it published how far it
    /// read, and every load here comes after that.
    pub fn matches_of<'r>(&'r self, keys: &[&[u8]], out: &mut Vec<(usize, &'r [V])>) {
        for (group, group_keys) in keys.chunks(LOOKUP_GROUP).enumerate() {
            let base = group * LOOKUP_GROUP;
            let filter = self.table.filter.load();
            let mut hashes = [0u64; LOOKUP_GROUP];
            for (hash, key) in hashes.iter_mut().zip(group_keys) {
                *hash = self.table.hash(key);
                filter.prefetch(*hash);
            }
            // The keys that pass.
            let mut passed = [0u8; LOOKUP_GROUP];
            let mut passing = 0;
            for (i, hash) in hashes[..group_keys.len()].iter().enumerate() {
                passed[passing] = i as u8;
                passing += usize::from(filter.may_contain(*hash));
            }
            // Each stage's misses overlap those of the other keys: the
            // slots, then the entries they point to, then the lookups.
            for &i in &passed[..passing] {
                self.literals.prefetch_slot(hashes[usize::from(i)]);
            }
            for &i in &passed[..passing] {
                self.literals.prefetch_entry(hashes[usize::from(i)]);
            }
            let mut lists: [Option<&'r Subscribers<V>>; LOOKUP_GROUP] = [None; LOOKUP_GROUP];
            for &i in &passed[..passing] {
                let i = usize::from(i);
                lists[i] = self.literals.get(hashes[i], group_keys[i]);
            }
            for first in lists.iter().flatten().filter_map(|list| list.first()) {
                crate::prefetch(first);
            }
            for (i, (list, key)) in lists.iter().zip(group_keys).enumerate() {
                if let Some(list) = list {
                    out.extend(list.slices().map(|slice| (base + i, slice)));
                }
                if let Some(root) = &self.patterns {
                    walk(root, tokens(key), &mut |subscriber| {
                        out.push((base + i, std::slice::from_ref(subscriber)))
                    });
                }
            }
        }
    }
}

/// Keys [`TableReader::matches_of`] looks up together: with a tenth of
/// the keys subscribed, enough that a dozen lookups go back to back; few
/// enough that the first key's lines are still in the cache when its turn
/// comes. At most 256 (indices within a group are bytes).
const LOOKUP_GROUP: usize = 128;

/// Bytes a literal subject takes outside its map entry.
fn heap_bytes(subject: &[u8]) -> usize {
    if subject.len() > INLINE_SUBJECT {
        subject.len()
    } else {
        0
    }
}

/// Bytes of a pattern's tokens.
fn pattern_len(pattern: &crate::Pattern) -> usize {
    pattern
        .tokens()
        .iter()
        .map(|token| match token {
            Token::Literal(bytes) => bytes.len() + 1,
            _ => 2,
        })
        .sum()
}

/// A copy of the path from `node` along `rest` with `subscriber` added at
/// its end, or `None` if it was there already.
fn inserted<V: Clone + PartialEq>(
    node: &Node<V>,
    rest: &[Token],
    subscriber: V,
) -> Option<Arc<Node<V>>> {
    let mut next = node.clone();
    match rest.split_first() {
        None => {
            if next.end.contains(&subscriber) {
                return None;
            }
            next.end = next.end.with(subscriber);
        }
        // The parser only lets `>` be last.
        Some((Token::Rest, _)) => {
            if next.rest.contains(&subscriber) {
                return None;
            }
            next.rest = next.rest.with(subscriber);
        }
        Some((Token::One, tail)) => {
            let child = next.one.take();
            let child = child.as_deref().map_or_else(Node::empty, Node::clone);
            next.one = Some(inserted(&child, tail, subscriber)?);
        }
        Some((Token::Literal(token), tail)) => {
            let child = next
                .literal
                .get(token)
                .map_or_else(Node::empty, |c| Node::clone(c));
            let child = inserted(&child, tail, subscriber)?;
            next.literal.insert(token.clone(), child);
        }
    }
    Some(Arc::new(next))
}

/// A copy of the path from `node` along `rest` with `subscriber` removed at
/// its end (`Some(None)` when the node is left empty and can go), or `None`
/// if there was no such route.
fn removed<V: Clone + PartialEq>(
    node: &Node<V>,
    rest: &[Token],
    subscriber: &V,
) -> Option<Option<Arc<Node<V>>>> {
    let mut next = node.clone();
    match rest.split_first() {
        None => next.end = next.end.without(subscriber)?,
        Some((Token::Rest, _)) => next.rest = next.rest.without(subscriber)?,
        Some((Token::One, tail)) => {
            let child = next.one.as_deref()?;
            next.one = removed(child, tail, subscriber)?;
        }
        Some((Token::Literal(token), tail)) => {
            let child = next.literal.get(token)?;
            match removed(child, tail, subscriber)? {
                Some(child) => next.literal.insert(token.clone(), child),
                None => next.literal.remove(token),
            };
        }
    }
    Some((!next.is_empty()).then(|| Arc::new(next)))
}

/// Delivers the subscribers of every pattern under `node` that the key
/// tokens left (`key`) complete. Depth is bounded by the longest pattern.
fn walk<'n, 'k, V>(
    node: &'n Node<V>,
    mut key: impl Iterator<Item = &'k [u8]> + Clone,
    deliver: &mut impl FnMut(&'n V),
) {
    let Some(token) = key.next() else {
        node.end.iter().for_each(&mut *deliver);
        return;
    };
    node.rest.iter().for_each(&mut *deliver);
    if let Some(child) = node.literal.get(token) {
        walk(child, key.clone(), deliver);
    }
    if let Some(child) = &node.one {
        walk(child, key, deliver);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(text: &str) -> Selector {
        Selector::parse(text.as_bytes()).expect("valid selector")
    }

    fn routed(table: &RoutingTable<u32>, key: &str) -> Vec<u32> {
        let mut out = Vec::new();
        table.for_each_match(key.as_bytes(), |&v| out.push(v));
        out.sort_unstable();
        out
    }

    #[test]
    fn the_filter_never_hides_a_subject_as_it_grows_and_is_rebuilt() {
        let table = RoutingTable::new();
        let initial = table.filter.load().capacity();
        // Past the first filter's sizing twice over: it is rebuilt larger,
        // and every subject added before, during and after still routes.
        let subjects = (initial * 3) as u32;
        for i in 0..subjects {
            assert!(table.insert(&sel(&format!("s.{i}")), i));
        }
        assert!(table.filter.load().capacity() >= subjects as usize);
        assert!((0..subjects).all(|i| routed(&table, &format!("s.{i}")) == vec![i]));
        // Removing most of them leaves stale bits until a rebuild drops
        // them; the remaining subjects route throughout, the removed ones
        // never again.
        for i in 0..subjects {
            if i % 8 != 0 {
                assert!(table.remove(&sel(&format!("s.{i}")), &i));
            }
        }
        let writer = table.writer.lock().in_filter;
        assert!(
            writer < subjects as usize,
            "the filter was rebuilt without the removed subjects ({writer} left)"
        );
        for i in 0..subjects {
            let expected = if i % 8 == 0 { vec![i] } else { vec![] };
            assert_eq!(routed(&table, &format!("s.{i}")), expected);
        }
        // Re-adding a removed subject routes it again.
        assert!(table.insert(&sel("s.1"), 1));
        assert_eq!(routed(&table, "s.1"), vec![1]);
    }

    #[test]
    fn literals_and_patterns_route_to_their_subscribers_only() {
        let table = RoutingTable::new();
        assert!(table.insert(&sel("orders.eu.paid"), 1));
        assert!(table.insert(&sel("orders.*.paid"), 2));
        assert!(table.insert(&sel("orders.>"), 3));
        assert!(table.insert(&sel("orders.eu.paid"), 4));
        assert!(table.insert(&sel("*"), 5));
        assert_eq!(routed(&table, "orders.eu.paid"), vec![1, 2, 3, 4]);
        assert_eq!(routed(&table, "orders.us.paid"), vec![2, 3]);
        assert_eq!(routed(&table, "orders"), vec![5]);
        assert_eq!(routed(&table, "orders.eu.paid.late"), vec![3]);
        assert_eq!(routed(&table, "other"), vec![5]);
        assert_eq!(routed(&table, "other.x"), Vec::<u32>::new());
        let size = table.size();
        assert_eq!(
            (size.subjects, size.literal_routes, size.pattern_routes),
            (1, 2, 3)
        );
        assert!(size.approximate_bytes > 0);
    }

    #[test]
    fn a_route_is_added_once_and_removed_once() {
        let table = RoutingTable::new();
        assert!(table.insert(&sel("a.*"), 7));
        assert!(!table.insert(&sel("a.*"), 7));
        assert!(table.insert(&sel("k"), 7));
        assert!(!table.insert(&sel("k"), 7));
        assert!(table.remove(&sel("a.*"), &7));
        assert!(!table.remove(&sel("a.*"), &7));
        assert!(!table.remove(&sel("a.b.*"), &7));
        assert!(table.remove(&sel("k"), &7));
        assert!(!table.remove(&sel("k"), &7));
        let size = table.size();
        assert_eq!(
            (size.subjects, size.literal_routes, size.pattern_routes),
            (0, 0, 0)
        );
        // What is left is the empty filter and an empty map.
        assert_eq!(
            size.approximate_bytes,
            table.filter.load().bytes() + LiteralMap::<u32>::new().approximate_bytes()
        );
        assert_eq!(routed(&table, "a.x"), Vec::<u32>::new());
        // The trie is pruned back to an empty root.
        assert!(table.patterns.load().is_empty());
    }

    proptest::proptest! {
        /// Looking keys up together finds what looking them up one at a
        /// time does, in the same order, whatever mix of literal subjects,
        /// patterns, repeats and absent keys, across lookup groups.
        #[test]
        fn keys_looked_up_together_match_one_at_a_time(
            routes in proptest::collection::vec((0u8..12, 0u8..4, 0u32..6), 0..60),
            keys in proptest::collection::vec((0u8..12, 0u8..4), 0..3 * LOOKUP_GROUP),
        ) {
            let table = RoutingTable::new();
            for (a, b, subscriber) in routes {
                let selector = match a {
                    10 => format!("*.{b}"),
                    11 => format!("s{b}.>"),
                    _ => format!("s{a}.{b}"),
                };
                table.insert(&sel(&selector), subscriber);
            }
            let keys: Vec<Vec<u8>> = keys
                .iter()
                .map(|(a, b)| format!("s{a}.{b}").into_bytes())
                .collect();
            let slices: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let reader = table.reader();
            let mut together = Vec::new();
            reader.matches_of(&slices, &mut together);
            let together: Vec<(usize, u32)> = together
                .into_iter()
                .flat_map(|(i, slice)| slice.iter().map(move |&v| (i, v)))
                .collect();
            let mut alone = Vec::new();
            for (i, key) in slices.iter().enumerate() {
                reader.for_each_match(key, |&v| alone.push((i, v)));
            }
            proptest::prop_assert_eq!(together, alone);
        }
    }

    #[test]
    fn removing_one_pattern_leaves_its_neighbours() {
        let table = RoutingTable::new();
        table.insert(&sel("a.b.>"), 1);
        table.insert(&sel("a.*.c"), 2);
        table.insert(&sel("a.b.c"), 3);
        table.remove(&sel("a.b.>"), &1);
        assert_eq!(routed(&table, "a.b.c"), vec![2, 3]);
        assert_eq!(routed(&table, "a.b.d"), Vec::<u32>::new());
    }
}
