//! Choosing the group's protocol (assignor), as Kafka's
//! `GroupMetadata.selectProtocol` does: the candidates are the protocols every
//! member supports; each member votes for the candidate it ranks highest;
//! the protocol with most votes wins.
//!
//! Kafka breaks a tie by hash-map order, which is arbitrary; herald picks the
//! tied protocol the leader (the first member given) ranks highest, so the
//! choice is deterministic and follows the leader's preference.

use std::collections::BTreeMap;

use crate::member::Member;

/// Protocol names every one of `members` supports, in the first member's
/// order of preference.
pub(crate) fn candidate_protocols(members: &[Member]) -> Vec<&str> {
    let Some(first) = members.first() else {
        return Vec::new();
    };
    first
        .protocols
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| members.iter().all(|m| m.supports(name)))
        .collect()
}

/// Whether a member with `protocol_type` and `protocol_names` may join a
/// group that has `members` (Kafka's `supportsProtocols`): an empty group
/// takes any non-empty type and protocol list; otherwise the type must be the
/// group's and one protocol must be supported by every current member.
pub(crate) fn supports_protocols(
    members: &[Member],
    group_protocol_type: Option<&str>,
    protocol_type: &str,
    protocol_names: &[&str],
) -> bool {
    if members.is_empty() {
        return !protocol_type.is_empty() && !protocol_names.is_empty();
    }
    group_protocol_type == Some(protocol_type)
        && protocol_names
            .iter()
            .any(|name| members.iter().all(|m| m.supports(name)))
}

/// The protocol the group will use, or None for a group without members or
/// without a common protocol. `members[0]` breaks ties (pass the leader
/// first).
pub(crate) fn select_protocol(members: &[Member]) -> Option<String> {
    let candidates = candidate_protocols(members);
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for member in members {
        let vote = member
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|name| candidates.contains(name))?;
        *votes.entry(vote).or_default() += 1;
    }
    let most = votes.values().copied().max()?;
    candidates
        .into_iter()
        .find(|name| votes.get(name) == Some(&most))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Protocol;
    use bytes::Bytes;

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            member_id: id.into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 1,
            session_timeout_ms: 1,
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|name| Protocol {
                    name: (*name).into(),
                    metadata: Bytes::new(),
                })
                .collect(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
        }
    }

    #[test]
    fn picks_the_only_protocol_everyone_supports() {
        let members = [
            member("a", &["range", "roundrobin"]),
            member("b", &["roundrobin"]),
        ];
        assert_eq!(select_protocol(&members).as_deref(), Some("roundrobin"));
    }

    #[test]
    fn majority_preference_wins() {
        let members = [
            member("a", &["range", "sticky"]),
            member("b", &["sticky", "range"]),
            member("c", &["sticky", "range"]),
        ];
        assert_eq!(select_protocol(&members).as_deref(), Some("sticky"));
    }

    #[test]
    fn a_tie_goes_to_the_first_members_preference() {
        let members = [
            member("a", &["range", "sticky"]),
            member("b", &["sticky", "range"]),
        ];
        assert_eq!(select_protocol(&members).as_deref(), Some("range"));
    }

    #[test]
    fn no_common_protocol_selects_nothing() {
        let members = [member("a", &["range"]), member("b", &["sticky"])];
        assert_eq!(select_protocol(&members), None);
        assert!(!supports_protocols(
            &members,
            Some("consumer"),
            "consumer",
            &["range"]
        ));
    }

    #[test]
    fn an_empty_group_accepts_any_protocol_type() {
        assert!(supports_protocols(
            &[],
            Some("connect"),
            "consumer",
            &["range"]
        ));
        assert!(!supports_protocols(&[], None, "", &["range"]));
        assert!(!supports_protocols(&[], None, "consumer", &[]));
    }

    #[test]
    fn a_non_empty_group_refuses_another_protocol_type() {
        let members = [member("a", &["range"])];
        assert!(!supports_protocols(
            &members,
            Some("consumer"),
            "connect",
            &["range"]
        ));
        assert!(supports_protocols(
            &members,
            Some("consumer"),
            "consumer",
            &["range"]
        ));
    }
}
