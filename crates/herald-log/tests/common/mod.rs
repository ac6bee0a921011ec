//! Helpers shared by the log's integration tests.
#![allow(dead_code)]

use std::time::Duration;

use herald_log::{FlushPolicy, LogConfig};
use herald_records::{self as batch, testing};

/// A configuration with small segments, so tests roll often.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 256,
        preallocate_bytes: 4096,
        max_batch_bytes: 8 * 1024,
        segment_age: None,
        retention_age: None,
        retention_bytes: None,
        flush: FlushPolicy::Never,
        key_copy: false,
    }
}

/// A batch of `count` records whose values carry `tag`.
pub fn tagged_batch(count: u32, tag: u64, timestamp: i64) -> Vec<u8> {
    let mut value = [0u8; 24];
    value[..8].copy_from_slice(&tag.to_be_bytes());
    testing::batch(count, &value, timestamp)
}

/// The (base offset, record count, tag) of every batch in `bytes`.
pub fn decode(bytes: &[u8]) -> Vec<(u64, u32, u64)> {
    batch::batches(bytes)
        .map(|b| {
            let b = b.expect("stored batches are well framed");
            let header = batch::validate(b).expect("stored batches stay valid");
            // First record: length varint, attributes, ts delta, offset delta,
            // key length (-1), value length, then the value.
            let value_start = batch::HEADER_BYTES + 6;
            let tag =
                u64::from_be_bytes(b[value_start..value_start + 8].try_into().expect("8 bytes"));
            (header.base_offset() as u64, header.offset_count(), tag)
        })
        .collect()
}

/// Reads the whole log from `from` in chunks of `max_bytes`.
pub fn read_all(log: &herald_log::Log, from: u64, max_bytes: usize) -> Vec<(u64, u32, u64)> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let slice = log.read(offset, max_bytes).expect("in range");
        if slice.bytes.is_empty() {
            return out;
        }
        out.extend(decode(&slice.bytes));
        offset = slice.next_offset;
    }
}

/// Generous bound for waits that should end at once.
pub const PATIENCE: Duration = Duration::from_secs(10);
