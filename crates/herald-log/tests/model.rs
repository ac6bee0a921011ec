//! Property test: any sequence of appends, reads, rolls, retention,
//! reopens (clean or crash-like), tail cuts and resets gives the answers of
//! a simple model, a Vec of batches.

mod common;

use std::time::{Duration, SystemTime};

use common::{decode, small_config, tagged_batch};
use herald_log::{Log, LogConfig};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append {
        records: u32,
    },
    Read {
        at: u16,
        max_bytes: u16,
    },
    RollByAge,
    Retain {
        bytes: u16,
    },
    Reopen {
        clean: bool,
    },
    /// Cut the tail at the start of a stored batch (chosen by `pick`).
    TruncateAfter {
        pick: u16,
    },
    /// Empty the log and restart it `ahead` offsets past its end.
    Reset {
        ahead: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1u32..40).prop_map(|records| Op::Append { records }),
        3 => (any::<u16>(), 1u16..6000).prop_map(|(at, max_bytes)| Op::Read { at, max_bytes }),
        1 => Just(Op::RollByAge),
        1 => (8u16..60).prop_map(|kib| Op::Retain { bytes: kib }),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
        1 => any::<u16>().prop_map(|pick| Op::TruncateAfter { pick }),
        1 => (0u16..500).prop_map(|ahead| Op::Reset { ahead }),
    ]
}

fn config(retention_kib: Option<u16>) -> LogConfig {
    LogConfig {
        segment_age: Some(Duration::from_secs(3600)),
        retention_bytes: retention_kib.map(|k| u64::from(k) * 1024),
        ..small_config()
    }
}

/// Drops from the model what retention removed, checking that it removed
/// whole batches from the front and never went below the size limit.
fn follow_retention(
    log: &Log,
    model: &mut Vec<(u64, u32, u64)>,
    next_offset: u64,
    retention_kib: Option<u16>,
) -> Result<(), TestCaseError> {
    let start = log.log_start_offset();
    prop_assert!(start == next_offset || model.iter().any(|&(o, _, _)| o == start));
    let removed = model.iter().any(|&(o, _, _)| o < start);
    model.retain(|&(o, _, _)| o >= start);
    if let (true, Some(kib)) = (removed, retention_kib) {
        prop_assert!(
            log.size_bytes() >= u64::from(kib) * 1024,
            "retention went below its limit"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_a_vec_of_batches(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let mut retention = None;
        let mut log = Log::open(dir.path(), config(retention)).unwrap();
        // The model: (base offset, records, tag) of each batch still stored.
        let mut model: Vec<(u64, u32, u64)> = Vec::new();
        let mut next_offset = 0u64;
        for (tag, op) in ops.into_iter().enumerate() {
            match op {
                Op::Append { records } => {
                    let appended = log.append(&tagged_batch(records, tag as u64, 0)).unwrap();
                    prop_assert_eq!(appended.base_offset, next_offset);
                    model.push((next_offset, records, tag as u64));
                    next_offset += u64::from(records);
                }
                Op::Read { at, max_bytes } => {
                    let start = log.log_start_offset();
                    let offset = start + u64::from(at) % (next_offset - start + 1);
                    let slice = log.read(offset, usize::from(max_bytes)).unwrap();
                    let got = decode(&slice.bytes);
                    let first = model.iter().position(|&(o, n, _)| o + u64::from(n) > offset);
                    match first {
                        None => prop_assert!(got.is_empty()),
                        Some(i) => {
                            prop_assert!(!got.is_empty());
                            prop_assert_eq!(&got[..], &model[i..i + got.len()]);
                            prop_assert!(got.len() == 1 || slice.bytes.len() <= usize::from(max_bytes));
                            let last = got.last().unwrap();
                            prop_assert_eq!(slice.next_offset, last.0 + u64::from(last.1));
                        }
                    }
                }
                Op::RollByAge => {
                    // Maintenance also applies any retention configured earlier.
                    log.maintain(SystemTime::now() + Duration::from_secs(7200)).unwrap();
                    follow_retention(&log, &mut model, next_offset, retention)?;
                }
                Op::Retain { bytes } => {
                    retention = Some(bytes);
                    log.update_config(config(retention)).unwrap();
                    log.maintain(SystemTime::now()).unwrap();
                    follow_retention(&log, &mut model, next_offset, retention)?;
                }
                Op::Reopen { clean } => {
                    if clean {
                        log.close().unwrap();
                    }
                    drop(log);
                    log = Log::open(dir.path(), config(retention)).unwrap();
                }
                Op::TruncateAfter { pick } => {
                    let start = log.log_start_offset();
                    // Batch starts at or after the log start, and the end.
                    let cuts: Vec<u64> = model
                        .iter()
                        .map(|&(o, _, _)| o)
                        .filter(|&o| o >= start)
                        .chain([next_offset])
                        .collect();
                    let cut = cuts[usize::from(pick) % cuts.len()];
                    log.truncate_after(cut).unwrap();
                    model.retain(|&(o, _, _)| o < cut);
                    next_offset = cut;
                    prop_assert_eq!(log.log_start_offset(), start);
                }
                Op::Reset { ahead } => {
                    let start = next_offset + u64::from(ahead);
                    log.reset(start).unwrap();
                    model.clear();
                    next_offset = start;
                    prop_assert_eq!(log.log_start_offset(), start);
                }
            }
            prop_assert_eq!(log.high_watermark(), next_offset);
        }
        prop_assert_eq!(common::read_all(&log, log.log_start_offset(), 1 << 16), model);
    }
}
