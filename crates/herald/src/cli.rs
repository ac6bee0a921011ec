//! Command-line interface. Every `serve` flag can also come from the
//! environment (`HERALD_<FLAG>`) or the TOML file given with `--config`;
//! clap already ranks flags above the environment, and `settings` puts the
//! file below both.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

pub use crate::cli_client::{
    BenchArgs, ConsumeArgs, GroupCommand, OutputFormat, ProduceArgs, PublishArgs, ResetTo,
    StartFrom, SubscribeArgs, TopicCommand,
};

/// herald: a publish/subscribe broker that speaks the Kafka protocol.
#[derive(Debug, Parser)]
#[command(name = "herald", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the broker.
    #[command(
        after_help = "Example:\n  herald serve --data-dir ./herald-data --kafka-listen 127.0.0.1:9092\n  herald serve --print-config"
    )]
    Serve(Box<ServeArgs>),
    /// Create, list, describe, alter and delete topics.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// List, describe, reset the offsets of, and delete consumer groups.
    #[command(subcommand)]
    Group(GroupCommand),
    /// Send lines from stdin or a file as records.
    #[command(
        after_help = "Example:\n  printf 'hello\\nworld\\n' | herald produce greetings --key user-1 --header source=cli"
    )]
    Produce(ProduceArgs),
    /// Print records of a topic.
    #[command(
        after_help = "Example:\n  herald consume greetings --from beginning --format json --max-messages 10"
    )]
    Consume(ConsumeArgs),
    /// Print the records of a subject or pattern as they are published
    /// (push delivery); on exit, print a token that resumes right after.
    #[command(
        after_help = "Example:\n  herald subscribe orders 'eu.*.paid' --from beginning --max-messages 10\n  herald subscribe orders 'eu.*.paid' --resume <TOKEN>"
    )]
    Subscribe(SubscribeArgs),
    /// Publish records through the push API (values as arguments or lines
    /// of stdin); prints where each was stored.
    #[command(
        after_help = "Example:\n  herald publish orders --key eu.fr.paid 'order 1' 'order 2'"
    )]
    Publish(PublishArgs),
    /// Set, delete and list users' SCRAM credentials (over Kafka's APIs).
    #[command(subcommand)]
    User(crate::cli_client::UserCommand),
    /// Add, list and remove ACLs (over Kafka's APIs).
    #[command(subcommand)]
    Acl(crate::cli_client::AclCommand),
    /// Describe the cluster and add nodes to it (over Kafka's APIs).
    #[command(subcommand)]
    Cluster(crate::cli_client::ClusterCommand),
    /// Move partitions between a cluster's nodes (over Kafka's APIs).
    #[command(subcommand)]
    Partition(crate::cli_client::PartitionCommand),
    /// Create, list, configure and delete tenants and their namespaces
    /// (over the push listener's admin service).
    #[command(subcommand)]
    Tenant(crate::cli_client::TenantCommand),
    /// Take, list, show, delete and export snapshots of topics (over the
    /// admin API; exports read the snapshot's view topics over Kafka).
    #[command(
        subcommand,
        after_help = "Example:\n  herald snapshot create orders payments --id nightly --ttl 24h\n  herald consume orders --snapshot nightly\n  herald snapshot export nightly --format raw --output ./nightly\n  herald snapshot restore ./nightly --rename orders=orders-restored"
    )]
    Snapshot(SnapshotCommand),
    /// Register, list, show and delete online queries: a filter, aggregates
    /// per time bucket and triggers, computed as records arrive (over the
    /// admin API).
    #[command(
        subcommand,
        after_help = "Example:\n  echo '{\"id\": \"big\", \"topic\": \"orders\", \"filter\": \"value.total > 100\", \"bucket_ms\": 60000, \"aggregates\": [{\"name\": \"n\", \"function\": \"count\"}]}' | herald query create --spec -\n  herald query show big"
    )]
    Query(QueryCommand),
    /// Show and change the broker-wide limit on produce records in flight
    /// while the broker serves (over the admin API; until it restarts).
    #[command(
        subcommand,
        after_help = "Example:\n  herald flow-control show\n  herald flow-control set fixed --limit 2000\n  herald flow-control set off"
    )]
    FlowControl(FlowControlCommand),
    /// Run SQL over topics and snapshots (a broker built with the `sql`
    /// feature): tables are topics (quote names with dots or dashes) and
    /// snapshot views; columns partition, offset, timestamp, key, value,
    /// headers, key_bytes, value_bytes.
    #[command(
        after_help = "Examples:\n  herald sql \"SELECT count(*) FROM orders WHERE timestamp > now() - interval '1 hour'\"\n  herald sql \"SELECT value->>'region' AS region, count(*) FROM orders GROUP BY 1\" --format csv\n  herald sql \"SELECT * FROM orders\" --snapshot nightly --format parquet --output orders.parquet"
    )]
    Sql(SqlArgs),
    /// The records of a topic (and of one subject, its key) between two
    /// times, in time order (a broker built with the `sql` feature).
    #[command(
        after_help = "Examples:\n  herald history orders --last 10m\n  herald history orders --subject user-42 --from-ms 1764280800000 --to-ms 1764284400000"
    )]
    History(HistoryArgs),
    /// A quick local produce-then-consume run with a summary table.
    #[command(after_help = "Example:\n  herald bench --records 100000 --record-bytes 100")]
    Bench(BenchArgs),
}

/// When appended data is forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushMode {
    /// Leave write-back to the operating system.
    Never,
    /// fsync before acknowledging each append.
    EveryAppend,
    /// fsync every `flush-interval-ms`.
    Interval,
}

/// Flags of `herald serve`; `None` means "not given here".
#[derive(Debug, Default, clap::Args)]
pub struct ServeArgs {
    /// TOML file with settings (keys in snake_case, e.g. `data_dir`).
    #[arg(long, env = "HERALD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory [default: ./herald-data].
    #[arg(long, env = "HERALD_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address of the Kafka listener [default: 127.0.0.1:9092].
    #[arg(long, env = "HERALD_KAFKA_LISTEN", value_name = "ADDR")]
    pub kafka_listen: Option<String>,
    /// HOST:PORT clients are told to connect to [default: the listen address].
    #[arg(long, env = "HERALD_ADVERTISED_LISTENER", value_name = "HOST:PORT")]
    pub advertised_listener: Option<String>,
    /// Create topics on first metadata request [default: true].
    #[arg(long, env = "HERALD_AUTO_CREATE_TOPICS", value_name = "BOOL", value_parser = clap::value_parser!(bool))]
    pub auto_create_topics: Option<bool>,
    /// Keep a key index and per-bucket smallest timestamps of every log,
    /// built in the background, for SQL and history queries [default: true].
    #[arg(long, env = "HERALD_HISTORY_INDEX", value_name = "BOOL", value_parser = clap::value_parser!(bool))]
    pub history_index: Option<bool>,
    /// Partitions of topics created without a count [default: 1].
    #[arg(long, env = "HERALD_DEFAULT_PARTITIONS", value_name = "N")]
    pub default_partitions: Option<u32>,
    /// fsync policy [default: never].
    #[arg(long, env = "HERALD_FLUSH", value_enum)]
    pub flush: Option<FlushMode>,
    /// Interval for `--flush interval` [default: 1000].
    #[arg(long, env = "HERALD_FLUSH_INTERVAL_MS", value_name = "N")]
    pub flush_interval_ms: Option<u64>,
    /// Largest request frame in bytes [default: 104857600].
    #[arg(long, env = "HERALD_MAX_FRAME_BYTES", value_name = "N")]
    pub max_frame_bytes: Option<u64>,
    /// Most client connections at once [default: 10000].
    #[arg(long, env = "HERALD_MAX_CONNECTIONS", value_name = "N")]
    pub max_connections: Option<u64>,
    /// Log filter: a level (info, debug, ...) or tracing directives [default: info].
    #[arg(long, env = "HERALD_LOG_LEVEL", value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Address of the admin HTTP listener (/metrics, /health, /ready) [default: 127.0.0.1:9644].
    #[arg(long, env = "HERALD_ADMIN_LISTEN", value_name = "ADDR")]
    pub admin_listen: Option<String>,
    /// How long the first rebalance of an empty group waits for more members [default: 3000].
    #[arg(
        long,
        env = "HERALD_GROUP_INITIAL_REBALANCE_DELAY_MS",
        value_name = "N"
    )]
    pub group_initial_rebalance_delay_ms: Option<u32>,
    /// Smallest session timeout a group member may ask for [default: 6000].
    #[arg(long, env = "HERALD_GROUP_MIN_SESSION_TIMEOUT_MS", value_name = "N")]
    pub group_min_session_timeout_ms: Option<u32>,
    /// Largest session timeout a group member may ask for [default: 1800000].
    #[arg(long, env = "HERALD_GROUP_MAX_SESSION_TIMEOUT_MS", value_name = "N")]
    pub group_max_session_timeout_ms: Option<u32>,
    /// How long a group's committed offsets outlive its last member [default: 10080].
    #[arg(long, env = "HERALD_OFFSETS_RETENTION_MINUTES", value_name = "N")]
    pub offsets_retention_minutes: Option<u32>,
    /// Most members a consumer group may have (Kafka's group.max.size) [default: 1000].
    #[arg(long, env = "HERALD_GROUP_MAX_SIZE", value_name = "N")]
    pub group_max_size: Option<u32>,
    /// How long an idempotent producer's state outlives its latest batch
    /// (Kafka's producer.id.expiration.ms) [default: 86400000].
    #[arg(long, env = "HERALD_PRODUCER_ID_EXPIRATION_MS", value_name = "N")]
    pub producer_id_expiration_ms: Option<u64>,
    /// Address of the push listener: gRPC, WebSocket and Server-Sent Events [default: 127.0.0.1:9093].
    #[arg(long, env = "HERALD_PUSH_LISTEN", value_name = "ADDR")]
    pub push_listen: Option<String>,
    /// Most push connections at once [default: the open-file limit, less
    /// 1024 and the Kafka listener's max_connections].
    #[arg(long, env = "HERALD_PUSH_MAX_CONNECTIONS", value_name = "N")]
    pub push_max_connections: Option<u64>,
    /// Bytes of deliveries queued per push session before its subscriptions
    /// continue from the log [default: 1048576].
    #[arg(long, env = "HERALD_PUSH_QUEUE_BYTES", value_name = "N")]
    pub push_queue_bytes: Option<u64>,
    /// Most subscriptions one push session may hold [default: 10000].
    #[arg(long, env = "HERALD_PUSH_MAX_SUBSCRIPTIONS", value_name = "N")]
    pub push_max_subscriptions: Option<u64>,
    /// The limit on produce records in flight: off, fixed,
    /// last-three-points, adaptive or gradient [default: off]; more in
    /// the config file's `[flow_control]`.
    #[arg(long, env = "HERALD_FLOW_CONTROL", value_name = "CONTROLLER")]
    pub flow_control: Option<String>,
    /// The first (or fixed) flow-control limit, in records [default: 1000].
    #[arg(long, env = "HERALD_FLOW_LIMIT", value_name = "N")]
    pub flow_limit: Option<u32>,
    /// This node's id in its cluster (the Kafka broker id); with
    /// --cluster-listen and --cluster-nodes (or --cluster-join), the node
    /// is part of a cluster.
    #[arg(long, env = "HERALD_NODE_ID", value_name = "N")]
    pub node_id: Option<u64>,
    /// Where this node's Raft listener binds, for its cluster peers.
    #[arg(long, env = "HERALD_CLUSTER_LISTEN", value_name = "ADDR")]
    pub cluster_listen: Option<String>,
    /// Every node of the cluster, comma-separated, each as
    /// ID=RAFT_HOST:PORT=KAFKA_HOST:PORT (this node included).
    #[arg(long, env = "HERALD_CLUSTER_NODES", value_name = "LIST")]
    pub cluster_nodes: Option<String>,
    /// Join a running cluster: initialize nothing and wait to be added
    /// (`herald cluster add-node` against any of its nodes); --cluster-nodes
    /// is then optional and need not name this node.
    #[arg(long, env = "HERALD_CLUSTER_JOIN", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = clap::value_parser!(bool))]
    pub cluster_join: Option<bool>,
    /// Replicas of a topic created without a replication factor [default:
    /// the number of nodes, at most 3].
    #[arg(long, env = "HERALD_DEFAULT_REPLICATION_FACTOR", value_name = "N")]
    pub default_replication_factor: Option<u16>,
    /// How long a follower may go without holding what its partition's
    /// leader held, or without answering it, before it leaves the
    /// partition's in-sync replicas (Kafka's replica.lag.time.max.ms)
    /// [default: 30000].
    #[arg(long, env = "HERALD_REPLICA_LAG_TIME_MAX_MS", value_name = "MS")]
    pub replica_lag_time_max_ms: Option<u64>,
    /// Offsets partitions (Raft groups holding the consumer groups'
    /// committed offsets; each group's coordinator is its partition's
    /// leader) created at the cluster's first start [default: 8].
    #[arg(long, env = "HERALD_OFFSETS_PARTITIONS", value_name = "N")]
    pub offsets_partitions: Option<u32>,
    /// Replicas of each offsets partition [default: the number of nodes,
    /// at most 3].
    #[arg(long, env = "HERALD_OFFSETS_REPLICATION_FACTOR", value_name = "N")]
    pub offsets_replication_factor: Option<u16>,
    /// Bytes of commands the cluster's metadata log takes before its
    /// leader writes the whole state as one image and drops the entries
    /// before it (Kafka's metadata.log.max.record.bytes.between.snapshots)
    /// [default: 20971520].
    #[arg(long, env = "HERALD_METADATA_IMAGE_BYTES", value_name = "BYTES")]
    pub metadata_image_bytes: Option<u64>,
    /// Makes this node a relay: the upstream's Kafka listeners it mirrors
    /// topics from, comma-separated HOST:PORT (any node of a cluster, a
    /// single node or another relay; the others are tried when one fails).
    #[arg(long, env = "HERALD_RELAY_UPSTREAM", value_name = "LIST")]
    pub relay_upstream: Option<String>,
    /// The topics a relay mirrors from its upstream, comma-separated.
    #[arg(long, env = "HERALD_RELAY_TOPICS", value_name = "LIST")]
    pub relay_topics: Option<String>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
}

/// The same settings as read from the TOML file (and as `--print-config`
/// writes them).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    /// See [`ServeArgs::data_dir`].
    pub data_dir: Option<PathBuf>,
    /// See [`ServeArgs::kafka_listen`].
    pub kafka_listen: Option<String>,
    /// See [`ServeArgs::advertised_listener`].
    pub advertised_listener: Option<String>,
    /// See [`ServeArgs::auto_create_topics`].
    pub auto_create_topics: Option<bool>,
    /// See [`ServeArgs::history_index`].
    pub history_index: Option<bool>,
    /// See [`ServeArgs::default_partitions`].
    pub default_partitions: Option<u32>,
    /// See [`ServeArgs::flush`].
    pub flush: Option<FlushMode>,
    /// See [`ServeArgs::flush_interval_ms`].
    pub flush_interval_ms: Option<u64>,
    /// See [`ServeArgs::max_frame_bytes`].
    pub max_frame_bytes: Option<u64>,
    /// See [`ServeArgs::max_connections`].
    pub max_connections: Option<u64>,
    /// See [`ServeArgs::log_level`].
    pub log_level: Option<String>,
    /// See [`ServeArgs::admin_listen`].
    pub admin_listen: Option<String>,
    /// See [`ServeArgs::group_initial_rebalance_delay_ms`].
    pub group_initial_rebalance_delay_ms: Option<u32>,
    /// See [`ServeArgs::group_min_session_timeout_ms`].
    pub group_min_session_timeout_ms: Option<u32>,
    /// See [`ServeArgs::group_max_session_timeout_ms`].
    pub group_max_session_timeout_ms: Option<u32>,
    /// See [`ServeArgs::offsets_retention_minutes`].
    pub offsets_retention_minutes: Option<u32>,
    /// See [`ServeArgs::group_max_size`].
    pub group_max_size: Option<u32>,
    /// See [`ServeArgs::producer_id_expiration_ms`].
    pub producer_id_expiration_ms: Option<u64>,
    /// See [`ServeArgs::push_listen`].
    pub push_listen: Option<String>,
    /// See [`ServeArgs::push_max_connections`].
    pub push_max_connections: Option<u64>,
    /// See [`ServeArgs::push_queue_bytes`].
    pub push_queue_bytes: Option<u64>,
    /// See [`ServeArgs::push_max_subscriptions`].
    pub push_max_subscriptions: Option<u64>,
    /// Kafka listeners beyond `kafka_listen`'s plaintext one, each with its
    /// security protocol. With any, `kafka_listen` must be set for a
    /// plaintext listener to run too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<crate::security_settings::ListenerFile>,
    /// Authorization, super users, the bootstrap administrator.
    pub security: Option<crate::security_settings::SecurityFile>,
    /// The push listener's security protocol, TLS files and SASL
    /// mechanisms, and the lifetime of the access tokens it issues.
    pub push_listener: Option<crate::security_settings::PushListenerFile>,
    /// The limit on produce records in flight and its controller.
    pub flow_control: Option<crate::flow_settings::FlowControlFile>,
    /// `[cluster]`: see [`crate::cluster_settings`].
    pub cluster: Option<crate::cluster_settings::ClusterFile>,
    /// `[relay]`: see [`crate::relay_settings`].
    pub relay: Option<crate::relay_settings::RelayFile>,
}

/// The admin listener to talk to, and as whom.
#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// Address of the broker's admin listener, HOST:PORT.
    #[arg(
        long,
        env = "HERALD_ADMIN",
        default_value = "127.0.0.1:9644",
        value_name = "HOST:PORT"
    )]
    pub admin: String,
    /// The user to call the admin API as, when the broker has
    /// authorization on (its password is read from HERALD_SASL_PASSWORD,
    /// never from the command line).
    #[arg(long, env = "HERALD_ADMIN_USER", value_name = "USER")]
    pub admin_user: Option<String>,
}

impl AdminArgs {
    /// Where to call the admin API, with the credentials to send.
    pub fn target(&self) -> anyhow::Result<crate::admin_http::AdminTarget> {
        let authorization = match &self.admin_user {
            None => None,
            Some(user) => {
                use base64::Engine as _;
                let password = std::env::var("HERALD_SASL_PASSWORD").map_err(|_| {
                    anyhow::anyhow!("--admin-user needs the password in HERALD_SASL_PASSWORD")
                })?;
                let token =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                Some(format!("Basic {token}"))
            }
        };
        Ok(crate::admin_http::AdminTarget {
            address: self.admin.clone(),
            authorization,
        })
    }
}

/// `herald flow-control` subcommands.
#[derive(Debug, Subcommand)]
pub enum FlowControlCommand {
    /// Its mode, the limit in force and the records in flight.
    #[command(after_help = "Example:\n  herald flow-control show --json")]
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Switch it: a controller starts afresh (or, with --resume, carries
    /// on where it was when last switched away from); requests already
    /// admitted keep their places.
    #[command(
        after_help = "Example:\n  herald flow-control set adaptive --limit 500\n  herald flow-control set adaptive --resume"
    )]
    Set {
        /// off, fixed, last-three-points, adaptive or gradient.
        mode: String,
        /// The fixed limit, or a controller's first, in records [default:
        /// the one last set].
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        limit: Option<u32>,
        /// Carry on with the last controller of this mode switched away
        /// from: its limit and its history (afresh when there is none).
        #[arg(long)]
        resume: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// `herald snapshot` subcommands.
#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Take a snapshot of one or more topics: one cut, consistent across
    /// them, pinned against retention until deleted or expired.
    Create {
        /// The topics.
        #[arg(required = true, value_name = "TOPIC")]
        topics: Vec<String>,
        /// Its id (letters, digits, '_' and '-') [default: made up].
        #[arg(long)]
        id: Option<String>,
        /// Delete it by itself after this long (e.g. 90s, 30m, 24h, 7d).
        #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
        ttl: Option<std::time::Duration>,
        /// Print the snapshot as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// List every snapshot.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Show a snapshot: its cut, records, bytes and time range.
    Show {
        /// Its id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Delete a snapshot; retention may then delete what it pinned.
    Delete {
        /// Its id.
        id: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Export a snapshot's records.
    Export {
        /// Its id.
        id: String,
        /// jsonl: one JSON object per record, into the file OUTPUT;
        /// parquet: one row per record (topic, partition, offset,
        /// timestamp, key, value, headers, key_bytes, value_bytes) into the
        /// file OUTPUT, written by the broker's SQL engine (a broker built
        /// with the `sql` feature); raw: the batches as stored, offsets
        /// included, into the directory OUTPUT with a manifest.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Where to write.
        #[arg(long, value_name = "PATH")]
        output: PathBuf,
        #[command(flatten)]
        admin: AdminArgs,
        #[command(flatten)]
        broker: crate::cli_client::BrokerArgs,
    },
    /// Restore a raw backup (from `export --format raw`) as new topics
    /// whose records keep their offsets.
    Restore {
        /// The backup's directory.
        dir: PathBuf,
        /// Restore topic OLD as NEW (repeatable) instead of under its own
        /// name.
        #[arg(long = "rename", value_parser = crate::cli_client::parse_key_value, value_name = "OLD=NEW")]
        renames: Vec<(String, String)>,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// Formats of `herald snapshot export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// JSON lines.
    Jsonl,
    /// Apache Parquet, through the broker's SQL engine.
    Parquet,
    /// A raw, offset-preserving backup.
    Raw,
}

/// Parses `90s`, `30m`, `24h`, `7d` or `1500ms`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("'{text}' needs a unit: ms, s, m, h or d"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' does not start with a number"))?;
    let millis_per = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{text}': use ms, s, m, h or d"
            ))
        }
    };
    number
        .checked_mul(millis_per)
        .map(std::time::Duration::from_millis)
        .ok_or_else(|| format!("'{text}' is too long"))
}

/// `herald sql`.
#[derive(Debug, clap::Args)]
pub struct SqlArgs {
    /// One SQL query.
    pub sql: String,
    /// Run over this snapshot's views (tables named by topic) instead of a
    /// cut taken now.
    #[arg(long, value_name = "ID")]
    pub snapshot: Option<String>,
    /// How results are written.
    #[arg(long, value_enum, default_value = "table")]
    pub format: SqlFormat,
    /// Write results to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Memory the query may hold (bytes; the broker's limit at most).
    #[arg(long, value_name = "BYTES")]
    pub max_memory_bytes: Option<u64>,
    /// Bytes the query may read from logs (the broker's limit at most).
    #[arg(long, value_name = "BYTES")]
    pub max_scan_bytes: Option<u64>,
    /// How long the query may run (the broker's limit at most).
    #[arg(long, value_name = "SECONDS")]
    pub timeout_s: Option<u64>,
    #[command(flatten)]
    pub admin: AdminArgs,
}

/// `herald history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The topic.
    pub topic: String,
    /// Only the records of this subject (key).
    #[arg(long)]
    pub subject: Option<String>,
    /// From this time (ms since the epoch), inclusive.
    #[arg(long, value_name = "MS", conflicts_with = "last")]
    pub from_ms: Option<i64>,
    /// To this time (ms since the epoch), exclusive; now when absent.
    #[arg(long, value_name = "MS", conflicts_with = "last")]
    pub to_ms: Option<i64>,
    /// The last stretch of time up to now: `30s`, `10m`, `2h`, `1d`.
    #[arg(long, value_name = "DURATION")]
    pub last: Option<String>,
    /// How records are written.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: SqlFormat,
    /// Write records to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub admin: AdminArgs,
}

/// Output formats of `herald sql` and `herald history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SqlFormat {
    /// A text table.
    Table,
    /// One JSON object per row.
    Jsonl,
    /// CSV with a header line.
    Csv,
    /// An Apache Parquet file.
    Parquet,
}

impl SqlFormat {
    /// The name the admin API takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Jsonl => "jsonl",
            Self::Csv => "csv",
            Self::Parquet => "parquet",
        }
    }
}

/// `herald query` subcommands.
#[derive(Debug, Subcommand)]
pub enum QueryCommand {
    /// Register a query from its JSON spec (id, topic, filter, bucket_ms,
    /// retain_buckets, aggregates, triggers; see docs/queries.md).
    Create {
        /// The spec's file, or `-` for stdin.
        #[arg(long, value_name = "FILE")]
        spec: PathBuf,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// List the queries with their lag and alerts.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Show a query's results: each bucket and the totals.
    Show {
        /// Its id.
        id: String,
        /// Only buckets starting at or after this (ms since the epoch).
        #[arg(long, value_name = "MS")]
        from_ms: Option<i64>,
        /// Only buckets starting before this.
        #[arg(long, value_name = "MS")]
        to_ms: Option<i64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Stop and forget a query.
    Delete {
        /// Its id.
        id: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
}
