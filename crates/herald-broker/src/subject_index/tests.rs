use bytes::Bytes;
use herald_records::{stamp, BatchBuilder, Compression, RecordFields};

use super::*;

const TOTAL: u64 = 200_000;
/// The subject a reader follows: at these offsets only.
const RARE: &[u8] = b"rare.subject";
const RARE_AT: [u64; 2] = [5_000, 150_000];

fn key_of(offset: u64) -> Vec<u8> {
    if RARE_AT.contains(&offset) {
        RARE.to_vec()
    } else {
        format!("subject.{}", offset % 100_000).into_bytes()
    }
}

/// Batches of `per_batch` records from `from` to `to`, stamped with their
/// offsets.
fn batches_of(from: u64, to: u64, per_batch: u64, codec: Compression) -> Vec<u8> {
    let mut out = Vec::new();
    let mut base = from;
    while base < to {
        let end = (base + per_batch).min(to);
        let mut builder = BatchBuilder::new(0);
        for offset in base..end {
            let key = key_of(offset);
            builder.push(RecordFields {
                key: Some(&key),
                value: Some(b"v"),
                ..RecordFields::default()
            });
        }
        let mut batch = builder.finish_with(codec).unwrap();
        stamp(&mut batch, base, 0);
        out.extend_from_slice(&batch);
        base = end;
    }
    out
}

/// Indexes `from..to` in reads of `per_read` records.
fn index(index: &SubjectIndex, from: u64, to: u64, per_read: u64, codec: Compression) {
    let mut at = from;
    while at < to {
        let end = (at + per_read).min(to);
        let bytes = Bytes::from(batches_of(at, end, 500, codec));
        index.add(at, &bytes, end);
        at = end;
    }
    assert_eq!(index.indexed_through(), to);
}

/// The blocks a reader of `RARE` reads from `from`, following the
/// candidates the way a catch-up reader does (one block per read).
fn blocks_read(index: &SubjectIndex, from: u64, until: u64) -> Vec<u64> {
    let probe = [SubjectProbe::of(RARE)];
    let mut read = Vec::new();
    let mut at = from;
    while at < until {
        let candidate = index.next_candidate(at, until, &probe);
        assert!(candidate.offset >= at, "a candidate never goes back");
        if candidate.offset >= until {
            break;
        }
        if candidate.offset > at {
            at = candidate.offset;
            continue;
        }
        read.push(at / BLOCK_RECORDS);
        at = (at / BLOCK_RECORDS + 1) * BLOCK_RECORDS;
    }
    read
}

fn assert_finds_the_rare_blocks(read: &[u64], expected: &[u64]) {
    for block in expected {
        assert!(read.contains(block), "block {block} not read: {read:?}");
    }
    // About 0.8% of the other 194 blocks answer yes by chance.
    assert!(
        read.len() <= expected.len() + 8,
        "too many blocks read: {read:?}"
    );
}

#[test]
fn a_reader_reads_only_blocks_that_may_hold_its_subject() {
    let dir = tempfile::tempdir().unwrap();
    let filters = SubjectIndex::open(dir.path(), 0, 0);
    index(&filters, 0, TOTAL, 7_000, Compression::None);
    let read = blocks_read(&filters, 0, TOTAL);
    assert_finds_the_rare_blocks(&read, &[4, 146]);
    // From the middle of a block that holds it, the reader starts there.
    let probe = [SubjectProbe::of(RARE)];
    let mid = filters.next_candidate(4_500, TOTAL, &probe);
    assert_eq!(mid.offset, 4_500);
    assert!(mid.block_bytes.is_some_and(|b| b > 0));
}

#[test]
fn nothing_past_the_indexed_offset_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let filters = SubjectIndex::open(dir.path(), 0, 0);
    index(&filters, 0, 10_000, 3_000, Compression::None);
    let probe = [SubjectProbe::of(b"no.such.subject")];
    let candidate = filters.next_candidate(0, 1_000_000, &probe);
    assert_eq!(
        candidate,
        Candidate {
            offset: 10_000,
            block_bytes: None
        }
    );
    // Past the indexed offset: read from where asked.
    assert_eq!(
        filters.next_candidate(12_000, 1_000_000, &probe).offset,
        12_000
    );
    // `until` bounds the skip.
    assert_eq!(filters.next_candidate(0, 2_500, &probe).offset, 2_500);
    // A read from elsewhere than the indexed offset is not taken.
    filters.add(
        20_000,
        &Bytes::from(batches_of(20_000, 21_000, 500, Compression::None)),
        21_000,
    );
    assert_eq!(filters.indexed_through(), 10_000);
}

#[test]
fn compressed_batches_are_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let filters = SubjectIndex::open(dir.path(), 0, 0);
    index(&filters, 0, 20_000, 4_000, Compression::Lz4);
    let read = blocks_read(&filters, 0, 20_000);
    assert_finds_the_rare_blocks(&read, &[4]);
}

#[test]
fn a_batch_that_does_not_decode_is_always_read() {
    let dir = tempfile::tempdir().unwrap();
    let filters = SubjectIndex::open(dir.path(), 0, 0);
    let mut bytes = batches_of(0, 3_000, 3_000, Compression::Lz4);
    // Damage the compressed records (the header and framing still parse).
    let last = bytes.len() - 20;
    bytes[last..].fill(0xAA);
    filters.add(0, &Bytes::from(bytes), 3_000);
    let probe = [SubjectProbe::of(b"no.such.subject")];
    assert_eq!(filters.next_candidate(0, 3_000, &probe).offset, 0);
    assert_eq!(filters.next_candidate(2_100, 3_000, &probe).offset, 2_100);
}

#[test]
fn sealed_chunks_survive_a_restart_that_kept_their_records() {
    let dir = tempfile::tempdir().unwrap();
    {
        let filters = SubjectIndex::open(dir.path(), 0, 0);
        index(&filters, 0, TOTAL, 10_000, Compression::None);
    }
    // Chunks 0..3 (offsets below 196,608) were sealed to files.
    assert_eq!(chunk_file::list(dir.path()).unwrap(), vec![0, 1, 2]);
    let filters = SubjectIndex::open(dir.path(), 0, TOTAL);
    assert_eq!(filters.indexed_through(), 3 * CHUNK_RECORDS);
    let read = blocks_read(&filters, 0, 3 * CHUNK_RECORDS);
    assert_finds_the_rare_blocks(&read, &[4, 146]);
}

#[test]
fn chunks_past_a_recovered_log_end_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    {
        let filters = SubjectIndex::open(dir.path(), 0, 0);
        index(&filters, 0, TOTAL, 10_000, Compression::None);
    }
    // A crash lost the tail: offsets from 100,000 on will be written again,
    // with other keys, so chunks reaching past it describe nothing real.
    let filters = SubjectIndex::open(dir.path(), 0, 100_000);
    assert_eq!(filters.indexed_through(), CHUNK_RECORDS);
    assert_eq!(chunk_file::list(dir.path()).unwrap(), vec![0]);
}

#[test]
fn a_damaged_chunk_file_means_its_blocks_are_read_and_the_rest_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let filters = SubjectIndex::open(dir.path(), 0, 0);
    index(&filters, 0, TOTAL, 10_000, Compression::None);
    std::fs::write(chunk_file::path(dir.path(), 1), b"damaged").unwrap();
    let probe = [SubjectProbe::of(b"no.such.subject")];
    // Chunk 0 says no; chunk 1 cannot say: the reader reads from its start.
    let candidate = filters.next_candidate(0, TOTAL, &probe);
    assert!(candidate.offset <= CHUNK_RECORDS, "{candidate:?}");
    assert!(filters.next_candidate(CHUNK_RECORDS, TOTAL, &probe).offset == CHUNK_RECORDS);
}

#[test]
fn retention_removes_the_filters_of_removed_records() {
    let dir = tempfile::tempdir().unwrap();
    let filters = SubjectIndex::open(dir.path(), 0, 0);
    index(&filters, 0, TOTAL, 10_000, Compression::None);
    filters.truncate_before(140_000);
    assert_eq!(chunk_file::list(dir.path()).unwrap(), vec![2]);
    let read = blocks_read(&filters, 140_000, TOTAL);
    assert_finds_the_rare_blocks(&read, &[146]);
    // Past everything indexed: indexing starts again at the new start.
    filters.truncate_before(250_000);
    assert!(chunk_file::list(dir.path()).unwrap().is_empty());
    assert_eq!(filters.indexed_through(), 250_000);
    index(&filters, 250_000, 260_000, 5_000, Compression::None);
}

#[test]
fn an_index_started_after_the_log_start_begins_there() {
    let dir = tempfile::tempdir().unwrap();
    let filters = SubjectIndex::open(dir.path(), 70_000, 90_000);
    assert_eq!(filters.indexed_through(), 70_000);
    index(&filters, 70_000, 140_000, 10_000, Compression::None);
    assert_eq!(chunk_file::list(dir.path()).unwrap(), vec![1]);
    let read = blocks_read(&filters, 70_000, 140_000);
    assert!(read.len() <= 8, "{read:?}");
}

#[test]
fn records_past_a_batch_that_does_not_frame_are_always_read() {
    let dir = tempfile::tempdir().unwrap();
    let filters = SubjectIndex::open(dir.path(), 0, 0);
    let mut bytes = batches_of(0, 2_048, 1_024, Compression::None);
    let mut broken = batches_of(2_048, 4_000, 2_000, Compression::None);
    // A length past the end: the framing fails from here on.
    broken[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    bytes.extend_from_slice(&broken);
    filters.add(0, &Bytes::from(bytes), 4_000);
    let probe = [SubjectProbe::of(b"no.such.subject")];
    // The first block's filter is good; from the damage on, every block
    // is read.
    assert_eq!(filters.next_candidate(0, 4_000, &probe).offset, 2_048);
    assert_eq!(filters.next_candidate(3_072, 4_000, &probe).offset, 3_072);
    assert_eq!(filters.next_candidate(3_500, 4_000, &probe).offset, 3_500);
}
