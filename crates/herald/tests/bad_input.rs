//! Hostile and malformed input against the real binary: each case gets its
//! error code or only its own connection closed, while a connection opened
//! before it keeps working and the stored records stay intact.

mod common;

use common::*;
use kafka_protocol::messages::*;

/// A broker with topic `t` holding 5 records, and an open bystander
/// connection that must survive whatever the test does.
struct Scene {
    server: Server,
    bystander: Client,
    _dir: tempfile::TempDir,
}

fn scene(extra: &[&str]) -> Scene {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), extra);
    let mut bystander = Client::connect(server.addr);
    assert_eq!(
        create_topic(&mut bystander, "t", 1, &[("max.message.bytes", "4096")]),
        0
    );
    assert_eq!(produce(&mut bystander, "t", 0, batch(5, b"stored")), (0, 0));
    Scene {
        server,
        bystander,
        _dir: dir,
    }
}

impl Scene {
    /// The bystander still gets answers, a new client can produce and read
    /// everything back, and the process is alive.
    fn assert_unaffected(mut self) {
        assert!(self.server.is_running(), "the broker process survived");
        let data = fetch(&mut self.bystander, "t", 0, 0);
        assert_eq!(record_count(data.records.as_deref().unwrap_or_default()), 5);
        assert_healthy(self.server.addr, "t", 5);
    }
}

#[test]
fn garbage_bytes_close_only_their_connection() {
    let scene = scene(&[]);
    let mut bad = Client::connect(scene.server.addr);
    bad.send_raw(b"\x00\x00\x00\x10GET / HTTP/1.1\r\n\r\n");
    assert!(bad.is_closed());
    scene.assert_unaffected();
}

#[test]
fn http_request_is_an_oversized_frame_and_closes_the_connection() {
    let scene = scene(&[]);
    let mut bad = Client::connect(scene.server.addr);
    // "GET " read as a size prefix is 1.2 GB: refused before allocating.
    bad.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(bad.is_closed());
    scene.assert_unaffected();
}

#[test]
fn truncated_frame_then_eof_closes_only_that_connection() {
    let scene = scene(&[]);
    let mut bad = Client::connect(scene.server.addr);
    let frame = request_frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default());
    bad.send_raw(&frame[..frame.len() - 3]);
    drop(bad);
    // A frame whose declared size is larger than the bytes of its request.
    let mut short = Client::connect(scene.server.addr);
    let mut lying = frame.clone();
    lying[..4].copy_from_slice(&((frame.len() - 4 - 2) as i32).to_be_bytes());
    short.send_raw(&lying[..lying.len() - 2]);
    assert!(short.is_closed());
    scene.assert_unaffected();
}

#[test]
fn frame_over_the_size_limit_is_refused_before_allocation() {
    let scene = scene(&["--max-frame-bytes", "65536"]);
    let mut bad = Client::connect(scene.server.addr);
    bad.send_raw(&(65537i32).to_be_bytes());
    assert!(bad.is_closed());
    let mut huge = Client::connect(scene.server.addr);
    huge.send_raw(&i32::MAX.to_be_bytes());
    assert!(huge.is_closed());
    scene.assert_unaffected();
}

#[test]
fn hostile_array_count_closes_only_its_connection() {
    let scene = scene(&[]);
    let mut bad = Client::connect(scene.server.addr);
    // Metadata v1: api key 3, version 1, correlation 7, null client id, then
    // a topics count of 2^31-1 with nothing behind it.
    let mut body = vec![0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff];
    body.extend_from_slice(&i32::MAX.to_be_bytes());
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    bad.send_raw(&frame);
    assert!(bad.is_closed());
    scene.assert_unaffected();
}

#[test]
fn hostile_compact_count_in_produce_closes_only_its_connection() {
    let scene = scene(&[]);
    let mut bad = Client::connect(scene.server.addr);
    // Produce v9 (flexible): header v2, then transactional id null (0),
    // acks, timeout, and a topics count varint of 2^32-1.
    let body = [
        0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff,
        0, // header: key, version, correlation, client id, tags
        0, 0, 1, 0, 0, 0x03, 0xe8, // transactional id, acks, timeout
        0xff, 0xff, 0xff, 0xff, 0x0f, // topics count
    ];
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    bad.send_raw(&frame);
    assert!(bad.is_closed());
    scene.assert_unaffected();
}

#[test]
fn unknown_api_key_closes_only_its_connection() {
    let scene = scene(&[]);
    let mut bad = Client::connect(scene.server.addr);
    let body = [0x7f, 0x00, 0, 0, 0, 0, 0, 9, 0xff, 0xff];
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    bad.send_raw(&frame);
    assert!(bad.is_closed());
    // EndTxn is a real Kafka API that herald does not serve yet.
    let mut unserved = Client::connect(scene.server.addr);
    unserved.send_raw(&request_frame(
        ApiKey::EndTxn,
        1,
        3,
        &EndTxnRequest::default(),
    ));
    assert!(unserved.is_closed());
    scene.assert_unaffected();
}

#[test]
fn api_versions_above_our_maximum_gets_unsupported_version_in_v0() {
    let scene = scene(&[]);
    let mut client = Client::connect(scene.server.addr);
    client.send(ApiKey::ApiVersions, 4, &ApiVersionsRequest::default());
    // Pretend a newer client: rewrite the version field to 99 and resend.
    let mut frame = request_frame(ApiKey::ApiVersions, 3, 42, &ApiVersionsRequest::default());
    frame[6..8].copy_from_slice(&99i16.to_be_bytes());
    let (_, first): (i32, ApiVersionsResponse) = client.receive(ApiKey::ApiVersions, 4);
    assert_eq!(first.error_code, 0);
    client.send_raw(&frame);
    let (correlation, response): (i32, ApiVersionsResponse) =
        client.receive(ApiKey::ApiVersions, 0);
    assert_eq!(correlation, 42);
    assert_eq!(response.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(response
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::ApiVersions as i16 && k.max_version == 4));
    scene.assert_unaffected();
}

#[test]
fn unsupported_version_of_another_api_closes_only_its_connection() {
    let scene = scene(&[]);
    let mut bad = Client::connect(scene.server.addr);
    let mut frame = request_frame(ApiKey::Metadata, 12, 5, &MetadataRequest::default());
    frame[6..8].copy_from_slice(&77i16.to_be_bytes());
    bad.send_raw(&frame);
    assert!(bad.is_closed());
    scene.assert_unaffected();
}

#[test]
fn wrong_crc_gets_corrupt_message_and_stores_nothing() {
    let mut scene = scene(&[]);
    let (error, base) = produce(
        &mut scene.bystander,
        "t",
        0,
        batch_with_wrong_crc(2, b"bad"),
    );
    assert_eq!(error, 2, "CORRUPT_MESSAGE");
    assert_eq!(base, -1);
    scene.assert_unaffected();
}

#[test]
fn batch_above_max_message_bytes_gets_message_too_large() {
    let mut scene = scene(&[]);
    let (error, _) = produce(&mut scene.bystander, "t", 0, batch(1, &[7u8; 8192]));
    assert_eq!(error, 10, "MESSAGE_TOO_LARGE");
    scene.assert_unaffected();
}

#[test]
fn produce_to_unknown_topic_with_auto_create_off_gets_unknown_topic() {
    let mut scene = scene(&["--auto-create-topics", "false"]);
    let (error, _) = produce(&mut scene.bystander, "nope", 0, batch(1, b"x"));
    assert_eq!(error, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    let metadata: MetadataResponse = scene.bystander.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(s("nope"))))]))
            .with_allow_auto_topic_creation(true),
    );
    assert_eq!(
        metadata.topics[0].error_code, 3,
        "not created with auto creation off"
    );
    let (error, _) = produce(&mut scene.bystander, "t", 9, batch(1, b"x"));
    assert_eq!(error, 3, "unknown partition");
    scene.assert_unaffected();
}

#[test]
fn two_batches_in_one_partition_get_invalid_record() {
    let mut scene = scene(&[]);
    let mut two = batch(1, b"a").to_vec();
    two.extend_from_slice(&batch(1, b"b"));
    let (error, _) = produce(&mut scene.bystander, "t", 0, two.into());
    assert_eq!(error, 87, "INVALID_RECORD");
    scene.assert_unaffected();
}
