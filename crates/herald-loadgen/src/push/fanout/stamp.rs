//! The payload every broker carries in the fan-out: the time the message
//! was meant to be sent, its subject and its sequence number within the
//! subject, padded to the message size.
//!
//! The intended time, not the time the publisher got round to sending it:
//! a publisher that falls behind its schedule then shows as latency
//! instead of hiding it (coordinated omission). The sequence number lets
//! each subscriber count what it missed and what it got twice.

/// Bytes the stamp takes at the front of a payload; smaller payloads are
/// not measured.
pub const STAMP_BYTES: usize = 20;

/// What a payload says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// When the publisher was meant to send it, ns since the Unix epoch.
    pub intended_ns: u64,
    /// The subject's index.
    pub subject: u32,
    /// Its place among the subject's messages, from 0.
    pub sequence: u64,
}

impl Stamp {
    /// Writes this stamp into `payload`'s first [`STAMP_BYTES`] bytes; the
    /// rest is left as it is (padding).
    pub fn write(&self, payload: &mut [u8]) {
        if let Some(head) = payload.get_mut(..STAMP_BYTES) {
            head[..8].copy_from_slice(&self.intended_ns.to_be_bytes());
            head[8..12].copy_from_slice(&self.subject.to_be_bytes());
            head[12..20].copy_from_slice(&self.sequence.to_be_bytes());
        }
    }

    /// Reads the stamp at the front of `payload`; `None` if it is too short.
    pub fn read(payload: &[u8]) -> Option<Self> {
        let head = payload.get(..STAMP_BYTES)?;
        let u64_at = |at: usize| {
            head.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
        };
        Some(Self {
            intended_ns: u64_at(0)?,
            subject: u32::from_be_bytes(head.get(8..12)?.try_into().ok()?),
            sequence: u64_at(12)?,
        })
    }
}

/// One subscriber's check of the sequence numbers it receives on one
/// subject: brokers deliver a subject in order, so a number past the next
/// expected one means the ones between were lost, and one before it is a
/// duplicate.
#[derive(Debug, Default, Clone, Copy)]
pub struct SequenceCheck {
    next: u64,
    /// Messages skipped over so far.
    pub lost: u64,
    /// Messages received again.
    pub duplicated: u64,
}

impl SequenceCheck {
    /// Takes one received sequence number; true if it is new.
    pub fn see(&mut self, sequence: u64) -> bool {
        if sequence < self.next {
            self.duplicated += 1;
            return false;
        }
        self.lost += sequence - self.next;
        self.next = sequence + 1;
        true
    }

    /// The sequence number it expects next: how many of the subject's
    /// messages it has received or skipped over.
    pub fn expected(&self) -> u64 {
        self.next
    }

    /// Messages lost once `published` were sent: the gaps seen, and the
    /// tail that never came.
    pub fn lost_of(&self, published: u64) -> u64 {
        self.lost + published.saturating_sub(self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_from_a_padded_payload() {
        let stamp = Stamp {
            intended_ns: 1_700_000_000_123_456_789,
            subject: 77,
            sequence: 1 << 40,
        };
        let mut payload = vec![0xAA; 64];
        stamp.write(&mut payload);
        assert_eq!(Stamp::read(&payload), Some(stamp));
        assert_eq!(&payload[STAMP_BYTES..], &[0xAA; 64 - STAMP_BYTES][..]);
        assert_eq!(Stamp::read(&payload[..STAMP_BYTES - 1]), None);
    }

    #[test]
    fn gaps_tails_and_repeats_are_counted() {
        let mut check = SequenceCheck::default();
        for sequence in [0, 1, 2, 5, 6, 6, 3, 7] {
            check.see(sequence);
        }
        assert_eq!(check.lost, 2, "3 and 4 were skipped over");
        assert_eq!(check.duplicated, 2, "6 again, and 3 after 6");
        assert_eq!(check.lost_of(10), 4, "8 and 9 never came");
        assert_eq!(SequenceCheck::default().lost_of(5), 5);
    }
}
