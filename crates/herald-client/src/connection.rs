//! One connection to a broker: connect (with TLS and a SASL login when
//! asked), check with ApiVersions that the broker serves every request
//! version this client sends, then request and response, one at a time, each under a timeout. A call that is cancelled
//! or fails midway leaves the stream out of step; the next call reconnects.

use std::collections::HashMap;
use std::time::Duration;

use crate::error::{ClientError, Context as _};
use crate::security::{ConnectOptions, SaslLogin, Stream};
use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long connecting, and any one request without a long-poll, may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest response frame accepted (a fetch is asked for far less).
const RESPONSE_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Client id sent in every request header.
const CLIENT_ID: &str = "herald-cli";

/// The request versions this client sends.
pub mod versions {
    /// ApiVersions.
    pub const API_VERSIONS: i16 = 3;
    /// Metadata (topic names, not ids).
    pub const METADATA: i16 = 12;
    /// CreateTopics.
    pub const CREATE_TOPICS: i16 = 7;
    /// DeleteTopics.
    pub const DELETE_TOPICS: i16 = 6;
    /// DescribeConfigs.
    pub const DESCRIBE_CONFIGS: i16 = 4;
    /// IncrementalAlterConfigs.
    pub const INCREMENTAL_ALTER_CONFIGS: i16 = 1;
    /// CreatePartitions.
    pub const CREATE_PARTITIONS: i16 = 3;
    /// Produce.
    pub const PRODUCE: i16 = 9;
    /// Fetch (topic names, not ids).
    pub const FETCH: i16 = 12;
    /// ListOffsets.
    pub const LIST_OFFSETS: i16 = 7;
    /// JoinGroup (member id required on the first join).
    pub const JOIN_GROUP: i16 = 9;
    /// SyncGroup (with protocol type and name).
    pub const SYNC_GROUP: i16 = 5;
    /// Heartbeat.
    pub const HEARTBEAT: i16 = 4;
    /// LeaveGroup (a list of members).
    pub const LEAVE_GROUP: i16 = 5;
    /// OffsetCommit.
    pub const OFFSET_COMMIT: i16 = 8;
    /// OffsetFetch (a list of groups).
    pub const OFFSET_FETCH: i16 = 8;
    /// ListGroups (with a state filter).
    pub const LIST_GROUPS: i16 = 4;
    /// DescribeGroups.
    pub const DESCRIBE_GROUPS: i16 = 5;
    /// DeleteGroups.
    pub const DELETE_GROUPS: i16 = 2;
    /// SaslHandshake (the exchange in SaslAuthenticate requests).
    pub const SASL_HANDSHAKE: i16 = 1;
    /// SaslAuthenticate.
    pub const SASL_AUTHENTICATE: i16 = 2;
    /// CreateAcls.
    pub const CREATE_ACLS: i16 = 3;
    /// DescribeAcls.
    pub const DESCRIBE_ACLS: i16 = 3;
    /// DeleteAcls.
    pub const DELETE_ACLS: i16 = 3;
    /// DescribeUserScramCredentials.
    pub const DESCRIBE_USER_SCRAM_CREDENTIALS: i16 = 0;
    /// AlterUserScramCredentials.
    pub const ALTER_USER_SCRAM_CREDENTIALS: i16 = 0;
    /// DescribeCluster.
    pub const DESCRIBE_CLUSTER: i16 = 1;
    /// AddRaftVoter.
    pub const ADD_RAFT_VOTER: i16 = 0;
    /// RemoveRaftVoter.
    pub const REMOVE_RAFT_VOTER: i16 = 0;
    /// AlterPartitionReassignments.
    pub const ALTER_PARTITION_REASSIGNMENTS: i16 = 1;
    /// ListPartitionReassignments.
    pub const LIST_PARTITION_REASSIGNMENTS: i16 = 0;
    /// InitProducerId (with the current id and epoch, KIP-360).
    pub const INIT_PRODUCER_ID: i16 = 4;
}

/// A connection to one broker.
#[derive(Debug)]
pub struct Connection {
    stream: Stream,
    address: String,
    /// How it was opened, to open it again the same way.
    options: ConnectOptions,
    correlation_id: i32,
    /// Broker's advertised range per API key.
    ranges: HashMap<i16, (i16, i16)>,
    /// A request was sent whose response was not read (its call was
    /// cancelled or failed): the stream is out of step and must be replaced.
    out_of_step: bool,
}

impl Connection {
    /// Connects to `address` (HOST:PORT) in plaintext and reads the
    /// broker's API versions.
    pub async fn connect(address: &str) -> Result<Self, ClientError> {
        Self::connect_with(address, &ConnectOptions::default()).await
    }

    /// Connects to `address` (HOST:PORT), with TLS and a SASL login as
    /// `options` say, and reads the broker's API versions.
    pub async fn connect_with(
        address: &str,
        options: &ConnectOptions,
    ) -> Result<Self, ClientError> {
        let stream = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(address))
            .await
            .map_err(|_| ClientError::Unreachable {
                address: address.to_owned(),
                source: Some(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "timed out connecting",
                )),
            })?
            .map_err(|source| ClientError::Unreachable {
                address: address.to_owned(),
                source: Some(source),
            })?;
        // Request/response: latency matters more than packet count.
        let _ = stream.set_nodelay(true);
        let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let stream = tokio::time::timeout(IO_TIMEOUT, Stream::open(stream, host, options))
            .await
            .map_err(|_| {
                ClientError::refused(format!("TLS handshake with {address} timed out"))
            })??;
        let mut connection = Self {
            stream,
            address: address.to_owned(),
            options: options.clone(),
            correlation_id: 0,
            ranges: HashMap::new(),
            out_of_step: false,
        };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("herald-cli"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response: ApiVersionsResponse = connection
            .call(request, versions::API_VERSIONS, IO_TIMEOUT)
            .await?;
        if response.error_code != 0 {
            return Err(ClientError::refused(format!(
                "broker {address} refused ApiVersions: {}",
                crate::errors::describe(response.error_code)
            )));
        }
        connection.ranges = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        if let Some(login) = &options.sasl {
            connection.authenticate(login).await?;
        }
        Ok(connection)
    }

    /// The connection's byte stream, past ApiVersions and the login: for a
    /// load generator that writes its own pre-encoded requests (the broker
    /// does not check correlation ids for order).
    pub fn into_stream(self) -> Stream {
        self.stream
    }

    /// SaslHandshake, then the SASL exchange in SaslAuthenticate requests.
    async fn authenticate(&mut self, login: &SaslLogin) -> Result<(), ClientError> {
        let handshake: SaslHandshakeResponse = self
            .call(
                SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_string(login.mechanism.clone())),
                versions::SASL_HANDSHAKE,
                IO_TIMEOUT,
            )
            .await?;
        if handshake.error_code != 0 {
            let offered: Vec<String> = handshake.mechanisms.iter().map(|m| m.to_string()).collect();
            return Err(ClientError::refused(format!(
                "broker {} refused SASL mechanism {}: {} (it offers {})",
                self.address,
                login.mechanism,
                crate::errors::describe(handshake.error_code),
                offered.join(", ")
            )));
        }
        let steps = match herald_auth::ScramMechanism::from_name(&login.mechanism) {
            Some(mechanism) => {
                let mut scram = herald_auth::ScramClient::with_random_nonce(
                    mechanism,
                    &login.user,
                    &login.password,
                )
                .map_err(|e| ClientError::refused(e.to_string()))?;
                let first = self.sasl_step(scram.first()).await?;
                let last = scram
                    .last(&first)
                    .map_err(|e| ClientError::refused(format!("SCRAM: {e}")))?;
                let proof = self.sasl_step(last).await?;
                if !scram.verify_server(&proof) {
                    return Err(ClientError::refused(format!(
                        "broker {} did not prove it knows the SCRAM credential",
                        self.address
                    )));
                }
                2
            }
            None if login.mechanism == "PLAIN" => {
                let message = format!("\0{}\0{}", login.user, login.password);
                self.sasl_step(message.into_bytes()).await?;
                1
            }
            None => {
                return Err(ClientError::refused(format!(
                    "SASL mechanism {} is not supported (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN)",
                    login.mechanism
                )))
            }
        };
        tracing::debug!(user = %login.user, steps, "authenticated");
        Ok(())
    }

    /// One SaslAuthenticate round trip; the broker's answer bytes.
    async fn sasl_step(&mut self, bytes: Vec<u8>) -> Result<bytes::Bytes, ClientError> {
        let response: SaslAuthenticateResponse = self
            .call(
                SaslAuthenticateRequest::default().with_auth_bytes(bytes.into()),
                versions::SASL_AUTHENTICATE,
                IO_TIMEOUT,
            )
            .await?;
        if response.error_code != 0 {
            return Err(ClientError::Broker {
                context: format!("SASL authentication with {}", self.address),
                code: response.error_code,
                reason: response
                    .error_message
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| crate::errors::describe(response.error_code)),
            });
        }
        Ok(response.auth_bytes)
    }

    /// Fails unless the broker serves `api` at `version`.
    fn check_served(&self, api: i16, version: i16) -> Result<(), ClientError> {
        if api == ApiKey::ApiVersions as i16 {
            return Ok(());
        }
        match self.ranges.get(&api) {
            Some((min, max)) if (*min..=*max).contains(&version) => Ok(()),
            _ => Err(ClientError::refused(format!(
                "broker {} does not serve {} v{version}",
                self.address,
                api_name(api)
            ))),
        }
    }

    /// Sends `request` at `version` and reads its response within `timeout`.
    pub async fn call<R: Request>(
        &mut self,
        request: R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        self.check_served(R::KEY, version)?;
        let what = api_name(R::KEY);
        let address = self.address.clone();
        if self.out_of_step {
            // A late response of the abandoned request would be read as this
            // one's: start over on a new connection.
            let options = self.options.clone();
            *self = Box::pin(Self::connect_with(&address, &options)).await?;
        }
        tokio::time::timeout(timeout, self.round_trip(request, version))
            .await
            .map_err(|_| ClientError::TimedOut {
                address: address.clone(),
                what: what.clone(),
                timeout,
            })?
            .with_context(|| format!("{what} request to {address}"))
    }

    async fn round_trip<R: Request>(
        &mut self,
        request: R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        self.out_of_step = true;
        let mut buf = BytesMut::with_capacity(256);
        buf.extend_from_slice(&[0; 4]);
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)))
            .encode(&mut buf, R::header_version(version))
            .context("encoding the request header")?;
        request
            .encode(&mut buf, version)
            .context("encoding the request")?;
        let size = i32::try_from(buf.len() - 4).context("request too large")?;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&buf).await?;

        let size = self.stream.read_i32().await?;
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s <= RESPONSE_BYTES_MAX)
            .ok_or_else(|| ClientError::refused(format!("response size {size} out of range")))?;
        let mut body = BytesMut::zeroed(size);
        self.stream.read_exact(&mut body).await?;
        let mut body = body.freeze();
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .context("decoding the response header")?;
        if header.correlation_id != self.correlation_id {
            return Err(ClientError::refused(format!(
                "response correlation id {} does not match request {}",
                header.correlation_id, self.correlation_id
            )));
        }
        let response = R::Response::decode(&mut body, version).context("decoding the response")?;
        if body.has_remaining() {
            tracing::debug!(left = body.remaining(), "response has trailing bytes");
        }
        self.out_of_step = false;
        Ok(response)
    }
}

/// Kafka's name of an API key.
fn api_name(api: i16) -> String {
    ApiKey::try_from(api)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|_| format!("API {api}"))
}
