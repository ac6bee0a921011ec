//! Files of sealed chunks: 64 consecutive block filters (65,536 offsets)
//! in one file beside the partition's segments, named by the chunk's first
//! offset like a segment (`<offset:020>.subjects`).
//!
//! Layout, little-endian: magic `HSBF`, version (u32), chunk number (u64),
//! blocks (u32), filter bytes per block (u32), probes (u32), reserved (u32);
//! then per block its stored bytes (u32) and its bits; then a CRC-32C of
//! everything before it. A file is written aside and renamed into place,
//! without an fsync: it is derived data, and a file that a crash damaged
//! fails its CRC and is rebuilt from the log.

use std::fs;
use std::path::{Path, PathBuf};

use super::bloom::{BlockFilter, FILTER_BYTES, PROBES};

/// Blocks per chunk file.
pub(crate) const CHUNK_BLOCKS: usize = 64;
const MAGIC: &[u8; 4] = b"HSBF";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 32;
const BLOCK_BYTES: usize = 4 + FILTER_BYTES;
/// Size of every chunk file.
pub(crate) const FILE_BYTES: usize = HEADER_BYTES + CHUNK_BLOCKS * BLOCK_BYTES + 4;
const SUFFIX: &str = ".subjects";

/// The path of chunk `chunk`'s file in `dir`.
pub(crate) fn path(dir: &Path, chunk: u64) -> PathBuf {
    let first_offset = chunk * CHUNK_BLOCKS as u64 * super::BLOCK_RECORDS;
    dir.join(format!("{first_offset:020}{SUFFIX}"))
}

/// Chunk numbers of the chunk files in `dir`, ascending. Names that do
/// not parse are left alone.
pub(crate) fn list(dir: &Path) -> std::io::Result<Vec<u64>> {
    let per_chunk = CHUNK_BLOCKS as u64 * super::BLOCK_RECORDS;
    let mut chunks = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(SUFFIX)) else {
            continue;
        };
        if let Ok(first_offset) = stem.parse::<u64>() {
            if stem.len() == 20 && first_offset % per_chunk == 0 {
                chunks.push(first_offset / per_chunk);
            }
        }
    }
    chunks.sort_unstable();
    Ok(chunks)
}

/// The bytes of chunk `chunk`'s file holding `blocks` (fewer than
/// `CHUNK_BLOCKS` are padded with empty blocks).
pub(crate) fn encode(chunk: u64, blocks: &[BlockFilter]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FILE_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&chunk.to_le_bytes());
    out.extend_from_slice(&(CHUNK_BLOCKS as u32).to_le_bytes());
    out.extend_from_slice(&(FILTER_BYTES as u32).to_le_bytes());
    out.extend_from_slice(&PROBES.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let empty = BlockFilter::default();
    for i in 0..CHUNK_BLOCKS {
        let block = blocks.get(i).unwrap_or(&empty);
        out.extend_from_slice(&block.stored_bytes.to_le_bytes());
        out.extend_from_slice(&block.bits);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why a chunk file was not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChunkFileError {
    /// Reading it failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// Its size, header or CRC is not that of a chunk file of this
    /// version for this chunk.
    #[error("{path} is not a valid subject filter file: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: &'static str,
    },
}

/// The blocks of `bytes`, the content of chunk `chunk`'s file.
pub(crate) fn decode(chunk: u64, bytes: &[u8]) -> Result<Vec<BlockFilter>, &'static str> {
    if bytes.len() != FILE_BYTES {
        return Err("wrong size");
    }
    let (body, crc) = bytes.split_at(FILE_BYTES - 4);
    let stored_crc = u32::from_le_bytes(crc.try_into().map_err(|_| "wrong size")?);
    if crc32c::crc32c(body) != stored_crc {
        return Err("CRC mismatch");
    }
    let word = |at: usize| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
    if &body[..4] != MAGIC || word(4) != VERSION {
        return Err("unknown magic or version");
    }
    let mut number = [0u8; 8];
    number.copy_from_slice(&body[8..16]);
    if u64::from_le_bytes(number) != chunk {
        return Err("written for another chunk");
    }
    if word(16) as usize != CHUNK_BLOCKS || word(20) as usize != FILTER_BYTES || word(24) != PROBES
    {
        return Err("other filter dimensions");
    }
    let blocks = body[HEADER_BYTES..]
        .chunks_exact(BLOCK_BYTES)
        .map(|raw| {
            let mut block = BlockFilter {
                stored_bytes: u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]),
                ..BlockFilter::default()
            };
            block.bits.copy_from_slice(&raw[4..]);
            block
        })
        .collect();
    Ok(blocks)
}

/// Reads and checks chunk `chunk`'s file in `dir`.
pub(crate) fn read(dir: &Path, chunk: u64) -> Result<Vec<BlockFilter>, ChunkFileError> {
    let path = path(dir, chunk);
    let bytes = fs::read(&path).map_err(|source| ChunkFileError::Io {
        path: path.clone(),
        source,
    })?;
    decode(chunk, &bytes).map_err(|reason| ChunkFileError::Invalid { path, reason })
}

/// Writes chunk `chunk`'s file in `dir`: aside, then renamed into place.
pub(crate) fn write(dir: &Path, chunk: u64, blocks: &[BlockFilter]) -> std::io::Result<()> {
    let path = path(dir, chunk);
    // `.tmp` files are what the log's recovery sweeps from this directory.
    let aside = path.with_extension("subjects.tmp");
    fs::write(&aside, encode(chunk, blocks))?;
    fs::rename(&aside, &path)
}

/// Removes chunk `chunk`'s file from `dir`, if there.
pub(crate) fn remove(dir: &Path, chunk: u64) -> std::io::Result<()> {
    match fs::remove_file(path(dir, chunk)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::bloom::SubjectProbe;
    use super::*;

    fn blocks() -> Vec<BlockFilter> {
        (0..3)
            .map(|i| {
                let mut block = BlockFilter {
                    stored_bytes: 1000 + i,
                    ..BlockFilter::default()
                };
                block.insert(SubjectProbe::of(format!("k{i}").as_bytes()));
                block
            })
            .collect()
    }

    #[test]
    fn a_file_reads_back_as_written_padded_to_a_chunk() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 7, &blocks()).unwrap();
        let read = read(dir.path(), 7).unwrap();
        assert_eq!(read.len(), CHUNK_BLOCKS);
        assert_eq!(&read[..3], &blocks()[..]);
        assert!(read[3..].iter().all(|b| *b == BlockFilter::default()));
        assert_eq!(list(dir.path()).unwrap(), vec![7]);
        assert!(path(dir.path(), 7).ends_with("00000000000000458752.subjects"));
    }

    #[test]
    fn damaged_or_misplaced_files_are_refused() {
        let good = encode(2, &blocks());
        assert!(decode(2, &good).is_ok());
        assert_eq!(decode(3, &good), Err("written for another chunk"));
        let mut flipped = good.clone();
        flipped[HEADER_BYTES + 10] ^= 1;
        assert_eq!(decode(2, &flipped), Err("CRC mismatch"));
        assert_eq!(decode(2, &good[..100]), Err("wrong size"));
        let mut other_version = good.clone();
        other_version[4] = 9;
        let crc = crc32c::crc32c(&other_version[..FILE_BYTES - 4]);
        other_version[FILE_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(2, &other_version), Err("unknown magic or version"));
    }

    #[test]
    fn listing_ignores_other_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 0, &[]).unwrap();
        write(dir.path(), 2, &[]).unwrap();
        fs::write(dir.path().join("00000000000000000000.log"), b"").unwrap();
        fs::write(dir.path().join("00000000000000000001.subjects"), b"").unwrap();
        fs::write(dir.path().join("junk.subjects"), b"").unwrap();
        assert_eq!(list(dir.path()).unwrap(), vec![0, 2]);
    }
}
