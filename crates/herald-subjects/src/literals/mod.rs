//! The literal subjects of one routing table: a hash map from subject to
//! subscriber list, read without a lock by every tailer and written by one
//! writer at a time.
//!
//! Why not a general concurrent map: with a million subjects a lookup is a
//! chain of misses to memory (the slot, then the entry it points to), and
//! the delivery path looks up a whole chunk of records' keys at once. A
//! map that only answers `get` makes each of them wait for the one before.
//! This one lets the caller ask for the lines of many lookups ahead,
//! stage by stage ([`MapReader::prefetch_slot`], then
//! [`MapReader::prefetch_entry`], then [`MapReader::get`]), so that the
//! misses of different keys overlap. It is also no more than the table
//! needs: one writer at a time, keys hashed once by the caller.
//!
//! Layout: open addressing with linear probing over slots of 16 bytes, a
//! tag (the key's hash with its low bit set, so that zero means empty)
//! beside a pointer to the entry (the key and its subscribers, one
//! allocation). Four slots share a cache line, so a probe rarely reads a
//! second one, and a tag that matches is almost always the key.
//!
//! Concurrency: a reader enters a `seize` guard, loads the current slot
//! array and probes it; writers are serialised by a mutex. An entry is
//! never changed in place: a writer stores a new one in the slot and
//! retires the old, which the guard keeps alive for readers that may hold
//! it. A removed key leaves its tag with a null pointer (a tombstone), so
//! probes for other keys still pass it; a slot never becomes empty again
//! until the array is rebuilt. Growing, shrinking or clearing tombstones
//! builds a new array holding the same entry pointers, stores it, and
//! retires the old array (not its entries, which the new one holds).

use std::marker::PhantomData;

use parking_lot::Mutex;

use crate::subscribers::Subscribers;
use reclaim::{Collector, Guard};
use sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

mod reclaim;
mod sync;

/// A literal subject as an entry holds it: up to [`INLINE_SUBJECT`] bytes
/// in the entry itself, so that comparing a record's key with it reads no
/// allocation of its own; longer ones on the heap.
type SubjectKey = smallvec::SmallVec<[u8; INLINE_SUBJECT]>;
/// Bytes of a subject held in its entry.
pub(crate) const INLINE_SUBJECT: usize = 24;

/// The fewest slots an array has.
const MIN_SLOTS: usize = 16;

/// One subject and its subscribers, immutable once stored.
struct Entry<V> {
    key: SubjectKey,
    subscribers: Subscribers<V>,
}

/// A tag and the entry it names. Empty: tag zero. Tombstone: a tag with a
/// null entry. Written in that order (entry, then tag) into an empty
/// slot, so a reader that sees the tag sees the entry.
#[repr(C, align(16))]
struct Slot<V> {
    tag: AtomicU64,
    entry: AtomicPtr<Entry<V>>,
}

/// A slot array: a power of two of slots.
struct Slots<V> {
    slots: Box<[Slot<V>]>,
    /// `64 - log2(slots.len())`: a tag's top bits pick its home slot.
    shift: u32,
}

impl<V> Slots<V> {
    fn with_len(len: usize) -> Self {
        debug_assert!(len.is_power_of_two() && len >= MIN_SLOTS);
        Self {
            slots: (0..len)
                .map(|_| Slot {
                    tag: AtomicU64::new(0),
                    entry: AtomicPtr::new(std::ptr::null_mut()),
                })
                .collect(),
            shift: 64 - len.trailing_zeros(),
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Where the probe for `tag` starts.
    fn home(&self, tag: u64) -> usize {
        (tag >> self.shift) as usize
    }

    /// The slots from `tag`'s home on, each once.
    fn probe(&self, tag: u64) -> impl Iterator<Item = &Slot<V>> {
        let home = self.home(tag);
        let mask = self.mask();
        (0..self.slots.len()).map(move |step| &self.slots[(home + step) & mask])
    }
}

/// The tag a key with `hash` is stored under: never zero.
fn tag_of(hash: u64) -> u64 {
    hash | 1
}

/// Where a key's probe ended.
enum Probe<'s, V> {
    /// At the key's slot, holding `entry`.
    Found(&'s Slot<V>, *mut Entry<V>),
    /// At an empty slot: the key is not held. `free` is the first
    /// tombstone the probe passed, where it may be added.
    Absent { free: Option<&'s Slot<V>> },
}

/// Probes `slots` for `key` (tagged `tag`), loading entry pointers
/// through `load` (a reader's protected load, or a writer's plain one).
fn find<'s, V>(
    slots: &'s Slots<V>,
    tag: u64,
    key: &[u8],
    load: impl Fn(&AtomicPtr<Entry<V>>) -> *mut Entry<V>,
) -> Probe<'s, V> {
    let mut free = None;
    for slot in slots.probe(tag) {
        let found = slot.tag.load(Ordering::SeqCst);
        if found == 0 {
            break;
        }
        let entry = load(&slot.entry);
        // SAFETY: the caller's `load` keeps what it returns alive (a
        // reader's guard, or a writer's exclusion of other writers).
        match unsafe { entry.as_ref() } {
            None => {
                free.get_or_insert(slot);
            }
            Some(held) if found == tag && held.key[..] == *key => {
                return Probe::Found(slot, entry);
            }
            Some(_) => {}
        }
    }
    Probe::Absent { free }
}

/// The map: see the module's documentation.
pub(crate) struct LiteralMap<V> {
    /// The current slot array, never null.
    slots: AtomicPtr<Slots<V>>,
    /// Keys held (entries with a non-null pointer).
    len: AtomicUsize,
    /// Serialises writers; holds how many slots are not empty (keys and
    /// tombstones), which decides when the array is rebuilt.
    writer: Mutex<usize>,
    /// Declared last, dropped last: reclaims what was retired after the
    /// map's own drop has freed the entries it still holds.
    collector: Collector,
}

// SAFETY: the map owns its entries (through raw pointers) and hands out
// only shared references to their subscribers, from any thread; dropping
// a retired entry may happen on any thread.
unsafe impl<V: Send + Sync> Send for LiteralMap<V> {}
// SAFETY: as above; every shared access goes through atomics, and writes
// are serialised by `writer`.
unsafe impl<V: Send + Sync> Sync for LiteralMap<V> {}

impl<V> LiteralMap<V> {
    /// A map holding no subject, with the smallest slot array.
    pub(crate) fn new() -> Self {
        Self {
            slots: AtomicPtr::new(Box::into_raw(Box::new(Slots::with_len(MIN_SLOTS)))),
            len: AtomicUsize::new(0),
            writer: Mutex::new(0),
            collector: Collector::new(),
        }
    }

    /// How many subjects it holds.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Slots of the current array.
    fn slot_count(&self) -> usize {
        self.reader().slots().slots.len()
    }

    /// Estimated heap bytes: the slot array and each entry's allocation
    /// (its key up to [`INLINE_SUBJECT`] bytes and its list's handle, a
    /// lone subscriber in it) with the allocator's header. Not counted:
    /// longer keys and lists, and what is retired but not yet freed.
    pub(crate) fn approximate_bytes(&self) -> usize {
        /// What the allocator adds to an allocation.
        const ALLOCATION_HEADER: usize = 16;
        self.slot_count() * std::mem::size_of::<Slot<V>>()
            + self.len() * (std::mem::size_of::<Entry<V>>() + ALLOCATION_HEADER)
    }

    /// A reader of the map as it is now. Writes after this call may or
    /// may not be seen: a rebuild leaves it probing the array it started
    /// on, which later writes no longer touch. It keeps what writers
    /// retire from being freed while it lives: hold it for one batch of
    /// lookups, not longer, and not across a write by the same thread.
    pub(crate) fn reader(&self) -> MapReader<'_, V> {
        let guard = reclaim::enter(&self.collector);
        let slots = reclaim::protect(&guard, &self.slots);
        MapReader {
            guard,
            slots,
            _map: PhantomData,
        }
    }

    /// Calls `f` with every subject held. Takes the writer lock: for
    /// writers' own upkeep (rebuilding a filter), not the delivery path.
    pub(crate) fn for_each_key(&self, mut f: impl FnMut(&[u8])) {
        let _writer = self.writer.lock();
        // SAFETY: writers are excluded, and only writers retire arrays
        // and entries, so what the current array points to stays alive.
        let slots = unsafe { &*self.slots.load(Ordering::SeqCst) };
        for slot in slots.slots.iter() {
            // SAFETY: as above.
            if let Some(entry) = unsafe { slot.entry.load(Ordering::SeqCst).as_ref() } {
                f(&entry.key);
            }
        }
    }
}

/// A writer's load of an entry pointer: writers are serialised and only
/// writers retire, so what it returns stays alive for the write.
fn plain<V>(entry: &AtomicPtr<Entry<V>>) -> *mut Entry<V> {
    entry.load(Ordering::SeqCst)
}

impl<V: Send + Sync + 'static> LiteralMap<V> {
    /// Stores `subscribers` as the list of `key` (hashed to `hash`),
    /// replacing any list it had. Readers see the old list or the new one.
    pub(crate) fn insert(&self, hash: u64, key: &[u8], subscribers: Subscribers<V>) {
        let mut used = self.writer.lock();
        // What this write retires is freed only after the guard drops.
        let guard = reclaim::enter(&self.collector);
        let tag = tag_of(hash);
        let entry = Box::into_raw(Box::new(Entry {
            key: SubjectKey::from_slice(key),
            subscribers,
        }));
        // SAFETY: writers are excluded (the lock), and only writers retire
        // arrays and entries.
        let slots = unsafe { &*self.slots.load(Ordering::SeqCst) };
        let free = match find(slots, tag, key, plain) {
            Probe::Found(slot, old) => {
                slot.entry.store(entry, Ordering::SeqCst);
                // SAFETY: no longer reachable from the array; readers that
                // loaded it are in guards entered before this retirement.
                unsafe { reclaim::retire(&guard, old) };
                return;
            }
            Probe::Absent { free } => free,
        };
        // A new key. Into a tombstone on its path if there is one (no
        // slot used up), else into the empty slot that ended the probe,
        // after rebuilding first if that would fill more than half.
        self.len.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = free {
            slot.entry.store(entry, Ordering::SeqCst);
            slot.tag.store(tag, Ordering::SeqCst);
            return;
        }
        let slots = if (*used + 1) * 2 > slots.slots.len() {
            let (rebuilt, in_use) = self.rebuild(&guard, self.len());
            *used = in_use;
            rebuilt
        } else {
            slots
        };
        place(slots, tag, entry);
        *used += 1;
    }

    /// Removes `key` (hashed to `hash`). False if it was not there.
    pub(crate) fn remove(&self, hash: u64, key: &[u8]) -> bool {
        let mut used = self.writer.lock();
        let guard = reclaim::enter(&self.collector);
        // SAFETY: writers are excluded, and only writers retire.
        let slots = unsafe { &*self.slots.load(Ordering::SeqCst) };
        let Probe::Found(slot, old) = find(slots, tag_of(hash), key, plain) else {
            return false;
        };
        slot.entry.store(std::ptr::null_mut(), Ordering::SeqCst);
        // SAFETY: no longer reachable from the array; see insert.
        unsafe { reclaim::retire(&guard, old) };
        let len = self.len.fetch_sub(1, Ordering::Relaxed) - 1;
        // Shrink once fifteen sixteenths of the array are free, so that a
        // table emptied by a reconnection storm gives its memory back.
        if slots.slots.len() > MIN_SLOTS && len * 16 < slots.slots.len() {
            *used = self.rebuild(&guard, len).1;
        }
        true
    }

    /// Builds an array sized for `len` keys (a quarter full) holding the
    /// entries of the current one, makes it current and retires the old
    /// one through `guard` (freed after the guard drops, so references
    /// into it held by the caller stay valid). Returns the new array and
    /// the slots used in it. Called with the writer lock.
    fn rebuild<'g>(&self, guard: &'g Guard<'_>, len: usize) -> (&'g Slots<V>, usize) {
        // SAFETY: writers are excluded, and only writers retire.
        let old = unsafe { &*self.slots.load(Ordering::SeqCst) };
        let size = (len.max(1) * 4).next_power_of_two().max(MIN_SLOTS);
        let new = Slots::with_len(size);
        let mut used = 0;
        for slot in old.slots.iter() {
            let entry = slot.entry.load(Ordering::SeqCst);
            if !entry.is_null() {
                place(&new, slot.tag.load(Ordering::SeqCst), entry);
                used += 1;
            }
        }
        let new = Box::into_raw(Box::new(new));
        let old = self.slots.swap(new, Ordering::SeqCst);
        // SAFETY: unreachable for readers that enter from now on; those in
        // guards already may still probe it, and seize keeps it alive for
        // them. Its entries are not freed with it (slots hold plain
        // pointers): the new array holds them.
        unsafe { reclaim::retire(guard, old) };
        // SAFETY: current now, and only a later write (excluded while the
        // caller holds the lock) could retire it.
        (unsafe { &*new }, used)
    }
}

/// Puts `entry` under `tag` into the first empty slot of its probe.
/// There is one: arrays are never more than half full.
fn place<V>(slots: &Slots<V>, tag: u64, entry: *mut Entry<V>) {
    let empty = slots
        .probe(tag)
        .find(|slot| slot.tag.load(Ordering::SeqCst) == 0);
    debug_assert!(empty.is_some(), "a slot array more than half full");
    if let Some(slot) = empty {
        slot.entry.store(entry, Ordering::SeqCst);
        slot.tag.store(tag, Ordering::SeqCst);
    }
}

impl<V> Drop for LiteralMap<V> {
    fn drop(&mut self) {
        let slots = self.slots.load(Ordering::Relaxed);
        // SAFETY: `&mut self`: no reader or writer is left. The current
        // array and the entries it points to are owned here; everything
        // retired is the collector's, reclaimed when it drops next.
        unsafe {
            let slots = Box::from_raw(slots);
            for slot in slots.slots.iter() {
                let entry = slot.entry.load(Ordering::Relaxed);
                if !entry.is_null() {
                    drop(Box::from_raw(entry));
                }
            }
        }
    }
}

/// A map read for one batch of lookups: see [`LiteralMap::reader`].
pub(crate) struct MapReader<'m, V> {
    guard: Guard<'m>,
    slots: *mut Slots<V>,
    _map: PhantomData<&'m LiteralMap<V>>,
}

impl<V> MapReader<'_, V> {
    fn slots(&self) -> &Slots<V> {
        // SAFETY: loaded through the guard, which keeps a retired array
        // alive while it lives.
        unsafe { &*self.slots }
    }

    /// Asks for the line of the slot where the lookup of `hash` starts.
    #[inline]
    pub(crate) fn prefetch_slot(&self, hash: u64) {
        let slots = self.slots();
        crate::prefetch(&slots.slots[slots.home(tag_of(hash))]);
    }

    /// Asks for the entry the lookup of `hash` will most likely compare
    /// with: the first on its probe with its tag. Reads the slots (best
    /// asked for with [`Self::prefetch_slot`] first), and does not compare
    /// keys: it only names lines to fetch.
    #[inline]
    pub(crate) fn prefetch_entry(&self, hash: u64) {
        let tag = tag_of(hash);
        for slot in self.slots().probe(tag) {
            match slot.tag.load(Ordering::SeqCst) {
                0 => return,
                found if found == tag => {
                    let entry = reclaim::protect(&self.guard, &slot.entry);
                    // SAFETY: protected by the guard; the reference only
                    // names the address to ask for.
                    if let Some(entry) = unsafe { entry.as_ref() } {
                        crate::prefetch_lines(entry);
                    }
                    return;
                }
                _ => {}
            }
        }
    }

    /// The subscribers of `key` (hashed to `hash`), if it is held.
    #[inline]
    pub(crate) fn get(&self, hash: u64, key: &[u8]) -> Option<&Subscribers<V>> {
        match find(self.slots(), tag_of(hash), key, |entry| {
            reclaim::protect(&self.guard, entry)
        }) {
            // SAFETY: protected by the guard, which outlives the reference
            // returned (it borrows `self`).
            Probe::Found(_, entry) => Some(unsafe { &(*entry).subscribers }),
            Probe::Absent { .. } => None,
        }
    }
}

/// The subscribers of `key` as a list, for tests.
#[cfg(test)]
pub(crate) fn subscribers_of<V: Clone>(
    map: &LiteralMap<V>,
    hash: u64,
    key: &[u8],
) -> Option<Vec<V>> {
    map.reader()
        .get(hash, key)
        .map(|subscribers| subscribers.iter().cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    use proptest::prelude::*;

    use std::sync::Arc;

    fn list(of: &LiteralMap<u32>, hash: u64, key: &[u8]) -> Option<Vec<u32>> {
        subscribers_of(of, hash, key)
    }

    /// Keys with one hash (or hashes with one home) are told apart by
    /// their bytes, across replacement, removal and a re-insert into the
    /// tombstone left behind.
    #[test]
    fn colliding_keys_are_told_apart_through_tombstones() {
        let map = LiteralMap::new();
        map.insert(7, b"a", Subscribers::one(1));
        map.insert(7, b"b", Subscribers::one(2));
        map.insert(7, b"c", Subscribers::one(3));
        assert!(map.remove(7, b"a"));
        assert_eq!(list(&map, 7, b"a"), None);
        assert_eq!(list(&map, 7, b"b"), Some(vec![2]));
        map.insert(7, b"c", Subscribers::one(3).with(4));
        assert_eq!(list(&map, 7, b"c"), Some(vec![3, 4]));
        map.insert(7, b"a", Subscribers::one(5));
        assert_eq!(list(&map, 7, b"a"), Some(vec![5]));
        assert_eq!(map.len(), 3);
        assert!(!map.remove(7, b"d"));
        assert!(!map.remove(8, b"a"));
    }

    fn spread(i: u32) -> u64 {
        u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// A reader taken before another thread outgrows the array it holds,
    /// then replaces and removes the entry it read (hundreds of
    /// retirements, past seize's batches of 32), still reads that entry,
    /// which is freed only once the map is gone; a new reader sees every
    /// key as the writer left it.
    #[test]
    fn what_a_reader_holds_outlives_the_writes_that_retire_it() {
        let map = Arc::new(LiteralMap::new());
        let first = Arc::new(1u32);
        map.insert(1, b"first", Subscribers::one(Arc::clone(&first)));
        let before = map.reader();
        let held = before.get(1, b"first").and_then(|s| s.first()).cloned();
        let writer = {
            let map = Arc::clone(&map);
            std::thread::spawn(move || {
                for i in 2..1_000u32 {
                    map.insert(spread(i), &i.to_be_bytes(), Subscribers::one(Arc::new(i)));
                }
                for round in 0..300u32 {
                    map.insert(1, b"first", Subscribers::one(Arc::new(round)));
                }
                assert!(map.remove(1, b"first"));
            })
        };
        writer.join().expect("writer");
        assert!(map.slot_count() >= 2_000);
        // Still the entry the reader started on, alive: it holds a count
        // of `first`, beside `first` itself and `held`.
        assert_eq!(Arc::strong_count(&first), 3, "not freed under the reader");
        let seen = before.get(1, b"first").and_then(|s| s.first()).cloned();
        assert_eq!(seen.as_deref(), Some(&1));
        assert_eq!(held.as_deref(), Some(&1));
        drop((before, held, seen));
        assert_eq!(subscribers_of(&map, 1, b"first"), None);
        for i in 2..1_000u32 {
            assert_eq!(
                subscribers_of(&map, spread(i), &i.to_be_bytes()),
                Some(vec![Arc::new(i)])
            );
        }
        drop(map);
        assert_eq!(Arc::strong_count(&first), 1, "freed with the map");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, u32),
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            any::<u8>().prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// After any sequence of inserts and removes, over hashes chosen
        /// to collide often, the map answers as a `HashMap` would, holds
        /// as many keys and never more than half fills its array.
        #[test]
        fn it_answers_as_a_hash_map_does(ops in proptest::collection::vec(op(), 0..600)) {
            let map = LiteralMap::new();
            let mut model: HashMap<u8, u32> = HashMap::new();
            // Eight distinct hashes for 256 keys: long shared probes.
            let hash = |k: u8| u64::from(k % 8) << 61;
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        map.insert(hash(k), &[k], Subscribers::one(v));
                        model.insert(k, v);
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(map.remove(hash(k), &[k]), model.remove(&k).is_some());
                    }
                }
                prop_assert_eq!(map.len(), model.len());
                prop_assert!(map.len() * 2 <= map.slot_count());
            }
            for k in 0..=255u8 {
                prop_assert_eq!(list(&map, hash(k), &[k]), model.get(&k).map(|&v| vec![v]));
            }
            let mut keys = Vec::new();
            map.for_each_key(|key| keys.push(key[0]));
            keys.sort_unstable();
            let mut expected: Vec<u8> = model.keys().copied().collect();
            expected.sort_unstable();
            prop_assert_eq!(keys, expected);
        }
    }
}
