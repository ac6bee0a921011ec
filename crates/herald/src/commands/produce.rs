//! `herald produce`: lines from stdin or a file become records. Records are
//! gathered per partition into batches, sent when a batch is full or no
//! new line came for a moment (a linger, as Kafka producers do), and paced
//! by `--rate`. A summary goes to stderr at the end.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};

use crate::cli::ProduceArgs;
use crate::commands::now_ms;
use herald_client::data::produce;
use herald_client::partitioner::partition_for_key;
use herald_client::records::encode_batch;
use herald_client::{admin, Connection, Header, Record};

/// Records per batch at most.
const BATCH_RECORDS_MAX: usize = 500;
/// Batch payload bytes at which a batch is sent.
const BATCH_BYTES_MAX: usize = 512 * 1024;
/// How long to wait for another line before sending what is gathered.
const LINGER: Duration = Duration::from_millis(20);

/// Totals of a produce run.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    /// Records acknowledged.
    pub records: u64,
    /// Key and value bytes acknowledged.
    pub bytes: u64,
}

/// Runs `herald produce`.
pub async fn run(args: ProduceArgs) -> anyhow::Result<()> {
    let mut connection = args.broker.connect().await?;
    let topic = admin::metadata(&mut connection, Some(&[args.topic.as_str()]), true)
        .await?
        .into_iter()
        .next()
        .with_context(|| format!("unknown topic '{}'", args.topic))?;
    let partitions = u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX);
    anyhow::ensure!(
        partitions > 0,
        "topic '{}' has no partitions yet",
        args.topic
    );
    if let Some(p) = args.partition {
        anyhow::ensure!(
            (p as u32) < partitions,
            "partition {p} does not exist: topic '{}' has {partitions}",
            args.topic
        );
    }
    let started = Instant::now();
    let totals = match &args.file {
        Some(path) => {
            let file = tokio::fs::File::open(path)
                .await
                .with_context(|| format!("cannot open {}", path.display()))?;
            send_lines(&mut connection, &args, partitions, BufReader::new(file)).await?
        }
        None => {
            let stdin = BufReader::new(tokio::io::stdin());
            send_lines(&mut connection, &args, partitions, stdin).await?
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "produced {} records ({} bytes) to {} in {elapsed:.3} s ({:.0} records/s)",
        totals.records,
        totals.bytes,
        args.topic,
        totals.records as f64 / elapsed.max(1e-9)
    );
    Ok(())
}

/// Pending records of one partition.
#[derive(Default)]
struct Pending {
    records: Vec<Record>,
    bytes: usize,
}

async fn send_lines(
    connection: &mut Connection,
    args: &ProduceArgs,
    partitions: u32,
    input: impl AsyncBufRead + Unpin,
) -> anyhow::Result<Totals> {
    let mut lines = input.lines();
    let mut pending: Vec<Pending> = (0..partitions).map(|_| Pending::default()).collect();
    let mut totals = Totals::default();
    let mut round_robin = 0u32;
    let key = args.key.as_ref().map(|k| k.as_bytes().to_vec());
    let headers: Vec<Header> = args
        .headers
        .iter()
        .map(|(k, v)| Header {
            key: k.clone(),
            value: Some(v.as_bytes().to_vec()),
        })
        .collect();
    let started = Instant::now();
    let mut read = 0u64;
    loop {
        let any_pending = pending.iter().any(|p| !p.records.is_empty());
        let line = if any_pending {
            match tokio::time::timeout(LINGER, lines.next_line()).await {
                Ok(line) => line.context("reading input")?,
                Err(_) => {
                    flush_all(connection, &args.topic, &mut pending, &mut totals).await?;
                    round_robin = round_robin.wrapping_add(1);
                    continue;
                }
            }
        } else {
            lines.next_line().await.context("reading input")?
        };
        let Some(line) = line else { break };
        if let Some(rate) = args.rate {
            let due = started + Duration::from_secs_f64(read as f64 / f64::from(rate));
            if due > Instant::now() {
                flush_all(connection, &args.topic, &mut pending, &mut totals).await?;
                tokio::time::sleep_until(due.into()).await;
            }
        }
        read += 1;
        let partition = match (args.partition, &key) {
            (Some(p), _) => p as u32,
            (None, Some(key)) => partition_for_key(key, partitions),
            (None, None) => round_robin % partitions,
        };
        let slot = &mut pending[partition as usize];
        slot.bytes += line.len() + key.as_ref().map_or(0, Vec::len);
        slot.records.push(Record {
            key: key.clone(),
            value: Some(line.into_bytes()),
            headers: headers.clone(),
            timestamp_ms: now_ms(),
        });
        if slot.records.len() >= BATCH_RECORDS_MAX || slot.bytes >= BATCH_BYTES_MAX {
            flush(connection, &args.topic, partition, slot, &mut totals).await?;
            round_robin = round_robin.wrapping_add(1);
        }
    }
    flush_all(connection, &args.topic, &mut pending, &mut totals).await?;
    Ok(totals)
}

async fn flush_all(
    connection: &mut Connection,
    topic: &str,
    pending: &mut [Pending],
    totals: &mut Totals,
) -> anyhow::Result<()> {
    for (partition, slot) in pending.iter_mut().enumerate() {
        flush(connection, topic, partition as u32, slot, totals).await?;
    }
    Ok(())
}

async fn flush(
    connection: &mut Connection,
    topic: &str,
    partition: u32,
    slot: &mut Pending,
    totals: &mut Totals,
) -> anyhow::Result<()> {
    if slot.records.is_empty() {
        return Ok(());
    }
    let batch = encode_batch(&slot.records)?;
    produce(connection, topic, partition as i32, Bytes::from(batch)).await?;
    totals.records += slot.records.len() as u64;
    totals.bytes += slot.bytes as u64;
    slot.records.clear();
    slot.bytes = 0;
    Ok(())
}
