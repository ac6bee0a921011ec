//! Per-topic configuration in Kafka's own key names (`retention.ms`, ...):
//! parsing and validating values, turning them into a [`LogConfig`], and
//! describing them as Kafka tools expect.

use std::collections::BTreeMap;
use std::time::Duration;

use herald_log::LogConfig;

use crate::error::BrokerError;

/// Where a described config value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on this topic.
    TopicOverride,
    /// Inherited from the topic's namespace (described to Kafka clients
    /// as a dynamic default).
    Namespace,
    /// The broker's default, not overridden.
    Default,
    /// Fixed by the broker's startup configuration (flags, env, file).
    Static,
}

/// The type of a config value, as Kafka describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` / `false`.
    Boolean,
    /// Free text.
    String,
    /// 32-bit integer.
    Int,
    /// 64-bit integer.
    Long,
    /// Comma-separated list.
    List,
}

/// One described configuration value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Kafka config name.
    pub name: String,
    /// Current value (`None` for an unset value without default).
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// True if it cannot be altered.
    pub read_only: bool,
    /// Type of the value.
    pub config_type: ConfigType,
    /// What the setting does.
    pub documentation: &'static str,
}

/// A topic config key herald understands.
struct KeySpec {
    name: &'static str,
    config_type: ConfigType,
    documentation: &'static str,
    /// Some(value) for keys whose behaviour herald does not vary: describing
    /// them tells clients the truth, and only this value is accepted.
    fixed: Option<&'static str>,
}

/// When a topic's partitions keep subject filters (`subject.filters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectFilters {
    /// From the topic's first push subscription on: a topic only Kafka
    /// clients use pays nothing for them.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl SubjectFilters {
    /// Reads `auto`, `true` or `false`, in any case.
    pub fn parse(value: &str) -> Option<Self> {
        let v = value.trim();
        [
            ("auto", Self::Auto),
            ("true", Self::Always),
            ("false", Self::Never),
        ]
        .into_iter()
        .find_map(|(name, mode)| v.eq_ignore_ascii_case(name).then_some(mode))
    }
}

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "cleanup.policy",
        config_type: ConfigType::List,
        documentation: "Retention policy for old segments; only delete is supported.",
        fixed: None,
    },
    KeySpec {
        name: "compression.type",
        config_type: ConfigType::String,
        documentation: "Batches are stored with the compression the producer used.",
        fixed: Some("producer"),
    },
    KeySpec {
        name: "max.message.bytes",
        config_type: ConfigType::Int,
        documentation: "Largest record batch accepted, in bytes.",
        fixed: None,
    },
    KeySpec {
        name: "message.ttl.ms",
        config_type: ConfigType::Long,
        documentation: "Push delivery skips records older than this (from their timestamp), though they stay in the log until retention removes them; -1 never expires. A record's herald.expires-at or herald.ttl-ms header overrides it.",
        fixed: None,
    },
    KeySpec {
        name: "message.priority",
        config_type: ConfigType::String,
        documentation: "Push delivery class of records without a herald.priority header: normal or high (sent ahead of queued normal records).",
        fixed: None,
    },
    KeySpec {
        name: "subject.filters",
        config_type: ConfigType::String,
        documentation: "Keep a filter of record keys per block of 1,024 offsets (10 bits per record, built off the produce path, in files beside the segments), so a push subscription to a subject catching up from the log skips blocks that hold none of its records. auto: from the topic's first push subscription on (the log written before is indexed then, in the background); true: always; false: never.",
        fixed: None,
    },
    KeySpec {
        name: "key.sorted.copy",
        config_type: ConfigType::Boolean,
        documentation: "Keep a copy of each sealed segment's keyed records sorted by key (lz4-compressed, in a file beside the segment, built in the background once the segment is sealed and indexed, and for the segment being written a sixty-fourth of segment.bytes at a time, merged as they accumulate), so that an SQL lookup by key reads a block or two per copy rather than every batch holding the key. For topics queried by key; costs the keyed records' size again in disk, compressed. Turning it off deletes the copies.",
        fixed: None,
    },
    KeySpec {
        name: "message.timestamp.type",
        config_type: ConfigType::String,
        documentation: "Record timestamps are the producer's create time.",
        fixed: Some("CreateTime"),
    },
    KeySpec {
        name: "min.insync.replicas",
        config_type: ConfigType::Int,
        documentation: "A single node is its own in-sync replica set.",
        fixed: Some("1"),
    },
    KeySpec {
        name: "retention.bytes",
        config_type: ConfigType::Long,
        documentation:
            "Oldest segments are deleted while a partition is larger than this; -1 for no limit.",
        fixed: None,
    },
    KeySpec {
        name: "retention.ms",
        config_type: ConfigType::Long,
        documentation:
            "Segments whose newest record is older than this are deleted; -1 keeps them forever.",
        fixed: None,
    },
    KeySpec {
        name: "segment.bytes",
        config_type: ConfigType::Int,
        documentation: "A segment is rolled once it holds this many bytes.",
        fixed: None,
    },
    KeySpec {
        name: "segment.ms",
        config_type: ConfigType::Long,
        documentation: "A non-empty segment older than this is rolled.",
        fixed: None,
    },
    KeySpec {
        name: "write.caching",
        config_type: ConfigType::Boolean,
        documentation: "In a cluster, acks=all is answered once a majority of the replicas has written the batch, before it is fsynced (the operating system and the flush policy write it back): faster, but a power loss on a majority at once can lose acknowledged records. false (the default) fsyncs on each replica first.",
        fixed: None,
    },
];

fn spec(name: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.name == name)
}

/// Whether `key` is a topic config herald knows and lets a topic set.
pub(crate) fn settable(key: &str) -> bool {
    spec(key).is_some_and(|k| k.fixed.is_none())
}

/// The overrides set on one topic, and the configs it inherits from its
/// namespace, always valid against the broker's defaults they were
/// checked with. A key the topic sets wins over its namespace's, which
/// wins over the broker's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
    /// The namespace's configs (not persisted with the topic: they come
    /// from the namespace, and follow its changes).
    inherited: BTreeMap<String, String>,
}

impl TopicConfig {
    /// Builds a config from `(key, value)` pairs, checking each key and the
    /// resulting log configuration against `defaults`.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        defaults: &LogConfig,
    ) -> Result<Self, BrokerError> {
        let mut config = TopicConfig::default();
        for (key, value) in pairs {
            config.overrides.insert(key.to_owned(), value.to_owned());
        }
        config.log_config(defaults)?;
        Ok(config)
    }

    /// The overrides, by key.
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.overrides
    }

    /// The configs inherited from the topic's namespace, by key.
    pub fn inherited(&self) -> &BTreeMap<String, String> {
        &self.inherited
    }

    /// The same overrides, inheriting `inherited` instead (unchecked:
    /// [`Self::log_config`] says whether the result is valid).
    pub fn inheriting(&self, inherited: BTreeMap<String, String>) -> Self {
        Self {
            overrides: self.overrides.clone(),
            inherited,
        }
    }

    /// No overrides, the same inheritance.
    pub fn without_overrides(&self) -> Self {
        Self {
            overrides: BTreeMap::new(),
            inherited: self.inherited.clone(),
        }
    }

    /// The value in force for `key`, when the topic or its namespace sets
    /// one.
    fn effective(&self, key: &str) -> Option<&String> {
        self.overrides.get(key).or_else(|| self.inherited.get(key))
    }

    /// `message.priority`: true if records without a priority header are
    /// high priority. Checked when set.
    pub fn message_priority_high(&self) -> bool {
        self.effective("message.priority")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("high"))
    }

    /// `subject.filters`. Checked when set.
    pub fn subject_filters(&self) -> SubjectFilters {
        self.effective("subject.filters")
            .and_then(|v| SubjectFilters::parse(v))
            .unwrap_or(SubjectFilters::Auto)
    }

    /// `write.caching`: whether a replicated partition counts a batch as
    /// stored once written rather than once fsynced. Checked when set.
    pub fn write_caching(&self) -> bool {
        self.effective("write.caching")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// `message.ttl.ms` (`None`: records do not expire). Checked when set.
    pub fn message_ttl_ms(&self) -> Option<u64> {
        self.effective("message.ttl.ms")
            .and_then(|v| parse_limit("message.ttl.ms", v).ok().flatten())
    }

    /// A copy with `key` set to `value` (or removed for `None`), checked.
    pub fn with(
        &self,
        key: &str,
        value: Option<&str>,
        defaults: &LogConfig,
    ) -> Result<Self, BrokerError> {
        let mut next = self.clone();
        match value {
            Some(v) => {
                next.overrides.insert(key.to_owned(), v.to_owned());
            }
            None => {
                if spec(key).is_none() {
                    return Err(unknown_key(key, ""));
                }
                next.overrides.remove(key);
            }
        }
        next.log_config(defaults)?;
        Ok(next)
    }

    /// The log configuration these overrides give on top of `defaults`.
    pub fn log_config(&self, defaults: &LogConfig) -> Result<LogConfig, BrokerError> {
        let mut config = defaults.clone();
        for (key, value) in &self.inherited {
            if !self.overrides.contains_key(key) {
                apply(&mut config, key, value)?;
            }
        }
        for (key, value) in &self.overrides {
            apply(&mut config, key, value)?;
        }
        // The log never lets a batch span segments. Kafka does (it rolls
        // after), so a small segment.bytes with the default
        // max.message.bytes is legal there: clamp the default to fit rather
        // than refuse. An explicit max.message.bytes is still checked.
        if self.effective("max.message.bytes").is_none() {
            config.max_batch_bytes = config.max_batch_bytes.min(config.segment_bytes);
        }
        config.validate().map_err(|e| {
            let key = match e.key {
                "segment_bytes" => "segment.bytes",
                "max_batch_bytes" => "max.message.bytes",
                other => other,
            };
            let value = self
                .effective(key)
                .cloned()
                .unwrap_or_else(|| e.value.to_string());
            BrokerError::invalid_config(key, &value, e.reason)
        })?;
        Ok(config)
    }

    /// Every topic config with its effective value and source.
    pub fn describe(&self, defaults: &LogConfig) -> Vec<ConfigEntry> {
        KEYS.iter()
            .map(|k| {
                let (value, source) = match (self.overrides.get(k.name), self.inherited.get(k.name))
                {
                    (Some(v), _) => (v.clone(), ConfigSource::TopicOverride),
                    (None, Some(v)) => (v.clone(), ConfigSource::Namespace),
                    (None, None) => (default_value(k, defaults), ConfigSource::Default),
                };
                ConfigEntry {
                    name: k.name.to_owned(),
                    value: Some(value),
                    source,
                    read_only: k.fixed.is_some(),
                    config_type: k.config_type,
                    documentation: k.documentation,
                }
            })
            .collect()
    }
}

fn default_value(k: &KeySpec, defaults: &LogConfig) -> String {
    if let Some(fixed) = k.fixed {
        return fixed.to_owned();
    }
    match k.name {
        "cleanup.policy" => "delete".to_owned(),
        "max.message.bytes" => defaults.max_batch_bytes.to_string(),
        "retention.bytes" => defaults
            .retention_bytes
            .map_or(-1, |b| b as i64)
            .to_string(),
        "retention.ms" => millis_or_minus_one(defaults.retention_age),
        "message.ttl.ms" => "-1".to_owned(),
        "message.priority" => "normal".to_owned(),
        "subject.filters" => "auto".to_owned(),
        "write.caching" => "false".to_owned(),
        "key.sorted.copy" => defaults.key_copy.to_string(),
        "segment.bytes" => defaults.segment_bytes.to_string(),
        "segment.ms" => millis_or_minus_one(defaults.segment_age),
        _ => String::new(),
    }
}

/// Checks that `value` is one of the two words `allowed` (any case).
fn one_of(key: &str, value: &str, allowed: [&str; 2]) -> Result<(), BrokerError> {
    let v = value.trim();
    if allowed.iter().any(|a| v.eq_ignore_ascii_case(a)) {
        return Ok(());
    }
    let reason = format!("must be {} or {}", allowed[0], allowed[1]);
    Err(BrokerError::invalid_config(key, value, reason))
}

/// Kafka's spelling of "no limit" for a duration setting.
pub(crate) fn millis_or_minus_one(d: Option<Duration>) -> String {
    d.map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .to_string()
}

fn unknown_key(key: &str, value: &str) -> BrokerError {
    BrokerError::invalid_config(key, value, "unknown topic config name")
}

fn apply(config: &mut LogConfig, key: &str, value: &str) -> Result<(), BrokerError> {
    let k = spec(key).ok_or_else(|| unknown_key(key, value))?;
    if let Some(fixed) = k.fixed {
        if value.trim() != fixed {
            return Err(BrokerError::invalid_config(
                key,
                value,
                format!("herald supports only {key}={fixed}"),
            ));
        }
        return Ok(());
    }
    match key {
        "cleanup.policy" => {
            let policies: Vec<&str> = value.split(',').map(str::trim).collect();
            if policies.contains(&"compact") {
                return Err(BrokerError::invalid_config(
                    key,
                    value,
                    "log compaction is not supported; only cleanup.policy=delete",
                ));
            }
            if policies != ["delete"] {
                return Err(BrokerError::invalid_config(
                    key,
                    value,
                    "the only supported policy is delete",
                ));
            }
        }
        "max.message.bytes" => config.max_batch_bytes = parse_u32(key, value)?,
        "segment.bytes" => config.segment_bytes = parse_u32(key, value)?,
        "retention.bytes" => config.retention_bytes = parse_limit(key, value)?,
        "retention.ms" => {
            config.retention_age = parse_limit(key, value)?.map(Duration::from_millis)
        }
        // Read by push delivery, not by the log: only checked here.
        "message.ttl.ms" => {
            parse_limit(key, value)?;
        }
        "write.caching" => one_of(key, value, ["true", "false"])?,
        "key.sorted.copy" => {
            one_of(key, value, ["true", "false"])?;
            config.key_copy = value.trim().eq_ignore_ascii_case("true");
        }
        "message.priority" => one_of(key, value, ["normal", "high"])?,
        "subject.filters" => {
            if SubjectFilters::parse(value).is_none() {
                return Err(BrokerError::invalid_config(
                    key,
                    value,
                    "must be auto, true or false",
                ));
            }
        }
        "segment.ms" => {
            let ms = parse_limit(key, value)?
                .filter(|&ms| ms > 0)
                .ok_or_else(|| BrokerError::invalid_config(key, value, "must be at least 1"))?;
            config.segment_age = Some(Duration::from_millis(ms));
        }
        _ => return Err(unknown_key(key, value)),
    }
    Ok(())
}

fn parse_u32(key: &str, value: &str) -> Result<u32, BrokerError> {
    let v: i32 = value
        .trim()
        .parse()
        .map_err(|_| BrokerError::invalid_config(key, value, "not a 32-bit integer"))?;
    u32::try_from(v).map_err(|_| BrokerError::invalid_config(key, value, "must not be negative"))
}

/// A 64-bit limit where -1 means "none".
fn parse_limit(key: &str, value: &str) -> Result<Option<u64>, BrokerError> {
    let v: i64 = value
        .trim()
        .parse()
        .map_err(|_| BrokerError::invalid_config(key, value, "not a 64-bit integer"))?;
    match v {
        -1 => Ok(None),
        v if v >= 0 => Ok(Some(v as u64)),
        _ => Err(BrokerError::invalid_config(
            key,
            value,
            "must be -1 (no limit) or at least 0",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> LogConfig {
        LogConfig::default()
    }

    #[test]
    fn overrides_turn_into_log_config() {
        let c = TopicConfig::from_pairs(
            [
                ("retention.ms", "60000"),
                ("segment.bytes", "1048576"),
                ("retention.bytes", "-1"),
            ],
            &defaults(),
        )
        .expect("valid");
        let log = c.log_config(&defaults()).expect("valid");
        assert_eq!(log.retention_age, Some(Duration::from_secs(60)));
        assert_eq!(log.segment_bytes, 1_048_576);
        assert_eq!(log.retention_bytes, None);
    }

    #[test]
    fn compact_is_refused_with_a_clear_reason() {
        let err = TopicConfig::from_pairs([("cleanup.policy", "compact")], &defaults())
            .expect_err("refused");
        assert!(
            err.to_string().contains("compaction is not supported"),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_and_bad_numbers_are_refused() {
        assert!(TopicConfig::from_pairs([("no.such.key", "1")], &defaults()).is_err());
        assert!(TopicConfig::from_pairs([("retention.ms", "soon")], &defaults()).is_err());
        assert!(TopicConfig::from_pairs([("retention.ms", "-2")], &defaults()).is_err());
        assert!(TopicConfig::from_pairs([("segment.ms", "0")], &defaults()).is_err());
    }

    #[test]
    fn combination_checked_by_the_log_is_reported_with_kafka_key() {
        let err = TopicConfig::from_pairs([("segment.bytes", "100")], &defaults())
            .expect_err("too small");
        assert!(
            matches!(err, BrokerError::InvalidConfig { ref key, .. } if key == "segment.bytes"),
            "{err}"
        );
    }

    #[test]
    fn write_caching_is_off_unless_set_true() {
        let plain = TopicConfig::from_pairs([], &defaults()).expect("valid");
        assert!(!plain.write_caching());
        let on = TopicConfig::from_pairs([("write.caching", "TRUE")], &defaults()).expect("valid");
        assert!(on.write_caching());
        let off =
            TopicConfig::from_pairs([("write.caching", "false")], &defaults()).expect("valid");
        assert!(!off.write_caching());
        let err =
            TopicConfig::from_pairs([("write.caching", "yes")], &defaults()).expect_err("refused");
        assert!(err.to_string().contains("true or false"), "{err}");
    }

    #[test]
    fn fixed_keys_accept_only_their_value() {
        assert!(TopicConfig::from_pairs([("compression.type", "producer")], &defaults()).is_ok());
        assert!(TopicConfig::from_pairs([("compression.type", "gzip")], &defaults()).is_err());
    }

    #[test]
    fn describe_marks_overrides_and_defaults() {
        let c = TopicConfig::from_pairs([("retention.ms", "1000")], &defaults()).expect("valid");
        let entries = c.describe(&defaults());
        let retention = entries
            .iter()
            .find(|e| e.name == "retention.ms")
            .expect("listed");
        assert_eq!(retention.value.as_deref(), Some("1000"));
        assert_eq!(retention.source, ConfigSource::TopicOverride);
        let segment = entries
            .iter()
            .find(|e| e.name == "segment.bytes")
            .expect("listed");
        assert_eq!(segment.source, ConfigSource::Default);
        assert_eq!(segment.value.as_deref(), Some("1073741824"));
    }

    #[test]
    fn a_namespace_value_is_inherited_unless_the_topic_sets_its_own() {
        let namespace: BTreeMap<String, String> = [
            ("retention.ms".to_owned(), "5000".to_owned()),
            ("message.ttl.ms".to_owned(), "250".to_owned()),
        ]
        .into();
        let own = TopicConfig::from_pairs([("message.ttl.ms", "100")], &defaults())
            .expect("valid")
            .inheriting(namespace);
        let described = own.describe(&defaults());
        let entry = |name: &str| {
            described
                .iter()
                .find(|e| e.name == name)
                .map(|e| (e.value.clone().unwrap_or_default(), e.source))
                .expect("listed")
        };
        assert_eq!(
            entry("retention.ms"),
            ("5000".into(), ConfigSource::Namespace)
        );
        assert_eq!(
            entry("message.ttl.ms"),
            ("100".into(), ConfigSource::TopicOverride)
        );
        assert_eq!(entry("segment.ms").1, ConfigSource::Default);
        assert_eq!(own.message_ttl_ms(), Some(100));
        let log = own.log_config(&defaults()).expect("valid");
        assert_eq!(log.retention_age, Some(Duration::from_millis(5000)));
        // Only the topic's own settings are stored with it.
        assert_eq!(own.overrides().len(), 1);
        assert_eq!(own.without_overrides().message_ttl_ms(), Some(250));
    }

    #[test]
    fn push_settings_are_checked_and_read_without_touching_the_log() {
        let none = TopicConfig::default();
        assert_eq!(none.message_ttl_ms(), None);
        assert!(!none.message_priority_high());
        assert_eq!(none.subject_filters(), SubjectFilters::Auto);
        let off = TopicConfig::from_pairs([("subject.filters", "False")], &defaults());
        assert_eq!(off.expect("valid").subject_filters(), SubjectFilters::Never);
        let on = TopicConfig::from_pairs([("subject.filters", "true")], &defaults());
        assert_eq!(on.expect("valid").subject_filters(), SubjectFilters::Always);
        let c = TopicConfig::from_pairs(
            [("message.ttl.ms", "60000"), ("message.priority", "HIGH")],
            &defaults(),
        )
        .expect("valid");
        assert_eq!(c.message_ttl_ms(), Some(60_000));
        assert!(c.message_priority_high());
        assert_eq!(c.log_config(&defaults()).expect("valid"), defaults());
        let forever = TopicConfig::from_pairs([("message.ttl.ms", "-1")], &defaults());
        assert_eq!(forever.expect("valid").message_ttl_ms(), None);
        for (key, value) in [
            ("message.ttl.ms", "-2"),
            ("message.ttl.ms", "an hour"),
            ("message.priority", "urgent"),
            ("subject.filters", "yes"),
        ] {
            assert!(
                TopicConfig::from_pairs([(key, value)], &defaults()).is_err(),
                "{key}={value}"
            );
        }
        let described = none.describe(&defaults());
        let value = |name: &str| {
            described
                .iter()
                .find(|e| e.name == name)
                .and_then(|e| e.value.clone())
        };
        assert_eq!(value("message.ttl.ms").as_deref(), Some("-1"));
        assert_eq!(value("message.priority").as_deref(), Some("normal"));
    }

    #[test]
    fn removing_an_override_returns_to_default() {
        let c = TopicConfig::from_pairs([("retention.ms", "1000")], &defaults()).expect("valid");
        let c = c.with("retention.ms", None, &defaults()).expect("valid");
        assert!(c.overrides().is_empty());
    }
}
