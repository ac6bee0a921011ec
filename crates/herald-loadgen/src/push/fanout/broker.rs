//! The brokers the fan-out measures, behind one subscriber and one
//! publisher type, so that every broker faces the same client code: the
//! same sockets, the same event loop, the same stamp and tally. Only the
//! bytes on the wire differ.

use std::collections::BTreeMap;
use std::net::IpAddr;

use herald_gateway::proto::{self, client_message, server_message::Kind, subscribe::Selector};
use rumqttc::mqttbytes::QoS;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

use super::super::jetstream;
use super::super::mqtt::MqttConnection;
use super::super::nats::NatsConnection;
use super::super::session::{AnySession, Messages as _, Transport};
use super::super::socket::connect_from;
use super::super::PushBenchError;
use super::layout::{Interest, GROUP};

/// A broker under test and how its clients reach it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Broker {
    /// herald's push listener, subjects being record keys of `topic`.
    Herald {
        /// The push listener.
        push: String,
        /// The topic (it must exist).
        topic: String,
        /// WebSocket or gRPC sessions.
        transport: Transport,
    },
    /// Core NATS (at most once): a nats-server's client port.
    Nats {
        /// The client port.
        addr: String,
    },
    /// NATS JetStream: publishes stored in a file-backed stream (each
    /// answered once stored), every subscriber an ephemeral push consumer
    /// ([`jetstream`]). The stream must exist.
    JetStream {
        /// The client port of a nats-server with JetStream on.
        addr: String,
    },
    /// An MQTT 3.1.1 broker, publishes and subscriptions at one QoS.
    Mqtt {
        /// The broker's port.
        addr: String,
        /// 0 or 1.
        qos: u8,
    },
    /// No broker: [`super::floor`]'s relay copies each message to every
    /// subscriber's socket with one `write(2)` and nothing else.
    Floor {
        /// The relay's port.
        addr: String,
        /// The fixed size of every message (the relay does not frame).
        payload_bytes: usize,
    },
}

/// A subscriber's first byte to the floor's relay.
pub(super) const FLOOR_SUBSCRIBER: u8 = b'S';
/// A publisher's first byte to the floor's relay.
pub(super) const FLOOR_PUBLISHER: u8 = b'P';
/// The relay's answer once a subscriber will get every later message.
pub(super) const FLOOR_READY: u8 = b'k';

impl Broker {
    /// The label rows carry: herald by its transport (`websocket`,
    /// `grpc`), `nats`, `mqtt-qos0`, `mqtt-qos1`, or `kernel` for the floor.
    pub fn label(&self) -> String {
        match self {
            Broker::Herald { transport, .. } => transport.name().to_owned(),
            Broker::Nats { .. } => "nats".to_owned(),
            Broker::JetStream { .. } => "jetstream".to_owned(),
            Broker::Mqtt { qos, .. } => format!("mqtt-qos{qos}"),
            Broker::Floor { .. } => "kernel".to_owned(),
        }
    }

    /// Which system it is: `herald`, `nats`, `mqtt` or `floor`.
    pub fn system(&self) -> &'static str {
        match self {
            Broker::Herald { .. } => "herald",
            Broker::Nats { .. } | Broker::JetStream { .. } => "nats",
            Broker::Mqtt { .. } => "mqtt",
            Broker::Floor { .. } => "floor",
        }
    }

    /// Subject number `subject` as this broker names it: two tokens
    /// below a root ([`layout`](super::layout)), separated by dots (NATS,
    /// herald) or slashes (MQTT).
    pub fn subject_name(&self, subject: u32) -> String {
        let mut name = String::new();
        self.write_subject_name(subject, &mut name);
        name
    }

    /// [`Broker::subject_name`] into `name`, replacing what it held: the
    /// publisher names every message's subject without allocating.
    pub fn write_subject_name(&self, subject: u32, name: &mut String) {
        use std::fmt::Write as _;
        let (group, member) = (subject / GROUP, subject % GROUP);
        let separator = match self {
            Broker::Mqtt { .. } => '/',
            _ => '.',
        };
        name.clear();
        let _ = write!(name, "fanout{separator}{group}{separator}{member}");
    }

    /// The pattern naming every subject of `group`, in this broker's
    /// syntax; `None` for the floor, which has no subjects.
    pub fn pattern_name(&self, group: u32) -> Option<String> {
        match self {
            Broker::Mqtt { .. } => Some(format!("fanout/{group}/+")),
            Broker::Herald { .. } | Broker::Nats { .. } | Broker::JetStream { .. } => {
                Some(format!("fanout.{group}.*"))
            }
            Broker::Floor { .. } => None,
        }
    }

    fn qos(qos: u8) -> Result<QoS, PushBenchError> {
        match qos {
            0 => Ok(QoS::AtMostOnce),
            1 => Ok(QoS::AtLeastOnce),
            other => Err(PushBenchError::Refused(format!(
                "MQTT QoS {other} is not measured"
            ))),
        }
    }
}

/// One subscriber: a connection of its own, listening to an [`Interest`].
pub enum Subscriber {
    /// A herald session (boxed: it is most of the enum's size) and, when
    /// it is to resume, where each of its subscriptions goes on from.
    Herald(Box<AnySession>, Option<Positions>),
    /// A NATS connection and its payload buffer.
    Nats(NatsConnection, Vec<u8>),
    /// A NATS connection receiving from a JetStream push consumer, its
    /// payload buffer, and the last stream sequence it received.
    JetStream(NatsConnection, Vec<u8>, u64),
    /// An MQTT connection.
    Mqtt(MqttConnection),
    /// A socket of the floor's relay (read through a 4 KiB buffer, as the
    /// other clients read), and one message's buffer.
    Floor(BufReader<TcpStream>, Vec<u8>),
}

/// Where each of a herald subscriber's subscriptions goes on from: by
/// subscription id, the next offset of each partition. A client that
/// keeps this resumes exactly, with nothing sent twice.
pub type Positions = BTreeMap<u64, BTreeMap<u32, u64>>;

/// What a closed subscriber keeps to reopen with.
#[derive(Debug, Default)]
pub struct Closed {
    positions: Option<Positions>,
    /// JetStream: the last stream sequence received.
    sequence: Option<u64>,
}

impl Subscriber {
    /// Connects from `source` and subscribes to what `interest` names;
    /// returns once the broker has confirmed every subscription, so that
    /// every message published afterwards is owed to it. `id` tells MQTT
    /// clients apart. A `resumable` subscriber can be [closed](Self::close)
    /// and [reopened](Self::reopen) without losing what was published in
    /// between, where the broker can do that: herald keeps its positions,
    /// MQTT keeps a persistent session (clean session off); core NATS
    /// cannot, and reopens from now.
    pub async fn open(
        broker: &Broker,
        interest: &Interest,
        id: u64,
        source: Option<IpAddr>,
        resumable: bool,
    ) -> Result<Self, PushBenchError> {
        let closed = Closed {
            positions: resumable.then(Positions::new),
            sequence: None,
        };
        Self::connect(broker, interest, id, source, resumable, closed).await
    }

    /// Closes the connection abruptly (no goodbye), keeping what
    /// [`Subscriber::reopen`] needs.
    pub fn close(self) -> Closed {
        match self {
            Subscriber::Herald(_, positions) => Closed {
                positions,
                sequence: None,
            },
            Subscriber::JetStream(_, _, sequence) => Closed {
                positions: None,
                sequence: Some(sequence),
            },
            _ => Closed::default(),
        }
    }

    /// Opens a closed subscriber again: herald's subscriptions go on from
    /// the positions they had reached, an MQTT persistent session from what
    /// the broker kept for it, NATS from now.
    pub async fn reopen(
        broker: &Broker,
        interest: &Interest,
        id: u64,
        source: Option<IpAddr>,
        closed: Closed,
    ) -> Result<Self, PushBenchError> {
        Self::connect(broker, interest, id, source, true, closed).await
    }

    async fn connect(
        broker: &Broker,
        interest: &Interest,
        id: u64,
        source: Option<IpAddr>,
        resumable: bool,
        closed: Closed,
    ) -> Result<Self, PushBenchError> {
        let literal = interest.subjects.iter().map(|&s| broker.subject_name(s));
        let pattern = interest.group.and_then(|g| broker.pattern_name(g));
        Ok(match broker {
            Broker::Herald {
                push,
                topic,
                transport,
            } => {
                let mut session = AnySession::open_from(*transport, push, source).await?;
                let selectors = literal
                    .map(|name| Selector::Subject(name.into_bytes().into()))
                    .chain(pattern.map(Selector::Pattern));
                let positions =
                    subscribe_herald(&mut session, topic, selectors, closed.positions).await?;
                Subscriber::Herald(Box::new(session), positions)
            }
            Broker::Nats { addr } => {
                let mut connection = NatsConnection::connect_from(addr, source).await?;
                for (sid, name) in literal.chain(pattern).enumerate() {
                    connection.subscribe(&name, sid as u64 + 1).await?;
                }
                Subscriber::Nats(connection, Vec::with_capacity(64))
            }
            Broker::JetStream { addr } => {
                let mut connection = NatsConnection::connect_from(addr, source).await?;
                // Its own subject per connection: a consumer of a closed
                // connection lives on for a while and must not reach the
                // next one.
                let deliver = super::super::nats::unique_subject("fanout-deliver");
                connection.subscribe(&deliver, 1).await?;
                let filters: Vec<String> = literal.chain(pattern).collect();
                let start = match closed.sequence {
                    Some(sequence) => jetstream::Start::After(sequence),
                    None => jetstream::Start::New,
                };
                let sequence =
                    jetstream::push_consumer(&mut connection, &deliver, &filters, start).await?;
                Subscriber::JetStream(connection, Vec::with_capacity(64), sequence)
            }
            Broker::Mqtt { addr, qos } => {
                let client_id = format!("herald-loadgen-{}-{id}", std::process::id());
                let (mut connection, kept) =
                    MqttConnection::connect_session(addr, &client_id, source, !resumable).await?;
                if !kept {
                    for name in literal.chain(pattern) {
                        connection.subscribe(&name, Broker::qos(*qos)?).await?;
                    }
                }
                Subscriber::Mqtt(connection)
            }
            Broker::Floor {
                addr,
                payload_bytes,
            } => {
                let mut stream = connect_from(addr, source, None).await?;
                let io = |e: std::io::Error| PushBenchError::Refused(format!("floor relay: {e}"));
                stream.write_all(&[FLOOR_SUBSCRIBER]).await.map_err(io)?;
                let mut ready = [0u8; 1];
                stream.read_exact(&mut ready).await.map_err(io)?;
                if ready[0] != FLOOR_READY {
                    return Err(PushBenchError::Refused("floor relay: no ready byte".into()));
                }
                Subscriber::Floor(
                    BufReader::with_capacity(4096, stream),
                    vec![0; *payload_bytes],
                )
            }
        })
    }

    /// Waits for what arrives next and hands each message's payload to
    /// `each` (at least one, unless an error ends the subscription).
    pub async fn receive(&mut self, mut each: impl FnMut(&[u8])) -> Result<(), PushBenchError> {
        match self {
            Subscriber::Herald(session, positions) => loop {
                match session.next().await? {
                    Kind::Deliveries(batch) => {
                        for delivery in &batch.deliveries {
                            each(delivery.value.as_deref().unwrap_or_default());
                        }
                        if let Some(positions) = positions {
                            for delivery in &batch.deliveries {
                                positions
                                    .entry(delivery.subscription_id)
                                    .or_default()
                                    .insert(delivery.partition, delivery.offset + 1);
                            }
                        }
                        return Ok(());
                    }
                    Kind::Error(e) => return Err(PushBenchError::Refused(e.message)),
                    Kind::GoAway(away) => {
                        return Err(PushBenchError::Refused(format!(
                            "go away, reason {}",
                            away.reason
                        )))
                    }
                    _ => {}
                }
            },
            Subscriber::Nats(connection, payload) => {
                connection.next_message(payload).await?;
                each(payload);
                Ok(())
            }
            Subscriber::JetStream(connection, payload, sequence) => {
                connection.next_message(payload).await?;
                if let Some(received) = jetstream::stream_sequence(connection.reply()) {
                    *sequence = received;
                }
                each(payload);
                Ok(())
            }
            Subscriber::Mqtt(connection) => {
                let payload = connection.next_message().await?;
                each(&payload);
                Ok(())
            }
            Subscriber::Floor(stream, payload) => {
                stream
                    .read_exact(payload)
                    .await
                    .map_err(|e| PushBenchError::Refused(format!("floor relay: {e}")))?;
                each(payload);
                Ok(())
            }
        }
    }
}

/// Subscribes a herald session to each of `selectors` (ids from 1) of
/// `topic`, from `resume`'s positions where it has them and from now
/// otherwise, and waits until every one is confirmed. Returns where each
/// starts when positions are kept (`resume` is `Some`).
async fn subscribe_herald(
    session: &mut AnySession,
    topic: &str,
    selectors: impl Iterator<Item = Selector>,
    resume: Option<Positions>,
) -> Result<Option<Positions>, PushBenchError> {
    let mut waiting = 0usize;
    for (index, selector) in selectors.enumerate() {
        let id = index as u64 + 1;
        let start = resume
            .as_ref()
            .and_then(|positions| positions.get(&id))
            .map(|offsets| proto::StartAt {
                from: Some(proto::start_at::From::Offsets(proto::PartitionOffsets {
                    offsets: offsets.iter().map(|(&p, &o)| (p, o)).collect(),
                })),
            });
        let subscribe = proto::Subscribe {
            subscription_id: id,
            topic: topic.to_owned(),
            selector: Some(selector),
            start,
            ..Default::default()
        };
        session
            .send(client_message::Kind::Subscribe(subscribe))
            .await?;
        waiting += 1;
    }
    let mut positions = resume.map(|_| Positions::new());
    while waiting > 0 {
        match session.next().await? {
            Kind::Subscribed(subscribed) => {
                if let Some(positions) = &mut positions {
                    positions.insert(
                        subscribed.subscription_id,
                        subscribed.start_offsets.into_iter().collect(),
                    );
                }
                waiting -= 1;
            }
            Kind::Error(e) => return Err(PushBenchError::Refused(e.message)),
            _ => {}
        }
    }
    Ok(positions)
}

/// The publisher: one connection, messages pipelined.
pub enum Publisher {
    /// A herald session publishing with `PublishRequest`s; each is
    /// answered once stored.
    Herald {
        /// The session (boxed: it is most of the enum's size).
        session: Box<AnySession>,
        /// The topic.
        topic: String,
        /// The next request id.
        next_id: u64,
    },
    /// A NATS connection (nothing is answered).
    Nats(NatsConnection),
    /// A NATS connection publishing into JetStream, each publish answered
    /// on its inbox once stored.
    JetStream(NatsConnection, String),
    /// An MQTT connection; at QoS 1 each publish is answered by a PUBACK.
    Mqtt(MqttConnection, QoS),
    /// A socket of the floor's relay (nothing is answered).
    Floor(TcpStream),
}

impl Publisher {
    /// Connects to `broker` from `source`.
    pub async fn open(broker: &Broker, source: Option<IpAddr>) -> Result<Self, PushBenchError> {
        Ok(match broker {
            Broker::Herald {
                push,
                topic,
                transport,
            } => Publisher::Herald {
                session: Box::new(AnySession::open_from(*transport, push, source).await?),
                topic: topic.clone(),
                next_id: 0,
            },
            Broker::Nats { addr } => {
                Publisher::Nats(NatsConnection::connect_from(addr, source).await?)
            }
            Broker::JetStream { addr } => {
                let mut connection = NatsConnection::connect_from(addr, source).await?;
                let inbox = connection.inbox().await?;
                Publisher::JetStream(connection, format!("{inbox}.published"))
            }
            Broker::Mqtt { addr, qos } => {
                let client_id = format!("herald-loadgen-{}-publisher", std::process::id());
                Publisher::Mqtt(
                    MqttConnection::connect_from(addr, &client_id, source).await?,
                    Broker::qos(*qos)?,
                )
            }
            Broker::Floor { addr, .. } => {
                let mut stream = connect_from(addr, source, None).await?;
                stream
                    .write_all(&[FLOOR_PUBLISHER])
                    .await
                    .map_err(|e| PushBenchError::Refused(format!("floor relay: {e}")))?;
                Publisher::Floor(stream)
            }
        })
    }

    /// Sends one message on `subject` (named as [`Broker::subject_name`])
    /// without waiting; true if the broker will answer it, and it counts
    /// as in flight until [`Publisher::answered`] returns for it.
    pub async fn send(&mut self, subject: &str, payload: &[u8]) -> Result<bool, PushBenchError> {
        match self {
            Publisher::Herald {
                session,
                topic,
                next_id,
            } => {
                *next_id += 1;
                let request = proto::PublishRequest {
                    request_id: *next_id,
                    topic: topic.clone(),
                    key: Some(subject.as_bytes().to_vec().into()),
                    value: Some(payload.to_vec().into()),
                    ..Default::default()
                };
                session.send(client_message::Kind::Publish(request)).await?;
                Ok(true)
            }
            Publisher::Nats(connection) => {
                connection.publish(subject, payload).await?;
                Ok(false)
            }
            Publisher::JetStream(connection, reply) => {
                connection.publish_to(subject, Some(reply), payload).await?;
                Ok(true)
            }
            Publisher::Mqtt(connection, qos) => {
                connection
                    .publish_unanswered(subject, *qos, payload)
                    .await?;
                Ok(*qos != QoS::AtMostOnce)
            }
            Publisher::Floor(stream) => {
                stream
                    .write_all(payload)
                    .await
                    .map_err(|e| PushBenchError::Refused(format!("floor relay: {e}")))?;
                Ok(false)
            }
        }
    }

    /// Waits for the broker's answer to the oldest answered message in
    /// flight; an error if the broker refused it.
    pub async fn answered(&mut self) -> Result<(), PushBenchError> {
        match self {
            Publisher::Herald { session, .. } => loop {
                match session.next().await? {
                    Kind::Published(result) => {
                        return match result.error {
                            Some(error) => Err(PushBenchError::Refused(error.message)),
                            None => Ok(()),
                        }
                    }
                    Kind::Error(e) => return Err(PushBenchError::Refused(e.message)),
                    _ => {}
                }
            },
            Publisher::Mqtt(connection, _) => connection.next_ack().await.map(|_| ()),
            Publisher::JetStream(connection, _) => {
                let mut answer = Vec::new();
                connection.next_message(&mut answer).await?;
                jetstream::published_sequence(&answer).map(|_| ())
            }
            Publisher::Nats(_) | Publisher::Floor(_) => Err(PushBenchError::Refused(
                "this broker answers no publish".into(),
            )),
        }
    }

    /// A round trip for brokers that answer no publish: what was sent
    /// before it has been taken when this returns (PING / PINGREQ). The
    /// floor's relay has no such thing, and the kernel's socket buffer is
    /// its only bound.
    pub async fn round_trip(&mut self) -> Result<(), PushBenchError> {
        match self {
            Publisher::Nats(connection) | Publisher::JetStream(connection, _) => {
                connection.flush().await
            }
            Publisher::Mqtt(connection, _) => connection.flush().await,
            Publisher::Herald { .. } | Publisher::Floor(_) => Ok(()),
        }
    }
}
