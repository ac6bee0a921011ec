//! A full disk refuses appends with a clear error, loses nothing already
//! stored, and the log works again once space is freed.
//!
//! Uses a small tmpfs of its own, so it needs root (as CI and the
//! development machines have); elsewhere it says so and checks nothing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{read_all, small_config, tagged_batch};
use herald_log::{AppendError, Log};

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop.
struct TinyFs {
    mount: PathBuf,
    _parent: tempfile::TempDir,
}

impl TinyFs {
    fn mount(size: &str) -> Option<Self> {
        let parent = tempfile::tempdir().ok()?;
        let mount = parent.path().join("fs");
        std::fs::create_dir(&mount).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mount)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Self {
            mount,
            _parent: parent,
        })
    }

    fn path(&self) -> &Path {
        &self.mount
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}

#[test]
fn a_full_disk_refuses_appends_cleanly_and_recovers_when_space_returns() {
    let Some(fs) = TinyFs::mount("1m") else {
        eprintln!("skipping: cannot mount a tmpfs here (needs root)");
        return;
    };
    let dir = fs.path().join("log");
    let log = Log::open(&dir, small_config()).unwrap();
    // Fill the rest of the file system with a file we can delete later.
    let ballast = fs.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 900 * 1024]).unwrap();

    let mut acknowledged = 0u64;
    let error = loop {
        match log.append(&tagged_batch(2, acknowledged, 0)) {
            Ok(appended) => {
                assert_eq!(appended.base_offset, 2 * acknowledged);
                acknowledged += 1;
                assert!(acknowledged < 100_000, "the disk never filled");
            }
            Err(e) => break e,
        }
    };
    assert!(
        matches!(error, AppendError::Storage(_)),
        "a full disk is a storage error, got {error:?}"
    );
    assert!(
        error.to_string().contains("No space left"),
        "the reason is the OS's: {error}"
    );
    assert!(
        log.poisoned().is_none(),
        "nothing was reserved, so the log is not poisoned"
    );
    // Still full: refused again, cleanly. A segment's background
    // allocation in flight at the first refusal may yet have made room for
    // a batch or two (CI saw one land): each lands densely, and the disk
    // is soon full again.
    let mut late = 0;
    loop {
        match log.append(&tagged_batch(2, acknowledged, 0)) {
            Ok(appended) => {
                assert_eq!(appended.base_offset, 2 * acknowledged);
                acknowledged += 1;
                late += 1;
                assert!(late < 16, "the disk stopped being full");
            }
            Err(e) => {
                assert!(matches!(e, AppendError::Storage(_)), "got {e:?}");
                break;
            }
        }
    }
    assert!(log.poisoned().is_none());
    // Everything acknowledged is readable, and the log is dense.
    assert_eq!(read_all(&log, 0, 1 << 20).len() as u64, acknowledged);
    assert_eq!(log.high_watermark(), 2 * acknowledged);

    std::fs::remove_file(&ballast).unwrap();
    let after = log.append(&tagged_batch(2, acknowledged, 0)).unwrap();
    assert_eq!(
        after.base_offset,
        2 * acknowledged,
        "offsets continue with no gap"
    );
    log.close().unwrap();
    let reopened = Log::open(&dir, small_config()).unwrap();
    assert_eq!(
        read_all(&reopened, 0, 1 << 20).len() as u64,
        acknowledged + 1
    );
}
