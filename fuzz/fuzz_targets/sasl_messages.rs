//! SASL messages from a client before it is authenticated: whatever the
//! bytes, parsing a SCRAM or PLAIN message never panics, and a SCRAM
//! exchange fed them as the client's first and final messages (split at
//! the first NUL) never authenticates anyone.
#![no_main]

use herald_auth::{plain, ScramCredential, ScramMechanism, ScramServer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = herald_auth::scram_messages::parse_client_first(data);
    let _ = herald_auth::scram_messages::parse_client_final(data);
    let _ = plain::parse(data);
    let (first, last) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &data[..0]),
    };
    let credential = ScramCredential {
        salt: vec![1; 16],
        stored_key: vec![2; 32],
        server_key: vec![3; 32],
        iterations: 4096,
    };
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    if server.client_first(first, |_| Some(credential.clone()), b"secret").is_ok() {
        assert!(
            server.client_final(last).is_err(),
            "a made-up final message authenticated"
        );
    }
});
