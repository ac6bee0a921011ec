//! Restoring a raw backup (`herald snapshot export --format raw`) as a new
//! topic whose records keep their offsets: its partitions are opened
//! unregistered, each log restarted at its first batch's base offset, the
//! batches appended as they were stored (each one's base offset checked
//! against the log's next offset), the log start moved to where the
//! backup's range starts (inside the first batch, after a DeleteRecords),
//! and only then is the topic created.
//! Until that moment no client can see or write it, so nothing can
//! interleave with the restored offsets; the name is reserved meanwhile.

use std::sync::Arc;

use herald_log::Log;
use herald_records::BatchHeader;
use uuid::Uuid;

use super::*;

/// A topic being restored; dropped unfinished, its partitions are
/// discarded and its name released.
pub struct TopicRestore {
    broker: Arc<Broker>,
    name: String,
    id: Uuid,
    config: TopicConfig,
    partitions: Vec<Arc<crate::partition::Partition>>,
    logs: Vec<Arc<Log>>,
    ranges: Vec<(u64, u64)>,
    /// Whether each partition's log was restarted at its first batch.
    begun: Vec<bool>,
    finished: bool,
}

impl std::fmt::Debug for TopicRestore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicRestore")
            .field("name", &self.name)
            .field("ranges", &self.ranges)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// Starts restoring topic `name` with one partition per range
    /// `(start, end)`: the records `start..end` are to come, in order,
    /// through [`TopicRestore::append`].
    pub fn begin_restore(
        self: &Arc<Self>,
        name: &str,
        configs: &[(String, String)],
        ranges: &[(u64, u64)],
    ) -> Result<TopicRestore, BrokerError> {
        validate_topic_name(name)?;
        if self.clustered() {
            return Err(BrokerError::NotInCluster(
                "restoring a topic other than through the cluster's metadata",
            ));
        }
        let count = u32::try_from(ranges.len()).unwrap_or(u32::MAX);
        check_partition_count(name, count)?;
        if let Some(&(start, end)) = ranges.iter().find(|(start, end)| start > end) {
            return Err(BrokerError::InvalidRestore(format!(
                "a partition's range {start}..{end} ends before it starts"
            )));
        }
        let (id, config, log_config) = {
            let admin = self.admin.lock();
            let (config, log_config) = self.check_new_topic(&admin, name, count, configs)?;
            // Reserved under the admin lock, so no creation can take it.
            self.restoring.lock().insert(name.to_owned());
            (Uuid::new_v4(), config, log_config)
        };
        let release = |e| {
            self.restoring.lock().remove(name);
            e
        };
        let partitions =
            open_new_partitions(&self.config, name, id, 0..count, &log_config).map_err(release)?;
        let logs: Option<Vec<Arc<Log>>> = partitions.iter().map(|p| p.local_log()).collect();
        Ok(TopicRestore {
            broker: Arc::clone(self),
            name: name.to_owned(),
            id,
            config,
            partitions,
            logs: logs.unwrap_or_default(),
            ranges: ranges.to_vec(),
            begun: vec![false; ranges.len()],
            finished: false,
        })
    }
}

impl TopicRestore {
    /// Appends one batch of the backup to `partition`; its base offset
    /// must be the partition's next offset, and it must not reach past the
    /// partition's range.
    pub fn append(&mut self, partition: usize, batch: &[u8]) -> Result<(), BrokerError> {
        let (Some(log), Some(&(start, end))) =
            (self.logs.get(partition), self.ranges.get(partition))
        else {
            return Err(BrokerError::InvalidRestore(format!(
                "the backup names partition {partition} of {}",
                self.logs.len()
            )));
        };
        let header = BatchHeader::parse(batch)
            .ok_or_else(|| BrokerError::InvalidRestore("a batch shorter than its header".into()))?;
        let (Ok(base), Ok(last)) = (
            u64::try_from(header.base_offset()),
            u64::try_from(header.last_offset()),
        ) else {
            return Err(BrokerError::InvalidRestore(format!(
                "partition {partition}: a batch at offset {}",
                header.base_offset()
            )));
        };
        if !self.begun[partition] {
            // The range may start inside its first batch (the log start of
            // a truncated partition): the log starts at the batch.
            if base > start || last < start {
                return Err(BrokerError::InvalidRestore(format!(
                    "partition {partition}: the first batch holds {base}..={last}, not the range's start {start}"
                )));
            }
            if base > 0 {
                log.reset(base).map_err(|e| {
                    BrokerError::InvalidRestore(format!("restarting a log at {base}: {e}"))
                })?;
            }
            self.begun[partition] = true;
        }
        let next = log.high_watermark();
        if base != next {
            return Err(BrokerError::InvalidRestore(format!(
                "partition {partition}: a batch at offset {base} where {next} comes next"
            )));
        }
        if last >= end {
            return Err(BrokerError::InvalidRestore(format!(
                "partition {partition}: a batch reaching offset {last} past the range's end {end}"
            )));
        }
        log.append(batch)
            .map_err(|e| BrokerError::InvalidRestore(format!("partition {partition}: {e}")))?;
        Ok(())
    }

    /// Creates the topic once every partition holds its whole range.
    pub fn finish(mut self) -> Result<TopicSummary, BrokerError> {
        let failed = |partition: usize, e: &dyn std::fmt::Display| {
            BrokerError::InvalidRestore(format!("partition {partition}: {e}"))
        };
        for (partition, (log, &(start, end))) in self.logs.iter().zip(&self.ranges).enumerate() {
            if !self.begun[partition] && start > 0 {
                // No batch: an empty range, which starts where it says.
                log.reset(start).map_err(|e| failed(partition, &e))?;
            }
            let held = log.high_watermark();
            if held != end {
                return Err(BrokerError::InvalidRestore(format!(
                    "partition {partition} holds up to {held} of the backup's {end}"
                )));
            }
            if log.log_start_offset() < start {
                log.truncate_before(start)
                    .map_err(|e| failed(partition, &e))?;
            }
            log.flush().map_err(|e| failed(partition, &e))?;
        }
        let broker = Arc::clone(&self.broker);
        let mut admin = broker.admin.lock();
        let record = TopicRecord {
            name: self.name.clone(),
            id: self.id,
            partitions: self.partitions.len() as u32,
            configs: self.config.overrides().clone(),
            replicas: None,
        };
        let mut next = admin.metadata.clone();
        next.topics.insert(self.name.clone(), record);
        admin.store.save(&next)?;
        admin.metadata = next;
        let partitions = std::mem::take(&mut self.partitions);
        let count = partitions.len() as u32;
        let topic = Arc::new(Topic::new(
            self.name.clone(),
            self.id,
            partitions,
            self.config.clone(),
        ));
        {
            let mut registry = broker.registry.write();
            registry.by_id.insert(self.id, Arc::clone(&topic));
            registry.by_name.insert(self.name.clone(), topic);
        }
        broker.restoring.lock().remove(&self.name);
        self.finished = true;
        tracing::info!(topic = %self.name, id = %self.id, partitions = count, "topic restored from a backup");
        Ok(TopicSummary {
            name: self.name.clone(),
            id: self.id,
            partitions: count,
            config: self.config.clone(),
        })
    }
}

impl Drop for TopicRestore {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let partitions = std::mem::take(&mut self.partitions);
        discard_partitions(&self.broker.config.data_dir, &self.name, partitions);
        self.broker.restoring.lock().remove(&self.name);
        tracing::warn!(topic = %self.name, "restore abandoned; its partitions were discarded");
    }
}
