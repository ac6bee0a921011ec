//! One member of a group: what it told the coordinator and which of its
//! requests are waiting for an answer.

use bytes::Bytes;

use crate::api::Protocol;
use crate::output::RequestId;

/// A member of a classic group.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) member_id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) session_timeout_ms: i32,
    pub(crate) protocol_type: String,
    /// Most preferred first.
    pub(crate) protocols: Vec<Protocol>,
    pub(crate) assignment: Bytes,
    /// Its JoinGroup, held until the rebalance completes.
    pub(crate) awaiting_join: Option<RequestId>,
    /// Its SyncGroup, held until the leader's assignment arrives.
    pub(crate) awaiting_sync: Option<RequestId>,
    /// Joined but not yet through a completed join phase: such a member has no
    /// session yet, so it gets the (longer) new-member join timeout instead.
    pub(crate) is_new: bool,
}

impl Member {
    pub(crate) fn is_static(&self) -> bool {
        self.group_instance_id.is_some()
    }

    /// Same protocols with the same metadata in the same order (Kafka's
    /// `MemberMetadata.matches`): a rejoin that changes nothing.
    pub(crate) fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    pub(crate) fn supports(&self, protocol_name: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol_name)
    }

    /// The metadata sent for `protocol_name`, empty if unsupported.
    pub(crate) fn metadata(&self, protocol_name: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol_name)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }
}
