//! The connection the push commands share.

use anyhow::Context as _;
use herald_gateway::proto::herald_client::HeraldClient;
use tonic::transport::{Channel, Endpoint};

/// A gRPC client of the push listener at `push_server` (HOST:PORT).
pub async fn connect(push_server: &str) -> anyhow::Result<HeraldClient<Channel>> {
    let channel = Endpoint::from_shared(format!("http://{push_server}"))
        .context("--push-server is not HOST:PORT")?
        .connect()
        .await
        .with_context(|| format!("connecting to the push listener at {push_server}"))?;
    Ok(HeraldClient::new(channel))
}
