//! A TLS accept that says what went wrong: a plaintext client on a TLS
//! port (a Kafka request begins with a 4-byte size, not a TLS record)
//! gets a log line naming that, not a bare handshake error, and the
//! handshake is bounded in time so a silent client cannot hold a task.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Why a connection did not become a TLS session.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The first bytes are not a TLS handshake record.
    #[error("the client spoke plaintext on a TLS listener (first bytes {0:02x?}); configure it for SSL or use a plaintext listener")]
    Plaintext(Vec<u8>),
    /// The client closed before sending anything.
    #[error("the client closed the connection before the TLS handshake")]
    Closed,
    /// The handshake did not finish in time.
    #[error("the TLS handshake did not finish within {0:?}")]
    TimedOut(Duration),
    /// The handshake failed (certificate, protocol version, cipher suites).
    #[error("TLS handshake failed: {0}")]
    Handshake(std::io::Error),
}

/// True if `first` (the first bytes a client sent) may begin a TLS
/// handshake: a handshake record (22) of TLS 1.0 to 1.3 (3.x).
pub fn looks_like_tls(first: &[u8]) -> bool {
    matches!(first, [] | [22] | [22, 3, ..])
}

/// Completes the server side of a TLS handshake on `stream` within
/// `timeout`.
pub async fn accept(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    timeout: Duration,
) -> Result<TlsStream<TcpStream>, AcceptError> {
    let handshake = async {
        let mut first = [0u8; 2];
        let seen = loop {
            let n = stream
                .peek(&mut first)
                .await
                .map_err(AcceptError::Handshake)?;
            // Wait for both bytes unless the client stopped after one.
            if n >= first.len() || n == 0 {
                break n;
            }
            stream.readable().await.map_err(AcceptError::Handshake)?;
            let again = stream
                .peek(&mut first)
                .await
                .map_err(AcceptError::Handshake)?;
            if again == n {
                break n;
            }
        };
        if seen == 0 {
            return Err(AcceptError::Closed);
        }
        if !looks_like_tls(&first[..seen]) {
            return Err(AcceptError::Plaintext(first[..seen].to_vec()));
        }
        acceptor
            .accept(stream)
            .await
            .map_err(AcceptError::Handshake)
    };
    tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| AcceptError::TimedOut(timeout))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kafka_request_is_not_tls() {
        assert!(looks_like_tls(&[22, 3]));
        assert!(looks_like_tls(&[22]));
        assert!(!looks_like_tls(&[0, 0]), "a Kafka size prefix");
        assert!(!looks_like_tls(b"GE"), "HTTP");
    }
}
