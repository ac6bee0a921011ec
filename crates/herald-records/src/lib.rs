//! # herald-records: Kafka's RecordBatch v2 format
//!
//! What it owns: the batch header (layout, field view, the two fields a
//! broker stamps), validation of a client's batch, splitting a run of
//! batches, the one batch builder (every codec), Kafka's varints,
//! decompression of every codec (bounded), and a zero-allocation iterator
//! over the records of a batch (offset, timestamp, key, value, headers).
//!
//! What it must not do: any I/O (no files, no sockets, no async runtime).
//! It is pure functions over byte slices, shared by the log (which stores
//! and indexes batches without decoding records), the broker, the Kafka
//! front end, the client, the tools and the tests.
//!
//! ## Reading records
//!
//! ```
//! use herald_records::{batches, BatchBuilder, RecordBatch, RecordFields};
//!
//! let mut builder = BatchBuilder::new(1_000);
//! builder.push(RecordFields { timestamp_ms: 1_000, key: Some(b"k"), value: Some(b"v"), headers: &[] });
//! let bytes = builder.finish().unwrap();
//! let mut scratch = Vec::new(); // reused by every compressed batch read
//! for batch in batches(&bytes) {
//!     let batch = RecordBatch::new(batch.unwrap()).unwrap();
//!     for record in batch.records(&mut scratch).unwrap() {
//!         let record = record.unwrap();
//!         assert_eq!((record.offset, record.key, record.value), (0, Some(&b"k"[..]), Some(&b"v"[..])));
//!     }
//! }
//! ```

#![warn(missing_docs)]

pub mod builder;
pub mod compression;
pub mod header;
pub mod records;
pub mod split;
pub mod testing;
pub mod validate;
pub mod varint;

pub use builder::{BatchBuilder, EncodeError, RecordFields};
pub use compression::{decompress_into, Compression, CompressionError};
pub use header::{refresh_crc, stamp, BatchHeader, BATCH_BYTES_MIN, HEADER_BYTES, LOG_OVERHEAD};
pub use records::{first_at_or_after, Header, Headers, Record, RecordBatch, RecordError, Records};
pub use split::{batches, Batches};
pub use validate::{validate, BatchError, ValidBatch};
