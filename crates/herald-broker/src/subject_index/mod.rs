//! Per-block filters of a partition's record keys, so that a reader of a
//! few subjects skips the blocks that hold none of them (seed 004: a
//! catch-up for one subject in a busy partition reads a fraction of it).
//!
//! The log does not know what a record is and the produce path does not
//! decompress, so the filters are built off the produce path: an indexer
//! (the push engine's) follows each partition's committed tail and hands
//! every read to [`SubjectIndex::add`]. Blocks are 1,024 aligned offsets
//! with 10 Bloom bits per record; 64 blocks make a chunk. The chunk being
//! filled lives in memory; sealed chunks are written to a file beside the
//! segments and read back on demand through a small cache.
//!
//! Readers trust a filter only below [`SubjectIndex::indexed_through`]: a
//! record the indexer has not reached is never skipped. Files are checked
//! at open against the recovered log (a chunk reaching past the high
//! watermark may describe records a crash lost, whose offsets the log
//! will reuse), removed by retention with the data they describe, and a
//! damaged or missing one only means its blocks are read.

mod bloom;
mod chunk_file;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use herald_records::{batches, RecordBatch};
use parking_lot::{Mutex, RwLock};

use bloom::BlockFilter;
pub use bloom::{SubjectProbe, BLOCK_RECORDS};
use chunk_file::CHUNK_BLOCKS;

/// Offsets per chunk.
const CHUNK_RECORDS: u64 = CHUNK_BLOCKS as u64 * BLOCK_RECORDS;
/// Sealed chunks kept decoded for readers (about 82 KiB each).
const CACHED_CHUNKS: usize = 4;
/// Blocks one [`SubjectIndex::next_candidate`] call looks at: a bound on
/// its time (the caller comes back for the rest).
const BLOCKS_PER_LOOKUP: u64 = 16 * CHUNK_BLOCKS as u64;

/// Where a reader of some subjects should read next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The first offset, at or after the one asked about, that may hold a
    /// record of the subjects. Everything below it (and at or after the
    /// one asked about) certainly holds none.
    pub offset: u64,
    /// When `offset` starts a block the filters cover: the stored bytes of
    /// the batches starting in that block, to size the read. `None` when
    /// the filters do not know (the reader reads as it would without them).
    pub block_bytes: Option<u32>,
}

/// The filters of one partition.
#[derive(Debug)]
pub struct SubjectIndex {
    dir: PathBuf,
    /// Kept up to date under `subject.filters=auto`: set by the first push
    /// subscription to the topic, or at open when filters were kept
    /// before.
    active: AtomicBool,
    state: RwLock<State>,
    /// Recently used sealed chunks, most recent last.
    cache: Mutex<Vec<(u64, Arc<[BlockFilter]>)>>,
}

#[derive(Debug)]
struct State {
    /// Chunks `first_sealed..open_chunk` are sealed (in files, unless a
    /// write failed or a file was damaged: then they are just read).
    first_sealed: u64,
    /// The chunk being filled: its blocks up to `indexed_through`.
    open_chunk: u64,
    open_blocks: Vec<BlockFilter>,
    /// Every record below this offset is in the filters.
    indexed_through: u64,
}

impl State {
    fn starting_at(offset: u64) -> Self {
        let open_chunk = offset / CHUNK_RECORDS;
        let blocks_before = ((offset % CHUNK_RECORDS) / BLOCK_RECORDS) as usize;
        Self {
            first_sealed: open_chunk,
            open_chunk,
            // Blocks below the start hold nothing readable; a block the
            // start falls inside is filled from the start on.
            open_blocks: vec![BlockFilter::default(); blocks_before + 1],
            indexed_through: offset,
        }
    }
}

impl SubjectIndex {
    /// Opens the filters of the partition in `dir` whose recovered log
    /// spans `log_start_offset..high_watermark`: sealed chunk files that
    /// form a run from the log start are kept, the rest removed, and the
    /// indexer resumes after the run.
    pub fn open(dir: &Path, log_start_offset: u64, high_watermark: u64) -> Self {
        let first = log_start_offset / CHUNK_RECORDS;
        let mut next = first;
        let listed = chunk_file::list(dir).unwrap_or_else(|e| {
            tracing::warn!(dir = %dir.display(), error = %e, "listing subject filter files failed; rebuilding them");
            Vec::new()
        });
        for chunk in listed {
            let reaches = (chunk + 1) * CHUNK_RECORDS;
            let keep = chunk == next && reaches <= high_watermark;
            if keep {
                next += 1;
            } else if let Err(e) = chunk_file::remove(dir, chunk) {
                tracing::warn!(dir = %dir.display(), chunk, error = %e, "removing a stale subject filter file failed");
            }
        }
        let kept = next > first;
        let state = if kept {
            State {
                first_sealed: first,
                open_chunk: next,
                open_blocks: vec![BlockFilter::default()],
                indexed_through: next * CHUNK_RECORDS,
            }
        } else {
            State::starting_at(log_start_offset)
        };
        Self {
            dir: dir.to_owned(),
            active: AtomicBool::new(kept),
            state: RwLock::new(state),
            cache: Mutex::new(Vec::new()),
        }
    }

    /// Marks the filters as wanted (a push subscription to the topic).
    pub fn activate(&self) {
        self.active.store(true, Ordering::Relaxed);
    }

    /// Whether the filters are wanted under `subject.filters=auto`.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Every record below this offset is in the filters; the indexer
    /// reads on from here.
    pub fn indexed_through(&self) -> u64 {
        self.state.read().indexed_through
    }

    /// Notes the records of `stored`, a read from `indexed_through()`
    /// that ends at `next_offset`. Reads from elsewhere are ignored (the
    /// indexer moved on). A batch that cannot be decoded is passed over:
    /// its block is marked as holding every key, so it is always read.
    pub fn add(&self, from: u64, bytes: &Bytes, next_offset: u64) {
        if next_offset <= from {
            return;
        }
        // Keys are hashed before the lock is taken.
        let mut noted: Vec<(u64, Noted)> = Vec::new();
        // Offsets below this were noted (or lie below `from`).
        let mut covered = from;
        // Decompressed records, one buffer for the whole read.
        let mut scratch = Vec::new();
        // Stored batches were validated on the way in; if one reads back
        // damaged, what follows it is unknown: its blocks are always read.
        let damaged = |noted: &mut Vec<(u64, Noted)>, covered: u64| {
            if covered < next_offset {
                note_everything(noted, covered, next_offset - 1);
            }
        };
        for batch in batches(bytes) {
            let Ok(batch) = batch else {
                damaged(&mut noted, covered);
                break;
            };
            let Ok(view) = RecordBatch::new(batch) else {
                damaged(&mut noted, covered);
                break;
            };
            let header = view.header();
            let (Ok(base), Ok(last)) = (
                u64::try_from(header.base_offset()),
                u64::try_from(header.last_offset()),
            ) else {
                damaged(&mut noted, covered);
                break;
            };
            covered = covered.max(last + 1);
            if base >= from {
                noted.push((base, Noted::Bytes(batch.len() as u32)));
            }
            if header.is_control() {
                continue;
            }
            // Records read before any damage are what a reader sees too.
            let Ok(records) = view.records(&mut scratch) else {
                note_everything(&mut noted, base.max(from), last.min(next_offset - 1));
                continue;
            };
            for record in records {
                let Ok(record) = record else {
                    note_everything(&mut noted, base.max(from), last.min(next_offset - 1));
                    break;
                };
                let (Ok(offset), Some(key)) = (u64::try_from(record.offset), record.key) else {
                    continue;
                };
                if offset >= from {
                    noted.push((offset, Noted::Key(SubjectProbe::of(key))));
                }
            }
        }
        // Offsets rise through a log; sorting (a pass over sorted input)
        // only matters for damaged data, where no record may be lost.
        noted.sort_by_key(|&(offset, _)| offset);
        let mut sealed = Vec::new();
        {
            let mut state = self.state.write();
            if state.indexed_through != from || next_offset <= from {
                return;
            }
            for (offset, what) in noted {
                if offset >= next_offset {
                    break;
                }
                let chunk = offset / CHUNK_RECORDS;
                while chunk > state.open_chunk {
                    let blocks =
                        std::mem::replace(&mut state.open_blocks, vec![BlockFilter::default()]);
                    sealed.push((state.open_chunk, blocks));
                    state.open_chunk += 1;
                }
                // Every noted offset is at or past `from`, in the open chunk
                // or later.
                let Some(slot) = offset
                    .checked_sub(state.open_chunk * CHUNK_RECORDS)
                    .map(|o| (o / BLOCK_RECORDS) as usize)
                else {
                    continue;
                };
                if state.open_blocks.len() <= slot {
                    state.open_blocks.resize(slot + 1, BlockFilter::default());
                }
                let block = &mut state.open_blocks[slot];
                match what {
                    Noted::Key(probe) => block.insert(probe),
                    Noted::Bytes(bytes) => {
                        block.stored_bytes = block.stored_bytes.saturating_add(bytes)
                    }
                    Noted::Everything => block.bits = [0xff; bloom::FILTER_BYTES],
                }
            }
            while next_offset >= (state.open_chunk + 1) * CHUNK_RECORDS {
                let blocks =
                    std::mem::replace(&mut state.open_blocks, vec![BlockFilter::default()]);
                sealed.push((state.open_chunk, blocks));
                state.open_chunk += 1;
            }
            // Sealed chunks go to their files before readers are told they
            // are indexed, so a reader never looks for a file not written.
            for (chunk, blocks) in sealed.drain(..) {
                if let Err(e) = chunk_file::write(&self.dir, chunk, &blocks) {
                    // Its blocks will be read rather than skipped.
                    tracing::warn!(dir = %self.dir.display(), chunk, error = %e, "writing a subject filter file failed");
                }
            }
            state.indexed_through = next_offset;
        }
    }

    /// The log start moved to `log_start_offset` (retention, DeleteRecords):
    /// drops the filters of chunks wholly below it. If it passed what was
    /// indexed, indexing restarts there.
    pub fn truncate_before(&self, log_start_offset: u64) {
        let first = log_start_offset / CHUNK_RECORDS;
        let mut state = self.state.write();
        let dropped = state.first_sealed..first.min(state.open_chunk);
        if log_start_offset > state.indexed_through {
            let gone = state.first_sealed..state.open_chunk;
            *state = State::starting_at(log_start_offset);
            drop(state);
            self.remove_chunks(gone);
            return;
        }
        if dropped.is_empty() {
            return;
        }
        state.first_sealed = dropped.end;
        drop(state);
        self.remove_chunks(dropped);
    }

    fn remove_chunks(&self, chunks: std::ops::Range<u64>) {
        self.cache.lock().retain(|(c, _)| !chunks.contains(c));
        for chunk in chunks {
            if let Err(e) = chunk_file::remove(&self.dir, chunk) {
                tracing::warn!(dir = %self.dir.display(), chunk, error = %e, "removing a subject filter file failed");
            }
        }
    }

    /// Where a reader of the subjects with `probes`, at `from`, should read
    /// next, looking no further than `until`.
    pub fn next_candidate(&self, from: u64, until: u64, probes: &[SubjectProbe]) -> Candidate {
        if probes.is_empty() || from >= until {
            return Candidate {
                offset: from,
                block_bytes: None,
            };
        }
        let mut scan = Scan {
            from,
            block: from / BLOCK_RECORDS,
            last_block: from / BLOCK_RECORDS + BLOCKS_PER_LOOKUP,
            limit: until,
            probes,
        };
        loop {
            let (sealed, open_chunk, indexed_through) = {
                let state = self.state.read();
                (
                    state.first_sealed..state.open_chunk,
                    state.open_chunk,
                    state.indexed_through,
                )
            };
            scan.limit = until.min(indexed_through);
            let chunk = scan.block / CHUNK_BLOCKS as u64;
            let found = if sealed.contains(&chunk) {
                match self.sealed_chunk(chunk) {
                    Some(blocks) => scan.chunk(chunk, &blocks),
                    None => Some(scan.unknown()),
                }
            } else if chunk == open_chunk {
                let state = self.state.read();
                if state.open_chunk != chunk {
                    continue; // sealed meanwhile: look again
                }
                scan.limit = until.min(state.indexed_through);
                scan.chunk(chunk, &state.open_blocks)
            } else {
                // Below the first sealed chunk: retention's business.
                Some(scan.unknown())
            };
            if let Some(found) = found {
                return found;
            }
        }
    }

    /// Chunk `chunk`'s blocks, from the cache or its file.
    fn sealed_chunk(&self, chunk: u64) -> Option<Arc<[BlockFilter]>> {
        {
            let mut cache = self.cache.lock();
            if let Some(i) = cache.iter().position(|(c, _)| *c == chunk) {
                let entry = cache.remove(i);
                let blocks = Arc::clone(&entry.1);
                cache.push(entry);
                return Some(blocks);
            }
        }
        let blocks: Arc<[BlockFilter]> = match chunk_file::read(&self.dir, chunk) {
            Ok(blocks) => blocks.into(),
            Err(e) => {
                tracing::debug!(error = %e, "subject filter chunk unavailable; its blocks are read");
                return None;
            }
        };
        let mut cache = self.cache.lock();
        if cache.len() >= CACHED_CHUNKS {
            cache.remove(0);
        }
        cache.push((chunk, Arc::clone(&blocks)));
        Some(blocks)
    }
}

/// One lookup's progress through the blocks.
struct Scan<'a> {
    from: u64,
    /// The block looked at next.
    block: u64,
    /// Where this lookup stops looking.
    last_block: u64,
    /// Filters are trusted below this.
    limit: u64,
    probes: &'a [SubjectProbe],
}

impl Scan<'_> {
    /// The offset where block `block` begins for this reader.
    fn at(&self, block: u64) -> u64 {
        (block * BLOCK_RECORDS).max(self.from)
    }

    /// The answer when the current block's filter is not known.
    fn unknown(&self) -> Candidate {
        Candidate {
            offset: self.at(self.block).min(self.limit.max(self.from)),
            block_bytes: None,
        }
    }

    /// Looks through `blocks`, chunk `chunk`'s, from the current block:
    /// an answer, or `None` to go on with the next chunk.
    fn chunk(&mut self, chunk: u64, blocks: &[BlockFilter]) -> Option<Candidate> {
        let end_block = (chunk + 1) * CHUNK_BLOCKS as u64;
        while self.block < end_block {
            if self.at(self.block) >= self.limit || self.block >= self.last_block {
                return Some(self.unknown());
            }
            // A block the open chunk has not reached yet holds nothing
            // below `limit`.
            let filter = blocks.get((self.block % CHUNK_BLOCKS as u64) as usize);
            if let Some(filter) = filter.filter(|f| self.probes.iter().any(|&p| f.may_contain(p))) {
                return Some(Candidate {
                    offset: self.at(self.block),
                    block_bytes: Some(filter.stored_bytes),
                });
            }
            self.block += 1;
        }
        None
    }
}

/// Notes every block of `from..=last` as holding every key.
fn note_everything(noted: &mut Vec<(u64, Noted)>, from: u64, last: u64) {
    let mut offset = from;
    while offset <= last {
        noted.push((offset, Noted::Everything));
        offset = (offset / BLOCK_RECORDS + 1) * BLOCK_RECORDS;
    }
}

/// What a decoded read says about one offset.
enum Noted {
    /// A record with this key.
    Key(SubjectProbe),
    /// A batch of this many stored bytes starts here.
    Bytes(u32),
    /// Something here could not be decoded: treat the block as holding
    /// every key.
    Everything,
}

#[cfg(test)]
mod tests;
