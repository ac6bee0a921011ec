"""The README's Quick start tour, run exactly as written against the real binary.

The project's rule: on a fresh clone, the README's two set-up commands, then
the tour, work exactly as written. This test checks the tour part.

What is run
- README.md, section "Quick start": the first fenced block is the set-up (its
  first command, `cargo run --release -- serve`, starts the broker); the tour is
  every fenced block between the markers `<!-- tour ... -->` and
  `<!-- /tour -->`. Nothing is listed here: a block added to the tour is run
  (and checked) automatically. A tour block in a language this file cannot run
  fails the test rather than being skipped. The set-up block's other command
  (./scripts/test.sh) is what runs this test, so it is not run here.
- The broker is started the way the set-up command does it: the arguments
  after `cargo run --release --` given to the already built binary (no cargo
  here), in a fresh temporary directory holding only a symlink
  `target/release/herald`, so its defaults apply (Kafka 127.0.0.1:9092, admin
  HTTP 127.0.0.1:9644, data in ./herald-data) and `./target/release/herald`
  resolves as in a checkout. If 9092 or 9644 is already taken on this machine
  (someone else's broker), a free port is used instead, announced in the output
  and as a warning: `--kafka-listen`/`--admin-listen` are added for the broker,
  `127.0.0.1:9092`/`127.0.0.1:9644` (or `localhost:...`) in the tour's text are
  rewritten to the new address, and HERALD_BOOTSTRAP points herald's CLI (which
  names no address in the tour) at it (HERALD_ADMIN for the admin API's
  commands). HERALD_* variables of the caller's
  environment are removed for the broker and the tour.
- `sh` blocks run as a user pasting them into a terminal would: all of them,
  in order, in ONE interactive shell session, `bash --norc --noprofile --noediting -i`
  (no rc files; aliases, history expansion and the working directory persist
  from one block to the next, as in the user's terminal). Each block is cut
  into complete commands the way the shell itself reads them (lines joined
  until `bash -n` accepts them); each command gets its stdin from /dev/null,
  its own stdout/stderr capture and a timeout, and must end with status 0,
  with no command inside it failing (an ERR trap records those) and with no
  complaint of the shell itself (e.g. `!x: event not found`). bash, not
  `sh` (dash): users paste into their interactive bash or zsh. A plain
  `bash script` would not do: it ignores aliases (no expand_aliases) and
  history expansion, which a user's terminal applies.
- `python` blocks run as a script with the repository's .venv/bin/python (the
  venv scripts/install-test-deps.sh creates, with confluent-kafka), in the same
  directory, with a timeout; they must exit 0.

What is checked beyond the exit status (derived from what the README shows,
not from a list of commands: every rule applies to any tour command of that
form, and a command no rule knows is checked for its exit status only; the
test output lists the checks done on each command)
- `herald topic create T [--partitions N]` -> later `herald topic list` shows T
  (with N on its line).
- `printf/echo ... | herald produce T` and `... | kcat -P ... -t T` record the
  lines they send -> later `herald consume T` (plain, from the beginning,
  optionally `--max-messages N`) and `kcat -C ... -t T -o beginning -e` print
  exactly those values (any order across partitions). Once a block wrote
  records this file cannot follow (a python block), consumers must print at
  least the recorded values.
- `curl .../metrics`, or a curl commented `# ... metrics`, (optionally `| head`)
  prints Prometheus text lines.
- `print(...)  # <text>` in a python block: that print shows <text> (Python
  literals compared as values, e.g. `# b'hi'`).
- The broker is still running after the tour and its data is in ./herald-data.
The broker is stopped by its PID (SIGTERM, then SIGKILL) at the end, also when
the test fails; on failure the broker's log tail is printed.

Skipped in the reference modes against Apache Kafka (HERALD_COMPAT_BOOTSTRAP,
HERALD_COMPAT_KAFKA_LIB): the tour is about herald itself.
"""

import ast
import io
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import time
import tokenize
import uuid
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker import free_port, port_accepts

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
VENV_PYTHON = REPO_ROOT / ".venv" / "bin" / "python"

KAFKA_PORT = 9092  # the defaults the README promises
ADMIN_PORT = 9644
PUSH_PORT = 9093
DATA_DIR = "herald-data"

COMMAND_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0

SHELL_LANGS = {"sh", "bash", "shell"}
PYTHON_LANGS = {"python", "py", "python3"}

SECTION_RE = re.compile(r"^##\s+Quick start\s*$", re.IGNORECASE)
NEXT_SECTION_RE = re.compile(r"^#{1,2}\s")
TOUR_START_RE = re.compile(r"^\s*<!--\s*tour\b.*-->\s*$")
TOUR_END_RE = re.compile(r"^\s*<!--\s*/tour\b.*-->\s*$")
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`{]*)")


def herald_binary() -> Path:
    return Path(os.environ.get("HERALD_BIN", REPO_ROOT / "target" / "release" / "herald"))


# ---------------------------------------------------------------- README parsing


@dataclass
class Block:
    lang: str
    code: str
    line: int  # README line number of the block's first code line

    def where(self) -> str:
        return f"README.md:{self.line} ({self.lang} block)"


def parse_readme(path: Path):
    """(set-up block, tour blocks) of the Quick start section."""
    lines = path.read_text().splitlines()
    start = next((i for i, l in enumerate(lines) if SECTION_RE.match(l)), None)
    assert start is not None, f"{path} has no '## Quick start' section"
    end = next(
        (i for i in range(start + 1, len(lines)) if NEXT_SECTION_RE.match(lines[i])), len(lines)
    )
    before, tour, markers = [], [], []
    fence, lang, body, body_line = None, "", [], 0
    for i in range(start + 1, end):
        line, lineno = lines[i], i + 1
        if fence is None:
            m = FENCE_RE.match(line)
            if m:
                fence, lang, body, body_line = m.group(1), m.group(2).lower(), [], lineno + 1
            elif TOUR_START_RE.match(line):
                markers.append(("start", lineno))
            elif TOUR_END_RE.match(line):
                markers.append(("end", lineno))
        elif line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            block = Block(lang, "\n".join(body) + "\n", body_line)
            inside = [kind for kind, _ in markers]
            if inside == ["start"]:
                tour.append(block)
            elif not inside:
                before.append(block)
            fence = None
        else:
            body.append(line)
    assert fence is None, f"README.md: unclosed code fence in Quick start (opened before line {body_line})"
    kinds = [kind for kind, _ in markers]
    assert kinds == ["start", "end"], (
        "README.md's Quick start must contain exactly one `<!-- tour -->` ... `<!-- /tour -->` "
        f"pair around the tour (outside code blocks); found {markers or 'none'}"
    )
    assert before, "README.md: no set-up code block before `<!-- tour -->` in Quick start"
    assert tour, "README.md: no code block between `<!-- tour -->` and `<!-- /tour -->`"
    return before[0], tour


def serve_args(setup: Block) -> list:
    """The herald arguments of the set-up block's first command (`cargo run --release -- ARGS`)."""
    for line in setup.code.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        ok = words[:2] == ["cargo", "run"] and "--release" in words and "--" in words
        assert ok, (
            f"{setup.where()}: the first set-up command should be `cargo run --release -- serve ...` "
            f"(this test runs target/release/herald with those arguments), got: {line.strip()}"
        )
        args = words[words.index("--") + 1 :]
        assert args[:1] == ["serve"], f"{setup.where()}: `{line.strip()}` does not run `serve`"
        return args
    raise AssertionError(f"{setup.where()}: the set-up block has no command")


# ---------------------------------------------------------------- commands


@dataclass
class Command:
    text: str
    line: int  # README line number
    block: Block

    def where(self) -> str:
        return f"README.md:{self.line}"


def bash_accepts(text: str) -> bool:
    """True when `text` is complete shell input (what makes an interactive bash run it)."""
    res = subprocess.run(
        ["bash", "--norc", "--noprofile", "-n"], input=text, capture_output=True, text=True, timeout=10
    )
    # An unterminated here-document is only a warning for bash -n.
    return res.returncode == 0 and not res.stderr.strip()


def split_commands(block: Block) -> list:
    """The block's complete commands, as an interactive shell reads them."""
    commands, pending, first = [], [], 0
    for i, line in enumerate(block.code.splitlines()):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            first = i
        pending.append(line)
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # line continuation
            continue
        text = "\n".join(pending)
        if bash_accepts(text + "\n"):
            commands.append(Command(text, block.line + first, block))
            pending = []
    assert not pending, (
        f"README.md:{block.line + first}: the block ends inside an unfinished or invalid command:\n"
        + "\n".join(pending)
    )
    return commands


def pipelines(text: str):
    """[[argv, ...] per pipeline] of a command, or None when it is not simple to parse."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError:
        return None
    result, pipeline, argv = [], [], []
    for tok in tokens + [";"]:
        if tok == "|":
            pipeline.append(argv)
            argv = []
        elif tok in (";", "&&", "||", "&", ";;"):
            if argv:
                pipeline.append(argv)
            if pipeline:
                result.append(pipeline)
            pipeline, argv = [], []
        else:
            argv.append(tok)
    return result


def program(argv) -> str:
    return os.path.basename(argv[0]) if argv else ""


def parse_long_options(args, flags=()):
    """(positionals, {option: value}) of `--opt value`, `--opt=value` and boolean `flags`."""
    positionals, options, i = [], {}, 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            options[key] = value
        elif arg.startswith("--") and arg in flags:
            options[arg] = True
        elif arg.startswith("--"):
            options[arg] = args[i + 1] if i + 1 < len(args) else None
            i += 1
        else:
            positionals.append(arg)
        i += 1
    return positionals, options


def parse_kcat(args):
    """{flag: value} of a kcat command line, or None when it uses options not modelled here."""
    with_value = {"-b", "-t", "-o", "-X", "-p", "-c", "-f", "-K", "-D", "-k", "-H", "-l", "-G"}
    without_value = {"-C", "-P", "-L", "-Q", "-e", "-q", "-E", "-u", "-J"}
    options, i = {}, 0
    while i < len(args):
        arg = args[i]
        if arg in with_value and i + 1 < len(args):
            options[arg] = args[i + 1]
            i += 2
        elif arg in without_value:
            options[arg] = True
            i += 1
        else:
            return None
    return options


# ---------------------------------------------------------------- expectations


@dataclass
class TourState:
    """What the tour did so far that later commands must show."""

    topics: dict = field(default_factory=dict)  # name -> partitions (or None)
    produced: dict = field(default_factory=dict)  # topic -> Counter of values sent
    exact: bool = True  # False once records were written that are not recorded here


def shell_lines(argv, env, cwd) -> list:
    """The lines a `printf`/`echo` command writes (bash builtins, no side effects)."""
    res = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", shlex.join(argv)],
        capture_output=True, text=True, timeout=10, env=env, cwd=cwd,
    )
    assert res.returncode == 0, f"re-running {shlex.join(argv)} failed: {res.stderr}"
    return res.stdout.splitlines()


def check_consumed(what, topic, lines, state, limit=None):
    """The values a consumer printed against the values the tour sent to `topic`."""
    sent = state.produced.get(topic, Counter())
    total = sum(sent.values())
    got = Counter(lines)
    if state.exact:
        want_count = min(limit, total) if limit is not None else total
        assert len(lines) == want_count, (
            f"{what} printed {len(lines)} values, expected {want_count} "
            f"(the tour sent {total} to {topic}: {dict(sent)}; limit {limit})"
        )
        assert not got - sent, (
            f"{what} printed values the tour never sent to {topic}: {dict(got - sent)} "
            f"(sent: {dict(sent)})"
        )
        return f"prints {want_count} of the values sent to {topic} {sorted(sent.elements())}"
    if limit is not None:
        if total >= limit:
            assert len(lines) == limit, f"{what} printed {len(lines)} values, expected {limit}"
            return f"prints {limit} value(s)"
        return "exit status only (records of unknown count written before)"
    assert not sent - got, (
        f"{what} did not print all values the tour sent to {topic}: missing {dict(sent - got)}"
    )
    return f"prints at least the values sent to {topic} {sorted(sent.elements())}"


PROM_LINE_RE = re.compile(
    r"^(# (HELP|TYPE) [A-Za-z_:][A-Za-z0-9_:]* .*"
    r"|#.*"
    r"|[A-Za-z_:][A-Za-z0-9_:]*(\{.*\})? [^ ]+( -?[0-9]+)?)$"
)


def check_metrics(out: str, piped_to_head: bool) -> str:
    lines = out.splitlines()
    assert lines, "printed nothing (expected Prometheus metrics)"
    bad = [l for l in lines if not PROM_LINE_RE.match(l)]
    assert not bad, f"lines that are not Prometheus text format: {bad[:5]}"
    families = list(text_string_to_metric_families(out))
    assert families, "no metric family in the output"
    if piped_to_head:
        assert len(lines) <= 10, f"`| head` printed {len(lines)} lines"
    return f"prints Prometheus text ({len(lines)} lines, {len(families)} families)"


def check_shell_command(cmd: Command, out: str, state: TourState, env, cwd) -> list:
    """Checks (and state updates) for the forms of tour commands this test knows."""
    parsed = pipelines(cmd.text)
    if not parsed:
        return []
    checks = []
    for pipeline in parsed:
        last = pipeline[-1]
        # Producers: printf/echo ... | herald produce T, or | kcat -P ... -t T.
        topic = None
        if program(last) == "herald" and last[1:2] == ["produce"]:
            pos, opts = parse_long_options(last[2:])
            if pos and "--file" not in opts:
                topic = pos[0]
            else:
                state.exact = False
        elif program(last) == "kcat" and "-P" in last:
            opts = parse_kcat(last[1:])
            if opts and "-t" in opts and "-l" not in opts:
                topic = opts["-t"]
            else:
                state.exact = False
        if topic is not None:
            if len(pipeline) == 2 and program(pipeline[0]) in ("printf", "echo"):
                values = shell_lines(pipeline[0], env, cwd)
                state.produced.setdefault(topic, Counter()).update(values)
                checks.append(f"records {values} as sent to {topic}")
            else:
                state.exact = False
        if program(last) == "herald" and last[1:3] == ["topic", "create"]:
            pos, opts = parse_long_options(last[3:])
            if pos:
                parts = opts.get("--partitions")
                state.topics[pos[0]] = int(parts) if parts and parts.isdigit() else None
                checks.append(f"records topic {pos[0]}")
    if len(parsed) != 1:
        return checks  # output checks only for a single pipeline
    pipeline = parsed[0]
    first, last = pipeline[0], pipeline[-1]
    what = "the command"  # the caller names it

    if program(first) == "herald" and first[1:3] == ["topic", "list"] and len(pipeline) == 1:
        rows = [l.split() for l in out.splitlines() if l.split()]
        for name, parts in state.topics.items():
            row = next((r for r in rows if r[0] == name), None)
            assert row is not None, f"{what} does not list topic {name}; it printed:\n{out}"
            if parts is not None:
                assert str(parts) in row[1:], (
                    f"{what} lists {name} without its {parts} partitions: {' '.join(row)}"
                )
        checks.append("lists " + ", ".join(
            f"{n} ({p} partitions)" if p else n for n, p in state.topics.items()) if state.topics
            else "exit status only (no topic created yet)")

    elif program(first) == "herald" and first[1:2] == ["consume"] and len(pipeline) == 1:
        pos, opts = parse_long_options(first[2:], flags=("--follow",))
        plain = opts.get("--format", "plain") == "plain"
        whole = opts.get("--from", "beginning") == "beginning" and "--partition" not in opts
        limit = opts.get("--max-messages")
        if pos and plain and whole and (limit is None or limit.isdigit()) and (
            limit is not None or "--follow" not in opts
        ):
            limit = int(limit) if limit is not None else None
            checks.append(check_consumed(what, pos[0], out.splitlines(), state, limit))

    elif program(first) == "kcat" and "-C" in first and len(pipeline) == 1:
        opts = parse_kcat(first[1:])
        if (
            opts is not None
            and "-t" in opts
            and "-e" in opts
            and opts.get("-o", "beginning") == "beginning"
            and not set(opts) & {"-p", "-c", "-f", "-K", "-D", "-G", "-J"}
        ):
            checks.append(check_consumed(what, opts["-t"], out.splitlines(), state))

    elif program(first) == "curl" and (
        any(re.search(r"/metrics/?$", a) for a in first[1:] if not a.startswith("-"))
        or re.search(r"#.*\b(prometheus|metrics)\b", cmd.text, re.IGNORECASE)
    ):
        to_head = len(pipeline) == 2 and last == ["head"]
        if len(pipeline) == 1 or to_head:
            checks.append(check_metrics(out, to_head))
    return checks


def python_expectations(code: str) -> list:
    """(line, expected text) of `print(...)  # expected` lines."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT and tok.line.lstrip().startswith("print("):
            found.append((tok.start[0], tok.string[1:].strip()))
    return found


def same_printed(got: str, want: str) -> bool:
    if got.strip() == want:
        return True
    try:
        return ast.literal_eval(got.strip()) == ast.literal_eval(want)
    except (ValueError, SyntaxError):
        return False


# ---------------------------------------------------------------- processes


class ShellSession:
    """One interactive bash, fed commands on stdin like a terminal paste."""

    def __init__(self, cwd: Path, control: Path, env: dict):
        self.control = control
        self.token = f"__tour_done_{uuid.uuid4().hex}"
        self.shell_err = control / "shell.stderr"
        self._err_seen = 0
        self.proc = subprocess.Popen(
            ["bash", "--norc", "--noprofile", "--noediting", "-i"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.shell_err, "wb"),
            cwd=cwd,
            env=env,
            start_new_session=True,  # no controlling terminal; its own process group
        )
        self._buf = b""
        self._send(
            "PS1= PS2=\n"
            "trap 'printf \"%s\\t%s\\n\" \"$?\" \"$BASH_COMMAND\" >>\"$__tour_errlog\"' ERR\n"
            f"printf '{self.token} %s\\n' \"$?\"\n"
        )
        self._wait_done(10.0)
        self.new_shell_complaints()  # the start-up notices (no job control without a tty)

    def _send(self, text: str):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def _wait_done(self, timeout: float):
        """The status the session reported after a command, or None on timeout."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            m = re.search(rb"(?m)^" + self.token.encode() + rb" (\d+)\n", self._buf)
            if m:
                self._buf = self._buf[m.end():]
                return int(m.group(1))
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(
                        f"the shell session exited (status {self.proc.wait()}); "
                        f"its stderr:\n{self.shell_err.read_text(errors='replace')[-2000:]}"
                    )
                self._buf += chunk

    def new_shell_complaints(self) -> str:
        text = self.shell_err.read_bytes()[self._err_seen:].decode(errors="replace")
        self._err_seen += len(text.encode())
        lines = [
            l for l in text.splitlines()
            if l.strip()
            and not re.match(r"^\[\d+\][+-]?\s", l)  # job notices
            and "cannot set terminal process group" not in l
            and "no job control in this shell" not in l
        ]
        return "\n".join(lines)

    def run(self, n: int, cmd: Command, timeout: float):
        """(status, stdout, stderr, inner failures, shell complaints) of one command."""
        out, err, errlog = (self.control / f"cmd{n:02d}.{s}" for s in ("out", "err", "errtrap"))
        self._send(
            f"__tour_errlog={shlex.quote(str(errlog))}\n"
            "{\n" + cmd.text + "\n} </dev/null "
            f">{shlex.quote(str(out))} 2>{shlex.quote(str(err))}\n"
            f"printf '{self.token} %s\\n' \"$?\"\n"
        )
        status = self._wait_done(timeout)
        read = lambda p: p.read_text(errors="replace") if p.exists() else ""
        failures = []
        for line in read(errlog).splitlines():
            if line not in failures:
                failures.append(line)
        return status, read(out), read(err), failures, self.new_shell_complaints()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        # The shell, and anything the tour left running in its process group.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


def port_free(port: int) -> bool:
    """Whether herald could listen on 127.0.0.1:port now (it sets SO_REUSEADDR too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return not port_accepts("127.0.0.1", port)


def start_broker(command, workdir, env, log_path):
    """Starts `command` in `workdir` on the default ports, or free ones when those are
    taken; returns (process, kafka port, admin port, {old port: new address})."""
    for attempt in range(3):
        ports, extra, rewrites, notes = {}, [], {}, []
        for default, flag, name in ((KAFKA_PORT, "--kafka-listen", "Kafka"),
                                    (ADMIN_PORT, "--admin-listen", "admin HTTP"),
                                    (PUSH_PORT, "--push-listen", "push")):
            port = default if port_free(default) else free_port()
            ports[default] = port
            if port != default:
                extra += [flag, f"127.0.0.1:{port}"]
                rewrites[default] = f"127.0.0.1:{port}"
                notes.append(f"127.0.0.1:{default} is taken on this machine: {name} on 127.0.0.1:{port}")
        if notes:
            msg = (
                "README tour: " + "; ".join(notes) + " (the tour's addresses rewritten"
                + (", HERALD_BOOTSTRAP set for herald's CLI" if KAFKA_PORT in rewrites else "")
                + ")"
            )
            print(msg)
            warnings.warn(msg)
        full = [*command, *extra]
        with open(log_path, "ab") as log:
            log.write(f"=== {' '.join(full)} (in {workdir})\n".encode())
            log.flush()
            proc = subprocess.Popen(
                full, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env={**env, "RUST_BACKTRACE": "1"},
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while proc.poll() is None:
            if all(port_accepts("127.0.0.1", port) for port in ports.values()):
                return proc, ports[KAFKA_PORT], ports[ADMIN_PORT], rewrites
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                pytest.fail(f"`{' '.join(full)}` did not listen within {READY_TIMEOUT_S:.0f}s:\n"
                            f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)
        this_run = log_path.read_text(errors="replace").split("\n=== ")[-1]
        if "Address already in use" in this_run and attempt < 2:
            continue  # someone took a port between the check and the bind: choose again
        pytest.fail(f"`{' '.join(full)}` exited with {proc.returncode}:\n{this_run[-3000:]}")


@dataclass
class Tour:
    workdir: Path
    control: Path
    env: dict
    kafka: str
    admin: str
    rewrites: dict
    proc: subprocess.Popen
    log_path: Path

    def log_tail(self, lines=80) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def rewrite(self, code: str) -> str:
        for old, new in self.rewrites.items():
            code = re.sub(rf"\b(127\.0\.0\.1|localhost):{old}\b", new, code)
        return code


@pytest.fixture
def tour(request, tmp_path):
    if os.environ.get("HERALD_COMPAT_BOOTSTRAP", "").strip() or os.environ.get(
        "HERALD_COMPAT_KAFKA_LIB", ""
    ).strip():
        pytest.skip("the README tour runs herald itself; not part of a reference run against Kafka")
    binary = herald_binary()
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run `cargo build --release -p herald` first")
    if not VENV_PYTHON.exists():
        pytest.fail(f"{VENV_PYTHON} is missing: run scripts/install-test-deps.sh first")
    setup, _ = parse_readme(README)
    args = serve_args(setup)

    workdir, control = tmp_path / "checkout", tmp_path / "control"
    (workdir / "target" / "release").mkdir(parents=True)
    control.mkdir()
    (workdir / "target" / "release" / "herald").symlink_to(binary.resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
    env["HISTFILE"] = str(control / "bash_history")  # not the caller's ~/.bash_history
    log_path = control / "broker.log"

    proc, kafka_port, admin_port, rewrites = start_broker(["./target/release/herald", *args],
                                                           workdir, env, log_path)
    if kafka_port != KAFKA_PORT:
        env["HERALD_BOOTSTRAP"] = f"127.0.0.1:{kafka_port}"
    if admin_port != ADMIN_PORT:
        env["HERALD_ADMIN"] = f"127.0.0.1:{admin_port}"
    if PUSH_PORT in rewrites:
        env["HERALD_PUSH_SERVER"] = rewrites[PUSH_PORT]
    state = Tour(workdir, control, env, f"127.0.0.1:{kafka_port}", f"127.0.0.1:{admin_port}",
                 rewrites, proc, log_path)
    try:
        yield state
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                print(f"herald ignored SIGTERM for {STOP_TIMEOUT_S:.0f}s; killed it")
        call = getattr(request.node, "report_call", None)
        if call is not None and call.failed:
            print(f"--- broker log ({log_path}) ---\n{state.log_tail()}")


# ---------------------------------------------------------------- the test


def test_readme_tour(tour):
    _, blocks = parse_readme(README)
    state = TourState()
    summary = []
    print(f"broker: Kafka {tour.kafka}, admin {tour.admin}, working directory {tour.workdir}")

    def report(where, text, secs, checks):
        first = text.strip().splitlines()[0] + (" ..." if "\n" in text.strip() else "")
        summary.append(f"  {where}  {first}  [{secs:.2f}s] " + "; ".join(["exit 0", *checks]))
        print(summary[-1])

    def detail(out, err):
        return f"--- stdout ---\n{out[-3000:]}--- stderr ---\n{err[-3000:]}"

    shell = None
    try:
        for b, block in enumerate(blocks, 1):
            code = tour.rewrite(block.code)
            if block.lang in SHELL_LANGS:
                if shell is None:
                    shell = ShellSession(tour.workdir, tour.control, tour.env)
                for cmd in split_commands(Block(block.lang, code, block.line)):
                    n = len(summary) + 1
                    t0 = time.monotonic()
                    status, out, err, inner, complaints = shell.run(n, cmd, COMMAND_TIMEOUT_S)
                    secs = time.monotonic() - t0
                    what = f"{cmd.where()} (tour block {b}): `{cmd.text.strip()}`"
                    assert status is not None, (
                        f"{what} did not finish within {COMMAND_TIMEOUT_S:.0f}s\n{detail(out, err)}"
                    )
                    assert not complaints, (
                        f"{what}: the shell rejected it as a user's terminal would:\n{complaints}\n"
                        f"{detail(out, err)}"
                    )
                    assert status == 0, f"{what} exited with status {status}\n{detail(out, err)}"
                    assert not inner, (
                        f"{what}: a command in it failed (status, command):\n"
                        + "\n".join(inner) + f"\n{detail(out, err)}"
                    )
                    try:
                        checks = check_shell_command(cmd, out, state, tour.env, tour.workdir)
                    except AssertionError as e:
                        raise AssertionError(f"{what}:\n{e}\n{detail(out, err)}") from None
                    report(cmd.where(), cmd.text, secs, checks)
            elif block.lang in PYTHON_LANGS:
                script = tour.control / f"block{b:02d}.py"
                script.write_text(code)
                what = f"{block.where()} (tour block {b}, run with {VENV_PYTHON})"
                t0 = time.monotonic()
                try:
                    res = subprocess.run(
                        [str(VENV_PYTHON), str(script)], cwd=tour.workdir, env=tour.env,
                        stdin=subprocess.DEVNULL, capture_output=True, text=True,
                        timeout=COMMAND_TIMEOUT_S,
                    )
                except subprocess.TimeoutExpired as e:
                    raise AssertionError(
                        f"{what} did not finish within {COMMAND_TIMEOUT_S:.0f}s\n"
                        f"{detail(str(e.stdout or ''), str(e.stderr or ''))}"
                    ) from None
                secs = time.monotonic() - t0
                assert res.returncode == 0, (
                    f"{what} exited with status {res.returncode}\n{detail(res.stdout, res.stderr)}"
                )
                state.exact = False  # it may have written records this test does not follow
                printed = res.stdout.splitlines()
                checks, pos = [], 0
                for line, want in python_expectations(code):
                    hit = next((i for i in range(pos, len(printed)) if same_printed(printed[i], want)), None)
                    assert hit is not None, (
                        f"README.md:{block.line + line - 1}: the README says this prints {want}; "
                        f"the block printed {printed}\n{detail(res.stdout, res.stderr)}"
                    )
                    pos = hit + 1
                    checks.append(f"prints {want}")
                report(block.where(), code, secs, checks)
            else:
                raise AssertionError(
                    f"{block.where()}: this test does not know how to run a `{block.lang or '(no language)'}` "
                    f"block of the tour; teach tests/compat/test_readme_tour.py (SHELL_LANGS/PYTHON_LANGS)"
                )
    finally:
        if shell is not None:
            shell.close()

    assert tour.proc.poll() is None, (
        f"the broker exited with {tour.proc.returncode} during the tour:\n{tour.log_tail()}"
    )
    data = tour.workdir / DATA_DIR
    assert data.is_dir() and any(data.iterdir()), (
        f"the README says the data is in ./{DATA_DIR}; {data} is missing or empty"
    )
    print(f"README tour passed: {len(summary)} commands/blocks")
