//! Running one SQL query: its tables resolved to topics and snapshot
//! views, the topics cut (an ephemeral snapshot, deleted when the query
//! ends, so the query reads exactly what was acknowledged when it began
//! and retention cannot take it meanwhile), planned by DataFusion with
//! only queries allowed, and run on the SQL threads under its limits,
//! its results encoded as they come and handed over through a bounded
//! channel (a slow reader holds the query back; a reader that leaves
//! cancels it).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use datafusion::catalog::MemorySchemaProvider;
use datafusion::common::TableReference;
use datafusion::config::Dialect;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::Statement as SqlStatement;
use futures::StreamExt;
use herald_broker::snapshots::{parse_view_name, view_name};
use herald_broker::{Broker, SnapshotSpec, Topic, ViewTopic};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::output::{Encoder, OutputFormat};
use crate::scan::ScanBudget;
use crate::table::TopicTable;
use crate::SqlError;

/// Chunks of results waiting for the reader, at most.
const CHUNKS_QUEUED: usize = 4;
/// Threads SQL queries run on.
const SQL_THREADS: usize = 2;
/// How much longer than its time limit an ephemeral cut is kept if the
/// broker stops before deleting it (then maintenance expires it).
const CUT_TTL_MARGIN: Duration = Duration::from_secs(60);

/// What one query may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlLimits {
    /// Memory its operators may hold (sorts, joins, aggregations); past it
    /// the query fails (nothing spills to disk).
    pub memory_bytes: usize,
    /// Bytes it may read from logs.
    pub scan_bytes: u64,
    /// How long it may run.
    pub time: Duration,
}

impl Default for SqlLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 << 20,
            scan_bytes: 16 << 30,
            time: Duration::from_secs(300),
        }
    }
}

impl SqlLimits {
    /// Each limit the smaller of `self`'s and `ceiling`'s.
    pub fn within(self, ceiling: SqlLimits) -> SqlLimits {
        SqlLimits {
            memory_bytes: self.memory_bytes.min(ceiling.memory_bytes),
            scan_bytes: self.scan_bytes.min(ceiling.scan_bytes),
            time: self.time.min(ceiling.time),
        }
    }
}

/// One query to run.
#[derive(Debug, Clone)]
pub struct SqlRequest {
    /// One SQL query (`SELECT`, `WITH`, `EXPLAIN`, `VALUES`).
    pub sql: String,
    /// Run over this snapshot's views (tables named by topic) instead of
    /// a cut taken now.
    pub snapshot: Option<String>,
    /// How results are written.
    pub format: OutputFormat,
    /// Its limits (within the engine's).
    pub limits: SqlLimits,
    /// The topics it may read.
    pub access: TopicAccess,
}

/// Says whether a topic may be read.
type TopicCheck = dyn Fn(&str) -> bool + Send + Sync;

/// Which topics a query may read (a caller's READ ACLs).
#[derive(Clone)]
pub struct TopicAccess(Option<Arc<TopicCheck>>);

impl std::fmt::Debug for TopicAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "TopicAccess(checked)"
        } else {
            "TopicAccess(everything)"
        })
    }
}

impl TopicAccess {
    /// Every topic (authorization off).
    pub fn everything() -> Self {
        Self(None)
    }

    /// The topics `allowed` says yes to.
    pub fn only(allowed: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(allowed)))
    }

    fn allows(&self, topic: &str) -> bool {
        self.0.as_ref().is_none_or(|allowed| allowed(topic))
    }
}

/// A query that started: its cut and its results as they come.
#[derive(Debug)]
pub struct SqlAnswer {
    /// The snapshot the query reads: the one asked for, or the ephemeral
    /// cut taken for it (deleted when the query ends).
    pub snapshot: String,
    /// Whether `snapshot` was taken for this query.
    pub ephemeral: bool,
    /// The results, encoded; an error ends them.
    pub chunks: mpsc::Receiver<Result<Bytes, SqlError>>,
}

/// Runs SQL over a broker's topics and snapshots.
pub struct SqlEngine {
    broker: Arc<Broker>,
    runtime: Option<tokio::runtime::Runtime>,
    permits: Arc<Semaphore>,
    max_running: usize,
    ceiling: SqlLimits,
}

impl std::fmt::Debug for SqlEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlEngine")
            .field("max_running", &self.max_running)
            .field("ceiling", &self.ceiling)
            .finish_non_exhaustive()
    }
}

impl Drop for SqlEngine {
    fn drop(&mut self) {
        // Not from within the runtime's own threads, and without waiting
        // for running queries: they are cancelled.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl SqlEngine {
    /// An engine over `broker` running at most `max_running` queries at
    /// once, none past `ceiling`, on threads of its own at a lower CPU
    /// priority than the broker's.
    pub fn new(
        broker: Arc<Broker>,
        max_running: usize,
        ceiling: SqlLimits,
    ) -> Result<Self, SqlError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(SQL_THREADS)
            .thread_name("herald-sql")
            .on_thread_start(|| herald_broker::thread_priority::lower_current_thread("SQL"))
            .enable_all()
            .build()
            .map_err(|e| SqlError::Execution(format!("cannot start the SQL threads: {e}")))?;
        Ok(Self {
            broker,
            runtime: Some(runtime),
            permits: Arc::new(Semaphore::new(max_running)),
            max_running,
            ceiling,
        })
    }

    /// The most any query may use.
    pub fn ceiling(&self) -> SqlLimits {
        self.ceiling
    }

    /// Starts `request`: answers once its first results are in (so a bad
    /// query, or one that fails at once, is refused with its reason),
    /// then streams the rest through [`SqlAnswer::chunks`].
    pub async fn run(&self, request: SqlRequest) -> Result<SqlAnswer, SqlError> {
        let permit = Arc::clone(&self.permits)
            .try_acquire_owned()
            .map_err(|_| SqlError::Busy {
                max: self.max_running,
            })?;
        let Some(runtime) = &self.runtime else {
            return Err(SqlError::Execution("the SQL engine is stopping".into()));
        };
        let limits = request.limits.within(self.ceiling);
        let (started, start) = oneshot::channel();
        let (chunks, receiver) = mpsc::channel(CHUNKS_QUEUED);
        runtime.spawn(execute(
            Arc::clone(&self.broker),
            request,
            limits,
            permit,
            started,
            chunks,
        ));
        let (snapshot, ephemeral) = start
            .await
            .map_err(|_| SqlError::Execution("the query stopped before it started".into()))??;
        Ok(SqlAnswer {
            snapshot,
            ephemeral,
            chunks: receiver,
        })
    }
}

type Started = Result<(String, bool), SqlError>;

/// Deletes an ephemeral cut when the query is done with it.
struct CutGuard {
    broker: Arc<Broker>,
    id: Option<String>,
}

impl Drop for CutGuard {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let broker = Arc::clone(&self.broker);
            // On the SQL runtime; if it is shutting down, the cut's time
            // to live has maintenance delete it.
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    if let Err(e) = broker.snapshots().delete(&id).await {
                        tracing::warn!(snapshot = %id, error = %e, "the cut of a SQL query could not be deleted; its time to live will");
                    }
                });
            }
        }
    }
}

async fn execute(
    broker: Arc<Broker>,
    request: SqlRequest,
    limits: SqlLimits,
    _permit: OwnedSemaphorePermit,
    started: oneshot::Sender<Started>,
    chunks: mpsc::Sender<Result<Bytes, SqlError>>,
) {
    let deadline = Instant::now() + limits.time;
    let prepared = match tokio::time::timeout_at(deadline, prepare(&broker, &request, limits)).await
    {
        Ok(prepared) => prepared,
        Err(_) => Err(SqlError::TimeLimit {
            seconds: limits.time.as_secs(),
        }),
    };
    // tokio's timeout polls the work before its clock, so work that is
    // always ready would never see the deadline: it is checked by hand too.
    let prepared = prepared.and_then(|prepared| {
        if Instant::now() >= deadline {
            Err(SqlError::TimeLimit {
                seconds: limits.time.as_secs(),
            })
        } else {
            Ok(prepared)
        }
    });
    let (stream, guard, snapshot, ephemeral) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    let schema = stream.schema();
    let mut encoder = match Encoder::new(request.format, &schema) {
        Ok(encoder) => encoder,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    let mut stream = stream;
    let mut started = Some(started);
    let mut failure = None;
    let time_limit = || SqlError::TimeLimit {
        seconds: limits.time.as_secs(),
    };
    loop {
        // A stream whose batches are always ready never lets the timeout
        // below see its clock.
        if Instant::now() >= deadline {
            failure = Some(time_limit());
            break;
        }
        // A reader that went away (the channel closed, or the caller gone
        // before the first results) cancels the query at once, whether
        // or not it has results to send.
        let next = tokio::select! {
            next = tokio::time::timeout_at(deadline, stream.next()) => match next {
                Ok(next) => next,
                Err(_) => {
                    failure = Some(time_limit());
                    break;
                }
            },
            () = chunks.closed() => return,
            () = async {
                match started.as_mut() {
                    Some(started) => started.closed().await,
                    None => std::future::pending().await,
                }
            } => return,
        };
        let Some(batch) = next else {
            break;
        };
        let encoded = batch
            .map_err(SqlError::from_datafusion)
            .and_then(|batch| encoder.encode(&batch));
        match encoded {
            Ok(bytes) if bytes.is_empty() => {}
            Ok(bytes) => {
                // A reader that stops reading holds the query no longer
                // than its time limit.
                match tokio::time::timeout_at(deadline, chunks.send(Ok(bytes))).await {
                    Ok(Ok(())) => {}
                    // The reader left: dropping the stream cancels the query.
                    Ok(Err(_)) => return,
                    Err(_) => {
                        failure = Some(time_limit());
                        break;
                    }
                }
                if let Some(started) = started.take() {
                    let _ = started.send(Ok((snapshot.clone(), ephemeral)));
                }
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    drop(stream);
    drop(guard);
    let end = match failure {
        Some(e) => Err(e),
        None => encoder.finish(&schema),
    };
    match (started.take(), end) {
        // Nothing was sent yet: the answer itself says what happened.
        (Some(started), Err(e)) => {
            let _ = started.send(Err(e));
        }
        (Some(started), Ok(bytes)) => {
            if !bytes.is_empty() {
                let _ = chunks.try_send(Ok(bytes));
            }
            let _ = started.send(Ok((snapshot, ephemeral)));
        }
        (None, end) => {
            let _ = tokio::time::timeout_at(deadline, chunks.send(end)).await;
        }
    }
}

/// Where a table's rows come from.
enum Source {
    Live(Arc<Topic>),
    View(Arc<ViewTopic>),
}

/// The query planned over its cut, ready to run.
async fn prepare(
    broker: &Arc<Broker>,
    request: &SqlRequest,
    limits: SqlLimits,
) -> Result<(SendableRecordBatchStream, CutGuard, String, bool), SqlError> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(limits.memory_bytes, 1.0)
        .with_disk_manager_builder(
            DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
        )
        .build_arc()
        .map_err(SqlError::from_datafusion)?;
    // Batches are not coalesced after filters: a scan's first batches
    // are small so that the first rows of an answer go out at once, and
    // waiting for 8,192 matching rows would undo that.
    let config = SessionConfig::new()
        .with_target_partitions(SQL_THREADS)
        .with_information_schema(false)
        .with_coalesce_batches(false);
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_default_features()
        .build();
    datafusion_functions_json::register_all(&mut state).map_err(SqlError::from_datafusion)?;
    let statement = state
        .sql_to_statement(&request.sql, &Dialect::Generic)
        .map_err(SqlError::from_datafusion)?;
    if !is_query(&statement) {
        return Err(SqlError::Invalid(format!(
            "only queries run here (SELECT, WITH, VALUES, EXPLAIN), not: {statement}"
        )));
    }
    let references = state
        .resolve_table_references(&statement)
        .map_err(SqlError::from_datafusion)?;
    let ctx = SessionContext::new_with_state(state);

    // Each table named: a snapshot's view, or a topic (of the snapshot
    // asked for, or cut now).
    let mut sources: BTreeMap<String, (TableReference, Source)> = BTreeMap::new();
    for reference in references {
        let name = topic_name(&reference);
        // Checked on the name before anything is looked up, so a caller
        // learns nothing of topics it may not read, not even whether they
        // exist.
        let topic = parse_view_name(&name).map_or(name.as_str(), |(_, topic)| topic);
        if !request.access.allows(topic) {
            return Err(SqlError::Denied {
                topic: topic.to_owned(),
            });
        }
        let source = if let Some(view) = broker.snapshots().view(&name) {
            Source::View(view)
        } else if let Some(id) = &request.snapshot {
            let view = broker
                .snapshots()
                .view(&view_name(id, &name))
                .ok_or_else(|| SqlError::NotInSnapshot {
                    id: id.clone(),
                    topic: name.clone(),
                })?;
            Source::View(view)
        } else {
            match broker.topic(&name) {
                Some(topic) => Source::Live(topic),
                None => return Err(SqlError::UnknownTable { name }),
            }
        };
        sources.insert(name, (reference, source));
    }
    let live: Vec<Arc<Topic>> = sources
        .values()
        .filter_map(|(_, s)| match s {
            Source::Live(topic) => Some(topic.clone()),
            Source::View(_) => None,
        })
        .collect();
    let mut guard = CutGuard {
        broker: Arc::clone(broker),
        id: None,
    };
    let (snapshot, ephemeral) = if live.is_empty() {
        (request.snapshot.clone().unwrap_or_default(), false)
    } else {
        let id = format!("sql-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let record = broker
            .take_snapshot(
                SnapshotSpec {
                    id: Some(id),
                    topics: live,
                    ttl: Some(limits.time + CUT_TTL_MARGIN),
                    ephemeral: true,
                },
                SystemTime::now(),
            )
            .await?;
        guard.id = Some(record.id.clone());
        (record.id.to_string(), true)
    };

    let budget = ScanBudget::new(limits.scan_bytes);
    for (name, (reference, source)) in sources {
        let view = match source {
            Source::View(view) => view,
            Source::Live(topic) => broker
                .snapshots()
                .view(&view_name(&snapshot, topic.name()))
                .ok_or_else(|| SqlError::Execution(format!("the cut of {name} is gone")))?,
        };
        let table = TopicTable::new(name, view.partitions().to_vec(), Arc::clone(&budget));
        if let Some(schema) = reference.schema() {
            // `a.b` names topic "a.b": schema `a` is made to hold it.
            let catalog = ctx
                .catalog("datafusion")
                .ok_or_else(|| SqlError::Execution("no default catalog".into()))?;
            if catalog.schema(schema).is_none() {
                catalog
                    .register_schema(schema, Arc::new(MemorySchemaProvider::new()))
                    .map_err(SqlError::from_datafusion)?;
            }
        }
        ctx.register_table(reference, Arc::new(table))
            .map_err(SqlError::from_datafusion)?;
    }
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let frame = ctx
        .sql_with_options(&request.sql, options)
        .await
        .map_err(SqlError::from_datafusion)?;
    let stream = frame
        .execute_stream()
        .await
        .map_err(SqlError::from_datafusion)?;
    Ok((stream, guard, snapshot, ephemeral))
}

/// Whether `statement` only reads: a query, or the plan of one. Anything
/// else (DDL, DML, `COPY`, `SET`) is refused before its tables are even
/// looked up; the planner's options refuse them again.
fn is_query(statement: &DfStatement) -> bool {
    match statement {
        DfStatement::Statement(statement) => matches!(
            **statement,
            SqlStatement::Query(_) | SqlStatement::Explain { .. }
        ),
        DfStatement::Explain(explain) => is_query(&explain.statement),
        _ => false,
    }
}

/// The topic (or view) a table reference names: `a.b` unquoted is the
/// topic "a.b", as is `"a.b"`.
fn topic_name(reference: &TableReference) -> String {
    match reference {
        TableReference::Bare { table } => table.to_string(),
        TableReference::Partial { schema, table } => format!("{schema}.{table}"),
        TableReference::Full {
            catalog,
            schema,
            table,
        } => format!("{catalog}.{schema}.{table}"),
    }
}
