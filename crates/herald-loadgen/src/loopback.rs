//! The network bound: one TCP stream over loopback moving 1 MiB writes
//! from one thread to another, with no broker in between.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::LoadError;

const CHUNK_BYTES: usize = 1 << 20;

/// Bytes per second moved over one loopback stream in `duration`.
pub fn measure(duration: Duration) -> Result<f64, LoadError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| LoadError::io("bind loopback", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| LoadError::io("loopback address", e))?;
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut stream = TcpStream::connect(addr)?;
        let chunk = vec![7u8; CHUNK_BYTES];
        let end = Instant::now() + duration;
        while Instant::now() < end {
            stream.write_all(&chunk)?;
        }
        Ok(())
    });
    let (mut stream, _) = listener
        .accept()
        .map_err(|e| LoadError::io("accept loopback", e))?;
    let mut buf = vec![0u8; CHUNK_BYTES];
    let start = Instant::now();
    let mut bytes = 0u64;
    loop {
        match stream.read(&mut buf) {
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
