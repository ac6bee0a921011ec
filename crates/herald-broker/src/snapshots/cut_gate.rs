//! The gate that makes a cut across partitions consistent.
//!
//! A cut reads one offset per partition, one partition after another. A
//! client could otherwise see a record of a partition already read past
//! (so the cut excludes it), and then produce a record the cut includes
//! to a partition read later: the cut would hold an effect without its
//! cause. Every answer that shows records to a client (a fetch, a
//! produce acknowledgement, a push delivery) therefore passes the gate
//! after it is built and before it is sent; while a cut is being read the
//! gate is closed and such answers wait (microseconds: the cut reads two
//! atomics per partition). So nothing a client learns after the cut began
//! can reach a partition the cut has not read yet.
//!
//! What passes it: Fetch and Produce answers (herald-kafka), push publish
//! acknowledgements and push deliveries (herald-push: an outbox checks it
//! with [`CutGate::is_open`] before it hands deliveries out, so a take
//! that is cancelled never loses what it took).
//!
//! Ordering: the cut stores `closed` and fences before reading the
//! partitions; an answer fences after reading its records and before
//! loading `closed`. With both fences sequentially consistent, either the
//! answer sees the gate closed (and waits), or the cut sees every record
//! the answer carries (so they lie inside the cut).

use std::sync::atomic::{fence, AtomicBool, Ordering};

use event_listener::{Event, Listener};

/// The gate; one per broker.
#[derive(Debug, Default)]
pub struct CutGate {
    closed: AtomicBool,
    opened: Event,
}

impl CutGate {
    /// Resolves at once unless a cut is being read, then once it is done.
    /// Call it after an answer's records are read and before it is sent.
    pub async fn pass(&self) {
        fence(Ordering::SeqCst);
        if !self.closed.load(Ordering::SeqCst) {
            return;
        }
        loop {
            let listener = self.opened.listen();
            if !self.closed.load(Ordering::SeqCst) {
                return;
            }
            listener.await;
        }
    }

    /// Whether no cut is being read now; true means whatever was read
    /// before this call lies inside any cut that starts after it.
    pub fn is_open(&self) -> bool {
        fence(Ordering::SeqCst);
        !self.closed.load(Ordering::SeqCst)
    }

    /// [`CutGate::pass`] for a thread that may block.
    pub fn pass_blocking(&self) {
        fence(Ordering::SeqCst);
        while self.closed.load(Ordering::SeqCst) {
            let listener = self.opened.listen();
            if !self.closed.load(Ordering::SeqCst) {
                return;
            }
            listener.wait();
        }
    }

    /// Runs `read` with the gate closed. Cuts must not overlap: the caller
    /// serializes them.
    pub(crate) fn closed_while<T>(&self, read: impl FnOnce() -> T) -> T {
        struct Reopen<'a>(&'a CutGate);
        impl Drop for Reopen<'_> {
            fn drop(&mut self) {
                self.0.closed.store(false, Ordering::SeqCst);
                self.0.opened.notify(usize::MAX);
            }
        }
        self.closed.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let _reopen = Reopen(self);
        read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_waits_while_a_cut_is_read_and_passes_after() {
        let gate = Arc::new(CutGate::default());
        gate.pass().await;
        let (inside, inside_rx) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let cutting = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || {
                gate.closed_while(|| {
                    inside.send(()).unwrap();
                    release_rx.recv().unwrap();
                })
            })
        };
        inside_rx.recv().unwrap();
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.pass().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "an answer must wait for the cut");
        release.send(()).unwrap();
        cutting.join().unwrap();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the answer passes once the cut is read")
            .unwrap();
        gate.pass_blocking();
    }
}
