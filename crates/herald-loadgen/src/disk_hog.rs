//! The flow evaluation's disk capacity step (issue 18): threads that
//! write a block and `fdatasync` it, over and over, in a directory on the
//! broker's data disk.
//!
//! Why: in the durable regime the broker fsyncs before it acknowledges
//! (`--flush every-append`), so its capacity hangs on how many flushes its
//! disk completes, which busy threads on its core (the CPU capacity step)
//! do not touch. These threads compete for the same device's flushes, as
//! another tenant of the disk would, and count their syncs so the report
//! can say how much of the flush capacity they took (a device with flushes
//! to spare gives the broker's goodput no step at all: the count tells
//! that apart from a controller that did not react).
//!
//! Each thread overwrites its own file in place, cycling over a bounded
//! region, so the disk use stays bounded however long the run; the files
//! are created before the run starts (a directory that is not there fails
//! at once, not halfway through a run) and removed when it ends.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::LoadError;

/// Bytes each thread's file cycles over by default: overwritten in place,
/// so the hog never holds more than this per thread on the disk.
pub const REGION_BYTES: u64 = 64 << 20;

/// The block each write carries by default (one page: the flush, not the
/// bytes, is what is contended).
pub const BLOCK_BYTES: usize = 4096;

/// What the disk capacity step does.
#[derive(Debug, Clone)]
pub struct DiskHogSpec {
    /// When (since the run started) the threads start syncing.
    pub at: Duration,
    /// Where their files go: a directory on the disk whose flushes are to
    /// be contended (the broker's data disk).
    pub dir: PathBuf,
    /// Threads, each syncing its own file (at least 1).
    pub threads: usize,
    /// Bytes per write (at least 1).
    pub block: usize,
    /// Bytes each file cycles over (rounded down to whole blocks, at least
    /// one).
    pub region: u64,
}

/// What the hog did, for the run's summary and the report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DiskHogReport {
    /// `fdatasync` calls completed across the threads.
    pub syncs: u64,
    /// Bytes written across the threads.
    pub bytes: u64,
    /// Seconds from the threads' start to the last one's end.
    pub secs: f64,
}

impl DiskHogReport {
    /// Syncs per second while the hog ran: the flush rate it took from the
    /// disk (0 when it never ran).
    pub fn syncs_per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.syncs as f64 / self.secs
        } else {
            0.0
        }
    }
}

/// The hog's files, created and open, waiting for [`DiskHog::run`]. What
/// is not removed by [`DiskHog::remove`] is removed (best effort) when it
/// is dropped, so that no path out of a run leaves files behind.
#[derive(Debug)]
pub struct DiskHog {
    at: Duration,
    files: Vec<(PathBuf, File)>,
    block: Vec<u8>,
    slots: u64,
}

impl DiskHog {
    /// Creates one file per thread in `spec.dir` (truncating a leftover of
    /// the same name). Fails with [`LoadError::DiskHog`] when the directory
    /// is missing, not a directory, or not writable.
    pub fn create(spec: &DiskHogSpec) -> Result<Self, LoadError> {
        let metadata = std::fs::metadata(&spec.dir)
            .map_err(|source| error("opening the directory", &spec.dir, source))?;
        if !metadata.is_dir() {
            return Err(error(
                "opening the directory",
                &spec.dir,
                io::Error::other("not a directory"),
            ));
        }
        let block = spec.block.max(1);
        let mut hog = Self {
            at: spec.at,
            files: Vec::new(),
            block: vec![0xa5; block],
            slots: (spec.region / block as u64).max(1),
        };
        for thread in 0..spec.threads.max(1) {
            let path = spec
                .dir
                .join(format!("herald-disk-hog-{}-{thread}", std::process::id()));
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .map_err(|source| error("creating", &path, source))?;
            // Dropping `hog` on an error above removes the files made so far.
            hog.files.push((path, file));
        }
        Ok(hog)
    }

    /// The files' paths, one per thread.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(path, _)| path.as_path())
    }

    /// Waits until `at` after `started`, then has each thread write a
    /// block at the next offset of its region and `fdatasync` it, until
    /// `end` after `started` or until `done` is set. A thread that fails
    /// stops them all; the first failure is returned. The files stay:
    /// [`DiskHog::remove`] removes them.
    pub fn run(
        &self,
        end: Duration,
        started: Instant,
        done: &AtomicBool,
    ) -> Result<DiskHogReport, LoadError> {
        let over = || started.elapsed() >= end || done.load(Ordering::Relaxed);
        // Short sleeps, so that a run ending early does not wait for `at`.
        while let Some(wait) = (started + self.at).checked_duration_since(Instant::now()) {
            if over() {
                return Ok(DiskHogReport::default());
            }
            std::thread::sleep(wait.min(Duration::from_millis(50)));
        }
        let syncs = AtomicU64::new(0);
        let failed = AtomicBool::new(false);
        let began = Instant::now();
        let outcomes: Vec<Result<(), LoadError>> = std::thread::scope(|scope| {
            let threads: Vec<_> = self
                .files
                .iter()
                .enumerate()
                .map(|(index, (path, file))| {
                    let (syncs, failed, over) = (&syncs, &failed, &over);
                    // Named, so that top -H tells its CPU from the
                    // publishers'.
                    let spawned = std::thread::Builder::new()
                        .name(format!("disk-hog-{index}"))
                        .spawn_scoped(scope, move || {
                            let outcome = self.sync_until(path, file, syncs, || {
                                over() || failed.load(Ordering::Relaxed)
                            });
                            if outcome.is_err() {
                                failed.store(true, Ordering::Relaxed);
                            }
                            outcome
                        });
                    if spawned.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    (path, spawned)
                })
                .collect();
            threads
                .into_iter()
                .map(|(path, spawned)| match spawned {
                    Ok(thread) => thread.join().unwrap_or_else(|_| {
                        Err(error(
                            "syncing",
                            path,
                            io::Error::other("the thread panicked"),
                        ))
                    }),
                    Err(source) => Err(error("starting a thread for", path, source)),
                })
                .collect()
        });
        let secs = began.elapsed().as_secs_f64();
        outcomes.into_iter().collect::<Result<Vec<()>, _>>()?;
        let syncs = syncs.into_inner();
        Ok(DiskHogReport {
            syncs,
            bytes: syncs * self.block.len() as u64,
            secs,
        })
    }

    /// One thread: write, sync, next block, until `stop`.
    fn sync_until(
        &self,
        path: &Path,
        file: &File,
        syncs: &AtomicU64,
        stop: impl Fn() -> bool,
    ) -> Result<(), LoadError> {
        let block = self.block.len() as u64;
        let mut slot = 0u64;
        while !stop() {
            file.write_all_at(&self.block, slot * block)
                .map_err(|source| error("writing", path, source))?;
            file.sync_data()
                .map_err(|source| error("syncing", path, source))?;
            syncs.fetch_add(1, Ordering::Relaxed);
            slot = (slot + 1) % self.slots;
        }
        Ok(())
    }

    /// Closes and removes the files; the first failure is returned (the
    /// others are still removed).
    pub fn remove(mut self) -> Result<(), LoadError> {
        let mut first = Ok(());
        for (path, file) in std::mem::take(&mut self.files) {
            drop(file);
            if let Err(source) = std::fs::remove_file(&path) {
                if first.is_ok() {
                    first = Err(error("removing", &path, source));
                }
            }
        }
        first
    }
}

impl Drop for DiskHog {
    fn drop(&mut self) {
        for (path, _) in self.files.drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn error(action: &'static str, path: &Path, source: io::Error) -> LoadError {
    LoadError::DiskHog {
        action,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path) -> DiskHogSpec {
        DiskHogSpec {
            at: Duration::ZERO,
            dir: dir.to_path_buf(),
            threads: 2,
            block: BLOCK_BYTES,
            region: 2 * BLOCK_BYTES as u64,
        }
    }

    #[test]
    fn it_syncs_within_its_region_and_removes_its_files() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let hog = DiskHog::create(&spec(dir.path())).expect("the hog's files");
        let paths: Vec<PathBuf> = hog.paths().map(Path::to_path_buf).collect();
        assert_eq!(paths.len(), 2);
        let done = AtomicBool::new(false);
        let report = hog
            .run(Duration::from_millis(300), Instant::now(), &done)
            .expect("a run of the hog");
        assert!(report.syncs >= 1, "{report:?}");
        assert_eq!(report.bytes, report.syncs * BLOCK_BYTES as u64);
        assert!(
            report.secs > 0.0 && report.syncs_per_sec() > 0.0,
            "{report:?}"
        );
        for path in &paths {
            let len = std::fs::metadata(path).expect("the hog's file").len();
            assert!(
                len <= 2 * BLOCK_BYTES as u64,
                "{len} bytes: the region is 2 blocks"
            );
        }
        hog.remove().expect("removing the files");
        for path in &paths {
            assert!(!path.exists(), "{} left behind", path.display());
        }
        let left = std::fs::read_dir(dir.path())
            .expect("the directory")
            .count();
        assert_eq!(left, 0);
    }

    #[test]
    fn a_missing_directory_is_a_typed_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let missing = dir.path().join("not-there");
        match DiskHog::create(&spec(&missing)) {
            Err(e @ LoadError::DiskHog { .. }) => {
                let message = e.to_string();
                assert!(message.contains("not-there"), "{message}");
                assert!(message.contains("disk capacity step"), "{message}");
            }
            other => panic!("expected LoadError::DiskHog, got {other:?}"),
        }
    }

    #[test]
    fn a_run_already_done_does_not_wait_for_its_start() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut spec = spec(dir.path());
        spec.at = Duration::from_secs(60);
        let hog = DiskHog::create(&spec).expect("the hog's files");
        let done = AtomicBool::new(true);
        let began = Instant::now();
        let report = hog
            .run(Duration::from_secs(120), Instant::now(), &done)
            .expect("a run of the hog");
        assert_eq!(report.syncs, 0);
        assert!(began.elapsed() < Duration::from_secs(5));
        drop(hog);
        let left = std::fs::read_dir(dir.path())
            .expect("the directory")
            .count();
        assert_eq!(left, 0, "dropping the hog removes its files");
    }
}
