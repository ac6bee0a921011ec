"""Tenants and namespaces: `herald tenant` sets up two tenants on one
broker, each with its principals and its topic-name prefix; real Kafka
clients (confluent-kafka) and push sessions (grpcio) then show that
neither tenant can see or touch the other's topics or groups, that topics
inherit their namespace's configs (as DescribeConfigs shows them), and
that all of it survives a restart.

The broker is the secure one of `secure_push.py`: SASL_SSL push listener,
SASL_PLAINTEXT Kafka listener, authorization on.
"""

import os
import subprocess
import uuid

from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from conftest import herald_binary_path
from secure_clients import consume, produce
from secure_push import (  # noqa: F401 (secure is a fixture)
    ADMIN_PASSWORD,
    add_user,
    scram_session,
    secure,
)

TIMEOUT_S = 20


def herald_tenant(secure, *args, user="admin", password=ADMIN_PASSWORD):
    """`herald tenant ...` against the broker's push listener, over TLS, as
    `user`; answers (exit code, output)."""
    run = subprocess.run(
        [str(herald_binary_path()), "tenant", *args,
         "--push-server", secure.push_address,
         "--push-ca", str(secure.pki / "ca.pem"),
         "--push-user", user],
        env={**os.environ, "HERALD_SASL_PASSWORD": password},
        capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def kafka(secure, user, password):
    return {
        "bootstrap.servers": f"127.0.0.1:{secure.ports['sasl']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }


def create_topic(conf, name):
    client = AdminClient(conf)
    futures = client.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    futures[name].result(timeout=TIMEOUT_S)


def retention(conf, topic):
    """(value, source) of the topic's retention.ms, as DescribeConfigs says."""
    client = AdminClient(conf)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = client.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    entry = entries["retention.ms"]
    return entry.value, entry.source


def test_two_tenants_cannot_see_or_touch_each_others_topics_and_groups(secure, proto):
    pb = proto.pb
    run = uuid.uuid4().hex[:6]
    acme, globex = f"acme{run}", f"globex{run}"
    alice, bob = f"alice{run}", f"bob{run}"
    for user in (alice, bob):
        add_user(secure, user, "pw-" + user)

    # The operator sets both tenants up in one step each.
    code, out = herald_tenant(secure, "create", acme, "--principal", f"User:{alice}",
                              "--namespace", f"{acme}.", "--config", "retention.ms=3600000")
    assert code == 0 and f"created tenant {acme}" in out, out
    code, out = herald_tenant(secure, "create", globex, "--principal", f"User:{bob}",
                              "--namespace", f"{globex}.")
    assert code == 0, out
    # A namespace inside another tenant's is refused; so is a tenant made
    # by someone who is not an administrator.
    code, out = herald_tenant(secure, "create", f"evil{run}", "--principal", f"User:{bob}",
                              "--namespace", f"{acme}.secret.")
    assert code != 0 and "overlaps" in out, out
    code, out = herald_tenant(secure, "create", f"evil{run}", "--principal", f"User:{bob}",
                              "--namespace", f"evil{run}.", user=bob, password="pw-" + bob)
    assert code != 0 and "PermissionDenied" in out, out

    as_alice, as_bob = kafka(secure, alice, "pw-" + alice), kafka(secure, bob, "pw-" + bob)
    orders_a, orders_b = f"{acme}.orders", f"{globex}.orders"
    create_topic(as_alice, orders_a)
    create_topic(as_bob, orders_b)
    assert produce(as_alice, orders_a, 10) == []
    assert produce(as_bob, orders_b, 10) == []

    # Each sees its own topics only.
    seen_by_bob = set(AdminClient(as_bob).list_topics(timeout=TIMEOUT_S).topics)
    assert orders_b in seen_by_bob and orders_a not in seen_by_bob
    seen_by_alice = set(AdminClient(as_alice).list_topics(timeout=TIMEOUT_S).topics)
    assert orders_a in seen_by_alice and orders_b not in seen_by_alice
    # Neither may write, read or use the groups of the other.
    assert produce(as_bob, orders_a, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    values, error = consume(as_bob, orders_a, f"{globex}.g", 10)
    assert values == [] and error == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    values, error = consume(as_bob, orders_b, f"{acme}.g", 10)
    assert values == [] and error == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    values, error = consume(as_alice, orders_a, f"{acme}.g", 10)
    assert error is None and len(values) == 10

    # Over push too.
    alice_session, welcome = scram_session(proto, secure, alice, "pw-" + alice)
    bob_session, _ = scram_session(proto, secure, bob, "pw-" + bob)
    try:
        assert welcome.welcome.principal == f"User:{alice}"
        alice_session.subscribe(1, orders_a, subject=b"k")
        bob_session.subscribe(1, orders_a, subject=b"k")
        bob_session.send(publish=pb.PublishRequest(request_id=1, topic=orders_a, key=b"k", value=b"x"))
        bob_session.wait_for(lambda s: len(s.of_kind("error")) == 1 and s.of_kind("published"),
                             what="bob's refusals")
        assert bob_session.of_kind("error")[0].code == pb.ERROR_CODE_NOT_AUTHORIZED
        assert bob_session.of_kind("published")[0].error.code == pb.ERROR_CODE_NOT_AUTHORIZED
        alice_session.wait_for(lambda s: s.of_kind("subscribed"), what="alice's subscription")
        assert produce(as_alice, orders_a, 3) == []
        alice_session.wait_for(lambda s: len(s.deliveries) == 3, what="alice's deliveries")
        bob_session.drain_quiet(0.5)
        assert bob_session.deliveries == []
    finally:
        alice_session.close()
        bob_session.close()

    # Topics inherit their namespace's configs, as DescribeConfigs shows:
    # a dynamic default, which the namespace's changes move and the
    # topic's own setting overrides.
    assert retention(as_alice, orders_a) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert retention(as_bob, orders_b)[1] == ConfigSource.DEFAULT_CONFIG.value
    code, out = herald_tenant(secure, "configure", f"{acme}.", "--set", "retention.ms=7200000")
    assert code == 0 and "retention.ms=7200000" in out, out
    assert retention(as_alice, orders_a) == ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    own = f"{acme}.own"
    create_topic(as_alice, own)
    client = AdminClient(as_alice)
    resource = ConfigResource(ConfigResource.Type.TOPIC, own, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert retention(as_alice, own) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    code, out = herald_tenant(secure, "configure", f"{acme}.", "--set", "retention.ms=soon")
    assert code != 0 and "retention.ms" in out, out

    # Everything survives a restart.
    secure.stop()
    secure.start()
    code, out = herald_tenant(secure, "list")
    assert code == 0 and acme in out and globex in out and "retention.ms=7200000" in out, out
    assert retention(as_alice, orders_a) == ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert produce(as_bob, orders_a, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert produce(as_alice, orders_a, 1) == []

    # Deleting a tenant takes its principals' access with it; the topics
    # stay.
    code, out = herald_tenant(secure, "delete", globex)
    assert code == 0, out
    assert produce(as_bob, orders_b, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert orders_b in AdminClient(kafka(secure, "admin", ADMIN_PASSWORD)).list_topics(timeout=TIMEOUT_S).topics
