//! Fuzzes the record format: splitting a run of batches, validation, and
//! iterating every record and header of every batch, compressed or not.
//! A panic, an out-of-bounds read or an allocation above libFuzzer's limit
//! (a decompression bomb read to the end) is a finding.

#![no_main]

use herald_records::{batches, validate, RecordBatch};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut scratch = Vec::new();
    for batch in batches(data).map_while(Result::ok) {
        let _ = validate(batch);
        let Ok(batch) = RecordBatch::new(batch) else {
            continue;
        };
        let Ok(records) = batch.records(&mut scratch) else {
            continue;
        };
        for record in records {
            let Ok(record) = record else { break };
            let _ = (record.offset, record.timestamp, record.key, record.value);
            for header in record.headers() {
                if header.is_err() {
                    break;
                }
            }
        }
    }
});
