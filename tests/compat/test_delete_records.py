"""DeleteRecords (confluent-kafka's AdminClient.delete_records, as
kafka-delete-records.sh uses it): the log start moves, consumers get the
records from there on, and the new start survives a restart."""

import time

import pytest
from confluent_kafka import KafkaException, TopicPartition

from clients import (
    CLIENT_TIMEOUT_S,
    admin_client,
    consume_from,
    create_topic,
    produce_indexed,
    producer,
    watermarks,
)

T = CLIENT_TIMEOUT_S


def delete_records(admin, topic, partition, offset):
    """Deletes records of one partition below `offset`; returns the new low watermark."""
    futures = admin.delete_records([TopicPartition(topic, partition, offset)], request_timeout=T)
    (result,) = futures.values()
    return result.result(timeout=T).low_watermark


@pytest.mark.restarts_broker
def test_deleted_records_are_gone_and_the_start_survives_a_restart(broker, unique):
    topic = unique("delrec")
    admin = create_topic(broker.bootstrap, topic, 2)
    base_ts = int(time.time() * 1000)
    log = produce_indexed(producer(broker.bootstrap), topic, "delrec", 40, base_ts, partition=0)
    assert len(log.acked()) == 40

    assert delete_records(admin, topic, 0, 25) == 25
    assert watermarks(broker.bootstrap, topic, 1)[0] == (25, 40)
    consumed = consume_from(broker.bootstrap, topic, {0: 25}, 15)
    assert [m.offset() for m in consumed] == list(range(25, 40))

    # Lower than the start: nothing moves; -1 means the high watermark.
    assert delete_records(admin, topic, 0, 10) == 25
    broker.restart()
    assert watermarks(broker.bootstrap, topic, 1)[0] == (25, 40), "start lost in a restart"
    admin = admin_client(broker.bootstrap)
    assert delete_records(admin, topic, 0, -1) == 40
    assert watermarks(broker.bootstrap, topic, 1)[0] == (40, 40)


def test_delete_records_past_the_end_or_of_an_unknown_partition_is_refused(broker, unique):
    topic = unique("delrec-bad")
    admin = create_topic(broker.bootstrap, topic, 1)
    produce_indexed(producer(broker.bootstrap), topic, "delrec-bad", 5, int(time.time() * 1000))
    with pytest.raises(KafkaException) as past_end:
        delete_records(admin, topic, 0, 6)
    assert "OFFSET_OUT_OF_RANGE" in str(past_end.value)
    # librdkafka looks the partition's leader up first and refuses it there;
    # the broker would answer UNKNOWN_TOPIC_OR_PARTITION.
    with pytest.raises(KafkaException) as unknown:
        delete_records(admin, topic, 3, 1)
    assert "UNKNOWN_TOPIC_OR_PART" in str(unknown.value) or "No leaders" in str(unknown.value)
    assert watermarks(broker.bootstrap, topic, 1)[0] == (0, 5), "a refused delete changed the log"
