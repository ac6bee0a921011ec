//! The states of a classic group and which transitions are legal.

/// The state of a classic consumer group, as Kafka names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupState {
    /// No members; the group may still hold committed offsets.
    Empty,
    /// A rebalance started: waiting for members to (re)join.
    PreparingRebalance,
    /// Everyone joined: waiting for the leader's assignment in SyncGroup.
    CompletingRebalance,
    /// The assignment was handed out; members heartbeat.
    Stable,
    /// The group is being deleted and accepts nothing.
    Dead,
}

impl GroupState {
    /// Kafka's name of the state, as ListGroups and DescribeGroups report it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Parses a state name, ignoring case as Kafka's ListGroups filter does.
    pub fn parse(name: &str) -> Option<GroupState> {
        [
            GroupState::Empty,
            GroupState::PreparingRebalance,
            GroupState::CompletingRebalance,
            GroupState::Stable,
            GroupState::Dead,
        ]
        .into_iter()
        .find(|state| state.as_str().eq_ignore_ascii_case(name))
    }

    /// Whether the group may move from `self` to `next` (Kafka's
    /// `validPreviousStates`); a false answer is a coordinator bug.
    pub fn can_transition_to(self, next: GroupState) -> bool {
        use GroupState::*;
        match next {
            Dead => true,
            PreparingRebalance => matches!(self, Stable | CompletingRebalance | Empty),
            CompletingRebalance => self == PreparingRebalance,
            Stable => self == CompletingRebalance,
            // A failed group deletion returns a Dead group to Empty.
            Empty => matches!(self, PreparingRebalance | Dead),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state_names_case_insensitively() {
        assert_eq!(GroupState::parse("stable"), Some(GroupState::Stable));
        assert_eq!(
            GroupState::parse("CompletingRebalance"),
            Some(GroupState::CompletingRebalance)
        );
        assert_eq!(GroupState::parse("Rebalancing"), None);
    }

    #[test]
    fn stable_is_reached_only_from_completing_rebalance() {
        assert!(GroupState::CompletingRebalance.can_transition_to(GroupState::Stable));
        assert!(!GroupState::PreparingRebalance.can_transition_to(GroupState::Stable));
        assert!(!GroupState::Empty.can_transition_to(GroupState::Stable));
    }
}
