//! How much room the file system holding a directory has: what
//! DescribeLogDirs reports for the data directory (Kafka's total and
//! usable bytes of a log directory).

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The size of a file system and the room left in it for this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes the file system holds in all.
    pub total_bytes: u64,
    /// Bytes still free to an unprivileged writer (what Kafka calls
    /// usable: the blocks reserved for root are not counted).
    pub usable_bytes: u64,
}

/// The space of the file system `dir` is on.
// statvfs's fields are 64-bit here but narrower on 32-bit targets.
#[allow(clippy::unnecessary_cast)]
pub fn of(dir: &Path) -> io::Result<DiskSpace> {
    let path = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    let mut stat = MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `path` is NUL-terminated and outlives the call; `stat` is a
    // properly sized buffer the call fills in when it returns 0.
    let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it wrote the whole struct.
    let stat = unsafe { stat.assume_init() };
    let block = stat.f_frsize as u64;
    Ok(DiskSpace {
        total_bytes: (stat.f_blocks as u64).saturating_mul(block),
        usable_bytes: (stat.f_bavail as u64).saturating_mul(block),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_has_some_room_and_no_more_than_its_file_system() {
        let dir = tempfile::tempdir().expect("temp dir");
        let space = of(dir.path()).expect("statvfs");
        assert!(space.total_bytes > 0);
        assert!(space.usable_bytes <= space.total_bytes);
        assert!(of(&dir.path().join("missing")).is_err());
    }
}
