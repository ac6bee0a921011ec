//! `herald-records-bench`: how fast herald reads the records of a batch.
//! For uncompressed, lz4 and zstd batches of 1, 64 and 1024 records (64-byte
//! values, a 10-byte key, one header), it times herald-records' iterator
//! (every record's offset, timestamp, key, value and headers touched)
//! against `kafka-protocol`'s `RecordBatchDecoder` (the decoder of the
//! Kafka crate the front end uses, which builds an owned record with a
//! header map for each) on the same batches, in the same process, taking
//! turns, and prints records per second per core (thread CPU time) and the
//! ratio of the medians. Run it through `scripts/bench-records.sh`.

use std::process::ExitCode;

use anyhow::{anyhow, Context as _};
use bytes::Bytes;
use clap::Parser;
use herald_bench::threads::thread_cpu;
use herald_records::{decompress_into, BatchBuilder, Compression, RecordFields};
use kafka_protocol::records::RecordBatchDecoder;

/// Times the record iterator against kafka-protocol's decoder.
#[derive(Parser, Debug)]
#[command(name = "herald-records-bench", version)]
struct Args {
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Records read per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    records: u64,
    /// Records per batch.
    #[arg(long, value_delimiter = ',', default_value = "1,64,1024")]
    batches: Vec<u32>,
}

const CODECS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];

/// A run of batches of `per_batch` records each, holding at least
/// `records` records in all (so one pass reads them all).
fn build_run(codec: Compression, per_batch: u32, records: u64) -> anyhow::Result<Vec<u8>> {
    let batch_count = records.div_ceil(u64::from(per_batch)).max(1);
    let value = [0x5au8; 64];
    let trace: &[(&[u8], Option<&[u8]>)] = &[(b"trace-id", Some(b"0123456789abcdef"))];
    // Batches are alike but for their timestamps: build one distinct batch
    // per 64 and repeat them, so building zstd batches stays quick.
    let distinct = batch_count.min(64);
    let mut templates = Vec::with_capacity(distinct as usize);
    for b in 0..distinct {
        let base = 1_700_000_000_000 + b as i64 * 1_000;
        let mut builder = BatchBuilder::new(base);
        for r in 0..per_batch {
            let key = format!("key-{:06}", (b as u32).wrapping_mul(per_batch) + r);
            builder.push(RecordFields {
                timestamp_ms: base + i64::from(r),
                key: Some(key.as_bytes()),
                value: Some(&value),
                headers: trace,
            });
        }
        templates.push(builder.finish_with(codec)?);
    }
    let mut run = Vec::new();
    for b in 0..batch_count {
        let mut batch = templates[(b % distinct) as usize].clone();
        herald_records::stamp(&mut batch, b * u64::from(per_batch), 0);
        run.extend_from_slice(&batch);
    }
    Ok(run)
}

fn herald_pass(run: &[u8], scratch: &mut Vec<u8>) -> anyhow::Result<u64> {
    herald_bench::read::decode_pass(run, scratch).map_err(|e| anyhow::anyhow!("{e}"))
}

/// kafka-protocol: one pass over the same run; returns records read.
fn kafka_protocol_pass(run: &Bytes) -> anyhow::Result<u64> {
    let mut buf = run.clone();
    let (mut records, mut touched) = (0u64, 0usize);
    while !buf.is_empty() {
        let set = RecordBatchDecoder::decode_with_custom_compression(
            &mut buf,
            Some(
                |compressed: &mut Bytes, codec: kafka_protocol::records::Compression| {
                    let codec = Compression::from_id(codec as u8)?;
                    let mut out = Vec::new();
                    decompress_into(codec, compressed, &mut out)?;
                    Ok(Bytes::from(out))
                },
            ),
        )
        .map_err(|e| anyhow!("kafka-protocol: {e}"))?;
        for record in &set.records {
            touched += record.key.as_ref().map_or(0, Bytes::len)
                + record.value.as_ref().map_or(0, Bytes::len);
            touched ^= (record.offset ^ record.timestamp) as usize;
            for (key, value) in &record.headers {
                touched += key.len() + value.as_ref().map_or(0, Bytes::len);
            }
            records += 1;
        }
    }
    std::hint::black_box(touched);
    Ok(records)
}

fn median(mut values: Vec<f64>) -> f64 {
    herald_bench::report::median(&mut values)
}

fn run(args: &Args) -> anyhow::Result<()> {
    println!("| codec | records per batch | herald-records (M records/s/core) | kafka-protocol (M records/s/core) | herald / kafka-protocol |");
    println!("|---|---|---|---|---|");
    for codec in CODECS {
        for &per_batch in &args.batches {
            let run = build_run(codec, per_batch, args.records)
                .with_context(|| format!("build {codec:?} batches of {per_batch}"))?;
            let shared = Bytes::from(run.clone());
            let mut scratch = Vec::new();
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            // Taking turns, so noise from other processes hits both alike.
            for _ in 0..args.reps {
                let started = thread_cpu();
                let read = herald_pass(&run, &mut scratch)?;
                ours.push(read as f64 / (thread_cpu() - started).as_secs_f64() / 1e6);
                let started = thread_cpu();
                let read = kafka_protocol_pass(&shared)?;
                theirs.push(read as f64 / (thread_cpu() - started).as_secs_f64() / 1e6);
            }
            let (ours, theirs) = (median(ours), median(theirs));
            println!(
                "| {codec:?} | {per_batch} | {ours:.1} | {theirs:.2} | {:.1} |",
                ours / theirs
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.reps == 0 || args.records == 0 || args.batches.contains(&0) {
        eprintln!("herald-records-bench: --reps, --records and --batches must be positive");
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald-records-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
