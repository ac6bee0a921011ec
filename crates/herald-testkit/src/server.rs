//! The real `herald serve`, started on free ports for one test.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a broker may take to report its listeners ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a broker may take to exit after SIGTERM.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `herald serve`, killed on drop.
pub struct Server {
    child: Child,
    /// The bound Kafka address.
    pub addr: SocketAddr,
    /// The bound admin HTTP address.
    pub admin_addr: SocketAddr,
    /// The bound push address (gRPC, WebSocket, SSE).
    pub push_addr: SocketAddr,
}

impl Server {
    /// Starts `binary` (see [`herald_binary`]) on `data_dir` with `extra`
    /// flags, every listener on a free port; returns once all are ready.
    /// Set `HERALD_TEST_LOG` to see the broker's log on stderr.
    pub fn start(binary: &Path, data_dir: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(binary)
            .args([
                "serve",
                "--kafka-listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--push-listen",
                "127.0.0.1:0",
                "--data-dir",
            ])
            .arg(data_dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let ready = watch_log(stderr);
        // The admin listener is reported first, then the push listener,
        // then the Kafka listener.
        let admin_addr = next_addr(&ready, "admin");
        let push_addr = next_addr(&ready, "push");
        let addr = next_addr(&ready, "kafka");
        Server {
            child,
            addr,
            admin_addr,
            push_addr,
        }
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(mut self) -> ExitStatus {
        // SAFETY: plain kill(2) on the child's pid, which we own and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for herald") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "herald did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("wait for herald").is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Drains the broker's log on a thread of its own (so it never blocks on a
/// full pipe) and sends the address of each listener it reports ready.
fn watch_log(stderr: std::process::ChildStderr) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut kafka_sent = false;
        let echo = std::env::var_os("HERALD_TEST_LOG").is_some();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let admin = line.split("admin listener ready on ").nth(1);
            let push = line.split("push listener ready on ").nth(1);
            let kafka = line.split("kafka listener ready on ").nth(1);
            let reported = admin.or(push).or(if kafka_sent { None } else { kafka });
            if let Some(rest) = reported {
                kafka_sent |= kafka.is_some();
                let addr = rest.split_whitespace().next().unwrap_or_default();
                let _ = tx.send(addr.to_owned());
            }
            if echo {
                eprintln!("[herald] {line}");
            }
        }
    });
    rx
}

fn next_addr(ready: &Receiver<String>, what: &str) -> SocketAddr {
    ready
        .recv_timeout(READY_TIMEOUT)
        .unwrap_or_else(|_| panic!("herald did not report its {what} listener"))
        .parse()
        .unwrap_or_else(|e| panic!("herald's {what} listener address: {e}"))
}

/// The `herald` binary of this checkout, for tests outside the binary's own
/// crate (which pass `env!("CARGO_BIN_EXE_herald")` instead): `HERALD_BIN`
/// if set, else the debug build, brought up to date with `cargo build -p
/// herald` once per test process, so a test never runs a stale binary.
pub fn herald_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("HERALD_BIN") {
                return PathBuf::from(path);
            }
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-p", "herald", "--bin", "herald"])
                .current_dir(&workspace)
                .status()
                .expect("run cargo build -p herald");
            assert!(status.success(), "cargo build -p herald failed");
            // A relative CARGO_TARGET_DIR is relative to the workspace,
            // where `cargo build` ran.
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(|dir| workspace.join(dir))
                .unwrap_or_else(|| workspace.join("target"));
            target.join("debug").join("herald")
        })
        .clone()
}
