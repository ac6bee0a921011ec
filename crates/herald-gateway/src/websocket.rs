//! The session protocol over WebSocket: `GET /v1/session`, one encoded
//! message per binary frame each way.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use prost::Message as _;
use tokio::sync::mpsc;

use crate::driver::{self, Unreadable};
use crate::proto::ClientMessage;
use crate::server::Shared;

/// Messages queued between a session's writer and the socket.
const SOCKET_QUEUE: usize = 4;

/// Upgrades the request and runs a session on the socket.
pub(crate) async fn upgrade(State(shared): State<Arc<Shared>>, ws: WebSocketUpgrade) -> Response {
    let limit = shared.max_message_bytes;
    // Frames up to twice the limit are read and answered with a go-away
    // naming the limit; larger ones close the socket at once.
    ws.max_message_size(limit.saturating_mul(2))
        .max_frame_size(limit.saturating_mul(2))
        .on_upgrade(move |socket| run(shared, socket))
}

async fn run(shared: Arc<Shared>, socket: WebSocket) {
    let limit = shared.max_message_bytes;
    let (mut sink, stream) = socket.split();
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
    let (out, mut out_rx) = mpsc::channel::<driver::Outgoing>(SOCKET_QUEUE);
    let sender = tokio::spawn(async move {
        while let Some(message) = out_rx.recv().await {
            let frame = Message::Binary(prost::Message::encode_to_vec(&*message).into());
            if sink.send(frame).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    driver::drive(
        Arc::clone(&shared.engine),
        incoming,
        out,
        limit,
        shared.shutdown.clone(),
    )
    .await;
    let _ = tokio::time::timeout(driver::CLOSE_GRACE, sender).await;
}
