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
use super::stamp::{Stamp, STAMP_BYTES};

/// What to publish.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Messages per second; 0 publishes as fast as the window allows.
    pub rate: u32,
    /// Seconds of publishing.
    pub secs: f64,
    /// Subjects, taken in turn (message `i` goes to subject `i % subjects`).
    pub subjects: u32,
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
    /// From the first send to the last answer.
    pub elapsed: Duration,
}

/// Messages subject `subject` received when `messages` were published in
/// turn over `subjects` subjects.
pub fn published_on(subject: u32, messages: u64, subjects: u32) -> u64 {
    let subjects = u64::from(subjects.max(1));
    messages / subjects + u64::from(u64::from(subject) < messages % subjects)
}

/// Publishes on `broker` through `publisher` as `schedule` says.
pub async fn publish(
    broker: &Broker,
    publisher: &mut Publisher,
    schedule: &Schedule,
) -> Result<Published, PushBenchError> {
    let subjects = schedule.subjects.max(1);
    let names: Vec<String> = (0..subjects).map(|s| broker.subject_name(s)).collect();
    let mut payload = vec![0x5A; schedule.payload_bytes.max(STAMP_BYTES)];
    let window = schedule.window.max(1);
    let planned = (f64::from(schedule.rate) * schedule.secs).round() as u64;
    let interval = (schedule.rate > 0).then(|| 1.0 / f64::from(schedule.rate));
    let start = Instant::now();
    let start_ns = now_ns();
    let stop = start + Duration::from_secs_f64(schedule.secs);
    let mut in_flight = 0usize;
    let mut unconfirmed = 0usize;
    let mut sent = 0u64;
    loop {
        let intended_ns = match interval {
            Some(interval) => {
                if sent >= planned.max(1) {
                    break;
                }
                let offset = Duration::from_secs_f64(sent as f64 * interval);
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
        let subject = (sent % u64::from(subjects)) as u32;
        Stamp {
            intended_ns,
            subject,
            sequence: sent / u64::from(subjects),
        }
        .write(&mut payload);
        let name = names.get(subject as usize).map_or("", String::as_str);
        if publisher.send(name, &payload).await? {
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
        elapsed: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::published_on;

    #[test]
    fn subjects_in_turn_share_the_messages() {
        assert_eq!(published_on(0, 10, 1), 10);
        let shares: Vec<u64> = (0..4).map(|s| published_on(s, 10, 4)).collect();
        assert_eq!(shares, [3, 3, 2, 2]);
        assert_eq!(shares.iter().sum::<u64>(), 10);
    }
}
