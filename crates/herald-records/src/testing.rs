//! Test batches, for the tests and benchmarks of code that stores them.

use crate::builder::{BatchBuilder, RecordFields};

/// One uncompressed batch of `count` records, each with `value`
/// (and no key), timestamps starting at `timestamp` one ms apart.
pub fn batch(count: u32, value: &[u8], timestamp: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::with_capacity(timestamp, count as usize * (value.len() + 16));
    for delta in 0..count {
        builder.push(RecordFields {
            timestamp_ms: timestamp + i64::from(delta),
            value: Some(value),
            ..RecordFields::default()
        });
    }
    builder
        .finish()
        .expect("a test batch has a record and fits")
}
