//! The network bound: one TCP stream over loopback moving 1 MiB writes
//! from one thread to another, with no broker in between.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::LoadError;

const CHUNK_BYTES: usize = 1 << 20;
/// How long the stream may stall before the measurement fails instead of
/// hanging.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes per second moved over one loopback stream in `duration`.
pub fn measure(duration: Duration) -> Result<f64, LoadError> {
    let (mut client, mut server) = pair(IDLE_TIMEOUT)?;
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let chunk = vec![7u8; CHUNK_BYTES];
        let end = Instant::now() + duration;
        while Instant::now() < end {
            client.write_all(&chunk)?;
        }
        Ok(())
    });
    let mut buf = vec![0u8; CHUNK_BYTES];
    let start = Instant::now();
    let mut bytes = 0u64;
    loop {
        match server.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes += n as u64,
            Err(e) => return Err(LoadError::io("read loopback", e)),
        }
    }
    let secs = start.elapsed().as_secs_f64();
    writer
        .join()
        .map_err(|_| LoadError::io("loopback writer", std::io::Error::other("panicked")))?
        .map_err(|e| LoadError::io("write loopback", e))?;
    Ok(bytes as f64 / secs.max(1e-9))
}

/// A connected loopback pair (client, server) whose reads and writes fail
/// after `idle` without progress. Connecting before accepting, in one
/// thread, means no thread ever waits for a peer that failed to come.
pub fn pair(idle: Duration) -> Result<(TcpStream, TcpStream), LoadError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| LoadError::io("bind loopback", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| LoadError::io("loopback address", e))?;
    let client = TcpStream::connect(addr).map_err(|e| LoadError::io("connect loopback", e))?;
    let (server, _) = listener
        .accept()
        .map_err(|e| LoadError::io("accept loopback", e))?;
    for stream in [&client, &server] {
        stream
            .set_read_timeout(Some(idle))
            .and_then(|()| stream.set_write_timeout(Some(idle)))
            .map_err(|e| LoadError::io("set socket timeouts", e))?;
    }
    Ok((client, server))
}
