//! How a connection proves who it is: optionally TLS (checking the
//! broker's certificate against a CA file), then optionally SASL with
//! SCRAM-SHA-256/512 or PLAIN, as Kafka's `security.protocol`,
//! `sasl.mechanism` and `ssl.ca.location` say. The password is never on a
//! command line: callers read it from the environment.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A SASL login.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    /// `SCRAM-SHA-512`, `SCRAM-SHA-256` or `PLAIN`.
    pub mechanism: String,
    /// The user.
    pub user: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// What a connection does before its first request.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// TLS, checking the broker's certificate against this CA file (PEM).
    pub tls_ca: Option<PathBuf>,
    /// A SASL login after ApiVersions.
    pub sasl: Option<SaslLogin>,
}

/// A connection's byte stream: plain TCP or TLS over it.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// Wraps `tcp` in TLS when `options` ask for it, checking the broker's
    /// certificate for `host`.
    pub(crate) async fn open(
        tcp: TcpStream,
        host: &str,
        options: &ConnectOptions,
    ) -> Result<Self, crate::ClientError> {
        let Some(ca) = &options.tls_ca else {
            return Ok(Stream::Plain(tcp));
        };
        let config = herald_tls::client_config(ca)
            .map_err(|e| crate::ClientError::refused(format!("TLS: {e}")))?;
        let name = rustls_pki_types::ServerName::try_from(host.to_owned())
            .map_err(|e| crate::ClientError::refused(format!("TLS: server name {host}: {e}")))?;
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&config));
        let tls = connector.connect(name, tcp).await?;
        Ok(Stream::Tls(Box::new(tls)))
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
