//! Rolling to the next segment through the successor the provisioner
//! prepared in the background.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{read_all, small_config, tagged_batch, PATIENCE};
use herald_log::Log;

fn files_with(dir: &Path, extension: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(extension))
        .collect();
    names.sort();
    names
}

/// Polls (bounded) for a condition a background thread makes true.
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

#[test]
fn the_successor_is_prepared_in_the_background_and_renamed_at_the_roll() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let batch_len = tagged_batch(2, 0, 0).len();
    let per_segment = small_config().segment_bytes as usize / batch_len;
    // Fill a bit more than half of the first segment.
    let mut tag = 0;
    while tag < per_segment / 2 + 2 {
        log.append(&tagged_batch(2, tag as u64, 0)).unwrap();
        tag += 1;
    }
    assert!(
        eventually(|| files_with(dir.path(), ".next").len() == 1),
        "the provisioner prepares the next segment"
    );
    // Cross into the second segment.
    while log.segment_count() < 2 {
        log.append(&tagged_batch(2, tag as u64, 0)).unwrap();
        tag += 1;
    }
    assert!(
        files_with(dir.path(), ".next").len() <= 1,
        "the prepared file was used, not left behind"
    );
    let logs = files_with(dir.path(), ".log");
    assert_eq!(logs.len(), 2);
    let second_base: u64 = logs[1].trim_end_matches(".log").parse().unwrap();
    assert_eq!(
        second_base,
        read_all(&log, 0, 1 << 20)
            .iter()
            .find(|b| b.0 >= second_base)
            .unwrap()
            .0
    );
    assert_eq!(read_all(&log, 0, 1 << 20).len(), tag);
    log.close().unwrap();
    assert!(
        files_with(dir.path(), ".next").is_empty(),
        "close removes an unused prepared file"
    );
    let reopened = Log::open(dir.path(), small_config()).unwrap();
    assert_eq!(read_all(&reopened, 0, 1 << 20).len(), tag);
}

#[test]
fn a_leftover_prepared_file_is_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path(), small_config()).unwrap();
        log.append(&tagged_batch(2, 0, 0)).unwrap();
    }
    std::fs::write(
        dir.path().join("00000000000000000002.next"),
        vec![0x5A; 4096],
    )
    .unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert!(files_with(dir.path(), ".next").is_empty());
    assert_eq!(read_all(&log, 0, 1 << 20).len(), 1);
}
