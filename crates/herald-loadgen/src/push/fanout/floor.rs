//! The fan-out floor: no broker at all, the least any broker on this
//! machine can do for N subscribers that each have a connection of their
//! own.
//!
//! Why: at 10,000 subscribers every message costs 10,000 socket writes on
//! the broker's side and 10,000 wake-ups and reads on the subscribers'
//! side, all on loopback and all on the same cores here. A broker cannot
//! beat the time the kernel takes for that, so the brokers' figures are
//! read against this floor, measured in the same run by the same
//! subscribers and publisher.
//!
//! The relay is a process of plain threads. Each sender thread owns a
//! share of the subscribers' sockets; a reader thread per publisher reads
//! fixed-size messages and hands each to every sender, which writes what
//! is queued (one message at a low rate, up to 64 KiB under load) to each
//! of its sockets with one `write(2)`. Nothing is framed, encoded,
//! stored or routed: everything a broker does on top is what the
//! difference measures. Channels to the senders are bounded, so a
//! publisher faster than the kernel is held back, not buffered.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;

use super::broker::{FLOOR_PUBLISHER, FLOOR_READY, FLOOR_SUBSCRIBER};

/// Messages queued per sender thread before the publisher waits.
const QUEUE: usize = 1024;
/// Bytes a sender thread gathers into one write per socket at most.
const BATCH_BYTES: usize = 64 * 1024;

enum Work {
    /// A subscriber to write to from now on.
    Subscriber(TcpStream),
    /// A message for every subscriber.
    Message(Arc<[u8]>),
}

/// Runs the relay: listens on a port of 127.0.0.1 and prints it, then
/// relays `payload_bytes`-byte messages from publishers to subscribers
/// with `senders` writing threads, until stdin closes (the parent is gone
/// or done with it). With `cpu`, the relay and its threads run on that
/// CPU only, where a broker would be pinned (it is the load generator's
/// child, and would otherwise share the generator's CPUs).
pub fn relay(payload_bytes: usize, senders: usize, cpu: Option<usize>) -> std::io::Result<()> {
    if let Some(cpu) = cpu {
        pin_to(cpu)?;
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    println!("{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
    let workers: Vec<SyncSender<Work>> = (0..senders.max(1))
        .map(|_| {
            let (tx, rx) = sync_channel::<Work>(QUEUE);
            std::thread::spawn(move || {
                let mut share: Vec<TcpStream> = Vec::new();
                let mut pending: Vec<u8> = Vec::with_capacity(BATCH_BYTES);
                while let Ok(first) = rx.recv() {
                    // Whatever else is queued goes out in the same write,
                    // as a broker batches what is waiting for a socket.
                    let mut next = Some(first);
                    while let Some(work) = next.take() {
                        match work {
                            Work::Subscriber(mut stream) => {
                                // It is owed only what comes after it.
                                write_to(&mut share, &mut pending);
                                if stream.write_all(&[FLOOR_READY]).is_ok() {
                                    share.push(stream);
                                }
                            }
                            Work::Message(bytes) => pending.extend_from_slice(&bytes),
                        }
                        if pending.len() < BATCH_BYTES {
                            next = rx.try_recv().ok();
                        }
                    }
                    write_to(&mut share, &mut pending);
                }
            });
            tx
        })
        .collect();
    let mut next = 0usize;
    for stream in listener.incoming() {
        let mut stream = stream?;
        stream.set_nodelay(true)?;
        let mut role = [0u8; 1];
        if stream.read_exact(&mut role).is_err() {
            continue;
        }
        match role[0] {
            FLOOR_SUBSCRIBER => {
                let _ = workers[next % workers.len()].send(Work::Subscriber(stream));
                next += 1;
            }
            FLOOR_PUBLISHER => {
                let workers = workers.clone();
                std::thread::spawn(move || {
                    let mut message = vec![0u8; payload_bytes];
                    let mut stream = std::io::BufReader::with_capacity(64 * 1024, stream);
                    while stream.read_exact(&mut message).is_ok() {
                        let shared: Arc<[u8]> = Arc::from(&message[..]);
                        for worker in &workers {
                            let _ = worker.send(Work::Message(Arc::clone(&shared)));
                        }
                    }
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes `pending` to every socket of `share` and empties it; a
/// subscriber that went away is dropped (its reader counts it).
fn write_to(share: &mut Vec<TcpStream>, pending: &mut Vec<u8>) {
    if !pending.is_empty() {
        share.retain_mut(|stream| stream.write_all(pending).is_ok());
        pending.clear();
    }
}

/// Pins this process (and the threads it starts afterwards) to `cpu`.
fn pin_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: `set` is a plain bit set owned here; CPU_SET checks nothing
    // but writes within it for cpu < CPU_SETSIZE, which is checked first,
    // and sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::other(format!("no CPU {cpu}")));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
