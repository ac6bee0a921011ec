//! Fuzzes request-frame decoding: the size prefix check, the header, the
//! structural guard and `kafka-protocol`'s typed decode. Any panic, abort
//! or allocation above libFuzzer's malloc limit (for example a hostile
//! array count turned into a huge reservation) is a finding.

#![no_main]

use bytes::Bytes;
use herald_kafka::codec::{check_frame_length, decode_request, LENGTH_PREFIX_BYTES};
use libfuzzer_sys::fuzz_target;

/// Frame limit used here; small so that oversized prefixes are exercised.
const MAX_FRAME_BYTES: usize = 1024 * 1024;

fuzz_target!(|data: &[u8]| {
    // As a frame body, exactly as the connection hands it over.
    if let Ok(request) = decode_request(Bytes::copy_from_slice(data)) {
        let _ = (request.version(), request.correlation_id());
    }
    // As a stream starting with a size prefix.
    if let Some(prefix) = data.get(..LENGTH_PREFIX_BYTES) {
        let prefix = [prefix[0], prefix[1], prefix[2], prefix[3]];
        if let Ok(size) = check_frame_length(prefix, MAX_FRAME_BYTES) {
            if let Some(body) = data.get(LENGTH_PREFIX_BYTES..LENGTH_PREFIX_BYTES + size) {
                let _ = decode_request(Bytes::copy_from_slice(body));
            }
        }
    }
});
