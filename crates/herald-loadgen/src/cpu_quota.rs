//! The flow evaluation's CPU quota capacity step (issue 18): at the step,
//! a CFS bandwidth quota on the broker's cgroup cuts it to a share of one
//! core (half by default).
//!
//! Why: the step is meant to halve the broker's capacity, and a busy
//! thread pinned to the broker's core does not do that. The scheduler
//! shares a core between threads, not processes, so one busy thread
//! against the broker's many runnable threads takes only its thread's
//! share (the durable regime's goodput moved by a few percent, or not at
//! all), and where the broker is bound by its own CPU (its fsyncs are
//! kernel time on its core) a disk hog does not touch it either. A quota
//! caps the CPU time of every thread in the cgroup together, however many
//! there are, so the broker gets `share` of a core from the step on,
//! whatever it runs.
//!
//! The caller makes the cgroup and puts the broker in it (the load
//! generator need not run as the broker's parent, nor know its PID);
//! this module only writes the quota, in either layout:
//! - cgroup v1 (`cpu` controller): `cpu.cfs_quota_us` = share × the
//!   cgroup's `cpu.cfs_period_us`, which is left as it is;
//! - cgroup v2: `cpu.max` = `"<quota> <period>"`, the period being the
//!   one `cpu.max` held.
//!
//! Everything that can be checked is checked when the step is opened,
//! before the publishers start: the directory, its layout, that the files
//! open for writing, the period, that the quota is one the kernel takes,
//! and that some process is in the cgroup (a quota on an empty cgroup
//! would be a step that silently does nothing). At the end of the run the
//! quota file gets back what it held before.

use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::LoadError;

/// The share of one core the step leaves the broker by default: half.
pub const DEFAULT_SHARE: f64 = 0.5;

/// The smallest quota the kernel accepts, µs (both layouts).
pub const MIN_QUOTA_US: u64 = 1000;

/// v1: the quota file.
const V1_QUOTA: &str = "cpu.cfs_quota_us";
/// v1: the period file (read, never written).
const V1_PERIOD: &str = "cpu.cfs_period_us";
/// v2: quota and period in one file.
const V2_MAX: &str = "cpu.max";
/// Both: the processes in the cgroup.
const PROCS: &str = "cgroup.procs";

/// What the CPU quota step does.
#[derive(Debug, Clone)]
pub struct CpuQuotaSpec {
    /// When (since the run started) the quota is written.
    pub at: Duration,
    /// The broker's cgroup: a directory of the `cpu` controller (v1) or
    /// of a cgroup2 hierarchy with `cpu` enabled (v2), made by the caller,
    /// with the broker in it.
    pub dir: PathBuf,
    /// The CPU the broker keeps, in cores (0.5: half of one core).
    pub share: f64,
}

/// Which cgroup layout the directory has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `cpu.cfs_quota_us` and `cpu.cfs_period_us`.
    V1,
    /// `cpu.max`.
    V2,
}

impl Layout {
    /// `v1` or `v2`, for the points' labels.
    pub fn name(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V2 => "v2",
        }
    }
}

/// What the step did, for the points' labels and the run's summary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuQuotaReport {
    /// The layout written to.
    pub layout: Layout,
    /// The share of a core asked for.
    pub share: f64,
    /// The quota written, µs per period.
    pub quota_us: u64,
    /// The period, µs.
    pub period_us: u64,
    /// Seconds since the run started when the quota was written; none:
    /// the run ended before the step.
    pub applied_at: Option<f64>,
}

/// The step, checked and ready: [`CpuQuota::run`] writes the quota at
/// its time and puts back what the file held at the end. Dropped after
/// writing it without [`CpuQuota::restore`], it puts it back (best
/// effort), so that no way out of a run leaves the cgroup throttled.
#[derive(Debug)]
pub struct CpuQuota {
    at: Duration,
    layout: Layout,
    /// The file written: `cpu.cfs_quota_us` or `cpu.max`.
    path: PathBuf,
    share: f64,
    period_us: u64,
    quota_us: u64,
    /// What the file held before, written back by [`CpuQuota::restore`].
    original: String,
    applied: AtomicBool,
}

impl CpuQuota {
    /// Checks `spec.dir` and works out the quota. Fails with
    /// [`LoadError::CpuQuota`] when the directory is missing, is neither
    /// layout, its quota file does not open for writing, the period
    /// cannot be read, the share gives a quota the kernel refuses, or no
    /// process is in the cgroup. Writes nothing.
    pub fn open(spec: &CpuQuotaSpec) -> Result<Self, LoadError> {
        let dir = &spec.dir;
        let metadata =
            std::fs::metadata(dir).map_err(|source| error("opening the cgroup", dir, source))?;
        if !metadata.is_dir() {
            return Err(error(
                "opening the cgroup",
                dir,
                io::Error::other("not a directory"),
            ));
        }
        let (layout, path) = if dir.join(V1_QUOTA).exists() {
            (Layout::V1, dir.join(V1_QUOTA))
        } else if dir.join(V2_MAX).exists() {
            (Layout::V2, dir.join(V2_MAX))
        } else {
            return Err(error(
                "finding the quota file in",
                dir,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "neither {V1_QUOTA} (cgroup v1) nor {V2_MAX} (cgroup v2): \
                         not a cgroup of the cpu controller"
                    ),
                ),
            ));
        };
        let original = read(&path)?;
        let period_us = match layout {
            Layout::V1 => parse_us(&read(&dir.join(V1_PERIOD))?, &dir.join(V1_PERIOD))?,
            // "max 100000" or "50000 100000": the period is the second.
            Layout::V2 => {
                let period = original.split_whitespace().nth(1).ok_or_else(|| {
                    error(
                        "reading the period from",
                        &path,
                        invalid(format!("{:?} is not \"<quota> <period>\"", original.trim())),
                    )
                })?;
                parse_us(period, &path)?
            }
        };
        if !(spec.share.is_finite() && spec.share > 0.0) {
            return Err(error(
                "working out the quota for",
                dir,
                invalid(format!(
                    "the share must be a positive number of cores, not {}",
                    spec.share
                )),
            ));
        }
        let quota_us = (spec.share * period_us as f64).round() as u64;
        if quota_us < MIN_QUOTA_US {
            return Err(error(
                "working out the quota for",
                dir,
                invalid(format!(
                    "a share of {} of a {period_us} µs period is {quota_us} µs, \
                     below the kernel's {MIN_QUOTA_US} µs",
                    spec.share
                )),
            ));
        }
        // Opened for writing but not truncated: nothing changes yet, but a
        // file that is read-only (not root, a read-only mount) fails now.
        OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|source| error("opening for writing", &path, source))?;
        let procs = dir.join(PROCS);
        if procs.exists() && read(&procs)?.trim().is_empty() {
            return Err(error(
                "checking the processes in",
                dir,
                invalid(format!(
                    "{PROCS} is empty: put the broker's PID in it before the run"
                )),
            ));
        }
        Ok(Self {
            at: spec.at,
            layout,
            path,
            share: spec.share,
            period_us,
            quota_us,
            original,
            applied: AtomicBool::new(false),
        })
    }

    /// The layout found.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The file the quota goes to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What [`CpuQuota::apply`] writes: v1 the quota in µs, v2 the quota
    /// and the period.
    pub fn contents(&self) -> String {
        match self.layout {
            Layout::V1 => format!("{}\n", self.quota_us),
            Layout::V2 => format!("{} {}\n", self.quota_us, self.period_us),
        }
    }

    /// Writes the quota now.
    pub fn apply(&self) -> Result<(), LoadError> {
        write(&self.path, &self.contents())?;
        self.applied.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Waits until `at` after `started`, writes the quota, then waits
    /// until `end` after `started` or until `done` is set. The quota
    /// stays: [`CpuQuota::restore`] takes it off.
    pub fn run(
        &self,
        end: Duration,
        started: Instant,
        done: &AtomicBool,
    ) -> Result<CpuQuotaReport, LoadError> {
        let over = || started.elapsed() >= end || done.load(Ordering::Relaxed);
        let mut report = CpuQuotaReport {
            layout: self.layout,
            share: self.share,
            quota_us: self.quota_us,
            period_us: self.period_us,
            applied_at: None,
        };
        // Short sleeps, so that a run ending early does not wait for `at`.
        while let Some(wait) = (started + self.at).checked_duration_since(Instant::now()) {
            if over() {
                return Ok(report);
            }
            std::thread::sleep(wait.min(Duration::from_millis(50)));
        }
        if over() {
            return Ok(report);
        }
        self.apply()?;
        report.applied_at = Some(started.elapsed().as_secs_f64());
        while !over() {
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(report)
    }

    /// Writes back what the quota file held before, if the quota was
    /// written.
    pub fn restore(self) -> Result<(), LoadError> {
        if self.applied.swap(false, Ordering::Relaxed) {
            write(&self.path, &self.original)?;
        }
        Ok(())
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        if self.applied.swap(false, Ordering::Relaxed) {
            let _ = write(&self.path, &self.original);
        }
    }
}

fn read(path: &Path) -> Result<String, LoadError> {
    std::fs::read_to_string(path).map_err(|source| error("reading", path, source))
}

/// Truncating, as `echo 50000 > cpu.cfs_quota_us` does: the cgroup file
/// takes each write as a whole, and a plain file (the tests) holds
/// exactly what was written.
fn write(path: &Path, contents: &str) -> Result<(), LoadError> {
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut file| file.write_all(contents.as_bytes()))
        .map_err(|source| error("writing", path, source))
}

fn parse_us(text: &str, path: &Path) -> Result<u64, LoadError> {
    match text.trim().parse::<u64>() {
        Ok(us) if us > 0 => Ok(us),
        _ => Err(error(
            "reading the period from",
            path,
            invalid(format!("{:?} is not a period in µs", text.trim())),
        )),
    }
}

fn invalid(detail: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, detail)
}

fn error(action: &'static str, path: &Path, source: io::Error) -> LoadError {
    LoadError::CpuQuota {
        action,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory laid out like a v1 `cpu` cgroup with the broker in it.
    fn v1_cgroup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join(V1_PERIOD), "100000\n").expect("period");
        std::fs::write(dir.path().join(V1_QUOTA), "-1\n").expect("quota");
        std::fs::write(dir.path().join(PROCS), "4242\n").expect("procs");
        dir
    }

    /// A directory laid out like a cgroup2 cgroup with `cpu` enabled.
    fn v2_cgroup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join(V2_MAX), "max 100000\n").expect("cpu.max");
        std::fs::write(dir.path().join(PROCS), "4242\n").expect("procs");
        dir
    }

    fn spec(dir: &Path, at: Duration) -> CpuQuotaSpec {
        CpuQuotaSpec {
            at,
            dir: dir.to_path_buf(),
            share: DEFAULT_SHARE,
        }
    }

    fn contents(path: &Path) -> String {
        std::fs::read_to_string(path).expect("the file")
    }

    /// Runs the step in a thread, from `at` 0, and answers what the quota
    /// file held once it changed, and the report.
    fn run_and_watch(quota: &CpuQuota, file: &Path) -> (String, CpuQuotaReport) {
        let before = contents(file);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let running = scope.spawn(|| quota.run(Duration::from_secs(30), Instant::now(), &done));
            let deadline = Instant::now() + Duration::from_secs(10);
            let during = loop {
                let now = contents(file);
                // Empty: caught between the truncation and the write.
                if (now != before && !now.is_empty()) || Instant::now() > deadline {
                    break now;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            done.store(true, Ordering::Relaxed);
            let report = running
                .join()
                .expect("the step's thread")
                .expect("a run of the step");
            (during, report)
        })
    }

    #[test]
    fn v1_writes_share_times_period_and_puts_it_back() {
        let dir = v1_cgroup();
        let quota = CpuQuota::open(&spec(dir.path(), Duration::ZERO)).expect("the step");
        assert_eq!(quota.layout(), Layout::V1);
        let (during, report) = run_and_watch(&quota, &dir.path().join(V1_QUOTA));
        assert_eq!(during, "50000\n");
        assert_eq!(contents(&dir.path().join(V1_PERIOD)), "100000\n");
        assert_eq!((report.quota_us, report.period_us), (50_000, 100_000));
        assert!(report.applied_at.is_some(), "{report:?}");
        quota.restore().expect("putting it back");
        assert_eq!(contents(&dir.path().join(V1_QUOTA)), "-1\n");
    }

    #[test]
    fn v2_writes_quota_and_period_to_cpu_max_and_puts_it_back() {
        let dir = v2_cgroup();
        std::fs::write(dir.path().join(V2_MAX), "max 250000\n").expect("cpu.max");
        let mut spec = spec(dir.path(), Duration::ZERO);
        spec.share = 0.3;
        let quota = CpuQuota::open(&spec).expect("the step");
        assert_eq!(quota.layout(), Layout::V2);
        let (during, report) = run_and_watch(&quota, &dir.path().join(V2_MAX));
        assert_eq!(during, "75000 250000\n");
        assert_eq!(report.layout.name(), "v2");
        quota.restore().expect("putting it back");
        assert_eq!(contents(&dir.path().join(V2_MAX)), "max 250000\n");
    }

    #[test]
    fn nothing_is_written_before_the_step_and_dropping_puts_it_back() {
        let dir = v2_cgroup();
        let file = dir.path().join(V2_MAX);
        let quota = CpuQuota::open(&spec(dir.path(), Duration::from_secs(60))).expect("the step");
        assert_eq!(contents(&file), "max 100000\n", "opening writes nothing");
        let done = AtomicBool::new(true);
        let began = Instant::now();
        let report = quota
            .run(Duration::from_secs(120), Instant::now(), &done)
            .expect("a run of the step");
        assert_eq!(report.applied_at, None);
        assert!(began.elapsed() < Duration::from_secs(5));
        assert_eq!(contents(&file), "max 100000\n");
        quota.apply().expect("the quota");
        assert_eq!(contents(&file), "50000 100000\n");
        drop(quota);
        assert_eq!(contents(&file), "max 100000\n");
    }

    #[test]
    fn a_missing_directory_is_a_typed_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let missing = dir.path().join("not-there");
        match CpuQuota::open(&spec(&missing, Duration::ZERO)) {
            Err(e @ LoadError::CpuQuota { .. }) => {
                let message = e.to_string();
                assert!(message.contains("not-there"), "{message}");
                assert!(message.contains("CPU quota step"), "{message}");
            }
            other => panic!("expected LoadError::CpuQuota, got {other:?}"),
        }
    }

    #[test]
    fn a_directory_without_quota_files_is_a_typed_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        match CpuQuota::open(&spec(dir.path(), Duration::ZERO)) {
            Err(e @ LoadError::CpuQuota { .. }) => {
                let message = e.to_string();
                assert!(message.contains("cpu.cfs_quota_us"), "{message}");
                assert!(message.contains("cpu.max"), "{message}");
            }
            other => panic!("expected LoadError::CpuQuota, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_cgroup_or_a_bad_share_is_refused_up_front() {
        let dir = v1_cgroup();
        std::fs::write(dir.path().join(PROCS), "").expect("procs");
        let message = CpuQuota::open(&spec(dir.path(), Duration::ZERO))
            .expect_err("an empty cgroup")
            .to_string();
        assert!(message.contains("cgroup.procs is empty"), "{message}");
        std::fs::write(dir.path().join(PROCS), "4242\n").expect("procs");
        for share in [0.0, -1.0, f64::NAN, 0.001] {
            let mut spec = spec(dir.path(), Duration::ZERO);
            spec.share = share;
            assert!(
                matches!(CpuQuota::open(&spec), Err(LoadError::CpuQuota { .. })),
                "share {share}"
            );
        }
        assert_eq!(contents(&dir.path().join(V1_QUOTA)), "-1\n");
    }
}
