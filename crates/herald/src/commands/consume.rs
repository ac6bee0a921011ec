//! `herald consume`: prints a topic's records from a starting position,
//! stopping at the end observed when it started (or following new records
//! with `--follow`), as plain values or JSON lines.

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;

use crate::cli::{ConsumeArgs, OutputFormat, StartFrom};
use crate::client::data::{fetch, list_offsets, EARLIEST, LATEST};
use crate::client::records::FetchedRecord;
use crate::client::{admin, Connection};

/// Longest a fetch waits on the broker for new data.
const FETCH_WAIT: Duration = Duration::from_millis(500);

/// Runs `herald consume`.
pub async fn run(args: ConsumeArgs) -> anyhow::Result<()> {
    let mut connection = Connection::connect(&args.broker.bootstrap).await?;
    let topic = admin::topic(&mut connection, &args.topic).await?;
    let mut partitions: Vec<i32> = topic.partitions.iter().map(|(p, _)| *p).collect();
    if let Some(only) = args.partition {
        anyhow::ensure!(
            partitions.contains(&only),
            "partition {only} does not exist: topic '{}' has {}",
            args.topic,
            partitions.len()
        );
        partitions = vec![only];
    }
    let mut positions = start_positions(&mut connection, &args, &partitions).await?;
    let ends = list_offsets(&mut connection, &args.topic, &partitions, LATEST).await?;
    let ends: Vec<(i32, i64)> = ends.into_iter().map(|(p, o)| (p, o.unwrap_or(0))).collect();
    let mut printed = 0u64;
    let limit = args.max_messages.unwrap_or(u64::MAX);
    let stdout = std::io::stdout();
    loop {
        if printed >= limit {
            break;
        }
        // Only partitions not yet at their end are fetched, unless following.
        let wanted: Vec<(i32, i64)> = positions
            .iter()
            .copied()
            .filter(|(p, offset)| args.follow || *offset < end_of(&ends, *p))
            .collect();
        if wanted.is_empty() {
            break;
        }
        let fetched = tokio::select! {
            fetched = fetch(&mut connection, &args.topic, &wanted, FETCH_WAIT) => fetched?,
            _ = tokio::signal::ctrl_c() => break,
        };
        let mut out = stdout.lock();
        for partition in fetched {
            for record in partition.records {
                if printed >= limit {
                    break;
                }
                print_record(&mut out, args.format, partition.partition, &record)?;
                printed += 1;
                if let Some(position) = positions
                    .iter_mut()
                    .find(|(p, _)| *p == partition.partition)
                {
                    position.1 = record.offset + 1;
                }
            }
        }
        out.flush().context("writing to stdout")?;
    }
    Ok(())
}

fn end_of(ends: &[(i32, i64)], partition: i32) -> i64 {
    ends.iter()
        .find(|(p, _)| *p == partition)
        .map_or(0, |(_, end)| *end)
}

async fn start_positions(
    connection: &mut Connection,
    args: &ConsumeArgs,
    partitions: &[i32],
) -> anyhow::Result<Vec<(i32, i64)>> {
    let timestamp = match args.from {
        StartFrom::Offset(offset) => return Ok(partitions.iter().map(|p| (*p, offset)).collect()),
        StartFrom::Beginning => EARLIEST,
        StartFrom::End => LATEST,
        StartFrom::Timestamp(ms) => ms,
    };
    list_offsets_or_end(connection, &args.topic, partitions, timestamp).await
}

/// Offsets for `timestamp`; a partition with no record that late starts at its end.
async fn list_offsets_or_end(
    connection: &mut Connection,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> anyhow::Result<Vec<(i32, i64)>> {
    let found = list_offsets(connection, topic, partitions, timestamp).await?;
    let ends = list_offsets(connection, topic, partitions, LATEST).await?;
    Ok(found
        .into_iter()
        .map(|(p, offset)| {
            let end = ends.iter().find(|(q, _)| *q == p).and_then(|(_, o)| *o);
            (p, offset.or(end).unwrap_or(0))
        })
        .collect())
}

fn print_record(
    out: &mut impl std::io::Write,
    format: OutputFormat,
    partition: i32,
    fetched: &FetchedRecord,
) -> anyhow::Result<()> {
    let text = |bytes: &Option<Vec<u8>>| {
        bytes
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    match format {
        OutputFormat::Plain => {
            let value = fetched.record.value.as_deref().unwrap_or_default();
            out.write_all(value).context("writing to stdout")?;
            out.write_all(b"\n").context("writing to stdout")?;
        }
        OutputFormat::Json => {
            let headers: serde_json::Map<String, serde_json::Value> = fetched
                .record
                .headers
                .iter()
                .map(|h| (h.key.clone(), text(&h.value).into()))
                .collect();
            let line = serde_json::json!({
                "partition": partition,
                "offset": fetched.offset,
                "timestamp": fetched.record.timestamp_ms,
                "key": text(&fetched.record.key),
                "headers": headers,
                "value": text(&fetched.record.value),
            });
            writeln!(out, "{line}").context("writing to stdout")?;
        }
    }
    Ok(())
}
