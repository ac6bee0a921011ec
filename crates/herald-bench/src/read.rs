//! The read workload: the partition is written once, then N subscribers each
//! read all of it from offset 0 in fetch-sized chunks, copying every chunk
//! into their own buffer as a socket write would.

use std::hint::black_box;
use std::time::{Duration, Instant};

use herald_log::Log;

use crate::baselines::{Cursor, MutexLog};
use crate::batches::BatchSet;
use crate::settings::FETCH_BYTES;
use crate::threads::{run_workers, Sample, Tally};
use crate::BenchError;

/// What was written before the readers start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Partition {
    /// Records (offsets `0..records`).
    pub records: u64,
    /// Bytes of batches.
    pub bytes: u64,
}

/// Fills a partition with whole batches up to `bytes_max`, from one thread.
pub fn fill(
    set: &BatchSet,
    bytes_max: u64,
    mut append: impl FnMut(&[u8]) -> Result<(), BenchError>,
) -> Result<Partition, BenchError> {
    let batch_bytes = set.batch_bytes() as u64;
    // At least one batch, so that a batch larger than the budget still reads.
    let batches = (bytes_max / batch_bytes).max(1);
    for i in 0..batches {
        append(set.get(i as usize))?;
    }
    Ok(Partition {
        records: batches * u64::from(set.records()),
        bytes: batches * batch_bytes,
    })
}

/// Subscribers reading herald's log.
pub fn herald(
    log: &Log,
    partition: Partition,
    subscribers: usize,
    set: &BatchSet,
    time_max: Duration,
) -> Result<Sample, BenchError> {
    run_workers("herald-r", buffers(subscribers, set), |mut buffer| {
        let deadline = Instant::now() + time_max;
        let mut tally = Tally::default();
        let mut offset = 0;
        // Bounded: every turn advances by at least one batch, or fails.
        while offset < partition.records && Instant::now() < deadline {
            let slice = log.read(offset, FETCH_BYTES)?;
            if slice.next_offset <= offset {
                return Err(BenchError::ReadStalled {
                    offset,
                    end: partition.records,
                });
            }
            deliver(&mut buffer, &slice.bytes)?;
            tally.records += slice.next_offset - offset;
            tally.bytes += slice.bytes.len() as u64;
            offset = slice.next_offset;
        }
        Ok(tally)
    })
}

/// Subscribers reading the mutex baseline.
pub fn mutex(
    log: &MutexLog<'_>,
    partition: Partition,
    subscribers: usize,
    set: &BatchSet,
    time_max: Duration,
) -> Result<Sample, BenchError> {
    run_workers("mutex-r", buffers(subscribers, set), |mut buffer| {
        let deadline = Instant::now() + time_max;
        let mut tally = Tally::default();
        let mut cursor = Cursor::default();
        while cursor.offset < partition.records && Instant::now() < deadline {
            let (bytes, next) = log.read(cursor, FETCH_BYTES)?;
            if next.offset <= cursor.offset {
                return Err(BenchError::ReadStalled {
                    offset: cursor.offset,
                    end: partition.records,
                });
            }
            deliver(&mut buffer, bytes)?;
            tally.records += next.offset - cursor.offset;
            tally.bytes += bytes.len() as u64;
            cursor = next;
        }
        Ok(tally)
    })
}

/// The memcpy bound: subscribers copy the same bytes in chunks of the same
/// size (as many whole batches as fit in a fetch, at least one), with no log
/// in between.
pub fn memcpy(
    source: &[u8],
    subscribers: usize,
    set: &BatchSet,
    time_max: Duration,
) -> Result<Sample, BenchError> {
    let batch_bytes = set.batch_bytes();
    let chunk_bytes = (FETCH_BYTES / batch_bytes).max(1) * batch_bytes;
    run_workers("memcpy-r", buffers(subscribers, set), |mut buffer| {
        let deadline = Instant::now() + time_max;
        let mut tally = Tally::default();
        for chunk in source.chunks(chunk_bytes) {
            if Instant::now() >= deadline {
                break;
            }
            deliver(&mut buffer, chunk)?;
            tally.records += (chunk.len() / batch_bytes) as u64 * u64::from(set.records());
            tally.bytes += chunk.len() as u64;
        }
        Ok(tally)
    })
}

/// One pre-faulted buffer per subscriber, large enough for a fetch plus the
/// one batch a read may return beyond `max_bytes`.
fn buffers(subscribers: usize, set: &BatchSet) -> Vec<Vec<u8>> {
    (0..subscribers)
        .map(|_| vec![1u8; FETCH_BYTES + set.batch_bytes()])
        .collect()
}

/// What a socket write does with a fetch: copy it out.
fn deliver(buffer: &mut [u8], bytes: &[u8]) -> Result<(), BenchError> {
    let capacity = buffer.len();
    let dst = buffer
        .get_mut(..bytes.len())
        .ok_or(BenchError::FetchTooLarge {
            len: bytes.len(),
            capacity,
        })?;
    dst.copy_from_slice(bytes);
    // The copy must not be optimised away because nobody reads the buffer.
    black_box(dst);
    Ok(())
}

/// One decoding pass over stored batches touching every record's offset,
/// timestamp, key, value and headers (so the work cannot be skipped):
/// the floor any reader of the log pays. Answers the records read.
pub fn decode_pass(
    run: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    let (mut records, mut touched) = (0u64, 0usize);
    for batch in herald_records::batches(run) {
        let batch = herald_records::RecordBatch::new(batch?)?;
        for record in batch.records(scratch)? {
            let record = record?;
            touched += record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
            touched ^= (record.offset ^ record.timestamp) as usize;
            for header in record.headers() {
                let (key, value) = header?;
                touched += key.len() + value.map_or(0, <[u8]>::len);
            }
            records += 1;
        }
    }
    std::hint::black_box(touched);
    Ok(records)
}
