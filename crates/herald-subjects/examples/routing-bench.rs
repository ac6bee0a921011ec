//! `routing-bench`: how fast a push tailer finds the subscribers of each
//! record's key, with a million subjects and with a few.
//!
//! It builds one topic's routing table as issue 16's S3 has it (a tenth of
//! `--subjects` subscribed, one subscriber each) and looks up a stream of
//! keys the way the tailer does: batches of 4,096 keys, laid end to end in
//! one buffer as a batch's records are, through `TableReader::matches_of`.
//! `many` draws every key uniformly from all the subjects; `few` from
//! 1,664 (1,600 subscribed and 64 that no one wants, a tenth subscribed as
//! in `many`), so that only the number of distinct subjects differs.
//!
//! The baselines are general-purpose maps holding the same subscribed
//! subjects (keys of up to 24 bytes held inline, as the table holds them),
//! asked one key at a time, with no filter in front: papaya (concurrent,
//! lock-free reads) and the standard `HashMap` (built once, read by one
//! thread: no concurrency to pay for). They say what the table's filter
//! and staged lookups are worth against a map used as it comes.
//!
//! Prints thread CPU nanoseconds per key (median of `--reps`) and the
//! ratios, then a line `routing many=<ns> few=<ns>` for scripts. Built
//! as an example of this crate alone, so that `scripts/bench-routing.sh
//! --against REV` can build it against an earlier commit's table too.
//!
//!   cargo run --release -p herald-subjects --example routing-bench -- [--reps N] [--subjects N] [--keys N]

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;
use std::time::Duration;

use herald_subjects::{RoutingTable, Selector};

/// A subject as the baselines hold it: inline up to 24 bytes, like the
/// table's entries.
type Key = smallvec::SmallVec<[u8; 24]>;

/// Keys the tailer looks up together: one batch of the S3 benchmark.
const BATCH: usize = 4_096;

/// What to measure.
struct Args {
    /// Repetitions of each measurement (the median is reported).
    reps: usize,
    /// Distinct subjects of `many`; every tenth is subscribed.
    subjects: u32,
    /// Keys looked up per measurement.
    keys: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        reps: 7,
        subjects: 1_000_000,
        keys: 4_000_000,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let value = given
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--reps" => args.reps = number(&value)? as usize,
            "--subjects" => {
                args.subjects = u32::try_from(number(&value)?).map_err(|e| e.to_string())?
            }
            "--keys" => args.keys = number(&value)? as usize,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.reps == 0 || args.keys == 0 || args.subjects < 16_000 {
        return Err("--reps and --keys must be positive, --subjects at least 16000".into());
    }
    Ok(args)
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn subject(i: u32) -> Vec<u8> {
    format!("device.{i:08}").into_bytes()
}

/// A stream of `count` keys drawn from `pool` by a fixed xorshift, so every
/// run and every map sees the same keys, laid end to end in one buffer.
fn draw(pool: &[Vec<u8>], count: usize) -> Vec<&'static [u8]> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut bytes = Vec::new();
    let mut ends = Vec::with_capacity(count);
    for _ in 0..count {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&pool[(state % pool.len() as u64) as usize]);
        ends.push(bytes.len());
    }
    // Lives for the whole run.
    let bytes: &'static [u8] = Vec::leak(bytes);
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let key = &bytes[start..end];
            start = end;
            key
        })
        .collect()
}

/// The subscribed subjects (every tenth of `subjects`) and the key pools of
/// the two modes.
struct Workload {
    subscribed: Vec<Vec<u8>>,
    many: Vec<Vec<u8>>,
    few: Vec<Vec<u8>>,
}

fn workload(subjects: u32) -> Workload {
    let subscribed: Vec<Vec<u8>> = (0..subjects).step_by(10).map(subject).collect();
    let many: Vec<Vec<u8>> = (0..subjects).map(subject).collect();
    let wanted = &subscribed[..subscribed.len().min(1_600)];
    let unwanted: Vec<Vec<u8>> = (0..64).map(|i| subject(i * 10 + 1)).collect();
    let mut few = Vec::new();
    for (i, key) in wanted.iter().enumerate() {
        few.push(key.clone());
        for j in 0..9 {
            few.push(unwanted[(i * 9 + j) % unwanted.len()].clone());
        }
    }
    Workload {
        subscribed,
        many,
        few,
    }
}

/// Lookups through the routing table, a batch at a time; returns the
/// subscribers found.
fn table_pass(table: &RoutingTable<u32>, keys: &[&[u8]]) -> u64 {
    let mut found = 0u64;
    for batch in keys.chunks(BATCH) {
        let reader = table.reader();
        let mut matches = Vec::new();
        reader.matches_of(batch, &mut matches);
        found += matches.iter().map(|(_, s)| s.len() as u64).sum::<u64>();
    }
    found
}

type Hasher = foldhash::fast::RandomState;

fn papaya_pass(map: &papaya::HashMap<Key, u32, Hasher>, keys: &[&[u8]]) -> u64 {
    let mut found = 0u64;
    for batch in keys.chunks(BATCH) {
        let pinned = map.pin();
        found += batch
            .iter()
            .filter(|key| pinned.get(**key).is_some())
            .count() as u64;
    }
    found
}

fn hash_map_pass(map: &HashMap<Key, u32, Hasher>, keys: &[&[u8]]) -> u64 {
    keys.iter().filter(|key| map.get(**key).is_some()).count() as u64
}

/// Thread CPU nanoseconds per key of one pass, and what it found.
fn time(keys: usize, pass: impl FnOnce() -> u64) -> (f64, u64) {
    let started = thread_cpu();
    let found = std::hint::black_box(pass());
    (
        (thread_cpu() - started).as_nanos() as f64 / keys as f64,
        found,
    )
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn run(args: &Args) -> Result<(), String> {
    let work = workload(args.subjects);
    let table = RoutingTable::new();
    let concurrent = papaya::HashMap::with_hasher(Hasher::default());
    let mut plain = HashMap::with_hasher(Hasher::default());
    for (id, key) in work.subscribed.iter().enumerate() {
        let id = id as u32;
        let selector = Selector::parse(key).map_err(|e| e.to_string())?;
        table.insert(&selector, id);
        concurrent.pin().insert(Key::from_slice(key), id);
        plain.insert(Key::from_slice(key), id);
    }
    println!(
        "{} subjects, {} subscribed; {} keys per pass in batches of {BATCH}; thread CPU per key, median of {}",
        args.subjects,
        work.subscribed.len(),
        args.keys,
        args.reps
    );
    println!();
    println!("| keys | distinct | herald's table | papaya | HashMap | papaya / table | HashMap / table |");
    println!("|---|---|---|---|---|---|---|");
    let mut table_ns = Vec::new();
    for (mode, pool) in [("many", &work.many), ("few", &work.few)] {
        let keys = draw(pool, args.keys);
        let distinct = pool.iter().collect::<HashSet<_>>().len();
        let (mut ours, mut general, mut single) = (Vec::new(), Vec::new(), Vec::new());
        // Taking turns, so noise from other processes hits all alike.
        for _ in 0..args.reps {
            let (ns, found) = time(keys.len(), || table_pass(&table, &keys));
            let (papaya_ns, papaya_found) = time(keys.len(), || papaya_pass(&concurrent, &keys));
            let (plain_ns, plain_found) = time(keys.len(), || hash_map_pass(&plain, &keys));
            if found != papaya_found || found != plain_found {
                return Err(format!(
                    "the maps disagree: table {found}, papaya {papaya_found}, HashMap {plain_found}"
                ));
            }
            ours.push(ns);
            general.push(papaya_ns);
            single.push(plain_ns);
        }
        let (ours, general, single) = (median(ours), median(general), median(single));
        table_ns.push(ours);
        println!(
            "| {mode} | {distinct} | {ours:.1} ns | {general:.1} ns | {single:.1} ns | {:.2} | {:.2} |",
            general / ours,
            single / ours
        );
    }
    println!();
    println!("table many / few: {:.2}x", table_ns[0] / table_ns[1]);
    println!("routing many={:.2} few={:.2}", table_ns[0], table_ns[1]);
    Ok(())
}

fn main() -> ExitCode {
    let outcome = parse_args().and_then(|args| run(&args));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("routing-bench: {e}");
            ExitCode::from(2)
        }
    }
}
