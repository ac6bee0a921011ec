//! Readers on the delivery path while subscriptions come and go: a reader
//! never misses a route that stays in place, and never sees a subscriber
//! routed to another key.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use herald_subjects::{RoutingTable, Selector};

#[test]
fn readers_see_stable_routes_and_nothing_foreign_while_writers_churn() {
    let table = Arc::new(RoutingTable::<u32>::new());
    // Stable routes: subscriber 1 on the literal, 2 on the pattern.
    let literal = Selector::parse(b"user.42").expect("literal");
    let pattern = Selector::parse(b"user.*").expect("pattern");
    table.insert(&literal, 1);
    table.insert(&pattern, 2);
    let stop = Arc::new(AtomicBool::new(false));

    let writer = {
        let (table, stop) = (Arc::clone(&table), Arc::clone(&stop));
        std::thread::spawn(move || {
            // Churn: subscribers 100.. on other subjects and patterns, and on
            // the same ones, added and removed.
            for round in 0..2_000u32 {
                let sub = 100 + round % 50;
                let other = Selector::parse(format!("user.{round}").as_bytes()).expect("literal");
                let deep =
                    Selector::parse(format!("user.{}.>", round % 7).as_bytes()).expect("pattern");
                table.insert(&other, sub);
                table.insert(&deep, sub);
                table.insert(&literal, sub);
                table.remove(&other, &sub);
                table.remove(&deep, &sub);
                table.remove(&literal, &sub);
            }
            stop.store(true, Ordering::Release);
        })
    };

    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (table, stop) = (Arc::clone(&table), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut lookups = 0u64;
                while !stop.load(Ordering::Acquire) || lookups < 1_000 {
                    let mut seen = Vec::new();
                    table.for_each_match(b"user.42", |&s| seen.push(s));
                    assert!(
                        seen.contains(&1) && seen.contains(&2),
                        "stable routes missing: {seen:?}"
                    );
                    // Only the stable subscribers and churners of `user.42`
                    // itself (literal or `user.*`) may appear.
                    assert!(seen
                        .iter()
                        .all(|&s| s == 1 || s == 2 || (100..150).contains(&s)));
                    let mut foreign = Vec::new();
                    table.for_each_match(b"order.42", |&s| foreign.push(s));
                    assert!(foreign.is_empty(), "routed to a foreign key: {foreign:?}");
                    lookups += 1;
                }
                lookups
            })
        })
        .collect();

    writer.join().expect("writer");
    for reader in readers {
        assert!(reader.join().expect("reader") >= 1_000);
    }
    let size = table.size();
    assert_eq!((size.literal_routes, size.pattern_routes), (1, 1));
}

#[test]
fn a_subject_added_before_a_lookup_is_found_while_the_table_grows() {
    let table = Arc::new(RoutingTable::<u32>::new());
    // Subjects are added in order; `added` says how many are in, so every
    // subject below it was inserted before a reader loads it.
    let added = Arc::new(std::sync::atomic::AtomicU32::new(0));
    const SUBJECTS: u32 = 20_000;
    let writer = {
        let (table, added) = (Arc::clone(&table), Arc::clone(&added));
        std::thread::spawn(move || {
            for i in 0..SUBJECTS {
                let subject = Selector::parse(format!("s.{i}").as_bytes()).expect("literal");
                table.insert(&subject, i);
                added.store(i + 1, Ordering::Release);
            }
        })
    };
    let readers: Vec<_> = (0..2u32)
        .map(|seed| {
            let (table, added) = (Arc::clone(&table), Arc::clone(&added));
            std::thread::spawn(move || {
                let mut state = seed.wrapping_mul(2_654_435_761) | 1;
                let mut checked = 0u64;
                loop {
                    let done = added.load(Ordering::Acquire);
                    if done == 0 {
                        continue;
                    }
                    // One reader per "batch", as a tailer holds it.
                    let reader = table.reader();
                    for _ in 0..64 {
                        state ^= state << 13;
                        state ^= state >> 17;
                        state ^= state << 5;
                        let i = if state % 2 == 0 {
                            done - 1
                        } else {
                            state % done
                        };
                        let mut seen = Vec::new();
                        reader.for_each_match(format!("s.{i}").as_bytes(), |&s| seen.push(s));
                        assert_eq!(seen, vec![i], "subject s.{i} of {done} added");
                        checked += 1;
                    }
                    if done == SUBJECTS {
                        return checked;
                    }
                }
            })
        })
        .collect();
    writer.join().expect("writer");
    for reader in readers {
        assert!(reader.join().expect("reader") > 0);
    }
}
