//! `herald sql` and `herald history`: SQL over topics and snapshots, and
//! a topic's records between two times, through the admin API (`POST
//! /v1/sql`, `GET /v1/topics/{name}/history`), results streamed to stdout
//! or a file as they come.

use anyhow::Context as _;
use hyper::Method;
use serde_json::json;

use crate::admin_http;
use crate::cli::{HistoryArgs, SqlArgs};
use crate::commands::now_ms;

/// Runs `herald sql`.
pub async fn run(args: SqlArgs) -> anyhow::Result<()> {
    let mut body = json!({ "sql": args.sql, "format": args.format.name() });
    if let Some(snapshot) = &args.snapshot {
        body["snapshot"] = json!(snapshot);
    }
    if let Some(bytes) = args.max_memory_bytes {
        body["max_memory_bytes"] = json!(bytes);
    }
    if let Some(bytes) = args.max_scan_bytes {
        body["max_scan_bytes"] = json!(bytes);
    }
    if let Some(seconds) = args.timeout_s {
        body["timeout_ms"] = json!(seconds.saturating_mul(1000));
    }
    let target = args.admin.target()?;
    write_results(&target, Method::POST, "/v1/sql", Some(body), args.output).await
}

/// Runs `herald history`.
pub async fn history(args: HistoryArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.topic.is_empty() && !args.topic.contains(['/', '?', '&', '%']),
        "invalid topic name {:?}",
        args.topic
    );
    let now = now_ms();
    let (from, to) = match &args.last {
        Some(last) => (now - duration_ms(last)?, now + 1),
        None => (
            args.from_ms
                .context("give --from-ms (and --to-ms), or --last")?,
            args.to_ms.unwrap_or(now + 1),
        ),
    };
    let mut path = format!(
        "/v1/topics/{}/history?from_ms={from}&to_ms={to}&format={}",
        args.topic,
        args.format.name()
    );
    if let Some(subject) = &args.subject {
        path.push_str("&subject=");
        path.push_str(&percent_encode(subject));
    }
    let target = args.admin.target()?;
    write_results(&target, Method::GET, &path, None, args.output).await
}

async fn write_results(
    target: &admin_http::AdminTarget,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
    output: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    match output {
        Some(file) => {
            let mut out = tokio::fs::File::create(&file)
                .await
                .with_context(|| format!("creating {}", file.display()))?;
            let snapshot = admin_http::download(target, method, path, body, &mut out).await?;
            out.sync_all().await?;
            eprintln!(
                "results written to {} (read at snapshot {})",
                file.display(),
                snapshot.as_deref().unwrap_or("?")
            );
        }
        None => {
            let mut out = tokio::io::stdout();
            admin_http::download(target, method, path, body, &mut out).await?;
        }
    }
    Ok(())
}

/// `30s`, `10m`, `2h`, `1d` in milliseconds.
fn duration_ms(text: &str) -> anyhow::Result<i64> {
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: i64 = digits
        .parse()
        .with_context(|| format!("{text:?} is not a duration like 30s, 10m, 2h or 1d"))?;
    let per = match unit {
        "ms" => 1,
        "s" | "" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => anyhow::bail!("{text:?} is not a duration like 30s, 10m, 2h or 1d"),
    };
    n.checked_mul(per)
        .with_context(|| format!("{text:?} is too long"))
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_encodings() {
        assert_eq!(duration_ms("30s").unwrap(), 30_000);
        assert_eq!(duration_ms("10m").unwrap(), 600_000);
        assert_eq!(duration_ms("2h").unwrap(), 7_200_000);
        assert_eq!(duration_ms("1d").unwrap(), 86_400_000);
        assert!(duration_ms("ten").is_err());
        assert!(duration_ms("5y").is_err());
        assert_eq!(percent_encode("a b/é"), "a%20b%2F%C3%A9");
    }
}
