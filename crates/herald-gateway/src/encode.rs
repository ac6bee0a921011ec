//! Runs of deliveries encoded straight to a `ServerMessage`'s bytes, for
//! the WebSocket transport.
//!
//! A record fanned out to N subscribers differs between their deliveries
//! only in the subscription id (and the priority flag), so its other
//! fields are encoded once, into the record's shared cache
//! ([`SharedRecord::encoded`]), and each delivery is that encoding with its
//! own few bytes in front. Protobuf readers accept a message's fields in
//! any order, so the bytes decode to exactly the message that
//! [`crate::convert::deliveries_message`] builds: the tests hold the two to
//! that.

use bytes::Bytes;
use herald_push::{Delivery, SharedRecord};
use prost::encoding::{encoded_len_varint, WireType};

#[cfg(doc)]
use crate::convert;

/// `ServerMessage.deliveries`.
const SERVER_MESSAGE_DELIVERIES: u32 = 3;
/// `Deliveries.deliveries`.
const DELIVERIES_DELIVERY: u32 = 1;
/// `Delivery.subscription_id`.
const DELIVERY_SUBSCRIPTION_ID: u32 = 1;
/// `Delivery.priority`.
const DELIVERY_PRIORITY: u32 = 8;
/// `Delivery.partition` and the fields after it, shared by every
/// delivery of a record.
const DELIVERY_PARTITION: u32 = 2;
const DELIVERY_OFFSET: u32 = 3;
const DELIVERY_TIMESTAMP: u32 = 4;
const DELIVERY_KEY: u32 = 5;
const DELIVERY_VALUE: u32 = 6;
const DELIVERY_HEADERS: u32 = 7;
/// `Header.key` and `Header.value`.
const HEADER_KEY: u32 = 1;
const HEADER_VALUE: u32 = 2;

/// One byte: every field number above is below 16.
const KEY_BYTES: usize = 1;
/// Most bytes of a varint.
const MAX_VARINT_BYTES: usize = 10;
/// Most bytes in front of a delivery's shared fields: its key and length,
/// then the subscription id's key and value and the priority's.
const MAX_HEAD_BYTES: usize = 3 * KEY_BYTES + 2 * MAX_VARINT_BYTES + 1;

// Every key here is one byte only while its field number is below 16.
const _: () = assert!(
    SERVER_MESSAGE_DELIVERIES < 16
        && DELIVERIES_DELIVERY < 16
        && DELIVERY_SUBSCRIPTION_ID < 16
        && DELIVERY_PRIORITY < 16
        && DELIVERY_PARTITION < 16
        && DELIVERY_OFFSET < 16
        && DELIVERY_TIMESTAMP < 16
        && DELIVERY_KEY < 16
        && DELIVERY_VALUE < 16
        && DELIVERY_HEADERS < 16
        && HEADER_KEY < 16
        && HEADER_VALUE < 16
);

/// The one-byte key of `field` with `wire_type`.
const fn key_byte(field: u32, wire_type: WireType) -> u8 {
    ((field << 3) | wire_type as u32) as u8
}

/// Writes `value` as a varint at the start of `out`; the bytes written.
/// Into a slice, not a buffer that checks its room per byte: these are a
/// few bytes per delivery, written for every subscriber.
fn put_varint(out: &mut [u8], mut value: u64) -> usize {
    let mut written = 0;
    while value >= 0x80 {
        out[written] = (value as u8) | 0x80;
        value >>= 7;
        written += 1;
    }
    out[written] = value as u8;
    written + 1
}

/// The fields every delivery of `record` shares (all but the subscription
/// id and the priority), encoded once per record.
fn shared_fields(record: &SharedRecord, partition: u32) -> &Bytes {
    record.encoded(|record| encode_shared(record, partition))
}

/// A delivery's fields as [`convert::delivery_fields`] builds them with a
/// zero subscription id and a normal priority (proto3 leaves both out),
/// written straight from the record: no message, header strings or copies
/// of the key and value built first. Catch-up readers share no records, so
/// this runs once per record and subscriber for a subscription behind.
fn encode_shared(record: &SharedRecord, partition: u32) -> Bytes {
    let key = record.key.as_deref();
    let value = record.value.as_deref();
    // Headers are estimated from their stored section, not their count
    // (which the record claims): each takes at least two bytes there and
    // about four more here. A name that is not UTF-8 grows when its bad
    // bytes are replaced, so this may fall short.
    let mut out = Vec::with_capacity(
        3 * (KEY_BYTES + MAX_VARINT_BYTES)
            + key.map_or(0, |k| KEY_BYTES + MAX_VARINT_BYTES + k.len())
            + value.map_or(0, |v| KEY_BYTES + MAX_VARINT_BYTES + v.len())
            + 3 * record.header_bytes(),
    );
    // Proto3 leaves zeros out.
    let varint = |out: &mut Vec<u8>, field: u32, value: u64| {
        if value != 0 {
            put_key_and_varint(out, field, WireType::Varint, value);
        }
    };
    varint(&mut out, DELIVERY_PARTITION, u64::from(partition));
    varint(&mut out, DELIVERY_OFFSET, record.offset);
    // int64 is written as its two's complement: a negative time is ten bytes.
    varint(&mut out, DELIVERY_TIMESTAMP, record.timestamp as u64);
    if let Some(key) = key {
        put_length_delimited(&mut out, DELIVERY_KEY, key);
    }
    if let Some(value) = value {
        put_length_delimited(&mut out, DELIVERY_VALUE, value);
    }
    // As the message does: headers up to the first malformed one.
    for (name, value) in record.headers().map_while(Result::ok) {
        // A header name is a string in the protocol: one that is not UTF-8
        // goes with its bad bytes replaced, as the message builds it.
        let name = String::from_utf8_lossy(name);
        let name_len = if name.is_empty() {
            0
        } else {
            KEY_BYTES + encoded_len_varint(name.len() as u64) + name.len()
        };
        let value_len = value.map_or(0, |v| {
            KEY_BYTES + encoded_len_varint(v.len() as u64) + v.len()
        });
        put_key_and_varint(
            &mut out,
            DELIVERY_HEADERS,
            WireType::LengthDelimited,
            (name_len + value_len) as u64,
        );
        if !name.is_empty() {
            put_length_delimited(&mut out, HEADER_KEY, name.as_bytes());
        }
        if let Some(value) = value {
            put_length_delimited(&mut out, HEADER_VALUE, value);
        }
    }
    Bytes::from(out)
}

/// Appends the key of `field` with `wire_type` and then `value` as a
/// varint (a number, or the length of what follows).
fn put_key_and_varint(out: &mut Vec<u8>, field: u32, wire_type: WireType, value: u64) {
    let mut buf = [0u8; KEY_BYTES + MAX_VARINT_BYTES];
    buf[0] = key_byte(field, wire_type);
    let at = KEY_BYTES + put_varint(&mut buf[KEY_BYTES..], value);
    out.extend_from_slice(&buf[..at]);
}

/// Appends field `field` holding `bytes`: its key, length and the bytes.
fn put_length_delimited(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key_and_varint(out, field, WireType::LengthDelimited, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Bytes of one delivery's own fields in front of the shared ones.
fn own_len(delivery: &Delivery) -> usize {
    let id = if delivery.subscription_id == 0 {
        0
    } else {
        KEY_BYTES + encoded_len_varint(delivery.subscription_id)
    };
    let priority = if delivery.high_priority {
        KEY_BYTES + 1
    } else {
        0
    };
    id + priority
}

/// Bytes of one delivery in the message: its key, its length and itself.
fn framed_len(delivery: &Delivery) -> usize {
    let len = own_len(delivery) + shared_fields(&delivery.record, delivery.partition).len();
    KEY_BYTES + encoded_len_varint(len as u64) + len
}

/// Writes what comes before a delivery's shared fields (its key and
/// length, then its own fields) into `head`; the bytes written.
fn write_head(delivery: &Delivery, shared_len: usize, head: &mut [u8; MAX_HEAD_BYTES]) -> usize {
    head[0] = key_byte(DELIVERIES_DELIVERY, WireType::LengthDelimited);
    let mut at = KEY_BYTES;
    at += put_varint(&mut head[at..], (own_len(delivery) + shared_len) as u64);
    if delivery.subscription_id != 0 {
        head[at] = key_byte(DELIVERY_SUBSCRIPTION_ID, WireType::Varint);
        at += KEY_BYTES;
        at += put_varint(&mut head[at..], delivery.subscription_id);
    }
    if delivery.high_priority {
        head[at] = key_byte(DELIVERY_PRIORITY, WireType::Varint);
        head[at + KEY_BYTES] = crate::proto::Priority::High as u8;
        at += KEY_BYTES + 1;
    }
    at
}

/// A `ServerMessage` holding `deliveries` as one `Deliveries`, encoded.
/// The deliveries are read twice (to size the message, then to write it):
/// each record's shared fields are a cached read, cheaper than a list of
/// them per message.
pub(crate) fn deliveries<'a>(deliveries: impl Iterator<Item = &'a Delivery> + Clone) -> Bytes {
    let inner: usize = deliveries.clone().map(framed_len).sum();
    let mut out = Vec::with_capacity(KEY_BYTES + encoded_len_varint(inner as u64) + inner);
    put_key_and_varint(
        &mut out,
        SERVER_MESSAGE_DELIVERIES,
        WireType::LengthDelimited,
        inner as u64,
    );
    let mut head = [0u8; MAX_HEAD_BYTES];
    for delivery in deliveries {
        let shared = shared_fields(&delivery.record, delivery.partition);
        let at = write_head(delivery, shared.len(), &mut head);
        out.extend_from_slice(&head[..at]);
        out.extend_from_slice(shared);
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herald_records::{BatchBuilder, RecordBatch, RecordFields};
    use proptest::prelude::*;

    use prost::Message as _;

    use super::*;
    use crate::convert;
    use crate::proto::ServerMessage;

    /// A record's key, value and headers (names as bytes: a record may
    /// carry names that are not UTF-8).
    type Fields = (
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        Vec<(Vec<u8>, Option<Vec<u8>>)>,
    );

    /// Records as the tailer shares them, read back from a stored batch
    /// whose offsets start at `base_offset` and whose records all have
    /// `timestamp_ms`.
    fn shared_records_at(
        records: &[Fields],
        base_offset: i64,
        timestamp_ms: i64,
    ) -> Vec<Arc<SharedRecord>> {
        let mut builder = BatchBuilder::new(timestamp_ms);
        for (key, value, headers) in records {
            let headers: Vec<(&[u8], Option<&[u8]>)> = headers
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            builder.push(RecordFields {
                timestamp_ms,
                key: key.as_deref(),
                value: value.as_deref(),
                headers: &headers,
            });
        }
        let mut bytes = builder.finish().expect("a batch");
        // The base offset is outside the batch's checksum.
        bytes[..8].copy_from_slice(&base_offset.to_be_bytes());
        let bytes = Bytes::from(bytes);
        let batch = RecordBatch::new(&bytes).expect("parses");
        batch
            .records_in_place()
            .expect("uncompressed")
            .map(|r| Arc::new(SharedRecord::slice_of(&bytes, &r.expect("a record"))))
            .collect()
    }

    fn shared_records(records: &[Fields]) -> Vec<Arc<SharedRecord>> {
        shared_records_at(records, 0, 1_700_000_000_123)
    }

    fn decoded(bytes: &Bytes) -> ServerMessage {
        ServerMessage::decode(bytes.clone()).expect("decodes")
    }

    #[test]
    fn the_encoding_is_the_message_the_proto_path_builds() {
        let records = shared_records(&[
            (Some(b"orders.eu".to_vec()), Some(b"{}".to_vec()), vec![]),
            (
                None,
                None,
                vec![
                    (b"trace".to_vec(), Some(vec![1, 2])),
                    (b"empty".to_vec(), None),
                    (Vec::new(), Some(Vec::new())),
                    (Vec::new(), None),
                    (vec![0xff, b'x', 0xc3], Some(b"not utf-8".to_vec())),
                ],
            ),
            (Some(Vec::new()), Some(Vec::new()), vec![]),
        ]);
        let deliveries: Vec<Delivery> = records
            .iter()
            .enumerate()
            .map(|(i, record)| Delivery {
                subscription_id: [0, 7, u64::MAX][i],
                partition: 3,
                record: Arc::clone(record),
                high_priority: i == 1,
            })
            .collect();
        let encoded = super::deliveries(deliveries.iter());
        assert_eq!(
            decoded(&encoded),
            convert::deliveries_message(deliveries.iter())
        );
        // A second subscriber of the same records reuses their encoding.
        let other: Vec<Delivery> = deliveries
            .iter()
            .map(|d| Delivery {
                subscription_id: 99,
                ..d.clone()
            })
            .collect();
        assert_eq!(
            decoded(&super::deliveries(other.iter())),
            convert::deliveries_message(other.iter())
        );
    }

    proptest! {
        #[test]
        fn any_run_of_deliveries_decodes_to_the_proto_message(
            records in proptest::collection::vec(
                (
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
                    proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..8), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))), 0..3),
                ),
                1..20,
            ),
            base_offset in 0..i64::MAX / 2,
            timestamp_ms in prop_oneof![Just(0i64), Just(-1), Just(i64::MIN), Just(i64::MAX), any::<i64>()],
            ids in proptest::collection::vec(any::<u64>(), 20),
            high in proptest::collection::vec(any::<bool>(), 20),
            partition in any::<u32>(),
        ) {
            let shared = shared_records_at(&records, base_offset, timestamp_ms);
            let deliveries: Vec<Delivery> = shared
                .iter()
                .enumerate()
                .map(|(i, record)| Delivery {
                    subscription_id: ids[i],
                    partition,
                    record: Arc::clone(record),
                    high_priority: high[i],
                })
                .collect();
            prop_assert_eq!(decoded(&super::deliveries(deliveries.iter())), convert::deliveries_message(deliveries.iter()));
        }
    }
}
