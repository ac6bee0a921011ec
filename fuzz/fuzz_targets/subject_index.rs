//! Fuzzes the subject indexer's reading of stored batches: whatever bytes a
//! read returns, indexing them never panics, and no record a catch-up
//! reader would find in them is ever skipped (its key's probe finds its
//! block). Rising offsets are what a log holds; damaged or disordered
//! batches must still never hide a record.

#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

use bytes::Bytes;
use herald_broker::subject_index::{SubjectIndex, SubjectProbe};
use herald_records::{batches, decompress_into, Compression, RecordBatch, Records, HEADER_BYTES};
use libfuzzer_sys::fuzz_target;

/// Where sealed chunks would go (a read reaching offset 65,536 seals one):
/// a directory that does not exist, so nothing is left behind and a failed
/// write (its blocks are then always read) is exercised too.
static DIR: LazyLock<PathBuf> =
    LazyLock::new(|| std::env::temp_dir().join("herald-fuzz-no-such-directory"));

/// The records a catch-up reader sees in `bytes`, as (offset, key).
fn readable(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut seen = Vec::new();
    'batches: for batch in batches(bytes) {
        let Ok(batch) = batch else { break };
        let Ok(view) = RecordBatch::new(batch) else { break };
        let header = view.header();
        if header.is_control() {
            continue;
        }
        let mut plain = Vec::new();
        let section: &[u8] = match Compression::from_id(header.compression()) {
            Ok(Compression::None) => &batch[HEADER_BYTES..],
            Ok(codec) => {
                if decompress_into(codec, &batch[HEADER_BYTES..], &mut plain).is_err() {
                    break;
                }
                &plain
            }
            Err(_) => break,
        };
        for record in Records::new(&header, section) {
            let Ok(record) = record else { break 'batches };
            if let (Ok(offset), Some(key)) = (u64::try_from(record.offset), record.key) {
                seen.push((offset, key.to_vec()));
            }
        }
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    // Two bytes say how far the read claims to reach; the rest is the read.
    let Some((reach, bytes)) = data.split_first_chunk::<2>() else {
        return;
    };
    let next_offset = u64::from(u16::from_le_bytes(*reach)) + 1;
    let index = SubjectIndex::open(&DIR, 0, 0);
    index.add(0, &Bytes::copy_from_slice(bytes), next_offset);
    assert_eq!(index.indexed_through(), next_offset);
    for (offset, key) in readable(bytes) {
        if offset >= next_offset {
            continue;
        }
        let candidate = index.next_candidate(offset, next_offset, &[SubjectProbe::of(&key)]);
        assert_eq!(candidate.offset, offset, "the record at {offset} would be skipped");
    }
});
