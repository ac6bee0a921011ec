//! Kafka's zig-zag varints (as in protobuf), the encoding of every
//! variable-length field inside a v2 record.

/// Longest encoding of an `i64`: 64 bits at 7 per byte.
const BYTES_MAX: usize = 10;

/// Appends `value` as a zig-zag varint.
pub fn put(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// The varint at the front of `bytes` and its length in bytes; `None` if
/// `bytes` ends inside it or it is longer than ten bytes.
#[inline]
pub fn get(bytes: &[u8]) -> Option<(i64, usize)> {
    // Most varints of a record (short lengths, a header count, deltas
    // within a batch) fit in one or two bytes: read without a loop.
    let unzigzag = |zigzag: u64| (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
    match *bytes {
        [first, ..] if first < 0x80 => Some((unzigzag(u64::from(first)), 1)),
        [first, second, ..] if second < 0x80 => Some((
            unzigzag(u64::from(first & 0x7f) | u64::from(second) << 7),
            2,
        )),
        _ => get_long(bytes),
    }
}

fn get_long(bytes: &[u8]) -> Option<(i64, usize)> {
    let mut zigzag: u64 = 0;
    for (index, byte) in bytes.iter().take(BYTES_MAX).enumerate() {
        zigzag |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return Some(((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64), index + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_at_the_edges() {
        for value in [
            0,
            1,
            -1,
            63,
            -64,
            64,
            -65,
            8191,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            put(&mut out, value);
            assert_eq!(get(&out), Some((value, out.len())), "{value}");
        }
    }

    #[test]
    fn known_encodings_match_kafka() {
        let encoded = |value| {
            let mut out = Vec::new();
            put(&mut out, value);
            out
        };
        assert_eq!(encoded(0), [0x00]);
        assert_eq!(encoded(-1), [0x01]);
        assert_eq!(encoded(1), [0x02]);
        assert_eq!(encoded(64), [0x80, 0x01]);
    }

    proptest::proptest! {
        /// The short paths read what the loop reads, for any bytes.
        #[test]
        fn short_varints_read_as_the_loop_reads(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12)) {
            proptest::prop_assert_eq!(get(&bytes), get_long(&bytes));
        }
    }

    #[test]
    fn cut_and_overlong_varints_are_refused() {
        assert_eq!(get(&[]), None);
        assert_eq!(get(&[0x80, 0x80]), None);
        assert_eq!(get(&[0xff; 11]), None);
    }
}
