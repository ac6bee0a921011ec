//! The report: rows of both brokers in, `wire.md`, `wire.csv` and
//! `wire.png` out.

pub mod chart;
pub mod csv;
pub mod markdown;
pub mod targets;

use std::path::Path;

use crate::row::{Kind, Row};
use crate::LoadError;

/// Reads a JSON-lines results file.
pub fn read_rows(path: &Path) -> Result<Vec<Row>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::io("read results", e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| LoadError::Results {
                line: i + 1,
                detail: e.to_string(),
            })
        })
        .collect()
}

/// The row of `broker` that matches `like` in kind, batch, clients and acks.
pub fn find<'a>(rows: &'a [Row], broker: &str, like: &Row) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.broker == broker
            && r.kind == like.kind
            && r.batch == like.batch
            && r.clients == like.clients
            && r.acks == like.acks
    })
}

/// The kernel floor row for a load of `kind`: the store floor for produce,
/// the send floor for consume, `None` for other kinds or when not measured.
pub fn floor_of(rows: &[Row], kind: Kind) -> Option<&Row> {
    let floor = match kind {
        Kind::Produce => Kind::StoreFloor,
        Kind::Consume => Kind::SendFloor,
        _ => return None,
    };
    rows.iter().find(|r| r.kind == floor)
}

/// The kernel floor's CPU per message for the messages of `like`: the floor
/// is measured per record of large batches, and the kernel's work goes with
/// the bytes, so it is scaled by `like`'s bytes per record (a 1-record batch
/// carries nearly twice the bytes per record of a 16384-record one). Unscaled
/// when either row lacks byte counts.
pub fn floor_ns_per_msg(floor: &Row, like: &Row) -> Option<f64> {
    let ns = floor.broker_cpu_ns_per_msg?;
    let bytes_per_record =
        |r: &Row| (r.records > 0 && r.bytes > 0).then(|| r.bytes as f64 / r.records as f64);
    Some(match (bytes_per_record(floor), bytes_per_record(like)) {
        (Some(at_floor), Some(at_like)) => ns * at_like / at_floor,
        _ => ns,
    })
}

/// `a / b`, if both are measured.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a > 0.0 => Some(a / b),
        _ => None,
    }
}

/// Rows for the report's unit tests.
#[cfg(test)]
pub(crate) mod test_rows {
    use crate::row::{Kind, Row};

    /// A batch-16384, one-client row of `kind` for `broker` whose broker
    /// used `cpu_ns` per message.
    pub(crate) fn cpu_row(kind: Kind, broker: &str, cpu_ns: f64) -> Row {
        let mut row = Row::new(kind, broker, 16384, 1);
        if kind == Kind::Produce {
            row.acks = Some("1".to_owned());
        }
        row.msgs_per_s = 1e6;
        row.mb_per_s = 1234.0;
        row.broker_cpu_ns_per_msg = Some(cpu_ns);
        row
    }

    /// CPU rows of both brokers and both floors, one per figure, in ns per
    /// message: herald and Kafka producing, herald and Kafka consuming, the
    /// store floor and the send floor.
    pub(crate) fn cpu_rows(ns: [f64; 6]) -> Vec<Row> {
        let [herald_produce, kafka_produce, herald_consume, kafka_consume, store, send] = ns;
        vec![
            cpu_row(Kind::Produce, "herald", herald_produce),
            cpu_row(Kind::Produce, "kafka", kafka_produce),
            cpu_row(Kind::Consume, "herald", herald_consume),
            cpu_row(Kind::Consume, "kafka", kafka_consume),
            cpu_row(Kind::StoreFloor, "floor", store),
            cpu_row(Kind::SendFloor, "floor", send),
        ]
    }
}
