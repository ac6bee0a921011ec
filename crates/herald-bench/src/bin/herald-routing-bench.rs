//! `herald-routing-bench`: how fast a push tailer finds the subscribers of
//! each record's key, with a million subjects and with a few.
//!
//! It builds one topic's routing table as issue 16's S3 has it (a tenth of
//! `--subjects` subscribed, one subscriber each) and looks up a stream of
//! keys the way the tailer does: batches of 4,096 keys through
//! `TableReader::matches_of`. `many` draws every key uniformly from all the
//! subjects; `few` from 1,664 (16 subscribed subjects for each of 100
//! connections and 64 no one wants), so that only the number of distinct
//! subjects differs. The baselines, on the same keys in the same process,
//! taking turns:
//! - `papaya`: the general-purpose concurrent map the table used before,
//!   holding the same subscribed subjects, asked one key at a time;
//! - `hashbrown`: the standard library's map with the same hash, built once
//!   and read by one thread (no concurrency to pay for).
//!
//! Prints nanoseconds of thread CPU per key (median of `--reps`) and the
//! ratios. Run it through `scripts/bench-routing.sh`.

use std::collections::HashMap;
use std::process::ExitCode;

use clap::Parser;
use herald_bench::threads::thread_cpu;
use herald_subjects::{RoutingTable, Selector};

/// Times routing-table lookups against general-purpose maps.
#[derive(Parser, Debug)]
#[command(name = "herald-routing-bench", version)]
struct Args {
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Distinct subjects of `many`; every tenth is subscribed.
    #[arg(long, default_value_t = 1_000_000)]
    subjects: u32,
    /// Keys looked up per measurement.
    #[arg(long, default_value_t = 4_000_000)]
    keys: usize,
}

/// Keys the tailer looks up together: one batch of the S3 benchmark.
const BATCH: usize = 4_096;

fn subject(i: u32) -> Vec<u8> {
    format!("device.{i:08}").into_bytes()
}

/// A stream of `count` keys drawn from `pool` by a fixed xorshift, so every
/// run and every map sees the same keys; laid end to end in one buffer, as
/// a batch's records are.
fn draw(pool: &[Vec<u8>], count: usize) -> Vec<&[u8]> {
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
    // 1,600 of the subscribed subjects and 64 that no one wants, in the
    // proportion `many` has them (a tenth subscribed) by repetition.
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
/// subscribers found (so nothing is optimised away).
fn herald_pass(table: &RoutingTable<u32>, keys: &[&[u8]]) -> u64 {
    let mut found = 0u64;
    for batch in keys.chunks(BATCH) {
        let reader = table.reader();
        let mut matches = Vec::new();
        reader.matches_of(batch, &mut matches);
        found += matches.iter().map(|(_, s)| s.len() as u64).sum::<u64>();
    }
    found
}

fn papaya_pass(
    map: &papaya::HashMap<Vec<u8>, u32, foldhash::fast::RandomState>,
    keys: &[&[u8]],
) -> u64 {
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

fn hashbrown_pass(map: &HashMap<Vec<u8>, u32, foldhash::fast::RandomState>, keys: &[&[u8]]) -> u64 {
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
    herald_bench::report::median(&mut values)
}

fn run(args: &Args) -> anyhow::Result<()> {
    let work = workload(args.subjects);
    let table = RoutingTable::new();
    let general = papaya::HashMap::with_hasher(foldhash::fast::RandomState::default());
    let mut plain = HashMap::with_hasher(foldhash::fast::RandomState::default());
    for (id, key) in work.subscribed.iter().enumerate() {
        let id = id as u32;
        let selector = Selector::parse(key).map_err(|e| anyhow::anyhow!("{e}"))?;
        table.insert(&selector, id);
        general.pin().insert(key.clone(), id);
        plain.insert(key.clone(), id);
    }
    println!(
        "{} subjects, {} subscribed; {} keys per pass in batches of {BATCH}; thread CPU per key, median of {}",
        args.subjects,
        work.subscribed.len(),
        args.keys,
        args.reps
    );
    println!();
    println!("| keys | distinct | herald table | papaya | hashbrown | papaya / herald | hashbrown / herald |");
    println!("|---|---|---|---|---|---|---|");
    let mut herald_by_mode = Vec::new();
    for (mode, pool) in [("many", &work.many), ("few", &work.few)] {
        let keys = draw(pool, args.keys);
        let distinct = pool.iter().collect::<std::collections::HashSet<_>>().len();
        let (mut ours, mut theirs, mut floor) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..args.reps {
            let (ns, found) = time(keys.len(), || herald_pass(&table, &keys));
            let (papaya_ns, papaya_found) = time(keys.len(), || papaya_pass(&general, &keys));
            let (plain_ns, plain_found) = time(keys.len(), || hashbrown_pass(&plain, &keys));
            anyhow::ensure!(
                found == papaya_found && found == plain_found,
                "the maps disagree: herald {found}, papaya {papaya_found}, hashbrown {plain_found}"
            );
            ours.push(ns);
            theirs.push(papaya_ns);
            floor.push(plain_ns);
        }
        let (ours, theirs, floor) = (median(ours), median(theirs), median(floor));
        herald_by_mode.push(ours);
        println!(
            "| {mode} | {distinct} | {ours:.1} ns | {theirs:.1} ns | {floor:.1} ns | {:.2} | {:.2} |",
            theirs / ours,
            floor / ours
        );
    }
    println!();
    println!(
        "herald many / few: {:.2}x",
        herald_by_mode[0] / herald_by_mode[1]
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.reps == 0 || args.keys == 0 || args.subjects < 16_000 {
        eprintln!(
            "herald-routing-bench: --reps and --keys must be positive, --subjects at least 16000"
        );
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald-routing-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
