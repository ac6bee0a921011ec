//! Three replicas of a partition, each with its own Raft listener on
//! 127.0.0.1, replicating real record batches over TCP: every replica ends
//! with the same bytes at the same offsets, a new leader takes over when
//! the leader stops, and a restarted replica catches up.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use herald_log::{FlushPolicy, LogConfig};
use herald_raft::network::{node, GroupRouter};
use herald_raft::{PartitionReplica, RaftTiming, ReplicaError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const GROUP: u64 = 7;

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

fn timing() -> RaftTiming {
    RaftTiming {
        heartbeat: Duration::from_millis(50),
        election_min: Duration::from_millis(300),
        election_max: Duration::from_millis(600),
        seed: None,
    }
}

/// One node: its listener, router and replica.
struct Node {
    id: u64,
    addr: std::net::SocketAddr,
    dir: std::path::PathBuf,
    stop: CancellationToken,
    replica: Option<PartitionReplica>,
}

impl Node {
    async fn start(id: u64, listener: TcpListener, dir: std::path::PathBuf) -> Node {
        Self::start_with_hook(id, listener, dir, None).await
    }

    async fn start_with_hook(
        id: u64,
        listener: TcpListener,
        dir: std::path::PathBuf,
        hook: Option<herald_raft::state_machine::ApplyHook>,
    ) -> Node {
        let addr = listener.local_addr().unwrap();
        let router = GroupRouter::default();
        let stop = CancellationToken::new();
        tokio::spawn(router.clone().serve(listener, stop.clone()));
        let replica = PartitionReplica::open_with_hook(
            id,
            GROUP,
            &dir,
            log_config(),
            timing(),
            &router,
            hook,
        )
        .await
        .unwrap();
        Node {
            id,
            addr,
            dir,
            stop,
            replica: Some(replica),
        }
    }

    fn replica(&self) -> &PartitionReplica {
        self.replica.as_ref().expect("running")
    }

    async fn stop(&mut self) {
        self.stop.cancel();
        if let Some(replica) = self.replica.take() {
            replica.shutdown().await;
        }
    }

    /// Every committed byte of the log.
    fn committed_bytes(&self) -> Vec<u8> {
        let replica = self.replica();
        let end = *replica.commit_point().borrow();
        let log = replica.log();
        let mut out = Vec::new();
        let mut offset = log.log_start_offset();
        while offset < end {
            let slice = log.read(offset, 1 << 20).unwrap();
            out.extend_from_slice(&slice.bytes);
            offset = slice.next_offset;
        }
        out
    }
}

fn assert_same_log(got: &[u8], reference: &[u8], id: u64) {
    if got != reference {
        let at = got
            .iter()
            .zip(reference)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(reference.len()));
        panic!(
            "replica {id} differs from the first at byte {at} ({} bytes against {})",
            got.len(),
            reference.len()
        );
    }
}

/// Three replicas of one group under `root`, its membership initialized.
async fn three_nodes(root: &std::path::Path) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        nodes.push(Node::start(id, listener, root.join(format!("node-{id}"))).await);
    }
    let members: BTreeMap<u64, openraft::BasicNode> =
        nodes.iter().map(|n| (n.id, node(n.addr))).collect();
    nodes[0].replica().raft().initialize(members).await.unwrap();
    nodes
}

async fn leader_of(nodes: &[Node]) -> u64 {
    let running: Vec<&Node> = nodes.iter().filter(|n| n.replica.is_some()).collect();
    for _ in 0..200 {
        for n in &running {
            if let Some(leader) = n.replica().raft().current_leader().await {
                if running.iter().any(|r| r.id == leader) {
                    return leader;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader elected among the running replicas");
}

async fn write(nodes: &[Node], from: u64, count: u64) -> Vec<(u64, u64)> {
    let mut placed = Vec::new();
    let mut tag = from;
    while tag < from + count {
        let leader = leader_of(nodes).await;
        let node = nodes.iter().find(|n| n.id == leader).unwrap();
        let batch = herald_records::testing::batch(4, &tag.to_be_bytes(), 1_000 + tag as i64);
        match node.replica().append(Bytes::from(batch)).await {
            Ok(p) => {
                placed.push((p.base_offset, p.last_offset));
                tag += 1;
            }
            // Leadership moved between the look and the write: try again.
            Err(ReplicaError::NotLeader { .. }) | Err(ReplicaError::Write(_)) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    placed
}

async fn wait_for_equal_commits(nodes: &[Node]) {
    for _ in 0..200 {
        let points: BTreeSet<u64> = nodes
            .iter()
            .filter(|n| n.replica.is_some())
            .map(|n| *n.replica().commit_point().borrow())
            .collect();
        if points.len() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the replicas' commit points did not meet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_hold_identical_logs_through_a_leader_failure_and_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = three_nodes(root.path()).await;

    let first = write(&nodes, 0, 200).await;
    // Offsets are dense: each batch of 4 records follows the previous one
    // (a leader change would put its one-offset blank entry between).
    for pair in first.windows(2) {
        assert_eq!(pair[0].1 - pair[0].0, 3);
        assert!(pair[1].0 == pair[0].1 + 1 || pair[1].0 == pair[0].1 + 2);
    }
    wait_for_equal_commits(&nodes).await;
    let reference = nodes[0].committed_bytes();
    assert!(!reference.is_empty());
    for n in &nodes[1..] {
        assert_same_log(&n.committed_bytes(), &reference, n.id);
    }

    // The leader stops; the two others elect a new one and carry on.
    let old_leader = leader_of(&nodes).await;
    let at = nodes.iter().position(|n| n.id == old_leader).unwrap();
    nodes[at].stop().await;
    let second = write(&nodes, 200, 100).await;
    assert!(
        second[0].0 > first.last().unwrap().1,
        "offsets keep growing"
    );
    assert_ne!(leader_of(&nodes).await, old_leader);

    // The old leader comes back on the same port and catches up.
    let listener = TcpListener::bind(nodes[at].addr).await.unwrap();
    let dir = nodes[at].dir.clone();
    nodes[at] = Node::start(old_leader, listener, dir).await;
    write(&nodes, 300, 20).await;
    wait_for_equal_commits(&nodes).await;
    let reference = nodes[0].committed_bytes();
    for n in &nodes[1..] {
        assert_same_log(&n.committed_bytes(), &reference, n.id);
    }
    // Every data batch written is there once, in order, on every replica.
    let tags: Vec<u64> = herald_records::batches(&reference)
        .map(|b| b.unwrap())
        .filter(|b| !herald_records::BatchHeader::parse(b).unwrap().is_control())
        .map(|b| {
            let value_start = herald_records::HEADER_BYTES + 6;
            u64::from_be_bytes(b[value_start..value_start + 8].try_into().unwrap())
        })
        .collect();
    assert_eq!(tags, (0..320).collect::<Vec<u64>>());
    for n in &mut nodes {
        n.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_forwards_writes_and_every_replica_applies_them_in_one_order() {
    use std::sync::{Arc, Mutex};
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Vec::new();
    let mut seen: Vec<Arc<Mutex<Vec<u64>>>> = Vec::new();
    for id in 1..=3u64 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        let hook: herald_raft::state_machine::ApplyHook = Arc::new(move |id, _batch, _placed| {
            sink.lock().unwrap().push(id.index);
        });
        seen.push(log);
        let dir = root.path().join(format!("node-{id}"));
        nodes.push(Node::start_with_hook(id, listener, dir, Some(hook)).await);
    }
    let members: BTreeMap<u64, openraft::BasicNode> =
        nodes.iter().map(|n| (n.id, node(n.addr))).collect();
    nodes[0].replica().raft().initialize(members).await.unwrap();
    let leader = leader_of(&nodes).await;
    let follower = nodes.iter().find(|n| n.id != leader).unwrap();
    for tag in 0..30u64 {
        let batch = herald_records::testing::batch(1, &tag.to_be_bytes(), 1_000);
        follower
            .replica()
            .write(Bytes::from(batch), Duration::from_secs(10))
            .await
            .expect("a follower's write reaches the leader");
    }
    wait_for_equal_commits(&nodes).await;
    for _ in 0..100 {
        if seen.iter().all(|s| s.lock().unwrap().len() == 30) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = seen[0].lock().unwrap().clone();
    assert_eq!(first.len(), 30, "every write applied once");
    assert!(first.windows(2).all(|w| w[0] < w[1]), "in log order");
    for other in &seen[1..] {
        assert_eq!(*other.lock().unwrap(), first, "the same order everywhere");
    }
    for n in &mut nodes {
        n.stop().await;
    }
}

/// Waits until `check` holds, or fails naming `what`.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..400 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_missed_deleted_records_restarts_from_a_snapshot_with_what_the_leader_holds()
{
    let root = tempfile::tempdir().unwrap();
    let mut nodes = three_nodes(root.path()).await;
    write(&nodes, 0, 100).await;
    wait_for_equal_commits(&nodes).await;

    // A follower stops; meanwhile the log grows and its start moves past
    // everything the follower holds.
    let leader = leader_of(&nodes).await;
    let away = nodes.iter().position(|n| n.id != leader).unwrap();
    let away_id = nodes[away].id;
    nodes[away].stop().await;
    let placed = write(&nodes, 100, 300).await;
    let (base, _) = placed[150];
    let cut = base + 2;
    let lead = nodes.iter().find(|n| n.id == leader).unwrap();
    assert_eq!(lead.replica().delete_records(cut).await.unwrap(), cut);
    assert_eq!(lead.replica().log_start(), cut, "readers start at the cut");
    for n in nodes.iter().filter(|n| n.replica.is_some()) {
        eventually("the purge below the cut", || {
            n.replica().log().log_start_offset() == base
        })
        .await;
        assert_eq!(n.replica().log_start(), cut);
    }

    // Back, it cannot be sent the entries it lacks: it installs the
    // leader's snapshot, restarts its log where the leader's starts, and
    // follows from there.
    let listener = TcpListener::bind(nodes[away].addr).await.unwrap();
    let dir = nodes[away].dir.clone();
    nodes[away] = Node::start(away_id, listener, dir).await;
    write(&nodes, 400, 20).await;
    wait_for_equal_commits(&nodes).await;
    let back = &nodes[away];
    assert_eq!(back.replica().log().log_start_offset(), base);
    assert_eq!(back.replica().log_start(), cut);
    let reference = nodes
        .iter()
        .find(|n| n.id == leader)
        .unwrap()
        .committed_bytes();
    for n in &nodes {
        assert_same_log(&n.committed_bytes(), &reference, n.id);
    }
    for n in &mut nodes {
        n.stop().await;
    }
}
