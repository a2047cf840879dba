"""Exactly-once consume-transform-produce on a real broker: the transactional offset commits in
`__consumer_offsets` carry the producer's id and epoch but no sequence the broker checks.

The group coordinator writes them (`AppendOrigin.COORDINATOR`: "offset commits ... do not have sequence
numbers and therefore only producer epoch validation is done", `ProducerAppendInfo`), each batch from
sequence 0. Read as a client's batches they would be duplicates and regressions of one another.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker, wait_for_markers
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from tests.table_rows import kinds_above_info

RECORDS = 3000
ABORT_EVERY = 5  # every fifth transaction is aborted and its input consumed again


class EosDump(NamedTuple):
    log_dir: Path
    committed: int
    aborted: int


@pytest.fixture(scope="module")
def eos(tmp_path_factory: pytest.TempPathFactory) -> EosDump:
    work = tmp_path_factory.mktemp("eos-broker")
    with KafkaBroker(work) as broker:
        broker.create_topic("eos-in", partitions=2)
        broker.create_topic("eos-out", partitions=2)
        source = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        for i in range(RECORDS):
            source.produce("eos-in", key=str(i % 37).encode(), value=f"in-{i}".encode())
        source.flush(30)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "eos",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        consumer.subscribe(["eos-in"])
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "eos-1", "linger.ms": 5}
        )
        producer.init_transactions(30)
        done = transactions = aborted = 0
        while done < RECORDS:
            messages = consumer.consume(200, 1.0)
            if not messages:
                continue
            producer.begin_transaction()
            for m in messages:
                producer.produce("eos-out", key=m.key(), value=m.value().replace(b"in-", b"out-"))
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
            )
            transactions += 1
            if transactions % ABORT_EVERY == 0:
                producer.abort_transaction(30)
                aborted += 1
                for part in consumer.committed(consumer.assignment(), 10):
                    consumer.seek(TopicPartition(part.topic, part.partition, max(part.offset, 0)))
            else:
                producer.commit_transaction(30)
                done += len(messages)
        consumer.close()
        # The last transaction's markers are written after `commit_transaction` returns; a broker stopped
        # before then leaves its transaction open in the dump.
        wait_for_markers(broker.admin(), [("eos-out", 0), ("eos-out", 1), ("__consumer_offsets", 0)])
    return EosDump(broker.log_dir, transactions - aborted, aborted)


def test_the_offset_commits_repeat_sequences_under_one_producer_and_epoch(eos: EosDump) -> None:
    """The precondition: in `__consumer_offsets`, transactional batches of one (producer, epoch) start
    at sequence 0 again and again."""
    batches = [
        b
        for part in eos.log_dir.glob("__consumer_offsets-*")
        for seg in sorted(part.glob("*.log"))
        for b in read_log_segment(seg)
        if isinstance(b, BatchHeader) and b.producer_id >= 0 and not b.is_control
    ]
    starts = Counter((b.producer_id, b.producer_epoch, b.base_sequence) for b in batches)
    assert eos.aborted >= 1 and eos.committed >= 5
    assert max(starts.values()) >= eos.committed, starts


def test_exactly_once_processing_has_no_finding_above_info(spark: Any, eos: EosDump, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_ingest(spark, IngestOptions(inputs=[LabeledPath("eos", str(eos.log_dir))], output=str(out)))
    findings = [r.asDict() for r in audit(read_bronze(spark, str(out)), load_profile()).findings.collect()]
    assert kinds_above_info(findings) == Counter()
    # Every transaction ended with a marker in the output topic (a client's batches, checked in full).
    markers = read_bronze(spark, str(out)).batches.where("topic = 'eos-out' AND is_control").count()
    assert markers >= eos.committed + eos.aborted
