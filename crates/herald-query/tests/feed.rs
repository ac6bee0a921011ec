//! Stored batches fed to several queries at once: each counts exactly the
//! records at or past its own start, in offset order, across compressed
//! batches; transaction markers are not records; a batch that cannot be
//! decoded is reported and passed over.

use herald_query::{feed_batches, Follower, QuerySpec, QueryState};
use herald_records::{stamp, BatchBuilder, Compression, RecordFields};

fn state(json: &str) -> QueryState {
    let spec: QuerySpec = serde_json::from_str(json).expect("spec JSON");
    QueryState::new(spec.compile().expect("valid spec"))
}

/// Batches of `per_batch` records with totals 0, 1, 2, … from offset 0, at
/// timestamps 1,000 ms apart, in `codec`, then a transaction marker.
fn stored(per_batch: u64, batches: u64, codec: Compression) -> Vec<u8> {
    let mut bytes = Vec::new();
    for b in 0..batches {
        let base = b * per_batch;
        let mut builder = BatchBuilder::new(0);
        for r in 0..per_batch {
            let value = format!(r#"{{"total": {}}}"#, base + r);
            builder.push(RecordFields {
                timestamp_ms: ((base + r) * 1_000) as i64,
                key: Some(b"k"),
                value: Some(value.as_bytes()),
                headers: &[],
            });
        }
        let mut batch = builder.finish_with(codec).expect("batch");
        stamp(&mut batch, base, 0);
        bytes.extend_from_slice(&batch);
    }
    let mut marker = BatchBuilder::new(0);
    marker.push(RecordFields {
        timestamp_ms: 0,
        key: Some(&[0, 0, 0, 0]),
        value: Some(&[0, 0, 0, 0, 0, 0]),
        headers: &[],
    });
    let mut marker = marker.finish_control().expect("marker");
    stamp(&mut marker, batches * per_batch, 0);
    bytes.extend_from_slice(&marker);
    bytes
}

const SUM: &str = r#"{"id": "sum", "topic": "t", "bucket_ms": 1000000,
    "aggregates": [{"name": "n", "function": "count"},
                   {"name": "s", "function": "sum", "field": "value.total"}]}"#;

#[test]
fn each_follower_counts_from_its_own_start_and_markers_are_skipped() {
    for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let bytes = stored(10, 5, codec);
        let mut whole = state(SUM);
        let mut late = state(SUM);
        let mut scratch = Vec::new();
        let mut followers = [Follower::new(0, &mut whole), Follower::new(37, &mut late)];
        let outcome = feed_batches(&bytes, &mut followers, &mut scratch);
        assert_eq!(outcome.unreadable_batches, 0);
        assert_eq!([followers[0].records, followers[1].records], [50, 13]);
        assert_eq!(
            whole.results(None, None).totals,
            vec![Some(50.0), Some(1225.0)]
        );
        // 37 + 38 + … + 49
        assert_eq!(
            late.results(None, None).totals,
            vec![Some(13.0), Some(559.0)]
        );
    }
}

#[test]
fn alerts_come_in_record_order_where_the_condition_comes_to_hold() {
    let bytes = stored(4, 3, Compression::Lz4);
    let mut total = state(
        r#"{"id": "q", "topic": "t", "bucket_ms": 1000,
            "aggregates": [{"name": "t", "function": "max", "field": "value.total"}],
            "triggers": [{"name": "big", "aggregate": "t", "op": ">=", "threshold": 5, "window_ms": 1000}]}"#,
    );
    let mut followers = [Follower::new(0, &mut total)];
    feed_batches(&bytes, &mut followers, &mut Vec::new());
    let alerts = &followers[0].alerts;
    // One bucket per record: the condition holds from offset 5 on, and
    // the trigger fires once as it comes to hold.
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0].window_start_ms, 5_000);
    assert_eq!(alerts[0].value, 5.0);
}

#[test]
fn an_undecodable_batch_is_reported_and_passed_over() {
    let mut bytes = stored(4, 2, Compression::Lz4);
    // Damage the first batch's compressed records (after its 61-byte
    // header); the CRC is not checked here, the codec refuses them.
    for byte in &mut bytes[61..70] {
        *byte = 0xff;
    }
    let mut whole = state(SUM);
    let mut followers = [Follower::new(0, &mut whole)];
    let outcome = feed_batches(&bytes, &mut followers, &mut Vec::new());
    assert_eq!(outcome.unreadable_batches, 1);
    assert_eq!(followers[0].records, 4);
    assert_eq!(
        whole.results(None, None).totals,
        vec![Some(4.0), Some(22.0)]
    );
}
