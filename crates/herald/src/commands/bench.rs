//! `herald bench`: creates a topic, produces `--records` records of
//! `--record-bytes` bytes in batches, reads them all back, prints a summary
//! table and deletes the topic (unless `--topic` named one to keep).

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::cli::BenchArgs;
use crate::commands::now_ms;
use herald_client::data::{fetch, produce};
use herald_client::records::encode_batch;
use herald_client::{admin, Connection, Record};

/// One measured phase.
struct Phase {
    name: &'static str,
    records: u64,
    bytes: u64,
    elapsed: Duration,
}

/// Runs `herald bench`.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let mut connection = args.broker.connect().await?;
    let own_topic = args.topic.is_none();
    let topic = args
        .topic
        .clone()
        .unwrap_or_else(|| format!("herald-bench-{}", std::process::id()));
    if own_topic {
        admin::create_topic(&mut connection, &topic, Some(1), &[]).await?;
    }
    let result = measure(&mut connection, &args, &topic).await;
    if own_topic {
        admin::delete_topic(&mut connection, &topic).await?;
    }
    let phases = result?;
    println!(
        "{:<8} {:>10} {:>14} {:>9} {:>12} {:>9}",
        "phase", "records", "bytes", "seconds", "records/s", "MiB/s"
    );
    for phase in phases {
        let seconds = phase.elapsed.as_secs_f64().max(1e-9);
        println!(
            "{:<8} {:>10} {:>14} {:>9.3} {:>12.0} {:>9.1}",
            phase.name,
            phase.records,
            phase.bytes,
            seconds,
            phase.records as f64 / seconds,
            phase.bytes as f64 / seconds / (1024.0 * 1024.0)
        );
    }
    Ok(())
}

async fn measure(
    connection: &mut Connection,
    args: &BenchArgs,
    topic: &str,
) -> anyhow::Result<Vec<Phase>> {
    let start_offset =
        herald_client::data::list_offsets(connection, topic, &[0], herald_client::data::LATEST)
            .await?
            .first()
            .and_then(|(_, o)| *o)
            .unwrap_or(0);
    let value = vec![b'x'; args.record_bytes as usize];
    let mut progress = Progress::new("produce", args.records);
    let started = Instant::now();
    let mut sent = 0u64;
    while sent < args.records {
        let count = (args.records - sent).min(u64::from(args.batch_records));
        let records: Vec<Record> = (0..count)
            .map(|_| Record {
                key: None,
                value: Some(value.clone()),
                headers: Vec::new(),
                timestamp_ms: now_ms(),
            })
            .collect();
        produce(connection, topic, 0, Bytes::from(encode_batch(&records)?)).await?;
        sent += count;
        progress.update(sent);
    }
    let produced = Phase {
        name: "produce",
        records: sent,
        bytes: sent * u64::from(args.record_bytes),
        elapsed: started.elapsed(),
    };
    progress.finish();

    let mut progress = Progress::new("consume", args.records);
    let started = Instant::now();
    let mut offset = start_offset;
    let mut read = 0u64;
    let mut bytes = 0u64;
    while read < args.records {
        let fetched = fetch(
            connection,
            topic,
            &[(0, offset)],
            Duration::from_millis(500),
        )
        .await?;
        for partition in fetched {
            for record in partition.records {
                bytes += record.record.value.as_ref().map_or(0, |v| v.len() as u64);
                offset = record.offset + 1;
                read += 1;
            }
        }
        progress.update(read);
    }
    let consumed = Phase {
        name: "consume",
        records: read,
        bytes,
        elapsed: started.elapsed(),
    };
    progress.finish();
    Ok(vec![produced, consumed])
}

/// A progress line on stderr, redrawn at most ten times a second, only
/// when stderr is a terminal.
struct Progress {
    phase: &'static str,
    total: u64,
    shown: Option<Instant>,
    enabled: bool,
}

impl Progress {
    fn new(phase: &'static str, total: u64) -> Self {
        Self {
            phase,
            total,
            shown: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, done: u64) {
        if !self.enabled
            || self
                .shown
                .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.shown = Some(Instant::now());
        let width = 30u64;
        let filled = (done * width / self.total.max(1)).min(width) as usize;
        eprint!(
            "\r{:<8} [{}{}] {done}/{}",
            self.phase,
            "#".repeat(filled),
            " ".repeat(width as usize - filled),
            self.total
        );
    }

    fn finish(&mut self) {
        if self.enabled {
            self.shown = None;
            self.update(self.total);
            eprintln!();
        }
    }
}
