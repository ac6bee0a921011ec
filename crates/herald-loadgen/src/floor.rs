//! The kernel floor: the CPU that any broker on this machine pays per
//! message in the kernel alone, measured with no broker logic at all.
//!
//! Why: the target "broker CPU per message at most 1/3 of Kafka's" is only
//! reachable if the kernel work every broker must do costs less than that.
//! A producing broker must at least receive the batch bytes from a
//! loopback TCP socket and write them into fresh tmpfs pages; a consuming
//! broker must at least send file bytes to a socket, here with sendfile(2)
//! as Kafka does. On loopback the receiver's softirq work is mostly charged
//! to the sender, so for consume the sending thread carries nearly all of
//! it. Each floor runs two threads over 127.0.0.1 and counts only the
//! thread playing the broker, with `CLOCK_THREAD_CPUTIME_ID`.
//!
//! Every run is bounded in time and bytes, every socket has an idle
//! timeout, and the scratch file is removed at the end, also on error.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::thread::{self, ScopedJoinHandle};
use std::time::{Duration, Instant};

use crate::records;
use crate::row::{Kind, Row};
use crate::LoadError;

/// The batch size whose encoding the per-record figures are expressed in,
/// so that the floor rows compare with the batch-16384 rows.
pub const FLOOR_BATCH: u32 = 16384;

/// Bytes per read, write and sendfile call: large, as a broker at full
/// speed with large batches would use.
const CHUNK_BYTES: usize = 1 << 20;
/// The most the store floor moves, whatever the duration.
const STORE_MAX_BYTES: u64 = 4 << 30;
/// The size of the file the send floor sends over and over.
const SEND_FILE_BYTES: i64 = 256 << 20;
/// The most the send floor moves, whatever the duration.
const SEND_MAX_BYTES: u64 = 8 << 30;
/// How long a socket may stall before the run fails instead of hanging.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one floor run measured on the thread playing the broker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Floor {
    /// Bytes moved.
    pub bytes: u64,
    /// Wall time of the measured part, in seconds.
    pub secs: f64,
    /// CPU time of the broker's thread over that part, in nanoseconds.
    pub cpu_ns: f64,
}

impl Floor {
    /// CPU nanoseconds per message of `bytes_per_msg` bytes (0 if nothing
    /// moved).
    pub fn cpu_ns_per_msg(&self, bytes_per_msg: f64) -> f64 {
        if self.bytes == 0 {
            return 0.0;
        }
        self.cpu_ns * bytes_per_msg / self.bytes as f64
    }

    /// Throughput in MB (10^6 bytes) per second.
    pub fn mb_per_s(&self) -> f64 {
        if self.secs > 0.0 {
            self.bytes as f64 / self.secs / 1e6
        } else {
            0.0
        }
    }

    /// The result row of this floor as `kind` (a floor kind), in records
    /// of a [`FLOOR_BATCH`]-record batch.
    pub fn row(&self, kind: Kind) -> Row {
        let per_record = bytes_per_record(FLOOR_BATCH);
        let records = (self.bytes as f64 / per_record) as u64;
        let mut row =
            Row::new(kind, "floor", FLOOR_BATCH, 1).with_totals(records, self.bytes, self.secs);
        row.broker_cpu_ns_per_msg = Some(self.cpu_ns_per_msg(per_record));
        if self.secs > 0.0 {
            row.broker_cores = Some(self.cpu_ns / (self.secs * 1e9));
        }
        row.note = Some(
            match kind {
                Kind::StoreFloor => "kernel floor: loopback TCP receive + write to a file",
                Kind::SendFloor => "kernel floor: sendfile from a file over loopback TCP",
                _ => "kernel floor",
            }
            .to_owned(),
        );
        row
    }
}

/// Bytes per record of a `batch`-record batch of 64-byte values as the
/// load generator encodes it, batch header included.
pub fn bytes_per_record(batch: u32) -> f64 {
    let batch = batch.max(1);
    records::batch(batch).len() as f64 / f64::from(batch)
}

/// The produce floor: a client thread sends 1 MiB chunks over loopback TCP
/// for `duration` (at most 4 GiB); the broker's thread reads them into one
/// reused buffer and appends them to a new file in `dir` with positioned
/// writes, without preallocation, as Kafka's `FileChannel.write` does.
pub fn store_floor(dir: &Path, duration: Duration) -> Result<Floor, LoadError> {
    let scratch = Scratch::create(dir, "store")?;
    run_pair(scratch, "store floor", receive_to_file, |client| {
        send_chunks(client, duration)
    })
}

/// The consume floor: writes a 256 MiB file in `dir`, then the broker's
/// thread sends it with sendfile(2) in 1 MiB chunks over loopback TCP,
/// starting over at its end, for `duration` (at most 8 GiB); a client
/// thread reads and discards.
pub fn send_floor(dir: &Path, duration: Duration) -> Result<Floor, LoadError> {
    let scratch = Scratch::create(dir, "send")?;
    fill(&scratch.file, SEND_FILE_BYTES)?;
    run_pair(
        scratch,
        "send floor",
        |server, file| sendfile_loop(server, file, duration),
        drain,
    )
}

/// Runs `broker` on the server end of a loopback pair (with the scratch
/// file) and `client` on the other end, each on its own thread; both must
/// count the same bytes. The scratch file is removed afterwards.
fn run_pair<B, C>(
    scratch: Scratch,
    what: &'static str,
    broker: B,
    client: C,
) -> Result<Floor, LoadError>
where
    B: FnOnce(TcpStream, &File) -> Result<Floor, LoadError> + Send,
    C: FnOnce(TcpStream) -> Result<u64, LoadError> + Send,
{
    let (client_end, server_end) = crate::loopback::pair(IDLE_TIMEOUT)?;
    let file = &scratch.file;
    let floor = thread::scope(|s| {
        let broker = s.spawn(move || broker(server_end, file));
        let client = s.spawn(move || client(client_end));
        let floor = join(broker, what);
        let peer = join(client, what);
        // The broker's failure explains the client's, so it comes first.
        let floor = floor?;
        expect_same_bytes(peer?, floor.bytes)?;
        Ok(floor)
    });
    scratch.remove()?;
    floor
}

/// A scratch file, removed when dropped so that an error leaves nothing
/// behind in `dir` (which may be tmpfs, i.e. memory).
struct Scratch {
    path: PathBuf,
    file: File,
}

impl Scratch {
    fn create(dir: &Path, tag: &str) -> Result<Self, LoadError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!("herald-floor-{tag}-{}-{nanos}", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| LoadError::io("create floor file", e))?;
        Ok(Self { path, file })
    }

    /// Removes the file, reporting a failure that `Drop` would swallow.
    fn remove(mut self) -> Result<(), LoadError> {
        let path = std::mem::take(&mut self.path);
        std::fs::remove_file(path).map_err(|e| LoadError::io("remove floor file", e))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The producer: 1 MiB writes from one buffer until `duration` passes or
/// the byte bound is reached. Returns the bytes sent; closing the stream
/// (by dropping it) is the end-of-data signal.
fn send_chunks(mut stream: TcpStream, duration: Duration) -> Result<u64, LoadError> {
    let chunk = vec![0x5a_u8; CHUNK_BYTES];
    let end = Instant::now() + duration;
    let mut sent = 0u64;
    while sent < STORE_MAX_BYTES && Instant::now() < end {
        stream
            .write_all(&chunk)
            .map_err(|e| LoadError::io("store floor send", e))?;
        sent += CHUNK_BYTES as u64;
    }
    Ok(sent)
}

/// The storing broker: reads until end of stream and appends what it read
/// at increasing offsets. Measures its own thread's CPU over the loop.
fn receive_to_file(mut stream: TcpStream, file: &File) -> Result<Floor, LoadError> {
    let mut buf = vec![0u8; CHUNK_BYTES];
    let cpu_before = thread_cpu_ns()?;
    let start = Instant::now();
    let mut at = 0u64;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LoadError::io("store floor receive", e)),
        };
        file.write_all_at(&buf[..n], at)
            .map_err(|e| LoadError::io("store floor write", e))?;
        at += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu_ns = thread_cpu_ns()? - cpu_before;
    Ok(Floor {
        bytes: at,
        secs,
        cpu_ns,
    })
}

/// Writes `len` bytes of filler to `file`, in 1 MiB chunks.
fn fill(file: &File, len: i64) -> Result<(), LoadError> {
    let chunk = vec![0xa5_u8; CHUNK_BYTES];
    let mut at = 0i64;
    while at < len {
        let n = CHUNK_BYTES.min((len - at) as usize);
        file.write_all_at(&chunk[..n], at as u64)
            .map_err(|e| LoadError::io("fill floor file", e))?;
        at += n as i64;
    }
    Ok(())
}

/// The consuming broker: sendfile(2) of the whole file in 1 MiB chunks,
/// again and again, until `duration` passes or the byte bound is reached.
/// Measures its own thread's CPU over the loop.
fn sendfile_loop(stream: TcpStream, file: &File, duration: Duration) -> Result<Floor, LoadError> {
    let cpu_before = thread_cpu_ns()?;
    let start = Instant::now();
    let mut offset: libc::off_t = 0;
    let mut sent = 0u64;
    while sent < SEND_MAX_BYTES && start.elapsed() < duration {
        if offset >= SEND_FILE_BYTES {
            offset = 0;
        }
        let count = CHUNK_BYTES.min((SEND_FILE_BYTES - offset) as usize);
        // SAFETY: both descriptors stay open for the call (the stream and
        // the file are owned or borrowed by this frame) and `offset` is a
        // live, writable off_t that the kernel advances.
        let n = unsafe { libc::sendfile(stream.as_raw_fd(), file.as_raw_fd(), &mut offset, count) };
        match n {
            n if n > 0 => sent += n as u64,
            0 => {
                // The file shrank under us: looping would spin forever.
                let e = io::Error::new(io::ErrorKind::UnexpectedEof, "floor file ended early");
                return Err(LoadError::io("send floor sendfile", e));
            }
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(LoadError::io("send floor sendfile", e));
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu_ns = thread_cpu_ns()? - cpu_before;
    Ok(Floor {
        bytes: sent,
        secs,
        cpu_ns,
    })
}

/// The consumer: reads into one reused buffer until end of stream and
/// returns the bytes read.
fn drain(mut stream: TcpStream) -> Result<u64, LoadError> {
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut read = 0u64;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(read),
            Ok(n) => read += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(LoadError::io("send floor receive", e)),
        }
    }
}

/// Joins a floor thread, turning a panic into an error.
fn join<T>(
    handle: ScopedJoinHandle<'_, Result<T, LoadError>>,
    what: &'static str,
) -> Result<T, LoadError> {
    handle
        .join()
        .map_err(|_| LoadError::io(what, io::Error::other("thread panicked")))?
}

/// Fails if the two ends of a stream disagree on the bytes moved: then the
/// figure would not be what it claims to be.
fn expect_same_bytes(peer: u64, measured: u64) -> Result<(), LoadError> {
    if peer == measured {
        return Ok(());
    }
    let e = io::Error::other(format!("peer counted {peer} bytes, broker {measured}"));
    Err(LoadError::io("floor byte count", e))
}

/// The calling thread's CPU time (user + system), in nanoseconds.
fn thread_cpu_ns() -> Result<f64, LoadError> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec owned by this frame.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(LoadError::io(
            "thread CPU clock",
            io::Error::last_os_error(),
        ));
    }
    Ok(ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_measured_and_clean(floor: &Floor, dir: &Path) {
        assert!(floor.bytes > 0, "{floor:?}");
        assert!(floor.cpu_ns > 0.0, "{floor:?}");
        let left: Vec<_> = std::fs::read_dir(dir).expect("read dir").collect();
        assert!(left.is_empty(), "files left behind: {left:?}");
    }

    #[test]
    fn store_floor_measures_and_removes_its_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let floor = store_floor(dir.path(), Duration::from_millis(200)).expect("store floor");
        assert_measured_and_clean(&floor, dir.path());
    }

    #[test]
    fn send_floor_measures_and_removes_its_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let floor = send_floor(dir.path(), Duration::from_millis(200)).expect("send floor");
        assert_measured_and_clean(&floor, dir.path());
    }

    #[test]
    fn a_missing_dir_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("temp dir");
        let gone = dir.path().join("missing");
        assert!(store_floor(&gone, Duration::from_millis(10)).is_err());
        assert!(send_floor(&gone, Duration::from_millis(10)).is_err());
    }

    #[test]
    fn per_message_cpu_scales_with_message_bytes() {
        let floor = Floor {
            bytes: 1_000_000,
            secs: 1.0,
            cpu_ns: 2_000_000.0,
        };
        assert_eq!(floor.cpu_ns_per_msg(100.0), 200.0);
        assert_eq!(floor.mb_per_s(), 1.0);
        let empty = Floor {
            bytes: 0,
            secs: 0.0,
            cpu_ns: 0.0,
        };
        assert_eq!(empty.cpu_ns_per_msg(100.0), 0.0);
    }

    #[test]
    fn a_floor_row_counts_records_of_a_large_batch() {
        let per_record = bytes_per_record(FLOOR_BATCH);
        assert!((70.0..80.0).contains(&per_record), "{per_record}");
        let floor = Floor {
            bytes: 73_000_000,
            secs: 1.0,
            cpu_ns: 1e8,
        };
        let row = floor.row(Kind::StoreFloor);
        assert_eq!(row.broker, "floor");
        assert_eq!(row.batch, FLOOR_BATCH);
        assert!(row.records > 0);
        let cpu = row.broker_cpu_ns_per_msg.expect("cpu");
        assert!((cpu - 1e8 * per_record / 73e6).abs() < 1e-6);
    }
}
