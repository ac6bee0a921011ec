//! Message expiry on the push path: a record past its expiry is never
//! pushed, live, on catch-up or after a resume. Expiry is not retention:
//! the record stays in the log, and Kafka consumers still read it.
//!
//! A record's expiry is, first found:
//! - its [`EXPIRES_AT_HEADER`] header: an absolute time, ms since the Unix
//!   epoch;
//! - its [`TTL_HEADER`] header: ms after the record's timestamp;
//! - the topic's `message.ttl.ms`: ms after the record's timestamp.
//!
//! A header that is not a decimal integer is ignored (the next rule
//! applies), so a malformed header never hides a record.

use herald_records::Record;

/// A record header holding the time (ms since the Unix epoch) after which
/// push delivery skips the record.
pub const EXPIRES_AT_HEADER: &[u8] = b"herald.expires-at";
/// A record header holding how many ms after the record's timestamp push
/// delivery skips it.
pub const TTL_HEADER: &[u8] = b"herald.ttl-ms";

/// When `record` expires (ms since the Unix epoch), if it does; the topic's
/// `message.ttl.ms` is `topic_ttl_ms`.
pub(crate) fn expires_at(record: &Record<'_>, topic_ttl_ms: Option<u64>) -> Option<i64> {
    let mut ttl = None;
    if record.header_count() > 0 {
        for (name, value) in record.headers().map_while(Result::ok) {
            let Some(number) = value.and_then(decimal) else {
                continue;
            };
            if name == EXPIRES_AT_HEADER {
                return Some(number);
            }
            if name == TTL_HEADER && ttl.is_none() {
                ttl = Some(number);
            }
        }
    }
    let ttl = ttl.or_else(|| topic_ttl_ms.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)))?;
    Some(record.timestamp.saturating_add(ttl))
}

/// True if `record` has expired at `now_ms`.
pub(crate) fn expired(record: &Record<'_>, topic_ttl_ms: Option<u64>, now_ms: i64) -> bool {
    expires_at(record, topic_ttl_ms).is_some_and(|at| at <= now_ms)
}

/// ASCII decimal digits (an optional leading `-`) as an i64.
fn decimal(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.trim().parse().ok()
}

/// The current time in ms since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_records::{BatchBuilder, RecordBatch, RecordFields};

    /// One stored record with `headers`, timestamped 1,000.
    fn with_headers(headers: &[(&[u8], &[u8])], check: impl FnOnce(&Record<'_>)) {
        let headers: Vec<(&[u8], Option<&[u8]>)> =
            headers.iter().map(|&(k, v)| (k, Some(v))).collect();
        let mut builder = BatchBuilder::new(1_000);
        builder.push(RecordFields {
            timestamp_ms: 1_000,
            key: Some(b"k"),
            value: Some(b"v"),
            headers: &headers,
        });
        let bytes = builder.finish().expect("encodes");
        let batch = RecordBatch::new(&bytes).expect("batch");
        let record = batch
            .records_in_place()
            .expect("uncompressed")
            .next()
            .expect("one record")
            .expect("valid");
        check(&record);
    }

    #[test]
    fn the_record_says_first_then_the_topic() {
        with_headers(&[], |r| {
            assert_eq!(expires_at(r, None), None);
            assert_eq!(expires_at(r, Some(500)), Some(1_500));
            assert!(expired(r, Some(500), 1_500) && !expired(r, Some(500), 1_499));
        });
        with_headers(&[(TTL_HEADER, b"100")], |r| {
            assert_eq!(expires_at(r, Some(500)), Some(1_100));
        });
        with_headers(&[(TTL_HEADER, b"100"), (EXPIRES_AT_HEADER, b"5000")], |r| {
            assert_eq!(expires_at(r, None), Some(5_000));
        });
        // Not a number: as if absent.
        with_headers(&[(EXPIRES_AT_HEADER, b"soon"), (TTL_HEADER, b"x")], |r| {
            assert_eq!(expires_at(r, Some(7)), Some(1_007));
            assert_eq!(expires_at(r, None), None);
        });
    }
}
