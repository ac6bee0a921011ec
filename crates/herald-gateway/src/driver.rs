//! One session, whatever carries it: reads the client's messages and acts
//! on them, and writes what the engine queued. gRPC and WebSocket both
//! hand their streams to [`drive`].
//!
//! One task per session, which reads the client's messages, answers them,
//! and writes everything the session's outbox holds in one go. A slow
//! client therefore never holds up the tailers: they queue into the
//! bounded outbox and the engine moves the client to catch-up when it is
//! full. One task, not a reader and a writer, because most sessions sit
//! idle and each task and queue is memory per connection.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt as _, Stream, StreamExt};
use std::net::SocketAddr;

use herald_push::{Credit, Identity, PushEngine, PushStats, Session};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::auth::{self, Known, LoginOutcome, LOGIN_DEADLINE};
use crate::convert::{self, message, DeliveryRun, Part, Refused};
use crate::proto::{
    self, client_message, server_message::Kind, ClientMessage, GoAwayReason, ServerMessage,
};
use crate::publishes::{self, Publishes};
use crate::server::Shared;

/// Most bytes of deliveries written in one message.
pub(crate) const DELIVERIES_MESSAGE_BYTES: usize = 1024 * 1024;
/// Most bytes of events taken from the outbox for one write: large enough
/// to batch, small enough that a high-priority delivery queued meanwhile
/// waits for little.
const TAKE_BYTES: usize = 256 * 1024;

/// What a transport read instead of a message.
#[derive(Debug)]
pub(crate) enum Unreadable {
    /// Bytes that are not a `ClientMessage` (or a frame of the wrong kind).
    Malformed(String),
    /// A message larger than the limit (its size, when the transport
    /// says).
    TooLarge(Option<usize>),
}

/// Where a session's messages go: the transport's side of the writer.
pub(crate) trait Transmit: Send + 'static {
    /// Sends one message, or buffers it until [`Transmit::flush`]; false
    /// once the client is gone.
    fn transmit(&mut self, message: Outgoing) -> impl std::future::Future<Output = bool> + Send;

    /// Sends consecutive deliveries as one `Deliveries` message; false once
    /// the client is gone. A transport that writes bytes itself encodes
    /// them from each record's shared encoding ([`crate::encode`]) instead
    /// of building the message.
    fn transmit_deliveries(
        &mut self,
        run: DeliveryRun<'_>,
    ) -> impl std::future::Future<Output = bool> + Send {
        let message = Box::new(convert::deliveries_message(run.iter()));
        self.transmit(message)
    }

    /// Writes out what [`Transmit::transmit`] buffered; false once the
    /// client is gone. Transports that do not buffer need nothing here.
    fn flush(&mut self) -> impl std::future::Future<Output = bool> + Send {
        async { true }
    }

    /// Ends the stream once the session is over (a close frame, say).
    fn close(&mut self) -> impl std::future::Future<Output = ()> + Send {
        async {}
    }
}

impl Transmit for mpsc::Sender<Outgoing> {
    async fn transmit(&mut self, message: Outgoing) -> bool {
        self.send(message).await.is_ok()
    }
}

/// Steps a session takes without flushing its writer at most: a client
/// that keeps its requests coming still sees its answers this often.
const MAX_UNFLUSHED_STEPS: usize = 64;

/// What woke a session's task.
enum Step {
    /// The broker is shutting down.
    Shutdown,
    /// Events from the outbox (`None`: it closed).
    Events(Option<Vec<herald_push::Event>>),
    /// The client's next message (`None`: its stream ended).
    Incoming(Option<Result<ClientMessage, Unreadable>>),
    /// The answer to the oldest publish in flight.
    Published(proto::PublishResult),
}

/// Waits for whichever comes first: shutdown, events in the outbox, a
/// publish's answer, or the client's next message (read only while the
/// publishes in flight leave room). Each is cancel-safe, so a step that
/// was not ready may be dropped and asked for again.
async fn next_step<S>(
    shutdown: &CancellationToken,
    outbox: &herald_push::Outbox,
    take_bytes: usize,
    incoming: &mut S,
    publishes: &mut Publishes,
) -> Step
where
    S: Stream<Item = Result<ClientMessage, Unreadable>> + Unpin,
{
    let reading = publishes.accepts_requests();
    tokio::select! {
        _ = shutdown.cancelled() => Step::Shutdown,
        events = outbox.take(take_bytes) => Step::Events(events),
        answer = publishes.next() => Step::Published(answer),
        next = incoming.next(), if reading => Step::Incoming(next),
    }
}

/// A message on its way to the transport, boxed so that a transport's
/// queue (gRPC's response stream) costs a pointer per slot: its buffer is
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
/// unreadable, or `shutdown` fires; writes through `out`.
///
/// One task does everything: it waits for the client's next message, for
/// events in the session's outbox, for a publish's answer, or for
/// shutdown, whichever comes first, and writes all the outbox holds in one
/// go. While it handles a request (a subscribe's lookups) it does not
/// write; the outbox holds what arrives meanwhile, up to its bound.
/// Publishes are not awaited one by one: each is started as it is read
/// and answered, in order, once stored (see `publishes`).
pub(crate) async fn drive<S, T>(
    shared: Arc<Shared>,
    mut incoming: S,
    mut out: T,
    known: Known,
    peer: Option<SocketAddr>,
) where
    S: Stream<Item = Result<ClientMessage, Unreadable>> + Unpin + Send,
    T: Transmit,
{
    let engine = Arc::clone(&shared.engine);
    let max_message_bytes = shared.max_message_bytes;
    let shutdown = shared.shutdown.clone();
    let mut session = match engine.open_session(Credit::default()) {
        Ok(session) => session,
        Err(full) => {
            let away = go_away(GoAwayReason::TooManyConnections, full.to_string(), 1000);
            if out.transmit(away).await {
                out.close().await;
            }
            return;
        }
    };
    // The hello that logged in, with its other requests still to do.
    let mut opening_hello = None;
    match known {
        Known::Identity(identity) => {
            if let Err(over) = session.set_identity(identity) {
                let away = go_away(GoAwayReason::TooManyConnections, over.to_string(), 1000);
                if out.transmit(away).await {
                    out.close().await;
                }
                return;
            }
            if !out
                .transmit(welcome(&shared, &mut session, Vec::new()))
                .await
            {
                return;
            }
        }
        Known::MustLogIn => {
            let login = first_login(&shared, &mut session, &mut incoming, &mut out, peer);
            match tokio::time::timeout(LOGIN_DEADLINE, login).await {
                Ok(Ok(hello)) => opening_hello = Some(hello),
                Ok(Err(ending)) => {
                    let away = ending.unwrap_or_else(|| {
                        PushStats::add(&engine.stats().disconnects_protocol_error, 1);
                        go_away(GoAwayReason::AuthenticationFailed, AUTHENTICATION_FAILED, 0)
                    });
                    if out.transmit(away).await {
                        out.close().await;
                    }
                    return;
                }
                Err(_) => {
                    PushStats::add(&engine.stats().disconnects_protocol_error, 1);
                    let away =
                        go_away(GoAwayReason::AuthenticationFailed, AUTHENTICATION_FAILED, 0);
                    if out.transmit(away).await {
                        out.close().await;
                    }
                    return;
                }
            }
        }
    }
    let stats = Arc::clone(engine.stats());
    let outbox = Arc::clone(session.outbox());
    let mut first = opening_hello.is_none();
    let mut control = Vec::new();
    let mut publishes = Publishes::default();
    if let Some(hello) = opening_hello {
        let mut ctx = Handling {
            shared: &shared,
            session: &mut session,
            incoming: &mut incoming,
            out: &mut out,
            peer,
            publishes: &mut publishes,
        };
        if let Handled::End(ending) = hello_requests(&mut ctx, hello).await {
            if let Some(away) = ending {
                let _ = out.transmit(away).await;
            }
            out.close().await;
            return;
        }
    }
    // Steps taken since the last flush; the welcome waits in the buffer.
    let mut unflushed = 1usize;
    let ending = loop {
        // What is ready at once is done before flushing, so that the answers
        // to a pipelined run of requests, and the events that came meanwhile,
        // leave in one write rather than a system call each. Only when
        // nothing is ready, or after a bounded run, does the writer flush.
        let step = {
            let take_bytes = session.take_bytes(TAKE_BYTES);
            let next = next_step(
                &shutdown,
                &outbox,
                take_bytes,
                &mut incoming,
                &mut publishes,
            );
            tokio::pin!(next);
            match (&mut next).now_or_never() {
                Some(step) if unflushed < MAX_UNFLUSHED_STEPS => step,
                ready => {
                    if unflushed > 0 && !out.flush().await {
                        break None;
                    }
                    unflushed = 0;
                    match ready {
                        Some(step) => step,
                        None => next.await,
                    }
                }
            }
        };
        unflushed += 1;
        match step {
            Step::Shutdown => {
                PushStats::add(&stats.disconnects_shutdown, 1);
                break Some(go_away(
                    GoAwayReason::Shutdown,
                    "the broker is shutting down",
                    1000,
                ));
            }
            Step::Events(events) => {
                let Some(events) = events else { break None };
                stats.record_written(&events);
                if !write_events(&mut out, &mut session, &events, &mut control, &shutdown).await {
                    break None;
                }
            }
            Step::Published(answer) => {
                let answer = Box::new(message(Kind::Published(answer)));
                if !out.transmit(answer).await {
                    break None;
                }
            }
            Step::Incoming(next) => {
                let client_message = match next {
                    None => {
                        PushStats::add(&stats.disconnects_client, 1);
                        break None;
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
                        break Some(go_away(GoAwayReason::MessageTooLarge, text, 0));
                    }
                    Some(Err(Unreadable::Malformed(why))) => {
                        PushStats::add(&stats.disconnects_protocol_error, 1);
                        break Some(go_away(GoAwayReason::ProtocolError, why, 0));
                    }
                };
                let opening = std::mem::replace(&mut first, false);
                let mut ctx = Handling {
                    shared: &shared,
                    session: &mut session,
                    incoming: &mut incoming,
                    out: &mut out,
                    peer,
                    publishes: &mut publishes,
                };
                // Boxed: handling a request needs far more state than
                // waiting for one, and most sessions wait; inline, every
                // idle session would carry it.
                let handled = Box::pin(handle(&mut ctx, client_message, opening));
                if let Handled::End(ending) = handled.await {
                    break ending;
                }
            }
        }
    };
    drop(session);
    if ending.is_some() {
        // A session that ends in order answers what it already took.
        let answered = answer_in_flight(&mut publishes, &mut out);
        let _ = tokio::time::timeout(CLOSE_GRACE, answered).await;
    }
    if let Some(away) = ending {
        let _ = out.transmit(away).await;
    }
    out.close().await;
}

/// Sends the answers of every publish still in flight, in order; false
/// once the client is gone.
async fn answer_in_flight<T: Transmit>(publishes: &mut Publishes, out: &mut T) -> bool {
    while !publishes.is_idle() {
        let answer = Box::new(message(Kind::Published(publishes.next().await)));
        if !out.transmit(answer).await {
            return false;
        }
    }
    true
}

/// Writes `events`. A session paced by its tenant's output rate writes
/// them in parts: after each delivery that puts the tenant over, what was
/// taken so far goes out, and nothing more (nor any request read) until
/// the rate has paid for it. False once the client is gone.
async fn write_events<T: Transmit>(
    out: &mut T,
    session: &mut Session,
    events: &[herald_push::Event],
    control: &mut Vec<ServerMessage>,
    shutdown: &CancellationToken,
) -> bool {
    if !session.output_paced() {
        return transmit_events(out, events, control).await;
    }
    let mut start = 0;
    for (i, event) in events.iter().enumerate() {
        let pause = match event {
            herald_push::Event::Delivery(delivery) => session.charge_delivery(delivery),
            _ => None,
        };
        if let Some(pause) = pause {
            if !transmit_events(out, &events[start..=i], control).await || !out.flush().await {
                return false;
            }
            start = i + 1;
            tokio::select! {
                // The session's loop sees the shutdown next.
                _ = shutdown.cancelled() => return true,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }
    transmit_events(out, &events[start..], control).await
}

/// Transmits `events`: each run of consecutive deliveries as one
/// `Deliveries` message, each control event as its messages (built in
/// `control`, reused). False once the client is gone.
async fn transmit_events<T: Transmit>(
    out: &mut T,
    mut events: &[herald_push::Event],
    control: &mut Vec<ServerMessage>,
) -> bool {
    while let Some((part, rest)) = convert::next_part(events) {
        events = rest;
        let sent = match part {
            Part::Deliveries(run) => out.transmit_deliveries(run).await,
            Part::Control(event) => {
                convert::control_messages(event, control);
                let mut sent = true;
                for message in control.drain(..) {
                    sent = sent && out.transmit(Box::new(message)).await;
                }
                sent
            }
        };
        if !sent {
            return false;
        }
    }
    true
}

/// What the client is told when its login fails, whatever the reason.
const AUTHENTICATION_FAILED: &str = "authentication failed";

/// What handling a message needs of its session.
struct Handling<'a, S, T> {
    shared: &'a Arc<Shared>,
    session: &'a mut Session,
    incoming: &'a mut S,
    out: &'a mut T,
    peer: Option<SocketAddr>,
    publishes: &'a mut Publishes,
}

/// Whether a session goes on after a message.
enum Handled {
    Continue,
    /// It ends, with this go-away if any.
    End(Option<Outgoing>),
}

impl Handled {
    fn sent(sent: bool) -> Self {
        if sent {
            Handled::Continue
        } else {
            Handled::End(None)
        }
    }
}

/// The `Welcome` telling the client its limits and who it is.
fn welcome(shared: &Shared, session: &mut Session, authenticate_final: Vec<u8>) -> Outgoing {
    let config = shared.engine.config();
    Box::new(message(Kind::Welcome(proto::Welcome {
        max_subscriptions: u32::try_from(config.max_subscriptions_per_session).unwrap_or(u32::MAX),
        max_message_bytes: u32::try_from(shared.max_message_bytes).unwrap_or(u32::MAX),
        queue_bytes: config.queue_bytes as u64,
        principal: session.identity().principal().to_owned(),
        authenticate_final: authenticate_final.into(),
    })))
}

/// A login's challenges and answers over a session's own stream.
struct SessionConversation<'a, S, T> {
    incoming: &'a mut S,
    out: &'a mut T,
}

impl<S, T> auth::Conversation for SessionConversation<'_, S, T>
where
    S: Stream<Item = Result<ClientMessage, Unreadable>> + Unpin + Send,
    T: Transmit,
{
    async fn exchange(&mut self, challenge: Vec<u8>) -> Option<Vec<u8>> {
        let challenge = message(Kind::AuthenticateChallenge(proto::AuthenticateChallenge {
            payload: challenge.into(),
        }));
        if !self.out.transmit(Box::new(challenge)).await || !self.out.flush().await {
            return None;
        }
        match self.incoming.next().await {
            Some(Ok(ClientMessage {
                kind: Some(client_message::Kind::AuthenticateStep(step)),
            })) => Some(step.payload.to_vec()),
            _ => None,
        }
    }
}

/// On a listener that requires a login: the session's first message must
/// be a hello that logs in. Answers that hello once the client is in (the
/// welcome sent); otherwise how the session ends (`None`: as any failed
/// login does).
async fn first_login<S, T>(
    shared: &Arc<Shared>,
    session: &mut Session,
    incoming: &mut S,
    out: &mut T,
    peer: Option<SocketAddr>,
) -> Result<proto::Hello, Option<Outgoing>>
where
    S: Stream<Item = Result<ClientMessage, Unreadable>> + Unpin + Send,
    T: Transmit,
{
    let Some(Ok(ClientMessage {
        kind: Some(client_message::Kind::Hello(mut hello)),
    })) = incoming.next().await
    else {
        tracing::info!(?peer, "push client did not log in first; closing");
        return Err(None);
    };
    let Some(authenticate) = hello.authenticate.take() else {
        tracing::info!(?peer, "push client's hello does not log in; closing");
        return Err(None);
    };
    let mut conversation = SessionConversation { incoming, out };
    match auth::log_in(
        &shared.engine,
        &shared.sasl_mechanisms,
        peer,
        &authenticate.mechanism,
        authenticate.payload.to_vec(),
        &mut conversation,
    )
    .await
    {
        LoginOutcome::Done(identity, last) => {
            if let Err(over) = session.set_identity(identity) {
                return Err(Some(go_away(
                    GoAwayReason::TooManyConnections,
                    over.to_string(),
                    1000,
                )));
            }
            let welcome = welcome(shared, session, last);
            if conversation.out.transmit(welcome).await {
                Ok(hello)
            } else {
                Err(None)
            }
        }
        LoginOutcome::Failed => Err(None),
    }
}

/// Acts on one client message.
async fn handle<S, T>(
    ctx: &mut Handling<'_, S, T>,
    request: ClientMessage,
    opening: bool,
) -> Handled
where
    S: Stream<Item = Result<ClientMessage, Unreadable>> + Unpin + Send,
    T: Transmit,
{
    let session = &mut *ctx.session;
    let out = &mut *ctx.out;
    let engine = &ctx.shared.engine;
    match request.kind {
        None => {
            let text = "a message without a kind (sent by a newer client?)";
            return Handled::sent(
                out.transmit(Box::new(Refused::invalid(text).to_message(0, 0)))
                    .await,
            );
        }
        Some(client_message::Kind::Hello(mut hello)) => {
            if !opening {
                return Handled::sent(
                    out.transmit(Box::new(
                        Refused::invalid("hello must be a session's first message")
                            .to_message(0, 0),
                    ))
                    .await,
                );
            }
            // A login on a listener that lets clients in without one: the
            // client becomes who it proves to be, and is welcomed again.
            if let Some(authenticate) = hello.authenticate.take() {
                let mut conversation = SessionConversation {
                    incoming: &mut *ctx.incoming,
                    out: &mut *ctx.out,
                };
                let outcome = auth::log_in(
                    engine,
                    &ctx.shared.sasl_mechanisms,
                    ctx.peer,
                    &authenticate.mechanism,
                    authenticate.payload.to_vec(),
                    &mut conversation,
                )
                .await;
                let LoginOutcome::Done(identity, last) = outcome else {
                    return Handled::End(Some(go_away(
                        GoAwayReason::AuthenticationFailed,
                        AUTHENTICATION_FAILED,
                        0,
                    )));
                };
                if let Err(over) = ctx.session.set_identity(identity) {
                    return Handled::End(Some(go_away(
                        GoAwayReason::TooManyConnections,
                        over.to_string(),
                        1000,
                    )));
                }
                let welcome = welcome(ctx.shared, ctx.session, last);
                if !ctx.out.transmit(welcome).await {
                    return Handled::End(None);
                }
            }
            return hello_requests(ctx, hello).await;
        }
        Some(client_message::Kind::AuthenticateStep(_)) => {
            return Handled::sent(
                out.transmit(Box::new(
                    Refused::invalid("no login is under way").to_message(0, 0),
                ))
                .await,
            );
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
                return Handled::sent(out.transmit(Box::new(refused.to_message(id, 0))).await);
            }
        }
        Some(client_message::Kind::Unsubscribe(unsubscribe)) => {
            let id = unsubscribe.subscription_id;
            if !session.unsubscribe(id) {
                let refused = Refused {
                    code: proto::ErrorCode::UnknownSubscription,
                    message: format!("no subscription {id} on this session"),
                };
                return Handled::sent(out.transmit(Box::new(refused.to_message(id, 0))).await);
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
            return Handled::sent(out.transmit(Box::new(answer)).await);
        }
        Some(client_message::Kind::Credit(credit)) => session.grant(credit.messages, credit.bytes),
        Some(client_message::Kind::Publish(request)) => {
            // Answered from the session's loop once stored.
            ctx.publishes
                .start(engine, session.identity(), request)
                .await;
        }
    }
    Handled::Continue
}

/// What a hello asks besides a login: credit, a name, resumed
/// subscriptions.
async fn hello_requests<S, T>(ctx: &mut Handling<'_, S, T>, hello: proto::Hello) -> Handled
where
    T: Transmit,
{
    if let Some(credit) = hello.initial_credit {
        ctx.session.outbox().set_credit(Credit {
            messages: Some(credit.messages),
            bytes: Some(credit.bytes),
        });
    }
    if !hello.client_name.is_empty() {
        tracing::debug!(client = %hello.client_name, principal = ctx.session.identity().principal(), "push session opened");
    }
    for token in hello.resume_tokens {
        if let Err(e) = ctx.session.resume(&token).await {
            if !ctx
                .out
                .transmit(Box::new(convert::subscribe_refused(&e).to_message(0, 0)))
                .await
            {
                return Handled::End(None);
            }
        }
    }
    Handled::Continue
}

/// Publishes one request and answers where it went, or why not.
pub(crate) async fn publish_result(
    engine: &PushEngine,
    identity: &mut Identity,
    request: proto::PublishRequest,
) -> proto::PublishResult {
    let request_id = request.request_id;
    match convert::publish_record(request) {
        Ok(record) => publishes::result(request_id, engine.publish(identity, record).await),
        Err(refused) => publishes::refused_result(request_id, refused, 0),
    }
}

/// How long a transport waits for a closing session to finish writing.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(5);
