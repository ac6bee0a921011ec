//! Issue 15's catch-up measurement: what a subscription to one subject
//! among many reads from the log per byte it delivers, with the per-block
//! subject filters and without them.
//!
//! Two one-partition topics receive the same records, one keeping subject
//! filters (`subject.filters=true`) and one not. Every record's key
//! is one of `subjects`, drawn pseudo-randomly (the same draw for both).
//! Once the indexer has caught up, each of `probes` subjects is
//! subscribed from the earliest offset on each topic in turn, on a fresh
//! session, until all of its records arrived; the broker's counters of
//! catch-up bytes read and delivered give the ratio, and the clock the
//! time each catch-up took.

use std::time::{Duration, Instant};

use herald_client::Connection;
use herald_gateway::proto::{self, client_message, server_message::Kind};
use serde::Serialize;

use super::session::{AnySession, Messages, Transport};
use super::PushBenchError;

/// What to run.
#[derive(Debug, Clone)]
pub struct CatchUp {
    /// The push listener.
    pub push: String,
    /// The Kafka listener (publishing).
    pub bootstrap: String,
    /// The admin listener (the catch-up counters).
    pub admin: String,
    /// The topic that keeps subject filters.
    pub filtered_topic: String,
    /// The topic that does not.
    pub plain_topic: String,
    /// Distinct subjects.
    pub subjects: u64,
    /// Records published to each topic.
    pub records: u64,
    /// Records per produce batch.
    pub batch_records: u32,
    /// Subjects whose catch-up is measured.
    pub probes: u64,
    /// The subscriber's transport.
    pub transport: Transport,
}

/// One topic's catch-ups.
#[derive(Debug, Clone, Serialize)]
pub struct CatchUpSide {
    /// Bytes the catch-up readers read.
    pub read_bytes: u64,
    /// Bytes of the deliveries they queued.
    pub delivered_bytes: u64,
    /// `read_bytes / delivered_bytes`.
    pub read_per_delivered: f64,
    /// Median seconds from subscribe to the subject's last record.
    pub median_secs: f64,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct CatchUpRow {
    /// `catch-up`.
    pub scenario: &'static str,
    /// Records in each topic.
    pub records: u64,
    /// Distinct subjects.
    pub subjects: u64,
    /// Records per produce batch.
    pub batch_records: u32,
    /// Bytes of each topic's log.
    pub log_bytes: u64,
    /// Subjects measured.
    pub probes: u64,
    /// Records delivered per catch-up, summed over the probes.
    pub delivered_records: u64,
    /// With the subject filters.
    pub filtered: CatchUpSide,
    /// Without them.
    pub plain: CatchUpSide,
    /// `plain.read_bytes / filtered.read_bytes`.
    pub read_ratio: f64,
}

/// Longest wait for the indexer, and for one catch-up.
const WAIT: Duration = Duration::from_secs(180);

/// The subject of record `j`: a fixed pseudo-random draw (SplitMix64).
fn subject_of(j: u64, subjects: u64) -> u64 {
    let mut z = j.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % subjects
}

fn key(subject: u64) -> Vec<u8> {
    format!("device.{subject}").into_bytes()
}

/// Runs one measurement.
pub async fn run(plan: &CatchUp) -> Result<CatchUpRow, PushBenchError> {
    let value = [7u8; 64];
    let records =
        (0..plan.records).map(|j| (key(subject_of(j, plan.subjects)), &value[..], Vec::new()));
    let batches = super::publish::batches_of_size(records, 1, plan.batch_records);
    let mut producer = Connection::connect(&plan.bootstrap).await?;
    let mut log_bytes = 0;
    for (_, batch) in &batches {
        log_bytes += batch.len() as u64;
        for topic in [&plan.filtered_topic, &plan.plain_topic] {
            herald_client::data::produce(&mut producer, topic, 0, batch.clone()).await?;
        }
    }
    drop(batches);
    wait_for_the_indexer(&plan.admin).await?;
    // Each probe subject's record count, from the same draw.
    let probes: Vec<u64> = (0..plan.probes).collect();
    let mut expected = vec![0u64; probes.len()];
    for j in 0..plan.records {
        let subject = subject_of(j, plan.subjects);
        if let Some(count) = expected.get_mut(subject as usize) {
            *count += 1;
        }
    }
    let filtered = side(plan, &plan.filtered_topic, &expected).await?;
    let plain = side(plan, &plan.plain_topic, &expected).await?;
    Ok(CatchUpRow {
        scenario: "catch-up",
        records: plan.records,
        subjects: plan.subjects,
        batch_records: plan.batch_records,
        log_bytes,
        probes: plan.probes,
        delivered_records: expected.iter().sum(),
        read_ratio: plain.read_bytes as f64 / filtered.read_bytes.max(1) as f64,
        filtered,
        plain,
    })
}

/// Waits until the subject indexer has nothing left.
async fn wait_for_the_indexer(admin: &str) -> Result<(), PushBenchError> {
    let give_up = Instant::now() + WAIT;
    let mut quiet = 0;
    while quiet < 3 {
        if Instant::now() > give_up {
            return Err(PushBenchError::Refused(
                "the subject indexer did not catch up".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let lag = super::metric(admin, "herald_push_subject_index_lag")?;
        quiet = if lag == 0.0 { quiet + 1 } else { 0 };
    }
    Ok(())
}

/// The catch-ups of every probe subject on `topic`.
async fn side(
    plan: &CatchUp,
    topic: &str,
    expected: &[u64],
) -> Result<CatchUpSide, PushBenchError> {
    let counter = |name| super::metric(&plan.admin, name).map(|v| v as u64);
    let read_before = counter("herald_push_catch_up_read_bytes_total")?;
    let delivered_before = counter("herald_push_catch_up_delivered_bytes_total")?;
    let mut secs = Vec::new();
    for (subject, &want) in expected.iter().enumerate() {
        let mut session = AnySession::open(plan.transport, &plan.push).await?;
        let start = Instant::now();
        session
            .send(client_message::Kind::Subscribe(proto::Subscribe {
                subscription_id: 1,
                topic: topic.to_owned(),
                selector: Some(proto::subscribe::Selector::Subject(
                    key(subject as u64).into(),
                )),
                start: Some(proto::StartAt {
                    from: Some(proto::start_at::From::Earliest(proto::Empty {})),
                }),
                ..Default::default()
            }))
            .await?;
        let mut got = 0;
        // The reader goes on past the subject's last record to the end of
        // the log; the bytes it read count only once it says it is live.
        let mut live = false;
        let give_up = start + WAIT;
        while got < want || !live {
            let next = tokio::time::timeout_at(give_up.into(), session.next()).await;
            match next {
                Ok(Ok(Kind::Deliveries(batch))) => got += batch.deliveries.len() as u64,
                Ok(Ok(Kind::Status(status))) => {
                    live = status.state == proto::SubscriptionState::Live as i32;
                }
                Ok(Ok(Kind::Error(e))) => return Err(PushBenchError::Refused(e.message)),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(PushBenchError::Refused(format!(
                        "catch-up of subject {subject} on {topic}: {got} of {want} records, live {live}"
                    )))
                }
            }
        }
        secs.push(start.elapsed().as_secs_f64());
    }
    // The counters are refreshed on scrape: what the readers did is in.
    let read_bytes = counter("herald_push_catch_up_read_bytes_total")? - read_before;
    let delivered_bytes = counter("herald_push_catch_up_delivered_bytes_total")? - delivered_before;
    secs.sort_by(f64::total_cmp);
    Ok(CatchUpSide {
        read_bytes,
        delivered_bytes,
        read_per_delivered: read_bytes as f64 / delivered_bytes.max(1) as f64,
        median_secs: secs.get(secs.len() / 2).copied().unwrap_or(0.0),
    })
}
