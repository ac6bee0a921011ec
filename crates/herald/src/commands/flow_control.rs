//! `herald flow-control`: show and change the broker-wide limit on produce
//! records in flight while the broker serves (over the admin API).

use hyper::Method;
use serde_json::{json, Value};

use crate::admin_http;
use crate::cli::FlowControlCommand;

const PATH: &str = "/v1/flow-control";

/// Runs `herald flow-control ...`.
pub async fn run(command: FlowControlCommand) -> anyhow::Result<()> {
    let (view, as_json) = match command {
        FlowControlCommand::Show { json, admin } => (
            admin_http::call(&admin.target()?, Method::GET, PATH, None).await?,
            json,
        ),
        FlowControlCommand::Set {
            mode,
            limit,
            resume,
            json,
            admin,
        } => {
            let mut body = json!({ "mode": mode });
            if let Some(limit) = limit {
                body["limit"] = limit.into();
            }
            // Sent only when asked for: a broker from before `resume`
            // refuses fields it does not know.
            if resume {
                body["resume"] = true.into();
            }
            (
                admin_http::call(&admin.target()?, Method::PUT, PATH, Some(body)).await?,
                json,
            )
        }
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&view)?);
    } else {
        println!("{}", describe(&view));
    }
    Ok(())
}

/// One line saying what the gate is doing.
fn describe(view: &Value) -> String {
    let mode = view["mode"].as_str().unwrap_or("?");
    match view["limit"].as_u64() {
        None => format!("flow control {mode}: produce requests are not limited"),
        Some(limit) => {
            let moved = if mode == "fixed" {
                String::new()
            } else {
                format!(
                    ", moved between {} and {} by steps of {}",
                    view["min_limit"], view["max_limit"], view["delta"]
                )
            };
            let resumed = if view["resumed"].as_bool() == Some(true) {
                " (resumed)"
            } else {
                ""
            };
            format!(
                "flow control {mode}{resumed}: limit {limit} records{moved}, {} in flight",
                view["in_flight"]
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_the_mode_the_limit_and_what_moves_it() {
        let view = json!({"mode": "adaptive", "limit": 300, "in_flight": 12,
                          "min_limit": 100, "max_limit": 1000000, "delta": 100});
        assert_eq!(
            describe(&view),
            "flow control adaptive: limit 300 records, moved between 100 and 1000000 by steps of 100, 12 in flight"
        );
        let resumed = json!({"mode": "gradient", "limit": 740, "in_flight": 3, "resumed": true,
                             "min_limit": 100, "max_limit": 1000000, "delta": 100});
        assert_eq!(
            describe(&resumed),
            "flow control gradient (resumed): limit 740 records, moved between 100 and 1000000 by steps of 100, 3 in flight"
        );
        let fixed = json!({"mode": "fixed", "limit": 2, "in_flight": 0,
                           "min_limit": 100, "max_limit": 1000000, "delta": 100});
        assert_eq!(
            describe(&fixed),
            "flow control fixed: limit 2 records, 0 in flight"
        );
        let off = json!({"mode": "off", "limit": null, "in_flight": 0,
                         "min_limit": 100, "max_limit": 1000000, "delta": 100});
        assert_eq!(
            describe(&off),
            "flow control off: produce requests are not limited"
        );
    }
}
