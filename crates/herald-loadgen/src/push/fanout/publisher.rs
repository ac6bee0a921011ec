//! The fan-out's publisher: open loop at a fixed rate, or as fast as its
//! window allows (saturation), with at most `window` messages in flight
//! (seed 004's method: a publisher limited by what is unanswered, not by
//! a pause between messages).
//!
//! Each message carries the time it was meant to be sent. When the window
//! is full or the machine is busy the publisher sends late, and the delay
//! shows in the latency rather than being skipped.

use std::time::{Duration, Instant};

use super::super::{now_ns, PushBenchError};
use super::broker::{Broker, Publisher};
use super::layout::Layout;
use super::stamp::{Stamp, STAMP_BYTES};

/// What to publish.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Messages per second (bursts per second when `burst` is over 1); 0
    /// publishes as fast as the window allows.
    pub rate: u32,
    /// Messages meant to leave together at each tick of `rate` (seed 003's
    /// rounds); 1 for an even stream.
    pub burst: u32,
    /// Seconds of publishing.
    pub secs: f64,
    /// The subjects and which one each message goes to.
    pub layout: Layout,
    /// Bytes per message, at least [`STAMP_BYTES`].
    pub payload_bytes: usize,
    /// Messages in flight at most: unanswered ones for brokers that
    /// answer, and between round trips for those that do not.
    pub window: usize,
}

/// What was published.
#[derive(Debug, Clone, Copy)]
pub struct Published {
    /// Messages sent (and, where the broker answers, answered).
    pub messages: u64,
    /// Messages the schedule planned (0 at saturation).
    pub planned: u64,
    /// From the first send to the last answer.
    pub elapsed: Duration,
    /// The first message's intended send time, ns since the Unix epoch:
    /// round 0's tick when messages leave in bursts.
    pub start_ns: u64,
}

/// Publishes on `broker` through `publisher` as `schedule` says.
pub async fn publish(
    broker: &Broker,
    publisher: &mut Publisher,
    schedule: &Schedule,
) -> Result<Published, PushBenchError> {
    let mut draws = schedule.layout.draws()?;
    // The next sequence number of every subject.
    let mut sequences = vec![0u64; schedule.layout.subjects.max(1) as usize];
    let burst = u64::from(schedule.burst.max(1));
    let mut name = String::new();
    let mut payload = vec![0x5A; schedule.payload_bytes.max(STAMP_BYTES)];
    let window = schedule.window.max(1);
    let planned = (f64::from(schedule.rate) * schedule.secs).round() as u64 * burst;
    let interval = (schedule.rate > 0).then(|| 1.0 / f64::from(schedule.rate));
    let start = Instant::now();
    let start_ns = now_ns();
    let stop = start + Duration::from_secs_f64(schedule.secs);
    // A broker that cannot keep up holds a windowed publisher back; past
    // twice its schedule (and at least 10 s more) the publisher stops, so
    // that a run ends in bounded time. What was sent is what is owed, and
    // the row shows the shortfall against what was planned.
    let cut_off = stop + Duration::from_secs_f64(schedule.secs.max(10.0));
    let mut in_flight = 0usize;
    let mut unconfirmed = 0usize;
    let mut sent = 0u64;
    loop {
        let intended_ns = match interval {
            Some(interval) => {
                if sent >= planned.max(1) || Instant::now() >= cut_off {
                    break;
                }
                let offset = Duration::from_secs_f64((sent / burst) as f64 * interval);
                tokio::time::sleep_until((start + offset).into()).await;
                start_ns + offset.as_nanos() as u64
            }
            None => {
                if Instant::now() >= stop {
                    break;
                }
                now_ns()
            }
        };
        while in_flight >= window {
            publisher.answered().await?;
            in_flight -= 1;
        }
        let subject = draws.next().unwrap_or(0);
        let Some(sequence) = sequences.get_mut(subject as usize) else {
            return Err(PushBenchError::Refused(format!("subject {subject} drawn")));
        };
        Stamp {
            intended_ns,
            subject,
            sequence: *sequence,
        }
        .write(&mut payload);
        *sequence += 1;
        broker.write_subject_name(subject, &mut name);
        if publisher.send(&name, &payload).await? {
            in_flight += 1;
        } else {
            unconfirmed += 1;
            if unconfirmed >= window {
                publisher.round_trip().await?;
                unconfirmed = 0;
            }
        }
        sent += 1;
    }
    while in_flight > 0 {
        publisher.answered().await?;
        in_flight -= 1;
    }
    publisher.round_trip().await?;
    Ok(Published {
        messages: sent,
        planned: if interval.is_some() { planned } else { 0 },
        elapsed: start.elapsed(),
        start_ns,
    })
}
