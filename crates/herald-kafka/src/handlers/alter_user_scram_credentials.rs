//! AlterUserScramCredentials: sets and deletes users' SCRAM credentials.
//! The client sends the salt and the salted password (`Hi(password, salt,
//! iterations)`), never the password; herald keeps only the keys derived
//! from them. Each user's changes are checked as Kafka checks them and
//! applied together or not at all (a user named twice, even for two
//! mechanisms, is refused, as Kafka does); the valid users' changes are
//! stored in one durable write. Needs ALTER on the cluster.

use std::collections::{BTreeMap, BTreeSet};

use herald_auth::{Operation, ScramCredential, ScramMechanism, SecurityCommand};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// One user's refusal: its code and message.
type Refusal = (ResponseError, String);

/// Answers an AlterUserScramCredentials request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut users: BTreeMap<String, Result<Vec<SecurityCommand>, Refusal>> = BTreeMap::new();
    let authorized = cluster_allowed(ctx, session, Operation::Alter);
    let state = ctx.broker.security().state();
    // Kafka refuses a user named twice in one request, even for two
    // mechanisms.
    let mut touched: BTreeSet<String> = BTreeSet::new();
    let mut add = |user: String, command: Result<SecurityCommand, Refusal>| {
        let entry = users.entry(user).or_insert_with(|| Ok(Vec::new()));
        match (entry, command) {
            (Ok(list), Ok(c)) => list.push(c),
            (entry @ Ok(_), Err(e)) => *entry = Err(e),
            (Err(_), _) => {}
        }
    };
    for deletion in &request.deletions {
        let user = deletion.name.to_string();
        let command = check_common(
            &user,
            deletion.mechanism,
            authorized,
            !touched.insert(user.clone()),
        )
        .and_then(|mechanism| {
            if state.scram(&user, mechanism).is_none() {
                return Err((
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist".to_owned(),
                ));
            }
            Ok(SecurityCommand::DeleteScram {
                user: user.clone(),
                mechanism,
            })
        });
        add(user, command);
    }
    for upsertion in &request.upsertions {
        let user = upsertion.name.to_string();
        let command = check_common(
            &user,
            upsertion.mechanism,
            authorized,
            !touched.insert(user.clone()),
        )
        .and_then(|mechanism| {
            ScramCredential::from_salted_password(
                mechanism,
                &upsertion.salt,
                &upsertion.salted_password,
                i64::from(upsertion.iterations),
            )
            .map_err(|e| (ResponseError::UnacceptableCredential, e.to_string()))
            .map(|credential| SecurityCommand::UpsertScram {
                user: user.clone(),
                mechanism,
                credential,
            })
        });
        add(user, command);
    }
    let accepted: Vec<SecurityCommand> = users
        .values()
        .filter_map(|r| r.as_ref().ok())
        .flatten()
        .cloned()
        .collect();
    let stored = if accepted.is_empty() {
        Ok(())
    } else {
        ctx.broker.change_security(accepted).await.map(|_| ())
    };
    if let Err(e) = &stored {
        tracing::warn!(error = %e, "storing SCRAM credentials failed");
    }
    let results = users
        .into_iter()
        .map(|(user, outcome)| {
            let result = AlterUserScramCredentialsResult::default().with_user(wire_str(user));
            match (outcome, &stored) {
                (Err((error, message)), _) => result
                    .with_error_code(error_code::code(error))
                    .with_error_message(Some(wire_str(message))),
                (Ok(_), Err(e)) => result
                    .with_error_code(error_code::broker(e))
                    .with_error_message(Some(wire_str(e.to_string()))),
                (Ok(_), Ok(())) => result,
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// What deletions and upsertions are checked for alike, in Kafka's order.
fn check_common(
    user: &str,
    mechanism: i8,
    authorized: bool,
    repeated: bool,
) -> Result<ScramMechanism, Refusal> {
    if !authorized {
        return Err((
            ResponseError::ClusterAuthorizationFailed,
            "not authorized to alter credentials".to_owned(),
        ));
    }
    if user.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".to_owned(),
        ));
    }
    let mechanism = ScramMechanism::from_code(mechanism).ok_or_else(|| {
        (
            ResponseError::UnsupportedSaslMechanism,
            format!("Unknown SCRAM mechanism {mechanism}"),
        )
    })?;
    if repeated {
        return Err((
            ResponseError::DuplicateResource,
            "A user credential cannot be altered twice in the same request".to_owned(),
        ));
    }
    Ok(mechanism)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const DELETION: &[Field] = &[all(Str), all(I8)];
    const UPSERTION: &[Field] = &[all(Str), all(I8), all(I32), all(Bytes), all(Bytes)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 0,
        fields: &[all(Array(DELETION)), all(Array(UPSERTION))],
    };
}
