//! Decompressing the records section of a stored batch, for the broker's
//! offset lookups by timestamp and for clients that print records (the CLI).
//! Neither the produce nor the fetch path uses this: batches are stored and
//! served as produced. ListOffsets needs it because the log answers a
//! timestamp exactly for uncompressed batches but can only point at the
//! containing batch of a compressed one, while Kafka clients expect the
//! exact record.

use std::borrow::Cow;
use std::io::Read;

use herald_log::batch::{self, BatchHeader, HEADER_BYTES};

/// Largest decompressed record data looked at; a batch that inflates beyond
/// this (a compression bomb, or a huge batch) keeps the batch-level answer.
const DECOMPRESSED_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Offset and timestamp of the first record in `batch` whose timestamp is
/// at least `target`, or `None` if none is, or the records cannot be read.
pub(crate) fn first_at_or_after(batch: &[u8], target: i64) -> Option<(u64, i64)> {
    let header = BatchHeader::parse(batch)?;
    let data = decompress(header.compression(), batch.get(HEADER_BYTES..)?)?;
    let (offset, timestamp) = batch::first_record_in_records(&header, &data, target)?;
    Some((u64::try_from(offset).ok()?, timestamp))
}

/// The records section of a batch (the bytes after its header), decompressed
/// with `codec` (the id in the batch attributes: 0 none, 1 gzip, 2 snappy,
/// 3 lz4, 4 zstd). `None` if the codec is unknown, the data is corrupt, or it
/// inflates beyond 256 MiB (a compression bomb).
pub fn decompress(codec: u8, compressed: &[u8]) -> Option<Cow<'_, [u8]>> {
    let reader: Box<dyn Read + '_> = match codec {
        0 => return Some(Cow::Borrowed(compressed)),
        1 => Box::new(flate2::read::MultiGzDecoder::new(compressed)),
        2 => return snappy(compressed).map(Cow::Owned),
        3 => Box::new(lz4_flex::frame::FrameDecoder::new(compressed)),
        4 => Box::new(ruzstd::decoding::StreamingDecoder::new(compressed).ok()?),
        _ => return None,
    };
    read_bounded(reader).map(Cow::Owned)
}

fn read_bounded(reader: impl Read) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    reader
        .take(DECOMPRESSED_BYTES_MAX + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= DECOMPRESSED_BYTES_MAX).then_some(out)
}

/// Kafka's snappy is usually the xerial framing written by snappy-java
/// (and librdkafka for compatibility): an 16-byte header, then blocks each
/// prefixed by a 4-byte length. Some clients send one raw snappy block.
fn snappy(data: &[u8]) -> Option<Vec<u8>> {
    const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
    const XERIAL_HEADER_BYTES: usize = 16;
    let mut decoder = snap::raw::Decoder::new();
    let Some(mut rest) = data
        .strip_prefix(XERIAL_MAGIC)
        .and_then(|_| data.get(XERIAL_HEADER_BYTES..))
    else {
        return decompress_block(&mut decoder, data);
    };
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let block = rest.get(4..4 + len)?;
        out.extend(decompress_block(&mut decoder, block)?);
        if out.len() as u64 > DECOMPRESSED_BYTES_MAX {
            return None;
        }
        rest = &rest[4 + len..];
    }
    Some(out)
}

fn decompress_block(decoder: &mut snap::raw::Decoder, block: &[u8]) -> Option<Vec<u8>> {
    let len = snap::raw::decompress_len(block).ok()?;
    if len as u64 > DECOMPRESSED_BYTES_MAX {
        return None;
    }
    decoder.decompress_vec(block).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_log::batch::testing;
    use std::io::Write;

    /// Rewrites an uncompressed test batch with its records gzip-compressed.
    fn gzipped(batch: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&batch[HEADER_BYTES..]).expect("compress");
        let mut out = batch[..HEADER_BYTES].to_vec();
        out.extend(encoder.finish().expect("finish"));
        out[22] |= 1; // attributes low byte: gzip
        let len = (out.len() - 12) as i32;
        out[8..12].copy_from_slice(&len.to_be_bytes());
        out
    }

    #[test]
    fn finds_exact_record_in_uncompressed_and_gzip_batches() {
        let plain = testing::batch(10, b"v", 1_000);
        assert_eq!(first_at_or_after(&plain, 1_004), Some((4, 1_004)));
        let gz = gzipped(&plain);
        assert_eq!(first_at_or_after(&gz, 1_004), Some((4, 1_004)));
        assert_eq!(first_at_or_after(&gz, 5_000), None);
    }

    #[test]
    fn xerial_snappy_blocks_are_concatenated() {
        let payload = b"hello snappy records".repeat(10);
        let block = snap::raw::Encoder::new()
            .compress_vec(&payload)
            .expect("compress");
        let mut framed = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        framed.extend((block.len() as u32).to_be_bytes());
        framed.extend(&block);
        assert_eq!(snappy(&framed), Some(payload.clone()));
        assert_eq!(snappy(&block), Some(payload));
    }

    #[test]
    fn garbage_compressed_data_gives_no_answer() {
        let mut b = testing::batch(2, b"v", 0);
        b[22] |= 4; // claims zstd
        assert_eq!(first_at_or_after(&b, 0), None);
    }
}
