//! One request at a time over one connection: for the few admin calls a
//! run makes (create and delete topics). The hot paths pipeline instead.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::wire::{decode_response, read_frame, request_frame};
use crate::LoadError;

/// How long an admin call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection that sends one request and waits for its answer.
pub struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    correlation_id: i32,
    client_id: String,
}

impl Conn {
    /// Connects to `addr`, naming itself `client_id`.
    pub async fn connect(addr: SocketAddr, client_id: &str) -> Result<Self, LoadError> {
        let stream = tokio::time::timeout(CALL_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| LoadError::Timeout {
                what: "connect",
                timeout_ms: CALL_TIMEOUT.as_millis() as u64,
            })?
            .map_err(|e| LoadError::io("connect", e))?;
        stream
            .set_nodelay(true)
            .map_err(|e| LoadError::io("set TCP_NODELAY", e))?;
        Ok(Self {
            stream,
            buf: BytesMut::new(),
            correlation_id: 0,
            client_id: client_id.to_owned(),
        })
    }

    /// Sends `body` and returns the decoded response.
    pub async fn call<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Q,
    ) -> Result<R, LoadError> {
        self.correlation_id += 1;
        let expected = self.correlation_id;
        let frame = request_frame(key, version, expected, &self.client_id, body)?;
        let exchange = async {
            self.stream
                .write_all(&frame)
                .await
                .map_err(|e| LoadError::io("send request", e))?;
            read_frame(&mut self.stream, &mut self.buf).await
        };
        let frame = tokio::time::timeout(CALL_TIMEOUT, exchange)
            .await
            .map_err(|_| LoadError::Timeout {
                what: "an admin request",
                timeout_ms: CALL_TIMEOUT.as_millis() as u64,
            })??;
        let (found, response) = decode_response(key, version, frame)?;
        if found != expected {
            return Err(LoadError::Correlation { expected, found });
        }
        Ok(response)
    }
}
