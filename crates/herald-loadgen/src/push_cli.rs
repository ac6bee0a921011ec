//! `herald-loadgen push ...`: the push benchmarks' command line. Each run
//! makes a fresh topic, prints one JSON row and appends it to `--out`.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use herald_loadgen::push::{
    catch_up, fanout, features, memory, priority, rounds, session, subjects,
};

/// Where the broker listens, and where rows go.
#[derive(Debug, Args)]
pub struct Target {
    /// The broker's push listener.
    #[arg(long, default_value = "127.0.0.1:9093")]
    push: String,
    /// The broker's Kafka listener (topic setup, publishing).
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// JSON-lines file the row is appended to.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Runtime worker threads of the load generator.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

/// The brokers the fan-out measures.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum System {
    /// herald's push listener (`--push`, `--transport`).
    Herald,
    /// Core NATS (`--nats`).
    Nats,
    /// NATS JetStream (`--nats`, a server with JetStream on): a stream
    /// created for the run, a push consumer per subscriber.
    Jetstream,
    /// An MQTT 3.1.1 broker (`--mqtt`, `--qos`).
    Mqtt,
    /// No broker: a relay that only writes to the sockets.
    Floor,
}

/// The push scenarios.
#[derive(Debug, Subcommand)]
// Parsed once per process and matched at once: `Fanout`'s many options
// cost nothing boxed or not.
#[allow(clippy::large_enum_variant)]
pub enum PushCommand {
    /// Seed 002: N subscribers of one subject (or of `--subjects` in turn)
    /// at a fixed publish rate or at saturation, against herald, core NATS,
    /// an MQTT broker or the floor (no broker), with the same clients.
    Fanout {
        #[command(flatten)]
        target: Target,
        /// Which broker.
        #[arg(long, value_enum, default_value = "herald")]
        system: System,
        /// Subscribers, a connection each.
        #[arg(long)]
        subscribers: usize,
        /// What the row calls the scenario.
        #[arg(long, default_value = "s1")]
        scenario: String,
        /// Subjects. With one subscription per subscriber and no more
        /// subjects than subscribers, subscriber n listens to subject
        /// n % subjects; fewer subscriptions than subjects are spread
        /// evenly over them.
        #[arg(long, default_value_t = 1)]
        subjects: u32,
        /// Literal subjects each subscriber listens to.
        #[arg(long, default_value_t = 1)]
        per_subscriber: u32,
        /// Each subscriber also listens to one pattern naming 100 subjects.
        #[arg(long)]
        patterns: bool,
        /// How the publisher picks each message's subject.
        #[arg(long, value_enum, default_value = "in-turn")]
        choice: fanout::layout::Choice,
        /// Seeds the publisher's draws.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Partitions of herald's topic.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Messages per second (bursts per second with --burst); 0 for
        /// saturation.
        #[arg(long, default_value_t = 10)]
        rate: u32,
        /// Messages published together at each tick of --rate (seed 003's
        /// rounds: 20 per subscriber per second).
        #[arg(long, default_value_t = 1)]
        burst: u32,
        /// One subscriber in this many stops reading for --stall-ms (0:
        /// none does).
        #[arg(long, default_value_t = 0)]
        stall_every: u64,
        /// When the stalled subscribers stop reading, from the first
        /// publish.
        #[arg(long, default_value_t = 2_000)]
        stall_after_ms: u64,
        /// How long they stop.
        #[arg(long, default_value_t = 10_000)]
        stall_ms: u64,
        /// Close every subscriber's connection this long after the first
        /// publish and reopen each, resuming, within --reconnect-within-ms.
        #[arg(long)]
        reconnect_after_ms: Option<u64>,
        /// Over how long the reconnections spread.
        #[arg(long, default_value_t = 1_000)]
        reconnect_within_ms: u64,
        /// Seconds of publishing.
        #[arg(long, default_value_t = 10.0)]
        secs: f64,
        /// Bytes per message (at least 20: the stamp).
        #[arg(long, default_value_t = 64)]
        payload_bytes: usize,
        /// Messages the publisher has in flight at most.
        #[arg(long, default_value_t = 256)]
        window: usize,
        /// herald's transport.
        #[arg(long, value_enum, default_value = "websocket")]
        transport: session::Transport,
        /// herald: push listeners to spread the subscribers over evenly
        /// (subscriber n on the (n mod count)-th), comma-separated or
        /// repeated: a cluster's or a relay tree's nodes. The publisher
        /// stays on --push. Default: every subscriber on --push.
        #[arg(long, value_delimiter = ',')]
        subscriber_push: Vec<String>,
        /// herald: publish to and subscribe to this existing topic (a
        /// cluster's, created with its replication factor, or one relays
        /// mirror) instead of a fresh one; it is kept after the run.
        #[arg(long)]
        topic: Option<String>,
        /// With --burst over 1, a client times out when it has not every
        /// message of a round this long after the round's tick (seed 003:
        /// 1 s).
        #[arg(long, default_value_t = 1_000)]
        round_deadline_ms: u64,
        /// The nats-server's client address (see `bench/nats/start.sh`).
        #[arg(long, default_value = "127.0.0.1:19422")]
        nats: String,
        /// The MQTT broker's address (see `bench/mosquitto/start.sh`).
        #[arg(long, default_value = "127.0.0.1:19883")]
        mqtt: String,
        /// MQTT QoS of publishes and subscriptions (0 or 1).
        #[arg(long, default_value_t = 0)]
        qos: u8,
        /// Threads writing in the floor's relay.
        #[arg(long, default_value_t = 2)]
        floor_senders: usize,
        /// The CPU the floor's relay runs on (where a pinned broker runs).
        #[arg(long)]
        floor_cpu: Option<usize>,
        /// Subscribers per generator process at most.
        #[arg(long, default_value_t = 9000)]
        per_generator: usize,
        /// All connections from 127.0.0.1 instead of one loopback address
        /// per generator.
        #[arg(long)]
        one_source: bool,
        /// The broker's pid, for its CPU and memory (the floor's relay is
        /// this program's child and measured without it).
        #[arg(long)]
        broker_pid: Option<u32>,
        /// herald's admin listener: its heap gauge says what the
        /// subscribers cost it.
        #[arg(long)]
        admin: Option<String>,
    },
    /// One generator process of `fanout`, started by it.
    #[command(hide = true)]
    FanoutGenerator {
        /// Its share, as JSON.
        #[arg(long)]
        plan: String,
    },
    /// The floor's relay, started by `fanout --system floor`.
    #[command(hide = true)]
    FanoutFloorRelay {
        /// Bytes per message.
        #[arg(long)]
        payload_bytes: usize,
        /// Threads writing.
        #[arg(long)]
        senders: usize,
        /// The CPU to run on.
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// Seed 003: clients each receiving `messages` on their own subject per
    /// round; the share late by `deadline_ms`.
    Rounds {
        #[command(flatten)]
        target: Target,
        /// Clients, a connection each.
        #[arg(long)]
        clients: usize,
        /// Messages per client per round.
        #[arg(long, default_value_t = 20)]
        messages: u32,
        /// Rounds.
        #[arg(long, default_value_t = 10)]
        rounds: u32,
        /// A client is late past this many ms after the round's start.
        #[arg(long, default_value_t = 1000)]
        deadline_ms: u64,
        /// Partitions of the topic.
        #[arg(long, default_value_t = 8)]
        partitions: u32,
    },
    /// Routing throughput and broker CPU per delivery with many subjects
    /// (`--keys many`), one (`--keys one`) or a few per connection (`--keys
    /// few`), the same subscriptions and deliveries.
    Subjects {
        #[command(flatten)]
        target: Target,
        /// Key distribution.
        #[arg(long, value_enum)]
        keys: subjects::Keys,
        /// Distinct subjects.
        #[arg(long, default_value_t = 1_000_000)]
        subjects: u64,
        /// Subscriptions, each to one subject.
        #[arg(long, default_value_t = 100_000)]
        subscriptions: u64,
        /// Connections the subscriptions are spread over.
        #[arg(long, default_value_t = 100)]
        connections: u64,
        /// Records published.
        #[arg(long, default_value_t = 2_000_000)]
        records: u64,
        /// Partitions of the topic.
        #[arg(long, default_value_t = 4)]
        partitions: u32,
        /// The broker's pid, for its CPU per delivery.
        #[arg(long)]
        broker_pid: Option<u32>,
    },
    /// What a filter (10% matching), priority (1% high) or expiry (5%
    /// expired) costs the broker against plain delivery.
    Features {
        #[command(flatten)]
        target: Target,
        /// The feature exercised.
        #[arg(long, value_enum)]
        feature: features::Feature,
        /// Records published.
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        /// Subscribers, a session each, every one receiving every record
        /// its feature lets through.
        #[arg(long, default_value_t = 4)]
        subscribers: u32,
        /// Partitions of the topic.
        #[arg(long, default_value_t = 4)]
        partitions: u32,
        /// The subscribers' transport.
        #[arg(long, value_enum, default_value = "websocket")]
        transport: session::Transport,
        /// The broker's pid, for its CPU per record.
        #[arg(long)]
        broker_pid: Option<u32>,
        /// The topic's `subject.filters` (auto: kept once subscribed, so
        /// the indexer's work is in the figures; false: not kept).
        #[arg(long, default_value = "auto")]
        subject_filters: String,
    },
    /// Latency of high-priority records to a subscriber flooded with
    /// normal ones (`--flood`) or idle.
    Priority {
        #[command(flatten)]
        target: Target,
        /// Flood the subscriber with normal records meanwhile.
        #[arg(long)]
        flood: bool,
        /// Probes and flood on different partitions of the topic.
        #[arg(long)]
        apart: bool,
        /// Seconds of probing.
        #[arg(long, default_value_t = 10.0)]
        secs: f64,
        /// High-priority probes per second.
        #[arg(long, default_value_t = 20)]
        probe_rate: u32,
        /// The subscriber's transport.
        #[arg(long, value_enum, default_value = "websocket")]
        transport: session::Transport,
        /// The WebSocket subscriber's kernel receive buffer in bytes
        /// (default: the kernel's autotuning).
        #[arg(long)]
        receive_buffer: Option<u32>,
        /// Normal records per second in the flood (default: as fast as
        /// the broker takes them).
        #[arg(long)]
        flood_rate: Option<u64>,
        /// The topic's `subject.filters` (auto: the indexer follows the
        /// flood too, once the subscriber subscribes).
        #[arg(long, default_value = "auto")]
        subject_filters: String,
    },
    /// Bytes a catch-up for one subject among many reads per byte it
    /// delivers, with the per-block subject filters and without.
    CatchUp {
        #[command(flatten)]
        target: Target,
        /// The broker's admin listener (the catch-up counters).
        #[arg(long, default_value = "127.0.0.1:9644")]
        admin: String,
        /// Distinct subjects in the partition.
        #[arg(long, default_value_t = 100_000)]
        subjects: u64,
        /// Records published to each of the two topics.
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        /// Records per produce batch.
        #[arg(long, default_value_t = 1024)]
        batch_records: u32,
        /// Subjects whose catch-up is measured.
        #[arg(long, default_value_t = 5)]
        probes: u64,
        /// The subscriber's transport.
        #[arg(long, value_enum, default_value = "websocket")]
        transport: session::Transport,
    },
    /// Broker memory per idle session and per subscription.
    Memory {
        #[command(flatten)]
        target: Target,
        /// The broker's pid.
        #[arg(long)]
        broker_pid: u32,
        /// The broker's admin listener (its heap gauge).
        #[arg(long, default_value = "127.0.0.1:9644")]
        admin: String,
        /// Idle sessions.
        #[arg(long, default_value_t = 2000)]
        connections: usize,
        /// Subscriptions each session then makes.
        #[arg(long, default_value_t = 50)]
        subscriptions_per_connection: u64,
        /// The sessions' transport.
        #[arg(long, value_enum, default_value = "grpc")]
        transport: session::Transport,
    },
}

impl PushCommand {
    /// The broker and output of a scenario; `None` for the processes the
    /// fan-out starts, which write no row.
    fn target(&self) -> Option<&Target> {
        match self {
            PushCommand::Fanout { target, .. }
            | PushCommand::Rounds { target, .. }
            | PushCommand::Subjects { target, .. }
            | PushCommand::Features { target, .. }
            | PushCommand::Priority { target, .. }
            | PushCommand::CatchUp { target, .. }
            | PushCommand::Memory { target, .. } => Some(target),
            PushCommand::FanoutGenerator { .. } | PushCommand::FanoutFloorRelay { .. } => None,
        }
    }
}

/// A fresh topic for one run.
async fn fresh_topic(bootstrap: &str, scenario: &str, partitions: i32) -> anyhow::Result<String> {
    fresh_topic_with(bootstrap, scenario, partitions, &[]).await
}

/// As [`fresh_topic`], with these configs.
async fn fresh_topic_with(
    bootstrap: &str,
    scenario: &str,
    partitions: i32,
    configs: &[(String, String)],
) -> anyhow::Result<String> {
    let name = format!("push-{scenario}-{}", std::process::id());
    let mut connection = herald_client::Connection::connect(bootstrap).await?;
    let _ = herald_client::admin::delete_topic(&mut connection, &name).await;
    herald_client::admin::create_topic(&mut connection, &name, Some(partitions), configs)
        .await
        .with_context(|| format!("creating topic {name}"))?;
    Ok(name)
}

/// Deletes a scenario's topic once it is measured; a failure only leaves
/// the data until the broker is stopped.
async fn drop_topic(bootstrap: &str, topic: &str) {
    if let Ok(mut connection) = herald_client::Connection::connect(bootstrap).await {
        let _ = herald_client::admin::delete_topic(&mut connection, topic).await;
    }
}

/// Runs one scenario and writes its row.
pub fn run(command: PushCommand) -> anyhow::Result<()> {
    match &command {
        PushCommand::FanoutGenerator { plan } => {
            let plan: fanout::generator::GeneratorPlan =
                serde_json::from_str(plan).context("the generator's plan")?;
            return fanout::generator::serve(&plan).context("a fan-out generator");
        }
        PushCommand::FanoutFloorRelay {
            payload_bytes,
            senders,
            cpu,
        } => {
            return fanout::floor::relay(*payload_bytes, *senders, *cpu)
                .context("the floor's relay");
        }
        _ => {}
    }
    let target = command
        .target()
        .context("a push scenario without a target")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(target.threads.max(1))
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let out = target.out.clone();
    let row = runtime.block_on(async {
        let row: serde_json::Value = match &command {
            PushCommand::Fanout {
                target,
                system,
                subscribers,
                scenario,
                subjects,
                per_subscriber,
                patterns,
                choice,
                seed,
                partitions,
                rate,
                burst,
                stall_every,
                stall_after_ms,
                stall_ms,
                reconnect_after_ms,
                reconnect_within_ms,
                secs,
                payload_bytes,
                window,
                transport,
                nats,
                mqtt,
                qos,
                floor_senders,
                floor_cpu,
                per_generator,
                one_source,
                broker_pid,
                admin,
                subscriber_push,
                topic,
                round_deadline_ms,
            } => {
                if !subscriber_push.is_empty() && !matches!(system, System::Herald) {
                    anyhow::bail!("--subscriber-push spreads herald's subscribers only");
                }
                let program = std::env::current_exe().context("finding this program")?;
                // The relay lives as long as this handle.
                let mut relay = None;
                let mut nodes = Vec::new();
                let (broker, pid) = match system {
                    System::Herald => {
                        let topic = match topic {
                            Some(topic) => topic.clone(),
                            None => fresh_topic(&target.bootstrap, "fanout", *partitions).await?,
                        };
                        let herald = |push: &str| fanout::broker::Broker::Herald {
                            push: push.to_owned(),
                            topic: topic.clone(),
                            transport: *transport,
                        };
                        nodes = subscriber_push.iter().map(|push| herald(push)).collect();
                        (herald(&target.push), *broker_pid)
                    }
                    System::Nats => (
                        fanout::broker::Broker::Nats { addr: nats.clone() },
                        *broker_pid,
                    ),
                    System::Jetstream => {
                        let mut connection =
                            herald_loadgen::push::nats::NatsConnection::connect(nats).await?;
                        herald_loadgen::push::jetstream::create_stream(&mut connection).await?;
                        (
                            fanout::broker::Broker::JetStream { addr: nats.clone() },
                            *broker_pid,
                        )
                    }
                    System::Mqtt => (
                        fanout::broker::Broker::Mqtt {
                            addr: mqtt.clone(),
                            qos: *qos,
                        },
                        *broker_pid,
                    ),
                    System::Floor => {
                        let (child, pid, addr) = fanout::start_floor(
                            &program,
                            *payload_bytes,
                            *floor_senders,
                            *floor_cpu,
                        )
                        .await?;
                        relay = Some(child);
                        let broker = fanout::broker::Broker::Floor {
                            addr,
                            payload_bytes: *payload_bytes,
                        };
                        (broker, Some(pid))
                    }
                };
                let disturbance = match (reconnect_after_ms, stall_every) {
                    (Some(after_ms), _) => fanout::disturbance::Disturbance::Reconnect {
                        after_ms: *after_ms,
                        within_ms: *reconnect_within_ms,
                    },
                    (None, 0) => fanout::disturbance::Disturbance::None,
                    (None, every) => fanout::disturbance::Disturbance::Stall {
                        every: *every,
                        after_ms: *stall_after_ms,
                        for_ms: *stall_ms,
                    },
                };
                let plan = fanout::Fanout {
                    scenario: scenario.clone(),
                    broker,
                    nodes,
                    rounds: Some(fanout::generator::RoundsPlan {
                        burst: *burst,
                        deadline_ms: *round_deadline_ms,
                    }),
                    subscribers: *subscribers,
                    layout: fanout::layout::Layout {
                        subjects: *subjects,
                        subscribers: *subscribers as u64,
                        per_subscriber: *per_subscriber,
                        patterns: *patterns,
                        choice: *choice,
                        seed: *seed,
                    },
                    rate: *rate,
                    burst: *burst,
                    disturbance,
                    secs: *secs,
                    payload_bytes: *payload_bytes,
                    window: *window,
                    per_generator: *per_generator,
                    open_parallel: 200,
                    spread_sources: !*one_source,
                    generator: program,
                    broker_pid: pid,
                    heap_metrics: match system {
                        System::Herald => admin.clone(),
                        _ => None,
                    },
                };
                let row = fanout::run(&plan).await;
                drop(relay);
                match &plan.broker {
                    fanout::broker::Broker::Herald { topic: made, .. } if topic.is_none() => {
                        drop_topic(&target.bootstrap, made).await;
                    }
                    fanout::broker::Broker::JetStream { addr } => {
                        // What is left is the next run's to delete.
                        if let Ok(mut connection) =
                            herald_loadgen::push::nats::NatsConnection::connect(addr).await
                        {
                            let _ = herald_loadgen::push::jetstream::delete_stream(&mut connection)
                                .await;
                        }
                    }
                    _ => {}
                }
                serde_json::to_value(row?)?
            }
            PushCommand::FanoutGenerator { .. } | PushCommand::FanoutFloorRelay { .. } => {
                anyhow::bail!("a fan-out helper process writes no row")
            }
            PushCommand::Rounds {
                target,
                clients,
                messages,
                rounds,
                deadline_ms,
                partitions,
            } => {
                let topic = fresh_topic(&target.bootstrap, "rounds", *partitions as i32).await?;
                let plan = rounds::Rounds {
                    push: target.push.clone(),
                    bootstrap: target.bootstrap.clone(),
                    topic,
                    partitions: *partitions,
                    clients: *clients,
                    messages: *messages,
                    rounds: *rounds,
                    deadline: Duration::from_millis(*deadline_ms),
                    open_parallel: 200,
                };
                serde_json::to_value(rounds::run(&plan).await?)?
            }
            PushCommand::Subjects {
                target,
                keys,
                subjects: count,
                subscriptions,
                connections,
                records,
                partitions,
                broker_pid,
            } => {
                let topic = fresh_topic(&target.bootstrap, "subjects", *partitions as i32).await?;
                let plan = subjects::Subjects {
                    push: target.push.clone(),
                    bootstrap: target.bootstrap.clone(),
                    topic,
                    partitions: *partitions,
                    subjects: *count,
                    subscriptions: *subscriptions,
                    connections: *connections,
                    records: *records,
                    keys: *keys,
                    broker_pid: *broker_pid,
                };
                let row = subjects::run(&plan).await;
                // Repeats run against one broker: a run's records must not
                // fill its memory for the next.
                drop_topic(&target.bootstrap, &plan.topic).await;
                serde_json::to_value(row?)?
            }
            PushCommand::Features {
                target,
                feature,
                records,
                subscribers,
                partitions,
                transport,
                broker_pid,
                subject_filters,
            } => {
                let topic = fresh_topic_with(
                    &target.bootstrap,
                    "features",
                    *partitions as i32,
                    &[("subject.filters".to_owned(), subject_filters.clone())],
                )
                .await?;
                let plan = features::Features {
                    push: target.push.clone(),
                    bootstrap: target.bootstrap.clone(),
                    topic,
                    partitions: *partitions,
                    records: *records,
                    subscribers: *subscribers,
                    feature: *feature,
                    transport: *transport,
                    broker_pid: *broker_pid,
                };
                let mut row = serde_json::to_value(features::run(&plan).await?)?;
                row["subject_filters"] = subject_filters.clone().into();
                row
            }
            PushCommand::Priority {
                target,
                flood,
                apart,
                secs,
                probe_rate,
                transport,
                receive_buffer,
                flood_rate,
                subject_filters,
            } => {
                let partitions = if *apart { 2 } else { 1 };
                let topic = fresh_topic_with(
                    &target.bootstrap,
                    "priority",
                    partitions,
                    &[("subject.filters".to_owned(), subject_filters.clone())],
                )
                .await?;
                let plan = priority::Priority {
                    push: target.push.clone(),
                    bootstrap: target.bootstrap.clone(),
                    topic,
                    flood: *flood,
                    apart: *apart,
                    secs: *secs,
                    probe_rate: *probe_rate,
                    transport: *transport,
                    receive_buffer: *receive_buffer,
                    flood_rate: *flood_rate,
                };
                let mut row = serde_json::to_value(priority::run(&plan).await?)?;
                row["subject_filters"] = subject_filters.clone().into();
                // A flood writes gigabytes: give them back before the next run.
                drop_topic(&target.bootstrap, &plan.topic).await;
                row
            }
            PushCommand::CatchUp {
                target,
                admin,
                subjects,
                records,
                batch_records,
                probes,
                transport,
            } => {
                let filters = |on: &str| [("subject.filters".to_owned(), on.to_owned())];
                let filtered_topic =
                    fresh_topic_with(&target.bootstrap, "catch-up-filtered", 1, &filters("true"))
                        .await?;
                let plain_topic =
                    fresh_topic_with(&target.bootstrap, "catch-up-plain", 1, &filters("false"))
                        .await?;
                let plan = catch_up::CatchUp {
                    push: target.push.clone(),
                    bootstrap: target.bootstrap.clone(),
                    admin: admin.clone(),
                    filtered_topic,
                    plain_topic,
                    subjects: *subjects,
                    records: *records,
                    batch_records: *batch_records,
                    probes: *probes,
                    transport: *transport,
                };
                let row = serde_json::to_value(catch_up::run(&plan).await?)?;
                drop_topic(&target.bootstrap, &plan.filtered_topic).await;
                drop_topic(&target.bootstrap, &plan.plain_topic).await;
                row
            }
            PushCommand::Memory {
                target,
                broker_pid,
                admin,
                connections,
                subscriptions_per_connection,
                transport,
            } => {
                let topic = fresh_topic(&target.bootstrap, "memory", 1).await?;
                let plan = memory::Memory {
                    push: target.push.clone(),
                    admin: admin.clone(),
                    topic,
                    broker_pid: *broker_pid,
                    connections: *connections,
                    subscriptions_per_connection: *subscriptions_per_connection,
                    transport: *transport,
                };
                serde_json::to_value(memory::run(&plan).await?)?
            }
        };
        Ok::<_, anyhow::Error>(row)
    })?;
    let line = row.to_string();
    println!("{line}");
    if let Some(out) = out {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out)
            .with_context(|| format!("opening {}", out.display()))?;
        writeln!(file, "{line}")?;
    }
    Ok(())
}
