"""Tiered storage (KIP-405) on a real Kafka 4.3.1 broker: the log directory holds only the newest
segments, and the offsets below them are in remote storage, not deleted.

The broker runs Kafka's own `LocalTieredStorage` plugin (the remote tier is a directory here, a bucket
in production): each closed segment is copied there, then deleted locally once past
`local.retention.bytes`. The partition's log start offset stays 0 (the log-start-offset checkpoint
keeps it for every log with remote storage), while its first local segment starts thousands of
offsets later. A dump of the log directory is what an operator has; read as a log on its own, every
producer's history starts mid-sequence and every early ack lies below the log start. That is
explained, never loss, and the audit says where the data is: in remote storage.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from audit_rules.kinds import KINDS, Severity
from audit_rules.pipeline import Bronze, audit
from jobs.audit import read_bronze
from jobs.ingest import IngestOptions, LabeledPath, run_ingest
from jobs.profiles import load_profile
from kafka_harness.broker import KafkaBroker, tiered_storage_properties
from kafka_harness.dump_log_segments import run_dump_log_segments
from kafka_harness.jars import HarnessError
from kafka_log_decoder.checkpoints import decode_offset_checkpoint
from kafka_log_decoder.dump import run_dump
from kafka_log_decoder.remote_log_metadata import decode_remote_log_metadata
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import read_log_segment

pytestmark = pytest.mark.integration

TOPIC = "tiered"
PARTITIONS = 2
WAVES, PER_WAVE = 12, 500
# LocalTieredStorage names a remote segment `<base offset, 20 digits>-<segment id>.log`.
REMOTE_SEGMENT = re.compile(r"^(\d{20})-[A-Za-z0-9_-]{22}\.log$")
# A record of `kafka-dump-log.sh --remote-log-metadata-decoder`: its offset and the event's toString().
DUMPED_EVENT = re.compile(
    r"^\| offset: (?P<offset>\d+) .* payload: (?P<event>RemoteLogSegmentMetadata(?:Update)?)\{"
    r"remoteLogSegmentId=RemoteLogSegmentId\{"
    r"topicIdPartition=(?P<topic_id>[^:]+):(?P<topic>.+)-(?P<partition>\d+), "
    r"id=(?P<segment_id>[^}]+)\}, (?P<fields>.*)\}$",
    re.MULTILINE,
)


class TieredLog(NamedTuple):
    log_dir: Path
    remote_dir: Path
    acks: Path


def local_start(log_dir: Path, partition: int) -> int:
    return min(int(p.stem) for p in (log_dir / f"{TOPIC}-{partition}").glob("*.log"))


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> TieredLog:
    work = tmp_path_factory.mktemp("tiered-broker")
    remote = work / "remote"
    remote.mkdir()
    acks: list[dict[str, Any]] = []
    with KafkaBroker(work, **tiered_storage_properties(remote)) as broker:
        broker.create_topic(
            TOPIC,
            PARTITIONS,
            # A segment per second of writes (segment.bytes may not go below 1 MiB), each copied to the
            # remote tier when closed and then deleted locally.
            config={
                "remote.storage.enable": True,
                "segment.ms": 1000,
                "local.retention.bytes": 1,
                "retention.ms": -1,
            },
        )
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )

        def acked(err: Any, msg: Any) -> None:
            assert err is None, err
            acks.append(
                {
                    "topic": TOPIC,
                    "partition": msg.partition(),
                    "offset": msg.offset(),
                    "key": msg.key().decode(),
                }
            )

        for wave in range(WAVES):
            for i in range(wave * PER_WAVE, (wave + 1) * PER_WAVE):
                producer.produce(
                    TOPIC, key=f"k{i}".encode(), value=b"v" * 60, partition=i % PARTITIONS, on_delivery=acked
                )
                producer.poll(0)
            assert producer.flush(60) == 0
            time.sleep(1.1)
        # Wait until the remote log manager has copied the closed segments and retention has deleted
        # them locally: only the active segment is left.
        deadline = time.monotonic() + 90
        while not all(
            local_start(broker.log_dir, p) > 0
            and len(list((broker.log_dir / f"{TOPIC}-{p}").glob("*.log"))) == 1
            for p in range(PARTITIONS)
        ):
            if time.monotonic() > deadline:
                raise HarnessError(f"the tiered topic's segments were not moved to {remote} in 90 s")
            time.sleep(0.5)
    ledger = work / "acks.jsonl"
    ledger.write_text("".join(json.dumps(a) + "\n" for a in acks))
    return TieredLog(broker.log_dir, remote, ledger)


def remote_segments(remote: Path, partition: int) -> list[Path]:
    (directory,) = remote.glob(f"kafka-tiered-storage/{TOPIC}-{partition}-*")
    return sorted(p for p in directory.iterdir() if REMOTE_SEGMENT.match(p.name))


class Audited(NamedTuple):
    findings: list[dict[str, Any]]
    summary: dict[int, dict[str, Any]]  # partition -> its partition_summary row


def audited(bronze: Bronze) -> Audited:
    result = audit(bronze, load_profile())
    stored = result.findings.where(f"topic = '{TOPIC}'").localCheckpoint()
    summary = result.summary_of(stored).where(f"topic = '{TOPIC}'").collect()
    return Audited([r.asDict() for r in stored.collect()], {r["partition"]: r.asDict() for r in summary})


@pytest.fixture(scope="module")
def bronze(spark: Any, tiered: TieredLog, tmp_path_factory: pytest.TempPathFactory) -> Bronze:
    out = tmp_path_factory.mktemp("tiered-audit")
    run_ingest(
        spark,
        IngestOptions(
            inputs=[LabeledPath("tiered", str(tiered.log_dir))],
            output=str(out),
            acks=[LabeledPath(None, str(tiered.acks))],
        ),
    )
    return read_bronze(spark, str(out))


def test_the_log_directory_holds_only_the_newest_segment_and_the_rest_is_remote(tiered: TieredLog) -> None:
    """The precondition: the log start offset checkpoint says 0, the local log starts far above it, and
    the remote tier holds real segments (our decoder reads them) with every offset in between."""
    path = tiered.log_dir / "log-start-offset-checkpoint"
    entries, errors = decode_offset_checkpoint(path.read_bytes(), str(path))
    assert errors == []
    checkpoint = {(e.topic, e.partition): e.offset for e in entries}
    for partition in range(PARTITIONS):
        start = local_start(tiered.log_dir, partition)
        assert checkpoint[(TOPIC, partition)] == 0 and start > 1000
        offsets = [
            offset
            for segment in remote_segments(tiered.remote_dir, partition)
            for b in read_log_segment(segment)
            if isinstance(b, BatchHeader)
            for offset in range(b.base_offset, b.last_offset + 1)
        ]
        assert offsets[:start] == list(range(start))


def test_offsets_in_remote_storage_are_explained_and_said_to_be_there(
    tiered: TieredLog, bronze: Bronze
) -> None:
    found, summary = audited(bronze)
    assert Counter(f["kind"] for f in found if KINDS[f["kind"]].severity > Severity.INFO) == Counter()
    by_kind = Counter((f["kind"], f["partition"]) for f in found)
    for partition in range(PARTITIONS):
        assert by_kind[("HISTORY_TRUNCATED_BY_RETENTION", partition)] == 1
        assert by_kind[("ACKED_RECORD_RETENTION", partition)] == 1
    for f in found:
        assert "in remote storage (tiered storage" in f["message"], f["message"]
        assert "deleted by retention" not in f["message"], f["message"]
    # The partition summary: the local log's start, the broker's (remote) one, the topic id.
    topic_id = (
        (tiered.log_dir / f"{TOPIC}-0" / "partition.metadata").read_text().split("topic_id:")[1].strip()
    )
    for partition in range(PARTITIONS):
        row = summary[partition]
        assert row["log_start_offset"] == local_start(tiered.log_dir, partition)
        assert (row["remote_log_start"], row["topic_id"], row["verdict"]) == (0, topic_id, "info")


def test_without_evidence_of_a_remote_tier_the_same_gap_is_retention(bronze: Bronze) -> None:
    """The wording follows the evidence: the same partitions without the log directory's remote-storage
    traces (the remote log manager's index cache, `__remote_log_metadata`) read as retention."""
    traces = (F.col("topic") == "__remote_log_metadata") | F.col("file").endswith("/remote-log-index-cache")
    plain = dataclasses.replace(
        bronze,
        files=bronze.files.where(~traces),
        batches=bronze.batches.where(~traces),
        partition_state=bronze.partition_state.where(~traces),
    )
    found, summary = audited(plain)
    assert [summary[p]["remote_log_start"] for p in range(PARTITIONS)] == [None] * PARTITIONS
    assert Counter(f["kind"] for f in found if KINDS[f["kind"]].severity > Severity.INFO) == Counter()
    assert found and all(
        "deleted by retention" in f["message"] and "remote" not in f["message"] for f in found
    )


def test_the_remote_log_metadata_decodes_as_kafka_dump_log_reads_it(tiered: TieredLog) -> None:
    """`replay-audit dump --records` decodes `__remote_log_metadata` values (kafka_log_decoder.
    remote_log_metadata): each event equals what Kafka's own tool prints for it, and the events name
    every segment the remote tier holds, at its base offset, copied to the end."""
    segments = sorted(tiered.log_dir.glob("__remote_log_metadata-*/*.log"))
    assert segments
    ours = {
        item.offset: decode_remote_log_metadata(item.value or b"")
        for segment in segments
        for item in read_log_segment(segment, records=True)
        if isinstance(item, Record)
    }
    text = run_dump_log_segments(segments, extra_args=["--remote-log-metadata-decoder"])
    theirs = {int(m["offset"]): m for m in DUMPED_EVENT.finditer(text)}
    assert ours and sorted(ours) == sorted(theirs)
    for offset, event in ours.items():
        line = theirs[offset]
        fields = dict(re.findall(r"(\w+)=(\{[^}]*\}|[^,]+)", line["fields"]))
        assert (
            line["event"]
            == {"segment": "RemoteLogSegmentMetadata", "segment_update": "RemoteLogSegmentMetadataUpdate"}[
                event["event"]
            ]
        )
        assert (event["topic_id"], event["topic"], event["partition"], event["segment_id"]) == (
            line["topic_id"],
            line["topic"],
            int(line["partition"]),
            line["segment_id"],
        )
        assert (event["state"], event["broker_id"], event["event_timestamp_ms"]) == (
            fields["state"],
            int(fields["brokerId"]),
            int(fields["eventTimestampMs"]),
        )
        if event["event"] == "segment":
            epochs = [[int(e), int(o)] for e, o in re.findall(r"(\d+)=(\d+)", fields["segmentLeaderEpochs"])]
            assert (
                event["start_offset"],
                event["end_offset"],
                event["max_timestamp_ms"],
                event["segment_size_bytes"],
                event["segment_leader_epochs"],
            ) == (
                int(fields["startOffset"]),
                int(fields["endOffset"]),
                int(fields["maxTimestampMs"]),
                int(fields["segmentSizeInBytes"]),
                epochs,
            )
    # `replay-audit dump --records` prints each event on its record's line.
    out = io.StringIO()
    assert run_dump([str(s) for s in segments], records=True, summary=False, out=out) == 0
    dumped = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r["offset"]: r["remote_log_metadata"] for r in dumped if r["type"] == "record"} == ours
    started = {e["segment_id"]: e for e in ours.values() if e["event"] == "segment"}
    finished = {e["segment_id"] for e in ours.values() if e["state"] == "COPY_SEGMENT_FINISHED"}
    for partition in range(PARTITIONS):
        held = remote_segments(tiered.remote_dir, partition)
        assert held
        for path in held:
            base_offset, segment_id = path.stem.split("-", 1)
            announced = started[segment_id]
            assert (announced["topic"], announced["partition"], announced["start_offset"]) == (
                TOPIC,
                partition,
                int(base_offset),
            )
            assert segment_id in finished
