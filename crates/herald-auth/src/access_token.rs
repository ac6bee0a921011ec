//! Access tokens the broker signs: what a browser (which cannot run SCRAM
//! over an EventSource) and a Kafka client speaking OAUTHBEARER present
//! instead of a password.
//!
//! A token is a JSON Web Token (RFC 7519) signed with HMAC-SHA256, so the
//! OAuth clients Kafka clients embed (librdkafka's and Java's, which read
//! `sub` and `exp` before they use a token) accept it as it is. The key is
//! derived from the broker's security secret, kept in its metadata: tokens
//! survive a restart, and only this broker can make or check them.
//!
//! Verification accepts exactly the header herald writes. A token naming
//! another algorithm (`none`, or an asymmetric one a forger hopes to have
//! checked with the HMAC key) is refused before its signature is looked at.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The issuer every token names.
pub const ISSUER: &str = "herald";
/// The one header herald writes and accepts (base64url of
/// `{"alg":"HS256","typ":"JWT"}`).
const HEADER: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";
/// What the key derivation mixes into the secret, so the token key is not
/// the secret used for decoy credentials.
const KEY_LABEL: &[u8] = b"herald access token key v1";
/// Seconds a token may be dated ahead of the broker's clock (another
/// broker's clock, once there are several).
const CLOCK_SKEW_SECS: i64 = 60;
/// Longest token accepted, in bytes: far above any herald writes.
const MAX_TOKEN_BYTES: usize = 4096;

/// What a token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenClaims {
    /// Who issued it: always [`ISSUER`].
    pub iss: String,
    /// The user it stands for (the principal is `User:<sub>`).
    pub sub: String,
    /// When it was issued (seconds since the Unix epoch).
    pub iat: i64,
    /// When it expires (seconds since the Unix epoch).
    pub exp: i64,
}

impl TokenClaims {
    /// The principal the token stands for.
    pub fn principal(&self) -> String {
        format!("User:{}", self.sub)
    }
}

/// Why a token was refused. Clients are told only that it is invalid;
/// the kind is for the broker's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts, a header other than herald's, or claims
    /// that are not herald's JSON.
    #[error("malformed access token: {0}")]
    Malformed(&'static str),
    /// The signature does not match: forged, altered, or from another
    /// broker.
    #[error("the access token's signature does not match")]
    Signature,
    /// Past its expiry.
    #[error("the access token expired at {0} (seconds since the epoch)")]
    Expired(i64),
    /// Issued in the future, beyond the allowed clock skew.
    #[error("the access token is dated in the future ({0})")]
    NotYetValid(i64),
    /// A user name a token may not carry.
    #[error("a token's subject must be 1 to 255 bytes without control characters")]
    Subject,
}

/// The key that signs and checks tokens.
#[derive(Clone)]
pub struct TokenKey([u8; 32]);

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// The key derived from the broker's security secret.
    pub fn from_secret(secret: &[u8]) -> Self {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
            .expect("HMAC takes a key of any length");
        mac.update(KEY_LABEL);
        let mut key = [0u8; 32];
        key.copy_from_slice(&mac.finalize().into_bytes());
        Self(key)
    }

    fn mac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes a 32-byte key")
    }

    /// A token for `user`, issued at `now_secs`, valid for `lifetime_secs`.
    pub fn issue(
        &self,
        user: &str,
        now_secs: i64,
        lifetime_secs: i64,
    ) -> Result<String, TokenError> {
        check_subject(user)?;
        let claims = TokenClaims {
            iss: ISSUER.to_owned(),
            sub: user.to_owned(),
            iat: now_secs,
            exp: now_secs.saturating_add(lifetime_secs),
        };
        let payload = serde_json::to_vec(&claims).map_err(|_| TokenError::Subject)?;
        let signing_input = format!("{HEADER}.{}", BASE64URL.encode(payload));
        let mut mac = self.mac();
        mac.update(signing_input.as_bytes());
        let signature = BASE64URL.encode(mac.finalize().into_bytes());
        Ok(format!("{signing_input}.{signature}"))
    }

    /// The claims of `token` if this key signed it and it is valid at
    /// `now_secs`.
    pub fn verify(&self, token: &str, now_secs: i64) -> Result<TokenClaims, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Malformed("too long"));
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed("not three dot-separated parts"));
        };
        if header != HEADER {
            return Err(TokenError::Malformed("not a herald token header"));
        }
        let signature = BASE64URL
            .decode(signature)
            .map_err(|_| TokenError::Malformed("signature is not base64url"))?;
        let mut mac = self.mac();
        mac.update(header.as_bytes());
        mac.update(b".");
        mac.update(payload.as_bytes());
        // Constant time: a forger learns nothing from how long a refusal took.
        mac.verify_slice(&signature)
            .map_err(|_| TokenError::Signature)?;
        let payload = BASE64URL
            .decode(payload)
            .map_err(|_| TokenError::Malformed("claims are not base64url"))?;
        let claims: TokenClaims = serde_json::from_slice(&payload)
            .map_err(|_| TokenError::Malformed("claims are not herald's"))?;
        if claims.iss != ISSUER {
            return Err(TokenError::Malformed("another issuer"));
        }
        check_subject(&claims.sub)?;
        if claims.exp <= now_secs {
            return Err(TokenError::Expired(claims.exp));
        }
        if claims.iat > now_secs.saturating_add(CLOCK_SKEW_SECS) {
            return Err(TokenError::NotYetValid(claims.iat));
        }
        Ok(claims)
    }
}

fn check_subject(user: &str) -> Result<(), TokenError> {
    if user.is_empty() || user.len() > 255 || user.chars().any(char::is_control) {
        return Err(TokenError::Subject);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: i64 = 1_800_000_000;

    fn key() -> TokenKey {
        TokenKey::from_secret(b"broker secret")
    }

    #[test]
    fn a_token_verifies_until_it_expires() {
        let token = key().issue("alice", NOW, 3600).expect("issued");
        let claims = key().verify(&token, NOW + 10).expect("valid");
        assert_eq!(claims.sub, "alice");
        assert_eq!(claims.principal(), "User:alice");
        assert_eq!(claims.exp, NOW + 3600);
        assert_eq!(
            key().verify(&token, NOW + 3600),
            Err(TokenError::Expired(NOW + 3600))
        );
    }

    #[test]
    fn another_brokers_token_is_refused() {
        let theirs = TokenKey::from_secret(b"another secret")
            .issue("alice", NOW, 3600)
            .expect("issued");
        assert_eq!(key().verify(&theirs, NOW), Err(TokenError::Signature));
    }

    #[test]
    fn an_edited_subject_breaks_the_signature() {
        let token = key().issue("alice", NOW, 3600).expect("issued");
        let parts: Vec<&str> = token.split('.').collect();
        let forged_claims = BASE64URL
            .encode(br#"{"iss":"herald","sub":"admin","iat":1800000000,"exp":1800003600}"#);
        let forged = format!("{}.{forged_claims}.{}", parts[0], parts[2]);
        assert_eq!(key().verify(&forged, NOW), Err(TokenError::Signature));
    }

    #[test]
    fn an_unsigned_token_is_refused_before_its_claims_are_read() {
        let header = BASE64URL.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let claims = BASE64URL
            .encode(br#"{"iss":"herald","sub":"admin","iat":1800000000,"exp":1800003600}"#);
        assert_eq!(
            key().verify(&format!("{header}.{claims}."), NOW),
            Err(TokenError::Malformed("not a herald token header"))
        );
    }

    #[test]
    fn a_token_from_the_future_is_refused() {
        let token = key().issue("alice", NOW + 600, 3600).expect("issued");
        assert_eq!(
            key().verify(&token, NOW),
            Err(TokenError::NotYetValid(NOW + 600))
        );
    }

    #[test]
    fn the_header_is_the_one_jwt_readers_expect() {
        let header = BASE64URL.decode(HEADER).expect("base64url");
        let header: serde_json::Value = serde_json::from_slice(&header).expect("json");
        assert_eq!(header["alg"], "HS256");
        assert_eq!(header["typ"], "JWT");
    }

    proptest! {
        #[test]
        fn no_garbage_verifies(token in "[A-Za-z0-9_.-]{0,300}") {
            prop_assert!(key().verify(&token, NOW).is_err());
        }

        #[test]
        fn any_single_character_change_is_refused(at in 0usize..200, c in "[A-Za-z0-9_-]") {
            let token = key().issue("alice", NOW, 3600).expect("issued");
            let at = at % token.len();
            let mut edited = token.clone();
            edited.replace_range(at..=at, &c);
            prop_assume!(edited != token);
            prop_assert!(key().verify(&edited, NOW).is_err());
        }
    }
}
