"""A compacted topic written by a real broker whose log cleaner ran: no loss where the cleaner removed
whole batches (kafka-formats-and-rules §5.9).

An idempotent producer writes keys that are overwritten again and again, plus keys written once. The
cleaner removes the batches whose records were all replaced, so the producer's retained history
starts mid-sequence and skips sequences between batches, and acknowledged offsets are gone. The dump's
cleaner-offset-checkpoint says how far the cleaner got; without it, the batches the cleaner kept with
fewer records than their offsets (or the profile's `compacted_topics`) say the log is compacted.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Producer

from audit_rules.pipeline import Bronze, audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker
from kafka_harness.polling import poll_until
from kafka_log_decoder.checkpoints import read_offset_checkpoint
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from tests.table_rows import kinds_above_info

TOPIC = "compacted-idempotent"
RECORDS = 20_000
CLEANED_WITHIN_S = 60.0


class CompactedDump(NamedTuple):
    log_dir: Path
    acks: Path
    acked: int


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> CompactedDump:
    work = tmp_path_factory.mktemp("compaction-broker")
    broker = KafkaBroker(work, **{"log.cleaner.backoff.ms": 100, "log.cleaner.min.compaction.lag.ms": 0})
    acks: list[dict[str, Any]] = []
    with broker:
        broker.create_topic(
            TOPIC,
            partitions=1,
            config={
                "cleanup.policy": "compact",
                "internal.segment.bytes": str(32 * 1024),
                "min.cleanable.dirty.ratio": "0.01",
                "segment.ms": "100",
            },
        )
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.size": 8192,
            }
        )

        def acked(err: Any, msg: Any) -> None:
            assert err is None, err
            acks.append({"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset()})

        for i in range(RECORDS):
            # Twenty hot keys, replaced all the time, and every 500th record (not the first: the history then
            # starts mid-sequence) a key of its own, kept.
            key = f"once-{i}" if i % 500 == 250 else f"hot-{i % 20}"
            producer.produce(TOPIC, key=key.encode(), value=f"{i}".encode() * 8, on_delivery=acked)
            if i % 1000 == 0:
                producer.poll(0)
        producer.flush(60)
        checkpoint = broker.log_dir / "cleaner-offset-checkpoint"

        def cleaned() -> bool:
            # One more batch now and then rolls the active segment (segment.ms), which the cleaner skips.
            producer.produce(TOPIC, key=b"hot-0", value=b"roll", on_delivery=acked)
            producer.flush(10)
            entries = read_offset_checkpoint(checkpoint)[0] if checkpoint.is_file() else []
            # The cleaner may have passed only the first segments written: the tests need it past nearly all
            # of them, so that most acknowledged offsets are gone.
            return any(e.topic == TOPIC and e.offset > RECORDS * 9 // 10 for e in entries)

        poll_until(
            cleaned,
            CLEANED_WITHIN_S,
            lambda: f"the log cleaner did not compact {TOPIC} within {CLEANED_WITHIN_S:.0f} s",
            interval_s=0.5,
        )
    ledger = work / "acks.jsonl"
    ledger.write_text("".join(json.dumps(a) + "\n" for a in acks))
    return CompactedDump(broker.log_dir, ledger, len(acks))


def ingested(spark: Any, out: Path, log_dir: Path, acks: Path) -> Bronze:
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath("compaction", str(log_dir))],
            output=str(out),
            acks=[LabeledPath(None, str(acks))],
        ),
    )
    return read_bronze(spark, str(out))


def findings_of(bronze: Bronze, **profile: Any) -> list[dict[str, Any]]:
    found = audit(bronze, load_profile(**profile)).findings.where(f"topic = '{TOPIC}'")
    return [r.asDict() for r in found.collect()]


def audited(spark: Any, out: Path, log_dir: Path, acks: Path) -> list[dict[str, Any]]:
    return findings_of(ingested(spark, out, log_dir, acks))


def test_the_cleaner_removed_whole_batches_of_the_producer(compacted: CompactedDump) -> None:
    """The precondition of the tests below: the retained batches start past offset 0 mid-sequence and
    skip sequences between them."""
    partition = compacted.log_dir / f"{TOPIC}-0"
    batches = [
        b
        for seg in sorted(partition.glob("*.log"))
        for b in read_log_segment(seg)
        if isinstance(b, BatchHeader)
    ]
    data = [b for b in batches if b.producer_id >= 0 and not b.is_control]
    assert data and data[0].base_sequence > 0
    skips = [b for a, b in pairwise(data) if b.base_sequence > a.last_sequence + 1]
    assert len(skips) >= 5
    assert sum(b.last_offset - b.base_offset + 1 for b in data) < compacted.acked // 2


def test_a_cleaned_log_has_no_finding_above_info(
    spark: Any, compacted: CompactedDump, tmp_path: Path
) -> None:
    findings = audited(spark, tmp_path / "out", compacted.log_dir, compacted.acks)
    assert kinds_above_info(findings) == Counter()
    (start,) = [f for f in findings if f["kind"] == "HISTORY_TRUNCATED_BY_RETENTION"]
    assert start["explained_by"] == "compaction" and "cleaner-offset-checkpoint lists it" in start["message"]


def test_without_the_cleaners_checkpoint_its_batches_show_the_cleaner(
    spark: Any, compacted: CompactedDump, tmp_path: Path
) -> None:
    """A dump without the checkpoint (a partition directory copied alone): the cleaner kept batches with
    fewer records than their offsets, which only it writes, so the log is still compacted below its
    active segment; the profile naming the topic says the same. (Before the batches were read as
    evidence, these bytes read as loss: a HISTORY_START_MISSING and SEQUENCE_GAPs.)"""
    bare = tmp_path / "dump"
    shutil.copytree(compacted.log_dir, bare)
    (bare / "cleaner-offset-checkpoint").unlink()
    partition = bare / f"{TOPIC}-0"
    trimmed = [
        b
        for segment in sorted(partition.glob("*.log"))
        for b in read_log_segment(segment)
        if isinstance(b, BatchHeader) and b.count < b.last_offset - b.base_offset + 1
    ]
    assert trimmed, "the cleaner kept no batch with fewer records than its offsets"
    bronze = ingested(spark, tmp_path / "bare", bare, compacted.acks)
    found = findings_of(bronze)
    assert kinds_above_info(found) == Counter()
    (start,) = [f for f in found if f["kind"] == "HISTORY_TRUNCATED_BY_RETENTION"]
    assert start["explained_by"] == "compaction" and "show the log cleaner's work" in start["message"]
    config = tmp_path / "compacted.yaml"
    config.write_text(f"compacted_topics: ['{TOPIC}']\n")
    named = findings_of(bronze, config=str(config))
    assert kinds_above_info(named) == Counter()


def test_a_checkpoint_behind_the_cleaned_segments_still_explains_them(
    spark: Any, compacted: CompactedDump, tmp_path: Path
) -> None:
    """A cleaning round stopped midway (the broker shutting down) leaves the segment groups it had
    cleaned swapped in, while the checkpoint keeps the previous round's first dirty offset: compaction
    may have removed batches anywhere below the active segment, not only below the checkpoint."""
    behind = tmp_path / "dump"
    shutil.copytree(compacted.log_dir, behind)
    (behind / "cleaner-offset-checkpoint").write_text(f"0\n1\n{TOPIC} 0 1\n")
    assert kinds_above_info(audited(spark, tmp_path / "out", behind, compacted.acks)) == Counter()
