//! The columns every topic and snapshot view has as a SQL table, and the
//! builders that turn stored records into Arrow columns (only those a
//! query reads).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryBuilder, Int32Builder, Int64Builder, MapBuilder, StringBuilder,
    TimestampMillisecondBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatch;
use herald_records::Record;

/// The columns, in order. `key` and `value` are the bytes read as UTF-8
/// text (NULL when absent or not UTF-8); `key_bytes` and `value_bytes`
/// are the bytes as stored; `headers` maps each header's name to its
/// value read as text (invalid UTF-8 replaced).
pub const COLUMNS: [&str; 8] = [
    "partition",
    "offset",
    "timestamp",
    "key",
    "value",
    "headers",
    "key_bytes",
    "value_bytes",
];

const PARTITION: usize = 0;
const OFFSET: usize = 1;
const TIMESTAMP: usize = 2;
const KEY: usize = 3;
const VALUE: usize = 4;
const HEADERS: usize = 5;
const KEY_BYTES: usize = 6;
const VALUE_BYTES: usize = 7;

/// Name of the `partition` column.
pub(crate) const PARTITION_COLUMN: &str = COLUMNS[PARTITION];
/// Name of the `offset` column.
pub(crate) const OFFSET_COLUMN: &str = COLUMNS[OFFSET];
/// Name of the `timestamp` column.
pub(crate) const TIMESTAMP_COLUMN: &str = COLUMNS[TIMESTAMP];

/// Name of the `key` column.
pub(crate) const KEY_COLUMN: &str = COLUMNS[KEY];
/// Name of the `key_bytes` column.
pub(crate) const KEY_BYTES_COLUMN: &str = COLUMNS[KEY_BYTES];

/// The schema of a topic's table.
pub fn topic_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    Arc::clone(SCHEMA.get_or_init(|| {
        Arc::new(Schema::new(vec![
            Field::new(COLUMNS[PARTITION], DataType::Int32, false),
            Field::new(COLUMNS[OFFSET], DataType::Int64, false),
            Field::new(
                COLUMNS[TIMESTAMP],
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                false,
            ),
            Field::new(COLUMNS[KEY], DataType::Utf8, true),
            Field::new(COLUMNS[VALUE], DataType::Utf8, true),
            Field::new(COLUMNS[HEADERS], headers_type(), false),
            Field::new(COLUMNS[KEY_BYTES], DataType::Binary, true),
            Field::new(COLUMNS[VALUE_BYTES], DataType::Binary, true),
        ]))
    }))
}

/// The map type `MapBuilder` makes, so the schema says what the batches
/// hold.
fn headers_type() -> DataType {
    headers_builder().finish().data_type().clone()
}

fn headers_builder() -> MapBuilder<StringBuilder, StringBuilder> {
    MapBuilder::new(None, StringBuilder::new(), StringBuilder::new())
}

enum Column {
    Partition(Int32Builder),
    Offset(Int64Builder),
    Timestamp(TimestampMillisecondBuilder),
    Key(StringBuilder),
    Value(StringBuilder),
    Headers(Box<MapBuilder<StringBuilder, StringBuilder>>),
    KeyBytes(BinaryBuilder),
    ValueBytes(BinaryBuilder),
}

/// Builds the columns of `projection` (indexes into [`COLUMNS`]) from
/// records, one batch at a time.
pub(crate) struct RecordColumns {
    schema: SchemaRef,
    columns: Vec<Column>,
    rows: usize,
    /// Bytes of keys, values and headers added since the last batch.
    bytes: usize,
}

impl RecordColumns {
    /// Builders for `projection`, whose batches have `schema` (the topic
    /// schema projected).
    pub(crate) fn new(projection: &[usize], schema: SchemaRef) -> Self {
        let columns = projection
            .iter()
            .map(|&c| match c {
                PARTITION => Column::Partition(Int32Builder::new()),
                OFFSET => Column::Offset(Int64Builder::new()),
                TIMESTAMP => {
                    Column::Timestamp(TimestampMillisecondBuilder::new().with_timezone("UTC"))
                }
                KEY => Column::Key(StringBuilder::new()),
                VALUE => Column::Value(StringBuilder::new()),
                HEADERS => Column::Headers(Box::new(headers_builder())),
                KEY_BYTES => Column::KeyBytes(BinaryBuilder::new()),
                _ => Column::ValueBytes(BinaryBuilder::new()),
            })
            .collect();
        Self {
            schema,
            columns,
            rows: 0,
            bytes: 0,
        }
    }

    /// Rows added since the last batch.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes of record data added since the last batch (what the builders
    /// hold, at most about twice over: text and bytes columns).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds `record` of `partition`.
    pub(crate) fn push(&mut self, partition: i32, record: &Record<'_>) -> Result<(), ArrowError> {
        for column in &mut self.columns {
            match column {
                Column::Partition(b) => b.append_value(partition),
                Column::Offset(b) => b.append_value(record.offset),
                Column::Timestamp(b) => b.append_value(record.timestamp),
                Column::Key(b) => b.append_option(text(record.key)),
                Column::Value(b) => b.append_option(text(record.value)),
                Column::Headers(b) => {
                    for header in record.headers().map_while(Result::ok) {
                        let (name, value) = header;
                        b.keys().append_value(String::from_utf8_lossy(name));
                        match value {
                            Some(value) => b.values().append_value(String::from_utf8_lossy(value)),
                            None => b.values().append_null(),
                        }
                    }
                    b.append(true)?;
                }
                Column::KeyBytes(b) => b.append_option(record.key),
                Column::ValueBytes(b) => b.append_option(record.value),
            }
        }
        self.rows += 1;
        self.bytes += record.key.map_or(0, <[u8]>::len)
            + record.value.map_or(0, <[u8]>::len)
            + record.header_section().len();
        Ok(())
    }

    /// The rows added so far as a batch; the builders start again empty.
    pub(crate) fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|column| -> ArrayRef {
                match column {
                    Column::Partition(b) => Arc::new(b.finish()),
                    Column::Offset(b) => Arc::new(b.finish()),
                    Column::Timestamp(b) => Arc::new(b.finish()),
                    Column::Key(b) | Column::Value(b) => Arc::new(b.finish()),
                    Column::Headers(b) => Arc::new(b.finish()),
                    Column::KeyBytes(b) | Column::ValueBytes(b) => Arc::new(b.finish()),
                }
            })
            .collect();
        let rows = std::mem::take(&mut self.rows);
        self.bytes = 0;
        RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            arrays,
            &datafusion::arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows)),
        )
    }
}

fn text(bytes: Option<&[u8]>) -> Option<&str> {
    bytes.and_then(|b| std::str::from_utf8(b).ok())
}
