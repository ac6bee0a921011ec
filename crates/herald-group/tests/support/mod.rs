//! A fake-clock harness for driving the coordinator in tests.
#![allow(dead_code)]

use bytes::Bytes;
use herald_group::*;

pub const GROUP: &str = "g";
pub const SESSION_MS: i32 = 10_000;
pub const REBALANCE_MS: i32 = 30_000;
pub const START_MS: i64 = 1_000_000;

/// Kafka's defaults, except a 0 ms initial delay where a test does not
/// exercise it.
pub fn config(initial_rebalance_delay_ms: i32) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms,
        member_id_seed: 42,
        ..GroupConfig::default()
    }
}

/// Consumer-protocol metadata subscribing to `topics`, owning `owned`.
pub fn subscription(topics: &[&str], owned: &[(&str, &[i32])]) -> Bytes {
    Subscription {
        version: 1,
        topics: topics.iter().map(|t| t.to_string()).collect(),
        user_data: None,
        owned_partitions: owned
            .iter()
            .map(|(topic, partitions)| TopicPartitions {
                topic: topic.to_string(),
                partitions: partitions.to_vec(),
            })
            .collect(),
        generation_id: -1,
        rack_id: None,
    }
    .encode()
    .into()
}

pub fn assignment(partitions: &[(&str, &[i32])]) -> Bytes {
    Assignment {
        version: 1,
        assigned_partitions: partitions
            .iter()
            .map(|(topic, ps)| TopicPartitions {
                topic: topic.to_string(),
                partitions: ps.to_vec(),
            })
            .collect(),
        user_data: None,
    }
    .encode()
    .into()
}

pub fn protocol(name: &str, metadata: Bytes) -> Protocol {
    Protocol {
        name: name.into(),
        metadata,
    }
}

pub fn join_request(member_id: &str, protocols: Vec<Protocol>) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: GROUP.into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".into(),
        protocols,
        require_known_member_id: true,
        supports_skip_assignment: false,
    }
}

/// A consumer of topic "orders" with the "range" assignor.
pub fn consumer(member_id: &str) -> JoinGroupRequest {
    join_request(
        member_id,
        vec![protocol("range", subscription(&["orders"], &[]))],
    )
}

pub fn static_consumer(member_id: &str, instance: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_instance_id: Some(instance.into()),
        ..consumer(member_id)
    }
}

pub fn sync_request(
    member_id: &str,
    generation_id: i32,
    assignments: Vec<(&str, Bytes)>,
) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: assignments
            .into_iter()
            .map(|(member_id, assignment)| MemberAssignment {
                member_id: member_id.into(),
                assignment,
            })
            .collect(),
    }
}

pub fn heartbeat_request(member_id: &str, generation_id: i32) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: GROUP.into(),
        generation_id,
        member_id: member_id.into(),
        group_instance_id: None,
    }
}

pub fn commit_request(
    member_id: &str,
    generation_id: i32,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id,
        member_id: member_id.into(),
        group_instance_id: None,
        partitions: offsets
            .iter()
            .map(|(topic, partition, offset)| OffsetCommitPartition {
                topic: topic.to_string(),
                partition: *partition,
                offset: *offset,
                leader_epoch: None,
                metadata: None,
            })
            .collect(),
    }
}

pub fn rebalance_started(generation_id: i32, reason: RebalanceReason) -> Output {
    Output::Event(GroupEvent::RebalanceStarted {
        group_id: GROUP.into(),
        generation_id,
        reason,
    })
}

pub fn generation_started(
    generation_id: i32,
    protocol: Option<&str>,
    member_count: usize,
) -> Output {
    Output::Event(GroupEvent::GenerationStarted {
        group_id: GROUP.into(),
        generation_id,
        protocol_name: protocol.map(str::to_owned),
        member_count,
    })
}

pub fn stable(generation_id: i32) -> Output {
    Output::Event(GroupEvent::Stable {
        group_id: GROUP.into(),
        generation_id,
    })
}

pub fn member_removed(member_id: &str, reason: RemovalReason) -> Output {
    Output::Event(GroupEvent::MemberRemoved {
        group_id: GROUP.into(),
        member_id: member_id.into(),
        reason,
    })
}

pub fn heartbeat_answer(request: RequestId, error: ErrorCode) -> Output {
    Output::Heartbeat { request, error }
}

pub fn join_answer(request: RequestId, response: JoinGroupResponse) -> Output {
    Output::JoinGroup { request, response }
}

pub fn sync_answer(request: RequestId, response: SyncGroupResponse) -> Output {
    Output::SyncGroup { request, response }
}

pub fn sync_ok(assignment: Bytes) -> SyncGroupResponse {
    SyncGroupResponse {
        error: ErrorCode::None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignment,
    }
}

/// The coordinator, a fake clock, and a request counter.
pub struct Harness {
    pub coordinator: GroupCoordinator,
    pub now_ms: i64,
    next_request: u64,
}

impl Harness {
    pub fn new(config: GroupConfig) -> Self {
        Harness {
            coordinator: GroupCoordinator::new(config),
            now_ms: START_MS,
            next_request: 0,
        }
    }

    /// Kafka defaults with no initial delay: a lone member's join completes
    /// at the next call.
    pub fn quick() -> Self {
        Harness::new(config(0))
    }

    /// Kafka defaults (3 s initial delay), for groups of several members.
    pub fn kafka_defaults() -> Self {
        Harness::new(config(3_000))
    }

    /// Advances the clock by the initial delay until the join phase ends;
    /// returns everything output meanwhile.
    pub fn finish_initial_delay(&mut self) -> Vec<Output> {
        let delay_ms = i64::from(self.coordinator.config().initial_rebalance_delay_ms);
        let mut all = Vec::new();
        for _ in 0..=(i64::from(REBALANCE_MS) / delay_ms.max(1)) {
            let out = self.advance(delay_ms);
            let done = out
                .iter()
                .any(|o| matches!(o, Output::Event(GroupEvent::GenerationStarted { .. })));
            all.extend(out);
            if done {
                break;
            }
        }
        all
    }

    pub fn request(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    pub fn advance(&mut self, delta_ms: i64) -> Vec<Output> {
        self.now_ms += delta_ms;
        self.coordinator.tick(self.now_ms)
    }

    pub fn join(&mut self, req: JoinGroupRequest) -> (RequestId, Vec<Output>) {
        let request = self.request();
        (
            request,
            self.coordinator.join_group(self.now_ms, request, req),
        )
    }

    pub fn sync(&mut self, req: SyncGroupRequest) -> (RequestId, Vec<Output>) {
        let request = self.request();
        (
            request,
            self.coordinator.sync_group(self.now_ms, request, req),
        )
    }

    pub fn heartbeat(&mut self, member_id: &str, generation_id: i32) -> (RequestId, Vec<Output>) {
        let request = self.request();
        let out = self.coordinator.heartbeat(
            self.now_ms,
            request,
            heartbeat_request(member_id, generation_id),
        );
        (request, out)
    }

    pub fn heartbeat_error(&mut self, member_id: &str, generation_id: i32) -> ErrorCode {
        let (request, out) = self.heartbeat(member_id, generation_id);
        match out.as_slice() {
            [Output::Heartbeat { request: r, error }] if *r == request => *error,
            other => panic!("expected one heartbeat answer, got {other:?}"),
        }
    }

    pub fn leave(&mut self, members: Vec<MemberIdentity>) -> (RequestId, Vec<Output>) {
        let request = self.request();
        let out = self.coordinator.leave_group(
            self.now_ms,
            request,
            LeaveGroupRequest {
                group_id: GROUP.into(),
                members,
            },
        );
        (request, out)
    }

    pub fn commit(&mut self, req: OffsetCommitRequest) -> (RequestId, Vec<Output>) {
        let request = self.request();
        (
            request,
            self.coordinator.offset_commit(self.now_ms, request, req),
        )
    }

    /// Commits and makes the append durable; returns the per-partition errors.
    pub fn commit_durably(&mut self, req: OffsetCommitRequest) -> Vec<ErrorCode> {
        let (request, out) = self.commit(req);
        let out = match out.as_slice() {
            [Output::Persist { append, .. }] => {
                self.coordinator
                    .append_completed(self.now_ms, *append, AppendResult::Durable)
            }
            _ => out,
        };
        match out.as_slice() {
            [Output::OffsetCommit {
                request: r,
                response,
            }] if *r == request => response.partitions.iter().map(|p| p.error).collect(),
            other => panic!("expected a commit answer, got {other:?}"),
        }
    }

    /// A new dynamic member's two-step join (MEMBER_ID_REQUIRED, then the
    /// real join); returns the member id and the second join's request id
    /// and outputs.
    pub fn join_new(&mut self, req: JoinGroupRequest) -> (String, RequestId, Vec<Output>) {
        let (request, out) = self.join(req.clone());
        let member_id = match out.as_slice() {
            [Output::JoinGroup {
                request: r,
                response,
            }] if *r == request && response.error == ErrorCode::MemberIdRequired => {
                response.member_id.clone()
            }
            other => panic!("expected MEMBER_ID_REQUIRED, got {other:?}"),
        };
        let (request, out) = self.join(JoinGroupRequest {
            member_id: member_id.clone(),
            ..req
        });
        (member_id, request, out)
    }

    /// Builds a Stable group of `count` "orders" consumers (generation 1)
    /// on a harness with an initial delay; returns member ids, leader first.
    pub fn stable_group(&mut self, count: usize) -> Vec<String> {
        let mut members = Vec::new();
        let mut requests = Vec::new();
        for _ in 0..count {
            let (member_id, request, _) = self.join_new(consumer(""));
            members.push(member_id);
            requests.push(request);
        }
        let out = self.finish_initial_delay();
        for request in &requests {
            assert!(
                find_join(&out, *request).is_some(),
                "join not answered: {out:?}"
            );
        }
        let generation_id = self.coordinator.generation_id(GROUP).unwrap();
        let leader = members[0].clone();
        let assignments = members
            .iter()
            .enumerate()
            .map(|(i, m)| (m.as_str(), assignment(&[("orders", &[i as i32])])))
            .collect();
        self.sync(sync_request(&leader, generation_id, assignments));
        for member in &members[1..] {
            self.sync(sync_request(member, generation_id, vec![]));
        }
        assert_eq!(
            self.coordinator.group_state(GROUP),
            Some(GroupState::Stable)
        );
        members
    }
}

pub fn find_join(out: &[Output], request: RequestId) -> Option<JoinGroupResponse> {
    out.iter().find_map(|o| match o {
        Output::JoinGroup {
            request: r,
            response,
        } if *r == request => Some(response.clone()),
        _ => None,
    })
}

pub fn find_sync(out: &[Output], request: RequestId) -> Option<SyncGroupResponse> {
    out.iter().find_map(|o| match o {
        Output::SyncGroup {
            request: r,
            response,
        } if *r == request => Some(response.clone()),
        _ => None,
    })
}

pub fn identity(member_id: &str) -> MemberIdentity {
    MemberIdentity {
        member_id: member_id.into(),
        group_instance_id: None,
    }
}
