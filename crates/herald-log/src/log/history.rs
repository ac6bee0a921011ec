//! Building the history index (`crate::history`) behind the committed tail,
//! and the two lookups it serves: the batches that may hold a key, and
//! where in a range the records stop being old enough for a time bound.

use herald_records::RecordBatch;

use super::*;
use crate::history::{key_hash, BatchKeys};
use crate::key_copy::{CopiedRun, KeyCopy};

/// What one call to [`Log::index_history`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryProgress {
    /// Every committed record below this offset is indexed.
    pub indexed_to: u64,
    /// Bytes of batches this call indexed.
    pub bytes: u64,
    /// The call reached the committed tail: nothing is left to index until
    /// more is appended.
    pub caught_up: bool,
}

/// The batches of a range that may hold a key, from [`Log::key_batches`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyBatches {
    /// For each indexed batch that may hold the key in the range, ascending,
    /// the offset of its last record that may (one with the key, or with a
    /// key of the same hash; a batch whose records could not be read gives
    /// its last offset), or the range's last offset for a batch reaching
    /// past the range: a reader reads the batch holding each offset up to
    /// it (a compressed batch need not be inflated past it), and no record
    /// of the key lies in that batch after it. The reader compares keys.
    pub last_offsets: Vec<u64>,
    /// Nothing is indexed from this offset to the end of the range: read
    /// all of it. The range's end when everything is indexed.
    pub unindexed_from: u64,
    /// For segments with a key-sorted copy (`LogConfig::key_copy`), which
    /// name no batches above, and for the active segment's stretches
    /// copied: a run of each copy's records of the key's hash in the
    /// range, to read a block at a time. The reader compares keys.
    pub copied: Vec<CopiedRun>,
}

impl Log {
    /// Indexes up to about `budget_bytes` of committed batches not yet in
    /// the history index (bucket minima and keys), oldest first. Meant for
    /// a background task that follows the tail at low priority: nothing on
    /// the append path waits for it, and lookups read what it has not
    /// reached in full.
    pub fn index_history(&self, budget_bytes: u64) -> HistoryProgress {
        let progress = self.index_history_within(budget_bytes);
        self.history_indexed_to
            .store(progress.indexed_to, Ordering::Relaxed);
        progress
    }

    /// Committed records not yet in the history index, as the last
    /// [`Log::index_history`] call left it: zero means a call would have
    /// nothing to do (two loads, for a sweep over many logs).
    pub fn history_lag(&self) -> u64 {
        self.high_watermark()
            .saturating_sub(self.history_indexed_to.load(Ordering::Relaxed))
    }

    fn index_history_within(&self, budget_bytes: u64) -> HistoryProgress {
        let list = self.segments.load_full();
        let mut scratch = Vec::new();
        let mut done = 0u64;
        let mut indexed_to = self.log_start_offset();
        for segment in list.iter() {
            let history = segment.history();
            let complete = segment.is_complete();
            let committed = segment.committed();
            if complete && !history.is_complete() {
                history.load_file(
                    &segment.keys_path(),
                    segment.base_offset(),
                    committed,
                    segment.index_interval(),
                    segment.index().buckets_for(committed.bytes),
                );
            }
            if history.is_complete() {
                indexed_to = segment.end_offset();
                continue;
            }
            let interval = segment.index_interval();
            let mut at = history.indexed();
            while at.bytes < committed.bytes && done < budget_bytes && !self.stopped() {
                let Some((header, len)) = segment.batch_within(at.bytes, committed.bytes) else {
                    // A damaged header: the log stopped committing here.
                    break;
                };
                let count = header.offset_count();
                let bytes = segment.bytes(at.bytes, at.bytes + len);
                let keys = batch_keys(&bytes, &mut scratch);
                let buckets =
                    (at.bytes / interval) as usize..=((at.bytes + len - 1) / interval) as usize;
                if history.add(at, len, count, buckets, keys) {
                    history.spill(segment.path());
                }
                at = Extent::new(at.records + count, at.bytes + len);
                done += u64::from(len);
            }
            indexed_to = segment.base_offset() + u64::from(at.records);
            if at.bytes < committed.bytes {
                let caught_up = done < budget_bytes;
                return HistoryProgress {
                    indexed_to,
                    bytes: done,
                    caught_up,
                };
            }
            if !complete {
                break;
            }
            self.complete_history(segment);
        }
        HistoryProgress {
            indexed_to,
            bytes: done,
            caught_up: true,
        }
    }

    /// Writes a wholly indexed sealed segment's `.keys` file: merged and
    /// synced under a temporary name holding no lock (lookups and
    /// maintenance go on), then renamed into place under the maintenance
    /// lock unless the segment left the log (retention, a rewrite) or the
    /// log stopped, as the directory may then hold other files of the same
    /// name. A file that cannot be written leaves the index in memory.
    fn complete_history(&self, segment: &Arc<Segment>) {
        let history = segment.history();
        let Some(done) = history.prepare_completion() else {
            return;
        };
        let path = segment.keys_path();
        let mut staged = path.clone().into_os_string();
        staged.push(".new.tmp");
        let staged = PathBuf::from(staged);
        let installed = done
            .write(&staged, segment.base_offset(), segment.index_interval())
            .and_then(|()| {
                let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
                let current = self.segments.load();
                if self.stopped() || !current.iter().any(|s| Arc::ptr_eq(s, segment)) {
                    return Ok(false);
                }
                std::fs::rename(&staged, &path)?;
                sync_dir(&self.dir)?;
                Ok(true)
            });
        match installed {
            Ok(true) => history.finish(crate::history::KeysFile::open(&path)),
            Ok(false) => {
                let _ = std::fs::remove_file(&staged);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&staged);
                tracing::warn!(file = %path.display(), error = %e, "cannot write the history index; keeping it in memory");
                history.finish(None);
            }
        }
    }

    /// The batches of `from..to` that may hold records with `key`, each by
    /// the last offset worth reading in it, as far as the history index
    /// reaches, and where the unindexed rest begins; segments with a
    /// key-sorted copy give a run of the copy instead. Past `max_batches`
    /// named, the rest of the range counts as unindexed: a key in most
    /// batches is read faster in bulk than batch by batch.
    pub fn key_batches(&self, key: &[u8], from: u64, to: u64, max_batches: usize) -> KeyBatches {
        self.keys_batches(&[key], from, to, max_batches)
    }

    /// [`Log::key_batches`] for several keys at once, over one view of the
    /// segments and their copies (so no record is both in a copied run
    /// and in a batch named): the batches named for any key (ascending,
    /// each once, all before `unindexed_from`), the earliest place any
    /// key's index stops, and one copied run per segment and key hash
    /// (keys sharing a hash share it), each ending where the index stops.
    /// `max_batches` applies to each key.
    pub fn keys_batches(
        &self,
        keys: &[&[u8]],
        from: u64,
        to: u64,
        max_batches: usize,
    ) -> KeyBatches {
        let list = self.segments.load_full();
        let copies: Vec<Vec<Arc<KeyCopy>>> = list.iter().map(|s| s.key_copy().copies()).collect();
        let mut hashes: Vec<u32> = keys.iter().map(|k| key_hash(k)).collect();
        hashes.sort_unstable();
        hashes.dedup();
        let mut all = KeyBatches {
            last_offsets: Vec::new(),
            unindexed_from: to,
            copied: Vec::new(),
        };
        for hash in hashes {
            let one = hash_batches(&list, &copies, hash, from, to, max_batches);
            all.last_offsets.extend(one.last_offsets);
            all.unindexed_from = all.unindexed_from.min(one.unindexed_from);
            all.copied.extend(one.copied);
        }
        all.last_offsets.sort_unstable();
        all.last_offsets.dedup();
        let end = all.unindexed_from;
        all.last_offsets.retain(|&last| last < end);
        for run in &mut all.copied {
            run.end_at(end);
        }
        all.copied.retain(|run| !run.is_done());
        all
    }

    /// The end of the part of `from..to` that can hold a record stamped at
    /// or before `latest`: every record from the answer to `to` is later.
    /// `to` itself when the history index does not cover the range.
    pub fn end_for_timestamps_up_to(&self, latest: i64, from: u64, to: u64) -> u64 {
        let list = self.segments.load_full();
        for segment in list.iter().rev() {
            let base = segment.base_offset();
            if base >= to {
                continue;
            }
            let end = segment.end_offset();
            if end <= from {
                return from;
            }
            let limit = to.min(end);
            if base + u64::from(segment.history().indexed().records) < limit {
                return to;
            }
            let committed = segment.committed();
            let index = segment.index();
            let limit_position = if limit == end {
                committed.bytes
            } else {
                // The bucket where the batch holding `limit` starts counts.
                segment.position_of(limit, committed).saturating_add(1)
            };
            let buckets = index.buckets_for(limit_position);
            if let Some(k) = segment
                .history()
                .last_bucket_reaching_back_to(latest, buckets)
            {
                // Every batch overlapping bucket k + 1 is later than
                // `latest` (k is the last bucket reaching back to it), the
                // one holding its first byte included. Past the buckets
                // looked at (the batch holding `limit` may reach into the
                // next one) nothing is known: the limit stands.
                let after = if k + 1 < buckets {
                    base + u64::from(index.entry(k + 1).records)
                } else {
                    limit
                };
                return after.clamp(from, to);
            }
        }
        from
    }
}

/// [`Log::key_batches`] for one key hash, over `list` and the copies its
/// segments had (`copies`, per segment: consecutive stretches from its
/// start, the whole segment or the active one's parts).
fn hash_batches(
    list: &[Arc<Segment>],
    copies: &[Vec<Arc<KeyCopy>>],
    hash: u32,
    from: u64,
    to: u64,
    max_batches: usize,
) -> KeyBatches {
    let mut last_offsets = Vec::new();
    let mut copied = Vec::new();
    for (segment, copy) in list.iter().zip(copies) {
        let base = segment.base_offset();
        if base >= to || from >= to {
            break;
        }
        let indexed_end = base + u64::from(segment.history().indexed().records);
        if segment.end_offset() > from {
            let mut copied_to = base;
            for copy in copy {
                let stretch = copy.offsets();
                copied_to = stretch.end;
                let range = from.max(stretch.start)..to.min(stretch.end);
                if !range.is_empty() {
                    copied.push(CopiedRun::new(
                        Arc::clone(segment),
                        Arc::clone(copy),
                        hash,
                        range,
                    ));
                }
            }
            // Copies end at a batch boundary, the whole segment's at its end.
            if copied_to >= segment.end_offset().min(to) {
                if segment.end_offset() >= to {
                    break;
                }
                continue;
            }
            let found = segment.history().batches_with(hash);
            let relative_from = from.max(copied_to).saturating_sub(base);
            // An entry before `from` is a batch's last record of the
            // key: nothing of the key in that batch is in the range.
            let first = found.partition_point(|&r| u64::from(r) < relative_from);
            let mut past_end = false;
            for offset in found[first..].iter().map(|&r| base + u64::from(r)) {
                if offset < to {
                    last_offsets.push(offset);
                } else {
                    past_end = true;
                    break;
                }
            }
            // The batch holding the first entry past the range may
            // begin inside it: its part in the range is read up to the
            // range's last offset (the batch holding that one).
            if past_end && last_offsets.last() != Some(&(to - 1)) {
                last_offsets.push(to - 1);
            }
            if last_offsets.len() > max_batches {
                // The key's records after the last batch named are
                // all past its last offset named.
                let unindexed_from = match max_batches {
                    0 => from,
                    n => last_offsets[n - 1] + 1,
                };
                last_offsets.truncate(max_batches);
                return KeyBatches {
                    last_offsets,
                    unindexed_from,
                    copied,
                };
            }
            if past_end {
                break;
            }
        }
        if indexed_end < segment.end_offset().min(to) {
            return KeyBatches {
                last_offsets,
                unindexed_from: indexed_end.max(from),
                copied,
            };
        }
    }
    KeyBatches {
        last_offsets,
        unindexed_from: to,
        copied,
    }
}

/// The smallest timestamp and the key hashes of one stored batch; nothing
/// known if its records cannot be read.
fn batch_keys(bytes: &[u8], scratch: &mut Vec<u8>) -> BatchKeys {
    let unreadable = BatchKeys {
        min_timestamp: i64::MIN,
        hashes: None,
    };
    let Ok(batch) = RecordBatch::new(bytes) else {
        return unreadable;
    };
    let control = batch.header().is_control();
    let Ok(records) = batch.records(scratch) else {
        return unreadable;
    };
    let base = batch.header().base_offset();
    let mut min_timestamp = i64::MAX;
    let mut hashes = Vec::new();
    for record in records {
        let Ok(record) = record else {
            return unreadable;
        };
        min_timestamp = min_timestamp.min(record.timestamp);
        if let (false, Some(key)) = (control, record.key) {
            let delta = u32::try_from(record.offset.saturating_sub(base)).unwrap_or(0);
            hashes.push((key_hash(key), delta));
        }
    }
    let hashes = last_per_hash(hashes);
    BatchKeys {
        min_timestamp: min_timestamp.min(batch.header().max_timestamp()),
        hashes: Some(hashes),
    }
}

/// Each hash of `hashes` (a batch's, in record order) once, with the
/// largest delta of its records (the last, unless the producer numbered
/// them out of order, which the broker does not check), in no particular
/// order: the history sorts
/// its entries later anyway. Found through a small open-addressing table
/// rather than by sorting the batch, which cost as much as the rest of
/// indexing a batch of distinct keys.
fn last_per_hash(hashes: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    if hashes.len() < 2 {
        return hashes;
    }
    // At most half full, so a probe ends after a slot or two.
    let bits = (hashes.len() * 2).next_power_of_two().trailing_zeros();
    let mask = (1usize << bits) - 1;
    // Where each hash's pair is in `last`, plus one; zero: an empty slot.
    let mut slots = vec![0u32; mask + 1];
    let mut last: Vec<(u32, u32)> = Vec::with_capacity(hashes.len());
    for (hash, delta) in hashes {
        // crc32c's low bits are as good as its high ones; the multiply
        // spreads runs of similar keys anyway.
        let mut slot = (hash.wrapping_mul(0x9e37_79b9) >> (32 - bits.min(32))) as usize & mask;
        loop {
            match slots[slot] {
                0 => {
                    last.push((hash, delta));
                    slots[slot] = last.len() as u32;
                    break;
                }
                at if last[at as usize - 1].0 == hash => {
                    let largest = &mut last[at as usize - 1].1;
                    *largest = (*largest).max(delta);
                    break;
                }
                _ => slot = (slot + 1) & mask,
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Each hash of a batch once, with its largest delta, as sorting
        /// the batch and keeping each hash's last pair gives: records
        /// numbered in order, or (a producer's doing) out of order.
        #[test]
        fn each_hash_once_with_its_last_record(
            records in proptest::collection::vec((0u32..40, 0u32..1000), 0..300),
            in_order in proptest::bool::ANY,
        ) {
            let batch: Vec<(u32, u32)> = records
                .iter()
                .enumerate()
                .map(|(i, &(h, d))| (h, if in_order { i as u32 } else { d }))
                .collect();
            let mut got = last_per_hash(batch.clone());
            got.sort_unstable();
            let mut expected: Vec<(u32, u32)> = Vec::new();
            let mut sorted = batch;
            sorted.sort_unstable();
            for (hash, delta) in sorted {
                match expected.last_mut() {
                    Some(previous) if previous.0 == hash => previous.1 = delta,
                    _ => expected.push((hash, delta)),
                }
            }
            proptest::prop_assert_eq!(got, expected);
        }
    }
}
