//! Kafka framing over TCP: request frames encoded once and reused with only
//! the correlation id patched, and response frames read with their size
//! checked before anything is allocated.

use std::fmt::Display;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::LoadError;

/// Largest response frame accepted: a fetch of `max_bytes` plus headers.
pub const RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Where the correlation id sits in a request frame: after the 4-byte size,
/// the 2-byte API key and the 2-byte API version.
const CORRELATION_AT: usize = 8;

/// A whole request frame (size prefix, header, body) for `body`.
pub fn request_frame<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &R,
) -> Result<Vec<u8>, LoadError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.extend_from_slice(&[0u8; 4]);
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_owned())))
        .encode(&mut buf, key.request_header_version(version))
        .map_err(encode_error(key))?;
    body.encode(&mut buf, version).map_err(encode_error(key))?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.to_vec())
}

/// Writes `correlation_id` into a frame made by [`request_frame`].
pub fn patch_correlation(frame: &mut [u8], correlation_id: i32) {
    frame[CORRELATION_AT..CORRELATION_AT + 4].copy_from_slice(&correlation_id.to_be_bytes());
}

/// Reads one response frame into `buf` (reused between calls) and returns
/// the frame without its size prefix.
pub async fn read_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut BytesMut,
) -> Result<Bytes, LoadError> {
    let size = stream
        .read_i32()
        .await
        .map_err(|e| LoadError::io("read response size", e))?;
    let size_ok = usize::try_from(size)
        .ok()
        .filter(|s| (4..=RESPONSE_BYTES_MAX).contains(s));
    let Some(size) = size_ok else {
        return Err(LoadError::FrameSize {
            size: i64::from(size),
            max: RESPONSE_BYTES_MAX,
        });
    };
    buf.clear();
    buf.resize(size, 0);
    stream
        .read_exact(&mut buf[..])
        .await
        .map_err(|e| LoadError::io("read response body", e))?;
    Ok(buf.split().freeze())
}

/// Decodes a response frame: its correlation id and body.
pub fn decode_response<R: Decodable>(
    key: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<(i32, R), LoadError> {
    let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))
        .map_err(decode_error(key))?;
    let body = R::decode(&mut frame, version).map_err(decode_error(key))?;
    Ok((header.correlation_id, body))
}

/// The API's name for messages.
pub fn api_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        _ => "request",
    }
}

fn encode_error<E: Display>(key: ApiKey) -> impl Fn(E) -> LoadError {
    move |e| LoadError::Encode {
        api: api_name(key),
        detail: e.to_string(),
    }
}

fn decode_error<E: Display>(key: ApiKey) -> impl Fn(E) -> LoadError {
    move |e| LoadError::Decode {
        api: api_name(key),
        detail: e.to_string(),
    }
}
