//! Bounds-checked big-endian reading and writing, shared by the consumer
//! protocol parser and the record codec.
//!
//! Every read checks the remaining length first and every length read from the
//! input is checked against what is left before anything is allocated, so
//! garbage input ends in a [`DecodeError`], never a panic or a huge allocation.

use thiserror::Error;

/// Why a byte string could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended before a field of `needed` bytes at `offset`.
    #[error("input ends at offset {offset}: {needed} more bytes needed, {available} left")]
    Truncated {
        /// Where the field starts.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the input.
        available: usize,
    },
    /// A length or count field holds a negative value other than the null
    /// marker -1, or -1 where null is not allowed.
    #[error("invalid length {length} at offset {offset}")]
    InvalidLength {
        /// Where the length field starts.
        offset: usize,
        /// The value found.
        length: i64,
    },
    /// A string is not valid UTF-8.
    #[error("string at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Where the string's bytes start.
        offset: usize,
    },
    /// The version field holds a value this code does not know.
    #[error("unsupported version {found}")]
    UnsupportedVersion {
        /// The version found.
        found: i16,
    },
    /// The record type byte is not one this code knows.
    #[error("unknown record type {found}")]
    UnknownRecordType {
        /// The type byte found.
        found: u8,
    },
    /// Bytes remain after the last field.
    #[error("{extra} unexpected bytes after the last field")]
    TrailingBytes {
        /// How many bytes remain.
        extra: usize,
    },
}

/// A cursor over a byte slice that never reads past its end.
pub(crate) struct Reader<'a> {
    input: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(input: &'a [u8]) -> Self {
        Reader { input, offset: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.input.len() - self.offset
    }

    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(DecodeError::TrailingBytes { extra }),
        }
    }

    fn take(&mut self, needed: usize) -> Result<&'a [u8], DecodeError> {
        if needed > self.remaining() {
            return Err(DecodeError::Truncated {
                offset: self.offset,
                needed,
                available: self.remaining(),
            });
        }
        let bytes = &self.input[self.offset..self.offset + needed];
        self.offset += needed;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// A Kafka STRING / NULLABLE_STRING: int16 length (-1 for null) + UTF-8.
    pub(crate) fn nullable_string(&mut self) -> Result<Option<String>, DecodeError> {
        let at = self.offset;
        let length = self.i16()?;
        if length == -1 {
            return Ok(None);
        }
        let length = usize::try_from(length).map_err(|_| DecodeError::InvalidLength {
            offset: at,
            length: i64::from(length),
        })?;
        let start = self.offset;
        let bytes = self.take(length)?;
        let text =
            std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8 { offset: start })?;
        Ok(Some(text.to_owned()))
    }

    /// A non-nullable Kafka STRING.
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.offset;
        self.nullable_string()?.ok_or(DecodeError::InvalidLength {
            offset: at,
            length: -1,
        })
    }

    /// A Kafka NULLABLE_BYTES: int32 length (-1 for null) + bytes.
    pub(crate) fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let at = self.offset;
        let length = self.i32()?;
        if length == -1 {
            return Ok(None);
        }
        let length = usize::try_from(length).map_err(|_| DecodeError::InvalidLength {
            offset: at,
            length: i64::from(length),
        })?;
        self.take(length).map(Some)
    }

    /// An int32 element count for an array whose elements take at least
    /// `element_bytes_min` bytes each; refused when the input cannot hold that
    /// many, so a forged count never drives a large allocation.
    pub(crate) fn array_len(&mut self, element_bytes_min: usize) -> Result<usize, DecodeError> {
        let at = self.offset;
        let count = self.i32()?;
        let count = usize::try_from(count).map_err(|_| DecodeError::InvalidLength {
            offset: at,
            length: i64::from(count),
        })?;
        let needed = count.saturating_mul(element_bytes_min.max(1));
        if needed > self.remaining() {
            return Err(DecodeError::Truncated {
                offset: self.offset,
                needed,
                available: self.remaining(),
            });
        }
        Ok(count)
    }
}

/// Appends big-endian fields to a byte vector.
pub(crate) struct Writer {
    pub(crate) out: Vec<u8>,
}

impl Writer {
    pub(crate) fn new() -> Self {
        Writer { out: Vec::new() }
    }

    pub(crate) fn u8(&mut self, value: u8) {
        self.out.push(value);
    }

    pub(crate) fn i16(&mut self, value: i16) {
        self.out.extend_from_slice(&value.to_be_bytes());
    }

    pub(crate) fn i32(&mut self, value: i32) {
        self.out.extend_from_slice(&value.to_be_bytes());
    }

    pub(crate) fn i64(&mut self, value: i64) {
        self.out.extend_from_slice(&value.to_be_bytes());
    }

    /// A Kafka STRING. Longer strings are cut at `i16::MAX` bytes on a char
    /// boundary; callers bound their strings well below that.
    pub(crate) fn string(&mut self, value: &str) {
        let mut end = value.len().min(i16::MAX as usize);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        // `end` fits in i16 by construction.
        self.i16(end as i16);
        self.out.extend_from_slice(&value.as_bytes()[..end]);
    }

    /// A Kafka NULLABLE_STRING.
    pub(crate) fn nullable_string(&mut self, value: Option<&str>) {
        match value {
            Some(text) => self.string(text),
            None => self.i16(-1),
        }
    }

    /// A Kafka NULLABLE_BYTES.
    pub(crate) fn nullable_bytes(&mut self, value: Option<&[u8]>) {
        match value {
            Some(bytes) => {
                let length = i32::try_from(bytes.len()).unwrap_or(i32::MAX);
                self.i32(length);
                self.out.extend_from_slice(&bytes[..length as usize]);
            }
            None => self.i32(-1),
        }
    }
}
