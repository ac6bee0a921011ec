//! The history index of one segment: what the appenders' offset and time
//! index (`index.rs`) cannot know without reading records, built after the
//! fact by [`crate::Log::index_history`] as it follows the committed tail,
//! off the append path:
//!
//! - the smallest record timestamp of every index bucket (the appenders
//!   keep the largest from batch headers), so that out-of-order timestamps
//!   prune a time range from above as well as from below;
//! - the batches that hold each record key, and how far into each: sorted
//!   entries `crc32c(key) << 32 | relative offset`, one per (key hash,
//!   batch), the offset of the batch's last record with a key of that
//!   hash, so a lookup reads each batch only up to there (a compressed
//!   batch is inflated only that far).
//!
//! A segment is indexed in order, so what is indexed is a prefix of it.
//! While a segment grows its entries live in memory, unsorted, grouped by
//! the top byte of their hash as they arrive (a lookup scans its hash's
//! group, about 1/256 of them). Past [`SPILL_ENTRIES`] in memory they are
//! sorted, a group at a time, into a run file beside the segment
//! (`.keys-<n>.tmp`, mapped, removed when no longer needed and at the next
//! start), so a growing segment holds about 8 MiB of entries in memory
//! (up to twice that while it spills: the groups' spare capacity and the
//! sorted copy). Once the segment is sealed and wholly
//! indexed, every run is merged, streaming, with the bucket minima into a
//! `.keys` file beside it, read from that file's mapping from then on.
//!
//! A key hash shared by two keys makes a lookup read a batch it did not
//! need; the reader compares keys, so the answer is never wrong. A batch
//! whose records cannot be read is listed, by its last offset, as holding
//! every key and every timestamp.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use memmap2::Mmap;
use parking_lot::Mutex;

use crate::extent::Extent;

/// Version 2: entries name a batch's last record of a key (version 1
/// named its base offset; such files are rebuilt).
const KEYS_MAGIC: &[u8; 8] = b"HRLDKEY2";
const HEADER_BYTES: usize = 48;
/// Groups of the entries in memory: by the top byte of their hash.
const GROUPS: usize = 256;
/// Entries a growing segment keeps in memory before it spills them to a
/// run file (8 MiB).
pub(crate) const SPILL_ENTRIES: usize = 1 << 20;

/// File name of the history index of the segment starting at `base_offset`.
pub(crate) fn keys_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.keys")
}

/// The hash a key is indexed under.
pub(crate) fn key_hash(key: &[u8]) -> u32 {
    crc32c::crc32c(key)
}

fn entry(hash: u32, relative_offset: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(relative_offset)
}

/// What one batch contributes: its smallest timestamp and the hashes of
/// its keys, or nothing known when its records could not be read.
pub(crate) struct BatchKeys {
    /// Smallest record timestamp; `i64::MIN` when unknown.
    pub(crate) min_timestamp: i64,
    /// Hashes of its record keys, each once, with the offset delta (from
    /// the batch's base) of the last record with a key of that hash;
    /// `None` when the records could not be read (the batch may hold any
    /// key anywhere).
    pub(crate) hashes: Option<Vec<(u32, u32)>>,
}

/// The history index of one segment.
#[derive(Default)]
pub(crate) struct SegmentHistory {
    state: Mutex<State>,
    /// Names the next spilled run file.
    spills: AtomicU32,
}

#[derive(Default)]
struct State {
    /// How far the segment is indexed (a batch boundary).
    indexed: Extent,
    /// Smallest timestamp per bucket among the indexed batches that
    /// overlap it (`i64::MAX`: none yet).
    mins: Vec<i64>,
    /// Sorted runs: spilled to files, then in memory (only when a spill
    /// could not write its file, or for the `.keys` file being written).
    runs: Vec<Run>,
    /// Entries not in a run yet.
    pending: Pending,
    /// Entries a spill is writing to a run file: still searched until
    /// the file is in `runs`.
    spilling: Option<Arc<Pending>>,
    /// Relative base offsets of batches whose records could not be read.
    unreadable: Vec<u32>,
    /// Entries left in memory by the last spill, which could not write
    /// its file: the next is due only after [`SPILL_ENTRIES`] more, not
    /// on every batch (on a full disk each try would merge everything
    /// held and fail again, and warn each time).
    unspilled: usize,
    /// The sealed segment's index, read from its file: then the fields
    /// above are empty and `indexed` is the segment's end.
    file: Option<KeysFile>,
    /// Whether the `.keys` file was looked for (once per segment).
    file_tried: bool,
    complete: bool,
}

/// A sorted run of entries, without repeats.
#[derive(Clone)]
enum Run {
    Memory(Arc<[u64]>),
    Spilled(Arc<RunFile>),
}

impl Run {
    fn len(&self) -> usize {
        match self {
            Run::Memory(entries) => entries.len(),
            Run::Spilled(file) => file.len,
        }
    }

    fn get(&self, i: usize) -> u64 {
        match self {
            Run::Memory(entries) => entries[i],
            Run::Spilled(file) => file.get(i),
        }
    }

    fn in_memory(&self) -> usize {
        match self {
            Run::Memory(entries) => entries.len(),
            Run::Spilled(_) => 0,
        }
    }
}

/// A spilled run: little-endian entries in a file of its own, mapped,
/// removed when the last holder lets go (the mapping outlives the name).
struct RunFile {
    map: Mmap,
    len: usize,
    path: PathBuf,
}

impl RunFile {
    fn write(path: PathBuf, entries: impl Iterator<Item = u64>) -> std::io::Result<Self> {
        // Read as well as write: the mapping below reads it.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let mut out = BufWriter::new(file);
        for e in entries {
            out.write_all(&e.to_le_bytes())?;
        }
        let file = out.into_inner().map_err(|e| e.into_error())?;
        // SAFETY: the file is written once, above, and never changed.
        let map = unsafe { Mmap::map(&file) }?;
        let len = map.len() / 8;
        Ok(Self { map, len, path })
    }

    fn get(&self, i: usize) -> u64 {
        let at = i * 8;
        u64::from_le_bytes(self.map[at..at + 8].try_into().unwrap_or_default())
    }
}

impl Drop for RunFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Everything a wholly indexed segment's `.keys` file is made of, taken
/// under the lock and written without it.
pub(crate) struct Completion {
    indexed: Extent,
    mins: Vec<i64>,
    runs: Vec<Run>,
    unreadable: Vec<u32>,
}

impl SegmentHistory {
    /// How far the segment is indexed.
    pub(crate) fn indexed(&self) -> Extent {
        self.state.lock().indexed
    }

    /// True once the sealed segment is wholly indexed.
    pub(crate) fn is_complete(&self) -> bool {
        self.state.lock().complete
    }

    /// Adopts the segment's `.keys` file if it is intact and describes the
    /// segment as it is (`end`, `interval`, `buckets`). Looked for once.
    pub(crate) fn load_file(
        &self,
        path: &Path,
        base_offset: u64,
        end: Extent,
        interval: u32,
        buckets: usize,
    ) {
        let mut state = self.state.lock();
        if state.file_tried || state.indexed.bytes > 0 {
            return;
        }
        state.file_tried = true;
        match KeysFile::open(path) {
            Some(file)
                if file.base_offset == base_offset
                    && file.end == end
                    && file.interval == interval
                    && file.buckets == buckets =>
            {
                state.indexed = end;
                state.file = Some(file);
                state.complete = true;
            }
            Some(_) => {
                tracing::warn!(file = %path.display(), "history index describes another segment; rebuilding it");
            }
            None => {}
        }
    }

    /// Records the batch at `at` (position and relative base offset) of
    /// `len` bytes and `count` offsets, covering buckets
    /// `first_bucket..=last_bucket`. Answers whether the entries in memory
    /// passed [`SPILL_ENTRIES`]: then [`SegmentHistory::spill`] is due.
    pub(crate) fn add(
        &self,
        at: Extent,
        len: u32,
        count: u32,
        buckets: std::ops::RangeInclusive<usize>,
        keys: BatchKeys,
    ) -> bool {
        let mut state = self.state.lock();
        if state.complete || at != state.indexed {
            return false;
        }
        let last = *buckets.end();
        if state.mins.len() <= last {
            state.mins.resize(last + 1, i64::MAX);
        }
        for slot in &mut state.mins[buckets] {
            *slot = (*slot).min(keys.min_timestamp);
        }
        match keys.hashes {
            Some(hashes) => {
                for (hash, delta) in hashes {
                    state
                        .pending
                        .push(entry(hash, at.records + delta.min(count.saturating_sub(1))));
                }
            }
            None => state.unreadable.push(at.records + count.saturating_sub(1)),
        }
        state.indexed = Extent::new(at.records + count, at.bytes + len);
        state.in_memory() >= state.unspilled + SPILL_ENTRIES
    }

    /// Sorts the entries held in memory into a run file beside the
    /// segment at `segment_path`, sorted and written without holding the
    /// lock (lookups go on meanwhile, still finding them in memory); the
    /// only caller adding entries is the one spilling. A failed write
    /// leaves them in memory, as one sorted run.
    pub(crate) fn spill(&self, segment_path: &Path) {
        let (spilling, earlier) = {
            let mut state = self.state.lock();
            let spilling = Arc::new(std::mem::take(&mut state.pending));
            state.spilling = Some(Arc::clone(&spilling));
            let earlier: Vec<Run> = state
                .runs
                .iter()
                .filter(|r| r.in_memory() > 0)
                .cloned()
                .collect();
            (spilling, earlier)
        };
        let mut sorted = spilling.sorted();
        if !earlier.is_empty() {
            // Left by a failed spill, and older than what was pending.
            let mut runs = earlier.clone();
            runs.push(Run::Memory(sorted.into()));
            sorted = sorted_together(&runs);
        }
        let n = self.spills.fetch_add(1, Ordering::Relaxed);
        let mut name = segment_path.with_extension("").into_os_string();
        name.push(format!(".keys-{n}.tmp"));
        let written = RunFile::write(PathBuf::from(name), sorted.iter().copied());
        let mut state = self.state.lock();
        state.runs.retain(|run| {
            !earlier
                .iter()
                .any(|spilled| matches!((run, spilled), (Run::Memory(a), Run::Memory(b)) if Arc::ptr_eq(a, b)))
        });
        state.spilling = None;
        match written {
            Ok(file) => {
                state.runs.push(Run::Spilled(Arc::new(file)));
                state.unspilled = 0;
            }
            Err(e) => {
                tracing::warn!(segment = %segment_path.display(), error = %e, "cannot spill the key index; keeping it in memory until another spill's worth has come");
                state.runs.push(Run::Memory(sorted.into()));
                state.unspilled = state.in_memory();
            }
        }
    }

    /// What the `.keys` file of the wholly indexed segment is made of;
    /// `None` once complete.
    pub(crate) fn prepare_completion(&self) -> Option<Completion> {
        let mut state = self.state.lock();
        if state.complete {
            return None;
        }
        // The indexer does not complete a segment while it spills one, but
        // entries being spilled would be lost from the file if it did.
        if let Some(spilling) = state.spilling.clone() {
            state.runs.push(Run::Memory(spilling.sorted().into()));
        }
        state.seal_pending();
        Some(Completion {
            indexed: state.indexed,
            mins: state.mins.clone(),
            runs: state.runs.clone(),
            unreadable: state.unreadable.clone(),
        })
    }

    /// Marks the segment wholly indexed: read from `file` from now on, or
    /// (the file could not be written) from the runs it has.
    pub(crate) fn finish(&self, file: Option<KeysFile>) {
        let mut state = self.state.lock();
        if let Some(file) = file {
            state.file = Some(file);
            state.mins = Vec::new();
            state.runs = Vec::new();
            state.unreadable = Vec::new();
        }
        state.complete = true;
    }

    #[cfg(test)]
    /// Smallest timestamp of the indexed batches overlapping `bucket`
    /// (`i64::MAX` if none is indexed).
    pub(crate) fn min_timestamp(&self, bucket: usize) -> i64 {
        let state = self.state.lock();
        match &state.file {
            Some(file) => file.min(bucket),
            None => state.mins.get(bucket).copied().unwrap_or(i64::MAX),
        }
    }

    /// The last of buckets `0..buckets` whose indexed batches reach back
    /// to `latest` or earlier; `None` if every one is later.
    pub(crate) fn last_bucket_reaching_back_to(
        &self,
        latest: i64,
        buckets: usize,
    ) -> Option<usize> {
        let state = self.state.lock();
        (0..buckets).rev().find(|&k| match &state.file {
            Some(file) => file.min(k) <= latest,
            None => state.mins.get(k).is_some_and(|&min| min <= latest),
        })
    }

    /// Relative base offsets of the indexed batches that may hold a key
    /// hashing to `hash`, ascending, each once.
    pub(crate) fn batches_with(&self, hash: u32) -> Vec<u32> {
        let state = self.state.lock();
        let mut found = Vec::new();
        match &state.file {
            Some(file) => file.batches_with(hash, &mut found),
            None => {
                for run in &state.runs {
                    collect(run.len(), |i| run.get(i), hash, &mut found);
                }
                if let Some(spilling) = &state.spilling {
                    spilling.collect(hash, &mut found);
                }
                state.pending.collect(hash, &mut found);
                found.extend_from_slice(&state.unreadable);
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }
}

impl Completion {
    /// Writes the `.keys` file to `path` (merging the runs as it goes) and
    /// syncs it; the caller renames it into place.
    pub(crate) fn write(
        &self,
        path: &Path,
        base_offset: u64,
        interval: u32,
    ) -> std::io::Result<()> {
        let entries: usize = self.runs.iter().map(Run::len).sum();
        let mut out = CrcWriter::new(BufWriter::new(File::create(path)?));
        out.put(KEYS_MAGIC)?;
        out.put(&base_offset.to_le_bytes())?;
        out.put(&self.indexed.pack().to_le_bytes())?;
        out.put(&interval.to_le_bytes())?;
        out.put(&(self.mins.len() as u32).to_le_bytes())?;
        out.put(&(entries as u64).to_le_bytes())?;
        out.put(&(self.unreadable.len() as u64).to_le_bytes())?;
        for min in &self.mins {
            out.put(&min.to_le_bytes())?;
        }
        for e in merged(&self.runs) {
            out.put(&e.to_le_bytes())?;
        }
        for &u in &self.unreadable {
            out.put(&u64::from(u).to_le_bytes())?;
        }
        let crc = out.crc;
        let mut inner = out.inner;
        inner.write_all(&crc.to_le_bytes())?;
        inner.into_inner().map_err(|e| e.into_error())?.sync_all()
    }
}

/// A writer that keeps the CRC-32C of what went through it.
struct CrcWriter<W> {
    inner: W,
    crc: u32,
}

impl<W: Write> CrcWriter<W> {
    fn new(inner: W) -> Self {
        Self { inner, crc: 0 }
    }

    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.inner.write_all(bytes)
    }
}

/// The entries of sorted `runs`, merged in order.
fn merged(runs: &[Run]) -> impl Iterator<Item = u64> + '_ {
    let mut heads: BinaryHeap<Reverse<(u64, usize, usize)>> = runs
        .iter()
        .enumerate()
        .filter(|(_, run)| run.len() > 0)
        .map(|(r, run)| Reverse((run.get(0), r, 0)))
        .collect();
    std::iter::from_fn(move || {
        let Reverse((value, r, i)) = heads.pop()?;
        if i + 1 < runs[r].len() {
            heads.push(Reverse((runs[r].get(i + 1), r, i + 1)));
        }
        Some(value)
    })
}

/// Entries not in a sorted run yet, grouped by the top byte of their hash
/// as they arrive, each group in the order its entries were added.
///
/// Why not sort them in runs as they come: with a million subjects nearly
/// every record is an entry of its own, and sorting runs of tens of
/// thousands and merging them (like a binary counter, as this index once
/// did) copied each entry many times over branches the hashes make
/// unpredictable; it was the indexer's largest cost. Grouped, an entry is
/// appended once, a lookup scans one group, and sealing sorts each group
/// on its own, small enough to stay in the cache.
#[derive(Default)]
struct Pending {
    /// [`GROUPS`] groups once anything was added; none before, so that an
    /// unkeyed segment's history costs nothing.
    groups: Vec<Vec<u64>>,
    len: usize,
}

impl Pending {
    fn push(&mut self, entry: u64) {
        if self.groups.is_empty() {
            self.groups = vec![Vec::new(); GROUPS];
        }
        self.groups[(entry >> 56) as usize].push(entry);
        self.len += 1;
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Adds to `found` the offsets of the entries with `hash`.
    fn collect(&self, hash: u32, found: &mut Vec<u32>) {
        if let Some(group) = self.groups.get((hash >> 24) as usize) {
            found.extend(
                group
                    .iter()
                    .filter(|&&e| (e >> 32) as u32 == hash)
                    .map(|&e| e as u32),
            );
        }
    }

    /// Every entry, sorted, without repeats: the groups in order, each
    /// sorted by hash keeping its order of addition (see
    /// [`sort_by_hash`]; its pass on the top byte is skipped, which every
    /// entry of a group shares).
    fn sorted(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len);
        let mut scratch = Vec::new();
        for group in &self.groups {
            let start = out.len();
            out.extend_from_slice(group);
            sort_by_hash(&mut out[start..], &mut scratch);
        }
        out.dedup();
        out
    }
}

/// The entries of the in-memory `runs` (spilled ones are passed over),
/// sealed in the order given, as one sorted run without repeats: their
/// entries concatenated are in the order they were added, so sorting them
/// by hash keeps each hash's entries in offset order (see
/// [`sort_by_hash`]).
fn sorted_together(runs: &[Run]) -> Vec<u64> {
    let mut together = Vec::with_capacity(runs.iter().map(Run::in_memory).sum());
    for run in runs {
        if let Run::Memory(entries) = run {
            together.extend_from_slice(entries);
        }
    }
    sort_by_hash(&mut together, &mut Vec::new());
    together.dedup();
    together
}

/// Sorts `entries` by their key hash (the upper 32 bits), keeping the
/// order of entries with the same hash: a byte of the hash per pass,
/// passes where every entry has the same byte skipped.
///
/// Why not a comparison sort: entries of one hash are added in offset
/// order (a batch at a time, each hash once per batch), so this gives
/// the full order a comparison sort would, in four linear passes where
/// 65,536 entries take a comparison sort sixteen levels; with a million
/// subjects this sort was the indexer's largest cost. Were that order
/// ever not kept, runs would still be sorted by hash, which is all a
/// lookup searches by.
fn sort_by_hash(entries: &mut [u64], scratch: &mut Vec<u64>) {
    const PASSES: usize = 4;
    let mut counts = [[0usize; 256]; PASSES];
    for &e in entries.iter() {
        for (pass, count) in counts.iter_mut().enumerate() {
            count[(e >> (32 + 8 * pass)) as usize & 0xff] += 1;
        }
    }
    scratch.clear();
    scratch.resize(entries.len(), 0);
    let mut in_entries = true;
    for (pass, count) in counts.iter().enumerate() {
        if count.contains(&entries.len()) {
            continue;
        }
        if in_entries {
            scatter(entries, scratch, pass, count);
        } else {
            scatter(scratch, entries, pass, count);
        }
        in_entries = !in_entries;
    }
    if !in_entries {
        entries.copy_from_slice(scratch);
    }
}

/// One pass of [`sort_by_hash`]: `from` into `to` by byte `pass` of the
/// hash, whose counts are `count`, keeping the order within a byte.
fn scatter(from: &[u64], to: &mut [u64], pass: usize, count: &[usize; 256]) {
    let mut next = [0usize; 256];
    let mut at = 0;
    for (slot, &n) in next.iter_mut().zip(count) {
        *slot = at;
        at += n;
    }
    for &e in from {
        let byte = (e >> (32 + 8 * pass)) as usize & 0xff;
        to[next[byte]] = e;
        next[byte] += 1;
    }
}

/// Adds to `found` the offsets of the entries of a sorted run (`len`
/// entries, `at(i)` the i-th) whose hash is `hash`.
fn collect(len: usize, at: impl Fn(usize) -> u64, hash: u32, found: &mut Vec<u32>) {
    let (mut low, mut high) = (0usize, len);
    let first = entry(hash, 0);
    while low < high {
        let mid = (low + high) / 2;
        if at(mid) < first {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    while low < len {
        let e = at(low);
        if (e >> 32) as u32 != hash {
            break;
        }
        found.push(e as u32);
        low += 1;
    }
}

impl State {
    fn in_memory(&self) -> usize {
        self.pending.len()
            + self.spilling.as_ref().map_or(0, |spilling| spilling.len())
            + self.runs.iter().map(Run::in_memory).sum::<usize>()
    }

    /// Turns the entries pending into a sorted run (for the `.keys` file).
    fn seal_pending(&mut self) {
        if self.pending.len() == 0 {
            return;
        }
        let run = std::mem::take(&mut self.pending).sorted();
        self.runs.push(Run::Memory(run.into()));
    }
}

/// A sealed segment's history index on disk: a 48-byte header (magic, base
/// offset, end extent, interval, bucket count, entry count, unreadable
/// count), the bucket minima (i64), the sorted entries (u64), the
/// unreadable batches (u64), little-endian, and a CRC-32C of all of it.
pub(crate) struct KeysFile {
    map: Mmap,
    base_offset: u64,
    end: Extent,
    interval: u32,
    buckets: usize,
    entries: usize,
}

impl KeysFile {
    /// Maps and checks the file; `None` if missing, damaged or malformed.
    pub(crate) fn open(path: &Path) -> Option<Self> {
        let file = File::open(path).ok()?;
        // SAFETY: the file is replaced only by rename, never written in
        // place, so the mapped bytes do not change under the reader.
        let map = unsafe { Mmap::map(&file) }.ok()?;
        let data: &[u8] = &map;
        if data.len() < HEADER_BYTES + 4 || &data[..8] != KEYS_MAGIC {
            return None;
        }
        let body = data.len() - 4;
        let stored = u32::from_le_bytes(data[body..].try_into().ok()?);
        if crc32c::crc32c(&data[..body]) != stored {
            return None;
        }
        let u64_at =
            |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap_or_default());
        let u32_at =
            |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().unwrap_or_default());
        let base_offset = u64_at(8);
        let end = Extent::unpack(u64_at(16));
        let interval = u32_at(24);
        let buckets = u32_at(28) as usize;
        let entries = usize::try_from(u64_at(32)).ok()?;
        let unreadable = usize::try_from(u64_at(40)).ok()?;
        let words = buckets.checked_add(entries)?.checked_add(unreadable)?;
        if body != HEADER_BYTES.checked_add(words.checked_mul(8)?)? {
            return None;
        }
        Some(Self {
            map,
            base_offset,
            end,
            interval,
            buckets,
            entries,
        })
    }

    fn word(&self, index: usize) -> u64 {
        let at = HEADER_BYTES + index * 8;
        u64::from_le_bytes(self.map[at..at + 8].try_into().unwrap_or_default())
    }

    fn min(&self, bucket: usize) -> i64 {
        if bucket < self.buckets {
            self.word(bucket) as i64
        } else {
            i64::MAX
        }
    }

    fn batches_with(&self, hash: u32, found: &mut Vec<u32>) {
        let base = self.buckets;
        collect(self.entries, |i| self.word(base + i), hash, found);
        let unreadable_at = self.buckets + self.entries;
        let total = (self.map.len() - 4 - HEADER_BYTES) / 8;
        for i in unreadable_at..total {
            found.push(self.word(i) as u32);
        }
    }
}

/// Path of the `.keys` file of the segment file at `segment_path`.
pub(crate) fn keys_path(segment_path: &Path) -> PathBuf {
    segment_path.with_extension("keys")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(history: &SegmentHistory, path: &Path) {
        let done = history.prepare_completion().unwrap();
        done.write(path, 0, 4096).unwrap();
        history.finish(KeysFile::open(path));
    }

    fn keys(min: i64, hashes: &[u32]) -> BatchKeys {
        BatchKeys {
            min_timestamp: min,
            hashes: Some(hashes.iter().map(|&h| (h, 0)).collect()),
        }
    }

    #[test]
    fn entries_being_spilled_are_found_and_a_completion_meanwhile_keeps_them() {
        let history = SegmentHistory::default();
        let dir = tempfile::tempdir().unwrap();
        history.add(Extent::default(), 100, 1, 0..=0, keys(0, &[4, 9]));
        history.add(Extent::new(1, 100), 100, 1, 0..=0, keys(0, &[9]));
        {
            // As `spill` leaves it while it writes the file.
            let mut state = history.state.lock();
            let pending = std::mem::take(&mut state.pending);
            state.spilling = Some(Arc::new(pending));
        }
        history.add(Extent::new(2, 200), 100, 1, 0..=0, keys(0, &[9]));
        assert_eq!(history.batches_with(9), vec![0, 1, 2]);
        assert_eq!(history.batches_with(4), vec![0]);
        assert_eq!(history.state.lock().in_memory(), 4);
        complete(&history, &dir.path().join(keys_file_name(0)));
        assert!(history.state.lock().file.is_some());
        assert_eq!(history.batches_with(9), vec![0, 1, 2]);
        assert_eq!(history.batches_with(4), vec![0]);
    }

    /// A segment's history with a place its spills cannot write to and
    /// one they can, fed one-record batches in turn.
    struct SpillCase {
        history: SegmentHistory,
        _dir: tempfile::TempDir,
        missing: PathBuf,
        segment: PathBuf,
        at: Extent,
    }

    impl SpillCase {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            Self {
                history: SegmentHistory::default(),
                missing: dir.path().join("gone").join("00000000000000000000.log"),
                segment: dir.path().join("00000000000000000000.log"),
                _dir: dir,
                at: Extent::default(),
            }
        }

        /// Adds the next batch, with `hashes`; answers whether a spill is
        /// due.
        fn add(&mut self, hashes: &[u32]) -> bool {
            let due = self.history.add(self.at, 100, 1, 0..=0, keys(0, hashes));
            self.at = Extent::new(self.at.records + 1, self.at.bytes + 100);
            due
        }
    }

    #[test]
    fn a_spill_that_cannot_write_keeps_its_entries_and_the_next_spill_takes_them() {
        let mut case = SpillCase::new();
        case.add(&[3, 9]);
        case.add(&[9]);
        case.history.spill(&case.missing);
        // Still in memory, now as one sorted run, and still found.
        assert_eq!(case.history.state.lock().in_memory(), 3);
        assert_eq!(case.history.batches_with(9), vec![0, 1]);
        case.add(&[3]);
        case.history.spill(&case.segment);
        let state = case.history.state.lock();
        assert_eq!(state.in_memory(), 0);
        assert_eq!(state.runs.len(), 1);
        let run = &state.runs[0];
        let entries: Vec<u64> = (0..run.len()).map(|i| run.get(i)).collect();
        assert_eq!(
            entries,
            vec![entry(3, 0), entry(3, 2), entry(9, 0), entry(9, 1)]
        );
    }

    #[test]
    fn after_a_spill_that_cannot_write_the_next_is_due_only_a_spill_later() {
        let mut case = SpillCase::new();
        let spill_worth: Vec<u32> = (0..SPILL_ENTRIES as u32).collect();
        assert!(case.add(&spill_worth), "a spill's worth makes a spill due");
        case.history.spill(&case.missing);
        assert_eq!(case.history.state.lock().in_memory(), SPILL_ENTRIES);
        // The batches after the failure do not retry it, one by one.
        for hash in 0..100 {
            assert!(!case.add(&[hash]), "no new try after {hash} more");
        }
        assert!(case.add(&spill_worth[100..]), "another spill's worth");
        case.history.spill(&case.segment);
        assert_eq!(case.history.state.lock().in_memory(), 0);
        // Written: back to the usual spill size.
        assert!(!case.add(&[7]));
        assert!(case.add(&spill_worth));
    }

    #[test]
    fn lookups_find_every_batch_of_a_key_in_runs_spilled_runs_and_the_file() {
        let history = SegmentHistory::default();
        let dir = tempfile::tempdir().unwrap();
        let segment = dir.path().join("00000000000000000000.log");
        // 200,000 batches of 100 bytes; batch i holds keys i % 1000 and 7.
        // Spilled to run files twice on the way.
        let mut at = Extent::default();
        for i in 0..200_000u32 {
            if i == 70_000 || i == 150_000 {
                history.spill(&segment);
                assert_eq!(history.state.lock().in_memory(), 0);
            }
            let bucket = (at.bytes / 4096) as usize;
            let end_bucket = ((at.bytes + 99) / 4096) as usize;
            let mut hashes = vec![i % 1000, 7];
            hashes.sort_unstable();
            hashes.dedup();
            history.add(at, 100, 1, bucket..=end_bucket, keys(i64::from(i), &hashes));
            at = Extent::new(at.records + 1, at.bytes + 100);
        }
        let expect_42: Vec<u32> = (0..200_000).filter(|i| i % 1000 == 42).collect();
        assert_eq!(history.batches_with(42), expect_42);
        assert_eq!(history.batches_with(7).len(), 200_000);
        assert!(history.batches_with(5000).is_empty());
        assert_eq!(history.min_timestamp(1), 40);
        let spilled = |dir: &Path| {
            std::fs::read_dir(dir)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".tmp")
                })
                .count()
        };
        assert_eq!(spilled(dir.path()), 2);
        let path = dir.path().join(keys_file_name(0));
        complete(&history, &path);
        assert!(history.is_complete());
        // The run files went with the runs.
        assert_eq!(spilled(dir.path()), 0);
        assert_eq!(history.batches_with(42), expect_42);
        assert_eq!(history.min_timestamp(1), 40);
        // Read back by a new segment's history, as after a restart.
        let buckets = ((at.bytes - 1) / 4096 + 1) as usize;
        let again = SegmentHistory::default();
        again.load_file(&path, 0, at, 4096, buckets);
        assert!(again.is_complete());
        assert_eq!(again.batches_with(42), expect_42);
        assert_eq!(again.batches_with(7).len(), 200_000);
        // A file describing another extent is not trusted.
        let other = SegmentHistory::default();
        other.load_file(&path, 0, Extent::new(1, 100), 4096, 1);
        assert!(!other.is_complete());
    }

    #[test]
    fn a_damaged_file_is_not_trusted_and_unreadable_batches_match_every_key() {
        let history = SegmentHistory::default();
        // Key hash 1 last at the batch's second record; a delta past the
        // batch is held to its last record.
        history.add(
            Extent::default(),
            100,
            2,
            0..=0,
            BatchKeys {
                min_timestamp: 5,
                hashes: Some(vec![(1, 1), (3, 9)]),
            },
        );
        history.add(
            Extent::new(2, 100),
            100,
            3,
            0..=0,
            BatchKeys {
                min_timestamp: i64::MIN,
                hashes: None,
            },
        );
        // The unreadable batch (offsets 2..5) is named by its last offset.
        assert_eq!(history.batches_with(1), vec![1, 4]);
        assert_eq!(history.batches_with(3), vec![1, 4]);
        assert_eq!(history.batches_with(9), vec![4]);
        assert_eq!(history.min_timestamp(0), i64::MIN);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(keys_file_name(0));
        complete(&history, &path);
        assert_eq!(history.batches_with(9), vec![4]);
        assert_eq!(history.batches_with(1), vec![1, 4]);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_BYTES] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let again = SegmentHistory::default();
        again.load_file(&path, 0, Extent::new(5, 200), 4096, 1);
        assert!(!again.is_complete());
    }

    #[test]
    fn pending_entries_seal_into_one_run_in_full_order_and_are_found_meanwhile() {
        let mut state = State::default();
        let rounds = 16u64;
        let per_round = 1u64 << 16;
        for round in 0..rounds {
            // As the indexer adds them: offsets ascending; hashes spread
            // over the groups, each shared by one entry a round.
            for i in 0..per_round {
                let hash = (((i * 7919 + round) % per_round) as u32).wrapping_mul(0x9e37_79b9);
                state
                    .pending
                    .push(entry(hash, (round * per_round + i) as u32));
            }
        }
        assert_eq!(state.in_memory(), (rounds * per_round) as usize);
        let hash = 0x9e37_79b9u32.wrapping_mul(5);
        let mut found = Vec::new();
        state.pending.collect(hash, &mut found);
        assert_eq!(found.len(), 16);
        assert!(found.windows(2).all(|w| w[0] < w[1]), "{found:?}");
        state.seal_pending();
        assert_eq!((state.pending.len(), state.runs.len()), (0, 1));
        let run = &state.runs[0];
        assert_eq!(run.len(), (rounds * per_round) as usize);
        assert!((1..run.len()).all(|i| run.get(i - 1) < run.get(i)));
        let mut again = Vec::new();
        collect(run.len(), |i| run.get(i), hash, &mut again);
        assert_eq!(again, found);
    }

    #[test]
    fn runs_sorted_together_drop_repeats_and_keep_each_hashs_offsets_in_order() {
        let runs = vec![
            Run::Memory(Arc::from(vec![entry(5, 1), entry(9, 2)])),
            Run::Memory(Arc::from(vec![entry(2, 3), entry(5, 4), entry(9, 4)])),
            Run::Memory(Arc::from(Vec::new())),
            Run::Memory(Arc::from(vec![entry(5, 4), entry(5, 6)])),
        ];
        assert_eq!(
            sorted_together(&runs),
            vec![
                entry(2, 3),
                entry(5, 1),
                entry(5, 4),
                entry(5, 6),
                entry(9, 2),
                entry(9, 4)
            ]
        );
        assert_eq!(sorted_together(&[]), Vec::<u64>::new());
    }

    proptest::proptest! {
        /// Entries added as the indexer adds them (offsets ascending) come
        /// out in the order a comparison sort gives.
        #[test]
        fn sorting_by_hash_gives_the_full_order(hashes in proptest::collection::vec(proptest::num::u32::ANY, 0..2000), small in proptest::bool::ANY) {
            let mut entries: Vec<u64> = hashes
                .iter()
                .enumerate()
                // Few distinct hashes too, so that many share one.
                .map(|(i, &h)| entry(if small { h % 7 } else { h }, i as u32))
                .collect();
            let mut expected = entries.clone();
            expected.sort_unstable();
            sort_by_hash(&mut entries, &mut Vec::new());
            proptest::prop_assert_eq!(entries, expected);
        }

        /// Whatever order entries come in, the result is theirs, sorted by
        /// hash: all a lookup needs.
        #[test]
        fn sorting_by_hash_keeps_every_entry(values in proptest::collection::vec(proptest::num::u64::ANY, 0..2000)) {
            let mut entries = values.clone();
            sort_by_hash(&mut entries, &mut Vec::new());
            proptest::prop_assert!(entries.windows(2).all(|w| w[0] >> 32 <= w[1] >> 32));
            let (mut got, mut want) = (entries, values);
            got.sort_unstable();
            want.sort_unstable();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
