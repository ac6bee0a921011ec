//! The plan of a run: every (workload, threads, batch size) point, each
//! repeated, with the three systems interleaved inside a repetition so that
//! noise from the rest of the machine hits them alike.

use crate::baselines::MutexLog;
use crate::batches::BatchSet;
use crate::herald::ScratchLog;
use crate::read::{self, Partition};
use crate::region::Region;
use crate::threads::Sample;
use crate::write::{self, WriteLimits};
use crate::{BaselineMemory, BenchError, Settings, System, Workload};

/// Identifies one measured line of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// Write or read.
    pub workload: Workload,
    /// Publishers or subscribers.
    pub threads: usize,
    /// Records per batch.
    pub batch_records: u32,
    /// The system measured.
    pub system: System,
}

/// Every repetition of one key.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// What was measured.
    pub key: Key,
    /// Bytes per batch.
    pub batch_bytes: usize,
    /// For reads, the bytes each subscriber had to read: the whole partition.
    pub partition_bytes: Option<u64>,
    /// One sample per repetition.
    pub samples: Vec<Sample>,
}

/// What a run reports while it goes.
#[derive(Debug)]
pub enum Event<'a> {
    /// The partition for the read points of a batch size is being written.
    Filling {
        /// Records per batch.
        batch_records: u32,
        /// Bytes it will hold.
        bytes: u64,
    },
    /// One sample is taken.
    Sampled {
        /// Samples taken so far, this one included.
        done: usize,
        /// Samples the plan takes.
        total: usize,
        /// What was measured.
        key: Key,
        /// Repetition, from 1.
        rep: usize,
        /// The sample.
        sample: &'a Sample,
    },
}

/// Runs the whole plan, calling `progress` after every step.
pub fn run(
    settings: &Settings,
    mut progress: impl FnMut(Event<'_>),
) -> Result<Vec<Measurement>, BenchError> {
    settings.validate()?;
    let sets = settings
        .batches
        .iter()
        .map(|&b| BatchSet::new(b))
        .collect::<Result<Vec<_>, _>>()?;
    let batch_bytes_max = sets.iter().map(BatchSet::batch_bytes).max().unwrap_or(0) as u64;
    let threads_max = settings.threads.iter().copied().max().unwrap_or(1) as u64;
    if settings.write_bytes_max / threads_max < batch_bytes_max {
        // Each publisher's share of the budget must hold a batch, or the
        // largest batches would measure nothing.
        return Err(BenchError::Setting {
            name: "write_bytes_max",
            reason: format!("{threads_max} publishers need at least {batch_bytes_max} bytes each"),
        });
    }
    // One buffer serves both baselines in turn; it holds the larger of the
    // two volumes plus the one batch a partition fill always writes.
    let region_bytes = settings.write_bytes_max.max(settings.read_bytes) + batch_bytes_max;
    let mut region = Region::prefaulted(region_bytes as usize);
    let mut recorder = Recorder {
        out: Vec::new(),
        done: 0,
        total: settings.sample_count(),
    };

    for set in &sets {
        write_points(settings, set, &mut region, &mut recorder, &mut progress)?;
    }
    for set in &sets {
        read_points(settings, set, &region, &mut recorder, &mut progress)?;
    }
    Ok(recorder.out)
}

fn write_points(
    settings: &Settings,
    set: &BatchSet,
    region: &mut Region,
    recorder: &mut Recorder,
    progress: &mut impl FnMut(Event<'_>),
) -> Result<(), BenchError> {
    let limits = WriteLimits {
        time: settings.write_time,
        bytes_max: settings.write_bytes_max,
    };
    for &threads in &settings.threads {
        for rep in 1..=settings.reps {
            for system in System::ALL {
                // A fresh buffer is allocated (lazily, so cheaply) per sample
                // and unmapped after it, outside the timing.
                let mut fresh = match settings.baseline_memory {
                    BaselineMemory::Fresh if system != System::Herald => {
                        Some(Region::fresh(region.len()))
                    }
                    _ => None,
                };
                let buffer = fresh.as_mut().unwrap_or(&mut *region);
                let sample = match system {
                    System::Herald => write::herald(settings, threads, set, limits)?,
                    System::Mutex => write::mutex(buffer, threads, set, limits)?,
                    System::Memcpy => write::memcpy(buffer, threads, set, limits)?,
                };
                let key = Key {
                    workload: Workload::Write,
                    threads,
                    batch_records: set.records(),
                    system,
                };
                recorder.record(key, set, None, rep, sample, progress);
            }
        }
    }
    Ok(())
}

fn read_points(
    settings: &Settings,
    set: &BatchSet,
    region: &Region,
    recorder: &mut Recorder,
    progress: &mut impl FnMut(Event<'_>),
) -> Result<(), BenchError> {
    progress(Event::Filling {
        batch_records: set.records(),
        bytes: settings.read_bytes,
    });
    let herald_log = ScratchLog::open(&settings.dir, settings)?;
    let mutex_log = MutexLog::new(region);
    let filled = fill_both(settings, set, &herald_log, &mutex_log).and_then(|partition| {
        for &threads in &settings.threads {
            for rep in 1..=settings.reps {
                for system in System::ALL {
                    let time_max = settings.read_time_max;
                    let sample = match system {
                        System::Herald => {
                            read::herald(&herald_log, partition, threads, set, time_max)?
                        }
                        System::Mutex => {
                            read::mutex(&mutex_log, partition, threads, set, time_max)?
                        }
                        System::Memcpy => {
                            read::memcpy(mutex_log.committed(), threads, set, time_max)?
                        }
                    };
                    let key = Key {
                        workload: Workload::Read,
                        threads,
                        batch_records: set.records(),
                        system,
                    };
                    recorder.record(key, set, Some(partition.bytes), rep, sample, progress);
                }
            }
        }
        Ok(())
    });
    // Delete the log's files whatever happened, then report the first failure.
    let closed = herald_log.close();
    filled?;
    closed
}

/// Writes the same partition into herald's log and the mutex baseline.
fn fill_both(
    settings: &Settings,
    set: &BatchSet,
    herald_log: &ScratchLog,
    mutex_log: &MutexLog<'_>,
) -> Result<Partition, BenchError> {
    let herald = read::fill(set, settings.read_bytes, |b| {
        herald_log.append(b).map(drop).map_err(Into::into)
    })?;
    let mutex = read::fill(set, settings.read_bytes, |b| mutex_log.append(b).map(drop))?;
    debug_assert_eq!(herald, mutex, "both fills write the same batches");
    Ok(herald)
}

/// Collects samples into measurements and reports progress.
struct Recorder {
    out: Vec<Measurement>,
    done: usize,
    total: usize,
}

impl Recorder {
    fn record(
        &mut self,
        key: Key,
        set: &BatchSet,
        partition_bytes: Option<u64>,
        rep: usize,
        sample: Sample,
        progress: &mut impl FnMut(Event<'_>),
    ) {
        self.done += 1;
        progress(Event::Sampled {
            done: self.done,
            total: self.total,
            key,
            rep,
            sample: &sample,
        });
        match self.out.iter_mut().find(|m| m.key == key) {
            Some(m) => m.samples.push(sample),
            None => self.out.push(Measurement {
                key,
                batch_bytes: set.batch_bytes(),
                partition_bytes,
                samples: vec![sample],
            }),
        }
    }
}
