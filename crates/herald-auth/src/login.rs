//! One SASL exchange on the server's side, whatever front end carries it:
//! the Kafka listeners run it over SaslAuthenticate, the push listener
//! over its session's hello. PLAIN takes one step, SCRAM two, OAUTHBEARER
//! one (or two when the token is refused, as RFC 7628 has it).
//!
//! Every failure names the user the client claimed (for the per-address
//! throttle and the log) and a reason for the log only: the client is
//! told no more than that authentication failed.

use std::sync::Arc;

use crate::access_token::TokenKey;
use crate::mechanism::SaslMechanism;
use crate::oauthbearer;
use crate::plain;
use crate::scram::{ScramError, ScramServer};
use crate::state::SecurityState;

/// What an exchange checks against.
#[derive(Debug, Clone)]
pub struct LoginContext {
    /// Credentials as they are now.
    pub state: Arc<SecurityState>,
    /// What unknown users' decoy credentials are made from.
    pub secret: Arc<[u8]>,
    /// The key access tokens are checked with.
    pub tokens: TokenKey,
    /// Now, in seconds since the Unix epoch (for token expiry).
    pub now_secs: i64,
}

/// What one step of an exchange came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginStep {
    /// Send these bytes; the exchange goes on.
    Continue(Vec<u8>),
    /// Authenticated as this user; send `last` (SCRAM's proof of the
    /// server; empty for the others) to the client.
    Done {
        /// The user name (the principal is `User:<user>`).
        user: String,
        /// The server's last message.
        last: Vec<u8>,
    },
    /// OAUTHBEARER refused the token: send `challenge` if the transport
    /// speaks SASL (the client acknowledges and the next step fails), or
    /// end the exchange here.
    Rejected {
        /// The error challenge.
        challenge: Vec<u8>,
        /// Why, for the log.
        reason: String,
    },
    /// Refused. `user` is who the client claimed to be, if it said.
    Failed {
        /// The user named, if any.
        user: Option<String>,
        /// Why, for the log only.
        reason: String,
    },
}

#[derive(Debug)]
enum Stage {
    Plain,
    Scram(ScramServer),
    OAuthBearer,
    /// A token was refused; the client's acknowledgement is awaited.
    OAuthRefused(String),
    Over,
}

/// The server's side of one exchange.
#[derive(Debug)]
pub struct Login {
    mechanism: SaslMechanism,
    stage: Stage,
}

impl Login {
    /// An exchange with `mechanism`.
    pub fn new(mechanism: SaslMechanism) -> Self {
        let stage = match mechanism {
            SaslMechanism::Plain => Stage::Plain,
            SaslMechanism::Scram(m) => Stage::Scram(ScramServer::new(m)),
            SaslMechanism::OAuthBearer => Stage::OAuthBearer,
        };
        Self { mechanism, stage }
    }

    /// The mechanism.
    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    /// True when the next step checks a password (thousands of PBKDF2
    /// rounds, milliseconds of CPU): run it off an async runtime's threads.
    pub fn next_step_is_costly(&self) -> bool {
        matches!(self.stage, Stage::Plain)
    }

    /// Takes the client's next message.
    pub fn step(&mut self, message: &[u8], ctx: &LoginContext) -> LoginStep {
        match std::mem::replace(&mut self.stage, Stage::Over) {
            Stage::Plain => match plain::authenticate(
                message,
                |user| ctx.state.any_scram(user).map(|(m, c)| (m, c.clone())),
                &ctx.secret,
            ) {
                Ok(user) => LoginStep::Done {
                    user,
                    last: Vec::new(),
                },
                Err(e) => LoginStep::Failed {
                    user: plain::parse(message).ok().map(|p| p.user),
                    reason: e.to_string(),
                },
            },
            Stage::Scram(mut server) => scram_step(&mut server, message, ctx, &mut self.stage),
            Stage::OAuthBearer => {
                let verified = oauthbearer::parse_initial_response(message)
                    .map_err(|e| e.to_string())
                    .and_then(|token| {
                        ctx.tokens
                            .verify(token, ctx.now_secs)
                            .map_err(|e| e.to_string())
                    });
                match verified {
                    Ok(claims) => LoginStep::Done {
                        user: claims.sub,
                        last: Vec::new(),
                    },
                    Err(reason) => {
                        self.stage = Stage::OAuthRefused(reason.clone());
                        LoginStep::Rejected {
                            challenge: oauthbearer::INVALID_TOKEN_CHALLENGE.to_vec(),
                            reason,
                        }
                    }
                }
            }
            Stage::OAuthRefused(reason) => LoginStep::Failed {
                user: None,
                reason: if message == oauthbearer::ERROR_ACKNOWLEDGEMENT {
                    reason
                } else {
                    format!("{reason}; then a message other than the acknowledgement")
                },
            },
            Stage::Over => LoginStep::Failed {
                user: None,
                reason: "the exchange is over".into(),
            },
        }
    }
}

fn scram_step(
    server: &mut ScramServer,
    message: &[u8],
    ctx: &LoginContext,
    stage: &mut Stage,
) -> LoginStep {
    let mechanism = server.mechanism();
    let claimed = server.user().map(str::to_owned);
    let outcome = if server.awaits_first() {
        server
            .client_first(
                message,
                |user| ctx.state.scram(user, mechanism).cloned(),
                &ctx.secret,
            )
            .map(LoginStep::Continue)
    } else {
        server
            .client_final(message)
            .map(|(last, user)| LoginStep::Done { user, last })
    };
    match outcome {
        Ok(step) => {
            if matches!(step, LoginStep::Continue(_)) {
                *stage = Stage::Scram(std::mem::replace(server, ScramServer::new(mechanism)));
            }
            step
        }
        Err(e) => LoginStep::Failed {
            user: claimed.or_else(|| {
                crate::scram_messages::parse_client_first(message)
                    .ok()
                    .map(|f| f.user)
            }),
            reason: match e {
                ScramError::InvalidCredentials => "invalid credentials".into(),
                e => e.to_string(),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::{ScramClient, ScramCredential, ScramMechanism};
    use crate::state::SecurityCommand;

    const NOW: i64 = 1_800_000_000;

    fn context() -> LoginContext {
        let mut state = SecurityState::default();
        for mechanism in ScramMechanism::ALL {
            let credential =
                ScramCredential::from_password(mechanism, "wonderland", 4096).expect("made");
            state
                .apply(SecurityCommand::UpsertScram {
                    user: "alice".into(),
                    mechanism,
                    credential,
                })
                .expect("applied");
        }
        let secret: Arc<[u8]> = Arc::from(&b"secret"[..]);
        LoginContext {
            state: Arc::new(state),
            tokens: TokenKey::from_secret(&secret),
            secret,
            now_secs: NOW,
        }
    }

    #[test]
    fn scram_takes_two_steps_and_proves_the_server() {
        let ctx = context();
        for mechanism in ScramMechanism::ALL {
            let mut client =
                ScramClient::with_random_nonce(mechanism, "alice", "wonderland").expect("nonce");
            let mut login = Login::new(SaslMechanism::Scram(mechanism));
            let LoginStep::Continue(server_first) = login.step(&client.first(), &ctx) else {
                panic!("the first step continues");
            };
            let last = client.last(&server_first).expect("client final");
            let LoginStep::Done { user, last } = login.step(&last, &ctx) else {
                panic!("the second step authenticates");
            };
            assert_eq!(user, "alice");
            assert!(client.verify_server(&last));
        }
    }

    #[test]
    fn a_wrong_password_and_an_unknown_user_fail_alike() {
        let ctx = context();
        for (user, password) in [("alice", "wrong"), ("mallory", "wonderland")] {
            let mechanism = ScramMechanism::Sha512;
            let mut client =
                ScramClient::with_random_nonce(mechanism, user, password).expect("nonce");
            let mut login = Login::new(SaslMechanism::Scram(mechanism));
            let LoginStep::Continue(server_first) = login.step(&client.first(), &ctx) else {
                panic!("the first step continues for {user}");
            };
            let last = client.last(&server_first).expect("client final");
            assert_eq!(
                login.step(&last, &ctx),
                LoginStep::Failed {
                    user: Some(user.into()),
                    reason: "invalid credentials".into()
                }
            );
        }
    }

    #[test]
    fn plain_checks_the_password() {
        let ctx = context();
        let mut login = Login::new(SaslMechanism::Plain);
        assert!(login.next_step_is_costly());
        assert_eq!(
            login.step(b"\0alice\0wonderland", &ctx),
            LoginStep::Done {
                user: "alice".into(),
                last: Vec::new()
            }
        );
        let mut login = Login::new(SaslMechanism::Plain);
        assert!(matches!(
            login.step(b"\0alice\0nope", &ctx),
            LoginStep::Failed { user: Some(u), .. } if u == "alice"
        ));
    }

    #[test]
    fn oauthbearer_takes_a_token_and_refuses_a_bad_one_in_two_steps() {
        let ctx = context();
        let token = ctx.tokens.issue("alice", NOW - 10, 60).expect("issued");
        let mut login = Login::new(SaslMechanism::OAuthBearer);
        assert_eq!(
            login.step(&oauthbearer::initial_response(&token), &ctx),
            LoginStep::Done {
                user: "alice".into(),
                last: Vec::new()
            }
        );
        let expired = ctx.tokens.issue("alice", NOW - 100, 60).expect("issued");
        let mut login = Login::new(SaslMechanism::OAuthBearer);
        let LoginStep::Rejected { challenge, reason } =
            login.step(&oauthbearer::initial_response(&expired), &ctx)
        else {
            panic!("an expired token is rejected");
        };
        assert_eq!(challenge, oauthbearer::INVALID_TOKEN_CHALLENGE);
        assert!(reason.contains("expired"), "{reason}");
        assert!(matches!(
            login.step(oauthbearer::ERROR_ACKNOWLEDGEMENT, &ctx),
            LoginStep::Failed { .. }
        ));
    }

    #[test]
    fn nothing_is_accepted_after_the_exchange() {
        let ctx = context();
        let mut login = Login::new(SaslMechanism::Plain);
        let _ = login.step(b"\0alice\0wonderland", &ctx);
        assert!(matches!(
            login.step(b"\0alice\0wonderland", &ctx),
            LoginStep::Failed { .. }
        ));
    }
}
