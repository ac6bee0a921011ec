//! Behaviour of the running binary with well-formed traffic: pipelining,
//! acks=0, long-poll fetches, offsets, and a clean restart.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::*;

#[test]
fn pipelined_requests_are_answered_in_request_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "p", 1, &[]), 0);
    let sent: Vec<i32> = (0..20)
        .map(|i| {
            client.send(
                ApiKey::Produce,
                PRODUCE_V,
                &produce_request("p", 0, batch(1, &[i as u8]), 1),
            )
        })
        .collect();
    for (i, expected) in sent.iter().enumerate() {
        let (correlation, response): (i32, ProduceResponse) =
            client.receive(ApiKey::Produce, PRODUCE_V);
        assert_eq!(correlation, *expected);
        assert_eq!(
            response.responses[0].partition_responses[0].base_offset,
            i as i64
        );
    }
}

#[test]
fn acks_zero_gets_no_response_but_is_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "z", 1, &[]), 0);
    client.send(
        ApiKey::Produce,
        PRODUCE_V,
        &produce_request("z", 0, batch(4, b"fire"), 0),
    );
    // The next response on the connection is the fetch's, not a produce's.
    let data = fetch(&mut client, "z", 0, 0);
    assert_eq!(record_count(data.records.as_deref().unwrap_or_default()), 4);
}

#[test]
fn empty_partition_fetch_returns_zero_length_records_after_max_wait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "e", 1, &[]), 0);
    let started = Instant::now();
    let response: FetchResponse =
        client.call(ApiKey::Fetch, FETCH_V, &fetch_request("e", 0, 0, 300, 1));
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "waited for max_wait_ms"
    );
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(
        p.records.as_ref().map(|r| r.len()),
        Some(0),
        "zero-length, not null"
    );
    assert_eq!(response.session_id, 0, "fetch sessions are declined");
}

#[test]
fn long_poll_fetch_returns_as_soon_as_data_arrives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut consumer = Client::connect(server.addr);
    assert_eq!(create_topic(&mut consumer, "lp", 1, &[]), 0);
    let started = Instant::now();
    consumer.send(
        ApiKey::Fetch,
        FETCH_V,
        &fetch_request("lp", 0, 0, 10_000, 1),
    );
    std::thread::sleep(Duration::from_millis(200));
    let mut producer = Client::connect(server.addr);
    assert_eq!(produce(&mut producer, "lp", 0, batch(2, b"wake")), (0, 0));
    let (_, response): (i32, FetchResponse) = consumer.receive(ApiKey::Fetch, FETCH_V);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered when data arrived, not at max_wait"
    );
    let p = &response.responses[0].partitions[0];
    assert_eq!(record_count(p.records.as_deref().unwrap_or_default()), 2);
    assert_eq!(p.high_watermark, 2);
}

#[test]
fn fetch_past_the_end_is_offset_out_of_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "o", 1, &[]), 0);
    assert_eq!(produce(&mut client, "o", 0, batch(3, b"x")).0, 0);
    let p = fetch(&mut client, "o", 0, 10);
    assert_eq!(p.error_code, 1, "OFFSET_OUT_OF_RANGE");
    assert_eq!(p.high_watermark, 3);
    // A mid-batch offset gets the whole batch that contains it.
    let p = fetch(&mut client, "o", 0, 1);
    assert_eq!(record_count(p.records.as_deref().unwrap_or_default()), 3);
}

#[test]
fn sigterm_exits_zero_and_a_restart_keeps_topics_and_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &["--default-partitions", "2"]);
    let mut client = Client::connect(server.addr);
    let metadata: MetadataResponse = client.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(s("r"))))]))
            .with_allow_auto_topic_creation(true),
    );
    let topic_id = metadata.topics[0].topic_id;
    assert_eq!(
        metadata.topics[0].partitions.len(),
        2,
        "auto-created with --default-partitions"
    );
    assert_eq!(produce(&mut client, "r", 0, batch(5, b"kept")), (0, 0));
    drop(client);
    assert!(server.terminate().success(), "exit status 0 after SIGTERM");

    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    let metadata: MetadataResponse = client.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    assert_eq!(metadata.topics[0].topic_id, topic_id, "topic id kept");
    assert_eq!(
        produce(&mut client, "r", 0, batch(1, b"next")),
        (0, 5),
        "offsets continue"
    );
    let p = fetch(&mut client, "r", 0, 0);
    assert_eq!(record_count(p.records.as_deref().unwrap_or_default()), 6);
}

#[test]
fn second_server_on_the_same_data_dir_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _first = common::start(dir.path(), &[]);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--kafka-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("in use by another herald process"),
        "{stderr}"
    );
}

#[test]
fn invalid_flag_value_is_refused_with_key_value_and_reason() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--default-partitions", "0"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("default_partitions = 0") && stderr.contains("between"),
        "{stderr}"
    );
}

#[test]
fn sigterm_answers_a_parked_fetch_and_exits_promptly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "s", 1, &[]), 0);
    let sent = client.send(ApiKey::Fetch, FETCH_V, &fetch_request("s", 0, 0, 20_000, 1));
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let reader =
        std::thread::spawn(move || client.receive::<FetchResponse>(ApiKey::Fetch, FETCH_V));
    assert!(server.terminate().success());
    let (correlation, response) = reader.join().expect("reader");
    assert_eq!(
        correlation, sent,
        "the parked fetch was answered before the connection closed"
    );
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "shutdown did not wait for max_wait_ms"
    );
}

#[test]
fn connections_over_the_limit_are_closed_and_freed_slots_are_reused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &["--max-connections", "2"]);
    let mut first = Client::connect(server.addr);
    let mut second = Client::connect(server.addr);
    for client in [&mut first, &mut second] {
        let _: ApiVersionsResponse =
            client.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    }
    let mut third = Client::connect(server.addr);
    assert!(third.is_closed(), "the third connection is refused");
    drop(first);
    // The slot frees once the server notices the close; retry briefly.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = Client::connect(server.addr);
        again.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        if !again.closed_instead_of_answering() {
            break;
        }
        assert!(Instant::now() < deadline, "a freed slot is never reused");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _: ApiVersionsResponse =
        second.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
}

#[test]
fn large_fetches_return_exactly_the_stored_batches_across_many_requests() {
    // Batches of 24 KiB are sent from the segment file (sendfile) rather
    // than copied; pipelined fetches check responses stay whole and ordered.
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "big", 1, &[]), 0);
    let mut stored = Vec::new();
    for i in 0..96u32 {
        let value: Vec<u8> = (0..24 * 1024)
            .map(|j| (i as usize * 31 + j) as u8)
            .collect();
        let batch = batch(1, &value);
        let (error, base) = produce(&mut client, "big", 0, batch.clone());
        assert_eq!((error, base), (0, i64::from(i)));
        stored.push(batch);
    }
    let mut offset = 0i64;
    let mut fetched = Vec::new();
    while offset < 96 {
        // Three pipelined fetches at once, each up to 1 MiB.
        let ids: Vec<i32> = (0..3)
            .map(|_| {
                client.send(
                    ApiKey::Fetch,
                    FETCH_V,
                    &fetch_request("big", 0, offset, 0, 1),
                )
            })
            .collect();
        for id in ids {
            let (answered, response): (i32, FetchResponse) = client.receive(ApiKey::Fetch, FETCH_V);
            assert_eq!(answered, id);
            let partition = &response.responses[0].partitions[0];
            assert_eq!(partition.error_code, 0);
            let records = partition.records.clone().unwrap_or_default();
            // Every pipelined fetch asked for the same offset: same answer.
            if fetched.len() as i64 == offset {
                for whole in herald_records::batches(&records) {
                    fetched.push(Bytes::copy_from_slice(whole.expect("whole batch")));
                }
            }
        }
        offset = fetched.len() as i64;
    }
    assert_eq!(fetched.len(), stored.len());
    for (i, (got, sent)) in fetched.iter().zip(&stored).enumerate() {
        // The broker stamps the base offset and the leader epoch (both
        // outside the CRC); every other byte is what the producer sent.
        assert_eq!(&got[8..12], &sent[8..12], "batch {i}");
        assert_eq!(&got[16..], &sent[16..], "batch {i}");
        let header = herald_records::BatchHeader::parse(got).expect("header");
        assert_eq!(header.base_offset(), i as i64);
    }
}

#[test]
fn pipelined_large_produce_requests_are_stored_byte_for_byte() {
    // Frames over 64 KiB are read into recycled buffers of their exact
    // size. Sent back to back, one read holds the end of a frame and the
    // start of the next; a buffer reused for a smaller frame must carry
    // nothing of the larger one it held before.
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "frames", 1, &[]), 0);
    // The first two wait for their answers, so their buffers are free
    // again when the pipelined rest arrives.
    let sizes = [
        900_000usize,
        800_000,
        70_000,
        450_000,
        300,
        90_000,
        65_000,
        10,
        200_000,
        70_001,
    ];
    let batches: Vec<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            let value: Vec<u8> = (0..size).map(|j| (i * 7 + j * 13) as u8).collect();
            batch(1, &value)
        })
        .collect();
    for (i, b) in batches[..2].iter().enumerate() {
        assert_eq!(produce(&mut client, "frames", 0, b.clone()), (0, i as i64));
    }
    // One write, so that the frames reach the socket together.
    let ids: Vec<i32> = (100..100 + batches.len() as i32 - 2).collect();
    let wire: Vec<u8> = batches[2..]
        .iter()
        .zip(&ids)
        .flat_map(|(b, id)| {
            let request = produce_request("frames", 0, b.clone(), 1);
            request_frame(ApiKey::Produce, PRODUCE_V, *id, &request).to_vec()
        })
        .collect();
    client.send_raw(&wire);
    for (i, id) in ids.iter().enumerate() {
        let (answered, response): (i32, ProduceResponse) =
            client.receive(ApiKey::Produce, PRODUCE_V);
        assert_eq!(answered, *id);
        let partition = &response.responses[0].partition_responses[0];
        assert_eq!(
            (partition.error_code, partition.base_offset),
            (0, i as i64 + 2)
        );
    }
    for (i, sent) in batches.iter().enumerate() {
        let response: FetchResponse = client.call(
            ApiKey::Fetch,
            FETCH_V,
            &fetch_request("frames", 0, i as i64, 0, 1),
        );
        let records = response.responses[0].partitions[0]
            .records
            .clone()
            .unwrap_or_default();
        let got = herald_records::batches(&records)
            .next()
            .expect("a batch")
            .expect("whole batch");
        // Only the base offset and the leader epoch are stamped.
        assert_eq!(&got[8..12], &sent[8..12], "batch {i} ({} bytes)", sizes[i]);
        assert_eq!(&got[16..], &sent[16..], "batch {i} ({} bytes)", sizes[i]);
    }
}
