//! The periodic maintenance task: a plain thread (the core does not depend
//! on an async runtime) that calls [`Broker::maintain`] at the configured
//! interval until stopped.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::SystemTime;

use herald_log::FlushPolicy;

use crate::broker::Broker;

/// Handle of the running maintenance thread; stops it when dropped.
#[derive(Debug)]
pub struct Maintenance {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Maintenance {
    /// Starts maintaining `broker` every `maintenance_interval` (or every
    /// flush interval, if that is shorter).
    pub fn start(broker: Arc<Broker>) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let config = broker.config();
        // An interval flush happens from maintenance, so maintenance must run
        // at least as often as the flush interval asks.
        let every = match config.log_defaults.flush {
            FlushPolicy::Interval(flush_every) => config.maintenance_interval.min(flush_every),
            _ => config.maintenance_interval,
        };
        let thread = std::thread::Builder::new()
            .name("herald-maintenance".into())
            .spawn(move || {
                // A message or a dropped sender both end the loop.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    broker.maintain(SystemTime::now());
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for a maintenance pass in progress.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("maintenance thread panicked");
            }
        }
    }
}

impl Drop for Maintenance {
    fn drop(&mut self) {
        self.shutdown();
    }
}
