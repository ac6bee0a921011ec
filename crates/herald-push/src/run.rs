//! A run of records a tailer offers together: consecutive records of one
//! read with the same key, in order, across the read's batches (a
//! publisher that sends one record per request writes one batch each).
//! Its subject is looked up in the routing table
//! once, and each subscription takes the whole run under one acquisition
//! of its cursor's and its session's locks, instead of one each per
//! record. What each record is (shared slice, expired, high priority) is
//! worked out at most once, by the first subscription that needs it.

use std::sync::Arc;

use bytes::Bytes;
use herald_records::Record;

use crate::event::SharedRecord;

/// What every record of a run is judged by: its topic's settings and the
/// clock, read once per read.
pub(crate) struct RunContext {
    /// The topic's `message.ttl.ms`.
    pub(crate) ttl_ms: Option<u64>,
    /// The time the batch is offered at.
    pub(crate) now_ms: i64,
    /// The topic's `message.priority` is high.
    pub(crate) topic_high: bool,
}

/// One record of a run, with what has been worked out about it.
pub(crate) struct RunRecord<'a> {
    pub(crate) record: Record<'a>,
    /// The buffer the record's fields are slices of.
    section: &'a Bytes,
    shared: Option<Arc<SharedRecord>>,
    expired: Option<bool>,
    high: Option<bool>,
}

impl<'a> RunRecord<'a> {
    pub(crate) fn new(record: Record<'a>, section: &'a Bytes) -> Self {
        Self {
            record,
            section,
            shared: None,
            expired: None,
            high: None,
        }
    }

    /// Its offset (records of a read have non-negative offsets; see the
    /// tailer).
    pub(crate) fn offset(&self) -> u64 {
        self.record.offset as u64
    }

    /// Past its expiry at the run's time.
    pub(crate) fn expired(&mut self, context: &RunContext) -> bool {
        let record = &self.record;
        *self
            .expired
            .get_or_insert_with(|| crate::expiry::expired(record, context.ttl_ms, context.now_ms))
    }

    /// Goes ahead of normal deliveries.
    pub(crate) fn high_priority(&mut self, context: &RunContext) -> bool {
        let record = &self.record;
        *self
            .high
            .get_or_insert_with(|| crate::priority::is_high(record, context.topic_high))
    }

    /// The record as deliveries share it, made on first use.
    pub(crate) fn shared(&mut self) -> Arc<SharedRecord> {
        let (record, section) = (&self.record, self.section);
        Arc::clone(
            self.shared
                .get_or_insert_with(|| Arc::new(SharedRecord::slice_of(section, record))),
        )
    }

    /// Queued for at least one subscription.
    pub(crate) fn was_delivered(&self) -> bool {
        self.shared.is_some()
    }
}

/// What offering a run to one subscription came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunOffered {
    /// Deliveries queued.
    pub(crate) queued: u64,
    /// Records passed over because they expired.
    pub(crate) expired: u64,
    /// Deliveries went into an empty queue: wake the session's writer.
    pub(crate) wake: bool,
    /// The session had no room: the cursor now catches up, and the caller
    /// starts its reader.
    pub(crate) overflowed: bool,
}
