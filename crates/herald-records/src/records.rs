//! Iterating the records of a batch without allocating: each [`Record`] is
//! a view into the batch (or into the caller's decompression buffer), its
//! headers a lazy iterator over the same bytes. Every length a record
//! declares is checked against the bytes left, so malformed input ends the
//! iteration with a [`RecordError`], never with a panic or a read past the
//! end.
//!
//! Record layout (inside the records section, after the batch header):
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
//! keyLength varint | key | valueLength varint | value
//! headerCount varint | (keyLength varint | key | valueLength varint | value)*
//! ```

use crate::compression::{decompress_into, Compression, CompressionError};
use crate::header::{BatchHeader, HEADER_BYTES};
use crate::validate::{check_frame, BatchError};
use crate::varint;

/// Why the records of a batch could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The batch's framing is wrong.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// The records section could not be decompressed.
    #[error(transparent)]
    Compression(#[from] CompressionError),
    /// A record (the `index`-th of its batch) is malformed: a length past
    /// the end, a bad varint, a negative count.
    #[error("record {index} of the batch is malformed: {reason}")]
    Malformed {
        /// Position of the record in its batch, from 0.
        index: u32,
        /// What is wrong.
        reason: &'static str,
    },
}

/// One record, borrowed from the batch it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Its offset: the batch's base offset plus its offset delta.
    pub offset: i64,
    /// Its timestamp (ms since the epoch): the batch's max timestamp for a
    /// LogAppendTime batch, as Kafka defines it, else base plus delta.
    pub timestamp: i64,
    /// Key (`None` is Kafka's null).
    pub key: Option<&'a [u8]>,
    /// Value (`None` is Kafka's null).
    pub value: Option<&'a [u8]>,
    header_count: u32,
    headers: &'a [u8],
    index: u32,
}

impl<'a> Record<'a> {
    /// A record kept apart from its batch (a copy sorted by key, say):
    /// `headers` is its header section as [`Record::header_section`] gave
    /// it, holding `header_count` headers.
    pub fn from_parts(
        offset: i64,
        timestamp: i64,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
        header_count: u32,
        headers: &'a [u8],
    ) -> Self {
        Self {
            offset,
            timestamp,
            key,
            value,
            header_count,
            headers,
            index: 0,
        }
    }

    /// The record's headers, in order, read as they are iterated.
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            rest: self.headers,
            remaining: self.header_count,
            record: self.index,
        }
    }

    /// Number of headers the record declares.
    pub fn header_count(&self) -> u32 {
        self.header_count
    }

    /// The bytes of the record's headers as stored, for a caller that keeps
    /// them (in a shared buffer) and reads them later with
    /// [`Headers::from_section`].
    pub fn header_section(&self) -> &'a [u8] {
        self.headers
    }
}

impl<'a> Headers<'a> {
    /// The `count` headers stored in `section` (a
    /// [`Record::header_section`]), read as they are iterated; malformed
    /// bytes end the iteration with an error, as for a record's own.
    pub fn from_section(section: &'a [u8], count: u32) -> Self {
        Self {
            rest: section,
            remaining: count,
            record: 0,
        }
    }
}

/// The headers of one record: (key, value), value `None` for Kafka's null.
#[derive(Debug, Clone)]
pub struct Headers<'a> {
    rest: &'a [u8],
    remaining: u32,
    record: u32,
}

/// One record header: its key and value (`None` is Kafka's null).
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

impl<'a> Iterator for Headers<'a> {
    type Item = Result<Header<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let mut cursor = Cursor {
            rest: self.rest,
            record: self.record,
        };
        let header = cursor
            .nullable_bytes("header key")
            .and_then(|key| key.ok_or_else(|| cursor.malformed("null header key")))
            .and_then(|key| Ok((key, cursor.nullable_bytes("header value")?)));
        match header {
            Ok(header) => {
                self.rest = cursor.rest;
                Some(Ok(header))
            }
            Err(e) => {
                self.remaining = 0;
                Some(Err(e))
            }
        }
    }
}

/// The records of one batch, in order.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    rest: &'a [u8],
    remaining: u32,
    index: u32,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
}

impl<'a> Records<'a> {
    /// The records of `header`'s batch, from `section`, its records section
    /// as plain bytes (stored so for an uncompressed batch, or decompressed
    /// by the caller).
    pub fn new(header: &BatchHeader<'_>, section: &'a [u8]) -> Self {
        Self {
            rest: section,
            remaining: u32::try_from(header.records_count()).unwrap_or(0),
            index: 0,
            base_offset: header.base_offset(),
            base_timestamp: header.base_timestamp(),
            log_append_time: header.is_log_append_time().then(|| header.max_timestamp()),
        }
    }

    fn read(&mut self) -> Result<Record<'a>, RecordError> {
        let mut outer = Cursor {
            rest: self.rest,
            record: self.index,
        };
        let length = outer.length("record length")?;
        let body = outer.take(length, "record longer than its batch")?;
        self.rest = outer.rest;
        let mut cursor = Cursor {
            rest: body,
            record: self.index,
        };
        cursor.take(1, "record without attributes")?;
        let timestamp_delta = cursor.varint("timestamp delta")?;
        let offset_delta = cursor.varint("offset delta")?;
        let key = cursor.nullable_bytes("key")?;
        let value = cursor.nullable_bytes("value")?;
        let header_count = cursor.length("header count")?;
        let header_count =
            u32::try_from(header_count).map_err(|_| cursor.malformed("header count"))?;
        let timestamp = match self.log_append_time {
            Some(time) => time,
            None => self
                .base_timestamp
                .checked_add(timestamp_delta)
                .ok_or_else(|| cursor.malformed("timestamp out of range"))?,
        };
        let offset = self
            .base_offset
            .checked_add(offset_delta)
            .ok_or_else(|| cursor.malformed("offset out of range"))?;
        Ok(Record {
            offset,
            timestamp,
            key,
            value,
            header_count,
            headers: cursor.rest,
            index: self.index,
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let record = self.read();
        self.index += 1;
        // After a malformed record nothing that follows can be trusted.
        self.remaining = if record.is_ok() {
            self.remaining - 1
        } else {
            0
        };
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining as usize))
    }
}

/// Reads the fields of one record, every length checked.
struct Cursor<'a> {
    rest: &'a [u8],
    record: u32,
}

impl<'a> Cursor<'a> {
    fn malformed(&self, reason: &'static str) -> RecordError {
        RecordError::Malformed {
            index: self.record,
            reason,
        }
    }

    #[inline]
    fn varint(&mut self, what: &'static str) -> Result<i64, RecordError> {
        let (value, len) = varint::get(self.rest).ok_or_else(|| self.malformed(what))?;
        self.rest = &self.rest[len..];
        Ok(value)
    }

    /// A varint that must be a length or count (not negative).
    #[inline]
    fn length(&mut self, what: &'static str) -> Result<usize, RecordError> {
        let value = self.varint(what)?;
        usize::try_from(value).map_err(|_| self.malformed(what))
    }

    #[inline]
    fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
        if len > self.rest.len() {
            return Err(self.malformed(what));
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }

    /// A length-prefixed byte string, -1 for null.
    #[inline]
    fn nullable_bytes(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, RecordError> {
        match self.varint(what)? {
            -1 => Ok(None),
            len => {
                let len = usize::try_from(len).map_err(|_| self.malformed(what))?;
                self.take(len, what).map(Some)
            }
        }
    }
}

/// A whole batch whose framing was checked (header present, magic 2,
/// declared length equal to the bytes), ready to read records from. Its
/// CRC is not checked: a stored batch was validated on the way in, and a
/// client checks the CRC of what it fetched with [`crate::validate`](fn@crate::validate).
#[derive(Debug, Clone, Copy)]
pub struct RecordBatch<'a> {
    bytes: &'a [u8],
    header: BatchHeader<'a>,
}

impl<'a> RecordBatch<'a> {
    /// Views `bytes`, exactly one whole batch (as [`crate::batches`] yields).
    pub fn new(bytes: &'a [u8]) -> Result<Self, BatchError> {
        Ok(Self {
            bytes,
            header: check_frame(bytes)?,
        })
    }

    /// The batch's header.
    pub fn header(&self) -> BatchHeader<'a> {
        self.header
    }

    /// The records of an uncompressed batch, read in place (they live as
    /// long as the batch's bytes); `None` for a compressed batch, which
    /// [`RecordBatch::records`] reads.
    pub fn records_in_place(&self) -> Option<Records<'a>> {
        (self.header.compression() == 0)
            .then(|| Records::new(&self.header, &self.bytes[HEADER_BYTES..]))
    }

    /// The batch's records. An uncompressed batch's records are read in
    /// place; a compressed one is decompressed into `scratch` first (its
    /// contents replaced), so reading many batches reuses one buffer.
    pub fn records<'s>(&self, scratch: &'s mut Vec<u8>) -> Result<Records<'s>, RecordError>
    where
        'a: 's,
    {
        let section = &self.bytes[HEADER_BYTES..];
        match Compression::from_id(self.header.compression())? {
            Compression::None => Ok(Records::new(&self.header, section)),
            codec => {
                decompress_into(codec, section, scratch)?;
                Ok(Records::new(&self.header, scratch))
            }
        }
    }
}

impl<'a> RecordBatch<'a> {
    /// The batch's records up to the one at `last_offset` (and perhaps a
    /// few past it): as [`RecordBatch::records`], but a compressed batch
    /// is inflated into `scratch` only as far as that record, so a reader
    /// after one record of a large batch pays for the part before it. A
    /// batch whose records are not numbered in order (deltas 0, 1, 2...)
    /// is read whole, as is an uncompressed one (its records are read in
    /// place as they are iterated): a reader stopping early checks the
    /// numbering itself.
    pub fn records_through<'s>(
        &self,
        scratch: &'s mut Vec<u8>,
        last_offset: i64,
    ) -> Result<Records<'s>, RecordError>
    where
        'a: 's,
    {
        let section = &self.bytes[HEADER_BYTES..];
        match Compression::from_id(self.header.compression())? {
            Compression::None => Ok(Records::new(&self.header, section)),
            codec => {
                let count = u32::try_from(self.header.records_count()).unwrap_or(0);
                let mut walk = FramingWalk {
                    at: 0,
                    records: 0,
                    count,
                    base_offset: self.header.base_offset(),
                    last_offset,
                    found: false,
                    irregular: false,
                };
                crate::compression::decompress_prefix_into(codec, section, scratch, |inflated| {
                    walk.reached(inflated)
                })?;
                let mut records = Records::new(&self.header, scratch);
                // Only whole records: the inflated part may end inside one.
                // Anything else (damage, records missing) is left for the
                // reader to meet, as a whole read would.
                if walk.found {
                    records.remaining = records.remaining.min(walk.records);
                }
                Ok(records)
            }
        }
    }
}

/// Walks the framing of the records inflated so far (each one's length
/// and offset delta), to tell when the record at `last_offset` is whole.
struct FramingWalk {
    /// Where the next record begins.
    at: usize,
    /// Whole records walked.
    records: u32,
    count: u32,
    base_offset: i64,
    last_offset: i64,
    /// A whole record at or past `last_offset` was walked.
    found: bool,
    /// A record's offset delta was not its position: the batch is read
    /// whole.
    irregular: bool,
}

impl FramingWalk {
    /// Walks on over `inflated`; true once a whole record at or past
    /// `last_offset` was walked (`found`), every record was, or the
    /// framing is damaged (the reader reports it).
    fn reached(&mut self, inflated: &[u8]) -> bool {
        while self.records < self.count {
            let Some(rest) = inflated.get(self.at..) else {
                return true;
            };
            let Some((length, n)) = crate::varint::get(rest) else {
                // The length is cut short (or damaged: more bytes tell).
                return rest.len() >= 10;
            };
            let Ok(length) = usize::try_from(length) else {
                return true;
            };
            let Some(body) = rest.get(n..n + length) else {
                return false;
            };
            // Attributes, timestamp delta, offset delta.
            let offset_delta = body.get(1..).and_then(|after| {
                let (_, skip) = crate::varint::get(after)?;
                crate::varint::get(after.get(skip..)?).map(|(delta, _)| delta)
            });
            self.at += n + length;
            self.records += 1;
            match offset_delta {
                // Offset deltas out of order (Kafka's clients number
                // records 0, 1, 2...; the broker does not check each):
                // a later record may have a smaller offset, so all are read.
                Some(delta) if delta != i64::from(self.records - 1) => self.irregular = true,
                Some(delta)
                    if self.irregular
                        || self.base_offset.saturating_add(delta) < self.last_offset => {}
                Some(_) => {
                    self.found = true;
                    return true;
                }
                None => return true,
            }
        }
        true
    }
}

/// Offset and timestamp of the first record of `batch` (one whole batch,
/// any codec) whose timestamp is at least `target` and whose offset is at
/// least `from_offset`; `None` if none is, or the records cannot be read.
pub fn first_at_or_after(
    batch: &[u8],
    target: i64,
    from_offset: i64,
    scratch: &mut Vec<u8>,
) -> Option<(i64, i64)> {
    let batch = RecordBatch::new(batch).ok()?;
    let mut records = batch.records(scratch).ok()?;
    records.find_map(|record| match record {
        Ok(r) if r.timestamp >= target && r.offset >= from_offset => {
            Some(Some((r.offset, r.timestamp)))
        }
        Ok(_) => None,
        Err(_) => Some(None),
    })?
}
