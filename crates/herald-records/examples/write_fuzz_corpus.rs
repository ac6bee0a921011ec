//! Writes the seed corpus of the `record_iterate` fuzz target: one batch
//! per codec, with keys, null values and headers, so the fuzzer starts
//! from every path of the record iterator.
//!
//! `cargo run -p herald-records --example write_fuzz_corpus -- fuzz/corpus/record_iterate`

use herald_records::{BatchBuilder, Compression, RecordFields};

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: write_fuzz_corpus DIR");
    std::fs::create_dir_all(&dir).expect("create the corpus directory");
    let headers: &[(&[u8], Option<&[u8]>)] = &[(b"trace", Some(b"abc")), (b"empty", None)];
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut builder = BatchBuilder::new(1_700_000_000_000);
        for i in 0..3u8 {
            builder.push(RecordFields {
                timestamp_ms: 1_700_000_000_000 + i64::from(i),
                key: Some(&[b'k', i]),
                value: (i != 1).then_some(&b"value bytes"[..]),
                headers,
            });
        }
        let batch = builder.finish_with(codec).expect("encode");
        let path = format!("{dir}/batch_{codec:?}").to_lowercase();
        std::fs::write(&path, batch).expect("write a corpus file");
    }
}
