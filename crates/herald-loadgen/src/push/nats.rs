//! A NATS client for the comparisons, speaking the text protocol (the
//! protocol is a handful of lines; NATS documents it as the way to write a
//! client): CONNECT, SUB, PUB, PING/PONG, and MSG parsed into payloads.
//! Core NATS only: at most once, no acknowledgements.

use std::net::IpAddr;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::PushBenchError;

/// The largest payload accepted from the server: the comparisons send
/// small messages, and a count past this is a protocol error, not a
/// reason to allocate.
const PAYLOAD_MAX: usize = 1 << 20;

/// One connection to a nats-server.
pub struct NatsConnection {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    line: String,
}

fn failed(reason: impl std::fmt::Display) -> PushBenchError {
    PushBenchError::Refused(format!("nats: {reason}"))
}

impl NatsConnection {
    /// Connects to `addr`, reads the server's INFO and sends CONNECT
    /// (not verbose, so no +OK per message), then waits for the PONG
    /// that confirms the server took it.
    pub async fn connect(addr: &str) -> Result<Self, PushBenchError> {
        Self::connect_from(addr, None).await
    }

    /// As [`NatsConnection::connect`], from loopback address `source`.
    pub async fn connect_from(addr: &str, source: Option<IpAddr>) -> Result<Self, PushBenchError> {
        let stream = super::socket::connect_from(addr, source, None).await?;
        let (read, writer) = stream.into_split();
        let mut connection = Self {
            reader: BufReader::with_capacity(4096, read),
            writer,
            line: String::new(),
        };
        connection.read_line().await?;
        if !connection.line.starts_with("INFO ") {
            return Err(failed(format!("expected INFO, got {:?}", connection.line)));
        }
        connection
            .writer
            .write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false,\"lang\":\"rust\",\"version\":\"herald-loadgen\",\"protocol\":1}\r\nPING\r\n")
            .await
            .map_err(failed)?;
        loop {
            connection.read_line().await?;
            match connection.line.trim_end() {
                "PONG" => return Ok(connection),
                "PING" => connection
                    .writer
                    .write_all(b"PONG\r\n")
                    .await
                    .map_err(failed)?,
                line if line.starts_with("-ERR") => return Err(failed(line)),
                _ => {}
            }
        }
    }

    async fn read_line(&mut self) -> Result<(), PushBenchError> {
        self.line.clear();
        let n = self
            .reader
            .read_line(&mut self.line)
            .await
            .map_err(failed)?;
        if n == 0 {
            return Err(failed("the server closed the connection"));
        }
        Ok(())
    }

    /// Subscribes to `subject` under `sid`, and waits for the server to
    /// have taken it (a PING answered after the SUB).
    pub async fn subscribe(&mut self, subject: &str, sid: u64) -> Result<(), PushBenchError> {
        self.writer
            .write_all(format!("SUB {subject} {sid}\r\nPING\r\n").as_bytes())
            .await
            .map_err(failed)?;
        loop {
            self.read_line().await?;
            match self.line.trim_end() {
                "PONG" => return Ok(()),
                "PING" => self.writer.write_all(b"PONG\r\n").await.map_err(failed)?,
                line if line.starts_with("-ERR") => return Err(failed(line)),
                _ => {}
            }
        }
    }

    /// Publishes `payload` on `subject` (buffered by the kernel; core
    /// NATS answers nothing).
    pub async fn publish(&mut self, subject: &str, payload: &[u8]) -> Result<(), PushBenchError> {
        let mut frame = Vec::with_capacity(subject.len() + payload.len() + 24);
        frame.extend_from_slice(format!("PUB {subject} {}\r\n", payload.len()).as_bytes());
        frame.extend_from_slice(payload);
        frame.extend_from_slice(b"\r\n");
        self.writer.write_all(&frame).await.map_err(failed)
    }

    /// Round trip to the server: everything published before it has been
    /// processed when this returns.
    pub async fn flush(&mut self) -> Result<(), PushBenchError> {
        self.writer.write_all(b"PING\r\n").await.map_err(failed)?;
        loop {
            self.read_line().await?;
            match self.line.trim_end() {
                "PONG" => return Ok(()),
                "PING" => self.writer.write_all(b"PONG\r\n").await.map_err(failed)?,
                line if line.starts_with("-ERR") => return Err(failed(line)),
                _ => {}
            }
        }
    }

    /// The payload of the next message delivered to this connection,
    /// answering the server's PINGs meanwhile.
    pub async fn next_message(&mut self, payload: &mut Vec<u8>) -> Result<(), PushBenchError> {
        loop {
            self.read_line().await?;
            let line = self.line.trim_end();
            if line == "PING" {
                self.writer.write_all(b"PONG\r\n").await.map_err(failed)?;
                continue;
            }
            if line.starts_with("-ERR") {
                return Err(failed(line.to_owned()));
            }
            // MSG <subject> <sid> [reply-to] <#bytes>
            let Some(rest) = line.strip_prefix("MSG ") else {
                continue;
            };
            let size = rest
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= PAYLOAD_MAX)
                .ok_or_else(|| failed(format!("bad MSG line {line:?}")))?;
            payload.resize(size + 2, 0);
            self.reader.read_exact(payload).await.map_err(failed)?;
            payload.truncate(size);
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;

    use super::NatsConnection;

    /// Reads lines until one starts with `prefix`; answers what it read.
    async fn expect<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R, prefix: &str) -> String {
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            assert!(
                reader.read_line(&mut line).await.unwrap() > 0,
                "closed; saw {seen:?}"
            );
            seen.push_str(&line);
            if line.starts_with(prefix) {
                return seen;
            }
        }
    }

    #[tokio::test]
    async fn speaks_the_text_protocol_and_answers_pings() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let (read, mut write) = socket.into_split();
            let mut read = BufReader::new(read);
            write
                .write_all(b"INFO {\"server_id\":\"x\"}\r\n")
                .await
                .unwrap();
            let connect = expect(&mut read, "PING").await;
            assert!(
                connect.starts_with("CONNECT {\"verbose\":false"),
                "{connect:?}"
            );
            write.write_all(b"PONG\r\n").await.unwrap();
            let sub = expect(&mut read, "PING").await;
            assert_eq!(sub, "SUB fanout.subject 7\r\nPING\r\n");
            // A server PING between messages, a reply-to subject, a payload
            // holding CR LF.
            write
                .write_all(b"PONG\r\nPING\r\nMSG fanout.subject 7 5\r\nhello\r\nMSG fanout.subject 7 inbox.1 4\r\na\r\nb\r\n")
                .await
                .unwrap();
            assert_eq!(expect(&mut read, "PONG").await, "PONG\r\n");
            let publish = expect(&mut read, "PUB").await;
            assert_eq!(publish, "PUB fanout.subject 3\r\n");
            let mut payload = String::new();
            read.read_line(&mut payload).await.unwrap();
            assert_eq!(payload, "abc\r\n");
            // An oversized count is refused, not allocated.
            write.write_all(b"MSG s 7 99999999999\r\n").await.unwrap();
        });
        let mut client = NatsConnection::connect(&addr).await.unwrap();
        client.subscribe("fanout.subject", 7).await.unwrap();
        let mut payload = Vec::new();
        client.next_message(&mut payload).await.unwrap();
        assert_eq!(payload, b"hello");
        client.next_message(&mut payload).await.unwrap();
        assert_eq!(payload, b"a\r\nb");
        client.publish("fanout.subject", b"abc").await.unwrap();
        assert!(client.next_message(&mut payload).await.is_err());
        server.await.unwrap();
    }
}
