//! A partition's log seen as a Raft log: entry `i` is the `i - first`-th
//! batch from the anchor on. The log store and the state machine share
//! this view, so that installing a snapshot and purging keep it in step.
//!
//! The numbering lives in memory: one position (offset and term, 16 bytes)
//! per entry still stored, rebuilt on open by walking the batch headers
//! from the anchor. That is what lets the Raft log and the partition's log
//! be one write: nothing else is stored per entry.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use herald_log::{Log, ValidBatch};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::entry_codec;
use crate::meta::{stored_vote, vote_of, Anchor, RaftMeta, StoredLogId};
use crate::types::{log_id, Entry, LogId, Placed, Vote};
use openraft::entry::RaftEntry;

/// Where one entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    offset: u64,
    term: u64,
}

/// The numbering, and the persisted facts beside it.
#[derive(Debug)]
struct State {
    /// Raft index of `entries[0]` (of the next entry when empty and
    /// anchored).
    first_index: u64,
    entries: VecDeque<Position>,
    meta: RaftMeta,
}

impl State {
    fn last_index(&self) -> Option<u64> {
        (!self.entries.is_empty()).then(|| self.first_index + self.entries.len() as u64 - 1)
    }

    fn position(&self, index: u64) -> Option<Position> {
        let at = index.checked_sub(self.first_index)?;
        self.entries.get(usize::try_from(at).ok()?).copied()
    }

    /// True while any index may come first: no entry stored, none purged.
    fn unnumbered(&self) -> bool {
        self.entries.is_empty() && self.meta.purged.is_none()
    }
}

/// A partition's log with its Raft numbering. Appends go through
/// [`RaftLog::append`] only (openraft's single writer).
#[derive(Debug)]
pub struct RaftLog {
    log: Arc<Log>,
    dir: PathBuf,
    state: Mutex<State>,
    /// The offset below which the replica wants its entries gone (a
    /// committed DeleteRecords, retention): what its compaction works
    /// towards, through a snapshot and openraft's purge.
    compaction: watch::Sender<u64>,
    /// The entry the next snapshot is to end at, if not the last applied:
    /// a snapshot ends where the purge it allows does.
    snapshot_upto: Mutex<Option<LogId>>,
    /// `meta.deleted_before`, for readers on every fetch without the lock.
    deleted_before: std::sync::atomic::AtomicU64,
    /// Whether appended entries count as stored once written, before they
    /// are flushed (see [`RaftLog::set_write_caching`]).
    write_caching: std::sync::atomic::AtomicBool,
}

fn io_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl RaftLog {
    /// The Raft view of `log`, whose facts are kept in `dir` (the
    /// partition's directory). Numbers every batch from the anchor on.
    pub fn open(log: Arc<Log>, dir: &Path) -> io::Result<RaftLog> {
        let meta = RaftMeta::read(dir)?;
        let mut state = State {
            first_index: 0,
            entries: VecDeque::new(),
            meta,
        };
        let end = log.high_watermark();
        if let Some(anchor) = state.meta.anchor {
            // A purge writes its anchor before it moves the log start: a
            // crash in between leaves batches below the anchor to drop.
            if log.log_start_offset() < anchor.offset && anchor.offset <= end {
                log.truncate_before(anchor.offset).map_err(io_error)?;
            }
            if log.log_start_offset() > anchor.offset {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the log starts at {} past the Raft anchor at offset {}: records were deleted outside Raft",
                        log.log_start_offset(),
                        anchor.offset
                    ),
                ));
            }
            state.first_index = anchor.index;
            let mut offset = anchor.offset;
            while offset < end {
                let slice = log.read(offset, 1 << 20).map_err(io_error)?;
                for batch in herald_records::batches(&slice.bytes) {
                    let batch = batch.map_err(io_error)?;
                    let header = herald_records::BatchHeader::parse(batch)
                        .ok_or_else(|| io_error("stored batch too short"))?;
                    state.entries.push_back(Position {
                        offset: header.base_offset() as u64,
                        term: u64::try_from(header.partition_leader_epoch()).unwrap_or(0),
                    });
                }
                offset = slice.next_offset;
            }
        } else if end > log.log_start_offset() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the partition holds records but no Raft numbering: it was not written by Raft",
            ));
        }
        let compaction = watch::Sender::new(state.meta.deleted_before.unwrap_or(0));
        Ok(RaftLog {
            log,
            dir: dir.to_owned(),
            deleted_before: std::sync::atomic::AtomicU64::new(
                state.meta.deleted_before.unwrap_or(0),
            ),
            state: Mutex::new(state),
            compaction,
            snapshot_upto: Mutex::new(None),
            write_caching: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The partition's log.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// Write caching (Redpanda's name for it): with `on`, an appended
    /// entry counts towards Raft's commit as soon as it is written to the
    /// log (in the page cache), not once fsynced; the log's own flush
    /// policy and the operating system write it back. A process crash
    /// loses nothing, but a power loss on a majority of the replicas at
    /// once can lose acknowledged records. Off (fsync before counting) by
    /// default.
    pub fn set_write_caching(&self, on: bool) {
        self.write_caching
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether write caching is on (see [`RaftLog::set_write_caching`]).
    pub fn write_caching(&self) -> bool {
        self.write_caching
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The offset readers start at: the log's own start, or past it where
    /// a committed DeleteRecords moved it and the entries below are not
    /// purged yet (or the cut falls inside a batch, which stays whole).
    pub fn log_start(&self) -> u64 {
        let deleted = self
            .deleted_before
            .load(std::sync::atomic::Ordering::Acquire);
        self.log.log_start_offset().max(deleted)
    }

    /// Applies a committed DeleteRecords: readers see nothing below
    /// `offset` from now on (durably), and compaction is asked to drop
    /// the entries below it.
    pub fn delete_before(&self, offset: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        if state.meta.deleted_before.is_some_and(|d| d >= offset) {
            return Ok(());
        }
        let mut meta = state.meta.clone();
        meta.deleted_before = Some(offset);
        meta.write(&self.dir)?;
        state.meta = meta;
        self.deleted_before
            .fetch_max(offset, std::sync::atomic::Ordering::AcqRel);
        drop(state);
        self.compact_before(offset);
        Ok(())
    }

    /// Asks compaction to drop the entries wholly below `offset` (only
    /// ever further).
    pub fn compact_before(&self, offset: u64) {
        self.compaction.send_if_modified(|target| {
            let further = offset > *target;
            *target = (*target).max(offset);
            further
        });
    }

    /// Where compaction is asked to drop entries below, as it moves.
    pub fn compaction_target(&self) -> watch::Receiver<u64> {
        self.compaction.subscribe()
    }

    /// The last stored entry whose batch ends at or below `offset`: the
    /// furthest a purge may go for the log to start at or below `offset`.
    pub fn last_entry_ending_by(&self, offset: u64) -> Option<LogId> {
        let state = self.state.lock();
        let starts_at_or_below = state.entries.partition_point(|p| p.offset <= offset);
        let whole =
            if starts_at_or_below == state.entries.len() && self.log.high_watermark() <= offset {
                starts_at_or_below
            } else {
                starts_at_or_below.checked_sub(1)?
            };
        let last = whole.checked_sub(1)?;
        let position = state.entries.get(last)?;
        Some(log_id(position.term, state.first_index + last as u64))
    }

    /// Has the next snapshot end at `upto` rather than the last applied
    /// entry (`None`: the last applied).
    pub fn set_snapshot_upto(&self, upto: Option<LogId>) {
        *self.snapshot_upto.lock() = upto;
    }

    /// Where the next snapshot is to end, if not at the last applied
    /// entry.
    pub fn snapshot_upto(&self) -> Option<LogId> {
        *self.snapshot_upto.lock()
    }

    /// Last log id purged, and last stored (or purged).
    pub fn log_state(&self) -> (Option<LogId>, Option<LogId>) {
        let state = self.state.lock();
        let purged = state.meta.purged.map(StoredLogId::log_id);
        let last = match state.last_index() {
            Some(index) => state.position(index).map(|p| log_id(p.term, index)),
            None => purged,
        };
        (purged, last)
    }

    /// The vote stored.
    pub fn vote(&self) -> Option<Vote> {
        self.state.lock().meta.vote.map(vote_of)
    }

    /// Stores `vote`, durably.
    pub fn save_vote(&self, vote: &Vote) -> io::Result<()> {
        self.update_meta(|meta| meta.vote = Some(stored_vote(vote)))
    }

    /// The committed log id stored.
    pub fn committed(&self) -> Option<LogId> {
        self.state.lock().meta.committed.map(StoredLogId::log_id)
    }

    /// Stores the committed log id.
    pub fn save_committed(&self, committed: Option<LogId>) -> io::Result<()> {
        self.update_meta(|meta| meta.committed = committed.as_ref().map(StoredLogId::from))
    }

    fn update_meta(&self, change: impl FnOnce(&mut RaftMeta)) -> io::Result<()> {
        let mut state = self.state.lock();
        let mut meta = state.meta.clone();
        change(&mut meta);
        meta.write(&self.dir)?;
        state.meta = meta;
        Ok(())
    }

    /// Appends `entries` (consecutive, following the last one) to the
    /// log; they are readable on return. Returns the end offset to flush
    /// through for them to be durable.
    pub fn append(&self, entries: impl IntoIterator<Item = Entry>) -> io::Result<u64> {
        let mut state = self.state.lock();
        for entry in entries {
            let index = entry.index();
            let expected = state.first_index + state.entries.len() as u64;
            if state.unnumbered() {
                let anchor = Anchor {
                    index,
                    offset: self.log.high_watermark(),
                };
                let mut meta = state.meta.clone();
                meta.anchor = Some(anchor);
                meta.write(&self.dir)?;
                state.meta = meta;
                state.first_index = index;
            } else if index != expected {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("entry {index} appended where entry {expected} belongs"),
                ));
            }
            let term = entry.log_id.leader_id.term;
            let epoch = i32::try_from(term)
                .map_err(|_| io_error(format!("term {term} exceeds a batch's leader epoch")))?;
            let bytes = entry_codec::encode(&entry)?;
            // Raft's own entries are control batches; data entries were
            // validated as client batches when they were produced.
            let valid = ValidBatch::broker_written(&bytes).map_err(io_error)?;
            let appended = self.log.append_in_epoch(valid, epoch).map_err(io_error)?;
            if let openraft::EntryPayload::Normal(batch) = &entry.payload {
                batch.placed(Placed {
                    base_offset: appended.base_offset,
                    last_offset: appended.last_offset,
                });
            }
            state.entries.push_back(Position {
                offset: appended.base_offset,
                term,
            });
        }
        Ok(self.log.high_watermark())
    }

    /// Entries with indexes in `start..end` that are stored, in order.
    pub fn entries(&self, start: u64, end: u64) -> io::Result<Vec<Entry>> {
        let (first_index, positions): (u64, Vec<Position>) = {
            let state = self.state.lock();
            let start = start.max(state.first_index);
            let Some(last) = state.last_index() else {
                return Ok(Vec::new());
            };
            let end = end.min(last + 1);
            if start >= end {
                return Ok(Vec::new());
            }
            let positions = (start..end).filter_map(|i| state.position(i)).collect();
            (start, positions)
        };
        let mut out = Vec::with_capacity(positions.len());
        let mut pending: Option<(Bytes, usize)> = None;
        for (i, position) in positions.iter().enumerate() {
            let batch = loop {
                if let Some((bytes, at)) = &mut pending {
                    if let Some(batch) = take_batch(bytes, at, position.offset)? {
                        break batch;
                    }
                }
                let slice = self.log.read(position.offset, 1 << 20).map_err(io_error)?;
                if slice.bytes.is_empty() {
                    return Err(io_error(format!(
                        "entry {} at offset {} is missing from the log",
                        first_index + i as u64,
                        position.offset
                    )));
                }
                pending = Some((slice.bytes, 0));
            };
            out.push(entry_codec::decode(batch, first_index + i as u64)?);
        }
        Ok(out)
    }

    /// Removes the entries after `last` (all of them if `None`).
    pub fn truncate_after(&self, last: Option<u64>) -> io::Result<()> {
        let mut state = self.state.lock();
        let keep = match last {
            Some(index) => index + 1,
            None => 0,
        };
        let keep = keep.max(state.first_index);
        let Some(cut) = state.position(keep) else {
            return Ok(());
        };
        self.log.truncate_after(cut.offset).map_err(io_error)?;
        let kept = (keep - state.first_index) as usize;
        state.entries.truncate(kept);
        Ok(())
    }

    /// Forgets the entries up to `upto` (they may be gone already) and
    /// moves the log start past them.
    pub fn purge(&self, upto: LogId) -> io::Result<()> {
        let mut state = self.state.lock();
        let next = upto.index + 1;
        while state.first_index < next && !state.entries.is_empty() {
            state.entries.pop_front();
            state.first_index += 1;
        }
        state.first_index = state.first_index.max(next);
        let offset = match state.entries.front() {
            Some(position) => position.offset,
            None => self.log.high_watermark(),
        };
        let mut meta = state.meta.clone();
        meta.purged = Some(StoredLogId::from(&upto));
        meta.anchor = Some(Anchor {
            index: state.first_index,
            offset,
        });
        meta.write(&self.dir)?;
        state.meta = meta;
        drop(state);
        self.log.truncate_before(offset).map_err(io_error)?;
        Ok(())
    }

    /// Whether the entry `id` is stored (same index, same term).
    pub fn contains(&self, id: &LogId) -> bool {
        self.state
            .lock()
            .position(id.index)
            .is_some_and(|p| p.term == id.leader_id.term)
    }

    /// Empties the log and restarts it after `last` at `next_offset`: a
    /// follower installing a snapshot of entries it does not have.
    pub fn restart_after(&self, last: LogId, next_offset: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        let mut meta = state.meta.clone();
        meta.purged = Some(StoredLogId::from(&last));
        meta.anchor = Some(Anchor {
            index: last.index + 1,
            offset: next_offset,
        });
        meta.write(&self.dir)?;
        self.log.reset(next_offset).map_err(io_error)?;
        state.meta = meta;
        state.entries.clear();
        state.first_index = last.index + 1;
        Ok(())
    }

    /// The offset following entry `index` (where the next one starts, or
    /// the log's end after the last): what readers may see once it is
    /// committed. `None` if it is not stored.
    pub fn end_offset_of(&self, index: u64) -> Option<u64> {
        let state = self.state.lock();
        state.position(index)?;
        Some(match state.position(index + 1) {
            Some(next) => next.offset,
            None => self.log.high_watermark(),
        })
    }

    /// Where the records of data entry `index` are.
    pub fn placed(&self, index: u64) -> Option<Placed> {
        let base_offset = self.state.lock().position(index)?.offset;
        let end = self.end_offset_of(index)?;
        Some(Placed {
            base_offset,
            last_offset: end.saturating_sub(1),
        })
    }
}

/// The batch at `offset` from `bytes` (whole batches read from the log,
/// `at` the position of the next one), if `bytes` holds it.
fn take_batch(bytes: &Bytes, at: &mut usize, offset: u64) -> io::Result<Option<Bytes>> {
    while *at < bytes.len() {
        let rest = &bytes[*at..];
        let header = herald_records::BatchHeader::parse(rest)
            .ok_or_else(|| io_error("stored batch too short"))?;
        let len = header
            .total_bytes()
            .filter(|&len| len <= rest.len())
            .ok_or_else(|| io_error("stored batch runs past the read"))?;
        let base = header.base_offset() as u64;
        let batch = bytes.slice(*at..*at + len);
        *at += len;
        if base == offset {
            return Ok(Some(batch));
        }
        if base > offset {
            break;
        }
    }
    Ok(None)
}
