//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks
//! them: the credential herald stores (salt, stored key, server key,
//! iterations: never the password), and the server's side of one exchange
//! as a state machine over the client's two messages.
//!
//! An unknown user goes through the same steps as a known one, against a
//! credential made up from the name and a server secret (the same salt
//! every time, as a real user's would be), and fails where a wrong
//! password fails: at the proof. A client learns nothing about which
//! names exist.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::scram_messages::{parse_client_final, parse_client_first, MessageError};

/// Fewest iterations a credential may have (Kafka's bound).
pub const ITERATIONS_MIN: u32 = 4096;
/// Most iterations a credential may have (Kafka's bound).
pub const ITERATIONS_MAX: u32 = 16384;
/// Most iterations herald's client computes for a server (librdkafka's
/// bound): more would let a server make the client burn CPU.
pub const CLIENT_ITERATIONS_MAX: u32 = 1_000_000;
/// Bytes of a salt herald makes.
pub const SALT_BYTES: usize = 24;
/// Bytes of randomness in the server's part of a nonce.
const NONCE_BYTES: usize = 24;

/// A SCRAM hash function, with Kafka's mechanism names and type codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256`.
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    /// `SCRAM-SHA-512`.
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    /// Both, in the order Kafka numbers them.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism a SASL name names, if SCRAM.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's `ScramMechanism` type code (DescribeUserScramCredentials,
    /// AlterUserScramCredentials).
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of a Kafka type code.
    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    /// Bytes of the hash's output, which is also the salted password's
    /// length.
    pub fn output_bytes(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    fn hmac(self, key: &[u8], data: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + KeyInit>(key: &[u8], data: &[&[u8]]) -> Vec<u8> {
            let mut mac =
                <M as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
            for part in data {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            ScramMechanism::Sha256 => run::<Hmac<Sha256>>(key, data),
            ScramMechanism::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, iterations)`: PBKDF2 with this HMAC. This is
    /// what a Kafka client sends to AlterUserScramCredentials, so the
    /// broker never sees the password itself.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.output_bytes()];
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
            }
        }
        out
    }

    fn client_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, &[b"Client Key"])
    }
}

impl std::fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What herald keeps of one user's password for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    /// The salt, as made when the password was set.
    #[serde(with = "base64_bytes")]
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`: checks a client's proof.
    #[serde(with = "base64_bytes")]
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`: proves the server to the
    /// client.
    #[serde(with = "base64_bytes")]
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
}

/// Why a credential could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// Iterations outside Kafka's bounds.
    #[error("iterations must be between {ITERATIONS_MIN} and {ITERATIONS_MAX}, not {0}")]
    Iterations(i64),
    /// A salted password of the wrong length for the mechanism.
    #[error("a {0} salted password has {1} bytes, not {2}")]
    SaltedPasswordLength(ScramMechanism, usize, usize),
    /// An empty salt.
    #[error("the salt is empty")]
    EmptySalt,
    /// The system's random source failed.
    #[error("no randomness for a salt: {0}")]
    Random(String),
}

impl ScramCredential {
    /// The credential of `salted_password` (`Hi(password, salt,
    /// iterations)`), as AlterUserScramCredentials carries it.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i64,
    ) -> Result<Self, CredentialError> {
        let iterations = u32::try_from(iterations)
            .ok()
            .filter(|i| (ITERATIONS_MIN..=ITERATIONS_MAX).contains(i))
            .ok_or(CredentialError::Iterations(iterations))?;
        if salt.is_empty() {
            return Err(CredentialError::EmptySalt);
        }
        if salted_password.len() != mechanism.output_bytes() {
            return Err(CredentialError::SaltedPasswordLength(
                mechanism,
                salted_password.len(),
                mechanism.output_bytes(),
            ));
        }
        let client_key = mechanism.client_key(salted_password);
        Ok(Self {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, &[b"Server Key"]),
            iterations,
        })
    }

    /// The credential of `password` with a fresh random salt (for the
    /// bootstrap administrator of the config file and the CLI).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> Result<Self, CredentialError> {
        let salt = random_salt()?;
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        Self::from_salted_password(mechanism, &salt, &salted, i64::from(iterations))
    }

    /// True if `password` is this credential's (SASL/PLAIN checks a
    /// password this way). Costs the credential's iterations of PBKDF2.
    pub fn verify_password(&self, mechanism: ScramMechanism, password: &[u8]) -> bool {
        let salted = mechanism.salted_password(password, &self.salt, self.iterations);
        let stored = mechanism.hash(&mechanism.client_key(&salted));
        bool::from(stored.ct_eq(&self.stored_key))
    }

    /// A credential for a user that does not exist, the same for the same
    /// name and secret: its salt is derived, its keys match no password.
    pub(crate) fn decoy(mechanism: ScramMechanism, user: &str, secret: &[u8]) -> Self {
        let derived = mechanism.hmac(secret, &[b"decoy salt ", user.as_bytes()]);
        let keys = mechanism.hmac(secret, &[b"decoy keys ", user.as_bytes()]);
        Self {
            salt: derived[..SALT_BYTES.min(derived.len())].to_vec(),
            stored_key: mechanism.hash(&keys),
            server_key: keys,
            iterations: ITERATIONS_MIN,
        }
    }
}

/// A fresh random salt, as a client setting a password makes one.
pub fn random_salt() -> Result<[u8; SALT_BYTES], CredentialError> {
    let mut salt = [0u8; SALT_BYTES];
    getrandom::fill(&mut salt).map_err(|e| CredentialError::Random(e.to_string()))?;
    Ok(salt)
}

mod base64_bytes {
    use super::BASE64;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&BASE64.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        BASE64.decode(text).map_err(serde::de::Error::custom)
    }
}

/// Why an exchange failed. Every failure is told to the client as the
/// same authentication failure; the kind is for the broker's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// A malformed message.
    #[error("malformed SCRAM message: {0}")]
    Malformed(#[from] MessageError),
    /// The proof does not match: a wrong password, or no such user.
    #[error("invalid credentials")]
    InvalidCredentials,
    /// The final message's nonce is not the one the server sent.
    #[error("the nonce does not match")]
    Nonce,
    /// The channel binding does not repeat the first message's header.
    #[error("the channel binding does not match")]
    ChannelBinding,
    /// An authorization id other than the user (Kafka refuses these).
    #[error("authorization id {authzid:?} is not the user {user:?}")]
    Authzid {
        /// The user name.
        user: String,
        /// The authorization id asked for.
        authzid: String,
    },
    /// Kafka's delegation-token extension, which herald does not issue.
    #[error("delegation tokens are not supported")]
    TokenAuth,
    /// A message out of turn.
    #[error("no SCRAM message expected now")]
    OutOfTurn,
    /// The system's random source failed.
    #[error("no randomness for a nonce: {0}")]
    Random(String),
    /// A server asked a client for an iteration count out of bounds.
    #[error(
        "the server asked for {0} iterations, outside {ITERATIONS_MIN} to {CLIENT_ITERATIONS_MAX}"
    )]
    Iterations(u32),
}

/// Where an exchange is.
#[derive(Debug)]
enum Stage {
    /// Waiting for the client's first message.
    First,
    /// Waiting for the client's final message.
    Final {
        gs2_header: String,
        auth_message_head: String,
        client_nonce: String,
        nonce: String,
        user: String,
        credential: ScramCredential,
    },
    /// Finished, well or not.
    Done,
}

/// The server's side of one SCRAM exchange. Feed it the client's first
/// message, send back what it answers, feed it the final message, send
/// back that answer: the user is then authenticated.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    stage: Stage,
}

impl ScramServer {
    /// An exchange with `mechanism`.
    pub fn new(mechanism: ScramMechanism) -> Self {
        Self {
            mechanism,
            stage: Stage::First,
        }
    }

    /// The mechanism.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// The user the client's first message named, once it has.
    pub fn user(&self) -> Option<&str> {
        match &self.stage {
            Stage::Final { user, .. } => Some(user),
            _ => None,
        }
    }

    /// True while the client's first message is awaited.
    pub fn awaits_first(&self) -> bool {
        matches!(self.stage, Stage::First)
    }

    /// Takes the client's first message and answers the server's first.
    /// `lookup` finds the user's credential for this mechanism; a user it
    /// does not know meets a decoy made with `secret` and fails at the
    /// proof.
    pub fn client_first(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        secret: &[u8],
    ) -> Result<Vec<u8>, ScramError> {
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).map_err(|e| ScramError::Random(e.to_string()))?;
        self.client_first_with_nonce(message, lookup, secret, &BASE64.encode(nonce))
    }

    /// As [`Self::client_first`] with the server's part of the nonce
    /// given: for tests against published exchanges.
    pub fn client_first_with_nonce(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        secret: &[u8],
        server_nonce: &str,
    ) -> Result<Vec<u8>, ScramError> {
        if !matches!(self.stage, Stage::First) {
            return Err(ScramError::OutOfTurn);
        }
        self.stage = Stage::Done;
        let first = parse_client_first(message)?;
        if first.extensions.iter().any(|(k, _)| k == "tokenauth") {
            return Err(ScramError::TokenAuth);
        }
        if let Some(authzid) = first.authzid.filter(|a| *a != first.user) {
            return Err(ScramError::Authzid {
                user: first.user,
                authzid,
            });
        }
        let credential = lookup(&first.user)
            .unwrap_or_else(|| ScramCredential::decoy(self.mechanism, &first.user, secret));
        let nonce = format!("{}{}", first.nonce, server_nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let auth_message_head = format!("{},{server_first}", first.bare);
        self.stage = Stage::Final {
            gs2_header: first.gs2_header,
            auth_message_head,
            client_nonce: first.nonce,
            nonce,
            user: first.user,
            credential,
        };
        Ok(server_first.into_bytes())
    }

    /// Takes the client's final message; on a valid proof answers the
    /// server's final message (which proves the server to the client) and
    /// the authenticated user's name.
    pub fn client_final(&mut self, message: &[u8]) -> Result<(Vec<u8>, String), ScramError> {
        let Stage::Final {
            gs2_header,
            auth_message_head,
            client_nonce,
            nonce,
            user,
            credential,
        } = std::mem::replace(&mut self.stage, Stage::Done)
        else {
            return Err(ScramError::OutOfTurn);
        };
        let last = parse_client_final(message)?;
        // librdkafka before 2.6.1 writes its own nonce once more in front
        // of the one the server sent. Kafka 3.8.1 accepted any final nonce
        // ending with its own for that; Kafka 4.3.1 refuses the form, so
        // Debian's kcat (librdkafka 2.0) cannot use SCRAM against it.
        // herald accepts the nonce sent and exactly that doubled form,
        // nothing else; the proof covers the message as written either way.
        let doubled = last
            .nonce
            .strip_prefix(client_nonce.as_str())
            .is_some_and(|rest| rest == nonce);
        if last.nonce != nonce && !doubled {
            return Err(ScramError::Nonce);
        }
        if last.channel_binding != gs2_header.as_bytes() {
            return Err(ScramError::ChannelBinding);
        }
        let auth_message = format!("{auth_message_head},{}", last.without_proof);
        let signature = self
            .mechanism
            .hmac(&credential.stored_key, &[auth_message.as_bytes()]);
        if last.proof.len() != signature.len() {
            return Err(ScramError::InvalidCredentials);
        }
        let client_key: Vec<u8> = last
            .proof
            .iter()
            .zip(&signature)
            .map(|(p, s)| p ^ s)
            .collect();
        let stored = self.mechanism.hash(&client_key);
        if !bool::from(stored.ct_eq(&credential.stored_key)) {
            return Err(ScramError::InvalidCredentials);
        }
        let server_signature = self
            .mechanism
            .hmac(&credential.server_key, &[auth_message.as_bytes()]);
        let server_final = format!("v={}", BASE64.encode(server_signature));
        Ok((server_final.into_bytes(), user))
    }
}

/// The client's side of an exchange, for herald's own CLI and client and
/// for tests: RFC 5802 with no channel binding.
#[derive(Debug)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    user: String,
    password: String,
    nonce: String,
    first_bare: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// A client of `user` with `password`, whose nonce is `nonce`
    /// (printable ASCII without commas).
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str, nonce: &str) -> Self {
        Self {
            mechanism,
            user: user.to_owned(),
            password: password.to_owned(),
            nonce: nonce.to_owned(),
            first_bare: String::new(),
            expected_server_signature: None,
        }
    }

    /// A client with a random nonce.
    pub fn with_random_nonce(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
    ) -> Result<Self, ScramError> {
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).map_err(|e| ScramError::Random(e.to_string()))?;
        Ok(Self::new(mechanism, user, password, &BASE64.encode(nonce)))
    }

    /// The client's first message.
    pub fn first(&mut self) -> Vec<u8> {
        self.first_bare = format!(
            "n={},r={}",
            crate::scram_messages::escape_name(&self.user),
            self.nonce
        );
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// Takes the server's first message and answers the client's final.
    pub fn last(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let text = std::str::from_utf8(server_first).map_err(|_| MessageError::NotUtf8)?;
        let mut attributes = text.split(',');
        let nonce = attributes
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .filter(|n| n.starts_with(&self.nonce))
            .ok_or(ScramError::Nonce)?;
        let salt = attributes
            .next()
            .and_then(|a| a.strip_prefix("s="))
            .ok_or(MessageError::Missing("s"))?;
        let salt = BASE64.decode(salt).map_err(|_| MessageError::Base64("s"))?;
        let iterations: u32 = attributes
            .next()
            .and_then(|a| a.strip_prefix("i="))
            .and_then(|i| i.parse().ok())
            .ok_or(MessageError::Missing("i"))?;
        // A server asking for fewer iterations than Kafka allows weakens
        // the proof; one asking for millions makes the client burn CPU.
        if !(ITERATIONS_MIN..=CLIENT_ITERATIONS_MAX).contains(&iterations) {
            return Err(ScramError::Iterations(iterations));
        }
        let salted = self
            .mechanism
            .salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = self.mechanism.client_key(&salted);
        let stored_key = self.mechanism.hash(&client_key);
        let without_proof = format!("c={},r={nonce}", BASE64.encode(b"n,,"));
        let auth_message = format!("{},{text},{without_proof}", self.first_bare);
        let signature = self.mechanism.hmac(&stored_key, &[auth_message.as_bytes()]);
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.mechanism.hmac(&salted, &[b"Server Key"]);
        self.expected_server_signature =
            Some(self.mechanism.hmac(&server_key, &[auth_message.as_bytes()]));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// True if the server's final message proves it knows the credential.
    pub fn verify_server(&self, server_final: &[u8]) -> bool {
        let Some(expected) = &self.expected_server_signature else {
            return false;
        };
        std::str::from_utf8(server_final)
            .ok()
            .and_then(|t| t.strip_prefix("v="))
            .and_then(|v| BASE64.decode(v).ok())
            .is_some_and(|v| bool::from(v.ct_eq(expected)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"server secret";

    /// RFC 7677 section 3: user "user", password "pencil".
    #[test]
    fn the_rfc_7677_exchange_verifies() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("base64");
        let salted = ScramMechanism::Sha256.salted_password(b"pencil", &salt, 4096);
        let credential =
            ScramCredential::from_salted_password(ScramMechanism::Sha256, &salt, &salted, 4096)
                .expect("valid");
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let first = server
            .client_first_with_nonce(
                b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                |user| (user == "user").then(|| credential.clone()),
                SECRET,
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            )
            .expect("first");
        assert_eq!(
            first,
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (last, user) = server
            .client_final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .expect("valid proof");
        assert_eq!(last, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        assert_eq!(user, "user");
    }

    fn exchange(
        mechanism: ScramMechanism,
        stored: &ScramCredential,
        user: &str,
        password: &str,
    ) -> Result<String, ScramError> {
        let mut client = ScramClient::new(mechanism, user, password, "client-nonce");
        let mut server = ScramServer::new(mechanism);
        let first = server.client_first(
            &client.first(),
            |u| (u == "alice").then(|| stored.clone()),
            SECRET,
        )?;
        let (last, user) = server.client_final(&client.last(&first)?)?;
        assert!(client.verify_server(&last), "the server proves itself");
        Ok(user)
    }

    #[test]
    fn both_mechanisms_accept_the_password_and_refuse_others_alike() {
        for mechanism in ScramMechanism::ALL {
            let stored = ScramCredential::from_password(mechanism, "s3cret", 4096).expect("made");
            assert_eq!(
                exchange(mechanism, &stored, "alice", "s3cret").as_deref(),
                Ok("alice")
            );
            assert_eq!(
                exchange(mechanism, &stored, "alice", "wrong"),
                Err(ScramError::InvalidCredentials)
            );
            assert_eq!(
                exchange(mechanism, &stored, "mallory", "s3cret"),
                Err(ScramError::InvalidCredentials),
                "an unknown user fails like a wrong password"
            );
        }
    }

    #[test]
    fn an_unknown_user_gets_the_same_salt_every_time() {
        let first = |nonce: &str| {
            let mut server = ScramServer::new(ScramMechanism::Sha512);
            let answer = server
                .client_first_with_nonce(b"n,,n=nobody,r=abc", |_| None, SECRET, nonce)
                .expect("answered");
            String::from_utf8(answer).expect("utf-8")
        };
        let (a, b) = (first("x"), first("y"));
        let salt = |s: &str| s.split(',').nth(1).map(str::to_owned);
        assert_eq!(salt(&a), salt(&b));
        assert!(a.ends_with(",i=4096"));
    }

    #[test]
    fn a_replayed_or_tampered_final_message_fails() {
        let mechanism = ScramMechanism::Sha256;
        let stored = ScramCredential::from_password(mechanism, "pw", 4096).expect("made");
        let mut client = ScramClient::new(mechanism, "alice", "pw", "n1");
        let mut server = ScramServer::new(mechanism);
        let first = server
            .client_first(&client.first(), |_| Some(stored.clone()), SECRET)
            .expect("first");
        let last = client.last(&first).expect("last");
        // Another server nonce: the same final message is a replay.
        let mut other = ScramServer::new(mechanism);
        other
            .client_first(&client.first(), |_| Some(stored.clone()), SECRET)
            .expect("first");
        assert_eq!(other.client_final(&last), Err(ScramError::Nonce));
        let mut tampered = last.clone();
        let at = tampered.len() - 5;
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        assert!(server.client_final(&tampered).is_err());
        assert_eq!(server.client_final(&last), Err(ScramError::OutOfTurn));
    }

    /// librdkafka 2.0 (Debian's, behind kcat) writes its nonce twice in
    /// the final message; herald accepts that form (but no other prefix).
    #[test]
    fn a_final_nonce_that_ends_with_the_servers_is_accepted_as_kafka_does() {
        let m = ScramMechanism::Sha256;
        let stored = ScramCredential::from_password(m, "pw", 4096).expect("made");
        let mut server = ScramServer::new(m);
        let first = server
            .client_first_with_nonce(b"n,,n=alice,r=cli", |_| Some(stored.clone()), SECRET, "srv")
            .expect("first");
        assert_eq!(&first[..9], b"r=clisrv,");
        let salted = m.salted_password(b"pw", &stored.salt, stored.iterations);
        let client_key = m.client_key(&salted);
        let without_proof = "c=biws,r=cliclisrv";
        let auth = format!(
            "n=alice,r=cli,{},{without_proof}",
            String::from_utf8(first).expect("utf-8")
        );
        let signature = m.hmac(&m.hash(&client_key), &[auth.as_bytes()]);
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let last = format!("{without_proof},p={}", BASE64.encode(proof));
        let mut other = ScramServer::new(m);
        other
            .client_first_with_nonce(b"n,,n=alice,r=cli", |_| Some(stored.clone()), SECRET, "srv")
            .expect("first");
        let (_, user) = server.client_final(last.as_bytes()).expect("accepted");
        assert_eq!(user, "alice");
        let forged = last.replace("r=cliclisrv", "r=xxclisrv");
        assert_eq!(
            other.client_final(forged.as_bytes()),
            Err(ScramError::Nonce)
        );
    }

    #[test]
    fn a_client_refuses_a_server_asking_for_too_few_or_too_many_iterations() {
        for iterations in [1, 4095, 1_000_001] {
            let mut client = ScramClient::new(ScramMechanism::Sha256, "alice", "pw", "c");
            client.first();
            let server_first = format!("r=cs,s=c2FsdA==,i={iterations}");
            assert_eq!(
                client.last(server_first.as_bytes()),
                Err(ScramError::Iterations(iterations))
            );
        }
    }

    #[test]
    fn kafka_specific_refusals() {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        assert_eq!(
            server.client_first(b"n,,n=alice,r=abc,tokenauth=true", |_| None, SECRET),
            Err(ScramError::TokenAuth)
        );
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(
            server.client_first(b"n,a=bob,n=alice,r=abc", |_| None, SECRET),
            Err(ScramError::Authzid { .. })
        ));
    }

    #[test]
    fn credentials_are_checked_when_set() {
        let m = ScramMechanism::Sha512;
        assert_eq!(
            ScramCredential::from_salted_password(m, b"salt", &[0; 64], 4095),
            Err(CredentialError::Iterations(4095))
        );
        assert_eq!(
            ScramCredential::from_salted_password(m, b"salt", &[0; 64], 16385),
            Err(CredentialError::Iterations(16385))
        );
        assert!(matches!(
            ScramCredential::from_salted_password(m, b"salt", &[0; 32], 4096),
            Err(CredentialError::SaltedPasswordLength(..))
        ));
        assert_eq!(
            ScramCredential::from_salted_password(m, b"", &[0; 64], 4096),
            Err(CredentialError::EmptySalt)
        );
        let credential = ScramCredential::from_password(m, "pw", 4096).expect("made");
        assert!(credential.verify_password(m, b"pw"));
        assert!(!credential.verify_password(m, b"pW"));
        let json = serde_json::to_string(&credential).expect("serializes");
        assert!(!json.contains("pw\""), "no password is kept");
        assert_eq!(
            serde_json::from_str::<ScramCredential>(&json).expect("reads back"),
            credential
        );
    }
}
