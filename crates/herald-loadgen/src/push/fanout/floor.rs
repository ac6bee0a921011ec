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
//! fixed-size messages and hands each to every sender, which writes it to
//! each of its sockets with one `write(2)`. Nothing is framed, encoded,
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

enum Work {
    /// A subscriber to write to from now on.
    Subscriber(TcpStream),
    /// A message for every subscriber.
    Message(Arc<[u8]>),
}

/// Runs the relay: listens on a port of 127.0.0.1 and prints it, then
/// relays `payload_bytes`-byte messages from publishers to subscribers
/// with `senders` writing threads, until stdin closes (the parent is gone
/// or done with it).
pub fn relay(payload_bytes: usize, senders: usize) -> std::io::Result<()> {
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
                for work in rx {
                    match work {
                        Work::Subscriber(mut stream) => {
                            if stream.write_all(&[FLOOR_READY]).is_ok() {
                                share.push(stream);
                            }
                        }
                        // A subscriber that went away is counted by its reader.
                        Work::Message(bytes) => {
                            share.retain_mut(|stream| stream.write_all(&bytes).is_ok())
                        }
                    }
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
