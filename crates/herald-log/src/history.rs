//! The history index of one segment: what the appenders' offset and time
//! index (`index.rs`) cannot know without reading records, built after the
//! fact by [`crate::Log::index_history`] as it follows the committed tail,
//! off the append path:
//!
//! - the smallest record timestamp of every index bucket (the appenders
//!   keep the largest from batch headers), so that out-of-order timestamps
//!   prune a time range from above as well as from below;
//! - the batches that hold each record key: sorted entries
//!   `crc32c(key) << 32 | relative base offset`, one per (key, batch).
//!
//! A segment is indexed in order, so what is indexed is a prefix of it.
//! While a segment grows its entries live in memory, as sorted runs merged
//! like a binary counter (a lookup searches a few runs and a short unsorted
//! tail). Once the segment is sealed and wholly indexed they are written,
//! with the bucket minima, to a `.keys` file beside it, and read from that
//! file's mapping from then on.
//!
//! A key hash shared by two keys makes a lookup read a batch it did not
//! need; the reader compares keys, so the answer is never wrong. A batch
//! whose records cannot be read is listed as holding every key and every
//! timestamp.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use parking_lot::Mutex;

use crate::durable_file;
use crate::extent::Extent;

const KEYS_MAGIC: &[u8; 8] = b"HRLDKEY1";
const HEADER_BYTES: usize = 48;
/// Unsorted entries gathered before they become a sorted run.
const PENDING_MAX: usize = 1 << 16;

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
    /// Hashes of its record keys, sorted and without repeats; `None` when
    /// the records could not be read (the batch may hold any key).
    pub(crate) hashes: Option<Vec<u32>>,
}

/// The history index of one segment.
#[derive(Default)]
pub(crate) struct SegmentHistory {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// How far the segment is indexed (a batch boundary).
    indexed: Extent,
    /// Smallest timestamp per bucket among the indexed batches that
    /// overlap it (`i64::MAX`: none yet).
    mins: Vec<i64>,
    runs: Vec<Box<[u64]>>,
    pending: Vec<u64>,
    /// Relative base offsets of batches whose records could not be read.
    unreadable: Vec<u32>,
    /// The sealed segment's index, read from its file: then the fields
    /// above are empty and `indexed` is the segment's end.
    file: Option<KeysFile>,
    /// Whether the `.keys` file was looked for (once per segment).
    file_tried: bool,
    complete: bool,
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
    pub(crate) fn load_file(&self, path: &Path, base_offset: u64, end: Extent, interval: u32) {
        let mut state = self.state.lock();
        if state.file_tried || state.indexed.bytes > 0 {
            return;
        }
        state.file_tried = true;
        match KeysFile::open(path) {
            Some(file)
                if file.base_offset == base_offset
                    && file.end == end
                    && file.interval == interval =>
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
    /// `first_bucket..=last_bucket`.
    pub(crate) fn add(
        &self,
        at: Extent,
        len: u32,
        count: u32,
        buckets: std::ops::RangeInclusive<usize>,
        keys: BatchKeys,
    ) {
        let mut state = self.state.lock();
        if state.complete || at != state.indexed {
            return;
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
                for hash in hashes {
                    state.pending.push(entry(hash, at.records));
                }
                if state.pending.len() >= PENDING_MAX {
                    state.seal_pending();
                }
            }
            None => state.unreadable.push(at.records),
        }
        state.indexed = Extent::new(at.records + count, at.bytes + len);
    }

    /// Marks the sealed segment wholly indexed and writes its `.keys` file
    /// (then read through its mapping). A failed write keeps the index in
    /// memory: lookups stay right, and the next start rebuilds the file.
    pub(crate) fn complete(&self, path: &Path, base_offset: u64, interval: u32) {
        let mut state = self.state.lock();
        if state.complete {
            return;
        }
        state.seal_pending();
        let entries = state.merge_all();
        let written = KeysFile::write(
            path,
            base_offset,
            state.indexed,
            interval,
            &state.mins,
            &entries,
            &state.unreadable,
        )
        .and_then(|()| KeysFile::open(path).ok_or_else(|| std::io::Error::other("reread failed")));
        match written {
            Ok(file) => {
                state.file = Some(file);
                state.mins = Vec::new();
                state.unreadable = Vec::new();
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "cannot write the history index; keeping it in memory");
                state.runs = vec![entries.into_boxed_slice()];
            }
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
                    collect(run.len(), |i| run[i], hash, &mut found);
                }
                found.extend(
                    state
                        .pending
                        .iter()
                        .filter(|&&e| (e >> 32) as u32 == hash)
                        .map(|&e| e as u32),
                );
                found.extend_from_slice(&state.unreadable);
            }
        }
        found.sort_unstable();
        found.dedup();
        found
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
    /// Turns the unsorted tail into a sorted run, merging runs of like size
    /// so that there are O(log n) of them.
    fn seal_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut run = std::mem::take(&mut self.pending);
        run.sort_unstable();
        run.dedup();
        let mut run = run.into_boxed_slice();
        while let Some(last) = self.runs.last() {
            if last.len() > run.len() * 2 {
                break;
            }
            let last = self.runs.pop().unwrap_or_default();
            run = merge(&last, &run);
        }
        self.runs.push(run);
    }

    fn merge_all(&mut self) -> Vec<u64> {
        let mut merged: Box<[u64]> = Box::default();
        for run in std::mem::take(&mut self.runs) {
            merged = merge(&merged, &run);
        }
        merged.into_vec()
    }
}

/// Merges two sorted runs, dropping repeats.
fn merge(a: &[u64], b: &[u64]) -> Box<[u64]> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let next = if a[i] <= b[j] {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        if out.last() != Some(&next) {
            out.push(next);
        }
    }
    for &rest in a[i..].iter().chain(&b[j..]) {
        if out.last() != Some(&rest) {
            out.push(rest);
        }
    }
    out.into_boxed_slice()
}

/// A sealed segment's history index on disk: a 48-byte header (magic, base
/// offset, end extent, interval, bucket count, entry count, unreadable
/// count), the bucket minima (i64), the sorted entries (u64), the
/// unreadable batches (u64), little-endian, and a CRC-32C of all of it.
struct KeysFile {
    map: Mmap,
    base_offset: u64,
    end: Extent,
    interval: u32,
    buckets: usize,
    entries: usize,
}

impl KeysFile {
    fn write(
        path: &Path,
        base_offset: u64,
        end: Extent,
        interval: u32,
        mins: &[i64],
        entries: &[u64],
        unreadable: &[u32],
    ) -> std::io::Result<()> {
        let words = mins.len() + entries.len() + unreadable.len();
        let mut out = Vec::with_capacity(HEADER_BYTES + words * 8 + 4);
        out.extend_from_slice(KEYS_MAGIC);
        out.extend_from_slice(&base_offset.to_le_bytes());
        out.extend_from_slice(&end.pack().to_le_bytes());
        out.extend_from_slice(&interval.to_le_bytes());
        out.extend_from_slice(&(mins.len() as u32).to_le_bytes());
        out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        out.extend_from_slice(&(unreadable.len() as u64).to_le_bytes());
        for min in mins {
            out.extend_from_slice(&min.to_le_bytes());
        }
        for e in entries {
            out.extend_from_slice(&e.to_le_bytes());
        }
        for &u in unreadable {
            out.extend_from_slice(&u64::from(u).to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        Ok(durable_file::write_atomically(path, &out)?)
    }

    /// Maps and checks the file; `None` if missing, damaged or malformed.
    fn open(path: &Path) -> Option<Self> {
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

    fn keys(min: i64, hashes: &[u32]) -> BatchKeys {
        BatchKeys {
            min_timestamp: min,
            hashes: Some(hashes.to_vec()),
        }
    }

    #[test]
    fn lookups_find_every_batch_of_a_key_in_runs_and_in_the_file() {
        let history = SegmentHistory::default();
        // 200,000 batches of 100 bytes; batch i holds keys i % 1000 and 7.
        let mut at = Extent::default();
        for i in 0..200_000u32 {
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(keys_file_name(0));
        history.complete(&path, 0, 4096);
        assert!(history.is_complete());
        assert_eq!(history.batches_with(42), expect_42);
        assert_eq!(history.min_timestamp(1), 40);
        // Read back by a new segment's history, as after a restart.
        let again = SegmentHistory::default();
        again.load_file(&path, 0, at, 4096);
        assert!(again.is_complete());
        assert_eq!(again.batches_with(42), expect_42);
        // A file describing another extent is not trusted.
        let other = SegmentHistory::default();
        other.load_file(&path, 0, Extent::new(1, 100), 4096);
        assert!(!other.is_complete());
    }

    #[test]
    fn a_damaged_file_is_not_trusted_and_unreadable_batches_match_every_key() {
        let history = SegmentHistory::default();
        history.add(Extent::default(), 100, 2, 0..=0, keys(5, &[1]));
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
        assert_eq!(history.batches_with(1), vec![0, 2]);
        assert_eq!(history.batches_with(9), vec![2]);
        assert_eq!(history.min_timestamp(0), i64::MIN);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(keys_file_name(0));
        history.complete(&path, 0, 4096);
        assert_eq!(history.batches_with(9), vec![2]);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_BYTES] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let again = SegmentHistory::default();
        again.load_file(&path, 0, Extent::new(5, 200), 4096);
        assert!(!again.is_complete());
    }

    #[test]
    fn merging_keeps_runs_sorted_and_few() {
        let mut state = State::default();
        for round in 0..40u64 {
            state.pending = (0..PENDING_MAX as u64)
                .map(|i| (i * 7919 + round) % 1_000_003)
                .collect();
            state.seal_pending();
            assert!(state.runs.len() <= 8, "{}", state.runs.len());
        }
        for run in &state.runs {
            assert!(run.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
