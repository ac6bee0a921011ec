//! Resolves the effective settings (flags and environment over the file,
//! file over defaults) and checks every value, naming the key, the value
//! and the reason when one is refused.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use herald_broker::config::{GROUP_SIZE_MAX_DEFAULT, PARTITIONS_MAX};
use herald_broker::BrokerConfig;
use herald_broker::FlushPolicy;
use herald_gateway::{GatewayConfig, PUSH_LISTEN_DEFAULT};
use herald_kafka::config::MAX_FRAME_BYTES_DEFAULT;
use herald_kafka::KafkaConfig;
use herald_push::PushConfig;

use crate::cli::{FileSettings, FlushMode, ServeArgs};

/// Smallest frame limit accepted: below this, ordinary metadata requests
/// would be refused.
const MAX_FRAME_BYTES_MIN: u64 = 64 * 1024;

/// Longest initial rebalance delay accepted (Kafka's rebalance timeouts are
/// of the same order): longer would only stall new groups.
const REBALANCE_DELAY_MS_MAX: u32 = 300_000;

/// Open files kept back from the push listener's default connection bound:
/// segment and index files, the admin listener, metadata.
const OPEN_FILES_RESERVE: u64 = 1024;

/// Smallest push queue accepted: below this, one ordinary delivery batch
/// would not fit.
const PUSH_QUEUE_BYTES_MIN: u64 = 4096;

/// Everything `serve` needs.
#[derive(Debug)]
pub struct Settings {
    /// Broker core settings.
    pub broker: BrokerConfig,
    /// The user given credentials at start, if any.
    pub admin: Option<crate::security_settings::BootstrapAdmin>,
    /// Kafka listener settings.
    pub kafka: KafkaConfig,
    /// Push engine limits.
    pub push: PushConfig,
    /// Push listener settings.
    pub gateway: GatewayConfig,
    /// Log filter directives.
    pub log_level: String,
    /// Address of the admin HTTP listener.
    pub admin_listen: SocketAddr,
    /// Every key with its effective value, as `--print-config` shows it.
    pub effective: FileSettings,
    /// The cluster this node joins, if any.
    pub cluster: Option<crate::cluster_settings::ClusterSettings>,
}

/// Default address of the admin HTTP listener.
pub const ADMIN_LISTEN_DEFAULT: &str = "127.0.0.1:9644";

fn invalid(
    key: &str,
    value: impl std::fmt::Display,
    reason: impl std::fmt::Display,
) -> anyhow::Error {
    anyhow!(
        "invalid {key} = {value}: {reason} (set by --{}, HERALD_{} or `{key}` in the config file)",
        key.replace('_', "-"),
        key.to_uppercase()
    )
}

/// Merges flags/env with the file and checks the result.
pub fn resolve(args: ServeArgs) -> anyhow::Result<Settings> {
    let file = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading config file {}", path.display()))?;
            toml::from_str::<FileSettings>(&text)
                .with_context(|| format!("invalid config file {}", path.display()))?
        }
        None => FileSettings::default(),
    };
    let data_dir = args
        .data_dir
        .or(file.data_dir)
        .unwrap_or_else(|| PathBuf::from("./herald-data"));
    // With other listeners configured, the plaintext one runs only when
    // asked for.
    let listen_text = args.kafka_listen.or(file.kafka_listen).or_else(|| {
        file.listeners
            .is_empty()
            .then(|| "127.0.0.1:9092".to_owned())
    });
    let advertised_text = args.advertised_listener.or(file.advertised_listener);
    let plaintext = match &listen_text {
        Some(text) => {
            let listen = parse_listen("kafka_listen", text)?;
            let mut listener = herald_kafka::ListenerConfig::plaintext(listen);
            if let Some(advertised) = &advertised_text {
                let (host, port) = parse_host_port("advertised_listener", advertised)?;
                listener.advertised_host = host;
                listener.advertised_port = port;
            }
            Some(listener)
        }
        None => None,
    };
    let listeners = crate::security_settings::listeners(plaintext, &file.listeners)?;
    let (security, admin) = crate::security_settings::security(
        file.security.as_ref(),
        std::env::var(crate::security_settings::ADMIN_PASSWORD_ENV).ok(),
    )?;
    let admin_text = args
        .admin_listen
        .or(file.admin_listen)
        .unwrap_or_else(|| ADMIN_LISTEN_DEFAULT.to_owned());
    let admin_listen = parse_listen("admin_listen", &admin_text)?;
    let auto_create_topics = args
        .auto_create_topics
        .or(file.auto_create_topics)
        .unwrap_or(true);
    let history_index = args.history_index.or(file.history_index).unwrap_or(true);
    let default_partitions = args
        .default_partitions
        .or(file.default_partitions)
        .unwrap_or(1);
    if !(1..=PARTITIONS_MAX).contains(&default_partitions) {
        return Err(invalid(
            "default_partitions",
            default_partitions,
            format!("must be between 1 and {PARTITIONS_MAX}"),
        ));
    }
    let flush_mode = args.flush.or(file.flush).unwrap_or(FlushMode::Never);
    let flush_interval_ms = args
        .flush_interval_ms
        .or(file.flush_interval_ms)
        .unwrap_or(1000);
    if flush_interval_ms == 0 {
        return Err(invalid("flush_interval_ms", 0, "must be at least 1"));
    }
    let flush = match flush_mode {
        FlushMode::Never => FlushPolicy::Never,
        FlushMode::EveryAppend => FlushPolicy::EveryAppend,
        FlushMode::Interval => FlushPolicy::Interval(Duration::from_millis(flush_interval_ms)),
    };
    let max_frame_bytes = args
        .max_frame_bytes
        .or(file.max_frame_bytes)
        .unwrap_or(MAX_FRAME_BYTES_DEFAULT as u64);
    if !(MAX_FRAME_BYTES_MIN..=i32::MAX as u64).contains(&max_frame_bytes) {
        return Err(invalid(
            "max_frame_bytes",
            max_frame_bytes,
            format!("must be between {MAX_FRAME_BYTES_MIN} and {}", i32::MAX),
        ));
    }
    let max_connections = args
        .max_connections
        .or(file.max_connections)
        .unwrap_or(10_000);
    if !(1..=1_000_000).contains(&max_connections) {
        return Err(invalid(
            "max_connections",
            max_connections,
            "must be between 1 and 1000000",
        ));
    }
    let log_level = args
        .log_level
        .or(file.log_level)
        .unwrap_or_else(|| "info".to_owned());
    if let Err(e) = tracing_subscriber::EnvFilter::try_new(&log_level) {
        return Err(invalid("log_level", &log_level, e));
    }
    let initial_delay_ms = args
        .group_initial_rebalance_delay_ms
        .or(file.group_initial_rebalance_delay_ms)
        .unwrap_or(3_000);
    if initial_delay_ms > REBALANCE_DELAY_MS_MAX {
        return Err(invalid(
            "group_initial_rebalance_delay_ms",
            initial_delay_ms,
            format!("must be at most {REBALANCE_DELAY_MS_MAX}"),
        ));
    }
    let session_min_ms = args
        .group_min_session_timeout_ms
        .or(file.group_min_session_timeout_ms)
        .unwrap_or(6_000);
    let session_max_ms = args
        .group_max_session_timeout_ms
        .or(file.group_max_session_timeout_ms)
        .unwrap_or(1_800_000);
    if !(1..=i32::MAX as u32).contains(&session_min_ms) {
        return Err(invalid(
            "group_min_session_timeout_ms",
            session_min_ms,
            "must be at least 1",
        ));
    }
    if !(session_min_ms..=i32::MAX as u32).contains(&session_max_ms) {
        return Err(invalid(
            "group_max_session_timeout_ms",
            session_max_ms,
            format!("must be at least group_min_session_timeout_ms ({session_min_ms})"),
        ));
    }
    let retention_minutes = args
        .offsets_retention_minutes
        .or(file.offsets_retention_minutes)
        .unwrap_or(7 * 24 * 60);
    if retention_minutes == 0 {
        return Err(invalid(
            "offsets_retention_minutes",
            0,
            "must be at least 1",
        ));
    }
    let group_max_size = args
        .group_max_size
        .or(file.group_max_size)
        .unwrap_or(GROUP_SIZE_MAX_DEFAULT as u32);
    if !(1..=i32::MAX as u32).contains(&group_max_size) {
        return Err(invalid(
            "group_max_size",
            group_max_size,
            "must be at least 1",
        ));
    }
    let producer_id_expiration_ms = args
        .producer_id_expiration_ms
        .or(file.producer_id_expiration_ms)
        .unwrap_or(24 * 60 * 60 * 1000);
    if !(1..=i64::MAX as u64).contains(&producer_id_expiration_ms) {
        return Err(invalid(
            "producer_id_expiration_ms",
            producer_id_expiration_ms,
            "must be at least 1",
        ));
    }
    let push_text = args
        .push_listen
        .or(file.push_listen)
        .unwrap_or_else(|| PUSH_LISTEN_DEFAULT.to_owned());
    parse_listen("push_listen", &push_text)?;
    let open_files = raise_open_file_limit();
    let push_connections_max = open_files.saturating_sub(OPEN_FILES_RESERVE + max_connections);
    let push_max_connections = match args.push_max_connections.or(file.push_max_connections) {
        Some(n) if !(1..=push_connections_max.max(1)).contains(&n) => {
            return Err(invalid(
                "push_max_connections",
                n,
                format!(
                    "must be between 1 and {push_connections_max} (the open-file limit {open_files}, less {OPEN_FILES_RESERVE} and max_connections {max_connections})"
                ),
            ));
        }
        Some(n) => n,
        None => push_connections_max.max(64),
    };
    let push_queue_bytes = args
        .push_queue_bytes
        .or(file.push_queue_bytes)
        .unwrap_or(1024 * 1024);
    if !(PUSH_QUEUE_BYTES_MIN..=1 << 32).contains(&push_queue_bytes) {
        return Err(invalid(
            "push_queue_bytes",
            push_queue_bytes,
            format!("must be between {PUSH_QUEUE_BYTES_MIN} and {}", 1u64 << 32),
        ));
    }
    let push_max_subscriptions = args
        .push_max_subscriptions
        .or(file.push_max_subscriptions)
        .unwrap_or(10_000);
    if !(1..=1_000_000).contains(&push_max_subscriptions) {
        return Err(invalid(
            "push_max_subscriptions",
            push_max_subscriptions,
            "must be between 1 and 1000000",
        ));
    }

    let (flow_control, flow_file) = crate::flow_settings::flow_control(
        args.flow_control.clone(),
        args.flow_limit,
        file.flow_control.as_ref(),
    )?;
    let (cluster, cluster_file) = crate::cluster_settings::cluster(
        crate::cluster_settings::ClusterFile {
            node_id: args.node_id,
            listen: args.cluster_listen.clone(),
            nodes: args.cluster_nodes.clone().map(|list| vec![list]),
            join: args.cluster_join,
            default_replication_factor: args.default_replication_factor,
            replica_lag_time_max_ms: args.replica_lag_time_max_ms,
            offsets_partitions: args.offsets_partitions,
            offsets_replication_factor: args.offsets_replication_factor,
            metadata_image_bytes: args.metadata_image_bytes,
        },
        file.cluster.as_ref(),
    )?;
    let (relay, relay_file) = crate::relay_settings::relay(
        args.relay_upstream.clone(),
        args.relay_topics.clone(),
        file.relay.as_ref(),
    )?;
    if relay.is_some() && cluster.is_some() {
        return Err(anyhow::anyhow!(
            "a node is either a relay ([relay]) or a member of a cluster ([cluster]), not both: a relay mirrors a cluster from outside it"
        ));
    }
    let effective = FileSettings {
        data_dir: Some(data_dir.clone()),
        kafka_listen: listen_text,
        advertised_listener: advertised_text,
        auto_create_topics: Some(auto_create_topics),
        history_index: Some(history_index),
        default_partitions: Some(default_partitions),
        flush: Some(flush_mode),
        flush_interval_ms: Some(flush_interval_ms),
        max_frame_bytes: Some(max_frame_bytes),
        max_connections: Some(max_connections),
        log_level: Some(log_level.clone()),
        admin_listen: Some(admin_text),
        group_initial_rebalance_delay_ms: Some(initial_delay_ms),
        group_min_session_timeout_ms: Some(session_min_ms),
        group_max_session_timeout_ms: Some(session_max_ms),
        offsets_retention_minutes: Some(retention_minutes),
        group_max_size: Some(group_max_size),
        producer_id_expiration_ms: Some(producer_id_expiration_ms),
        push_listen: Some(push_text.clone()),
        push_max_connections: Some(push_max_connections),
        push_queue_bytes: Some(push_queue_bytes),
        push_max_subscriptions: Some(push_max_subscriptions),
        listeners: file.listeners.clone(),
        security: file.security.clone(),
        push_listener: file.push_listener.clone(),
        flow_control: Some(flow_file),
        cluster: cluster_file,
        relay: relay_file,
    };
    let mut broker = BrokerConfig::new(data_dir);
    if let Some(cluster) = &cluster {
        // Checked to fit when parsed.
        broker.node_id = cluster.node_id as i32;
    }
    broker.auto_create_topics = auto_create_topics;
    broker.history_index = history_index;
    broker.default_partitions = default_partitions;
    broker.log_defaults.flush = flush;
    // The bounds checked above keep every value within i32.
    broker.groups.initial_rebalance_delay_ms = initial_delay_ms as i32;
    broker.groups.session_timeout_ms_min = session_min_ms as i32;
    broker.groups.session_timeout_ms_max = session_max_ms as i32;
    broker.groups.offsets_retention_ms = i64::from(retention_minutes) * 60_000;
    broker.groups.group_size_max = group_max_size as usize;
    broker.producer_id_expiration = Duration::from_millis(producer_id_expiration_ms);
    broker.security = security;
    broker.relay = relay;
    let mut kafka = KafkaConfig::new("127.0.0.1:9092".parse()?);
    kafka.listeners = listeners;
    kafka.max_frame_bytes = max_frame_bytes as usize;
    kafka.max_connections = max_connections as usize;
    kafka.flow_control = flow_control;
    let push = PushConfig {
        queue_bytes: push_queue_bytes as usize,
        max_subscriptions_per_session: push_max_subscriptions as usize,
        max_sessions: push_max_connections as usize,
        ..PushConfig::default()
    };
    // A few connections past the session limit, so a client refused a
    // session is told why (a go-away) rather than cut off.
    let gateway = crate::security_settings::push_listener(
        &push_text,
        file.push_listener.as_ref(),
        push_max_connections as usize + 64,
    )?;
    Ok(Settings {
        broker,
        admin,
        kafka,
        push,
        gateway,
        log_level,
        admin_listen,
        effective,
        cluster,
    })
}

/// Raises the soft open-file limit to the hard one (a broker holds a file
/// per connection and per segment) and answers the limit now.
fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write only `limit`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

/// The effective configuration as TOML (keys as in the config file).
pub fn to_toml(effective: &FileSettings) -> anyhow::Result<String> {
    toml::to_string(effective).context("writing the configuration as TOML")
}

pub(crate) fn parse_listen(key: &str, text: &str) -> anyhow::Result<SocketAddr> {
    let mut addrs = text.to_socket_addrs().map_err(|e| invalid(key, text, e))?;
    addrs
        .next()
        .ok_or_else(|| invalid(key, text, "resolves to no address"))
}

pub(crate) fn parse_host_port(key: &str, text: &str) -> anyhow::Result<(String, u16)> {
    let Some((host, port)) = text.rsplit_once(':') else {
        bail!(invalid(key, text, "expected HOST:PORT"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        bail!(invalid(key, text, "the host is empty"));
    }
    let port: u16 = port
        .parse()
        .map_err(|e| invalid(key, text, format!("bad port: {e}")))?;
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_file(toml_text: &str, args: ServeArgs) -> anyhow::Result<Settings> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("herald.toml");
        std::fs::write(&path, toml_text).expect("write");
        resolve(ServeArgs {
            config: Some(path),
            ..args
        })
    }

    #[test]
    fn defaults_apply_without_flags_or_file() {
        let s = resolve(ServeArgs::default()).expect("defaults");
        assert_eq!(s.kafka.listeners.len(), 1);
        assert_eq!(s.kafka.listeners[0].listen.to_string(), "127.0.0.1:9092");
        assert_eq!(s.kafka.listeners[0].advertised_port, 9092);
        assert!(!s.broker.security.authorization);
        assert!(s.broker.auto_create_topics);
        assert!(s.broker.history_index);
        assert_eq!(s.broker.default_partitions, 1);
        assert_eq!(s.broker.log_defaults.flush, FlushPolicy::Never);
    }

    #[test]
    fn flags_win_over_file_and_file_over_defaults() {
        let args = ServeArgs {
            default_partitions: Some(3),
            ..ServeArgs::default()
        };
        let s = with_file(
            "default_partitions = 7\nauto_create_topics = false\nhistory_index = false\nflush = \"every-append\"\n",
            args,
        )
        .expect("valid");
        assert_eq!(s.broker.default_partitions, 3);
        assert!(!s.broker.auto_create_topics);
        assert!(!s.broker.history_index);
        assert_eq!(s.broker.log_defaults.flush, FlushPolicy::EveryAppend);
    }

    #[test]
    fn group_settings_reach_the_coordinator_and_are_checked() {
        let s = with_file(
            "group_initial_rebalance_delay_ms = 0\noffsets_retention_minutes = 60\n",
            ServeArgs {
                group_min_session_timeout_ms: Some(1_000),
                ..ServeArgs::default()
            },
        )
        .expect("valid");
        assert_eq!(s.broker.groups.initial_rebalance_delay_ms, 0);
        assert_eq!(s.broker.groups.session_timeout_ms_min, 1_000);
        assert_eq!(s.broker.groups.offsets_retention_ms, 3_600_000);
        let err = resolve(ServeArgs {
            group_min_session_timeout_ms: Some(10_000),
            group_max_session_timeout_ms: Some(5_000),
            ..ServeArgs::default()
        })
        .expect_err("max below min refused");
        assert!(
            err.to_string()
                .contains("group_max_session_timeout_ms = 5000"),
            "{err}"
        );
    }

    #[test]
    fn invalid_values_name_key_value_and_reason() {
        let err = resolve(ServeArgs {
            default_partitions: Some(0),
            ..ServeArgs::default()
        })
        .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("default_partitions") && text.contains("= 0") && text.contains("between"),
            "{text}"
        );
        let err = resolve(ServeArgs {
            advertised_listener: Some("nohost".into()),
            ..ServeArgs::default()
        })
        .expect_err("refused");
        assert!(err.to_string().contains("advertised_listener"), "{err}");
    }

    #[test]
    fn unknown_file_key_is_refused() {
        let err = with_file("no_such_key = 1\n", ServeArgs::default()).expect_err("refused");
        assert!(format!("{err:#}").contains("no_such_key"), "{err:#}");
    }

    #[test]
    fn interval_flush_uses_the_interval() {
        let args = ServeArgs {
            flush: Some(FlushMode::Interval),
            flush_interval_ms: Some(250),
            ..ServeArgs::default()
        };
        let s = resolve(args).expect("valid");
        assert_eq!(
            s.broker.log_defaults.flush,
            FlushPolicy::Interval(Duration::from_millis(250))
        );
    }

    #[test]
    fn admin_listen_defaults_and_is_checked() {
        let s = resolve(ServeArgs::default()).expect("defaults");
        assert_eq!(s.admin_listen.to_string(), ADMIN_LISTEN_DEFAULT);
        let e = resolve(ServeArgs {
            admin_listen: Some("nowhere".into()),
            ..ServeArgs::default()
        })
        .expect_err("bad address");
        assert!(
            e.to_string().contains("invalid admin_listen = nowhere"),
            "{e}"
        );
    }

    #[test]
    fn printed_config_reads_back_as_the_same_settings() {
        let s = with_file(
            "default_partitions = 3\nflush = \"interval\"\n",
            ServeArgs::default(),
        )
        .expect("file");
        let text = to_toml(&s.effective).expect("toml");
        let again = with_file(&text, ServeArgs::default()).expect("printed config is valid");
        assert_eq!(again.broker.default_partitions, 3);
        assert_eq!(to_toml(&again.effective).expect("toml"), text);
    }
}
