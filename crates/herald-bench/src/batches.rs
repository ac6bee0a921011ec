//! The pre-built batches every publisher appends: built once per batch size
//! before any timing, so that the measured loop only appends.

use herald_records as batch;

use crate::settings::VALUE_BYTES;
use crate::BenchError;

/// Distinct batches per set. Publishers cycle through them so that consecutive
/// appends do not copy from the very same cache lines every time.
const BATCHES_PER_SET: usize = 4;

/// A few valid RecordBatch v2 batches of the same record count and size.
pub struct BatchSet {
    batches: Vec<Vec<u8>>,
    records: u32,
}

impl BatchSet {
    /// Builds the set for `records` records of 64-byte values per batch.
    pub fn new(records: u32) -> Result<Self, BenchError> {
        let value = [0x5a; VALUE_BYTES];
        let batches: Vec<Vec<u8>> = (0..BATCHES_PER_SET)
            .map(|i| batch::testing::batch(records, &value, 1_700_000_000_000 + i as i64))
            .collect();
        for b in &batches {
            batch::validate(b)?;
        }
        // The memcpy read bound cuts its buffer in whole batches of one size;
        // only the base timestamp differs between the batches, a fixed field.
        if batches.iter().any(|b| b.len() != batches[0].len()) {
            return Err(BenchError::Setting {
                name: "batches",
                reason: "pre-built batches differ in size".into(),
            });
        }
        Ok(Self { batches, records })
    }

    /// The `i`-th batch, cycling through the set.
    pub fn get(&self, i: usize) -> &[u8] {
        &self.batches[i % self.batches.len()]
    }

    /// Records per batch.
    pub fn records(&self) -> u32 {
        self.records
    }

    /// Bytes per batch (all batches of a set have the same size).
    pub fn batch_bytes(&self) -> usize {
        self.batches[0].len()
    }
}
