//! The client subcommands against a running broker: each does its job and
//! each failure ends with a one-line reason and a non-zero exit.

mod common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

fn herald(server_addr: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .args(["--bootstrap", server_addr])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn herald");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_ok(output: &Output) {
    assert!(output.status.success(), "failed: {}", stderr(output));
}

/// Asserts a failure with exactly one line on stderr containing `reason`.
fn assert_fails_with(output: &Output, reason: &str) {
    assert!(!output.status.success(), "unexpected success");
    let text = stderr(output);
    assert_eq!(text.trim_end().lines().count(), 1, "one line: {text:?}");
    assert!(text.contains(reason), "{text:?} should contain {reason:?}");
}

#[test]
fn topic_create_list_describe_alter_delete_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let addr = server.addr.to_string();
    let created = herald(
        &addr,
        &[
            "topic",
            "create",
            "orders",
            "--partitions",
            "2",
            "--config",
            "retention.ms=600000",
        ],
        "",
    );
    assert_ok(&created);
    assert!(stdout(&created).contains("created topic orders with 2 partitions"));
    let listed = herald(&addr, &["topic", "list"], "");
    assert_ok(&listed);
    assert!(
        stdout(&listed).contains("orders\t2 partitions"),
        "{}",
        stdout(&listed)
    );

    assert_ok(&herald(
        &addr,
        &[
            "topic",
            "alter",
            "orders",
            "--partitions",
            "3",
            "--set",
            "retention.ms=1000",
        ],
        "",
    ));
    let described = herald(&addr, &["topic", "describe", "orders"], "");
    assert_ok(&described);
    let text = stdout(&described);
    assert!(text.contains("partitions: 3"), "{text}");
    assert!(text.contains("retention.ms = 1000 (topic)"), "{text}");

    assert_ok(&herald(&addr, &["topic", "delete", "orders"], ""));
    let listed = herald(&addr, &["topic", "list"], "");
    assert!(!stdout(&listed).contains("orders"));
}

#[test]
fn produced_lines_are_consumed_with_key_headers_and_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let addr = server.addr.to_string();
    assert_ok(&herald(
        &addr,
        &["topic", "create", "events", "--partitions", "1"],
        "",
    ));
    let produced = herald(
        &addr,
        &[
            "produce",
            "events",
            "--key",
            "user-1",
            "--header",
            "source=test",
        ],
        "one\ntwo\nthree\n",
    );
    assert_ok(&produced);
    assert!(
        stderr(&produced).contains("produced 3 records (29 bytes)"),
        "{}",
        stderr(&produced)
    );

    let plain = herald(&addr, &["consume", "events"], "");
    assert_ok(&plain);
    assert_eq!(stdout(&plain), "one\ntwo\nthree\n");

    let json = herald(
        &addr,
        &[
            "consume",
            "events",
            "--from",
            "offset:1",
            "--format",
            "json",
            "--max-messages",
            "1",
        ],
        "",
    );
    assert_ok(&json);
    let line: serde_json::Value = serde_json::from_str(stdout(&json).trim()).expect("json line");
    assert_eq!(line["offset"], 1);
    assert_eq!(line["partition"], 0);
    assert_eq!(line["key"], "user-1");
    assert_eq!(line["value"], "two");
    assert_eq!(line["headers"]["source"], "test");
    assert!(line["timestamp"].as_i64().expect("timestamp") > 0);
}

#[test]
fn bootstrap_server_is_accepted_as_kafka_tools_spell_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let output = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["topic", "create", "spelled", "--bootstrap-server"])
        .arg(server.addr.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("run herald");
    assert_ok(&output);
    let listed = herald(&server.addr.to_string(), &["topic", "list"], "");
    assert!(stdout(&listed).contains("spelled"), "{}", stdout(&listed));
}

#[test]
fn consume_from_end_or_a_late_timestamp_prints_nothing_old() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let addr = server.addr.to_string();
    assert_ok(&herald(&addr, &["produce", "late"], "old\n"));
    let from_end = herald(&addr, &["consume", "late", "--from", "end"], "");
    assert_ok(&from_end);
    assert_eq!(stdout(&from_end), "");
    let far_future = herald(
        &addr,
        &["consume", "late", "--from", "timestamp:99999999999999"],
        "",
    );
    assert_ok(&far_future);
    assert_eq!(stdout(&far_future), "");
    let from_zero = herald(&addr, &["consume", "late", "--from", "timestamp:0"], "");
    assert_eq!(stdout(&from_zero), "old\n");
}

#[test]
fn produce_reads_a_file_and_respects_the_rate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let addr = server.addr.to_string();
    let file = dir.path().join("lines.txt");
    std::fs::write(&file, "a\nb\nc\nd\ne\n").expect("write");
    let started = std::time::Instant::now();
    let produced = herald(
        &addr,
        &[
            "produce",
            "paced",
            "--file",
            file.to_str().expect("path"),
            "--rate",
            "20",
        ],
        "",
    );
    assert_ok(&produced);
    // 5 records at 20/s: the last one is due 200 ms after the first.
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
    assert!(stderr(&produced).contains("produced 5 records"));
    let consumed = herald(&addr, &["consume", "paced"], "");
    assert_eq!(stdout(&consumed), "a\nb\nc\nd\ne\n");
}

#[test]
fn bench_prints_a_summary_table_for_both_phases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let addr = server.addr.to_string();
    let bench = herald(
        &addr,
        &["bench", "--records", "2000", "--record-bytes", "10"],
        "",
    );
    assert_ok(&bench);
    let text = stdout(&bench);
    assert!(text.contains("records/s"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("produce") && l.contains("2000")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("consume") && l.contains("2000")),
        "{text}"
    );
    let listed = herald(&addr, &["topic", "list"], "");
    assert!(
        !stdout(&listed).contains("herald-bench"),
        "bench topic is removed"
    );
}

#[test]
fn unreachable_broker_fails_with_one_line() {
    // Port 1 on loopback: nothing listens there.
    let output = herald("127.0.0.1:1", &["topic", "list"], "");
    assert_fails_with(&output, "cannot reach broker 127.0.0.1:1");
}

#[test]
fn unknown_topic_fails_with_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let addr = server.addr.to_string();
    for args in [
        &["topic", "describe", "missing"][..],
        &["topic", "delete", "missing"][..],
        &["consume", "missing"][..],
    ] {
        assert_fails_with(&herald(&addr, args, ""), "unknown topic 'missing'");
    }
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["topic", "create", "t", "--partitions", "zero"],
            "--partitions",
        ),
        (
            &["consume", "t", "--from", "middle"],
            "expected beginning, end, offset:N or timestamp:MS",
        ),
        (
            &["produce", "t", "--header", "novalue"],
            "expected KEY=VALUE",
        ),
        (&["topic", "alter", "t"], "nothing to alter"),
    ];
    for (args, reason) in cases {
        // The broker address is never reached for argument errors except
        // `alter` with nothing to do, which fails before connecting.
        assert_fails_with(&herald("127.0.0.1:1", args, ""), reason);
    }
}

#[test]
fn flow_control_is_shown_and_switched_while_the_broker_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(
        dir.path(),
        &["--flow-control", "fixed", "--flow-limit", "700"],
    );
    let admin = server.admin_addr.to_string();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(args)
            .args(["--admin", &admin])
            .output()
            .expect("run")
    };
    let shown = run(&["flow-control", "show"]);
    assert_ok(&shown);
    assert_eq!(
        stdout(&shown).trim(),
        "flow control fixed: limit 700 records, 0 in flight"
    );

    let set = run(&["flow-control", "set", "gradient", "--limit", "250"]);
    assert_ok(&set);
    assert_eq!(
        stdout(&set).trim(),
        "flow control gradient: limit 250 records, moved between 100 and 1000000 by steps of 100, 0 in flight"
    );
    // Switched away and back with --resume, the gradient controller
    // carries on from its limit (no produce traffic: it has not moved).
    assert_ok(&run(&["flow-control", "set", "fixed", "--limit", "900"]));
    let resumed = run(&[
        "flow-control",
        "set",
        "gradient",
        "--limit",
        "5000",
        "--resume",
    ]);
    assert_ok(&resumed);
    assert_eq!(
        stdout(&resumed).trim(),
        "flow control gradient (resumed): limit 250 records, moved between 100 and 1000000 by steps of 100, 0 in flight"
    );
    let json = run(&["flow-control", "show", "--json"]);
    assert_ok(&json);
    let view: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(
        (view["mode"].as_str(), view["limit"].as_u64()),
        (Some("gradient"), Some(250))
    );

    // A refused change says why and leaves the gate as it was.
    assert_fails_with(
        &run(&["flow-control", "set", "fast"]),
        "unknown flow-control mode \"fast\"",
    );
    assert_fails_with(
        &run(&["flow-control", "set", "fixed", "--limit", "0"]),
        "--limit",
    );
    let still = run(&["flow-control", "show", "--json"]);
    let view: serde_json::Value = serde_json::from_slice(&still.stdout).expect("JSON");
    assert_eq!(view["mode"].as_str(), Some("gradient"));

    let off = run(&["flow-control", "set", "off"]);
    assert_ok(&off);
    assert_eq!(
        stdout(&off).trim(),
        "flow control off: produce requests are not limited"
    );
}

#[test]
fn every_subcommand_help_shows_an_example() {
    for args in [
        &["serve", "--help"][..],
        &["topic", "create", "--help"][..],
        &["topic", "list", "--help"][..],
        &["topic", "describe", "--help"][..],
        &["topic", "alter", "--help"][..],
        &["topic", "delete", "--help"][..],
        &["produce", "--help"][..],
        &["consume", "--help"][..],
        &["bench", "--help"][..],
        &["group", "list", "--help"][..],
        &["group", "describe", "--help"][..],
        &["group", "reset-offsets", "--help"][..],
        &["group", "delete", "--help"][..],
        &["user", "set", "--help"][..],
        &["acl", "add", "--help"][..],
        &["flow-control", "show", "--help"][..],
        &["flow-control", "set", "--help"][..],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(args)
            .output()
            .expect("run");
        assert!(output.status.success());
        let text = stdout(&output);
        assert!(text.contains("Example:\n  "), "{args:?}: {text}");
    }
}

#[test]
fn print_config_shows_effective_settings_and_bad_values_are_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--print-config", "--default-partitions", "4"])
        .env("HERALD_ADMIN_LISTEN", "127.0.0.1:9999")
        .output()
        .expect("run");
    assert!(output.status.success());
    let text = stdout(&output);
    assert!(text.contains("default_partitions = 4"), "{text}");
    assert!(text.contains("admin_listen = \"127.0.0.1:9999\""), "{text}");
    assert!(text.contains("kafka_listen = \"127.0.0.1:9092\""), "{text}");

    let refused = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--print-config", "--max-connections", "0"])
        .output()
        .expect("run");
    assert_fails_with(
        &refused,
        "invalid max_connections = 0: must be between 1 and 1000000",
    );
}

#[test]
fn security_settings_are_checked_and_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = |toml: &str, env: &[(&str, &str)]| {
        let path = dir.path().join("herald.toml");
        std::fs::write(&path, toml).expect("write config");
        let output = Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["serve", "--print-config", "--config"])
            .arg(&path)
            .envs(env.iter().copied())
            .env_remove("HERALD_ADMIN_PASSWORD")
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        stderr(&output)
    };
    let listener =
        |extra: &str| format!("[[listeners]]\nname = \"EXT\"\nlisten = \"127.0.0.1:0\"\n{extra}");
    let text = refused(&listener("protocol = \"SASL_SSL\"\n"), &[]);
    assert!(
        text.contains("listeners[0].protocol") && text.contains("tls_cert"),
        "{text}"
    );
    let text = refused(&listener("protocol = \"TLS\"\n"), &[]);
    assert!(
        text.contains("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
        "{text}"
    );
    let text = refused(
        &listener("protocol = \"SSL\"\ntls_cert = \"/nonexistent/cert.pem\"\ntls_key = \"/nonexistent/key.pem\"\n"),
        &[],
    );
    assert!(text.contains("/nonexistent/cert.pem"), "{text}");
    let text = refused(
        &listener("protocol = \"SASL_PLAINTEXT\"\nsasl_mechanisms = [\"GSSAPI\"]\n"),
        &[],
    );
    assert!(text.contains("GSSAPI"), "{text}");
    let text = refused("[security]\nadmin_user = \"admin\"\n", &[]);
    assert!(text.contains("HERALD_ADMIN_PASSWORD"), "{text}");
    let text = refused("[security]\nsuper_users = [\"admin\"]\n", &[]);
    assert!(text.contains("security.super_users"), "{text}");
    // The push listener's security is checked the same way.
    let text = refused("[push_listener]\nprotocol = \"SSL\"\n", &[]);
    assert!(
        text.contains("push_listener.protocol") && text.contains("tls_cert"),
        "{text}"
    );
    let text = refused("[push_listener]\nsasl_mechanisms = [\"KERBEROS\"]\n", &[]);
    assert!(
        text.contains("push_listener.sasl_mechanisms") && text.contains("KERBEROS"),
        "{text}"
    );
    let text = refused("[push_listener]\ntoken_lifetime_secs = 0\n", &[]);
    assert!(text.contains("push_listener.token_lifetime_secs"), "{text}");
}
