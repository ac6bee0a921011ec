//! The thread every query indexer runs on: one OS thread with its own
//! single-threaded async runtime, started with the first query and run at
//! a lower CPU priority (nice 10) than the threads that serve produce and
//! fetch. Indexing is CPU work (decoding every record, evaluating every
//! filter); kept off the request runtime, a busy indexer cannot delay a
//! produce answer, and under contention the scheduler gives the request
//! threads the cores first while the indexers fall behind (their lag says
//! by how much).

use std::sync::OnceLock;

use tokio::sync::oneshot;

use super::QueryError;

/// The indexer thread's runtime, started on first use and ended when
/// this is dropped.
#[derive(Default)]
pub(super) struct IndexerRuntime {
    started: OnceLock<Started>,
}

struct Started {
    handle: tokio::runtime::Handle,
    /// Dropped with the runtime: the thread then stops its runtime, which
    /// cancels every indexer still running.
    _shutdown: oneshot::Sender<()>,
}

impl IndexerRuntime {
    /// The runtime's handle, starting its thread if it has not started.
    pub(super) fn handle(&self) -> Result<tokio::runtime::Handle, QueryError> {
        if let Some(started) = self.started.get() {
            return Ok(started.handle.clone());
        }
        let started = start()?;
        // Two first callers may both start one; the loser's thread ends as
        // its shutdown sender is dropped here.
        let handle = started.handle.clone();
        match self.started.set(started) {
            Ok(()) => Ok(handle),
            Err(_lost) => Ok(self
                .started
                .get()
                .map_or(handle, |winner| winner.handle.clone())),
        }
    }
}

fn start() -> Result<Started, QueryError> {
    let cannot = |reason: String| QueryError::Runtime { reason };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("herald-queries")
        .build()
        .map_err(|e| cannot(e.to_string()))?;
    let handle = runtime.handle().clone();
    let (shutdown, stopped) = oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("herald-queries".into())
        .spawn(move || {
            crate::thread_priority::lower_current_thread("query indexer");
            // Returns when the sender is dropped (the broker is gone).
            let _ = runtime.block_on(stopped);
        })
        .map_err(|e| cannot(e.to_string()))?;
    Ok(Started {
        handle,
        _shutdown: shutdown,
    })
}
