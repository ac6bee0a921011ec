//! Coordinator settings, named after the Kafka broker settings they mirror.

/// Default of `group.max.size`. Kafka's is unbounded; every member costs
/// memory and every rebalance waits for all of them, so herald bounds it.
pub const GROUP_SIZE_MAX_DEFAULT: usize = 1000;

/// Settings of the group coordinator. [`Default`] gives Kafka's defaults,
/// except a bounded `group.max.size` ([`GROUP_SIZE_MAX_DEFAULT`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// Smallest session timeout a member may ask for
    /// (`group.min.session.timeout.ms`).
    pub session_timeout_ms_min: i32,
    /// Largest session timeout a member may ask for
    /// (`group.max.session.timeout.ms`).
    pub session_timeout_ms_max: i32,
    /// How long the first rebalance of an Empty group waits for more members
    /// (`group.initial.rebalance.delay.ms`).
    pub initial_rebalance_delay_ms: i32,
    /// Most members a group may have (`group.max.size`).
    pub group_size_max: usize,
    /// How long a new member's JoinGroup may stay pending before the member is
    /// dropped (Kafka's fixed 5 minutes): a client that gave up and retried
    /// must not leave a defunct member behind forever.
    pub new_member_join_timeout_ms: i32,
    /// Longest metadata string accepted with a commit
    /// (`offset.metadata.max.bytes`).
    pub offset_metadata_bytes_max: usize,
    /// How long offsets outlive their group's last member
    /// (`offsets.retention.minutes`, here in milliseconds).
    pub offsets_retention_ms: i64,
    /// How often offsets are checked for expiration
    /// (`offsets.retention.check.interval.ms`).
    pub offsets_retention_check_interval_ms: i64,
    /// Seed of the member-id generator. Give each broker start a fresh random
    /// value so that ids never repeat across restarts; tests use a constant.
    pub member_id_seed: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            session_timeout_ms_min: 6_000,
            session_timeout_ms_max: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            group_size_max: GROUP_SIZE_MAX_DEFAULT,
            new_member_join_timeout_ms: 300_000,
            offset_metadata_bytes_max: 4_096,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1_000,
            offsets_retention_check_interval_ms: 600_000,
            member_id_seed: 0,
        }
    }
}
