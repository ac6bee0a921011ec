//! One mirrored partition: fetches the upstream leader's committed batches
//! from the end of the relay's copy and appends them verbatim, so that
//! every offset holds on the relay what it holds upstream.
//!
//! The copy only ever extends the upstream's log, with three exceptions
//! it handles: an empty copy starts at the upstream's first batch (the
//! upstream's retention may have moved its start); a copy whose end the
//! upstream no longer has at its start (retention moved past it) restarts
//! there; and a copy longer than the upstream's log (an upstream that lost
//! its tail, which a Raft cluster never does with what it committed) is
//! cut back to it.

use std::sync::Arc;
use std::time::Duration;

use herald_client::Connection;
use herald_log::Log;
use herald_records::{batches, BatchHeader, ValidBatch};

use super::upstream::{moved, out_of_range, Fetched, Upstream};
use crate::broker::Broker;
use crate::storage::Backend;

/// How long one fetch waits upstream for new batches.
const FETCH_WAIT: Duration = Duration::from_millis(500);
/// Bytes asked per fetch.
const FETCH_BYTES: i32 = 4 * 1024 * 1024;
/// Pause after the upstream could not be reached, before asking again.
const RETRY: Duration = Duration::from_millis(200);

/// Mirrors partition `index` of `topic` until the broker closes it (or
/// removes the topic).
pub(super) async fn run(broker: Arc<Broker>, upstream: Arc<Upstream>, topic: String, index: u32) {
    let partition = index as i32;
    let mut connection: Option<(String, Connection)> = None;
    loop {
        let Some(log) = mirror_log(&broker, &topic, index) else {
            tracing::info!(topic, partition, "mirroring stops: the partition is gone");
            return;
        };
        if log.is_closed() {
            return;
        }
        let leader = match upstream.leader(&topic, partition).await {
            Ok(leader) => leader,
            Err(e) => {
                tracing::debug!(topic, partition, error = %e, "no upstream leader known");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        if connection.as_ref().is_none_or(|(at, _)| *at != leader) {
            match Upstream::connect(&leader).await {
                Ok(c) => connection = Some((leader.clone(), c)),
                Err(e) => {
                    tracing::info!(topic, partition, upstream = %leader, error = %e, "upstream leader unreachable; asking again who leads");
                    upstream.forget_leader(&topic, partition);
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            }
        }
        let Some((_, conn)) = connection.as_mut() else {
            continue;
        };
        let next = log.high_watermark();
        let fetched = match Upstream::fetch(conn, &topic, partition, next, FETCH_WAIT, FETCH_BYTES)
            .await
        {
            Ok(fetched) => fetched,
            Err(e) => {
                tracing::info!(topic, partition, upstream = %leader, error = %e, "fetching from upstream failed; asking again who leads");
                connection = None;
                upstream.forget_leader(&topic, partition);
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        if let Err(e) = take(&log, next, &fetched) {
            if moved(fetched.error_code) {
                tracing::debug!(topic, partition, "upstream leadership moved");
                connection = None;
                upstream.forget_leader(&topic, partition);
            } else {
                tracing::warn!(topic, partition, error = %e, "mirroring a fetch failed");
            }
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// The relay's copy of `topic`/`index`, while it is a mirrored partition
/// here.
fn mirror_log(broker: &Broker, topic: &str, index: u32) -> Option<Arc<Log>> {
    let topic = broker.topic(topic)?;
    let partitions = topic.partitions();
    let partition = partitions.get(index as usize)?;
    match partition.backend() {
        Backend::Mirror(mirror) => Some(mirror.log()),
        _ => None,
    }
}

/// Applies one fetch answer to the copy whose end is `next`.
fn take(log: &Log, next: u64, fetched: &Fetched) -> Result<(), String> {
    if out_of_range(fetched.error_code) {
        let start = u64::try_from(fetched.log_start_offset).unwrap_or(0);
        let end = u64::try_from(fetched.high_watermark).unwrap_or(0);
        if next > end {
            tracing::warn!(
                next,
                upstream_end = end,
                "the upstream's log is shorter than the relay's copy; cutting the copy back"
            );
            return log
                .truncate_after(end.max(log.log_start_offset()))
                .map_err(|e| e.to_string());
        }
        if next < start {
            tracing::info!(
                next,
                upstream_start = start,
                "the upstream no longer has the copy's end; restarting the copy at its start"
            );
            return log.reset(start).map_err(|e| e.to_string());
        }
        return Err(format!(
            "offset {next} out of range upstream [{start}, {end}]"
        ));
    }
    if fetched.error_code != 0 {
        return Err(format!("upstream fetch error {}", fetched.error_code));
    }
    let mut expected = next;
    // A batch cut by the fetch's size limit ends the answer: the next
    // fetch starts with it.
    for batch in batches(&fetched.records).map_while(Result::ok) {
        let Some(header) = BatchHeader::parse(batch) else {
            break;
        };
        let base = u64::try_from(header.base_offset()).map_err(|_| "negative base offset")?;
        let last = u64::try_from(header.last_offset()).map_err(|_| "negative last offset")?;
        if last < expected {
            // Already here: the fetch began inside this batch's range.
            continue;
        }
        if base != expected {
            let empty = log.high_watermark() == log.log_start_offset();
            if empty && base > expected {
                log.reset(base).map_err(|e| e.to_string())?;
            } else {
                return Err(format!(
                    "the upstream's batch at {base} does not follow the copy's end {expected}"
                ));
            }
        }
        let valid = ValidBatch::new(batch).map_err(|e| e.to_string())?;
        let appended = log
            .append_in_epoch(valid, header.partition_leader_epoch())
            .map_err(|e| e.to_string())?;
        expected = appended.last_offset + 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use herald_log::LogConfig;

    use super::*;

    /// An upstream batch of `count` records at `base`, appended there by a
    /// leader of `epoch`.
    fn upstream_batch(base: u64, count: u32, epoch: i32) -> Vec<u8> {
        let mut batch = herald_records::testing::batch(count, b"v", 1_000 + base as i64);
        herald_records::stamp(&mut batch, base, epoch);
        batch
    }

    fn fetched(batches: &[Vec<u8>]) -> Fetched {
        Fetched {
            error_code: 0,
            records: Bytes::from(batches.concat()),
            high_watermark: 0,
            log_start_offset: 0,
        }
    }

    fn copy() -> (tempfile::TempDir, Log) {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path().join("copy"), LogConfig::default()).unwrap();
        (dir, log)
    }

    fn stored(log: &Log) -> Vec<u8> {
        log.read(log.log_start_offset(), 1 << 20)
            .unwrap()
            .bytes
            .to_vec()
    }

    #[test]
    fn batches_are_copied_verbatim_at_the_upstreams_offsets() {
        let (_dir, log) = copy();
        let batches = [
            upstream_batch(0, 3, 2),
            upstream_batch(3, 1, 2),
            upstream_batch(4, 2, 5),
        ];
        take(&log, 0, &fetched(&batches)).unwrap();
        assert_eq!(log.high_watermark(), 6);
        assert_eq!(
            stored(&log),
            batches.concat(),
            "offsets and leader epochs kept"
        );
        // A fetch that starts inside a batch the copy has skips it.
        let more = [upstream_batch(4, 2, 5), upstream_batch(6, 1, 5)];
        take(&log, 6, &fetched(&more)).unwrap();
        assert_eq!(log.high_watermark(), 7);
    }

    #[test]
    fn an_empty_copy_starts_where_the_upstreams_log_starts() {
        let (_dir, log) = copy();
        take(&log, 0, &fetched(&[upstream_batch(100, 2, 1)])).unwrap();
        assert_eq!(log.log_start_offset(), 100);
        assert_eq!(log.high_watermark(), 102);
    }

    #[test]
    fn a_gap_after_the_copys_end_is_refused_and_nothing_is_appended() {
        let (_dir, log) = copy();
        take(&log, 0, &fetched(&[upstream_batch(0, 2, 1)])).unwrap();
        let error = take(&log, 2, &fetched(&[upstream_batch(5, 1, 1)])).unwrap_err();
        assert!(error.contains("does not follow"), "{error}");
        assert_eq!(log.high_watermark(), 2);
    }

    #[test]
    fn out_of_range_restarts_behind_the_upstreams_start_and_cuts_past_its_end() {
        let (_dir, log) = copy();
        take(
            &log,
            0,
            &fetched(&[upstream_batch(0, 2, 1), upstream_batch(2, 2, 1)]),
        )
        .unwrap();
        // The upstream lost its tail from offset 2 on.
        let shorter = Fetched {
            error_code: 1,
            records: Bytes::new(),
            high_watermark: 2,
            log_start_offset: 0,
        };
        take(&log, 4, &shorter).unwrap();
        assert_eq!(log.high_watermark(), 2);
        // The upstream's retention moved its start past the copy's end.
        let moved_on = Fetched {
            error_code: 1,
            records: Bytes::new(),
            high_watermark: 50,
            log_start_offset: 40,
        };
        take(&log, 2, &moved_on).unwrap();
        assert_eq!((log.log_start_offset(), log.high_watermark()), (40, 40));
    }
}
