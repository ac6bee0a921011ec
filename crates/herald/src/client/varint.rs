//! Kafka's zig-zag varints (as in protobuf), used inside records.

use anyhow::{bail, Context as _};

/// Appends `value` as a zig-zag varint.
pub fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// Reads a zig-zag varint of at most 10 bytes from the front of `input`.
pub fn get_varint(input: &mut &[u8]) -> anyhow::Result<i64> {
    let mut zigzag: u64 = 0;
    for index in 0..10 {
        let (&byte, rest) = input.split_first().context("varint cut short")?;
        *input = rest;
        zigzag |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return Ok(((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64));
        }
    }
    bail!("varint longer than 10 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        for value in [
            0,
            1,
            -1,
            63,
            -64,
            64,
            300,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut input = out.as_slice();
            assert_eq!(get_varint(&mut input).expect("decode"), value);
            assert!(input.is_empty());
        }
    }

    #[test]
    fn small_values_take_one_byte_as_kafka_encodes_them() {
        let mut out = Vec::new();
        put_varint(&mut out, -1);
        put_varint(&mut out, 1);
        assert_eq!(out, [0x01, 0x02]);
    }

    #[test]
    fn truncated_varint_is_an_error() {
        let mut input: &[u8] = &[0x80, 0x80];
        assert!(get_varint(&mut input).is_err());
    }
}
