//! Broker memory per idle session and per subscription: the heap the
//! broker's allocator has in use (its `herald_process_heap_bytes` gauge)
//! before and after opening idle sessions, then after subscribing each to
//! literal subjects. The resident anonymous memory is reported too, but it
//! also holds what the allocator keeps for reuse, so it overstates a first
//! run and understates a later one.

use std::time::Duration;

use serde::Serialize;

use super::session::{AnySession, Transport};
use super::{anon_rss_bytes, PushBenchError};

/// What to run.
#[derive(Debug, Clone)]
pub struct Memory {
    /// The push listener.
    pub push: String,
    /// The broker's admin listener (its heap gauge).
    pub admin: String,
    /// The topic (it must exist).
    pub topic: String,
    /// The broker's pid.
    pub broker_pid: u32,
    /// Idle sessions, each on a connection of its own.
    pub connections: usize,
    /// Subscriptions each session then makes.
    pub subscriptions_per_connection: u64,
    /// The sessions' transport.
    pub transport: Transport,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRow {
    /// `memory`.
    pub scenario: &'static str,
    /// The sessions' transport.
    pub transport: Transport,
    /// Sessions opened.
    pub connections: usize,
    /// Subscriptions made.
    pub subscriptions: u64,
    /// Broker heap bytes per idle session (connection, HTTP/2 and gRPC
    /// state, session).
    pub bytes_per_idle_connection: f64,
    /// Broker heap bytes per subscription (routing entry, cursors, session
    /// map).
    pub bytes_per_subscription: f64,
    /// Resident anonymous bytes per idle session.
    pub rss_per_idle_connection: f64,
    /// Resident anonymous bytes per subscription.
    pub rss_per_subscription: f64,
}

/// How long the broker gets to settle before each reading.
const SETTLE: Duration = Duration::from_secs(2);

/// The broker's heap gauge, read from its `/metrics`.
fn heap_bytes(admin: &str) -> Result<u64, PushBenchError> {
    super::metric(admin, "herald_process_heap_bytes").map(|v| v as u64)
}

/// Both readings of the broker's memory.
fn reading(plan: &Memory) -> Result<(u64, u64), PushBenchError> {
    Ok((heap_bytes(&plan.admin)?, anon_rss_bytes(plan.broker_pid)?))
}

/// Runs one measurement.
pub async fn run(plan: &Memory) -> Result<MemoryRow, PushBenchError> {
    tokio::time::sleep(SETTLE).await;
    let before = reading(plan)?;
    let mut sessions = Vec::with_capacity(plan.connections);
    for _ in 0..plan.connections {
        sessions.push(AnySession::open(plan.transport, &plan.push).await?);
    }
    // The broker opens a session as its stream starts and greets it at
    // once: after the welcome, the session exists.
    for session in &mut sessions {
        session.next().await?;
    }
    tokio::time::sleep(SETTLE).await;
    let idle = reading(plan)?;
    for (i, session) in sessions.iter_mut().enumerate() {
        let first = i as u64 * plan.subscriptions_per_connection;
        super::session::subscribe_all(
            session,
            &plan.topic,
            first..first + plan.subscriptions_per_connection,
            |id| format!("memory.subject.{id}").into_bytes(),
        )
        .await?;
    }
    tokio::time::sleep(SETTLE).await;
    let subscribed = reading(plan)?;
    let subscriptions = plan.connections as u64 * plan.subscriptions_per_connection;
    drop(sessions);
    let per = |after: u64, before: u64, n: f64| after.saturating_sub(before) as f64 / n.max(1.0);
    let sessions = plan.connections as f64;
    Ok(MemoryRow {
        scenario: "memory",
        transport: plan.transport,
        connections: plan.connections,
        subscriptions,
        bytes_per_idle_connection: per(idle.0, before.0, sessions),
        bytes_per_subscription: per(subscribed.0, idle.0, subscriptions as f64),
        rss_per_idle_connection: per(idle.1, before.1, sessions),
        rss_per_subscription: per(subscribed.1, idle.1, subscriptions as f64),
    })
}
