//! A session's publishes in flight: several at once, stored and answered
//! in the order they came.
//!
//! Awaiting each publish before reading the next would cost a publisher
//! one durability wait per message: an fsync, or on a replicated
//! partition a commit. Here a publish is started as soon as it is read;
//! its record is placed in the partition's order when it starts (see
//! [`PreparedPublish::keeps_order`]), and its answer waits in a queue
//! behind the answers of those before it. A publish whose order the
//! partition cannot promise (one forwarded to a leader on another node)
//! waits until nothing is in flight, and nothing starts behind it until
//! it is answered.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use futures_util::stream::FuturesOrdered;
use futures_util::StreamExt as _;
use herald_push::{Identity, PreparedPublish, PublishError, Published, PushEngine};

use crate::convert;
use crate::proto;

/// Most publishes a session keeps in flight; past it the session stops
/// reading its client's messages until one is answered, so a publisher
/// that outruns the log meets back-pressure on its own connection.
pub(crate) const PUBLISHES_IN_FLIGHT_MAX: usize = 256;

/// A publish's answer, once known.
type Answer = Pin<Box<dyn Future<Output = proto::PublishResult> + Send>>;

/// A publish read but not started: it would be forwarded, or is behind one
/// that was.
struct Parked {
    request_id: u64,
    prepared: PreparedPublish,
}

/// The publishes of one session (or one publish stream) in flight.
#[derive(Default)]
pub(crate) struct Publishes {
    /// Answers in request order; allocated on the first publish, since
    /// most sessions never publish.
    queue: Option<Box<FuturesOrdered<Answer>>>,
    /// Whether a publish whose order is not kept is in the queue.
    unordered_in_flight: bool,
    parked: Option<Parked>,
}

impl Publishes {
    /// Whether no publish awaits its answer (none in flight, none parked).
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight() == 0 && self.parked.is_none()
    }

    /// Whether the session may read its client's next message: fewer than
    /// the most in flight, and no publish parked.
    pub(crate) fn accepts_requests(&self) -> bool {
        self.parked.is_none() && self.in_flight() < PUBLISHES_IN_FLIGHT_MAX
    }

    fn in_flight(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.len())
    }

    /// Starts one publish; its answer comes from [`Publishes::next`], after
    /// the answers of every publish started before it.
    pub(crate) async fn start(
        &mut self,
        engine: &PushEngine,
        identity: &mut Identity,
        request: proto::PublishRequest,
    ) {
        let request_id = request.request_id;
        let prepared = match convert::publish_record(request) {
            Ok(record) => engine.prepare_publish(identity, record),
            Err(refused) => {
                self.push_ready(refused_result(request_id, refused, 0));
                return;
            }
        };
        match prepared {
            Err(e) => self.push_ready(result(request_id, Err(e))),
            Ok(prepared) => {
                let parked = Parked {
                    request_id,
                    prepared,
                };
                if self.may_start(&parked) {
                    self.launch(parked).await;
                } else {
                    self.parked = Some(parked);
                }
            }
        }
    }

    /// The next answer, in request order; pending forever when nothing is
    /// in flight. Cancel-safe: an answer is only taken when it is returned.
    pub(crate) async fn next(&mut self) -> proto::PublishResult {
        let Some(queue) = self.queue.as_mut().filter(|q| !q.is_empty()) else {
            return std::future::pending().await;
        };
        let Some(answer) = queue.next().await else {
            return std::future::pending().await;
        };
        if queue.is_empty() {
            self.unordered_in_flight = false;
            // Most sessions publish now and then: their queue goes.
            self.queue = None;
            if let Some(parked) = self.parked.take() {
                self.launch(parked).await;
            }
        }
        answer
    }

    fn may_start(&self, publish: &Parked) -> bool {
        self.in_flight() == 0 || (publish.prepared.keeps_order() && !self.unordered_in_flight)
    }

    /// Starts the append and polls it once at once, which places an
    /// order-keeping record before any later publish can be placed.
    async fn launch(&mut self, publish: Parked) {
        let Parked {
            request_id,
            prepared,
        } = publish;
        if !prepared.keeps_order() {
            self.unordered_in_flight = true;
        }
        let mut answer: Answer =
            Box::pin(async move { result(request_id, prepared.append().await) });
        let first = std::future::poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx))).await;
        match first {
            Poll::Ready(done) => self.push_ready(done),
            Poll::Pending => self.queue().push_back(answer),
        }
    }

    fn push_ready(&mut self, done: proto::PublishResult) {
        self.queue()
            .push_back(Box::pin(std::future::ready(done)) as Answer);
    }

    fn queue(&mut self) -> &mut FuturesOrdered<Answer> {
        self.queue.get_or_insert_with(Default::default)
    }
}

/// A publish's answer: where it went, or why not.
pub(crate) fn result(
    request_id: u64,
    outcome: Result<Published, PublishError>,
) -> proto::PublishResult {
    match outcome {
        Ok(published) => proto::PublishResult {
            request_id,
            partition: published.partition,
            offset: published.offset,
            error: None,
        },
        Err(e) => refused_result(
            request_id,
            convert::publish_refused(&e),
            convert::publish_retry_after_ms(&e),
        ),
    }
}

/// A publish's answer when it is refused.
pub(crate) fn refused_result(
    request_id: u64,
    refused: convert::Refused,
    retry_after_ms: u32,
) -> proto::PublishResult {
    proto::PublishResult {
        request_id,
        partition: 0,
        offset: 0,
        error: Some(proto::Error {
            code: refused.code as i32,
            message: refused.message,
            subscription_id: 0,
            request_id,
            retry_after_ms,
        }),
    }
}
