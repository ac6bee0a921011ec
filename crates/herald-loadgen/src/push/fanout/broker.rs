//! The brokers the fan-out measures, behind one subscriber and one
//! publisher type, so that every broker faces the same client code: the
//! same sockets, the same event loop, the same stamp and tally. Only the
//! bytes on the wire differ.

use std::net::IpAddr;

use herald_gateway::proto::{self, client_message, server_message::Kind};
use rumqttc::mqttbytes::QoS;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

use super::super::mqtt::MqttConnection;
use super::super::nats::NatsConnection;
use super::super::session::{AnySession, Messages as _, Transport};
use super::super::socket::connect_from;
use super::super::PushBenchError;

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
            Broker::Mqtt { qos, .. } => format!("mqtt-qos{qos}"),
            Broker::Floor { .. } => "kernel".to_owned(),
        }
    }

    /// Which system it is: `herald`, `nats`, `mqtt` or `floor`.
    pub fn system(&self) -> &'static str {
        match self {
            Broker::Herald { .. } => "herald",
            Broker::Nats { .. } => "nats",
            Broker::Mqtt { .. } => "mqtt",
            Broker::Floor { .. } => "floor",
        }
    }

    /// Subject number `subject` as this broker names it (NATS separates
    /// tokens with dots, MQTT with slashes).
    pub fn subject_name(&self, subject: u32) -> String {
        match self {
            Broker::Mqtt { .. } => format!("fanout/{subject}"),
            _ => format!("fanout.{subject}"),
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

/// One subscriber: a connection of its own, subscribed to one subject.
pub enum Subscriber {
    /// A herald session.
    Herald(AnySession),
    /// A NATS connection and its payload buffer.
    Nats(NatsConnection, Vec<u8>),
    /// An MQTT connection.
    Mqtt(MqttConnection),
    /// A socket of the floor's relay (read through a 4 KiB buffer, as the
    /// other clients read), and one message's buffer.
    Floor(BufReader<TcpStream>, Vec<u8>),
}

impl Subscriber {
    /// Connects from `source` and subscribes to `subject`; returns once
    /// the broker has confirmed the subscription, so that every message
    /// published afterwards is owed to it. `id` tells MQTT clients apart.
    pub async fn open(
        broker: &Broker,
        subject: u32,
        id: u64,
        source: Option<IpAddr>,
    ) -> Result<Self, PushBenchError> {
        let name = broker.subject_name(subject);
        Ok(match broker {
            Broker::Herald {
                push,
                topic,
                transport,
            } => {
                let mut session = AnySession::open_from(*transport, push, source).await?;
                super::super::session::subscribe_all(
                    &mut session,
                    topic,
                    std::iter::once(1),
                    |_| name.clone().into_bytes(),
                )
                .await?;
                Subscriber::Herald(session)
            }
            Broker::Nats { addr } => {
                let mut connection = NatsConnection::connect_from(addr, source).await?;
                connection.subscribe(&name, 1).await?;
                Subscriber::Nats(connection, Vec::with_capacity(64))
            }
            Broker::Mqtt { addr, qos } => {
                let client_id = format!("herald-loadgen-{}-{id}", std::process::id());
                let mut connection = MqttConnection::connect_from(addr, &client_id, source).await?;
                connection.subscribe(&name, Broker::qos(*qos)?).await?;
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
            Subscriber::Herald(session) => loop {
                match session.next().await? {
                    Kind::Deliveries(batch) => {
                        for delivery in &batch.deliveries {
                            each(delivery.value.as_deref().unwrap_or_default());
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
            Publisher::Nats(connection) => connection.flush().await,
            Publisher::Mqtt(connection, _) => connection.flush().await,
            Publisher::Herald { .. } | Publisher::Floor(_) => Ok(()),
        }
    }
}
