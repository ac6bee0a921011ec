//! A NATS client for the comparisons, speaking the text protocol (the
//! protocol is a handful of lines; NATS documents it as the way to write a
//! client): CONNECT, SUB, PUB (with a reply subject or without), PING/PONG,
//! and MSG parsed into payloads and reply subjects, and requests over an
//! inbox, which is all JetStream's API needs ([`super::jetstream`]).

use std::net::IpAddr;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::PushBenchError;

/// The largest payload accepted from the server: the comparisons send
/// small messages, and a count past this is a protocol error, not a
/// reason to allocate.
const PAYLOAD_MAX: usize = 1 << 20;

/// `prefix` followed by this process's id and a number no other call in
/// this process returns: a subject only one connection listens to.
pub fn unique_subject(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}.{}.{n}", std::process::id())
}

/// The subscription id of a connection's inbox for requests.
const INBOX_SID: u64 = u32::MAX as u64;

/// One connection to a nats-server.
pub struct NatsConnection {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    line: String,
    /// The reply subject of the last message read (empty: none).
    reply: String,
    /// Messages that arrived while a request waited for its answer, as
    /// (payload, reply subject), handed out before reading more.
    early: std::collections::VecDeque<(Vec<u8>, String)>,
    /// This connection's inbox for requests, once subscribed.
    inbox: Option<String>,
    requests: u64,
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
            reply: String::new(),
            early: std::collections::VecDeque::new(),
            inbox: None,
            requests: 0,
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
        self.publish_to(subject, None, payload).await
    }

    /// Publishes `payload` on `subject`, asking for answers on `reply`.
    pub async fn publish_to(
        &mut self,
        subject: &str,
        reply: Option<&str>,
        payload: &[u8],
    ) -> Result<(), PushBenchError> {
        let mut frame = Vec::with_capacity(subject.len() + payload.len() + 64);
        match reply {
            Some(reply) => frame.extend_from_slice(
                format!("PUB {subject} {reply} {}\r\n", payload.len()).as_bytes(),
            ),
            None => {
                frame.extend_from_slice(format!("PUB {subject} {}\r\n", payload.len()).as_bytes())
            }
        }
        frame.extend_from_slice(payload);
        frame.extend_from_slice(b"\r\n");
        self.writer.write_all(&frame).await.map_err(failed)
    }

    /// This connection's inbox subject, subscribed on first use: answers to
    /// requests and to publishes that ask for one come to it.
    pub async fn inbox(&mut self) -> Result<String, PushBenchError> {
        if let Some(inbox) = &self.inbox {
            return Ok(inbox.clone());
        }
        let inbox = unique_subject("_INBOX.herald-loadgen");
        self.subscribe(&format!("{inbox}.*"), INBOX_SID).await?;
        self.inbox = Some(inbox.clone());
        Ok(inbox)
    }

    /// Sends `payload` to `subject` and returns the answer's payload;
    /// messages of other subscriptions that arrive meanwhile are kept for
    /// [`NatsConnection::next_message`].
    pub async fn request(
        &mut self,
        subject: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, PushBenchError> {
        let inbox = self.inbox().await?;
        self.requests += 1;
        let reply = format!("{inbox}.{}", self.requests);
        self.publish_to(subject, Some(&reply), payload).await?;
        loop {
            let mut answer = Vec::new();
            let sid = self.read_message(&mut answer).await?;
            if sid == INBOX_SID && self.line_subject() == Some(reply.as_str()) {
                return Ok(answer);
            }
            if sid != INBOX_SID {
                self.early
                    .push_back((answer, std::mem::take(&mut self.reply)));
            }
        }
    }

    /// The subject of the MSG line last read.
    fn line_subject(&self) -> Option<&str> {
        self.line.strip_prefix("MSG ")?.split(' ').next()
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
    /// answering the server's PINGs meanwhile; its reply subject is
    /// [`NatsConnection::reply`].
    pub async fn next_message(&mut self, payload: &mut Vec<u8>) -> Result<(), PushBenchError> {
        if let Some((early, reply)) = self.early.pop_front() {
            *payload = early;
            self.reply = reply;
            return Ok(());
        }
        self.read_message(payload).await.map(|_| ())
    }

    /// The reply subject of the last message [`NatsConnection::next_message`]
    /// returned (empty if it had none).
    pub fn reply(&self) -> &str {
        &self.reply
    }

    /// Reads the next MSG into `payload` and its reply subject into
    /// `self.reply`; returns its subscription id.
    async fn read_message(&mut self, payload: &mut Vec<u8>) -> Result<u64, PushBenchError> {
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
            // HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>:
            // the comparisons publish no headers, so one is a server's
            // status message (a JetStream heartbeat, say), read past.
            if let Some(rest) = line.strip_prefix("HMSG ") {
                let total = rest
                    .rsplit(' ')
                    .next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n <= PAYLOAD_MAX)
                    .ok_or_else(|| failed(format!("bad HMSG line {line:?}")))?;
                payload.resize(total + 2, 0);
                self.reader.read_exact(payload).await.map_err(failed)?;
                continue;
            }
            // MSG <subject> <sid> [reply-to] <#bytes>
            let Some(rest) = line.strip_prefix("MSG ") else {
                continue;
            };
            let words: Vec<&str> = rest.split(' ').collect();
            let parsed = match words.as_slice() {
                [_, sid, size] => Some((*sid, "", *size)),
                [_, sid, reply, size] => Some((*sid, *reply, *size)),
                _ => None,
            };
            let Some((sid, reply, size)) = parsed.and_then(|(sid, reply, size)| {
                let size = size.parse::<usize>().ok().filter(|&n| n <= PAYLOAD_MAX)?;
                Some((sid.parse::<u64>().ok()?, reply, size))
            }) else {
                return Err(failed(format!("bad MSG line {line:?}")));
            };
            self.reply.clear();
            self.reply.push_str(reply);
            payload.resize(size + 2, 0);
            self.reader.read_exact(payload).await.map_err(failed)?;
            payload.truncate(size);
            return Ok(sid);
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
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

    /// A listener posing as a nats-server: its address, and the first
    /// client's connection once accepted and sent INFO.
    async fn fake_server() -> (
        String,
        impl std::future::Future<Output = (BufReader<OwnedReadHalf>, OwnedWriteHalf)>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let client = async move {
            let (socket, _) = listener.accept().await.unwrap();
            let (read, mut write) = socket.into_split();
            write
                .write_all(b"INFO {\"server_id\":\"x\"}\r\n")
                .await
                .unwrap();
            (BufReader::new(read), write)
        };
        (addr, client)
    }

    #[tokio::test]
    async fn speaks_the_text_protocol_and_answers_pings() {
        let (addr, client) = fake_server().await;
        let server = tokio::spawn(async move {
            let (mut read, mut write) = client.await;
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

    #[tokio::test]
    async fn a_request_keeps_messages_that_arrive_before_its_answer() {
        let (addr, client) = fake_server().await;
        let server = tokio::spawn(async move {
            let (mut read, mut write) = client.await;
            expect(&mut read, "PING").await;
            write.write_all(b"PONG\r\n").await.unwrap();
            let inbox = expect(&mut read, "PING").await;
            let inbox = inbox
                .strip_prefix("SUB ")
                .and_then(|rest| rest.split(".*").next())
                .unwrap()
                .to_owned();
            write.write_all(b"PONG\r\n").await.unwrap();
            let request = expect(&mut read, "PUB").await;
            assert!(
                request.starts_with(&format!("PUB $JS.API.X {inbox}.1 2")),
                "{request:?}"
            );
            // A delivery on another subscription, a status message with
            // headers, then the answer.
            let answer = format!(
                "MSG deliver 1 $JS.ACK.S.C.1.5.1.0.0 3\r\none\r\nHMSG deliver 1 10 10\r\nNATS/1.0\r\n\r\n\r\nMSG {inbox}.1 {} 2\r\nok\r\n",
                u32::MAX
            );
            write.write_all(answer.as_bytes()).await.unwrap();
            let mut rest = String::new();
            let _ = read.read_line(&mut rest).await;
        });
        let mut client = NatsConnection::connect(&addr).await.unwrap();
        assert_eq!(client.request("$JS.API.X", b"{}").await.unwrap(), b"ok");
        let mut payload = Vec::new();
        client.next_message(&mut payload).await.unwrap();
        assert_eq!(payload, b"one");
        assert_eq!(client.reply(), "$JS.ACK.S.C.1.5.1.0.0");
        drop(client);
        server.await.unwrap();
    }
}
