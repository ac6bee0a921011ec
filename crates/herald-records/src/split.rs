//! Splitting a run of concatenated batches (a produce request's records, or
//! a fetch's answer) into single batches, checking each one's framing.

use crate::header::{BatchHeader, HEADER_BYTES};
use crate::validate::BatchError;

/// Splits a run of concatenated batches (a produce request's `records`) into
/// single batches. Stops with an error at the first batch whose framing is
/// wrong; a trailing partial batch is an error too, since a producer never
/// sends one.
pub struct Batches<'a> {
    rest: &'a [u8],
}

/// Iterates the batches in `bytes`.
#[inline]
pub fn batches(bytes: &[u8]) -> Batches<'_> {
    Batches { rest: bytes }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<&'a [u8], BatchError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let Some(header) = BatchHeader::parse(self.rest) else {
            let len = self.rest.len();
            self.rest = &[];
            return Some(Err(BatchError::TooShort {
                len,
                min: HEADER_BYTES,
            }));
        };
        match header.total_bytes() {
            Some(total) if total >= HEADER_BYTES && total <= self.rest.len() => {
                let (batch, rest) = self.rest.split_at(total);
                self.rest = rest;
                Some(Ok(batch))
            }
            declared => {
                let actual = self.rest.len();
                self.rest = &[];
                Some(Err(BatchError::LengthMismatch {
                    declared: declared.unwrap_or(0),
                    actual,
                }))
            }
        }
    }
}
