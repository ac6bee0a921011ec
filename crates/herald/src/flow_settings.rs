//! The `[flow_control]` table and its flags: the broker-wide limit on
//! produce records in flight, and the controller that moves it.

use anyhow::anyhow;
use herald_kafka::flow_gate::{FlowControl, FlowControlConfig};
use serde::{Deserialize, Serialize};

/// `[flow_control]` as read from the TOML file.
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowControlFile {
    /// off, fixed, last-three-points, adaptive or gradient.
    pub controller: Option<String>,
    /// The first limit in records (the only one when fixed).
    pub limit: Option<u32>,
    /// The smallest limit a controller may set.
    pub min_limit: Option<u32>,
    /// The largest limit a controller may set.
    pub max_limit: Option<u32>,
    /// The controllers' step (seed 004's delta), in records.
    pub delta: Option<u32>,
    /// Records per measurement window (seed 004's N).
    pub window_records: Option<u64>,
    /// The shortest window, in milliseconds.
    pub window_min_ms: Option<u64>,
}

fn invalid(key: &str, value: impl std::fmt::Display, reason: &str) -> anyhow::Error {
    anyhow!("invalid flow_control.{key} = {value}: {reason}")
}

/// The gate's settings from the flags (which win) and the file; answers
/// them with the table as it is in effect, for `--print-config`.
pub fn flow_control(
    controller: Option<String>,
    limit: Option<u32>,
    file: Option<&FlowControlFile>,
) -> anyhow::Result<(FlowControlConfig, FlowControlFile)> {
    let file = file.cloned().unwrap_or_default();
    let defaults = FlowControlConfig::default();
    let name = controller
        .or(file.controller)
        .unwrap_or_else(|| "off".to_owned());
    let mode = FlowControl::from_name(&name).ok_or_else(|| {
        let names: Vec<&str> = FlowControl::NAMES.iter().map(|(n, _)| *n).collect();
        invalid(
            "controller",
            &name,
            &format!("must be one of {}", names.join(", ")),
        )
    })?;
    let config = FlowControlConfig {
        mode,
        limit: limit.or(file.limit).unwrap_or(defaults.limit),
        min: file.min_limit.unwrap_or(defaults.min),
        max: file.max_limit.unwrap_or(defaults.max),
        delta: file.delta.unwrap_or(defaults.delta),
        window_records: file.window_records.unwrap_or(defaults.window_records),
        window_min_ms: file.window_min_ms.unwrap_or(defaults.window_min_ms),
    };
    if config.min == 0 || config.min > config.max {
        return Err(invalid(
            "min_limit",
            config.min,
            "must be at least 1 and at most max_limit",
        ));
    }
    // A fixed limit is not bounded by what a controller may set.
    if mode == FlowControl::Fixed && config.limit == 0 {
        return Err(invalid("limit", 0, "must be at least 1"));
    }
    if mode != FlowControl::Fixed && !(config.min..=config.max).contains(&config.limit) {
        return Err(invalid(
            "limit",
            config.limit,
            "must be between min_limit and max_limit",
        ));
    }
    if config.delta == 0 {
        return Err(invalid("delta", 0, "must be at least 1"));
    }
    if config.window_min_ms > 60_000 {
        return Err(invalid(
            "window_min_ms",
            config.window_min_ms,
            "must be at most 60000",
        ));
    }
    if !(1..=100_000_000).contains(&config.window_records) {
        return Err(invalid(
            "window_records",
            config.window_records,
            "must be between 1 and 100000000",
        ));
    }
    let effective = FlowControlFile {
        controller: Some(name),
        limit: Some(config.limit),
        min_limit: Some(config.min),
        max_limit: Some(config.max),
        delta: Some(config.delta),
        window_records: Some(config.window_records),
        window_min_ms: Some(config.window_min_ms),
    };
    Ok((config, effective))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_flags_win_over_the_file() {
        let (config, _) = flow_control(None, None, None).expect("defaults");
        assert_eq!(config.mode, FlowControl::Off);
        let file = FlowControlFile {
            controller: Some("gradient".into()),
            limit: Some(500),
            ..FlowControlFile::default()
        };
        let (config, effective) =
            flow_control(Some("adaptive".into()), Some(800), Some(&file)).expect("valid");
        assert_eq!((config.mode, config.limit), (FlowControl::Adaptive, 800));
        assert_eq!(effective.controller.as_deref(), Some("adaptive"));
    }

    #[test]
    fn invalid_values_say_which_and_why() {
        let err = flow_control(Some("fastest".into()), None, None).expect_err("unknown");
        assert!(
            err.to_string()
                .contains("flow_control.controller = fastest"),
            "{err}"
        );
        let file = FlowControlFile {
            min_limit: Some(100),
            ..FlowControlFile::default()
        };
        let err =
            flow_control(Some("adaptive".into()), Some(10), Some(&file)).expect_err("below min");
        assert!(err.to_string().contains("flow_control.limit = 10"), "{err}");
    }
}
