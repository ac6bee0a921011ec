//! When what a writer took out of the map may be freed: `seize`, whose
//! guards keep anything retired while they live; under loom (which cannot
//! run `seize`'s own atomics) nothing is freed before the map drops, which
//! leaves the models to check the slot protocol itself.
//!
//! Writers retire through a guard of their own ([`retire`]), so that what
//! they retire is not freed before that guard drops: a writer may still
//! hold references into an array it has just replaced.

use super::sync::{AtomicPtr, Ordering};

#[cfg(not(herald_loom))]
pub(crate) use seize::Collector;

/// Keeps what it loads (and, for a writer, what it retires) alive while
/// it lives.
#[cfg(not(herald_loom))]
pub(crate) type Guard<'c> = seize::LocalGuard<'c>;

/// Enters a guard of `collector`.
#[cfg(not(herald_loom))]
pub(crate) fn enter(collector: &Collector) -> Guard<'_> {
    collector.enter()
}

/// Loads `pointer`, keeping what it points to alive for `guard`'s life.
#[cfg(not(herald_loom))]
pub(crate) fn protect<T>(guard: &Guard<'_>, pointer: &AtomicPtr<T>) -> *mut T {
    seize::Guard::protect(guard, pointer, Ordering::SeqCst)
}

/// Frees the `Box` at `pointer` once `guard` has dropped and no guard of
/// another thread entered before this call is left.
///
/// # Safety
///
/// `pointer` came from `Box::into_raw`, is retired once, and no reader
/// that enters a guard from now on can reach it.
#[cfg(not(herald_loom))]
pub(crate) unsafe fn retire<T: 'static>(guard: &Guard<'_>, pointer: *mut T) {
    // SAFETY: the caller's promise.
    unsafe { seize::Guard::defer_retire(guard, pointer, seize::reclaim::boxed) }
}

/// Under loom: everything retired, freed when the map drops.
#[cfg(herald_loom)]
#[derive(Default)]
pub(crate) struct Collector(std::sync::Mutex<Vec<Box<dyn Send>>>);

#[cfg(herald_loom)]
impl Collector {
    /// A collector that has retired nothing.
    pub(crate) fn new() -> Self {
        Self::default()
    }
}

/// Under loom a guard is only a way back to its collector.
#[cfg(herald_loom)]
pub(crate) type Guard<'c> = &'c Collector;

/// Enters a guard of `collector`.
#[cfg(herald_loom)]
pub(crate) fn enter(collector: &Collector) -> Guard<'_> {
    collector
}

/// Loads `pointer`.
#[cfg(herald_loom)]
pub(crate) fn protect<T>(_guard: &Guard<'_>, pointer: &AtomicPtr<T>) -> *mut T {
    pointer.load(Ordering::SeqCst)
}

/// Keeps the `Box` at `pointer` until the map drops.
///
/// # Safety
///
/// As outside loom.
#[cfg(herald_loom)]
pub(crate) unsafe fn retire<T: 'static>(guard: &Guard<'_>, pointer: *mut T) {
    /// Owns what a retired pointer points to.
    struct Retired<T>(*mut T);
    // SAFETY: only dropped, with the map, on the thread dropping it.
    unsafe impl<T> Send for Retired<T> {}
    impl<T> Drop for Retired<T> {
        fn drop(&mut self) {
            // SAFETY: from `Box::into_raw`, retired once.
            drop(unsafe { Box::from_raw(self.0) });
        }
    }
    if let Ok(mut retired) = guard.0.lock() {
        retired.push(Box::new(Retired(pointer)));
    }
}
