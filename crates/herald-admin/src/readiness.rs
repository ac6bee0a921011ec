//! Whether the broker is ready to serve clients, shared between the code
//! that starts and stops it and the `/ready` endpoint.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A shared ready flag; starts not ready.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    ready: Arc<AtomicBool>,
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
}
