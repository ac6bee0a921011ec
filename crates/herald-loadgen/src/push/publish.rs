//! Records for the Kafka side of the push benchmarks, as produce batches.

use std::collections::HashMap;

use bytes::Bytes;
use herald_client::partitioner::partition_for_key;
use herald_records::{BatchBuilder, RecordFields};

/// Records per produce batch: well under a topic's 1 MiB batch limit for
/// the benchmarks' small records.
pub const BATCH_RECORDS: u32 = 4096;

/// `records` (key, value) as batches of at most [`BATCH_RECORDS`], each
/// to the partition Kafka's default partitioner picks for its keys, in
/// order per partition.
pub fn batches<'a>(
    records: impl IntoIterator<Item = (Vec<u8>, &'a [u8])>,
    partitions: u32,
) -> Vec<(u32, Bytes)> {
    batches_with_headers(
        records
            .into_iter()
            .map(|(key, value)| (key, value, Vec::new())),
        partitions,
    )
}

/// One header of a benchmark record.
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

/// As [`batches`], each record with its headers.
pub fn batches_with_headers<'a>(
    records: impl IntoIterator<Item = (Vec<u8>, &'a [u8], Vec<Header<'a>>)>,
    partitions: u32,
) -> Vec<(u32, Bytes)> {
    batches_of_size(records, partitions, BATCH_RECORDS)
}

/// As [`batches_with_headers`], with at most `batch_records` per batch.
pub fn batches_of_size<'a>(
    records: impl IntoIterator<Item = (Vec<u8>, &'a [u8], Vec<Header<'a>>)>,
    partitions: u32,
    batch_records: u32,
) -> Vec<(u32, Bytes)> {
    let now = super::now_ns() as i64 / 1_000_000;
    let mut open: HashMap<u32, (BatchBuilder, u32)> = HashMap::new();
    let mut done = Vec::new();
    for (key, value, headers) in records {
        let partition = partition_for_key(&key, partitions);
        let (builder, count) = open
            .entry(partition)
            .or_insert_with(|| (BatchBuilder::new(now), 0));
        builder.push(RecordFields {
            timestamp_ms: now,
            key: Some(&key),
            value: Some(value),
            headers: &headers,
        });
        *count += 1;
        if *count >= batch_records {
            if let Some((full, _)) = open.remove(&partition) {
                done.extend(full.finish().ok().map(|b| (partition, Bytes::from(b))));
            }
        }
    }
    for (partition, (builder, _)) in open {
        done.extend(builder.finish().ok().map(|b| (partition, Bytes::from(b))));
    }
    done
}
