//! Priority classes on the push path (seed 004: high-priority messages
//! need not respect time order relative to normal ones).
//!
//! A record is high priority if its [`PRIORITY_HEADER`] header says
//! `high`, normal if it says `normal`, and otherwise what its topic's
//! `message.priority` config says. A session sends its queued
//! high-priority deliveries ahead of its queued normal ones (with a
//! starvation bound, see the outbox), and a subscription that is catching
//! up on normal records from the log still receives new high-priority
//! records at once. Order within a class, per subject, is kept.

use herald_records::Record;

/// The record header naming its class: `high` or `normal` (any case).
pub const PRIORITY_HEADER: &[u8] = b"herald.priority";

/// True if `record` is high priority; `topic_high` is its topic's default.
pub(crate) fn is_high(record: &Record<'_>, topic_high: bool) -> bool {
    if record.header_count() > 0 {
        let said = record
            .headers()
            .map_while(Result::ok)
            .find(|(name, _)| *name == PRIORITY_HEADER)
            .and_then(|(_, value)| value);
        match said {
            Some(v) if v.eq_ignore_ascii_case(b"high") => return true,
            Some(v) if v.eq_ignore_ascii_case(b"normal") => return false,
            _ => {}
        }
    }
    topic_high
}
