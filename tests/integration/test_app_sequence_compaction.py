"""App sequences on compacted topics written by a real broker whose log cleaner ran.

The cleaner keeps only each key's last record below the active segment, so an application's sequence
(stamped into each record, producer without idempotence) skips every value it removed: those are the
cleaner's, not APP_SEQUENCE_GAPs (as whole removed batches are no SEQUENCE_GAP). A value never sent
among the records of the active segment, which the cleaner never reaches, is still a hole; a duplicate
is still a duplicate.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Producer

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker
from kafka_harness.polling import poll_until
from kafka_log_decoder.checkpoints import read_offset_checkpoint
from kafka_log_decoder.rows import Record
from kafka_log_decoder.segment import read_log_segment
from tests.table_rows import kinds_above_info

PER_PARTITION = "app-compacted"  # one partition, a counter of its own
SPREAD = "app-compacted-spread"  # three partitions, one counter over the topic
RECORDS = 6_000
CLEANED_WITHIN_S = 60.0
HEADERS = ("app-producer", "app-seq")


class Compacted(NamedTuple):
    out: Path
    log_dir: Path
    tail: tuple[int, int]  # the active segment's two values around the one never sent


@pytest.fixture(scope="module")
def compacted(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Compacted:
    work = tmp_path_factory.mktemp("app-compaction-broker")
    broker = KafkaBroker(work, **{"log.cleaner.backoff.ms": 100, "log.cleaner.min.compaction.lag.ms": 0})
    config = {
        "cleanup.policy": "compact",
        "internal.segment.bytes": str(16 * 1024),
        "min.cleanable.dirty.ratio": "0.01",
        "segment.ms": "100",
    }
    with broker:
        broker.create_topic(PER_PARTITION, partitions=1, config=config)
        broker.create_topic(SPREAD, partitions=3, config=config)
        # Batches well under the segment size (a larger one is refused: RECORD_LIST_TOO_LARGE).
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": False,
                "linger.ms": 2,
                "batch.size": 4096,
            }
        )

        def delivered(err: Any, msg: Any) -> None:
            assert err is None, err

        def send(topic: str, seq: int, key: str, partition: int = 0) -> None:
            stamp = [(HEADERS[0], b"p1"), (HEADERS[1], str(seq).encode())]
            producer.produce(
                topic,
                key=key.encode(),
                value=b"v" * 64,
                partition=partition,
                headers=stamp,
                on_delivery=delivered,
            )

        for seq in range(1, RECORDS + 1):
            # Ten hot keys replaced all the time, and every 300th value a key of its own, kept.
            key = f"once-{seq}" if seq % 300 == 150 else f"hot-{seq % 10}"
            send(PER_PARTITION, seq, key)
            send(SPREAD, seq, key, partition=seq % 3)
            if seq % 1000 == 0:
                producer.poll(0)
        producer.flush(60)
        checkpoint = broker.log_dir / "cleaner-offset-checkpoint"

        def entries() -> list[Any]:
            return read_offset_checkpoint(checkpoint)[0] if checkpoint.is_file() else []

        def cleaned() -> bool:
            # A record without app headers now and then rolls the active segment (segment.ms), which the
            # cleaner skips.
            for topic, partitions in ((PER_PARTITION, 1), (SPREAD, 3)):
                for partition in range(partitions):
                    producer.produce(topic, key=b"hot-0", value=b"roll", partition=partition)
            producer.flush(10)
            # Past nearly all of the values (a third of them in each partition of SPREAD).
            need = {
                (PER_PARTITION, 0): RECORDS * 9 // 10,
                **{(SPREAD, p): RECORDS * 3 // 10 for p in range(3)},
            }
            return all(
                any((e.topic, e.partition) == log and e.offset > n for e in entries())
                for log, n in need.items()
            )

        poll_until(
            cleaned,
            CLEANED_WITHIN_S,
            lambda: (
                f"the log cleaner did not compact {PER_PARTITION} and {SPREAD} within "
                f"{CLEANED_WITHIN_S:.0f} s: {entries()}"
            ),
            interval_s=0.5,
        )
        # Into the active segment, in one request: a value never sent between two that were.
        tail = (RECORDS + 1, RECORDS + 3)
        for seq in tail:
            send(PER_PARTITION, seq, f"tail-{seq}")
        producer.flush(10)
    out = work / "out"
    run_ingest(
        spark, IngestOptions(inputs=[LabeledPath("app", str(broker.log_dir))], output=str(out), records=True)
    )
    return Compacted(out, broker.log_dir, tail)


def values(log_dir: Path, topic: str) -> list[int]:
    """The app sequences the partitions of `topic` hold, in each partition's offset order."""
    found = []
    for partition in sorted(log_dir.glob(f"{topic}-*")):
        for segment in sorted(partition.glob("*.log")):
            for item in read_log_segment(segment, records=True):
                if isinstance(item, Record) and HEADERS[1] in item.header_keys:
                    found.append(int((item.header_values or [])[item.header_keys.index(HEADERS[1])] or b""))
    return found


def findings(spark: Any, out: Path, topic: str, scope: str) -> list[dict[str, Any]]:
    profile = load_profile(
        app_producer=f"header:{HEADERS[0]}", app_sequence=f"header:{HEADERS[1]}", app_sequence_scope=scope
    )
    found = audit(read_bronze(spark, str(out)), profile).findings.where(f"topic = '{topic}'")
    return [r.asDict() for r in found.collect()]


def test_values_the_cleaner_removed_are_no_hole_but_one_never_sent_past_it_is(
    spark: Any, compacted: Compacted
) -> None:
    held = values(compacted.log_dir, PER_PARTITION)
    # The precondition: the cleaner removed most values, and left holes between those it kept.
    assert len(held) < RECORDS // 4 and held[0] == 150
    found = findings(spark, compacted.out, PER_PARTITION, "partition")
    assert kinds_above_info(found) == Counter({"APP_SEQUENCE_GAP": 1}), found
    (gap,) = [f for f in found if f["kind"] == "APP_SEQUENCE_GAP"]
    below, above = compacted.tail
    assert f"never wrote sequences {below + 1}-{above - 1} (1 value(s))" in gap["message"]
    assert gap["missing_records"] == 1


def test_a_topic_wide_counter_on_a_compacted_topic_has_no_hole(spark: Any, compacted: Compacted) -> None:
    held = values(compacted.log_dir, SPREAD)
    assert len(held) < RECORDS // 4 and len(set(held)) == len(held)
    assert kinds_above_info(findings(spark, compacted.out, SPREAD, "topic")) == Counter()
