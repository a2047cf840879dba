"""EMPTY_TXN_MARKER (info): a COMMIT or ABORT marker that closes no data of its producer in the partition.

The transaction coordinator writes a transaction's markers to every partition the transaction added
(`TransactionMarkerChannelManager`), whether or not the producer's data reached it. On a real broker:
librdkafka registers a partition with the coordinator (AddPartitionsToTxn) as soon as a record is
produced to it, and `abort_transaction` purges the records still queued, so a transaction aborted
within `linger.ms` leaves an ABORT marker and nothing else.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest
from confluent_kafka import KafkaError, Producer

from audit_rules.pipeline import Bronze, audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker, wait_for_markers
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from schemas.tables import BATCHES, QUARANTINE
from tests.reference_replay import reference_findings
from tests.strategies import LogBuilder
from tests.table_rows import crc_quarantine, kinds_above_info

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

TOPIC = "empty-txn"


def _empty_markers(findings: list[dict[str, Any]]) -> list[tuple[str, int, int, int | None]]:
    return sorted(
        (f["topic"], f["producer_id"], f["first_offset"], f["related_offset"])
        for f in findings
        if f["kind"] == "EMPTY_TXN_MARKER"
    )


def test_a_marker_with_no_data_of_its_transaction_is_reported_once(spark: SparkSession) -> None:
    compacted = "compacted-empty"
    profile = load_profile("kafka-3.4")
    profile = replace(profile, compacted_topics=(*profile.compacted_topics, compacted))

    def empty_abort(topic: str) -> LogBuilder:
        # Producer 5: a committed transaction, an ABORT with nothing before it since the COMMIT (at 2),
        # an aborted transaction with data, a committed one.
        log = LogBuilder(topic=topic, file=f"/d/{topic}-0/0.log")
        log.data(5, 0, 0, 2, transactional=True)
        log.marker(5, 0, "COMMIT")
        log.marker(5, 0, "ABORT")
        log.data(5, 0, 2, transactional=True)
        log.marker(5, 0, "ABORT")
        log.data(5, 0, 3, transactional=True)
        log.marker(5, 0, "COMMIT")
        return log

    plain = empty_abort("orders")
    # The cleaner removes aborted data and keeps its marker (every log's segment is rolled, below).
    cleaned = empty_abort(compacted)
    # Producer 6's first row is a marker, in a log holding every offset from 0; producer 7's, in a log
    # whose first batch is at 1000 (its data may have been below).
    first = LogBuilder(topic="first-marker", file="/d/first-marker-0/0.log")
    first.data(9, 0, 0)
    first.marker(6, 3, "ABORT")
    later = LogBuilder(topic="late-start", start_offset=1000, file="/d/late-start-0/1000.log")
    later.marker(7, 3, "ABORT")
    later.data(9, 0, 0)
    # Transactions V2 (KIP-890): each marker one epoch above its data. A zombie's marker (epoch 1 after
    # 2) is EPOCH_REGRESSION's, not an empty transaction.
    v2 = LogBuilder(topic="v2", file="/d/v2-0/0.log")
    v2.data(8, 0, 0, transactional=True)
    v2.marker(8, 1, "COMMIT")
    v2.data(8, 1, 0, transactional=True)
    v2.marker(8, 2, "COMMIT")
    v2.marker(8, 1, "ABORT")

    # The coordinator wrote producer 10's COMMIT twice (a retry after a failover).
    repeated = LogBuilder(topic="repeated", file="/d/repeated-0/0.log")
    repeated.data(10, 0, 0, transactional=True)
    repeated.marker(10, 0, "COMMIT")
    repeated.marker(10, 0, "COMMIT")

    # Producer 11's markers whose transaction's data the replay did not take: a batch whose sequences do
    # not fit its offsets (2-4), a zombie's batch of a lower epoch (6), a batch whose CRC failed (8). The
    # broker appended each; the data is there: no empty transaction.
    skipped = LogBuilder(topic="skipped", file="/d/skipped-0/0.log")
    skipped.data(11, 1, 0, transactional=True)
    skipped.marker(11, 1, "COMMIT")
    skipped.data(11, 1, 1, 3, last_sequence=9, transactional=True)
    skipped.marker(11, 1, "ABORT")
    skipped.data(11, 0, 0, transactional=True)
    skipped.marker(11, 1, "ABORT")
    skipped.data(11, 1, 1, transactional=True, crc_valid=False)
    skipped.marker(11, 1, "COMMIT")

    logs = (plain, cleaned, first, later, v2, repeated, skipped)
    rows = [row for log in logs for row in log.rows]
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema), rolled=True)
    quarantine = spark.createDataFrame(crc_quarantine(rows), QUARANTINE.schema)
    found = audit(replace(bronze, quarantine=quarantine), profile)
    findings = [f.asDict() for f in found.findings.collect()]
    assert _empty_markers(findings) == [
        ("first-marker", 6, 1, None),
        ("orders", 5, 3, 2),
        ("repeated", 10, 2, 1),
    ]
    messages = {f["topic"]: f["message"] for f in findings if f["kind"] == "EMPTY_TXN_MARKER"}
    assert "is not transactional data" in messages["orders"], messages
    assert "wrote it again" in messages["repeated"] and "wrote it again" not in messages["orders"], messages
    assert {f["severity"] for f in findings if f["kind"] == "EMPTY_TXN_MARKER"} == {"info"}
    assert [f["kind"] for f in findings if f["topic"] == "v2" and f["severity"] != "info"] == [
        "EPOCH_REGRESSION"
    ]
    # The reference replay finds the same.
    expected = sorted(
        (log._log["topic"], f["producer_id"], f["first_offset"], f["related_offset"])
        for log in logs
        for f in reference_findings(
            log.rows,
            profile=profile,
            log_start_offset=log.rows[0]["base_offset"],
            compacted=profile.is_compacted(log._log["topic"]),
        )
        if f["kind"] == "EMPTY_TXN_MARKER"
    )
    assert _empty_markers(findings) == expected


class EmptyDump(NamedTuple):
    log_dir: Path
    producer_id: int
    empty_marker: int


@pytest.fixture(scope="module")
def empty_abort(tmp_path_factory: pytest.TempPathFactory) -> EmptyDump:
    """A real broker's log of one transactional producer: a committed transaction, an aborted one whose
    only record was still queued (an ABORT marker alone), an aborted one with data, a committed one."""
    work = tmp_path_factory.mktemp("empty-txn-broker")
    purged: list[Any] = []
    with KafkaBroker(work) as broker:
        broker.create_topic(TOPIC, partitions=1)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "transactional.id": "empty-txn-1",
                "linger.ms": 10_000,  # below message.timeout.ms (transaction.timeout.ms: 60 s)
                "on_delivery": lambda err, _msg: purged.append(err),
            }
        )
        producer.init_transactions(30)

        def transaction(values: list[bytes], commit: bool, sent: bool = True) -> None:
            producer.begin_transaction()
            for value in values:
                producer.produce(TOPIC, value=value, partition=0)
            if sent:
                producer.flush(30)
            else:
                # librdkafka registers the partition with the coordinator at once; the record waits out
                # linger.ms, and the abort purges it.
                time.sleep(2)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)

        transaction([b"a", b"b"], commit=True)
        transaction([b"never"], commit=False, sent=False)
        transaction([b"c"], commit=False)
        transaction([b"d"], commit=True)
        producer.flush(10)
        wait_for_markers(broker.admin(), [(TOPIC, 0)])
    assert [e.code() for e in purged if e is not None] == [KafkaError._PURGE_QUEUE]
    batches = [
        b
        for seg in sorted((broker.log_dir / f"{TOPIC}-0").glob("*.log"))
        for b in read_log_segment(seg)
        if isinstance(b, BatchHeader)
    ]
    # The precondition, in the broker's bytes: data, COMMIT, ABORT alone, data, ABORT, data, COMMIT.
    shape = [(b.control_type if b.is_control else "data") for b in batches]
    assert shape == ["data", "COMMIT", "ABORT", "data", "ABORT", "data", "COMMIT"], shape
    assert len({b.producer_id for b in batches}) == 1
    return EmptyDump(broker.log_dir, batches[0].producer_id, batches[2].base_offset)


def test_a_real_brokers_marker_of_a_transaction_that_wrote_nothing(
    spark: SparkSession, empty_abort: EmptyDump, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run_ingest(spark, IngestOptions(inputs=[LabeledPath("empty", str(empty_abort.log_dir))], output=str(out)))
    findings = [r.asDict() for r in audit(read_bronze(spark, str(out)), load_profile()).findings.collect()]
    assert kinds_above_info(findings) == Counter()
    assert _empty_markers(findings) == [
        (TOPIC, empty_abort.producer_id, empty_abort.empty_marker, empty_abort.empty_marker - 1)
    ]
