//! The one place where broker-core errors become Kafka error codes.

use herald_broker::{BatchError, BrokerError, ProduceError, ProducerRefusal, StorageError};
use kafka_protocol::ResponseError;

/// No error.
pub const NONE: i16 = 0;

/// Code for a refused produce.
pub fn produce(e: &ProduceError) -> i16 {
    match e {
        ProduceError::InvalidBatch(BatchError::CrcMismatch { .. })
        | ProduceError::InvalidBatch(BatchError::TooShort { .. })
        | ProduceError::InvalidBatch(BatchError::LengthMismatch { .. }) => {
            ResponseError::CorruptMessage
        }
        ProduceError::InvalidBatch(BatchError::UnsupportedMagic { .. }) => {
            ResponseError::UnsupportedForMessageFormat
        }
        ProduceError::InvalidBatch(BatchError::RecordCount { .. })
        | ProduceError::InvalidBatch(BatchError::ControlBatch)
        | ProduceError::InvalidRecords(_)
        | ProduceError::Transactional
        | ProduceError::IdempotenceUnavailable => ResponseError::InvalidRecord,
        ProduceError::TooLarge { .. } => ResponseError::MessageTooLarge,
        ProduceError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        ProduceError::DuplicateSequence { .. } => ResponseError::DuplicateSequenceNumber,
        ProduceError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        ProduceError::UnknownProducerId { .. } => ResponseError::UnknownProducerId,
        ProduceError::Storage(e) => return storage(e),
    }
    .code()
}

/// Code for a partition whose storage refused or failed a call.
pub fn storage(e: &StorageError) -> i16 {
    match e {
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::TooLarge { .. } => ResponseError::MessageTooLarge,
        // Failed (a failed fsync, a damaged log) or unavailable (a full
        // disk: nothing was written and the partition stays usable, so the
        // client may retry, as Kafka's own clients do on a storage error).
        StorageError::Failed(_) | StorageError::Unavailable(_) => ResponseError::KafkaStorageError,
        // Closed: the topic is being deleted or the broker is stopping; the
        // client refreshes metadata and retries, as after a leader change.
        StorageError::Closed | StorageError::NotLeader => ResponseError::NotLeaderOrFollower,
        StorageError::TimedOut => ResponseError::RequestTimedOut,
        StorageError::Pinned { .. } => ResponseError::PolicyViolation,
        StorageError::ProducerRefused(refusal) => match refusal {
            ProducerRefusal::OutOfOrderSequence => ResponseError::OutOfOrderSequenceNumber,
            ProducerRefusal::DuplicateSequence => ResponseError::DuplicateSequenceNumber,
            ProducerRefusal::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
            ProducerRefusal::UnknownProducerId => ResponseError::UnknownProducerId,
        },
    }
    .code()
}

/// Code for a failed admin or lookup operation.
pub fn broker(e: &BrokerError) -> i16 {
    match e {
        BrokerError::UnknownTopic { .. } | BrokerError::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
        BrokerError::TopicExists { .. } => ResponseError::TopicAlreadyExists,
        BrokerError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        BrokerError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
        BrokerError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        BrokerError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        BrokerError::Io { .. } | BrokerError::Log { .. } => ResponseError::KafkaStorageError,
        BrokerError::CorruptMetadata { .. }
        | BrokerError::DataDirInUse { .. }
        | BrokerError::Random(_) => ResponseError::UnknownServerError,
        BrokerError::Security(e) => return security(e),
        BrokerError::TenantCap(_) | BrokerError::TopicPinned { .. } => {
            ResponseError::PolicyViolation
        }
        BrokerError::InvalidRestore(_) => ResponseError::InvalidRequest,
        BrokerError::Snapshot(e) => match e {
            herald_broker::SnapshotError::UnknownTopic { .. } => {
                ResponseError::UnknownTopicOrPartition
            }
            herald_broker::SnapshotError::Storage { .. } => ResponseError::KafkaStorageError,
            _ => ResponseError::InvalidRequest,
        },
        BrokerError::InvalidReplicationFactor { .. } => ResponseError::InvalidReplicationFactor,
        // No quorum now: the client retries, as on a controller move.
        BrokerError::ClusterUnavailable(_) => ResponseError::RequestTimedOut,
        BrokerError::NotInCluster(_) => ResponseError::UnsupportedVersion,
        BrokerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        BrokerError::NoReassignmentInProgress { .. } => ResponseError::NoReassignmentInProgress,
        BrokerError::NodeExists { .. } => ResponseError::DuplicateVoter,
        BrokerError::InvalidNode(_) => ResponseError::InvalidRequest,
        BrokerError::UnknownNode(_) => ResponseError::VoterNotFound,
    }
    .code()
}

/// Code for a refused change to credentials, ACLs, tenants or namespaces.
pub fn security(e: &herald_auth::SecurityError) -> i16 {
    use herald_auth::SecurityError;
    match e {
        SecurityError::NoSuchCredential(..) => ResponseError::ResourceNotFound,
        SecurityError::EmptyUser => ResponseError::UnacceptableCredential,
        SecurityError::Acl(_) | SecurityError::Tenant(_) => ResponseError::InvalidRequest,
    }
    .code()
}

/// Code for an answer of the group coordinator: it already speaks in Kafka
/// error codes, which are written unchanged.
pub fn group(e: herald_group::ErrorCode) -> i16 {
    e.code()
}

/// Code for a group request the coordinator could not answer (it is
/// stopping): COORDINATOR_NOT_AVAILABLE, on which clients look the
/// coordinator up again and retry.
pub fn group_unavailable() -> i16 {
    herald_group::ErrorCode::CoordinatorNotAvailable.code()
}

/// Shorthand for codes without a domain error behind them.
pub fn code(e: ResponseError) -> i16 {
    e.code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_crc_is_corrupt_message_and_oversize_is_message_too_large() {
        let crc = ProduceError::InvalidBatch(BatchError::CrcMismatch {
            expected: 1,
            computed: 2,
        });
        assert_eq!(produce(&crc), 2);
        assert_eq!(produce(&ProduceError::TooLarge { size: 10, max: 5 }), 10);
        assert_eq!(broker(&BrokerError::UnknownTopic { name: "t".into() }), 3);
    }

    #[test]
    fn an_upstreams_sequence_refusal_is_the_same_kafka_error() {
        let refused = |r| produce(&ProduceError::Storage(StorageError::ProducerRefused(r)));
        assert_eq!(refused(ProducerRefusal::OutOfOrderSequence), 45);
        assert_eq!(refused(ProducerRefusal::DuplicateSequence), 46);
        assert_eq!(refused(ProducerRefusal::InvalidProducerEpoch), 47);
        assert_eq!(refused(ProducerRefusal::UnknownProducerId), 59);
    }

    #[test]
    fn group_codes_are_kafka_codes_and_a_stopped_coordinator_is_retriable() {
        assert_eq!(group(herald_group::ErrorCode::IllegalGeneration), 22);
        assert_eq!(
            group_unavailable(),
            ResponseError::CoordinatorNotAvailable.code()
        );
    }
}
