//! loom models of the literal subjects' map (`literals`): a reader probing
//! while the one writer inserts, replaces, removes and rebuilds.
//!
//! Run with `RUSTFLAGS="--cfg herald_loom" cargo test -p herald-subjects --release --lib loom`.
//! Hashes are chosen so that every key has the same home slot: each probe
//! passes the others' slots, tombstones included. The reader and the
//! writer are both spawned threads: with the reader on the model's main
//! thread, loom ran a single interleaving of these models (and missed a
//! rebuild that published its array before filling it).

use loom::sync::Arc;
use loom::thread;

use crate::literals::{subscribers_of, LiteralMap};
use crate::subscribers::Subscribers;

/// One home for every key (the top bits pick it), told apart by the rest.
fn hash(key: u8) -> u64 {
    u64::from(key) << 8
}

fn lookup(map: &LiteralMap<u32>, key: u8) -> Option<Vec<u32>> {
    subscribers_of(map, hash(key), &[key])
}

/// Runs `write` and `read` on two threads of the model, against `map`,
/// and waits for both.
fn race(
    map: &Arc<LiteralMap<u32>>,
    write: impl FnOnce(&LiteralMap<u32>) + Send + 'static,
    read: impl FnOnce(&LiteralMap<u32>) + Send + 'static,
) {
    let threads = [
        Box::new(write) as Box<dyn FnOnce(&LiteralMap<u32>) + Send>,
        Box::new(read),
    ]
    .map(|work| {
        let map = Arc::clone(map);
        thread::spawn(move || work(&map))
    });
    for thread in threads {
        thread.join().expect("a model thread");
    }
}

/// A map holding key 1 (subscriber 10) and, after it on the same probe,
/// key 2 (subscriber 20).
fn keys_one_and_two() -> Arc<LiteralMap<u32>> {
    let map = Arc::new(LiteralMap::new());
    map.insert(hash(1), &[1], Subscribers::one(10));
    map.insert(hash(2), &[2], Subscribers::one(20));
    map
}

fn bounded(preemptions: usize) -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder
}

/// A key held throughout is found by every lookup while the key before
/// it on the probe is removed and another key is added into the
/// tombstone left behind; the added key is found with its own list or not
/// at all.
#[test]
fn loom_a_held_key_is_found_while_its_probe_changes() {
    bounded(3).check(|| {
        let map = keys_one_and_two();
        race(
            &map,
            |map| {
                assert!(map.remove(hash(1), &[1]));
                map.insert(hash(3), &[3], Subscribers::one(30));
            },
            |map| {
                for _ in 0..2 {
                    assert_eq!(lookup(map, 2), Some(vec![20]));
                    assert!(matches!(lookup(map, 3).as_deref(), None | Some([30])));
                }
            },
        );
        assert_eq!(lookup(&map, 1), None);
        assert_eq!(lookup(&map, 3), Some(vec![30]));
    });
}

/// A key removed and added again (into its own tombstone) is seen with
/// its old list, with none, or with its new one: never another key's.
#[test]
fn loom_a_key_added_back_into_its_tombstone_is_never_confused() {
    bounded(3).check(|| {
        let map = keys_one_and_two();
        race(
            &map,
            |map| {
                assert!(map.remove(hash(1), &[1]));
                map.insert(hash(1), &[1], Subscribers::one(11));
                map.insert(hash(2), &[2], Subscribers::one(21));
            },
            |map| {
                let first = lookup(map, 1);
                assert!(matches!(first.as_deref(), None | Some([10]) | Some([11])));
                let second = lookup(map, 2);
                assert!(matches!(second.as_deref(), Some([20]) | Some([21])));
            },
        );
        assert_eq!(lookup(&map, 1), Some(vec![11]));
        assert_eq!(lookup(&map, 2), Some(vec![21]));
    });
}

/// Readers taken at any point of a write that outgrows the array find
/// every key held throughout, in the array they started on.
#[test]
fn loom_readers_find_held_keys_across_a_rebuild() {
    bounded(2).check(|| {
        let map = Arc::new(LiteralMap::new());
        // Half the first array's sixteen slots: the next key rebuilds it.
        for key in 1..=8u8 {
            map.insert(hash(key), &[key], Subscribers::one(u32::from(key)));
        }
        race(
            &map,
            |map| map.insert(hash(9), &[9], Subscribers::one(9)),
            |map| {
                let early = map.reader();
                assert_eq!(lookup(map, 7), Some(vec![7]));
                assert!(matches!(lookup(map, 9).as_deref(), None | Some([9])));
                assert_eq!(early.get(hash(7), &[7]).and_then(|s| s.first()), Some(&7));
            },
        );
        assert_eq!(lookup(&map, 9), Some(vec![9]));
        assert_eq!(map.len(), 9);
    });
}
