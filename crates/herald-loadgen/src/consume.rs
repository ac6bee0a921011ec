//! The consume load: C subscribers, each on its own connection, each
//! reading the whole topic from offset 0 up to the high watermark it saw
//! first, independently of the others, and again from 0 while the run is
//! shorter than its minimum duration.

use herald_client::ConnectOptions;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fetch::Fetcher;
use crate::progress::Progress;
use crate::{records, LoadError};

/// What one consume run does.
#[derive(Debug, Clone)]
pub struct ConsumeSpec {
    /// The broker.
    pub addr: SocketAddr,
    /// The topic (partition 0 is read).
    pub topic: String,
    /// Independent subscribers.
    pub subscribers: u32,
    /// Fetch `max_bytes` (also the partition's).
    pub max_bytes: i32,
    /// Time bound.
    pub duration: Duration,
    /// Each subscriber reads the topic again from offset 0 until this much
    /// time has passed, so that short topics still give a steady figure.
    pub min_duration: Duration,
    /// Count bound per subscriber, in records.
    pub records_max: u64,
    /// TLS and SASL, as a Kafka client's `security.protocol` says.
    pub security: ConnectOptions,
}

/// What a consume run measured.
#[derive(Debug, Default)]
pub struct ConsumeOutcome {
    /// Records read over all subscribers.
    pub records: u64,
    /// Batch bytes read over all subscribers.
    pub bytes: u64,
    /// From the start to the last subscriber's end.
    pub secs: f64,
}

/// Runs the subscribers to the end of the topic or their bounds.
pub async fn run(spec: &ConsumeSpec, progress: Arc<Progress>) -> Result<ConsumeOutcome, LoadError> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for index in 0..spec.subscribers {
        let spec = spec.clone();
        let progress = progress.clone();
        tasks.push(tokio::spawn(async move {
            subscribe(index, &spec, &progress).await
        }));
    }
    let mut outcome = ConsumeOutcome::default();
    for task in tasks {
        let (records, bytes) = task.await.map_err(|e| LoadError::Io {
            what: "subscriber task",
            source: std::io::Error::other(e.to_string()),
        })??;
        outcome.records += records;
        outcome.bytes += bytes;
    }
    outcome.secs = start.elapsed().as_secs_f64();
    Ok(outcome)
}

/// One subscriber: (records, bytes) read.
async fn subscribe(
    index: u32,
    spec: &ConsumeSpec,
    progress: &Progress,
) -> Result<(u64, u64), LoadError> {
    let mut fetcher = Fetcher::connect(
        spec.addr,
        &spec.topic,
        index,
        spec.max_bytes,
        &spec.security,
    )
    .await?;
    let start = Instant::now();
    let deadline = start + spec.duration;
    let mut offset = 0i64;
    let mut end: Option<i64> = None;
    let (mut read, mut bytes) = (0u64, 0u64);
    while Instant::now() < deadline && read < spec.records_max {
        let fetched = fetcher.fetch(offset).await?;
        let end = *end.get_or_insert(fetched.high_watermark);
        let counted = records::count(&fetched.records);
        read += counted.records;
        bytes += counted.bytes;
        progress.add(counted.records);
        if let Some(next) = counted.next_offset {
            offset = next;
        }
        if offset >= end {
            if start.elapsed() >= spec.min_duration {
                break;
            }
            offset = 0;
        }
    }
    Ok((read, bytes))
}
