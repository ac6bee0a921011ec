//! Flags of the client subcommands (`topic`, `group`, `produce`,
//! `consume`, `bench`). Every one talks to `--bootstrap` (default 127.0.0.1:9092,
//! env `HERALD_BOOTSTRAP`), also spelled `--bootstrap-server` as in every
//! Kafka tool.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

/// Default broker address of the client subcommands.
pub const BOOTSTRAP_DEFAULT: &str = "127.0.0.1:9092";

/// The broker to talk to.
#[derive(Debug, Clone, Args)]
pub struct BrokerArgs {
    /// Broker address, HOST:PORT (`--bootstrap-server` as Kafka's tools
    /// spell it works too).
    #[arg(
        long,
        visible_alias = "bootstrap-server",
        env = "HERALD_BOOTSTRAP",
        default_value = BOOTSTRAP_DEFAULT,
        value_name = "HOST:PORT"
    )]
    pub bootstrap: String,
    /// Kafka's security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    #[arg(
        long,
        env = "HERALD_SECURITY_PROTOCOL",
        default_value = "PLAINTEXT",
        value_name = "PROTOCOL"
    )]
    pub security_protocol: String,
    /// SASL mechanism: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN (the password
    /// is read from HERALD_SASL_PASSWORD, never from the command line).
    #[arg(
        long,
        env = "HERALD_SASL_MECHANISM",
        default_value = "SCRAM-SHA-512",
        value_name = "MECHANISM"
    )]
    pub sasl_mechanism: String,
    /// SASL user name.
    #[arg(long, env = "HERALD_SASL_USERNAME", value_name = "USER")]
    pub sasl_username: Option<String>,
    /// PEM file of the CA the broker's TLS certificate must chain to.
    #[arg(long, env = "HERALD_SSL_CA", value_name = "FILE")]
    pub ssl_ca: Option<PathBuf>,
}

/// Environment variable holding the SASL password of the client commands.
pub const SASL_PASSWORD_ENV: &str = "HERALD_SASL_PASSWORD";

impl BrokerArgs {
    /// The connection options these flags ask for.
    pub fn options(&self) -> anyhow::Result<herald_client::ConnectOptions> {
        let (tls, sasl) = match self.security_protocol.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => anyhow::bail!(
                "invalid --security-protocol {other}: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            ),
        };
        let tls_ca = match (tls, &self.ssl_ca) {
            (true, Some(ca)) => Some(ca.clone()),
            (true, None) => anyhow::bail!(
                "--security-protocol {} needs --ssl-ca",
                self.security_protocol
            ),
            (false, _) => None,
        };
        let sasl = if sasl {
            let user = self.sasl_username.clone().ok_or_else(|| {
                anyhow::anyhow!(
                    "--security-protocol {} needs --sasl-username",
                    self.security_protocol
                )
            })?;
            let password = std::env::var(SASL_PASSWORD_ENV)
                .map_err(|_| anyhow::anyhow!("SASL needs the password in {SASL_PASSWORD_ENV}"))?;
            Some(herald_client::SaslLogin {
                mechanism: self.sasl_mechanism.clone(),
                user,
                password,
            })
        } else {
            None
        };
        Ok(herald_client::ConnectOptions { tls_ca, sasl })
    }

    /// Connects to the broker as these flags ask.
    pub async fn connect(&self) -> anyhow::Result<herald_client::Connection> {
        Ok(herald_client::Connection::connect_with(&self.bootstrap, &self.options()?).await?)
    }
}

/// `herald topic ...`.
#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create a topic.
    #[command(
        after_help = "Example:\n  herald topic create orders --partitions 3 --config retention.ms=86400000"
    )]
    Create {
        /// Topic name.
        name: String,
        /// Partition count [default: the broker's default_partitions].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
        partitions: Option<i32>,
        /// A topic config, KEY=VALUE (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// List topics with their partition counts.
    #[command(after_help = "Example:\n  herald topic list --bootstrap 127.0.0.1:9092")]
    List {
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Show a topic's partitions (offsets) and configs.
    #[command(after_help = "Example:\n  herald topic describe orders")]
    Describe {
        /// Topic name.
        name: String,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Add partitions or change configs.
    #[command(
        after_help = "Example:\n  herald topic alter orders --partitions 6 --set retention.ms=3600000 --delete-config segment.bytes"
    )]
    Alter {
        /// Topic name.
        name: String,
        /// New (larger) partition count.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
        partitions: Option<i32>,
        /// Set a config, KEY=VALUE (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
        set: Vec<(String, String)>,
        /// Remove a config override (repeatable).
        #[arg(long = "delete-config", value_name = "KEY")]
        delete: Vec<String>,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Delete a topic and its data.
    #[command(after_help = "Example:\n  herald topic delete orders")]
    Delete {
        /// Topic name.
        name: String,
        #[command(flatten)]
        broker: BrokerArgs,
    },
}

/// Where `group reset-offsets` moves a group's committed offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// The first stored record of each partition.
    Earliest,
    /// The end of each partition (skip everything stored).
    Latest,
    /// This offset in every partition (clamped to what is stored).
    Offset(i64),
    /// The first record at or after this time (ms since the epoch); the end
    /// where there is none.
    Timestamp(i64),
}

/// Parses `earliest`, `latest`, `offset:N` or `timestamp:MS`.
pub fn parse_reset_to(text: &str) -> Result<ResetTo, String> {
    match text {
        "earliest" => Ok(ResetTo::Earliest),
        "latest" => Ok(ResetTo::Latest),
        _ => match parse_start(text) {
            Ok(StartFrom::Offset(offset)) => Ok(ResetTo::Offset(offset)),
            Ok(StartFrom::Timestamp(ms)) => Ok(ResetTo::Timestamp(ms)),
            _ => Err("expected earliest, latest, offset:N or timestamp:MS".to_owned()),
        },
    }
}

/// `herald group ...`.
#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// List consumer groups with their state.
    #[command(after_help = "Example:\n  herald group list")]
    List {
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Show a group's members and assignments, and each partition's
    /// committed offset, end offset and lag.
    #[command(
        after_help = "Example:\n  herald group describe billing\n  herald group describe billing --json"
    )]
    Describe {
        /// Group id.
        group: String,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Move a group's committed offsets for a topic (refused while the group
    /// has members: stop its consumers first).
    #[command(
        after_help = "Example:\n  herald group reset-offsets billing --topic orders --to earliest\n  herald group reset-offsets billing --topic orders --partition 2 --to offset:1500\n  herald group reset-offsets billing --topic orders --to timestamp:1700000000000 --dry-run"
    )]
    ResetOffsets {
        /// Group id.
        group: String,
        /// Topic whose offsets move.
        #[arg(long, value_name = "TOPIC")]
        topic: String,
        /// Only this partition (repeatable) [default: every partition].
        #[arg(long = "partition", value_name = "N", value_parser = clap::value_parser!(i32).range(0..))]
        partitions: Vec<i32>,
        /// Target: earliest, latest, offset:N or timestamp:MS.
        #[arg(long, value_parser = parse_reset_to, value_name = "POSITION")]
        to: ResetTo,
        /// Show the new offsets without committing them.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Delete a group and its committed offsets (refused while it has
    /// members).
    #[command(after_help = "Example:\n  herald group delete billing")]
    Delete {
        /// Group id.
        group: String,
        #[command(flatten)]
        broker: BrokerArgs,
    },
}

/// `herald produce`.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Topic to write to (created if the broker auto-creates topics).
    pub topic: String,
    /// Read lines from this file instead of stdin.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Key of every record (records with one key share a partition).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// A header of every record, KEY=VALUE (repeatable).
    #[arg(long = "header", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub headers: Vec<(String, String)>,
    /// Send to this partition instead of choosing by key.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..))]
    pub partition: Option<i32>,
    /// Send at most this many records per second.
    #[arg(long, value_name = "MSGS_PER_SEC", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate: Option<u32>,
    #[command(flatten)]
    pub broker: BrokerArgs,
}

/// Where `consume` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// The first stored record.
    Beginning,
    /// After the last record (only new records).
    End,
    /// This offset in every partition.
    Offset(i64),
    /// The first record at or after this time (ms since the epoch).
    Timestamp(i64),
}

/// Parses `beginning`, `end`, `offset:N` or `timestamp:MS`.
pub fn parse_start(text: &str) -> Result<StartFrom, String> {
    let number = |value: &str, what: &str| -> Result<i64, String> {
        value
            .parse::<i64>()
            .ok()
            .filter(|v| *v >= 0)
            .ok_or_else(|| format!("{what} must be a non-negative integer, got '{value}'"))
    };
    match text.split_once(':') {
        None if text == "beginning" => Ok(StartFrom::Beginning),
        None if text == "end" => Ok(StartFrom::End),
        Some(("offset", n)) => number(n, "offset").map(StartFrom::Offset),
        Some(("timestamp", ms)) => number(ms, "timestamp").map(StartFrom::Timestamp),
        _ => Err("expected beginning, end, offset:N or timestamp:MS".to_owned()),
    }
}

/// How `consume` prints records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The value alone, one per line.
    Plain,
    /// One JSON object per line: partition, offset, timestamp, key, headers, value.
    Json,
}

/// `herald consume`.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// Topic to read.
    pub topic: String,
    /// Where to start: beginning, end, offset:N or timestamp:MS.
    #[arg(long, default_value = "beginning", value_parser = parse_start, value_name = "POSITION")]
    pub from: StartFrom,
    /// Keep waiting for new records instead of stopping at the end.
    #[arg(long)]
    pub follow: bool,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    pub max_messages: Option<u64>,
    /// Read only this partition.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..))]
    pub partition: Option<i32>,
    /// Output format.
    #[arg(long, value_enum, default_value = "plain")]
    pub format: OutputFormat,
    /// Consume as a member of this consumer group: share the topic's
    /// partitions with the group's other members, resume from the group's
    /// committed offsets (`--from` applies where there are none), and commit
    /// what was printed.
    #[arg(long, value_name = "GROUP", conflicts_with = "partition")]
    pub group: Option<String>,
    /// Read the topic as snapshot ID holds it (its read-only view topic
    /// `__snapshot.ID.TOPIC`), stopping at the snapshot's cut.
    #[arg(long, value_name = "ID", conflicts_with_all = ["follow", "group"])]
    pub snapshot: Option<String>,
    #[command(flatten)]
    pub broker: BrokerArgs,
}

/// `herald bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Records to produce and then consume.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub records: u64,
    /// Value size of each record in bytes.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    pub record_bytes: u32,
    /// Records per produce batch.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch_records: u32,
    /// Topic to use [default: herald-bench-PID, deleted afterwards].
    #[arg(long, value_name = "NAME")]
    pub topic: Option<String>,
    #[command(flatten)]
    pub broker: BrokerArgs,
}

/// Parses `KEY=VALUE` (the key not empty).
pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got '{text}'")),
    }
}

/// `KEY=NUMBER`.
pub fn parse_key_number(text: &str) -> Result<(String, f64), String> {
    let (key, value) = parse_key_value(text)?;
    match value.parse::<f64>() {
        Ok(number) if number.is_finite() => Ok((key, number)),
        _ => Err(format!("expected a number after '{key}=', got '{value}'")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_positions_parse_every_documented_form() {
        assert_eq!(parse_start("beginning"), Ok(StartFrom::Beginning));
        assert_eq!(parse_start("end"), Ok(StartFrom::End));
        assert_eq!(parse_start("offset:42"), Ok(StartFrom::Offset(42)));
        assert_eq!(
            parse_start("timestamp:1700000000000"),
            Ok(StartFrom::Timestamp(1_700_000_000_000))
        );
        assert!(parse_start("offset:-1").is_err());
        assert!(parse_start("middle").is_err());
    }

    #[test]
    fn reset_targets_parse_every_documented_form() {
        assert_eq!(parse_reset_to("earliest"), Ok(ResetTo::Earliest));
        assert_eq!(parse_reset_to("latest"), Ok(ResetTo::Latest));
        assert_eq!(parse_reset_to("offset:7"), Ok(ResetTo::Offset(7)));
        assert_eq!(parse_reset_to("timestamp:5"), Ok(ResetTo::Timestamp(5)));
        assert!(parse_reset_to("beginning").is_err());
        assert!(parse_reset_to("offset:x").is_err());
    }

    #[test]
    fn key_value_needs_an_equals_sign_and_a_key() {
        assert_eq!(parse_key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_key_value("novalue").is_err());
        assert!(parse_key_value("=x").is_err());
    }
}

/// Default address of the push listener for `subscribe` and `publish`.
pub const PUSH_SERVER_DEFAULT: &str = "127.0.0.1:9093";

/// Where the push commands connect.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The broker's push listener, HOST:PORT.
    #[arg(
        long,
        env = "HERALD_PUSH_SERVER",
        default_value = PUSH_SERVER_DEFAULT,
        value_name = "HOST:PORT"
    )]
    pub push_server: String,
    /// PEM CA certificates the listener's certificate must chain to:
    /// connect over TLS.
    #[arg(long, env = "HERALD_PUSH_CA", value_name = "FILE")]
    pub push_ca: Option<PathBuf>,
    /// Log in as this user (the password is read from
    /// HERALD_SASL_PASSWORD, never from the command line).
    #[arg(long, env = "HERALD_PUSH_USER", value_name = "USER")]
    pub push_user: Option<String>,
    /// Log in with this access token (from the listener's /v1/token).
    #[arg(
        long,
        env = "HERALD_PUSH_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub push_token: Option<String>,
}

/// `herald tenant`.
#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant: its principals get every operation on the topics,
    /// groups and transactional ids under its namespaces.
    #[command(
        after_help = "Example:\n  herald tenant create acme --principal User:alice --namespace acme. --config retention.ms=86400000"
    )]
    Create {
        /// The tenant's name.
        name: String,
        /// A principal of the tenant (`User:alice`); repeatable.
        #[arg(long = "principal", value_name = "PRINCIPAL")]
        principals: Vec<String>,
        /// A namespace (topic-name prefix) it owns; repeatable.
        #[arg(long = "namespace", value_name = "PREFIX", required = true)]
        namespaces: Vec<String>,
        /// A config its namespaces' topics inherit; repeatable.
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
        #[command(flatten)]
        push: PushArgs,
    },
    /// Delete a tenant, its namespaces and its ACLs (its topics stay).
    Delete {
        /// The tenant's name.
        name: String,
        #[command(flatten)]
        push: PushArgs,
    },
    /// List tenants with their principals, namespaces and configs.
    List {
        #[command(flatten)]
        push: PushArgs,
    },
    /// Set or remove configs a namespace's topics inherit.
    #[command(
        after_help = "Example:\n  herald tenant configure acme. --set retention.ms=3600000 --remove message.ttl.ms"
    )]
    Configure {
        /// The namespace's prefix.
        prefix: String,
        /// A config to set; repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
        set: Vec<(String, String)>,
        /// A config to remove; repeatable.
        #[arg(long = "remove", value_name = "KEY")]
        remove: Vec<String>,
        #[command(flatten)]
        push: PushArgs,
    },
    /// Set or remove keys of a tenant's SLA: input_bytes_per_sec,
    /// input_messages_per_sec, output_bytes_per_sec,
    /// output_messages_per_sec, reject_over_rate (1: refuse a produce
    /// over an input rate; 0: throttle it, the default), max_partitions,
    /// max_stored_bytes, max_connections.
    #[command(
        after_help = "Example:\n  herald tenant sla acme --set input_bytes_per_sec=1048576 --set reject_over_rate=1"
    )]
    Sla {
        /// The tenant's name.
        name: String,
        /// A key to set; repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_number)]
        set: Vec<(String, f64)>,
        /// A key to remove; repeatable.
        #[arg(long = "remove", value_name = "KEY")]
        remove: Vec<String>,
        #[command(flatten)]
        push: PushArgs,
    },
}

/// `herald subscribe`.
#[derive(Debug, Args)]
pub struct SubscribeArgs {
    /// Topic to subscribe to.
    pub topic: String,
    /// A subject (a record key, exactly) or a pattern: `.`-separated
    /// tokens, `*` for one token, a final `>` for the rest.
    pub selector: String,
    /// Where to start: beginning, end (only new records) or timestamp:MS
    /// [default: end, or where the --name subscription left off].
    #[arg(long, value_parser = parse_start, value_name = "POSITION")]
    pub from: Option<StartFrom>,
    /// A durable name: the broker keeps what was printed under it, and a
    /// later run with the same name (and no --from) continues from there.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Continue right after what an earlier run printed: the resume token it
    /// gave on exit (instead of --from).
    #[arg(long, value_name = "TOKEN")]
    pub resume: Option<String>,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    pub max_messages: Option<u64>,
    /// Only records this expression holds for, over `key` and
    /// `header.NAME`: `==`, `!=`, `<`, `<=`, `>`, `>=`, `in (...)`,
    /// `starts_with`, `exists`, with `and`, `or`, `not` (see the .proto's
    /// `Subscribe.filter`).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// An attribute this subscriber holds (repeatable): records whose
    /// `herald.audience` header names audiences reach only holders of one.
    #[arg(long = "attribute", value_name = "ATTRIBUTE")]
    pub attributes: Vec<String>,
    /// Say so (on standard error) when records are skipped as expired.
    #[arg(long)]
    pub report_expired: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "plain")]
    pub format: OutputFormat,
    #[command(flatten)]
    pub push: PushArgs,
}

/// `herald publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Topic to publish to (created if the broker creates topics on use).
    pub topic: String,
    /// Values to publish, one record each; without any, each line of
    /// standard input is one.
    pub values: Vec<String>,
    /// The subject: the key of every record.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// A header of every record, KEY=VALUE (repeatable).
    #[arg(long = "header", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub headers: Vec<(String, String)>,
    #[command(flatten)]
    pub push: PushArgs,
}

/// Environment variable holding the password `herald user set` sets.
pub const USER_PASSWORD_ENV: &str = "HERALD_USER_PASSWORD";

/// `herald user ...`: SCRAM credentials, over Kafka's APIs.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Set a user's password: SCRAM credentials for one or both mechanisms
    /// (the password is read from HERALD_USER_PASSWORD, else from the first
    /// line of stdin; only a salted hash of it leaves this process).
    #[command(
        after_help = "Example:\n  HERALD_USER_PASSWORD=... herald user set alice --bootstrap 127.0.0.1:9094 \\\n    --security-protocol SASL_PLAINTEXT --sasl-username admin"
    )]
    Set {
        /// The user.
        name: String,
        /// SCRAM-SHA-512, SCRAM-SHA-256, or both.
        #[arg(long, default_value = "both")]
        mechanism: String,
        /// PBKDF2 iterations (4096 to 16384).
        #[arg(long, default_value_t = 8192)]
        iterations: u32,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Remove a user's credentials (one mechanism, or both).
    Delete {
        /// The user.
        name: String,
        /// SCRAM-SHA-512, SCRAM-SHA-256, or both.
        #[arg(long, default_value = "both")]
        mechanism: String,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// List users and the mechanisms they have credentials for.
    List {
        #[command(flatten)]
        broker: BrokerArgs,
    },
}

/// What an ACL is about and for whom, as `herald acl` takes it; for `add`
/// the principal, operation and resource are required, for `list` and
/// `remove` each left out matches everything.
#[derive(Debug, Clone, Args)]
pub struct AclArgs {
    /// The principal, as User:alice (User:* for everyone).
    #[arg(long)]
    pub principal: Option<String>,
    /// The operation: read, write, create, delete, alter, describe,
    /// describe_configs, alter_configs, idempotent_write, cluster_action,
    /// all (repeatable).
    #[arg(long = "operation")]
    pub operations: Vec<String>,
    /// A topic (or, with --prefixed, a topic-name prefix; * for all).
    #[arg(long, conflicts_with_all = ["group", "cluster", "transactional_id"])]
    pub topic: Option<String>,
    /// A consumer group (or prefix).
    #[arg(long, conflicts_with_all = ["cluster", "transactional_id"])]
    pub group: Option<String>,
    /// The cluster.
    #[arg(long, conflicts_with = "transactional_id")]
    pub cluster: bool,
    /// A transactional id (or prefix).
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// The name is a prefix (Kafka's PREFIXED pattern type).
    #[arg(long)]
    pub prefixed: bool,
    /// Deny instead of allow.
    #[arg(long)]
    pub deny: bool,
    /// The client address the ACL is for [add: * (any)].
    #[arg(long)]
    pub host: Option<String>,
}

/// `herald acl ...`: Kafka's ACLs, over its APIs.
#[derive(Debug, Subcommand)]
pub enum AclCommand {
    /// Add ACLs: one per operation.
    #[command(
        after_help = "Example:\n  herald acl add --principal User:alice --operation read --operation write \\\n    --topic orders. --prefixed --security-protocol SASL_PLAINTEXT --sasl-username admin"
    )]
    Add {
        #[command(flatten)]
        acl: AclArgs,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// List the ACLs that match.
    List {
        #[command(flatten)]
        acl: AclArgs,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Remove the ACLs that match, and list them.
    Remove {
        #[command(flatten)]
        acl: AclArgs,
        #[command(flatten)]
        broker: BrokerArgs,
    },
}

/// `herald cluster`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Show the cluster id, the controller and every node.
    #[command(after_help = "Example:\n  herald cluster describe --bootstrap 127.0.0.1:9092")]
    Describe {
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Add a node to a running cluster. Start the node first with
    /// `herald serve --node-id ID --cluster-listen RAFT --cluster-join`;
    /// this waits until it is a member (it then holds no partitions:
    /// reassign some to it, and new topics use it).
    #[command(
        after_help = "Example:\n  herald serve --node-id 4 --cluster-listen 10.0.0.4:9193 --cluster-join --kafka-listen 10.0.0.4:9092 &\n  herald cluster add-node 4 --raft 10.0.0.4:9193 --kafka 10.0.0.4:9092 --bootstrap 10.0.0.1:9092"
    )]
    AddNode {
        /// The new node's id (its --node-id).
        #[arg(value_parser = clap::value_parser!(i32).range(1..))]
        id: i32,
        /// Where its cluster peers reach its Raft listener.
        #[arg(long, value_name = "HOST:PORT")]
        raft: String,
        /// Where clients reach its Kafka listener.
        #[arg(long, value_name = "HOST:PORT")]
        kafka: String,
        /// How long to wait for it to become a member.
        #[arg(long, default_value_t = 60_000, value_name = "MS")]
        timeout_ms: u64,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Remove a node from the cluster (refused while it holds replicas:
    /// reassign them first); stop the node afterwards.
    #[command(after_help = "Example:
  herald partition reassign orders 0 --replicas 1,2,3 --wait
  herald cluster remove-node 4 --bootstrap 10.0.0.1:9092")]
    RemoveNode {
        /// The node's id.
        #[arg(value_parser = clap::value_parser!(i32).range(1..))]
        id: i32,
        #[command(flatten)]
        broker: BrokerArgs,
    },
}

/// Whether a partition command waits for the move it started (or
/// cancelled) to settle, and for how long.
#[derive(Debug, Args)]
pub struct MoveWait {
    /// Wait until the move is done (or undone).
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` waits.
    #[arg(long, default_value_t = 300_000, value_name = "MS")]
    pub timeout_ms: u64,
}

/// `herald partition`.
#[derive(Debug, Subcommand)]
pub enum PartitionCommand {
    /// Move a partition's replicas to other nodes (the first is the
    /// preferred leader). New replicas catch up from the leader before
    /// the old ones leave; this returns once the move is recorded and
    /// `--wait` waits for it to complete.
    #[command(
        after_help = "Example:\n  herald partition reassign orders 0 --replicas 4,1,2 --wait --bootstrap 127.0.0.1:9092"
    )]
    Reassign {
        /// Topic name.
        topic: String,
        /// Partition index.
        #[arg(value_parser = clap::value_parser!(i32).range(0..))]
        partition: i32,
        /// The node ids to hold it, comma-separated.
        #[arg(long, value_name = "IDS", value_delimiter = ',', required = true)]
        replicas: Vec<i32>,
        #[command(flatten)]
        wait: MoveWait,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Cancel a partition's reassignment in progress: it goes back to the
    /// replicas it had, and the replicas the move added are dropped. This
    /// returns once the cancellation is recorded; `--wait` waits until
    /// the move is undone.
    #[command(
        after_help = "Example:\n  herald partition cancel-reassignment orders 0 --wait --bootstrap 127.0.0.1:9092"
    )]
    CancelReassignment {
        /// Topic name.
        topic: String,
        /// Partition index.
        #[arg(value_parser = clap::value_parser!(i32).range(0..))]
        partition: i32,
        #[command(flatten)]
        wait: MoveWait,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// List the reassignments in progress.
    #[command(
        after_help = "Example:\n  herald partition reassignments --bootstrap 127.0.0.1:9092"
    )]
    Reassignments {
        #[command(flatten)]
        broker: BrokerArgs,
    },
}
