//! `herald query`: register, list, show and delete online queries (over
//! the admin API).

use std::io::{Read as _, Write as _};

use anyhow::Context as _;
use hyper::Method;
use serde_json::Value;

use crate::admin_http;
use crate::cli::QueryCommand;

/// Runs `herald query ...`.
pub async fn run(command: QueryCommand) -> anyhow::Result<()> {
    match command {
        QueryCommand::Create { spec, admin } => {
            let text = if spec.as_os_str() == "-" {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("reading the spec from stdin")?;
                text
            } else {
                std::fs::read_to_string(&spec)
                    .with_context(|| format!("reading {}", spec.display()))?
            };
            let body: Value = serde_json::from_str(&text).context("the spec is not JSON")?;
            let created =
                admin_http::call(&admin.target()?, Method::POST, "/v1/queries", Some(body)).await?;
            println!(
                "query {} registered on topic {}",
                created["spec"]["id"].as_str().unwrap_or("?"),
                created["spec"]["topic"].as_str().unwrap_or("?")
            );
            Ok(())
        }
        QueryCommand::List { json, admin } => {
            let all = admin_http::call(&admin.target()?, Method::GET, "/v1/queries", None).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&all)?);
                return Ok(());
            }
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{:<24} {:<24} {:>12} {:>8}  FILTER",
                "ID", "TOPIC", "LAG", "ALERTS"
            )?;
            for q in all.as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "{:<24} {:<24} {:>12} {:>8}  {}",
                    q["spec"]["id"].as_str().unwrap_or("?"),
                    q["spec"]["topic"].as_str().unwrap_or("?"),
                    q["lag"].to_string(),
                    q["alerts"].to_string(),
                    q["spec"]["filter"].as_str().unwrap_or("(every record)")
                )?;
            }
            Ok(())
        }
        QueryCommand::Show {
            id,
            from_ms,
            to_ms,
            json,
            admin,
        } => {
            anyhow::ensure!(
                !id.is_empty() && !id.contains(['/', '?', '&']),
                "invalid query id {id:?}"
            );
            let mut path = format!("/v1/queries/{id}");
            let range: Vec<String> = [("from_ms", from_ms), ("to_ms", to_ms)]
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
                .collect();
            if !range.is_empty() {
                path = format!("{path}?{}", range.join("&"));
            }
            let answer = admin_http::call(&admin.target()?, Method::GET, &path, None).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
                return Ok(());
            }
            show(&answer)
        }
        QueryCommand::Delete { id, admin } => {
            admin_http::call(
                &admin.target()?,
                Method::DELETE,
                &format!("/v1/queries/{id}"),
                None,
            )
            .await?;
            println!("query {id} deleted");
            Ok(())
        }
    }
}

fn show(answer: &Value) -> anyhow::Result<()> {
    let results = &answer["results"];
    let names: Vec<&str> = results["aggregates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "query {}: {} records matched of {} seen, lag {}, {} alerts",
        answer["spec"]["id"].as_str().unwrap_or("?"),
        results["records_matched"],
        results["records_seen"],
        answer["lag"],
        answer["alerts"]
    )?;
    write!(out, "{:>16}", "BUCKET_START_MS")?;
    for name in &names {
        write!(out, " {name:>16}")?;
    }
    writeln!(out)?;
    let cell = |v: &Value| match v.as_f64() {
        Some(x) => format!("{x}"),
        None => "-".to_owned(),
    };
    for bucket in results["buckets"].as_array().into_iter().flatten() {
        write!(out, "{:>16}", bucket["start_ms"].to_string())?;
        for v in bucket["values"].as_array().into_iter().flatten() {
            write!(out, " {:>16}", cell(v))?;
        }
        writeln!(out)?;
    }
    write!(out, "{:>16}", "TOTAL")?;
    for v in results["totals"].as_array().into_iter().flatten() {
        write!(out, " {:>16}", cell(v))?;
    }
    writeln!(out)?;
    Ok(())
}
