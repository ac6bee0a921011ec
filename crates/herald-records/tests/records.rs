//! The record iterator against the builder: whatever is pushed, with any
//! codec, reads back exactly; damaged or cut bytes end in an error, never a
//! panic.

use herald_records::{
    batches, testing, validate, BatchBuilder, Compression, RecordBatch, RecordError, RecordFields,
};
use proptest::prelude::*;

/// One record as the test generates it.
#[derive(Debug, Clone)]
struct Generated {
    timestamp_delta: u16,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..40)
}

fn record() -> impl Strategy<Value = Generated> {
    (
        any::<u16>(),
        prop::option::of(bytes()),
        prop::option::of(bytes()),
        prop::collection::vec((bytes(), prop::option::of(bytes())), 0..4),
    )
        .prop_map(|(timestamp_delta, key, value, headers)| Generated {
            timestamp_delta,
            key,
            value,
            headers,
        })
}

fn codec() -> impl Strategy<Value = Compression> {
    prop::sample::select(vec![
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ])
}

const BASE_TIMESTAMP: i64 = 1_700_000_000_000;

fn build(records: &[Generated], codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(BASE_TIMESTAMP);
    for r in records {
        let headers: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        builder.push(RecordFields {
            timestamp_ms: BASE_TIMESTAMP + i64::from(r.timestamp_delta),
            key: r.key.as_deref(),
            value: r.value.as_deref(),
            headers: &headers,
        });
    }
    builder.finish_with(codec).expect("encode")
}

proptest! {
    #[test]
    fn every_pushed_record_reads_back_exactly(
        records in prop::collection::vec(record(), 1..20),
        codec in codec(),
        base_offset in 0i64..1 << 40,
    ) {
        let mut batch = build(&records, codec);
        herald_records::stamp(&mut batch, base_offset as u64, 0);
        let header = validate(&batch).expect("a built batch validates");
        prop_assert_eq!(header.compression(), codec.id());
        let view = RecordBatch::new(&batch).expect("framing");
        let mut scratch = Vec::new();
        let read: Vec<_> = view
            .records(&mut scratch)
            .expect("records")
            .collect::<Result<_, _>>()
            .expect("every record reads");
        prop_assert_eq!(read.len(), records.len());
        for (i, (got, want)) in read.iter().zip(&records).enumerate() {
            prop_assert_eq!(got.offset, base_offset + i as i64);
            prop_assert_eq!(got.timestamp, BASE_TIMESTAMP + i64::from(want.timestamp_delta));
            prop_assert_eq!(got.key, want.key.as_deref());
            prop_assert_eq!(got.value, want.value.as_deref());
            let headers: Vec<_> = got.headers().collect::<Result<_, _>>().expect("headers");
            let wanted: Vec<_> = want
                .headers
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            prop_assert_eq!(headers, wanted);
        }
    }

    #[test]
    fn damaged_record_bytes_end_in_an_error_or_records_never_a_panic(
        records in prop::collection::vec(record(), 1..8),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut batch = build(&records, Compression::None);
        let section = batch.len() - herald_records::HEADER_BYTES;
        for (at, byte) in flips {
            batch[herald_records::HEADER_BYTES + at.index(section)] ^= byte | 1;
        }
        let view = RecordBatch::new(&batch).expect("the header is untouched");
        let mut count = 0usize;
        for record in view.records_in_place().expect("uncompressed") {
            match record {
                Ok(r) => {
                    count += 1;
                    for header in r.headers() {
                        if header.is_err() {
                            break;
                        }
                    }
                }
                Err(RecordError::Malformed { .. }) => break,
                Err(other) => prop_assert!(false, "unexpected error {}", other),
            }
        }
        prop_assert!(count <= records.len());
    }
}

#[test]
fn a_cut_batch_is_refused_at_every_length() {
    let batch = testing::batch(3, b"value", 1_000);
    for cut in 0..batch.len() {
        assert!(RecordBatch::new(&batch[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn a_record_longer_than_its_batch_is_malformed() {
    let mut batch = testing::batch(1, b"value", 1_000);
    // The first record's length varint (zig-zag): claim 63 bytes.
    batch[herald_records::HEADER_BYTES] = 126;
    let view = RecordBatch::new(&batch).expect("framing");
    let first = view.records_in_place().expect("uncompressed").next();
    assert!(
        matches!(first, Some(Err(RecordError::Malformed { index: 0, .. }))),
        "{first:?}"
    );
}

#[test]
fn a_batch_claiming_more_records_than_it_holds_stops_with_an_error() {
    let mut batch = testing::batch(2, b"v", 1_000);
    batch[57..61].copy_from_slice(&5i32.to_be_bytes()); // recordsCount
    let view = RecordBatch::new(&batch).expect("framing");
    let read: Vec<_> = view.records_in_place().expect("uncompressed").collect();
    assert_eq!(read.len(), 3, "two records, then the error");
    assert!(read[..2].iter().all(Result::is_ok));
    assert!(matches!(
        read[2],
        Err(RecordError::Malformed { index: 2, .. })
    ));
}

#[test]
fn log_append_time_batches_give_every_record_the_batch_time() {
    let mut batch = testing::batch(3, b"v", 1_000);
    batch[22] |= 0x08; // attributes: LogAppendTime
    batch[35..43].copy_from_slice(&9_999i64.to_be_bytes()); // maxTimestamp
    let view = RecordBatch::new(&batch).expect("framing");
    let times: Vec<i64> = view
        .records_in_place()
        .expect("uncompressed")
        .map(|r| r.expect("record").timestamp)
        .collect();
    assert_eq!(times, [9_999, 9_999, 9_999]);
}

#[test]
fn reading_compressed_batches_reuses_one_buffer() {
    let records = vec![Generated {
        timestamp_delta: 0,
        key: None,
        value: Some(vec![7; 1000]),
        headers: Vec::new(),
    }];
    let mut run = build(&records, Compression::Lz4);
    run.extend(build(&records, Compression::Zstd));
    let mut scratch = Vec::new();
    let mut capacity = None;
    for batch in batches(&run) {
        let view = RecordBatch::new(batch.expect("whole")).expect("framing");
        let value = view
            .records(&mut scratch)
            .expect("records")
            .next()
            .expect("one record")
            .expect("valid")
            .value
            .map(<[u8]>::len);
        assert_eq!(value, Some(1000));
        // The second batch fits the buffer the first one grew.
        let now = scratch.capacity();
        assert!(
            capacity.is_none_or(|before| now == before),
            "the buffer was reallocated"
        );
        capacity = Some(now);
    }
}
