//! The atomics of the map's protocol: loom's under `--cfg herald_loom`, so
//! that the models in `loom_tests` check every interleaving of them.

#[cfg(herald_loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(herald_loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
