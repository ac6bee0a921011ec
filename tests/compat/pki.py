"""Certificates for the security tests, made per run with the openssl
command-line tool."""

import subprocess
from pathlib import Path


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(folder: Path) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate
    of CN=alice-tls, all signed by the CA."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=herald test CA", cwd=folder)
    # Extensions make them X.509 v3 certificates, which TLS libraries
    # (rustls among them) require.
    (folder / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (folder / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject in [
        ("server", "/CN=127.0.0.1"),
        ("client", "/O=acme/OU=eng/CN=alice-tls"),
    ]:
        ext = ["-extfile", f"{name}.ext"]
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                "-out", f"{name}.csr", "-subj", subject, cwd=folder)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *ext, cwd=folder)
    return folder
