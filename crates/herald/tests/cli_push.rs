//! `herald publish` and `herald subscribe` against a running broker: what
//! is published to a subject is printed by its subscriber, and the token
//! printed on exit resumes right after the last printed record.

mod common;

use std::process::{Command, Output};

fn herald(push_addr: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .args(["--push-server", push_addr])
        .output()
        .expect("run herald")
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn resume_token(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .split("--resume ")
        .nth(1)
        .map(|rest| rest.trim().to_owned())
        .unwrap_or_else(|| panic!("no resume token in {stderr:?}"))
}

#[test]
fn a_subscriber_prints_its_subjects_and_resumes_from_its_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let push = server.push_addr.to_string();
    let published = ok(&herald(
        &push,
        &["publish", "orders", "--key", "eu.fr.paid", "one", "two"],
    ));
    assert_eq!(published, "partition 0 offset 0\npartition 0 offset 1\n");
    ok(&herald(
        &push,
        &["publish", "orders", "--key", "us.ny.paid", "other"],
    ));

    let first = herald(
        &push,
        &[
            "subscribe",
            "orders",
            "eu.*.paid",
            "--from",
            "beginning",
            "--max-messages",
            "2",
        ],
    );
    assert_eq!(ok(&first), "one\ntwo\n");
    let token = resume_token(&first);

    ok(&herald(
        &push,
        &["publish", "orders", "--key", "eu.de.paid", "three"],
    ));
    let resumed = herald(
        &push,
        &[
            "subscribe",
            "orders",
            "eu.*.paid",
            "--resume",
            &token,
            "--max-messages",
            "1",
        ],
    );
    assert_eq!(ok(&resumed), "three\n", "continues right after `two`");

    // A named subscriber needs no token: the broker keeps its place.
    let named = |max: &str| {
        herald(
            &push,
            &[
                "subscribe",
                "orders",
                "eu.>",
                "--name",
                "tail",
                "--max-messages",
                max,
            ],
        )
    };
    ok(&herald(
        &push,
        &["publish", "orders", "--key", "eu.it.paid", "four"],
    ));
    let first_named = herald(
        &push,
        &[
            "subscribe",
            "orders",
            "eu.>",
            "--name",
            "tail",
            "--from",
            "beginning",
            "--max-messages",
            "2",
        ],
    );
    assert_eq!(ok(&first_named), "one\ntwo\n");
    // Its position is stored (as consumer group herald-push.tail, so
    // Kafka's tools show it) as acks arrive and when it ends.
    let kafka = server.addr.to_string();
    let mut described = String::new();
    for _ in 0..100 {
        let output = Command::new(env!("CARGO_BIN_EXE_herald"))
            .args([
                "group",
                "describe",
                "herald-push.tail",
                "--bootstrap",
                &kafka,
            ])
            .output()
            .expect("run herald");
        described = String::from_utf8_lossy(&output.stdout).into_owned();
        if described.contains("orders\t0\t2\t") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(described.contains("orders\t0\t2\t"), "{described}");
    assert_eq!(ok(&named("2")), "three\nfour\n");

    // A token for another selector is refused with a one-line reason.
    let refused = herald(&push, &["subscribe", "orders", "us.>", "--resume", &token]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("stale resume token"));
}

#[test]
fn a_subscriber_with_a_filter_prints_only_what_it_holds_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let push = server.push_addr.to_string();
    for (value, region) in [("a", "us"), ("b", "eu"), ("c", "us"), ("d", "eu")] {
        ok(&herald(
            &push,
            &[
                "publish",
                "orders",
                "--key",
                "k",
                "--header",
                &format!("region={region}"),
                value,
            ],
        ));
    }
    ok(&herald(
        &push,
        &[
            "publish",
            "orders",
            "--key",
            "k",
            "--header",
            "herald.audience=gold",
            "e",
        ],
    ));
    let filtered = herald(
        &push,
        &[
            "subscribe",
            "orders",
            "k",
            "--from",
            "beginning",
            "--max-messages",
            "2",
            "--filter",
            r#"header.region == "eu""#,
        ],
    );
    assert_eq!(ok(&filtered), "b\nd\n");
    let gold = herald(
        &push,
        &[
            "subscribe",
            "orders",
            "k",
            "--from",
            "beginning",
            "--max-messages",
            "1",
            "--filter",
            "not exists header.region",
            "--attribute",
            "gold",
        ],
    );
    assert_eq!(ok(&gold), "e\n");
    let invalid = herald(
        &push,
        &["subscribe", "orders", "k", "--filter", "header.region = 1"],
    );
    assert!(!invalid.status.success());
    let stderr = String::from_utf8_lossy(&invalid.stderr);
    assert!(
        stderr.contains("filter syntax error at byte 14"),
        "{stderr}"
    );
}
