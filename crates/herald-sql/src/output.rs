//! Writing a query's results as they come: JSON lines, CSV, Parquet, or a
//! text table (the one format held whole before it is written, since its
//! column widths depend on every row).

use std::io::Write;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;

use crate::SqlError;

/// Most bytes of results a text table holds; past them the query is
/// refused and asked to use a streamed format.
const TABLE_BYTES_MAX: usize = 64 << 20;
/// Rows per Parquet row group: small enough that a file streams out as it
/// is written.
const PARQUET_ROW_GROUP_ROWS: usize = 65_536;
/// Bytes a Parquet row group holds in memory before it is written out,
/// however few its rows.
const PARQUET_ROW_GROUP_BYTES: usize = 32 << 20;

/// How results are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// One JSON object per row (`application/x-ndjson`).
    Jsonl,
    /// CSV with a header line; nested columns (`headers`) cannot be held.
    Csv,
    /// An Apache Parquet file.
    Parquet,
    /// A text table for people.
    Table,
}

impl OutputFormat {
    /// The HTTP content type of the results.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Jsonl => "application/x-ndjson",
            Self::Csv => "text/csv; charset=utf-8",
            Self::Parquet => "application/vnd.apache.parquet",
            Self::Table => "text/plain; charset=utf-8",
        }
    }
}

impl FromStr for OutputFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "jsonl" | "json" => Self::Jsonl,
            "csv" => Self::Csv,
            "parquet" => Self::Parquet,
            "table" => Self::Table,
            other => {
                return Err(format!(
                    "unknown output format {other:?} (jsonl, csv, parquet or table)"
                ))
            }
        })
    }
}

/// A Parquet writer's sink: the caller takes what was written after each
/// batch.
#[derive(Clone, Default)]
pub(crate) struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl SharedBuffer {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Encodes batches in one format.
pub(crate) enum Encoder {
    Jsonl,
    Csv {
        header_written: bool,
    },
    Parquet {
        writer: Box<ArrowWriter<SharedBuffer>>,
        sink: SharedBuffer,
    },
    Table {
        batches: Vec<RecordBatch>,
        bytes: usize,
    },
}

fn output(e: impl std::fmt::Display) -> SqlError {
    SqlError::Output(e.to_string())
}

impl Encoder {
    pub(crate) fn new(format: OutputFormat, schema: &SchemaRef) -> Result<Self, SqlError> {
        Ok(match format {
            OutputFormat::Jsonl => Self::Jsonl,
            OutputFormat::Csv => Self::Csv {
                header_written: false,
            },
            OutputFormat::Parquet => {
                let sink = SharedBuffer::default();
                let properties = WriterProperties::builder()
                    .set_max_row_group_row_count(Some(PARQUET_ROW_GROUP_ROWS))
                    .build();
                let writer =
                    ArrowWriter::try_new(sink.clone(), Arc::clone(schema), Some(properties))
                        .map_err(output)?;
                Self::Parquet {
                    writer: Box::new(writer),
                    sink,
                }
            }
            OutputFormat::Table => Self::Table {
                batches: Vec::new(),
                bytes: 0,
            },
        })
    }

    /// The bytes `batch` adds to the output (possibly none yet).
    pub(crate) fn encode(&mut self, batch: &RecordBatch) -> Result<Bytes, SqlError> {
        match self {
            Self::Jsonl => {
                let mut writer = arrow_json::LineDelimitedWriter::new(Vec::new());
                writer.write(batch).map_err(output)?;
                writer.finish().map_err(output)?;
                Ok(Bytes::from(writer.into_inner()))
            }
            Self::Csv { header_written } => {
                let mut out = Vec::new();
                {
                    let mut writer = arrow_csv::WriterBuilder::new()
                        .with_header(!*header_written)
                        .build(&mut out);
                    writer.write(batch).map_err(|e| {
                        SqlError::Output(format!(
                            "{e} (CSV holds no nested column: select fields of `headers`, or use jsonl)"
                        ))
                    })?;
                }
                *header_written = true;
                Ok(Bytes::from(out))
            }
            Self::Parquet { writer, sink } => {
                writer.write(batch).map_err(output)?;
                if writer.in_progress_size() >= PARQUET_ROW_GROUP_BYTES {
                    writer.flush().map_err(output)?;
                }
                Ok(Bytes::from(sink.take()))
            }
            Self::Table { batches, bytes } => {
                *bytes += batch.get_array_memory_size();
                if *bytes > TABLE_BYTES_MAX {
                    return Err(SqlError::OverLimit(format!(
                        "more than {} MiB of results for a table: use jsonl, csv or parquet",
                        TABLE_BYTES_MAX >> 20
                    )));
                }
                batches.push(batch.clone());
                Ok(Bytes::new())
            }
        }
    }

    /// The bytes that end the output.
    pub(crate) fn finish(self, schema: &SchemaRef) -> Result<Bytes, SqlError> {
        match self {
            Self::Jsonl => Ok(Bytes::new()),
            Self::Csv { header_written } => {
                if header_written {
                    return Ok(Bytes::new());
                }
                // No row: the header alone.
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                Ok(Bytes::from(format!("{}\n", names.join(","))))
            }
            Self::Parquet { writer, sink } => {
                writer.close().map_err(output)?;
                Ok(Bytes::from(sink.take()))
            }
            Self::Table { batches, .. } => {
                let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
                if rows == 0 {
                    let names: Vec<&str> =
                        schema.fields().iter().map(|f| f.name().as_str()).collect();
                    return Ok(Bytes::from(format!(
                        "no rows (columns: {})\n",
                        names.join(", ")
                    )));
                }
                let table = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
                    .map_err(output)?;
                Ok(Bytes::from(format!(
                    "{table}\n{rows} row{}\n",
                    if rows == 1 { "" } else { "s" }
                )))
            }
        }
    }
}
