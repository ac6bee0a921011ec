//! Replacing a small file so that a crash leaves either the old or the new
//! version, never a mix or nothing: write a temporary file beside it, fsync
//! it, rename it over the target, fsync the directory (without the last
//! step the rename itself may be lost in a power cut). Every small file
//! herald keeps (the log's checkpoint and indexes, the broker's metadata
//! document, producer snapshots) is written this way.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Which step of a durable replace failed, and on which file.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}: {source}")]
pub struct DurableWriteError {
    /// The step: create, write, fsync, rename or fsync directory.
    pub op: &'static str,
    /// The file or directory concerned.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl From<DurableWriteError> for io::Error {
    fn from(e: DurableWriteError) -> Self {
        io::Error::new(e.source.kind(), e.to_string())
    }
}

/// Replaces `path` with `contents` durably (temporary file `<path>.tmp`).
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), DurableWriteError> {
    let step = |op: &'static str, at: &Path| {
        let path = at.to_owned();
        move |source| DurableWriteError { op, path, source }
    };
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let mut file = File::create(&tmp).map_err(step("create", &tmp))?;
    file.write_all(contents).map_err(step("write", &tmp))?;
    file.sync_all().map_err(step("fsync", &tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(step("rename", path))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    sync_dir(dir).map_err(step("fsync directory", dir))
}

/// Makes the entries of `dir` (files created, renamed or removed in it)
/// durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_no_temporary_file_is_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        write_atomically(&path, b"first").expect("write");
        write_atomically(&path, b"second, longer").expect("replace");
        assert_eq!(fs::read(&path).expect("read"), b"second, longer");
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["state.json"], "only the file itself remains");
    }

    #[test]
    fn a_failed_step_names_the_step_and_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("no-such-dir").join("state.json");
        let err = write_atomically(&missing, b"x").expect_err("no directory");
        assert_eq!(err.op, "create");
        assert!(err.to_string().contains("state.json.tmp"), "{err}");
    }
}
