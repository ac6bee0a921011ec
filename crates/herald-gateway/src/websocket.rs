//! The session protocol over WebSocket: `GET /v1/session`, one encoded
//! message per binary frame each way.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use prost::Message as _;

use crate::driver::{self, Unreadable};
use crate::proto::ClientMessage;
use serde::Deserialize;

use crate::auth::{self, Known};
use crate::server::{Peer, Shared};

/// Bytes a socket's read buffer holds at a time.
const READ_BUFFER_BYTES: usize = 1024;

/// Bytes of frames buffered before they are written without waiting for
/// the session's flush.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// Most bytes waiting in a socket's write buffer (only when writes fail).
const MAX_WRITE_BUFFER_BYTES: usize = 8 * 1024 * 1024;

/// The query `/v1/session` may carry.
#[derive(Debug, Deserialize)]
pub(crate) struct SessionQuery {
    /// An access token, for browsers (which cannot set headers on a
    /// WebSocket).
    access_token: Option<String>,
}

/// Upgrades the request and runs a session on the socket. A request whose
/// token is refused gets 401 and no socket.
pub(crate) async fn upgrade(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Query(query): Query<SessionQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let credentials = auth::from_headers(&headers, query.access_token.as_deref());
    let known = match auth::identify(&shared, &peer, credentials).await {
        Ok(known) => known,
        Err(refused) => return crate::token_endpoint::unauthorized(&refused.0),
    };
    let limit = shared.max_message_bytes;
    // Frames up to twice the limit are read and answered with a go-away
    // naming the limit; larger ones close the socket at once.
    ws.max_message_size(limit.saturating_mul(2))
        .max_frame_size(limit.saturating_mul(2))
        // tungstenite starts each socket with a 128 KiB read buffer; most
        // sessions sit idle, so start small (a read grows its buffer for a
        // large message). Frames are buffered until the session flushes
        // (it does when nothing more is ready) or 64 KiB wait: one write
        // for a run of answers instead of one each. The write buffer grows
        // only as frames are written, so an idle session holds none.
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(WRITE_BUFFER_BYTES)
        .max_write_buffer_size(MAX_WRITE_BUFFER_BYTES)
        .on_upgrade(move |socket| run(shared, socket, known, peer.addr))
}

async fn run(shared: Arc<Shared>, socket: WebSocket, known: Known, peer: SocketAddr) {
    let limit = shared.max_message_bytes;
    let (sink, stream) = socket.split();
    let incoming = stream.filter_map(move |frame| async move {
        match frame {
            Ok(Message::Binary(bytes)) if bytes.len() > limit => {
                Some(Err(Unreadable::TooLarge(Some(bytes.len()))))
            }
            Ok(Message::Binary(bytes)) => Some(
                ClientMessage::decode(bytes)
                    .map_err(|e| Unreadable::Malformed(format!("not a ClientMessage: {e}"))),
            ),
            Ok(Message::Text(_)) => Some(Err(Unreadable::Malformed(
                "text frames are not accepted: send each ClientMessage encoded in a binary frame"
                    .into(),
            ))),
            Ok(Message::Ping(_) | Message::Pong(_)) => None,
            // A close frame or a broken socket ends the session.
            Ok(Message::Close(_)) => Some(Err(Unreadable::Malformed(String::new()))),
            Err(e) => Some(Err(Unreadable::Malformed(e.to_string()))),
        }
    });
    // A close or an error ends the stream after its one item.
    let incoming = Box::pin(incoming.take_while(|item| {
        let closed = matches!(item, Err(Unreadable::Malformed(why)) if why.is_empty());
        std::future::ready(!closed)
    }));
    // The session's writer writes straight to the socket: no task or queue
    // of its own per connection.
    let out = SocketWriter { sink };
    driver::drive(shared, incoming, out, known, Some(peer)).await;
}

/// The socket's sending half, as a session's writer uses it.
struct SocketWriter {
    sink: futures_util::stream::SplitSink<WebSocket, Message>,
}

impl driver::Transmit for SocketWriter {
    async fn transmit(&mut self, message: driver::Outgoing) -> bool {
        let frame = Message::Binary(prost::Message::encode_to_vec(&*message).into());
        self.sink.feed(frame).await.is_ok()
    }

    async fn transmit_deliveries(&mut self, run: crate::convert::DeliveryRun<'_>) -> bool {
        let frame = Message::Binary(crate::encode::deliveries(run.iter()));
        self.sink.feed(frame).await.is_ok()
    }

    async fn flush(&mut self) -> bool {
        self.sink.flush().await.is_ok()
    }

    async fn close(&mut self) {
        let _ = self.sink.close().await;
    }
}
