//! The benchmark harness in a tiny configuration: every point is measured,
//! the CSV has every row, and the volumes add up. Timings are never checked.

use std::collections::BTreeSet;
use std::time::Duration;

use herald_bench::report::{self, CSV_HEADER};
use herald_bench::runner;
use herald_bench::Settings;

fn tiny(dir: &std::path::Path) -> Settings {
    Settings {
        threads: vec![1, 2, 4, 8],
        batches: vec![1, 64, 1024, 16384],
        reps: 1,
        dir: dir.to_owned(),
        write_time: Duration::from_millis(5),
        write_bytes_max: 16 << 20,
        read_bytes: 2 << 20,
        read_time_max: Duration::from_secs(30),
        segment_bytes: 8 << 20,
        baseline_memory: herald_bench::BaselineMemory::Prefaulted,
        preallocate_bytes: None,
    }
}

#[test]
fn tiny_run_writes_a_csv_row_for_every_point_with_consistent_volumes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = tiny(dir.path());
    let mut samples = 0;
    let measurements = runner::run(&settings, |event| {
        if let runner::Event::Sampled { .. } = event {
            samples += 1;
        }
    })
    .expect("the harness runs");
    assert_eq!(samples, settings.sample_count());

    let csv = report::csv(&report::rows(&measurements));
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(CSV_HEADER));
    let columns: Vec<&str> = CSV_HEADER.split(',').collect();
    let column = |name: &str| {
        columns
            .iter()
            .position(|c| *c == name)
            .expect("known column")
    };

    let mut seen = BTreeSet::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), columns.len(), "{line}");
        let number = |name: &str| fields[column(name)].parse::<f64>().expect("a number");
        let (workload, threads, batch) = (
            fields[0].to_owned(),
            number("threads") as usize,
            number("batch_records") as u32,
        );
        assert!(
            seen.insert((workload.clone(), threads, batch)),
            "duplicate row {line}"
        );
        for system in ["herald", "mutex", "memcpy"] {
            assert!(
                number(&format!("{system}_msgs_per_s")) > 0.0,
                "{system} in {line}"
            );
            assert!(
                number(&format!("{system}_mb_per_s")) > 0.0,
                "{system} in {line}"
            );
        }
        if workload == "read" {
            // Every subscriber read the whole partition, in every system.
            let partition = number("partition_bytes");
            assert!(partition > 0.0, "{line}");
            for system in ["herald", "mutex", "memcpy"] {
                assert_eq!(
                    number(&format!("{system}_bytes_min")),
                    partition * threads as f64,
                    "{line}"
                );
            }
        }
    }
    for workload in ["write", "read"] {
        for &threads in &settings.threads {
            for &batch in &settings.batches {
                assert!(
                    seen.contains(&(workload.to_owned(), threads, batch)),
                    "{workload} {threads} {batch}"
                );
            }
        }
    }
    // The logs' files are removed after each point.
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("readable").collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_budget_too_small_for_the_largest_batch_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = Settings {
        write_bytes_max: 1 << 20,
        ..tiny(dir.path())
    };
    let err = runner::run(&settings, |_| {})
        .expect_err("8 publishers cannot share 1 MiB of 1 MB batches");
    assert!(err.to_string().contains("write_bytes_max"), "{err}");
}
