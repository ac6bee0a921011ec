//! Approximate distinct counts: HyperLogLog (Flajolet et al. 2007) with
//! 2^11 registers of one byte (2 KiB, a standard error of about 2.3%),
//! the small-range correction by linear counting, over xxHash3 of the
//! value's bytes. Two sketches merge by taking each register's maximum, so
//! buckets and partitions add up without counting anything twice.

use twox_hash::XxHash3_64;

/// Bits of the hash that pick a register.
const INDEX_BITS: u32 = 11;
/// Number of registers.
const REGISTERS: usize = 1 << INDEX_BITS;

/// One sketch.
#[derive(Clone, PartialEq, Eq)]
pub struct Hll {
    registers: Box<[u8; REGISTERS]>,
}

impl std::fmt::Debug for Hll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hll")
            .field("estimate", &self.estimate())
            .finish()
    }
}

impl Default for Hll {
    fn default() -> Self {
        Self {
            registers: Box::new([0; REGISTERS]),
        }
    }
}

impl Hll {
    /// The hash a sketch counts `value` by: computed once, it can be
    /// counted into many sketches with [`Hll::insert_hash`].
    pub fn hash(value: &[u8]) -> u64 {
        // XXH3 of inputs of one to three bytes leaves its top bits alike
        // for alike inputs ("c30" and "c49" share eleven): mixed again
        // with MurmurHash3's finalizer before the bits are split.
        fmix64(XxHash3_64::oneshot(value))
    }

    /// Counts `value` in; answers whether the estimate may have changed
    /// (a register rose).
    pub fn insert(&mut self, value: &[u8]) -> bool {
        self.insert_hash(Self::hash(value))
    }

    /// Counts in the value whose [`Hll::hash`] is `hash`; answers whether
    /// the estimate may have changed.
    pub fn insert_hash(&mut self, hash: u64) -> bool {
        let index = (hash >> (64 - INDEX_BITS)) as usize;
        // The rank of the first 1 in the remaining bits (1-based); all
        // zeros rank past them.
        let rest = hash << INDEX_BITS;
        let rank = (rest.leading_zeros() + 1).min(64 - INDEX_BITS + 1) as u8;
        if rank > self.registers[index] {
            self.registers[index] = rank;
            true
        } else {
            false
        }
    }

    /// Adds everything `other` counted.
    pub fn merge(&mut self, other: &Hll) {
        for (mine, theirs) in self.registers.iter_mut().zip(other.registers.iter()) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// The estimated number of distinct values counted.
    pub fn estimate(&self) -> f64 {
        let m = REGISTERS as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let mut sum = 0.0;
        let mut zeros = 0usize;
        for &r in self.registers.iter() {
            sum += 2f64.powi(-i32::from(r));
            if r == 0 {
                zeros += 1;
            }
        }
        let raw = alpha * m * m / sum;
        if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        }
    }
}

/// MurmurHash3's 64-bit finalizer: every input bit reaches every output
/// bit.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_alike_values_count_apart() {
        let mut sketch = Hll::default();
        for i in 0..100 {
            sketch.insert(format!("c{i}").as_bytes());
        }
        assert!((sketch.estimate() - 100.0).abs() <= 3.0, "{sketch:?}");
    }

    #[test]
    fn estimates_stay_within_a_few_percent_and_merge_without_double_counting() {
        for n in [0u32, 1, 10, 1_000, 50_000, 300_000] {
            let mut sketch = Hll::default();
            for i in 0..n {
                sketch.insert(&i.to_be_bytes());
                // Repeats change nothing.
                sketch.insert(&i.to_be_bytes());
            }
            let estimate = sketch.estimate();
            let error = (estimate - f64::from(n)).abs() / f64::from(n.max(1));
            assert!(error < 0.07, "{n} values estimated {estimate:.0}");
        }
        let (mut a, mut b) = (Hll::default(), Hll::default());
        for i in 0..20_000u32 {
            a.insert(&i.to_be_bytes());
        }
        for i in 10_000..30_000u32 {
            b.insert(&i.to_be_bytes());
        }
        a.merge(&b);
        let estimate = a.estimate();
        assert!((estimate - 30_000.0).abs() / 30_000.0 < 0.07, "{estimate}");
    }
}
