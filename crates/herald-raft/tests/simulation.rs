//! A deterministic simulation of a herald cluster's Raft groups: three
//! nodes, each running a metadata-like group (its entries are commands an
//! apply hook executes) and two partition groups, over an in-process
//! network that delays, loses and partitions messages, while nodes crash
//! and restart from their files. Everything runs on one thread with
//! tokio's paused clock, so a run of simulated minutes takes seconds, and
//! every random choice herald makes (the faults, the network's delays and
//! losses, and Raft's own election timeouts and tick phases, through
//! `herald_raft::runtime`) comes from one seed.
//!
//! A seed replays its fault schedule and its random draws, but not always
//! the exact interleaving: openraft's `futures::select!` picks among ready
//! futures with a generator of futures-util's that cannot be seeded, and
//! the logs' flushes complete on blocking threads. `HERALD_SIM_TRACE`
//! writes a run's story (faults, acknowledgements) to a file for study.
//!
//! What it checks, for every seed:
//! - at most one leader per term in every group;
//! - every acknowledged write is in every replica's final log, at the
//!   offset it was acknowledged with, unchanged, and acknowledged writes
//!   are in the order they were made, except those an acknowledged
//!   DeleteRecords (one of the faults: it moves a partition's log start,
//!   and replicas that missed the entries below install a snapshot)
//!   deleted; the log start is never below such a delete;
//! - every replica's committed log is byte-identical, from one log start;
//! - every incarnation of every node applied the metadata group's entries
//!   in one order, with no gap.
//!
//! `HERALD_SIM_SEEDS=N` runs N seeds (default 4), `HERALD_SIM_SEED=S` only
//! seed S, and `HERALD_SIM_SECONDS` sets each run's simulated length
//! (default 30); `scripts/raft-simulation.sh` runs the long version.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use herald_log::{FlushPolicy, LogConfig};
use herald_raft::network::{CallError, Courier, Delivery, GroupId, GroupRouter};
use herald_raft::state_machine::ApplyHook;
use herald_raft::{PartitionReplica, RaftTiming};
use openraft::BasicNode;
use tokio::time::Instant;

const NODES: u64 = 3;
/// The group whose entries are commands, like the cluster's metadata.
const METADATA: GroupId = 0;
/// The partition groups.
const PARTITIONS: [GroupId; 2] = [1, 2];

fn groups() -> impl Iterator<Item = GroupId> {
    std::iter::once(METADATA).chain(PARTITIONS)
}

/// SplitMix64: the simulation's one source of randomness.
#[derive(Debug, Clone)]
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low + 1))
    }
}

/// The simulated network: which nodes are up, which links are cut, how
/// long a message takes and how often one is lost.
struct Net {
    state: Mutex<NetState>,
}

struct NetState {
    dice: Dice,
    routers: HashMap<u64, GroupRouter>,
    cut: BTreeSet<(u64, u64)>,
    loss_per_mille: u64,
}

fn node_addr(id: u64) -> String {
    format!("node-{id}")
}

fn node_of(addr: &str) -> Option<u64> {
    addr.strip_prefix("node-")?.parse().ok()
}

fn link(a: u64, b: u64) -> (u64, u64) {
    (a.min(b), a.max(b))
}

impl Net {
    /// A message's trip from `from` to `to`: its delay, and whether it
    /// arrives (`None`: lost, cut off, or the receiver is down).
    fn trip(&self, from: u64, to: u64) -> (Duration, Option<GroupRouter>) {
        let mut state = self.state.lock().unwrap();
        let delay = state.dice.millis(0, 5);
        let loss = state.loss_per_mille;
        let lost = state.dice.chance(loss);
        let router = (!lost && !state.cut.contains(&link(from, to)))
            .then(|| state.routers.get(&to).cloned())
            .flatten();
        (delay, router)
    }

    fn is_up(&self, id: u64) -> bool {
        self.state.lock().unwrap().routers.contains_key(&id)
    }
}

/// One node's end of the simulated network.
struct Endpoint {
    node: u64,
    net: Arc<Net>,
}

fn unreachable(addr: &str) -> CallError {
    CallError::Connect {
        addr: addr.to_owned(),
        source: io::Error::new(io::ErrorKind::ConnectionRefused, "simulated"),
    }
}

impl Courier for Endpoint {
    fn deliver(&self, addr: &str, group: GroupId, request: Vec<u8>) -> Delivery {
        let (net, from, addr) = (Arc::clone(&self.net), self.node, addr.to_owned());
        Box::pin(async move {
            let to = node_of(&addr).ok_or_else(|| unreachable(&addr))?;
            let (delay, router) = net.trip(from, to);
            tokio::time::sleep(delay).await;
            let router = router.ok_or_else(|| unreachable(&addr))?;
            let answer = router
                .answer(group, &request)
                .await
                .map_err(|source| CallError::Io {
                    addr: addr.clone(),
                    source,
                })?;
            let (delay, back) = net.trip(to, from);
            tokio::time::sleep(delay).await;
            if back.is_none() || !net.is_up(from) {
                return Err(CallError::Io {
                    addr,
                    source: io::Error::new(io::ErrorKind::ConnectionReset, "simulated"),
                });
            }
            Ok(answer)
        })
    }
}

/// What one incarnation of a node applied of the metadata group:
/// (log index, batch bytes).
type Applied = Arc<Mutex<Vec<(u64, Vec<u8>)>>>;

/// An acknowledged write: its tag, the offset it was acknowledged at, and
/// the batch sent.
type Acked = (u64, u64, Vec<u8>);

struct Node {
    id: u64,
    replicas: BTreeMap<GroupId, Arc<PartitionReplica>>,
}

fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 256 * 1024,
        index_interval_bytes: 1024,
        preallocate_bytes: 64 * 1024,
        max_batch_bytes: 64 * 1024,
        flush: FlushPolicy::Never,
        ..LogConfig::default()
    }
}

/// The simulation's world: its nodes, its network and what was observed.
struct World {
    seed: u64,
    net: Arc<Net>,
    nodes: Mutex<BTreeMap<u64, Node>>,
    incarnations: Mutex<Vec<Applied>>,
    /// Every leader seen, by (group, term).
    leaders: Mutex<BTreeMap<(GroupId, u64), u64>>,
    /// Acknowledged writes per group: (tag, base offset, batch).
    acked: Mutex<BTreeMap<GroupId, Vec<Acked>>>,
    /// Writes whose outcome is unknown, per group.
    unknown: Mutex<BTreeMap<GroupId, u64>>,
    /// The furthest log start an acknowledged DeleteRecords asked for,
    /// and how many were acknowledged, per partition group.
    deleted: Mutex<BTreeMap<GroupId, (u64, u64)>>,
    /// What happened, in order, with the simulated time.
    trace: Mutex<Vec<String>>,
    start: Instant,
}

impl World {
    fn note(&self, what: String) {
        let at = self.start.elapsed().as_millis();
        self.trace.lock().unwrap().push(format!("{at:>7} {what}"));
    }

    async fn start_node(&self, id: u64, root: &Path) {
        let router = GroupRouter::with_courier(Arc::new(Endpoint {
            node: id,
            net: Arc::clone(&self.net),
        }));
        let dir = root.join(format!("node-{id}"));
        let applied: Applied = Arc::default();
        self.incarnations.lock().unwrap().push(Arc::clone(&applied));
        let mut replicas = BTreeMap::new();
        for group in groups() {
            let hook: Option<ApplyHook> = (group == METADATA).then(|| {
                let sink = Arc::clone(&applied);
                Arc::new(
                    move |id: &herald_raft::LogId,
                          batch: &herald_raft::RecordBatch,
                          _: Option<herald_raft::Placed>| {
                        sink.lock()
                            .unwrap()
                            .push((id.index, batch.bytes().to_vec()));
                    },
                ) as ApplyHook
            });
            let timing = RaftTiming {
                heartbeat: Duration::from_millis(50),
                election_min: Duration::from_millis(300),
                election_max: Duration::from_millis(600),
                seed: Some(self.seed ^ (id << 32) ^ (group << 48)),
            };
            let replica = PartitionReplica::open_with_hook(
                id,
                group,
                &dir.join(format!("group-{group}")),
                log_config(),
                timing,
                &router,
                hook,
            )
            .await
            .unwrap_or_else(|e| panic!("seed {}: node {id} group {group}: {e}", self.seed));
            replicas.insert(group, Arc::new(replica));
        }
        // Messages reach the node only once all its groups are open.
        self.net.state.lock().unwrap().routers.insert(id, router);
        self.nodes.lock().unwrap().insert(id, Node { id, replicas });
        self.note(format!("node {id} up"));
    }

    /// The node stops at once, as if killed: nothing reaches it from now
    /// on and its groups stop without leaving anything behind but files.
    async fn crash(&self, id: u64) {
        self.net.state.lock().unwrap().routers.remove(&id);
        let Some(node) = self.nodes.lock().unwrap().remove(&id) else {
            return;
        };
        for replica in node.replicas.values() {
            let _ = replica.raft().shutdown().await;
        }
        self.note(format!("node {id} crashed"));
    }

    fn replica(&self, id: u64, group: GroupId) -> Option<Arc<PartitionReplica>> {
        self.nodes
            .lock()
            .unwrap()
            .get(&id)
            .and_then(|n| n.replicas.get(&group).cloned())
    }

    fn up(&self) -> Vec<u64> {
        self.nodes.lock().unwrap().keys().copied().collect()
    }

    /// Records who leads each group now; fails on a second leader of a
    /// term.
    fn watch_leaders(&self) {
        use openraft::async_runtime::WatchReceiver;
        let nodes = self.nodes.lock().unwrap();
        let mut leaders = self.leaders.lock().unwrap();
        for node in nodes.values() {
            for (group, replica) in &node.replicas {
                let metrics = replica.raft().metrics();
                let now = metrics.borrow_watched();
                if now.current_leader != Some(node.id) {
                    continue;
                }
                let seen = leaders.entry((*group, now.current_term)).or_insert(node.id);
                assert_eq!(
                    *seen, node.id,
                    "seed {}: group {group} has two leaders in term {}",
                    self.seed, now.current_term
                );
            }
        }
    }
}

fn batch_of(group: GroupId, tag: u64) -> Vec<u8> {
    let mut value = group.to_be_bytes().to_vec();
    value.extend_from_slice(&tag.to_be_bytes());
    herald_records::testing::batch(1 + (tag % 3) as u32, &value, 1_000 + tag as i64)
}

/// Writes tagged batches to `group`, one at a time, through a random live
/// node (which forwards to the leader), until `stop`.
async fn writer(world: Arc<World>, group: GroupId, stop: Arc<tokio::sync::Notify>, mut dice: Dice) {
    let stopped = stop.notified();
    tokio::pin!(stopped);
    let mut tag = 0u64;
    loop {
        let up = world.up();
        if up.is_empty() {
            tokio::select! {
                biased;
                _ = &mut stopped => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
            }
        }
        let via = up[dice.below(up.len() as u64) as usize];
        let Some(replica) = world.replica(via, group) else {
            continue;
        };
        let batch = batch_of(group, tag);
        let outcome = tokio::select! {
            biased;
            _ = &mut stopped => return,
            outcome = replica.write(Bytes::from(batch.clone()), Duration::from_secs(2)) => outcome,
        };
        match outcome {
            Ok(placed) => {
                world.note(format!("group {group} tag {tag} at {}", placed.base_offset));
                world.acked.lock().unwrap().entry(group).or_default().push((
                    tag,
                    placed.base_offset,
                    batch,
                ));
            }
            Err(e) => {
                world.note(format!("group {group} tag {tag} unknown: {e}"));
                *world.unknown.lock().unwrap().entry(group).or_default() += 1;
            }
        }
        tag += 1;
        tokio::time::sleep(dice.millis(0, 20)).await;
    }
}

/// The faults of one step of the schedule.
async fn inject_fault(world: &World, root: &Path, dice: &mut Dice) {
    let up = world.up();
    let down: Vec<u64> = (1..=NODES).filter(|id| !up.contains(id)).collect();
    match dice.below(12) {
        0 | 1 if !up.is_empty() => {
            let id = up[dice.below(up.len() as u64) as usize];
            world.crash(id).await;
        }
        2 | 3 if !down.is_empty() => {
            let id = down[dice.below(down.len() as u64) as usize];
            world.start_node(id, root).await;
        }
        4 | 5 => {
            // One node cut off from the others.
            let id = 1 + dice.below(NODES);
            let mut state = world.net.state.lock().unwrap();
            for other in (1..=NODES).filter(|o| *o != id) {
                state.cut.insert(link(id, other));
            }
            drop(state);
            world.note(format!("node {id} cut off"));
        }
        6 => {
            // One link cut: the two ends still see the third node.
            let a = 1 + dice.below(NODES);
            let b = 1 + (a + dice.below(NODES - 1)) % NODES;
            world.net.state.lock().unwrap().cut.insert(link(a, b));
            world.note(format!("link {a}-{b} cut"));
        }
        8 | 9 => delete_records(world, dice).await,
        7 => {
            let loss = [0, 50, 200][dice.below(3) as usize];
            world.net.state.lock().unwrap().loss_per_mille = loss;
            world.note(format!("loss {loss}/1000"));
        }
        _ => {
            world.net.state.lock().unwrap().cut.clear();
            world.note("network healed".to_owned());
        }
    }
}

/// A DeleteRecords on a partition group, through whichever live node
/// leads it, at an offset between its log start and its commit point;
/// compaction then drops the entries below on every replica, and a
/// replica that needs them later installs a snapshot.
async fn delete_records(world: &World, dice: &mut Dice) {
    let group = PARTITIONS[dice.below(PARTITIONS.len() as u64) as usize];
    let Some(leader) = world
        .up()
        .into_iter()
        .filter_map(|id| world.replica(id, group))
        .find(|r| r.is_leader())
    else {
        return;
    };
    let start = leader.log_start();
    let commit = *leader.commit_point().borrow();
    let offset = start + dice.below(commit.saturating_sub(start) + 1);
    match tokio::time::timeout(Duration::from_secs(2), leader.delete_records(offset)).await {
        Ok(Ok(now)) => {
            world.note(format!(
                "group {group} deleted before {offset}: starts at {now}"
            ));
            let mut deleted = world.deleted.lock().unwrap();
            let (furthest, count) = deleted.entry(group).or_default();
            *furthest = (*furthest).max(offset);
            *count += 1;
        }
        Ok(Err(e)) => world.note(format!("group {group} delete before {offset} unknown: {e}")),
        Err(_) => world.note(format!(
            "group {group} delete before {offset} unknown: timed out"
        )),
    }
}

/// Every replica's committed log, from where every replica's log starts
/// (none holds a record below another's start), once all commit points,
/// log ends and log starts of the group meet (or `None` while they
/// differ). Returns the log start readers see, and the bytes.
fn settled_log(world: &World, group: GroupId) -> Option<(u64, Vec<u8>)> {
    let nodes = world.nodes.lock().unwrap();
    let starts: BTreeSet<(u64, u64)> = nodes
        .values()
        .map(|n| {
            let replica = &n.replicas[&group];
            (replica.log_start(), replica.log().log_start_offset())
        })
        .collect();
    let [(readers_start, _)] = starts.iter().copied().collect::<Vec<_>>()[..] else {
        return None;
    };
    let mut logs = Vec::new();
    for node in nodes.values() {
        let replica = &node.replicas[&group];
        let end = *replica.commit_point().borrow();
        let log = replica.log();
        if log.high_watermark() != end {
            return None;
        }
        let mut bytes = Vec::new();
        let mut offset = log.log_start_offset();
        while offset < end {
            let slice = log.read(offset, 1 << 20).ok()?;
            bytes.extend_from_slice(&slice.bytes);
            offset = slice.next_offset;
        }
        logs.push((node.id, bytes));
    }
    let (_, first) = logs.first()?;
    logs[1..]
        .iter()
        .all(|(_, bytes)| bytes == first)
        .then(|| (readers_start, first.clone()))
}

/// The outcome of one seed's run.
struct Run {
    trace: Vec<String>,
    acked: usize,
    unknown: u64,
    leaders: usize,
    deletes: u64,
}

fn simulate(seed: u64, seconds: u64) -> Run {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(simulate_on(seed, seconds))
}

async fn simulate_on(seed: u64, seconds: u64) -> Run {
    // Memory-backed when the machine has it: the logs' flushes are real
    // system calls, and on a disk they would dominate the run's time.
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let mut dice = Dice(seed);
    let world = Arc::new(World {
        seed,
        net: Arc::new(Net {
            state: Mutex::new(NetState {
                dice: Dice(seed.rotate_left(17) ^ 0x5eed),
                routers: HashMap::new(),
                cut: BTreeSet::new(),
                loss_per_mille: 0,
            }),
        }),
        nodes: Mutex::default(),
        incarnations: Mutex::default(),
        leaders: Mutex::default(),
        acked: Mutex::default(),
        unknown: Mutex::default(),
        deleted: Mutex::default(),
        trace: Mutex::default(),
        start: Instant::now(),
    });
    for id in 1..=NODES {
        world.start_node(id, root.path()).await;
    }
    let members: BTreeMap<u64, BasicNode> = (1..=NODES)
        .map(|id| {
            (
                id,
                BasicNode {
                    addr: node_addr(id),
                },
            )
        })
        .collect();
    for group in groups() {
        let first = world.replica(1, group).unwrap();
        first.raft().initialize(members.clone()).await.unwrap();
    }

    let stop = Arc::new(tokio::sync::Notify::new());
    let mut writers = Vec::new();
    for group in groups() {
        let dice = Dice(dice.next());
        writers.push(tokio::spawn(writer(
            Arc::clone(&world),
            group,
            Arc::clone(&stop),
            dice,
        )));
    }
    let watcher = {
        let world = Arc::clone(&world);
        tokio::spawn(async move {
            loop {
                world.watch_leaders();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    // The faults, for the run's length.
    let end = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < end {
        tokio::time::sleep(dice.millis(200, 2_000)).await;
        inject_fault(&world, root.path(), &mut dice).await;
    }

    // Then the cluster heals, every node comes back, and it settles.
    {
        let mut state = world.net.state.lock().unwrap();
        state.cut.clear();
        state.loss_per_mille = 0;
    }
    world.note("healed for good".to_owned());
    for id in 1..=NODES {
        if !world.up().contains(&id) {
            world.start_node(id, root.path()).await;
        }
    }
    // A last write per group after the heal: each group gets a leader of
    // the final term, whose commit covers everything before.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.notify_waiters();
    for w in writers {
        w.await.unwrap();
    }
    for group in groups() {
        let replica = world.replica(1, group).unwrap();
        replica
            .write(
                Bytes::from(batch_of(group, 1 << 40)),
                Duration::from_secs(30),
            )
            .await
            .unwrap_or_else(|e| {
                panic!("seed {seed}: group {group} accepts no write after the heal: {e}")
            });
    }
    let mut logs = BTreeMap::new();
    let settle = Instant::now() + Duration::from_secs(30);
    for group in groups() {
        loop {
            if let Some(log) = settled_log(&world, group) {
                logs.insert(group, log);
                break;
            }
            assert!(
                Instant::now() < settle,
                "seed {seed}: group {group}'s replicas never held the same committed log; trace:\n{}",
                world.trace.lock().unwrap().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    watcher.abort();
    world.watch_leaders();

    check_acknowledged(&world, &logs);
    check_applied_order(&world);

    for id in world.up() {
        world.crash(id).await;
    }
    let run = Run {
        trace: world.trace.lock().unwrap().clone(),
        acked: world.acked.lock().unwrap().values().map(Vec::len).sum(),
        unknown: world.unknown.lock().unwrap().values().sum(),
        leaders: world.leaders.lock().unwrap().len(),
        deletes: world.deleted.lock().unwrap().values().map(|(_, n)| n).sum(),
    };
    run
}

/// Every acknowledged write from the log start on is in the final log at
/// its offset, unchanged, and in the order the writes were made; the log
/// start is at least where every acknowledged DeleteRecords put it.
fn check_acknowledged(world: &World, logs: &BTreeMap<GroupId, (u64, Vec<u8>)>) {
    let acked = world.acked.lock().unwrap();
    let deleted = world.deleted.lock().unwrap();
    for (group, (log_start, log)) in logs {
        let (asked, _) = deleted.get(group).copied().unwrap_or_default();
        assert!(
            *log_start >= asked,
            "seed {}: group {group} starts at {log_start}, below an acknowledged delete before {asked}",
            world.seed
        );
        let mut at_offset = BTreeMap::new();
        for batch in herald_records::batches(log) {
            let batch = batch.expect("a committed log parses");
            let header = herald_records::BatchHeader::parse(batch).unwrap();
            if !header.is_control() {
                at_offset.insert(header.base_offset() as u64, batch.to_vec());
            }
        }
        let stored_from = herald_records::batches(log)
            .next()
            .and_then(|b| herald_records::BatchHeader::parse(b.ok()?))
            .map_or(u64::MAX, |h| h.base_offset() as u64);
        assert!(
            stored_from == u64::MAX || stored_from <= *log_start,
            "seed {}: group {group} stores from {stored_from}, past its log start {log_start}",
            world.seed
        );
        let mut last = None;
        for (tag, offset, sent) in acked.get(group).into_iter().flatten() {
            // Deleted with the batches below the log start (the batch
            // holding it stays whole).
            if *offset < stored_from {
                continue;
            }
            let stored = at_offset.get(offset).unwrap_or_else(|| {
                panic!(
                    "seed {}: group {group} lost tag {tag}, acknowledged at offset {offset}",
                    world.seed
                )
            });
            // From the magic byte on, a batch is stored as produced: only
            // its base offset and leader epoch are the log's to set.
            assert_eq!(
                stored[16..],
                sent[16..],
                "seed {}: group {group} offset {offset} holds another batch than tag {tag}",
                world.seed
            );
            assert!(
                last < Some(*offset),
                "seed {}: group {group} tag {tag} is before an earlier write",
                world.seed
            );
            last = Some(*offset);
        }
    }
}

/// Every incarnation of every node applied the metadata group's entries
/// as one sequence: the same entry at each index, no index skipped.
fn check_applied_order(world: &World) {
    let incarnations = world.incarnations.lock().unwrap();
    let mut reference: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for applied in incarnations.iter() {
        for (index, bytes) in applied.lock().unwrap().iter() {
            let known = reference.entry(*index).or_insert_with(|| bytes.clone());
            assert_eq!(
                known, bytes,
                "seed {}: two nodes applied different entries at index {index}",
                world.seed
            );
        }
    }
    for applied in incarnations.iter() {
        let applied = applied.lock().unwrap();
        for pair in applied.windows(2) {
            let between = reference.range(pair[0].0 + 1..pair[1].0).count();
            assert_eq!(
                between, 0,
                "seed {}: an incarnation applied index {} then {}, skipping {between}",
                world.seed, pair[0].0, pair[1].0
            );
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn raft_groups_keep_their_invariants_through_crashes_partitions_and_loss() {
    let seconds = env_u64("HERALD_SIM_SECONDS").unwrap_or(30);
    let seeds: Vec<u64> = match env_u64("HERALD_SIM_SEED") {
        Some(seed) => vec![seed],
        None => (1..=env_u64("HERALD_SIM_SEEDS").unwrap_or(4)).collect(),
    };
    for seed in seeds {
        let run = simulate(seed, seconds);
        if let Ok(path) = std::env::var("HERALD_SIM_TRACE") {
            std::fs::write(path, run.trace.join("\n")).unwrap();
        }
        assert!(run.acked > 0, "seed {seed}: no write was ever acknowledged");
        println!(
            "seed {seed}: {} writes acknowledged, {} unknown, {} leader terms, {} deletes acknowledged, {} events",
            run.acked,
            run.unknown,
            run.leaders,
            run.deletes,
            run.trace.len()
        );
    }
}
