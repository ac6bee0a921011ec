//! The compression codecs of a batch's records section: gzip, snappy (the
//! xerial framing Java and librdkafka write, or one raw block), lz4 (frame
//! format) and zstd, in pure Rust. Decompression writes into a buffer the
//! caller keeps, so a reader of many batches reuses one allocation, and is
//! bounded: a batch that inflates past [`DECOMPRESSED_BYTES_MAX`] (a
//! compression bomb) is refused, never read to the end.

use std::io::{Read, Write};

/// Largest decompressed records section accepted.
pub const DECOMPRESSED_BYTES_MAX: usize = 256 * 1024 * 1024;

/// The codec of a batch, from the low three bits of its attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Records stored as they are.
    None,
    /// gzip (deflate).
    Gzip,
    /// snappy.
    Snappy,
    /// lz4, frame format.
    Lz4,
    /// zstd.
    Zstd,
}

impl Compression {
    /// The codec with Kafka's id `id` (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn from_id(id: u8) -> Result<Self, CompressionError> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(CompressionError::UnknownCodec(other)),
        })
    }

    /// Kafka's id of this codec.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// Why records could not be compressed or decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    /// The attributes name a codec Kafka does not define.
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
    /// The compressed data is damaged or cut short.
    #[error("corrupt {codec:?} data: {reason}")]
    Corrupt {
        /// The codec.
        codec: Compression,
        /// What the decoder said.
        reason: String,
    },
    /// The records inflate past [`DECOMPRESSED_BYTES_MAX`].
    #[error("records inflate past {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
}

fn corrupt(codec: Compression, reason: impl std::fmt::Display) -> CompressionError {
    CompressionError::Corrupt {
        codec,
        reason: reason.to_string(),
    }
}

/// Decompresses `compressed` with `codec` into `out` (cleared first).
pub fn decompress_into(
    codec: Compression,
    compressed: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    out.clear();
    match codec {
        Compression::None => {
            check_size(compressed.len())?;
            out.extend_from_slice(compressed);
            Ok(())
        }
        Compression::Gzip => {
            read_bounded(codec, flate2::read::MultiGzDecoder::new(compressed), out)
        }
        Compression::Snappy => snappy(compressed, out),
        // Each block the frame decoder inflates is copied on once (a plain
        // read would also zero the space it reads into).
        Compression::Lz4 => read_until(
            codec,
            lz4_flex::frame::FrameDecoder::new(compressed),
            out,
            |_| false,
        ),
        Compression::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(compressed)
                .map_err(|e| corrupt(codec, e))?;
            read_bounded(codec, decoder, out)
        }
    }
}

/// Decompresses the start of `compressed` into `out` (cleared first), a
/// block at a time, until `enough` (shown everything inflated so far after
/// each block) says it suffices, or the end: a reader that needs only the
/// first records of a batch does not inflate the rest. Snappy is inflated
/// whole.
pub fn decompress_prefix_into(
    codec: Compression,
    compressed: &[u8],
    out: &mut Vec<u8>,
    enough: impl FnMut(&[u8]) -> bool,
) -> Result<(), CompressionError> {
    out.clear();
    match codec {
        Compression::None | Compression::Snappy => decompress_into(codec, compressed, out),
        Compression::Gzip => read_until(
            codec,
            std::io::BufReader::new(flate2::read::MultiGzDecoder::new(compressed)),
            out,
            enough,
        ),
        // The frame decoder holds one block inflated: it is handed on as is.
        Compression::Lz4 => read_until(
            codec,
            lz4_flex::frame::FrameDecoder::new(compressed),
            out,
            enough,
        ),
        Compression::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(compressed)
                .map_err(|e| corrupt(codec, e))?;
            read_until(codec, std::io::BufReader::new(decoder), out, enough)
        }
    }
}

fn read_until(
    codec: Compression,
    mut reader: impl std::io::BufRead,
    out: &mut Vec<u8>,
    mut enough: impl FnMut(&[u8]) -> bool,
) -> Result<(), CompressionError> {
    loop {
        let piece = match reader.fill_buf() {
            Ok(piece) => piece,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(corrupt(codec, e)),
        };
        if piece.is_empty() {
            return Ok(());
        }
        let len = piece.len();
        out.extend_from_slice(piece);
        reader.consume(len);
        check_size(out.len())?;
        if enough(out) {
            return Ok(());
        }
    }
}

fn check_size(len: usize) -> Result<(), CompressionError> {
    if len > DECOMPRESSED_BYTES_MAX {
        return Err(CompressionError::TooLarge {
            limit: DECOMPRESSED_BYTES_MAX,
        });
    }
    Ok(())
}

fn read_bounded(
    codec: Compression,
    reader: impl Read,
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    reader
        .take(DECOMPRESSED_BYTES_MAX as u64 + 1)
        .read_to_end(out)
        .map_err(|e| corrupt(codec, e))?;
    check_size(out.len())
}

/// Kafka's snappy is usually the xerial framing written by snappy-java (and
/// librdkafka for compatibility): a 16-byte header, then blocks each
/// prefixed by a 4-byte length. Some clients send one raw snappy block.
fn snappy(data: &[u8], out: &mut Vec<u8>) -> Result<(), CompressionError> {
    let mut decoder = snap::raw::Decoder::new();
    let Some(mut rest) = data
        .strip_prefix(XERIAL_MAGIC)
        .and_then(|_| data.get(XERIAL_HEADER_BYTES..))
    else {
        return snappy_block(&mut decoder, data, out);
    };
    while !rest.is_empty() {
        let len = rest
            .get(..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| corrupt(Compression::Snappy, "block length cut short"))?;
        let block = rest
            .get(4..4 + len)
            .ok_or_else(|| corrupt(Compression::Snappy, "block cut short"))?;
        snappy_block(&mut decoder, block, out)?;
        rest = &rest[4 + len..];
    }
    Ok(())
}

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;
/// xerial's version and minimum compatible version, as snappy-java writes them.
const XERIAL_VERSIONS: [u8; 8] = [0, 0, 0, 1, 0, 0, 0, 1];
/// Uncompressed bytes per xerial block, as snappy-java uses.
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// Appends the decompressed `block` to `out`.
fn snappy_block(
    decoder: &mut snap::raw::Decoder,
    block: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let len = snap::raw::decompress_len(block).map_err(|e| corrupt(Compression::Snappy, e))?;
    check_size(out.len() + len)?;
    let start = out.len();
    out.resize(start + len, 0);
    let written = decoder
        .decompress(block, &mut out[start..])
        .map_err(|e| corrupt(Compression::Snappy, e))?;
    out.truncate(start + written);
    Ok(())
}

/// Compresses `records` with `codec`, appending to `out`: the encoders of
/// the batch builder (xerial framing for snappy, as Java clients write it).
pub fn compress_into(
    codec: Compression,
    records: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let failed = |e: std::io::Error| corrupt(codec, e);
    match codec {
        Compression::None => out.extend_from_slice(records),
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
            encoder.write_all(records).map_err(failed)?;
            encoder.finish().map_err(failed)?;
        }
        Compression::Snappy => {
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&XERIAL_VERSIONS);
            let mut encoder = snap::raw::Encoder::new();
            for chunk in records.chunks(XERIAL_BLOCK_BYTES) {
                let block = encoder.compress_vec(chunk).map_err(|e| corrupt(codec, e))?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
        }
        Compression::Lz4 => {
            // Blocks of 64 KiB, as Kafka's clients write them: a reader
            // after one record inflates only the blocks up to it.
            let info =
                lz4_flex::frame::FrameInfo::new().block_size(lz4_flex::frame::BlockSize::Max64KB);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            encoder.write_all(records).map_err(failed)?;
            encoder.finish().map_err(|e| corrupt(codec, e))?;
        }
        Compression::Zstd => {
            let compressed = ruzstd::encoding::compress_to_vec(
                records,
                ruzstd::encoding::CompressionLevel::Fastest,
            );
            out.extend_from_slice(&compressed);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn every_codec_round_trips_into_a_reused_buffer() {
        let records = b"hello compressed records ".repeat(5_000);
        let mut out = Vec::new();
        for codec in ALL {
            let mut compressed = Vec::new();
            compress_into(codec, &records, &mut compressed).expect("compress");
            out.extend_from_slice(b"stale");
            decompress_into(codec, &compressed, &mut out).expect("decompress");
            assert_eq!(out, records, "{codec:?}");
        }
    }

    #[test]
    fn a_raw_snappy_block_is_read_as_well_as_xerial_framing() {
        let payload = b"hello snappy records".repeat(10);
        let block = snap::raw::Encoder::new()
            .compress_vec(&payload)
            .expect("compress");
        let mut out = Vec::new();
        decompress_into(Compression::Snappy, &block, &mut out).expect("raw block");
        assert_eq!(out, payload);
    }

    #[test]
    fn garbage_is_corrupt_and_unknown_ids_are_refused() {
        let mut out = Vec::new();
        for codec in [
            Compression::Gzip,
            Compression::Lz4,
            Compression::Zstd,
            Compression::Snappy,
        ] {
            let result = decompress_into(codec, b"\x00\x01garbage", &mut out);
            assert!(
                matches!(result, Err(CompressionError::Corrupt { .. })),
                "{codec:?}: {result:?}"
            );
        }
        assert_eq!(
            Compression::from_id(7),
            Err(CompressionError::UnknownCodec(7))
        );
        assert_eq!(Compression::from_id(3).map(Compression::id), Ok(3));
    }

    #[test]
    fn a_compression_bomb_is_refused_before_it_is_read_to_the_end() {
        // 300 MiB of zeros compress to a few hundred KiB.
        let zeros = vec![0u8; DECOMPRESSED_BYTES_MAX + 44 * 1024 * 1024];
        let mut compressed = Vec::new();
        compress_into(Compression::Lz4, &zeros, &mut compressed).expect("compress");
        drop(zeros);
        let mut out = Vec::new();
        assert_eq!(
            decompress_into(Compression::Lz4, &compressed, &mut out),
            Err(CompressionError::TooLarge {
                limit: DECOMPRESSED_BYTES_MAX
            })
        );
    }
}
