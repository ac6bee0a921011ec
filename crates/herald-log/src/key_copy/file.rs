//! The `.kcopy` (and `.kpart`) file: the keyed records of a segment, or of
//! a stretch of one, as rows (`rows.rs`) sorted by key hash and offset, in lz4 blocks of about
//! [`BLOCK_RAW_BYTES`], with a directory naming each block's hash range.
//!
//! Layout: magic; the blocks; the directory, [`DIR_ENTRY`] bytes per
//! block (first hash, last hash, position, compressed length, raw length,
//! CRC-32C of the compressed bytes); a trailer (the segment's base offset,
//! the stretch copied as two extents, rows, blocks, where the directory
//! starts, and a CRC-32C of directory and trailer). Written once under a temporary name and
//! renamed into place, never changed after: a reader maps it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::rows::{row_head, u32_at, u64_at, CopiedRecords};
use crate::extent::Extent;

// Version 1 (no start extent) is not read: such a copy is built again.
const MAGIC: &[u8; 8] = b"HRLDKCP2";
/// Raw bytes of rows a block holds, about (a longer row has a block of
/// its own): a lookup inflates a block or two per segment.
pub(crate) const BLOCK_RAW_BYTES: usize = 16 << 10;
const DIR_ENTRY: usize = 28;
const TRAILER: usize = 56;

/// One block as the directory names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BlockEntry {
    first_hash: u32,
    last_hash: u32,
    position: u64,
    compressed: u32,
    raw: u32,
    crc: u32,
}

impl BlockEntry {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.first_hash.to_le_bytes());
        out.extend_from_slice(&self.last_hash.to_le_bytes());
        out.extend_from_slice(&self.position.to_le_bytes());
        out.extend_from_slice(&self.compressed.to_le_bytes());
        out.extend_from_slice(&self.raw.to_le_bytes());
        out.extend_from_slice(&self.crc.to_le_bytes());
    }

    fn read(bytes: &[u8]) -> Self {
        Self {
            first_hash: u32_at(bytes, 0),
            last_hash: u32_at(bytes, 4),
            position: u64_at(bytes, 8),
            compressed: u32_at(bytes, 16),
            raw: u32_at(bytes, 20),
            crc: u32_at(bytes, 24),
        }
    }
}

/// Writes a `.kcopy` file from rows given in sorted order.
pub(crate) struct CopyWriter {
    out: BufWriter<File>,
    position: u64,
    block: Vec<u8>,
    first_hash: u32,
    last_hash: u32,
    directory: Vec<u8>,
    blocks: u64,
    rows: u64,
}

impl CopyWriter {
    /// Starts the file at `path` (created or truncated).
    pub(crate) fn create(path: &Path) -> std::io::Result<Self> {
        let mut out = BufWriter::new(File::create(path)?);
        out.write_all(MAGIC)?;
        Ok(Self {
            out,
            position: MAGIC.len() as u64,
            block: Vec::with_capacity(BLOCK_RAW_BYTES * 2),
            first_hash: 0,
            last_hash: 0,
            directory: Vec::new(),
            blocks: 0,
            rows: 0,
        })
    }

    /// Adds one whole row (rows come sorted by hash, then offset).
    pub(crate) fn push(&mut self, hash: u32, row: &[u8]) -> std::io::Result<()> {
        if !self.block.is_empty() && self.block.len() + row.len() > BLOCK_RAW_BYTES {
            self.flush_block()?;
        }
        if self.block.is_empty() {
            self.first_hash = hash;
        }
        self.last_hash = hash;
        self.block.extend_from_slice(row);
        self.rows += 1;
        Ok(())
    }

    fn flush_block(&mut self) -> std::io::Result<()> {
        let compressed = lz4_flex::block::compress(&self.block);
        let entry = BlockEntry {
            first_hash: self.first_hash,
            last_hash: self.last_hash,
            position: self.position,
            compressed: compressed.len() as u32,
            raw: self.block.len() as u32,
            crc: crc32c::crc32c(&compressed),
        };
        self.out.write_all(&compressed)?;
        self.position += compressed.len() as u64;
        entry.put(&mut self.directory);
        self.blocks += 1;
        self.block.clear();
        Ok(())
    }

    /// Writes the directory and the trailer, describing the stretch
    /// `start..end` of the segment of `base_offset`, and syncs the file
    /// if `durability` asks.
    pub(crate) fn finish(
        mut self,
        base_offset: u64,
        start: Extent,
        end: Extent,
        durability: Durability,
    ) -> std::io::Result<()> {
        if !self.block.is_empty() {
            self.flush_block()?;
        }
        let mut tail = std::mem::take(&mut self.directory);
        tail.extend_from_slice(&base_offset.to_le_bytes());
        tail.extend_from_slice(&start.pack().to_le_bytes());
        tail.extend_from_slice(&end.pack().to_le_bytes());
        tail.extend_from_slice(&self.rows.to_le_bytes());
        tail.extend_from_slice(&self.blocks.to_le_bytes());
        tail.extend_from_slice(&self.position.to_le_bytes());
        let crc = crc32c::crc32c(&tail);
        tail.extend_from_slice(&crc.to_le_bytes());
        tail.extend_from_slice(&[0; 4]);
        self.out.write_all(&tail)?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        match durability {
            Durability::Synced => file.sync_all(),
            Durability::Scratch => Ok(()),
        }
    }
}

/// Whether a copy file must outlive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Synced before it is put in place: a whole segment's copy, adopted
    /// after a restart.
    Synced,
    /// Not synced: a part, deleted at every start.
    Scratch,
}

/// A block whose bytes do not match the directory: the copy is damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("block {block} of a key-sorted copy is damaged")]
pub(crate) struct DamagedBlock {
    pub(crate) block: usize,
}

/// An opened `.kcopy` or `.kpart` file.
pub(crate) struct KeyCopy {
    map: Mmap,
    /// Where it lies (deleted from there when found damaged).
    pub(crate) path: PathBuf,
    /// Base offset of the segment it copies.
    pub(crate) base_offset: u64,
    /// Where in the segment the stretch copied starts (the segment's start
    /// for a whole copy).
    pub(crate) start: Extent,
    /// Where it ends (the sealed segment's end for a whole copy).
    pub(crate) end: Extent,
    blocks: usize,
    directory: usize,
}

impl KeyCopy {
    /// Opens the file at `path` if it is whole (magic, directory and
    /// trailer intact); the blocks are checked as they are read.
    pub(crate) fn open(path: &Path) -> Option<Self> {
        let file = File::open(path).ok()?;
        // SAFETY: the file is replaced only by rename, never written in
        // place, so the mapped bytes do not change under the reader.
        let map = unsafe { Mmap::map(&file) }.ok()?;
        let data: &[u8] = &map;
        if data.len() < MAGIC.len() + TRAILER || &data[..MAGIC.len()] != MAGIC {
            return None;
        }
        let trailer = data.len() - TRAILER;
        let blocks = usize::try_from(u64_at(data, trailer + 32)).ok()?;
        let directory = usize::try_from(u64_at(data, trailer + 40)).ok()?;
        if directory.checked_add(blocks.checked_mul(DIR_ENTRY)?)? != trailer
            || directory < MAGIC.len()
        {
            return None;
        }
        if crc32c::crc32c(&data[directory..trailer + 48]) != u32_at(data, trailer + 48) {
            return None;
        }
        let start = Extent::unpack(u64_at(data, trailer + 8));
        let end = Extent::unpack(u64_at(data, trailer + 16));
        if start.records > end.records || start.bytes > end.bytes {
            return None;
        }
        Some(Self {
            path: path.to_owned(),
            base_offset: u64_at(data, trailer),
            start,
            end,
            blocks,
            directory,
            map,
        })
    }

    /// Bytes of the file.
    pub(crate) fn file_bytes(&self) -> u64 {
        self.map.len() as u64
    }

    /// The offsets copied.
    pub(crate) fn offsets(&self) -> std::ops::Range<u64> {
        self.base_offset + u64::from(self.start.records)
            ..self.base_offset + u64::from(self.end.records)
    }

    fn entry(&self, block: usize) -> BlockEntry {
        let at = self.directory + block * DIR_ENTRY;
        BlockEntry::read(&self.map[at..at + DIR_ENTRY])
    }

    /// The first block that can hold rows of `hash` (blocks are sorted,
    /// and a hash's rows may run on across several); the block count if
    /// none can.
    pub(crate) fn first_block(&self, hash: u32) -> usize {
        let (mut low, mut high) = (0, self.blocks);
        while low < high {
            let mid = (low + high) / 2;
            if self.entry(mid).last_hash < hash {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }

    /// Adds to `found` the rows of block `block` of key hash `hash` with
    /// offsets in `from..to`, in offset order; `scratch` holds the
    /// inflated block. Answers the bytes inflated and whether the next
    /// block may hold more of the hash (`false` also past the last block
    /// or before a block of later hashes).
    pub(crate) fn read_block(
        &self,
        block: usize,
        hash: u32,
        range: std::ops::Range<u64>,
        found: &mut CopiedRecords,
        scratch: &mut Vec<u8>,
    ) -> Result<(usize, bool), DamagedBlock> {
        if block >= self.blocks || self.entry(block).first_hash > hash {
            return Ok((0, false));
        }
        let inflated = self.inflate(block, scratch)?;
        let damaged = DamagedBlock { block };
        let mut rest = scratch.as_slice();
        while !rest.is_empty() {
            let head = row_head(rest).ok_or(damaged)?;
            let (row, after) = rest.split_at(head.len);
            rest = after;
            if head.hash > hash {
                return Ok((inflated, false));
            }
            if head.hash == hash && range.contains(&head.offset) {
                found.push_row(row);
            }
        }
        let more = block + 1 < self.blocks && self.entry(block + 1).first_hash <= hash;
        Ok((inflated, more))
    }

    /// Checks block `block` against the directory and inflates it into
    /// `scratch`; answers its raw length.
    fn inflate(&self, block: usize, scratch: &mut Vec<u8>) -> Result<usize, DamagedBlock> {
        let entry = self.entry(block);
        let damaged = DamagedBlock { block };
        let start = usize::try_from(entry.position).map_err(|_| damaged)?;
        let end = start
            .checked_add(entry.compressed as usize)
            .filter(|&end| end <= self.directory)
            .ok_or(damaged)?;
        // lz4 expands at most 255-fold: a larger raw length is not one
        // this file's writer recorded.
        let raw = entry.raw as usize;
        if raw
            > (entry.compressed as usize)
                .saturating_mul(255)
                .saturating_add(16)
        {
            return Err(damaged);
        }
        let compressed = &self.map[start..end];
        if crc32c::crc32c(compressed) != entry.crc {
            return Err(damaged);
        }
        scratch.clear();
        scratch.resize(raw, 0);
        let inflated =
            lz4_flex::block::decompress_into(compressed, scratch).map_err(|_| damaged)?;
        if inflated != raw {
            return Err(damaged);
        }
        Ok(inflated)
    }

    /// Bytes of the segment the stretch copied spans.
    pub(crate) fn span(&self) -> u32 {
        self.end.bytes - self.start.bytes
    }
}

/// Reads a copy's rows in order, a block at a time (to merge copies).
pub(crate) struct CopyRows<'a> {
    copy: &'a KeyCopy,
    /// The next block to inflate.
    next_block: usize,
    block: Vec<u8>,
    /// Where the current row starts in `block`, and its length.
    at: usize,
    len: usize,
}

impl<'a> CopyRows<'a> {
    pub(crate) fn new(copy: &'a KeyCopy) -> Self {
        Self {
            copy,
            next_block: 0,
            block: Vec::new(),
            at: 0,
            len: 0,
        }
    }

    /// Moves to the next row; answers its hash and offset, `None` past the
    /// last.
    pub(crate) fn advance(&mut self) -> Result<Option<(u32, u64)>, DamagedBlock> {
        self.at += self.len;
        self.len = 0;
        while self.at == self.block.len() {
            if self.next_block == self.copy.blocks {
                return Ok(None);
            }
            self.copy.inflate(self.next_block, &mut self.block)?;
            self.next_block += 1;
            self.at = 0;
        }
        let damaged = DamagedBlock {
            block: self.next_block - 1,
        };
        let head = row_head(&self.block[self.at..]).ok_or(damaged)?;
        self.len = head.len;
        Ok(Some((head.hash, head.offset)))
    }

    /// The current row.
    pub(crate) fn row(&self) -> &[u8] {
        &self.block[self.at..self.at + self.len]
    }
}
