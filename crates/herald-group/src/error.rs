//! Kafka error codes the coordinator answers with.
//!
//! The coordinator speaks in Kafka's own error vocabulary because every answer
//! it gives ends up in a Kafka response; the handler writes
//! [`ErrorCode::code`] into the response field unchanged.

/// A Kafka protocol error code, as the group APIs use them.
///
/// The discriminants are the numeric codes of the Kafka protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum ErrorCode {
    /// No error.
    None = 0,
    /// An unexpected failure on the broker.
    UnknownServerError = -1,
    /// The commit's metadata string is longer than the configured maximum.
    OffsetMetadataTooLarge = 12,
    /// The coordinator is still loading its state.
    CoordinatorLoadInProgress = 14,
    /// The coordinator cannot serve the group right now (it is being deleted,
    /// or its state could not be persisted); the client retries.
    CoordinatorNotAvailable = 15,
    /// This broker does not coordinate the group (in a cluster, another
    /// node does); the client looks the coordinator up again.
    NotCoordinator = 16,
    /// The generation id in the request is not the group's current one.
    IllegalGeneration = 22,
    /// The member's protocol type or protocols do not match the group's.
    InconsistentGroupProtocol = 23,
    /// The group id is empty where one is required.
    InvalidGroupId = 24,
    /// The member id is not known to the group.
    UnknownMemberId = 25,
    /// The session timeout is outside the configured bounds.
    InvalidSessionTimeout = 26,
    /// The group is rebalancing; the member must rejoin.
    RebalanceInProgress = 27,
    /// The group still has members, so it cannot be deleted.
    NonEmptyGroup = 68,
    /// The group does not exist.
    GroupIdNotFound = 69,
    /// A new member must rejoin with the member id given in the response.
    MemberIdRequired = 79,
    /// The group already has the maximum number of members.
    GroupMaxSizeReached = 81,
    /// Another member with the same group.instance.id has replaced this one.
    FencedInstanceId = 82,
    /// A member of the group is subscribed to the topic whose offsets were to
    /// be deleted.
    GroupSubscribedToTopic = 86,
    /// A commit for the partition is still being persisted.
    UnstableOffsetCommit = 88,
}

impl ErrorCode {
    /// The numeric code written into Kafka responses.
    pub fn code(self) -> i16 {
        self as i16
    }

    /// True for [`ErrorCode::None`].
    pub fn is_ok(self) -> bool {
        self == ErrorCode::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_kafka_protocol() {
        assert_eq!(ErrorCode::None.code(), 0);
        assert_eq!(ErrorCode::IllegalGeneration.code(), 22);
        assert_eq!(ErrorCode::UnknownMemberId.code(), 25);
        assert_eq!(ErrorCode::RebalanceInProgress.code(), 27);
        assert_eq!(ErrorCode::MemberIdRequired.code(), 79);
        assert_eq!(ErrorCode::FencedInstanceId.code(), 82);
        assert_eq!(ErrorCode::GroupSubscribedToTopic.code(), 86);
    }
}
