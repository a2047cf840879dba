"""A topic deleted and created again under its name between two dumps, on a real broker: another topic
(its own topic id in partition.metadata, KIP-516; offsets again from 0), not a rewritten one.

The first dump holds 1,000 records per partition, each under its key, acknowledged in the ledger; the
topic is then deleted and created again, and 250 other records per partition are written. Read as one
topic over time, the second dump rewrote every offset of the first (`REPLICA_DIVERGENCE`), lost its
producer (`UNKNOWN_PRODUCER_LOSS`) and every acknowledged record of the old topic
(`ACKED_RECORD_MISSING`): all critical, and all wrong. The logs of different topic ids are compared
with nothing of the other's, and an ack belongs to the topic whose log holds it.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Producer

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker
from kafka_log_decoder.checkpoints import decode_partition_metadata
from tests.table_rows import above_info, kinds_above_info

TOPIC = "orders"
OLD, NEW = 2000, 500  # records over both partitions


class Dumps(NamedTuple):
    before: Path
    after: Path
    acks: list[dict[str, Any]]


def _produce(broker: KafkaBroker, n: int, tag: str, acks: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})

    def acked(err: Any, msg: Any) -> None:
        assert err is None, err
        acks.append(
            {"topic": TOPIC, "partition": msg.partition(), "offset": msg.offset(), "key": msg.key().decode()}
        )

    for i in range(n):
        producer.produce(
            TOPIC, key=f"{tag}-{i}".encode(), value=b"v" * 50, partition=i % 2, on_delivery=acked
        )
    assert producer.flush(60) == 0


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Dumps:
    work = tmp_path_factory.mktemp("recreated-topic")
    acks: list[dict[str, Any]] = []
    with KafkaBroker(work / "broker") as broker:
        broker.create_topic(TOPIC, partitions=2)
        _produce(broker, OLD, "old", acks)
        shutil.copytree(broker.log_dir, work / "before")
        broker.admin().delete_topics([TOPIC], operation_timeout=30)[TOPIC].result(60)
        deadline = time.monotonic() + 60
        while True:  # the name is free once the deletion is done
            try:
                broker.create_topic(TOPIC, partitions=2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        _produce(broker, NEW, "new", acks)
    shutil.copytree(broker.log_dir, work / "after")
    return Dumps(work / "before", work / "after", acks)


def topic_id(log_dir: Path, partition: int) -> str:
    metadata, errors = decode_partition_metadata(
        (log_dir / f"{TOPIC}-{partition}" / "partition.metadata").read_bytes(), "partition.metadata"
    )
    assert metadata is not None and not errors
    return metadata.topic_id


def audited(
    spark: Any, out: Path, dumps: Dumps, ledger: list[dict[str, Any]], after: Path | None = None
) -> list[dict[str, Any]]:
    acks = out.with_name(out.name + "-acks.jsonl")
    acks.write_text("".join(json.dumps(a) + "\n" for a in ledger))
    run_ingest(
        spark,
        IngestOptions(
            inputs=[
                LabeledPath("before", str(dumps.before)),
                LabeledPath("after", str(after or dumps.after)),
            ],
            output=str(out),
            records=True,
            acks=[LabeledPath(None, str(acks))],
        ),
    )
    found = audit(read_bronze(spark, str(out)), load_profile()).findings.where(f"topic = '{TOPIC}'")
    return [r.asDict() for r in found.collect()]


def test_the_topic_was_created_again(dumps: Dumps) -> None:
    for partition in (0, 1):
        assert topic_id(dumps.before, partition) != topic_id(dumps.after, partition)
    assert len(dumps.acks) == OLD + NEW
    assert min(a["offset"] for a in dumps.acks if a["key"].startswith("new")) == 0


def test_the_same_bytes_under_one_topic_id_are_rewritten(spark: Any, dumps: Dumps, tmp_path: Path) -> None:
    """The topic id is the evidence: the second dump under the first one's ids reads as one topic whose
    offsets were given again to other records."""
    one = tmp_path / "after-same-id"
    shutil.copytree(dumps.after, one)
    for partition in (0, 1):
        shutil.copy(
            dumps.before / f"{TOPIC}-{partition}" / "partition.metadata", one / f"{TOPIC}-{partition}"
        )
    loss = kinds_above_info(audited(spark, tmp_path / "out", dumps, dumps.acks, after=one))
    assert loss["REPLICA_DIVERGENCE"] == 2 and loss["UNKNOWN_PRODUCER_LOSS"] == 2
    assert loss["ACKED_RECORD_MISSING"] >= 2


def test_two_topics_of_one_name_are_not_one_rewritten_topic(spark: Any, dumps: Dumps, tmp_path: Path) -> None:
    """Nothing above info but two acks the ledger has besides the producers' (one whose key neither
    topic holds at its offset, one past both logs' ends): those are missing from both."""
    ledger = [
        *dumps.acks,
        {"topic": TOPIC, "partition": 0, "offset": 7, "key": "nobody"},
        {"topic": TOPIC, "partition": 1, "offset": 5000, "key": "past-the-end"},
    ]
    found = above_info(audited(spark, tmp_path / "out", dumps, ledger))
    got = sorted((f["kind"], f["dump_id"], f["partition"], f["first_offset"]) for f in found)
    assert got == [
        ("ACKED_RECORD_MISSING", "after", 0, 7),
        ("ACKED_RECORD_MISSING", "after", 1, 5000),
        ("ACKED_RECORD_MISSING", "before", 0, 7),
        ("ACKED_RECORD_MISSING", "before", 1, 5000),
    ]
