//! `herald consume`: prints a topic's records from a starting position,
//! stopping at the end observed when it started (or following new records
//! with `--follow`), as plain values or JSON lines. With `--group` it is a
//! member of a consumer group: it reads the partitions the group assigns it,
//! from the group's committed offsets, and commits what it printed.

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;

use crate::cli::{ConsumeArgs, OutputFormat, StartFrom};
use herald_client::data::{fetch, list_offsets, PartitionRecords, EARLIEST, LATEST};
use herald_client::member::GroupMember;
use herald_client::records::FetchedRecord;
use herald_client::{admin, Connection};

/// Longest a fetch waits on the broker for new data.
const FETCH_WAIT: Duration = Duration::from_millis(500);

/// Runs `herald consume`.
pub async fn run(mut args: ConsumeArgs) -> anyhow::Result<()> {
    if let Some(snapshot) = args.snapshot.take() {
        args.topic = herald_broker::snapshots::view_name(&snapshot, &args.topic);
    }
    let mut connection = args.broker.connect().await?;
    let topic = admin::topic(&mut connection, &args.topic).await?;
    let mut partitions: Vec<i32> = topic.partitions.iter().map(|(p, _)| *p).collect();
    if let Some(group) = args.group.clone() {
        return run_in_group(connection, &args, &group, &partitions).await;
    }
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
    let ends = end_offsets(&mut connection, &args.topic, &partitions).await?;
    let mut printer = Printer::new(&args);
    while !printer.is_done() {
        // Only partitions not yet at their end are fetched, unless following.
        let wanted = still_wanted(&args, &positions, &ends);
        if wanted.is_empty() {
            break;
        }
        let fetched = tokio::select! {
            fetched = fetch(&mut connection, &args.topic, &wanted, FETCH_WAIT) => fetched?,
            _ = tokio::signal::ctrl_c() => break,
        };
        printer.print(fetched, &mut positions)?;
    }
    Ok(())
}

/// `consume --group`: the loop of a group member (join, fetch, print,
/// commit, rejoin when the group rebalances), leaving the group at the end.
async fn run_in_group(
    mut connection: Connection,
    args: &ConsumeArgs,
    group: &str,
    partitions: &[i32],
) -> anyhow::Result<()> {
    let ends = end_offsets(&mut connection, &args.topic, partitions).await?;
    let mut member = GroupMember::with_options(
        &args.broker.bootstrap,
        args.broker.options()?,
        group,
        &args.topic,
    );
    let mut positions: Vec<(i32, i64)> = Vec::new();
    let mut printer = Printer::new(args);
    loop {
        if member.needs_join() {
            let assigned = tokio::select! {
                assigned = member.join(&mut connection) => assigned?,
                _ = tokio::signal::ctrl_c() => break,
            };
            positions = group_positions(&mut connection, &member, args, &assigned).await?;
        }
        if printer.is_done() {
            break;
        }
        let wanted = still_wanted(args, &positions, &ends);
        if wanted.is_empty() {
            if !args.follow {
                break;
            }
            // Nothing assigned (more members than partitions): wait for a
            // rebalance to give this member something.
            tokio::select! {
                _ = tokio::time::sleep(FETCH_WAIT) => continue,
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        let fetched = tokio::select! {
            fetched = fetch(&mut connection, &args.topic, &wanted, FETCH_WAIT) => fetched?,
            _ = tokio::signal::ctrl_c() => break,
        };
        let before = positions.clone();
        printer.print(fetched, &mut positions)?;
        let moved: Vec<(i32, i64)> = positions
            .iter()
            .filter(|p| !before.contains(p))
            .copied()
            .collect();
        // A refused commit (the group rebalanced) makes the member rejoin and
        // restart from the committed offsets: records may print again.
        member.commit(&mut connection, &moved).await?;
    }
    Ok(member.leave(&mut connection).await?)
}

/// Where a member starts in each assigned partition: the group's committed
/// offset, else where `--from` says.
async fn group_positions(
    connection: &mut Connection,
    member: &GroupMember,
    args: &ConsumeArgs,
    assigned: &[i32],
) -> anyhow::Result<Vec<(i32, i64)>> {
    if assigned.is_empty() {
        return Ok(Vec::new());
    }
    let mut positions = member.committed(connection, assigned).await?;
    let uncommitted: Vec<i32> = assigned
        .iter()
        .copied()
        .filter(|p| !positions.iter().any(|(q, _)| q == p))
        .collect();
    if !uncommitted.is_empty() {
        positions.extend(start_positions(connection, args, &uncommitted).await?);
    }
    positions.sort_unstable();
    Ok(positions)
}

/// The end (high watermark) of each partition, observed now.
async fn end_offsets(
    connection: &mut Connection,
    topic: &str,
    partitions: &[i32],
) -> anyhow::Result<Vec<(i32, i64)>> {
    let ends = list_offsets(connection, topic, partitions, LATEST).await?;
    Ok(ends.into_iter().map(|(p, o)| (p, o.unwrap_or(0))).collect())
}

/// The positions still to fetch: all of them when following, else those
/// before the end observed at start.
fn still_wanted(
    args: &ConsumeArgs,
    positions: &[(i32, i64)],
    ends: &[(i32, i64)],
) -> Vec<(i32, i64)> {
    positions
        .iter()
        .copied()
        .filter(|(p, offset)| args.follow || *offset < end_of(ends, *p))
        .collect()
}

/// Prints fetched records up to `--max-messages`.
struct Printer {
    format: OutputFormat,
    limit: u64,
    printed: u64,
}

impl Printer {
    fn new(args: &ConsumeArgs) -> Self {
        Self {
            format: args.format,
            limit: args.max_messages.unwrap_or(u64::MAX),
            printed: 0,
        }
    }

    fn is_done(&self) -> bool {
        self.printed >= self.limit
    }

    /// Prints `fetched` and moves each partition's position past the last
    /// record printed.
    fn print(
        &mut self,
        fetched: Vec<PartitionRecords>,
        positions: &mut [(i32, i64)],
    ) -> anyhow::Result<()> {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for partition in fetched {
            for record in partition.records {
                if self.is_done() {
                    break;
                }
                print_record(&mut out, self.format, partition.partition, &record)?;
                self.printed += 1;
                if let Some(position) = positions
                    .iter_mut()
                    .find(|(p, _)| *p == partition.partition)
                {
                    position.1 = record.offset + 1;
                }
            }
        }
        out.flush().context("writing to stdout")
    }
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
