//! What a suite measures: the grid of batch sizes, client counts and acks,
//! and the bounds of every run. `quick` is the smoke-test plan.

use std::time::Duration;

/// The grid and bounds of one suite.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Records per batch.
    pub batches: Vec<u32>,
    /// Publisher counts.
    pub publishers: Vec<u32>,
    /// Subscriber counts.
    pub subscribers: Vec<u32>,
    /// acks values (1, -1).
    pub acks: Vec<i16>,
    /// Produce requests in flight per publisher.
    pub in_flight: usize,
    /// Time bound of a produce run.
    pub produce_duration: Duration,
    /// Count bound of a produce run, in records.
    pub produce_records_max: u64,
    /// Time bound of filling the topic the subscribers read.
    pub fill_duration: Duration,
    /// Time bound of a consume run.
    pub consume_duration: Duration,
    /// Subscribers re-read the topic until a run lasted this long.
    pub consume_min_duration: Duration,
    /// Fetch `max_bytes`.
    pub fetch_max_bytes: i32,
    /// Batch sizes of the latency runs.
    pub latency_batches: Vec<u32>,
    /// Time bound of a latency run.
    pub latency_duration: Duration,
    /// Unrecorded produce, then consume, before the first point.
    pub warm_up: Duration,
    /// Runs of every produce and consume point; the row is the median run.
    pub repeats: u32,
}

impl Plan {
    /// The full plan: about five minutes per broker on two cores.
    pub fn full() -> Self {
        Self {
            batches: vec![1, 64, 1024, 16384],
            publishers: vec![1, 2, 4, 8],
            subscribers: vec![1, 2, 4, 8],
            acks: vec![1, -1],
            in_flight: 8,
            produce_duration: Duration::from_secs(3),
            produce_records_max: 50_000_000,
            fill_duration: Duration::from_secs(8),
            consume_duration: Duration::from_secs(10),
            consume_min_duration: Duration::from_secs(2),
            fetch_max_bytes: 4 << 20,
            latency_batches: vec![1, 64, 1024],
            latency_duration: Duration::from_secs(4),
            warm_up: Duration::from_secs(5),
            repeats: 3,
        }
    }

    /// A smoke test: a few points, short runs.
    pub fn quick() -> Self {
        Self {
            batches: vec![64, 1024],
            publishers: vec![1, 4],
            subscribers: vec![1, 4],
            acks: vec![1],
            produce_duration: Duration::from_secs(1),
            fill_duration: Duration::from_secs(2),
            consume_duration: Duration::from_secs(3),
            consume_min_duration: Duration::from_secs(1),
            latency_batches: vec![64],
            latency_duration: Duration::from_secs(2),
            warm_up: Duration::from_secs(2),
            repeats: 1,
            ..Self::full()
        }
    }

    /// Records written to the topic the subscribers read, by batch size:
    /// enough for a read to last a while, few enough to fill quickly.
    pub fn fill_records(&self, batch: u32) -> u64 {
        match batch {
            1 => 300_000,
            2..=64 => 4_000_000,
            _ => 10_000_000,
        }
    }
}

/// "1" or "all".
pub fn acks_name(acks: i16) -> &'static str {
    if acks == -1 {
        "all"
    } else {
        "1"
    }
}
