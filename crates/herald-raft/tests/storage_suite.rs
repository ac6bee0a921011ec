//! openraft's own storage conformance suite, run against a partition's
//! log store and state machine on a real log in a temporary directory.

use std::sync::Arc;

use herald_log::{FlushPolicy, Log, LogConfig};
use herald_raft::{PartitionLogStore, PartitionRaft, PartitionStateMachine, RaftLog};
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use openraft::StorageError;

struct OnDisk;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024,
        index_interval_bytes: 1024,
        preallocate_bytes: 16 * 1024,
        max_batch_bytes: 16 * 1024,
        flush: FlushPolicy::Never,
        ..LogConfig::default()
    }
}

impl StoreBuilder<PartitionRaft, PartitionLogStore, PartitionStateMachine, tempfile::TempDir>
    for OnDisk
{
    async fn build(
        &self,
    ) -> Result<
        (tempfile::TempDir, PartitionLogStore, PartitionStateMachine),
        StorageError<PartitionRaft>,
    > {
        let dir = tempfile::tempdir().expect("temporary directory");
        let log = Arc::new(Log::open(dir.path().join("log"), config()).expect("log opens"));
        let raft_log = Arc::new(RaftLog::open(log, dir.path()).expect("raft view opens"));
        let sm = PartitionStateMachine::open(Arc::clone(&raft_log), dir.path())
            .expect("state machine opens");
        Ok((dir, PartitionLogStore::new(raft_log), sm))
    }
}

#[test]
fn openraft_storage_suite_passes_on_the_partition_log() {
    PartitionRaft::run(async {
        Suite::test_all(OnDisk)
            .await
            .expect("every suite case passes");
    });
}
