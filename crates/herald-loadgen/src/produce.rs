//! The produce load: P publishers, each on its own connection with its own
//! client id, sending one pre-encoded ProduceRequest frame over and over
//! with only the correlation id patched (and, for latency runs, the first
//! record's send stamp). A semaphore bounds each publisher's requests in
//! flight; responses come back in order on a connection, so a bounded
//! channel of send instants pairs each response with its request.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use herald_client::{ConnectOptions, Stream};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use tokio::io::{AsyncWriteExt, ReadHalf};
use tokio::sync::{mpsc, Semaphore};

use crate::admin::topic_name;
use crate::progress::Progress;
use crate::wire::{decode_response, patch_correlation, read_frame, request_frame};
use crate::{clock, histogram, records, LoadError};

/// Produce v9: flexible, topics by name; served by Kafka 4 and herald.
pub const PRODUCE_VERSION: i16 = 9;
/// How long a publisher waits for its last answers after it stops sending.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What one produce run does.
#[derive(Debug, Clone)]
pub struct ProduceSpec {
    /// The broker.
    pub addr: SocketAddr,
    /// The topic (one partition, index 0).
    pub topic: String,
    /// Records per batch (one batch per request).
    pub batch: u32,
    /// Publishers, each on its own connection.
    pub publishers: u32,
    /// 1 or -1 (all).
    pub acks: i16,
    /// Requests in flight per publisher.
    pub in_flight: usize,
    /// Time bound.
    pub duration: Duration,
    /// Count bound, in records, over all publishers.
    pub records_max: u64,
    /// Records per second over all publishers; `None` for full speed.
    pub rate: Option<f64>,
    /// Write the send time into each batch's first record.
    pub stamp: bool,
    /// TLS and SASL, as a Kafka client's `security.protocol` says.
    pub security: ConnectOptions,
}

/// What a produce run measured.
#[derive(Debug)]
pub struct ProduceOutcome {
    /// Records acknowledged without error.
    pub records: u64,
    /// Batch bytes acknowledged without error.
    pub bytes: u64,
    /// From the first send to the last answer.
    pub secs: f64,
    /// Request latency (send to answer), microseconds.
    pub latency_us: Histogram<u64>,
    /// Partition answers with an error code.
    pub errors: u64,
    /// The last error code seen, if any.
    pub last_error: Option<i16>,
}

/// Runs the publishers to their bounds and merges what they measured.
pub async fn run(spec: &ProduceSpec, progress: Arc<Progress>) -> Result<ProduceOutcome, LoadError> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for index in 0..spec.publishers {
        let spec = spec.clone();
        let progress = progress.clone();
        tasks.push(tokio::spawn(async move {
            publish(index, &spec, &progress).await
        }));
    }
    let mut outcome = ProduceOutcome {
        records: 0,
        bytes: 0,
        secs: 0.0,
        latency_us: histogram::new(),
        errors: 0,
        last_error: None,
    };
    for task in tasks {
        let one = task.await.map_err(|e| LoadError::Io {
            what: "publisher task",
            source: std::io::Error::other(e.to_string()),
        })??;
        outcome.records += one.records;
        outcome.bytes += one.bytes;
        outcome.errors += one.errors;
        outcome.last_error = one.last_error.or(outcome.last_error);
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = outcome.latency_us.add(&one.latency_us);
    }
    outcome.secs = start.elapsed().as_secs_f64();
    Ok(outcome)
}

/// One publisher: a writer loop here, a reader task for the answers.
async fn publish(
    index: u32,
    spec: &ProduceSpec,
    progress: &Arc<Progress>,
) -> Result<ProduceOutcome, LoadError> {
    let stream = crate::connect::open(spec.addr, &spec.security).await?;
    let (reader, mut writer) = tokio::io::split(stream);
    let mut frame = Frame::new(spec, index)?;
    let semaphore = Arc::new(Semaphore::new(spec.in_flight.max(1)));
    let (sent_tx, sent_rx) = mpsc::channel::<Instant>(spec.in_flight.max(1));
    let answers = tokio::spawn(read_answers(
        reader,
        sent_rx,
        semaphore.clone(),
        progress.clone(),
        spec.batch,
        frame.batch_bytes as u64,
    ));

    let start = Instant::now();
    let deadline = tokio::time::Instant::from_std(start + spec.duration);
    let records_max = spec.records_max / u64::from(spec.publishers.max(1));
    let interval = spec.rate.map(|rate| {
        let per_publisher = rate / f64::from(spec.publishers.max(1));
        Duration::from_secs_f64(f64::from(spec.batch) / per_publisher.max(1e-3))
    });
    let mut next_send = tokio::time::Instant::now();
    let mut sent_records = 0u64;
    let mut correlation_id = 0i32;
    while tokio::time::Instant::now() < deadline && sent_records < records_max {
        if let Some(interval) = interval {
            next_send += interval;
            tokio::time::sleep_until(next_send.min(deadline)).await;
        }
        let Ok(permit) = tokio::time::timeout_at(deadline, semaphore.acquire()).await else {
            break;
        };
        // The semaphore is never closed, so acquire cannot fail; the reader
        // gives the permit back when the answer arrives.
        permit
            .map_err(|_| LoadError::io("in-flight semaphore", closed()))?
            .forget();
        correlation_id = correlation_id.wrapping_add(1);
        frame.prepare(correlation_id, spec.stamp);
        if sent_tx.send(Instant::now()).await.is_err() {
            break; // the reader stopped: its error is reported below
        }
        if let Err(e) = writer.write_all(&frame.bytes).await {
            drop(sent_tx);
            let _ = answers.await;
            return Err(LoadError::io("send produce request", e));
        }
        sent_records += u64::from(spec.batch);
    }
    drop(sent_tx);
    match tokio::time::timeout(DRAIN_TIMEOUT, answers).await {
        Ok(joined) => joined.map_err(|e| LoadError::Io {
            what: "produce answer task",
            source: std::io::Error::other(e.to_string()),
        })?,
        Err(_) => Err(LoadError::Timeout {
            what: "the last produce answers",
            timeout_ms: DRAIN_TIMEOUT.as_millis() as u64,
        }),
    }
}

/// Reads answers until the writer is done and every request is answered.
async fn read_answers(
    mut reader: ReadHalf<Stream>,
    mut sent: mpsc::Receiver<Instant>,
    semaphore: Arc<Semaphore>,
    progress: Arc<Progress>,
    batch: u32,
    batch_bytes: u64,
) -> Result<ProduceOutcome, LoadError> {
    let mut outcome = ProduceOutcome {
        records: 0,
        bytes: 0,
        secs: 0.0,
        latency_us: histogram::new(),
        errors: 0,
        last_error: None,
    };
    let mut buf = BytesMut::with_capacity(4096);
    while let Some(sent_at) = sent.recv().await {
        let (latency_us, code) = next_answer(&mut reader, &mut buf, sent_at).await?;
        semaphore.add_permits(1);
        match code {
            None => {
                outcome.records += u64::from(batch);
                outcome.bytes += batch_bytes;
                outcome.latency_us.saturating_record(latency_us.max(1));
                progress.add(u64::from(batch));
            }
            Some(code) => {
                outcome.errors += 1;
                outcome.last_error = Some(code);
            }
        }
    }
    Ok(outcome)
}

/// Reads the next Produce answer on a connection: how long after
/// `sent_at` it came (µs), and the first partition error code, if any.
pub(crate) async fn next_answer(
    reader: &mut ReadHalf<Stream>,
    buf: &mut BytesMut,
    sent_at: Instant,
) -> Result<(u64, Option<i16>), LoadError> {
    let frame = read_frame(reader, buf).await?;
    let latency_us = sent_at.elapsed().as_micros() as u64;
    let (_, response): (i32, ProduceResponse) =
        decode_response(ApiKey::Produce, PRODUCE_VERSION, frame)?;
    let code = response
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| p.error_code)
        .find(|c| *c != 0);
    Ok((latency_us, code))
}

/// A publisher's request frame, encoded once.
struct Frame {
    bytes: Vec<u8>,
    /// Where the batch starts in `bytes`.
    batch_at: usize,
    batch_bytes: usize,
    /// Where the first record's value starts in the batch.
    value_at: Option<usize>,
}

impl Frame {
    fn new(spec: &ProduceSpec, index: u32) -> Result<Self, LoadError> {
        let batch = records::batch(spec.batch);
        let value_at = records::first_value_at(&batch);
        let request = ProduceRequest::default()
            .with_acks(spec.acks)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(&spec.topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(batch.clone())))])]);
        let client_id = format!("herald-loadgen-p{index}");
        let bytes = request_frame(ApiKey::Produce, PRODUCE_VERSION, 0, &client_id, &request)?;
        let batch_at = bytes
            .windows(batch.len())
            .rposition(|w| w == batch.as_slice())
            .ok_or_else(|| LoadError::Encode {
                api: "Produce",
                detail: "the batch is not in the encoded frame".to_owned(),
            })?;
        Ok(Self {
            bytes,
            batch_at,
            batch_bytes: batch.len(),
            value_at,
        })
    }

    /// Patches the correlation id, and the send stamp if asked.
    fn prepare(&mut self, correlation_id: i32, stamp: bool) {
        patch_correlation(&mut self.bytes, correlation_id);
        if let (true, Some(value_at)) = (stamp, self.value_at) {
            let batch = &mut self.bytes[self.batch_at..self.batch_at + self.batch_bytes];
            records::stamp(batch, value_at, clock::now_ns());
        }
    }
}

fn closed() -> std::io::Error {
    std::io::Error::other("closed")
}
