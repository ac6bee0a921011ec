//! The binary's integration tests use the shared test kit
//! (`herald-testkit`); this shim starts this crate's own build of herald.

#![allow(dead_code, unused_imports)] // each test file uses a different part

use std::path::Path;

pub use herald_testkit::requests::*;
pub use herald_testkit::{request_frame, Client, IO_TIMEOUT};

/// A running `herald serve` of this crate's build.
pub type Server = herald_testkit::Server;

/// Starts this crate's herald on `data_dir` with extra flags, on free ports.
pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
    herald_testkit::Server::start(Path::new(env!("CARGO_BIN_EXE_herald")), data_dir, extra)
}
