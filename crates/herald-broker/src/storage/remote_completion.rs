//! The completion of an append that a backend answers over a network (a
//! Raft quorum, a relay's upstream): a boxed future, since its steps are
//! the backend's own async code. The embedded log's fast path never pays
//! for the box: it has a completion of its own.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{Appended, StorageError};

/// Completes an append answered remotely.
pub struct RemoteCompletion(Pin<Box<dyn Future<Output = Result<Appended, StorageError>> + Send>>);

impl RemoteCompletion {
    /// The completion that `answer` resolves.
    pub(crate) fn new(
        answer: impl Future<Output = Result<Appended, StorageError>> + Send + 'static,
    ) -> Self {
        Self(Box::pin(answer))
    }

    /// The completion that an already boxed `answer` resolves (one box,
    /// not two, for a backend that chose among futures).
    #[cfg(feature = "cluster")]
    pub(crate) fn from_box(
        answer: Pin<Box<dyn Future<Output = Result<Appended, StorageError>> + Send>>,
    ) -> Self {
        Self(answer)
    }
}

impl std::fmt::Debug for RemoteCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemoteCompletion")
    }
}

impl Future for RemoteCompletion {
    type Output = Result<Appended, StorageError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}
