//! End-to-end latency: a rate-limited publisher stamps each batch's first
//! record with its send time, and a subscriber in the same process tails
//! the topic and records (now - stamp) for every batch it reads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use herald_records::batches;

use crate::fetch::Fetcher;
use crate::produce::{self, ProduceOutcome, ProduceSpec};
use crate::progress::Progress;
use crate::{clock, histogram, records, LoadError};

/// How long the subscriber keeps reading after the publisher stopped.
const TAIL_GRACE: Duration = Duration::from_secs(2);

/// What a latency run measured.
#[derive(Debug)]
pub struct LatencyOutcome {
    /// The publisher's side: throughput and request latency.
    pub produce: ProduceOutcome,
    /// Send stamp to fetch answer, microseconds, one value per batch.
    pub end_to_end_us: Histogram<u64>,
}

/// Runs `spec` (its `rate` set, `stamp` forced on) with a tailing subscriber.
pub async fn run(spec: &ProduceSpec, progress: Arc<Progress>) -> Result<LatencyOutcome, LoadError> {
    let mut spec = spec.clone();
    spec.stamp = true;
    let mut fetcher = Fetcher::connect(spec.addr, &spec.topic, 0, 1 << 20, &spec.security).await?;
    let start_offset = fetcher.fetch(0).await?.high_watermark;
    let stop = Arc::new(AtomicBool::new(false));
    let tail = tokio::spawn(tail(fetcher, start_offset.max(0), stop.clone()));
    let produced = produce::run(&spec, progress).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let end_to_end_us = match tokio::time::timeout(TAIL_GRACE, tail).await {
        Ok(Ok(result)) => result?,
        Ok(Err(e)) => {
            return Err(LoadError::Io {
                what: "tail task",
                source: std::io::Error::other(e.to_string()),
            })
        }
        Err(_) => histogram::new(),
    };
    Ok(LatencyOutcome {
        produce: produced?,
        end_to_end_us,
    })
}

/// Tails from `offset` until `stop`, recording each batch's latency.
async fn tail(
    mut fetcher: Fetcher,
    mut offset: i64,
    stop: Arc<AtomicBool>,
) -> Result<Histogram<u64>, LoadError> {
    let mut latencies = histogram::new();
    while !stop.load(Ordering::Relaxed) {
        let fetched = fetcher.fetch(offset).await?;
        let now = clock::now_ns();
        for batch in batches(&fetched.records).map_while(Result::ok) {
            // Batches written by others (a readiness probe) carry zero.
            if let Some(sent) = records::read_stamp(batch).filter(|s| *s > 0) {
                let us = now.saturating_sub(sent) / 1000;
                latencies.saturating_record(us.max(1));
            }
        }
        if let Some(next) = records::count(&fetched.records).next_offset {
            offset = next;
        }
    }
    Ok(latencies)
}
