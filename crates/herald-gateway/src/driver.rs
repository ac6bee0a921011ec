//! One session, whatever carries it: reads the client's messages and acts
//! on them, and writes what the engine queued. gRPC and WebSocket both
//! hand their streams to [`drive`].
//!
//! Two tasks: this one reads (and may wait on a subscribe's lookups or a
//! publish's append), the writer drains the session's outbox and the
//! replies, taking everything queued in one go. A slow client therefore
//! never holds up the tailers: they queue into the bounded outbox and the
//! engine moves the client to catch-up when it is full.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use herald_push::{Credit, PushEngine, PushStats, Session};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::convert::{self, message, Refused};
use crate::proto::{
    self, client_message, server_message::Kind, ClientMessage, GoAwayReason, ServerMessage,
};

/// Most bytes of deliveries written in one message.
pub(crate) const DELIVERIES_MESSAGE_BYTES: usize = 1024 * 1024;

/// Replies the reader may queue for the writer before it waits.
const REPLIES_QUEUED: usize = 256;

/// What a transport read instead of a message.
#[derive(Debug)]
pub(crate) enum Unreadable {
    /// Bytes that are not a `ClientMessage` (or a frame of the wrong kind).
    Malformed(String),
    /// A message larger than the limit (its size, when the transport
    /// says).
    TooLarge(Option<usize>),
}

/// A message on its way to the transport, boxed so that the channels
/// between the session's tasks cost a pointer per slot: their buffers are
/// allocated per session, and most sessions sit idle.
pub(crate) type Outgoing = Box<ServerMessage>;

/// How a session ends on the broker's side.
fn go_away(reason: GoAwayReason, text: impl Into<String>, retry_after_ms: u32) -> Outgoing {
    Box::new(message(Kind::GoAway(proto::GoAway {
        reason: reason as i32,
        message: text.into(),
        retry_after_ms,
    })))
}

/// Runs one session until the client closes its stream, sends something
/// unreadable, or `shutdown` fires; writes into `out` (whose receiver the
/// transport sends from).
pub(crate) async fn drive<S>(
    engine: Arc<PushEngine>,
    mut incoming: S,
    out: mpsc::Sender<Outgoing>,
    max_message_bytes: usize,
    shutdown: CancellationToken,
) where
    S: Stream<Item = Result<ClientMessage, Unreadable>> + Unpin,
{
    let mut session = match engine.open_session(Credit::default()) {
        Ok(session) => session,
        Err(full) => {
            let _ = out
                .send(go_away(
                    GoAwayReason::TooManyConnections,
                    full.to_string(),
                    1000,
                ))
                .await;
            return;
        }
    };
    let config = engine.config();
    let welcome = message(Kind::Welcome(proto::Welcome {
        max_subscriptions: u32::try_from(config.max_subscriptions_per_session).unwrap_or(u32::MAX),
        max_message_bytes: u32::try_from(max_message_bytes).unwrap_or(u32::MAX),
        queue_bytes: config.queue_bytes as u64,
    }));
    if out.send(Box::new(welcome)).await.is_err() {
        return;
    }
    let (replies, replies_rx) = mpsc::channel(REPLIES_QUEUED);
    let stats = Arc::clone(engine.stats());
    let writer = tokio::spawn(write(
        Arc::clone(session.outbox()),
        replies_rx,
        out,
        Arc::clone(&stats),
    ));
    let mut first = true;
    loop {
        let next = tokio::select! {
            next = incoming.next() => next,
            _ = shutdown.cancelled() => {
                PushStats::add(&stats.disconnects_shutdown, 1);
                let _ = replies.send(go_away(GoAwayReason::Shutdown, "the broker is shutting down", 1000)).await;
                break;
            }
        };
        let client_message = match next {
            None => {
                PushStats::add(&stats.disconnects_client, 1);
                break;
            }
            Some(Ok(message)) => message,
            Some(Err(Unreadable::TooLarge(size))) => {
                PushStats::add(&stats.disconnects_message_too_large, 1);
                let text = match size {
                    Some(size) => format!(
                        "a message of {size} bytes exceeds the limit of {max_message_bytes} bytes"
                    ),
                    None => format!("a message exceeds the limit of {max_message_bytes} bytes"),
                };
                let _ = replies
                    .send(go_away(GoAwayReason::MessageTooLarge, text, 0))
                    .await;
                break;
            }
            Some(Err(Unreadable::Malformed(why))) => {
                PushStats::add(&stats.disconnects_protocol_error, 1);
                let _ = replies
                    .send(go_away(GoAwayReason::ProtocolError, why, 0))
                    .await;
                break;
            }
        };
        let opening = std::mem::replace(&mut first, false);
        if !handle(&engine, &mut session, client_message, opening, &replies).await {
            break;
        }
    }
    // Closing the session closes its outbox; the writer sends what replies
    // remain (a go-away) and stops.
    drop(replies);
    drop(session);
    let _ = writer.await;
}

/// Acts on one client message; false if the session must end.
async fn handle(
    engine: &PushEngine,
    session: &mut Session,
    request: ClientMessage,
    opening: bool,
    replies: &mpsc::Sender<Outgoing>,
) -> bool {
    let reply = |m: ServerMessage| async move { replies.send(Box::new(m)).await.is_ok() };
    match request.kind {
        None => {
            let text = "a message without a kind (sent by a newer client?)";
            return reply(Refused::invalid(text).to_message(0, 0)).await;
        }
        Some(client_message::Kind::Hello(hello)) => {
            if !opening {
                return reply(
                    Refused::invalid("hello must be a session's first message").to_message(0, 0),
                )
                .await;
            }
            if let Some(credit) = hello.initial_credit {
                session.outbox().set_credit(Credit {
                    messages: Some(credit.messages),
                    bytes: Some(credit.bytes),
                });
            }
            if !hello.client_name.is_empty() {
                tracing::debug!(client = %hello.client_name, "push session opened");
            }
            for token in hello.resume_tokens {
                if let Err(e) = session.resume(&token).await {
                    if !reply(convert::subscribe_refused(&e).to_message(0, 0)).await {
                        return false;
                    }
                }
            }
        }
        Some(client_message::Kind::Subscribe(subscribe)) => {
            let id = subscribe.subscription_id;
            let result = match convert::subscribe_request(subscribe) {
                Ok(request) => session
                    .subscribe(request)
                    .await
                    .map_err(|e| convert::subscribe_refused(&e)),
                Err(refused) => Err(refused),
            };
            if let Err(refused) = result {
                return reply(refused.to_message(id, 0)).await;
            }
        }
        Some(client_message::Kind::Unsubscribe(unsubscribe)) => {
            let id = unsubscribe.subscription_id;
            if !session.unsubscribe(id) {
                let refused = Refused {
                    code: proto::ErrorCode::UnknownSubscription,
                    message: format!("no subscription {id} on this session"),
                };
                return reply(refused.to_message(id, 0)).await;
            }
        }
        Some(client_message::Kind::Ack(ack)) => {
            let id = ack.subscription_id;
            let answer = match session.ack(id, ack.partition, ack.offset) {
                Ok(token) => message(Kind::Checkpoint(proto::Checkpoint {
                    subscription_id: id,
                    resume_token: token.into(),
                })),
                Err(e) => convert::ack_refused(&e).to_message(id, 0),
            };
            return reply(answer).await;
        }
        Some(client_message::Kind::Credit(credit)) => session.grant(credit.messages, credit.bytes),
        Some(client_message::Kind::Publish(request)) => {
            return reply(publish(engine, request).await).await;
        }
    }
    true
}

/// Publishes one request; the `Published` (or `Error`) message answering it.
pub(crate) async fn publish(engine: &PushEngine, request: proto::PublishRequest) -> ServerMessage {
    message(Kind::Published(publish_result(engine, request).await))
}

/// Publishes one request and answers where it went, or why not.
pub(crate) async fn publish_result(
    engine: &PushEngine,
    request: proto::PublishRequest,
) -> proto::PublishResult {
    let request_id = request.request_id;
    let outcome = match convert::publish_record(request) {
        Ok(record) => engine
            .publish(record)
            .await
            .map_err(|e| convert::publish_refused(&e)),
        Err(refused) => Err(refused),
    };
    match outcome {
        Ok(published) => proto::PublishResult {
            request_id,
            partition: published.partition,
            offset: published.offset,
            error: None,
        },
        Err(refused) => proto::PublishResult {
            request_id,
            partition: 0,
            offset: 0,
            error: Some(proto::Error {
                code: refused.code as i32,
                message: refused.message,
                subscription_id: 0,
                request_id,
            }),
        },
    }
}

/// The writer: replies first, then whatever the outbox holds, all of it in
/// as few messages as fit.
async fn write(
    outbox: Arc<herald_push::Outbox>,
    mut replies: mpsc::Receiver<Outgoing>,
    out: mpsc::Sender<Outgoing>,
    stats: Arc<PushStats>,
) {
    let mut outbox_open = true;
    let mut messages = Vec::new();
    loop {
        tokio::select! {
            biased;
            reply = replies.recv() => match reply {
                Some(reply) => {
                    if out.send(reply).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            events = outbox.take(DELIVERIES_MESSAGE_BYTES), if outbox_open => match events {
                Some(events) => {
                    stats.record_written(&events);
                    convert::server_messages(events, &mut messages);
                    for m in messages.drain(..) {
                        if out.send(Box::new(m)).await.is_err() {
                            return;
                        }
                    }
                }
                None => outbox_open = false,
            },
        }
    }
}

/// How long a transport waits for a closing session to finish writing.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(5);
