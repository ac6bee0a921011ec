//! Samples every partition's log for the per-partition gauges, at scrape
//! time.

use herald_broker::Broker;
use herald_metrics::PartitionSample;

/// The current state of every partition of every topic.
pub fn partition_samples(broker: &Broker) -> Vec<PartitionSample> {
    let mut samples = Vec::new();
    for topic in broker.topics() {
        for partition in topic.partitions().iter() {
            let log = partition.log();
            samples.push(PartitionSample {
                topic: topic.name().to_owned(),
                partition: partition.index(),
                high_watermark: log.high_watermark(),
                log_start_offset: log.log_start_offset(),
                size_bytes: log.size_bytes(),
                segment_count: log.segment_count() as u64,
            });
        }
    }
    samples
}
