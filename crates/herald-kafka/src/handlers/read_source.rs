//! What a read names: a topic's partition, or a partition of a snapshot's
//! read-only view topic (`__snapshot.<id>.<topic>`). Fetch and ListOffsets
//! answer both alike; a view is authorized as the topic it shows.

use std::sync::Arc;

use herald_broker::{
    OffsetAndTimestamp, OffsetSpec, Partition, StorageError, StoredBatches, Topic, ViewPartition,
    ViewTopic, Watermarks,
};
use uuid::Uuid;

use super::Context;

/// The name a request naming `name` is authorized against: a view's
/// topic's name for a view, else `name` itself.
pub(crate) fn authorized_name(ctx: &Context, name: &str) -> String {
    match ctx.broker.snapshots().view(name) {
        Some(view) => view.topic().name().to_owned(),
        None => name.to_owned(),
    }
}

/// A topic or a view topic, found by name or id.
#[derive(Debug, Clone)]
pub(crate) enum ReadTopic {
    /// A topic.
    Live(Arc<Topic>),
    /// A snapshot's view topic.
    View(Arc<ViewTopic>),
}

impl ReadTopic {
    /// The topic or view by this name.
    pub(crate) fn by_name(ctx: &Context, name: &str) -> Option<Self> {
        match ctx.broker.snapshots().view(name) {
            Some(view) => Some(Self::View(view)),
            None => ctx.broker.topic(name).map(Self::Live),
        }
    }

    /// The topic or view with this id.
    pub(crate) fn by_id(ctx: &Context, id: Uuid) -> Option<Self> {
        match ctx.broker.topic_by_id(id) {
            Some(topic) => Some(Self::Live(topic)),
            None => ctx.broker.snapshots().view_by_id(id).map(Self::View),
        }
    }

    /// The name authorization is checked against: a view's topic's.
    pub(crate) fn authorized_name(&self) -> &str {
        match self {
            Self::Live(topic) => topic.name(),
            Self::View(view) => view.topic().name(),
        }
    }

    /// The partition with this index.
    pub(crate) fn partition(&self, index: i32) -> Option<ReadSource> {
        match self {
            Self::Live(topic) => topic.partition(index).map(ReadSource::Live),
            Self::View(view) => view.partition(index).cloned().map(ReadSource::View),
        }
    }
}

/// One partition to read.
#[derive(Debug, Clone)]
pub(crate) enum ReadSource {
    /// A topic's partition.
    Live(Arc<Partition>),
    /// A view's partition: the records up to the snapshot's cut.
    View(ViewPartition),
}

impl ReadSource {
    /// Whole batches from `offset`, as [`Partition::read`].
    pub(crate) async fn read(
        &self,
        offset: u64,
        max_bytes: usize,
    ) -> Result<StoredBatches, StorageError> {
        match self {
            Self::Live(p) => p.read(offset, max_bytes).await,
            Self::View(v) => v.read(offset, max_bytes),
        }
    }

    /// The watermarks now.
    pub(crate) fn watermarks(&self) -> Watermarks {
        match self {
            Self::Live(p) => p.watermarks(),
            Self::View(v) => v.watermarks(),
        }
    }

    /// Resolves once there is data past `offset` (never, at a view's cut).
    pub(crate) async fn wait_for_data(&self, offset: u64) {
        match self {
            Self::Live(p) => p.wait_for_data(offset).await,
            Self::View(v) => v.wait_for_data(offset).await,
        }
    }

    /// Whether this node answers reads of it (a view always does).
    pub(crate) fn leads_here(&self) -> bool {
        match self {
            Self::Live(p) => p.leads_here(),
            Self::View(_) => true,
        }
    }

    /// Looks an offset up, as [`Partition::list_offset`].
    pub(crate) async fn list_offset(
        &self,
        spec: OffsetSpec,
    ) -> Result<Option<OffsetAndTimestamp>, StorageError> {
        match self {
            Self::Live(p) => p.list_offset(spec).await,
            Self::View(v) => v.list_offset(spec).await,
        }
    }
}
