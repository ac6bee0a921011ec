//! Consistent snapshots of topics (seed 000's "efficient snapshot of an
//! entire topic"): a cut, one offset per partition, consistent with every
//! acknowledged produce and every record any client has been shown, whose
//! records are pinned against retention until the snapshot is deleted or
//! expires.
//!
//! Taking one: every partition's log start is pinned (retention and
//! DeleteRecords stop there), then, with the [`CutGate`] closed, each
//! partition's reserved end is read ([`herald_log::Log::reserved_end`]:
//! every acknowledged append lies below it). The snapshot is answered once
//! the appends in flight at the cut are written, and kept in
//! `<data-dir>/herald-snapshots.json`. Each of its topics is served as a
//! read-only view topic ([`ViewTopic`]).
//!
//! Snapshots are of topics stored in this node's embedded log; a cluster's
//! replicated topics and a relay's mirrored ones are refused.

mod cut_gate;
mod record;
mod view;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use herald_log::Log;
use herald_records::{batches, BatchHeader};
use parking_lot::RwLock;
use uuid::Uuid;

pub use cut_gate::CutGate;
pub use record::{PartitionCut, SnapshotRecord, TopicCut, SNAPSHOTS_FILE};
pub use view::{parse_view_name, view_name, ViewPartition, ViewTopic, VIEW_PREFIX};

use record::SnapshotsFile;

use crate::topic::Topic;

/// Most snapshots kept at once.
pub const SNAPSHOTS_MAX: usize = 1000;
/// Longest snapshot id.
pub const SNAPSHOT_ID_MAX: usize = herald_query::QUERY_ID_MAX;
/// How long taking a snapshot waits for the appends in flight at its cut.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(10);

/// Why a snapshot operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The id breaks the rules.
    #[error("snapshot id {id:?} is invalid: {reason}")]
    InvalidId {
        /// The id given.
        id: String,
        /// Which rule.
        reason: &'static str,
    },
    /// A snapshot with this id exists.
    #[error("snapshot {id} already exists")]
    Exists {
        /// The id.
        id: String,
    },
    /// No snapshot has this id.
    #[error("unknown snapshot {id}")]
    Unknown {
        /// The id asked for.
        id: String,
    },
    /// A topic to cut does not exist.
    #[error("unknown topic {name}")]
    UnknownTopic {
        /// Its name.
        name: String,
    },
    /// No topic was named.
    #[error("a snapshot needs at least one topic")]
    NoTopics,
    /// A topic was named twice.
    #[error("topic {name} is named twice")]
    DuplicateTopic {
        /// Its name.
        name: String,
    },
    /// A topic whose partitions are not all in this node's embedded log.
    #[error("topic {name} cannot be snapshotted: {reason}")]
    Unsupported {
        /// Its name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// The time to live is zero or past what a clock holds.
    #[error("invalid time to live: {0}")]
    InvalidTtl(&'static str),
    /// Appends placed before the cut could not be written (their
    /// partition failed or closed); nothing was kept.
    #[error("records of {name}/{partition} placed before the cut were not written: the partition failed or closed")]
    NotWritten {
        /// The topic.
        name: String,
        /// The partition.
        partition: u32,
    },
    /// As many snapshots as allowed are kept already.
    #[error("{max} snapshots are kept already; delete one first")]
    TooMany {
        /// [`SNAPSHOTS_MAX`].
        max: usize,
    },
    /// The snapshot list could not be read or written; nothing changed.
    #[error("cannot {op} {path}: {reason}")]
    Storage {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's or parser's reason.
        reason: String,
    },
}

/// What to snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotSpec {
    /// Its id; one is made up (`snap-` and 8 hex digits) when `None`.
    pub id: Option<String>,
    /// The topics to cut.
    pub topics: Vec<Arc<Topic>>,
    /// How long it is kept; forever when `None`.
    pub ttl: Option<Duration>,
    /// Kept in memory only, for a reader that lives no longer than the
    /// process (a SQL query's cut): not saved, and nothing is flushed for
    /// it, so taking and deleting it costs no fsync; a restart forgets it.
    pub ephemeral: bool,
}

#[derive(Default)]
struct State {
    records: BTreeMap<String, Arc<SnapshotRecord>>,
    by_name: HashMap<String, Arc<ViewTopic>>,
    by_id: HashMap<Uuid, Arc<ViewTopic>>,
    /// Topics a snapshot being taken holds (by id, with how many such
    /// snapshots): they may not be deleted meanwhile.
    held: HashMap<Uuid, usize>,
    /// Ids of the ephemeral snapshots, never saved.
    ephemeral: HashSet<String>,
}

impl State {
    fn insert(&mut self, record: Arc<SnapshotRecord>, topics: &dyn Fn(&str) -> Option<Arc<Topic>>) {
        for cut in &record.topics {
            let Some(topic) = topics(&cut.name).filter(|t| t.id() == cut.topic_id) else {
                tracing::warn!(snapshot = %record.id, topic = %cut.name, "a snapshot's topic is gone; its view is not served");
                continue;
            };
            let Some(view) = ViewTopic::new(&record.id, cut.view_id, topic, &cut.partitions) else {
                tracing::warn!(snapshot = %record.id, topic = %cut.name, "a snapshot's partitions are not in this node's log; its view is not served");
                continue;
            };
            let view = Arc::new(view);
            self.by_name
                .insert(view.name().to_owned(), Arc::clone(&view));
            self.by_id.insert(view.id(), view);
        }
        self.records.insert(record.id.clone(), record);
    }

    /// Every snapshot but the ephemeral ones: what the file holds.
    fn saved_records(&self) -> Vec<SnapshotRecord> {
        self.records
            .values()
            .filter(|r| !self.ephemeral.contains(&r.id))
            .map(|r| SnapshotRecord::clone(r))
            .collect()
    }

    fn remove(&mut self, id: &str) -> Option<(Arc<SnapshotRecord>, Vec<Arc<Topic>>)> {
        let record = self.records.remove(id)?;
        self.ephemeral.remove(id);
        let mut topics = Vec::new();
        for cut in &record.topics {
            if let Some(view) = self.by_name.remove(&view_name(id, &cut.name)) {
                self.by_id.remove(&view.id());
                topics.push(Arc::clone(view.topic()));
            }
        }
        Some((record, topics))
    }

    /// The lowest start any snapshot holds of each partition of `topic`.
    fn floors(&self, topic: &Topic) -> Vec<Option<u64>> {
        let mut floors = vec![None; topic.partition_count() as usize];
        for cut in self
            .records
            .values()
            .flat_map(|r| r.topics.iter())
            .filter(|c| c.topic_id == topic.id())
        {
            for (floor, partition) in floors.iter_mut().zip(&cut.partitions) {
                *floor = Some(floor.map_or(partition.start, |f: u64| f.min(partition.start)));
            }
        }
        floors
    }
}

/// Sets each partition's retention floor of `topic` (a log's maintenance
/// lock is taken for each: call it with no other lock held).
fn set_floors(topic: &Topic, floors: Vec<Option<u64>>) {
    for (partition, floor) in topic.partitions().iter().zip(floors) {
        if let Some(log) = partition.local_log() {
            log.set_retention_floor(floor);
        }
    }
}

/// Every snapshot of this node, and the cut gate.
pub struct Snapshots {
    file: SnapshotsFile,
    gate: Arc<CutGate>,
    /// Serializes creation, deletion and expiry: each is saved before the
    /// next starts, and pins are raised only with no cut in progress.
    changes: tokio::sync::Mutex<()>,
    state: RwLock<State>,
}

impl std::fmt::Debug for Snapshots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshots")
            .field("count", &self.state.read().records.len())
            .finish_non_exhaustive()
    }
}

impl Snapshots {
    /// Reads the snapshots kept in `data_dir` and pins their records
    /// again; `topics` finds an open topic by name.
    pub fn open(
        data_dir: &Path,
        topics: &dyn Fn(&str) -> Option<Arc<Topic>>,
    ) -> Result<Self, SnapshotError> {
        let file = SnapshotsFile::new(data_dir);
        let mut state = State::default();
        for record in file.load()? {
            if state.records.contains_key(&record.id) {
                return Err(file.invalid(format!("snapshot {} is listed twice", record.id)));
            }
            state.insert(Arc::new(record), topics);
        }
        let views: Vec<Arc<ViewTopic>> = state.by_name.values().cloned().collect();
        for view in &views {
            set_floors(view.topic(), state.floors(view.topic()));
        }
        if !state.records.is_empty() {
            tracing::info!(snapshots = state.records.len(), "snapshots restored");
        }
        Ok(Self {
            file,
            gate: Arc::default(),
            changes: tokio::sync::Mutex::new(()),
            state: RwLock::new(state),
        })
    }

    /// The gate answers that show records pass (see [`CutGate`]).
    pub fn gate(&self) -> &CutGate {
        &self.gate
    }

    /// The gate, shared: for a front end that sends records from a task
    /// of its own (push delivery).
    pub fn shared_gate(&self) -> Arc<CutGate> {
        Arc::clone(&self.gate)
    }

    /// Takes a snapshot of `spec.topics` at `now`.
    ///
    /// Call it through `Broker::take_snapshot`, which holds the topics
    /// against deletion while the snapshot is taken.
    pub(crate) async fn create(
        &self,
        spec: SnapshotSpec,
        now: SystemTime,
    ) -> Result<Arc<SnapshotRecord>, SnapshotError> {
        let _serial = self.changes.lock().await;
        let id = match spec.id {
            Some(id) => {
                validate_id(&id)?;
                id
            }
            None => format!("snap-{}", &Uuid::new_v4().simple().to_string()[..8]),
        };
        let created_at_ms = millis(now);
        let expires_at_ms = match spec.ttl {
            None => None,
            Some(ttl) if ttl.is_zero() => return Err(SnapshotError::InvalidTtl("it is zero")),
            Some(ttl) => Some(
                i64::try_from(ttl.as_millis())
                    .ok()
                    .and_then(|ms| created_at_ms.checked_add(ms))
                    .ok_or(SnapshotError::InvalidTtl("it is too long"))?,
            ),
        };
        {
            let state = self.state.read();
            if state.records.contains_key(&id) {
                return Err(SnapshotError::Exists { id });
            }
            if state.records.len() >= SNAPSHOTS_MAX {
                return Err(SnapshotError::TooMany { max: SNAPSHOTS_MAX });
            }
        }
        for topic in &spec.topics {
            if view_name(&id, topic.name()).len() > crate::topic::TOPIC_NAME_MAX {
                return Err(SnapshotError::InvalidId {
                    id,
                    reason: "its view topic's name would be longer than 249 characters",
                });
            }
        }
        let logs = local_logs(&spec.topics)?;
        // Dropped before the snapshot is kept (an error, or the caller gone),
        // the pins go back to what the kept snapshots hold.
        let mut pins_back = PinsBack {
            snapshots: self,
            topics: &spec.topics,
            armed: true,
        };
        // Pinned before the cut, so nothing between start and cut can be
        // deleted meanwhile; off the runtime, since a pin waits for a log's
        // maintenance (which may be in an fsync).
        let pinning = logs.clone();
        let starts: Vec<Vec<u64>> = tokio::task::spawn_blocking(move || {
            pinning
                .iter()
                .map(|logs| logs.iter().map(|log| log.pin_log_start()).collect())
                .collect()
        })
        .await
        .map_err(|e| SnapshotError::Storage {
            op: "pin",
            path: PathBuf::new(),
            reason: e.to_string(),
        })?;
        let cutting = Instant::now();
        let ends: Vec<Vec<u64>> = self.gate.closed_while(|| {
            logs.iter()
                .map(|logs| logs.iter().map(|log| log.reserved_end()).collect())
                .collect()
        });
        let cut_nanos = u64::try_from(cutting.elapsed().as_nanos()).unwrap_or(u64::MAX);
        for ((topic, logs), ends) in spec.topics.iter().zip(&logs).zip(&ends) {
            for (index, (log, &end)) in logs.iter().zip(ends).enumerate() {
                if !wait_until_written(log, end).await {
                    return Err(SnapshotError::NotWritten {
                        name: topic.name().to_owned(),
                        partition: index as u32,
                    });
                }
            }
        }
        // On disk before the snapshot is: a crash must not bring the log
        // back below a cut that later records would then fill. (An
        // ephemeral cut does not outlive a crash.)
        let flushing = if spec.ephemeral {
            Vec::new()
        } else {
            logs.clone()
        };
        let flush_ends = ends.clone();
        let flushed = tokio::task::spawn_blocking(move || {
            for (logs, ends) in flushing.iter().zip(&flush_ends) {
                for (log, &end) in logs.iter().zip(ends) {
                    log.flush_through(end).map_err(|e| e.to_string())?;
                }
            }
            Ok::<_, String>(())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|flushed| flushed);
        if let Err(reason) = flushed {
            return Err(SnapshotError::Storage {
                op: "flush",
                path: PathBuf::new(),
                reason,
            });
        }
        let mut topics = Vec::with_capacity(spec.topics.len());
        for ((topic, logs), (starts, ends)) in
            spec.topics.iter().zip(&logs).zip(starts.iter().zip(&ends))
        {
            let partitions = logs
                .iter()
                .zip(starts)
                .zip(ends)
                .map(|((log, &start), &end)| describe_range(log, start, end))
                .collect();
            topics.push(TopicCut {
                name: topic.name().to_owned(),
                topic_id: topic.id(),
                view_id: Uuid::new_v4(),
                partitions,
            });
        }
        let record = Arc::new(SnapshotRecord {
            id: id.clone(),
            created_at_ms,
            expires_at_ms,
            cut_nanos,
            topics,
        });
        if !spec.ephemeral {
            let mut all = self.state.read().saved_records();
            all.push(SnapshotRecord::clone(&record));
            self.file.save(all)?;
        }
        let by_name = |name: &str| spec.topics.iter().find(|t| t.name() == name).cloned();
        {
            let mut state = self.state.write();
            if spec.ephemeral {
                state.ephemeral.insert(id.clone());
            }
            state.insert(Arc::clone(&record), &by_name);
        }
        pins_back.armed = false;
        tracing::info!(snapshot = %id, topics = record.topics.len(), records = record.records(), cut_nanos, "snapshot taken");
        Ok(record)
    }

    /// Marks `topics` as held by a snapshot about to be taken, until the
    /// answer is dropped: [`Snapshots::pinning`] names them, so they are
    /// not deleted meanwhile. The caller checks, under the same lock topic
    /// deletion takes, that they are still registered.
    pub(crate) fn hold(&self, topics: &[Arc<Topic>]) -> TopicsHeld<'_> {
        let ids: Vec<Uuid> = topics.iter().map(|t| t.id()).collect();
        let mut state = self.state.write();
        for id in &ids {
            *state.held.entry(*id).or_default() += 1;
        }
        TopicsHeld {
            snapshots: self,
            ids,
        }
    }

    /// Every snapshot, by id.
    pub fn list(&self) -> Vec<Arc<SnapshotRecord>> {
        self.state.read().records.values().cloned().collect()
    }

    /// The snapshot with this id.
    pub fn get(&self, id: &str) -> Option<Arc<SnapshotRecord>> {
        self.state.read().records.get(id).cloned()
    }

    /// Deletes a snapshot: its view topics go at once, and retention may
    /// delete what it alone pinned.
    pub async fn delete(&self, id: &str) -> Result<Arc<SnapshotRecord>, SnapshotError> {
        let _serial = self.changes.lock().await;
        self.remove(&[id.to_owned()])?
            .pop()
            .ok_or_else(|| SnapshotError::Unknown { id: id.to_owned() })
    }

    /// Deletes the snapshots whose time to live has passed at `now`; skips
    /// this round if a change is in progress. Returns the ids deleted.
    pub fn expire(&self, now: SystemTime) -> Vec<String> {
        let Ok(_serial) = self.changes.try_lock() else {
            return Vec::new();
        };
        let now_ms = millis(now);
        let due: Vec<String> = self
            .state
            .read()
            .records
            .values()
            .filter(|r| r.expires_at_ms.is_some_and(|at| at <= now_ms))
            .map(|r| r.id.clone())
            .collect();
        if due.is_empty() {
            return due;
        }
        match self.remove(&due) {
            Ok(_) => {
                tracing::info!(snapshots = ?due, "expired snapshots deleted");
                due
            }
            Err(e) => {
                tracing::error!(error = %e, "expired snapshots could not be deleted");
                Vec::new()
            }
        }
    }

    /// Removes `ids` (unknown ones are passed over), saved first; the
    /// caller holds `changes`.
    fn remove(&self, ids: &[String]) -> Result<Vec<Arc<SnapshotRecord>>, SnapshotError> {
        let (kept, saved_change) = {
            let state = self.state.read();
            let kept: Vec<SnapshotRecord> = state
                .saved_records()
                .into_iter()
                .filter(|r| !ids.contains(&r.id))
                .collect();
            let saved_change = ids
                .iter()
                .any(|id| state.records.contains_key(id) && !state.ephemeral.contains(id));
            (kept, saved_change)
        };
        if saved_change {
            self.file.save(kept)?;
        }
        let mut removed = Vec::new();
        let mut floors = Vec::new();
        {
            let mut state = self.state.write();
            let mut topics: Vec<Arc<Topic>> = Vec::new();
            for id in ids {
                if let Some((record, views)) = state.remove(id) {
                    removed.push(record);
                    topics.extend(views);
                }
            }
            for topic in topics {
                let of_topic = state.floors(&topic);
                floors.push((topic, of_topic));
            }
        }
        // Each raise waits for the log's maintenance: no lock held.
        for (topic, of_topic) in floors {
            set_floors(&topic, of_topic);
        }
        Ok(removed)
    }

    /// The view topic by this name, if it is one.
    pub fn view(&self, name: &str) -> Option<Arc<ViewTopic>> {
        if !name.starts_with(VIEW_PREFIX) {
            return None;
        }
        self.state.read().by_name.get(name).cloned()
    }

    /// The view topic with this id, if it is one.
    pub fn view_by_id(&self, id: Uuid) -> Option<Arc<ViewTopic>> {
        let state = self.state.read();
        if state.by_id.is_empty() {
            return None;
        }
        state.by_id.get(&id).cloned()
    }

    /// Every view topic of the snapshot `id`.
    pub fn views_of(&self, id: &str) -> Vec<Arc<ViewTopic>> {
        let state = self.state.read();
        let Some(record) = state.records.get(id) else {
            return Vec::new();
        };
        record
            .topics
            .iter()
            .filter_map(|t| state.by_name.get(&view_name(id, &t.name)).cloned())
            .collect()
    }

    /// A snapshot that pins the topic with this id, if any (one being
    /// taken counts, named as such).
    pub fn pinning(&self, topic_id: Uuid) -> Option<String> {
        let state = self.state.read();
        if state.held.contains_key(&topic_id) {
            return Some("(one being taken)".to_owned());
        }
        state
            .records
            .values()
            .find(|r| r.topics.iter().any(|t| t.topic_id == topic_id))
            .map(|r| r.id.clone())
    }
}

/// Checks a snapshot id: 1 to 64 characters from `[A-Za-z0-9_-]` (no `.`:
/// it ends the id in a view topic's name).
pub fn validate_id(id: &str) -> Result<(), SnapshotError> {
    herald_query::id_problem(id).map_or(Ok(()), |reason| {
        Err(SnapshotError::InvalidId {
            id: id.to_owned(),
            reason,
        })
    })
}

fn local_logs(topics: &[Arc<Topic>]) -> Result<Vec<Vec<Arc<Log>>>, SnapshotError> {
    if topics.is_empty() {
        return Err(SnapshotError::NoTopics);
    }
    let mut logs = Vec::with_capacity(topics.len());
    for (i, topic) in topics.iter().enumerate() {
        if topics[..i].iter().any(|t| t.name() == topic.name()) {
            return Err(SnapshotError::DuplicateTopic {
                name: topic.name().to_owned(),
            });
        }
        let partitions = topic.partitions();
        let of_topic = partitions
            .iter()
            .map(|p| p.local_log())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| SnapshotError::Unsupported {
                name: topic.name().to_owned(),
                reason: "its partitions are not all stored in this node's embedded log (a cluster's replicated topic, a relay's mirrored one, or a failed partition)",
            })?;
        logs.push(of_topic);
    }
    Ok(logs)
}

/// Waits (bounded) until the appends placed below `end` are written;
/// false if they were not (the log failed or closed, or the wait ran out).
async fn wait_until_written(log: &Log, end: u64) -> bool {
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    while log.high_watermark() < end {
        if Instant::now() >= deadline || log.poisoned().is_some() || log.is_closed() {
            tracing::warn!(dir = %log.dir().display(), end, high_watermark = log.high_watermark(), "appends placed before a snapshot's cut were not written");
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = tokio::time::timeout(left, log.wait_for_data(end - 1)).await;
    }
    true
}

/// Puts the pins of `topics` back to what the kept snapshots hold, unless
/// disarmed (the snapshot was kept).
struct PinsBack<'a> {
    snapshots: &'a Snapshots,
    topics: &'a [Arc<Topic>],
    armed: bool,
}

impl Drop for PinsBack<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        for topic in self.topics {
            let floors = self.snapshots.state.read().floors(topic);
            set_floors(topic, floors);
        }
    }
}

/// Topics held by a snapshot being taken; released when dropped.
pub(crate) struct TopicsHeld<'a> {
    snapshots: &'a Snapshots,
    ids: Vec<Uuid>,
}

impl Drop for TopicsHeld<'_> {
    fn drop(&mut self) {
        let mut state = self.snapshots.state.write();
        for id in &self.ids {
            if let Some(count) = state.held.get_mut(id) {
                *count -= 1;
                if *count == 0 {
                    state.held.remove(id);
                }
            }
        }
    }
}

fn describe_range(log: &Log, start: u64, end: u64) -> PartitionCut {
    let header_at = |offset: u64| {
        let read = log.read_visible(offset, 1, end).ok()?;
        let batch = batches(&read.bytes).next()?.ok()?;
        let header = BatchHeader::parse(batch)?;
        Some((header.base_timestamp(), header.max_timestamp()))
    };
    let (first_timestamp, last_timestamp) = if end > start {
        (
            header_at(start).map(|(first, _)| first),
            header_at(end - 1).map(|(_, max)| max),
        )
    } else {
        (None, None)
    };
    PartitionCut {
        start,
        end,
        bytes: log.bytes_between(start, end),
        first_timestamp,
        last_timestamp,
    }
}

fn millis(time: SystemTime) -> i64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
