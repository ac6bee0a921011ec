//! `herald snapshot`: take, list, show and delete snapshots of topics (over
//! the admin API), and export one (over Kafka, from its view topics) as
//! JSON lines or as a raw backup that keeps every batch byte for byte with
//! its offsets.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use hyper::Method;
use serde_json::{json, Value};

use crate::admin_http;
use crate::cli::{ExportFormat, SnapshotCommand};
use herald_client::data::fetch_batches;
use herald_client::records::decode_batch;
use herald_records::BatchHeader;

/// Longest one export fetch waits (the view never grows, so only for a
/// partition whose appends before the cut are still being written).
const EXPORT_FETCH_WAIT: Duration = Duration::from_millis(100);
/// File describing a raw backup.
pub const MANIFEST: &str = "manifest.json";

/// Runs `herald snapshot ...`.
pub async fn run(command: SnapshotCommand) -> anyhow::Result<()> {
    match command {
        SnapshotCommand::Create {
            topics,
            id,
            ttl,
            json: as_json,
            admin,
        } => {
            let mut body = json!({ "topics": topics });
            if let Some(id) = id {
                body["id"] = json!(id);
            }
            if let Some(ttl) = ttl {
                body["ttl_ms"] = json!(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
            }
            let taken =
                admin_http::call(&admin.target()?, Method::POST, "/v1/snapshots", Some(body))
                    .await?;
            show(&taken, as_json)
        }
        SnapshotCommand::List {
            json: as_json,
            admin,
        } => {
            let all =
                admin_http::call(&admin.target()?, Method::GET, "/v1/snapshots", None).await?;
            if as_json {
                return print_json(&all);
            }
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{:<24} {:>14} {:>14} {:>7}  NAMES",
                "ID", "RECORDS", "BYTES", "TOPICS"
            )?;
            for snapshot in all.as_array().into_iter().flatten() {
                let topics: Vec<&str> = snapshot["topics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t["name"].as_str())
                    .collect();
                writeln!(
                    out,
                    "{:<24} {:>14} {:>14} {:>7}  {}",
                    snapshot["id"].as_str().unwrap_or("?"),
                    snapshot["records"].to_string(),
                    snapshot["bytes"].to_string(),
                    topics.len(),
                    topics.join(",")
                )?;
            }
            Ok(())
        }
        SnapshotCommand::Show {
            id,
            json: as_json,
            admin,
        } => {
            let snapshot = get(&admin.target()?, &id).await?;
            show(&snapshot, as_json)
        }
        SnapshotCommand::Delete { id, admin } => {
            admin_http::call(
                &admin.target()?,
                Method::DELETE,
                &format!("/v1/snapshots/{id}"),
                None,
            )
            .await?;
            println!("snapshot {id} deleted");
            Ok(())
        }
        SnapshotCommand::Export {
            id,
            format,
            output,
            admin,
            broker,
        } => {
            let target = admin.target()?;
            let snapshot = get(&target, &id).await?;
            let records = match format {
                ExportFormat::Raw => {
                    export_raw(&mut broker.connect().await?, &snapshot, &output).await?
                }
                ExportFormat::Jsonl => {
                    export_jsonl(&mut broker.connect().await?, &snapshot, &output).await?
                }
                ExportFormat::Parquet => export_parquet(&target, &id, &snapshot, &output).await?,
            };
            println!(
                "snapshot {id}: {records} records exported to {}",
                output.display()
            );
            Ok(())
        }
        SnapshotCommand::Restore {
            dir,
            renames,
            admin,
        } => restore(&dir, &renames, &admin.target()?).await,
    }
}

async fn get(admin: &admin_http::AdminTarget, id: &str) -> anyhow::Result<Value> {
    anyhow::ensure!(
        !id.is_empty() && !id.contains('/'),
        "invalid snapshot id {id:?}"
    );
    admin_http::call(admin, Method::GET, &format!("/v1/snapshots/{id}"), None).await
}

fn print_json(value: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn show(snapshot: &Value, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return print_json(snapshot);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "snapshot {}: {} records, {} bytes, timestamps {} to {}, cut in {} µs, expires at {}",
        snapshot["id"].as_str().unwrap_or("?"),
        snapshot["records"],
        snapshot["bytes"],
        snapshot["first_timestamp"],
        snapshot["last_timestamp"],
        snapshot["cut_micros"],
        snapshot["expires_at_ms"]
            .as_i64()
            .map_or("never".to_owned(), |ms| ms.to_string()),
    )?;
    for topic in snapshot["topics"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "  {} (read it as topic {})",
            topic["name"].as_str().unwrap_or("?"),
            topic["view_topic"].as_str().unwrap_or("?")
        )?;
        writeln!(
            out,
            "    {:>9} {:>14} {:>14} {:>14} {:>14}",
            "PARTITION", "START", "END", "RECORDS", "BYTES"
        )?;
        for p in topic["partitions"].as_array().into_iter().flatten() {
            let [partition, start, end, records, bytes] =
                ["partition", "start", "end", "records", "bytes"].map(|k| p[k].to_string());
            writeln!(
                out,
                "    {partition:>9} {start:>14} {end:>14} {records:>14} {bytes:>14}"
            )?;
        }
    }
    Ok(())
}

/// One topic of a snapshot: its name, its view topic, and each
/// partition's `(partition, start, end)`.
type TopicRanges = (String, String, Vec<(i32, i64, i64)>);

/// Each topic of a snapshot with its view topic and partition ranges.
fn ranges(snapshot: &Value) -> anyhow::Result<Vec<TopicRanges>> {
    let mut out = Vec::new();
    for topic in snapshot["topics"].as_array().into_iter().flatten() {
        let name = topic["name"].as_str().context("a topic without a name")?;
        let view = topic["view_topic"]
            .as_str()
            .context("a topic without a view")?;
        let mut partitions = Vec::new();
        for p in topic["partitions"].as_array().into_iter().flatten() {
            let field = |key: &str| p[key].as_i64().with_context(|| format!("no {key}"));
            partitions.push((
                i32::try_from(field("partition")?)?,
                field("start")?,
                field("end")?,
            ));
        }
        out.push((name.to_owned(), view.to_owned(), partitions));
    }
    Ok(out)
}

/// Calls `each` with every whole batch of `view`'s `partition` from
/// `start` to `end`, in order.
async fn for_each_batch(
    connection: &mut herald_client::Connection,
    view: &str,
    partition: i32,
    start: i64,
    end: i64,
    mut each: impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut offset = start;
    while offset < end {
        let fetched =
            fetch_batches(connection, view, &[(partition, offset)], EXPORT_FETCH_WAIT).await?;
        let bytes = fetched
            .into_iter()
            .find(|(p, _, _)| *p == partition)
            .map(|(_, bytes, _)| bytes)
            .unwrap_or_default();
        let mut advanced = false;
        for batch in herald_records::batches(&bytes).map_while(Result::ok) {
            let header = BatchHeader::parse(batch).context("a batch shorter than its header")?;
            each(batch)?;
            offset = header.last_offset() + 1;
            advanced = true;
        }
        anyhow::ensure!(
            advanced || offset >= end,
            "{view}/{partition} returned nothing at offset {offset} before its end {end}"
        );
    }
    Ok(())
}

/// A raw backup: `manifest.json` (the snapshot as shown, and each file's
/// size and CRC-32C) and `<topic>/<partition>.batches`, every batch as the
/// broker stores it, offsets included.
async fn export_raw(
    connection: &mut herald_client::Connection,
    snapshot: &Value,
    output: &Path,
) -> anyhow::Result<u64> {
    std::fs::create_dir_all(output).with_context(|| format!("creating {}", output.display()))?;
    let mut files = Vec::new();
    let mut configs = serde_json::Map::new();
    let mut records = 0u64;
    for (topic, view, partitions) in ranges(snapshot)? {
        // The topic's own settings (retention, sizes) go with it: restored
        // under the broker's defaults, old records could be deleted at once.
        let overrides: serde_json::Map<String, Value> =
            herald_client::admin::describe_configs(connection, &topic)
                .await
                .map(|all| {
                    all.into_iter()
                        .filter(|c| c.is_override)
                        .filter_map(|c| Some((c.name, json!(c.value?))))
                        .collect()
                })
                .unwrap_or_default();
        configs.insert(topic.clone(), Value::Object(overrides));
        let dir = output.join(&topic);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (partition, start, end) in partitions {
            let path = dir.join(format!("{partition}.batches"));
            let mut file = std::io::BufWriter::new(
                std::fs::File::create(&path)
                    .with_context(|| format!("creating {}", path.display()))?,
            );
            let (mut bytes, mut crc) = (0u64, 0u32);
            for_each_batch(connection, &view, partition, start, end, |batch| {
                file.write_all(batch)?;
                bytes += batch.len() as u64;
                crc = crc32c::crc32c_append(crc, batch);
                Ok(())
            })
            .await?;
            file.flush()?;
            file.get_ref().sync_all()?;
            records += u64::try_from(end - start).unwrap_or(0);
            files.push(json!({
                "topic": topic,
                "partition": partition,
                "start": start,
                "end": end,
                "file": format!("{topic}/{partition}.batches"),
                "bytes": bytes,
                "crc32c": crc,
            }));
        }
    }
    let manifest = json!({
        "format": "herald-raw-backup",
        "format_version": 1,
        "snapshot": snapshot,
        "configs": configs,
        "files": files,
    });
    let path = output.join(MANIFEST);
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(records)
}

/// JSON lines: one object per record with its topic, partition, offset,
/// timestamp, key, headers and value (UTF-8 text, or base64 in
/// `key_base64` / `value_base64` when not text).
/// Has the broker's SQL engine write every record of the snapshot, all
/// its topics in one file with a `topic` column, as Parquet.
async fn export_parquet(
    target: &admin_http::AdminTarget,
    id: &str,
    snapshot: &Value,
    output: &Path,
) -> anyhow::Result<u64> {
    let selects: Vec<String> = ranges(snapshot)?
        .into_iter()
        .map(|(topic, _, _)| {
            format!(
                "SELECT '{}' AS topic, * FROM \"{}\"",
                topic.replace('\'', "''"),
                topic.replace('"', "\"\"")
            )
        })
        .collect();
    anyhow::ensure!(!selects.is_empty(), "snapshot {id} holds no topic");
    let body = json!({
        "sql": selects.join(" UNION ALL "),
        "snapshot": id,
        "format": "parquet",
    });
    let mut out = tokio::fs::File::create(output)
        .await
        .with_context(|| format!("creating {}", output.display()))?;
    admin_http::download(target, Method::POST, "/v1/sql", Some(body), &mut out).await?;
    out.sync_all().await?;
    Ok(snapshot["records"].as_u64().unwrap_or_default())
}

async fn export_jsonl(
    connection: &mut herald_client::Connection,
    snapshot: &Value,
    output: &Path,
) -> anyhow::Result<u64> {
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(output).with_context(|| format!("creating {}", output.display()))?,
    );
    let mut records = 0u64;
    for (topic, view, partitions) in ranges(snapshot)? {
        for (partition, start, end) in partitions {
            for_each_batch(connection, &view, partition, start, end, |batch| {
                for fetched in decode_batch(batch)? {
                    if fetched.offset < start || fetched.offset >= end {
                        continue;
                    }
                    let mut line = json!({
                        "topic": topic,
                        "partition": partition,
                        "offset": fetched.offset,
                        "timestamp": fetched.record.timestamp_ms,
                    });
                    put_bytes(&mut line, "key", fetched.record.key.as_deref());
                    let headers: Vec<Value> = fetched
                        .record
                        .headers
                        .iter()
                        .map(|h| {
                            let mut header = json!({ "key": h.key });
                            put_bytes(&mut header, "value", h.value.as_deref());
                            header
                        })
                        .collect();
                    line["headers"] = Value::Array(headers);
                    put_bytes(&mut line, "value", fetched.record.value.as_deref());
                    serde_json::to_writer(&mut out, &line)?;
                    out.write_all(b"\n")?;
                    records += 1;
                }
                Ok(())
            })
            .await?;
        }
    }
    out.flush()?;
    Ok(records)
}

/// `field` as UTF-8 text, or `field_base64` when the bytes are not text;
/// null for Kafka's null.
fn put_bytes(object: &mut Value, field: &str, bytes: Option<&[u8]>) {
    use base64::Engine as _;
    match bytes.map(std::str::from_utf8) {
        None => object[field] = Value::Null,
        Some(Ok(text)) => object[field] = json!(text),
        Some(Err(_)) => {
            object[field] = Value::Null;
            object[format!("{field}_base64")] =
                json!(base64::engine::general_purpose::STANDARD.encode(bytes.unwrap_or_default()));
        }
    }
}

/// Restores every topic of the raw backup in `dir` as a new topic (named
/// as in `renames`, or as it was), its records at their original offsets.
/// Each file's size and CRC-32C are checked against the manifest first.
pub async fn restore(
    dir: &Path,
    renames: &[(String, String)],
    admin: &admin_http::AdminTarget,
) -> anyhow::Result<()> {
    let manifest_path = dir.join(MANIFEST);
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(&manifest_path)
            .with_context(|| format!("reading {}", manifest_path.display()))?,
    )
    .with_context(|| format!("parsing {}", manifest_path.display()))?;
    anyhow::ensure!(
        manifest["format"] == "herald-raw-backup" && manifest["format_version"] == 1,
        "{} is not a herald raw backup (format_version 1)",
        manifest_path.display()
    );
    let mut topics: Vec<(String, Vec<Value>)> = Vec::new();
    for file in manifest["files"].as_array().into_iter().flatten() {
        let topic = file["topic"].as_str().context("a file without a topic")?;
        match topics.iter_mut().find(|(name, _)| name == topic) {
            Some((_, files)) => files.push(file.clone()),
            None => topics.push((topic.to_owned(), vec![file.clone()])),
        }
    }
    for (topic, mut files) in topics {
        files.sort_by_key(|f| f["partition"].as_i64());
        let target = renames
            .iter()
            .find(|(from, _)| *from == topic)
            .map_or(topic.as_str(), |(_, to)| to.as_str())
            .to_owned();
        let mut plan = Vec::with_capacity(files.len());
        let mut paths = Vec::with_capacity(files.len());
        for (expected, file) in files.iter().enumerate() {
            anyhow::ensure!(
                file["partition"].as_u64() == Some(expected as u64),
                "{topic}: the backup lacks partition {expected}"
            );
            let path = dir.join(file["file"].as_str().context("a file without a path")?);
            let (size, crc) = size_and_crc(&path)?;
            anyhow::ensure!(
                file["bytes"].as_u64() == Some(size)
                    && file["crc32c"].as_u64() == Some(u64::from(crc)),
                "{} does not match the manifest (size or CRC-32C): the backup is damaged",
                path.display()
            );
            plan.push(json!({
                "start": file["start"],
                "end": file["end"],
                "bytes": size,
            }));
            paths.push(path);
        }
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        let configs = manifest["configs"][&topic].clone();
        let configs = if configs.is_object() {
            configs
        } else {
            json!({})
        };
        let mut first = serde_json::to_vec(&json!({ "partitions": plan, "configs": configs }))?;
        first.push(b'\n');
        let reader = tokio::spawn(async move {
            if sender.send(Ok(bytes::Bytes::from(first))).await.is_err() {
                return;
            }
            for path in paths {
                let mut file = match tokio::fs::File::open(&path).await {
                    Ok(file) => file,
                    Err(e) => {
                        let _ = sender.send(Err(e)).await;
                        return;
                    }
                };
                loop {
                    let mut chunk = vec![0u8; 1 << 20];
                    match tokio::io::AsyncReadExt::read(&mut file, &mut chunk).await {
                        Ok(0) => break,
                        Ok(n) => {
                            chunk.truncate(n);
                            if sender.send(Ok(bytes::Bytes::from(chunk))).await.is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = sender.send(Err(e)).await;
                            return;
                        }
                    }
                }
            }
        });
        let answer = admin_http::call_streaming(
            admin,
            Method::POST,
            &format!("/v1/topics/{target}/restore"),
            receiver,
        )
        .await
        .with_context(|| format!("restoring {topic} as {target}"));
        reader.abort();
        let answer = answer?;
        println!(
            "restored {topic} as {target}: {} partitions, {} records at their original offsets",
            answer["partitions"], answer["records"]
        );
    }
    Ok(())
}

/// A file's size and CRC-32C, read in pieces.
fn size_and_crc(path: &Path) -> anyhow::Result<(u64, u32)> {
    use std::io::Read as _;
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buffer = vec![0u8; 1 << 20];
    let (mut size, mut crc) = (0u64, 0u32);
    loop {
        let n = file
            .read(&mut buffer)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok((size, crc));
        }
        size += n as u64;
        crc = crc32c::crc32c_append(crc, &buffer[..n]);
    }
}
