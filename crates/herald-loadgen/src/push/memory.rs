//! Broker memory per idle session and per subscription: the broker's
//! anonymous resident memory before and after opening idle sessions, then
//! after subscribing each to literal subjects.

use std::time::Duration;

use serde::Serialize;

use super::session::Session;
use super::{anon_rss_bytes, PushBenchError};

/// What to run.
#[derive(Debug, Clone)]
pub struct Memory {
    /// The push listener.
    pub push: String,
    /// The topic (it must exist).
    pub topic: String,
    /// The broker's pid.
    pub broker_pid: u32,
    /// Idle sessions, each on a connection of its own.
    pub connections: usize,
    /// Subscriptions each session then makes.
    pub subscriptions_per_connection: u64,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRow {
    /// `memory`.
    pub scenario: &'static str,
    /// Sessions opened.
    pub connections: usize,
    /// Subscriptions made.
    pub subscriptions: u64,
    /// Broker bytes per idle session (connection, HTTP/2 state, session).
    pub bytes_per_idle_connection: f64,
    /// Broker bytes per subscription (routing entry, cursors, session map).
    pub bytes_per_subscription: f64,
}

/// How long the broker gets to settle before each reading.
const SETTLE: Duration = Duration::from_secs(2);

/// Runs one measurement.
pub async fn run(plan: &Memory) -> Result<MemoryRow, PushBenchError> {
    tokio::time::sleep(SETTLE).await;
    let before = anon_rss_bytes(plan.broker_pid)?;
    let mut sessions = Vec::with_capacity(plan.connections);
    for _ in 0..plan.connections {
        sessions.push(Session::open(&plan.push).await?);
    }
    // The broker opens a session as its stream starts and greets it at
    // once: after the welcome, the session exists.
    for session in &mut sessions {
        session.next().await?;
    }
    tokio::time::sleep(SETTLE).await;
    let idle = anon_rss_bytes(plan.broker_pid)?;
    for (i, session) in sessions.iter_mut().enumerate() {
        let first = i as u64 * plan.subscriptions_per_connection;
        session
            .subscribe_all(
                &plan.topic,
                first..first + plan.subscriptions_per_connection,
                |id| format!("memory.subject.{id}").into_bytes(),
            )
            .await?;
    }
    tokio::time::sleep(SETTLE).await;
    let subscribed = anon_rss_bytes(plan.broker_pid)?;
    let subscriptions = plan.connections as u64 * plan.subscriptions_per_connection;
    drop(sessions);
    Ok(MemoryRow {
        scenario: "memory",
        connections: plan.connections,
        subscriptions,
        bytes_per_idle_connection: idle.saturating_sub(before) as f64
            / plan.connections.max(1) as f64,
        bytes_per_subscription: subscribed.saturating_sub(idle) as f64
            / subscriptions.max(1) as f64,
    })
}
