//! Real handshakes over loopback: a server config from PEM files, mutual
//! TLS with the client's subject read back, a client without a
//! certificate refused where one is required, and a plaintext client told
//! apart from a failed handshake.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use herald_tls::{
    accept, client_subject, server_config, AcceptError, ClientAuth, TlsAcceptor, TlsFiles,
};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Pki {
    dir: tempfile::TempDir,
    ca: CertificateDer<'static>,
    client_chain: Vec<CertificateDer<'static>>,
    client_key: PrivateKeyDer<'static>,
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write PEM");
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate of
/// `O=acme, OU=eng, CN=alice`, all signed by the CA.
fn pki() -> Pki {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "herald test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().expect("key");
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("params")
        .signed_by(&server_key, &issuer)
        .expect("server certificate");
    let client_key = KeyPair::generate().expect("key");
    let mut client_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    client_params
        .distinguished_name
        .push(DnType::OrganizationName, "acme");
    client_params
        .distinguished_name
        .push(DnType::OrganizationalUnitName, "eng");
    client_params
        .distinguished_name
        .push(DnType::CommonName, "alice");
    let client = client_params
        .signed_by(&client_key, &issuer)
        .expect("client certificate");
    write(dir.path(), "server.pem", &server.pem());
    write(dir.path(), "server.key", &server_key.serialize_pem());
    write(dir.path(), "ca.pem", &ca.pem());
    Pki {
        ca: ca.der().clone(),
        client_chain: vec![client.der().clone()],
        client_key: PrivateKeyDer::try_from(client_key.serialize_der()).expect("client key"),
        dir,
    }
}

fn files(pki: &Pki, client_auth: ClientAuth) -> TlsFiles {
    TlsFiles {
        cert_chain: pki.dir.path().join("server.pem"),
        key: pki.dir.path().join("server.key"),
        client_ca: Some(pki.dir.path().join("ca.pem")),
        client_auth,
    }
}

fn client_config(pki: &Pki, with_certificate: bool) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.clone()).expect("root");
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    Arc::new(if with_certificate {
        builder
            .with_client_auth_cert(pki.client_chain.clone(), pki.client_key.clone_key())
            .expect("client auth")
    } else {
        builder.with_no_client_auth()
    })
}

/// Accepts one connection with `files`; a TLS client (if `client` is
/// given) then writes "ping" and reads the echo. Returns the server's
/// result: the client's subject, or why the accept failed.
async fn one_connection(
    files: TlsFiles,
    client: Option<Arc<rustls::ClientConfig>>,
) -> Result<Option<String>, AcceptError> {
    let acceptor = TlsAcceptor::from(server_config(&files).expect("server config"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let client_task = tokio::spawn(async move {
        let stream = TcpStream::connect(addr).await.expect("connect");
        match client {
            Some(config) => {
                let connector = tokio_rustls::TlsConnector::from(config);
                let name = ServerName::try_from("127.0.0.1").expect("name");
                if let Ok(mut tls) = connector.connect(name, stream).await {
                    let _ = tls.write_all(b"ping").await;
                    let mut echo = [0u8; 4];
                    let _ = tls.read_exact(&mut echo).await;
                }
            }
            None => {
                // A Kafka client without TLS: a size prefix, then a request.
                let mut stream = stream;
                let _ = stream.write_all(&[0, 0, 0, 20, 0, 18, 0, 3]).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    let (stream, _) = listener.accept().await.expect("accept");
    let result = match accept(&acceptor, stream, Duration::from_secs(5)).await {
        Ok(mut tls) => {
            let subject = tls.get_ref().1.peer_certificates().and_then(client_subject);
            let mut ping = [0u8; 4];
            // A client the handshake let in but whose certificate the
            // server then refused fails here instead.
            match tls.read_exact(&mut ping).await {
                Ok(_) => {
                    tls.write_all(&ping).await.expect("echo");
                    Ok(subject)
                }
                Err(e) => Err(AcceptError::Handshake(e)),
            }
        }
        Err(e) => Err(e),
    };
    client_task.await.expect("client");
    result
}

#[tokio::test]
async fn mutual_tls_gives_the_server_the_client_subject() {
    let pki = pki();
    let subject = one_connection(
        files(&pki, ClientAuth::Required),
        Some(client_config(&pki, true)),
    )
    .await
    .expect("handshake");
    let subject = subject.expect("a client certificate");
    assert!(
        subject.contains("CN=alice") && subject.contains("OU=eng"),
        "{subject}"
    );
}

/// `tests/data/alice.pem` was made with `openssl req -subj
/// "/C=US/O=acme/OU=eng/CN=alice"`; `openssl x509 -subject -nameopt
/// RFC2253` prints its subject as below, as Java's `getName()` does.
#[test]
fn the_subject_reads_as_openssl_and_java_print_it() {
    use rustls::pki_types::pem::PemObject;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/alice.pem");
    let certificate = CertificateDer::from_pem_file(path).expect("PEM");
    assert_eq!(
        client_subject(&[certificate]).as_deref(),
        Some("CN=alice,OU=eng,O=acme,C=US")
    );
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused_where_one_is_required() {
    let pki = pki();
    let refused = one_connection(
        files(&pki, ClientAuth::Required),
        Some(client_config(&pki, false)),
    )
    .await;
    assert!(
        matches!(refused, Err(AcceptError::Handshake(_))),
        "{refused:?}"
    );
    let anonymous = one_connection(
        files(&pki, ClientAuth::Requested),
        Some(client_config(&pki, false)),
    )
    .await
    .expect("requested, not required");
    assert_eq!(anonymous, None);
}

#[tokio::test]
async fn a_plaintext_client_is_named_as_such() {
    let pki = pki();
    let result = one_connection(files(&pki, ClientAuth::None), None).await;
    assert!(
        matches!(result, Err(AcceptError::Plaintext(ref first)) if first == &[0, 0]),
        "{result:?}"
    );
}

#[test]
fn bad_files_are_named() {
    let pki = pki();
    let mut bad = files(&pki, ClientAuth::None);
    bad.key = pki.dir.path().join("missing.key");
    let error = server_config(&bad).expect_err("no key").to_string();
    assert!(
        error.contains("private key") && error.contains("missing.key"),
        "{error}"
    );
    let mut no_ca = files(&pki, ClientAuth::Required);
    no_ca.client_ca = None;
    assert!(server_config(&no_ca).is_err());
}
