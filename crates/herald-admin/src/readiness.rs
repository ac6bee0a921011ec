//! Whether the broker is ready to serve clients, shared between the code
//! that starts and stops it and the `/ready` endpoint: a flag (set once the
//! listeners accept, cleared at shutdown) and a health check that names
//! what is broken while the broker runs (a partition whose storage failed).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Names what keeps a running broker from serving everyone: one line per
/// problem, none when healthy. Called at every `/ready` request, so it must
/// be cheap and must not block.
pub type HealthCheck = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// A shared ready flag and health check; starts not ready.
#[derive(Clone, Default)]
pub struct Readiness {
    ready: Arc<AtomicBool>,
    check: Arc<OnceLock<HealthCheck>>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

/// What `/ready` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadyState {
    /// Serving everyone.
    Ready,
    /// Not started yet, or shutting down.
    NotReady,
    /// Running, with these problems.
    Degraded(Vec<String>),
}

impl Readiness {
    /// A flag that starts not ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the broker ready (logs open, Kafka listener accepting).
    pub fn set_ready(&self) {
        // Relaxed: the flag orders nothing else; it is only reported.
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Marks the broker not ready (shutting down).
    pub fn set_not_ready(&self) {
        self.ready.store(false, Ordering::Relaxed);
    }

    /// True while the broker is ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Installs the health check consulted while ready (once; a second
    /// call is ignored).
    pub fn set_health_check(&self, check: HealthCheck) {
        let _ = self.check.set(check);
    }

    /// The state `/ready` reports.
    pub fn state(&self) -> ReadyState {
        if !self.is_ready() {
            return ReadyState::NotReady;
        }
        match self.check.get().map(|check| check()) {
            Some(problems) if !problems.is_empty() => ReadyState::Degraded(problems),
            _ => ReadyState::Ready,
        }
    }
}
