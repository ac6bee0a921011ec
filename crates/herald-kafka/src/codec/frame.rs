//! The 4-byte size prefix of every Kafka frame, checked against the limit
//! before any buffer for the frame is reserved.

/// Bytes in the size prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// Smallest request frame: api key, api version and correlation id.
pub const REQUEST_BYTES_MIN: usize = 8;

/// Why a size prefix is refused. The connection is closed: after a bad
/// prefix the stream cannot be resynchronised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Larger than the configured maximum.
    #[error("frame of {size} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Declared size.
        size: i64,
        /// The limit.
        max: usize,
    },
    /// Negative or too small to hold a request header.
    #[error("frame size {size} is invalid")]
    Invalid {
        /// Declared size.
        size: i64,
    },
}

/// Validates a frame's size prefix; returns the body length to read.
pub fn check_frame_length(
    prefix: [u8; LENGTH_PREFIX_BYTES],
    max: usize,
) -> Result<usize, FrameError> {
    let size = i32::from_be_bytes(prefix);
    if size < REQUEST_BYTES_MIN as i32 {
        return Err(FrameError::Invalid { size: size.into() });
    }
    let size = size as usize;
    if size > max {
        return Err(FrameError::TooLarge {
            size: size as i64,
            max,
        });
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_over_limit_is_refused() {
        assert_eq!(
            check_frame_length(1025i32.to_be_bytes(), 1024),
            Err(FrameError::TooLarge {
                size: 1025,
                max: 1024
            })
        );
        assert_eq!(check_frame_length(1024i32.to_be_bytes(), 1024), Ok(1024));
    }

    #[test]
    fn negative_or_tiny_size_is_refused() {
        assert!(matches!(
            check_frame_length((-1i32).to_be_bytes(), 1024),
            Err(FrameError::Invalid { .. })
        ));
        assert!(matches!(
            check_frame_length(3i32.to_be_bytes(), 1024),
            Err(FrameError::Invalid { .. })
        ));
    }
}
