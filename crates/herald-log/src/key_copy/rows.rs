//! The row a key-sorted copy keeps of one record, and the records a lookup
//! answers from copies.
//!
//! A row is a fixed 36-byte head, little-endian: key hash (`u32`), offset
//! (`u64`), timestamp (`i64`), key length (`u32`), value length (`i32`, -1
//! for a null value), header count (`u32`), header section length
//! (`u32`); then the key, the value and the header section (Kafka's own
//! encoding of the headers, as in the batch). Rows are sorted by hash and
//! then offset.

use herald_records::Record;

/// Bytes of a row's fixed head.
pub(crate) const ROW_HEAD: usize = 36;

/// The head of a row: what sorting and lookups read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowHead {
    pub(crate) hash: u32,
    pub(crate) offset: u64,
    /// Length of the whole row.
    pub(crate) len: usize,
}

/// Bytes of the row [`put_row`] makes of `record`.
pub(crate) fn row_len(record: &Record<'_>, key: &[u8]) -> usize {
    ROW_HEAD + key.len() + record.value.map_or(0, <[u8]>::len) + record.header_section().len()
}

/// Appends the row of `record` (whose key hashes to `hash`) to `out`.
pub(crate) fn put_row(out: &mut Vec<u8>, hash: u32, record: &Record<'_>, key: &[u8]) {
    let value_len = record
        .value
        .map_or(-1, |v| i32::try_from(v.len()).unwrap_or(i32::MAX));
    let headers = record.header_section();
    out.extend_from_slice(&hash.to_le_bytes());
    out.extend_from_slice(&(record.offset as u64).to_le_bytes());
    out.extend_from_slice(&record.timestamp.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&value_len.to_le_bytes());
    out.extend_from_slice(&record.header_count().to_le_bytes());
    out.extend_from_slice(&(headers.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    if let Some(value) = record.value {
        out.extend_from_slice(value);
    }
    out.extend_from_slice(headers);
}

/// The little-endian `u32` at `at` (callers check the length).
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default())
}

/// The little-endian `u64` at `at` (callers check the length).
pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default())
}

/// The head of a row from its first [`ROW_HEAD`] bytes (or more); `None`
/// if fewer, or if its lengths overflow.
pub(crate) fn measure(head: &[u8]) -> Option<RowHead> {
    if head.len() < ROW_HEAD {
        return None;
    }
    let key = u32_at(head, 20) as usize;
    let value = match u32_at(head, 24) as i32 {
        -1 => 0,
        n => usize::try_from(n).ok()?,
    };
    let headers = u32_at(head, 32) as usize;
    let len = ROW_HEAD
        .checked_add(key)?
        .checked_add(value)?
        .checked_add(headers)?;
    Some(RowHead {
        hash: u32_at(head, 0),
        offset: u64_at(head, 4),
        len,
    })
}

/// The head of the row at the start of `bytes`; `None` if `bytes` does not
/// hold a whole row.
pub(crate) fn row_head(bytes: &[u8]) -> Option<RowHead> {
    measure(bytes).filter(|head| head.len <= bytes.len())
}

/// One record as a key-sorted copy keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopiedRecord<'a> {
    /// Its offset.
    pub offset: u64,
    /// Its timestamp (ms since the epoch), as a reader of its batch sees it.
    pub timestamp: i64,
    /// Its key (records without a key are not copied).
    pub key: &'a [u8],
    /// Its value (`None` is Kafka's null).
    pub value: Option<&'a [u8]>,
    header_count: u32,
    headers: &'a [u8],
}

impl<'a> CopiedRecord<'a> {
    /// The record as its batch would have given it, for code that reads
    /// records of batches.
    pub fn record(&self) -> Record<'a> {
        Record::from_parts(
            self.offset as i64,
            self.timestamp,
            Some(self.key),
            self.value,
            self.header_count,
            self.headers,
        )
    }
}

/// The record of a whole row (`bytes` exactly one row, as [`row_head`]
/// measured it).
fn copied_record(bytes: &[u8]) -> CopiedRecord<'_> {
    let key_len = u32_at(bytes, 20) as usize;
    let value_len = u32_at(bytes, 24) as i32;
    let key_end = ROW_HEAD + key_len;
    let (value, value_end) = match usize::try_from(value_len) {
        Ok(n) => (Some(&bytes[key_end..key_end + n]), key_end + n),
        Err(_) => (None, key_end),
    };
    CopiedRecord {
        offset: u64_at(bytes, 4),
        timestamp: u64_at(bytes, 12) as i64,
        key: &bytes[ROW_HEAD..key_end],
        value,
        header_count: u32_at(bytes, 28),
        headers: &bytes[value_end..],
    }
}

/// Records of a key read from key-sorted copies (rows of the key's hash:
/// a reader compares keys), in offset order within each segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopiedRecords {
    rows: Vec<u8>,
}

impl CopiedRecords {
    /// Adds a whole row.
    pub(crate) fn push_row(&mut self, row: &[u8]) {
        self.rows.extend_from_slice(row);
    }

    /// Forgets every record (keeping the memory for more).
    pub fn clear(&mut self) {
        self.rows.clear();
    }

    /// The records, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = CopiedRecord<'_>> + '_ {
        let mut rest = self.rows.as_slice();
        std::iter::from_fn(move || {
            // Rows were measured when added: a short rest cannot happen.
            let head = row_head(rest)?;
            let (row, after) = rest.split_at(head.len);
            rest = after;
            Some(copied_record(row))
        })
    }
}
