"""A herald whose push listener is SASL_SSL (TLS with a certificate made
per run by openssl; every client logs in), with a SASL_PLAINTEXT Kafka
listener for the operator's requests, authorization on and `admin` the
bootstrap administrator; and the helpers the security tests share."""

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
import uuid

import grpc
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from scramp import ScramClient

from broker import HeraldBroker, environment, free_port, serve_for_test
from conftest import herald_binary_path
from pki import make_pki
from push_client import Session

ADMIN_PASSWORD = "admin-" + uuid.uuid4().hex[:12]
# A refused login must reach the client within this (the broker waits
# 100 ms before answering a first failure).
FAILURE_WITHIN_S = 1.0


class SecurePushHerald(HeraldBroker):
    def __init__(self, binary, data_dir, log_path, config_path):
        super().__init__(binary, data_dir, log_path, ["--config", str(config_path)])


@pytest.fixture(scope="module")
def secure(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("push-secure")
    pki = make_pki(folder)
    ports = {"sasl": free_port()}
    config = folder / "herald.toml"
    config.write_text(f"""
[[listeners]]
name = "SASL"
listen = "127.0.0.1:{ports['sasl']}"
protocol = "SASL_PLAINTEXT"

[push_listener]
protocol = "SASL_SSL"
tls_cert = "{pki / 'server.pem'}"
tls_key = "{pki / 'server.key'}"
token_lifetime_secs = 600

[security]
authorization = true
admin_user = "admin"
""")
    with environment(HERALD_ADMIN_PASSWORD=ADMIN_PASSWORD):
        server = SecurePushHerald(herald_binary_path(), folder / "data", folder / "broker.log", config)
        server.ports = ports
        server.pki = pki
        yield from serve_for_test(server, request)


def admin(secure):
    return AdminClient({
        "bootstrap.servers": f"127.0.0.1:{secure.ports['sasl']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": ADMIN_PASSWORD,
    })


def wait_all(futures, timeout=15):
    return {k: f.result(timeout=timeout) for k, f in futures.items()}


def add_user(secure, user, password):
    client = admin(secure)
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        wait_all(client.alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        ]))


def allow(secure, principal, resource_type, name, operation, pattern=ResourcePatternType.LITERAL):
    client = admin(secure)
    wait_all(client.create_acls([AclBinding(resource_type, name, pattern, principal, "*",
                                            operation, AclPermissionType.ALLOW)]))


def tls_credentials(secure):
    return grpc.ssl_channel_credentials(root_certificates=(secure.pki / "ca.pem").read_bytes())


def create_topic(secure, name, partitions=1, config=None):
    # The client must outlive its futures.
    client = admin(secure)
    wait_all(client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    ))


def new_user(secure, prefix):
    user = f"{prefix}-{uuid.uuid4().hex[:6]}"
    password = uuid.uuid4().hex
    add_user(secure, user, password)
    return user, password


def scram_session(proto, secure, user, password, mechanism="SCRAM-SHA-512"):
    """A session over TLS that logs in with SCRAM in its hello; answers the
    session and its welcome (after checking the broker's proof)."""
    pb = proto.pb
    client = ScramClient([mechanism], user, password)
    hello = pb.Hello(authenticate=pb.Authenticate(
        mechanism=mechanism, payload=client.get_client_first().encode()))
    session = Session(proto, secure.push_address, hello=hello, credentials=tls_credentials(secure))
    message = session.next()
    if message.WhichOneof("kind") != "authenticate_challenge":
        return session, message
    client.set_server_first(message.authenticate_challenge.payload.decode())
    session.send(authenticate_step=pb.AuthenticateStep(payload=client.get_client_final().encode()))
    answer = session.next()
    if answer.WhichOneof("kind") == "welcome":
        # Raises unless the broker proved it holds the user's credential.
        client.set_server_final(answer.welcome.authenticate_final.decode())
    return session, answer


def token_request(secure, login, password, **form):
    """POST /v1/token with HTTP Basic, as an OAuth client sends it; answers
    (status, JSON body)."""
    context = ssl.create_default_context(cafile=str(secure.pki / "ca.pem"))
    body = urllib.parse.urlencode({"grant_type": "client_credentials", **form}).encode()
    basic = base64.b64encode(f"{login}:{password}".encode()).decode()
    request = urllib.request.Request(
        f"https://{secure.push_address}/v1/token", data=body, method="POST",
        headers={"Authorization": f"Basic {basic}",
                 "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


