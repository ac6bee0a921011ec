//! Test harness: runs the real `herald` binary on a free port and speaks
//! the Kafka protocol to it over plain blocking sockets.

#![allow(dead_code)] // each test file uses a different part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use herald_log::batch::{testing, BatchHeader};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// How long a test waits for any single answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `herald serve`.
pub struct Server {
    child: Child,
    /// The bound Kafka address.
    pub addr: SocketAddr,
    /// The bound admin HTTP address.
    pub admin_addr: SocketAddr,
}

impl Server {
    /// Starts herald on `data_dir` with extra flags, on a free port.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
            .args([
                "serve",
                "--kafka-listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--data-dir",
            ])
            .arg(data_dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn herald");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("admin listener ready on ").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    let _ = tx.send(addr.to_owned());
                }
                if !sent {
                    if let Some(rest) = line.split("kafka listener ready on ").nth(1) {
                        let addr = rest
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_owned();
                        let _ = tx.send(addr);
                        sent = true;
                    }
                }
                if std::env::var_os("HERALD_TEST_LOG").is_some() {
                    eprintln!("[herald] {line}");
                }
            }
        });
        // The admin listener is reported first, then the Kafka listener.
        let next_addr = |what: &str| -> SocketAddr {
            rx.recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("herald did not report its {what} listener"))
                .parse()
                .expect("listener address")
        };
        let admin_addr = next_addr("admin");
        let addr = next_addr("kafka");
        Server {
            child,
            addr,
            admin_addr,
        }
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(mut self) -> ExitStatus {
        // SAFETY: plain kill(2) on the child's pid, which we own and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "herald did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("wait").is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking Kafka connection.
pub struct Client {
    stream: TcpStream,
    correlation: i32,
}

impl Client {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
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
            .expect("header");
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

    /// Sends a request and reads its response.
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
}

impl Client {
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
        .expect("header");
    body.encode(&mut buf, version).expect("body");
    let mut frame = (buf.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&buf);
    frame
}

/// Wire string.
pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A valid batch of `count` records of `value`.
pub fn batch(count: u32, value: &[u8]) -> Bytes {
    Bytes::from(testing::batch(count, value, 1_700_000_000_000))
}

/// A batch whose CRC does not match its content.
pub fn batch_with_wrong_crc(count: u32, value: &[u8]) -> Bytes {
    let mut b = testing::batch(count, value, 1_700_000_000_000);
    let last = b.len() - 1;
    b[last] ^= 0x5a;
    assert_ne!(
        BatchHeader::compute_crc(&b),
        BatchHeader::parse(&b).expect("header").crc()
    );
    Bytes::from(b)
}

pub const PRODUCE_V: i16 = 9;
pub const FETCH_V: i16 = 12;

/// Creates a topic; returns the error code.
pub fn create_topic(
    client: &mut Client,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )]);
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request);
    response.topics[0].error_code
}

/// A produce request for one partition.
pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records)),
            ])])
}

/// Produces with acks=1; returns (error code, base offset).
pub fn produce(client: &mut Client, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let response: ProduceResponse = client.call(
        ApiKey::Produce,
        PRODUCE_V,
        &produce_request(topic, partition, records, 1),
    );
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A fetch request for one partition.
pub fn fetch_request(
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(50 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// Fetches from one partition without waiting.
pub fn fetch(
    client: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
) -> fetch_response::PartitionData {
    let response: FetchResponse = client.call(
        ApiKey::Fetch,
        FETCH_V,
        &fetch_request(topic, partition, offset, 0, 1),
    );
    response.responses[0].partitions[0].clone()
}

/// Number of records in a run of batches.
pub fn record_count(records: &[u8]) -> u64 {
    herald_log::batch::batches(records)
        .map(|b| {
            BatchHeader::parse(b.expect("whole batch"))
                .expect("header")
                .offset_count() as u64
        })
        .sum()
}

/// Checks, over a fresh connection, that the broker still serves: a
/// produce is acknowledged and every record of `topic`-0 reads back.
pub fn assert_healthy(addr: SocketAddr, topic: &str, expected_records_before: u64) -> u64 {
    let mut client = Client::connect(addr);
    let (error, base) = produce(&mut client, topic, 0, batch(3, b"healthy"));
    assert_eq!(error, 0, "healthy produce");
    assert_eq!(
        base as u64, expected_records_before,
        "offsets continue where they were"
    );
    let data = fetch(&mut client, topic, 0, 0);
    assert_eq!(data.error_code, 0);
    let count = record_count(data.records.as_deref().unwrap_or_default());
    assert_eq!(
        count,
        expected_records_before + 3,
        "stored records are intact"
    );
    count
}
