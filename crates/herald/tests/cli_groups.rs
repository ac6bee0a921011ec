//! `herald group list|describe|reset-offsets|delete` and `consume --group`
//! against a running broker: a group resumes where it committed, describe
//! shows committed offsets and lag, reset-offsets moves them (and is refused
//! while the group has members), and failures end with one line.

mod common;

use std::collections::BTreeSet;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Broker flags: no initial rebalance delay, so a lone member starts at once.
const NO_DELAY: &[&str] = &["--group-initial-rebalance-delay-ms", "0"];

fn herald(addr: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .args(["--bootstrap", addr])
        .stdin(Stdio::null())
        .output()
        .expect("run herald")
}

fn produce(addr: &str, topic: &str, partition: i32, lines: &[String]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["produce", topic, "--partition", &partition.to_string()])
        .args(["--bootstrap", addr])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn produce");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        for line in lines {
            writeln!(stdin, "{line}").expect("write");
        }
    }
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{}", stderr(&output));
}

/// `herald group reset-offsets GROUP --topic TOPIC ARGS...`.
fn reset(addr: &str, group: &str, topic: &str, args: &[&str]) -> Output {
    let mut all = vec!["group", "reset-offsets", group, "--topic", topic];
    all.extend_from_slice(args);
    herald(addr, &all)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_ok(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", stderr(output));
    stdout(output)
}

fn assert_fails_with(output: &Output, reason: &str) {
    assert!(!output.status.success(), "unexpected success");
    let text = stderr(output);
    assert_eq!(text.trim_end().lines().count(), 1, "one line: {text:?}");
    assert!(text.contains(reason), "{text:?} should contain {reason:?}");
}

fn describe(addr: &str, group: &str) -> serde_json::Value {
    let text = assert_ok(&herald(addr, &["group", "describe", group, "--json"]));
    serde_json::from_str(text.trim()).expect("describe --json prints one JSON object")
}

/// `(partition, committed, end, lag)` of every partition line of `describe`.
fn partition_lines(described: &serde_json::Value) -> Vec<(i64, i64, i64, i64)> {
    described["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .map(|p| {
            let field = |name: &str| p[name].as_i64().unwrap_or(-1);
            (
                field("partition"),
                field("committed"),
                field("end"),
                field("lag"),
            )
        })
        .collect()
}

fn lines(output: &Output) -> Vec<String> {
    stdout(output).lines().map(str::to_owned).collect()
}

fn values(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

#[test]
fn a_group_resumes_where_it_committed_and_offsets_can_be_reset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), NO_DELAY);
    let addr = server.addr.to_string();
    assert_ok(&herald(
        &addr,
        &["topic", "create", "orders", "--partitions", "2"],
    ));
    produce(&addr, "orders", 0, &values("zero", 6));
    produce(&addr, "orders", 1, &values("one", 4));
    let everything: BTreeSet<String> = values("zero", 6)
        .into_iter()
        .chain(values("one", 4))
        .collect();

    // A first run stops after 7 records and commits what it printed.
    let first = herald(
        &addr,
        &[
            "consume",
            "orders",
            "--group",
            "billing",
            "--max-messages",
            "7",
        ],
    );
    assert_ok(&first);
    let first = lines(&first);
    assert_eq!(first.len(), 7, "{first:?}");

    let described = describe(&addr, "billing");
    assert_eq!(described["state"], "Empty");
    assert_eq!(described["members"].as_array().map(Vec::len), Some(0));
    let parts = partition_lines(&described);
    assert_eq!(parts.iter().map(|p| p.1).sum::<i64>(), 7, "{parts:?}");
    assert_eq!(parts.iter().map(|p| p.3).sum::<i64>(), 3, "{parts:?}");
    assert!(parts
        .iter()
        .all(|(_, committed, end, lag)| end - committed == *lag));

    // The second run prints exactly the rest: nothing skipped, nothing twice.
    let second = herald(&addr, &["consume", "orders", "--group", "billing"]);
    assert_ok(&second);
    let second = lines(&second);
    assert_eq!(second.len(), 3, "{second:?}");
    let seen: BTreeSet<String> = first.iter().chain(second.iter()).cloned().collect();
    assert_eq!(seen, everything);
    assert!(partition_lines(&describe(&addr, "billing"))
        .iter()
        .all(|p| p.3 == 0));

    let listed = assert_ok(&herald(&addr, &["group", "list"]));
    assert!(listed.contains("billing\tEmpty\tconsumer"), "{listed}");
    let table = assert_ok(&herald(&addr, &["group", "describe", "billing"]));
    assert!(
        table.contains("TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER"),
        "{table}"
    );
    assert!(table.contains("orders\t0\t6\t6\t0\t-"), "{table}");

    // Back to the beginning: the whole topic again.
    let plan = assert_ok(&reset(&addr, "billing", "orders", &["--to", "earliest"]));
    assert!(plan.contains("orders\t1\t4\t0"), "{plan}");
    let again = herald(&addr, &["consume", "orders", "--group", "billing"]);
    let again: BTreeSet<String> = lines(&again).into_iter().collect();
    assert_eq!(again, everything);

    // One partition to an offset; a dry run changes nothing.
    assert_ok(&reset(
        &addr,
        "billing",
        "orders",
        &["--partition", "1", "--to", "offset:2"],
    ));
    let dry = assert_ok(&reset(
        &addr,
        "billing",
        "orders",
        &["--to", "timestamp:0", "--dry-run"],
    ));
    assert!(dry.contains("dry run: nothing committed"), "{dry}");
    let parts = partition_lines(&describe(&addr, "billing"));
    assert_eq!(parts, vec![(0, 6, 6, 0), (1, 2, 4, 2)]);
    let rest = herald(&addr, &["consume", "orders", "--group", "billing"]);
    assert_eq!(lines(&rest), vec!["one-2".to_owned(), "one-3".to_owned()]);

    // Latest skips everything; then the group is deleted.
    assert_ok(&reset(&addr, "billing", "orders", &["--to", "latest"]));
    let nothing = herald(&addr, &["consume", "orders", "--group", "billing"]);
    assert_eq!(stdout(&nothing), "");
    assert!(stdout(&herald(&addr, &["group", "delete", "billing"])).contains("deleted group"));
    assert!(!stdout(&herald(&addr, &["group", "list"])).contains("billing"));
    assert_fails_with(
        &herald(&addr, &["group", "describe", "billing"]),
        "unknown group 'billing'",
    );
}

/// Kills the child on drop, so a failed assertion leaves no process behind.
struct Member(Child);

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_state(addr: &str, group: &str, state: &str, members: usize) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Until the first member joins, the group is unknown.
        let output = herald(addr, &["group", "describe", group, "--json"]);
        let described: serde_json::Value = if output.status.success() {
            serde_json::from_str(stdout(&output).trim()).expect("one JSON object")
        } else {
            serde_json::Value::Null
        };
        if described["state"] == state
            && described["members"].as_array().map(Vec::len) == Some(members)
        {
            return described;
        }
        assert!(
            Instant::now() < deadline,
            "group {group} never reached {state} with {members} member(s): {described}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn members_share_partitions_and_an_active_group_cannot_be_reset_or_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), NO_DELAY);
    let addr = server.addr.to_string();
    assert_ok(&herald(
        &addr,
        &["topic", "create", "events", "--partitions", "3"],
    ));
    let spawn_member = || {
        Member(
            Command::new(env!("CARGO_BIN_EXE_herald"))
                .args(["consume", "events", "--group", "live", "--follow"])
                .args(["--bootstrap", &addr])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn consume"),
        )
    };
    let first = spawn_member();
    wait_for_state(&addr, "live", "Stable", 1);
    let second = spawn_member();
    let described = wait_for_state(&addr, "live", "Stable", 2);

    // Every partition is assigned to exactly one member, with its host.
    let mut assigned: Vec<i64> = Vec::new();
    for member in described["members"].as_array().expect("members") {
        assert_eq!(member["client_host"], "/127.0.0.1", "{member}");
        let partitions = member["assignment"].as_array().expect("assignment");
        assert!(
            !partitions.is_empty(),
            "each member has a share: {described}"
        );
        assigned.extend(partitions.iter().filter_map(|p| p["partition"].as_i64()));
    }
    assigned.sort_unstable();
    assert_eq!(assigned, vec![0, 1, 2]);

    let refused = reset(&addr, "live", "events", &["--to", "earliest"]);
    assert_fails_with(
        &refused,
        "group 'live' is active (state Stable, 2 member(s))",
    );
    assert_fails_with(
        &herald(&addr, &["group", "delete", "live"]),
        "group 'live' has members",
    );

    // Members that stop with SIGINT leave the group at once.
    for member in [first, second] {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(member.0.id() as i32, libc::SIGINT) };
    }
    wait_for_state(&addr, "live", "Empty", 0);
    assert_ok(&reset(&addr, "live", "events", &["--to", "earliest"]));
}

#[test]
fn group_commands_fail_with_one_line() {
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "group",
                "reset-offsets",
                "g",
                "--topic",
                "t",
                "--to",
                "middle",
            ],
            "expected earliest, latest, offset:N or timestamp:MS",
        ),
        (
            &["consume", "t", "--group", "g", "--partition", "1"],
            "cannot be used with",
        ),
        (&["group", "describe"], "required"),
    ];
    for (args, reason) in cases {
        assert_fails_with(&herald("127.0.0.1:1", args), reason);
    }
    assert_fails_with(
        &herald("127.0.0.1:1", &["group", "list"]),
        "cannot reach broker 127.0.0.1:1",
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), NO_DELAY);
    let addr = server.addr.to_string();
    assert_fails_with(
        &herald(&addr, &["group", "describe", "nobody"]),
        "unknown group 'nobody'",
    );
    assert_fails_with(
        &herald(&addr, &["group", "delete", "nobody"]),
        "unknown group 'nobody'",
    );
    assert_fails_with(
        &reset(&addr, "g", "missing", &["--to", "latest"]),
        "unknown topic 'missing'",
    );
    assert_fails_with(
        &herald(&addr, &["consume", "missing", "--group", "g"]),
        "unknown topic 'missing'",
    );
}
