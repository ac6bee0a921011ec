//! One handler per Kafka API (file named after it), and `handle_frame`,
//! which decodes a frame and hands it to the handler its row in
//! [`crate::registry`] names. Handlers turn wire messages into broker calls
//! and broker results into wire messages; error codes come from
//! [`crate::error_code`].

use std::sync::Arc;

use bytes::Bytes;
use herald_broker::{Broker, GroupCall, GroupReply};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::codec::{decode_request, DecodeError, ResponseFrame};
use crate::config::KafkaConfig;
use crate::frame_buffers::FrameBuffers;
use crate::registry::{self, Call};
use crate::session::Session;

/// Frames up to this size are read into recycled buffers; larger ones (rare,
/// up to the frame limit) are read the plain way.
const FRAME_BUFFER_MAX_BYTES: usize = 16 << 20;
/// Bytes of idle frame buffers the server keeps for reuse.
const FRAME_BUFFERS_RETAINED_BYTES: usize = 32 << 20;

pub mod add_raft_voter;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_quorum;
pub mod describe_user_scram_credentials;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub(crate) mod read_source;
pub mod remove_raft_voter;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
#[cfg(test)]
mod tests;

/// What handlers share: the broker core, the listener's settings, and the
/// shutdown signal (which cuts fetch long-polls short).
#[derive(Debug)]
pub struct Context {
    /// The broker core.
    pub broker: Arc<Broker>,
    /// Listener settings.
    pub config: KafkaConfig,
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// Server-wide budget of request bytes read and not yet answered.
    pub request_memory: Arc<Semaphore>,
    /// Recycled receive buffers for large frames.
    pub(crate) frame_buffers: Arc<FrameBuffers>,
    /// The limit on produce records in flight.
    pub flow: Arc<crate::flow_gate::FlowGate>,
}

impl Context {
    /// A context for `broker` and `config`.
    pub fn new(broker: Arc<Broker>, config: KafkaConfig) -> Self {
        // At least one frame of the largest size must fit, or such a
        // request would wait forever.
        let budget = config
            .max_request_bytes_in_flight
            .max(config.max_frame_bytes)
            .min(Semaphore::MAX_PERMITS);
        Self {
            broker,
            shutdown: CancellationToken::new(),
            request_memory: Arc::new(Semaphore::new(budget)),
            frame_buffers: Arc::new(FrameBuffers::new(
                FRAME_BUFFER_MAX_BYTES,
                FRAME_BUFFERS_RETAINED_BYTES,
            )),
            flow: Arc::new(crate::flow_gate::FlowGate::new(config.flow_control)),
            config,
        }
    }

    /// The same context bound to another shutdown signal.
    pub fn with_shutdown(mut self, shutdown: CancellationToken) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// The same context gated by `flow` (one its owner can reconfigure)
    /// instead of its own.
    pub fn with_flow(mut self, flow: Arc<crate::flow_gate::FlowGate>) -> Self {
        self.flow = flow;
        self
    }
}

/// What the connection does after a request.
#[derive(Debug)]
pub enum Outcome {
    /// Send this response.
    Respond(ResponseFrame),
    /// Send nothing (produce with acks=0).
    NoResponse,
    /// Close the connection (undecodable request, as Kafka does).
    Close(String),
}

/// Decodes one frame from `session`'s client and answers it with the
/// handler its API's row in [`crate::registry`] names. On a SASL listener,
/// a client that has not authenticated may send only ApiVersions,
/// SaslHandshake and SaslAuthenticate: anything else closes the
/// connection, as Kafka does.
pub async fn handle_frame(ctx: &Context, session: &Session, frame: Bytes) -> Outcome {
    let quota = crate::quota::admit_frame(ctx, session, &frame);
    let flow = match crate::quota::produce_client_id(&frame) {
        Some(_) => ctx.flow.admit().await,
        None => None,
    };
    handle_admitted(ctx, session, frame, quota, flow).await
}

/// [`handle_frame`] for a frame the quotas and the flow-control gate
/// already admitted as it was read.
pub async fn handle_admitted(
    ctx: &Context,
    session: &Session,
    frame: Bytes,
    quota: crate::quota::Verdict,
    flow: Option<crate::flow_gate::FlowTicket>,
) -> Outcome {
    match decode_request(frame) {
        Ok(request) => {
            let before_authentication = matches!(
                request.api_key,
                ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
            );
            if !before_authentication && !session.is_authenticated() {
                return Outcome::Close(format!(
                    "unexpected {:?} request before SASL authentication completed",
                    request.api_key
                ));
            }
            let call = Call {
                ctx,
                key: request.api_key,
                version: request.version(),
                header: &request.header,
                session,
                quota,
                flow,
            };
            tracing::trace!(key = ?call.key, version = call.version, correlation_id = call.header.correlation_id, client_id = ?call.header.client_id, "request");
            let client_id = request.header.client_id.as_deref().unwrap_or("");
            if !crate::quota::request_quota_applies(ctx, session, client_id) {
                return registry::dispatch(call, request.body).await;
            }
            // Kafka's request quota counts the time its threads spend on a
            // request; herald's handlers run as futures, so the time is
            // what their polls take (waits for the disk or a rebalance
            // excluded, as they do not hold a thread).
            let (outcome, spent) = poll_time(registry::dispatch(call, request.body)).await;
            crate::quota::charge_request_time(ctx, session, client_id, spent);
            outcome
        }
        Err(DecodeError::UnsupportedVersion {
            api_key: ApiKey::ApiVersions,
            correlation_id,
            version,
        }) => {
            tracing::debug!(version, "ApiVersions above our maximum; answering with v0");
            registry::respond(
                ApiKey::ApiVersions,
                0,
                correlation_id,
                &api_versions::unsupported_version(),
                &[],
            )
        }
        Err(e) => Outcome::Close(e.to_string()),
    }
}

/// Runs `future` to completion; answers its output and the time spent
/// inside its polls.
async fn poll_time<F: std::future::Future>(future: F) -> (F::Output, std::time::Duration) {
    let mut future = std::pin::pin!(future);
    let mut spent = std::time::Duration::ZERO;
    let output = std::future::poll_fn(|cx| {
        let started = std::time::Instant::now();
        let poll = future.as_mut().poll(cx);
        spent += started.elapsed();
        poll
    })
    .await;
    (output, spent)
}

/// Whether a group call may be held by the coordinator until a rebalance
/// ends (JoinGroup, SyncGroup), and so must give way to shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Answered as soon as the coordinator (and, for commits, the fsync)
    /// has done its work.
    Short,
    /// May be held; answered COORDINATOR_NOT_AVAILABLE at shutdown.
    UntilRebalance,
}

/// Submits `call` to the group coordinator and waits for its answer.
/// [`GroupReply::Unavailable`] when the coordinator is stopped, or, for a
/// held call, when the server shuts down.
pub(crate) async fn group_call(ctx: &Context, call: GroupCall, wait: Wait) -> GroupReply {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    ctx.broker
        .groups()
        .call(
            call,
            Box::new(move |reply| {
                // The connection may be gone; its answer is then dropped.
                let _ = sender.send(reply);
            }),
        )
        .await;
    match wait {
        Wait::Short => receiver.await.unwrap_or(GroupReply::Unavailable),
        Wait::UntilRebalance => tokio::select! {
            reply = receiver => reply.unwrap_or(GroupReply::Unavailable),
            _ = ctx.shutdown.cancelled() => GroupReply::Unavailable,
        },
    }
}

/// The error code for a reply that is not the answer asked for:
/// NOT_COORDINATOR when another node coordinates the group (the client
/// looks the coordinator up again), else COORDINATOR_NOT_AVAILABLE (the
/// coordinator stopped; the client retries). A reply of the wrong kind is
/// a bug, and logged.
pub(crate) fn unexpected_reply(api: ApiKey, reply: &GroupReply) -> i16 {
    match reply {
        GroupReply::NotCoordinator => herald_group::ErrorCode::NotCoordinator.code(),
        GroupReply::Unavailable => crate::error_code::group_unavailable(),
        other => {
            tracing::error!(
                ?api,
                reply = ?other,
                "group coordinator answered with the wrong kind of reply"
            );
            crate::error_code::group_unavailable()
        }
    }
}

/// Applies config `changes` to topic `name`: through the cluster's
/// metadata log on a cluster node, else on this broker.
pub(crate) async fn alter_topic_config(
    ctx: &Context,
    name: &str,
    changes: &[herald_broker::ConfigChange],
    replace_all: bool,
    validate_only: bool,
) -> Result<(), herald_broker::BrokerError> {
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        return cluster
            .alter_topic_config(&ctx.broker, name, changes, replace_all, validate_only)
            .await;
    }
    ctx.broker
        .alter_topic_config(name, changes, replace_all, validate_only)
}

/// A wire string from a Rust string.
pub(crate) fn wire_str(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Why an ACL request (CreateAcls, DescribeAcls, DeleteAcls) is refused
/// as a whole, if it is: SECURITY_DISABLED with authorization off (as
/// Kafka without an authorizer answers), CLUSTER_AUTHORIZATION_FAILED
/// without `operation` on the cluster.
pub(crate) fn acl_request_refusal(
    ctx: &Context,
    session: &Session,
    operation: herald_auth::Operation,
) -> Option<(kafka_protocol::ResponseError, &'static str)> {
    use kafka_protocol::ResponseError;
    if !ctx.broker.security().config().authorization {
        return Some((
            ResponseError::SecurityDisabled,
            "no authorizer is configured: set authorization = true in the [security] settings",
        ));
    }
    (!cluster_allowed(ctx, session, operation)).then_some((
        ResponseError::ClusterAuthorizationFailed,
        "not authorized to manage ACLs",
    ))
}

/// True if the client may do `operation` on the cluster.
pub(crate) fn cluster_allowed(
    ctx: &Context,
    session: &Session,
    operation: herald_auth::Operation,
) -> bool {
    allowed(
        ctx,
        session,
        operation,
        herald_auth::ResourceType::Cluster,
        herald_auth::acl::CLUSTER_NAME,
    )
}

/// True if the client may do `operation` on topic `name`.
pub(crate) fn topic_allowed(
    ctx: &Context,
    session: &Session,
    operation: herald_auth::Operation,
    name: &str,
) -> bool {
    allowed(
        ctx,
        session,
        operation,
        herald_auth::ResourceType::Topic,
        name,
    )
}

/// True if the client may do `operation` on group `name`.
pub(crate) fn group_allowed(
    ctx: &Context,
    session: &Session,
    operation: herald_auth::Operation,
    name: &str,
) -> bool {
    allowed(
        ctx,
        session,
        operation,
        herald_auth::ResourceType::Group,
        name,
    )
}

fn allowed(
    ctx: &Context,
    session: &Session,
    operation: herald_auth::Operation,
    resource_type: herald_auth::ResourceType,
    name: &str,
) -> bool {
    session.authorize(ctx.broker.security(), operation, resource_type, name)
}

/// Why AlterConfigs or IncrementalAlterConfigs refuses one resource, if it
/// does: ALTER_CONFIGS is needed on the topic, or on the cluster for the
/// broker's configs.
pub(crate) fn alter_configs_refusal(
    ctx: &Context,
    session: &Session,
    resource_type: i8,
    name: &str,
) -> Option<(i16, Option<String>)> {
    use herald_auth::Operation::AlterConfigs;
    use kafka_protocol::ResponseError;
    let (error, what) = match resource_type {
        describe_configs::RESOURCE_TOPIC if !topic_allowed(ctx, session, AlterConfigs, name) => {
            (ResponseError::TopicAuthorizationFailed, "this topic")
        }
        describe_configs::RESOURCE_BROKER if !cluster_allowed(ctx, session, AlterConfigs) => {
            (ResponseError::ClusterAuthorizationFailed, "the broker")
        }
        _ => return None,
    };
    Some((
        crate::error_code::code(error),
        Some(format!("not authorized to alter the configs of {what}")),
    ))
}
