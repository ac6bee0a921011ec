//! The push engine over a real broker in a temporary directory: routing,
//! slow subscribers, gaps, acks and resume tokens.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use herald_broker::{Broker, BrokerConfig};
use herald_push::{
    AckMode, Credit, Event, GapReason, PublishRecord, PushConfig, PushEngine, Selection, Session,
    Start, SubscribeError, SubscribeRequest, TokenError,
};
use herald_subjects::Selector;

struct Fixture {
    _dir: tempfile::TempDir,
    broker: Arc<Broker>,
    engine: Arc<PushEngine>,
}

fn fixture(config: PushConfig) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::open(BrokerConfig::new(dir.path())).expect("broker");
    broker
        .create_topic("orders", Some(3), &[], false)
        .expect("topic");
    let engine = PushEngine::new(Arc::clone(&broker), config).expect("engine");
    Fixture {
        _dir: dir,
        broker,
        engine,
    }
}

async fn publish(engine: &PushEngine, key: &str, value: &str) -> (u32, u64) {
    let published = engine
        .publish(
            &mut herald_push::Identity::anonymous(""),
            PublishRecord {
                topic: "orders".into(),
                key: Some(key.as_bytes().to_vec()),
                value: Some(value.as_bytes().to_vec()),
                ..Default::default()
            },
        )
        .await
        .expect("publish");
    (published.partition, published.offset)
}

fn request(id: u64, selector: &str, start: Start, ack_mode: AckMode) -> SubscribeRequest {
    SubscribeRequest {
        id,
        topic: "orders".into(),
        selector: Selector::parse(selector.as_bytes()).expect("selector"),
        start,
        ack_mode,
        max_lag: 0,
        name: None,
        selection: Selection::default(),
        report_expired: false,
    }
}

/// Deliveries as (subscription, key, value), and other events, until
/// `want` deliveries arrived or a quiet second passed.
async fn drain(session: &Session, want: usize) -> (Vec<(u64, String, String)>, Vec<Event>) {
    let mut deliveries = Vec::new();
    let mut others = Vec::new();
    while deliveries.len() < want {
        let taken =
            tokio::time::timeout(Duration::from_secs(2), session.outbox().take(1 << 20)).await;
        let Ok(Some(events)) = taken else { break };
        for event in events {
            match event {
                Event::Delivery(d) => deliveries.push((
                    d.subscription_id,
                    String::from_utf8_lossy(d.record.key.as_deref().unwrap_or_default())
                        .into_owned(),
                    String::from_utf8_lossy(d.record.value.as_deref().unwrap_or_default())
                        .into_owned(),
                )),
                other => others.push(other),
            }
        }
    }
    (deliveries, others)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_subscription_receives_exactly_its_subjects_in_order() {
    let f = fixture(PushConfig::default());
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    session
        .subscribe(request(1, "user.7", Start::Now, AckMode::None))
        .await
        .expect("literal");
    session
        .subscribe(request(2, "user.*", Start::Now, AckMode::None))
        .await
        .expect("pattern");
    session
        .subscribe(request(3, "eu.>", Start::Now, AckMode::None))
        .await
        .expect("tail pattern");
    for i in 0..20 {
        publish(&f.engine, "user.7", &format!("a{i}")).await;
        publish(&f.engine, "user.8", &format!("b{i}")).await;
        publish(&f.engine, "eu.fr.paris", &format!("c{i}")).await;
        publish(&f.engine, "us.ny", &format!("d{i}")).await;
    }
    let (got, others) = drain(&session, 20 + 40 + 20).await;
    let of = |id: u64| -> Vec<(String, String)> {
        got.iter()
            .filter(|d| d.0 == id)
            .map(|d| (d.1.clone(), d.2.clone()))
            .collect()
    };
    let expect = |key: &str, prefix: &str| -> Vec<(String, String)> {
        (0..20)
            .map(|i| (key.to_owned(), format!("{prefix}{i}")))
            .collect()
    };
    assert_eq!(of(1), expect("user.7", "a"));
    let mut two = of(2);
    two.sort_by_key(|(k, v)| (k.clone(), v[1..].parse::<u32>().unwrap_or(0)));
    let mut want = expect("user.7", "a");
    want.extend(expect("user.8", "b"));
    assert_eq!(two, want);
    // Per subject, in publish order (each subject lives in one partition).
    let user8: Vec<_> = of(2).into_iter().filter(|(k, _)| k == "user.8").collect();
    assert_eq!(user8, expect("user.8", "b"));
    assert_eq!(of(3), expect("eu.fr.paris", "c"));
    assert_eq!(got.len(), 80, "nothing else: {got:?}");
    assert!(matches!(
        others[0],
        Event::Subscribed {
            subscription_id: 1,
            ..
        }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_catches_up_from_the_log_without_slowing_others() {
    let config = PushConfig {
        queue_bytes: 4096,
        ..PushConfig::default()
    };
    let f = fixture(config);
    let mut slow = f.engine.open_session(Credit::default()).expect("slow");
    let mut fast = f.engine.open_session(Credit::default()).expect("fast");
    slow.subscribe(request(1, "k.>", Start::Now, AckMode::None))
        .await
        .expect("slow sub");
    fast.subscribe(request(1, "k.>", Start::Now, AckMode::None))
        .await
        .expect("fast sub");
    let value = "x".repeat(200);
    let reader = tokio::spawn(async move {
        let (got, _) = drain(&fast, 3000).await;
        got
    });
    for i in 0..3000 {
        publish(&f.engine, &format!("k.{}", i % 5), &format!("{i}:{value}")).await;
    }
    let fast_got = reader.await.expect("reader");
    assert_eq!(
        fast_got.len(),
        3000,
        "the fast subscriber got everything live"
    );
    // The slow one never read: its queue stayed within its bound.
    assert!(
        slow.outbox().queued_bytes() <= 4096 + 512,
        "queue {}",
        slow.outbox().queued_bytes()
    );
    assert!(
        f.engine
            .stats()
            .overflows
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    // Now it reads: everything arrives, in order per subject, once.
    let (slow_got, others) = drain(&slow, 3000).await;
    assert_eq!(slow_got.len(), 3000);
    let mut by_key: HashMap<String, Vec<u32>> = HashMap::new();
    for (_, key, value) in &slow_got {
        let n: u32 = value
            .split(':')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("n");
        by_key.entry(key.clone()).or_default().push(n);
    }
    for (key, ns) in by_key {
        let expected: Vec<u32> = (0..3000)
            .filter(|i| format!("k.{}", i % 5) == key)
            .collect();
        assert_eq!(ns, expected, "subject {key}");
    }
    assert!(others
        .iter()
        .any(|e| matches!(e, Event::State { live: false, .. })));
    let _ = slow
        .subscribe(request(9, "z", Start::Now, AckMode::None))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_token_continues_right_after_the_last_ack() {
    let f = fixture(PushConfig::default());
    for i in 0..10 {
        publish(&f.engine, "acct.1", &format!("{i}")).await;
    }
    let token = {
        let mut session = f.engine.open_session(Credit::default()).expect("session");
        session
            .subscribe(request(5, "acct.1", Start::Earliest, AckMode::Cumulative))
            .await
            .expect("subscribe");
        let (got, others) = drain(&session, 10).await;
        assert_eq!(got.len(), 10);
        let Some(Event::Subscribed { .. }) = others.first() else {
            panic!("{others:?}")
        };
        // Acknowledge the first four only.
        let (partition, base) = {
            let p = herald_client::partitioner::partition_for_key(b"acct.1", 3);
            (
                p,
                f.broker
                    .topic("orders")
                    .expect("topic")
                    .partition(p as i32)
                    .expect("p")
                    .watermarks()
                    .high_watermark
                    - 10,
            )
        };
        assert!(matches!(
            session.ack(5, partition, base + 10),
            Err(herald_push::AckError::NotDelivered { .. })
        ));
        session.ack(5, partition, base + 3).expect("ack")
    };
    for i in 10..15 {
        publish(&f.engine, "acct.1", &format!("{i}")).await;
    }
    let mut again = f.engine.open_session(Credit::default()).expect("again");
    assert_eq!(again.resume(&token).await.expect("resume"), 5);
    let (got, _) = drain(&again, 11).await;
    let values: Vec<String> = got.into_iter().map(|d| d.2).collect();
    let expected: Vec<String> = (4..15).map(|i| i.to_string()).collect();
    assert_eq!(values, expected);

    // A forged token, and one for another selector, are refused.
    let mut forged = token.clone();
    forged[10] ^= 0xff;
    let mut third = f.engine.open_session(Credit::default()).expect("third");
    assert!(matches!(
        third.resume(&forged).await,
        Err(SubscribeError::InvalidToken(TokenError::Forged))
    ));
    assert!(matches!(
        third
            .subscribe(request(
                6,
                "acct.2",
                Start::Token(token.clone()),
                AckMode::Cumulative
            ))
            .await,
        Err(SubscribeError::StaleToken(_))
    ));
    // After the topic is deleted and created again, the token is stale.
    f.broker.delete_topic("orders").expect("delete");
    f.broker
        .create_topic("orders", Some(3), &[], false)
        .expect("again");
    assert!(matches!(
        third.resume(&token).await,
        Err(SubscribeError::StaleToken(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_removed_before_they_were_read_are_reported_as_a_gap() {
    let f = fixture(PushConfig::default());
    let (partition, _) = publish(&f.engine, "g.1", "0").await;
    for i in 1..10 {
        publish(&f.engine, "g.1", &i.to_string()).await;
    }
    let log = f
        .broker
        .topic("orders")
        .expect("topic")
        .partition(partition as i32)
        .expect("partition");
    let end = log.watermarks().high_watermark;
    log.truncate_before(end - 3).await.expect("truncate");
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    let mut offsets = HashMap::new();
    offsets.insert(partition, end - 10);
    session
        .subscribe(request(1, "g.1", Start::Offsets(offsets), AckMode::None))
        .await
        .expect("subscribe");
    let (got, others) = drain(&session, 3).await;
    let values: Vec<_> = got.into_iter().map(|d| d.2).collect();
    assert_eq!(values, vec!["7", "8", "9"]);
    assert!(
        others.iter().any(|e| matches!(
            e,
            Event::Gap { reason: GapReason::Retention, from_offset, to_offset, .. }
                if *from_offset == end - 10 && *to_offset == end - 3
        )),
        "{others:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_refuse_cleanly() {
    let config = PushConfig {
        max_sessions: 1,
        max_subscriptions_per_session: 2,
        ..PushConfig::default()
    };
    let f = fixture(config);
    let mut session = f.engine.open_session(Credit::default()).expect("first");
    assert!(f.engine.open_session(Credit::default()).is_err());
    session
        .subscribe(request(1, "a", Start::Now, AckMode::None))
        .await
        .expect("1");
    assert!(matches!(
        session
            .subscribe(request(1, "b", Start::Now, AckMode::None))
            .await,
        Err(SubscribeError::DuplicateId(1))
    ));
    session
        .subscribe(request(2, "b", Start::Now, AckMode::None))
        .await
        .expect("2");
    assert!(matches!(
        session
            .subscribe(request(3, "c", Start::Now, AckMode::None))
            .await,
        Err(SubscribeError::TooManySubscriptions { max: 2 })
    ));
    let mut unknown = request(4, "c", Start::Now, AckMode::None);
    unknown.topic = "nope".into();
    session.unsubscribe(1);
    assert!(matches!(
        session.subscribe(unknown).await,
        Err(SubscribeError::UnknownTopic(_))
    ));
    drop(session);
    assert!(
        f.engine.open_session(Credit::default()).is_ok(),
        "a closed session frees its place"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_subscription_continues_where_it_left_off_without_a_token() {
    let f = fixture(PushConfig::default());
    for i in 0..6 {
        publish(&f.engine, "named.1", &i.to_string()).await;
    }
    let partition = herald_client::partitioner::partition_for_key(b"named.1", 3);
    let named = |start: Start| SubscribeRequest {
        name: Some("billing-worker".into()),
        ..request(1, "named.1", start, AckMode::Cumulative)
    };
    {
        let mut session = f.engine.open_session(Credit::default()).expect("session");
        session
            .subscribe(named(Start::Earliest))
            .await
            .expect("subscribe");
        let (got, _) = drain(&session, 6).await;
        assert_eq!(got.len(), 6);
        let base = f
            .broker
            .topic("orders")
            .expect("topic")
            .partition(partition as i32)
            .expect("p")
            .watermarks()
            .high_watermark
            - 6;
        session.ack(1, partition, base + 2).expect("ack");
    }
    // The position is stored as the session ends: wait for it to land.
    let mut stored = HashMap::new();
    for _ in 0..100 {
        stored = herald_push::stored_positions(&f.broker, "billing-worker", "orders")
            .await
            .expect("stored");
        if !stored.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stored.len(), 3, "every partition's position: {stored:?}");
    let mut again = f.engine.open_session(Credit::default()).expect("again");
    again
        .subscribe(named(Start::Stored))
        .await
        .expect("by name");
    let (got, _) = drain(&again, 3).await;
    let values: Vec<String> = got.into_iter().map(|d| d.2).collect();
    assert_eq!(values, vec!["3", "4", "5"]);
    let mut bad = named(Start::Stored);
    bad.id = 2;
    bad.name = Some("no spaces allowed".into());
    assert!(matches!(
        again.subscribe(bad).await,
        Err(SubscribeError::Invalid(_))
    ));
}

/// The hand-over between live delivery and catch-up, exercised hard: a
/// queue of a few deliveries, a reader that drains in bursts with pauses,
/// records arriving all along. Every subject's records must arrive once
/// each, in order, across hundreds of overflows and rejoins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_and_rejoin_never_skip_or_repeat_a_record() {
    let config = PushConfig {
        queue_bytes: 512,
        ..PushConfig::default()
    };
    let f = fixture(config);
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    session
        .subscribe(request(1, "h.*", Start::Now, AckMode::None))
        .await
        .expect("subscribe");
    let per_key = 400u32;
    let keys = 6u32;
    let engine = Arc::clone(&f.engine);
    let publisher = tokio::spawn(async move {
        for i in 0..per_key {
            for k in 0..keys {
                publish(&engine, &format!("h.{k}"), &format!("{i}")).await;
            }
            // A steady trickle the reader outpaces, except while it pauses.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let mut seen: HashMap<String, Vec<u32>> = HashMap::new();
    let mut total = 0;
    let mut bursts = 0u32;
    while total < per_key * keys {
        let taken = tokio::time::timeout(Duration::from_secs(10), session.outbox().take(200)).await;
        let Ok(Some(events)) = taken else { break };
        for event in events {
            if let Event::Delivery(d) = event {
                let key = String::from_utf8_lossy(d.record.key.as_deref().unwrap_or_default())
                    .into_owned();
                let n: u32 = String::from_utf8_lossy(d.record.value.as_deref().unwrap_or_default())
                    .parse()
                    .expect("number");
                seen.entry(key).or_default().push(n);
                total += 1;
            }
        }
        bursts += 1;
        // Pauses until the queue has overflowed or filled (not for a fixed
        // time, which a loaded machine may not fill): the cursors overflow,
        // catch up from the log, and rejoin, again and again.
        if bursts.is_multiple_of(10) && total < per_key * keys / 2 {
            let overflowed = || {
                f.engine
                    .stats()
                    .overflows
                    .load(std::sync::atomic::Ordering::Relaxed)
            };
            let before = overflowed();
            let give_up = tokio::time::Instant::now() + Duration::from_secs(2);
            // A cursor already catching up cannot overflow again; its
            // reader fills the queue instead.
            let full = || session.outbox().queued_bytes() > 400;
            while overflowed() == before && !full() && tokio::time::Instant::now() < give_up {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
    publisher.await.expect("publisher");
    let overflows = f
        .engine
        .stats()
        .overflows
        .load(std::sync::atomic::Ordering::Relaxed);
    for k in 0..keys {
        let got = seen.remove(&format!("h.{k}")).unwrap_or_default();
        assert_eq!(
            got,
            (0..per_key).collect::<Vec<_>>(),
            "subject h.{k} after {overflows} overflows"
        );
    }
    assert!(
        overflows > 10,
        "the test should force many overflows, saw {overflows}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_per_subject_starts_with_each_subjects_latest_records() {
    let f = fixture(PushConfig::default());
    // Two subjects in the same partition would make the pattern case
    // trivial; these land wherever the partitioner puts them.
    for i in 0..10 {
        publish(&f.engine, "last.a", &format!("a{i}")).await;
        if i % 3 == 0 {
            publish(&f.engine, "last.b", &format!("b{i}")).await;
        }
    }
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    session
        .subscribe(request(
            1,
            "last.a",
            Start::LastPerSubject(4),
            AckMode::None,
        ))
        .await
        .expect("literal");
    let (got, _) = drain(&session, 4).await;
    let values: Vec<String> = got.into_iter().map(|d| d.2).collect();
    assert_eq!(
        values,
        vec!["a6", "a7", "a8", "a9"],
        "exactly the last four"
    );

    let mut patterned = f.engine.open_session(Credit::default()).expect("session");
    patterned
        .subscribe(request(
            2,
            "last.*",
            Start::LastPerSubject(2),
            AckMode::None,
        ))
        .await
        .expect("pattern");
    let (got, _) = drain(&patterned, 100).await;
    let of = |key: &str| -> Vec<String> {
        got.iter()
            .filter(|d| d.1 == key)
            .map(|d| d.2.clone())
            .collect()
    };
    let (a, b) = (of("last.a"), of("last.b"));
    // At least the last two of each, and each a suffix of its subject.
    assert!(
        a.len() >= 2 && a.ends_with(&["a8".to_owned(), "a9".to_owned()]),
        "{a:?}"
    );
    assert!(
        b.len() >= 2 && b.ends_with(&["b6".to_owned(), "b9".to_owned()]),
        "{b:?}"
    );
    let all_a: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    assert!(all_a.ends_with(&a), "{a:?} is not a suffix");
}

async fn publish_with(
    engine: &PushEngine,
    key: &str,
    value: &str,
    headers: &[(&str, &str)],
) -> (u32, u64) {
    let published = engine
        .publish(
            &mut herald_push::Identity::anonymous(""),
            PublishRecord {
                topic: "orders".into(),
                key: Some(key.as_bytes().to_vec()),
                value: Some(value.as_bytes().to_vec()),
                headers: headers
                    .iter()
                    .map(|(k, v)| (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec())))
                    .collect(),
                ..Default::default()
            },
        )
        .await
        .expect("publish");
    (published.partition, published.offset)
}

fn selective(id: u64, start: Start, filter: Option<&str>, attributes: &[&str]) -> SubscribeRequest {
    SubscribeRequest {
        selection: Selection::new(
            filter,
            herald_filter::Attributes::new(attributes).expect("attributes"),
        )
        .expect("filter"),
        ..request(id, "sel.*", start, AckMode::None)
    }
}

/// Six records of one subject, differing in their headers.
async fn publish_six(engine: &PushEngine, prefix: &str) {
    let records: [&[(&str, &str)]; 6] = [
        &[("region", "eu")],
        &[("region", "us")],
        &[("region", "eu"), ("herald.audience", "gold")],
        &[("region", "eu"), ("herald.audience", "silver, bronze")],
        &[],
        &[("region", "eu"), ("amount", "150")],
    ];
    for (i, headers) in records.iter().enumerate() {
        publish_with(engine, "sel.1", &format!("{prefix}{i}"), headers).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_and_audiences_select_the_same_records_on_catch_up_and_live() {
    let f = fixture(PushConfig::default());
    publish_six(&f.engine, "old").await;
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    let eu = r#"header.region == "eu""#;
    let big_or_bare = "header.amount > 100 or not exists header.region";
    session
        .subscribe(selective(1, Start::Earliest, Some(eu), &[]))
        .await
        .expect("filter");
    session
        .subscribe(selective(2, Start::Earliest, None, &["gold"]))
        .await
        .expect("attributes");
    session
        .subscribe(selective(3, Start::Earliest, Some(big_or_bare), &[]))
        .await
        .expect("or");
    // Catch-up: what was stored before the subscriptions.
    let (old, _) = drain(&session, 2 + 5 + 2).await;
    publish_six(&f.engine, "new").await;
    let (new, _) = drain(&session, 2 + 5 + 2).await;
    for (got, prefix) in [(old, "old"), (new, "new")] {
        let of = |id: u64| -> Vec<String> {
            got.iter()
                .filter(|d| d.0 == id)
                .map(|d| d.2.clone())
                .collect()
        };
        let want = |indexes: &[u32]| -> Vec<String> {
            indexes.iter().map(|i| format!("{prefix}{i}")).collect()
        };
        // No attributes: records with an audience never arrive.
        assert_eq!(of(1), want(&[0, 5]), "{prefix}");
        // "gold": every record without an audience, and the gold one.
        assert_eq!(of(2), want(&[0, 1, 2, 4, 5]), "{prefix}");
        assert_eq!(of(3), want(&[4, 5]), "{prefix}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_filtered_out_are_covered_by_the_ack_before_them() {
    let f = fixture(PushConfig::default());
    let eu = r#"header.region == "eu""#;
    let subscribe = |start: Start| SubscribeRequest {
        ack_mode: AckMode::Cumulative,
        ..selective(7, start, Some(eu), &[])
    };
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    session
        .subscribe(subscribe(Start::Now))
        .await
        .expect("subscribe");
    let (partition, first) = publish_with(&f.engine, "sel.1", "e0", &[("region", "eu")]).await;
    publish_with(&f.engine, "sel.1", "u1", &[("region", "us")]).await;
    let (_, last_filtered) = publish_with(&f.engine, "sel.1", "u2", &[("region", "us")]).await;
    let (got, _) = drain(&session, 1).await;
    assert_eq!(got.iter().map(|d| d.2.as_str()).collect::<Vec<_>>(), ["e0"]);
    // Give the tailer time to pass over the two filtered records.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let token = session.ack(7, partition, first).expect("ack");
    let point = herald_push::ResumePoint::decode_body(&token[..token.len() - 32]).expect("token");
    let position = point
        .positions
        .iter()
        .find(|p| p.0 == partition)
        .expect("partition")
        .1;
    assert_eq!(
        position,
        last_filtered + 1,
        "the ack of e0 covers u1 and u2"
    );
    assert_eq!(point.filter.as_deref(), Some(eu));
    drop(session);

    // The resumed subscription keeps its filter and starts after u2.
    publish_with(&f.engine, "sel.1", "u3", &[("region", "us")]).await;
    publish_with(&f.engine, "sel.1", "e4", &[("region", "eu")]).await;
    let mut again = f.engine.open_session(Credit::default()).expect("again");
    assert_eq!(again.resume(&token).await.expect("resume"), 7);
    let (got, _) = drain(&again, 2).await;
    assert_eq!(got.iter().map(|d| d.2.as_str()).collect::<Vec<_>>(), ["e4"]);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

fn expired_gaps(events: &[Event], id: u64) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Gap {
                subscription_id,
                from_offset,
                to_offset,
                reason: GapReason::Expired,
                ..
            } if *subscription_id == id => Some((*from_offset, *to_offset)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_records_are_never_pushed_and_told_only_when_asked() {
    let f = fixture(PushConfig::default());
    let past = (now_ms() - 1).to_string();
    let (_, a) = publish_with(&f.engine, "exp.1", "a", &[("herald.ttl-ms", "1")]).await;
    publish_with(&f.engine, "exp.1", "b", &[]).await;
    let (_, c) = publish_with(&f.engine, "exp.1", "c", &[("herald.expires-at", &past)]).await;
    let (_, d) = publish_with(&f.engine, "exp.1", "d", &[("herald.ttl-ms", "60000")]).await;
    publish_with(&f.engine, "exp.1", "e", &[("herald.ttl-ms", "soon")]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    session
        .subscribe(request(1, "exp.1", Start::Earliest, AckMode::None))
        .await
        .expect("silent");
    session
        .subscribe(SubscribeRequest {
            report_expired: true,
            ..request(2, "exp.1", Start::Earliest, AckMode::None)
        })
        .await
        .expect("told");
    // Catch-up: a and c expired; a malformed header expires nothing.
    let (got, others) = drain(&session, 6).await;
    let of = |got: &[(u64, String, String)], id: u64| -> Vec<String> {
        got.iter()
            .filter(|d| d.0 == id)
            .map(|d| d.2.clone())
            .collect()
    };
    assert_eq!(of(&got, 1), ["b", "d", "e"]);
    assert_eq!(of(&got, 2), ["b", "d", "e"]);
    assert_eq!(expired_gaps(&others, 1), []);
    assert_eq!(expired_gaps(&others, 2), [(a, a + 1), (c, c + 1)]);
    assert!(d > c);

    // Live: one already past its expiry, and one past the topic's
    // message.ttl.ms (its timestamp is a minute old).
    f.broker
        .alter_topic_config(
            "orders",
            &[herald_broker::ConfigChange::Set {
                key: "message.ttl.ms".into(),
                value: "1000".into(),
            }],
            false,
            false,
        )
        .expect("message.ttl.ms");
    let (_, g) = publish_with(&f.engine, "exp.1", "g", &[("herald.expires-at", &past)]).await;
    let old = f
        .engine
        .publish(
            &mut herald_push::Identity::anonymous(""),
            PublishRecord {
                topic: "orders".into(),
                key: Some(b"exp.1".to_vec()),
                value: Some(b"h".to_vec()),
                timestamp_ms: Some(now_ms() - 60_000),
                ..Default::default()
            },
        )
        .await
        .expect("publish");
    publish_with(&f.engine, "exp.1", "i", &[("herald.ttl-ms", "60000")]).await;
    let (got, others) = drain(&session, 2).await;
    assert_eq!(of(&got, 1), ["i"]);
    assert_eq!(of(&got, 2), ["i"]);
    assert_eq!(expired_gaps(&others, 1), []);
    assert_eq!(
        expired_gaps(&others, 2),
        [(g, g + 1), (old.offset, old.offset + 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_priority_record_overtakes_a_normal_backlog_that_keeps_its_order() {
    let f = fixture(PushConfig {
        queue_bytes: 4096,
        ..PushConfig::default()
    });
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    session
        .subscribe(request(1, "pri.1", Start::Now, AckMode::None))
        .await
        .expect("subscribe");
    let first = session.outbox().take(1 << 20).await.expect("open");
    assert!(matches!(first.first(), Some(Event::Subscribed { .. })));
    // A flood the subscriber does not read: its queue fills, its cursor
    // goes back to the log.
    for i in 0..500 {
        publish(&f.engine, "pri.1", &format!("n{i:03}")).await;
    }
    publish_with(&f.engine, "pri.1", "urgent", &[("herald.priority", "high")]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (got, _) = drain(&session, 501).await;
    let values: Vec<&str> = got.iter().map(|d| d.2.as_str()).collect();
    assert_eq!(
        values.first(),
        Some(&"urgent"),
        "first of {} deliveries",
        values.len()
    );
    let normal: Vec<String> = values.iter().skip(1).map(|v| (*v).to_owned()).collect();
    let expected: Vec<String> = (0..500).map(|i| format!("n{i:03}")).collect();
    assert_eq!(normal, expected, "the normal backlog, in order, once");
}

/// Fills a one-partition topic named `topic` with `total` records whose
/// keys cycle through 5,000 subjects, except `rare` at `rare_at`; answers
/// the log's bytes.
async fn fill_busy_topic(
    f: &Fixture,
    topic: &str,
    enable: &str,
    total: u64,
    rare_at: &[u64],
) -> u64 {
    f.broker
        .create_topic(
            topic,
            Some(1),
            &[("subject.filters".into(), enable.into())],
            false,
        )
        .expect("topic");
    let partition = f
        .broker
        .topic(topic)
        .expect("topic")
        .partition(0)
        .expect("partition");
    let value = [b'v'; 100];
    let mut offset = 0;
    while offset < total {
        let mut batch = herald_records::BatchBuilder::new(0);
        for o in offset..(offset + 200).min(total) {
            let key = if rare_at.contains(&o) {
                b"rare".to_vec()
            } else {
                format!("subject.{}", o % 5_000).into_bytes()
            };
            batch.push(herald_records::RecordFields {
                key: Some(&key),
                value: Some(&value),
                ..Default::default()
            });
        }
        let outcome = partition
            .append(&batch.finish().expect("batch"), herald_broker::Acks::Leader)
            .await
            .expect("append");
        offset = outcome.last_offset + 1;
    }
    partition.stats().size_bytes
}

/// How far the subject filters of `topic`-0 reach.
fn indexed_through(f: &Fixture, topic: &str) -> u64 {
    let partition = f
        .broker
        .topic(topic)
        .expect("topic")
        .partition(0)
        .expect("partition");
    partition.subject_index().expect("index").indexed_through()
}

/// Waits until the subject indexer has reached the end of `topic`-0.
async fn indexed(f: &Fixture, topic: &str) {
    let partition = f
        .broker
        .topic(topic)
        .expect("topic")
        .partition(0)
        .expect("partition");
    let index = partition.subject_index().expect("index");
    for _ in 0..500 {
        if index.indexed_through() == partition.watermarks().high_watermark {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the subject indexer did not reach the end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_up_for_one_subject_skips_blocks_without_it() {
    let f = fixture(PushConfig::default());
    let rare_at = [1_000, 70_000, 140_500];
    let total = 150_000;
    let log_bytes = fill_busy_topic(&f, "busy", "true", total, &rare_at).await;
    indexed(&f, "busy").await;
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    let mut rare = request(1, "rare", Start::Earliest, AckMode::None);
    rare.topic = "busy".into();
    session.subscribe(rare).await.expect("subscribe");
    let (got, _) = drain(&session, 3).await;
    assert_eq!(got.len(), 3, "every record of the subject, once: {got:?}");
    let stats = f.engine.stats();
    let read = herald_push::PushStats::get(&stats.catch_up_read_bytes);
    let skipped = herald_push::PushStats::get(&stats.catch_up_skipped_offsets);
    // Three blocks (and a false positive or two) of about 130 KiB each,
    // where a plain catch-up reads all of the log.
    assert!(read < log_bytes / 10, "read {read} of {log_bytes} bytes");
    assert!(
        skipped > total * 9 / 10,
        "skipped {skipped} of {total} offsets"
    );
    // A pattern cannot be probed: it reads everything and finds the same.
    let mut pattern = request(2, ">", Start::Earliest, AckMode::None);
    pattern.topic = "busy".into();
    session.subscribe(pattern).await.expect("subscribe");
    let (all, _) = drain(&session, total as usize).await;
    assert_eq!(all.len() as u64, total);
    assert!(herald_push::PushStats::get(&stats.catch_up_read_bytes) >= read + log_bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_filters_off_a_catch_up_reads_everything_and_finds_the_same() {
    let f = fixture(PushConfig::default());
    let rare_at = [10, 99_999];
    let log_bytes = fill_busy_topic(&f, "plain", "false", 100_000, &rare_at).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(indexed_through(&f, "plain"), 0);
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    let mut rare = request(1, "rare", Start::Earliest, AckMode::None);
    rare.topic = "plain".into();
    session.subscribe(rare).await.expect("subscribe");
    let (got, _) = drain(&session, 2).await;
    assert_eq!(got.len(), 2);
    let stats = f.engine.stats();
    assert!(herald_push::PushStats::get(&stats.catch_up_read_bytes) >= log_bytes);
    assert_eq!(
        herald_push::PushStats::get(&stats.catch_up_skipped_offsets),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_topics_filters_are_built_from_its_first_subscription_on() {
    let f = fixture(PushConfig::default());
    fill_busy_topic(&f, "kafka-only", "auto", 20_000, &[5]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Nobody pushes from it: nothing is spent on it.
    assert_eq!(indexed_through(&f, "kafka-only"), 0);
    let mut session = f.engine.open_session(Credit::default()).expect("session");
    let mut other = request(1, "someone.else", Start::Now, AckMode::None);
    other.topic = "kafka-only".into();
    session.subscribe(other).await.expect("subscribe");
    // The history is indexed in the background once someone does.
    indexed(&f, "kafka-only").await;
}
