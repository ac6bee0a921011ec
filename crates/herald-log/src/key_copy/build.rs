//! Sorting a segment's keyed records by key hash in bounded memory: rows
//! gather in an arena; a full arena is sorted and spilled, lz4-framed, to
//! a run file beside the segment; at the end the runs (or the arena
//! alone, when nothing was spilled) are merged into the `.kcopy` file.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use herald_records::Record;

use super::file::{CopyRows, CopyWriter, Durability, KeyCopy};
use super::rows::{measure, put_row, row_len, ROW_HEAD};
use crate::extent::Extent;

/// Bytes of memory the rows held (and their sort keys) take before they
/// are sorted and spilled.
pub(crate) const ARENA_BYTES: usize = 32 << 20;

/// Rows merged between two looks at the stop flag.
const ROWS_PER_STOP_CHECK: u64 = 4096;

/// A row of the arena: sort key and where it lies.
#[derive(Debug, Clone, Copy)]
struct Slot {
    hash: u32,
    offset: u64,
    start: usize,
    end: usize,
}

/// A spilled run, removed with its holder.
struct RunFile(PathBuf);

impl Drop for RunFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Why a copy was not finished.
#[derive(Debug)]
pub(crate) enum BuildError {
    /// The caller asked it to stop.
    Stopped,
    /// A file could not be written or read.
    Io(std::io::Error),
}

impl From<std::io::Error> for BuildError {
    fn from(e: std::io::Error) -> Self {
        BuildError::Io(e)
    }
}

/// The rows of one segment being sorted.
pub(crate) struct CopyBuilder {
    /// Run files are named this plus a number and `.tmp` (removed at the
    /// next start if a crash leaves them).
    run_prefix: PathBuf,
    /// Bytes the arena and its slots may take.
    limit: usize,
    arena: Vec<u8>,
    slots: Vec<Slot>,
    runs: Vec<RunFile>,
}

impl CopyBuilder {
    /// A builder spilling runs named after `run_prefix`, holding about
    /// `limit` bytes of rows and sort keys in memory (a row larger than
    /// that is held alone).
    pub(crate) fn new(run_prefix: PathBuf, limit: usize) -> Self {
        Self {
            run_prefix,
            limit,
            arena: Vec::new(),
            slots: Vec::new(),
            runs: Vec::new(),
        }
    }

    fn held(&self) -> usize {
        self.arena.len() + self.slots.len() * std::mem::size_of::<Slot>()
    }

    /// Adds `record`, whose key is `key` and hashes to `hash`.
    pub(crate) fn add(
        &mut self,
        hash: u32,
        record: &Record<'_>,
        key: &[u8],
    ) -> std::io::Result<()> {
        let len = row_len(record, key);
        if !self.slots.is_empty() && self.held() + len + std::mem::size_of::<Slot>() > self.limit {
            self.spill()?;
        }
        if self.arena.capacity() == 0 {
            // Once, whole: growing by doubling would pass the limit.
            self.arena
                .reserve_exact(self.limit.min(ARENA_BYTES).max(len));
        }
        let start = self.arena.len();
        put_row(&mut self.arena, hash, record, key);
        self.slots.push(Slot {
            hash,
            offset: record.offset as u64,
            start,
            end: self.arena.len(),
        });
        Ok(())
    }

    fn sort(&mut self) {
        self.slots.sort_unstable_by_key(|s| (s.hash, s.offset));
    }

    fn spill(&mut self) -> std::io::Result<()> {
        self.sort();
        let mut name = self.run_prefix.clone().into_os_string();
        name.push(format!("{}.tmp", self.runs.len()));
        let run = RunFile(PathBuf::from(name));
        // Compressed: a segment of compressed batches may inflate to many
        // times its size, and the runs share the log's disk.
        let file = BufWriter::with_capacity(256 << 10, File::create(&run.0)?);
        let mut out = lz4_flex::frame::FrameEncoder::new(file);
        for slot in &self.slots {
            out.write_all(&self.arena[slot.start..slot.end])?;
        }
        out.finish()
            .map_err(std::io::Error::other)?
            .into_inner()
            .map_err(|e| e.into_error())?;
        self.runs.push(run);
        self.arena.clear();
        self.slots.clear();
        Ok(())
    }

    /// Writes every row added, sorted, to the copy file at `path`
    /// describing the stretch `start..end` of the segment of
    /// `base_offset`, synced if `durability` asks; gives up when `stop`
    /// answers true.
    pub(crate) fn finish(
        mut self,
        path: &Path,
        base_offset: u64,
        start: Extent,
        end: Extent,
        durability: Durability,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), BuildError> {
        let mut writer = CopyWriter::create(path)?;
        if self.runs.is_empty() {
            self.sort();
            for (n, slot) in self.slots.iter().enumerate() {
                if (n as u64).is_multiple_of(ROWS_PER_STOP_CHECK) && stop() {
                    return Err(BuildError::Stopped);
                }
                writer.push(slot.hash, &self.arena[slot.start..slot.end])?;
            }
            return Ok(writer.finish(base_offset, start, end, durability)?);
        }
        if !self.slots.is_empty() {
            self.spill()?;
        }
        self.arena = Vec::new();
        self.slots = Vec::new();
        let mut readers = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            readers.push(RunReader::open(&run.0)?);
        }
        merge_into(&mut readers, &mut writer, stop)?;
        Ok(writer.finish(base_offset, start, end, durability)?)
    }
}

/// Rows in (hash, offset) order, one at a time: a spilled run or a copy.
trait SortedRows {
    /// Moves to the next row; answers its hash and offset, `None` past the
    /// last.
    fn advance(&mut self) -> std::io::Result<Option<(u32, u64)>>;
    /// The current row.
    fn row(&self) -> &[u8];
}

impl SortedRows for CopyRows<'_> {
    fn advance(&mut self) -> std::io::Result<Option<(u32, u64)>> {
        CopyRows::advance(self).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    fn row(&self) -> &[u8] {
        CopyRows::row(self)
    }
}

/// Pushes every row of `readers` to `writer` in (hash, offset) order;
/// gives up when `stop` answers true.
fn merge_into(
    readers: &mut [impl SortedRows],
    writer: &mut CopyWriter,
    stop: &dyn Fn() -> bool,
) -> Result<(), BuildError> {
    let mut heads = BinaryHeap::new();
    for (r, reader) in readers.iter_mut().enumerate() {
        if let Some((hash, offset)) = reader.advance()? {
            heads.push(Reverse((hash, offset, r)));
        }
    }
    let mut merged = 0u64;
    while let Some(Reverse((hash, _, r))) = heads.pop() {
        if merged.is_multiple_of(ROWS_PER_STOP_CHECK) && stop() {
            return Err(BuildError::Stopped);
        }
        merged += 1;
        writer.push(hash, readers[r].row())?;
        if let Some((hash, offset)) = readers[r].advance()? {
            heads.push(Reverse((hash, offset, r)));
        }
    }
    Ok(())
}

/// Writes one copy holding the rows of `copies` (of consecutive stretches
/// of one segment, in order) to `path`, not synced; gives up when `stop`
/// answers true. A damaged block fails it with `InvalidData`.
pub(crate) fn merge_copies(
    copies: &[Arc<KeyCopy>],
    path: &Path,
    stop: &dyn Fn() -> bool,
) -> Result<(), BuildError> {
    let (Some(first), Some(last)) = (copies.first(), copies.last()) else {
        return Ok(());
    };
    let mut writer = CopyWriter::create(path)?;
    let mut readers: Vec<CopyRows<'_>> = copies.iter().map(|c| CopyRows::new(c)).collect();
    merge_into(&mut readers, &mut writer, stop)?;
    Ok(writer.finish(
        first.base_offset,
        first.start,
        last.end,
        Durability::Scratch,
    )?)
}

/// Reads a run file a row at a time.
struct RunReader {
    input: lz4_flex::frame::FrameDecoder<BufReader<File>>,
    /// The current row.
    row: Vec<u8>,
}

impl RunReader {
    fn open(path: &Path) -> std::io::Result<Self> {
        let file = BufReader::with_capacity(64 << 10, File::open(path)?);
        Ok(Self {
            input: lz4_flex::frame::FrameDecoder::new(file),
            row: Vec::new(),
        })
    }
}

impl SortedRows for RunReader {
    fn advance(&mut self) -> std::io::Result<Option<(u32, u64)>> {
        self.row.resize(ROW_HEAD, 0);
        match self.input.read_exact(&mut self.row) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let head = measure(&self.row).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a run row's lengths overflow",
            )
        })?;
        self.row.resize(head.len, 0);
        self.input.read_exact(&mut self.row[ROW_HEAD..])?;
        Ok(Some((head.hash, head.offset)))
    }

    fn row(&self) -> &[u8] {
        &self.row
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_copy::{CopiedRecords, KeyCopy};

    /// Rows of 3,000 records over 97 keys, with values of varied length.
    fn add_rows(builder: &mut CopyBuilder) {
        for n in 0..3000u64 {
            let key = format!("key-{}", n * 31 % 97);
            let value = vec![b'v'; (n % 300) as usize];
            let record = Record::from_parts(
                n as i64,
                1_000 + n as i64,
                Some(key.as_bytes()),
                Some(&value),
                0,
                &[],
            );
            builder
                .add(crc32c::crc32c(key.as_bytes()), &record, key.as_bytes())
                .unwrap();
        }
    }

    #[test]
    fn spilled_runs_merge_into_the_file_sorting_in_memory_writes() {
        let dir = tempfile::tempdir().unwrap();
        let mut whole = CopyBuilder::new(dir.path().join("whole-run-"), usize::MAX);
        add_rows(&mut whole);
        let mut spilling = CopyBuilder::new(dir.path().join("spill-run-"), 4096);
        add_rows(&mut spilling);
        assert!(spilling.runs.len() > 50, "{} runs", spilling.runs.len());
        let end = Extent::new(3000, 1 << 20);
        let never = || false;
        whole
            .finish(
                &dir.path().join("whole.kcopy"),
                0,
                Extent::default(),
                end,
                Durability::Synced,
                &never,
            )
            .unwrap();
        spilling
            .finish(
                &dir.path().join("spill.kcopy"),
                0,
                Extent::default(),
                end,
                Durability::Synced,
                &never,
            )
            .unwrap();
        let a = std::fs::read(dir.path().join("whole.kcopy")).unwrap();
        let b = std::fs::read(dir.path().join("spill.kcopy")).unwrap();
        assert!(a == b, "the two files differ");
        // The runs are gone; every key's records are found, in order.
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 2);
        let copy = KeyCopy::open(&dir.path().join("spill.kcopy")).unwrap();
        let mut scratch = Vec::new();
        for k in 0..97u64 {
            let key = format!("key-{k}");
            let hash = crc32c::crc32c(key.as_bytes());
            let mut found = CopiedRecords::default();
            let mut block = copy.first_block(hash);
            loop {
                let (_, more) = copy
                    .read_block(block, hash, 100..2900, &mut found, &mut scratch)
                    .unwrap();
                if !more {
                    break;
                }
                block += 1;
            }
            let offsets: Vec<u64> = found
                .iter()
                .filter(|r| r.key == key.as_bytes())
                .map(|r| r.offset)
                .collect();
            let expected: Vec<u64> = (100..2900u64).filter(|n| n * 31 % 97 == k).collect();
            assert_eq!(offsets, expected, "{key}");
            for r in found.iter() {
                assert_eq!(r.timestamp, 1_000 + r.offset as i64);
                assert_eq!(r.value.map(<[u8]>::len), Some((r.offset % 300) as usize));
            }
        }
    }
}
