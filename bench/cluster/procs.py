"""Processes the cluster benchmark starts, and only those.

Every process goes through `spawn`, which records it; `stop_all` ends what
is still running, by PID, and is called on the way out however the
benchmark ends (normal end, an error, Ctrl-C or SIGTERM). A child also gets
SIGKILL from the kernel if the benchmark itself dies without cleaning up
(PR_SET_PDEATHSIG), so no broker outlives a run.
"""

import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
_started = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(args, log_path, env=None):
    """Starts `args` in its own session (a Ctrl-C in the terminal reaches
    the benchmark, which stops the child itself), output to `log_path`."""
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, preexec_fn=_die_with_parent,
        )
    _started.append(proc)
    return proc


def stop(procs, grace_s):
    """SIGTERM to every process of `procs` still running, then SIGKILL to
    those that have not exited after `grace_s` seconds."""
    alive = [p for p in procs if p.poll() is None]
    for proc in alive:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in alive:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def stop_all():
    stop(_started, 5)
    _started.clear()


def wait_port(port, proc, log_path, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited: {Path(log_path).read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port} after {timeout_s}s (log: {log_path})")


def raise_on_sigterm():
    """SIGTERM ends the benchmark as Ctrl-C does, through the cleanup."""
    def handler(_sig, _frame):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, handler)


def free_disk_gb(path="/"):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 1e9
