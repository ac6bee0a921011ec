//! Every push scenario at a small scale against a real `herald serve`:
//! each completes and nothing is lost. No timing is asserted.

use std::time::Duration;

use herald_loadgen::push::session::Transport;
use herald_loadgen::push::{catch_up, fanout, features, memory, priority, rounds, subjects};
use herald_testkit::{herald_binary, Server};

/// 20 subscribers over 2 generators and 2 subjects, half a second of
/// publishing at `rate` (0: saturation) with 64-byte messages.
fn fanout_plan(broker: fanout::broker::Broker, rate: u32, pid: Option<u32>) -> fanout::Fanout {
    fanout::Fanout {
        scenario: "s1".into(),
        broker,
        nodes: Vec::new(),
        rounds: None,
        subscribers: 20,
        layout: fanout::layout::Layout::in_turn(2, 20),
        rate,
        burst: 1,
        disturbance: fanout::disturbance::Disturbance::None,
        secs: 0.5,
        payload_bytes: 64,
        window: 64,
        per_generator: 10,
        open_parallel: 10,
        spread_sources: true,
        generator: env!("CARGO_BIN_EXE_herald-loadgen").into(),
        broker_pid: pid,
        heap_metrics: None,
    }
}

async fn topic(server: &Server, name: &str, partitions: i32) -> String {
    let mut connection = herald_client::Connection::connect(&server.addr.to_string())
        .await
        .expect("connect");
    herald_client::admin::create_topic(&mut connection, name, Some(partitions), &[])
        .await
        .expect("create topic");
    name.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_push_scenario_runs_and_loses_nothing() {
    let data = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&herald_binary(), data.path(), &[]);
    let push = server.push_addr.to_string();
    let bootstrap = server.addr.to_string();

    // Both transports, at a fixed rate and at saturation, over two
    // generator processes from their own loopback addresses, two subjects.
    for (transport, rate) in [(Transport::Grpc, 20), (Transport::Websocket, 0)] {
        let broker = fanout::broker::Broker::Herald {
            push: push.clone(),
            topic: topic(&server, &format!("fanout-{transport:?}"), 1).await,
            transport,
        };
        let mut plan = fanout_plan(broker, rate, Some(server.pid()));
        plan.heap_metrics = Some(server.admin_addr.to_string());
        let row = fanout::run(&plan).await.expect("fanout");
        assert!(row.published > 0, "{row:?}");
        assert_eq!(row.generators, 2, "{row:?}");
        assert_eq!(row.dropped_subscribers, 0, "{row:?}");
        assert_eq!((row.lost, row.duplicated), (0, 0), "{row:?}");
        // Each subscriber gets its subject's half.
        assert_eq!(row.delivered, row.published * 10, "{row:?}");
        assert!(row.disconnected.is_empty(), "{row:?}");
        // The broker's heap is read, and the sessions cost it little.
        let heap = row.broker_heap_bytes_per_connection.expect("heap gauge");
        assert!(heap < 1024.0 * 1024.0, "{row:?}");
    }

    let row = rounds::run(&rounds::Rounds {
        push: push.clone(),
        bootstrap: bootstrap.clone(),
        topic: topic(&server, "rounds", 3).await,
        partitions: 3,
        clients: 30,
        messages: 20,
        rounds: 2,
        deadline: Duration::from_secs(5),
        open_parallel: 10,
    })
    .await
    .expect("rounds");
    assert_eq!(row.late, 0, "{row:?}");

    for keys in [
        subjects::Keys::Many,
        subjects::Keys::Few,
        subjects::Keys::One,
    ] {
        let row = subjects::run(&subjects::Subjects {
            push: push.clone(),
            bootstrap: bootstrap.clone(),
            topic: topic(&server, &format!("subjects-{keys:?}"), 2).await,
            partitions: 2,
            subjects: 10_000,
            subscriptions: 1_000,
            connections: 4,
            records: 20_000,
            keys,
            broker_pid: Some(server.pid()),
        })
        .await
        .expect("subjects");
        assert_eq!(row.delivered, 2_000, "one record in ten: {row:?}");
        // A run this short may take less than one clock tick of CPU.
        assert!(
            row.broker_ns_per_delivery.is_some(),
            "the broker's CPU is read: {row:?}"
        );
    }

    for transport in [Transport::Grpc, Transport::Websocket] {
        let row = memory::run(&memory::Memory {
            push: push.clone(),
            admin: server.admin_addr.to_string(),
            topic: topic(&server, &format!("memory-{transport:?}"), 1).await,
            broker_pid: server.pid(),
            connections: 20,
            subscriptions_per_connection: 5,
            transport,
        })
        .await
        .expect("memory");
        assert_eq!(row.subscriptions, 100);
    }

    // Each feature lets through what it should: all, a tenth, all (1%
    // high), all but a twentieth.
    for (feature, each) in [
        (features::Feature::Plain, 2_000),
        (features::Feature::Filter, 200),
        (features::Feature::Priority, 2_000),
        (features::Feature::Expiry, 1_900),
    ] {
        let row = features::run(&features::Features {
            push: push.clone(),
            bootstrap: bootstrap.clone(),
            topic: topic(&server, &format!("features-{feature:?}"), 2).await,
            partitions: 2,
            records: 2_000,
            subscribers: 2,
            feature,
            transport: Transport::Websocket,
            broker_pid: Some(server.pid()),
        })
        .await
        .expect("features");
        assert_eq!(row.delivered, 2 * each, "{row:?}");
    }

    let cases = [
        (false, false, None),
        (true, false, None),
        (true, true, None),
        (true, false, Some(50_000)),
    ];
    for (flood, apart, flood_rate) in cases {
        let partitions = if apart { 2 } else { 1 };
        let name = format!("priority-{flood}-{apart}-{}", flood_rate.unwrap_or(0));
        let row = priority::run(&priority::Priority {
            push: push.clone(),
            bootstrap: bootstrap.clone(),
            topic: topic(&server, &name, partitions).await,
            flood,
            apart,
            secs: 0.5,
            probe_rate: 20,
            transport: Transport::Websocket,
            receive_buffer: flood_rate.map(|_| 64 * 1024),
            flood_rate,
        })
        .await
        .expect("priority");
        assert_eq!(row.probes_received, row.probes, "{row:?}");
        assert_eq!(row.flood_published > 0, flood, "{row:?}");
    }
}

/// The catch-up scenario: one subject among many caught up on two topics,
/// with the subject filters and without; both deliver every record of the
/// subject, and the filtered one reads less.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catch_up_scenario_reads_less_with_the_subject_filters() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&herald_binary(), data.path(), &[]);
    let create = |name: &'static str, filters: &'static str| {
        let bootstrap = server.addr.to_string();
        async move {
            let mut connection = herald_client::Connection::connect(&bootstrap)
                .await
                .expect("connect");
            let configs = [("subject.filters".to_owned(), filters.to_owned())];
            herald_client::admin::create_topic(&mut connection, name, Some(1), &configs)
                .await
                .expect("create topic");
            name.to_owned()
        }
    };
    let row = catch_up::run(&catch_up::CatchUp {
        push: server.push_addr.to_string(),
        bootstrap: server.addr.to_string(),
        admin: server.admin_addr.to_string(),
        filtered_topic: create("filtered", "true").await,
        plain_topic: create("plain", "false").await,
        subjects: 10_000,
        records: 100_000,
        batch_records: 512,
        probes: 3,
        transport: Transport::Websocket,
    })
    .await
    .expect("catch-up");
    assert!(row.delivered_records > 0, "{row:?}");
    assert_eq!(
        row.filtered.delivered_bytes, row.plain.delivered_bytes,
        "{row:?}"
    );
    assert!(row.plain.read_bytes >= row.log_bytes * 3, "{row:?}");
    assert!(row.read_ratio > 4.0, "{row:?}");
}

/// The fan-out floor needs no broker: its relay is this package's binary,
/// started as a child process, and the same generators and publisher
/// drive it. Every message reaches every subscriber of its subject, and
/// the relay's CPU is reported.
#[test]
fn the_fanout_floor_delivers_every_message_to_every_subscriber() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_herald-loadgen"))
        .args(["push", "fanout", "--system", "floor", "--subscribers", "20"])
        .args(["--rate", "20", "--secs", "0.5", "--per-generator", "8"])
        .output()
        .expect("run herald-loadgen");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let row: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON row on stdout");
    assert_eq!(row["transport"], "kernel");
    assert_eq!(row["generators"], 3);
    assert_eq!(row["published"], 10);
    assert_eq!(row["delivered"], 200);
    assert_eq!(row["lost"], 0);
    assert_eq!(row["dropped_subscribers"], 0);
    assert!(row["broker_ns_per_delivery"].as_f64().is_some(), "{row}");
}

/// The S2 to S6 shapes at a small scale against a real `herald
/// serve`: rounds, many subjects chosen by Zipf with patterns over a
/// partitioned topic, stalled subscribers and a reconnection storm. herald
/// owes every subscriber everything whatever happens to it: nothing is
/// lost, and resuming from the positions a subscriber reached sends
/// nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herald_loses_nothing_to_rounds_many_subjects_stalls_or_a_reconnection_storm() {
    use fanout::disturbance::Disturbance;
    use fanout::layout::{Choice, Layout};

    let data = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&herald_binary(), data.path(), &[]);
    let push = server.push_addr.to_string();
    let herald = |topic: String| fanout::broker::Broker::Herald {
        push: push.clone(),
        topic,
        transport: Transport::Websocket,
    };

    // S2: bursts of 20 messages, twice, counted round by round.
    let mut plan = fanout_plan(herald(topic(&server, "s2", 1).await), 2, Some(server.pid()));
    plan.layout = Layout::in_turn(1, 20);
    plan.burst = 20;
    plan.secs = 1.0;
    plan.rounds = Some(fanout::generator::RoundsPlan {
        burst: 20,
        deadline_ms: 1_000,
    });
    let row = fanout::run(&plan).await.expect("s2");
    assert_eq!(row.published, 40, "{row:?}");
    assert_eq!(row.delivered, 40 * 20, "{row:?}");
    assert_eq!((row.lost, row.duplicated), (0, 0), "{row:?}");
    let rounds = row.rounds.as_ref().expect("rounds counted");
    assert_eq!((rounds.clients, rounds.rounds), (20, 2), "{rounds:?}");
    assert_eq!(
        (rounds.client_rounds, rounds.incomplete),
        (40, 0),
        "{rounds:?}"
    );
    assert!(rounds.mean_ms > 0.0, "{rounds:?}");
    assert!(row.rounds_by_node.is_empty(), "one node: {row:?}");

    // S4: 2,000 subjects over 4 partitions, 5 literal subjects and one
    // pattern of 100 subjects per subscriber, subjects drawn by Zipf.
    let mut plan = fanout_plan(
        herald(topic(&server, "s4", 4).await),
        400,
        Some(server.pid()),
    );
    plan.layout = Layout {
        subjects: 2_000,
        subscribers: 20,
        per_subscriber: 5,
        patterns: true,
        choice: Choice::Zipf,
        seed: 3,
    };
    let row = fanout::run(&plan).await.expect("s4");
    assert_eq!((row.subscriptions, row.patterns), (120, 20), "{row:?}");
    assert!(row.delivered > 0, "{row:?}");
    assert_eq!((row.lost, row.duplicated), (0, 0), "{row:?}");
    assert_eq!(row.dropped_subscribers, 0, "{row:?}");

    // S5: 2 of 20 subscribers stop reading for half a second.
    let mut plan = fanout_plan(
        herald(topic(&server, "s5", 1).await),
        100,
        Some(server.pid()),
    );
    plan.layout = Layout::in_turn(1, 20);
    plan.secs = 1.0;
    plan.disturbance = Disturbance::Stall {
        every: 10,
        after_ms: 100,
        for_ms: 500,
    };
    let row = fanout::run(&plan).await.expect("s5");
    assert_eq!(row.disturbed_subscribers, 2, "{row:?}");
    assert_eq!(row.delivered, row.published * 20, "{row:?}");
    assert_eq!((row.lost, row.duplicated), (0, 0), "{row:?}");
    assert!(row.spared_p99_us.is_some() && row.disturbed_p99_us.is_some());

    // S6: every connection closes and reopens within 200 ms, resuming.
    let mut plan = fanout_plan(
        herald(topic(&server, "s6", 2).await),
        100,
        Some(server.pid()),
    );
    plan.secs = 1.5;
    plan.disturbance = Disturbance::Reconnect {
        after_ms: 300,
        within_ms: 200,
    };
    let row = fanout::run(&plan).await.expect("s6");
    assert_eq!(row.disturbed_subscribers, 20, "{row:?}");
    assert_eq!(row.delivered, row.published * 10, "{row:?}");
    assert_eq!((row.lost, row.duplicated), (0, 0), "{row:?}");
    assert!(row.catch_up_max_ms.is_some(), "{row:?}");
    assert!(row.disconnected.is_empty(), "{row:?}");
}

/// Seed 003's rounds over a relay tree's two nodes: a root and a relay
/// mirroring its topic. The subscribers split evenly between the two push
/// listeners, the publisher on the root; every client on either node gets
/// every message of every round, and the row counts each node apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_spread_over_a_root_and_its_relay_reach_every_client() {
    let data = tempfile::tempdir().expect("temp dir");
    let root = Server::start(
        &herald_binary(),
        &data.path().join("root"),
        &["--auto-create-topics", "false"],
    );
    let topic = topic(&root, "tree", 1).await;
    let upstream = root.addr.to_string();
    let relay = Server::start(
        &herald_binary(),
        &data.path().join("relay"),
        &[
            "--auto-create-topics",
            "false",
            "--relay-upstream",
            &upstream,
            "--relay-topics",
            &topic,
        ],
    );
    let mirrored = async {
        loop {
            let listed = match herald_client::Connection::connect(&relay.addr.to_string()).await {
                Ok(mut connection) => herald_client::admin::topic(&mut connection, &topic)
                    .await
                    .is_ok(),
                Err(_) => false,
            };
            if listed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), mirrored)
        .await
        .expect("the relay mirrors the topic within 30 s");

    let herald = |push: &std::net::SocketAddr| fanout::broker::Broker::Herald {
        push: push.to_string(),
        topic: topic.clone(),
        transport: Transport::Websocket,
    };
    let mut plan = fanout_plan(herald(&root.push_addr), 2, None);
    plan.nodes = vec![herald(&root.push_addr), herald(&relay.push_addr)];
    plan.layout = fanout::layout::Layout::in_turn(1, 20);
    plan.burst = 20;
    plan.secs = 1.0;
    plan.rounds = Some(fanout::generator::RoundsPlan {
        burst: 20,
        deadline_ms: 1_000,
    });
    let row = fanout::run(&plan).await.expect("rounds over two nodes");
    assert_eq!(row.nodes, 2, "{row:?}");
    assert_eq!(row.delivered, 40 * 20, "{row:?}");
    assert_eq!((row.lost, row.duplicated), (0, 0), "{row:?}");
    let rounds = row.rounds.as_ref().expect("rounds counted");
    assert_eq!(
        (rounds.client_rounds, rounds.incomplete),
        (40, 0),
        "{rounds:?}"
    );
    let by_node: Vec<(u64, u64)> = row
        .rounds_by_node
        .iter()
        .map(|node| (node.clients, node.client_rounds))
        .collect();
    assert_eq!(by_node, [(10, 20), (10, 20)], "{row:?}");
}
