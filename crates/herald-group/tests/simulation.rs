//! Random sequences of group requests and clock moves, checking invariants
//! that must hold whatever clients do: nothing panics, every held request
//! is answered exactly once, and a group whose clients all vanish ends Empty
//! with every request answered.

mod support;

use std::collections::BTreeMap;

use herald_group::*;
use proptest::prelude::*;
use support::*;

#[derive(Debug, Clone)]
enum Op {
    JoinNew {
        instance: Option<u8>,
    },
    Rejoin {
        member: usize,
        change_metadata: bool,
    },
    Sync {
        member: usize,
    },
    Heartbeat {
        member: usize,
    },
    Leave {
        member: usize,
    },
    Commit {
        member: usize,
    },
    Advance {
        delta_ms: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        prop::option::of(0u8..3).prop_map(|instance| Op::JoinNew { instance }),
        (0usize..6, any::<bool>()).prop_map(|(member, change_metadata)| Op::Rejoin {
            member,
            change_metadata
        }),
        (0usize..6).prop_map(|member| Op::Sync { member }),
        (0usize..6).prop_map(|member| Op::Heartbeat { member }),
        (0usize..6).prop_map(|member| Op::Leave { member }),
        (0usize..6).prop_map(|member| Op::Commit { member }),
        (0i64..12_000).prop_map(|delta_ms| Op::Advance { delta_ms }),
    ]
}

/// Tracks requests and answers across calls.
#[derive(Default)]
struct Ledger {
    /// JoinGroup and SyncGroup requests not yet answered.
    held: BTreeMap<RequestId, &'static str>,
    /// Member ids learned from responses, with their latest generation.
    members: Vec<(String, Option<String>, i32)>,
}

impl Ledger {
    fn absorb(&mut self, h: &mut Harness, out: Vec<Output>) {
        for output in out {
            match output {
                Output::JoinGroup { request, response } => {
                    assert!(
                        self.held.remove(&request).is_some(),
                        "join {request:?} answered twice or never asked"
                    );
                    if response.error == ErrorCode::None {
                        if let Some(entry) =
                            self.members.iter_mut().find(|m| m.0 == response.member_id)
                        {
                            entry.2 = response.generation_id;
                        }
                    }
                }
                Output::SyncGroup { request, .. } => {
                    assert!(
                        self.held.remove(&request).is_some(),
                        "sync {request:?} answered twice or never asked"
                    );
                }
                Output::Persist { append, .. } => {
                    let out =
                        h.coordinator
                            .append_completed(h.now_ms, append, AppendResult::Durable);
                    self.absorb(h, out);
                }
                _ => {}
            }
        }
    }

    fn member(&self, index: usize) -> Option<(String, Option<String>, i32)> {
        if self.members.is_empty() {
            None
        } else {
            Some(self.members[index % self.members.len()].clone())
        }
    }
}

fn run(ops: Vec<Op>) {
    let mut h = Harness::kafka_defaults();
    let mut ledger = Ledger::default();
    for op in ops {
        match op {
            Op::JoinNew { instance } => {
                let instance = instance.map(|i| format!("i{i}"));
                let req = JoinGroupRequest {
                    group_instance_id: instance.clone(),
                    ..consumer("")
                };
                let request = h.request();
                ledger.held.insert(request, "join");
                let out = h.coordinator.join_group(h.now_ms, request, req.clone());
                // Learn the id from MEMBER_ID_REQUIRED or the static join.
                let required = out.iter().find_map(|o| match o {
                    Output::JoinGroup {
                        request: r,
                        response,
                    } if *r == request && response.error == ErrorCode::MemberIdRequired => {
                        Some(response.member_id.clone())
                    }
                    _ => None,
                });
                ledger.absorb(&mut h, out);
                if let Some(member_id) = required {
                    ledger.members.push((member_id.clone(), None, -1));
                    let request = h.request();
                    ledger.held.insert(request, "join");
                    let out = h.coordinator.join_group(
                        h.now_ms,
                        request,
                        JoinGroupRequest { member_id, ..req },
                    );
                    ledger.absorb(&mut h, out);
                } else if instance.is_some() {
                    // A static member's id only shows in its answer; learn
                    // all current ids from DescribeGroups instead.
                    for m in h.coordinator.describe_group(GROUP).members {
                        if !ledger.members.iter().any(|known| known.0 == m.member_id) {
                            ledger.members.push((m.member_id, m.group_instance_id, -1));
                        }
                    }
                }
            }
            Op::Rejoin {
                member,
                change_metadata,
            } => {
                let Some((member_id, instance, _)) = ledger.member(member) else {
                    continue;
                };
                let topics: &[&str] = if change_metadata {
                    &["orders", "audit"]
                } else {
                    &["orders"]
                };
                let req = JoinGroupRequest {
                    group_instance_id: instance,
                    ..join_request(
                        &member_id,
                        vec![protocol("range", subscription(topics, &[]))],
                    )
                };
                let request = h.request();
                ledger.held.insert(request, "join");
                let out = h.coordinator.join_group(h.now_ms, request, req);
                ledger.absorb(&mut h, out);
            }
            Op::Sync { member } => {
                let Some((member_id, instance, generation_id)) = ledger.member(member) else {
                    continue;
                };
                let assignments = ledger
                    .members
                    .iter()
                    .map(|m| MemberAssignment {
                        member_id: m.0.clone(),
                        assignment: assignment(&[("orders", &[0])]),
                    })
                    .collect();
                let request = h.request();
                ledger.held.insert(request, "sync");
                let out = h.coordinator.sync_group(
                    h.now_ms,
                    request,
                    SyncGroupRequest {
                        group_instance_id: instance,
                        protocol_name: None,
                        assignments,
                        ..sync_request(&member_id, generation_id, vec![])
                    },
                );
                ledger.absorb(&mut h, out);
            }
            Op::Heartbeat { member } => {
                let Some((member_id, instance, generation_id)) = ledger.member(member) else {
                    continue;
                };
                let request = h.request();
                let out = h.coordinator.heartbeat(
                    h.now_ms,
                    request,
                    HeartbeatRequest {
                        group_instance_id: instance,
                        ..heartbeat_request(&member_id, generation_id)
                    },
                );
                ledger.absorb(&mut h, out);
            }
            Op::Leave { member } => {
                let Some((member_id, instance, _)) = ledger.member(member) else {
                    continue;
                };
                let (_, out) = h.leave(vec![MemberIdentity {
                    member_id,
                    group_instance_id: instance,
                }]);
                ledger.absorb(&mut h, out);
            }
            Op::Commit { member } => {
                let Some((member_id, instance, generation_id)) = ledger.member(member) else {
                    continue;
                };
                let (_, out) = h.commit(OffsetCommitRequest {
                    group_instance_id: instance,
                    ..commit_request(&member_id, generation_id, &[("orders", 0, 1)])
                });
                ledger.absorb(&mut h, out);
            }
            Op::Advance { delta_ms } => {
                let out = h.advance(delta_ms);
                ledger.absorb(&mut h, out);
            }
        }
    }
    // Every client vanishes: within the longest timeout every member is gone
    // and every held request has been answered.
    for _ in 0..400 {
        let out = h.advance(1_000);
        ledger.absorb(&mut h, out);
    }
    assert_eq!(ledger.held, BTreeMap::new(), "requests never answered");
    if let Some(state) = h.coordinator.group_state(GROUP) {
        assert_eq!(state, GroupState::Empty);
        assert!(h.coordinator.describe_group(GROUP).members.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_held_request_is_answered_exactly_once(ops in prop::collection::vec(op(), 1..60)) {
        run(ops);
    }
}
