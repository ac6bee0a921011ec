//! A replica's Raft log across restarts: numbering, terms, vote, purge and
//! snapshot come back from the partition's own files, and the entries are
//! ordinary batches at dense offsets that a Kafka reader would read.

use std::sync::Arc;

use bytes::Bytes;
use herald_log::{FlushPolicy, Log, LogConfig};
use herald_raft::types::log_id;
use herald_raft::{Entry, PartitionLogStore, PartitionRaft, RaftLog, RecordBatch};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogReader, RaftLogStorage};
use openraft::type_config::TypeConfigExt;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 32 * 1024,
        index_interval_bytes: 512,
        preallocate_bytes: 8 * 1024,
        max_batch_bytes: 16 * 1024,
        flush: FlushPolicy::Never,
        ..LogConfig::default()
    }
}

fn open(dir: &std::path::Path) -> (Arc<Log>, PartitionLogStore) {
    let log = Arc::new(Log::open(dir.join("log"), config()).unwrap());
    let raft_log = Arc::new(RaftLog::open(Arc::clone(&log), dir).unwrap());
    (log, PartitionLogStore::new(raft_log))
}

fn data(term: u64, index: u64, records: u32) -> Entry {
    let batch = herald_records::testing::batch(records, &index.to_be_bytes(), 1_000);
    Entry::new_normal(log_id(term, index), RecordBatch::new(Bytes::from(batch)))
}

async fn append(store: &mut PartitionLogStore, entries: Vec<Entry>) {
    let (tx, rx) = PartitionRaft::oneshot();
    store.append(entries, IOFlushed::signal(tx)).await.unwrap();
    rx.await.unwrap().unwrap();
}

#[test]
fn entries_terms_vote_and_purge_survive_a_restart() {
    PartitionRaft::run(async {
        let dir = tempfile::tempdir().unwrap();
        {
            let (log, mut store) = open(dir.path());
            store
                .save_vote(&openraft::Vote::new_committed(3, 2))
                .await
                .unwrap();
            let mut entries = vec![Entry::new_blank(log_id(1, 5))];
            entries.extend((6..300).map(|i| data(1 + i / 100, i, 3)));
            append(&mut store, entries).await;
            // Raft's blank entry takes one offset; each data entry three.
            assert_eq!(log.high_watermark(), 1 + 294 * 3);
            store.purge(log_id(1, 50)).await.unwrap();
            store.truncate_after(Some(log_id(2, 250))).await.unwrap();
        }
        let (log, mut store) = open(dir.path());
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(log_id(1, 50)));
        assert_eq!(state.last_log_id, Some(log_id(3, 250)));
        assert_eq!(
            store.read_vote().await.unwrap(),
            Some(openraft::Vote::new_committed(3, 2))
        );
        let entries = store.try_get_log_entries(0..1_000).await.unwrap();
        assert_eq!(entries.len(), 200);
        assert_eq!(entries[0].log_id(), log_id(1, 51));
        assert_eq!(entries[149].log_id(), log_id(3, 200));
        // Entry 51 is the 46th data entry: it starts at 1 + 45 * 3.
        assert_eq!(log.log_start_offset(), 1 + 45 * 3);
        assert_eq!(log.high_watermark(), 1 + 245 * 3);
        // The next entry follows the last one kept, in the log too.
        append(&mut store, vec![data(4, 251, 2)]).await;
        let last = store.try_get_log_entries(251..252).await.unwrap();
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].log_id(), log_id(4, 251));
        assert_eq!(log.high_watermark(), 1 + 245 * 3 + 2);
    });
}

#[test]
fn a_log_written_without_raft_is_refused_rather_than_misnumbered() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path().join("log"), config()).unwrap());
    log.append(&herald_records::testing::batch(2, b"x", 0))
        .unwrap();
    let refused = RaftLog::open(log, dir.path()).unwrap_err();
    assert!(
        refused.to_string().contains("not written by Raft"),
        "{refused}"
    );
}
