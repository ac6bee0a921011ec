//! SIGKILL a process appending with fsync-per-append, then reopen: every
//! append that returned is there and intact, nothing partial is visible.
//!
//! The child is this same test binary, re-run with `HERALD_CRASH_DIR` set, so
//! the test needs no other program.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{read_all, tagged_batch};
use herald_log::{FlushPolicy, Log, LogConfig};

const CHILD_DIR: &str = "HERALD_CRASH_DIR";
const CHILD_ROUND: &str = "HERALD_CRASH_ROUND";
const WRITERS: u64 = 3;

fn crash_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024,
        flush: FlushPolicy::EveryAppend,
        ..common::small_config()
    }
}

/// Runs only as the child: appends from several threads until killed,
/// printing each acknowledged append.
#[test]
fn crash_child_appender() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let round: u64 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let log = Arc::new(Log::open(&dir, crash_config()).unwrap());
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(30);
                for i in 0u64.. {
                    if Instant::now() > deadline {
                        return;
                    }
                    let tag = (round << 48) | (w << 32) | i;
                    let appended = log.append(&tagged_batch(2, tag, 0)).unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "acked {} {tag}", appended.base_offset).unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Starts a child, lets it acknowledge `acks` appends, SIGKILLs it, and
/// returns everything it acknowledged (offset -> tag).
fn run_and_kill(dir: &std::path::Path, round: u64, acks: usize) -> BTreeMap<u64, u64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child_appender",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_ROUND, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = BTreeMap::new();
    while acked.len() < acks {
        let Some(line) = lines.next() else { break };
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("acked ") {
            let (offset, tag) = rest.split_once(' ').unwrap();
            acked.insert(offset.parse().unwrap(), tag.parse().unwrap());
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Lines already printed were acknowledged before the kill.
    for line in lines.map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("acked ") {
            let (offset, tag) = rest.split_once(' ').unwrap();
            acked.insert(offset.parse().unwrap(), tag.parse().unwrap());
        }
    }
    acked
}

#[test]
fn sigkill_during_fsync_per_append_loses_no_acknowledged_batch() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut all_acked = BTreeMap::new();
    for round in 0..3 {
        let acked = run_and_kill(dir.path(), round, 1500);
        assert!(
            acked.len() >= 1500,
            "round {round}: child acknowledged only {}",
            acked.len()
        );
        all_acked.extend(acked);
        let log = Log::open(dir.path(), crash_config()).unwrap();
        // read_all validates every batch's CRC while decoding.
        let stored: BTreeMap<u64, u64> = read_all(&log, 0, 1 << 20)
            .into_iter()
            .map(|(o, _, t)| (o, t))
            .collect();
        for (offset, tag) in &all_acked {
            assert_eq!(
                stored.get(offset),
                Some(tag),
                "acknowledged batch at offset {offset} lost"
            );
        }
        // Dense offsets: nothing partial or missing inside the log.
        assert_eq!(log.high_watermark(), 2 * stored.len() as u64);
        log.close().unwrap();
    }
}
