//! Member ids, built as Kafka builds them: the client id (or the static
//! member's group.instance.id), a dash, and a UUID-shaped random part.
//!
//! The random part comes from a seeded SplitMix64 sequence instead of the OS,
//! so the coordinator stays deterministic under test; the broker seeds it
//! randomly at each start so ids do not repeat across restarts.

/// Generates member ids.
#[derive(Debug, Clone)]
pub(crate) struct MemberIdGenerator {
    state: u64,
}

impl MemberIdGenerator {
    pub(crate) fn new(seed: u64) -> Self {
        MemberIdGenerator { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        // SplitMix64: a full-period sequence with well-mixed outputs.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `prefix-xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`.
    pub(crate) fn generate(&mut self, prefix: &str) -> String {
        let high = self.next_u64();
        let low = self.next_u64();
        // Version 4 and variant bits, so the id reads as a random UUID.
        let high = (high & !0xf000) | 0x4000;
        let low = (low & !(0xc << 60)) | (0x8 << 60);
        format!(
            "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            high >> 32,
            (high >> 16) & 0xffff,
            high & 0xffff,
            low >> 48,
            low & 0xffff_ffff_ffff
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_uuid_shaped_and_distinct() {
        let mut ids = MemberIdGenerator::new(7);
        let first = ids.generate("client");
        let second = ids.generate("client");
        assert_ne!(first, second);
        assert!(first.starts_with("client-"));
        let uuid = &first["client-".len()..];
        let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(groups, vec![8, 4, 4, 4, 12]);
        assert_eq!(&uuid[14..15], "4");
    }
}
