//! Every handler at every served version: the response encodes (a field set
//! that the negotiated version cannot carry would make the encoder fail and
//! the connection close).

use std::net::SocketAddr;
use std::sync::Arc;

use herald_broker::{Broker, BrokerConfig};
use herald_log::batch::testing;

use super::{handle_frame, Context, Outcome};
use crate::config::KafkaConfig;
use crate::test_support::{frame, populated};
use crate::versions::{served, SUPPORTED};

fn context(dir: &std::path::Path) -> Context {
    let broker = Broker::open(BrokerConfig::new(dir)).expect("broker");
    broker
        .create_topic("orders", Some(2), &[], false)
        .expect("topic");
    let partition = broker
        .topic("orders")
        .and_then(|t| t.partition(1))
        .expect("partition");
    partition
        .append(&testing::batch(3, b"stored", 1_000))
        .expect("append");
    let listen: SocketAddr = "127.0.0.1:9092".parse().expect("addr");
    Context::new(broker, KafkaConfig::new(listen))
}

#[tokio::test]
async fn every_handler_answers_every_served_version() {
    for range in SUPPORTED {
        for version in (range.min..=range.max).filter(|v| served(range, *v)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let ctx = context(dir.path());
            let (body, _) = populated(range.key, version);
            match handle_frame(&ctx, frame(range.key, version, &body)).await {
                Outcome::Respond(response) => {
                    assert!(response.len() > 8, "{:?} v{version}", range.key)
                }
                other => panic!("{:?} v{version}: {other:?}", range.key),
            }
            Arc::clone(&ctx.broker).close().expect("close");
        }
    }
}

#[tokio::test]
async fn fetch_at_every_version_carries_the_stored_batch() {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Decodable, Encodable};
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = context(dir.path());
    let id = ctx.broker.topic("orders").expect("topic").id();
    for version in 4..=18 {
        let request = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(crate::test_support::topic())
                .with_topic_id(id)
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(1)
                    .with_fetch_offset(1)
                    .with_partition_max_bytes(1 << 20)])]);
        let mut body = bytes::BytesMut::new();
        request.encode(&mut body, version).expect("encode");
        let Outcome::Respond(response) =
            handle_frame(&ctx, frame(ApiKey::Fetch, version, &body)).await
        else {
            panic!("fetch v{version} not answered");
        };
        let mut bytes = bytes::Bytes::from(response.to_vec()).slice(4..);
        ResponseHeader::decode(&mut bytes, ApiKey::Fetch.response_header_version(version))
            .expect("header");
        let decoded = FetchResponse::decode(&mut bytes, version).expect("decode");
        let p = &decoded.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "v{version}");
        assert_eq!(p.high_watermark, 3);
        let records = p.records.clone().expect("records");
        assert_eq!(
            records.len(),
            testing::batch(3, b"stored", 1_000).len(),
            "v{version}: the whole batch"
        );
    }
}
