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

/// Niceness of the indexer thread: the kernel gives a thread at nice 10
/// about a tenth of the CPU share of one at 0 when both want a core.
const NICENESS: libc::c_int = 10;

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
            lower_priority();
            // Returns when the sender is dropped (the broker is gone).
            let _ = runtime.block_on(stopped);
        })
        .map_err(|e| cannot(e.to_string()))?;
    Ok(Started {
        handle,
        _shutdown: shutdown,
    })
}

/// Lowers the calling thread's CPU priority; only that thread, since on
/// Linux `setpriority` with a thread id applies to that thread alone.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions; setpriority only changes
        // the scheduling weight of this thread.
        let failed = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, NICENESS) != 0
        };
        if failed {
            tracing::warn!(
                "the query indexer thread runs at normal priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}
