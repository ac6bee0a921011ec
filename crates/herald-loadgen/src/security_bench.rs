//! The security benchmark (issue 17): what TLS, SASL and ACLs cost on the
//! produce and fetch paths, and how many SCRAM logins a broker core serves.
//!
//! `seed` gives a broker the ACL load the issue names (10,000 ACLs over
//! 1,000 principals, none of which the benchmark's own user matches except
//! its own prefixed grants, so every check walks a realistic index);
//! `measure` produces to and fetches from a fresh topic per batch size on
//! one connection set up as a Kafka client's `security.protocol` says, and
//! appends one JSON row per run; `handshakes` opens and logs in
//! connections as fast as it can for a while and counts them against the
//! broker's CPU time.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_auth::acl::WILDCARD;
use herald_auth::{AclBinding, Operation, PatternType, Permission, ResourceType, ScramMechanism};
use herald_client::security_admin;
use herald_client::{admin, ConnectOptions, Connection};
use serde::Serialize;

use crate::consume::{self, ConsumeSpec};
use crate::cpu;
use crate::produce::{self, ProduceSpec};
use crate::progress::Progress;
use crate::LoadError;

/// The prefix of every topic and group the benchmark uses: its user holds
/// ALL on it.
pub const TOPIC_PREFIX: &str = "sec-";
/// ACLs per CreateAcls request while seeding.
const SEED_BATCH: usize = 500;

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct SecurityRow {
    /// `herald` or `kafka`.
    pub broker: String,
    /// What was on: `plaintext`, `ssl`, `sasl_plaintext+acls`, ...
    pub setup: String,
    /// `produce`, `fetch` or `scram_handshake`.
    pub op: String,
    /// Records per request (0 for handshakes).
    pub batch: u32,
    /// Which repeat.
    pub repeat: u32,
    /// Records (or handshakes) done.
    pub count: u64,
    /// Wall time of the run.
    pub secs: f64,
    /// `count / secs`.
    pub per_s: f64,
    /// Payload megabytes per second (batch bytes; 0 for handshakes).
    pub mb_per_s: f64,
    /// Broker CPU nanoseconds per record (or handshake), when its PID was
    /// given.
    pub broker_cpu_ns: Option<f64>,
    /// Broker cores busy on average.
    pub broker_cores: Option<f64>,
}

/// Gives the broker `acls` ACLs over `principals` principals (none of them
/// the benchmark's user), and the benchmark's user ALL on
/// [`TOPIC_PREFIX`] topics and groups, with a SCRAM-SHA-512 credential.
pub async fn seed(
    addr: SocketAddr,
    admin_options: &ConnectOptions,
    principals: u32,
    acls: u32,
    user: &str,
    password: &str,
) -> Result<(), LoadError> {
    let mut connection = Connection::connect_with(&addr.to_string(), admin_options).await?;
    security_admin::set_scram(
        &mut connection,
        user,
        ScramMechanism::Sha512,
        4096,
        password,
    )
    .await?;
    let mut bindings = Vec::with_capacity(acls as usize + 2);
    let principal_count = principals.max(1);
    for i in 0..acls {
        let owner = i % principal_count;
        let n = i / principal_count;
        let (resource_type, name, pattern_type, operation) = match i % 4 {
            0 => (
                ResourceType::Topic,
                format!("t{owner}.{n}"),
                PatternType::Literal,
                Operation::Read,
            ),
            1 => (
                ResourceType::Topic,
                format!("p{owner}.{n}."),
                PatternType::Prefixed,
                Operation::Write,
            ),
            2 => (
                ResourceType::Group,
                format!("g{owner}.{n}"),
                PatternType::Literal,
                Operation::Read,
            ),
            _ => (
                ResourceType::Topic,
                format!("d{owner}.{n}"),
                PatternType::Literal,
                Operation::Describe,
            ),
        };
        bindings.push(AclBinding {
            resource_type,
            name,
            pattern_type,
            principal: format!("User:tenant{owner}"),
            host: WILDCARD.to_owned(),
            operation,
            permission: Permission::Allow,
        });
    }
    for resource_type in [ResourceType::Topic, ResourceType::Group] {
        bindings.push(AclBinding {
            resource_type,
            name: TOPIC_PREFIX.to_owned(),
            pattern_type: PatternType::Prefixed,
            principal: format!("User:{user}"),
            host: WILDCARD.to_owned(),
            operation: Operation::All,
            permission: Permission::Allow,
        });
    }
    for chunk in bindings.chunks(SEED_BATCH) {
        security_admin::create_acls(&mut connection, chunk).await?;
    }
    Ok(())
}

/// What one `measure` call runs.
#[derive(Debug, Clone)]
pub struct MeasureSpec {
    /// The broker's listener for this setup.
    pub addr: SocketAddr,
    /// `herald` or `kafka`.
    pub broker: String,
    /// The setup's name in the rows.
    pub setup: String,
    /// How to connect.
    pub security: ConnectOptions,
    /// Records per request.
    pub batches: Vec<u32>,
    /// Seconds of produce (and at least of fetch) per run.
    pub secs: f64,
    /// Runs of each batch size.
    pub repeats: u32,
    /// The number the first run's rows carry.
    pub first_repeat: u32,
    /// The broker's PID, for its CPU time.
    pub broker_pid: Option<u32>,
}

/// Produces to and fetches from a fresh topic per batch size and repeat;
/// appends a row per run to `out`.
pub async fn measure(spec: &MeasureSpec, out: &Path) -> Result<(), LoadError> {
    for repeat in spec.first_repeat..spec.first_repeat + spec.repeats {
        for &batch in &spec.batches {
            let topic = format!(
                "{TOPIC_PREFIX}{}-b{batch}-r{repeat}-{}",
                spec.setup.replace('+', "-"),
                crate::clock::now_ns()
            );
            let mut connection =
                Connection::connect_with(&spec.addr.to_string(), &spec.security).await?;
            admin::create_topic(&mut connection, &topic, Some(1), &[]).await?;
            wait_for_leader(&mut connection, &topic).await?;
            let duration = Duration::from_secs_f64(spec.secs);
            let produce = ProduceSpec {
                addr: spec.addr,
                topic: topic.clone(),
                batch,
                publishers: 1,
                acks: 1,
                in_flight: 8,
                duration,
                records_max: u64::MAX,
                rate: None,
                stamp: false,
                security: spec.security.clone(),
            };
            let before = spec.broker_pid.and_then(cpu::sample);
            let produced = produce::run(&produce, Arc::new(Progress::default())).await?;
            let after = spec.broker_pid.and_then(cpu::sample);
            if produced.errors > 0 {
                return Err(LoadError::Broker {
                    api: "Produce",
                    code: produced.last_error.unwrap_or(-1),
                });
            }
            let measured = row(
                spec,
                "produce",
                batch,
                repeat,
                produced.records,
                produced.bytes,
                produced.secs,
                before,
                after,
            );
            append(out, &measured)?;
            let fetch = ConsumeSpec {
                addr: spec.addr,
                topic: topic.clone(),
                subscribers: 1,
                max_bytes: 1 << 20,
                duration: duration * 4,
                min_duration: duration,
                records_max: u64::MAX,
                security: spec.security.clone(),
            };
            let before = spec.broker_pid.and_then(cpu::sample);
            let fetched = consume::run(&fetch, Arc::new(Progress::default())).await?;
            let after = spec.broker_pid.and_then(cpu::sample);
            let measured = row(
                spec,
                "fetch",
                batch,
                repeat,
                fetched.records,
                fetched.bytes,
                fetched.secs,
                before,
                after,
            );
            append(out, &measured)?;
            let _ = admin::delete_topic(&mut connection, &topic).await;
        }
    }
    Ok(())
}

/// Waits until `topic`'s partition has a leader: Kafka answers CreateTopics
/// once the controller committed the topic, and its partition takes a
/// moment more to be served.
async fn wait_for_leader(connection: &mut Connection, topic: &str) -> Result<(), LoadError> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(info) = admin::topic(connection, topic).await {
            if info.partitions.iter().all(|&(_, leader)| leader >= 0) && !info.partitions.is_empty()
            {
                tokio::time::sleep(Duration::from_millis(500)).await;
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err(LoadError::Timeout {
                what: "the new topic's leader",
                timeout_ms: 15_000,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Opens and logs in connections on `connections` tasks for `secs`; the
/// row counts them against the broker's CPU time.
pub async fn handshakes(spec: &MeasureSpec, connections: u32, out: &Path) -> Result<(), LoadError> {
    for repeat in spec.first_repeat..spec.first_repeat + spec.repeats {
        let done = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + Duration::from_secs_f64(spec.secs);
        let before = spec.broker_pid.and_then(cpu::sample);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..connections.max(1) {
            let (addr, security, done) = (
                spec.addr.to_string(),
                spec.security.clone(),
                Arc::clone(&done),
            );
            tasks.push(tokio::spawn(async move {
                while Instant::now() < deadline {
                    let connection = Connection::connect_with(&addr, &security).await?;
                    drop(connection);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<(), LoadError>(())
            }));
        }
        for task in tasks {
            task.await.map_err(|e| LoadError::Io {
                what: "handshake task",
                source: std::io::Error::other(e.to_string()),
            })??;
        }
        let secs = started.elapsed().as_secs_f64();
        let after = spec.broker_pid.and_then(cpu::sample);
        let count = done.load(Ordering::Relaxed);
        let measured = row(
            spec,
            "scram_handshake",
            0,
            repeat,
            count,
            0,
            secs,
            before,
            after,
        );
        append(out, &measured)?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn row(
    spec: &MeasureSpec,
    op: &str,
    batch: u32,
    repeat: u32,
    count: u64,
    bytes: u64,
    secs: f64,
    before: Option<cpu::CpuSample>,
    after: Option<cpu::CpuSample>,
) -> SecurityRow {
    let cpu = before.zip(after).map(|(b, a)| cpu::between(b, a));
    let secs = secs.max(1e-9);
    let row = SecurityRow {
        broker: spec.broker.clone(),
        setup: spec.setup.clone(),
        op: op.to_owned(),
        batch,
        repeat,
        count,
        secs,
        per_s: count as f64 / secs,
        mb_per_s: bytes as f64 / secs / 1e6,
        broker_cpu_ns: cpu.map(|(ns, _)| ns / (count.max(1) as f64)),
        broker_cores: cpu.map(|(_, cores)| cores),
    };
    eprintln!(
        "  {} {} {op} batch={batch} repeat={repeat}: {:.0}/s {:.1} MB/s",
        row.broker, row.setup, row.per_s, row.mb_per_s
    );
    row
}

fn append(out: &Path, row: &SecurityRow) -> Result<(), LoadError> {
    let line = serde_json::to_string(row).map_err(|e| LoadError::Io {
        what: "encode a row",
        source: std::io::Error::other(e.to_string()),
    })?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .map_err(|e| LoadError::io("open the rows file", e))?;
    writeln!(file, "{line}").map_err(|e| LoadError::io("write a row", e))
}
