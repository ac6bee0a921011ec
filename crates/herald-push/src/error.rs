//! Why the engine refused a request; the session maps these to its
//! protocol's error codes in one place.

use herald_broker::{ProduceError, StorageError};

use crate::token::TokenError;

/// Why a subscribe (or a resume) was refused. The session goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscribeError {
    /// No such topic.
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    /// The ACLs do not let the client read the topic (or use the named
    /// subscription's group).
    #[error("not authorized: {0}")]
    NotAuthorized(String),
    /// The session holds as many subscriptions as it may.
    #[error("the session already holds {max} subscriptions, the most it may")]
    TooManySubscriptions {
        /// The limit.
        max: usize,
    },
    /// Subscribing faster than allowed.
    #[error("subscribing faster than {per_second} per second; retry later")]
    SubscribeRate {
        /// The rate allowed.
        per_second: u32,
    },
    /// The session already has a live subscription with this id.
    #[error("subscription id {0} is already in use on this session")]
    DuplicateId(u64),
    /// The token does not verify.
    #[error(transparent)]
    InvalidToken(#[from] TokenError),
    /// The token is for another topic, selector or id, or its topic was
    /// deleted since (possibly created again).
    #[error("stale resume token: {0}")]
    StaleToken(String),
    /// Something in the request is not valid (a partition that does not
    /// exist, an internal topic).
    #[error("invalid subscribe request: {0}")]
    Invalid(String),
    /// The partition's storage failed a lookup the start needed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why an ack was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// No live subscription with this id.
    #[error("no subscription {0} on this session")]
    UnknownSubscription(u64),
    /// An offset not delivered yet, or a partition the topic lacks.
    #[error("offset {offset} of partition {partition} was not delivered to subscription {subscription_id}")]
    NotDelivered {
        /// The subscription.
        subscription_id: u64,
        /// The partition.
        partition: u32,
        /// The offset acknowledged.
        offset: u64,
    },
}

/// Why a publish was refused.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// No such topic (and it was not created automatically).
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    /// The ACLs do not let the client write to the topic.
    #[error("not authorized: {0}")]
    NotAuthorized(String),
    /// The partition named does not exist.
    #[error("topic {topic} has no partition {partition}")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: u32,
    },
    /// The record could not be encoded or stored.
    #[error(transparent)]
    Produce(#[from] ProduceError),
    /// The client's tenant is over an input rate: nothing was stored, and
    /// the client may retry after the refusal's delay.
    #[error("{}", .0.message)]
    OverRate(herald_flow::Refusal),
    /// The topic's tenant is at a cap (its stored bytes).
    #[error(transparent)]
    TenantCap(#[from] herald_broker::CapExceeded),
}
