//! Response encoding into a list of byte chunks. Record bytes read from the
//! log (`ReadSlice.bytes`) are not copied into the encoded message: when the
//! encoder writes a slice that is one of the registered record buffers, the
//! buffer itself (a reference-counted view of the segment) becomes a chunk
//! of the response, and the socket writer sends it as is: with
//! `sendfile(2)` from the segment file when the read says where its bytes
//! lie ([`Spliced::region`]), so the kernel moves them without a copy
//! through user memory.

use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use herald_broker::storage::FileRegion;
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use super::frame::LENGTH_PREFIX_BYTES;

/// Record buffers smaller than this are copied: a separate chunk would cost
/// more than the copy.
const SPLICE_BYTES_MIN: usize = 4096;

/// A record buffer the encoder sends without copying, and where its bytes
/// lie in a segment file if they can be sent from there.
#[derive(Debug, Clone)]
pub struct Spliced {
    /// The bytes, as read from the log.
    pub bytes: Bytes,
    /// Their place in the segment file.
    pub region: Option<FileRegion>,
}

/// One piece of an encoded response.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// Bytes in memory.
    Memory(Bytes),
    /// Record bytes that can also be sent from their segment file.
    File(Bytes, FileRegion),
}

impl Chunk {
    /// The bytes of the chunk (in memory for both kinds).
    pub fn bytes(&self) -> &Bytes {
        match self {
            Chunk::Memory(bytes) | Chunk::File(bytes, _) => bytes,
        }
    }
}

/// An encoded response, size prefix included, as chunks to write in order.
#[derive(Debug, Clone, Default)]
pub struct ResponseFrame {
    chunks: Vec<Chunk>,
    len: usize,
}

impl ResponseFrame {
    /// The chunks, in order.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// Total bytes, size prefix included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All bytes in one buffer (tests and small responses).
    pub fn to_vec(&self) -> Vec<u8> {
        self.chunks
            .iter()
            .flat_map(|c| c.bytes().iter().copied())
            .collect()
    }
}

/// Why a response could not be encoded (a handler set a field the
/// negotiated version cannot carry: a bug, reported rather than sent).
#[derive(Debug, Clone, thiserror::Error)]
#[error("encoding {api_key:?} v{version} response: {reason}")]
pub struct EncodeError {
    /// The API.
    pub api_key: ApiKey,
    /// The version.
    pub version: i16,
    /// The encoder's message.
    pub reason: String,
}

/// Encodes header and body; `splice` lists record buffers to send without
/// copying.
pub fn encode_response<R: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
    splice: &[Spliced],
) -> Result<ResponseFrame, EncodeError> {
    let error = |reason: String| EncodeError {
        api_key,
        version,
        reason,
    };
    let mut buf = ChunkBuf {
        current: BytesMut::with_capacity(256),
        done: Vec::new(),
        done_len: 0,
        splice,
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, api_key.response_header_version(version))
        .map_err(|e| error(e.to_string()))?;
    body.encode(&mut buf, version)
        .map_err(|e| error(e.to_string()))?;
    buf.seal();
    let body_len = buf.done_len;
    let size =
        i32::try_from(body_len).map_err(|_| error(format!("{body_len} bytes is too large")))?;
    let mut chunks = Vec::with_capacity(buf.done.len() + 1);
    chunks.push(Chunk::Memory(Bytes::copy_from_slice(&size.to_be_bytes())));
    chunks.extend(buf.done);
    Ok(ResponseFrame {
        chunks,
        len: body_len + LENGTH_PREFIX_BYTES,
    })
}

/// A `BufMut` that appends to a growing buffer, except for registered
/// record buffers, which become chunks of their own.
struct ChunkBuf<'a> {
    current: BytesMut,
    done: Vec<Chunk>,
    done_len: usize,
    splice: &'a [Spliced],
}

impl ChunkBuf<'_> {
    fn seal(&mut self) {
        if !self.current.is_empty() {
            let chunk = self.current.split().freeze();
            self.done_len += chunk.len();
            self.done.push(Chunk::Memory(chunk));
        }
    }

    fn spliced(&self, src: &[u8]) -> Option<Chunk> {
        if src.len() < SPLICE_BYTES_MIN {
            return None;
        }
        let found = self
            .splice
            .iter()
            .find(|s| s.bytes.as_ptr() == src.as_ptr() && s.bytes.len() == src.len())?;
        Some(match &found.region {
            Some(region) if region.len() == found.bytes.len() => {
                Chunk::File(found.bytes.clone(), region.clone())
            }
            _ => Chunk::Memory(found.bytes.clone()),
        })
    }
}

// SAFETY: every method forwards to `BytesMut`, whose implementation upholds
// the `BufMut` contract; `put_slice` only adds whole initialised chunks.
unsafe impl BufMut for ChunkBuf<'_> {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut`, which is
        // `current`'s spare capacity.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.spliced(src) {
            Some(records) => {
                self.seal();
                self.done_len += records.bytes().len();
                self.done.push(records);
            }
            None => self.current.extend_from_slice(src),
        }
    }
}

impl ByteBufMut for ChunkBuf<'_> {
    fn offset(&self) -> usize {
        self.done_len + self.current.len()
    }

    // Gaps are only used when encoding record batches, never for the
    // response messages herald encodes; positions before the current chunk
    // are therefore never revisited.
    fn seek(&mut self, offset: usize) {
        let local = offset.saturating_sub(self.done_len);
        self.current.resize(local, 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        let start = r.start.saturating_sub(self.done_len);
        let end = r.end.saturating_sub(self.done_len);
        &mut self.current[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        FetchResponse, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Decodable, StrBytes};

    fn fetch_with(records: Bytes) -> FetchResponse {
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![PartitionData::default().with_records(Some(records))])])
    }

    #[test]
    fn large_records_are_spliced_without_copy_and_decode_back() {
        let records = Bytes::from(vec![7u8; 10_000]);
        let body = fetch_with(records.clone());
        let spliced = Spliced {
            bytes: records.clone(),
            region: None,
        };
        let frame = encode_response(ApiKey::Fetch, 11, 42, &body, &[spliced]).expect("encode");
        assert!(
            frame
                .chunks()
                .iter()
                .any(|c| c.bytes().as_ptr() == records.as_ptr()),
            "records chunk is the original buffer"
        );
        let bytes = frame.to_vec();
        assert_eq!(bytes.len(), frame.len());
        assert_eq!(
            i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize,
            bytes.len() - 4
        );
        let mut rest = Bytes::from(bytes).slice(8..);
        let decoded = FetchResponse::decode(&mut rest, 11).expect("decode");
        assert_eq!(
            decoded.responses[0].partitions[0].records.as_ref(),
            Some(&records)
        );
    }

    #[test]
    fn small_records_are_copied_in_place() {
        let records = Bytes::from(vec![1u8; 100]);
        let frame = encode_response(
            ApiKey::Fetch,
            12,
            1,
            &fetch_with(records.clone()),
            &[Spliced {
                bytes: records,
                region: None,
            }],
        )
        .expect("encode");
        assert_eq!(frame.chunks().len(), 2);
    }
}
