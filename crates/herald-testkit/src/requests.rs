//! The requests and batches the integration tests share.

use std::net::SocketAddr;

use bytes::Bytes;
use herald_records::{testing, BatchHeader};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::Client;

/// Wire string.
pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A valid batch of `count` records of `value`.
pub fn batch(count: u32, value: &[u8]) -> Bytes {
    Bytes::from(testing::batch(count, value, 1_700_000_000_000))
}

/// A batch whose CRC does not match its content.
pub fn batch_with_wrong_crc(count: u32, value: &[u8]) -> Bytes {
    let mut b = testing::batch(count, value, 1_700_000_000_000);
    let last = b.len() - 1;
    b[last] ^= 0x5a;
    assert_ne!(
        BatchHeader::compute_crc(&b),
        BatchHeader::parse(&b).expect("header").crc()
    );
    Bytes::from(b)
}

/// The Produce version the shared helpers speak.
pub const PRODUCE_V: i16 = 9;
/// The Fetch version the shared helpers speak.
pub const FETCH_V: i16 = 12;

/// Creates a topic; returns the error code.
pub fn create_topic(
    client: &mut Client,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )]);
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request);
    response.topics[0].error_code
}

/// A produce request for one partition.
pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records)),
            ])])
}

/// Produces with acks=1; returns (error code, base offset).
pub fn produce(client: &mut Client, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let response: ProduceResponse = client.call(
        ApiKey::Produce,
        PRODUCE_V,
        &produce_request(topic, partition, records, 1),
    );
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A fetch request for one partition.
pub fn fetch_request(
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(50 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// Fetches from one partition without waiting.
pub fn fetch(
    client: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
) -> fetch_response::PartitionData {
    let response: FetchResponse = client.call(
        ApiKey::Fetch,
        FETCH_V,
        &fetch_request(topic, partition, offset, 0, 1),
    );
    response.responses[0].partitions[0].clone()
}

/// Number of records in a run of batches.
pub fn record_count(records: &[u8]) -> u64 {
    herald_records::batches(records)
        .map(|b| {
            BatchHeader::parse(b.expect("whole batch"))
                .expect("header")
                .offset_count() as u64
        })
        .sum()
}

/// Checks, over a fresh connection, that the broker still serves: a
/// produce is acknowledged and every record of `topic`-0 reads back.
pub fn assert_healthy(addr: SocketAddr, topic: &str, expected_records_before: u64) -> u64 {
    let mut client = Client::connect(addr);
    let (error, base) = produce(&mut client, topic, 0, batch(3, b"healthy"));
    assert_eq!(error, 0, "healthy produce");
    assert_eq!(
        base as u64, expected_records_before,
        "offsets continue where they were"
    );
    let data = fetch(&mut client, topic, 0, 0);
    assert_eq!(data.error_code, 0);
    let count = record_count(data.records.as_deref().unwrap_or_default());
    assert_eq!(
        count,
        expected_records_before + 3,
        "stored records are intact"
    );
    count
}
