//! The connection the push and tenant commands share: gRPC to the push
//! listener, over TLS when a CA is given, with the caller's credentials
//! (a user's name and password as HTTP Basic, or an access token) in every
//! call's `authorization` metadata.

use anyhow::{anyhow, Context as _};
use base64::Engine as _;
use herald_gateway::proto::herald_admin_client::HeraldAdminClient;
use herald_gateway::proto::herald_client::HeraldClient;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::cli_client::{PushArgs, SASL_PASSWORD_ENV};

/// Adds the caller's `authorization` metadata to each call.
#[derive(Clone)]
pub struct Credentials(Option<MetadataValue<tonic::metadata::Ascii>>);

impl Interceptor for Credentials {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// A client of the push service.
pub type PushClient = HeraldClient<InterceptedService<Channel, Credentials>>;
/// A client of the admin (tenants) service.
pub type AdminClient = HeraldAdminClient<InterceptedService<Channel, Credentials>>;

/// The channel and credentials `args` name.
async fn channel(args: &PushArgs) -> anyhow::Result<(Channel, Credentials)> {
    let server = &args.push_server;
    let scheme = if args.push_ca.is_some() {
        "https"
    } else {
        "http"
    };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{server}"))
        .context("--push-server is not HOST:PORT")?;
    if let Some(ca) = &args.push_ca {
        let pem =
            std::fs::read(ca).with_context(|| format!("reading --push-ca {}", ca.display()))?;
        let host = server.rsplit_once(':').map_or(server.as_str(), |(h, _)| h);
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(pem))
            .domain_name(host.trim_start_matches('[').trim_end_matches(']'));
        endpoint = endpoint
            .tls_config(tls)
            .context("the TLS settings of --push-ca")?;
    }
    let channel = endpoint
        .connect()
        .await
        .with_context(|| format!("connecting to the push listener at {server}"))?;
    let value = match (&args.push_user, &args.push_token) {
        (Some(_), Some(_)) => return Err(anyhow!("give --push-user or --push-token, not both")),
        (Some(user), None) => {
            let password = std::env::var(SASL_PASSWORD_ENV)
                .map_err(|_| anyhow!("--push-user needs the password in {SASL_PASSWORD_ENV}"))?;
            let basic =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            Some(format!("Basic {basic}"))
        }
        (None, Some(token)) => Some(format!("Bearer {token}")),
        (None, None) => None,
    };
    let value = value
        .map(|v| MetadataValue::try_from(v).context("credentials that are not ASCII"))
        .transpose()?;
    Ok((channel, Credentials(value)))
}

/// A gRPC client of the push service `args` name.
pub async fn connect(args: &PushArgs) -> anyhow::Result<PushClient> {
    let (channel, credentials) = channel(args).await?;
    Ok(HeraldClient::with_interceptor(channel, credentials))
}

/// A gRPC client of the admin service `args` name.
pub async fn connect_admin(args: &PushArgs) -> anyhow::Result<AdminClient> {
    let (channel, credentials) = channel(args).await?;
    Ok(HeraldAdminClient::with_interceptor(channel, credentials))
}
