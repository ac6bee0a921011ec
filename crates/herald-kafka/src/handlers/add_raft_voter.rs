//! AddRaftVoter: adds a node to a running cluster (what
//! `herald cluster add-node` sends; Kafka's admin clients send it as
//! `Admin.addRaftVoter`). Any node takes it. The node to add lists two
//! listeners: `RAFT` (or Kafka's `CONTROLLER`), where its cluster peers
//! reach it, and any other name for its Kafka listener, which clients are
//! told of. The answer comes once the node is a voter of the cluster's
//! metadata group, or REQUEST_TIMED_OUT after the request's timeout while
//! the cluster goes on adding it (asking again is harmless).

use std::time::Duration;

use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::{AddRaftVoterRequest, AddRaftVoterResponse};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Listener names that name a node's Raft listener.
const RAFT_LISTENERS: [&str; 2] = ["RAFT", "CONTROLLER"];

/// Patience when the request gives none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Most patience a request may ask for.
const MAX_TIMEOUT: Duration = Duration::from_secs(300);

/// The node to add, read from the request's listeners.
#[derive(Debug, PartialEq, Eq)]
struct Addresses {
    raft: String,
    kafka_host: String,
    kafka_port: u16,
}

/// Answers an AddRaftVoter request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: AddRaftVoterRequest,
    _version: i16,
) -> AddRaftVoterResponse {
    let refuse = |error: ResponseError, message: String| {
        AddRaftVoterResponse::default()
            .with_error_code(error_code::code(error))
            .with_error_message(Some(wire_str(message)))
    };
    if let Some((error, message)) =
        voter_change_refusal(ctx, session, request.cluster_id.as_ref(), "add")
    {
        return refuse(error, message);
    }
    let addresses = match addresses(&request.listeners) {
        Ok(addresses) => addresses,
        Err(why) => return refuse(ResponseError::InvalidRequest, why),
    };
    let patience = u64::try_from(request.timeout_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
        .min(MAX_TIMEOUT);
    match add(ctx, request.voter_id, addresses, patience).await {
        Ok(()) => AddRaftVoterResponse::default(),
        Err((code, message)) => AddRaftVoterResponse::default()
            .with_error_code(code)
            .with_error_message(Some(wire_str(message))),
    }
}

/// Why a change to the cluster's voters (adding or removing a node, as
/// `what` says) is refused before it is looked at, if it is: without ALTER
/// on the cluster, or for another cluster than this one (Kafka's tools
/// send the id; an empty or absent one is not checked).
pub(crate) fn voter_change_refusal(
    ctx: &Context,
    session: &Session,
    cluster_id: Option<&kafka_protocol::protocol::StrBytes>,
    what: &str,
) -> Option<(ResponseError, String)> {
    if !cluster_allowed(ctx, session, Operation::Alter) {
        return Some((
            ResponseError::ClusterAuthorizationFailed,
            format!("not authorized to {what} nodes (ALTER on the cluster)"),
        ));
    }
    let asked = cluster_id.filter(|id| !id.is_empty())?;
    (asked.as_str() != ctx.broker.cluster_id()).then(|| {
        (
            ResponseError::InconsistentClusterId,
            format!(
                "this node is in cluster {}, not {}",
                ctx.broker.cluster_id(),
                asked.as_str()
            ),
        )
    })
}

/// Adds the node through the cluster.
async fn add(
    ctx: &Context,
    voter_id: i32,
    addresses: Addresses,
    patience: Duration,
) -> Result<(), (i16, String)> {
    let Ok(node_id) = u64::try_from(voter_id) else {
        return Err((
            error_code::code(ResponseError::InvalidRequest),
            format!("node ids are not negative, not {voter_id}"),
        ));
    };
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        let node = herald_broker::cluster::ClusterNode {
            raft: addresses.raft,
            kafka_host: addresses.kafka_host,
            kafka_port: addresses.kafka_port,
        };
        return cluster
            .add_node(node_id, node, patience)
            .await
            .map_err(|e| (error_code::broker(&e), e.to_string()));
    }
    let _ = (ctx, node_id, addresses, patience);
    Err((
        error_code::code(ResponseError::InvalidRequest),
        "this node is not part of a cluster: start it with --node-id, --cluster-listen and --cluster-nodes"
            .to_owned(),
    ))
}

/// The Raft listener and the Kafka listener among `listeners`.
fn addresses(listeners: &[Listener]) -> Result<Addresses, String> {
    let is_raft = |l: &Listener| {
        RAFT_LISTENERS
            .iter()
            .any(|name| l.name.as_str().eq_ignore_ascii_case(name))
    };
    let address = |l: &Listener| {
        if l.host.is_empty() || l.port == 0 {
            Err(format!(
                "listener {} needs a host and a port",
                l.name.as_str()
            ))
        } else {
            Ok((l.host.to_string(), l.port))
        }
    };
    let raft = listeners
        .iter()
        .find(|l| is_raft(l))
        .ok_or("the node's Raft listener (named RAFT) is missing")?;
    let kafka = listeners
        .iter()
        .find(|l| !is_raft(l))
        .ok_or("the node's Kafka listener (named KAFKA) is missing")?;
    let (raft_host, raft_port) = address(raft)?;
    let (kafka_host, kafka_port) = address(kafka)?;
    let raft = if raft_host.contains(':') {
        format!("[{raft_host}]:{raft_port}")
    } else {
        format!("{raft_host}:{raft_port}")
    };
    Ok(Addresses {
        raft,
        kafka_host,
        kafka_port,
    })
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    // The port is a uint16: two bytes, as an int16.
    const LISTENER: &[Field] = &[all(Str), all(Str), all(I16)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 0,
        fields: &[
            all(Str),
            all(I32),
            all(I32),
            all(Uuid),
            all(Array(LISTENER)),
        ],
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(name: &str, host: &str, port: u16) -> Listener {
        Listener::default()
            .with_name(wire_str(name))
            .with_host(wire_str(host))
            .with_port(port)
    }

    #[test]
    fn the_raft_and_kafka_listeners_are_told_apart_by_name() {
        let got = addresses(&[
            listener("KAFKA", "127.0.0.4", 9092),
            listener("raft", "127.0.0.4", 9193),
        ])
        .unwrap();
        assert_eq!(
            got,
            Addresses {
                raft: "127.0.0.4:9193".to_owned(),
                kafka_host: "127.0.0.4".to_owned(),
                kafka_port: 9092,
            }
        );
        let controller = addresses(&[
            listener("CONTROLLER", "::1", 9193),
            listener("PLAINTEXT", "::1", 9092),
        ])
        .unwrap();
        assert_eq!(controller.raft, "[::1]:9193");
        assert!(addresses(&[listener("KAFKA", "h", 9092)])
            .unwrap_err()
            .contains("Raft"));
        assert!(addresses(&[listener("RAFT", "h", 9193)])
            .unwrap_err()
            .contains("Kafka"));
        assert!(addresses(&[listener("RAFT", "", 9193), listener("KAFKA", "h", 1)]).is_err());
    }
}
