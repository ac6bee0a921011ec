//! The push engine's limits.

use std::time::Duration;

/// Limits and sizes of the push engine. Every resource a client can make
/// the broker hold is bounded by one of these.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// Bytes of deliveries queued for one session before its subscriptions
    /// leave live delivery and continue from the log.
    pub queue_bytes: usize,
    /// Most subscriptions one session may hold.
    pub max_subscriptions_per_session: usize,
    /// Most sessions (connections) at once; more are refused.
    pub max_sessions: usize,
    /// Subscribe requests one session may make per second (a burst of this
    /// many, then this many per second).
    pub subscribes_per_second: u32,
    /// Catch-up readers reading the log at once, over all sessions.
    pub catch_up_readers: usize,
    /// Bytes one catch-up read or one tailer read asks the log for.
    pub read_bytes: usize,
    /// Longest resume token accepted, in bytes.
    pub max_token_bytes: usize,
    /// How long a resume token stays valid after it was issued.
    pub token_lifetime: Duration,
}

impl Default for PushConfig {
    fn default() -> Self {
        Self {
            queue_bytes: 1024 * 1024,
            max_subscriptions_per_session: 10_000,
            max_sessions: 10_000,
            subscribes_per_second: 10_000,
            catch_up_readers: 64,
            read_bytes: 1024 * 1024,
            max_token_bytes: 192 * 1024,
            token_lifetime: Duration::from_secs(30 * 24 * 3600),
        }
    }
}
