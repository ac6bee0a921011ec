//! `wire.md`: the machine, then one table per figure with herald, Kafka
//! and their ratio, the cross-check, and the targets.

use std::fmt::Write;

use crate::report::targets::verdicts;
use crate::report::{find, floor_of, ratio};
use crate::row::{Kind, Row};

/// The Markdown report. `machine` describes where it ran; `command` is how
/// to rerun it.
pub fn render(rows: &[Row], machine: &str, command: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Wire benchmark: herald against Apache Kafka\n");
    let _ = writeln!(
        md,
        "The seed experiment over the Kafka protocol: one topic, one partition, 64-byte \
values, data on tmpfs, both brokers driven by the same load generator \
(`crates/herald-loadgen`) on the same machine, one after the other.\n"
    );
    let _ = writeln!(md, "- Machine: {machine}");
    let _ = writeln!(md, "- Rerun: `{}`", command.trim());
    if let Some(l) = rows.iter().find(|r| r.kind == Kind::Loopback) {
        let _ = writeln!(
            md,
            "- Loopback TCP, one stream, 1 MiB writes: {:.0} MB/s (median of the runs)",
            l.mb_per_s
        );
    }
    md += &floor_bullets(rows);
    let _ = writeln!(
        md,
        "- MB/s counts record-batch bytes (about 73 B per 64-byte record plus 61 B per batch), 10^6 bytes. \
Broker CPU is the broker process's user + system time over the run (from /proc/PID/stat) divided by records."
    );
    let repeats = rows.iter().map(|r| r.runs.len()).max().unwrap_or(0);
    if repeats > 1 {
        let _ = writeln!(
            md,
            "- Each produce and consume point ran {repeats} times; its row is the run with the median throughput (every run's rate is in wire.csv, column runs_msgs_per_s)."
        );
    }
    let _ = writeln!(md);
    md += &floor_paragraph(rows);
    md += &produce_tables(rows);
    md += &consume_table(rows);
    md += &latency_table(rows);
    md += &crosscheck_table(rows);
    md += &targets_table(rows);
    let _ = writeln!(md, "![throughput](wire.png)\n");
    md
}

/// One bullet per kernel floor measured.
fn floor_bullets(rows: &[Row]) -> String {
    let mut md = String::new();
    for (kind, what) in [
        (Kind::Produce, "receive over loopback and write to tmpfs"),
        (Kind::Consume, "sendfile from tmpfs over loopback"),
    ] {
        if let Some(f) = floor_of(rows, kind) {
            let _ = writeln!(
                md,
                "- Kernel floor, no broker ({what}): {} ns/msg of CPU at {:.0} MB/s",
                fmt_ns(f.broker_cpu_ns_per_msg),
                f.mb_per_s
            );
        }
    }
    md
}

/// What the floors mean, when there are any.
fn floor_paragraph(rows: &[Row]) -> String {
    let Some(batch) = [Kind::Produce, Kind::Consume]
        .into_iter()
        .find_map(|k| floor_of(rows, k))
        .map(|f| f.batch)
    else {
        return String::new();
    };
    format!(
        "The kernel floors run no broker code: one thread receives 1 MiB chunks from a loopback \
TCP socket and appends them to a fresh tmpfs file (produce), or sends a tmpfs file to a loopback \
socket with sendfile(2) (consume), and only that thread's CPU time is counted, per record of a \
{batch}-record batch. The kernel's work goes with the bytes, so for each batch size the targets \
below scale the floor by the bytes each record carries there (a 1-record batch carries nearly \
twice the bytes per record of a large one) and show it as a share of Kafka's CPU: a share above \
1/3 means the CPU target cannot be met whatever the broker does.\n\n"
    )
}

fn fmt_ns(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.1}"))
}

fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.0}"))
}

fn fmt_ratio(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.2}x"))
}

fn produce_tables(rows: &[Row]) -> String {
    let mut md = String::new();
    for acks in ["1", "all"] {
        let herald: Vec<&Row> = rows
            .iter()
            .filter(|r| {
                r.broker == "herald" && r.kind == Kind::Produce && r.acks.as_deref() == Some(acks)
            })
            .collect();
        if herald.is_empty() {
            continue;
        }
        let _ = writeln!(md, "## Produce, acks={acks}\n");
        let _ = writeln!(
            md,
            "| batch | publishers | herald msgs/s | Kafka msgs/s | ratio | herald MB/s | Kafka MB/s | herald p50/p99/p999 µs | Kafka p50/p99/p999 µs | herald CPU ns/msg | Kafka CPU ns/msg | CPU ratio |"
        );
        let _ = writeln!(
            md,
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for h in herald {
            let k = find(rows, "kafka", h);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} |",
                h.batch,
                h.clients,
                fmt_rate(h.msgs_per_s),
                k.map_or("–".to_owned(), |k| fmt_rate(k.msgs_per_s)),
                fmt_ratio(ratio(Some(h.msgs_per_s), k.map(|k| k.msgs_per_s))),
                h.mb_per_s,
                k.map_or("–".to_owned(), |k| format!("{:.1}", k.mb_per_s)),
                percentiles(h.p50_us, h.p99_us, h.p999_us),
                k.map_or("–".to_owned(), |k| percentiles(
                    k.p50_us, k.p99_us, k.p999_us
                )),
                fmt_opt(h.broker_cpu_ns_per_msg),
                fmt_opt(k.and_then(|k| k.broker_cpu_ns_per_msg)),
                fmt_ratio(ratio(
                    h.broker_cpu_ns_per_msg,
                    k.and_then(|k| k.broker_cpu_ns_per_msg)
                )),
            );
        }
        md.push('\n');
    }
    md
}

fn percentiles(p50: Option<f64>, p99: Option<f64>, p999: Option<f64>) -> String {
    format!("{}/{}/{}", fmt_opt(p50), fmt_opt(p99), fmt_opt(p999))
}

fn consume_table(rows: &[Row]) -> String {
    let mut md = String::from(
        "## Consume: each subscriber reads the whole topic from offset 0\n\n\
| batch | subscribers | herald msgs/s | Kafka msgs/s | ratio | herald MB/s | Kafka MB/s | herald CPU ns/msg | Kafka CPU ns/msg | CPU ratio |\n\
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for h in rows
        .iter()
        .filter(|r| r.broker == "herald" && r.kind == Kind::Consume)
    {
        let k = find(rows, "kafka", h);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} |",
            h.batch,
            h.clients,
            fmt_rate(h.msgs_per_s),
            k.map_or("–".to_owned(), |k| fmt_rate(k.msgs_per_s)),
            fmt_ratio(ratio(Some(h.msgs_per_s), k.map(|k| k.msgs_per_s))),
            h.mb_per_s,
            k.map_or("–".to_owned(), |k| format!("{:.1}", k.mb_per_s)),
            fmt_opt(h.broker_cpu_ns_per_msg),
            fmt_opt(k.and_then(|k| k.broker_cpu_ns_per_msg)),
            fmt_ratio(ratio(
                h.broker_cpu_ns_per_msg,
                k.and_then(|k| k.broker_cpu_ns_per_msg)
            )),
        );
    }
    md.push('\n');
    md
}

fn latency_table(rows: &[Row]) -> String {
    let mut md = String::from(
        "## Latency at the same offered load (half of Kafka's full-speed rate, 1 publisher, acks=1)\n\n\
Produce latency is per request (send to answer); end-to-end is the send stamp in the first \
record's value to the moment a subscriber in the same process has the fetch answer.\n\n\
| batch | offered msgs/s | herald produce p50/p99/p999 µs | Kafka produce p50/p99/p999 µs | p99 ratio | herald e2e p50/p99/p999 µs | Kafka e2e p50/p99/p999 µs | e2e p99 ratio |\n\
|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for h in rows
        .iter()
        .filter(|r| r.broker == "herald" && r.kind == Kind::Latency)
    {
        let k = find(rows, "kafka", h);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            h.batch,
            fmt_rate(h.offered_msgs_per_s.unwrap_or(0.0)),
            percentiles(h.p50_us, h.p99_us, h.p999_us),
            k.map_or("–".to_owned(), |k| percentiles(
                k.p50_us, k.p99_us, k.p999_us
            )),
            fmt_ratio(ratio(h.p99_us, k.and_then(|k| k.p99_us))),
            percentiles(h.e2e_p50_us, h.e2e_p99_us, h.e2e_p999_us),
            k.map_or("–".to_owned(), |k| percentiles(
                k.e2e_p50_us,
                k.e2e_p99_us,
                k.e2e_p999_us
            )),
            fmt_ratio(ratio(h.e2e_p99_us, k.and_then(|k| k.e2e_p99_us))),
        );
    }
    md.push('\n');
    md
}

fn crosscheck_table(rows: &[Row]) -> String {
    let checks: Vec<&Row> = rows.iter().filter(|r| r.kind == Kind::Crosscheck).collect();
    if checks.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "## Cross-check: Kafka's own perf tools against both brokers\n\n\
ProducerPerformance (batch.size for 1024 records, linger.ms=5, acks=1, one JVM) and \
ConsumerPerformance (one JVM, its own group). The Java clients use most of the 2 cores, \
so these figures measure the client as much as the broker.\n\n\
| broker | tool | records/s | MB/s (values) | load generator, same point, msgs/s | note |\n\
|---|---|---:|---:|---:|---|\n",
    );
    for c in checks {
        let kind = if c
            .note
            .as_deref()
            .unwrap_or("")
            .starts_with("ProducerPerformance")
        {
            Kind::Produce
        } else {
            Kind::Consume
        };
        let ours = rows.iter().find(|r| {
            r.broker == c.broker
                && r.kind == kind
                && r.batch == c.batch
                && r.clients == 1
                && r.acks.as_deref() != Some("all")
        });
        let note = c.note.as_deref().unwrap_or("");
        let tool = note.split(':').next().unwrap_or("");
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.1} | {} | {} |",
            c.broker,
            tool,
            fmt_rate(c.msgs_per_s),
            c.mb_per_s,
            ours.map_or("–".to_owned(), |o| fmt_rate(o.msgs_per_s)),
            note.split_once(':').map_or("", |(_, n)| n.trim()),
        );
    }
    md.push('\n');
    md
}

fn targets_table(rows: &[Row]) -> String {
    let mut md =
        String::from("## Targets (issue 5)\n\n| target | measured | verdict |\n|---|---|---|\n");
    for v in verdicts(rows) {
        let verdict = match v.met {
            Some(true) => "met",
            Some(false) => "missed",
            None => "not measured",
        };
        let _ = writeln!(md, "| {} | {} | {verdict} |", v.target, v.measured);
    }
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_rows::cpu_rows;

    fn rows_with_floors() -> Vec<Row> {
        cpu_rows([40.0, 140.0, 10.0, 15.0, 57.4, 9.0])
    }

    #[test]
    fn renders_the_floor_bullets_and_their_share_of_kafka() {
        let md = render(&rows_with_floors(), "test machine", "run");
        assert!(md.contains(
            "- Kernel floor, no broker (receive over loopback and write to tmpfs): \
57.4 ns/msg of CPU at 1234 MB/s"
        ));
        assert!(md
            .contains("- Kernel floor, no broker (sendfile from tmpfs over loopback): 9.0 ns/msg"));
        assert!(md.contains("The kernel floors run no broker code"));
        assert!(md.contains("0.29x of Kafka's (kernel floor alone: 0.41x)"));
        assert!(md.contains("0.67x of Kafka's (kernel floor alone: 0.60x)"));
    }

    #[test]
    fn says_nothing_of_floors_without_floor_rows() {
        let rows: Vec<Row> = rows_with_floors()
            .into_iter()
            .filter(|r| r.broker != "floor")
            .collect();
        let md = render(&rows, "test machine", "run");
        assert!(!md.contains("Kernel floor"));
        assert!(!md.contains("kernel floor"));
        assert!(md.contains("0.29x of Kafka's |"));
    }
}
