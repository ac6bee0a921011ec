//! A topic (or a snapshot's view of one) as a DataFusion table: the
//! partitions of a cut, each scanned between the offsets the query's
//! filters allow (`pushdown.rs`), in parallel, one DataFusion partition
//! per log partition.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::ExecutionPlan;
use herald_broker::{CopiedRun, OffsetSpec, ViewPartition};

use crate::pushdown;
use crate::scan::{PartitionScan, ScanBudget};
use crate::schema::topic_schema;

/// The partitions of one topic at a cut.
pub(crate) struct TopicTable {
    name: String,
    partitions: Vec<ViewPartition>,
    budget: Arc<ScanBudget>,
}

impl fmt::Debug for TopicTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicTable")
            .field("name", &self.name)
            .field("partitions", &self.partitions.len())
            .finish_non_exhaustive()
    }
}

impl TopicTable {
    pub(crate) fn new(
        name: String,
        partitions: Vec<ViewPartition>,
        budget: Arc<ScanBudget>,
    ) -> Self {
        Self {
            name,
            partitions,
            budget,
        }
    }
}

#[async_trait]
impl TableProvider for TopicTable {
    fn schema(&self) -> SchemaRef {
        topic_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if pushdown::exact(f) {
                    TableProviderFilterPushDown::Exact
                } else if pushdown::narrows(f) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let full = topic_schema();
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..full.fields().len()).collect(),
        };
        let schema = Arc::new(full.project(&projection)?);
        let bounds = pushdown::bounds(filters);
        let mut scans: Vec<Arc<dyn PartitionStream>> = Vec::new();
        for view in &self.partitions {
            let index = i32::try_from(view.index()).unwrap_or(i32::MAX);
            if bounds.is_empty() || !bounds.reads_partition(index) {
                continue;
            }
            let (start, cut) = view.range();
            let mut from = start.max(u64::try_from(bounds.offsets.0).unwrap_or(0));
            let to =
                cut.min(u64::try_from(bounds.offsets.1).map_or(0, |last| last.saturating_add(1)));
            if bounds.times.0 > i64::MIN {
                // The time index: the first record at or after the earliest
                // timestamp that can match; none means no record can.
                match view
                    .list_offset(OffsetSpec::Timestamp(bounds.times.0))
                    .await
                {
                    Ok(Some(found)) => from = from.max(found.offset),
                    Ok(None) => continue,
                    Err(e) => {
                        return Err(datafusion::error::DataFusionError::External(Box::new(e)))
                    }
                }
            }
            let to = if bounds.times.1 < i64::MAX {
                // The history index: past its answer every record is later
                // than the latest timestamp that can match.
                view.end_for_timestamps_up_to(bounds.times.1, from, to)
            } else {
                to
            };
            if from >= to {
                continue;
            }
            let (batches, bulk_from, copied) = match &bounds.keys {
                Some(keys) => key_batches(view, keys, from, to),
                None => (Vec::new(), from, Vec::new()),
            };
            if batches.is_empty() && bulk_from >= to && copied.is_empty() {
                continue;
            }
            scans.push(Arc::new(PartitionScan {
                view: view.clone(),
                from,
                to,
                batches,
                bulk_from,
                copied,
                keys: bounds.keys.clone().map(Arc::new),
                time_from: bounds.times.0,
                time_to: bounds.times.1,
                projection: projection.clone(),
                schema: Arc::clone(&schema),
                budget: Arc::clone(&self.budget),
            }));
        }
        if scans.is_empty() {
            // Nothing can match: one empty partition rather than none, as
            // a join or a sort above requires at least one input partition.
            return Ok(Arc::new(EmptyExec::new(schema)));
        }
        Ok(Arc::new(StreamingTableExec::try_new(
            Arc::clone(&schema),
            scans,
            None,
            [],
            false,
            limit,
        )?))
    }
}

/// Batches a scan reads one by one for one key of one partition; past
/// them a bulk read is as fast (a key in most batches).
const MAX_NAMED_BATCHES: usize = 10_000;

/// The batches of `from..to` the key index names for any of `keys`, each
/// by the last offset worth reading in it, ascending; where the part it
/// has not indexed begins; and the runs of key-sorted copies holding the
/// keys' records before that part.
fn key_batches(
    view: &ViewPartition,
    keys: &std::collections::BTreeSet<Vec<u8>>,
    from: u64,
    to: u64,
) -> (Vec<u64>, u64, Vec<CopiedRun>) {
    let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let found = view.keys_batches(&keys, from, to, MAX_NAMED_BATCHES);
    (found.last_offsets, found.unindexed_from, found.copied)
}
