//! One subscriber's fetch loop on one connection: Fetch requests by topic
//! name for partition 0, one in flight, each answer's batches walked by
//! header to count records and find the next offset.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use herald_client::{ConnectOptions, Stream};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse};
use tokio::io::AsyncWriteExt;

use crate::admin::topic_name;
use crate::wire::{decode_response, read_frame, request_frame};
use crate::LoadError;

/// Fetch v12: the last version that names topics (v13 uses topic ids).
pub const FETCH_VERSION: i16 = 12;
/// How long a fetch may wait for data.
pub const MAX_WAIT_MS: i32 = 100;

/// What one fetch returned.
#[derive(Debug)]
pub struct Fetched {
    /// The partition's record bytes (complete batches, maybe a partial tail).
    pub records: Bytes,
    /// The partition's high watermark.
    pub high_watermark: i64,
}

/// A subscriber's connection.
pub struct Fetcher {
    stream: Stream,
    buf: BytesMut,
    topic: String,
    client_id: String,
    max_bytes: i32,
    correlation_id: i32,
}

impl Fetcher {
    /// Connects subscriber `index` to `addr` for `topic`.
    pub async fn connect(
        addr: SocketAddr,
        topic: &str,
        index: u32,
        max_bytes: i32,
        security: &ConnectOptions,
    ) -> Result<Self, LoadError> {
        let stream = crate::connect::open(addr, security).await?;
        Ok(Self {
            stream,
            buf: BytesMut::with_capacity(max_bytes as usize + 4096),
            topic: topic.to_owned(),
            client_id: format!("herald-loadgen-c{index}"),
            max_bytes,
            correlation_id: 0,
        })
    }

    /// Fetches from `offset`, waiting up to [`MAX_WAIT_MS`] for data.
    pub async fn fetch(&mut self, offset: i64) -> Result<Fetched, LoadError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(MAX_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(self.max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(&self.topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(self.max_bytes)])]);
        let frame = request_frame(
            ApiKey::Fetch,
            FETCH_VERSION,
            self.correlation_id,
            &self.client_id,
            &request,
        )?;
        self.stream
            .write_all(&frame)
            .await
            .map_err(|e| LoadError::io("send fetch", e))?;
        let answer = read_frame(&mut self.stream, &mut self.buf).await?;
        let (_, response): (i32, FetchResponse) =
            decode_response(ApiKey::Fetch, FETCH_VERSION, answer)?;
        if response.error_code != 0 {
            return Err(LoadError::Broker {
                api: "Fetch",
                code: response.error_code,
            });
        }
        let partition = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or(LoadError::Decode {
                api: "Fetch",
                detail: "no partition in the answer".to_owned(),
            })?;
        if partition.error_code != 0 {
            return Err(LoadError::Broker {
                api: "Fetch",
                code: partition.error_code,
            });
        }
        Ok(Fetched {
            records: partition.records.unwrap_or_default(),
            high_watermark: partition.high_watermark,
        })
    }
}
