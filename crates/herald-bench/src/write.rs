//! The write workload: N publishers append pre-built batches to one
//! partition until a deadline or a byte budget, whichever comes first.

use std::time::Duration;

use crate::baselines::MutexLog;
use crate::batches::BatchSet;
use crate::herald::ScratchLog;
use crate::region::Region;
use crate::threads::{run_workers, Limit, Sample, Tally};
use crate::{BenchError, Settings};

/// Bounds of one write sample.
#[derive(Debug, Clone, Copy)]
pub struct WriteLimits {
    /// How long publishers append.
    pub time: Duration,
    /// Most bytes all publishers together append.
    pub bytes_max: u64,
}

impl WriteLimits {
    /// A publisher's share: the budget is split evenly, so that the sum never
    /// exceeds what the baselines' buffer holds.
    fn per_publisher(&self, publishers: usize, set: &BatchSet) -> Limit {
        Limit::starting_now(
            self.time,
            self.bytes_max / publishers as u64,
            set.batch_bytes() as u64,
        )
    }
}

/// herald's log, fresh in a new directory for every sample.
pub fn herald(
    settings: &Settings,
    publishers: usize,
    set: &BatchSet,
    limits: WriteLimits,
) -> Result<Sample, BenchError> {
    let log = ScratchLog::open(&settings.dir, settings)?;
    // One untimed append first: it creates the first segment's mapping and
    // allocates its first `preallocate_bytes`, a one-off cost of opening.
    let warmed = log.append(set.get(0)).map(drop).map_err(BenchError::from);
    let sample = warmed.and_then(|()| sample_herald(&log, publishers, set, limits));
    // Close (and delete) even after a failed sample, then report the failure.
    let closed = log.close();
    let sample = sample?;
    closed?;
    Ok(sample)
}

fn sample_herald(
    log: &ScratchLog,
    publishers: usize,
    set: &BatchSet,
    limits: WriteLimits,
) -> Result<Sample, BenchError> {
    run_workers("herald-w", (0..publishers).collect(), |i| {
        append_loop(i, set, limits.per_publisher(publishers, set), |b| {
            log.append(b)?;
            Ok(())
        })
    })
}

/// The mutex baseline, empty at the start of every sample.
pub fn mutex(
    region: &Region,
    publishers: usize,
    set: &BatchSet,
    limits: WriteLimits,
) -> Result<Sample, BenchError> {
    let log = MutexLog::new(region);
    run_workers("mutex-w", (0..publishers).collect(), |i| {
        append_loop(i, set, limits.per_publisher(publishers, set), |b| {
            log.append(b).map(drop)
        })
    })
}

/// The memcpy bound: each publisher copies into its own part of `region`,
/// with no coordination at all.
pub fn memcpy(
    region: &mut Region,
    publishers: usize,
    set: &BatchSet,
    limits: WriteLimits,
) -> Result<Sample, BenchError> {
    let share = (region.len() / publishers).min((limits.bytes_max / publishers as u64) as usize);
    let parts: Vec<(usize, &mut [u8])> = region
        .as_mut_slice()
        .chunks_mut(share.max(1))
        .take(publishers)
        .enumerate()
        .collect();
    run_workers("memcpy-w", parts, |(i, part)| {
        let limit = Limit::starting_now(limits.time, part.len() as u64, set.batch_bytes() as u64);
        let mut at = 0;
        append_loop(i, set, limit, |b| {
            part[at..at + b.len()].copy_from_slice(b);
            at += b.len();
            Ok(())
        })
    })
}

/// One publisher's loop: append batches from the set, starting at its own
/// index so that publishers do not all copy the same batch, until `limit`.
fn append_loop(
    publisher: usize,
    set: &BatchSet,
    limit: Limit,
    mut append: impl FnMut(&[u8]) -> Result<(), BenchError>,
) -> Result<Tally, BenchError> {
    let mut tally = Tally::default();
    let batch_bytes = set.batch_bytes() as u64;
    // The byte budget bounds the count: at most bytes_max / batch_bytes turns.
    for iteration in 0u64.. {
        if limit.reached(iteration, tally.bytes + batch_bytes) {
            break;
        }
        append(set.get(publisher + iteration as usize))?;
        tally.records += u64::from(set.records());
        tally.bytes += batch_bytes;
    }
    Ok(tally)
}
