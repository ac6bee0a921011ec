//! The admin API's handle on the Kafka listener's flow-control gate
//! (`/v1/flow-control`): herald-admin knows the API, herald-kafka the gate,
//! and this glue translates between them.

use std::sync::Arc;

use herald_admin::api::flow::{FlowControlHandle, FlowControlView};
use herald_kafka::flow_gate::{FlowControl, FlowGate, FlowGateState};

/// The gate, as the admin API drives it.
#[derive(Debug)]
pub struct GateHandle(pub Arc<FlowGate>);

fn view(state: FlowGateState) -> FlowControlView {
    FlowControlView {
        mode: state.mode.name().to_owned(),
        limit: state.limit,
        in_flight: state.in_flight,
        resumed: state.resumed,
        min_limit: state.config.min,
        max_limit: state.config.max,
        delta: state.config.delta,
    }
}

impl FlowControlHandle for GateHandle {
    fn state(&self) -> FlowControlView {
        view(self.0.state())
    }

    fn reconfigure(
        &self,
        mode: &str,
        limit: Option<u32>,
        resume: bool,
    ) -> Result<FlowControlView, String> {
        let Some(mode) = FlowControl::from_name(mode) else {
            let names: Vec<&str> = FlowControl::NAMES.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "unknown flow-control mode {mode:?}: one of {}",
                names.join(", ")
            ));
        };
        Ok(view(self.0.reconfigure(mode, limit, resume)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_kafka::flow_gate::FlowControlConfig;

    fn handle() -> GateHandle {
        GateHandle(Arc::new(FlowGate::new(FlowControlConfig {
            mode: FlowControl::Fixed,
            limit: 700,
            ..FlowControlConfig::default()
        })))
    }

    #[test]
    fn an_unknown_mode_is_refused_with_the_names_and_changes_nothing() {
        let handle = handle();
        let refused = handle
            .reconfigure("fast", Some(10), false)
            .expect_err("refused");
        assert!(refused.contains("\"fast\""), "{refused}");
        assert!(refused.contains("last-three-points"), "{refused}");
        assert_eq!(handle.state().mode, "fixed");
        assert_eq!(handle.state().limit, Some(700));
    }

    #[test]
    fn a_change_without_a_limit_keeps_the_one_last_set() {
        let handle = handle();
        let off = handle.reconfigure("off", None, false).expect("switched");
        assert_eq!((off.mode.as_str(), off.limit), ("off", None));
        let adaptive = handle
            .reconfigure("adaptive", None, false)
            .expect("switched");
        assert_eq!(
            (adaptive.mode.as_str(), adaptive.limit),
            ("adaptive", Some(700))
        );
        let fixed = handle
            .reconfigure("fixed", Some(5), false)
            .expect("switched");
        assert_eq!(fixed.limit, Some(5));
        assert_eq!(
            handle
                .reconfigure("fixed", None, false)
                .expect("switched")
                .limit,
            Some(5)
        );
        assert_eq!((fixed.min_limit, fixed.delta), (100, 100));
    }
}
