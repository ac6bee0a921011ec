//! A rustls server config from the files an operator names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Whether clients must show a certificate (Kafka's `ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    #[default]
    None,
    /// Asked for; a client without one connects as `User:ANONYMOUS`.
    Requested,
    /// A client without a valid certificate is refused.
    Required,
}

impl ClientAuth {
    /// The value of Kafka's `ssl.client.auth` (`none`, `requested`,
    /// `required`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(ClientAuth::None),
            "requested" => Some(ClientAuth::Requested),
            "required" => Some(ClientAuth::Required),
            _ => None,
        }
    }
}

/// Where a listener's certificate, key and client CA are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain, PEM, leaf first.
    pub cert_chain: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates, PEM, that client certificates must chain to
    /// (needed unless `client_auth` is `None`).
    pub client_ca: Option<PathBuf>,
    /// Whether clients must show a certificate.
    pub client_auth: ClientAuth,
}

/// Why a TLS config could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file that cannot be read or holds no PEM item of the kind.
    #[error("{what} {path}: {reason}")]
    File {
        /// What the file should hold.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        reason: String,
    },
    /// Client authentication asked for without a CA to check against.
    #[error("client authentication `{0:?}` needs a client CA file")]
    NoClientCa(ClientAuth),
    /// rustls refused the certificate, key or CA.
    #[error("TLS configuration refused: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("client certificate verifier: {0}")]
    Verifier(String),
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let refused = |reason: String| TlsError::File {
        what,
        path: path.to_owned(),
        reason,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| refused(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| refused(e.to_string()))?;
    if certificates.is_empty() {
        return Err(refused("no PEM certificate in it".into()));
    }
    Ok(certificates)
}

/// Builds the server config of `files`, with TLS 1.2 and 1.3 and ring's
/// cipher suites.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates("certificate chain", &files.cert_chain)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::File {
        what: "private key",
        path: files.key.clone(),
        reason: e.to_string(),
    })?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let builder = match (files.client_auth, &files.client_ca) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (auth, None) => return Err(TlsError::NoClientCa(auth)),
        (auth, Some(ca)) => {
            let mut roots = RootCertStore::empty();
            for certificate in certificates("client CA", ca)? {
                roots.add(certificate)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| TlsError::Verifier(e.to_string()))?,
            )
        }
    };
    Ok(Arc::new(builder.with_single_cert(chain, key)?))
}

/// A client config that trusts the CA certificates of `ca` (PEM): for
/// herald's own tools connecting to a TLS listener.
pub fn client_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for certificate in certificates("CA", ca)? {
        roots.add(certificate)?;
    }
    Ok(Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    ))
}
