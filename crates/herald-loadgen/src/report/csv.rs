//! The CSV: every row of every broker, one line each.

use std::fmt::Write;

use crate::row::Row;

const HEADER: &str = "kind,broker,batch,clients,acks,records,bytes,secs,msgs_per_s,mb_per_s,\
p50_us,p99_us,p999_us,e2e_p50_us,e2e_p99_us,e2e_p999_us,offered_msgs_per_s,\
broker_cpu_ns_per_msg,broker_cores,note,runs_msgs_per_s";

/// The CSV text of `rows`.
pub fn render(rows: &[Row]) -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    for r in rows {
        let kind = serde_json::to_value(r.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{kind},{},{},{},{},{},{},{:.3},{:.0},{:.2},{},{},{},{},{},{},{},{},{},{},{}",
            r.broker,
            r.batch,
            r.clients,
            r.acks.as_deref().unwrap_or(""),
            r.records,
            r.bytes,
            r.secs,
            r.msgs_per_s,
            r.mb_per_s,
            opt(r.p50_us),
            opt(r.p99_us),
            opt(r.p999_us),
            opt(r.e2e_p50_us),
            opt(r.e2e_p99_us),
            opt(r.e2e_p999_us),
            opt(r.offered_msgs_per_s),
            opt(r.broker_cpu_ns_per_msg),
            r.broker_cores.map_or(String::new(), |c| format!("{c:.3}")),
            quoted(r.note.as_deref().unwrap_or("")),
            r.runs
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(";"),
        );
    }
    out
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v:.1}"))
}

fn quoted(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}
