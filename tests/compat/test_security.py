"""Who may do what, with real clients and their ordinary security settings.

One herald per module with four Kafka listeners: PLAINTEXT (the suite's
default port), SASL_PLAINTEXT, SASL_SSL and SSL with client certificates
required (the principal is the certificate's CN, through
`principal_mapping_rules`). Authorization is on; `admin` is the bootstrap
administrator (a super user, password in HERALD_ADMIN_PASSWORD). Users are
created through AlterUserScramCredentials and given ACLs through
CreateAcls, both from confluent-kafka's AdminClient, as an operator would.

With HERALD_COMPAT_KAFKA_LIB set (scripts/security-vs-kafka.sh), the same
tests run against Apache Kafka configured the same way (StandardAuthorizer,
SCRAM, the same listeners and mapping rules), to show that herald answers
as Kafka does. What differs by design is skipped there and says why.

Certificates are made per run with the openssl command-line tool.
"""

import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
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

from broker import HeraldBroker, KafkaBroker, environment, free_port, serve_for_test
from pki import make_pki
from secure_clients import consume, produce
from conftest import (EXTERNAL_BOOTSTRAP, KAFKA_LIB, KAFKA_TOOL_JVM_FLAGS, QUICK_GROUP_START,
                      herald_binary_path)

pytestmark = pytest.mark.skipif(
    bool(EXTERNAL_BOOTSTRAP),
    reason="starts its own broker with security listeners",
)
AGAINST_KAFKA = bool(KAFKA_LIB)

ADMIN_PASSWORD = "admin-" + uuid.uuid4().hex[:12]
# A failure must reach the client within this (the broker waits 100 ms
# before a first failed login's answer).
FAILURE_WITHIN_S = 1.0


class SecureHerald(HeraldBroker):
    """herald with a config file adding the security listeners."""

    def __init__(self, binary, data_dir, log_path, config_path):
        # The tests' consumers join groups (to check group ACLs), each
        # formed sooner with a short initial rebalance delay.
        super().__init__(binary, data_dir, log_path,
                         ["--config", str(config_path), *QUICK_GROUP_START])


class SecureKafka(KafkaBroker):
    """Apache Kafka with the same listeners, authorizer and users."""

    def __init__(self, lib_dir, data_dir, log_path, ports, pki):
        self.ports, self.pki = ports, pki
        super().__init__(lib_dir, data_dir, log_path)
        # The bootstrap administrator, as Kafka seeds one: in the storage
        # format.
        self.format_args = [
            arg
            for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256")
            for arg in ("--add-scram", f"{mechanism}=[name=admin,password={ADMIN_PASSWORD}]")
        ]

    def ready_ports(self):
        return [self.port, *self.ports.values()]

    def _write_config(self, args):
        super()._write_config(args)
        keystore = self.pki / "server-keystore.pem"
        keystore.write_text((self.pki / "server.key").read_text() + (self.pki / "server.pem").read_text())
        p = self.ports
        listeners = {
            "SASL": f"127.0.0.1:{p['sasl']}",
            "SASL_TLS": f"127.0.0.1:{p['sasl_ssl']}",
            "MTLS": f"127.0.0.1:{p['ssl']}",
        }
        extra = {
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://127.0.0.1:{self.controller_port},"
            + ",".join(f"{name}://{addr}" for name, addr in listeners.items()),
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap},"
            + ",".join(f"{name}://{addr}" for name, addr in listeners.items()),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
            "SASL:SASL_PLAINTEXT,SASL_TLS:SASL_SSL,MTLS:SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The controller and the broker itself speak over PLAINTEXT.
            "super.users": "User:admin;User:ANONYMOUS",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "listener.name.mtls.ssl.truststore.type": "PEM",
            "listener.name.mtls.ssl.truststore.location": str(self.pki / "ca.pem"),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        }
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                 f'user_admin="{ADMIN_PASSWORD}";')
        for listener in ("sasl", "sasl_tls"):
            extra[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = scram
            extra[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = scram
            extra[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain
        if os.environ.get("HERALD_SECURITY_KAFKA_DEBUG"):
            self.log4j_path.write_text(self.log4j_path.read_text() +
                "logger.scram.name = org.apache.kafka.common.security\n"
                "logger.scram.level = DEBUG\n")
        text = self.props_path.read_text()
        kept = [line for line in text.splitlines()
                if line.split("=", 1)[0] not in extra]
        self.props_path.write_text("\n".join(kept + [f"{k}={v}" for k, v in extra.items()]) + "\n")


# Kafka checks SASL/PLAIN against the users listed in its JAAS config;
# herald checks it against the user's SCRAM credential.
PLAIN_IS_JAAS_ON_KAFKA = "Kafka's PLAIN checks its JAAS user list, not SCRAM credentials"

@pytest.fixture(scope="module")
def secure(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("secure")
    pki = make_pki(folder)
    ports = {name: free_port() for name in ["sasl", "sasl_ssl", "ssl"]}
    config = folder / "herald.toml"
    config.write_text(f"""
[[listeners]]
name = "SASL"
listen = "127.0.0.1:{ports['sasl']}"
protocol = "SASL_PLAINTEXT"
# As Kafka's sasl.enabled.mechanisms below; SASL_TLS offers all four.
sasl_mechanisms = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]

[[listeners]]
name = "SASL_TLS"
listen = "127.0.0.1:{ports['sasl_ssl']}"
protocol = "SASL_SSL"
tls_cert = "{pki / 'server.pem'}"
tls_key = "{pki / 'server.key'}"

[[listeners]]
name = "MTLS"
listen = "127.0.0.1:{ports['ssl']}"
protocol = "SSL"
tls_cert = "{pki / 'server.pem'}"
tls_key = "{pki / 'server.key'}"
tls_client_ca = "{pki / 'ca.pem'}"
principal_mapping_rules = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"

[security]
authorization = true
admin_user = "admin"
""")
    with environment(HERALD_ADMIN_PASSWORD=ADMIN_PASSWORD):
        if AGAINST_KAFKA:
            server = SecureKafka(Path(KAFKA_LIB), folder / "data", folder / "broker.log", ports, pki)
        else:
            server = SecureHerald(herald_binary_path(), folder / "data", folder / "broker.log", config)
            server.ports = ports
            server.pki = pki
        yield from serve_for_test(server, request)


def sasl(secure, user, password, mechanism="SCRAM-SHA-512", tls=False, **extra):
    conf = {
        "bootstrap.servers": f"127.0.0.1:{secure.ports['sasl_ssl' if tls else 'sasl']}",
        "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }
    if tls:
        conf["ssl.ca.location"] = str(secure.pki / "ca.pem")
    return conf


def admin(secure):
    return AdminClient(sasl(secure, "admin", ADMIN_PASSWORD))


def wait_all(futures, timeout=15):
    return {k: f.result(timeout=timeout) for k, f in futures.items()}


def add_user(secure, user, password):
    client = admin(secure)
    # One request per mechanism: Kafka refuses a user named twice in one.
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        wait_all(client.alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        ]))


def allow(secure, principal, resource_type, name, operation, pattern=ResourcePatternType.LITERAL,
          permission=AclPermissionType.ALLOW):
    # The client must outlive its futures.
    client = admin(secure)
    futures = client.create_acls([
        AclBinding(resource_type, name, pattern, principal, "*", operation, permission)
    ])
    for f in futures.values():
        f.result(timeout=15)


def failure_time(conf, limit_s=5.0):
    """Seconds until a client with `conf` is told why it cannot connect,
    and what it was told (librdkafka reports it through `error_cb`)."""
    told = []
    started = time.monotonic()

    def on_error(err):
        told.append((time.monotonic() - started, err))

    client = Producer({**conf, "error_cb": on_error})
    while not told and time.monotonic() - started < limit_s:
        client.poll(0.02)
    assert told, f"the client was told nothing within {limit_s}s"
    return told[0]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext", "sasl_ssl"])
def test_confluent_kafka_produces_and_consumes_with_each_mechanism(secure, mechanism, tls):
    if AGAINST_KAFKA and mechanism == "PLAIN":
        pytest.skip(PLAIN_IS_JAAS_ON_KAFKA)
    user = f"u-{uuid.uuid4().hex[:8]}"
    add_user(secure, user, "pw-" + user)
    topic, group = f"{user}-topic", f"{user}-group"
    allow(secure, f"User:{user}", ResourceType.TOPIC, user, AclOperation.ALL, ResourcePatternType.PREFIXED)
    allow(secure, f"User:{user}", ResourceType.GROUP, user, AclOperation.ALL, ResourcePatternType.PREFIXED)
    conf = sasl(secure, user, "pw-" + user, mechanism, tls)
    assert produce(conf, topic, 20) == []
    values, error = consume(conf, topic, group, 20)
    assert error is None
    assert sorted(values) == sorted(b"v%d" % i for i in range(20))


OAUTH_IS_HERALDS = "herald signs its own OAUTHBEARER tokens; Kafka needs an identity provider"


def oidc(secure, user, password):
    """librdkafka's OAUTHBEARER login with tokens from herald's token
    endpoint (the OAuth 2.0 client-credentials grant), over SASL_SSL."""
    return {
        "bootstrap.servers": f"127.0.0.1:{secure.ports['sasl_ssl']}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secure.pki / "ca.pem"),
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": user,
        "sasl.oauthbearer.client.secret": password,
        "sasl.oauthbearer.token.endpoint.url": f"http://{secure.push_address}/v1/token",
    }


def test_confluent_kafka_logs_in_with_tokens_from_the_token_endpoint(secure):
    if AGAINST_KAFKA:
        pytest.skip(OAUTH_IS_HERALDS)
    user = f"oauth-{uuid.uuid4().hex[:8]}"
    add_user(secure, user, "pw-" + user)
    allow(secure, f"User:{user}", ResourceType.TOPIC, user, AclOperation.ALL, ResourcePatternType.PREFIXED)
    allow(secure, f"User:{user}", ResourceType.GROUP, user, AclOperation.ALL, ResourcePatternType.PREFIXED)
    conf = oidc(secure, user, "pw-" + user)
    assert produce(conf, f"{user}-topic", 20) == []
    values, error = consume(conf, f"{user}-topic", f"{user}-group", 20)
    assert error is None and sorted(values) == sorted(b"v%d" % i for i in range(20))
    # The token is the user's: a topic outside its ACLs is refused.
    assert produce(conf, f"other-{user}", 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    # A wrong client secret gets no token, and so no connection.
    elapsed, err = failure_time(oidc(secure, user, "wrong"), limit_s=10)
    assert err.code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), err


def test_forged_and_expired_tokens_fail_as_kafka_clients_expect(secure):
    if AGAINST_KAFKA:
        pytest.skip(OAUTH_IS_HERALDS)
    import base64
    import json
    import urllib.parse
    import urllib.request

    user = f"tok-{uuid.uuid4().hex[:8]}"
    add_user(secure, user, "pw-" + user)
    basic = base64.b64encode(f"{user}:pw-{user}".encode()).decode()

    def token(**form):
        request = urllib.request.Request(
            f"http://{secure.push_address}/v1/token", method="POST",
            data=urllib.parse.urlencode({"grant_type": "client_credentials", **form}).encode(),
            headers={"Authorization": f"Basic {basic}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["access_token"]

    good = token()
    header, claims, signature = good.split(".")
    padded = claims + "=" * (-len(claims) % 4)
    edited = json.loads(base64.urlsafe_b64decode(padded))
    edited["sub"] = "admin"
    forged = f"{header}.{base64.urlsafe_b64encode(json.dumps(edited).encode()).decode().rstrip('=')}.{signature}"
    expired = token(expires_in="1")
    time.sleep(2.1)
    for case, bad in {"forged": forged, "expired": expired}.items():
        conf = {
            "bootstrap.servers": f"127.0.0.1:{secure.ports['sasl_ssl']}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(secure.pki / "ca.pem"),
            "sasl.mechanism": "OAUTHBEARER",
            # Far in the future for librdkafka: only the broker may judge.
            "oauth_cb": lambda _config, bad=bad: (bad, time.time() + 3600, user),
        }
        _, err = failure_time(conf)
        assert err.code() == KafkaError._AUTHENTICATION, f"{case}: {err}"
        assert "invalid_token" in err.str(), f"{case}: {err}"
        # librdkafka asks for the token on its own timer; what the broker
        # controls is the exchange, which librdkafka times itself.
        exchange_ms = int(re.search(r"after (\d+)ms in state AUTH", err.str()).group(1))
        assert exchange_ms < FAILURE_WITHIN_S * 1000, f"{case}: {err}"


def test_kafka_python_over_sasl_ssl_with_scram(secure):
    from kafka import KafkaConsumer, KafkaProducer

    user = f"kp-{uuid.uuid4().hex[:8]}"
    add_user(secure, user, "pw-" + user)
    allow(secure, f"User:{user}", ResourceType.TOPIC, user, AclOperation.ALL, ResourcePatternType.PREFIXED)
    allow(secure, f"User:{user}", ResourceType.GROUP, user, AclOperation.ALL, ResourcePatternType.PREFIXED)
    common = dict(
        bootstrap_servers=f"127.0.0.1:{secure.ports['sasl_ssl']}",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=user,
        sasl_plain_password="pw-" + user,
        ssl_cafile=str(secure.pki / "ca.pem"),
    )
    producer = KafkaProducer(**common)
    topic = f"{user}-t"
    for i in range(10):
        producer.send(topic, key=b"k", value=b"kp%d" % i).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"{user}-g", auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **common)
    got = [m.value for _, m in zip(range(10), consumer)]
    consumer.close()
    assert sorted(got) == sorted(b"kp%d" % i for i in range(10))


def test_mutual_tls_maps_the_certificate_to_its_principal(secure):
    allow(secure, "User:alice-tls", ResourceType.TOPIC, "mtls-", AclOperation.ALL, ResourcePatternType.PREFIXED)
    allow(secure, "User:alice-tls", ResourceType.GROUP, "mtls-", AclOperation.ALL, ResourcePatternType.PREFIXED)
    conf = {
        "bootstrap.servers": f"127.0.0.1:{secure.ports['ssl']}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.pki / "ca.pem"),
        "ssl.certificate.location": str(secure.pki / "client.pem"),
        "ssl.key.location": str(secure.pki / "client.key"),
    }
    assert produce(conf, "mtls-orders", 5) == []
    values, error = consume(conf, "mtls-orders", "mtls-group", 5)
    assert error is None and len(values) == 5
    # The same principal without its ACL on another topic: refused.
    assert set(produce(conf, "other-orders", 1)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_each_bad_login_fails_fast_and_alike_while_others_are_served(secure):
    user = f"f-{uuid.uuid4().hex[:8]}"
    add_user(secure, user, "right")
    cases = {
        "wrong password": sasl(secure, user, "wrong"),
        "unknown user": sasl(secure, "nobody-" + user, "right"),
        # Against Kafka, a user of its JAAS list (admin) with a wrong password.
        "wrong password, PLAIN": sasl(secure, "admin" if AGAINST_KAFKA else user, "wrong", "PLAIN"),
    }
    messages = {}
    for case, conf in cases.items():
        elapsed, err = failure_time(conf)
        assert elapsed < FAILURE_WITHIN_S, f"{case}: told after {elapsed:.2f}s"
        assert err.code() == KafkaError._AUTHENTICATION, f"{case}: {err}"
        # What the broker said, without librdkafka's address and timing.
        said = re.search(r"SASL authentication error: (.*?) \(after", err.str())
        messages[case] = said.group(1) if said else err.str()
    assert "invalid credentials" in messages["wrong password"], messages
    # An unknown user is told exactly what a wrong password is told.
    assert messages["wrong password"] == messages["unknown user"], messages
    # A mechanism the listener does not offer.
    elapsed, err = failure_time(sasl(secure, user, "right", "OAUTHBEARER",
                                     **{"enable.sasl.oauthbearer.unsecure.jwt": True}))
    assert elapsed < FAILURE_WITHIN_S and err.code() == KafkaError._AUTHENTICATION, err
    # Plaintext on the TLS ports, and TLS on the SASL_PLAINTEXT one.
    for port, protocol in [("sasl_ssl", "SASL_PLAINTEXT"), ("ssl", "PLAINTEXT")]:
        conf = {"bootstrap.servers": f"127.0.0.1:{secure.ports[port]}",
                "security.protocol": protocol, "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": "right"}
        elapsed, err = failure_time(conf)
        assert elapsed < FAILURE_WITHIN_S, f"plaintext on {port}: told after {elapsed:.2f}s ({err})"
    if not AGAINST_KAFKA:
        assert "plaintext on a TLS listener" in secure.log_tail(400)
    # Meanwhile the broker serves everyone else.
    assert produce(sasl(secure, "admin", ADMIN_PASSWORD), f"{user}-still", 3) == []


def test_acls_give_kafkas_error_codes(secure):
    user = f"acl-{uuid.uuid4().hex[:8]}"
    add_user(secure, user, "pw")
    principal = f"User:{user}"
    readable, other, denied = f"{user}-readable", f"{user}-other", f"{user}-denied"
    admin_conf = sasl(secure, "admin", ADMIN_PASSWORD)
    super_client = AdminClient(admin_conf)
    wait_all(super_client.create_topics([NewTopic(t, 1) for t in (readable, other, denied)]))
    assert produce(admin_conf, readable, 3) == [], "a super user may do anything"
    allow(secure, principal, ResourceType.TOPIC, readable, AclOperation.READ)
    allow(secure, principal, ResourceType.TOPIC, user, AclOperation.WRITE, ResourcePatternType.PREFIXED)
    allow(secure, principal, ResourceType.TOPIC, denied, AclOperation.WRITE,
          permission=AclPermissionType.DENY)
    allow(secure, principal, ResourceType.GROUP, f"{user}-g", AclOperation.READ)
    conf = sasl(secure, user, "pw")
    # Prefixed WRITE allows; a DENY wins over it.
    assert produce(conf, other, 2) == []
    assert set(produce(conf, denied, 1)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    # READ (which implies DESCRIBE) with the group's READ: consumed.
    values, error = consume(conf, readable, f"{user}-g", 3)
    assert error is None and len(values) == 3
    # A group without an ACL.
    _, error = consume(conf, readable, f"{user}-nogroup", 1, timeout_s=10)
    assert error == KafkaError.GROUP_AUTHORIZATION_FAILED
    # Metadata names only what the principal may describe.
    listed = set(AdminClient(conf).list_topics(timeout=10).topics)
    assert readable in listed and other in listed
    assert denied in listed, "WRITE on the prefix implies DESCRIBE"
    assert all(t.startswith(user) for t in listed), listed
    # ACLs as DescribeAcls lists them.
    described = super_client.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
        AclOperation.ANY, AclPermissionType.ANY)).result(timeout=15)
    assert len(described) == 4
    # Without ACL rights, CreateAcls is refused.
    user_client = AdminClient(conf)
    futures = user_client.create_acls([AclBinding(
        ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, principal, "*",
        AclOperation.ALL, AclPermissionType.ALLOW)])
    with pytest.raises(KafkaException) as refused:
        for future in futures.values():
            future.result(timeout=15)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_java_client_over_sasl_ssl_with_scram_sha_512(secure, java_deps, tmp_path):
    """HeraldCompat (Admin, an idempotent producer, a consumer) as a user
    whose ACLs cover its topics: idempotence needs WRITE on some topic."""
    user = f"java-{uuid.uuid4().hex[:8]}"
    add_user(secure, user, "pw-" + user)
    allow(secure, f"User:{user}", ResourceType.TOPIC, user, AclOperation.ALL, ResourcePatternType.PREFIXED)
    props = tmp_path / "client.properties"
    props.write_text("\n".join([
        "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="pw-{user}";',
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={secure.pki / 'ca.pem'}",
    ]) + "\n")
    run = subprocess.run(
        ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", f"{java_deps / 'classes'}:{java_deps / 'lib'}/*",
         "HeraldCompat", f"127.0.0.1:{secure.ports['sasl_ssl']}", f"{user}-java", "2000"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
        env={**os.environ, "HERALD_COMPAT_CLIENT_PROPS": str(props)},
    )
    output = f"stdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"
    assert run.returncode == 0, output
    assert "HERALD-COMPAT java ok" in run.stdout and "consumed=2000" in run.stdout, output


KAFKA_LIB_DIR = Path(__file__).resolve().parents[2] / "bench" / "kafka" / "lib"


def kafka_tool(main_class, *args):
    """Runs one of Apache Kafka's command-line tools (the class behind
    kafka-acls.sh, kafka-configs.sh); answers (exit code, output)."""
    run = subprocess.run(
        ["java", *KAFKA_TOOL_JVM_FLAGS, "-Xmx256m", "-cp", f"{KAFKA_LIB_DIR}/*", main_class, *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )
    return run.returncode, run.stdout + run.stderr


def command_config(path: Path, user, password, mechanism="SCRAM-SHA-512"):
    path.write_text("\n".join([
        "security.protocol=SASL_PLAINTEXT",
        f"sasl.mechanism={mechanism}",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";',
    ]) + "\n")
    return str(path)


def test_kafkas_own_tools_manage_credentials_and_acls(secure, tmp_path):
    assert (KAFKA_LIB_DIR / "kafka-tools-4.3.1.jar").is_file(), \
        "Kafka's tools are missing: run scripts/install-test-deps.sh"
    bootstrap = f"127.0.0.1:{secure.ports['sasl']}"
    admin_props = command_config(tmp_path / "admin.properties", "admin", ADMIN_PASSWORD)
    user = f"tool-{uuid.uuid4().hex[:8]}"
    # kafka-configs.sh --alter --add-config 'SCRAM-SHA-...=[...]' --entity-type
    # users, one mechanism per command: Kafka refuses a user named twice in
    # one request (and so does herald).
    for credential in ("SCRAM-SHA-512=[password=s3cret]",
                       "SCRAM-SHA-256=[iterations=8192,password=s3cret]"):
        code, out = kafka_tool(
            "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap,
            "--command-config", admin_props, "--alter", "--entity-type", "users",
            "--entity-name", user, "--add-config", credential)
        assert code == 0 and f"Completed updating config for user {user}" in out, out
    code, out = kafka_tool(
        "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap,
        "--command-config", admin_props, "--alter", "--entity-type", "users",
        "--entity-name", user, "--add-config",
        "SCRAM-SHA-512=[password=other],SCRAM-SHA-256=[password=other]")
    assert code != 0 and "DuplicateResourceException" in out, out
    # kafka-acls.sh --add: prefixed READ and WRITE on topics, READ on groups.
    for resource, operations in (
        (["--topic", user], ["--operation", "Read", "--operation", "Write"]),
        (["--group", user], ["--operation", "Read"]),
    ):
        code, out = kafka_tool(
            "org.apache.kafka.tools.AclCommand", "--bootstrap-server", bootstrap,
            "--command-config", admin_props, "--add", "--allow-principal", f"User:{user}",
            *operations, *resource, "--resource-pattern-type", "prefixed")
        assert code == 0, out
    code, out = kafka_tool(
        "org.apache.kafka.tools.AclCommand", "--bootstrap-server", bootstrap,
        "--command-config", admin_props, "--list", "--principal", f"User:{user}")
    assert code == 0 and out.count(f"principal=User:{user}") == 3, out
    # The new user, with the SHA-256 credential the tool set (8192
    # iterations), on a topic the administrator made (READ and WRITE do not
    # let it create one: that takes CREATE).
    super_client = admin(secure)
    wait_all(super_client.create_topics([NewTopic(f"{user}-t", 1)]))
    user_conf = sasl(secure, user, "s3cret", "SCRAM-SHA-256")
    assert produce(user_conf, f"{user}-t", 3) == []
    values, error = consume(user_conf, f"{user}-t", f"{user}-g", 3)
    assert error is None and len(values) == 3
    # Only a user with ALTER on the cluster may change ACLs.
    user_props = command_config(tmp_path / "user.properties", user, "s3cret", "SCRAM-SHA-256")
    code, out = kafka_tool(
        "org.apache.kafka.tools.AclCommand", "--bootstrap-server", bootstrap,
        "--command-config", user_props, "--add", "--allow-principal", f"User:{user}",
        "--operation", "All", "--cluster")
    assert code != 0 and "ClusterAuthorizationException" in out, out
    # kafka-acls.sh --remove, kafka-configs.sh --delete-config: the user's
    # WRITE is gone, then its SHA-256 credential.
    code, out = kafka_tool(
        "org.apache.kafka.tools.AclCommand", "--bootstrap-server", bootstrap,
        "--command-config", admin_props, "--remove", "--force", "--allow-principal",
        f"User:{user}", "--operation", "Write", "--topic", user,
        "--resource-pattern-type", "prefixed")
    assert code == 0, out
    assert set(produce(user_conf, f"{user}-t", 1)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    code, out = kafka_tool(
        "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap,
        "--command-config", admin_props, "--alter", "--entity-type", "users",
        "--entity-name", user, "--delete-config", "SCRAM-SHA-256")
    assert code == 0, out
    elapsed, err = failure_time(user_conf)
    assert err.code() == KafkaError._AUTHENTICATION and elapsed < FAILURE_WITHIN_S


def kcat(*args, stdin_text=None):
    run = subprocess.run(["kcat", *args], input=stdin_text, capture_output=True,
                         text=True, timeout=60)
    return run.returncode, run.stdout, run.stderr


@pytest.mark.parametrize("how", ["sasl_ssl_scram_sha_256", "sasl_ssl_scram_sha_512", "mtls"])
def test_kcat_produces_and_consumes(secure, how):
    if AGAINST_KAFKA and how != "mtls":
        pytest.skip("Debian's kcat (librdkafka 2.0) writes its SCRAM nonce twice in its final "
                    "message: Kafka 4.3.1 refuses that, herald accepts exactly that form")
    user = f"kc-{uuid.uuid4().hex[:8]}"
    if how == "mtls":
        principal, topic = "User:alice-tls", f"mtls-kcat-{user}"
        settings = ["-b", f"127.0.0.1:{secure.ports['ssl']}", "-X", "security.protocol=SSL",
                    "-X", f"ssl.certificate.location={secure.pki / 'client.pem'}",
                    "-X", f"ssl.key.location={secure.pki / 'client.key'}"]
    else:
        add_user(secure, user, "pw-" + user)
        principal, topic = f"User:{user}", f"{user}-t"
        mechanism = "SCRAM-SHA-256" if how.endswith("256") else "SCRAM-SHA-512"
        settings = ["-b", f"127.0.0.1:{secure.ports['sasl_ssl']}",
                    "-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanisms={mechanism}",
                    "-X", f"sasl.username={user}", "-X", f"sasl.password=pw-{user}"]
    settings += ["-X", f"ssl.ca.location={secure.pki / 'ca.pem'}"]
    allow(secure, principal, ResourceType.TOPIC, topic, AclOperation.ALL)
    lines = [f"line-{i}" for i in range(10)]
    code, _, err = kcat(*settings, "-P", "-t", topic, stdin_text="\n".join(lines) + "\n")
    assert code == 0, err
    code, out, err = kcat(*settings, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert code == 0, err
    assert out.split() == lines


def herald_cli(secure, *args, user="admin", password=None, env=None, tls=False):
    """Runs `herald ARGS` against the SASL listener as `user`."""
    port = secure.ports["sasl_ssl" if tls else "sasl"]
    command = [str(herald_binary_path()), *args,
               "--bootstrap", f"127.0.0.1:{port}",
               "--security-protocol", "SASL_SSL" if tls else "SASL_PLAINTEXT",
               "--sasl-username", user]
    if tls:
        command += ["--ssl-ca", str(secure.pki / "ca.pem")]
    run = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        env={**os.environ, "HERALD_SASL_PASSWORD": password or ADMIN_PASSWORD, **(env or {})},
    )
    return run.returncode, run.stdout + run.stderr


def test_herald_user_and_acl_commands_over_kafkas_apis(secure):
    if AGAINST_KAFKA:
        pytest.skip("herald's own CLI; Kafka's tools are tested above")
    user = f"cli-{uuid.uuid4().hex[:8]}"
    code, out = herald_cli(secure, "user", "set", user, env={"HERALD_USER_PASSWORD": "cli-pw"})
    assert code == 0 and out.count("credentials of user") == 2, out
    code, out = herald_cli(secure, "user", "list", tls=True)
    assert code == 0 and user in out and "SCRAM-SHA-256 (8192 iterations)" in out, out
    code, out = herald_cli(secure, "acl", "add", "--principal", f"User:{user}",
                           "--operation", "all", "--topic", user, "--prefixed")
    assert code == 0 and "TOPIC PREFIXED" in out, out
    # The user itself, through the CLI, with the password it was given.
    code, out = herald_cli(secure, "topic", "create", f"{user}-t", "--partitions", "2",
                           user=user, password="cli-pw")
    assert code == 0, out
    code, out = herald_cli(secure, "topic", "create", "elsewhere-t", user=user, password="cli-pw")
    assert code != 0 and "TopicAuthorizationFailed" in out, out
    code, out = herald_cli(secure, "acl", "list", "--principal", f"User:{user}")
    assert code == 0 and out.count(f"principal=User:{user}") == 1, out
    code, out = herald_cli(secure, "acl", "remove", "--principal", f"User:{user}")
    assert code == 0 and "removed 1 ACLs" in out, out
    code, out = herald_cli(secure, "user", "delete", user)
    assert code == 0 and out.count("deleted") == 2, out
    code, out = herald_cli(secure, "topic", "list", user=user, password="cli-pw")
    assert code != 0 and "Authentication failed" in out, out


def test_the_admin_api_needs_credentials_and_a_cluster_acl_when_authorization_is_on(secure):
    """With authorization on, the admin API (snapshots, restores, the
    flow-control gate) asks who calls: no or wrong credentials get 401, a
    user without an ACL on the cluster 403, and the administrator (a super
    user) or a user allowed ALTER on the cluster gets through, over HTTP
    Basic or the CLI."""
    if AGAINST_KAFKA:
        pytest.skip("herald's own admin API")
    import base64
    import json
    import urllib.error
    import urllib.request

    def call(method, path, body=None, user=None, password=None):
        request = urllib.request.Request(
            f"http://{secure.admin_address}{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json"},
        )
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    topic = f"pinned-{uuid.uuid4().hex[:8]}"
    client = admin(secure)  # must outlive its futures
    wait_all(client.create_topics([NewTopic(topic, 1, 1)]))
    status, answer = call("GET", "/v1/snapshots")
    assert status == 401 and "authorization is on" in answer["error"], answer
    status, answer = call("GET", "/v1/snapshots", user="admin", password="wrong")
    assert status == 401 and "invalid user name or password" in answer["error"], answer
    user = f"snap-{uuid.uuid4().hex[:8]}"
    add_user(secure, user, "snap-pw")
    status, answer = call("POST", "/v1/snapshots", {"topics": [topic]}, user=user, password="snap-pw")
    assert status == 403 and "may not ALTER" in answer["error"], answer
    # The flow-control gate is the broker's to change: the same rule.
    status, answer = call("PUT", "/v1/flow-control", {"mode": "fixed", "limit": 50})
    assert status == 401, answer
    status, answer = call("PUT", "/v1/flow-control", {"mode": "fixed", "limit": 50},
                          user=user, password="snap-pw")
    assert status == 403 and "may not ALTER" in answer["error"], answer
    status, answer = call("GET", "/v1/flow-control", user="admin", password=ADMIN_PASSWORD)
    assert status == 200 and answer["mode"] == "off", answer
    allow(secure, f"User:{user}", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)
    status, answer = call("PUT", "/v1/flow-control", {"mode": "fixed", "limit": 50},
                          user=user, password="snap-pw")
    assert status == 200 and (answer["mode"], answer["limit"]) == ("fixed", 50), answer
    status, answer = call("PUT", "/v1/flow-control", {"mode": "off"}, user=user, password="snap-pw")
    assert status == 200 and answer["mode"] == "off", answer
    status, answer = call("POST", "/v1/snapshots", {"topics": [topic], "id": user},
                          user=user, password="snap-pw")
    assert status == 201, answer
    status, answer = call("GET", f"/v1/snapshots/{user}", user="admin", password=ADMIN_PASSWORD)
    assert status == 200 and answer["topics"][0]["name"] == topic, answer

    def cli(*args):
        run = subprocess.run([str(herald_binary_path()), "snapshot", *args, "--admin", secure.admin_address],
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "HERALD_SASL_PASSWORD": ADMIN_PASSWORD})
        return run.returncode, run.stdout + run.stderr

    code, out = cli("delete", user, "--admin-user", "admin")
    assert code == 0 and "deleted" in out, out
    code, out = cli("list")
    assert code != 0 and "401" in out, out
