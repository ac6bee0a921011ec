//! The `[relay]` table and its flags: the upstream a relay node mirrors
//! topics from, and which topics (see `herald_broker::relay`). Without
//! them the node mirrors nothing.

use anyhow::anyhow;
use serde::{Deserialize, Serialize};

/// `[relay]` as read from the TOML file.
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RelayFile {
    /// The upstream's Kafka listeners, HOST:PORT each: any node of a
    /// cluster, a single node, or another relay; the others are tried when
    /// one fails.
    pub upstream: Option<Vec<String>>,
    /// The topics mirrored from the upstream.
    pub topics: Option<Vec<String>>,
}

fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The relay configuration from the flags (comma-separated lists, which
/// win) or the file; `None` when neither names an upstream. Also returns
/// the table as it takes effect, for `--print-config`.
pub fn relay(
    upstream: Option<String>,
    topics: Option<String>,
    file: Option<&RelayFile>,
) -> anyhow::Result<(Option<herald_broker::relay::RelayConfig>, Option<RelayFile>)> {
    let upstream = upstream
        .as_deref()
        .map(list)
        .or_else(|| file.and_then(|f| f.upstream.clone()));
    let topics = topics
        .as_deref()
        .map(list)
        .or_else(|| file.and_then(|f| f.topics.clone()));
    let Some(upstream) = upstream else {
        if topics.is_some_and(|t| !t.is_empty()) {
            return Err(anyhow!(
                "relay topics are set but no relay upstream (set --relay-upstream, HERALD_RELAY_UPSTREAM or `upstream` in the config file's [relay])"
            ));
        }
        return Ok((None, None));
    };
    let topics = topics.unwrap_or_default();
    let config = herald_broker::relay::RelayConfig::new(upstream.clone(), topics.clone())
        .map_err(|e| anyhow!("invalid [relay]: {e} (set by --relay-upstream and --relay-topics, or the config file's [relay])"))?;
    Ok((
        Some(config),
        Some(RelayFile {
            upstream: Some(upstream),
            topics: Some(topics),
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_and_lists_are_comma_separated() {
        let file = RelayFile {
            upstream: Some(vec!["10.0.0.1:9092".into()]),
            topics: Some(vec!["from-file".into()]),
        };
        let (config, effective) = relay(
            Some("127.0.0.1:9092, 127.0.0.2:9092".into()),
            None,
            Some(&file),
        )
        .unwrap();
        let config = config.unwrap();
        assert_eq!(
            config.upstream().bootstrap(),
            ["127.0.0.1:9092", "127.0.0.2:9092"]
        );
        assert!(config.mirrors("from-file"));
        assert_eq!(effective.unwrap().topics.unwrap(), ["from-file"]);
    }

    #[test]
    fn a_relay_needs_an_upstream_and_topics() {
        assert!(relay(None, None, None).unwrap().0.is_none());
        let no_upstream = relay(None, Some("orders".into()), None).unwrap_err();
        assert!(no_upstream.to_string().contains("no relay upstream"));
        let no_topics = relay(Some("127.0.0.1:9092".into()), None, None).unwrap_err();
        assert!(no_topics.to_string().contains("at least one topic"));
        let bad = relay(Some("nowhere".into()), Some("t".into()), None).unwrap_err();
        assert!(bad.to_string().contains("HOST:PORT"));
    }
}
