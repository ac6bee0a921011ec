//! Provisioning of segment space ahead of the writers, off the append path.
//!
//! New storage pages are expensive: the kernel must allocate and zero each
//! one. Measured on tmpfs, that cost is several times the copy of the batch
//! itself, so a writer that paid it inline would append at a fraction of
//! memory bandwidth. One background thread per process keeps every active
//! segment allocated and mapped `LOOKAHEAD_STEPS` preallocation steps ahead
//! of its reservations. A writer that overtakes it still allocates for itself
//! (correctness never depends on this thread), and a request is sent at most
//! once per segment at a time. Well ahead of the writers, it yields its core
//! between 1 MiB pieces (`MappedFile::provision`), so that at light load the
//! request threads are not kept waiting behind page work nobody needs yet.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock, Weak};

use crate::segment::Segment;

/// How many preallocation steps the provisioner keeps ready past the
/// reserved end.
pub(crate) const LOOKAHEAD_STEPS: u64 = 4;

fn sender() -> &'static Mutex<Option<Sender<Weak<Segment>>>> {
    static SENDER: OnceLock<Mutex<Option<Sender<Weak<Segment>>>>> = OnceLock::new();
    SENDER.get_or_init(|| {
        let (tx, rx) = channel::<Weak<Segment>>();
        let spawned = std::thread::Builder::new()
            .name("herald-provision".into())
            .spawn(move || {
                while let Ok(segment) = rx.recv() {
                    if let Some(segment) = segment.upgrade() {
                        segment.provision_ahead();
                    }
                }
            });
        // Without the thread, writers allocate for themselves: slower, not wrong.
        Mutex::new(spawned.ok().map(|_| tx))
    })
}

/// Asks the provisioner to run ahead of `segment`'s writers.
pub(crate) fn request(segment: Weak<Segment>) {
    // The lock is taken once per preallocation step of a segment, never per
    // append.
    let guard = sender().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tx) = guard.as_ref() {
        let _ = tx.send(segment);
    }
}
