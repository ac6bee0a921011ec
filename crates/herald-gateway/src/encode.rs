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

use bytes::{BufMut as _, Bytes, BytesMut};
use herald_push::{Delivery, SharedRecord};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};
use prost::Message as _;

use crate::convert;

/// `ServerMessage.deliveries`.
const SERVER_MESSAGE_DELIVERIES: u32 = 3;
/// `Deliveries.deliveries`.
const DELIVERIES_DELIVERY: u32 = 1;
/// `Delivery.subscription_id`.
const DELIVERY_SUBSCRIPTION_ID: u32 = 1;
/// `Delivery.priority`.
const DELIVERY_PRIORITY: u32 = 8;

/// One byte: every field number above is below 16.
const KEY_BYTES: usize = 1;

/// The fields every delivery of `record` shares (all but the subscription
/// id and the priority), encoded once per record.
fn shared_fields(record: &SharedRecord, partition: u32) -> &Bytes {
    record.encoded(|record| {
        // Proto3 leaves default values out: a zero subscription id and a
        // normal priority encode to nothing, so this is the shared part.
        let fields = convert::delivery_fields(0, partition, record, false);
        Bytes::from(fields.encode_to_vec())
    })
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

/// Bytes of one delivery: its own fields and the shared ones.
fn delivery_len(delivery: &Delivery) -> usize {
    own_len(delivery) + shared_fields(&delivery.record, delivery.partition).len()
}

/// A `ServerMessage` holding `deliveries` as one `Deliveries`, encoded.
/// The shared fields are looked up twice (to size the message, then to
/// copy them): a cached read each, cheaper than a list of them per
/// message.
pub(crate) fn deliveries(deliveries: &[Delivery]) -> Bytes {
    let inner: usize = deliveries
        .iter()
        .map(|d| {
            let len = delivery_len(d);
            KEY_BYTES + encoded_len_varint(len as u64) + len
        })
        .sum();
    let mut out = BytesMut::with_capacity(KEY_BYTES + encoded_len_varint(inner as u64) + inner);
    encode_key(
        SERVER_MESSAGE_DELIVERIES,
        WireType::LengthDelimited,
        &mut out,
    );
    encode_varint(inner as u64, &mut out);
    for delivery in deliveries {
        let shared = shared_fields(&delivery.record, delivery.partition);
        encode_key(DELIVERIES_DELIVERY, WireType::LengthDelimited, &mut out);
        encode_varint((own_len(delivery) + shared.len()) as u64, &mut out);
        if delivery.subscription_id != 0 {
            encode_key(DELIVERY_SUBSCRIPTION_ID, WireType::Varint, &mut out);
            encode_varint(delivery.subscription_id, &mut out);
        }
        if delivery.high_priority {
            encode_key(DELIVERY_PRIORITY, WireType::Varint, &mut out);
            encode_varint(crate::proto::Priority::High as u64, &mut out);
        }
        out.put_slice(shared);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herald_records::{BatchBuilder, RecordBatch, RecordFields};
    use proptest::prelude::*;

    use super::*;
    use crate::proto::ServerMessage;

    /// A record's key, value and headers.
    type Fields = (
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        Vec<(String, Option<Vec<u8>>)>,
    );

    /// Records as the tailer shares them, read back from a stored batch.
    fn shared_records(records: &[Fields]) -> Vec<Arc<SharedRecord>> {
        let mut builder = BatchBuilder::new(1_700_000_000_000);
        for (key, value, headers) in records {
            let headers: Vec<(&[u8], Option<&[u8]>)> = headers
                .iter()
                .map(|(k, v)| (k.as_bytes(), v.as_deref()))
                .collect();
            builder.push(RecordFields {
                timestamp_ms: 1_700_000_000_123,
                key: key.as_deref(),
                value: value.as_deref(),
                headers: &headers,
            });
        }
        let bytes = Bytes::from(builder.finish().expect("a batch"));
        let batch = RecordBatch::new(&bytes).expect("parses");
        batch
            .records_in_place()
            .expect("uncompressed")
            .map(|r| Arc::new(SharedRecord::slice_of(&bytes, &r.expect("a record"))))
            .collect()
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
                vec![("trace".into(), Some(vec![1, 2])), ("empty".into(), None)],
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
        let encoded = super::deliveries(&deliveries);
        assert_eq!(decoded(&encoded), convert::deliveries_message(&deliveries));
        // A second subscriber of the same records reuses their encoding.
        let other: Vec<Delivery> = deliveries
            .iter()
            .map(|d| Delivery {
                subscription_id: 99,
                ..d.clone()
            })
            .collect();
        assert_eq!(
            decoded(&super::deliveries(&other)),
            convert::deliveries_message(&other)
        );
    }

    proptest! {
        #[test]
        fn any_run_of_deliveries_decodes_to_the_proto_message(
            records in proptest::collection::vec(
                (
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
                    proptest::collection::vec(("[a-z]{0,8}", proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))), 0..3),
                ),
                1..20,
            ),
            ids in proptest::collection::vec(any::<u64>(), 20),
            high in proptest::collection::vec(any::<bool>(), 20),
            partition in any::<u32>(),
        ) {
            let shared = shared_records(&records);
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
            prop_assert_eq!(decoded(&super::deliveries(&deliveries)), convert::deliveries_message(&deliveries));
        }
    }
}
