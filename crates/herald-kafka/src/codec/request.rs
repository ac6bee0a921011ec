//! Request decoding: fixed header fields first (checked by hand, so a short
//! or unknown frame never reaches `kafka-protocol`), then the guard walk of
//! the body, then the typed decode.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;

use super::frame::REQUEST_BYTES_MIN;
use super::guard::{self, GuardError};
use super::schemas::schema;
use crate::versions::{advertised, served};

/// A decoded request of a supported API.
#[derive(Debug, Clone)]
pub enum RequestBody {
    /// ApiVersions.
    ApiVersions(ApiVersionsRequest),
    /// Metadata.
    Metadata(MetadataRequest),
    /// Produce.
    Produce(ProduceRequest),
    /// Fetch.
    Fetch(FetchRequest),
    /// ListOffsets.
    ListOffsets(ListOffsetsRequest),
    /// InitProducerId.
    InitProducerId(InitProducerIdRequest),
    /// CreateTopics.
    CreateTopics(CreateTopicsRequest),
    /// DeleteTopics.
    DeleteTopics(DeleteTopicsRequest),
    /// CreatePartitions.
    CreatePartitions(CreatePartitionsRequest),
    /// DescribeConfigs.
    DescribeConfigs(DescribeConfigsRequest),
    /// AlterConfigs.
    AlterConfigs(AlterConfigsRequest),
    /// IncrementalAlterConfigs.
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    /// DescribeCluster.
    DescribeCluster(DescribeClusterRequest),
    /// FindCoordinator.
    FindCoordinator(FindCoordinatorRequest),
    /// JoinGroup.
    JoinGroup(JoinGroupRequest),
    /// SyncGroup.
    SyncGroup(SyncGroupRequest),
    /// Heartbeat.
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup.
    LeaveGroup(LeaveGroupRequest),
    /// OffsetCommit.
    OffsetCommit(OffsetCommitRequest),
    /// OffsetFetch.
    OffsetFetch(OffsetFetchRequest),
    /// ListGroups.
    ListGroups(ListGroupsRequest),
    /// DescribeGroups.
    DescribeGroups(DescribeGroupsRequest),
    /// DeleteGroups.
    DeleteGroups(DeleteGroupsRequest),
    /// OffsetDelete.
    OffsetDelete(OffsetDeleteRequest),
}

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
    let range = advertised(api_key).ok_or(DecodeError::UnknownApi {
        api_key,
        correlation_id,
    })?;
    let key = range.key;
    if !served(&range, version) {
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
    let layout = schema(key).ok_or_else(|| malformed("no schema".into()))?;
    guard::check(layout, version, &buf).map_err(|source| DecodeError::Guard {
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

fn decode_body(key: ApiKey, version: i16, buf: &mut Bytes) -> Result<RequestBody, String> {
    Ok(match key {
        ApiKey::ApiVersions => RequestBody::ApiVersions(typed(buf, version)?),
        ApiKey::Metadata => RequestBody::Metadata(typed(buf, version)?),
        ApiKey::Produce => RequestBody::Produce(typed(buf, version)?),
        ApiKey::Fetch => RequestBody::Fetch(typed(buf, version)?),
        ApiKey::ListOffsets => RequestBody::ListOffsets(typed(buf, version)?),
        ApiKey::InitProducerId => RequestBody::InitProducerId(typed(buf, version)?),
        ApiKey::CreateTopics => RequestBody::CreateTopics(typed(buf, version)?),
        ApiKey::DeleteTopics => RequestBody::DeleteTopics(typed(buf, version)?),
        ApiKey::CreatePartitions => RequestBody::CreatePartitions(typed(buf, version)?),
        ApiKey::DescribeConfigs => RequestBody::DescribeConfigs(typed(buf, version)?),
        ApiKey::AlterConfigs => RequestBody::AlterConfigs(typed(buf, version)?),
        ApiKey::IncrementalAlterConfigs => {
            RequestBody::IncrementalAlterConfigs(typed(buf, version)?)
        }
        ApiKey::DescribeCluster => RequestBody::DescribeCluster(typed(buf, version)?),
        ApiKey::FindCoordinator => RequestBody::FindCoordinator(typed(buf, version)?),
        ApiKey::JoinGroup => RequestBody::JoinGroup(typed(buf, version)?),
        ApiKey::SyncGroup => RequestBody::SyncGroup(typed(buf, version)?),
        ApiKey::Heartbeat => RequestBody::Heartbeat(typed(buf, version)?),
        ApiKey::LeaveGroup => RequestBody::LeaveGroup(typed(buf, version)?),
        ApiKey::OffsetCommit => RequestBody::OffsetCommit(typed(buf, version)?),
        ApiKey::OffsetFetch => RequestBody::OffsetFetch(typed(buf, version)?),
        ApiKey::ListGroups => RequestBody::ListGroups(typed(buf, version)?),
        ApiKey::DescribeGroups => RequestBody::DescribeGroups(typed(buf, version)?),
        ApiKey::DeleteGroups => RequestBody::DeleteGroups(typed(buf, version)?),
        ApiKey::OffsetDelete => RequestBody::OffsetDelete(typed(buf, version)?),
        other => return Err(format!("{other:?} has no decoder")),
    })
}

/// `kafka-protocol` reports errors as `anyhow::Error`; they become text at
/// this boundary so anyhow stays out of the library's API.
fn typed<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, String> {
    T::decode(buf, version).map_err(|e| e.to_string())
}
