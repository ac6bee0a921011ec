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

/// One batch whose record `i` has key `keys[i]`, a value of `value_len`
/// bytes and offset delta `deltas[i]`: records numbered out of order, as
/// a client may send them (Kafka's clients number them 0, 1, 2...; the
/// broker does not check each), compressed with `codec`.
pub fn batch_numbered(
    deltas: &[i64],
    keys: &[&[u8]],
    value_len: usize,
    codec: crate::Compression,
) -> Vec<u8> {
    use crate::header::{ATTRIBUTES, BATCH_LENGTH, HEADER_BYTES, LOG_OVERHEAD};
    let value: Vec<u8> = (0..value_len).map(|j| (j * 31) as u8 % 61).collect();
    let mut builder = BatchBuilder::new(0);
    for key in keys {
        builder.push(RecordFields {
            key: Some(key),
            value: Some(&value),
            ..RecordFields::default()
        });
    }
    let plain = builder
        .finish()
        .expect("a test batch has a record and fits");
    let mut section = Vec::new();
    for (i, (&delta, key)) in deltas.iter().zip(keys).enumerate() {
        let mut record = vec![0];
        crate::varint::put(&mut record, i as i64);
        crate::varint::put(&mut record, delta);
        crate::varint::put(&mut record, key.len() as i64);
        record.extend_from_slice(key);
        crate::varint::put(&mut record, value.len() as i64);
        record.extend_from_slice(&value);
        crate::varint::put(&mut record, 0);
        crate::varint::put(&mut section, record.len() as i64);
        section.extend_from_slice(&record);
    }
    let mut out = plain[..HEADER_BYTES].to_vec();
    crate::compression::compress_into(codec, &section, &mut out).expect("compressible");
    out[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&i16::from(codec.id()).to_be_bytes());
    let length = i32::try_from(out.len() - LOG_OVERHEAD).expect("a test batch fits");
    out[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    crate::header::refresh_crc(&mut out);
    out
}
