//! What a session sends its client, in the order the engine queued it.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use herald_records::Headers;

/// Bytes a queued delivery costs beyond its record's key, value and
/// headers (the event and the delivery frame's own fields), so a queue of
/// empty records is bounded too.
pub const DELIVERY_OVERHEAD_BYTES: usize = 48;

/// One stored record, shared by every delivery of it: its key, value and
/// headers are slices of the batch it was read from (or of the one buffer
/// that batch was decompressed into), so fanning it out copies nothing.
#[derive(Debug)]
pub struct SharedRecord {
    /// Its offset in its partition.
    pub offset: u64,
    /// Its timestamp (ms since the Unix epoch).
    pub timestamp: i64,
    /// Its key, the subject (`None`: Kafka's null key).
    pub key: Option<Bytes>,
    /// Its value (`None`: a tombstone).
    pub value: Option<Bytes>,
    header_section: Bytes,
    header_count: u32,
    /// Its fields as the delivering transport encodes them, made once by
    /// the first session that writes it and reused by every other.
    encoded: OnceLock<Bytes>,
}

impl SharedRecord {
    /// A record whose fields are slices of `buffer`: the view `record` was
    /// read from it.
    pub fn slice_of(buffer: &Bytes, record: &herald_records::Record<'_>) -> Self {
        let slice = |part: &[u8]| {
            if part.is_empty() {
                Bytes::new()
            } else {
                buffer.slice_ref(part)
            }
        };
        Self {
            offset: u64::try_from(record.offset).unwrap_or(0),
            timestamp: record.timestamp,
            key: record.key.map(slice),
            value: record.value.map(slice),
            header_section: slice(record.header_section()),
            header_count: record.header_count(),
            encoded: OnceLock::new(),
        }
    }

    /// A record with no key and no headers, for tests of what queues it.
    #[cfg(test)]
    pub(crate) fn for_test(offset: u64, value: &'static [u8]) -> Self {
        Self {
            offset,
            timestamp: 0,
            key: None,
            value: Some(Bytes::from_static(value)),
            header_section: Bytes::new(),
            header_count: 0,
            encoded: OnceLock::new(),
        }
    }

    /// The record encoded by `encode`, which runs for the first caller
    /// only: a transport encodes a record fanned out to thousands of
    /// subscribers once, not once per subscriber. Every caller must pass
    /// the same encoding (one transport owns the cache).
    pub fn encoded(&self, encode: impl FnOnce(&Self) -> Bytes) -> &Bytes {
        self.encoded.get_or_init(|| encode(self))
    }

    /// The record's headers, read as they are iterated.
    pub fn headers(&self) -> Headers<'_> {
        Headers::from_section(&self.header_section, self.header_count)
    }

    /// Bytes of the record's headers as stored.
    pub fn header_bytes(&self) -> usize {
        self.header_section.len()
    }

    /// Bytes this record's delivery costs a session's queue and credit.
    pub fn cost(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + self.header_section.len()
            + DELIVERY_OVERHEAD_BYTES
    }
}

/// One record for one subscription.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The subscription it is for (the client's id).
    pub subscription_id: u64,
    /// The partition it was read from.
    pub partition: u32,
    /// The record.
    pub record: Arc<SharedRecord>,
    /// High priority: sent ahead of queued normal deliveries, possibly
    /// ahead of normal records with lower offsets.
    pub high_priority: bool,
}

/// Why records were not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapReason {
    /// Removed by retention (or a DeleteRecords) before they were read.
    Retention,
    /// Skipped because the subscription fell behind by more than its lag
    /// limit.
    LagLimit,
    /// Past their expiry when they would have been pushed (told only to a
    /// subscription that asked for it).
    Expired,
}

/// Something the engine queued for a session's client.
#[derive(Debug, Clone)]
pub enum Event {
    /// A subscription was accepted; it delivers from these offsets.
    Subscribed {
        /// The client's id for it.
        subscription_id: u64,
        /// (partition, first offset it may deliver).
        start_offsets: Vec<(u32, u64)>,
    },
    /// A record.
    Delivery(Delivery),
    /// Records of a partition that will not be delivered.
    Gap {
        /// The subscription.
        subscription_id: u64,
        /// The partition.
        partition: u32,
        /// First offset not delivered.
        from_offset: u64,
        /// Where delivery continues.
        to_offset: u64,
        /// Why.
        reason: GapReason,
    },
    /// A subscription's partition went live or began catching up.
    State {
        /// The subscription.
        subscription_id: u64,
        /// The partition.
        partition: u32,
        /// True when live, false when catching up from the log.
        live: bool,
        /// Records between its position and the end of the partition.
        lag: u64,
    },
    /// A subscription ended at the client's request; nothing more follows
    /// for it.
    Unsubscribed {
        /// The subscription.
        subscription_id: u64,
    },
    /// A subscription ended because its topic went away; nothing more
    /// follows for it.
    Ended {
        /// The subscription.
        subscription_id: u64,
        /// Why.
        reason: String,
    },
}

impl Event {
    /// Bytes this event costs a session's queue.
    pub fn cost(&self) -> usize {
        match self {
            Event::Delivery(delivery) => delivery.record.cost(),
            Event::Subscribed { start_offsets, .. } => 32 + 12 * start_offsets.len(),
            _ => 32,
        }
    }
}
