//! One partition: the door to its storage (a [`Backend`] behind the
//! partition contract) and the idempotent-producer state guarding appends
//! to it. Front ends reach a partition's records only through here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use herald_log::{Log, LogConfig};
use herald_records::{batches, BatchHeader};
use parking_lot::Mutex;

use crate::error::{BrokerError, ProduceError};
use crate::producer_snapshot;
use crate::producer_state::{
    last_sequence, BatchMetadata, ProducerEntry, ProducerStates, SequenceCheck,
};
use crate::storage::{
    Acks, Backend, BackendCompletion, FailedStorage, LocalStorage, PartitionStorage, StorageError,
    StorageStats, StoredBatches, ValidBatch, Watermarks,
};
use crate::subject_index::SubjectIndex;

/// Bytes read at a time while rebuilding producer state from the log.
const REBUILD_READ_BYTES: usize = 8 * 1024 * 1024;

/// Result of a successful produce to one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceOutcome {
    /// Offset of the batch's first record.
    pub base_offset: u64,
    /// Offset of the batch's last record.
    pub last_offset: u64,
    /// The partition's first stored offset after the append.
    pub log_start_offset: u64,
    /// True if the batch was a retry of one already stored (nothing appended).
    pub duplicate: bool,
}

/// Which offset a list-offsets lookup asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The first stored offset.
    Earliest,
    /// The next offset to be written (high watermark).
    Latest,
    /// The record with the largest timestamp.
    MaxTimestamp,
    /// The first record whose timestamp is at least this (ms since epoch).
    Timestamp(i64),
}

/// An offset and the timestamp of the record there (-1 when not applicable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetAndTimestamp {
    /// The offset.
    pub offset: u64,
    /// Its record's timestamp, or -1.
    pub timestamp: i64,
}

/// The leader of each replicated partition as the cluster last announced
/// it, by Raft group: what a node tells clients about partitions it holds
/// no replica of, and where it forwards writes it does not lead. Also each
/// group's in-sync replicas as its leader last announced them.
#[derive(Debug)]
pub struct LeaderHints {
    leaders: parking_lot::RwLock<HashMap<u64, (u64, u64)>>,
    /// Group -> (the announcing leader's term, its in-sync replicas).
    in_sync: parking_lot::RwLock<HashMap<u64, (u64, Vec<u64>)>>,
    /// Counts the announcements taken, so that a forwarded write waiting
    /// for a leader wakes when one is announced.
    announced: tokio::sync::watch::Sender<u64>,
}

impl Default for LeaderHints {
    fn default() -> Self {
        Self {
            leaders: parking_lot::RwLock::default(),
            in_sync: parking_lot::RwLock::default(),
            announced: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl LeaderHints {
    /// Records that `leader` leads `group` in `term` (an older term's
    /// announcement, arriving late, changes nothing).
    pub fn set(&self, group: u64, leader: u64, term: u64) {
        let newer = {
            let mut hints = self.leaders.write();
            let newer = hints.get(&group).is_none_or(|&(_, known)| term >= known);
            if newer {
                hints.insert(group, (leader, term));
            }
            newer
        };
        if newer {
            self.announced.send_modify(|n| *n += 1);
        }
    }

    /// The leader of `group` and its term, if announced.
    pub fn get(&self, group: u64) -> Option<(u64, u64)> {
        self.leaders.read().get(&group).copied()
    }

    /// Changes each time an announcement is taken (of any group): wait on
    /// it, then look again with [`LeaderHints::get`].
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.announced.subscribe()
    }

    /// Records the in-sync replicas of `group` as its leader of `term`
    /// announced them (an older term's, arriving late, changes nothing).
    pub fn set_in_sync(&self, group: u64, term: u64, replicas: Vec<u64>) {
        let mut sets = self.in_sync.write();
        if sets.get(&group).is_none_or(|&(known, _)| term >= known) {
            sets.insert(group, (term, replicas));
        }
    }

    /// The in-sync replicas of `group` last announced, if any.
    pub fn in_sync(&self, group: u64) -> Option<Vec<u64>> {
        self.in_sync.read().get(&group).map(|(_, set)| set.clone())
    }

    /// Every announced leader, as (group, leader, term): what a metadata
    /// image keeps of the announcements.
    #[cfg(feature = "cluster")]
    pub(crate) fn all_leaders(&self) -> Vec<(u64, u64, u64)> {
        self.leaders
            .read()
            .iter()
            .map(|(&group, &(leader, term))| (group, leader, term))
            .collect()
    }

    /// Every announced in-sync set, as (group, term, replicas).
    #[cfg(feature = "cluster")]
    pub(crate) fn all_in_sync(&self) -> Vec<(u64, u64, Vec<u64>)> {
        self.in_sync
            .read()
            .iter()
            .map(|(&group, (term, replicas))| (group, *term, replicas.clone()))
            .collect()
    }
}

/// The node ids of a partition's replicas, the preferred leader first;
/// shared by every view of the partition on a node, and changed when a
/// reassignment completes.
#[derive(Debug, Clone, Default)]
pub struct ReplicaNodes(Arc<parking_lot::RwLock<Vec<u64>>>);

impl ReplicaNodes {
    /// The replicas `nodes`.
    pub fn new(nodes: Vec<u64>) -> Self {
        Self(Arc::new(parking_lot::RwLock::new(nodes)))
    }

    /// The replicas now.
    pub fn get(&self) -> Vec<u64> {
        self.0.read().clone()
    }

    /// Whether `node` is one of them now.
    pub fn contains(&self, node: u64) -> bool {
        self.0.read().contains(&node)
    }

    /// Makes `nodes` the replicas.
    pub fn set(&self, nodes: Vec<u64>) {
        *self.0.write() = nodes;
    }
}

/// Where a replicated partition's replicas are.
#[derive(Debug, Clone)]
pub struct ReplicaSet {
    /// The partition's Raft group.
    pub group: u64,
    /// Its replicas.
    pub nodes: ReplicaNodes,
    /// The cluster's leader announcements.
    pub hints: Arc<LeaderHints>,
    /// Carries writes this node does not lead to the leader.
    #[cfg(feature = "cluster")]
    pub forwarder: Arc<crate::forwarding::Forwarder>,
}

/// A partition's leader, replicas and in-sync replicas, as Kafka's
/// metadata states them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    /// The leader's node id (`None`: no leader known now).
    pub leader: Option<i32>,
    /// The leader's epoch (its Raft term).
    pub leader_epoch: i32,
    /// Every replica.
    pub replicas: Vec<i32>,
    /// The replicas in sync with the leader.
    pub isr: Vec<i32>,
}

/// A partition of a topic.
pub struct Partition {
    index: u32,
    storage: Backend,
    /// Its replicas, for a partition of a replicated topic.
    replicas: Option<ReplicaSet>,
    snapshot: PathBuf,
    producers: Arc<ProducerStates>,
    /// A replicated partition's idempotent batches queued and not yet
    /// applied (see `replicated_producers`).
    #[cfg(feature = "cluster")]
    in_flight: Option<Arc<crate::replicated_producers::InFlight>>,
    /// Filters of record keys per block, for readers of a few subjects;
    /// none when the storage failed.
    subjects: Option<SubjectIndex>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Partition {
    /// Opens (or creates) the log in `dir` and rebuilds producer state from it.
    pub(crate) fn open(
        dir: &Path,
        topic: &str,
        index: u32,
        config: LogConfig,
        snapshot: PathBuf,
        producers_max: usize,
    ) -> Result<Self, BrokerError> {
        let local = LocalStorage::open(dir, config).map_err(|source| BrokerError::Log {
            topic: topic.to_owned(),
            partition: index,
            source,
        })?;
        let producers = rebuild_producer_state(local.log(), producer_snapshot::load(&snapshot));
        if !producers.is_empty() {
            tracing::debug!(
                topic,
                partition = index,
                producers = producers.len(),
                "rebuilt producer state"
            );
        }
        let watermarks = local.watermarks();
        let subjects =
            SubjectIndex::open(dir, watermarks.log_start_offset, watermarks.high_watermark);
        Ok(Self {
            index,
            replicas: None,
            storage: Backend::Local(local),
            producers: Arc::new(ProducerStates::new(producers, producers_max)),
            #[cfg(feature = "cluster")]
            in_flight: None,
            snapshot,
            subjects: Some(subjects),
        })
    }

    /// A relay's copy of partition `index` of the upstream's `topic`,
    /// opened (or created) in `dir`: read here, written by the relay's
    /// copier, appends forwarded upstream (see `relay`).
    pub(crate) fn open_mirror(
        dir: &Path,
        topic: &str,
        index: u32,
        config: LogConfig,
        snapshot: PathBuf,
        upstream: Arc<crate::relay::Upstream>,
    ) -> Result<Self, BrokerError> {
        let copy = LocalStorage::open(dir, config).map_err(|source| BrokerError::Log {
            topic: topic.to_owned(),
            partition: index,
            source,
        })?;
        Ok(Self {
            index,
            replicas: None,
            storage: Backend::Mirror(crate::storage::MirrorStorage::new(
                copy, upstream, topic, index,
            )),
            // Producer state lives upstream, where the batches are judged.
            producers: Arc::new(ProducerStates::new(HashMap::new(), 1)),
            #[cfg(feature = "cluster")]
            in_flight: None,
            snapshot,
            // The copier appends beneath the partition: readers of a few
            // subjects scan rather than consult per-block filters.
            subjects: None,
        })
    }

    /// The embedded log behind this partition, if that is its storage.
    pub(crate) fn local_log(&self) -> Option<Arc<herald_log::Log>> {
        match &self.storage {
            Backend::Local(local) => Some(local.shared_log()),
            _ => None,
        }
    }

    /// The storage behind this partition.
    pub(crate) fn backend(&self) -> &Backend {
        &self.storage
    }

    /// A partition whose storage could not be opened: it keeps its place in
    /// its topic and answers every request with the storage error, so the
    /// rest of the broker serves.
    pub(crate) fn failed(index: u32, reason: String, snapshot: PathBuf) -> Self {
        Self {
            index,
            replicas: None,
            storage: Backend::Failed(FailedStorage::new(reason)),
            producers: Arc::new(ProducerStates::new(HashMap::new(), 1)),
            #[cfg(feature = "cluster")]
            in_flight: None,
            snapshot,
            subjects: None,
        }
    }

    /// This node's replica of a replicated partition.
    #[cfg(feature = "cluster")]
    pub(crate) fn replicated(
        index: u32,
        storage: crate::storage::RaftStorage,
        replicas: ReplicaSet,
        snapshot: PathBuf,
        producers: Arc<ProducerStates>,
        in_flight: Arc<crate::replicated_producers::InFlight>,
    ) -> Self {
        Self {
            index,
            storage: Backend::Raft(storage),
            replicas: Some(replicas),
            producers,
            in_flight: Some(in_flight),
            snapshot,
            subjects: None,
        }
    }

    /// A replicated partition of which this node holds no replica; its
    /// replicas take batches of at most `max_batch_bytes`.
    #[cfg(feature = "cluster")]
    pub(crate) fn elsewhere(
        index: u32,
        replicas: ReplicaSet,
        snapshot: PathBuf,
        max_batch_bytes: usize,
    ) -> Self {
        Self {
            index,
            storage: Backend::Elsewhere(crate::storage::ElsewhereStorage::new(max_batch_bytes)),
            replicas: Some(replicas),
            producers: Arc::new(ProducerStates::new(HashMap::new(), 1)),
            in_flight: None,
            snapshot,
            subjects: None,
        }
    }

    /// Leader, replicas and in-sync replicas, for metadata; `this_node`
    /// holds an unreplicated partition alone. A replica here knows the
    /// leader first-hand; otherwise the cluster's last announcement
    /// answers. In-sync replicas are what the leader last announced (see
    /// `in_sync`), with the leader always among them (a Raft leader holds
    /// everything committed); every replica until one is announced.
    pub fn replica_view(&self, this_node: i32) -> ReplicaView {
        let Some(set) = &self.replicas else {
            return ReplicaView {
                leader: Some(this_node),
                leader_epoch: 0,
                replicas: vec![this_node],
                isr: vec![this_node],
            };
        };
        let first_hand = match &self.storage {
            #[cfg(feature = "cluster")]
            Backend::Raft(r) => r.leader_and_term(),
            _ => None,
        };
        let (leader, term) = match first_hand.or_else(|| set.hints.get(set.group)) {
            Some((leader, term)) => (Some(leader as i32), term as i32),
            None => (None, 0),
        };
        let replicas: Vec<i32> = set.nodes.get().iter().map(|&n| n as i32).collect();
        let isr = match set.hints.in_sync(set.group) {
            Some(in_sync) => {
                // An announcement from before a reassignment may name a
                // replica that left.
                let mut isr: Vec<i32> = in_sync
                    .iter()
                    .map(|&n| n as i32)
                    .filter(|n| replicas.contains(n))
                    .collect();
                if let Some(leader) = leader.filter(|l| !isr.contains(l)) {
                    isr.push(leader);
                    isr.sort_unstable();
                }
                isr
            }
            None => replicas.clone(),
        };
        ReplicaView {
            leader,
            leader_epoch: term,
            isr,
            replicas,
        }
    }

    /// This node's replica, for a replicated partition held here.
    #[cfg(feature = "cluster")]
    pub(crate) fn raft_replica(&self) -> Option<&Arc<herald_raft::PartitionReplica>> {
        match &self.storage {
            Backend::Raft(r) => Some(r.replica()),
            _ => None,
        }
    }

    /// Whether this node holds the partition's records: an unreplicated
    /// partition, or a replica of a replicated one. A replicated partition
    /// with no replica here keeps its place in its topic, but its records
    /// are read on the nodes [`Partition::replica_set`] names.
    pub fn held_here(&self) -> bool {
        #[cfg(feature = "cluster")]
        if matches!(self.storage, Backend::Elsewhere(_)) {
            return false;
        }
        true
    }

    /// Whether this node answers for the partition as its leader does: an
    /// unreplicated partition always; a replicated one only while its
    /// replica here leads the group. What Kafka clients ask only of the
    /// leader (ListOffsets) is refused elsewhere, so they look the leader
    /// up again rather than take a follower's (or no replica's) view.
    pub fn leads_here(&self) -> bool {
        #[cfg(feature = "cluster")]
        if self.replicas.is_some() {
            return self.raft_replica().is_some_and(|r| r.is_leader());
        }
        true
    }

    /// The replicas of a replicated partition.
    pub fn replica_set(&self) -> Option<&ReplicaSet> {
        self.replicas.as_ref()
    }

    /// Writes the producer-state snapshot. Only valid while no append runs
    /// (at shutdown, after the listeners stopped): the state must be exactly
    /// that of the log up to its high watermark.
    pub(crate) fn save_producer_snapshot(&self) -> Result<(), BrokerError> {
        if matches!(self.storage, Backend::Failed(_)) {
            // Nothing was rebuilt: the snapshot on disk is left for the
            // start after the repair.
            return Ok(());
        }
        if self.replicas.is_some() {
            // A replica rebuilds its producers by applying its log again.
            return Ok(());
        }
        let next_offset = self.storage.watermarks().high_watermark;
        let producers = self.producers.snapshot();
        if producers.is_empty() {
            return match std::fs::remove_file(&self.snapshot) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(BrokerError::io("remove", &self.snapshot, e))
                }
                _ => Ok(()),
            };
        }
        producer_snapshot::save(&self.snapshot, next_offset, &producers)
    }

    /// Removes the producer-state snapshot (the partition is being deleted).
    pub(crate) fn remove_producer_snapshot(&self) {
        let _ = std::fs::remove_file(&self.snapshot);
    }

    /// The per-block filters of record keys, built by an indexer that
    /// follows the log (see [`SubjectIndex`]); `None` if the storage failed.
    pub fn subject_index(&self) -> Option<&SubjectIndex> {
        self.subjects.as_ref()
    }

    /// Partition index within its topic.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Appends the records of one produce request to this partition and
    /// resolves once they are as durable as `acks` asks. Kafka requires
    /// exactly one batch per partition in a request (v3+), which makes the
    /// answer (one base offset) and idempotence well defined.
    pub async fn append(&self, records: &[u8], acks: Acks) -> Result<ProduceOutcome, ProduceError> {
        let valid = self.single_valid_batch(records)?;
        if valid.header().producer_id() < 0 {
            // Not idempotent: placed without any lock.
            let pending = self.storage.append(valid, acks)?;
            let placed = pending.completion.await.map_err(ProduceError::Storage)?;
            return Ok(self.outcome(placed.base_offset, placed.last_offset, false));
        }
        // Validated before the sequence check, so a damaged retry is refused
        // rather than answered as a duplicate.
        if valid.header().is_transactional() {
            return Err(ProduceError::Transactional);
        }
        if matches!(self.storage, Backend::Mirror(_)) {
            // A relay's producers hold ids its upstream handed out, and
            // the upstream's leader keeps their state: the batch goes
            // there as it is, and its verdict (a duplicate answered with
            // the original's offsets, or a sequence refusal) comes back.
            let pending = self.storage.append(valid, acks)?;
            let placed = pending.completion.await.map_err(ProduceError::Storage)?;
            return Ok(self.outcome(placed.base_offset, placed.last_offset, false));
        }
        if !self.storage.places_synchronously() {
            return self.append_replicated_idempotent(valid, acks).await;
        }
        let (outcome, completion) = self.place_idempotent(valid, acks)?;
        if let Some(completion) = completion {
            completion.await.map_err(ProduceError::Storage)?;
        }
        Ok(outcome)
    }

    /// Appends the records of one publish (one batch, acks=all) through
    /// the partition's leader wherever it is: here, or, for a replicated
    /// partition this node does not lead, forwarded to the leader (see
    /// `forwarding`) and answered once committed there. For front ends
    /// whose clients do not look leaders up (push publishes); a Kafka
    /// produce goes to [`Partition::append`], whose NOT_LEADER_OR_FOLLOWER
    /// sends the client to the leader. An idempotent producer's batch is
    /// taken only where the leader's producer state can judge it: on the
    /// leader.
    pub async fn append_through_leader(
        &self,
        records: &[u8],
    ) -> Result<ProduceOutcome, ProduceError> {
        #[cfg(feature = "cluster")]
        if let Some(set) = &self.replicas {
            return self.append_forwarded(set, records).await;
        }
        self.append(records, Acks::All).await
    }

    /// Whether [`Partition::append_through_leader`] places its batch in
    /// the partition's order on its first poll: true unless it would be
    /// forwarded to a leader on another node, where each forward is a call
    /// of its own and two in flight may land in either order. A front end
    /// that starts appends one after the other, polling each once as it
    /// starts, may keep several in flight while this holds and still have
    /// them stored in the order they came; otherwise it must await each
    /// before the next. A leader that changes meanwhile refuses the later
    /// ones rather than reorder them.
    pub fn appends_in_order_here(&self) -> bool {
        self.leads_here()
    }

    /// [`Partition::append_through_leader`] for a replicated partition.
    #[cfg(feature = "cluster")]
    async fn append_forwarded(
        &self,
        set: &ReplicaSet,
        records: &[u8],
    ) -> Result<ProduceOutcome, ProduceError> {
        let replica = self.raft_replica();
        if replica.is_some_and(|r| r.is_leader()) {
            return self.append(records, Acks::All).await;
        }
        let valid = self.single_valid_batch(records)?;
        if valid.header().producer_id() >= 0 {
            return Err(ProduceError::Storage(StorageError::NotLeader));
        }
        let first_hand = || replica.and_then(|r| r.leader());
        let batch = bytes::Bytes::copy_from_slice(valid.bytes());
        let placed = set.forwarder.write(set, first_hand, batch).await?;
        Ok(self.outcome(placed.base_offset, placed.last_offset, false))
    }

    /// An idempotent producer's batch for a replicated partition (see
    /// `replicated_producers`): checked against the applied state and what
    /// this leader queued, then queued.
    #[cfg(feature = "cluster")]
    async fn append_replicated_idempotent(
        &self,
        valid: ValidBatch<'_>,
        acks: Acks,
    ) -> Result<ProduceOutcome, ProduceError> {
        use crate::producer_state::SequenceCheck;
        use crate::replicated_producers::{check_queued, QueuedCheck};
        let (Backend::Raft(raft), Some(in_flight)) = (&self.storage, &self.in_flight) else {
            return Err(ProduceError::IdempotenceUnavailable);
        };
        let replica = raft.replica();
        if !replica.is_leader() || !replica.caught_up() {
            return Err(ProduceError::Storage(StorageError::NotLeader));
        }
        let header = valid.header();
        let (producer_id, epoch, first, count) = (
            header.producer_id(),
            header.producer_epoch(),
            header.base_sequence(),
            header.records_count(),
        );
        let last = last_sequence(first, count);
        let (entry, created) = self.producers.entry(producer_id);
        let refuse = |e: ProduceError| {
            if created {
                self.producers.forget_unused(producer_id);
            }
            Err(e)
        };
        let completion = {
            // Held while this producer's batch is checked and queued, so
            // its batches are judged and queued in one order.
            let entry = entry.lock();
            match check_queued(in_flight.last(producer_id), epoch, first, last) {
                QueuedCheck::Duplicate => {
                    return refuse(ProduceError::DuplicateSequence { producer_id });
                }
                QueuedCheck::OutOfOrder { expected } => {
                    return refuse(ProduceError::OutOfOrderSequence {
                        producer_id,
                        expected,
                        found: first,
                    });
                }
                QueuedCheck::Next => {}
                QueuedCheck::Nothing => match entry.check(producer_id, epoch, first, count) {
                    Ok(SequenceCheck::Duplicate(meta)) => {
                        return Ok(self.outcome(meta.base_offset, meta.last_offset, true));
                    }
                    Ok(SequenceCheck::Append) => {}
                    Err(e) => return refuse(e),
                },
            }
            let pending = match self.storage.append(valid, acks) {
                Ok(pending) => pending,
                Err(e) => return refuse(e.into()),
            };
            in_flight.queued(producer_id, epoch, last);
            if created {
                self.producers.admit();
            }
            pending.completion
        };
        match completion.await {
            Ok(placed) => Ok(self.outcome(placed.base_offset, placed.last_offset, false)),
            Err(e) => {
                in_flight.abandoned(producer_id, epoch, last);
                Err(ProduceError::Storage(e))
            }
        }
    }

    /// Without clustering every backend places synchronously.
    #[cfg(not(feature = "cluster"))]
    async fn append_replicated_idempotent(
        &self,
        _valid: ValidBatch<'_>,
        _acks: Acks,
    ) -> Result<ProduceOutcome, ProduceError> {
        Err(ProduceError::IdempotenceUnavailable)
    }

    /// The one batch of a produce request's records, checked against the
    /// size limit (first, so an oversized batch costs no CRC) and validated.
    #[inline]
    fn single_valid_batch<'a>(&self, records: &'a [u8]) -> Result<ValidBatch<'a>, ProduceError> {
        let mut split = batches(records);
        let batch = split
            .next()
            .ok_or(ProduceError::InvalidRecords("no record batch"))??;
        if split.next().is_some() {
            return Err(ProduceError::InvalidRecords(
                "exactly one record batch per partition is allowed",
            ));
        }
        let max = self.storage.max_batch_bytes();
        if batch.len() > max {
            return Err(ProduceError::TooLarge {
                size: batch.len(),
                max,
            });
        }
        Ok(ValidBatch::new(batch)?)
    }

    /// Checks an idempotent producer's sequence and places the batch in the
    /// partition's order; a retried batch already stored is answered with
    /// its offsets and nothing to wait for.
    fn place_idempotent(
        &self,
        valid: ValidBatch<'_>,
        acks: Acks,
    ) -> Result<(ProduceOutcome, Option<BackendCompletion>), ProduceError> {
        let producer_id = valid.header().producer_id();
        let (entry, created) = self.producers.entry(producer_id);
        let placed = self.place_checked(&entry, valid, acks);
        if created {
            match placed {
                Ok((ref outcome, _)) if !outcome.duplicate => self.producers.admit(),
                _ => self.producers.forget_unused(producer_id),
            }
        }
        placed
    }

    /// Checks the batch against its producer's `entry` and places it.
    fn place_checked(
        &self,
        entry: &Mutex<ProducerEntry>,
        valid: ValidBatch<'_>,
        acks: Acks,
    ) -> Result<(ProduceOutcome, Option<BackendCompletion>), ProduceError> {
        let header = valid.header();
        let producer_id = header.producer_id();
        // Held while the batch is placed (not while it becomes durable), so
        // that this producer's batches are checked and placed in one order;
        // other producers are not blocked.
        let mut entry = entry.lock();
        let (epoch, first, count) = (
            header.producer_epoch(),
            header.base_sequence(),
            header.records_count(),
        );
        match entry.check(producer_id, epoch, first, count)? {
            SequenceCheck::Duplicate(meta) => {
                Ok((self.outcome(meta.base_offset, meta.last_offset, true), None))
            }
            SequenceCheck::Append => {
                let pending = self.storage.append(valid, acks)?;
                let Some(appended) = pending.appended else {
                    // Checked before the sequence: unreachable with a
                    // backend that keeps its word.
                    return Err(ProduceError::IdempotenceUnavailable);
                };
                entry.record(
                    epoch,
                    BatchMetadata {
                        first_sequence: first,
                        last_sequence: last_sequence(first, count),
                        base_offset: appended.base_offset,
                        last_offset: appended.last_offset,
                    },
                    header.max_timestamp(),
                );
                Ok((
                    self.outcome(appended.base_offset, appended.last_offset, false),
                    Some(pending.completion),
                ))
            }
        }
    }

    #[inline]
    fn outcome(&self, base_offset: u64, last_offset: u64, duplicate: bool) -> ProduceOutcome {
        ProduceOutcome {
            base_offset,
            last_offset,
            log_start_offset: self.storage.log_start_offset(),
            duplicate,
        }
    }

    /// Whole batches from `offset`, up to `max_bytes` (at least one batch if
    /// any exists there), with the watermarks of this read: none of the
    /// batches lies past the high watermark it states.
    pub async fn read(&self, offset: u64, max_bytes: usize) -> Result<StoredBatches, StorageError> {
        self.storage.read(offset, max_bytes).await
    }

    /// The log start offset and high watermark now.
    pub fn watermarks(&self) -> Watermarks {
        self.storage.watermarks()
    }

    /// Resolves once the high watermark is above `offset`, or the partition
    /// stops serving (deleted, closed or failed); the caller re-checks the
    /// watermarks. Wrap it in a timeout for a long poll.
    pub async fn wait_for_data(&self, offset: u64) {
        self.storage.wait_for_data(offset).await
    }

    /// Moves the log start offset up to `offset` (Kafka's DeleteRecords),
    /// durably; returns the log start offset after the call.
    pub async fn truncate_before(&self, offset: u64) -> Result<u64, StorageError> {
        self.storage.truncate_before(offset).await
    }

    /// Why the partition's storage refuses to serve, if it does (a failed
    /// fsync, a damaged log).
    pub fn failure(&self) -> Option<Arc<str>> {
        self.storage.failure()
    }

    /// Size and flush figures of the partition's storage.
    pub fn stats(&self) -> StorageStats {
        self.storage.stats()
    }

    /// Looks up an offset; `None` when no record matches (Kafka answers -1).
    pub async fn list_offset(
        &self,
        spec: OffsetSpec,
    ) -> Result<Option<OffsetAndTimestamp>, StorageError> {
        let watermarks = |offset| OffsetAndTimestamp {
            offset,
            timestamp: -1,
        };
        Ok(match spec {
            OffsetSpec::Earliest => {
                self.check_serving()?;
                Some(watermarks(self.watermarks().log_start_offset))
            }
            OffsetSpec::Latest => {
                self.check_serving()?;
                Some(watermarks(self.watermarks().high_watermark))
            }
            OffsetSpec::MaxTimestamp => match self.storage.max_timestamp().await? {
                Some(t) => Some(self.exact(t.offset, t.timestamp, t.timestamp, None).await),
                None => None,
            },
            OffsetSpec::Timestamp(ts) => match self.storage.offset_for_timestamp(ts).await? {
                Some(t) => Some(self.exact(t.offset, t.timestamp, ts, None).await),
                None => None,
            },
        })
    }

    fn check_serving(&self) -> Result<(), StorageError> {
        match self.failure() {
            Some(reason) => Err(StorageError::Failed(reason)),
            None => Ok(()),
        }
    }

    /// Storage answers timestamp lookups exactly for uncompressed batches,
    /// but with the containing batch for compressed ones; this finds the
    /// exact record (first with timestamp >= `target`) in that batch, at
    /// or after `from` (the log start when `None`).
    pub(crate) async fn exact(
        &self,
        offset: u64,
        timestamp: i64,
        target: i64,
        from: Option<u64>,
    ) -> OffsetAndTimestamp {
        let found = OffsetAndTimestamp { offset, timestamp };
        let Ok(slice) = self.storage.read(offset, 1).await else {
            return found;
        };
        let Some(Ok(batch)) = batches(&slice.bytes).next() else {
            return found;
        };
        if BatchHeader::parse(batch).is_none_or(|h| h.compression() == 0) {
            return found;
        }
        // Records below the log start (a truncation inside the batch) are
        // not served, so they do not answer either.
        let start = from.unwrap_or(self.storage.log_start_offset()) as i64;
        let mut scratch = Vec::new();
        herald_records::first_at_or_after(batch, target, start, &mut scratch)
            .and_then(|(offset, timestamp)| Some((u64::try_from(offset).ok()?, timestamp)))
            .map_or(found, |(offset, timestamp)| OffsetAndTimestamp {
                offset,
                timestamp,
            })
    }

    /// Number of producers with state on this partition.
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Drops the state of producers unused for `expiration_ms` at `now_ms`
    /// (Kafka's `producer.id.expiration.ms`); returns how many.
    pub(crate) fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.expire(now_ms, expiration_ms)
    }

    /// Periodic upkeep of the storage (rolls, flushes, retention).
    pub(crate) fn maintain(&self, now: SystemTime) -> Result<(), herald_log::LogError> {
        self.storage.maintain(now)
    }

    /// Applies the topic's changed storage settings.
    pub(crate) fn update_config(&self, config: LogConfig) -> Result<(), herald_log::ConfigError> {
        self.storage.update_config(config)
    }

    /// Applies the topic's `write.caching` (see `Backend::set_write_caching`).
    pub(crate) fn set_write_caching(&self, on: bool) {
        self.storage.set_write_caching(on)
    }

    /// Flushes and closes the storage cleanly.
    pub(crate) fn close(&self) -> Result<(), herald_log::LogError> {
        self.storage.close()
    }

    /// Stops the storage without a flush: the partition is being deleted.
    pub(crate) fn retire(&self) {
        self.storage.retire()
    }
}

/// Replays the batch headers in the log to recover each producer's epoch and
/// last batches, so retries after a restart are still recognised. Starts
/// from a snapshot when one is valid for this log.
fn rebuild_producer_state(
    log: &Log,
    snapshot: Option<(u64, HashMap<i64, ProducerEntry>)>,
) -> HashMap<i64, ProducerEntry> {
    let (mut producers, start) = match snapshot {
        Some((next_offset, state)) if next_offset <= log.high_watermark() => (state, next_offset),
        _ => (HashMap::new(), 0),
    };
    let mut offset = start.max(log.log_start_offset());
    while offset < log.high_watermark() {
        // A read can only fail if retention moved the start past `offset`
        // meanwhile; nothing earlier matters then.
        let Ok(slice) = log.read(offset, REBUILD_READ_BYTES) else {
            break;
        };
        if slice.bytes.is_empty() || slice.next_offset <= offset {
            break;
        }
        for header in batches(&slice.bytes)
            .map_while(Result::ok)
            .filter_map(BatchHeader::parse)
        {
            if header.producer_id() < 0 || header.base_offset() < 0 {
                continue;
            }
            let first = header.base_sequence();
            producers.entry(header.producer_id()).or_default().record(
                header.producer_epoch(),
                BatchMetadata {
                    first_sequence: first,
                    last_sequence: last_sequence(first, header.records_count()),
                    base_offset: header.base_offset() as u64,
                    last_offset: header.last_offset().max(0) as u64,
                },
                header.max_timestamp(),
            );
        }
        offset = slice.next_offset;
    }
    producers
}
