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

/// How many steps ahead of the writers the provisioner must be before it
/// yields its core between pieces. Writers ask for provisioning once they
/// come within half of `LOOKAHEAD_STEPS` of the allocated end, so below 2
/// steps it is running late and must not yield.
pub(crate) const UNHURRIED_STEPS: u64 = 2;

/// The policy: when to ask, how far to go, when to give way. Pure
/// functions of positions in bytes, so the numbers live in one place and
/// are tested here; `MappedFile` does the allocating and `Segment` the
/// asking.
pub(crate) mod policy {
    use super::{LOOKAHEAD_STEPS, UNHURRIED_STEPS};

    /// True if writers that reserved up to `reserved_end` are within half
    /// the lookahead of `allocated` (never counting past the mapping's
    /// `map_len`, where there is nothing left to allocate).
    pub(crate) fn wants_allocation(
        reserved_end: u64,
        allocated: u64,
        step: u64,
        map_len: u64,
    ) -> bool {
        let ahead = (reserved_end + step * LOOKAHEAD_STEPS / 2).min(map_len);
        ahead > allocated
    }

    /// Where background provisioning allocates to: the lookahead past
    /// `reserved_end`, rounded up to whole steps so that allocations (and
    /// the page ranges populated after them) stay aligned.
    pub(crate) fn target(reserved_end: u64, step: u64) -> u64 {
        let step = step.max(1);
        (reserved_end + step * LOOKAHEAD_STEPS).div_ceil(step) * step
    }

    /// True if allocating up to `to` is far enough ahead of the writers at
    /// `writers_at` that the provisioner may yield its core (the page work
    /// can wait for the request threads).
    pub(crate) fn unhurried(to: u64, writers_at: Option<u64>, step: u64) -> bool {
        writers_at.is_some_and(|at| to >= at.saturating_add(step.max(1) * UNHURRIED_STEPS))
    }

    /// True once writers reserved past the middle of a segment of
    /// `capacity` bytes: time to prepare its successor, so the roll finds
    /// a file ready.
    pub(crate) fn wants_successor(reserved_end: u64, capacity: u64) -> bool {
        reserved_end >= capacity / 2
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        const MIB: u64 = 1 << 20;

        #[test]
        fn writers_ask_for_allocation_within_half_the_lookahead() {
            // 8 MiB steps: asked once the writers are within 16 MiB.
            assert!(!wants_allocation(0, 16 * MIB, 8 * MIB, 1 << 30));
            assert!(wants_allocation(MIB, 16 * MIB, 8 * MIB, 1 << 30));
            // Never past the mapping: a fully allocated segment asks nothing.
            assert!(!wants_allocation(60 * MIB, 64 * MIB, 8 * MIB, 64 * MIB));
        }

        #[test]
        fn the_target_is_the_lookahead_in_whole_steps() {
            assert_eq!(target(0, 8 * MIB), 32 * MIB);
            assert_eq!(target(MIB, 8 * MIB), 40 * MIB);
            assert_eq!(target(8 * MIB, 8 * MIB), 40 * MIB);
            assert_eq!(target(5, 0), 9, "a zero step counts as one byte");
        }

        #[test]
        fn the_provisioner_gives_way_only_two_steps_ahead_of_live_writers() {
            assert!(unhurried(24 * MIB, Some(8 * MIB), 8 * MIB));
            assert!(!unhurried(23 * MIB, Some(8 * MIB), 8 * MIB));
            assert!(
                !unhurried(u64::MAX, None, 8 * MIB),
                "no writers: a prepared successor"
            );
        }

        #[test]
        fn a_successor_is_wanted_from_the_middle_of_the_segment() {
            assert!(!wants_successor(511, 1024));
            assert!(wants_successor(512, 1024));
        }
    }
}

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

/// Starts the provisioner thread if it has not started. A thread inherits
/// its creator's CPU priority: a caller about to lower its own starts it
/// first, so the provisioner never runs at background priority.
pub fn start() {
    let _ = sender();
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
