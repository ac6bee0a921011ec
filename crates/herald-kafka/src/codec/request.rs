//! Request decoding: fixed header fields first (checked by hand, so a short
//! or unknown frame never reaches `kafka-protocol`), then the guard walk of
//! the body, then the typed decode.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;

use super::frame::REQUEST_BYTES_MIN;
use super::guard::{self, GuardError};
use crate::registry::{self, decode_body};

pub use crate::registry::RequestBody;

/// A request with its header.
#[derive(Debug, Clone)]
pub struct Request {
    /// The API.
    pub api_key: ApiKey,
    /// The decoded header.
    pub header: RequestHeader,
    /// The decoded body.
    pub body: RequestBody,
}

impl Request {
    /// Version of the request (and of its response).
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// Correlation id to echo in the response.
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the fixed header fields.
    #[error("frame of {len} bytes is too short for a request header")]
    TooShort {
        /// Frame length.
        len: usize,
    },
    /// herald does not implement this API.
    #[error("unsupported API key {api_key}")]
    UnknownApi {
        /// The key sent.
        api_key: i16,
        /// Correlation id of the request.
        correlation_id: i32,
    },
    /// The API is implemented, but not at this version.
    #[error("unsupported version {version} of {api_key:?}")]
    UnsupportedVersion {
        /// The API.
        api_key: ApiKey,
        /// The version sent.
        version: i16,
        /// Correlation id of the request.
        correlation_id: i32,
    },
    /// The body failed the structural guard (truncated, hostile count).
    #[error("malformed {api_key:?} v{version} request: {source}")]
    Guard {
        /// The API.
        api_key: ApiKey,
        /// The version.
        version: i16,
        /// What the guard found.
        #[source]
        source: GuardError,
    },
    /// The header or body could not be decoded.
    #[error("malformed {api_key:?} v{version} request: {reason}")]
    Malformed {
        /// The API.
        api_key: ApiKey,
        /// The version.
        version: i16,
        /// The decoder's message.
        reason: String,
    },
}

fn be_i16(frame: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([frame[at], frame[at + 1]])
}

/// The fixed fields every request starts with, read without decoding the
/// rest: (api key, api version, correlation id).
pub fn peek_header(frame: &[u8]) -> Option<(i16, i16, i32)> {
    if frame.len() < REQUEST_BYTES_MIN {
        return None;
    }
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    Some((be_i16(frame, 0), be_i16(frame, 2), correlation_id))
}

/// Decodes one request frame (without its size prefix). Record bytes in
/// Produce requests stay slices of `frame`.
pub fn decode_request(frame: Bytes) -> Result<Request, DecodeError> {
    let (api_key, version, correlation_id) =
        peek_header(&frame).ok_or(DecodeError::TooShort { len: frame.len() })?;
    let row = registry::row(api_key).ok_or(DecodeError::UnknownApi {
        api_key,
        correlation_id,
    })?;
    let key = row.key;
    if !row.serves(version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key: key,
            version,
            correlation_id,
        });
    }
    let malformed = |reason: String| DecodeError::Malformed {
        api_key: key,
        version,
        reason,
    };
    let mut buf = frame;
    let header = RequestHeader::decode(&mut buf, key.request_header_version(version))
        .map_err(|e| malformed(format!("header: {e}")))?;
    guard::check(row.schema, version, &buf).map_err(|source| DecodeError::Guard {
        api_key: key,
        version,
        source,
    })?;
    // The guard makes the decoder safe; catching a panic anyway keeps a
    // decoder bug in one request from taking the connection task down.
    let body = catch_unwind(AssertUnwindSafe(|| decode_body(key, version, &mut buf)))
        .map_err(|_| malformed("decoder panicked".into()))?
        .map_err(malformed)?;
    Ok(Request {
        api_key: key,
        header,
        body,
    })
}
