//! DescribeUserScramCredentials: which SCRAM mechanisms each user has a
//! credential for, with its iterations (never the keys). Needs DESCRIBE on
//! the cluster.

use std::collections::BTreeSet;

use herald_auth::Operation;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// Answers a DescribeUserScramCredentials request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !cluster_allowed(ctx, session, Operation::Describe) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(error_code::code(ResponseError::ClusterAuthorizationFailed))
            .with_error_message(Some(wire_str("not authorized to describe credentials")));
    }
    let state = ctx.broker.security().state();
    let described = |user: &str| {
        let result = DescribeUserScramCredentialsResult::default().with_user(wire_str(user));
        match state.users.get(user) {
            Some(credentials) => result.with_credential_infos(
                credentials
                    .scram
                    .iter()
                    .map(|(mechanism, credential)| {
                        CredentialInfo::default()
                            .with_mechanism(mechanism.code())
                            .with_iterations(
                                i32::try_from(credential.iterations).unwrap_or(i32::MAX),
                            )
                    })
                    .collect(),
            ),
            None => result
                .with_error_code(error_code::code(ResponseError::ResourceNotFound))
                .with_error_message(Some(wire_str(
                    "Attempt to describe a user credential that does not exist",
                ))),
        }
    };
    let results = match request.users {
        None => state.users.keys().map(|u| described(u)).collect(),
        Some(users) => {
            let names: Vec<String> = users.iter().map(|u| u.name.to_string()).collect();
            let mut seen = BTreeSet::new();
            let twice: BTreeSet<&String> = names.iter().filter(|n| !seen.insert(*n)).collect();
            let mut reported = BTreeSet::new();
            names
                .iter()
                .filter(|n| reported.insert(*n))
                .map(|name| {
                    if twice.contains(name) {
                        DescribeUserScramCredentialsResult::default()
                            .with_user(wire_str(name.clone()))
                            .with_error_code(error_code::code(ResponseError::DuplicateResource))
                            .with_error_message(Some(wire_str(
                                "Cannot describe SCRAM credentials for the same user twice in a single request",
                            )))
                    } else {
                        described(name)
                    }
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const USER: &[Field] = &[all(Str)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 0,
        fields: &[all(Array(USER))],
    };
}
