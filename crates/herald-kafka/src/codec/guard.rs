//! A structural pre-check of request bodies, run before `kafka-protocol`
//! decodes them. `kafka-protocol` reserves `Vec::with_capacity(count)` from a
//! peer-supplied array count before reading any element, so a 9-byte frame
//! claiming 2^31-1 elements makes it ask for gigabytes and the process
//! aborts. The walker here follows each request's schema, reads every count,
//! refuses one larger than the bytes left, and walks every element, so a
//! body that passes is fully present: what the real decoder then allocates is
//! proportional to the frame, which is bounded by the frame-size limit.

use std::fmt;

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// The body ends in the middle of a field.
    #[error("truncated at byte {at}: {needed} more bytes needed")]
    Truncated {
        /// Byte position where the field starts.
        at: usize,
        /// Bytes the field needs.
        needed: usize,
    },
    /// An array or tagged-field count exceeds the bytes left in the frame.
    #[error("count {count} at byte {at} exceeds the {remaining} bytes left")]
    HostileCount {
        /// Byte position of the count.
        at: usize,
        /// The count declared.
        count: u64,
        /// Bytes left after it.
        remaining: usize,
    },
    /// A tagged field the decoder knows is not exactly its declared size
    /// (the decoder reads the field's own length, so the two would part).
    #[error(
        "tagged field {tag} at byte {at} declares {declared} bytes but its value takes {actual}"
    )]
    TagSize {
        /// Byte position of the field's value.
        at: usize,
        /// The tag.
        tag: u32,
        /// Size declared.
        declared: usize,
        /// Size of the value.
        actual: usize,
    },
    /// A length is negative (other than -1 for null), or a varint is too long.
    #[error("invalid length or varint at byte {at}")]
    InvalidLength {
        /// Byte position of the field.
        at: usize,
    },
}

/// Wire type of one field.
#[derive(Clone, Copy)]
pub(crate) enum Ty {
    I8,
    I16,
    I32,
    I64,
    /// A float64 (8 bytes).
    F64,
    Uuid,
    Bool,
    /// String or nullable string (compact in flexible versions).
    Str,
    /// Bytes or nullable bytes (compact in flexible versions).
    Bytes,
    /// Array (nullable or not) of structs with these fields.
    Array(&'static [Field]),
    /// Array of int32.
    I32Array,
    /// Array of strings.
    StrArray,
    /// One struct with these fields (as a tagged field's value).
    Struct(&'static [Field]),
}

impl fmt::Debug for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Array(fields) => write!(f, "Array({} fields)", fields.len()),
            Ty::Struct(fields) => write!(f, "Struct({} fields)", fields.len()),
            Ty::I8 => f.write_str("I8"),
            Ty::I16 => f.write_str("I16"),
            Ty::I32 => f.write_str("I32"),
            Ty::I64 => f.write_str("I64"),
            Ty::F64 => f.write_str("F64"),
            Ty::Uuid => f.write_str("Uuid"),
            Ty::Bool => f.write_str("Bool"),
            Ty::Str => f.write_str("Str"),
            Ty::Bytes => f.write_str("Bytes"),
            Ty::I32Array => f.write_str("I32Array"),
            Ty::StrArray => f.write_str("StrArray"),
        }
    }
}

/// A field present in versions `min..=max`; a tagged field if `tag` is set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    ty: Ty,
    min: i16,
    max: i16,
    tag: Option<u32>,
}

impl Field {
    fn present(&self, version: i16) -> bool {
        (self.min..=self.max).contains(&version)
    }
}

/// A field present in every version.
pub(crate) const fn all(ty: Ty) -> Field {
    Field {
        ty,
        min: 0,
        max: i16::MAX,
        tag: None,
    }
}

/// A field present from version `min` on.
pub(crate) const fn since(min: i16, ty: Ty) -> Field {
    Field {
        ty,
        min,
        max: i16::MAX,
        tag: None,
    }
}

/// A field present in versions `min..=max`.
pub(crate) const fn between(min: i16, max: i16, ty: Ty) -> Field {
    Field {
        ty,
        min,
        max,
        tag: None,
    }
}

/// A tagged field the decoder knows, from version `min` on. `kafka-protocol`
/// decodes a known tag's value with the value's own length, ignoring the
/// declared size, so the guard checks that the two agree.
pub(crate) const fn tagged(tag: u32, min: i16, ty: Ty) -> Field {
    Field {
        ty,
        min,
        max: i16::MAX,
        tag: Some(tag),
    }
}

/// The body layout of one request type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schema {
    /// First version using the flexible (compact, tagged) encoding.
    pub flexible_from: i16,
    /// Top-level fields.
    pub fields: &'static [Field],
}

/// Checks `body` against `schema` at `version`; returns the bytes the
/// schema covers (trailing bytes are tolerated, as Kafka does).
pub(crate) fn check(schema: &Schema, version: i16, body: &[u8]) -> Result<usize, GuardError> {
    let mut walker = Walker {
        buf: body,
        pos: 0,
        version,
        flexible: version >= schema.flexible_from,
    };
    walker.walk_struct(schema.fields)?;
    Ok(walker.pos)
}

struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
    version: i16,
    flexible: bool,
}

impl Walker<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&[u8], GuardError> {
        if self.remaining() < n {
            return Err(GuardError::Truncated {
                at: self.pos,
                needed: n,
            });
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn i16(&mut self) -> Result<i16, GuardError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, GuardError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn uvarint(&mut self) -> Result<u32, GuardError> {
        let at = self.pos;
        let mut value: u32 = 0;
        for i in 0..5 {
            let byte = self.take(1)?[0];
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(GuardError::InvalidLength { at })
    }

    /// A length-prefixed run of bytes (string or bytes field).
    fn skip_sized(&mut self, wide: bool) -> Result<(), GuardError> {
        let at = self.pos;
        let len = if self.flexible {
            match self.uvarint()? {
                0 => return Ok(()),
                n => (n - 1) as usize,
            }
        } else {
            let n = if wide {
                self.i32()?
            } else {
                i32::from(self.i16()?)
            };
            match n {
                -1 => return Ok(()),
                n if n < -1 => return Err(GuardError::InvalidLength { at }),
                n => n as usize,
            }
        };
        self.take(len).map(|_| ())
    }

    /// An array count, refused if the elements cannot fit in what is left
    /// (every element takes at least one byte).
    fn count(&mut self) -> Result<usize, GuardError> {
        let at = self.pos;
        let count: u64 = if self.flexible {
            match self.uvarint()? {
                0 => 0,
                n => u64::from(n - 1),
            }
        } else {
            match self.i32()? {
                -1 => 0,
                n if n < -1 => return Err(GuardError::InvalidLength { at }),
                n => n as u64,
            }
        };
        let remaining = self.remaining();
        if count > remaining as u64 {
            return Err(GuardError::HostileCount {
                at,
                count,
                remaining,
            });
        }
        Ok(count as usize)
    }

    fn tagged_fields(&mut self, fields: &[Field]) -> Result<(), GuardError> {
        let at = self.pos;
        let count = u64::from(self.uvarint()?);
        let remaining = self.remaining();
        if count > remaining as u64 {
            return Err(GuardError::HostileCount {
                at,
                count,
                remaining,
            });
        }
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            let at = self.pos;
            let version = self.version;
            let flexible = self.flexible;
            let value = self.take(size)?;
            let known = fields
                .iter()
                .find(|f| f.tag == Some(tag) && f.present(version));
            if let Some(field) = known {
                let mut inner = Walker {
                    buf: value,
                    pos: 0,
                    version,
                    flexible,
                };
                inner.walk(field.ty).map_err(|e| e.shifted(at))?;
                if inner.pos != size {
                    return Err(GuardError::TagSize {
                        at,
                        tag,
                        declared: size,
                        actual: inner.pos,
                    });
                }
            }
        }
        Ok(())
    }

    fn walk_struct(&mut self, fields: &[Field]) -> Result<(), GuardError> {
        let version = self.version;
        for field in fields
            .iter()
            .filter(|f| f.tag.is_none() && f.present(version))
        {
            self.walk(field.ty)?;
        }
        if self.flexible {
            self.tagged_fields(fields)?;
        }
        Ok(())
    }

    fn walk(&mut self, ty: Ty) -> Result<(), GuardError> {
        match ty {
            Ty::I8 | Ty::Bool => self.take(1).map(|_| ()),
            Ty::I16 => self.take(2).map(|_| ()),
            Ty::I32 => self.take(4).map(|_| ()),
            Ty::I64 | Ty::F64 => self.take(8).map(|_| ()),
            Ty::Uuid => self.take(16).map(|_| ()),
            Ty::Str => self.skip_sized(false),
            Ty::Bytes => self.skip_sized(true),
            Ty::Array(fields) => {
                for _ in 0..self.count()? {
                    self.walk_struct(fields)?;
                }
                Ok(())
            }
            Ty::I32Array => {
                let n = self.count()?;
                self.take(n.saturating_mul(4)).map(|_| ())
            }
            Ty::StrArray => {
                for _ in 0..self.count()? {
                    self.skip_sized(false)?;
                }
                Ok(())
            }
            Ty::Struct(fields) => self.walk_struct(fields),
        }
    }
}

impl GuardError {
    /// The same error with positions relative to a value starting at `base`.
    fn shifted(self, base: usize) -> Self {
        match self {
            GuardError::Truncated { at, needed } => GuardError::Truncated {
                at: base + at,
                needed,
            },
            GuardError::HostileCount {
                at,
                count,
                remaining,
            } => GuardError::HostileCount {
                at: base + at,
                count,
                remaining,
            },
            GuardError::TagSize {
                at,
                tag,
                declared,
                actual,
            } => GuardError::TagSize {
                at: base + at,
                tag,
                declared,
                actual,
            },
            GuardError::InvalidLength { at } => GuardError::InvalidLength { at: base + at },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPIC: &[Field] = &[all(Ty::Str), all(Ty::I32Array)];
    const SCHEMA: Schema = Schema {
        flexible_from: 9,
        fields: &[all(Ty::I16), all(Ty::Array(TOPIC))],
    };

    #[test]
    fn hostile_array_count_is_refused_before_any_allocation() {
        let body = [0, 1, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0];
        assert!(matches!(
            check(&SCHEMA, 0, &body),
            Err(GuardError::HostileCount {
                count: 2147483647,
                ..
            })
        ));
    }

    #[test]
    fn compact_hostile_count_is_refused() {
        let body = [0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0];
        assert!(matches!(
            check(&SCHEMA, 9, &body),
            Err(GuardError::HostileCount { .. })
        ));
    }

    #[test]
    fn well_formed_body_passes() {
        let body = [0, 1, 0, 0, 0, 1, 0, 1, b'a', 0, 0, 0, 1, 0, 0, 0, 7];
        assert_eq!(check(&SCHEMA, 0, &body), Ok(body.len()));
    }

    #[test]
    fn truncated_body_is_refused() {
        let body = [0, 1, 0, 0, 0, 1, 0, 5, b'a'];
        assert!(matches!(
            check(&SCHEMA, 0, &body),
            Err(GuardError::Truncated { .. })
        ));
    }

    #[test]
    fn negative_length_other_than_null_is_refused() {
        let body = [0, 1, 0xff, 0xff, 0xff, 0xfe];
        assert!(matches!(
            check(&SCHEMA, 0, &body),
            Err(GuardError::InvalidLength { .. })
        ));
    }

    #[test]
    fn overlong_varint_is_refused() {
        let body = [0, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
        assert!(matches!(
            check(&SCHEMA, 9, &body),
            Err(GuardError::InvalidLength { .. })
        ));
    }
}
