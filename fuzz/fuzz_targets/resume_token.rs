//! Resume tokens from a client: verifying arbitrary bytes never panics and
//! refuses them (the signature cannot match); and any body the layout
//! reads, once signed, verifies back to the same point.
#![no_main]

use std::time::{Duration, SystemTime};

use herald_push::{ResumePoint, TokenKeys};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let keys = TokenKeys::from_key([42; 32], 1 << 20, Duration::from_secs(1 << 40));
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    assert!(keys.verify(data, now).is_err(), "an unsigned input verified");
    if let Some(point) = ResumePoint::decode_body(data) {
        let token = keys.sign(&point);
        assert_eq!(ResumePoint::decode_body(&token[..token.len() - 32]).as_ref(), Some(&point));
        if let Ok(issued) = u64::try_from(point.issued_ms) {
            let then = SystemTime::UNIX_EPOCH + Duration::from_millis(issued);
            assert_eq!(keys.verify(&token, then).ok(), Some(point));
        }
    }
});
