//! Resume tokens: a subscription's position, signed by the broker.
//!
//! A token names the topic (by name and id, so a topic deleted and created
//! again under the same name refuses old tokens), the selector, the ack
//! mode and lag limit, and the position of every partition, followed by an
//! HMAC-SHA256 over all of it with a key kept in the data directory, so
//! tokens survive a restart and cannot be forged or edited. Tokens are
//! opaque to clients; their layout may change with their version byte.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use uuid::Uuid;

use crate::subscription::AckMode;

/// The layout written: version 2 carries the subscription's filter and
/// attributes after its selector.
const MAGIC: &[u8; 4] = b"HRT2";
/// Version 1, still read (no filter, no attributes).
const MAGIC_V1: &[u8; 4] = b"HRT1";
const MAC_BYTES: usize = 32;
const KEY_BYTES: usize = 32;
/// The key file, in the push directory of the data directory.
const KEY_FILE: &str = "token.key";

/// What a resume token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePoint {
    /// When it was issued (ms since the Unix epoch).
    pub issued_ms: i64,
    /// The topic's name.
    pub topic: String,
    /// The topic's id when the token was issued.
    pub topic_id: Uuid,
    /// The client's id for the subscription.
    pub subscription_id: u64,
    /// The selector as the client wrote it.
    pub selector: Vec<u8>,
    /// Ack mode.
    pub ack_mode: AckMode,
    /// Lag limit (0: none).
    pub max_lag: u64,
    /// The filter as the client wrote it (`None`: every record).
    pub filter: Option<String>,
    /// Whether skipped expired records are told as gaps.
    pub report_expired: bool,
    /// The subscriber's attributes.
    pub attributes: Vec<Vec<u8>>,
    /// (partition, offset to continue from).
    pub positions: Vec<(u32, u64)>,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Longer than the broker accepts.
    #[error("the resume token is {len} bytes; at most {max} are accepted")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not a token this broker issued, or altered since.
    #[error("the resume token was not issued by this broker or was altered")]
    Forged,
    /// Signed, but not readable (a token of another version).
    #[error("the resume token is malformed")]
    Malformed,
    /// Older than the token lifetime.
    #[error("the resume token expired")]
    Expired,
}

/// The key tokens are signed with.
#[derive(Clone)]
pub struct TokenKeys {
    key: [u8; KEY_BYTES],
    max_bytes: usize,
    lifetime: Duration,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKeys(..)")
    }
}

impl TokenKeys {
    /// Reads the key from `dir`, or makes one (random, owner-only) the
    /// first time.
    pub fn load_or_create(
        dir: &Path,
        max_bytes: usize,
        lifetime: Duration,
    ) -> std::io::Result<Self> {
        let path = dir.join(KEY_FILE);
        let key = match std::fs::read(&path) {
            Ok(bytes) => <[u8; KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} is not a {KEY_BYTES}-byte key", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                let mut key = [0u8; KEY_BYTES];
                getrandom::fill(&mut key).map_err(|e| {
                    std::io::Error::other(format!("no random bytes for the token key: {e}"))
                })?;
                write_private(&path, &key)?;
                key
            }
            Err(e) => return Err(e),
        };
        Ok(Self {
            key,
            max_bytes,
            lifetime,
        })
    }

    /// Keys for tests: a fixed key.
    pub fn from_key(key: [u8; KEY_BYTES], max_bytes: usize, lifetime: Duration) -> Self {
        Self {
            key,
            max_bytes,
            lifetime,
        }
    }

    fn mac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes keys of any length")
    }

    /// The signed token for `point`.
    pub fn sign(&self, point: &ResumePoint) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            64 + point.topic.len() + point.selector.len() + 12 * point.positions.len(),
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&point.issued_ms.to_be_bytes());
        out.extend_from_slice(point.topic_id.as_bytes());
        out.extend_from_slice(&point.subscription_id.to_be_bytes());
        out.push(match point.ack_mode {
            AckMode::None => 0,
            AckMode::Cumulative => 1,
        });
        out.extend_from_slice(&point.max_lag.to_be_bytes());
        put_bytes(&mut out, point.topic.as_bytes());
        put_bytes(&mut out, &point.selector);
        // An empty filter is no filter: the empty text is not a valid one.
        put_bytes(&mut out, point.filter.as_deref().unwrap_or("").as_bytes());
        out.push(u8::from(point.report_expired));
        out.extend_from_slice(&(point.attributes.len() as u16).to_be_bytes());
        for attribute in &point.attributes {
            put_bytes(&mut out, attribute);
        }
        out.extend_from_slice(&(point.positions.len() as u32).to_be_bytes());
        for &(partition, offset) in &point.positions {
            out.extend_from_slice(&partition.to_be_bytes());
            out.extend_from_slice(&offset.to_be_bytes());
        }
        let mut mac = self.mac();
        mac.update(&out);
        out.extend_from_slice(&mac.finalize().into_bytes());
        out
    }

    /// Checks the signature and reads the token; refuses one that is too
    /// long, forged, altered or expired.
    pub fn verify(&self, token: &[u8], now: SystemTime) -> Result<ResumePoint, TokenError> {
        if token.len() > self.max_bytes {
            return Err(TokenError::TooLong {
                len: token.len(),
                max: self.max_bytes,
            });
        }
        if token.len() < MAGIC.len() + MAC_BYTES {
            return Err(TokenError::Forged);
        }
        let (body, tag) = token.split_at(token.len() - MAC_BYTES);
        let mut mac = self.mac();
        mac.update(body);
        mac.verify_slice(tag).map_err(|_| TokenError::Forged)?;
        let point = read_point(body).ok_or(TokenError::Malformed)?;
        let now_ms = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        if now_ms.saturating_sub(point.issued_ms) > self.lifetime.as_millis() as i64 {
            return Err(TokenError::Expired);
        }
        Ok(point)
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // Topic names and selectors are far below 64 KiB (checked on entry).
    out.extend_from_slice(&(bytes.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(&bytes[..bytes.len().min(u16::MAX as usize)]);
}

/// Reads fields off the front of a token body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = u16::from_be_bytes(self.array()?);
        self.take(len as usize)
    }
}

impl ResumePoint {
    /// Reads a token's body (the token without its signature). Only for a
    /// body whose signature was checked ([`TokenKeys::verify`] does both),
    /// or for tests and fuzzing of the layout; `None` if it is not one.
    pub fn decode_body(body: &[u8]) -> Option<ResumePoint> {
        read_point(body)
    }
}

fn read_point(body: &[u8]) -> Option<ResumePoint> {
    let mut r = Reader(body);
    let version = match r.take(MAGIC.len())? {
        m if m == MAGIC => 2,
        m if m == MAGIC_V1 => 1,
        _ => return None,
    };
    let issued_ms = i64::from_be_bytes(r.array()?);
    let topic_id = Uuid::from_bytes(r.array()?);
    let subscription_id = u64::from_be_bytes(r.array()?);
    let ack_mode = match r.array::<1>()?[0] {
        0 => AckMode::None,
        1 => AckMode::Cumulative,
        _ => return None,
    };
    let max_lag = u64::from_be_bytes(r.array()?);
    let topic = String::from_utf8(r.bytes()?.to_vec()).ok()?;
    let selector = r.bytes()?.to_vec();
    let (filter, report_expired, attributes) = if version >= 2 {
        let filter = String::from_utf8(r.bytes()?.to_vec()).ok()?;
        let report_expired = match r.array::<1>()?[0] {
            0 => false,
            1 => true,
            _ => return None,
        };
        let count = u16::from_be_bytes(r.array()?);
        let attributes = (0..count)
            .map(|_| r.bytes().map(<[u8]>::to_vec))
            .collect::<Option<Vec<_>>>()?;
        (
            (!filter.is_empty()).then_some(filter),
            report_expired,
            attributes,
        )
    } else {
        (None, false, Vec::new())
    };
    let count = u32::from_be_bytes(r.array()?) as usize;
    if r.0.len() != count.checked_mul(12)? {
        return None;
    }
    let mut positions = Vec::with_capacity(count);
    for _ in 0..count {
        positions.push((
            u32::from_be_bytes(r.array()?),
            u64::from_be_bytes(r.array()?),
        ));
    }
    Some(ResumePoint {
        issued_ms,
        topic,
        topic_id,
        subscription_id,
        selector,
        ack_mode,
        max_lag,
        filter,
        report_expired,
        attributes,
        positions,
    })
}

fn write_private(path: &Path, key: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(key)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> TokenKeys {
        TokenKeys::from_key([7; 32], 4096, Duration::from_secs(3600))
    }

    fn point() -> ResumePoint {
        ResumePoint {
            issued_ms: 1_700_000_000_000,
            topic: "orders".into(),
            topic_id: Uuid::from_u128(42),
            subscription_id: 9,
            selector: b"eu.*.paid".to_vec(),
            ack_mode: AckMode::Cumulative,
            max_lag: 0,
            filter: Some(r#"header.region == "eu""#.into()),
            report_expired: true,
            attributes: vec![b"gold".to_vec(), b"eu".to_vec()],
            positions: vec![(0, 17), (1, 0), (2, 99)],
        }
    }

    fn at(ms: i64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    }

    #[test]
    fn a_signed_token_reads_back_to_the_same_point() {
        let token = keys().sign(&point());
        assert_eq!(keys().verify(&token, at(1_700_000_000_500)), Ok(point()));
    }

    #[test]
    fn a_version_1_token_still_reads_without_filter_or_attributes() {
        // Version 1's layout: version 2's without the filter and the
        // attribute count, as brokers before selective delivery signed it.
        let keys = keys();
        let v2 = {
            let mut p = point();
            p.filter = None;
            p.report_expired = false;
            p.attributes.clear();
            keys.sign(&p)
        };
        let body = &v2[..v2.len() - MAC_BYTES];
        let selector_end = 4 + 8 + 16 + 8 + 1 + 8 + (2 + 6) + (2 + 9);
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&body[4..selector_end]);
        // Skip the empty filter (2 bytes), the expiry flag (1) and the
        // attribute count (2).
        v1.extend_from_slice(&body[selector_end + 5..]);
        let mut mac = keys.mac();
        mac.update(&v1);
        v1.extend_from_slice(&mac.finalize().into_bytes());
        let mut expected = point();
        expected.filter = None;
        expected.report_expired = false;
        expected.attributes.clear();
        assert_eq!(keys.verify(&v1, at(1_700_000_000_500)), Ok(expected));
    }

    #[test]
    fn any_altered_byte_or_another_key_is_refused_as_forged() {
        let token = keys().sign(&point());
        for i in 0..token.len() {
            let mut altered = token.clone();
            altered[i] ^= 1;
            assert_eq!(
                keys().verify(&altered, at(1_700_000_000_500)),
                Err(TokenError::Forged),
                "byte {i}"
            );
        }
        let other = TokenKeys::from_key([8; 32], 4096, Duration::from_secs(3600));
        assert_eq!(
            other.verify(&token, at(1_700_000_000_500)),
            Err(TokenError::Forged)
        );
        assert_eq!(keys().verify(b"", at(0)), Err(TokenError::Forged));
        assert_eq!(keys().verify(&token[..10], at(0)), Err(TokenError::Forged));
    }

    #[test]
    fn old_and_oversized_tokens_are_refused() {
        let token = keys().sign(&point());
        assert_eq!(
            keys().verify(&token, at(1_700_000_000_000 + 3_600_001)),
            Err(TokenError::Expired)
        );
        let small = TokenKeys::from_key([7; 32], 16, Duration::from_secs(3600));
        assert!(matches!(
            small.verify(&token, at(0)),
            Err(TokenError::TooLong { .. })
        ));
    }

    #[test]
    fn the_key_survives_a_restart_and_is_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first =
            TokenKeys::load_or_create(dir.path(), 4096, Duration::from_secs(60)).expect("create");
        let again =
            TokenKeys::load_or_create(dir.path(), 4096, Duration::from_secs(60)).expect("load");
        assert_eq!(first.key, again.key);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
