//! The targets, checked against the rows: reported, never asserted.

use crate::report::{find, floor_ns_per_msg, floor_of, ratio};
use crate::row::{Kind, Row};

/// One target's verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What the target asks.
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Met, missed, or `None` when a figure is missing.
    pub met: Option<bool>,
}

/// Every verdict for herald against kafka.
pub fn verdicts(rows: &[Row]) -> Vec<Verdict> {
    let mut out = Vec::new();
    cpu(rows, &mut out);
    throughput(rows, &mut out);
    bandwidth(rows, &mut out);
    latency(rows, &mut out);
    out
}

fn herald_rows(rows: &[Row], kind: Kind) -> impl Iterator<Item = &Row> {
    rows.iter()
        .filter(move |r| r.broker == "herald" && r.kind == kind)
}

fn cpu(rows: &[Row], out: &mut Vec<Verdict>) {
    for kind in [Kind::Produce, Kind::Consume] {
        let floor_row = floor_of(rows, kind);
        for h in
            herald_rows(rows, kind).filter(|r| r.clients == 1 && r.acks.as_deref() != Some("all"))
        {
            let kafka = find(rows, "kafka", h).and_then(|k| k.broker_cpu_ns_per_msg);
            let r = ratio(h.broker_cpu_ns_per_msg, kafka);
            let mut measured = r.map_or("n/a".to_owned(), |r| format!("{r:.2}x of Kafka's"));
            // What the kernel alone costs against the same Kafka figure:
            // shows whether the target is reachable at all.
            let floor = floor_row.and_then(|f| floor_ns_per_msg(f, h));
            if let Some(f) = ratio(floor, kafka) {
                measured += &format!(" (kernel floor alone: {f:.2}x)");
            }
            out.push(Verdict {
                target: format!(
                    "{kind:?} batch {}: broker CPU/msg <= 1/3 of Kafka's",
                    h.batch
                ),
                measured,
                met: r.map(|r| r <= 1.0 / 3.0),
            });
        }
    }
}

fn throughput(rows: &[Row], out: &mut Vec<Verdict>) {
    for h in herald_rows(rows, Kind::Produce) {
        let need = if h.batch <= 64 { 3.0 } else { 1.5 };
        let r = ratio(
            Some(h.msgs_per_s),
            find(rows, "kafka", h).map(|k| k.msgs_per_s),
        );
        out.push(Verdict {
            target: format!(
                "produce batch {} x{} acks={}: >= {need}x Kafka",
                h.batch,
                h.clients,
                h.acks.as_deref().unwrap_or("?")
            ),
            measured: r.map_or("n/a".to_owned(), |r| format!("{r:.2}x")),
            met: r.map(|r| r >= need),
        });
    }
}

fn bandwidth(rows: &[Row], out: &mut Vec<Verdict>) {
    let loopback = rows
        .iter()
        .find(|r| r.kind == Kind::Loopback)
        .map(|r| r.mb_per_s);
    for (kind, need) in [(Kind::Produce, 0.5), (Kind::Consume, 0.7)] {
        let best = herald_rows(rows, kind)
            .filter(|r| r.batch == 16384)
            .map(|r| r.mb_per_s)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        let r = ratio(best, loopback);
        out.push(Verdict {
            target: format!(
                "{kind:?} batch 16384: >= {:.0}% of loopback TCP",
                need * 100.0
            ),
            measured: r.map_or("n/a".to_owned(), |r| format!("{:.0}%", r * 100.0)),
            met: r.map(|r| r >= need),
        });
    }
}

fn latency(rows: &[Row], out: &mut Vec<Verdict>) {
    for h in herald_rows(rows, Kind::Latency) {
        let r = ratio(h.p99_us, find(rows, "kafka", h).and_then(|k| k.p99_us));
        out.push(Verdict {
            target: format!(
                "p99 produce latency, batch {} at {:.0} msgs/s: <= 1/5 of Kafka's",
                h.batch,
                h.offered_msgs_per_s.unwrap_or(0.0)
            ),
            measured: r.map_or("n/a".to_owned(), |r| format!("{r:.2}x of Kafka's")),
            met: r.map(|r| r <= 0.2),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_rows::{cpu_row, cpu_rows};

    #[test]
    fn cpu_verdicts_show_the_matching_floor_and_keep_the_one_third_rule() {
        let rows = cpu_rows([70.0, 140.0, 4.5, 15.0, 70.0, 3.0]);
        let cpu: Vec<Verdict> = verdicts(&rows)
            .into_iter()
            .filter(|v| v.target.contains("CPU"))
            .collect();
        assert_eq!(cpu.len(), 2);
        assert_eq!(
            cpu[0].measured,
            "0.50x of Kafka's (kernel floor alone: 0.50x)"
        );
        assert_eq!(cpu[0].met, Some(false));
        assert_eq!(
            cpu[1].measured,
            "0.30x of Kafka's (kernel floor alone: 0.20x)"
        );
        assert_eq!(cpu[1].met, Some(true));
    }

    #[test]
    fn the_floor_is_scaled_by_the_bytes_each_record_carries() {
        let with_bytes = |kind, broker: &str, batch, cpu_ns, bytes_per_record: u64| {
            let mut row = cpu_row(kind, broker, cpu_ns);
            row.batch = batch;
            row.records = 1_000;
            row.bytes = 1_000 * bytes_per_record;
            row
        };
        let rows = vec![
            with_bytes(Kind::Consume, "herald", 1, 30.0, 134),
            with_bytes(Kind::Consume, "kafka", 1, 40.0, 134),
            with_bytes(Kind::SendFloor, "floor", 16384, 10.0, 67),
        ];
        let cpu: Vec<Verdict> = verdicts(&rows)
            .into_iter()
            .filter(|v| v.target.contains("CPU"))
            .collect();
        // 10 ns per 67-byte record is 20 ns per 134-byte one: half of 40.
        assert_eq!(
            cpu[0].measured,
            "0.75x of Kafka's (kernel floor alone: 0.50x)"
        );
    }
}
