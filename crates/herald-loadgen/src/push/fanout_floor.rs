//! The fan-out floor: seed 002's experiment with no broker at all, the
//! least any broker on this machine can do for N subscribers that each
//! have a connection of their own.
//!
//! Why: at 10,000 subscribers every message costs 10,000 socket writes on
//! the broker's side and 10,000 wake-ups and reads on the subscribers'
//! side, all on loopback and all on the same cores here. A broker's
//! publish-to-deliver latency cannot beat the time the kernel takes for
//! that, so the broker's figures are read against this floor, measured in
//! the same run on the same machine.
//!
//! The "broker" is a child process of plain threads, each owning a share
//! of the connections and writing the 8-byte send time of every message to
//! each of them with one `write(2)`; the subscribers are tasks on the load
//! generator's runtime, as the real subscribers are, each reading its
//! stamps and recording the latency. Two processes, as with herald: each
//! side then has the whole open-file limit for its end of the connections.
//! Nothing is framed, encoded, stored or routed: everything herald does on
//! top is what the difference measures.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

use super::fanout::{tally, FanoutRow, Tally};
use super::{now_ns, PushBenchError};
use crate::histogram;

/// What to run.
#[derive(Debug, Clone)]
pub struct FanoutFloor {
    /// Subscribers, each on a connection of its own.
    pub subscribers: usize,
    /// Messages per second.
    pub rate: u32,
    /// Seconds of sending.
    pub secs: f64,
    /// Threads writing to the subscribers' connections.
    pub senders: usize,
}

/// How long setting up may take before the run fails instead of hanging.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs one floor measurement with [`send`] in a child process (this
/// executable, `push fanout-floor-sender`); its row reads like a fan-out
/// row whose transport is `kernel`.
pub async fn run(plan: &FanoutFloor) -> Result<FanoutRow, PushBenchError> {
    let failed = |what: &str, e: std::io::Error| PushBenchError::Refused(format!("{what}: {e}"));
    let exe = std::env::current_exe().map_err(|e| failed("finding this executable", e))?;
    let mut sender = tokio::process::Command::new(exe)
        .args(["push", "fanout-floor-sender"])
        .args(["--connections", &plan.subscribers.to_string()])
        .args(["--rate", &plan.rate.to_string()])
        .args(["--secs", &plan.secs.to_string()])
        .args(["--senders", &plan.senders.to_string()])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed("starting the sender", e))?;
    let mut said = tokio::io::BufReader::new(
        sender
            .stdout
            .take()
            .ok_or_else(|| PushBenchError::Refused("the sender has no output".into()))?,
    )
    .lines();
    // The sender's first line is where it listens.
    let addr = tokio::time::timeout(SETUP_TIMEOUT, said.next_line())
        .await
        .map_err(|_| PushBenchError::Refused("the sender did not start in time".into()))?
        .map_err(|e| failed("reading the sender", e))?
        .ok_or_else(|| PushBenchError::Refused("the sender ended before listening".into()))?;
    // Connected as the real subscribers connect to the broker: a bounded
    // number of attempts in flight, so the listen backlog never overflows.
    let mut subscribers = Vec::with_capacity(plan.subscribers);
    let connect_all = async {
        while subscribers.len() < plan.subscribers {
            let batch = OPEN_PARALLEL.min(plan.subscribers - subscribers.len());
            let opened = futures_util::future::join_all(
                (0..batch).map(|_| tokio::net::TcpStream::connect(addr.as_str())),
            )
            .await;
            for stream in opened {
                subscribers.push(stream?);
            }
        }
        // Every subscriber says it is there; the sender starts once it has
        // heard from all of them, so no stamp waits for a connection.
        for stream in &mut subscribers {
            stream.write_all(GO).await?;
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(SETUP_TIMEOUT, connect_all)
        .await
        .map_err(|_| PushBenchError::Refused("connecting to the sender took too long".into()))?
        .map_err(|e| failed("connecting to the sender", e))?;

    let published = (plan.rate as f64 * plan.secs).round().max(1.0) as u64;
    let readers: Vec<_> = subscribers
        .into_iter()
        .map(|mut stream| {
            tokio::spawn(async move {
                // A list: see `tally`.
                let mut local = Vec::with_capacity(published as usize);
                let mut got = 0u64;
                let deadline = tokio::time::Instant::now()
                    + Duration::from_secs_f64(published as f64 * 2.0 + 30.0);
                let mut stamp = [0u8; 8];
                while got < published {
                    let read = tokio::time::timeout_at(deadline, stream.read_exact(&mut stamp));
                    let Ok(Ok(_)) = read.await else { break };
                    let now = now_ns();
                    let sent = u64::from_be_bytes(stamp);
                    local.push(now.saturating_sub(sent) / 1000);
                    got += 1;
                }
                (got, local)
            })
        })
        .collect();
    let Tally {
        delivered,
        dropped,
        latencies,
    } = tally(readers, published).await;
    // Its last line is the cores it kept busy while sending.
    let mut sender_cores = None;
    while let Ok(Ok(Some(line))) = tokio::time::timeout(SETUP_TIMEOUT, said.next_line()).await {
        sender_cores = line.trim().parse().ok();
    }
    let status = tokio::time::timeout(SETUP_TIMEOUT, sender.wait())
        .await
        .map_err(|_| PushBenchError::Refused("the sender did not finish".into()))?
        .map_err(|e| failed("waiting for the sender", e))?;
    if !status.success() {
        return Err(PushBenchError::Refused(format!(
            "the sender failed: {status}"
        )));
    }
    let (p50, p99, _) = histogram::percentiles(&latencies).unwrap_or_default();
    Ok(FanoutRow {
        scenario: "fanout",
        transport: "kernel",
        subscribers: plan.subscribers,
        published,
        delivered,
        dropped_subscribers: dropped,
        mean_us: latencies.mean(),
        p50_us: p50,
        p99_us: p99,
        max_us: latencies.max() as f64,
        broker_cores: sender_cores,
    })
}

/// The byte each subscriber sends once connected.
const GO: &[u8] = b"g";
/// Connection attempts in flight while setting up, as the fan-out
/// benchmark opens its sessions.
const OPEN_PARALLEL: usize = 200;

/// The floor's broker side: listens on a port of 127.0.0.1 and prints it,
/// accepts `connections` connections and waits for each one's go byte,
/// then `rate` times a second for `secs` seconds writes the current time
/// to every connection, from `senders` threads that each own a share of
/// them. Prints the cores this process kept busy while sending, the
/// floor's counterpart of the broker's CPU.
pub fn send(connections: usize, rate: u32, secs: f64, senders: usize) -> std::io::Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    println!("{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let mut streams = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        streams.push(stream);
    }
    for stream in &mut streams {
        let mut go = [0u8; 1];
        stream.read_exact(&mut go)?;
    }
    let senders = senders.max(1);
    let mut shares: Vec<Vec<TcpStream>> = (0..senders).map(|_| Vec::new()).collect();
    for (i, stream) in streams.into_iter().enumerate() {
        shares[i % senders].push(stream);
    }
    let mut stamps = Vec::with_capacity(senders);
    let mut threads = Vec::with_capacity(senders);
    for mut share in shares {
        let (tx, rx) = std_mpsc::channel::<u64>();
        stamps.push(tx);
        threads.push(std::thread::spawn(move || {
            for stamp in rx {
                let bytes = stamp.to_be_bytes();
                // A subscriber that went away is counted by its reader.
                share.retain_mut(|stream| stream.write_all(&bytes).is_ok());
            }
        }));
    }
    let published = (f64::from(rate) * secs).round().max(1.0) as u64;
    let period = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
    let start = Instant::now();
    let cpu_before = crate::cpu::sample(std::process::id());
    for i in 0..published {
        let due = start + period * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let stamp = now_ns();
        for tx in &stamps {
            let _ = tx.send(stamp);
        }
    }
    drop(stamps);
    for thread in threads {
        let _ = thread.join();
    }
    let cpu_after = crate::cpu::sample(std::process::id());
    if let Some((before, after)) = cpu_before.zip(cpu_after) {
        println!("{}", crate::cpu::between(before, after).1);
    }
    Ok(())
}
