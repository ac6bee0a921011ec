//! A load connection: TCP, with TLS and a SASL login when asked, then the
//! raw byte stream (herald-client opens it: ApiVersions, SaslHandshake,
//! SaslAuthenticate), on which the generator writes pre-encoded requests.

use std::net::SocketAddr;

use herald_client::{ConnectOptions, Connection, Stream};

use crate::LoadError;

/// Opens a connection to `addr` as `security` says.
pub async fn open(addr: SocketAddr, security: &ConnectOptions) -> Result<Stream, LoadError> {
    let connection = Connection::connect_with(&addr.to_string(), security).await?;
    Ok(connection.into_stream())
}
