//! A blocking raw Kafka connection: requests encoded by `kafka-protocol`,
//! or any bytes a bad-input test wants to send.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// How long a test waits for any single answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A blocking Kafka connection.
pub struct Client {
    stream: TcpStream,
    correlation: i32,
}

impl Client {
    /// Connects to `addr`; every read waits at most [`IO_TIMEOUT`].
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set the read timeout");
        Client {
            stream,
            correlation: 0,
        }
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Sends a request; returns its correlation id.
    pub fn send<R: Encodable>(&mut self, key: ApiKey, version: i16, body: &R) -> i32 {
        self.correlation += 1;
        let frame = request_frame(key, version, self.correlation, body);
        self.send_raw(&frame);
        self.correlation
    }

    /// Reads one response frame: (correlation id, body bytes after the header).
    pub fn receive_frame(&mut self, key: ApiKey, version: i16) -> (i32, Bytes) {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).expect("response size");
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut frame).expect("response body");
        let mut frame = Bytes::from(frame);
        let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))
            .expect("response header");
        (header.correlation_id, frame)
    }

    /// Reads and decodes one response.
    pub fn receive<R: Decodable>(&mut self, key: ApiKey, version: i16) -> (i32, R) {
        let (correlation, mut body) = self.receive_frame(key, version);
        (
            correlation,
            R::decode(&mut body, version).expect("decode response"),
        )
    }

    /// Sends a request and reads its response, which must be the next one.
    pub fn call<Q: Encodable, R: Decodable>(&mut self, key: ApiKey, version: i16, body: &Q) -> R {
        let sent = self.send(key, version, body);
        let (correlation, response) = self.receive(key, version);
        assert_eq!(correlation, sent, "responses come back in request order");
        response
    }

    /// True if the server closed the connection (EOF or reset) within the
    /// read timeout, without sending anything.
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
        }
    }

    /// After a request was sent: true if the server closed the connection
    /// instead of answering, false if an answer arrived.
    pub fn closed_instead_of_answering(&mut self) -> bool {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).is_err()
    }
}

/// A whole request frame (size prefix, header, body).
pub fn request_frame<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation: i32,
    body: &R,
) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("herald-tests")))
        .encode(&mut buf, key.request_header_version(version))
        .expect("encode the request header");
    body.encode(&mut buf, version)
        .expect("encode the request body");
    let mut frame = (buf.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&buf);
    frame
}
