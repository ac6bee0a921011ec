//! Record batches on the client side: built once per batch size, stamped
//! with a send time for latency runs, and counted on the way back by
//! walking batch headers only (no record is decoded).

use herald_records::{batches, refresh_crc, testing, BatchHeader, RecordBatch};

/// Bytes of each record's value, as in the seed experiment.
pub const VALUE_BYTES: usize = 64;

/// A valid, uncompressed v2 batch of `count` records of 64 zero bytes.
pub fn batch(count: u32) -> Vec<u8> {
    testing::batch(count, &[0u8; VALUE_BYTES], now_ms())
}

/// Wall-clock milliseconds, for batch timestamps.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Records and the next offset to fetch, from a fetch's record bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counted {
    /// Records in the complete batches seen.
    pub records: u64,
    /// Bytes of the complete batches seen.
    pub bytes: u64,
    /// One past the last offset of the last complete batch, if any.
    pub next_offset: Option<i64>,
}

/// Counts the records of the complete batches in `bytes`. A partial batch
/// at the end (Kafka cuts fetches at `max_bytes`) is ignored: the next
/// fetch starts at it.
pub fn count(bytes: &[u8]) -> Counted {
    let mut counted = Counted::default();
    for batch in batches(bytes).map_while(Result::ok) {
        let Some(header) = BatchHeader::parse(batch) else {
            break;
        };
        counted.records += u64::from(header.offset_count());
        counted.bytes += batch.len() as u64;
        counted.next_offset = Some(header.last_offset() + 1);
    }
    counted
}

/// Where the first record's value starts in `batch`, if the batch is
/// uncompressed and holds a record with a value of at least 8 bytes.
pub fn first_value_at(batch: &[u8]) -> Option<usize> {
    let first = RecordBatch::new(batch)
        .ok()?
        .records_in_place()?
        .next()?
        .ok()?;
    let value = first.value.filter(|v| v.len() >= 8)?;
    // The value is a view into `batch`: its distance from the start.
    Some(value.as_ptr() as usize - batch.as_ptr() as usize)
}

/// Writes `stamp` into the first 8 value bytes at `value_at` and fixes the
/// batch CRC. One CRC per batch, not per record.
pub fn stamp(batch: &mut [u8], value_at: usize, stamp: u64) {
    batch[value_at..value_at + 8].copy_from_slice(&stamp.to_be_bytes());
    refresh_crc(batch);
}

/// Reads the stamp written by [`stamp`] back from a fetched batch.
pub fn read_stamp(batch: &[u8]) -> Option<u64> {
    let at = first_value_at(batch)?;
    let bytes: [u8; 8] = batch.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_records_of_complete_batches_only() {
        let mut bytes = batch(3);
        bytes.extend_from_slice(&batch(5));
        let whole = count(&bytes);
        assert_eq!(whole.records, 8);
        let cut = count(&bytes[..bytes.len() - 1]);
        assert_eq!(cut.records, 3);
    }

    #[test]
    fn stamp_round_trips_and_keeps_the_batch_valid() {
        let mut b = batch(4);
        let at = first_value_at(&b).expect("value");
        stamp(&mut b, at, 0x0102_0304_0506_0708);
        assert_eq!(read_stamp(&b), Some(0x0102_0304_0506_0708));
        assert!(herald_records::validate(&b).is_ok());
    }
}
