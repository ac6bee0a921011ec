//! `RecordBatch::records_through` reads a batch only as far as one record:
//! whatever the codec, the record sizes (records spanning compressed
//! blocks) and the record asked for, it answers the same records a whole
//! read answers, in order, up to and including that one, never a cut
//! record or an error, and for an early record of a large compressed batch
//! it inflates only part of it.

use herald_records::testing::batch_numbered;
use herald_records::{stamp, BatchBuilder, Compression, RecordBatch, RecordFields};
use proptest::prelude::*;

fn batch(sizes: &[usize], codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(1_000);
    for (i, &size) in sizes.iter().enumerate() {
        // Values that compress a little, not to nothing.
        let value: Vec<u8> = (0..size).map(|j| (j * 31 + i * 7) as u8 % 61).collect();
        let key = format!("key-{i}");
        builder.push(RecordFields {
            timestamp_ms: 1_000 + i as i64,
            key: Some(key.as_bytes()),
            value: Some(&value),
            headers: &[],
        });
    }
    let mut bytes = builder.finish_with(codec).expect("batch");
    stamp(&mut bytes, 500, 0);
    bytes
}

fn offsets_and_keys(records: herald_records::Records<'_>) -> Vec<(i64, Vec<u8>)> {
    records
        .map(|r| {
            let r = r.expect("whole record");
            (r.offset, r.key.expect("key").to_vec())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn reads_what_a_whole_read_reads_up_to_the_record(
        sizes in prop::collection::vec(prop_oneof![0usize..200, 1_000usize..40_000], 1..60),
        codec in prop::sample::select(vec![Compression::None, Compression::Lz4, Compression::Zstd, Compression::Gzip, Compression::Snappy]),
        pick in any::<prop::sample::Index>(),
    ) {
        let bytes = batch(&sizes, codec);
        let batch = RecordBatch::new(&bytes).expect("framing");
        let mut scratch = Vec::new();
        let whole = offsets_and_keys(batch.records(&mut scratch).expect("records"));
        let last = 500 + pick.index(sizes.len()) as i64;
        let mut partial = Vec::new();
        let through = offsets_and_keys(batch.records_through(&mut partial, last).expect("records"));
        prop_assert!(through.len() <= whole.len());
        prop_assert_eq!(&through[..], &whole[..through.len()]);
        prop_assert!(through.iter().any(|(offset, _)| *offset == last));
        // Past the batch's end: everything.
        let all = offsets_and_keys(batch.records_through(&mut partial, i64::MAX).expect("records"));
        prop_assert_eq!(all, whole);
    }
}

#[test]
fn an_early_record_of_a_large_lz4_batch_inflates_part_of_it() {
    let sizes = vec![30_000; 40];
    let bytes = batch(&sizes, Compression::Lz4);
    let batch = RecordBatch::new(&bytes).expect("framing");
    let mut whole = Vec::new();
    assert_eq!(batch.records(&mut whole).expect("records").count(), 40);
    let mut partial = Vec::new();
    let through = batch.records_through(&mut partial, 502).expect("records");
    assert_eq!(through.map(|r| r.expect("record").offset).last(), Some(502));
    assert!(
        partial.len() * 4 < whole.len(),
        "{} of {} bytes inflated",
        partial.len(),
        whole.len()
    );
}

#[test]
fn records_numbered_out_of_order_are_all_read() {
    for codec in [Compression::Lz4, Compression::Zstd, Compression::None] {
        let keys: Vec<String> = (0..6).map(|i| format!("key-{i}")).collect();
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        let mut bytes = batch_numbered(&[0, 3, 1, 2, 4, 5], &keys, 20_000, codec);
        stamp(&mut bytes, 500, 0);
        let batch = RecordBatch::new(&bytes).expect("framing");
        let mut scratch = Vec::new();
        let whole = offsets_and_keys(batch.records(&mut scratch).expect("records"));
        assert_eq!(
            whole.iter().map(|r| r.0).collect::<Vec<_>>(),
            [500, 503, 501, 502, 504, 505]
        );
        // Asked for offset 501: the record after 503 is still given.
        let mut partial = Vec::new();
        let through = offsets_and_keys(batch.records_through(&mut partial, 501).expect("records"));
        assert_eq!(through, whole, "{codec:?}");
    }
}
