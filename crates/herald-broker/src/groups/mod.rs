//! The group service: the sans-I/O [`GroupCoordinator`] of `herald-group`
//! run by one worker thread, with its records made durable in the internal
//! offsets partition (see [`offsets_log`]).
//!
//! Front ends submit a [`GroupCall`] with a completion callback; the worker
//! feeds it to the coordinator and calls the callback when the coordinator's
//! answer comes out, which for JoinGroup and SyncGroup may be many calls
//! later (when the rebalance completes). The worker also fires the
//! coordinator's deadlines (session and rebalance timeouts) by waiting for
//! the next call no longer than [`GroupCoordinator::next_deadline_ms`], and
//! it appends every [`Output::Persist`] batch (fsynced) before reporting it
//! with [`GroupCoordinator::append_completed`], so a commit is acknowledged
//! only once it is on stable storage. Because one thread does all of this in
//! order, batches are appended and reported in the order of their ids, as
//! the coordinator requires.
//!
//! At open the offsets partition is replayed into the coordinator before
//! the service accepts its first call.
//!
//! For metrics, [`GroupService::committed_offsets_snapshot`] asks the worker
//! for every committed offset, waiting a bounded time for the answer.

pub mod offsets_log;
#[cfg(feature = "cluster")]
pub(crate) mod replicated;
mod routing;

pub use routing::{CoordinatorLocation, Groups};

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use herald_group::{
    AppendResult, DeleteGroupsResponse, ErrorCode, GroupConfig, GroupCoordinator, GroupDescription,
    GroupEvent, GroupState, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListedGroup, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, Output,
    RequestId, SyncGroupRequest, SyncGroupResponse,
};
use herald_log::{FlushStatsSnapshot, Log};
use parking_lot::Mutex;
use std::sync::Arc;

use crate::error::BrokerError;

pub use offsets_log::OFFSETS_TOPIC;

/// A request to the group coordinator.
#[derive(Debug, Clone)]
pub enum GroupCall {
    /// JoinGroup; answered when the join phase of the rebalance ends.
    JoinGroup(JoinGroupRequest),
    /// SyncGroup; answered when the leader's assignment arrives.
    SyncGroup(SyncGroupRequest),
    /// Heartbeat.
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup.
    LeaveGroup(LeaveGroupRequest),
    /// OffsetCommit; answered once the commit is durable.
    OffsetCommit(OffsetCommitRequest),
    /// OffsetFetch of one group.
    OffsetFetch(OffsetFetchRequest),
    /// OffsetDelete.
    OffsetDelete(OffsetDeleteRequest),
    /// DeleteGroups.
    DeleteGroups(Vec<String>),
    /// ListGroups, filtered by state (every group when empty).
    ListGroups(Vec<GroupState>),
    /// DescribeGroups of one group.
    DescribeGroup(String),
}

/// The coordinator's answer to a [`GroupCall`] (the variant matches the
/// call's), or [`GroupReply::Unavailable`].
#[derive(Debug, Clone)]
pub enum GroupReply {
    /// Answer to JoinGroup.
    JoinGroup(JoinGroupResponse),
    /// Answer to SyncGroup.
    SyncGroup(SyncGroupResponse),
    /// Answer to Heartbeat.
    Heartbeat(ErrorCode),
    /// Answer to LeaveGroup.
    LeaveGroup(LeaveGroupResponse),
    /// Answer to OffsetCommit.
    OffsetCommit(OffsetCommitResponse),
    /// Answer to OffsetFetch.
    OffsetFetch(OffsetFetchResponse),
    /// Answer to OffsetDelete.
    OffsetDelete(OffsetDeleteResponse),
    /// Answer to DeleteGroups.
    DeleteGroups(DeleteGroupsResponse),
    /// Answer to ListGroups.
    ListGroups(Vec<ListedGroup>),
    /// Answer to DescribeGroup.
    DescribeGroup(GroupDescription),
    /// The service is stopped (or stopped before answering); clients see
    /// COORDINATOR_NOT_AVAILABLE and retry.
    Unavailable,
    /// This node does not coordinate the group (in a cluster, the leader
    /// of the group's offsets partition does); clients see NOT_COORDINATOR
    /// and look the coordinator up again.
    NotCoordinator,
}

/// Called once with the answer to a call, from the service's thread.
pub type ReplyFn = Box<dyn FnOnce(GroupReply) + Send>;

/// One committed offset, as listed by
/// [`GroupService::committed_offsets_snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffsetEntry {
    /// The group.
    pub group_id: String,
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// The committed offset (the next record the group will read).
    pub offset: i64,
}

enum Command {
    Call(GroupCall, ReplyFn),
    Snapshot(mpsc::Sender<Vec<CommittedOffsetEntry>>),
    /// What became of a batch handed to a replicated offsets partition,
    /// reported in the order the batches were proposed.
    #[cfg(feature = "cluster")]
    Persisted(herald_group::AppendId, AppendResult),
    Stop,
}

/// The offsets partition grows by a record per commit; it is rewritten
/// (see `offsets_log::compact`) once it holds this many bytes and twice
/// what it held after the last rewrite.
pub const COMPACT_MIN_BYTES: u64 = 64 * 1024 * 1024;

/// The offsets partition in use; a compaction replaces it.
struct OffsetsPartition {
    log: Arc<Log>,
    /// Flushes of the partitions compactions replaced, so that the flush
    /// counters stay monotonic.
    earlier_flushes: FlushStatsSnapshot,
}

/// Most calls waiting for the worker at once. A caller past it waits (it is
/// an async caller: its connection stops reading), so a flood of group
/// requests takes no more memory than this many queued calls.
pub const QUEUED_CALLS_MAX: usize = 1024;

/// Where a service's records go, as the service (not its worker) sees it:
/// for metrics and close.
enum StoreView {
    /// The node's own offsets partition (a single node).
    Local(Arc<Mutex<OffsetsPartition>>),
    /// One replica of a replicated offsets partition, which its Raft group
    /// owns (the service neither flushes nor closes it).
    #[cfg(feature = "cluster")]
    Replicated(Arc<herald_raft::PartitionReplica>),
}

impl StoreView {
    fn log(&self) -> Arc<Log> {
        match self {
            StoreView::Local(partition) => Arc::clone(&partition.lock().log),
            #[cfg(feature = "cluster")]
            StoreView::Replicated(replica) => Arc::clone(replica.log()),
        }
    }
}

/// The running coordinator; see the module documentation.
pub struct GroupService {
    sender: Mutex<Option<mpsc::Sender<Command>>>,
    /// One permit per free slot of the call queue; the worker gives one
    /// back for every call it takes off the queue.
    queue_slots: Arc<tokio::sync::Semaphore>,
    worker: Mutex<Option<JoinHandle<()>>>,
    store: StoreView,
}

impl std::fmt::Debug for GroupService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupService")
            .field("log", &self.store.log().dir())
            .finish_non_exhaustive()
    }
}

impl GroupService {
    /// Opens `<data_dir>/__consumer_offsets-0`, replays it into a new
    /// coordinator with `config`, and starts the worker thread.
    pub fn open(data_dir: &Path, config: GroupConfig) -> Result<Self, BrokerError> {
        Self::open_with_compaction(data_dir, config, COMPACT_MIN_BYTES)
    }

    /// [`Self::open`] with the size the offsets partition must reach before
    /// it is compacted.
    pub fn open_with_compaction(
        data_dir: &Path,
        config: GroupConfig,
        compact_min_bytes: u64,
    ) -> Result<Self, BrokerError> {
        let log = Arc::new(offsets_log::open(data_dir)?);
        let mut coordinator = GroupCoordinator::new(config);
        let replayed = offsets_log::replay(&log, |record| coordinator.replay(record))?;
        tracing::info!(records = replayed, "group coordinator state replayed");
        let partition = Arc::new(Mutex::new(OffsetsPartition {
            log: Arc::clone(&log),
            earlier_flushes: FlushStatsSnapshot::default(),
        }));
        let (sender, receiver) = mpsc::channel();
        let store = Persistence::Local(LocalStore {
            partition: Arc::clone(&partition),
            data_dir: data_dir.to_path_buf(),
            compact_min_bytes,
            compacted_bytes: log.size_bytes(),
        });
        Self::start(
            coordinator,
            store,
            StoreView::Local(partition),
            sender,
            receiver,
            data_dir,
        )
    }

    /// Starts the worker over `coordinator` (its state replayed already).
    fn start(
        coordinator: GroupCoordinator,
        store: Persistence,
        view: StoreView,
        sender: mpsc::Sender<Command>,
        receiver: mpsc::Receiver<Command>,
        dir: &Path,
    ) -> Result<Self, BrokerError> {
        let queue_slots = Arc::new(tokio::sync::Semaphore::new(QUEUED_CALLS_MAX));
        let worker = Worker {
            queue_slots: Arc::clone(&queue_slots),
            coordinator,
            store,
            pending: HashMap::new(),
            next_request: 0,
            #[cfg(feature = "cluster")]
            deferred: VecDeque::new(),
        };
        let handle = std::thread::Builder::new()
            .name("herald-groups".into())
            .spawn(move || worker.run(receiver))
            .map_err(|e| BrokerError::io("spawn group coordinator thread", dir, e))?;
        Ok(Self {
            sender: Mutex::new(Some(sender)),
            queue_slots,
            worker: Mutex::new(Some(handle)),
            store: view,
        })
    }

    /// Submits a call once the queue has room (waiting, not growing, when
    /// [`QUEUED_CALLS_MAX`] calls are queued); `reply` is called exactly
    /// once with its answer ([`GroupReply::Unavailable`] if the service is
    /// stopped).
    pub async fn call(&self, call: GroupCall, reply: ReplyFn) {
        // The semaphore is never closed, so acquiring only waits.
        match self.queue_slots.acquire().await {
            // The worker returns the slot when it takes the call.
            Ok(slot) => slot.forget(),
            Err(_) => return reply(GroupReply::Unavailable),
        }
        let refused = {
            let sender = self.sender.lock();
            match sender.as_ref() {
                Some(sender) => sender.send(Command::Call(call, reply)).err().map(|e| e.0),
                None => Some(Command::Call(call, reply)),
            }
        };
        if let Some(Command::Call(_, reply)) = refused {
            // Never queued: its slot is free again.
            self.queue_slots.add_permits(1);
            reply(GroupReply::Unavailable);
        }
    }

    /// Every committed offset of every live group, as the worker sees it
    /// between two calls; `None` if the service is stopped or the worker
    /// does not answer within `timeout` (it may be busy with an fsync of
    /// the offsets partition). Never blocks longer than `timeout`.
    pub fn committed_offsets_snapshot(
        &self,
        timeout: Duration,
    ) -> Option<Vec<CommittedOffsetEntry>> {
        let (reply, answer) = mpsc::channel();
        {
            let sender = self.sender.lock();
            sender.as_ref()?.send(Command::Snapshot(reply)).ok()?;
        }
        answer.recv_timeout(timeout).ok()
    }

    /// Flush counts and latencies of the offsets partition (fsynced on
    /// every append).
    pub fn offsets_log_flush_stats(&self) -> FlushStatsSnapshot {
        match &self.store {
            StoreView::Local(partition) => {
                let partition = partition.lock();
                let mut stats = partition.earlier_flushes;
                stats.merge(&partition.log.flush_stats());
                stats
            }
            #[cfg(feature = "cluster")]
            StoreView::Replicated(replica) => replica.log().flush_stats(),
        }
    }

    /// Bytes of the offsets partition's files.
    pub fn offsets_log_size_bytes(&self) -> u64 {
        self.store.log().size_bytes()
    }

    /// Stops the worker (calls still held are answered
    /// [`GroupReply::Unavailable`]) and closes the node's own offsets
    /// partition (a replicated one stays with its Raft group).
    pub fn close(&self) -> Result<(), BrokerError> {
        self.stop_worker();
        match &self.store {
            StoreView::Local(partition) => {
                let log = Arc::clone(&partition.lock().log);
                log.close().map_err(|source| BrokerError::Log {
                    topic: OFFSETS_TOPIC.to_owned(),
                    partition: 0,
                    source,
                })
            }
            #[cfg(feature = "cluster")]
            StoreView::Replicated(_) => Ok(()),
        }
    }

    fn stop_worker(&self) {
        if let Some(sender) = self.sender.lock().take() {
            let _ = sender.send(Command::Stop);
        }
        if let Some(handle) = self.worker.lock().take() {
            if handle.join().is_err() {
                tracing::error!("group coordinator thread panicked");
            }
        }
    }
}

/// Where the worker writes the coordinator's records.
enum Persistence {
    /// The node's own offsets partition, fsynced on every append.
    Local(LocalStore),
    /// A replicated offsets partition this node leads: a batch is
    /// proposed to its Raft group and reported once committed.
    #[cfg(feature = "cluster")]
    Replicated(replicated::ReplicatedStore),
}

/// The node's own offsets partition and its compaction.
struct LocalStore {
    /// The partition appended to, shared with the service for metrics and
    /// close (the worker alone replaces it).
    partition: Arc<Mutex<OffsetsPartition>>,
    data_dir: std::path::PathBuf,
    compact_min_bytes: u64,
    /// Size of the partition after the last compaction (or at open).
    compacted_bytes: u64,
}

struct Worker {
    coordinator: GroupCoordinator,
    /// Free slots of the call queue (see [`GroupService::call`]).
    queue_slots: Arc<tokio::sync::Semaphore>,
    store: Persistence,
    pending: HashMap<RequestId, ReplyFn>,
    next_request: u64,
    /// Commands received while a compaction waited for the replicated
    /// partition's outstanding batches, taken before new ones.
    #[cfg(feature = "cluster")]
    deferred: VecDeque<Command>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Worker {
    fn run(mut self, receiver: mpsc::Receiver<Command>) {
        loop {
            #[cfg(feature = "cluster")]
            let deferred = self.deferred.pop_front();
            #[cfg(not(feature = "cluster"))]
            let deferred = None;
            let command = match (deferred, self.coordinator.next_deadline_ms()) {
                (Some(command), _) => Ok(command),
                (None, None) => receiver.recv().map_err(|_| RecvTimeoutError::Disconnected),
                (None, Some(deadline)) => {
                    let wait = u64::try_from(deadline.saturating_sub(now_ms())).unwrap_or(0);
                    receiver.recv_timeout(Duration::from_millis(wait))
                }
            };
            match command {
                Ok(Command::Call(call, reply)) => {
                    self.queue_slots.add_permits(1);
                    self.call(call, reply);
                    self.compact_if_due(&receiver);
                }
                Ok(Command::Snapshot(reply)) => self.snapshot(&reply),
                #[cfg(feature = "cluster")]
                Ok(Command::Persisted(append, result)) => self.persisted(append, result),
                Err(RecvTimeoutError::Timeout) => {
                    let outputs = self.coordinator.tick(now_ms());
                    self.act(outputs);
                    self.compact_if_due(&receiver);
                }
                Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        for (_, reply) in self.pending.drain() {
            reply(GroupReply::Unavailable);
        }
    }

    fn call(&mut self, call: GroupCall, reply: ReplyFn) {
        let now = now_ms();
        let id = RequestId(self.next_request);
        let c = &mut self.coordinator;
        let outputs = match call {
            GroupCall::OffsetFetch(req) => {
                // Due deadlines first, so an expired group is not described.
                let outputs = c.tick(now);
                reply(GroupReply::OffsetFetch(c.offset_fetch(&req)));
                outputs
            }
            GroupCall::ListGroups(states) => {
                let outputs = c.tick(now);
                reply(GroupReply::ListGroups(c.list_groups(&states)));
                outputs
            }
            GroupCall::DescribeGroup(group_id) => {
                let outputs = c.tick(now);
                reply(GroupReply::DescribeGroup(c.describe_group(&group_id)));
                outputs
            }
            held => {
                self.next_request += 1;
                self.pending.insert(id, reply);
                match held {
                    GroupCall::JoinGroup(req) => c.join_group(now, id, req),
                    GroupCall::SyncGroup(req) => c.sync_group(now, id, req),
                    GroupCall::Heartbeat(req) => c.heartbeat(now, id, req),
                    GroupCall::LeaveGroup(req) => c.leave_group(now, id, req),
                    GroupCall::OffsetCommit(req) => c.offset_commit(now, id, req),
                    GroupCall::OffsetDelete(req) => c.offset_delete(now, id, req),
                    GroupCall::DeleteGroups(ids) => c.delete_groups(now, id, ids),
                    GroupCall::OffsetFetch(_)
                    | GroupCall::ListGroups(_)
                    | GroupCall::DescribeGroup(_) => Vec::new(),
                }
            }
        };
        self.act(outputs);
    }

    /// Answers a snapshot of the committed offsets (after firing due
    /// deadlines, so expired offsets are not listed). A requester that gave
    /// up waiting is not an error.
    fn snapshot(&mut self, reply: &mpsc::Sender<Vec<CommittedOffsetEntry>>) {
        let c = &mut self.coordinator;
        let outputs = c.tick(now_ms());
        let mut entries = Vec::new();
        for listed in c.list_groups(&[]) {
            if listed.state == GroupState::Dead {
                continue;
            }
            let Some(committed) = c.committed_offsets(&listed.group_id) else {
                continue;
            };
            entries.extend(
                committed
                    .iter()
                    .map(|(partition, committed)| CommittedOffsetEntry {
                        group_id: listed.group_id.clone(),
                        topic: partition.topic.clone(),
                        partition: partition.partition,
                        offset: committed.offset,
                    }),
            );
        }
        let _ = reply.send(entries);
        self.act(outputs);
    }

    /// What became of a batch proposed to a replicated offsets partition.
    #[cfg(feature = "cluster")]
    fn persisted(&mut self, append: herald_group::AppendId, result: AppendResult) {
        if let Persistence::Replicated(store) = &mut self.store {
            store.reported();
        }
        let outputs = self.coordinator.append_completed(now_ms(), append, result);
        self.act(outputs);
    }

    /// Compacts the offsets partition once it has grown enough: the node's
    /// own is rewritten, a replicated one gets the state written anew and
    /// its log start moved past what came before (see `replicated`).
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    fn compact_if_due(&mut self, receiver: &mpsc::Receiver<Command>) {
        #[cfg(feature = "cluster")]
        if let Persistence::Replicated(store) = &self.store {
            if store.compaction_due() {
                self.compact_replicated(receiver);
            }
            return;
        }
        self.compact_local();
    }

    /// Writes the coordinator's state to its replicated offsets partition
    /// and has everything before it deleted. The state must cover every
    /// batch below it in the log: the batches still in flight are awaited
    /// first (other commands wait meanwhile, as calls wait while the
    /// node's own partition is rewritten), up to a bound after which the
    /// compaction is left for later.
    #[cfg(feature = "cluster")]
    fn compact_replicated(&mut self, receiver: &mpsc::Receiver<Command>) {
        const DRAIN_PATIENCE: Duration = Duration::from_secs(10);
        let deadline = std::time::Instant::now() + DRAIN_PATIENCE;
        loop {
            let Persistence::Replicated(store) = &self.store else {
                return;
            };
            if store.in_flight() == 0 {
                break;
            }
            let wait = deadline.saturating_duration_since(std::time::Instant::now());
            match receiver.recv_timeout(wait) {
                Ok(Command::Persisted(append, result)) => self.persisted(append, result),
                Ok(other) => self.deferred.push_back(other),
                Err(_) => {
                    tracing::warn!(
                        "offsets partition compaction postponed: batches still in flight"
                    );
                    return;
                }
            }
        }
        let records = self.coordinator.snapshot_records();
        if let Persistence::Replicated(store) = &mut self.store {
            store.compact(&records, now_ms());
        }
    }

    /// Rewrites the node's own offsets partition as the coordinator's
    /// current state once it has grown enough. Runs between calls, when
    /// every persisted batch has been reported to the coordinator, so the
    /// snapshot holds everything the partition does.
    #[cfg_attr(not(feature = "cluster"), allow(irrefutable_let_patterns))]
    fn compact_local(&mut self) {
        let Persistence::Local(store) = &mut self.store else {
            return;
        };
        let current = Arc::clone(&store.partition.lock().log);
        let size = current.size_bytes();
        if size
            < store
                .compact_min_bytes
                .max(store.compacted_bytes.saturating_mul(2))
        {
            return;
        }
        let records = self.coordinator.snapshot_records();
        let started = std::time::Instant::now();
        match offsets_log::compact(&store.data_dir, &current, &records, now_ms()) {
            Ok(log) => {
                let log = Arc::new(log);
                let mut partition = store.partition.lock();
                let replaced = current.flush_stats();
                partition.earlier_flushes.merge(&replaced);
                partition.log = Arc::clone(&log);
                store.compacted_bytes = log.size_bytes();
                tracing::info!(
                    before_bytes = size,
                    after_bytes = store.compacted_bytes,
                    records = records.len(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "offsets partition compacted"
                );
            }
            Err(e) => {
                // Not again until the partition has doubled once more.
                store.compacted_bytes = size;
                tracing::error!(error = %e, "compacting the offsets partition failed");
            }
        }
    }

    /// Writes one batch of records: `Some` once its outcome is known, `None`
    /// when it comes later as a `Command::Persisted`.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    fn persist(
        &mut self,
        append: herald_group::AppendId,
        records: &[herald_group::Record],
        now: i64,
    ) -> Option<AppendResult> {
        match &mut self.store {
            Persistence::Local(store) => {
                let log = Arc::clone(&store.partition.lock().log);
                Some(match offsets_log::append(&log, records, now) {
                    Ok(()) => AppendResult::Durable,
                    Err(e) => {
                        tracing::error!(error = %e, "persisting group records failed");
                        AppendResult::Failed
                    }
                })
            }
            #[cfg(feature = "cluster")]
            Persistence::Replicated(store) => store.persist(append, records, now),
        }
    }

    /// Acts on outputs in order; a persisted batch's completion may produce
    /// more, which are acted on after the ones already queued.
    fn act(&mut self, outputs: Vec<Output>) {
        let mut queue: VecDeque<Output> = outputs.into();
        while let Some(output) = queue.pop_front() {
            let (request, reply) = match output {
                Output::Persist { append, records } => {
                    let now = now_ms();
                    if let Some(result) = self.persist(append, &records, now) {
                        queue.extend(self.coordinator.append_completed(now, append, result));
                    }
                    continue;
                }
                Output::Event(event) => {
                    log_event(&event);
                    continue;
                }
                Output::JoinGroup { request, response } => {
                    (request, GroupReply::JoinGroup(response))
                }
                Output::SyncGroup { request, response } => {
                    (request, GroupReply::SyncGroup(response))
                }
                Output::Heartbeat { request, error } => (request, GroupReply::Heartbeat(error)),
                Output::LeaveGroup { request, response } => {
                    (request, GroupReply::LeaveGroup(response))
                }
                Output::OffsetCommit { request, response } => {
                    (request, GroupReply::OffsetCommit(response))
                }
                Output::OffsetDelete { request, response } => {
                    (request, GroupReply::OffsetDelete(response))
                }
                Output::DeleteGroups { request, response } => {
                    (request, GroupReply::DeleteGroups(response))
                }
            };
            match self.pending.remove(&request) {
                Some(send) => send(reply),
                None => tracing::warn!(?request, "coordinator answered an unknown request"),
            }
        }
    }
}

fn log_event(event: &GroupEvent) {
    match event {
        GroupEvent::RebalanceStarted {
            group_id,
            generation_id,
            reason,
        } => tracing::info!(group = %group_id, generation_id, ?reason, "rebalance started"),
        GroupEvent::MemberRemoved {
            group_id,
            member_id,
            reason,
        } => tracing::info!(group = %group_id, member = %member_id, ?reason, "member removed"),
        GroupEvent::GenerationStarted {
            group_id,
            generation_id,
            protocol_name,
            member_count,
        } => {
            tracing::info!(group = %group_id, generation_id, ?protocol_name, member_count, "generation started")
        }
        GroupEvent::Stable {
            group_id,
            generation_id,
        } => tracing::debug!(group = %group_id, generation_id, "group stable"),
        GroupEvent::GroupRemoved { group_id } => {
            tracing::info!(group = %group_id, "group removed")
        }
    }
}

/// Calls the tests of this module and its children build.
#[cfg(test)]
pub(crate) mod test_calls {
    use herald_group::{OffsetCommitPartition, OffsetCommitRequest};

    use super::GroupCall;

    /// A simple (generation -1) commit of `offset` for partition
    /// `partition` of topic `orders` by `group`, with `metadata`.
    pub(crate) fn commit(group: &str, partition: i32, offset: i64, metadata: String) -> GroupCall {
        GroupCall::OffsetCommit(OffsetCommitRequest {
            group_id: group.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            partitions: vec![OffsetCommitPartition {
                topic: "orders".into(),
                partition,
                offset,
                leader_epoch: None,
                metadata: Some(metadata),
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future as _;
    use std::sync::mpsc::channel;

    use herald_group::{OffsetCommitPartition, TopicPartition};

    use super::*;

    /// Polls `future` once; true if it completed.
    fn completes_at_once(future: impl std::future::Future<Output = ()>) -> bool {
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        future.as_mut().poll(&mut cx).is_ready()
    }

    fn call(service: &GroupService, call: GroupCall) -> GroupReply {
        let (tx, rx) = channel();
        let submitted = completes_at_once(service.call(
            call,
            Box::new(move |reply| {
                let _ = tx.send(reply);
            }),
        ));
        assert!(submitted, "the call queue had room");
        rx.recv_timeout(Duration::from_secs(10)).expect("answered")
    }

    #[test]
    fn a_full_call_queue_makes_the_next_caller_wait_until_the_worker_takes_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let service = GroupService::open(dir.path(), GroupConfig::default()).expect("open");
        // The first call's reply blocks the worker until released, so the
        // calls behind it stay queued.
        let (release, released) = channel::<()>();
        let (first_answered, first) = channel();
        assert!(completes_at_once(service.call(
            simple_commit(1),
            Box::new(move |reply| {
                let _ = released.recv();
                let _ = first_answered.send(reply);
            }),
        )));
        // Wait until the worker holds the first call (its slot is back).
        while service.queue_slots.available_permits() < QUEUED_CALLS_MAX {
            std::thread::yield_now();
        }
        let (tx, rx) = channel();
        for offset in 0..QUEUED_CALLS_MAX as i64 {
            let tx = tx.clone();
            assert!(completes_at_once(service.call(
                simple_commit(offset),
                Box::new(move |reply| {
                    let _ = tx.send(reply);
                }),
            )));
        }
        // The queue is full: the next caller cannot get in...
        let mut waiting = std::pin::pin!(service.call(simple_commit(9), Box::new(|_| {})));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(
            waiting.as_mut().poll(&mut cx).is_pending(),
            "a full queue must make it wait"
        );
        assert_eq!(service.queue_slots.available_permits(), 0);
        // ...until the worker moves on and takes queued calls.
        release.send(()).expect("release the worker");
        first
            .recv_timeout(Duration::from_secs(10))
            .expect("first answered");
        for _ in 0..QUEUED_CALLS_MAX {
            rx.recv_timeout(Duration::from_secs(10))
                .expect("queued call answered");
        }
        assert!(
            waiting.as_mut().poll(&mut cx).is_ready(),
            "room again after the worker took calls"
        );
        service.close().expect("close");
    }

    fn simple_commit(offset: i64) -> GroupCall {
        GroupCall::OffsetCommit(OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            partitions: vec![OffsetCommitPartition {
                topic: "orders".into(),
                partition: 2,
                offset,
                leader_epoch: None,
                metadata: Some("m".into()),
            }],
        })
    }

    fn fetched(service: &GroupService) -> i64 {
        let reply = call(
            service,
            GroupCall::OffsetFetch(OffsetFetchRequest {
                group_id: "g".into(),
                partitions: Some(vec![TopicPartition::new("orders", 2)]),
                require_stable: false,
            }),
        );
        let GroupReply::OffsetFetch(response) = reply else {
            panic!("unexpected {reply:?}")
        };
        response.partitions[0].offset
    }

    #[test]
    fn acknowledged_commit_survives_reopening_the_service() {
        let dir = tempfile::tempdir().expect("tempdir");
        let service = GroupService::open(dir.path(), GroupConfig::default()).expect("open");
        for offset in [5, 17] {
            let GroupReply::OffsetCommit(response) = call(&service, simple_commit(offset)) else {
                panic!("not a commit answer")
            };
            assert_eq!(response.partitions[0].error, ErrorCode::None);
        }
        assert_eq!(fetched(&service), 17);
        service.close().expect("close");
        let reopened = GroupService::open(dir.path(), GroupConfig::default()).expect("reopen");
        assert_eq!(fetched(&reopened), 17);
        reopened.close().expect("close");
    }

    #[test]
    fn the_snapshot_lists_every_commit_and_is_none_once_stopped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let service = GroupService::open(dir.path(), GroupConfig::default()).expect("open");
        let wait = Duration::from_secs(10);
        assert_eq!(service.committed_offsets_snapshot(wait), Some(Vec::new()));
        let flushes = service.offsets_log_flush_stats().count();
        assert!(matches!(
            call(&service, simple_commit(42)),
            GroupReply::OffsetCommit(_)
        ));
        assert!(service.offsets_log_flush_stats().count() > flushes);
        assert_eq!(
            service.committed_offsets_snapshot(wait),
            Some(vec![CommittedOffsetEntry {
                group_id: "g".into(),
                topic: "orders".into(),
                partition: 2,
                offset: 42,
            }])
        );
        service.close().expect("close");
        let started = std::time::Instant::now();
        assert_eq!(service.committed_offsets_snapshot(wait), None);
        assert!(
            started.elapsed() < wait,
            "a stopped service answers at once"
        );
    }

    fn commit(service: &GroupService, partition: i32, offset: i64) {
        let GroupReply::OffsetCommit(response) = call(
            service,
            test_calls::commit("g", partition, offset, format!("commit {offset}")),
        ) else {
            panic!("not a commit answer")
        };
        assert_eq!(response.partitions[0].error, ErrorCode::None);
    }

    fn fetched_all(service: &GroupService) -> Vec<(i32, i64, String)> {
        let GroupReply::OffsetFetch(response) = call(
            service,
            GroupCall::OffsetFetch(OffsetFetchRequest {
                group_id: "g".into(),
                partitions: None,
                require_stable: false,
            }),
        ) else {
            panic!("not a fetch answer")
        };
        let mut out: Vec<_> = response
            .partitions
            .into_iter()
            .map(|p| (p.topic_partition.partition, p.offset, p.metadata))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_offsets_partition_is_compacted_and_keeps_every_last_commit() {
        const COMPACT_AT: u64 = 64 * 1024;
        let dir = tempfile::tempdir().expect("tempdir");
        let service =
            GroupService::open_with_compaction(dir.path(), GroupConfig::default(), COMPACT_AT)
                .expect("open");
        let mut largest = 0;
        // About 100 bytes a commit: several compactions happen on the way.
        for offset in 0..3_000i64 {
            commit(&service, (offset % 4) as i32, offset);
            largest = largest.max(service.offsets_log_size_bytes());
        }
        let expected = fetched_all(&service);
        assert_eq!(expected.len(), 4);
        assert_eq!(expected[3].1, 2_999);
        assert!(
            largest < 2 * COMPACT_AT + 4096,
            "never grew past the bound: {largest}"
        );
        assert!(service.offsets_log_size_bytes() < COMPACT_AT);
        assert!(
            service.offsets_log_flush_stats().count() >= 3_000,
            "flush counters survive compactions"
        );
        service.close().expect("close");
        assert!(!offsets_log::dir(dir.path())
            .with_extension("compacting")
            .exists());

        let reopened = GroupService::open(dir.path(), GroupConfig::default()).expect("reopen");
        assert_eq!(fetched_all(&reopened), expected);
        reopened.close().expect("close");
    }

    #[test]
    fn a_leftover_compaction_directory_is_ignored_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let service = GroupService::open(dir.path(), GroupConfig::default()).expect("open");
        commit(&service, 0, 42);
        service.close().expect("close");
        // A crash mid-rewrite leaves a partial partition beside the live one
        // (here: a copy of nothing useful, a stray segment-like file).
        let mut leftover = offsets_log::dir(dir.path()).into_os_string();
        leftover.push(".compacting");
        std::fs::create_dir_all(&leftover).expect("mkdir");
        std::fs::write(
            std::path::Path::new(&leftover).join("00000000000000000000.log"),
            b"garbage",
        )
        .expect("write");
        let reopened = GroupService::open(dir.path(), GroupConfig::default()).expect("reopen");
        assert_eq!(
            fetched_all(&reopened),
            vec![(0, 42, "commit 42".to_owned())]
        );
        assert!(!std::path::Path::new(&leftover).exists());
        reopened.close().expect("close");
    }

    #[test]
    fn calls_after_close_are_answered_unavailable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let service = GroupService::open(dir.path(), GroupConfig::default()).expect("open");
        service.close().expect("close");
        assert!(matches!(
            call(&service, simple_commit(1)),
            GroupReply::Unavailable
        ));
    }
}
