//! A benchmark client's push session over gRPC: one connection, one
//! session stream.

use std::net::IpAddr;

use herald_gateway::proto::herald_client::HeraldClient;
use herald_gateway::proto::{
    self, client_message, server_message::Kind, ClientMessage, ServerMessage,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

use super::PushBenchError;

/// One connection to the push listener.
pub async fn connect(addr: &str) -> Result<HeraldClient<Channel>, PushBenchError> {
    connect_from(addr, None).await
}

/// One connection to the push listener from loopback address `source`
/// (`None`: the kernel's choice).
pub async fn connect_from(
    addr: &str,
    source: Option<IpAddr>,
) -> Result<HeraldClient<Channel>, PushBenchError> {
    let failed = |reason: String| PushBenchError::Connect {
        addr: addr.to_owned(),
        reason,
    };
    let endpoint =
        Endpoint::from_shared(format!("http://{addr}")).map_err(|e| failed(e.to_string()))?;
    let channel = match source {
        None => endpoint.connect().await,
        Some(source) => {
            let target = addr.to_owned();
            // tonic dials through this when the channel (re)connects.
            let dial = tower::service_fn(move |_: tonic::transport::Uri| {
                let target = target.clone();
                async move {
                    let stream = super::socket::connect_from(&target, Some(source), None)
                        .await
                        .map_err(std::io::Error::other)?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            });
            endpoint.connect_with_connector(dial).await
        }
    }
    .map_err(|e| failed(e.to_string()))?;
    Ok(HeraldClient::new(channel))
}

/// An open session: what to send and what arrives.
pub struct Session {
    /// Requests to the broker.
    pub requests: mpsc::Sender<ClientMessage>,
    /// What the broker sends.
    pub stream: tonic::Streaming<ServerMessage>,
}

impl Session {
    /// Opens a session on its own connection.
    pub async fn open(addr: &str) -> Result<Self, PushBenchError> {
        Self::open_from(addr, None).await
    }

    /// Opens a session on its own connection from `source`.
    pub async fn open_from(addr: &str, source: Option<IpAddr>) -> Result<Self, PushBenchError> {
        let mut client = connect_from(addr, source).await?;
        let (requests, rx) = mpsc::channel(64);
        let stream = client.session(ReceiverStream::new(rx)).await?.into_inner();
        Ok(Self { requests, stream })
    }

    /// Sends one message.
    pub async fn send(&mut self, kind: client_message::Kind) -> Result<(), PushBenchError> {
        self.requests
            .send(ClientMessage { kind: Some(kind) })
            .await
            .map_err(|_| PushBenchError::Refused("the session closed".into()))
    }

    /// The next message's kind; an error once the session ends.
    pub async fn next(&mut self) -> Result<Kind, PushBenchError> {
        loop {
            match self.stream.message().await? {
                Some(ServerMessage { kind: Some(kind) }) => return Ok(kind),
                Some(ServerMessage { kind: None }) => continue,
                None => return Err(PushBenchError::Refused("the session ended".into())),
            }
        }
    }
}

/// A session over WebSocket (`/v1/session`): the same messages, one per
/// binary frame.
pub struct WsSession {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl WsSession {
    /// Opens a session on its own connection.
    pub async fn open(addr: &str) -> Result<Self, PushBenchError> {
        Self::open_with_receive_buffer(addr, None).await
    }

    /// Opens a session whose socket's kernel receive buffer is
    /// `receive_buffer` bytes (`None`: the kernel's autotuning, up to
    /// several MiB on loopback). What a flooded client's kernel holds is
    /// ahead of anything the broker sends next, however urgent.
    pub async fn open_with_receive_buffer(
        addr: &str,
        receive_buffer: Option<u32>,
    ) -> Result<Self, PushBenchError> {
        Self::open_with(addr, None, receive_buffer).await
    }

    /// Opens a session from `source`, with `receive_buffer` as in
    /// [`WsSession::open_with_receive_buffer`].
    pub async fn open_with(
        addr: &str,
        source: Option<IpAddr>,
        receive_buffer: Option<u32>,
    ) -> Result<Self, PushBenchError> {
        let failed = |reason: String| PushBenchError::Connect {
            addr: addr.to_owned(),
            reason,
        };
        let stream = super::socket::connect_from(addr, source, receive_buffer).await?;
        // tungstenite zeroes its whole read buffer (128 KiB by default) on
        // every read: with thousands of subscribers that, not the broker,
        // would be what the benchmark measures.
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(4096);
        let (socket, _) = tokio_tungstenite::client_async_with_config(
            format!("ws://{addr}/v1/session"),
            tokio_tungstenite::MaybeTlsStream::Plain(stream),
            Some(config),
        )
        .await
        .map_err(|e| failed(e.to_string()))?;
        Ok(Self { socket })
    }

    /// Sends one message.
    pub async fn send(&mut self, kind: client_message::Kind) -> Result<(), PushBenchError> {
        use futures_util::SinkExt as _;
        let bytes = prost::Message::encode_to_vec(&ClientMessage { kind: Some(kind) });
        self.socket
            .send(tokio_tungstenite::tungstenite::Message::Binary(
                bytes.into(),
            ))
            .await
            .map_err(|e| PushBenchError::Refused(format!("the session closed: {e}")))
    }

    /// The next message's kind; an error once the session ends.
    pub async fn next(&mut self) -> Result<Kind, PushBenchError> {
        use futures_util::StreamExt as _;
        use tokio_tungstenite::tungstenite::Message;
        loop {
            match self.socket.next().await {
                Some(Ok(Message::Binary(bytes))) => {
                    let message: ServerMessage = prost::Message::decode(bytes)
                        .map_err(|e| PushBenchError::Refused(format!("undecodable frame: {e}")))?;
                    if let Some(kind) = message.kind {
                        return Ok(kind);
                    }
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(PushBenchError::Refused(e.to_string())),
                None => return Err(PushBenchError::Refused("the session ended".into())),
            }
        }
    }
}

/// How the benchmark's sessions reach the broker.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// gRPC (HTTP/2).
    Grpc,
    /// WebSocket (HTTP/1.1 upgraded).
    Websocket,
}

impl Transport {
    /// The name rows carry.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Grpc => "grpc",
            Transport::Websocket => "websocket",
        }
    }
}

/// A session over either transport.
pub enum AnySession {
    /// gRPC.
    Grpc(Session),
    /// WebSocket.
    Ws(WsSession),
}

impl AnySession {
    /// Opens a session on its own connection.
    pub async fn open(transport: Transport, addr: &str) -> Result<Self, PushBenchError> {
        Self::open_from(transport, addr, None).await
    }

    /// Opens a session on its own connection from `source`.
    pub async fn open_from(
        transport: Transport,
        addr: &str,
        source: Option<IpAddr>,
    ) -> Result<Self, PushBenchError> {
        Ok(match transport {
            Transport::Grpc => AnySession::Grpc(Session::open_from(addr, source).await?),
            Transport::Websocket => AnySession::Ws(WsSession::open_with(addr, source, None).await?),
        })
    }

    /// The next message's kind; an error once the session ends.
    pub async fn next(&mut self) -> Result<Kind, PushBenchError> {
        match self {
            AnySession::Grpc(s) => s.next().await,
            AnySession::Ws(s) => s.next().await,
        }
    }
}

/// What subscribing needs of a session, whatever carries it.
pub trait Messages {
    /// Sends one message.
    fn send(
        &mut self,
        kind: client_message::Kind,
    ) -> impl std::future::Future<Output = Result<(), PushBenchError>> + Send;
    /// The next message's kind.
    fn next(&mut self) -> impl std::future::Future<Output = Result<Kind, PushBenchError>> + Send;
}

impl Messages for Session {
    async fn send(&mut self, kind: client_message::Kind) -> Result<(), PushBenchError> {
        Session::send(self, kind).await
    }

    async fn next(&mut self) -> Result<Kind, PushBenchError> {
        Session::next(self).await
    }
}

impl Messages for AnySession {
    async fn send(&mut self, kind: client_message::Kind) -> Result<(), PushBenchError> {
        match self {
            AnySession::Grpc(s) => s.send(kind).await,
            AnySession::Ws(s) => s.send(kind).await,
        }
    }

    async fn next(&mut self) -> Result<Kind, PushBenchError> {
        AnySession::next(self).await
    }
}

impl Messages for WsSession {
    async fn send(&mut self, kind: client_message::Kind) -> Result<(), PushBenchError> {
        WsSession::send(self, kind).await
    }

    async fn next(&mut self) -> Result<Kind, PushBenchError> {
        WsSession::next(self).await
    }
}

/// Subscribes (id 1) to `pattern` of `topic` from now, with `filter`
/// (empty: none), and waits until it is confirmed.
pub async fn subscribe_pattern(
    session: &mut impl Messages,
    topic: &str,
    pattern: &str,
    filter: &str,
) -> Result<(), PushBenchError> {
    session
        .send(client_message::Kind::Subscribe(proto::Subscribe {
            subscription_id: 1,
            topic: topic.to_owned(),
            selector: Some(proto::subscribe::Selector::Pattern(pattern.to_owned())),
            filter: filter.to_owned(),
            ..Default::default()
        }))
        .await?;
    loop {
        match session.next().await? {
            Kind::Subscribed(_) => return Ok(()),
            Kind::Error(e) => return Err(PushBenchError::Refused(e.message)),
            _ => {}
        }
    }
}

/// Subscribes `ids` to the subjects `subject(id)` of `topic` from now,
/// and waits until every one is confirmed.
pub async fn subscribe_all(
    session: &mut impl Messages,
    topic: &str,
    ids: impl Iterator<Item = u64>,
    subject: impl Fn(u64) -> Vec<u8>,
) -> Result<(), PushBenchError> {
    let mut waiting = 0usize;
    for id in ids {
        let subscribe = proto::Subscribe {
            subscription_id: id,
            topic: topic.to_owned(),
            selector: Some(proto::subscribe::Selector::Subject(subject(id).into())),
            ..Default::default()
        };
        session
            .send(client_message::Kind::Subscribe(subscribe))
            .await?;
        waiting += 1;
    }
    while waiting > 0 {
        match session.next().await? {
            Kind::Subscribed(_) => waiting -= 1,
            Kind::Error(e) => return Err(PushBenchError::Refused(e.message)),
            _ => {}
        }
    }
    Ok(())
}
