//! One result row: what every run reports, written as one JSON line so a
//! script can append rows from several brokers and a report can read them.

use serde::{Deserialize, Serialize};

/// What was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// P publishers at full speed.
    Produce,
    /// C subscribers each reading the whole topic.
    Consume,
    /// One rate-limited publisher and one subscriber in the same process.
    Latency,
    /// A plain TCP copy over loopback: the network bound.
    Loopback,
    /// Kafka's own perf tools, run by the script.
    Crosscheck,
    /// The produce kernel floor, no broker: loopback TCP receive and write
    /// to a fresh tmpfs file (see [`crate::floor::store_floor`]).
    StoreFloor,
    /// The consume kernel floor, no broker: sendfile from a tmpfs file
    /// over loopback TCP (see [`crate::floor::send_floor`]).
    SendFloor,
}

/// One measurement. Fields that do not apply to a kind stay `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What was measured.
    pub kind: Kind,
    /// "herald", "kafka", or "loopback" and "floor" for the bounds.
    pub broker: String,
    /// Records per batch.
    pub batch: u32,
    /// Publishers or subscribers.
    pub clients: u32,
    /// "1" or "all" for produce and latency runs.
    pub acks: Option<String>,
    /// Records acknowledged or read.
    pub records: u64,
    /// Batch bytes acknowledged or read.
    pub bytes: u64,
    /// Measured wall time in seconds.
    pub secs: f64,
    /// Records per second.
    pub msgs_per_s: f64,
    /// Batch bytes per second, in MB (10^6 bytes).
    pub mb_per_s: f64,
    /// Produce request latency percentiles, in microseconds.
    pub p50_us: Option<f64>,
    /// 99th percentile of produce request latency, in microseconds.
    pub p99_us: Option<f64>,
    /// 99.9th percentile of produce request latency, in microseconds.
    pub p999_us: Option<f64>,
    /// End-to-end (send to fetch) latency percentiles, in microseconds.
    pub e2e_p50_us: Option<f64>,
    /// 99th percentile of end-to-end latency, in microseconds.
    pub e2e_p99_us: Option<f64>,
    /// 99.9th percentile of end-to-end latency, in microseconds.
    pub e2e_p999_us: Option<f64>,
    /// Records per second offered by a rate-limited run.
    pub offered_msgs_per_s: Option<f64>,
    /// Broker CPU (user + system) per record, in nanoseconds.
    pub broker_cpu_ns_per_msg: Option<f64>,
    /// Broker CPU used, in cores (CPU seconds per wall second).
    pub broker_cores: Option<f64>,
    /// Free text: a tool's own figures or why a run failed.
    pub note: Option<String>,
    /// Records per second of every run of this point, when the row is the
    /// median of several (empty for a single run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<f64>,
}

impl Row {
    /// An empty row of `kind` for `broker`.
    pub fn new(kind: Kind, broker: &str, batch: u32, clients: u32) -> Self {
        Self {
            kind,
            broker: broker.to_owned(),
            batch,
            clients,
            acks: None,
            records: 0,
            bytes: 0,
            secs: 0.0,
            msgs_per_s: 0.0,
            mb_per_s: 0.0,
            p50_us: None,
            p99_us: None,
            p999_us: None,
            e2e_p50_us: None,
            e2e_p99_us: None,
            e2e_p999_us: None,
            offered_msgs_per_s: None,
            broker_cpu_ns_per_msg: None,
            broker_cores: None,
            note: None,
            runs: Vec::new(),
        }
    }

    /// The run with the median records per second of `rows` (the upper
    /// median for an even count), carrying every run's rate in `runs`.
    /// `None` for no rows.
    pub fn median_of(mut rows: Vec<Row>) -> Option<Row> {
        let rates: Vec<f64> = rows.iter().map(|r| r.msgs_per_s).collect();
        rows.sort_by(|a, b| a.msgs_per_s.total_cmp(&b.msgs_per_s));
        let middle = rows.len() / 2;
        let mut median = rows.into_iter().nth(middle)?;
        if rates.len() > 1 {
            median.runs = rates;
        }
        Some(median)
    }

    /// Sets the counts and the rates derived from them.
    pub fn with_totals(mut self, records: u64, bytes: u64, secs: f64) -> Self {
        self.records = records;
        self.bytes = bytes;
        self.secs = secs;
        if secs > 0.0 {
            self.msgs_per_s = records as f64 / secs;
            self.mb_per_s = bytes as f64 / secs / 1e6;
        }
        self
    }

    /// A one-line summary for the progress output.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{} {:?} batch {} clients {}{}: {:.0} msgs/s, {:.1} MB/s",
            self.broker,
            self.kind,
            self.batch,
            self.clients,
            self.acks
                .as_ref()
                .map_or(String::new(), |a| format!(" acks={a}")),
            self.msgs_per_s,
            self.mb_per_s
        );
        if let (Some(p50), Some(p99)) = (self.p50_us, self.p99_us) {
            line += &format!(", produce p50 {p50:.0} us p99 {p99:.0} us");
        }
        if let (Some(p50), Some(p99)) = (self.e2e_p50_us, self.e2e_p99_us) {
            line += &format!(", e2e p50 {p50:.0} us p99 {p99:.0} us");
        }
        if let Some(cpu) = self.broker_cpu_ns_per_msg {
            line += &format!(", broker {cpu:.0} ns/msg");
        }
        if !self.runs.is_empty() {
            let runs: Vec<String> = self.runs.iter().map(|r| format!("{r:.0}")).collect();
            line += &format!(" (median of {} runs: {})", runs.len(), runs.join(" / "));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rate: f64) -> Row {
        let mut row = Row::new(Kind::Produce, "herald", 64, 1);
        row.msgs_per_s = rate;
        row
    }

    #[test]
    fn the_median_run_is_kept_with_every_rate() {
        let median = Row::median_of(vec![at(30.0), at(10.0), at(20.0)]).expect("rows");
        assert_eq!(median.msgs_per_s, 20.0);
        assert_eq!(median.runs, vec![30.0, 10.0, 20.0]);
        let single = Row::median_of(vec![at(5.0)]).expect("row");
        assert!(single.runs.is_empty());
        assert!(Row::median_of(Vec::new()).is_none());
    }
}
