//! The settings of who may do what: the Kafka listeners beyond the
//! default plaintext one (`[[listeners]]`, each with its security protocol,
//! TLS files, SASL mechanisms and principal mapping), the push listener's
//! (`[push_listener]`), and the `[security]` table (authorization, super users, the bootstrap administrator).
//! Every value is checked here, naming the key and the reason.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context as _};
use herald_auth::PrincipalMapping;
use herald_broker::SecurityConfig;
use herald_gateway::GatewayConfig;
use herald_kafka::{ListenerConfig, SaslMechanism, SecurityProtocol};
use herald_tls::{ClientAuth, TlsFiles};
use serde::{Deserialize, Serialize};

/// Environment variable holding the bootstrap administrator's password.
pub const ADMIN_PASSWORD_ENV: &str = "HERALD_ADMIN_PASSWORD";

/// One `[[listeners]]` entry of the config file.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ListenerFile {
    /// Its name (letters, digits, `_`), as in Kafka's `listeners`.
    pub name: String,
    /// HOST:PORT to bind.
    pub listen: String,
    /// `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub protocol: String,
    /// HOST:PORT its clients are told to connect to [default: the listen
    /// address].
    pub advertised: Option<String>,
    /// SASL mechanisms offered [default: SCRAM-SHA-512, SCRAM-SHA-256,
    /// PLAIN, OAUTHBEARER].
    pub sasl_mechanisms: Option<Vec<String>>,
    /// PEM certificate chain (TLS protocols).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key (TLS protocols).
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates client certificates must chain to.
    pub tls_client_ca: Option<PathBuf>,
    /// `none`, `requested` or `required` [default: none, or required when
    /// a client CA is given].
    pub tls_client_auth: Option<String>,
    /// Kafka's `ssl.principal.mapping.rules` [default: DEFAULT].
    pub principal_mapping_rules: Option<String>,
}

/// The `[push_listener]` table of the config file: the push listener's
/// security, as a Kafka listener's (its address is `push_listen`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PushListenerFile {
    /// `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL` [default:
    /// PLAINTEXT]. With SASL every client logs in (in its hello, or with an
    /// access token); otherwise logging in is optional.
    pub protocol: Option<String>,
    /// Mechanisms a hello may log in with [default: all four].
    pub sasl_mechanisms: Option<Vec<String>>,
    /// PEM certificate chain (TLS protocols).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key (TLS protocols).
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates client certificates must chain to.
    pub tls_client_ca: Option<PathBuf>,
    /// `none`, `requested` or `required`.
    pub tls_client_auth: Option<String>,
    /// Kafka's `ssl.principal.mapping.rules` [default: DEFAULT].
    pub principal_mapping_rules: Option<String>,
    /// Longest lifetime of the access tokens `POST /v1/token` issues, in
    /// seconds [default: 3600; at most 604800].
    pub token_lifetime_secs: Option<u64>,
}

/// Longest token lifetime accepted: a week.
const TOKEN_LIFETIME_MAX_SECS: u64 = 7 * 24 * 3600;

/// The push listener on `listen`, with the security of `file`, checked as a
/// Kafka listener's is.
pub fn push_listener(
    listen: &str,
    file: Option<&PushListenerFile>,
    max_connections: usize,
) -> anyhow::Result<GatewayConfig> {
    let file = file.cloned().unwrap_or_default();
    let key = |field: &str| format!("push_listener.{field}");
    let protocol = file.protocol.clone().unwrap_or_else(|| "PLAINTEXT".into());
    let as_listener = ListenerFile {
        name: "PUSH".into(),
        listen: listen.to_owned(),
        protocol: protocol.clone(),
        advertised: None,
        // Any listener takes a login, so any may name its mechanisms.
        sasl_mechanisms: file.sasl_mechanisms.clone(),
        tls_cert: file.tls_cert.clone(),
        tls_key: file.tls_key.clone(),
        tls_client_ca: file.tls_client_ca.clone(),
        tls_client_auth: file.tls_client_auth.clone(),
        principal_mapping_rules: file.principal_mapping_rules.clone(),
    };
    let mut checked = listener(&as_listener, &key, true)?;
    if checked.sasl_mechanisms.is_empty() {
        checked.sasl_mechanisms = SaslMechanism::ALL.to_vec();
    }
    let lifetime = file
        .token_lifetime_secs
        .unwrap_or(herald_gateway::TOKEN_LIFETIME_DEFAULT.as_secs());
    if !(1..=TOKEN_LIFETIME_MAX_SECS).contains(&lifetime) {
        bail!(invalid(
            &key("token_lifetime_secs"),
            lifetime,
            format!("must be 1 to {TOKEN_LIFETIME_MAX_SECS} (a week)")
        ));
    }
    let mut config = GatewayConfig::plaintext(checked.listen, max_connections);
    config.protocol = checked.protocol;
    config.sasl_mechanisms = checked.sasl_mechanisms;
    config.tls = checked.tls;
    config.principal_mapping = checked.principal_mapping;
    config.token_lifetime = std::time::Duration::from_secs(lifetime);
    Ok(config)
}

/// The `[security]` table of the config file.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SecurityFile {
    /// Check requests against the ACLs [default: false].
    pub authorization: Option<bool>,
    /// Principals that may do anything (`User:admin`).
    pub super_users: Option<Vec<String>>,
    /// Allow what no ACL is about to everyone [default: false].
    pub allow_everyone_if_no_acl_found: Option<bool>,
    /// A user given SCRAM credentials (both mechanisms) at every start,
    /// with the password in `HERALD_ADMIN_PASSWORD`, and made a super
    /// user.
    pub admin_user: Option<String>,
}

/// The bootstrap administrator: a user whose credentials are set at start.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapAdmin {
    /// The user name.
    pub user: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for BootstrapAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapAdmin")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

fn invalid(
    key: &str,
    value: impl std::fmt::Display,
    reason: impl std::fmt::Display,
) -> anyhow::Error {
    anyhow!("invalid {key} = {value}: {reason}")
}

/// The listeners of the file, checked, after `default` (the plaintext
/// listener of `kafka_listen`, when there is one).
pub fn listeners(
    default: Option<ListenerConfig>,
    files: &[ListenerFile],
) -> anyhow::Result<Vec<ListenerConfig>> {
    let mut listeners: Vec<ListenerConfig> = default.into_iter().collect();
    for (i, file) in files.iter().enumerate() {
        let key = |field: &str| format!("listeners[{i}].{field}");
        let listener = listener(file, &key, false)?;
        if listeners.iter().any(|l| l.name == listener.name) {
            bail!(invalid(
                &key("name"),
                &listener.name,
                "another listener has this name"
            ));
        }
        if listeners
            .iter()
            .any(|l| l.listen == listener.listen && listener.listen.port() != 0)
        {
            bail!(invalid(
                &key("listen"),
                listener.listen,
                "another listener binds this address"
            ));
        }
        listeners.push(listener);
    }
    if listeners.is_empty() {
        bail!("no Kafka listener: set kafka_listen or add a [[listeners]] entry");
    }
    Ok(listeners)
}

/// A listener's settings, checked. `any_take_mechanisms`: a listener whose
/// protocol is not SASL may still name mechanisms (the push listener's
/// optional logins).
fn listener(
    file: &ListenerFile,
    key: &dyn Fn(&str) -> String,
    any_take_mechanisms: bool,
) -> anyhow::Result<ListenerConfig> {
    let name_ok = !file.name.is_empty()
        && file
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name_ok {
        bail!(invalid(
            &key("name"),
            &file.name,
            "use letters, digits and _"
        ));
    }
    let protocol = SecurityProtocol::from_name(&file.protocol).ok_or_else(|| {
        invalid(
            &key("protocol"),
            &file.protocol,
            "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        )
    })?;
    let listen = crate::settings::parse_listen(&key("listen"), &file.listen)?;
    let (advertised_host, advertised_port) = match &file.advertised {
        Some(text) => crate::settings::parse_host_port(&key("advertised"), text)?,
        None => (listen.ip().to_string(), listen.port()),
    };
    let takes_mechanisms = protocol.uses_sasl() || any_take_mechanisms;
    let sasl_mechanisms = match (&file.sasl_mechanisms, takes_mechanisms) {
        (None, true) => SaslMechanism::ALL.to_vec(),
        (Some(names), true) => {
            let mut mechanisms = Vec::new();
            for name in names {
                let mechanism = SaslMechanism::from_name(name).ok_or_else(|| {
                    invalid(
                        &key("sasl_mechanisms"),
                        name,
                        "expected SCRAM-SHA-512, SCRAM-SHA-256, PLAIN or OAUTHBEARER",
                    )
                })?;
                if !mechanisms.contains(&mechanism) {
                    mechanisms.push(mechanism);
                }
            }
            if mechanisms.is_empty() {
                bail!(invalid(
                    &key("sasl_mechanisms"),
                    "[]",
                    "a SASL listener needs one"
                ));
            }
            mechanisms
        }
        (Some(_), false) => bail!(invalid(
            &key("sasl_mechanisms"),
            &file.protocol,
            "only SASL_PLAINTEXT and SASL_SSL listeners take SASL mechanisms"
        )),
        (None, false) => Vec::new(),
    };
    let tls = if protocol.uses_tls() {
        let (Some(cert), Some(tls_key)) = (&file.tls_cert, &file.tls_key) else {
            bail!(invalid(
                &key("protocol"),
                &file.protocol,
                "a TLS listener needs tls_cert and tls_key"
            ));
        };
        let client_auth = match &file.tls_client_auth {
            Some(text) => ClientAuth::from_name(text).ok_or_else(|| {
                invalid(
                    &key("tls_client_auth"),
                    text,
                    "expected none, requested or required",
                )
            })?,
            None if file.tls_client_ca.is_some() => ClientAuth::Required,
            None => ClientAuth::None,
        };
        let files = TlsFiles {
            cert_chain: cert.clone(),
            key: tls_key.clone(),
            client_ca: file.tls_client_ca.clone(),
            client_auth,
        };
        Some(
            herald_tls::server_config(&files)
                .with_context(|| format!("listener {}: TLS configuration", file.name))?,
        )
    } else {
        if file.tls_cert.is_some() || file.tls_key.is_some() || file.tls_client_ca.is_some() {
            bail!(invalid(
                &key("protocol"),
                &file.protocol,
                "TLS files are given but the protocol is not SSL or SASL_SSL"
            ));
        }
        None
    };
    let principal_mapping = match &file.principal_mapping_rules {
        Some(rules) => PrincipalMapping::parse(rules)
            .map_err(|e| invalid(&key("principal_mapping_rules"), rules, e))?,
        None => PrincipalMapping::default(),
    };
    Ok(ListenerConfig {
        name: file.name.clone(),
        listen,
        advertised_host,
        advertised_port,
        protocol,
        sasl_mechanisms,
        tls,
        principal_mapping,
    })
}

/// The security settings of the file, checked, and the bootstrap
/// administrator (its password from `password_env`).
pub fn security(
    file: Option<&SecurityFile>,
    password_env: Option<String>,
) -> anyhow::Result<(SecurityConfig, Option<BootstrapAdmin>)> {
    let file = file.cloned().unwrap_or_default();
    let mut super_users = file.super_users.unwrap_or_default();
    for user in &super_users {
        herald_auth::tenant::check_principal(user)
            .map_err(|e| invalid("security.super_users", user, e))?;
    }
    let admin = match file.admin_user {
        None => None,
        Some(user) => {
            if user.is_empty() || user.contains(':') {
                bail!(invalid(
                    "security.admin_user",
                    &user,
                    "a user name, without a type (admin, not User:admin)"
                ));
            }
            let password = password_env.filter(|p| !p.is_empty()).ok_or_else(|| {
                invalid(
                    "security.admin_user",
                    &user,
                    format!("its password must be in {ADMIN_PASSWORD_ENV}"),
                )
            })?;
            let principal = format!("User:{user}");
            if !super_users.contains(&principal) {
                super_users.push(principal);
            }
            Some(BootstrapAdmin { user, password })
        }
    };
    Ok((
        SecurityConfig {
            authorization: file.authorization.unwrap_or(false),
            super_users,
            allow_everyone_if_no_acl_found: file.allow_everyone_if_no_acl_found.unwrap_or(false),
        },
        admin,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sasl(name: &str, listen: &str) -> ListenerFile {
        ListenerFile {
            name: name.into(),
            listen: listen.into(),
            protocol: "SASL_PLAINTEXT".into(),
            ..ListenerFile::default()
        }
    }

    #[test]
    fn listeners_are_checked_and_named() {
        let all = listeners(None, &[sasl("INTERNAL", "127.0.0.1:0")]).expect("valid");
        assert_eq!(all[0].protocol, SecurityProtocol::SaslPlaintext);
        assert_eq!(all[0].sasl_mechanisms, SaslMechanism::ALL.to_vec());
        let error =
            |files: &[ListenerFile]| listeners(None, files).expect_err("refused").to_string();
        assert!(error(&[ListenerFile {
            protocol: "SASL_SSL".into(),
            ..sasl("X", "127.0.0.1:0")
        }])
        .contains("tls_cert"));
        assert!(error(&[ListenerFile {
            protocol: "TLS".into(),
            ..sasl("X", "127.0.0.1:0")
        }])
        .contains("listeners[0].protocol"));
        assert!(error(&[ListenerFile {
            sasl_mechanisms: Some(vec!["GSSAPI".into()]),
            ..sasl("X", "127.0.0.1:0")
        }])
        .contains("GSSAPI"));
        assert!(
            error(&[sasl("A", "127.0.0.1:9999"), sasl("A", "127.0.0.1:9998")]).contains("name")
        );
        assert!(error(&[]).contains("no Kafka listener"));
    }

    #[test]
    fn the_bootstrap_admin_needs_its_password_and_becomes_a_super_user() {
        let file = SecurityFile {
            authorization: Some(true),
            admin_user: Some("admin".into()),
            ..SecurityFile::default()
        };
        assert!(security(Some(&file), None).is_err());
        let (config, admin) = security(Some(&file), Some("s3cret".into())).expect("valid");
        assert!(config.authorization);
        assert_eq!(config.super_users, ["User:admin"]);
        assert_eq!(admin.map(|a| a.user).as_deref(), Some("admin"));
        let bad = SecurityFile {
            super_users: Some(vec!["admin".into()]),
            ..SecurityFile::default()
        };
        assert!(security(Some(&bad), None).is_err());
    }
}
