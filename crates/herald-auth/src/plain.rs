//! SASL/PLAIN (RFC 4616): the client sends its name and password in one
//! message. herald checks the password against the user's SCRAM
//! credential (it keeps no password), so one `herald user` command or one
//! `kafka-configs.sh --add-config SCRAM-SHA-512=...` serves both. PLAIN
//! sends the password itself: use it over TLS.

use crate::scram::{ScramCredential, ScramMechanism};

/// Why a PLAIN message was refused. The client is told only that
/// authentication failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    /// Not `[authzid] NUL authcid NUL passwd` in UTF-8.
    #[error("malformed PLAIN message")]
    Malformed,
    /// An authorization id other than the user (Kafka refuses these).
    #[error("authorization id {authzid:?} is not the user {user:?}")]
    Authzid {
        /// The user name.
        user: String,
        /// The authorization id asked for.
        authzid: String,
    },
    /// A wrong password, or no such user.
    #[error("invalid credentials")]
    InvalidCredentials,
}

/// The parts of a PLAIN message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainMessage {
    /// The authorization id, empty when not given.
    pub authzid: String,
    /// The user name.
    pub user: String,
    /// The password.
    pub password: String,
}

/// Parses a PLAIN message.
pub fn parse(message: &[u8]) -> Result<PlainMessage, PlainError> {
    let text = std::str::from_utf8(message).map_err(|_| PlainError::Malformed)?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(PlainError::Malformed);
    };
    if user.is_empty() || password.is_empty() {
        return Err(PlainError::Malformed);
    }
    Ok(PlainMessage {
        authzid: authzid.to_owned(),
        user: user.to_owned(),
        password: password.to_owned(),
    })
}

/// Checks a PLAIN message. `lookup` finds the user's credential (of
/// either mechanism); an unknown user's password is checked against a
/// decoy made with `secret`, at the same cost, and fails.
pub fn authenticate(
    message: &[u8],
    lookup: impl FnOnce(&str) -> Option<(ScramMechanism, ScramCredential)>,
    secret: &[u8],
) -> Result<String, PlainError> {
    let plain = parse(message)?;
    if !plain.authzid.is_empty() && plain.authzid != plain.user {
        return Err(PlainError::Authzid {
            user: plain.user,
            authzid: plain.authzid,
        });
    }
    let (mechanism, credential) = lookup(&plain.user).unwrap_or_else(|| {
        let mechanism = ScramMechanism::Sha512;
        (
            mechanism,
            ScramCredential::decoy(mechanism, &plain.user, secret),
        )
    });
    if credential.verify_password(mechanism, plain.password.as_bytes()) {
        Ok(plain.user)
    } else {
        Err(PlainError::InvalidCredentials)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SECRET: &[u8] = b"secret";

    fn alice() -> Option<(ScramMechanism, ScramCredential)> {
        let m = ScramMechanism::Sha256;
        Some((
            m,
            ScramCredential::from_password(m, "wonderland", 4096).expect("made"),
        ))
    }

    #[test]
    fn the_right_password_authenticates_and_others_fail_alike() {
        let lookup = |user: &str| if user == "alice" { alice() } else { None };
        assert_eq!(
            authenticate(b"\0alice\0wonderland", lookup, SECRET).as_deref(),
            Ok("alice")
        );
        assert_eq!(
            authenticate(b"alice\0alice\0wonderland", lookup, SECRET).as_deref(),
            Ok("alice")
        );
        assert_eq!(
            authenticate(b"\0alice\0looking-glass", lookup, SECRET),
            Err(PlainError::InvalidCredentials)
        );
        assert_eq!(
            authenticate(b"\0bob\0wonderland", lookup, SECRET),
            Err(PlainError::InvalidCredentials)
        );
        assert!(matches!(
            authenticate(b"bob\0alice\0wonderland", lookup, SECRET),
            Err(PlainError::Authzid { .. })
        ));
    }

    #[test]
    fn malformed_messages_are_refused() {
        for bad in [
            &b""[..],
            b"alice",
            b"\0alice",
            b"\0\0pw",
            b"\0alice\0",
            b"\0alice\0pw\0more",
            b"\0al\xffice\0pw",
        ] {
            assert_eq!(parse(bad), Err(PlainError::Malformed), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn no_input_makes_the_parser_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse(&bytes);
        }
    }
}

/// The user name and password of an HTTP `Authorization: Basic` value's
/// base64 `user:password` (split at the first colon); `None` if it is not
/// that. HTTP front ends check them as a PLAIN login.
pub fn http_basic(encoded: &str) -> Option<(String, String)> {
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod http_basic_tests {
    use super::http_basic;

    #[test]
    fn basic_credentials_split_at_the_first_colon() {
        assert_eq!(
            http_basic("YWxpY2U6cGFzczp3b3Jk"),
            Some(("alice".into(), "pass:word".into()))
        );
        assert_eq!(http_basic("!!"), None);
        assert_eq!(http_basic("bm9jb2xvbg=="), None, "no colon");
    }
}
