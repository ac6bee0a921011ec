//! SASL/OAUTHBEARER (RFC 7628) messages as Kafka clients send them: a
//! GS2 header, then `key=value` pairs separated by 0x01, one of them
//! `auth=Bearer <token>`. Kafka's extensions (other keys) are accepted and
//! ignored.
//!
//! A refused token is answered, as Kafka does, with an error challenge;
//! the client acknowledges it with a single 0x01 and the exchange then
//! fails.

/// The separator between key-value pairs.
const SEPARATOR: char = '\u{1}';

/// What the server sends back when a token is refused (RFC 7628 §3.2.2).
pub const INVALID_TOKEN_CHALLENGE: &[u8] = br#"{"status":"invalid_token"}"#;

/// What a client sends to acknowledge an error challenge.
pub const ERROR_ACKNOWLEDGEMENT: &[u8] = b"\x01";

/// Why a client's message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthBearerError {
    /// Not a GS2 header and key-value pairs in UTF-8.
    #[error("malformed OAUTHBEARER message: {0}")]
    Malformed(&'static str),
    /// No `auth` pair, or one that is not a bearer token.
    #[error("the OAUTHBEARER message carries no bearer token")]
    NoToken,
}

/// The bearer token of a client's initial response.
pub fn parse_initial_response(message: &[u8]) -> Result<&str, OAuthBearerError> {
    let text =
        std::str::from_utf8(message).map_err(|_| OAuthBearerError::Malformed("not UTF-8"))?;
    // gs2-header: a channel-binding flag ("n" or "y"; "p=" asks for a
    // binding, which Kafka does not offer), an optional authzid, a comma.
    let rest = text
        .strip_prefix("n,")
        .or_else(|| text.strip_prefix("y,"))
        .ok_or(OAuthBearerError::Malformed("no GS2 header"))?;
    let (_authzid, pairs) = rest
        .split_once(',')
        .ok_or(OAuthBearerError::Malformed("unterminated GS2 header"))?;
    let pairs = pairs
        .strip_prefix(SEPARATOR)
        .ok_or(OAuthBearerError::Malformed("no separator after the header"))?;
    let pairs = pairs
        .strip_suffix("\u{1}\u{1}")
        .ok_or(OAuthBearerError::Malformed(
            "not terminated by two separators",
        ))?;
    let mut token = None;
    for pair in pairs.split(SEPARATOR) {
        let (key, value) = pair
            .split_once('=')
            .ok_or(OAuthBearerError::Malformed("a pair without '='"))?;
        if key == "auth" {
            let (scheme, credential) = value.split_once(' ').ok_or(OAuthBearerError::NoToken)?;
            if !scheme.eq_ignore_ascii_case("bearer") || credential.trim().is_empty() {
                return Err(OAuthBearerError::NoToken);
            }
            token = Some(credential.trim());
        }
    }
    token.ok_or(OAuthBearerError::NoToken)
}

/// A client's initial response carrying `token` (for herald's own clients
/// and tests).
pub fn initial_response(token: &str) -> Vec<u8> {
    format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kafka_clients_messages_parse() {
        // Java's client, with an extension.
        let java = b"n,,\x01auth=Bearer abc.def.ghi\x01traceId=123\x01\x01";
        assert_eq!(parse_initial_response(java), Ok("abc.def.ghi"));
        // librdkafka names the authorization id.
        let rdkafka = b"n,a=alice,\x01auth=Bearer abc.def.ghi\x01\x01";
        assert_eq!(parse_initial_response(rdkafka), Ok("abc.def.ghi"));
        assert_eq!(
            parse_initial_response(&initial_response("t.o.k")),
            Ok("t.o.k")
        );
    }

    #[test]
    fn messages_without_a_bearer_token_are_refused() {
        assert_eq!(
            parse_initial_response(b"n,,\x01auth=Basic abc\x01\x01"),
            Err(OAuthBearerError::NoToken)
        );
        assert_eq!(
            parse_initial_response(b"n,,\x01host=x\x01\x01"),
            Err(OAuthBearerError::NoToken)
        );
        assert!(parse_initial_response(b"\x01").is_err());
        assert!(parse_initial_response(b"n,,auth=Bearer x").is_err());
    }

    proptest! {
        #[test]
        fn no_input_panics(message in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_initial_response(&message);
        }
    }
}
