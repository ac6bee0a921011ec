//! Registered online queries (seed 000): the queries of a topic share an
//! indexer task per partition (`indexer.rs`) that decodes each record once
//! for all of them, off the produce path on a thread of their own at a
//! lower CPU priority (`runtime.rs`), feeding each query's
//! `herald_query::QueryState` (aggregates per time bucket, triggers);
//! alerts go to the internal topic
//! [`ALERTS_TOPIC`]. With no query registered, nothing runs and produce is
//! unchanged. Queries are kept in `<data-dir>/herald-queries.json` and
//! start again with the broker (their state is rebuilt from the log: a
//! query indexes its topic from the log start).

mod indexer;
mod runtime;

use indexer::TopicIndexer;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use herald_log::durable_file::write_atomically;
use herald_query::{QuerySpec, QueryState, Results, SpecError};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::broker::Broker;
use crate::topic::Topic;

/// The internal topic alerts are appended to, one JSON object each, keyed
/// by query id.
pub const ALERTS_TOPIC: &str = "__herald_alerts";
/// File name of the query list inside the data directory.
pub const QUERIES_FILE: &str = "herald-queries.json";
/// Most queries registered at once.
pub const QUERIES_MAX: usize = 256;
const FORMAT_VERSION: u32 = 1;

/// Why a query operation was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// The spec is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A query with this id exists.
    #[error("query {id} already exists")]
    Exists {
        /// The id.
        id: String,
    },
    /// No query has this id.
    #[error("unknown query {id}")]
    Unknown {
        /// The id.
        id: String,
    },
    /// The topic does not exist.
    #[error("unknown topic {name}")]
    UnknownTopic {
        /// Its name.
        name: String,
    },
    /// As many queries as allowed are registered.
    #[error("{max} queries are registered already; delete one first")]
    TooMany {
        /// [`QUERIES_MAX`].
        max: usize,
    },
    /// A topic this node does not store in its embedded log.
    #[error("topic {name} cannot be queried here: its partitions are not all in this node's embedded log")]
    Unsupported {
        /// Its name.
        name: String,
    },
    /// The indexer thread could not be started; nothing changed.
    #[error("cannot start the query indexer thread: {reason}")]
    Runtime {
        /// Why.
        reason: String,
    },
    /// The query list could not be read or written; nothing changed.
    #[error("cannot {op} {path}: {reason}")]
    Storage {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// One registered query while it runs.
#[derive(Debug)]
pub struct RunningQuery {
    spec: QuerySpec,
    state: Mutex<QueryState>,
    /// Per partition, the next offset its indexer reads.
    indexed: Vec<AtomicU64>,
    topic: Arc<Topic>,
    stopped: AtomicBool,
    alerts: AtomicU64,
    /// Records fed to the state.
    records: AtomicU64,
}

impl RunningQuery {
    /// The query as registered.
    pub fn spec(&self) -> &QuerySpec {
        &self.spec
    }

    /// Its results over `from..to` (milliseconds of record time).
    pub fn results(&self, from: Option<i64>, to: Option<i64>) -> Results {
        self.state.lock().results(from, to)
    }

    /// Records the indexers have still to read: for each partition its
    /// high watermark less what was indexed.
    pub fn lag(&self) -> u64 {
        self.topic
            .partitions()
            .iter()
            .zip(&self.indexed)
            .map(|(p, done)| {
                p.watermarks()
                    .high_watermark
                    .saturating_sub(done.load(Ordering::Acquire))
            })
            .sum()
    }

    /// Alerts raised since it was registered (or the broker started).
    pub fn alerts(&self) -> u64 {
        self.alerts.load(Ordering::Relaxed)
    }

    /// Records indexed since it was registered (or the broker started).
    pub fn indexed_records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }
}

#[derive(Serialize, Deserialize)]
struct QueriesDocument {
    format_version: u32,
    queries: Vec<QuerySpec>,
}

/// Every registered query of this node.
pub struct Queries {
    path: PathBuf,
    running: RwLock<BTreeMap<String, Arc<RunningQuery>>>,
    /// Serializes registration and removal, each saved before the next.
    changes: Mutex<()>,
    indexers: runtime::IndexerRuntime,
    /// The indexer of every topic some query follows, by topic name;
    /// changed only under `changes`.
    topics: Mutex<HashMap<String, Arc<TopicIndexer>>>,
}

impl std::fmt::Debug for Queries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queries")
            .field("count", &self.running.read().len())
            .finish_non_exhaustive()
    }
}

impl Queries {
    pub(crate) fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join(QUERIES_FILE),
            running: RwLock::new(BTreeMap::new()),
            changes: Mutex::new(()),
            indexers: runtime::IndexerRuntime::default(),
            topics: Mutex::new(HashMap::new()),
        }
    }

    /// Every running query, by id.
    pub fn list(&self) -> Vec<Arc<RunningQuery>> {
        self.running.read().values().cloned().collect()
    }

    /// The running query with this id.
    pub fn get(&self, id: &str) -> Option<Arc<RunningQuery>> {
        self.running.read().get(id).cloned()
    }

    fn load(&self) -> Result<Vec<QuerySpec>, QueryError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.error("read", e.to_string())),
        };
        let document: QueriesDocument =
            serde_json::from_slice(&bytes).map_err(|e| self.error("parse", e.to_string()))?;
        if document.format_version != FORMAT_VERSION {
            return Err(self.error(
                "parse",
                format!("format version {} is unknown", document.format_version),
            ));
        }
        Ok(document.queries)
    }

    fn save(&self, queries: Vec<QuerySpec>) -> Result<(), QueryError> {
        let bytes = serde_json::to_vec_pretty(&QueriesDocument {
            format_version: FORMAT_VERSION,
            queries,
        })
        .map_err(|e| self.error("encode", e.to_string()))?;
        write_atomically(&self.path, &bytes).map_err(|e| self.error("write", e.to_string()))
    }

    fn error(&self, op: &'static str, reason: String) -> QueryError {
        QueryError::Storage {
            op,
            path: self.path.clone(),
            reason,
        }
    }
}

impl Broker {
    /// Starts every query kept in the data directory (on the indexer
    /// thread, started here if any is kept). A query that cannot run (its topic is gone) is
    /// logged and not started; the next registration or deletion drops
    /// it from the file.
    pub fn start_queries(self: &Arc<Self>) -> Result<(), QueryError> {
        let queries = self.queries();
        let _serial = queries.changes.lock();
        let kept = queries.load()?;
        if kept.is_empty() {
            return Ok(());
        }
        let runtime = queries.indexers.handle()?;
        for spec in kept {
            let id = spec.id.clone();
            match self.run_query_unstarted(spec) {
                Ok(running) => {
                    self.index_query(&runtime, &running);
                    queries.running.write().insert(id, running);
                }
                Err(e) => tracing::error!(query = %id, error = %e, "a kept query cannot run"),
            }
        }
        Ok(())
    }

    /// Registers `spec` and starts it: it indexes its topic from the log
    /// start, then follows it as records arrive.
    pub fn register_query(
        self: &Arc<Self>,
        spec: QuerySpec,
    ) -> Result<Arc<RunningQuery>, QueryError> {
        let queries = self.queries();
        let _serial = queries.changes.lock();
        if queries.running.read().contains_key(&spec.id) {
            return Err(QueryError::Exists { id: spec.id });
        }
        if queries.running.read().len() >= QUERIES_MAX {
            return Err(QueryError::TooMany { max: QUERIES_MAX });
        }
        let running = self.run_query_unstarted(spec)?;
        let runtime = queries.indexers.handle()?;
        let mut kept: Vec<QuerySpec> = queries.list().iter().map(|q| q.spec.clone()).collect();
        kept.push(running.spec.clone());
        queries.save(kept)?;
        queries
            .running
            .write()
            .insert(running.spec.id.clone(), Arc::clone(&running));
        self.index_query(&runtime, &running);
        tracing::info!(query = %running.spec.id, topic = %running.spec.topic, "query registered");
        Ok(running)
    }

    /// Stops and forgets the query `id`.
    pub fn delete_query(&self, id: &str) -> Result<(), QueryError> {
        let queries = self.queries();
        let _serial = queries.changes.lock();
        let Some(running) = queries.get(id) else {
            return Err(QueryError::Unknown { id: id.to_owned() });
        };
        let kept: Vec<QuerySpec> = queries
            .list()
            .iter()
            .filter(|q| q.spec.id != id)
            .map(|q| q.spec.clone())
            .collect();
        queries.save(kept)?;
        queries.running.write().remove(id);
        running.stop();
        let mut topics = queries.topics.lock();
        if let Some(indexer) = topics.get(&running.spec.topic) {
            if indexer.leave(id) {
                indexer.close();
                topics.remove(&running.spec.topic);
            }
        }
        tracing::info!(query = %id, "query deleted");
        Ok(())
    }

    /// Has `query` indexed by its topic's indexer, started (or started
    /// again, for a topic created anew under the name) if needed. Called
    /// under `changes`.
    fn index_query(self: &Arc<Self>, runtime: &tokio::runtime::Handle, query: &Arc<RunningQuery>) {
        let mut topics = self.queries().topics.lock();
        let indexer = match topics.get(&query.spec.topic) {
            Some(indexer) if Arc::ptr_eq(indexer.topic(), &query.topic) => Arc::clone(indexer),
            stale => {
                if let Some(stale) = stale {
                    stale.close();
                }
                let indexer = TopicIndexer::start(runtime, self, Arc::clone(&query.topic));
                topics.insert(query.spec.topic.clone(), Arc::clone(&indexer));
                indexer
            }
        };
        indexer.join(Arc::clone(query));
    }

    fn run_query_unstarted(&self, spec: QuerySpec) -> Result<Arc<RunningQuery>, QueryError> {
        let compiled = spec.clone().compile()?;
        let topic = self
            .topic(&spec.topic)
            .ok_or_else(|| QueryError::UnknownTopic {
                name: spec.topic.clone(),
            })?;
        let partitions = topic.partitions();
        if partitions.iter().any(|p| p.local_log().is_none()) {
            return Err(QueryError::Unsupported {
                name: spec.topic.clone(),
            });
        }
        Ok(Arc::new(RunningQuery {
            indexed: partitions
                .iter()
                .map(|p| AtomicU64::new(p.watermarks().log_start_offset))
                .collect(),
            state: Mutex::new(QueryState::new(compiled)),
            spec,
            topic,
            stopped: AtomicBool::new(false),
            alerts: AtomicU64::new(0),
            records: AtomicU64::new(0),
        }))
    }
}
