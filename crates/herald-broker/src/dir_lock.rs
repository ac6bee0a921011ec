//! An exclusive lock on the data directory, so a second broker started on
//! the same directory refuses to start instead of appending to the same
//! segment files. The lock is an `flock` on `<data-dir>/.lock`: the kernel
//! drops it when the process exits, however it exits.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::BrokerError;

/// Name of the lock file inside the data directory.
pub const LOCK_FILE: &str = ".lock";

/// Held for as long as the broker runs.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock, or fails at once if another process holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<Self, BrokerError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| BrokerError::io("open lock file", &path, e))?;
        // SAFETY: flock(2) on a descriptor we own and keep open; no memory
        // is passed to the kernel.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(BrokerError::DataDirInUse {
                    path: dir.to_owned(),
                });
            }
            return Err(BrokerError::io("lock", &path, e));
        }
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_the_same_directory_is_refused_until_released() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = DirLock::acquire(dir.path()).expect("first");
        assert!(matches!(
            DirLock::acquire(dir.path()),
            Err(BrokerError::DataDirInUse { .. })
        ));
        drop(first);
        DirLock::acquire(dir.path()).expect("after release");
    }
}
