//! `herald user set|delete|list`: SCRAM credentials over
//! Alter/DescribeUserScramCredentials.

use std::io::BufRead as _;

use anyhow::{anyhow, bail, Context as _};
use herald_auth::ScramMechanism;
use herald_client::security_admin;

use crate::cli_client::{UserCommand, USER_PASSWORD_ENV};

/// The mechanisms `--mechanism` names.
fn mechanisms(text: &str) -> anyhow::Result<Vec<ScramMechanism>> {
    if text.eq_ignore_ascii_case("both") {
        return Ok(ScramMechanism::ALL.to_vec());
    }
    ScramMechanism::from_name(&text.to_ascii_uppercase())
        .map(|m| vec![m])
        .ok_or_else(|| {
            anyhow!("invalid --mechanism {text}: expected SCRAM-SHA-512, SCRAM-SHA-256 or both")
        })
}

/// The password to set: from the environment, else stdin's first line.
fn password() -> anyhow::Result<String> {
    if let Ok(password) = std::env::var(USER_PASSWORD_ENV) {
        return Ok(password);
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    if password.is_empty() {
        bail!("no password: set {USER_PASSWORD_ENV} or write it on stdin");
    }
    Ok(password)
}

/// Runs one user subcommand.
pub async fn run(command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Set {
            name,
            mechanism,
            iterations,
            broker,
        } => {
            let mechanisms = mechanisms(&mechanism)?;
            let password = password()?;
            let mut connection = broker.connect().await?;
            // One request per mechanism: Kafka refuses a user named twice
            // in one.
            for mechanism in mechanisms {
                security_admin::set_scram(&mut connection, &name, mechanism, iterations, &password)
                    .await?;
                println!("set {mechanism} credentials of user {name} ({iterations} iterations)");
            }
        }
        UserCommand::Delete {
            name,
            mechanism,
            broker,
        } => {
            let mut connection = broker.connect().await?;
            let have = security_admin::describe_users(&mut connection, std::slice::from_ref(&name))
                .await?;
            let held: Vec<String> = have
                .into_iter()
                .flat_map(|(_, mechanisms)| mechanisms.into_iter().map(|(m, _)| m))
                .collect();
            for mechanism in mechanisms(&mechanism)? {
                if !held.iter().any(|m| m == mechanism.name()) {
                    continue;
                }
                security_admin::delete_scram(&mut connection, &name, mechanism).await?;
                println!("deleted {mechanism} credentials of user {name}");
            }
        }
        UserCommand::List { broker } => {
            let mut connection = broker.connect().await?;
            for (user, mechanisms) in security_admin::describe_users(&mut connection, &[]).await? {
                let listed: Vec<String> = mechanisms
                    .iter()
                    .map(|(m, iterations)| format!("{m} ({iterations} iterations)"))
                    .collect();
                println!("{user}\t{}", listed.join(", "));
            }
        }
    }
    Ok(())
}
