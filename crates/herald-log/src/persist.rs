//! Small files written beside the segments: the index of a sealed segment and
//! the log's checkpoint. Both are written to a temporary file, synced, and
//! renamed into place, so a crash leaves either the old or the new version;
//! both carry a CRC so a damaged one is detected and rebuilt, never trusted.

use std::fs;
use std::io;
use std::path::Path;

use crate::durable_file;
use crate::extent::Extent;

const INDEX_MAGIC: &[u8; 8] = b"HRLDIDX1";
const CHECKPOINT_MAGIC: &[u8; 8] = b"HRLDCKP1";
const LOG_START_MAGIC: &[u8; 8] = b"HRLDSTA1";

/// Writes `contents` + CRC-32C to `path` atomically.
fn write_atomically(path: &Path, mut contents: Vec<u8>) -> io::Result<()> {
    let crc = crc32c::crc32c(&contents);
    contents.extend_from_slice(&crc.to_be_bytes());
    Ok(durable_file::write_atomically(path, &contents)?)
}

/// Reads a file written by [`write_atomically`]; `None` if missing or damaged.
fn read_checked(path: &Path, magic: &[u8; 8]) -> Option<Vec<u8>> {
    let mut data = fs::read(path).ok()?;
    if data.len() < magic.len() + 4 || &data[..magic.len()] != magic {
        return None;
    }
    let body_len = data.len() - 4;
    let stored = u32::from_be_bytes(data[body_len..].try_into().ok()?);
    if crc32c::crc32c(&data[..body_len]) != stored {
        return None;
    }
    data.truncate(body_len);
    data.drain(..magic.len());
    Some(data)
}

pub(crate) use crate::durable_file::sync_dir;

/// Contents of a sealed segment's index file.
pub(crate) struct IndexFile {
    pub(crate) base_offset: u64,
    pub(crate) end: Extent,
    pub(crate) interval_bytes: u32,
    pub(crate) entries: Vec<u64>,
    pub(crate) max_timestamps: Vec<i64>,
}

impl IndexFile {
    /// Writes the index atomically.
    pub(crate) fn write(&self, path: &Path) -> io::Result<()> {
        let mut out = Vec::with_capacity(40 + self.entries.len() * 16);
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&self.end.pack().to_be_bytes());
        out.extend_from_slice(&self.interval_bytes.to_be_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for entry in &self.entries {
            out.extend_from_slice(&entry.to_be_bytes());
        }
        for ts in &self.max_timestamps {
            out.extend_from_slice(&ts.to_be_bytes());
        }
        write_atomically(path, out)
    }

    /// Reads an index file; `None` if missing, damaged or inconsistent.
    pub(crate) fn read(path: &Path) -> Option<Self> {
        let body = read_checked(path, INDEX_MAGIC)?;
        let u64_at = |at: usize| {
            body.get(at..at + 8)
                .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
        };
        let u32_at = |at: usize| {
            body.get(at..at + 4)
                .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
        };
        let base_offset = u64_at(0)?;
        let end = Extent::unpack(u64_at(8)?);
        let interval_bytes = u32_at(16)?;
        let count = u32_at(20)? as usize;
        if body.len() != 24 + count * 16 {
            return None;
        }
        let entries = (0..count)
            .map(|i| u64_at(24 + i * 8))
            .collect::<Option<Vec<_>>>()?;
        let times_at = 24 + count * 8;
        let max_timestamps = (0..count)
            .map(|i| u64_at(times_at + i * 8).map(|v| v as i64))
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            base_offset,
            end,
            interval_bytes,
            entries,
            max_timestamps,
        })
    }
}

/// The log's checkpoint: how far the log is known durable, and whether it
/// was closed cleanly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Checkpoint {
    /// Every batch below this offset was on stable storage when written.
    pub(crate) recovery_point: u64,
    /// The log was closed cleanly and the active segment's index is on disk.
    pub(crate) clean: bool,
}

impl Checkpoint {
    /// File name inside the log directory.
    pub(crate) const FILE: &'static str = "checkpoint";

    /// Writes the checkpoint atomically.
    pub(crate) fn write(&self, dir: &Path) -> io::Result<()> {
        let mut out = Vec::with_capacity(24);
        out.extend_from_slice(CHECKPOINT_MAGIC);
        out.extend_from_slice(&self.recovery_point.to_be_bytes());
        out.push(u8::from(self.clean));
        write_atomically(&dir.join(Self::FILE), out)
    }

    /// Reads the checkpoint; a missing or damaged one reads as "nothing known
    /// durable, not clean", which only makes recovery scan more.
    pub(crate) fn read(dir: &Path) -> Self {
        let Some(body) = read_checked(&dir.join(Self::FILE), CHECKPOINT_MAGIC) else {
            return Self::default();
        };
        match body.as_slice() {
            [point @ .., clean] if point.len() == 8 => Self {
                recovery_point: u64::from_be_bytes(point.try_into().expect("8 bytes")),
                clean: *clean == 1,
            },
            _ => Self::default(),
        }
    }
}

/// The log start offset set by a truncation below the first segment's end
/// (Kafka's DeleteRecords): offsets below it are refused to readers, and the
/// segments wholly below it are deleted by maintenance. Kept in a file of its
/// own, written before the new start is served, so a restart never brings
/// truncated records back.
pub(crate) struct LogStartFile;

impl LogStartFile {
    /// File name inside the log directory.
    pub(crate) const FILE: &'static str = "log-start-offset";

    /// Writes `offset` atomically.
    pub(crate) fn write(dir: &Path, offset: u64) -> io::Result<()> {
        let mut out = Vec::with_capacity(20);
        out.extend_from_slice(LOG_START_MAGIC);
        out.extend_from_slice(&offset.to_be_bytes());
        write_atomically(&dir.join(Self::FILE), out)
    }

    /// The stored offset; 0 when there is none. A damaged file is an error:
    /// reading it as 0 would silently bring truncated records back.
    pub(crate) fn read(dir: &Path) -> io::Result<u64> {
        let path = dir.join(Self::FILE);
        if !path.exists() {
            return Ok(0);
        }
        read_checked(&path, LOG_START_MAGIC)
            .and_then(|body| body.try_into().ok().map(u64::from_be_bytes))
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "damaged log start offset file")
            })
    }
}
