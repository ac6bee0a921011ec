//! The broker's side of who may do what: the security state (credentials,
//! ACLs, tenants, namespaces) as last persisted in the metadata, published
//! for lock-free reading, the authorizer built from its ACLs, and the
//! secret that makes unknown users' decoy credentials and signs access
//! tokens.
//!
//! Changes go through [`crate::Broker::apply_security`], which persists
//! the new state before publishing it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use herald_auth::{
    Authorizer, Caller, Login, LoginContext, LoginStep, LoginThrottle, Operation, ResourceType,
    SecurityState, TokenKey,
};

/// Who may do what, as configured when the broker starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityConfig {
    /// Check every request against the ACLs (Kafka's `authorizer.class.name`
    /// set). Off, every client may do everything, as with Kafka's default.
    pub authorization: bool,
    /// Principals (`User:admin`) that may do anything.
    pub super_users: Vec<String>,
    /// Allow what no ACL is about to everyone (Kafka's
    /// `allow.everyone.if.no.acl.found`).
    pub allow_everyone_if_no_acl_found: bool,
}

/// The published security state of a broker.
#[derive(Debug)]
pub struct Security {
    config: SecurityConfig,
    state: ArcSwap<SecurityState>,
    authorizer: Authorizer,
    secret: Arc<[u8]>,
    tokens: TokenKey,
    /// Failed logins by (address, user), over every front end.
    login_throttle: parking_lot::Mutex<LoginThrottle>,
}

impl Security {
    pub(crate) fn new(config: SecurityConfig, state: SecurityState, secret: Vec<u8>) -> Self {
        let authorizer = Authorizer::new(
            config.super_users.iter().cloned(),
            config.allow_everyone_if_no_acl_found,
        );
        authorizer.replace(state.acls.iter().cloned());
        Self {
            config,
            state: ArcSwap::from_pointee(state),
            authorizer,
            tokens: TokenKey::from_secret(&secret),
            secret: Arc::from(secret),
            login_throttle: parking_lot::Mutex::new(LoginThrottle::new()),
        }
    }

    /// Publishes a state just persisted.
    pub(crate) fn publish(&self, state: SecurityState) {
        self.authorizer.replace(state.acls.iter().cloned());
        self.state.store(Arc::new(state));
    }

    /// The settings it started with.
    pub fn config(&self) -> &SecurityConfig {
        &self.config
    }

    /// The state now (credentials, ACLs, tenants, namespaces).
    pub fn state(&self) -> Arc<SecurityState> {
        self.state.load_full()
    }

    /// The authorizer over the ACLs now.
    pub fn authorizer(&self) -> &Authorizer {
        &self.authorizer
    }

    /// What unknown users' decoy credentials are made from: kept in the
    /// metadata, so a name gets the same salt across restarts.
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The key access tokens are signed and checked with (derived from the
    /// secret, so tokens outlive a restart).
    pub fn token_key(&self) -> &TokenKey {
        &self.tokens
    }

    /// What a login checks against now: the credentials, the decoy secret,
    /// the token key and the time.
    pub fn login_context(&self) -> LoginContext {
        let now_secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        LoginContext {
            state: self.state(),
            secret: Arc::clone(&self.secret),
            tokens: self.tokens.clone(),
            now_secs,
        }
    }

    /// Records a failed login of `user` from `address`; answers how long
    /// to wait before telling the client (doubling with each recent
    /// failure of the pair, whichever front end they came through).
    pub fn login_failed(&self, address: IpAddr, user: &str) -> Duration {
        self.login_throttle
            .lock()
            .failed(address, user, Instant::now())
    }

    /// Records a successful login: the pair's failures are forgotten.
    pub fn login_succeeded(&self, address: IpAddr, user: &str) {
        self.login_throttle.lock().succeeded(address, user);
    }

    /// Runs `login`'s next step on `message`. A password check (PLAIN)
    /// costs thousands of PBKDF2 rounds, so it runs on a blocking thread,
    /// not on the async runtime's. Answers the step, and the exchange when
    /// it goes on.
    pub async fn login_step(
        &self,
        mut login: Login,
        message: Vec<u8>,
    ) -> (LoginStep, Option<Login>) {
        let context = self.login_context();
        if !login.next_step_is_costly() {
            let step = login.step(&message, &context);
            return (step, Some(login));
        }
        let checked = tokio::task::spawn_blocking(move || {
            let step = login.step(&message, &context);
            (step, Some(login))
        })
        .await;
        checked.unwrap_or_else(|e| {
            let reason = format!("the password check did not finish: {e}");
            (LoginStep::Failed { user: None, reason }, None)
        })
    }

    /// Checks `user`'s password as a PLAIN login does (on a blocking
    /// thread), with the login throttle: answers the user, or `None` after
    /// the throttle's pause for a wrong name or password.
    pub async fn check_password(&self, peer: IpAddr, user: &str, password: &str) -> Option<String> {
        let message = format!("\0{user}\0{password}").into_bytes();
        let (step, _) = self
            .login_step(Login::new(herald_auth::SaslMechanism::Plain), message)
            .await;
        match step {
            LoginStep::Done { user, .. } => {
                self.login_succeeded(peer, &user);
                Some(user)
            }
            _ => {
                tokio::time::sleep(self.login_failed(peer, user)).await;
                None
            }
        }
    }

    /// True if `caller` may do `operation` on `name` of `resource_type`;
    /// always true when authorization is off.
    pub fn authorize(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        !self.config.authorization
            || self
                .authorizer
                .authorize(caller, operation, resource_type, name)
    }
}
