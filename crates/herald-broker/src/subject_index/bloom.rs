//! The filter of one block: which subjects (record keys) its records may
//! carry, as a Bloom filter of 10 bits per record (RocketSpeed's sizing),
//! and how many stored bytes its batches take, to size a read of it.

/// Offsets per block. Blocks are aligned: block `b` holds offsets
/// `b * BLOCK_RECORDS .. (b + 1) * BLOCK_RECORDS`, so a block is found by
/// division, with no search.
pub const BLOCK_RECORDS: u64 = 1024;
/// Bytes of a block's bit array: 10 bits per record.
pub(crate) const FILTER_BYTES: usize = (BLOCK_RECORDS as usize) * 10 / 8;
const FILTER_BITS: u32 = (FILTER_BYTES * 8) as u32;
/// Bits set per key: near the optimum (`ln 2 * 10`) for 10 bits per key,
/// about 0.8% false positives when every record has its own key.
pub(crate) const PROBES: u32 = 7;

/// The bit positions of one subject, computed once and tested against any
/// number of blocks. The hash is xxHash3 (64 bits), whose output is fixed
/// by its specification: filters persist across restarts and versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubjectProbe {
    h1: u32,
    h2: u32,
}

impl SubjectProbe {
    /// The probe of records whose key is `subject`.
    pub fn of(subject: &[u8]) -> Self {
        let hash = twox_hash::XxHash3_64::oneshot(subject);
        Self {
            h1: hash as u32,
            // Odd, so the probe sequence never repeats a position early.
            h2: ((hash >> 32) as u32) | 1,
        }
    }

    /// Double hashing (Kirsch and Mitzenmacher): `PROBES` positions from
    /// two halves of one hash.
    fn bits(self) -> impl Iterator<Item = u32> {
        (0..PROBES).map(move |i| self.h1.wrapping_add(i.wrapping_mul(self.h2)) % FILTER_BITS)
    }
}

/// One block's filter.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct BlockFilter {
    pub(crate) bits: [u8; FILTER_BYTES],
    /// Bytes of the stored batches whose first offset lies in the block.
    pub(crate) stored_bytes: u32,
}

impl std::fmt::Debug for BlockFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockFilter")
            .field(
                "bits_set",
                &self.bits.iter().map(|b| b.count_ones()).sum::<u32>(),
            )
            .field("stored_bytes", &self.stored_bytes)
            .finish()
    }
}

impl Default for BlockFilter {
    fn default() -> Self {
        Self {
            bits: [0; FILTER_BYTES],
            stored_bytes: 0,
        }
    }
}

impl BlockFilter {
    /// Notes a record whose key has `probe`.
    pub(crate) fn insert(&mut self, probe: SubjectProbe) {
        for bit in probe.bits() {
            self.bits[(bit / 8) as usize] |= 1 << (bit % 8);
        }
    }

    /// False only if no record noted here has a key with `probe`.
    pub(crate) fn may_contain(&self, probe: SubjectProbe) -> bool {
        probe
            .bits()
            .all(|bit| self.bits[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noted_key_is_always_found() {
        let mut filter = BlockFilter::default();
        let keys: Vec<Vec<u8>> = (0..BLOCK_RECORDS)
            .map(|i| format!("device.{i}").into_bytes())
            .collect();
        for key in &keys {
            filter.insert(SubjectProbe::of(key));
        }
        assert!(keys.iter().all(|k| filter.may_contain(SubjectProbe::of(k))));
    }

    #[test]
    fn a_full_block_answers_about_one_percent_false_positives() {
        let mut filter = BlockFilter::default();
        for i in 0..BLOCK_RECORDS {
            filter.insert(SubjectProbe::of(format!("in.{i}").as_bytes()));
        }
        let false_positives = (0..100_000)
            .filter(|i| filter.may_contain(SubjectProbe::of(format!("out.{i}").as_bytes())))
            .count();
        // 0.82% expected; a wrong hash split or probe count lands far off.
        assert!(
            (300..1_500).contains(&false_positives),
            "{false_positives} false positives in 100,000"
        );
    }

    #[test]
    fn an_empty_block_holds_nothing() {
        let filter = BlockFilter::default();
        assert!(!filter.may_contain(SubjectProbe::of(b"any")));
        assert!(!filter.may_contain(SubjectProbe::of(b"")));
    }

    #[test]
    fn the_hash_is_the_persisted_one() {
        // Filters on disk were written with these positions: a change of
        // hash or probe sequence must come with a new file version.
        let bits: Vec<u32> = SubjectProbe::of(b"sensors.42").bits().collect();
        assert_eq!(bits, [2935, 5054, 7173, 9292, 5267, 7386, 9505]);
    }
}
