//! An MQTT 3.1.1 client for the comparisons: rumqttc's packet codec over
//! the load generator's own socket (its event loop and client are not
//! used), so that every broker faces the same subscriber code. CONNECT
//! with a clean or persistent session, SUBSCRIBE, PUBLISH at QoS 0 or 1, PUBACK for
//! what arrives at QoS 1.

use std::net::IpAddr;

use bytes::BytesMut;
use rumqttc::mqttbytes::v4::{Connect, Packet, PubAck, Publish, Subscribe};
use rumqttc::mqttbytes::{Error as CodecError, QoS};
use rumqttc::ConnectReturnCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::PushBenchError;

/// The largest packet accepted from the broker.
const PACKET_MAX: usize = 1 << 20;

fn failed(reason: impl std::fmt::Display) -> PushBenchError {
    PushBenchError::Refused(format!("mqtt: {reason}"))
}

/// One connection to an MQTT broker.
pub struct MqttConnection {
    stream: TcpStream,
    read: BytesMut,
    write: BytesMut,
    next_pkid: u16,
}

impl MqttConnection {
    /// Connects to `addr` as `client_id` with a clean session and no
    /// keep-alive (runs are short), and waits for an accepting CONNACK.
    pub async fn connect(addr: &str, client_id: &str) -> Result<Self, PushBenchError> {
        Self::connect_from(addr, client_id, None).await
    }

    /// As [`MqttConnection::connect`], from loopback address `source`.
    pub async fn connect_from(
        addr: &str,
        client_id: &str,
        source: Option<IpAddr>,
    ) -> Result<Self, PushBenchError> {
        Self::connect_session(addr, client_id, source, true)
            .await
            .map(|(connection, _)| connection)
    }

    /// As [`MqttConnection::connect_from`], with a clean session or a
    /// persistent one (`clean` false: the broker keeps the subscriptions
    /// and queues QoS 1 messages while the client is away). Also returns
    /// whether the broker had kept a session for `client_id`.
    pub async fn connect_session(
        addr: &str,
        client_id: &str,
        source: Option<IpAddr>,
        clean: bool,
    ) -> Result<(Self, bool), PushBenchError> {
        let stream = super::socket::connect_from(addr, source, None).await?;
        let mut connection = Self {
            stream,
            read: BytesMut::with_capacity(1024),
            write: BytesMut::with_capacity(256),
            next_pkid: 1,
        };
        let mut connect = Connect::new(client_id);
        connect.keep_alive = 0;
        connect.clean_session = clean;
        connection.send(Packet::Connect(connect)).await?;
        match connection.next_packet().await? {
            Packet::ConnAck(ack) if ack.code == ConnectReturnCode::Success => {
                Ok((connection, ack.session_present))
            }
            other => Err(failed(format!("connect refused: {other:?}"))),
        }
    }

    async fn send(&mut self, packet: Packet) -> Result<(), PushBenchError> {
        self.write.clear();
        packet.write(&mut self.write, PACKET_MAX).map_err(failed)?;
        self.stream.write_all(&self.write).await.map_err(failed)
    }

    fn pkid(&mut self) -> u16 {
        let pkid = self.next_pkid;
        // Packet ids are 1..=65535.
        self.next_pkid = self.next_pkid.checked_add(1).unwrap_or(1);
        pkid
    }

    async fn next_packet(&mut self) -> Result<Packet, PushBenchError> {
        loop {
            match Packet::read(&mut self.read, PACKET_MAX) {
                Ok(packet) => return Ok(packet),
                Err(CodecError::InsufficientBytes(_)) => {}
                Err(e) => return Err(failed(e)),
            }
            let n = self.stream.read_buf(&mut self.read).await.map_err(failed)?;
            if n == 0 {
                return Err(failed("the broker closed the connection"));
            }
        }
    }

    /// Subscribes to `filter` at `qos` and waits for the SUBACK.
    pub async fn subscribe(&mut self, filter: &str, qos: QoS) -> Result<(), PushBenchError> {
        let mut subscribe = Subscribe::new(filter, qos);
        subscribe.pkid = self.pkid();
        self.send(Packet::Subscribe(subscribe)).await?;
        loop {
            if let Packet::SubAck(ack) = self.next_packet().await? {
                return match ack.return_codes.first() {
                    Some(rumqttc::mqttbytes::v4::SubscribeReasonCode::Success(_)) => Ok(()),
                    other => Err(failed(format!("subscription refused: {other:?}"))),
                };
            }
        }
    }

    /// Publishes `payload` on `topic`; at QoS 1 waits for the PUBACK (the
    /// broker has taken it).
    pub async fn publish(
        &mut self,
        topic: &str,
        qos: QoS,
        payload: &[u8],
    ) -> Result<(), PushBenchError> {
        let pkid = self.publish_unanswered(topic, qos, payload).await?;
        if qos == QoS::AtMostOnce {
            return Ok(());
        }
        while self.next_ack().await? != pkid {}
        Ok(())
    }

    /// Publishes `payload` on `topic` without waiting; the packet id a
    /// QoS 1 PUBACK will carry (0 at QoS 0, which is not answered).
    pub async fn publish_unanswered(
        &mut self,
        topic: &str,
        qos: QoS,
        payload: &[u8],
    ) -> Result<u16, PushBenchError> {
        let mut publish = Publish::new(topic, qos, payload.to_vec());
        if qos != QoS::AtMostOnce {
            publish.pkid = self.pkid();
        }
        let pkid = publish.pkid;
        self.send(Packet::Publish(publish)).await?;
        Ok(pkid)
    }

    /// The packet id of the next PUBACK.
    pub async fn next_ack(&mut self) -> Result<u16, PushBenchError> {
        loop {
            if let Packet::PubAck(ack) = self.next_packet().await? {
                return Ok(ack.pkid);
            }
        }
    }

    /// Round trip to the broker (PINGREQ, PINGRESP): what was published
    /// before it has been processed when this returns.
    pub async fn flush(&mut self) -> Result<(), PushBenchError> {
        self.send(Packet::PingReq).await?;
        loop {
            if let Packet::PingResp = self.next_packet().await? {
                return Ok(());
            }
        }
    }

    /// The payload of the next message delivered to this connection,
    /// acknowledged if it came at QoS 1.
    pub async fn next_message(&mut self) -> Result<bytes::Bytes, PushBenchError> {
        loop {
            if let Packet::Publish(publish) = self.next_packet().await? {
                if publish.qos == QoS::AtLeastOnce {
                    self.send(Packet::PubAck(PubAck::new(publish.pkid))).await?;
                }
                return Ok(publish.payload);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use rumqttc::mqttbytes::v4::{ConnAck, Packet, Publish, SubAck, SubscribeReasonCode};
    use rumqttc::mqttbytes::{Error as CodecError, QoS};
    use rumqttc::ConnectReturnCode;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::{MqttConnection, PACKET_MAX};

    async fn receive(socket: &mut TcpStream, buffer: &mut BytesMut) -> Packet {
        loop {
            match Packet::read(buffer, PACKET_MAX) {
                Ok(packet) => return packet,
                Err(CodecError::InsufficientBytes(_)) => {}
                Err(e) => panic!("{e}"),
            }
            assert!(socket.read_buf(buffer).await.unwrap() > 0, "closed");
        }
    }

    async fn send(socket: &mut TcpStream, packet: Packet) {
        let mut out = BytesMut::new();
        packet.write(&mut out, PACKET_MAX).unwrap();
        socket.write_all(&out).await.unwrap();
    }

    #[tokio::test]
    async fn connects_subscribes_and_acknowledges_qos1_deliveries() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let broker = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buffer = BytesMut::new();
            let Packet::Connect(connect) = receive(&mut socket, &mut buffer).await else {
                panic!("no CONNECT first");
            };
            assert_eq!(connect.client_id, "bench-1");
            assert!(connect.clean_session);
            send(
                &mut socket,
                Packet::ConnAck(ConnAck::new(ConnectReturnCode::Success, false)),
            )
            .await;
            let Packet::Subscribe(subscribe) = receive(&mut socket, &mut buffer).await else {
                panic!("no SUBSCRIBE");
            };
            assert_eq!(subscribe.filters[0].path, "fanout/subject");
            let granted = vec![SubscribeReasonCode::Success(QoS::AtLeastOnce)];
            send(
                &mut socket,
                Packet::SubAck(SubAck::new(subscribe.pkid, granted)),
            )
            .await;
            let mut publish = Publish::new("fanout/subject", QoS::AtLeastOnce, b"stamp".to_vec());
            publish.pkid = 5;
            send(&mut socket, Packet::Publish(publish)).await;
            let Packet::PubAck(ack) = receive(&mut socket, &mut buffer).await else {
                panic!("the QoS 1 delivery was not acknowledged");
            };
            assert_eq!(ack.pkid, 5);
            // A refused subscription is an error, not a silent success.
            let Packet::Subscribe(again) = receive(&mut socket, &mut buffer).await else {
                panic!("no second SUBSCRIBE");
            };
            let refused = vec![SubscribeReasonCode::Failure];
            send(
                &mut socket,
                Packet::SubAck(SubAck::new(again.pkid, refused)),
            )
            .await;
        });
        let mut client = MqttConnection::connect(&addr, "bench-1").await.unwrap();
        client
            .subscribe("fanout/subject", QoS::AtLeastOnce)
            .await
            .unwrap();
        assert_eq!(&client.next_message().await.unwrap()[..], b"stamp");
        assert!(client.subscribe("other", QoS::AtMostOnce).await.is_err());
        broker.await.unwrap();
    }
}
