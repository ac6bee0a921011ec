//! The async runtime a partition's Raft runs on: tokio, except for where
//! Raft's random numbers come from.
//!
//! Raft draws random numbers for its election timeouts and for the phase
//! of its first tick. In production they come from the operating system,
//! as with openraft's own tokio runtime. A replica opened with a seed
//! ([`RaftTiming::seed`](crate::RaftTiming)) draws them instead from a
//! sequence fixed by that seed: every task Raft spawns inherits a seed
//! derived from its parent's, so a simulated cluster's timeouts follow
//! from one number (the simulation in `tests/simulation.rs`).
//!
//! A draw outside any seeded task, or by a replica opened without a seed,
//! falls back to the operating system's randomness, never a panic: an
//! openraft call that spawns from the caller's task is safe either way.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use openraft::rt::{AsyncRuntime, OptionalSend};
use openraft_rt_tokio::TokioRuntime;
use rand::rngs::SmallRng;
use rand::SeedableRng;

tokio::task_local! {
    /// The seed of the running task's next draw or spawn, when seeded.
    static SEED: Cell<u64>;
}

/// Runs `future` with Raft's random draws taken from `seed` (see the
/// module's documentation).
pub fn seeded<F: Future>(seed: u64, future: F) -> impl Future<Output = F::Output> {
    SEED.scope(Cell::new(seed), future)
}

/// SplitMix64's finaliser over `seed + gamma`: a bijection with good
/// avalanche, so sequences drawn with different `gamma`s are independent.
fn mix(seed: u64, gamma: u64) -> u64 {
    let mut z = seed.wrapping_add(gamma);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Steps the task's sequence past one draw or spawn.
const STEP: u64 = 0x9e37_79b9_7f4a_7c15;
/// Turns a parent's seed into its child's: a different gamma from
/// [`STEP`], so a child's sequence never replays its parent's.
const CHILD: u64 = 0xd1b5_4a32_d192_ed03;

/// The running task's current seed, moving it on; `None` outside a seeded
/// task.
fn take_seed() -> Option<u64> {
    SEED.try_with(|seed| {
        let now = seed.get();
        seed.set(mix(now, STEP));
        now
    })
    .ok()
}

/// tokio, with Raft's random draws seedable (see the module's
/// documentation).
#[derive(Debug)]
pub struct HeraldRuntime {
    inner: TokioRuntime,
}

impl AsyncRuntime for HeraldRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = <TokioRuntime as AsyncRuntime>::Instant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> =
        <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = SmallRng;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        match take_seed() {
            Some(parent) => TokioRuntime::spawn(seeded(mix(parent, CHILD), future)),
            None => TokioRuntime::spawn(future),
        }
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        match take_seed() {
            Some(seed) => SmallRng::seed_from_u64(seed),
            None => SmallRng::from_rng(&mut rand::rng()),
        }
    }

    type Mpsc = <TokioRuntime as AsyncRuntime>::Mpsc;
    type Watch = <TokioRuntime as AsyncRuntime>::Watch;
    type Oneshot = <TokioRuntime as AsyncRuntime>::Oneshot;
    type Mutex<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::Mutex<T>;

    fn new(threads: usize) -> Self {
        Self {
            inner: TokioRuntime::new(threads),
        }
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.inner.block_on(future)
    }
}

#[cfg(test)]
mod tests {
    use rand::RngExt as _;

    use super::*;

    fn draws() -> Vec<u64> {
        (0..4)
            .map(|_| HeraldRuntime::thread_rng().random_range(0..u64::MAX))
            .collect()
    }

    #[tokio::test]
    async fn a_seed_fixes_every_draw_of_a_task_and_of_its_children() {
        let run = || async {
            let own = draws();
            let child = HeraldRuntime::spawn(async { draws() }).await.unwrap();
            (own, child)
        };
        let first = seeded(7, run()).await;
        let again = seeded(7, run()).await;
        let other = seeded(8, run()).await;
        assert_eq!(first, again);
        assert_ne!(first, other);
        // A child's sequence is not its parent's.
        assert_ne!(first.0, first.1);
    }

    #[tokio::test]
    async fn without_a_seed_draws_come_from_the_system() {
        let child = HeraldRuntime::spawn(async { draws() }).await.unwrap();
        assert_ne!(draws(), child);
    }
}
