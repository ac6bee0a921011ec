//! The one list of the Kafka APIs herald serves: one row per API, with its
//! advertised versions (and the first version actually served, where they
//! differ), its request type, the layout its body is guarded with, and the
//! call of its handler. Decoding, dispatch, ApiVersions and the tests all
//! read this list, so they cannot drift apart.
//!
//! Adding an API: a handler file under `handlers/` (its `handle` and the
//! `layout` of its request body) and one row below. The tests then check that the
//! row's versions are within what `kafka-protocol` decodes, that the guard
//! walks exactly the bytes of every version, and that the handler answers
//! every version.
//!
//! A row's handler is an expression over `call` (the request's [`Call`])
//! and `request` (the decoded body) that evaluates to the connection's
//! [`Outcome`]; most rows answer with `call.respond(&response)`.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, Message};

use crate::codec::guard::Schema;
use crate::codec::{encode_response, Spliced};
use crate::handlers::*;

/// One API: the row of the registry.
#[derive(Debug, Clone, Copy)]
pub struct ApiRow {
    /// The API.
    pub key: ApiKey,
    /// Lowest advertised version.
    pub min: i16,
    /// Highest advertised version.
    pub max: i16,
    /// Lowest version decoded and answered; below it (and at or above
    /// `min`) requests are refused by closing the connection, as Kafka 4
    /// refuses Produce v0-v2.
    pub served_min: i16,
    /// The body layout the guard walks before `kafka-protocol` decodes.
    pub(crate) schema: &'static Schema,
    /// The versions `kafka-protocol`'s request type decodes.
    pub request_versions: (i16, i16),
}

impl ApiRow {
    /// True if requests at `version` are decoded and answered.
    pub fn serves(&self, version: i16) -> bool {
        (self.served_min.max(self.min)..=self.max).contains(&version)
    }
}

/// What a handler knows of the request it answers.
pub struct Call<'a> {
    /// The server's shared state.
    pub ctx: &'a crate::handlers::Context,
    /// The API.
    pub key: ApiKey,
    /// The request's version (and so the response's).
    pub version: i16,
    /// The request's header.
    pub header: &'a RequestHeader,
    /// The connection's client: its listener, address and principal.
    pub session: &'a crate::session::Session,
    /// What the quotas decided as the frame was read.
    pub quota: crate::quota::Verdict,
    /// A produce's place under the flow-control limit, if the gate is on.
    pub flow: Option<crate::flow_gate::FlowTicket>,
}

impl Call<'_> {
    /// Answers with `body`.
    pub fn respond<R: Encodable>(&self, body: &R) -> Outcome {
        self.respond_spliced(body, &[])
    }

    /// Answers with `body`, whose record fields are sent from `splice`
    /// without being copied into the encoded message.
    pub fn respond_spliced<R: Encodable>(&self, body: &R, splice: &[Spliced]) -> Outcome {
        respond(
            self.key,
            self.version,
            self.header.correlation_id,
            body,
            splice,
        )
    }

    /// True if the client may do `operation` on group `name`.
    pub fn group_allowed(&self, operation: herald_auth::Operation, name: &str) -> bool {
        crate::handlers::group_allowed(self.ctx, self.session, operation, name)
    }

    /// The client id of the request's header ("" when absent).
    pub fn client_id(&self) -> String {
        self.header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default()
    }
}

/// GROUP_AUTHORIZATION_FAILED, for a request refused as a whole.
fn group_denied() -> i16 {
    crate::error_code::code(kafka_protocol::ResponseError::GroupAuthorizationFailed)
}

/// Encodes a response frame; a failure (a handler bug) closes the
/// connection, since the client would otherwise wait forever.
pub(crate) fn respond<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
    splice: &[Spliced],
) -> Outcome {
    match encode_response(key, version, correlation_id, body, splice) {
        Ok(frame) => Outcome::Respond(frame),
        Err(e) => {
            tracing::error!(error = %e, "response encoding failed");
            Outcome::Close(e.to_string())
        }
    }
}

/// `kafka-protocol` reports errors as `anyhow::Error`; they become text at
/// this boundary so anyhow stays out of the library's API.
fn typed<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, String> {
    T::decode(buf, version).map_err(|e| e.to_string())
}

macro_rules! registry {
    ($(
        $api:ident($request:ty), versions $min:literal ..= $max:literal $(, served from $served:literal)?,
            schema $handler_module:ident,
            |$call:ident, $body:ident| $handler:expr;
    )*) => {
        /// A decoded request of a served API.
        #[derive(Debug, Clone)]
        pub enum RequestBody {
            $(
                #[doc = stringify!($api)]
                $api($request),
            )*
        }

        /// Every API herald answers, in the order ApiVersions lists them.
        pub const APIS: &[ApiRow] = &[
            $(
                ApiRow {
                    key: ApiKey::$api,
                    min: $min,
                    max: $max,
                    served_min: registry!(@served $min $(, $served)?),
                    schema: &$handler_module::layout::SCHEMA,
                    request_versions: (
                        <$request as Message>::VERSIONS.min,
                        <$request as Message>::VERSIONS.max,
                    ),
                },
            )*
        ];

        /// Decodes the body of a request of `key` (a served API, its body
        /// already walked by the guard).
        pub(crate) fn decode_body(
            key: ApiKey,
            version: i16,
            buf: &mut Bytes,
        ) -> Result<RequestBody, String> {
            match key {
                $( ApiKey::$api => Ok(RequestBody::$api(typed(buf, version)?)), )*
                other => Err(format!("{other:?} has no decoder")),
            }
        }

        /// Answers a decoded request with its API's handler.
        pub(crate) async fn dispatch(call: Call<'_>, body: RequestBody) -> Outcome {
            match body {
                $(
                    RequestBody::$api($body) => {
                        let $call = &call;
                        $handler
                    }
                )*
            }
        }

        #[cfg(test)]
        /// A request of `key` with default fields, encoded at `version`,
        /// for tests of APIs that need no populated arrays.
        pub(crate) fn encode_default(key: ApiKey, version: i16, buf: &mut bytes::BytesMut) {
            match key {
                $(
                    ApiKey::$api => <$request>::default()
                        .encode(buf, version)
                        .expect("a default request encodes"),
                )*
                other => panic!("{other:?} is not served"),
            }
        }
    };
    (@served $min:literal) => { $min };
    (@served $min:literal, $served:literal) => { $served };
}

// Minimums follow Apache Kafka 4.3.1, whose ranges these match or stay
// inside, except where `kafka-protocol` stops earlier (ListOffsets 10
// instead of 11, OffsetCommit and OffsetFetch 9 instead of 10, with topic
// ids).
registry! {
    // Produce v0-v2 (message formats 0 and 1) are advertised but refused,
    // as Kafka 4 does (KIP-896): librdkafka up to 2.11 only keeps gzip,
    // snappy and lz4 enabled when the broker lists Produce v0.
    Produce(ProduceRequest), versions 0..=13, served from 3, schema produce,
        |call, request| match produce::handle(call, request).await {
            Some(response) => call.respond(&response),
            None => Outcome::NoResponse,
        };
    Fetch(FetchRequest), versions 4..=18, schema fetch,
        |call, request| {
            let (response, records) = fetch::handle(call.ctx, call.session, request, call.version, &call.client_id()).await;
            call.respond_spliced(&response, &records)
        };
    ListOffsets(ListOffsetsRequest), versions 1..=10, schema list_offsets,
        |call, request| call.respond(&list_offsets::handle(call.ctx, call.session, request, call.version).await);
    Metadata(MetadataRequest), versions 0..=13, schema metadata,
        |call, request| call.respond(&metadata::handle(call.ctx, call.session, request, call.version));
    ApiVersions(ApiVersionsRequest), versions 0..=4, schema api_versions,
        |call, request| call.respond(&api_versions::handle(&request, call.version));
    CreateTopics(CreateTopicsRequest), versions 2..=7, schema create_topics,
        |call, request| call.respond(&create_topics::handle(call.ctx, call.session, request, call.version, call.client_id()).await);
    DeleteTopics(DeleteTopicsRequest), versions 1..=6, schema delete_topics,
        |call, request| call.respond(&delete_topics::handle(call.ctx, call.session, request, call.version, call.client_id()).await);
    DeleteRecords(DeleteRecordsRequest), versions 0..=2, schema delete_records,
        |call, request| call.respond(&delete_records::handle(call.ctx, call.session, request, call.version).await);
    InitProducerId(InitProducerIdRequest), versions 0..=5, schema init_producer_id,
        |call, request| call.respond(&init_producer_id::handle(call.ctx, call.session, request, call.version).await);
    DescribeConfigs(DescribeConfigsRequest), versions 1..=4, schema describe_configs,
        |call, request| call.respond(&describe_configs::handle(call.ctx, call.session, request, call.version));
    AlterConfigs(AlterConfigsRequest), versions 0..=2, schema alter_configs,
        |call, request| call.respond(&alter_configs::handle(call.ctx, call.session, request, call.version).await);
    CreatePartitions(CreatePartitionsRequest), versions 0..=3, schema create_partitions,
        |call, request| call.respond(&create_partitions::handle(call.ctx, call.session, request, call.version, call.client_id()).await);
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest), versions 0..=1, schema incremental_alter_configs,
        |call, request| call.respond(&incremental_alter_configs::handle(call.ctx, call.session, request, call.version).await);
    DescribeLogDirs(DescribeLogDirsRequest), versions 1..=4, schema describe_log_dirs,
        |call, request| call.respond(&describe_log_dirs::handle(call.ctx, call.session, request, call.version));
    DescribeCluster(DescribeClusterRequest), versions 0..=2, schema describe_cluster,
        |call, request| call.respond(&describe_cluster::handle(call.ctx, call.session, request, call.version));
    AlterPartitionReassignments(AlterPartitionReassignmentsRequest), versions 0..=1, schema alter_partition_reassignments,
        |call, request| call.respond(&alter_partition_reassignments::handle(call.ctx, call.session, request, call.version).await);
    ListPartitionReassignments(ListPartitionReassignmentsRequest), versions 0..=0, schema list_partition_reassignments,
        |call, request| call.respond(&list_partition_reassignments::handle(call.ctx, call.session, request, call.version));
    DescribeQuorum(DescribeQuorumRequest), versions 0..=2, schema describe_quorum,
        |call, request| call.respond(&describe_quorum::handle(call.ctx, call.session, request, call.version));
    AddRaftVoter(AddRaftVoterRequest), versions 0..=0, schema add_raft_voter,
        |call, request| call.respond(&add_raft_voter::handle(call.ctx, call.session, request, call.version).await);
    RemoveRaftVoter(RemoveRaftVoterRequest), versions 0..=0, schema remove_raft_voter,
        |call, request| call.respond(&remove_raft_voter::handle(call.ctx, call.session, request, call.version).await);
    // The classic consumer-group protocol.
    FindCoordinator(FindCoordinatorRequest), versions 0..=6, schema find_coordinator,
        |call, request| call.respond(&find_coordinator::handle(call.ctx, call.session, request, call.version));
    JoinGroup(JoinGroupRequest), versions 0..=9, schema join_group,
        |call, request| {
            if !call.group_allowed(herald_auth::Operation::Read, &request.group_id.0) {
                return call.respond(&JoinGroupResponse::default()
                    .with_error_code(group_denied())
                    .with_generation_id(-1));
            }
            let client_id = call.client_id();
            call.respond(&join_group::handle(call.ctx, request, call.version, client_id, call.session.peer()).await)
        };
    SyncGroup(SyncGroupRequest), versions 0..=5, schema sync_group,
        |call, request| if call.group_allowed(herald_auth::Operation::Read, &request.group_id.0) {
            call.respond(&sync_group::handle(call.ctx, request, call.version).await)
        } else {
            call.respond(&SyncGroupResponse::default().with_error_code(group_denied()))
        };
    Heartbeat(HeartbeatRequest), versions 0..=4, schema heartbeat,
        |call, request| if call.group_allowed(herald_auth::Operation::Read, &request.group_id.0) {
            call.respond(&heartbeat::handle(call.ctx, request, call.version).await)
        } else {
            call.respond(&HeartbeatResponse::default().with_error_code(group_denied()))
        };
    LeaveGroup(LeaveGroupRequest), versions 0..=5, schema leave_group,
        |call, request| if call.group_allowed(herald_auth::Operation::Read, &request.group_id.0) {
            call.respond(&leave_group::handle(call.ctx, request, call.version).await)
        } else {
            call.respond(&LeaveGroupResponse::default().with_error_code(group_denied()))
        };
    OffsetCommit(OffsetCommitRequest), versions 2..=9, schema offset_commit,
        |call, request| call.respond(&offset_commit::handle(call.ctx, call.session, request, call.version).await);
    OffsetFetch(OffsetFetchRequest), versions 1..=9, schema offset_fetch,
        |call, request| call.respond(&offset_fetch::handle(call.ctx, call.session, request, call.version).await);
    ListGroups(ListGroupsRequest), versions 0..=5, schema list_groups,
        |call, request| call.respond(&list_groups::handle(call.ctx, call.session, request, call.version).await);
    DescribeGroups(DescribeGroupsRequest), versions 0..=6, schema describe_groups,
        |call, request| call.respond(&describe_groups::handle(call.ctx, call.session, request, call.version).await);
    DeleteGroups(DeleteGroupsRequest), versions 0..=2, schema delete_groups,
        |call, request| call.respond(&delete_groups::handle(call.ctx, call.session, request, call.version).await);
    OffsetDelete(OffsetDeleteRequest), versions 0..=0, schema offset_delete,
        |call, request| if call.group_allowed(herald_auth::Operation::Delete, &request.group_id.0) {
            call.respond(&offset_delete::handle(call.ctx, call.session, request, call.version).await)
        } else {
            call.respond(&OffsetDeleteResponse::default().with_error_code(group_denied()))
        };
    // SASL: version 0 of SaslHandshake (raw tokens after it) is advertised,
    // as Kafka does, but refused.
    SaslHandshake(SaslHandshakeRequest), versions 0..=1, served from 1, schema sasl_handshake,
        |call, request| call.respond(&sasl_handshake::handle(call.session, request));
    SaslAuthenticate(SaslAuthenticateRequest), versions 0..=2, schema sasl_authenticate,
        |call, request| call.respond(&sasl_authenticate::handle(call.ctx, call.session, request).await);
    // ACLs and credentials.
    CreateAcls(CreateAclsRequest), versions 1..=3, schema create_acls,
        |call, request| call.respond(&create_acls::handle(call.ctx, call.session, request).await);
    DescribeAcls(DescribeAclsRequest), versions 1..=3, schema describe_acls,
        |call, request| call.respond(&describe_acls::handle(call.ctx, call.session, request));
    DeleteAcls(DeleteAclsRequest), versions 1..=3, schema delete_acls,
        |call, request| call.respond(&delete_acls::handle(call.ctx, call.session, request).await);
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest), versions 0..=0, schema describe_user_scram_credentials,
        |call, request| call.respond(&describe_user_scram_credentials::handle(call.ctx, call.session, request));
    AlterUserScramCredentials(AlterUserScramCredentialsRequest), versions 0..=0, schema alter_user_scram_credentials,
        |call, request| call.respond(&alter_user_scram_credentials::handle(call.ctx, call.session, request).await);
    // Client quotas and tenant SLAs.
    DescribeClientQuotas(DescribeClientQuotasRequest), versions 0..=1, schema describe_client_quotas,
        |call, request| call.respond(&describe_client_quotas::handle(call.ctx, call.session, request));
    AlterClientQuotas(AlterClientQuotasRequest), versions 0..=1, schema alter_client_quotas,
        |call, request| call.respond(&alter_client_quotas::handle(call.ctx, call.session, request).await);
}

/// The row of an API key, if herald serves that API.
pub fn row(api_key: i16) -> Option<&'static ApiRow> {
    APIS.iter().find(|r| r.key as i16 == api_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_has_one_row() {
        for (i, a) in APIS.iter().enumerate() {
            assert!(
                APIS[i + 1..].iter().all(|b| b.key != a.key),
                "{:?} has two rows",
                a.key
            );
        }
    }

    #[test]
    fn every_served_version_is_decodable_by_kafka_protocol() {
        for row in APIS {
            let (min, max) = row.request_versions;
            // Below `served_min` a version is advertised but refused (it
            // may or may not decode: SaslHandshake v0 does).
            for v in row.served_min.max(row.min)..=row.max {
                assert!(row.serves(v), "{:?} v{v}", row.key);
                assert!((min..=max).contains(&v), "{:?} v{v}", row.key);
            }
        }
    }

    #[test]
    fn transaction_apis_are_not_advertised() {
        for key in [
            ApiKey::EndTxn,
            ApiKey::AddPartitionsToTxn,
            ApiKey::TxnOffsetCommit,
            ApiKey::ConsumerGroupHeartbeat,
        ] {
            assert!(row(key as i16).is_none());
        }
    }

    #[test]
    fn every_classic_group_api_is_advertised_with_kafka_minimums() {
        for (key, min) in [
            (ApiKey::FindCoordinator, 0),
            (ApiKey::JoinGroup, 0),
            (ApiKey::SyncGroup, 0),
            (ApiKey::Heartbeat, 0),
            (ApiKey::LeaveGroup, 0),
            (ApiKey::OffsetCommit, 2),
            (ApiKey::OffsetFetch, 1),
            (ApiKey::ListGroups, 0),
            (ApiKey::DescribeGroups, 0),
            (ApiKey::DeleteGroups, 0),
            (ApiKey::OffsetDelete, 0),
        ] {
            let row = row(key as i16).expect("advertised");
            assert_eq!(row.min, min, "{key:?}");
        }
    }
}
