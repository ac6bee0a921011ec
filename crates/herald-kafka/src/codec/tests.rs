//! Cross-checks of the guard schemas and the decoder against requests
//! encoded by `kafka-protocol` itself, at every served version.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Encodable;

use super::guard;
use super::request::decode_request;
use crate::registry::APIS;
use crate::test_support::{frame, populated};

#[test]
fn schemas_match_kafka_protocol_at_every_served_version() {
    for range in APIS {
        for version in (range.min..=range.max).filter(|v| range.serves(*v)) {
            let (body, _) = populated(range.key, version);
            let layout = range.schema;
            let consumed = guard::check(layout, version, &body)
                .unwrap_or_else(|e| panic!("{:?} v{version} refused: {e}", range.key));
            assert_eq!(
                consumed,
                body.len(),
                "{:?} v{version} layout covers the whole body",
                range.key
            );
        }
    }
}

#[test]
fn every_served_request_decodes_with_its_correlation_id() {
    for range in APIS {
        for version in (range.min..=range.max).filter(|v| range.serves(*v)) {
            let (body, _) = populated(range.key, version);
            let request = decode_request(frame(range.key, version, &body))
                .unwrap_or_else(|e| panic!("{:?} v{version}: {e}", range.key));
            assert_eq!(request.correlation_id(), 99);
            assert_eq!(request.api_key, range.key);
        }
    }
}

#[test]
fn produce_records_stay_a_slice_of_the_frame() {
    let (body, _) = populated(ApiKey::Produce, 9);
    let frame = frame(ApiKey::Produce, 9, &body);
    let start = frame.as_ptr() as usize;
    let end = start + frame.len();
    let request = decode_request(frame.clone()).expect("decode");
    let super::RequestBody::Produce(p) = request.body else {
        panic!("not produce")
    };
    let records = p.topic_data[0].partition_data[0]
        .records
        .clone()
        .expect("records");
    assert!(
        (start..end).contains(&(records.as_ptr() as usize)),
        "records were copied"
    );
}

#[test]
fn truncating_any_request_never_panics() {
    for range in APIS {
        for version in (range.min..=range.max).filter(|v| range.serves(*v)) {
            let (body, _) = populated(range.key, version);
            let whole = frame(range.key, version, &body);
            for cut in 0..whole.len() {
                let _ = decode_request(whole.slice(..cut));
            }
        }
    }
}

#[test]
fn hostile_metadata_count_is_refused_not_allocated() {
    // Metadata v1: header (key 3, version 1, correlation 7, client id null)
    // then a topics count of 2^31-1 and nothing else.
    let mut frame = vec![0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff];
    frame.extend_from_slice(&i32::MAX.to_be_bytes());
    let err = decode_request(Bytes::from(frame)).expect_err("refused");
    assert!(matches!(err, super::DecodeError::Guard { .. }), "{err}");
}

#[test]
fn unknown_api_and_unsupported_version_are_told_apart() {
    let unknown = decode_request(Bytes::from_static(&[0, 99, 0, 0, 0, 0, 0, 1, 0xff, 0xff]));
    assert!(matches!(
        unknown,
        Err(super::DecodeError::UnknownApi {
            api_key: 99,
            correlation_id: 1
        })
    ));
    let too_new = decode_request(Bytes::from_static(&[0, 18, 0, 99, 0, 0, 0, 2, 0xff, 0xff]));
    assert!(matches!(
        too_new,
        Err(super::DecodeError::UnsupportedVersion {
            version: 99,
            correlation_id: 2,
            ..
        })
    ));
    let old_produce = decode_request(Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 3, 0xff, 0xff]));
    assert!(matches!(
        old_produce,
        Err(super::DecodeError::UnsupportedVersion { .. })
    ));
}

#[test]
fn known_tag_with_a_wrong_declared_size_is_refused() {
    // Fetch v18 reproduces a fuzzer finding: a FetchPartition tag 0
    // (replica directory id, a 16-byte uuid) declared with size 0 made
    // kafka-protocol read 16 bytes the guard had not walked, so later
    // counts went unchecked.
    let mut body = BytesMut::new();
    let partition = fetch_request::FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(0);
    FetchRequest::default()
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic_id(uuid::Uuid::nil())
            .with_partitions(vec![partition])])
        .encode(&mut body, 18)
        .expect("encode");
    let body = body.to_vec();
    // The partition's tagged-field section is the byte after its six
    // fixed fields; with no tags it is a single 0. Find it from the end:
    // ... partition tags (0), topic tags (0), forgotten topics (1 = empty),
    // rack id (1 = empty), request tags (0).
    let tags_at = body.len() - 5;
    assert_eq!(&body[tags_at..], &[0, 0, 1, 1, 0]);
    let mut hostile = body[..tags_at].to_vec();
    hostile.extend_from_slice(&[1, 0, 0]); // one tag: tag 0, size 0
    hostile.extend_from_slice(&[0, 1, 1, 0]);
    let layout = &crate::handlers::fetch::layout::SCHEMA;
    assert!(matches!(
        guard::check(layout, 18, &hostile),
        Err(super::GuardError::Truncated { .. } | super::GuardError::TagSize { .. })
    ));
    // The fuzzer's own input.
    let crash: &[u8] = &[
        0x00, 0x01, 0x00, 0x12, 0x00, 0x03, 0x00, 0x10, 0x00, 0x02, 0x00, 0x04, 0x00, 0x3c, 0xff,
        0xff, 0x00, 0x12, 0x00, 0x67, 0x00, 0x08, 0x00, 0x04, 0x65, 0x00, 0x8d, 0xff, 0xff, 0xff,
        0xff, 0xfd, 0xff, 0x04, 0x82, 0x00, 0x3c, 0xff, 0xff, 0x00, 0x00, 0x00, 0x04, 0x00, 0x08,
        0x00, 0x3c, 0xff, 0xff, 0x00, 0x00, 0x00, 0x04, 0x00, 0x08, 0x00, 0x04, 0x65, 0x00, 0x8d,
        0xff, 0xff, 0xff, 0xff, 0xfd, 0xff, 0x04, 0x82, 0x54, 0x3c, 0xff, 0xff, 0x00, 0x00, 0x00,
        0x04, 0x00, 0x08, 0x00, 0x21, 0x00, 0x00, 0x9a, 0x0b, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x63, 0x64, 0x04, 0x65, 0x01, 0x00, 0x00, 0x05, 0x00, 0x00, 0x02, 0x00, 0x04,
        0x73, 0x56,
    ];
    assert!(decode_request(Bytes::copy_from_slice(crash)).is_err());
}
