"""The legacy message formats (magic 0 and 1) as a real broker writes them, and a topic's format raised
or lowered with data on both sides of the change.

Kafka 4 no longer writes v0 or v1 (KIP-724), but logs of older clusters hold them, and a cluster
upgraded from 0.10 kept its old segments: an incident there means partitions with legacy entries
followed by v2 batches, in one segment. The broker here is Kafka 3.9.1 in ZooKeeper mode (the last line
that honours `message.format.version`): it converts every v2 batch a client sends into the topic's
format, refuses idempotent produce requests below v2, and lets a topic's format change under its data.
Legacy entries carry no producer id, so an application's own sequence numbers (the app-sequence
extractor) are the only check of their order; the records here carry one in their JSON values.

The other decoder of these bytes is Kafka's own DumpLogSegments (4.3.1, which still reads v0 and v1);
before these tests the legacy decoders were checked only against kafka-python's legacy builder.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from audit_rules.pipeline import audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.dump_log_segments import run_dump_log_segments
from kafka_harness.jars import ZK_KAFKA_VERSION
from kafka_harness.zk_broker import ZooKeeperKafkaBroker
from kafka_log_decoder.dump_log_text import fields_in_text, parse_dump_log_text
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import read_log_segment
from tests.integration.test_dump_log_text_crosscheck import cross_check, dumped_files
from tests.table_rows import kinds_above_info

pytestmark = pytest.mark.integration

APP = "legacy-app"
# Topic: its writes in order, each (format set before it or None, first app sequence, records,
# idempotent, codec). Sequences run on across a topic's writes.
WRITES: dict[str, list[tuple[str | None, int, int, bool, str]]] = {
    # 0.8/0.9 format (magic 0, no timestamps), upgraded to v2; segments of 8 KiB.
    "v0-upgraded": [
        ("0.9.0", 0, 400, False, "gzip"),
        (None, 400, 100, False, "none"),
        ("2.8", 500, 300, True, "gzip"),
    ],
    # 0.10 format (magic 1, KIP-32 timestamps), with lz4 wrappers, upgraded to v2 and zstd.
    "v1-upgraded": [
        ("0.10.2", 0, 300, False, "none"),
        (None, 300, 300, False, "lz4"),
        ("2.8", 600, 300, True, "zstd"),
    ],
    # Magic 1 with broker timestamps: inner records take their wrapper's (LogAppendTime).
    "v1-append-time": [("0.10.2", 0, 300, False, "snappy"), (None, 300, 50, False, "none")],
    # v2 from an idempotent producer, then the format lowered (a downgrade): the broker converts
    # what follows to magic 1 and refuses the idempotent producer's next writes.
    "v2-lowered": [
        ("2.8", 0, 300, True, "gzip"),
        ("0.10.2", 300, 300, False, "gzip"),
        (None, 600, 10, True, "gzip"),
        (None, 600, 300, False, "none"),
    ],
}
TOPIC_CONFIG: dict[str, dict[str, str]] = {
    "v0-upgraded": {"segment.bytes": "8192"},
    "v1-upgraded": {"segment.bytes": "8192"},
    "v1-append-time": {"message.timestamp.type": "LogAppendTime"},
    "v2-lowered": {},
}
EXPECTED_MAGICS = {"v0-upgraded": [0, 2], "v1-upgraded": [1, 2], "v1-append-time": [1], "v2-lowered": [2, 1]}
# Sarama #2619's shape in a magic 1 log: blocks of ten app sequences written 0, 2, 1, 3.
REORDERED = "v1-app-reordered"
REORDERED_BLOCKS = (0, 2, 1, 3)


class LegacyLog(NamedTuple):
    log_dir: Path
    acked: dict[str, dict[int, bytes]]  # topic -> offset -> value
    refused: dict[str, list[str]]  # topic -> the errors of its refused records


def _value(sequence: int) -> bytes:
    return json.dumps({"app": APP, "seq": sequence}).encode()


def _produce(
    broker: ZooKeeperKafkaBroker, topic: str, sequences: list[int], idempotent: bool, codec: str
) -> tuple[dict[int, bytes], list[str]]:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": idempotent,
            "compression.type": codec,
            "linger.ms": 5,
            "batch.num.messages": 50,
            "acks": "all",
        }
    )
    acked: dict[int, bytes] = {}
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            errors.append(err.name())

    for sequence in sequences:
        producer.produce(topic, key=f"k{sequence}".encode(), value=_value(sequence), on_delivery=report)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked, errors


def _set_format(broker: ZooKeeperKafkaBroker, topic: str, version: str) -> None:
    entry = ConfigEntry("message.format.version", version, incremental_operation=AlterConfigOpType.SET)
    for future in (
        broker.admin()
        .incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=[entry])])
        .values()
    ):
        future.result(timeout=30)


@pytest.fixture(scope="module")
def legacy_log(tmp_path_factory: pytest.TempPathFactory) -> LegacyLog:
    broker = ZooKeeperKafkaBroker(tmp_path_factory.mktemp("legacy-broker"))
    acked: dict[str, dict[int, bytes]] = {}
    refused: dict[str, list[str]] = {}
    with broker:
        for topic, writes in WRITES.items():
            first_format = writes[0][0]
            assert first_format is not None
            broker.create_topic(topic, config={"message.format.version": first_format, **TOPIC_CONFIG[topic]})
            acked[topic], refused[topic] = {}, []
            for n, (version, start, count, idempotent, codec) in enumerate(writes):
                if version is not None and n > 0:
                    _set_format(broker, topic, version)
                got, errors = _produce(broker, topic, list(range(start, start + count)), idempotent, codec)
                acked[topic].update(got)
                refused[topic] += errors
        broker.create_topic(REORDERED, config={"message.format.version": "0.10.2"})
        acked[REORDERED], refused[REORDERED] = {}, []
        for block in REORDERED_BLOCKS:
            # One write per block, each flushed before the next: the log holds the blocks in this order.
            got, errors = _produce(broker, REORDERED, list(range(10 * block, 10 * block + 10)), False, "gzip")
            acked[REORDERED].update(got)
            refused[REORDERED] += errors
    return LegacyLog(broker.log_dir, acked, refused)


def entries(log_dir: Path, topic: str) -> tuple[list[BatchHeader], list[Record]]:
    """The partition's batch headers and records, as our decoders read them."""
    rows = [
        row
        for segment in sorted((log_dir / f"{topic}-0").glob("*.log"))
        for row in read_log_segment(segment, records=True)
    ]
    return [r for r in rows if isinstance(r, BatchHeader)], [r for r in rows if isinstance(r, Record)]


def runs_of(values: list[int]) -> list[int]:
    return [v for n, v in enumerate(values) if n == 0 or values[n - 1] != v]


@pytest.fixture(scope="module")
def audited(spark: Any, legacy_log: LegacyLog, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("legacy-audit")
    run_ingest(
        spark,
        IngestOptions(inputs=[LabeledPath("legacy", str(legacy_log.log_dir))], output=str(out), records=True),
    )
    profile = load_profile(app_producer="json:app", app_sequence="json:seq")
    result = audit(read_bronze(spark, str(out)), profile)
    stored = result.findings.localCheckpoint()  # computed once, for the findings and the summary
    findings = [r.asDict() for r in stored.collect()]
    summary = {r["topic"]: r.asDict() for r in result.summary_of(stored).collect()}
    return {"findings": findings, "summary": summary}


def test_the_broker_wrote_legacy_entries_and_v2_batches_in_one_log(legacy_log: LegacyLog) -> None:
    """The precondition, read with our decoders and checked against what the producers were told:
    every acknowledged value at its offset, the formats in the order of the topic's changes, and the
    idempotent writes refused while the format was legacy."""
    for topic in (*WRITES, REORDERED):
        headers, records = entries(legacy_log.log_dir, topic)
        assert {r.offset: r.value for r in records} == legacy_log.acked[topic], topic
        assert [r.offset for r in records] == list(range(len(records))), topic
        assert all(h.crc_valid for h in headers), topic
        assert runs_of([h.magic for h in headers]) == EXPECTED_MAGICS.get(topic, [1]), topic
    assert legacy_log.refused["v2-lowered"] == ["UNSUPPORTED_FOR_MESSAGE_FORMAT"] * 10
    assert all(not errors for topic, errors in legacy_log.refused.items() if topic != "v2-lowered")
    headers, records = entries(legacy_log.log_dir, "v0-upgraded")
    # gzip wrappers of several messages each, and single messages.
    assert any(h.magic == 0 and h.count > 1 for h in headers) and any(
        h.magic == 0 and h.count == 1 for h in headers
    )
    # LogAppendTime: the broker's clock on the wrapper, and every inner record reads it.
    headers, records = entries(legacy_log.log_dir, "v1-append-time")
    wrapper_time = {h.position: h.max_timestamp for h in headers}
    assert all(h.timestamp_type == "LogAppendTime" for h in headers)
    assert all(r.timestamp == wrapper_time[r.batch_position] for r in records)


def test_kafkas_dump_log_segments_reads_the_legacy_entries_as_our_decoders_do(legacy_log: LegacyLog) -> None:
    """Field by field, records included: magic 0 and 1 wrappers (gzip, snappy, lz4; v1's relative inner
    offsets), single messages, LogAppendTime wrappers, the v2 batches beside them, the indexes and the
    producer snapshots of the upgraded topics."""
    seen = cross_check(dumped_files(legacy_log.log_dir))
    assert {f"codec:{c}" for c in ("none", "gzip", "snappy", "lz4", "zstd")} <= set(seen), seen
    assert seen["Record"] == sum(len(values) for values in legacy_log.acked.values())
    assert seen["IndexEntry"] and seen["TimeIndexEntry"] and seen["SnapshotEntry"], seen


def test_kafka_3_9s_dump_log_segments_text_reads_as_our_decoders_do(legacy_log: LegacyLog) -> None:
    """The text operators of 3.x clusters have: the Scala tool of Kafka 3.9.1 (`kafka-dump-log.sh` before
    4.3), whose lines differ in details (a legacy record line ends `crc: N}`), goes through the text
    parser to the same rows as the binary decoders, legacy entries and v2 batches alike."""
    seen = cross_check(dumped_files(legacy_log.log_dir), ZK_KAFKA_VERSION)
    assert seen["Record"] == sum(len(values) for values in legacy_log.acked.values())
    assert {"codec:gzip", "codec:lz4", "codec:snappy", "codec:zstd"} <= set(seen), seen


def test_a_shallow_dump_gives_each_legacy_wrapper_its_first_offset_and_count(legacy_log: LegacyLog) -> None:
    """Without --deep-iteration the tool prints a legacy wrapper's last offset only. On these uncompacted
    logs the wrapper's first offset and count follow from the previous entry (or the segment's base
    offset): the same batch rows as the binary decoders, where the text parser used to give the last
    offset and a count of 1 (408 of the 800 records of `v0-upgraded`)."""
    logs = [p for p in dumped_files(legacy_log.log_dir) if p.suffix == ".log"]
    text = run_dump_log_segments(logs, deep_iteration=False)
    shallow = [r for r in parse_dump_log_text(text.splitlines()) if isinstance(r, BatchHeader)]
    binary = [r for log in logs for r in read_log_segment(log) if isinstance(r, BatchHeader)]
    assert [fields_in_text(r) for r in shallow] == [fields_in_text(r) for r in binary]
    assert sum(r.count for r in shallow if r.magic < 2 and r.compression != "none") >= 1000


def test_the_partition_summary_counts_every_message_of_a_legacy_wrapper(
    legacy_log: LegacyLog, audited: dict[str, Any]
) -> None:
    """A compressed legacy entry holds many messages; the summary counted it as one record."""
    for topic, values in legacy_log.acked.items():
        row = audited["summary"][topic]
        assert (row["log_start_offset"], row["log_end_offset"]) == (0, len(values)), topic
        assert row["records"] == len(values), topic
        assert row["batches"] == len(entries(legacy_log.log_dir, topic)[0]), topic


def test_format_changes_are_no_finding_and_app_sequences_run_across_them(
    legacy_log: LegacyLog, audited: dict[str, Any]
) -> None:
    """Upgrades and a downgrade under live data, v2 producer state beside legacy entries: nothing to
    report. The app sequences continue through every format (the refused writes' sequences were
    written again), so no gap, duplicate or regression either."""
    findings = [f for f in audited["findings"] if f["topic"] != REORDERED]
    assert findings == []
    for topic in WRITES:
        assert audited["summary"][topic]["verdict"] == "clean", topic


def test_a_reordering_in_legacy_entries_is_one_app_sequence_regression(
    legacy_log: LegacyLog, audited: dict[str, Any]
) -> None:
    """Without producer ids, the app sequences are the only evidence of order: blocks 0, 2, 1, 3 are
    one regression (where block 1 follows block 2), not a gap plus duplicates."""
    found = [f for f in audited["findings"] if f["topic"] == REORDERED]
    offset_of = {json.loads(v)["seq"]: o for o, v in legacy_log.acked[REORDERED].items()}
    assert [(f["kind"], f["first_offset"], f["related_offset"]) for f in found] == [
        ("APP_SEQUENCE_REGRESSION", offset_of[10], offset_of[29])
    ]
    assert kinds_above_info(audited["findings"]) == Counter({"APP_SEQUENCE_REGRESSION": 1})
